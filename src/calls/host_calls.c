/* host_calls.c - the host-pointer conveniences: copy in, run, copy out, wait.
 * Each tensor travels as the byte range [offset, end of its last element);
 * outputs come back through one staging copy, so a failed read leaves every
 * output as it was, and only their elements' bytes are written: whatever
 * lies between an output's rows (another tensor of the call, such as V
 * between K's pages) keeps its value.  The aux arrays (ALiBi slopes,
 * cu_seqlens, block mask, descales, sinks) travel whole; the sinks'
 * gradient is an output tensor of the backward. */
#include "calls/calls.h"

#include <stdlib.h>
#include <string.h>


fcl_status fcl_host_range(const fcl_tensor_ref *t, const void *base, fcl_layout *rebased,
                          fcl_host_tensor *h)
{
    uint64_t end = 0;
    FCL_TRY(fcl_tensor_extent_bytes(t, &end));
    const size_t begin = t->layout.offset * t->elem_size;
    h->src = (const char *)base + begin;
    h->dst = t->is_output ? (char *)base + begin : NULL;
    h->bytes = (size_t)end - begin;
    h->mem = NULL;
    h->fp = fcl_footprint_of(t, 0);
    *rebased = t->layout;
    rebased->offset = 0;
    return FCL_OK;
}

/* Aux arrays, as inputs of known size (0 bytes: absent). */
enum { AUX_ALIBI, AUX_CU_Q, AUX_CU_K, AUX_BLOCKS, AUX_DESCALE_Q, AUX_DESCALE_K, AUX_DESCALE_V,
       AUX_SINKS, AUX_COUNT };

/* The aux arrays a call of d reads, as one-byte tensors of the caller's
 * arrays, after the checks the cl_mem calls make on their buffers (in their
 * order): a missing one is FCL_ERROR_NULL_ARGUMENT, a descale with a dtype
 * that is not FP8, or sinks or their gradient with sinks off,
 * FCL_ERROR_INVALID_VALUE.  Nothing is read. */
static fcl_status aux_refs(const fcl_attention_desc *d, const fcl_attention_aux_host *aux,
                           fcl_tensor_ref ref[AUX_COUNT])
{
    static const fcl_attention_aux_host none;
    if (aux == NULL)
        aux = &none;
    const void *arrays[AUX_COUNT] = {aux->alibi_slopes, aux->cu_seqlens_q, aux->cu_seqlens_k,
                                     aux->block_mask,   aux->descale_q,    aux->descale_k,
                                     aux->descale_v,    aux->sinks};
    uint64_t bytes[AUX_COUNT] = {0};
    const bool wanted[AUX_COUNT] = {d->alibi != FCL_ALIBI_NONE, d->varlen != 0, d->varlen != 0,
                                    d->block_m != 0, false, false, false, d->sinks != 0};
    if (d->alibi != FCL_ALIBI_NONE)
        bytes[AUX_ALIBI] = (d->alibi == FCL_ALIBI_PER_BATCH_HEAD ? d->batch : 1) * d->heads_q *
                           sizeof(float);
    bytes[AUX_CU_Q] = bytes[AUX_CU_K] = (d->batch + 1) * sizeof(int32_t);
    if (d->block_m != 0)
        FCL_TRY(fcl_block_mask_bytes(d, &bytes[AUX_BLOCKS]));
    for (int i = 0; i < 3; ++i)
        bytes[AUX_DESCALE_Q + i] = d->batch * (i == 0 ? d->heads_q : d->heads_kv) * sizeof(float);
    bytes[AUX_SINKS] = d->heads_q * sizeof(float);
    for (int i = 0; i < AUX_COUNT; ++i) {
        if (wanted[i] && arrays[i] == NULL)
            return FCL_ERROR_NULL_ARGUMENT;
        if (i >= AUX_DESCALE_Q && i <= AUX_DESCALE_V && arrays[i] != NULL &&
            !fcl_dtype_is_fp8(d->dtype))
            return FCL_ERROR_INVALID_VALUE;
        if (i == AUX_SINKS && !d->sinks && (arrays[i] != NULL || aux->dsinks != NULL))
            return FCL_ERROR_INVALID_VALUE;
        const bool used = (i >= AUX_DESCALE_Q && i <= AUX_DESCALE_V) || wanted[i];
        ref[i] = fcl_aux_ref(NULL, used && arrays[i] != NULL ? bytes[i] : 0);
        ref[i].host = used ? arrays[i] : NULL;
    }
    return FCL_OK;
}

