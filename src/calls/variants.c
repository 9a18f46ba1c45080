/* variants.c - the attention variants of one call (window, softcap, ALiBi,
 * dropout, packed sequences, block-sparse mask): checked, and put in the form
 * the kernels take, including the FCL_FEATURES bits they are compiled with. */
#include "calls/calls.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A window at least as long as both sequences is no window; this also keeps
 * the kernels' int arithmetic on windows far from overflow. */
static int kernel_window(int64_t w, size_t longest)
{
    if (w < 0 || (uint64_t)w >= longest)
        return -1;
    return (int)w;
}

fcl_status fcl_block_mask_bytes(const fcl_attention_desc *d, uint64_t *bytes)
{
    const uint64_t nbm = (d->seqlen_q + d->block_m - 1) / d->block_m;
    const uint64_t nbn = (d->seqlen_k + d->block_n - 1) / d->block_n;
    uint64_t total = 0;
    /* the strides are the kernels' 64-bit signed offsets: no more than INT64_MAX in all */
    if (!fcl_add_product(&total, d->batch - 1, d->block_mask_stride_batch) ||
        !fcl_add_product(&total, d->heads_q - 1, d->block_mask_stride_head) ||
        !fcl_add_product(&total, nbm, nbn) || total > (uint64_t)INT64_MAX)
        return FCL_ERROR_INVALID_SHAPE;
    *bytes = total;
    return FCL_OK;
}

/* Size and context of an aux buffer. */
fcl_status fcl_check_aux_buffer(const fcl_context *ctx, cl_mem mem, uint64_t bytes)
{
    if (mem == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    cl_context owner = NULL;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS)
        err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return err;
    if (owner != ctx->cl_ctx)
        return FCL_ERROR_WRONG_CONTEXT;
    return (uint64_t)size < bytes ? FCL_ERROR_BUFFER_TOO_SMALL : FCL_OK;
}

fcl_status fcl_check_cu_seqlens_values(const int32_t *cu, size_t batch, size_t max_len,
                                       size_t total, size_t *longest)
{
    if (cu[0] != 0)
        return FCL_ERROR_INVALID_CU_SEQLENS;
    *longest = 0;
    for (size_t b = 0; b < batch; ++b) {
        if (cu[b + 1] < cu[b] || (size_t)(cu[b + 1] - cu[b]) > max_len)
            return FCL_ERROR_INVALID_CU_SEQLENS;
        if ((size_t)(cu[b + 1] - cu[b]) > *longest)
            *longest = (size_t)(cu[b + 1] - cu[b]);
    }
    return (size_t)cu[batch] > total ? FCL_ERROR_INVALID_CU_SEQLENS : FCL_OK;
}

