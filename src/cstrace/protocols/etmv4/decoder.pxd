# C types for cstrace/protocols/etmv4/decoder.py when Cython compiles it
# (pure-Python mode): the decoder and its return stack become extension types
# and the atom loop (_atoms) runs on C locals. The .py stays the source.

cimport cython

from cstrace.isa.blocks cimport Block

cdef int _A32, _T32, _A64, _BR, _BR_IND, _V8_ERET
cdef int K_ATOM, K_NOT_SYNC, K_BAD
cdef int _K, _A, _B, _ADDR, _DECODE, _NO_SYNC
cdef dict _KIND

@cython.final
cdef class _ReturnStack:
    cdef public bint active
    cdef public list entries
    cdef public int num
    cdef public bint pop_pending
    cdef public bint tinfo_wait

    cpdef void push(self, object addr, int isa)


@cython.final
cdef class Etmv4Decoder:
    cdef public object config, context, walker, memory, generation, persist, pe
    cdef public object addr, last_cc, unsync_reason, stack, space, cc_threshold
    cdef public object last_idx, trace_id
    cdef public list out, log, blocks
    cdef public _ReturnStack rs
    cdef public bint is_ete, fast_atoms, comm_trans_p0, ts_with_cc, ete_has_ts_marker
    cdef public bint m_profile, v7m, v8m, src_addr_n, timed, seen_not_sync
    cdef public bint is_secure, is_64bit, need_ctxt, need_addr, elem_pending_addr
    cdef public bint prev_overflow, res_mispredict, res_discard, ete_first_ts_marker
    cdef public int isa, it, state, spec_depth, max_spec_depth
    cdef public long long res_commit, res_cancel

    @cython.locals(
        commit=cython.longlong,
        rs=_ReturnStack,
        blocks=list,
        out=list,
        isa=cython.int,
        it=cython.int,
        pop_pending=cython.bint,
        need=cython.bint,
        taken=cython.bint,
        itype=cython.int,
        blk=Block,
        table=dict,
        bits=cython.ulonglong,
    )
    cpdef Py_ssize_t _atoms(self, Py_ssize_t n, unsigned long long bits, object ix) except? -1

    @cython.locals(out=list, base=Py_ssize_t, kind=cython.int)
    cpdef decode(self, object pkt)

    @cython.locals(a=list, rs=_ReturnStack, out=list, base=Py_ssize_t)
    cpdef bint _fast_atom(self, object idx, unsigned long long bits, long long n) except -1

    @cython.locals(raw=bytes, i=Py_ssize_t, f=tuple, fields=tuple, fresh=cython.bint)
    cpdef _atom_run(self, object pkt)
