# C types for cstrace/protocols/itm/reader.py when Cython compiles it (pure-Python
# mode): the loops that cut a window's bytes into packets (_synced_run, _Held.run)
# run on C locals and hand each packet's fields to the decoder's C methods
# (_emit). The .py stays the source.

cimport cython

from cstrace.capture.window cimport IndexCursor
from cstrace.protocols.itm.decoder cimport ItmDecoder
from cstrace.protocols.itm.boundary cimport packet_end

cdef int _SWIT, _DWT, _ASYNC, _OVERFLOW, _TS_LOCAL, _TS_GLOBAL_1, _TS_GLOBAL_2
cdef int _EXTENSION, _RESERVED, _HELD
cdef Py_ssize_t _BACK
cdef bytes _KINDS, _CONT_LIMIT, _PAYLOAD_SIZE, _EXT_BITS


cpdef void _other(ItmDecoder dec, object pkt) except *

@cython.locals(value=cython.ulonglong, b=cython.ulonglong, shift=cython.int)
cpdef unsigned long long _cont(bytes data, Py_ssize_t p, Py_ssize_t e) except? 0xFFFFFFFFFFFFFFFF

@cython.locals(
    hdr=cython.int, kind=cython.int, size=cython.int, value=cython.ulonglong, b=cython.ulonglong, shift=cython.int,
    i=Py_ssize_t, flags=cython.int,
)
cpdef void _emit(ItmDecoder dec, bytes data, Py_ssize_t p, Py_ssize_t e, long long index) except *

@cython.locals(
    index=cython.longlong, hdr=cython.int, kind=cython.int, stop=Py_ssize_t, i=Py_ssize_t, limit=Py_ssize_t,
    b=cython.int, bad=cython.bint, found=cython.bint,
)
cpdef Py_ssize_t _synced_run(
    ItmDecoder dec, bytes data, Py_ssize_t p, Py_ssize_t n, IndexCursor cur
) except -1


@cython.final
cdef class _Held:
    cdef long long[:] items
    cdef public Py_ssize_t first, end
    cdef public bytearray seen
    cdef public bint invalid

    @cython.locals(items="long long[:]", h=Py_ssize_t, n=Py_ssize_t)
    cpdef void release(self, ItmDecoder dec, bytes data, Py_ssize_t upto) except *
    cpdef Py_ssize_t item(self, Py_ssize_t i) except? -1
    cpdef Py_ssize_t start(self, Py_ssize_t p) except -1
    cpdef void clear(self) except *

    @cython.locals(items="long long[:]", i=Py_ssize_t)
    cpdef void shift(self, Py_ssize_t keep) except *

    @cython.locals(
        e=Py_ssize_t, k=Py_ssize_t, held=Py_ssize_t, items="long long[:]", seen=bytearray
    )
    cpdef Py_ssize_t run(
        self, ItmDecoder dec, bytes data, Py_ssize_t p, Py_ssize_t n, IndexCursor cur
    ) except -1
