# C types for cstrace/protocols/itm/boundary.py when Cython compiles it (pure-Python
# mode): packet_end, which the reader calls for every packet it reads without
# synchronisation, runs on C locals. The .py stays the source.

cimport cython


cdef Py_ssize_t _SHORT_ZEROS

@cython.locals(short=Py_ssize_t, n=Py_ssize_t, h=cython.int, low=cython.int, size=cython.int, disc=cython.int, end=Py_ssize_t,
               i=Py_ssize_t, nib=cython.int, longest=cython.int, limit=Py_ssize_t)
cpdef Py_ssize_t packet_end(bytes data, Py_ssize_t p) except? -2
