/* host_calls.c - the host-pointer conveniences: copy in, run, copy out, wait.
 * Each tensor travels as the byte range [offset, end of its last element);
 * outputs are copied in first too, so bytes between strided rows that the
 * kernel does not write come back unchanged. */
#include "internal.h"

#include <string.h>

typedef struct host_tensor {
    const void *src;              /* host bytes at the tensor's first element */
    void *dst;                    /* NULL for inputs */
    size_t bytes;
    cl_mem mem;
} host_tensor;

/* Describes tensor `t` of host array `base` and re-bases its layout to 0. */
static fcl_status host_range(const fcl_tensor_ref *t, const void *base, int is_output,
                             fcl_layout *rebased, host_tensor *h)
{
    uint64_t end = 0;
    FCL_TRY(fcl_tensor_extent_bytes(t, &end));
    const size_t begin = t->layout.offset * t->elem_size;
    h->src = (const char *)base + begin;
    h->dst = is_output ? (char *)base + begin : NULL;
    h->bytes = (size_t)end - begin;
    h->mem = NULL;
    *rebased = t->layout;
    rebased->offset = 0;
    return FCL_OK;
}

static void release_all(fcl_context *ctx, host_tensor *h, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        fcl_buffer_release(ctx, h[i].mem);
}

/* Creates every buffer (copying the host bytes in), runs `run`, reads the
 * outputs back.  Nothing reaches the host outputs unless everything worked. */
static fcl_status run_on_host_arrays(fcl_context *ctx, host_tensor *h, size_t n,
                                     fcl_status (*run)(fcl_context *, const void *, host_tensor *),
                                     const void *user)
{
    fcl_status st = FCL_OK;
    for (size_t i = 0; i < n && st == FCL_OK; ++i) {
        if (h[i].src == NULL)
            continue;
        cl_mem_flags flags = CL_MEM_COPY_HOST_PTR | (h[i].dst ? CL_MEM_READ_WRITE : CL_MEM_READ_ONLY);
        h[i].mem = fcl_buffer_create(ctx, flags, h[i].bytes, (void *)h[i].src, &st);
    }
    if (st == FCL_OK)
        st = run(ctx, user, h);
    if (st == FCL_OK)
        st = clFinish(ctx->queue);
    for (size_t i = 0; i < n && st == FCL_OK; ++i) {
        if (h[i].dst == NULL || h[i].mem == NULL)
            continue;
        st = clEnqueueReadBuffer(ctx->queue, h[i].mem, CL_TRUE, 0, h[i].bytes, h[i].dst, 0, NULL,
                                 NULL);
    }
    release_all(ctx, h, n);
    return st;
}

/* ---- forward ------------------------------------------------------------- */

enum { FQ, FK, FV, FO, FLSE, F_COUNT };

static fcl_status run_forward(fcl_context *ctx, const void *user, host_tensor *h)
{
    return fcl_attention_forward(ctx, user, h[FQ].mem, h[FK].mem, h[FV].mem, h[FO].mem,
                                 h[FLSE].mem, 0, NULL, NULL);
}

fcl_status fcl_attention_forward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                      const void *q, const void *k, const void *v, void *o,
                                      float *lse)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_validate_desc(desc));
    const fcl_attention_desc *d = desc;
    const size_t es = fcl_dtype_size(d->dtype);
    fcl_tensor_ref t[F_COUNT] = {
        fcl_tensor_ref_make("q", NULL, d->q, d->batch, d->heads_q, d->seqlen_q, d->head_dim, es, 0),
        fcl_tensor_ref_make("k", NULL, d->k, d->batch, d->heads_kv, d->seqlen_k, d->head_dim, es, 0),
        fcl_tensor_ref_make("v", NULL, d->v, d->batch, d->heads_kv, d->seqlen_k, d->head_dim, es, 0),
        fcl_tensor_ref_make("o", NULL, d->o, d->batch, d->heads_q, d->seqlen_q, d->head_dim, es, 1),
        fcl_lse_ref(d, NULL, 1),
    };
    FCL_TRY(fcl_validate_tensors(ctx, t, F_COUNT));
    fcl_attention_desc local = *desc;
    host_tensor h[F_COUNT];
    memset(h, 0, sizeof h);
    FCL_TRY(host_range(&t[FQ], q, 0, &local.q, &h[FQ]));
    FCL_TRY(host_range(&t[FK], k, 0, &local.k, &h[FK]));
    FCL_TRY(host_range(&t[FV], v, 0, &local.v, &h[FV]));
    FCL_TRY(host_range(&t[FO], o, 1, &local.o, &h[FO]));
    if (lse != NULL) {
        fcl_layout lse_layout;
        FCL_TRY(host_range(&t[FLSE], lse, 1, &lse_layout, &h[FLSE]));
        local.lse_offset = 0;
    }
    return run_on_host_arrays(ctx, h, F_COUNT, run_forward, &local);
}

