/* shards.c - which positions each rank holds, and what one ring step
 * computes: for each query chunk, the key chunks of the shard in hand that
 * the causal mask shows fully, on the diagonal, or not at all. */
#include "dist_internal.h"

#include <math.h>

void fcl_mpi_desc_init(fcl_mpi_desc *desc, size_t batch, size_t heads_q, size_t heads_kv,
                       size_t seqlen, size_t head_dim, fcl_dtype dtype, fcl_layout_kind layout)
{
    if (desc == NULL)
        return;
    desc->batch = batch;
    desc->heads_q = heads_q;
    desc->heads_kv = heads_kv;
    desc->seqlen = seqlen;
    desc->head_dim = head_dim;
    desc->dtype = dtype;
    desc->softmax_scale = 0.0f;
    desc->causal = 0;
    desc->sharding = FCL_MPI_SHARD_CONTIGUOUS;
    desc->layout = layout;
}

/* Chunk c of C over n positions starts at floor(c * n / C); the product is
 * taken in two parts so that it cannot overflow. */
static size_t chunk_start(size_t c, size_t chunks, size_t n)
{
    return c * (n / chunks) + c * (n % chunks) / chunks;
}

fcl_status fcl_mpi_shard_of(const fcl_mpi_desc *desc, int rank, int ranks, fcl_mpi_shard *shard)
{
    if (desc == NULL || shard == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return FCL_ERROR_INVALID_VALUE;
    if (desc->sharding != FCL_MPI_SHARD_CONTIGUOUS && desc->sharding != FCL_MPI_SHARD_ZIGZAG)
        return FCL_ERROR_INVALID_VALUE;
    const size_t chunks = (size_t)ranks * (desc->sharding == FCL_MPI_SHARD_ZIGZAG ? 2 : 1);
    if (desc->seqlen < chunks)
        return FCL_ERROR_INVALID_SHAPE;
    size_t mine[2] = {(size_t)rank, chunks - 1 - (size_t)rank};
    shard->chunks = desc->sharding == FCL_MPI_SHARD_ZIGZAG ? 2 : 1;
    shard->rows = 0;
    for (size_t i = 0; i < 2; ++i) {
        shard->start[i] = shard->len[i] = 0;
        if (i >= shard->chunks)
            continue;
        shard->start[i] = chunk_start(mine[i], chunks, desc->seqlen);
        shard->len[i] = chunk_start(mine[i] + 1, chunks, desc->seqlen) - shard->start[i];
        shard->rows += shard->len[i];
    }
    return FCL_OK;
}

size_t dist_max_rows(const fcl_mpi_desc *d, int ranks)
{
    size_t most = 0;
    for (int r = 0; r < ranks; ++r) {
        fcl_mpi_shard s;
        if (fcl_mpi_shard_of(d, r, ranks, &s) == FCL_OK && s.rows > most)
            most = s.rows;
    }
    return most;
}

typedef enum { PAIR_HIDDEN, PAIR_FULL, PAIR_DIAGONAL } pair_kind;

/* Query positions [a, a + n) against key positions [c, c + len): chunks
 * partition the sequence, so under a causal mask two chunks are either
 * the same chunk (the diagonal) or one lies wholly before the other. */
static pair_kind classify(int causal, size_t a, size_t n, size_t c, size_t len)
{
    if (!causal || c + len <= a)
        return PAIR_FULL;
    if (c >= a + n)
        return PAIR_HIDDEN;
    return PAIR_DIAGONAL;
}

fcl_status dist_step_calls(const fcl_mpi_desc *d, int ranks, int rank, int source,
                           dist_call calls[DIST_MAX_CALLS], size_t *count)
{
    fcl_mpi_shard qs, ks;
    DIST_TRY(fcl_mpi_shard_of(d, rank, ranks, &qs));
    DIST_TRY(fcl_mpi_shard_of(d, source, ranks, &ks));
    size_t n = 0;
    size_t qoff = 0;
    for (size_t qi = 0; qi < qs.chunks; qoff += qs.len[qi], ++qi) {
        /* Consecutive visible key chunks become one call; a diagonal chunk
         * may end one, since the diagonal of chunk [a, a+len) against keys
         * that start earlier and end at a+len is flashcl's bottom-right
         * causal mask. */
        int open = 0;
        size_t koff = 0;
        for (size_t ki = 0; ki < ks.chunks; koff += ks.len[ki], ++ki) {
            const pair_kind kind = classify(d->causal, qs.start[qi], qs.len[qi], ks.start[ki],
                                            ks.len[ki]);
            if (kind == PAIR_DIAGONAL && (ks.start[ki] != qs.start[qi] || ks.len[ki] != qs.len[qi]))
                return FCL_ERROR_INVALID_VALUE; /* not a partition: cannot happen */
            if (kind == PAIR_HIDDEN) {
                open = 0;
                continue;
            }
            dist_call *last = n > 0 ? &calls[n - 1] : NULL;
            if (open && !last->causal && last->k0 + last->nk == koff) {
                last->nk += ks.len[ki];
                last->causal = kind == PAIR_DIAGONAL;
                continue;
            }
            /* One call per query chunk and step: the ring merges a step's
             * part of a row once (both shardings need no more). */
            if (n == DIST_MAX_CALLS || (n > 0 && calls[n - 1].q0 == qoff))
                return FCL_ERROR_INVALID_VALUE;
            calls[n++] = (dist_call){qoff, qs.len[qi], koff, ks.len[ki], kind == PAIR_DIAGONAL};
            open = 1;
        }
    }
    /* Two query chunks against the same keys, all visible: one call over
     * both (they are adjacent in the local rows). */
    if (n == 2 && !calls[0].causal && !calls[1].causal && calls[0].k0 == calls[1].k0 &&
        calls[0].nk == calls[1].nk && calls[0].q0 + calls[0].nq == calls[1].q0) {
        calls[0].nq += calls[1].nq;
        n = 1;
    }
    *count = n;
    return FCL_OK;
}
