/* tensors.c - what each call was given, and the checks of the cl_mem
 * form's buffers (context, size, aliasing) before any work: both forms go
 * through dist_begin with a dist_io, so the checks they share are made in
 * one place and in one order. */
#include "dist_internal.h"

#include <stdint.h>
#include <string.h>

/* The tensors each call takes, and those it must be given. */
static unsigned used_by(dist_op op)
{
    const unsigned forward = 1u << IO_Q | 1u << IO_K | 1u << IO_V | 1u << IO_O | 1u << IO_LSE;
    return op == DIST_FORWARD ? forward
                              : forward | 1u << IO_DOUT | 1u << IO_DQ | 1u << IO_DK | 1u << IO_DV;
}

static unsigned outputs_of(dist_op op)
{
    return op == DIST_FORWARD ? 1u << IO_O | 1u << IO_LSE : 1u << IO_DQ | 1u << IO_DK | 1u << IO_DV;
}

dist_io dist_io_host(const void *const arrays[DIST_TENSORS])
{
    dist_io io = {0, NULL, 0, NULL};
    for (int t = 0; t < DIST_TENSORS; ++t)
        io.given |= arrays[t] != NULL ? 1u << t : 0u;
    return io;
}

dist_io dist_io_device(const fcl_mpi_tensor tensors[DIST_TENSORS], cl_uint num_wait,
                       const cl_event *wait_list)
{
    dist_io io = {0, tensors, num_wait, wait_list};
    for (int t = 0; t < DIST_TENSORS; ++t)
        io.given |= tensors[t].mem != NULL ? 1u << t : 0u;
    return io;
}

fcl_status dist_check_args(const dist_io *io, dist_op op)
{
    const unsigned required = used_by(op) & ~(1u << IO_LSE); /* LSE: optional, or its own status */
    if ((io->given & required) != required || (io->num_wait > 0 && io->wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    if (op == DIST_BACKWARD && !(io->given & 1u << IO_LSE))
        return FCL_ERROR_MISSING_LSE;
    return FCL_OK;
}

/* A tensor's bytes: from `first` (in its root buffer), `bytes` long. */
typedef struct span {
    cl_mem root;
    uint64_t first, bytes;
} span;

/* The buffer a cl_mem lies in (sub-buffers followed to their parent, whose
 * byte offset is added), so that sub-buffers of one buffer compare. */
static fcl_status root_of(cl_mem mem, span *sp)
{
    sp->root = mem;
    for (;;) {
        cl_mem parent = NULL;
        size_t origin = 0;
        cl_int err = clGetMemObjectInfo(sp->root, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent,
                                        &parent, NULL);
        if (err == CL_SUCCESS && parent != NULL)
            err = clGetMemObjectInfo(sp->root, CL_MEM_OFFSET, sizeof origin, &origin, NULL);
        if (err != CL_SUCCESS)
            return err;
        if (parent == NULL)
            return FCL_OK;
        sp->first += origin;
        sp->root = parent;
    }
}

/* Elements of tensor t in this rank's shard, and their size. */
static void extent_of(const dist_shape *s, int t, uint64_t *elems, uint64_t *elem_size)
{
    const int q_side = t == IO_Q || t == IO_O || t == IO_DOUT || t == IO_DQ;
    *elems = t == IO_LSE ? s->d->batch * s->d->heads_q * s->rows
             : q_side    ? s->q_elems
                         : s->kv_elems;
    *elem_size = t == IO_LSE ? sizeof(float) : s->elem;
}

/* Context and size of one tensor, and where its bytes are. */
static fcl_status place(fcl_mpi *m, const dist_shape *s, int t, const fcl_mpi_tensor *x, span *sp)
{
    cl_context owner = NULL;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(x->mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err != CL_SUCCESS)
        return err;
    if (owner != fcl_context_cl_context(m->ctx))
        return FCL_ERROR_WRONG_CONTEXT;
    err = clGetMemObjectInfo(x->mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return err;
    uint64_t elems = 0, es = 0;
    extent_of(s, t, &elems, &es);
    /* offset + elems <= size / es, without overflow */
    const uint64_t fit = (uint64_t)size / es;
    if (x->offset > fit || elems > fit - x->offset)
        return FCL_ERROR_BUFFER_TOO_SMALL;
    sp->first = (uint64_t)x->offset * es;
    sp->bytes = elems * es;
    return root_of(x->mem, sp);
}

static int meet(const span *a, const span *b)
{
    return a->root == b->root && a->first < b->first + b->bytes && b->first < a->first + a->bytes;
}

fcl_status dist_check_buffers(fcl_mpi *m, const dist_shape *s, dist_op op, const dist_io *io)
{
    if (io->dev == NULL)
        return FCL_OK; /* host form: its arrays' sizes are the caller's promise */
    const unsigned present = io->given & used_by(op), outputs = outputs_of(op);
    span at[DIST_TENSORS];
    memset(at, 0, sizeof at);
    for (int t = 0; t < DIST_TENSORS; ++t)
        if (present & 1u << t)
            DIST_TRY(place(m, s, t, &io->dev[t], &at[t]));
    for (int t = 0; t < DIST_TENSORS; ++t)
        for (int u = 0; u < DIST_TENSORS && (present & outputs & 1u << t); ++u)
            if (u != t && (present & 1u << u) && meet(&at[t], &at[u]))
                return FCL_ERROR_BUFFER_ALIASING;
    return FCL_OK;
}
