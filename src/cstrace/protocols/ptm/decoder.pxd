# C types for cstrace/protocols/ptm/decoder.py when Cython compiles it
# (pure-Python mode): the decoder is an extension type (derived from the kit's
# element sink) whose packet methods the reader's loop calls as C functions,
# whose state is C fields and whose element columns are typed memoryviews; the
# walk of a packet's atoms (_walk) runs on C locals. The .py stays the source.

cimport cython

from cstrace.isa.blocks cimport Block, BlockCache
from cstrace.protocols.kit cimport ElementSink, ReturnStack

cdef int _BR, _BR_IND, _T32, _NO_SYNC, _WAIT_SYNC, _DECODE, _SPACE_S, _SPACE_N
cdef object _SECURE, _NONSECURE
cdef int _E_TRACE_ON, _E_INSTR_RANGE, _E_ADDR_NACC, _E_EXCEPTION, _E_TIMESTAMP
cdef int _BRANCH_DETAIL, _WAYPOINT_DETAIL, _ATOM_DETAIL
cdef int _K_OTHER, _K_ASYNC, _K_ISYNC, _K_NOTSYNC
cdef tuple _ISAS, _REASONS, _TRACE_ON_REASON, _TRACE_ON_REASONS


# (not final: Cython would then refuse the overriding of the sink's bind_columns)
cdef class PtmDecoder(ElementSink):
    cdef public object config, context, memory, ctxt, reader
    cdef public BlockCache walker
    cdef public ReturnStack stack
    cdef public list tables
    cdef public object pe_addr
    cdef public int pe_isa, space, elem_isa
    cdef public long long waited, waited_at
    cdef public bint need_isync, pe_valid, seen_notsync
    cdef unsigned char[:] c_type, c_isa, c_exec, c_size, c_itype, c_sub, c_cond, c_ccv
    cdef unsigned char[:] c_reason, c_tsv, c_space, c_retv
    cdef long long[:] c_offset
    cdef unsigned long long[:] c_start, c_end, c_cc, c_ts, c_addr, c_ret
    cdef unsigned int[:] c_num, c_number

    @cython.locals(arrays=dict)
    cpdef void bind_columns(self) except *

    cpdef bint settled(self) except -1

    @cython.locals(r=Py_ssize_t)
    cpdef Py_ssize_t _row(self, int kind, long long offset, long long cc) except -1
    @cython.locals(r=Py_ssize_t)
    cpdef void _range(self, long long offset, Block blk, bint taken, long long cc) except *
    @cython.locals(r=Py_ssize_t)
    cpdef void _trace_on(self, long long offset, int reason, long long cc) except *
    @cython.locals(r=Py_ssize_t)
    cpdef void _timestamp_elem(
        self, long long offset, unsigned long long ts, long long cc
    ) except *
    @cython.locals(r=Py_ssize_t)
    cpdef void _nacc(self, long long offset, object address, int space) except *
    @cython.locals(r=Py_ssize_t)
    cpdef void _exception(
        self, long long offset, int number, bint has_ret, object ret, long long cc
    ) except *

    @cython.locals(first=cython.bint)
    cpdef bint _enter(self, long long offset, Py_ssize_t size, int kind) except -1

    cpdef void async_packet(self, long long offset) except *
    @cython.locals(ctxt=object, show_ctxt=cython.bint)
    cpdef void isync(
        self,
        long long offset,
        Py_ssize_t size,
        object address,
        int isa,
        int reason,
        bint ns,
        bint hyp,
        bint alt_isa,
        long long context_id,
        long long cc,
        bint changed,
    ) except *
    cpdef void atom(
        self, long long offset, Py_ssize_t size, int bits, int count, long long cc
    ) except *
    cpdef void branch(
        self,
        long long offset,
        Py_ssize_t size,
        object address,
        int isa,
        int valid_bits,
        int nbits,
        bint changed,
        int exception,
        bint ns,
        bint hyp,
        long long cc,
    ) except *
    cpdef void waypoint_update(
        self,
        long long offset,
        Py_ssize_t size,
        object address,
        int isa,
        int valid_bits,
        int nbits,
        bint changed,
    ) except *
    @cython.locals(ctxt=object)
    cpdef void context_id(self, long long offset, Py_ssize_t size, object cid) except *
    @cython.locals(ctxt=object)
    cpdef void vmid(self, long long offset, Py_ssize_t size, int vmid) except *
    cpdef void timestamp(
        self, long long offset, Py_ssize_t size, unsigned long long ts, int nbits, long long cc
    ) except *
    cpdef void trigger(self, long long offset) except *
    cpdef void exception_return(self, long long offset) except *
    cpdef void other(self, object pkt) except *
    @cython.locals(p=object, size=Py_ssize_t)
    cpdef void packet(self, object pkt) except *

    @cython.locals(
        offset=cython.longlong,
        walker=BlockCache,
        tables=list,
        table=dict,
        space=cython.int,
        pe_isa=cython.int,
        pe_valid=cython.bint,
        blk=Block,
        cached=object,
        taken=cython.int,
        next_isa=cython.int,
        itype=cython.int,
        stack=ReturnStack,
        _=cython.int,
    )
    cpdef void _walk(
        self,
        int nwalk,
        int bits,
        long long cc,
        int detail,
        bint atom,
        bint through,
        object to_addr,
    ) except *

    cpdef void finish(self, bint complete) except *