/* ---- backward ------------------------------------------------------------ */

enum { BQ, BK, BV, BO, BLSE, BDO, BDQ, BDK, BDV, B_COUNT };

static fcl_status run_backward(fcl_context *ctx, const void *user, host_tensor *h)
{
    return fcl_attention_backward(ctx, user, h[BQ].mem, h[BK].mem, h[BV].mem, h[BO].mem,
                                  h[BLSE].mem, h[BDO].mem, h[BDQ].mem, h[BDK].mem, h[BDV].mem, 0,
                                  NULL, NULL);
}

fcl_status fcl_attention_backward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                       const void *q, const void *k, const void *v,
                                       const void *o, const float *lse, const void *dout,
                                       void *dq, void *dk, void *dv)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        dout == NULL || dq == NULL || dk == NULL || dv == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (lse == NULL)
        return FCL_ERROR_MISSING_LSE;
    FCL_TRY(fcl_validate_desc(desc));
    const fcl_attention_desc *d = desc;
    const size_t es = fcl_dtype_size(d->dtype);
    const size_t B = d->batch, Hq = d->heads_q, Hk = d->heads_kv, D = d->head_dim;
    const size_t Sq = d->seqlen_q, Sk = d->seqlen_k;
    fcl_tensor_ref t[B_COUNT] = {
        fcl_tensor_ref_make("q", NULL, d->q, B, Hq, Sq, D, es, 0),
        fcl_tensor_ref_make("k", NULL, d->k, B, Hk, Sk, D, es, 0),
        fcl_tensor_ref_make("v", NULL, d->v, B, Hk, Sk, D, es, 0),
        fcl_tensor_ref_make("o", NULL, d->o, B, Hq, Sq, D, es, 0),
        fcl_lse_ref(d, NULL, 0),
        fcl_tensor_ref_make("dout", NULL, d->dout, B, Hq, Sq, D, es, 0),
        fcl_tensor_ref_make("dq", NULL, d->dq, B, Hq, Sq, D, es, 1),
        fcl_tensor_ref_make("dk", NULL, d->dk, B, Hk, Sk, D, es, 1),
        fcl_tensor_ref_make("dv", NULL, d->dv, B, Hk, Sk, D, es, 1),
    };
    FCL_TRY(fcl_validate_tensors(ctx, t, B_COUNT));
    fcl_attention_desc local = *desc;
    fcl_layout lse_layout;
    host_tensor h[B_COUNT];
    memset(h, 0, sizeof h);
    FCL_TRY(host_range(&t[BQ], q, 0, &local.q, &h[BQ]));
    FCL_TRY(host_range(&t[BK], k, 0, &local.k, &h[BK]));
    FCL_TRY(host_range(&t[BV], v, 0, &local.v, &h[BV]));
    FCL_TRY(host_range(&t[BO], o, 0, &local.o, &h[BO]));
    FCL_TRY(host_range(&t[BLSE], lse, 0, &lse_layout, &h[BLSE]));
    local.lse_offset = 0;
    FCL_TRY(host_range(&t[BDO], dout, 0, &local.dout, &h[BDO]));
    FCL_TRY(host_range(&t[BDQ], dq, 1, &local.dq, &h[BDQ]));
    FCL_TRY(host_range(&t[BDK], dk, 1, &local.dk, &h[BDK]));
    FCL_TRY(host_range(&t[BDV], dv, 1, &local.dv, &h[BDV]));
    return run_on_host_arrays(ctx, h, B_COUNT, run_backward, &local);
}
