# C types for cstrace/protocols/etmv4/packets.py when Cython compiles it
# (pure-Python mode): the hot packet kinds (atoms, atom runs, addresses and
# exact matches: most packets of a trace) are extension types, so that the
# compiled reader (reader.py's _Scanner) writes their fields into a C struct
# instead of through Python's generic setattr. The other kinds stay Python
# classes (of the extension type Etmv4Packet). The .py stays the source.

from cstrace.protocols.packet cimport Packet

cdef class Etmv4Packet(Packet):
    cdef public object kind

cdef class Atom(Etmv4Packet):
    cdef public object bits, count

cdef class AtomRun(Etmv4Packet):
    pass

cdef class Address(Etmv4Packet):
    cdef public object address, isa, pkt_bits

cdef class AddressMatch(Etmv4Packet):
    cdef public object address, index, isa, pkt_bits

cdef class SourceAddress(Etmv4Packet):
    cdef public object address, isa, pkt_bits

cdef class SourceAddressMatch(Etmv4Packet):
    cdef public object address, index, isa, pkt_bits
