/* kvcache.c - the KV-cache call: checked, then the append of new rows
 * (cl/kvcache.cl) when there are any, the forward kernel on the cache
 * (decode plan, GQA packing, paged K/V, split-KV, each sequence's cache
 * checked by the work-groups that read it) and the merge of its chunks. */
#include "decode/decode.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sequences index keys with int, and pages hold at most this many keys. */
#define MAX_KEYS ((size_t)INT_MAX / 2)
#define MAX_PAGE_SIZE ((size_t)1024)

void fcl_kvcache_desc_init(fcl_kvcache_desc *desc, size_t batch, size_t heads_q, size_t heads_kv,
                           size_t head_dim, size_t seqlen_q, size_t seqlen_new, fcl_dtype dtype)
{
    if (desc == NULL)
        return;
    memset(desc, 0, sizeof *desc);
    desc->batch = batch;
    desc->heads_q = heads_q;
    desc->heads_kv = heads_kv;
    desc->head_dim = head_dim;
    desc->seqlen_q = seqlen_q;
    desc->seqlen_new = seqlen_new;
    desc->dtype = dtype;
    desc->out_dtype = fcl_default_out_dtype(dtype);
    desc->window_left = -1;
    desc->window_right = -1;
    desc->alibi = FCL_ALIBI_NONE;
    desc->q = desc->o = fcl_layout_contiguous(FCL_LAYOUT_BSHD, heads_q, seqlen_q, head_dim);
    desc->k_new = desc->v_new = fcl_layout_contiguous(FCL_LAYOUT_BSHD, heads_kv, seqlen_new, head_dim);
}

void fcl_kvcache_desc_set_contiguous(fcl_kvcache_desc *desc, size_t cache_seqlen)
{
    if (desc == NULL)
        return;
    desc->page_size = 0;
    desc->cache_seqlen = cache_seqlen;
    desc->num_pages = desc->max_pages_per_seq = desc->page_table_stride = 0;
    desc->k_cache = desc->v_cache =
        fcl_layout_contiguous(FCL_LAYOUT_BSHD, desc->heads_kv, cache_seqlen, desc->head_dim);
}

void fcl_kvcache_desc_set_paged(fcl_kvcache_desc *desc, size_t num_pages, size_t page_size,
                                size_t max_pages_per_seq)
{
    if (desc == NULL)
        return;
    desc->page_size = page_size;
    desc->cache_seqlen = 0;
    desc->num_pages = num_pages;
    desc->max_pages_per_seq = max_pages_per_seq;
    desc->page_table_stride = max_pages_per_seq;
    desc->k_cache = desc->v_cache =
        fcl_layout_contiguous(FCL_LAYOUT_BSHD, desc->heads_kv, page_size, desc->head_dim);
}

size_t fcl_kvcache_capacity(const fcl_kvcache_desc *d)
{
    return d->page_size == 0 ? d->cache_seqlen : d->max_pages_per_seq * d->page_size;
}

