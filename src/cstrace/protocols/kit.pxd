# C types for cstrace/protocols/kit.py when Cython compiles it (pure-Python mode):
# the element sink is an extension type that the decoder classes derive from, so
# that their packet methods reach its state and counters as C fields. The .py
# stays the source.

cimport cython

cdef int _NO_SYNC, _WAIT_SYNC, _DECODE


cdef class ElementSink:
    cdef public int trace_id, state
    cdef public object reason, pending, raw, last_other
    cdef public long long last
    cdef public bint stopped, fatal, as_columns, recover
    cdef public list objects, tap, sync_at, overflow_at
    cdef public dict handlers, arrays
    cdef public Py_ssize_t packets, limit, syncs, overflows, size, capacity, rows
    cdef public Py_ssize_t undecoded, undecoded_bytes
    cdef public long long stop_at, pause_at
    cdef public tuple specs

    cpdef void new_columns(self) except *
    cpdef void bind_columns(self) except *
    cpdef bint ready(self) except -1
    cpdef void element(self, object elem) except *

    @cython.locals(row=Py_ssize_t, old=dict)
    cpdef Py_ssize_t next_row(self) except -1
    cpdef void flush_pending(self) except *
    cpdef void forget(self) except *

    @cython.locals(state=cython.int)
    cpdef bint gate(self, long long offset, bint syncs) except -1
    cpdef bint decodes(self, long long offset, bint syncs) except -1
    cpdef void count_sync(self, long long offset) except *
    cpdef void count_overflow(self, long long offset) except *
    cpdef void after_stop(self, long long offset, Py_ssize_t size) except *
    cpdef void report(self, object pkt) except *
    cpdef void count_other(self, object pkt) except *
    cpdef bint bad_packet(self, object pkt, bint reserved, int kind_number) except -1
    cpdef void finish(self, bint complete) except *


@cython.final
cdef class ReturnStack:
    cdef public bint active, pop_pending, tinfo_wait
    cdef public list entries
    cdef public int head, num

    @cython.locals(head=cython.int)
    cpdef void push(self, object address, int isa) except *

    @cython.locals(head=cython.int)
    cpdef object pop(self)
    cpdef void flush(self) except *
    # (cut_state stays a Python method: it makes a tuple with a generator expression)
