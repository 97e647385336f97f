# C types for cstrace/protocols/ptm/reader.py when Cython compiles it (pure-Python
# mode): the reader state is an extension type, and the per-kind readers and the
# loop that cuts a window's bytes into packets (_run) run on C locals and hand each
# packet's fields to the decoder's C methods. The .py stays the source.

cimport cython

from cstrace.capture.window cimport IndexCursor
from cstrace.protocols.ptm.decoder cimport PtmDecoder

cdef int _A32, _T32, _TEE, _JAZELLE, _UNKNOWN_ISA, _ASYNC_PAD_LIMIT, _ASYNC_ZEROS
cdef int _K_ASYNC, _K_ISYNC, _K_ATOM, _K_BRANCH, _K_WAYPOINT, _K_TRIGGER, _K_CONTEXT_ID
cdef int _K_VMID, _K_TIMESTAMP, _K_EXCEPTION_RETURN, _K_IGNORE
cdef unsigned long long _MASK64, _ONE
cdef bytes _KINDS, _ATOM_BITS, _ATOM_COUNT


@cython.final
cdef class ReaderState:
    cdef public bint ca, ns, hyp
    cdef public int ctxt_bytes, ts_last, ts_last_bits, ts_full, isa, valid_bits, alt_isa_exc
    cdef public int ts_bits
    cdef public unsigned long long ts_last_mask, address, timestamp
    cdef public long long cc

    cpdef bint settled(self, bint timestamps) except -1


@cython.locals(b=cython.ulonglong, value=cython.ulonglong, shift=cython.int, last=Py_ssize_t)
cpdef Py_ssize_t _cycle_count(bytes data, Py_ssize_t p, Py_ssize_t end, ReaderState st) except -2

@cython.locals(
    b=cython.ulonglong, value=cython.ulonglong, bits=cython.int, shift=cython.int, i=cython.int,
    mask=cython.ulonglong, nbits=cython.int,
)
cpdef unsigned long long _extract_address(
    bytes data, Py_ssize_t pos, int count, int isa
) except? 0xFFFFFFFFFFFFFFFF

cpdef int _address_isa(int byte5)
cpdef int _thumb_or_thumbee(int isa, int alt_isa_exc)

@cython.locals(zeros=cython.int, p=Py_ssize_t, b=cython.int)
cpdef Py_ssize_t read_async(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(
    p=Py_ssize_t, q=Py_ssize_t, info=cython.int, cc=cython.longlong, ctxt=cython.longlong,
    n=cython.int, i=cython.int, b=cython.ulonglong, alt_isa=cython.bint, a0=cython.ulonglong,
    isa=cython.int, changed=cython.bint, address=cython.ulonglong, ns=cython.bint,
    hyp=cython.bint,
)
cpdef Py_ssize_t read_isync(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(h=cython.int, p=Py_ssize_t)
cpdef Py_ssize_t read_atom(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(p=Py_ssize_t, last=Py_ssize_t)
cpdef Py_ssize_t _address_end(bytes data, Py_ssize_t first, Py_ssize_t end) except -2

@cython.locals(x=cython.ulonglong, nbits=cython.int, mask=cython.ulonglong)
cpdef int _set_address(
    ReaderState st, bytes data, Py_ssize_t first, int count, int isa
) except -1

@cython.locals(
    p=Py_ssize_t, num_addr=cython.int, last=cython.int, isa=cython.int, alt=cython.int,
    ns=cython.bint, hyp=cython.bint, exception=cython.int, e=cython.int, cc=cython.longlong,
    changed=cython.bint, nbits=cython.int,
)
cpdef Py_ssize_t read_branch(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(
    p=Py_ssize_t, num_addr=cython.int, last=cython.int, isa=cython.int, alt=cython.int,
    changed=cython.bint, nbits=cython.int,
)
cpdef Py_ssize_t read_waypoint_update(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(n=cython.int, p=Py_ssize_t, cid=cython.ulonglong, i=cython.int, b=cython.ulonglong)
cpdef Py_ssize_t read_context_id(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

cpdef Py_ssize_t read_vmid(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(
    p=Py_ssize_t, last=Py_ssize_t, value=cython.ulonglong, nbits=cython.int, b=cython.ulonglong,
    cc=cython.longlong, mask=cython.ulonglong,
)
cpdef Py_ssize_t read_timestamp(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

cpdef Py_ssize_t read_trigger(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2
cpdef Py_ssize_t read_exception_return(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2
cpdef Py_ssize_t read_ignore(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2
cpdef Py_ssize_t read_reserved(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(kind=cython.int)
cpdef Py_ssize_t _read_one(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t end, long long index, ReaderState st
) except -2

@cython.locals(index=cython.longlong, e=Py_ssize_t)
cpdef Py_ssize_t _run(
    PtmDecoder dec, bytes data, Py_ssize_t pos, Py_ssize_t n, IndexCursor cur, ReaderState st
) except -2
