# C types for cstrace/protocols/ptm/decoder.py when Cython compiles it
# (pure-Python mode): the decoder and its return stack become extension types,
# their state C fields, and the walk of a packet's atoms (_walk) runs on C
# locals. The .py stays the source.

cimport cython

from cstrace.isa.blocks cimport Block, BlockCache

cdef int _BR, _BR_IND, _T32, _NO_SYNC, _WAIT_SYNC, _WAIT_ISYNC, _DECODE
cdef int _BRANCH_DETAIL, _WAYPOINT_DETAIL, _ATOM_DETAIL
cdef tuple _ISAS
cdef dict _TRACE_ON


@cython.final
cdef class ReturnStack:
    cdef public bint active
    cdef public list entries
    cdef public int head
    cdef public int count

    cpdef void push(self, object address, int isa) except *
    cpdef object pop(self)
    cpdef void flush(self) except *
    # (cut_state stays a Python method: it makes tuples with generator expressions)


@cython.final
cdef class PtmDecoder:
    cdef public object config, context, memory, unsync_reason, ctxt, trace_id
    cdef public BlockCache walker
    cdef public ReturnStack stack
    cdef public list out, tables
    cdef public object pe_addr, last_idx, waited_at
    cdef public int state, pe_isa, space, elem_isa
    cdef public long long waited
    cdef public bint need_isync, pe_valid, seen_notsync, halted

    cpdef bint settled(self) except -1

    @cython.locals(out=list)
    cpdef list step(self, object pkt)
    cpdef void decode(self, object pkt) except *

    cpdef bint _wait(self, object pkt) except -1
    cpdef void _branch(self, object pkt) except *
    @cython.locals(ctxt=object)
    cpdef void _isync(self, object pkt) except *
    cpdef void _context_id(self, object cid) except *
    cpdef void _vmid(self, object vmid) except *
    cpdef void _timestamp(self, object pkt) except *
    cpdef void _bad(self) except *

    @cython.locals(
        walker=BlockCache,
        tables=list,
        out=list,
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
        object cc,
        int detail,
        bint atom,
        object to_addr=*,
    ) except *

    cpdef void finish(self) except *
