# C types for cstrace/capture/window.py when Cython compiles it (pure-Python
# mode): the index cursor is an extension type, so that a reader's compiled loop
# (the ETMv4/ETE reader's _Scanner) moves it from run to run as C calls on C
# fields. The .py stays the source.

cimport cython


@cython.final
cdef class IndexCursor:
    cdef public list _pos, _idx
    cdef public Py_ssize_t _end, _k, base, limit

    @cython.locals(k=Py_ssize_t, nxt=Py_ssize_t, base=Py_ssize_t, rp=list)
    cpdef Py_ssize_t at(self, Py_ssize_t p) except? -1

    @cython.locals(rp=list, n=Py_ssize_t, k=Py_ssize_t)
    cpdef Py_ssize_t _find(self, Py_ssize_t p) except? -1