fcl_status fcl_kvcache_check_desc(const fcl_kvcache_desc *d)
{
    if (d == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (d->batch == 0 || d->heads_q == 0 || d->heads_kv == 0 || d->head_dim == 0 ||
        d->seqlen_q == 0)
        return FCL_ERROR_INVALID_SHAPE;
    if (d->page_size > MAX_PAGE_SIZE)
        return FCL_ERROR_INVALID_VALUE;
    if (d->page_size == 0 ? d->cache_seqlen == 0
                          : (d->num_pages == 0 || d->max_pages_per_seq == 0 ||
                             d->num_pages > (size_t)INT_MAX ||
                             d->max_pages_per_seq > MAX_KEYS ||
                             d->page_table_stride < d->max_pages_per_seq))
        return FCL_ERROR_INVALID_SHAPE;
    const size_t capacity = fcl_kvcache_capacity(d);
    if (capacity > MAX_KEYS || d->seqlen_new > capacity || d->seqlen_q > MAX_KEYS)
        return FCL_ERROR_INVALID_SHAPE;
    /* heads, dtype, scale, causal, splits; window, softcap, the ALiBi mode */
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(d);
    return fcl_check_forward_desc(&fwd);
}

/* The forward problem of a KV-cache call: K/V are the caches, each sequence
 * holding up to `capacity` keys. */
fcl_attention_desc fcl_kvcache_as_forward(const fcl_kvcache_desc *d)
{
    fcl_attention_desc a;
    fcl_attention_desc_init(&a, d->batch, d->heads_q, d->heads_kv, d->seqlen_q,
                            fcl_kvcache_capacity(d), d->head_dim, d->dtype, FCL_LAYOUT_BSHD);
    a.softmax_scale = d->softmax_scale;
    a.causal = d->causal;
    a.q = d->q;
    a.o = d->o;
    a.k = d->k_cache;
    a.v = d->v_cache;
    a.lse_offset = d->lse_offset;
    a.window_left = d->window_left;
    a.window_right = d->window_right;
    a.softcap = d->softcap;
    a.alibi = d->alibi;
    a.num_splits = d->num_splits;
    a.out_dtype = d->out_dtype;
    return a;
}

void fcl_kvcache_tensors(const fcl_kvcache_desc *d, const fcl_kvcache_buffers *b,
                         fcl_tensor_ref t[FCL_KVCACHE_TENSORS], size_t *n)
{
    const size_t es = fcl_dtype_size(d->dtype), D = d->head_dim;
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(d);
    const size_t out_es = fcl_dtype_size(fcl_output_dtype(&fwd));
    const bool paged = d->page_size > 0, append = d->seqlen_new > 0;
    const size_t cache_batch = paged ? d->num_pages : d->batch;
    const size_t cache_rows = paged ? d->page_size : d->cache_seqlen;
    fcl_layout lse = {d->lse_offset, d->heads_q * d->seqlen_q, d->seqlen_q, 1};
    *n = 0;
    t[(*n)++] = fcl_tensor_ref_make(b->q, d->q, d->batch, d->heads_q, d->seqlen_q, D, es, 0);
    t[(*n)++] = fcl_tensor_ref_make(b->o, d->o, d->batch, d->heads_q, d->seqlen_q, D, out_es, 1);
    t[(*n)++] = fcl_tensor_ref_make(b->k_cache, d->k_cache, cache_batch, d->heads_kv, cache_rows, D,
                                    es, append);
    t[(*n)++] = fcl_tensor_ref_make(b->v_cache, d->v_cache, cache_batch, d->heads_kv, cache_rows, D,
                                    es, append);
    if (append) {
        t[(*n)++] = fcl_tensor_ref_make(b->k_new, d->k_new, d->batch, d->heads_kv, d->seqlen_new,
                                        D, es, 0);
        t[(*n)++] = fcl_tensor_ref_make(b->v_new, d->v_new, d->batch, d->heads_kv, d->seqlen_new,
                                        D, es, 0);
    }
    if (b->lse != NULL)
        t[(*n)++] = fcl_tensor_ref_make(b->lse, lse, d->batch, d->heads_q, d->seqlen_q, 1,
                                        sizeof(float), 1);
}

uint64_t fcl_kvcache_page_table_entries(const fcl_kvcache_desc *d)
{
    return (uint64_t)(d->batch - 1) * d->page_table_stride + d->max_pages_per_seq;
}

/* Work-items a sequence's append takes. */
static size_t append_group(const fcl_context *ctx)
{
    return ctx->info.max_work_group_size < 64 ? ctx->info.max_work_group_size : 64;
}

/* The append of every sequence's new rows, one work-group each. */
static fcl_status enqueue_append(fcl_context *ctx, fcl_resolved *r, const fcl_kvcache_desc *d,
                                 const fcl_kvcache_buffers *b, const fcl_wait *wait,
                                 cl_event *done)
{
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(r, FCL_HELPER_KVCACHE_APPEND, &kernel));
    cl_int err = CL_SUCCESS;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, b->cache_seqlens);
    fcl_arg_mem(&a, d->page_size > 0 ? b->page_table : NULL);
    fcl_arg_long(&a, (int64_t)d->page_table_stride);
    fcl_arg_int(&a, (int)d->num_pages);
    fcl_arg_int(&a, (int)fcl_kvcache_capacity(d));
    fcl_arg_int(&a, (int)d->seqlen_new);
    fcl_arg_mem(&a, b->k_cache);
    fcl_arg_mem(&a, b->v_cache);
    fcl_arg_layout(&a, &d->k_cache);
    fcl_arg_layout(&a, &d->v_cache);
    fcl_arg_mem(&a, b->k_new);
    fcl_arg_mem(&a, b->v_new);
    fcl_arg_layout(&a, &d->k_new);
    fcl_arg_layout(&a, &d->v_new);
    fcl_arg_int(&a, (int)d->heads_kv);
    fcl_arg_int(&a, (int)d->head_dim);
    err = a.err;
    const size_t local = append_group(ctx);
    const size_t global = d->batch * local;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &local, wait->count,
                                     wait->list, done);
    return err;
}

/* The job's fields that come from the descriptors alone. */
static void kvcache_job_shape(const fcl_kvcache_desc *desc, const fcl_attention_desc *fwd,
                              const fcl_variants *var, fcl_forward_job *job)
{
    memset(job, 0, sizeof *job);
    job->desc = fwd;
    job->var = var;
    job->page_size = (int)desc->page_size;
    job->page_table_stride = (int64_t)desc->page_table_stride;
    job->seqlen_new = (int)desc->seqlen_new;
    job->num_pages = (int)desc->num_pages;
}