fcl_status fcl_host_upload(fcl_context *ctx, fcl_host_tensor *h, size_t n)
{
    fcl_status st = FCL_OK;
    for (size_t i = 0; i < n && st == FCL_OK; ++i) {
        if (h[i].src == NULL || h[i].bytes == 0)
            continue;
        const cl_mem_flags flags =
            CL_MEM_COPY_HOST_PTR | (h[i].dst ? CL_MEM_READ_WRITE : CL_MEM_READ_ONLY);
        h[i].mem = fcl_buffer_create(ctx, flags, h[i].bytes, (void *)h[i].src, &st);
    }
    return st;
}

void fcl_host_release(fcl_context *ctx, fcl_host_tensor *h, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        fcl_buffer_release(ctx, h[i].mem, h[i].bytes);
        h[i].mem = NULL;
    }
}

fcl_status fcl_host_read_outputs(fcl_context *ctx, const fcl_host_tensor *h, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; ++i)
        if (h[i].dst != NULL && h[i].mem != NULL)
            total += h[i].bytes;
    if (total == 0)
        return FCL_OK;
    unsigned char *staged = fcl_host_malloc(total);
    if (staged == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    fcl_status st = FCL_OK;
    size_t at = 0;
    for (size_t i = 0; i < n && st == FCL_OK; ++i) {
        if (h[i].dst == NULL || h[i].mem == NULL)
            continue;
        st = clEnqueueReadBuffer(ctx->queue, h[i].mem, CL_TRUE, 0, h[i].bytes, staged + at, 0,
                                 NULL, NULL);
        at += h[i].bytes;
    }
    at = 0;
    for (size_t i = 0; i < n && st == FCL_OK; ++i) {
        if (h[i].dst == NULL || h[i].mem == NULL)
            continue;
        fcl_footprint_copy(&h[i].fp, h[i].dst, staged + at);
        at += h[i].bytes;
    }
    free(staged);
    return st;
}

/* One host-pointer call of the forward or the backward: its tensors on the
 * caller's arrays (rebased to the copies' offsets in `local`) and aux
 * arrays, checked. */
typedef struct host_call {
    fcl_attention_desc local;
    fcl_layout lse_layout, dsinks_layout;
    fcl_host_tensor h[FCL_BACKWARD_TENSORS + AUX_COUNT];
    size_t n;
} host_call;

typedef fcl_status (*run_fn)(fcl_context *ctx, const fcl_attention_desc *d,
                             const fcl_attention_aux *aux, fcl_host_tensor *h);

/* Every check of the call that needs no array, in the cl_mem calls' order
 * after the descriptor (tensors, aux arrays given, aliasing), then the
 * kernels' plans (a failed build is a refusal too), then cu_seqlens, the
 * only arrays read to check them; fills c. */
static fcl_status prepare(fcl_context *ctx, const fcl_attention_desc *desc, fcl_kernel_kind kind,
                          fcl_tensor_ref *t, const void *const *base, size_t n,
                          const fcl_attention_aux_host *aux, host_call *c)
{
    for (size_t i = 0; i < n; ++i)
        t[i].host = base[i];
    FCL_TRY(fcl_validate_tensors(ctx, t, n));
    fcl_tensor_ref a[AUX_COUNT];
    FCL_TRY(aux_refs(desc, aux, a));
    FCL_TRY(fcl_validate_apart(ctx, t, n, a, AUX_COUNT));
    fcl_plan plan;
    FCL_TRY(fcl_plan_query(ctx, desc, kind, &plan));
    if (kind == FCL_KERNEL_BACKWARD_DQ)
        FCL_TRY(fcl_plan_query(ctx, desc, FCL_KERNEL_BACKWARD_DKDV, &plan));
    if (desc->varlen) {
        size_t longest = 0;
        FCL_TRY(fcl_check_cu_seqlens_values(aux->cu_seqlens_q, desc->batch, desc->seqlen_q,
                                            desc->total_q, &longest));
        FCL_TRY(fcl_check_cu_seqlens_values(aux->cu_seqlens_k, desc->batch, desc->seqlen_k,
                                            desc->total_k, &longest));
    }
    memset(c, 0, sizeof *c);
    c->local = *desc;
    c->local.lse_offset = 0;
    c->n = n;
    fcl_layout *layouts[FCL_BACKWARD_TENSORS] = {&c->local.q,    &c->local.k,  &c->local.v,
                                                 &c->local.o,    &c->lse_layout, &c->local.dout,
                                                 &c->local.dq,   &c->local.dk, &c->local.dv,
                                                 &c->dsinks_layout};
    for (size_t i = 0; i < n; ++i)
        if (base[i] != NULL)
            FCL_TRY(fcl_host_range(&t[i], base[i], layouts[i], &c->h[i]));
    for (size_t i = 0; i < AUX_COUNT; ++i) {
        c->h[n + i].src = a[i].host;
        c->h[n + i].bytes = a[i].head_dim;
    }
    return FCL_OK;
}

