# C types for cstrace/protocols/etmv3/decoder.py when Cython compiles it (pure-Python
# mode): the decoder is an extension type (derived from the kit's element sink)
# whose packet methods the reader's loop calls as C functions; the records of its
# output ring are extension types too, and its element columns typed memoryviews.
# The .py stays the source.

cimport cython

from cstrace.isa.blocks cimport Instr
from cstrace.protocols.kit cimport ElementSink

cdef tuple _TRACE_ON, _ISAS, _ITYPES, _ISUBS
cdef int _A32, _T32, _BR, _BR_IND, _INSTR_RANGE, _SPACE_S, _SPACE_N
cdef int _NO_SYNC, _WAIT_ASYNC, _WAIT_ISYNC, _SYNCED, _OBJECT, _RANGE, _CYCLES, _CYCLE_COUNT
cdef int _K_OTHER, _K_ASYNC, _K_NOT_SYNC, _K_ISYNC, _K_TIMESTAMP, _K_PHEADER
cdef int _K_CYCLE_COUNT, _K_BRANCH
cdef dict _KIND_OF


@cython.final
cdef class _Slot:
    cdef public int kind, isa, r_isa, size, itype, subtype, l_type, l_subtype
    cdef public object elem
    cdef public long long offset
    cdef public bint has_start, has_rng, executed, cond, cc_valid, fresh
    cdef public unsigned long long start, l_start, l_end, first, end, cc
    cdef public Py_ssize_t num

    cpdef void put(self, object elem) except *
    cpdef void cycles(self, long long offset, unsigned long long cc, bint cc_valid) except *
    cpdef void stale_range(self, long long offset, unsigned long long cc, bint cc_valid) except *
    @cython.locals(cc=object)
    cpdef object range_object(self)
    cpdef object cycles_object(self)


# (not final: Cython would then refuse the overriding of the sink's bind_columns)
cdef class Etmv3Decoder(ElementSink):
    cdef public bint refused, ca, m_profile, need_addr, sent_unknown
    cdef public bint el_hyp, el_valid, ctxid_valid, vmid_valid
    cdef public object blocks, memory, generation
    cdef public list instrs, slots
    cdef public int cache_space, sync, sec, follower_isa
    cdef public unsigned long long iaddr, ctxid, vmid
    cdef public Py_ssize_t waited, first, used, pend
    cdef public long long waited_at
    cdef unsigned char[:] c_type, c_isa, c_exec, c_size, c_itype, c_sub, c_cond, c_ccv
    cdef long long[:] c_offset
    cdef unsigned long long[:] c_start, c_end, c_cc
    cdef unsigned int[:] c_num

    @cython.locals(arrays=dict)
    cpdef void bind_columns(self) except *

    @cython.locals(slots=list, size=Py_ssize_t, grow=Py_ssize_t, f=Py_ssize_t, slot=_Slot)
    cpdef _Slot alloc(self)
    cpdef void put(self, object elem) except *

    @cython.locals(slots=list, slot=_Slot)
    cpdef bint last_is_range(self, Py_ssize_t back) except -1
    cpdef void pend_last(self, Py_ssize_t count) except *
    cpdef void cancel(self) except *

    @cython.locals(slots=list, size=Py_ssize_t, slot=_Slot)
    cpdef void send(self) except *

    @cython.locals(r=Py_ssize_t)
    cpdef void range_out(self, _Slot slot) except *

    @cython.locals(r=Py_ssize_t)
    cpdef void cycles_out(self, _Slot slot) except *

    cpdef object context_info(self)
    cpdef void skipped(self, long long offset, Py_ssize_t size) except *
    cpdef void sync_wait(self) except *

    @cython.locals(sync=cython.int)
    cpdef bint begin(self, long long offset, Py_ssize_t size, int kind) except -1
    cpdef void done(self) except *

    @cython.locals(
        ca=cython.bint, space=cython.int, instrs=list, iaddr=cython.ulonglong,
        bits=cython.uint, slot=_Slot, acc=cython.ulonglong, cc=cython.ulonglong,
        executed=cython.bint, readable=cython.bint, itype=cython.int, nisa=cython.int,
        ccv=object, accv=object, blk=Instr, table=dict,
    )
    cpdef void pheader(
        self, long long offset, int fmt, int count, unsigned int atoms, int cycles, int isa
    ) except *

    @cython.locals(update=cython.bint, nsec=cython.int, slot=_Slot)
    cpdef void branch(
        self,
        long long offset,
        Py_ssize_t size,
        unsigned long long address,
        bint has_exception,
        int exception,
        bint cancel,
        bint ctxt_updated,
        bint ns,
        bint hyp,
    ) except *

    @cython.locals(first_sync=cython.bint, slot=_Slot, ccv=object)
    cpdef void isync(
        self,
        long long offset,
        Py_ssize_t size,
        int reason,
        unsigned long long address,
        int isa,
        bint ns,
        bint hyp,
        bint has_ctxid,
        unsigned long long ctxid,
        bint has_cc,
        unsigned long long cc,
        bint no_address,
        bint complete,
    ) except *

    cpdef void cycle_count(self, long long offset, Py_ssize_t size, unsigned long long count) except *
    cpdef void timestamp(self, long long offset, Py_ssize_t size, unsigned long long value) except *
    cpdef void async_packet(self, long long offset, Py_ssize_t size) except *
    cpdef void refuse(self, long long offset, Py_ssize_t size) except *
    cpdef void stop(self, object diag) except *

    @cython.locals(kind=cython.int, slot=_Slot, count_back=Py_ssize_t)
    cpdef void other(self, object pkt) except *
    cpdef void packet(self, object pkt) except *
    # (settled and cut_state stay Python methods: they run at cuts only)
    cpdef void finish(self, bint complete) except *
