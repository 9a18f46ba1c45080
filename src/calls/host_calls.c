/* host_calls.c - the host-pointer conveniences: copy in, run, copy out, wait.
 * Each tensor travels as the byte range [offset, end of its last element);
 * outputs are copied in first too, so bytes between strided rows that the
 * kernel does not write come back unchanged, and come back through one
 * staging copy, so a failed read leaves every output as it was.  The aux
 * arrays (ALiBi slopes, cu_seqlens, block mask) travel whole. */
#include "internal.h"

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
    *rebased = t->layout;
    rebased->offset = 0;
    return FCL_OK;
}

/* Aux arrays, as inputs of known size (0 bytes: absent). */
enum { AUX_ALIBI, AUX_CU_Q, AUX_CU_K, AUX_BLOCKS, AUX_DESCALE_Q, AUX_DESCALE_K, AUX_DESCALE_V,
       AUX_COUNT };

static fcl_status aux_ranges(const fcl_attention_desc *d, const fcl_attention_aux_host *aux,
                             fcl_host_tensor h[AUX_COUNT])
{
    memset(h, 0, AUX_COUNT * sizeof *h);
    if (aux == NULL)
        return FCL_OK;
    if (d->alibi != FCL_ALIBI_NONE && aux->alibi_slopes != NULL) {
        const size_t n = d->alibi == FCL_ALIBI_PER_BATCH_HEAD ? d->batch * d->heads_q : d->heads_q;
        h[AUX_ALIBI].src = aux->alibi_slopes;
        h[AUX_ALIBI].bytes = n * sizeof(float);
    }
    if (d->varlen && aux->cu_seqlens_q != NULL && aux->cu_seqlens_k != NULL) {
        h[AUX_CU_Q].src = aux->cu_seqlens_q;
        h[AUX_CU_K].src = aux->cu_seqlens_k;
        h[AUX_CU_Q].bytes = h[AUX_CU_K].bytes = (d->batch + 1) * sizeof(int32_t);
    }
    if (d->block_m > 0 && d->block_n > 0 && aux->block_mask != NULL) {
        uint64_t bytes = 0;
        FCL_TRY(fcl_block_mask_bytes(d, &bytes));
        h[AUX_BLOCKS].src = aux->block_mask;
        h[AUX_BLOCKS].bytes = (size_t)bytes;
    }
    /* descales travel whatever the dtype: the call rejects them where unused */
    const float *descales[3] = {aux->descale_q, aux->descale_k, aux->descale_v};
    for (int i = 0; i < 3; ++i) {
        h[AUX_DESCALE_Q + i].src = descales[i];
        h[AUX_DESCALE_Q + i].bytes = d->batch * (i == 0 ? d->heads_q : d->heads_kv) * sizeof(float);
    }
    return FCL_OK;
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
        memcpy(h[i].dst, staged + at, h[i].bytes);
        at += h[i].bytes;
    }
    free(staged);
    return st;
}

typedef fcl_status (*run_fn)(fcl_context *ctx, const fcl_attention_desc *d,
                             const fcl_attention_aux *aux, fcl_host_tensor *h);

/* Creates every buffer (copying the host bytes in), runs `run`, reads the
 * outputs back.  Nothing reaches the host outputs unless everything worked. */
