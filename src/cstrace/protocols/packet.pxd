# C types for cstrace/protocols/packet.py when Cython compiles it (pure-Python
# mode): the packet base class is an extension type, so that the ETMv4/ETE hot
# packet kinds (protocols/etmv4/packets.pxd) can be extension types too.

cdef class Packet:
    cdef public object offset, raw