/* The forward job of a KV-cache call on its buffers, its variants checked. */
static fcl_status kvcache_job(fcl_context *ctx, const fcl_kvcache_desc *desc,
                              const fcl_kvcache_buffers *b, const fcl_attention_desc *fwd,
                              fcl_variants *var, fcl_forward_job *job)
{
    const fcl_attention_aux aux = {.alibi_slopes = b->alibi_slopes,
                                   .descale_q = b->descale_q,
                                   .descale_k = b->descale_k,
                                   .descale_v = b->descale_v};
    FCL_TRY(fcl_variants_prepare(ctx, fwd, &aux, 0, NULL, var));
    var->features |= FCL_FEAT_KVCACHE;
    kvcache_job_shape(desc, fwd, var, job);
    job->q = b->q;
    job->k = b->k_cache;
    job->v = b->v_cache;
    job->o = b->o;
    job->lse = b->lse;
    job->cache_lens = b->cache_seqlens;
    job->page_table = desc->page_size > 0 ? b->page_table : NULL;
    return FCL_OK;
}

fcl_status fcl_attention_kvcache(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                 const fcl_kvcache_buffers *b, cl_uint num_wait,
                                 const cl_event *wait_list, cl_event *event)
{
    if (ctx == NULL || desc == NULL || b == NULL || b->q == NULL || b->k_cache == NULL ||
        b->v_cache == NULL || b->o == NULL || b->cache_seqlens == NULL ||
        (desc->page_size > 0 && b->page_table == NULL) ||
        (desc->seqlen_new > 0 && (b->k_new == NULL || b->v_new == NULL)) ||
        (num_wait > 0 && wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_kvcache_check_desc(desc));
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(desc);
    fcl_tensor_ref t[FCL_KVCACHE_TENSORS];
    size_t n = 0;
    fcl_kvcache_tensors(desc, b, t, &n);
    FCL_TRY(fcl_validate_tensors(ctx, t, n));
    FCL_TRY(fcl_check_aux_buffer(ctx, b->cache_seqlens, desc->batch * sizeof(int32_t)));
    if (desc->page_size > 0)
        FCL_TRY(fcl_check_aux_buffer(ctx, b->page_table,
                                     fcl_kvcache_page_table_entries(desc) * sizeof(int32_t)));
    fcl_variants var;
    fcl_forward_job job;
    FCL_TRY(kvcache_job(ctx, desc, b, &fwd, &var, &job));
    /* the device reads lengths and pages again after checking them: no
     * output (O, LSE, an appended cache) may overlap them, nor the slopes
     * and descales */
    fcl_tensor_ref read[2 + sizeof var.aux / sizeof var.aux[0]];
    size_t num_read = 0;
    read[num_read++] = fcl_aux_ref(b->cache_seqlens, desc->batch * sizeof(int32_t));
    if (desc->page_size > 0)
        read[num_read++] =
            fcl_aux_ref(b->page_table, fcl_kvcache_page_table_entries(desc) * sizeof(int32_t));
    for (size_t i = 0; i < var.num_aux; ++i)
        read[num_read++] = var.aux[i];
    FCL_TRY(fcl_validate_apart(ctx, t, n, read, num_read));
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_forward_resolve(ctx, &job, &r));
    /* before the append changes the cache */
    FCL_TRY(fcl_forward_check_launch(ctx, &job, r));
    FCL_TRY(fcl_loop_check_kvcache(ctx, desc, &r->plan.pub, append_group(ctx)));

    fcl_wait wait;
    FCL_TRY(fcl_scratch_wait_list(ctx, num_wait, wait_list, &wait));
    /* appended rows first, when there are any; the forward then waits for
     * them (an in-order queue runs it after them by itself) */
    fcl_status st = FCL_OK;
    cl_event appended = NULL;
    fcl_wait before_forward = wait;
    if (desc->seqlen_new > 0) {
        st = enqueue_append(ctx, r, desc, b, &wait, ctx->queue_in_order ? NULL : &appended);
        before_forward = (fcl_wait){appended != NULL ? 1 : 0, appended != NULL ? &appended : NULL,
                                    NULL};
    }
    if (st == FCL_OK)
        st = fcl_forward_enqueue(ctx, &job, r, &before_forward, event);
    free(wait.owned);
    if (appended != NULL)
        clReleaseEvent(appended);
    return st;
}

fcl_status fcl_kvcache_plan_query(fcl_context *ctx, const fcl_kvcache_desc *desc, fcl_plan *plan)
{
    if (ctx == NULL || desc == NULL || plan == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_kvcache_check_desc(desc)); /* the call's descriptor checks, no buffer */
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(desc);
    fcl_variants var = {.features = fcl_variants_features(&fwd) | FCL_FEAT_KVCACHE,
                        .longest_q = fwd.seqlen_q,
                        .longest_k = fwd.seqlen_k};
    fcl_forward_job job;
    kvcache_job_shape(desc, &fwd, &var, &job);
    FCL_TRY(fcl_forward_plan_of(ctx, &job, plan));
    return fcl_loop_check_kvcache(ctx, desc, plan, append_group(ctx));
}
