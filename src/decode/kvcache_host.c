/* kvcache_host.c - the KV-cache call on host arrays: cache lengths and the
 * page table are checked here, on the host, before anything is copied, so a
 * bad entry is a status and nothing changes; then the arrays travel as in
 * host_calls.c (caches back only when rows were appended). */
#include "internal.h"

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

enum { AUX_LENS, AUX_PAGES, AUX_ALIBI, AUX_DESCALE_Q, AUX_DESCALE_K, AUX_DESCALE_V, AUX_COUNT };

fcl_status fcl_attention_kvcache_host(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                      const fcl_kvcache_host *a)
{
    if (ctx == NULL || desc == NULL || a == NULL || a->q == NULL || a->k_cache == NULL ||
        a->v_cache == NULL || a->o == NULL || a->cache_seqlens == NULL ||
        (desc->page_size > 0 && a->page_table == NULL) ||
        (desc->seqlen_new > 0 && (a->k_new == NULL || a->v_new == NULL)) ||
        (desc->alibi != FCL_ALIBI_NONE && a->alibi_slopes == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_kvcache_validate_desc(desc));
    FCL_TRY(check_cache_entries(desc, a->cache_seqlens, a->page_table));

    /* the tensors, in fcl_kvcache_tensors' order, re-based to offset 0 */
    fcl_kvcache_desc local = *desc;
    const fcl_kvcache_buffers none = {.lse = a->lse != NULL ? (cl_mem)1 : NULL};
    fcl_tensor_ref t[FCL_KVCACHE_TENSORS];
    size_t n = 0;
    fcl_kvcache_tensors(desc, &none, t, &n);
    for (size_t i = 0; i < n; ++i)
        t[i].mem = NULL; /* the library allocates the buffers */
    FCL_TRY(fcl_validate_tensors(ctx, t, n));
    const void *base[FCL_KVCACHE_TENSORS] = {a->q, a->o, a->k_cache, a->v_cache};
    fcl_layout *layouts[FCL_KVCACHE_TENSORS] = {&local.q, &local.o, &local.k_cache, &local.v_cache};
    size_t next = 4;
    if (desc->seqlen_new > 0) {
        base[next] = a->k_new;
        layouts[next++] = &local.k_new;
        base[next] = a->v_new;
        layouts[next++] = &local.v_new;
    }
    fcl_layout lse_layout;
    if (a->lse != NULL) {
        base[next] = a->lse;
        layouts[next++] = &lse_layout;
    }
    fcl_host_tensor h[FCL_KVCACHE_TENSORS + AUX_COUNT];
    memset(h, 0, sizeof h);
    for (size_t i = 0; i < n; ++i)
        FCL_TRY(fcl_host_range(&t[i], base[i], layouts[i], &h[i]));
    local.lse_offset = 0;
    /* the aux arrays, whole */
    h[n + AUX_LENS].src = a->cache_seqlens;
    h[n + AUX_LENS].bytes = desc->batch * sizeof(int32_t);
    if (desc->page_size > 0) {
        h[n + AUX_PAGES].src = a->page_table;
        h[n + AUX_PAGES].bytes = (size_t)fcl_kvcache_page_table_entries(desc) * sizeof(int32_t);
    }
    if (desc->alibi != FCL_ALIBI_NONE) {
        h[n + AUX_ALIBI].src = a->alibi_slopes;
        h[n + AUX_ALIBI].bytes =
            (desc->alibi == FCL_ALIBI_PER_BATCH_HEAD ? desc->batch : 1) * desc->heads_q * sizeof(float);
    }
    /* descales travel whatever the dtype: the call rejects them where unused */
    const float *descales[3] = {a->descale_q, a->descale_k, a->descale_v};
    for (int i = 0; i < 3; ++i) {
        h[n + AUX_DESCALE_Q + i].src = descales[i];
        h[n + AUX_DESCALE_Q + i].bytes =
            desc->batch * (i == 0 ? desc->heads_q : desc->heads_kv) * sizeof(float);
    }

    fcl_status st = FCL_OK;
    for (size_t i = 0; i < n + AUX_COUNT && st == FCL_OK; ++i) {
        if (h[i].src == NULL || h[i].bytes == 0)
            continue;
        const cl_mem_flags flags =
            CL_MEM_COPY_HOST_PTR | (h[i].dst ? CL_MEM_READ_WRITE : CL_MEM_READ_ONLY);
        h[i].mem = fcl_buffer_create(ctx, flags, h[i].bytes, (void *)h[i].src, &st);
    }
    if (st == FCL_OK) {
        const fcl_kvcache_buffers b = {h[0].mem, h[2].mem, h[3].mem, h[n + AUX_LENS].mem,
                                       h[n + AUX_PAGES].mem,
                                       desc->seqlen_new > 0 ? h[4].mem : NULL,
                                       desc->seqlen_new > 0 ? h[5].mem : NULL,
                                       h[n + AUX_ALIBI].mem, h[1].mem,
                                       a->lse != NULL ? h[n - 1].mem : NULL,
                                       h[n + AUX_DESCALE_Q].mem, h[n + AUX_DESCALE_K].mem,
                                       h[n + AUX_DESCALE_V].mem};
        st = fcl_attention_kvcache(ctx, &local, &b, 0, NULL, NULL);
    }
    if (st == FCL_OK)
        st = clFinish(ctx->queue);
    if (st == FCL_OK)
        st = fcl_host_read_outputs(ctx, h, n);
    for (size_t i = 0; i < n + AUX_COUNT; ++i)
        fcl_buffer_release(ctx, h[i].mem, h[i].bytes);
    return st;
}
