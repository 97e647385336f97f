# C types for cstrace/isa/blocks.py when Cython compiles it (pure-Python mode):
# Block becomes an extension type, so that a decoder's typed loop reads its
# fields from a C struct. The .py stays the source; see docs/performance.md.

cdef class Block:
    cdef public object start
    cdef public int isa
    cdef public long long count
    cdef public object end
    cdef public object reason
    cdef public bint found
    cdef public int itype
    cdef public int subtype
    cdef public int size
    cdef public object cond
    cdef public object link
    cdef public object target
    cdef public int next_isa
    cdef public int it_out
    cdef public tuple range_e
    cdef public tuple range_n
