# C types for cstrace/protocols/etmv4/reader.py when Cython compiles it
# (pure-Python mode): the reader's loop over one run of capture indices
# (_Scanner.scan) runs on C locals, reading the bytes of its window directly,
# and hands the packets to a PacketSink through C calls. The .py stays the
# source.

cimport cython

from cstrace.capture.window cimport IndexCursor
from cstrace.protocols.etmv4.packets cimport Address, AddressMatch, Atom, AtomRun


cdef class ReaderState:
    cdef public object cc_mask, cc_thr, cid, cid_bytes, commit_opt1, ctx_valid, el
    cdef public object is_ete, m_type, max_spec, ns, nse, seen_trace_info, sf
    cdef public object ti_info, ts, ts_valid, vmid, vmid_bytes
    cdef public tuple kinds, readers
    cdef public unsigned long long a0, a1, a2
    cdef public int i0, i1, i2, b0, b1, b2


# The address history's updates: C functions, which the scanner calls directly.
cpdef void _push(ReaderState st, unsigned long long address, int isa, int bits) noexcept

@cython.locals(address=cython.ulonglong, isa=cython.int, bits=cython.int)
cpdef tuple _match(ReaderState st, int index)


cdef class PacketSink:
    cdef public list out
    cdef public bint group_atoms
    cdef public Py_ssize_t limit

    @cython.locals(fields=tuple, out=list, rpkt=AtomRun, pkt=Atom)
    cpdef void atoms(self, Py_ssize_t off, bytes data, Py_ssize_t pos, Py_ssize_t end) except *

    @cython.locals(apkt=Address)
    cpdef void address(
        self,
        Py_ssize_t off,
        bytes data,
        Py_ssize_t pos,
        Py_ssize_t end,
        object kind,
        object address,
        int isa,
        int nbits,
    ) except *

    @cython.locals(mpkt=AddressMatch)
    cpdef void match(self, Py_ssize_t off, int header, object kind, tuple entry) except *

    cpdef void packet(self, object pkt) except *


@cython.final
cdef class _Scanner:
    cdef public ReaderState st
    cdef public tuple readers, kinds
    cdef public bint single, cut

    @cython.locals(out=list, limit=Py_ssize_t, stop=Py_ssize_t)
    cpdef Py_ssize_t scan_window(
        self, bytes data, Py_ssize_t pos, Py_ssize_t n, IndexCursor cur, PacketSink sink
    ) except -1

    @cython.locals(
        st=ReaderState,
        q=Py_ssize_t,
        hdr=cython.int,
        c1=cython.int,
        shift=cython.int,
        nbits=cython.int,
        low=cython.ulonglong,
        mask=cython.ulonglong,
        prior=cython.ulonglong,
        target=cython.ulonglong,
        b=cython.ulonglong,
        k=cython.int,
        atom_fields=tuple,
        readers=tuple,
        kinds=tuple,
        single=cython.bint,
        out=list,
        limit=Py_ssize_t,
    )
    cpdef Py_ssize_t scan(
        self,
        bytes data,
        Py_ssize_t pos,
        Py_ssize_t stop,
        Py_ssize_t n,
        Py_ssize_t base,
        PacketSink sink,
    ) except -1