/* Creates every buffer (copying the host bytes in), runs `run`, reads the
 * outputs back.  Nothing reaches the host outputs unless everything worked. */
static fcl_status run_on_host_arrays(fcl_context *ctx, host_call *c, run_fn run)
{
    fcl_host_tensor *ah = c->h + c->n;
    fcl_status st = fcl_host_upload(ctx, c->h, c->n + AUX_COUNT);
    /* the backward's tensor 9 is the sinks' gradient */
    const cl_mem dsinks = c->n == FCL_BACKWARD_TENSORS ? c->h[9].mem : NULL;
    const fcl_attention_aux aux = {ah[AUX_ALIBI].mem,     ah[AUX_CU_Q].mem,
                                   ah[AUX_CU_K].mem,      ah[AUX_BLOCKS].mem,
                                   ah[AUX_DESCALE_Q].mem, ah[AUX_DESCALE_K].mem,
                                   ah[AUX_DESCALE_V].mem, ah[AUX_SINKS].mem,
                                   dsinks};
    if (st == FCL_OK)
        st = run(ctx, &c->local, &aux, c->h);
    if (st == FCL_OK)
        st = clFinish(ctx->queue);
    if (st == FCL_OK)
        st = fcl_host_read_outputs(ctx, c->h, c->n);
    fcl_host_release(ctx, c->h, c->n + AUX_COUNT);
    return st;
}

/* ---- forward ------------------------------------------------------------- */

static fcl_status run_forward(fcl_context *ctx, const fcl_attention_desc *d,
                              const fcl_attention_aux *aux, fcl_host_tensor *h)
{
    return fcl_attention_forward_ex(ctx, d, aux, h[0].mem, h[1].mem, h[2].mem, h[3].mem, h[4].mem,
                                    0, NULL, NULL);
}

fcl_status fcl_attention_forward_host_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                         const fcl_attention_aux_host *aux, const void *q,
                                         const void *k, const void *v, void *o, float *lse)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_check_forward_desc(desc));
    const cl_mem none[FCL_FORWARD_TENSORS] = {NULL, NULL, NULL, NULL, NULL};
    fcl_tensor_ref t[FCL_FORWARD_TENSORS];
    fcl_forward_tensors(desc, none, t);
    const void *base[FCL_FORWARD_TENSORS] = {q, k, v, o, lse};
    host_call c;
    FCL_TRY(prepare(ctx, desc, FCL_KERNEL_FORWARD, t, base, FCL_FORWARD_TENSORS, aux, &c));
    return run_on_host_arrays(ctx, &c, run_forward);
}

fcl_status fcl_attention_forward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                      const void *q, const void *k, const void *v, void *o,
                                      float *lse)
{
    return fcl_attention_forward_host_ex(ctx, desc, NULL, q, k, v, o, lse);
}

/* ---- backward ------------------------------------------------------------ */

static fcl_status run_backward(fcl_context *ctx, const fcl_attention_desc *d,
                               const fcl_attention_aux *aux, fcl_host_tensor *h)
{
    return fcl_attention_backward_ex(ctx, d, aux, h[0].mem, h[1].mem, h[2].mem, h[3].mem, h[4].mem,
                                     h[5].mem, h[6].mem, h[7].mem, h[8].mem, 0, NULL, NULL);
}

fcl_status fcl_attention_backward_host_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                          const fcl_attention_aux_host *aux, const void *q,
                                          const void *k, const void *v, const void *o,
                                          const float *lse, const void *dout, void *dq, void *dk,
                                          void *dv)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        dout == NULL || dq == NULL || dk == NULL || dv == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (lse == NULL)
        return FCL_ERROR_MISSING_LSE;
    FCL_TRY(fcl_check_backward_desc(desc));
    const cl_mem none[FCL_BACKWARD_TENSORS] = {NULL};
    fcl_tensor_ref t[FCL_BACKWARD_TENSORS];
    fcl_backward_tensors(desc, none, t);
    float *dsinks = desc->sinks && aux != NULL ? aux->dsinks : NULL; /* else refused below */
    const void *base[FCL_BACKWARD_TENSORS] = {q, k, v, o, lse, dout, dq, dk, dv, dsinks};
    host_call c;
    FCL_TRY(prepare(ctx, desc, FCL_KERNEL_BACKWARD_DQ, t, base, FCL_BACKWARD_TENSORS, aux, &c));
    return run_on_host_arrays(ctx, &c, run_backward);
}

fcl_status fcl_attention_backward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                       const void *q, const void *k, const void *v,
                                       const void *o, const float *lse, const void *dout,
                                       void *dq, void *dk, void *dv)
{
    return fcl_attention_backward_host_ex(ctx, desc, NULL, q, k, v, o, lse, dout, dq, dk, dv);
}
