/* kvcache_host.c - the KV-cache call on host arrays.  Everything that needs
 * no array is checked first (the descriptor, the tensors' strides and
 * footprints, which arrays are given, the plan), then the cache lengths and
 * the page table are read and checked on the host, and only then is
 * anything copied: a refused call reads no other array and changes none.
 * The arrays then travel as in host_calls.c (caches back only when rows
 * were appended, and only their elements' bytes). */
#include "decode/decode.h"

#include <string.h>

/* Every sequence's length, with its appended rows, fits its cache, and
 * every page it uses is in the cache. */
static fcl_status check_cache_entries(const fcl_kvcache_desc *d, const int32_t *lens,
                                      const int32_t *pages)
{
    const size_t capacity = fcl_kvcache_capacity(d);
    for (size_t b = 0; b < d->batch; ++b) {
        if (lens[b] < 0 || (size_t)lens[b] + d->seqlen_new > capacity)
            return FCL_ERROR_INVALID_CACHE_SEQLENS;
        if (d->page_size == 0)
            continue;
        const size_t used = ((size_t)lens[b] + d->seqlen_new + d->page_size - 1) / d->page_size;
        for (size_t p = 0; p < used; ++p) {
            const int32_t page = pages[b * d->page_table_stride + p];
            if (page < 0 || (size_t)page >= d->num_pages)
                return FCL_ERROR_INVALID_PAGE_TABLE;
        }
    }
    return FCL_OK;
}

enum {
    AUX_LENS, AUX_PAGES, AUX_ALIBI, AUX_DESCALE_Q, AUX_DESCALE_K, AUX_DESCALE_V, AUX_SINKS,
    AUX_ROTARY_COS, AUX_ROTARY_SIN, AUX_COUNT
};

/* The aux arrays the call reads, as one-byte tensors of their host arrays
 * (absent ones have no array), in the order of fcl_kvcache_buffers. */
static void aux_refs(const fcl_kvcache_desc *d, const fcl_kvcache_host *a,
                     fcl_tensor_ref aux[AUX_COUNT])
{
    uint64_t bytes[AUX_COUNT] = {0};
    const void *arrays[AUX_COUNT] = {a->cache_seqlens, NULL, NULL, a->descale_q, a->descale_k,
                                     a->descale_v, a->sinks, a->rotary_cos, a->rotary_sin};
    bytes[AUX_LENS] = d->batch * sizeof(int32_t);
    if (d->page_size > 0) {
        arrays[AUX_PAGES] = a->page_table;
        bytes[AUX_PAGES] = fcl_kvcache_page_table_entries(d) * sizeof(int32_t);
    }
    if (d->alibi != FCL_ALIBI_NONE) {
        arrays[AUX_ALIBI] = a->alibi_slopes;
        bytes[AUX_ALIBI] =
            (d->alibi == FCL_ALIBI_PER_BATCH_HEAD ? d->batch : 1) * d->heads_q * sizeof(float);
    }
    for (int i = 0; i < 3; ++i)
        bytes[AUX_DESCALE_Q + i] = d->batch * (i == 0 ? d->heads_q : d->heads_kv) * sizeof(float);
    bytes[AUX_SINKS] = d->heads_q * sizeof(float);
    bytes[AUX_ROTARY_COS] = bytes[AUX_ROTARY_SIN] = fcl_kvcache_rotary_bytes(d);
    for (int i = 0; i < AUX_COUNT; ++i) {
        aux[i] = fcl_aux_ref(NULL, arrays[i] != NULL ? bytes[i] : 0);
        aux[i].host = arrays[i];
    }
}