/* Reads cu_seqlens back (after the wait list) and checks them. */
static fcl_status check_cu_seqlens(fcl_context *ctx, cl_mem mem, size_t batch, size_t max_len,
                                   size_t total, cl_uint num_wait, const cl_event *wait,
                                   size_t *longest)
{
    FCL_TRY(fcl_check_aux_buffer(ctx, mem, (uint64_t)(batch + 1) * sizeof(cl_int)));
    cl_int *cu = fcl_host_malloc((batch + 1) * sizeof *cu);
    if (cu == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    fcl_status st = clEnqueueReadBuffer(ctx->queue, mem, CL_TRUE, 0, (batch + 1) * sizeof *cu, cu,
                                        num_wait, wait, NULL);
    if (st == FCL_OK)
        st = fcl_check_cu_seqlens_values(cu, batch, max_len, total, longest);
    free(cu);
    return st;
}

fcl_status fcl_variants_check_settings(const fcl_attention_desc *d)
{
    if (d->window_left < -1 || d->window_right < -1)
        return FCL_ERROR_INVALID_VALUE;
    if (!isfinite(d->softcap) || d->softcap < 0.0f)
        return FCL_ERROR_INVALID_VALUE;
    if (d->alibi != FCL_ALIBI_NONE && d->alibi != FCL_ALIBI_PER_HEAD &&
        d->alibi != FCL_ALIBI_PER_BATCH_HEAD)
        return FCL_ERROR_INVALID_VALUE;
    if (!(d->dropout_p >= 0.0f && d->dropout_p < 1.0f)) /* NaN fails too */
        return FCL_ERROR_INVALID_VALUE;
    if (d->varlen != 0 && d->varlen != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (d->sinks != 0 && d->sinks != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (d->block_m != 0 || d->block_n != 0) {
        if (d->block_m == 0 || d->block_n == 0 || d->block_m > d->seqlen_q ||
            d->block_n > d->seqlen_k)
            return FCL_ERROR_INVALID_VALUE;
        uint64_t bytes = 0;
        FCL_TRY(fcl_block_mask_bytes(d, &bytes));
    }
    return FCL_OK;
}

/* Whether d's mask is causal: `causal`, or window_right = 0 (the same
 * bound; a left window may narrow either). */
static bool variants_causal(const fcl_attention_desc *d)
{
    return d->causal || d->window_right == 0;
}

/* Whether d has no mask at all: not causal, no window on either side. */
static bool variants_unmasked(const fcl_attention_desc *d)
{
    return !variants_causal(d) && d->window_left < 0 && d->window_right < 0;
}

unsigned fcl_variants_wgmma_tile(const fcl_attention_desc *d, fcl_kernel_kind kind,
                                 bool fused_dq)
{
    const bool causal = variants_causal(d);
    if (kind == FCL_KERNEL_FORWARD) {
        if (d->head_dim != 64 || fcl_dtype_is_fp8(d->dtype))
            return 0;
        if (d->seqlen_k <= (causal ? FCL_WG_SHORT_CAUSAL_KEYS : FCL_WG_SHORT_KEYS))
            return FCL_BUILD_WG_SHORT;
        const bool long_causal =
            causal && d->window_left < 0 && d->seqlen_k > FCL_WG_LONG_CAUSAL_KEYS;
        return variants_unmasked(d) || long_causal ? FCL_BUILD_WG_LONG : 0;
    }
    if (kind == FCL_KERNEL_BACKWARD_DKDV && d->head_dim == 128 && !fused_dq) {
        /* the query rows a key block visits */
        const size_t rows = causal ? (d->seqlen_q + 1) / 2 : d->seqlen_q;
        return rows <= FCL_WG_FEW_ROWS ? FCL_BUILD_WG_SHORT : 0;
    }
    if (kind == FCL_KERNEL_BACKWARD_DQ && d->head_dim == 64) {
        return variants_unmasked(d) && d->seqlen_k > FCL_WG_DQ_LONG_KEYS ? FCL_BUILD_WG_LONG : 0;
    }
    return 0;
}

unsigned fcl_variants_whole_tiles(const fcl_attention_desc *d, fcl_kernel_kind kind,
                                  unsigned features)
{
    const unsigned per_sequence = FCL_FEAT_VARLEN | FCL_FEAT_BLOCKMASK | FCL_FEAT_KVCACHE;
    /* the forward's tile for many keys read 0.98-0.99x so (NOTES.md, run
     * 65): it keeps its tests */
    const bool many_keys_forward = kind == FCL_KERNEL_FORWARD && (features & FCL_BUILD_WG_LONG);
    /* mma.sync's kernels at head_dim 64 only: at 128 its backward read
     * 0.89-0.90x so (run 66) */
    const bool piece = (features & FCL_BUILD_WGMMA) ||
                       ((features & FCL_BUILD_TILE_MMA) && d->head_dim == 64);
    return piece && variants_unmasked(d) && !(features & per_sequence) &&
                   !many_keys_forward && d->seqlen_k % FCL_WHOLE_TILE_KEYS == 0
               ? FCL_BUILD_WHOLE_TILES
               : 0;
}

unsigned fcl_variants_features(const fcl_attention_desc *d)
{
    unsigned f = 0;
    if (d->softcap > 0.0f)
        f |= FCL_FEAT_SOFTCAP;
    if (d->alibi != FCL_ALIBI_NONE)
        f |= FCL_FEAT_ALIBI;
    if (d->dropout_p > 0.0f)
        f |= FCL_FEAT_DROPOUT;
    if (d->varlen)
        f |= FCL_FEAT_VARLEN;
    if (d->block_m != 0)
        f |= FCL_FEAT_BLOCKMASK;
    return f;
}

fcl_status fcl_variants_prepare(fcl_context *ctx, const fcl_attention_desc *d,
                                const fcl_attention_aux *aux, cl_uint num_wait,
                                const cl_event *wait, fcl_variants *v)
{
    static const fcl_attention_aux no_aux;
    if (aux == NULL)
        aux = &no_aux;
    memset(v, 0, sizeof *v);
    FCL_TRY(fcl_variants_check_settings(d));
    v->features = fcl_variants_features(d);

    const size_t longest = d->seqlen_q > d->seqlen_k ? d->seqlen_q : d->seqlen_k;
    v->window_left = kernel_window(d->window_left, longest);
    v->window_right = d->causal ? 0 : kernel_window(d->window_right, longest);
    v->softcap = d->softcap > 0.0f ? d->softcap : 1.0f;

    if (d->alibi != FCL_ALIBI_NONE) {
        const size_t n = d->alibi == FCL_ALIBI_PER_HEAD ? d->heads_q : d->batch * d->heads_q;
        FCL_TRY(fcl_check_aux_buffer(ctx, aux->alibi_slopes, (uint64_t)n * sizeof(float)));
        v->aux[v->num_aux++] = fcl_aux_ref(aux->alibi_slopes, (uint64_t)n * sizeof(float));
        v->alibi = aux->alibi_slopes;
        v->alibi_stride_batch = d->alibi == FCL_ALIBI_PER_HEAD ? 0 : (int64_t)d->heads_q;
    }

    if (d->dropout_p > 0.0f) {
        const double t = floor((double)d->dropout_p * 4294967296.0 + 0.5);
        v->dropout_threshold = t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
        v->keep_scale = (float)(1.0 / (1.0 - (double)d->dropout_p));
        v->seed_lo = (uint32_t)(d->dropout_seed & 0xFFFFFFFFu);
        v->seed_hi = (uint32_t)(d->dropout_seed >> 32);
        v->dropout_offset = d->dropout_offset;
    }

    v->lse_rows = (int)d->seqlen_q;
    v->longest_q = d->seqlen_q;
    v->longest_k = d->seqlen_k;
    if (d->varlen) {
        FCL_TRY(check_cu_seqlens(ctx, aux->cu_seqlens_q, d->batch, d->seqlen_q, d->total_q,
                                 num_wait, wait, &v->longest_q));
        FCL_TRY(check_cu_seqlens(ctx, aux->cu_seqlens_k, d->batch, d->seqlen_k, d->total_k,
                                 num_wait, wait, &v->longest_k));
        const uint64_t cu_bytes = (uint64_t)(d->batch + 1) * sizeof(cl_int);
        v->aux[v->num_aux++] = fcl_aux_ref(aux->cu_seqlens_q, cu_bytes);
        v->aux[v->num_aux++] = fcl_aux_ref(aux->cu_seqlens_k, cu_bytes);
        v->cu_q = aux->cu_seqlens_q;
        v->cu_k = aux->cu_seqlens_k;
        v->lse_rows = (int)d->total_q;
    }

    if (d->block_m != 0) {
        uint64_t bytes = 0;
        FCL_TRY(fcl_block_mask_bytes(d, &bytes));
        FCL_TRY(fcl_check_aux_buffer(ctx, aux->block_mask, bytes));
        v->aux[v->num_aux++] = fcl_aux_ref(aux->block_mask, bytes);
        v->block_mask = aux->block_mask;
        v->block_mask_stride_batch = (int64_t)d->block_mask_stride_batch;
        v->block_mask_stride_head = (int64_t)d->block_mask_stride_head;
        v->block_m = (int)d->block_m;
        v->block_n = (int)d->block_n;
        v->block_nbn = (int)((d->seqlen_k + d->block_n - 1) / d->block_n);
    }

    /* FP8 descales: per (batch, query head) for Q, per (batch, K/V head)
     * for K and V; NULL stands for 1.0 */
    const cl_mem descales[3] = {aux->descale_q, aux->descale_k, aux->descale_v};
    cl_mem *kept[3] = {&v->descale_q, &v->descale_k, &v->descale_v};
    for (int i = 0; i < 3; ++i) {
        if (descales[i] == NULL)
            continue;
        if (!fcl_dtype_is_fp8(d->dtype))
            return FCL_ERROR_INVALID_VALUE;
        const uint64_t n = (uint64_t)d->batch * (i == 0 ? d->heads_q : d->heads_kv);
        FCL_TRY(fcl_check_aux_buffer(ctx, descales[i], n * sizeof(float)));
        *kept[i] = descales[i];
        v->aux[v->num_aux++] = fcl_aux_ref(descales[i], n * sizeof(float));
    }

    /* sinks: heads_q logits; dsinks (the backward's output) is checked
     * with the call's tensors, and only allowed with sinks */
    if (!d->sinks && (aux->sinks != NULL || aux->dsinks != NULL))
        return FCL_ERROR_INVALID_VALUE;
    if (d->sinks) {
        const uint64_t bytes = (uint64_t)d->heads_q * sizeof(float);
        FCL_TRY(fcl_check_aux_buffer(ctx, aux->sinks, bytes));
        v->aux[v->num_aux++] = fcl_aux_ref(aux->sinks, bytes);
        v->sinks = aux->sinks;
    }
    return FCL_OK;
}

void fcl_arg_variants(fcl_args *a, const fcl_variants *v)
{
    fcl_arg_mem(a, v->cu_q);
    fcl_arg_mem(a, v->cu_k);
    fcl_arg_float(a, v->softcap);
    fcl_arg_mem(a, v->alibi);
    fcl_arg_long(a, v->alibi_stride_batch);
    fcl_arg_uint(a, v->seed_lo);
    fcl_arg_uint(a, v->seed_hi);
    fcl_arg_uint(a, v->dropout_offset);
    fcl_arg_uint(a, v->dropout_threshold);
    fcl_arg_float(a, v->keep_scale);
    fcl_arg_mem(a, v->block_mask);
    fcl_arg_long(a, v->block_mask_stride_batch);
    fcl_arg_long(a, v->block_mask_stride_head);
    fcl_arg_int(a, v->block_m);
    fcl_arg_int(a, v->block_n);
    fcl_arg_int(a, v->block_nbn);
}
