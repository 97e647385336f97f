# C types for cstrace/protocols/etmv3/reader.py when Cython compiles it (pure-Python
# mode): the reader's running state is an extension type, and the loop that cuts
# a window's bytes into packets (_run) runs on C locals and hands the P-headers
# and branch addresses to the decoder's C methods as fields. The .py stays the
# source.

cimport cython

from cstrace.capture.window cimport IndexCursor
from cstrace.protocols.etmv3.decoder cimport Etmv3Decoder

cdef tuple _RAW1
cdef int _GOES_ON, _NEVER_ENDS


@cython.final
cdef class ReaderState:
    cdef public object addr, alt_isa, async_index, b_bits, b_exc, ctxid, ctxt_bytes
    cdef public object hyp_bits, isa, reason, timestamp, ts_last_bits, ts_last_mask, ts_max
    cdef public object valid_bits, vmid
    cdef public bint alt, alt_isa_bit, b_changed, data_addr, hyp, instr, ns, v7m, ts_full
    cdef public int fmt, cut
    cdef public str last
    cdef public tuple pheaders


@cython.locals(
    index=cython.longlong, h=cython.int, ph=tuple, fmt=cython.int, count=cython.int,
    atoms=cython.uint, cycles=cython.int, q=Py_ssize_t, tap=list,
)
cpdef Py_ssize_t _run(
    Etmv3Decoder dec,
    ReaderState st,
    tuple readers,
    bytes d,
    Py_ssize_t p,
    Py_ssize_t n,
    IndexCursor cur,
) except -1
