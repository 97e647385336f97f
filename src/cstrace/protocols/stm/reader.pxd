# C types for cstrace/protocols/stm/reader.py when Cython compiles it (pure-Python
# mode): the synchronised reader's loop (_synced_run) runs on C locals over the
# window's nibbles and hands each packet's fields to the decoder's C methods; the
# ASYNC detector is an extension type. The .py stays the source.

cimport cython

from cstrace.capture.window cimport IndexCursor
from cstrace.protocols.stm.decoder cimport StmDecoder

cdef bytes _OP_ACTION, _OP_PAYLOAD, _OP_MARKER, _OP_STAMPED, _OP_KIND, _OP_BITS, _TS_LEN
cdef unsigned long long _MASK64
cdef int _K_M8, _K_C8, _K_C16, _K_MERR, _K_GERR, _K_FLAG, _K_TRIG, _K_FREQ, _K_NULL
cdef int _K_VERSION, _K_RESERVED, _K_ASYNC, _A_PACKET, _A_VERSION, _A_RESERVED


@cython.final
cdef class _SyncState:
    cdef public int num_f, ts_type, channel, cur_type
    cdef public bint sync_start, is_sync, marker, cut
    cdef public long long sync_index
    cdef public unsigned long long ts
    cdef public Py_ssize_t det

    cpdef void step(self, int ch) noexcept

    @cython.locals(b=cython.int)
    cpdef void detect(self, bytes data, Py_ssize_t k, Py_ssize_t stop) except *


cpdef unsigned long long bin_to_gray(unsigned long long value)

@cython.locals(shift=cython.int)
cpdef unsigned long long gray_to_bin(unsigned long long value)

cpdef void _other(StmDecoder dec, object pkt) except *

@cython.locals(value=cython.ulonglong, b=cython.int)
cpdef unsigned long long _nibbles(bytes data, Py_ssize_t k, Py_ssize_t stop)

@cython.locals(
    q=Py_ssize_t, index=cython.longlong, k=Py_ssize_t, b=cython.int, row=cython.int,
    n1=cython.int, h=cython.int, action=cython.int, kind=cython.int, marker=cython.bint,
    d_end=Py_ssize_t, stop=Py_ssize_t, tslen=cython.int, stamped=cython.bint,
    value=cython.ulonglong, ts=cython.ulonglong, has_ts=cython.bint, tbits=cython.int,
    mask=cython.ulonglong, one=cython.ulonglong, update=cython.ulonglong, ts_type=cython.int, gray=cython.ulonglong,
    v=cython.int, opcode=cython.int, num_f=cython.int, sync_start=cython.bint,
    is_sync=cython.bint, i=Py_ssize_t, ch=cython.int, bad=cython.bint,
)
cpdef Py_ssize_t _synced_run(
    StmDecoder dec, _SyncState sync, bytes data, Py_ssize_t at, Py_ssize_t end,
    IndexCursor cur, bint recover,
) except -1