fcl_status fcl_attention_kvcache_host(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                      const fcl_kvcache_host *a)
{
    if (ctx == NULL || desc == NULL || a == NULL || a->q == NULL || a->k_cache == NULL ||
        a->o == NULL || a->cache_seqlens == NULL ||
        (desc->page_size > 0 && a->page_table == NULL) ||
        (desc->seqlen_new > 0 && a->k_new == NULL) ||
        (!desc->shared_kv && fcl_kvcache_check_v_given(desc, a->v_cache != NULL,
                                                       a->v_new != NULL) != FCL_OK) ||
        (desc->rotary_dim > 0 && (a->rotary_cos == NULL || a->rotary_sin == NULL)))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_kvcache_check_desc(desc));
    FCL_TRY(fcl_kvcache_check_v_given(desc, a->v_cache != NULL, a->v_new != NULL));

    /* the tensors, in fcl_kvcache_tensors' order, on their host arrays
     * (no V tensors with a shared cache) */
    const fcl_kvcache_buffers none = {.lse = a->lse != NULL ? (cl_mem)1 : NULL};
    fcl_tensor_ref t[FCL_KVCACHE_TENSORS];
    size_t n = 0;
    fcl_kvcache_tensors(desc, &none, t, &n);
    const void *base[FCL_KVCACHE_TENSORS] = {a->q, a->o, a->k_cache};
    fcl_kvcache_desc local = *desc;
    fcl_layout *layouts[FCL_KVCACHE_TENSORS] = {&local.q, &local.o, &local.k_cache};
    size_t next = 3;
    int at_v_cache = -1, at_k_new = -1, at_v_new = -1;
    if (!desc->shared_kv) {
        at_v_cache = (int)next;
        base[next] = a->v_cache;
        layouts[next++] = &local.v_cache;
    }
    if (desc->seqlen_new > 0) {
        at_k_new = (int)next;
        base[next] = a->k_new;
        layouts[next++] = &local.k_new;
    }
    if (desc->seqlen_new > 0 && !desc->shared_kv) {
        at_v_new = (int)next;
        base[next] = a->v_new;
        layouts[next++] = &local.v_new;
    }
    fcl_layout lse_layout;
    if (a->lse != NULL) {
        base[next] = a->lse;
        layouts[next++] = &lse_layout;
    }
    for (size_t i = 0; i < n; ++i) {
        t[i].mem = NULL; /* the library allocates the buffers */
        t[i].host = base[i];
    }
    FCL_TRY(fcl_validate_tensors(ctx, t, n));
    /* which aux arrays are given, and that no output meets one, as the
     * cl_mem call checks its buffers */
    fcl_tensor_ref aux[AUX_COUNT];
    aux_refs(desc, a, aux);
    if (desc->alibi != FCL_ALIBI_NONE && a->alibi_slopes == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (!fcl_dtype_is_fp8(desc->dtype) &&
        (a->descale_q != NULL || a->descale_k != NULL || a->descale_v != NULL))
        return FCL_ERROR_INVALID_VALUE;
    if (desc->sinks ? a->sinks == NULL : a->sinks != NULL)
        return desc->sinks ? FCL_ERROR_NULL_ARGUMENT : FCL_ERROR_INVALID_VALUE;
    if (desc->rotary_dim == 0 && (a->rotary_cos != NULL || a->rotary_sin != NULL))
        return FCL_ERROR_INVALID_VALUE;
    FCL_TRY(fcl_validate_apart(ctx, t, n, aux, AUX_COUNT));
    fcl_plan plan; /* built now: a failed build or plan is a refusal too */
    FCL_TRY(fcl_kvcache_plan_query(ctx, desc, &plan));
    /* the arrays whose contents are checked, the only ones read so far */
    FCL_TRY(check_cache_entries(desc, a->cache_seqlens, a->page_table));

    fcl_host_tensor h[FCL_KVCACHE_TENSORS + AUX_COUNT];
    memset(h, 0, sizeof h);
    for (size_t i = 0; i < n; ++i)
        FCL_TRY(fcl_host_range(&t[i], base[i], layouts[i], &h[i]));
    local.lse_offset = 0;
    for (size_t i = 0; i < AUX_COUNT; ++i) {
        h[n + i].src = aux[i].host;
        h[n + i].bytes = aux[i].head_dim;
    }
    fcl_status st = fcl_host_upload(ctx, h, n + AUX_COUNT);
    if (st == FCL_OK) {
        const fcl_kvcache_buffers b = {.q = h[0].mem,
                                       .k_cache = h[2].mem,
                                       .v_cache = at_v_cache >= 0 ? h[at_v_cache].mem : NULL,
                                       .cache_seqlens = h[n + AUX_LENS].mem,
                                       .page_table = h[n + AUX_PAGES].mem,
                                       .k_new = at_k_new >= 0 ? h[at_k_new].mem : NULL,
                                       .v_new = at_v_new >= 0 ? h[at_v_new].mem : NULL,
                                       .alibi_slopes = h[n + AUX_ALIBI].mem,
                                       .o = h[1].mem,
                                       .lse = a->lse != NULL ? h[n - 1].mem : NULL,
                                       .descale_q = h[n + AUX_DESCALE_Q].mem,
                                       .descale_k = h[n + AUX_DESCALE_K].mem,
                                       .descale_v = h[n + AUX_DESCALE_V].mem,
                                       .sinks = h[n + AUX_SINKS].mem,
                                       .rotary_cos = h[n + AUX_ROTARY_COS].mem,
                                       .rotary_sin = h[n + AUX_ROTARY_SIN].mem};
        st = fcl_attention_kvcache(ctx, &local, &b, 0, NULL, NULL);
    }
    if (st == FCL_OK)
        st = clFinish(ctx->queue);
    if (st == FCL_OK)
        st = fcl_host_read_outputs(ctx, h, n);
    fcl_host_release(ctx, h, n + AUX_COUNT);
    return st;
}
