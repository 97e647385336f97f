# C types for cstrace/isa/scan.py when Cython compiles it (pure-Python mode):
# the waypoint index and the walker are extension types, and the search for the
# next waypoint of indexed code (_WordIndex.next_waypoint, Walker.waypoint: one
# per new block a decoder walks) runs on C locals. The .py stays the source.

cimport cython


@cython.final
cdef class _Page:
    cdef public list recs, where, words


@cython.final
cdef class _WordIndex:
    cdef public object code, fn, isa, rec
    cdef public dict cache, pages
    cdef public Py_ssize_t n, off

    @cython.locals(
        n=Py_ssize_t,
        p=Py_ssize_t,
        lo=Py_ssize_t,
        hi=Py_ssize_t,
        mid=Py_ssize_t,
        at=Py_ssize_t,
        j=Py_ssize_t,
        m=Py_ssize_t,
        got=_Page,
        where=list,
        recs=list,
        cache=dict,
        pages=dict,
    )
    cpdef Py_ssize_t next_waypoint(self, Py_ssize_t i) except -1


@cython.final
cdef class Walker:
    cdef public object code, base, end, isa, opts, _fn, _hws
    cdef public dict blocks, _extra, _cache, _ix
    cdef public bint _indexed
    cdef public Py_ssize_t max_blocks

    @cython.locals(off=Py_ssize_t, size=Py_ssize_t, i0=Py_ssize_t, k=Py_ssize_t, ix=_WordIndex)
    cpdef waypoint(self, object start)

    cpdef _WordIndex _index(self, Py_ssize_t phase)
