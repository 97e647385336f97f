# C types for cstrace/protocols/itm/decoder.py when Cython compiles it (pure-Python
# mode): the decoder is an extension type (derived from the kit's element sink)
# whose packet methods the reader's loop calls as C functions, and whose element
# columns are typed memoryviews. The .py stays the source.

cimport cython

from cstrace.protocols.kit cimport ElementSink

cdef int _TS_GLOBAL, _ITMTRACE
cdef unsigned long long _MASK64, _MASK26
cdef tuple _PKT_TYPES


# (not final: Cython would then refuse the overriding of the sink's bind_columns)
cdef class ItmDecoder(ElementSink):
    cdef public int prescale, page
    cdef public bint need_gts2, freq_change, overflow
    cdef public unsigned long long local_ts, global_ts
    cdef unsigned char[:] c_type, c_pkt, c_src, c_size, c_tsv, c_ovf, c_freq
    cdef long long[:] c_offset
    cdef unsigned long long[:] c_value, c_ts

    @cython.locals(arrays=dict)
    cpdef void bind_columns(self) except *

    @cython.locals(r=Py_ssize_t, overflow=cython.bint)
    cpdef void _itm(
        self,
        long long offset,
        int pkt_type,
        int src,
        int size,
        unsigned long long value,
        unsigned long long ts,
        bint has_ts,
        bint freq,
    ) except *

    cpdef void _reset(self)

    @cython.locals(channel=cython.int)
    cpdef void swit(self, long long offset, int src, unsigned long long value, int size) except *
    cpdef void dwt(self, long long offset, int src, unsigned long long value, int size) except *

    @cython.locals(ts=cython.ulonglong)
    cpdef void local_timestamp(
        self, long long offset, int tc, unsigned long long value, int size, bint compact
    ) except *

    @cython.locals(bits=cython.int, freq=cython.bint)
    cpdef void global_timestamp1(
        self, long long offset, int flags, unsigned long long value, int size
    ) except *

    @cython.locals(freq=cython.bint)
    cpdef void global_timestamp2(
        self, long long offset, unsigned long long value, int size
    ) except *

    cpdef void extension(
        self, long long offset, bint hardware, int nbits, unsigned long long value
    ) except *
    cpdef void overflow_packet(self, long long offset) except *
    cpdef void async_packet(self, long long offset) except *
    cpdef void other(self, object pkt) except *
