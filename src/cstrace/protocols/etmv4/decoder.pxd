# C types for cstrace/protocols/etmv4/decoder.py when Cython compiles it
# (pure-Python mode): the decoder and its return stack become extension types
# and the atom loop (_atoms) runs on C locals. The .py stays the source.

cimport cython

from cstrace.isa.blocks cimport Block, BlockCache
from cstrace.protocols.etmv4.reader cimport PacketSink
from cstrace.protocols.kit cimport ReturnStack

cdef int _A32, _T32, _A64, _BR, _BR_IND, _V8_ERET
cdef int K_BAD, K_ASYNC, K_IGNORE, K_TRACE_INFO, K_TRACE_ON, K_ATOM, K_CTXT, K_ADDR
cdef int K_ADDR_CTXT, K_SRC_ADDR, K_EXCEPT, K_EXCEPT_RTN, K_FUNC_RET, K_EVENT, K_CCNT
cdef int K_TIMESTAMP, K_TS_MARKER, K_MISPREDICT, K_CANCEL, K_COMMIT, K_OVERFLOW, K_DISCARD
cdef int K_Q, K_TRANS_ST, K_TRANS_COMMIT, K_TRANS_FAIL, K_ITE, K_NOT_SYNC
cdef int _UNKNOWN, _ATOM, _ADDR, _CTXT, _TRC_ON, _EXCEP, _EXCEP_RET, _EVENT, _TS, _CC
cdef int _TS_CC, _MARKER, _Q, _OVERFLOW, _FUNC_RET, _SRC_ADDR, _TRANS_TRACE_INIT
cdef int _TRANS_START, _TRANS_COMMIT, _TRANS_FAIL, _ITE, _UNSEEN, _TINFO
cdef int _K, _P0, _IX, _A, _B, _C, _DECODE, _NO_SYNC
cdef dict _KIND

@cython.final
cdef class Etmv4Decoder(PacketSink):
    cdef public object config, context, memory, generation, persist, pe
    cdef public BlockCache walker
    cdef public object addr, last_cc, unsync_reason, space, cc_threshold
    cdef public object stack  # a collections.deque
    cdef public tuple lone
    cdef public object last_idx, trace_id, handlers
    cdef public list log, blocks
    cdef public long long packets
    cdef public ReturnStack rs
    cdef public bint is_ete, fast_atoms, comm_trans_p0, ts_with_cc, ete_has_ts_marker
    cdef public bint m_profile, v7m, v8m, src_addr_n, timed, seen_not_sync
    cdef public bint is_secure, is_64bit, need_ctxt, need_addr, elem_pending_addr
    cdef public bint prev_overflow, res_mispredict, res_discard, ete_first_ts_marker, stale
    cdef public int isa, it, state
    # (a speculation depth from the trace can exceed a C int: see _trace_info)
    cdef public long long spec_depth, max_spec_depth, res_commit, res_cancel, waited
    cdef public object waited_at
    cdef public object walk_addr
    cdef public int walk_isa, walk_it
    cdef public bint walk_prev_taken
    cdef public list walk_tables
    cdef public Block walk_prev, walk_next

    @cython.locals(
        commit=cython.longlong,
        rs=ReturnStack,
        blocks=list,
        out=list,
        isa=cython.int,
        it=cython.int,
        pop_pending=cython.bint,
        need=cython.bint,
        taken=cython.bint,
        itype=cython.int,
        blk=Block,
        prev=Block,
        nxt=Block,
        prev_taken=cython.bint,
        table=dict,
        f=tuple,
        base=Py_ssize_t,
    )
    cpdef Py_ssize_t _atoms(
        self,
        Py_ssize_t n,
        unsigned long long bits,
        object ix,
        bytes data=*,
        Py_ssize_t i=*,
        Py_ssize_t end=*,
        Py_ssize_t off0=*,
    ) except? -1

    @cython.locals(out=list, base=Py_ssize_t, kind=cython.int, raw=bytes)
    cpdef decode(self, object pkt)

    @cython.locals(stack=object, is_addr=cython.bint)
    cpdef bint _decode_packet(self, object pkt, int kind, object idx) except -1

    @cython.locals(out=list, mark=Py_ssize_t)
    cpdef void _resolve(self) except *

    @cython.locals(out=list, base=Py_ssize_t)
    cpdef bint _fast_atom(self, object idx, unsigned long long bits, long long n) except -1

    @cython.locals(a=list, rs=ReturnStack, stack=object, lone=tuple)
    cpdef bint _fast_ready(self) except -1

    @cython.locals(lone=tuple)
    cpdef void _unlone(self) except *

    @cython.locals(i=Py_ssize_t, off0=Py_ssize_t, f=tuple, fields=tuple, out=list, base=Py_ssize_t)
    cpdef void _atom_run(self, Py_ssize_t off, bytes data, Py_ssize_t pos, Py_ssize_t end) except *

    cpdef void _settle(self, object pkt, int kind, object idx, Py_ssize_t base) except *

    cpdef bint _rs_pop(self) except -1

    cpdef bint _stacked(self, bint is_addr) except -1

    @cython.locals(out=list, base=Py_ssize_t, idx=object)
    cpdef bint _target(self, object off, object address, object isa) except -1

    @cython.locals(out=list, base=Py_ssize_t)
    cpdef void _packet(self, object pkt) except *

    # The PacketSink methods (atoms, address, match, packet) are not declared here:
    # Cython compiles them as overrides of reader.pxd's C methods (a final class
    # may not redeclare them), which the reader's loop calls as C functions.
