# C types for cstrace/rows.py when Cython compiles it (pure-Python mode): the
# loops over a decoder's output list run on C locals and write the columns
# through typed memoryviews. The .py stays the source.

cimport cython


@cython.locals(out=list, n=Py_ssize_t, i=Py_ssize_t)
cpdef list expand(list items)


@cython.locals(n=Py_ssize_t, i=Py_ssize_t, rows=Py_ssize_t)
cpdef Py_ssize_t scan(list items, list objects)


@cython.locals(n=Py_ssize_t, i=Py_ssize_t, row=Py_ssize_t, t=tuple, cc=object)
cpdef Py_ssize_t fill_ranges(
    list items,
    unsigned char[:] types,
    long long[:] offset,
    unsigned long long[:] start,
    unsigned long long[:] end,
    unsigned int[:] num_instr,
    unsigned char[:] isa,
    unsigned char[:] last_exec,
    unsigned char[:] last_size,
    unsigned char[:] last_type,
    unsigned char[:] last_subtype,
    unsigned char[:] last_cond,
    unsigned long long[:] cycle_count,
    unsigned char[:] cycle_count_valid,
    list obj_rows,
    list objects,
)
