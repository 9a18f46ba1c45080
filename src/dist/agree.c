/* agree.c - the collective checks: before any work every rank learns
 * whether the descriptors agree and whether some rank found an error, so
 * that all return the same status and none waits for a message that will
 * not come. */
#include "dist_internal.h"

#include <limits.h>
#include <math.h>
#include <string.h>

fcl_status dist_check_desc(const fcl_mpi_desc *d, int ranks)
{
    if (d->causal != 0 && d->causal != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (d->layout != FCL_LAYOUT_BSHD && d->layout != FCL_LAYOUT_BHSD)
        return FCL_ERROR_INVALID_VALUE;
    if (!isfinite(d->softmax_scale))
        return FCL_ERROR_INVALID_VALUE;
    if (d->batch == 0 || d->heads_q == 0 || d->heads_kv == 0 || d->head_dim == 0)
        return FCL_ERROR_INVALID_SHAPE;
    fcl_mpi_shard s;
    return fcl_mpi_shard_of(d, 0, ranks, &s); /* sharding, seqlen >= chunks */
}

/* The lowest failing rank found by one reduction, its status sent by
 * another: no memory to allocate, so no rank can fail to take part. */
fcl_status dist_first_error(MPI_Comm comm, fcl_status local)
{
    int rank = 0, first = INT_MAX;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    int mine = local != FCL_OK ? rank : INT_MAX;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    if (first == INT_MAX)
        return FCL_OK;
    int st = local;
    if (MPI_Bcast(&st, 1, MPI_INT, first, comm) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    return st;
}

enum { SIG_WORDS = 11 };

fcl_status dist_agree(fcl_mpi *m, const fcl_mpi_desc *d, dist_op op, fcl_status local)
{
    uint32_t scale_bits = 0;
    memcpy(&scale_bits, &d->softmax_scale, sizeof scale_bits);
    /* Every field as a word; the ranks agree when each word's minimum over
     * the ranks equals its maximum. */
    const uint64_t sig[SIG_WORDS] = {
        (uint64_t)op, d->batch, d->heads_q, d->heads_kv, d->seqlen, d->head_dim,
        (uint64_t)(int64_t)d->dtype, (uint64_t)(int64_t)d->causal,
        (uint64_t)(int64_t)d->sharding, (uint64_t)(int64_t)d->layout, scale_bits};
    uint64_t lo[SIG_WORDS], hi[SIG_WORDS];
    if (MPI_Allreduce(sig, lo, SIG_WORDS, MPI_UINT64_T, MPI_MIN, m->comm) != MPI_SUCCESS ||
        MPI_Allreduce(sig, hi, SIG_WORDS, MPI_UINT64_T, MPI_MAX, m->comm) != MPI_SUCCESS)
        return FCL_ERROR_MPI;
    if (memcmp(lo, hi, sizeof lo) != 0)
        return FCL_ERROR_RANKS_DISAGREE;
    return dist_first_error(m->comm, local);
}

fcl_status dist_check_call(fcl_mpi *m, const fcl_mpi_desc *d, dist_op op, dist_shape *sh)
{
    DIST_TRY(dist_check_desc(d, m->size));
    DIST_TRY(dist_shape_make(d, m->size, m->rank, sh));
    /* flashcl's own checks for the largest call a step makes (the whole
     * local problem against the longest shard), and its kernels built
     * now rather than in the middle of the ring. */
    fcl_attention_desc plain;
    dist_plain_desc(sh, &plain);
    plain.seqlen_k = sh->max_rows;
    plain.k = plain.v = plain.dk = plain.dv =
        fcl_layout_contiguous(d->layout, d->heads_kv, sh->max_rows, d->head_dim);
    fcl_plan plan;
    DIST_TRY(fcl_plan_query(m->ctx, &plain, FCL_KERNEL_FORWARD, &plan));
    if (op == DIST_BACKWARD) {
        DIST_TRY(fcl_plan_query(m->ctx, &plain, FCL_KERNEL_BACKWARD_DKDV, &plan));
        DIST_TRY(fcl_plan_query(m->ctx, &plain, FCL_KERNEL_BACKWARD_DQ, &plan));
    }
    if (m->size > 1) {
        dist_kernels *k = NULL;
        DIST_TRY(dist_kernels_for(m, FCL_DTYPE_FP32, &k));
        DIST_TRY(dist_kernels_for(m, d->dtype, &k));
    }
    return FCL_OK;
}

fcl_status dist_begin(fcl_mpi *m, const fcl_mpi_desc *desc, dist_op op, const dist_io *io,
                      dist_shape *s, dist_buffers_fn get, void *buffers)
{
    memset(&m->timing, 0, sizeof m->timing);
    m->call_start = dist_now();
    m->trace_count = 0;
    m->trace_step = -1; /* outside the ring */
    m->upload_piece = dist_upload_piece_asked();
    const fcl_mpi_desc none = {0};
    const fcl_mpi_desc *d = desc != NULL ? desc : &none; /* a NULL desc is all zeros */
    fcl_status st = desc == NULL ? FCL_ERROR_NULL_ARGUMENT : dist_check_args(io, op);
    if (st == FCL_OK)
        st = dist_check_call(m, d, op, s);
    if (st == FCL_OK)
        st = dist_check_buffers(m, s, op, io);
    if (st == FCL_OK && m->size > 1)
        st = get(m, s, buffers);
    st = dist_agree(m, d, op, st);
    dist_mark_now(m, "checks agreed, buffers in hand");
    return st;
}

fcl_status dist_done(fcl_mpi *m, fcl_status st)
{
    m->trace_step = -1;
    dist_mark_now(m, "call done");
    m->timing.total_seconds = dist_now() - m->call_start;
    return st;
}