static fcl_status run_on_host_arrays(fcl_context *ctx, const fcl_attention_desc *d,
                                     fcl_host_tensor *h, size_t n, const fcl_attention_aux_host *aux_host,
                                     run_fn run)
{
    fcl_host_tensor ah[AUX_COUNT];
    fcl_status st = aux_ranges(d, aux_host, ah);
    for (size_t i = 0; i < n + AUX_COUNT && st == FCL_OK; ++i) {
        fcl_host_tensor *t = i < n ? &h[i] : &ah[i - n];
        if (t->src == NULL || t->bytes == 0)
            continue;
        cl_mem_flags flags = CL_MEM_COPY_HOST_PTR | (t->dst ? CL_MEM_READ_WRITE : CL_MEM_READ_ONLY);
        t->mem = fcl_buffer_create(ctx, flags, t->bytes, (void *)t->src, &st);
    }
    const fcl_attention_aux aux = {ah[AUX_ALIBI].mem,     ah[AUX_CU_Q].mem,
                                   ah[AUX_CU_K].mem,      ah[AUX_BLOCKS].mem,
                                   ah[AUX_DESCALE_Q].mem, ah[AUX_DESCALE_K].mem,
                                   ah[AUX_DESCALE_V].mem};
    if (st == FCL_OK)
        st = run(ctx, d, &aux, h);
    if (st == FCL_OK)
        st = clFinish(ctx->queue);
    if (st == FCL_OK)
        st = fcl_host_read_outputs(ctx, h, n);
    for (size_t i = 0; i < n; ++i)
        fcl_buffer_release(ctx, h[i].mem, h[i].bytes);
    for (size_t i = 0; i < AUX_COUNT; ++i)
        fcl_buffer_release(ctx, ah[i].mem, ah[i].bytes);
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
    FCL_TRY(fcl_validate_desc(desc));
    const cl_mem none[FCL_FORWARD_TENSORS] = {NULL, NULL, NULL, NULL, NULL};
    fcl_tensor_ref t[FCL_FORWARD_TENSORS];
    fcl_forward_tensors(desc, none, t);
    FCL_TRY(fcl_validate_tensors(ctx, t, FCL_FORWARD_TENSORS));
    const void *base[FCL_FORWARD_TENSORS] = {q, k, v, o, lse};
    fcl_attention_desc local = *desc;
    fcl_layout *layouts[FCL_FORWARD_TENSORS] = {&local.q, &local.k, &local.v, &local.o, NULL};
    fcl_layout lse_layout;
    fcl_host_tensor h[FCL_FORWARD_TENSORS];
    memset(h, 0, sizeof h);
    for (int i = 0; i < FCL_FORWARD_TENSORS; ++i)
        if (base[i] != NULL)
            FCL_TRY(fcl_host_range(&t[i], base[i], layouts[i] ? layouts[i] : &lse_layout, &h[i]));
    local.lse_offset = 0;
    return run_on_host_arrays(ctx, &local, h, FCL_FORWARD_TENSORS, aux, run_forward);
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
    FCL_TRY(fcl_validate_desc(desc));
    FCL_TRY(fcl_require_no_fp8(desc->dtype));
    const cl_mem none[FCL_BACKWARD_TENSORS] = {NULL};
    fcl_tensor_ref t[FCL_BACKWARD_TENSORS];
    fcl_backward_tensors(desc, none, t);
    FCL_TRY(fcl_validate_tensors(ctx, t, FCL_BACKWARD_TENSORS));
    const void *base[FCL_BACKWARD_TENSORS] = {q, k, v, o, lse, dout, dq, dk, dv};
    fcl_attention_desc local = *desc;
    fcl_layout lse_layout;
    fcl_layout *layouts[FCL_BACKWARD_TENSORS] = {&local.q,    &local.k,  &local.v,
                                                 &local.o,    &lse_layout, &local.dout,
                                                 &local.dq,   &local.dk, &local.dv};
    fcl_host_tensor h[FCL_BACKWARD_TENSORS];
    memset(h, 0, sizeof h);
    for (int i = 0; i < FCL_BACKWARD_TENSORS; ++i)
        FCL_TRY(fcl_host_range(&t[i], base[i], layouts[i], &h[i]));
    local.lse_offset = 0;
    return run_on_host_arrays(ctx, &local, h, FCL_BACKWARD_TENSORS, aux, run_backward);
}

fcl_status fcl_attention_backward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                       const void *q, const void *k, const void *v,
                                       const void *o, const float *lse, const void *dout,
                                       void *dq, void *dk, void *dv)
{
    return fcl_attention_backward_host_ex(ctx, desc, NULL, q, k, v, o, lse, dout, dq, dk, dv);
}
