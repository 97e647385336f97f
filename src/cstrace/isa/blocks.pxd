# C types for cstrace/isa/blocks.py when Cython compiles it (pure-Python mode):
# Block and BlockCache become extension types, so that a decoder's typed loop
# reads a block's fields from a C struct and a new block is walked on C locals.
# The .py stays the source; see docs/performance.md.

cimport cython

from cstrace.isa.scan cimport Walker

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
    cdef public bint cond
    cdef public bint link
    cdef public object target
    cdef public int next_isa
    cdef public int it_out
    cdef public tuple range_e
    cdef public tuple range_n
    cdef public Block next_e
    cdef public Block next_n


cdef class Instr:
    cdef public object address, end, target
    cdef public int isa, size, itype, subtype, next_isa
    cdef public bint found, cond, link
    cdef public tuple tail


cdef class BlockCache:
    cdef public object memory, opts, view, _store, _generation, _last
    cdef public list _cls
    cdef public Py_ssize_t max_blocks

    @cython.locals(table=dict)
    cpdef Block block(self, object address, int isa, object space, int it=*)

    @cython.locals(t=list)
    cpdef list tables(self, object space)

    @cython.locals(count=Py_ssize_t, c=tuple)
    cpdef Block _walk_block(self, object address, int isa, object space, int it)

    @cython.locals(last=tuple)
    cpdef Walker _walker(self, object region, int isa)
