# C types for cstrace/protocols/etmv4/reader.py when Cython compiles it
# (pure-Python mode): the reader's loop over one run of capture indices
# (_Scanner.scan) runs on C locals, reading the bytes of its window directly.
# The .py stays the source.

cimport cython

from cstrace.protocols.etmv4.packets cimport Address, AddressMatch, Atom, AtomRun

@cython.final
cdef class _Scanner:
    cdef public object st
    cdef public tuple readers, kinds
    cdef public bint group_atoms, single, cut

    @cython.locals(
        q=Py_ssize_t,
        hdr=cython.int,
        c1=cython.int,
        fields=tuple,
        atom_fields=tuple,
        raw1=tuple,
        readers=tuple,
        kinds=tuple,
        single=cython.bint,
        pkt=Atom,
        rpkt=AtomRun,
        mpkt=AddressMatch,
        apkt=Address,
    )
    cpdef Py_ssize_t scan(
        self, bytes data, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t n, Py_ssize_t base, list out
    ) except -1
