# C types for cstrace/protocols/stm/decoder.py when Cython compiles it (pure-Python
# mode): the decoder is an extension type (derived from the kit's element sink)
# whose packet methods the reader's loop calls as C functions, and whose element
# columns are typed memoryviews. The .py stays the source.

cimport cython

from cstrace.protocols.kit cimport ElementSink

cdef int _SWTRACE, _MARKER, _TRIGGER, _FREQUENCY, _MASTER_ERR, _GLOBAL_ERR


# (not final: Cython would then refuse the overriding of the sink's bind_columns)
cdef class StmDecoder(ElementSink):
    cdef public bint id_valid
    cdef public int master, channel
    cdef unsigned char[:] c_type, c_id_valid, c_bits, c_marker, c_trigger, c_freq
    cdef unsigned char[:] c_merr, c_gerr, c_tsv
    cdef unsigned short[:] c_master, c_channel
    cdef long long[:] c_offset
    cdef unsigned long long[:] c_payload, c_ts

    @cython.locals(arrays=dict)
    cpdef void bind_columns(self) except *

    @cython.locals(r=Py_ssize_t)
    cpdef void _sw(
        self,
        long long offset,
        int bits,
        unsigned long long payload,
        int flags,
        unsigned long long ts,
        bint has_ts,
    ) except *

    cpdef void data(
        self,
        long long offset,
        int bits,
        unsigned long long value,
        bint marker,
        unsigned long long ts,
        bint has_ts,
        int ts_bits,
    ) except *
    cpdef void m8(self, long long offset, int master) except *
    cpdef void c8(self, long long offset, int channel) except *
    cpdef void c16(self, long long offset, int channel) except *
    cpdef void merr(self, long long offset, int value) except *
    cpdef void gerr(self, long long offset, int value) except *
    cpdef void flag(self, long long offset, unsigned long long ts, bint has_ts, int ts_bits) except *
    cpdef void trig(
        self, long long offset, int value, unsigned long long ts, bint has_ts, int ts_bits
    ) except *
    cpdef void freq(self, long long offset, unsigned long long value) except *
    cpdef void null(self, long long offset, unsigned long long ts, bint has_ts, int ts_bits) except *
    cpdef void version(self, long long offset, int version) except *
    cpdef void async_packet(self, long long offset) except *
    cpdef void other(self, object pkt) except *
