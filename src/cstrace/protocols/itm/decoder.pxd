# C types for cstrace/protocols/itm/decoder.py when Cython compiles it (pure-Python
# mode): the decoder is an extension type whose packet methods the reader's loop
# calls as C functions, and whose element columns are typed memoryviews. The .py
# stays the source.

cimport cython

cdef int _NO_SYNC, _WAIT_SYNC, _DECODE, _TS_GLOBAL, _ITMTRACE
cdef unsigned long long _MASK64, _MASK26
cdef tuple _PKT_TYPES


@cython.final
cdef class ItmDecoder:
    cdef public int prescale, trace_id, state, page
    cdef public bint recover, need_gts2, freq_change, overflow, stopped, fatal, columns
    cdef public object reason, pending, raw, last_other
    cdef public long long last
    cdef public unsigned long long local_ts, global_ts
    cdef public list objects, tap, sync_at, overflow_at
    cdef public dict handlers, _arrays
    cdef public Py_ssize_t packets, limit, syncs, overflows, size, rows
    cdef unsigned char[:] c_type, c_pkt, c_src, c_size, c_tsv, c_ovf, c_freq
    cdef long long[:] c_offset
    cdef unsigned long long[:] c_value, c_ts

    cpdef void _new_columns(self) except *
    cpdef bint ready(self)
    cpdef void _element(self, object elem) except *
    cpdef void _grow(self) except *

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

    @cython.locals(state=cython.int)
    cpdef bint _gate(self, long long offset, bint is_async) except -1

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
