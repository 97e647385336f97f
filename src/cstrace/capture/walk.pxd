# C types for cstrace/capture/walk.py when Cython compiles it (pure-Python mode):
# the frame walk runs on C locals over the capture's bytes and writes into NumPy
# arrays through typed memoryviews. The .py stays the source.

cimport cython

cdef int _NONE, _ID_BYTES


@cython.locals(
    f=Py_ssize_t, p=Py_ssize_t, i=Py_ssize_t, done=Py_ssize_t, flags=cython.int,
    b=cython.int, v=cython.int, o=cython.int, new=cython.int, flagged=cython.int,
    stopped=cython.int, index=cython.longlong, count=cython.longlong, start=cython.longlong,
    open_run=cython.bint, changing=cython.bint, after=cython.bint, ids=cython.int,
    w=Py_ssize_t, r=Py_ssize_t,
)
cpdef Py_ssize_t walk(
    const unsigned char[::1] data, Py_ssize_t first, Py_ssize_t n, long long[::1] sof, int cur,
    unsigned char[::1] keep, unsigned char[::1] stops, unsigned char[::1] named,
    long long[::1] wpos, long long[::1] wbase, unsigned char[::1] values,
    long long[::1] rpos, long long[::1] run_pos, long long[::1] run_idx,
) except -1
