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

/* The columns of V, O and v_new: head_dim_v, or head_dim for 0. */
static size_t kvcache_head_dim_v(const fcl_kvcache_desc *d)
{
    return d->head_dim_v != 0 ? d->head_dim_v : d->head_dim;
}

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
    desc->head_dim_v = head_dim;
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
    desc->k_cache = fcl_layout_contiguous(FCL_LAYOUT_BSHD, desc->heads_kv, cache_seqlen,
                                          desc->head_dim);
    desc->v_cache = fcl_layout_contiguous(FCL_LAYOUT_BSHD, desc->heads_kv, cache_seqlen,
                                          kvcache_head_dim_v(desc));
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
    desc->k_cache = fcl_layout_contiguous(FCL_LAYOUT_BSHD, desc->heads_kv, page_size,
                                          desc->head_dim);
    desc->v_cache = fcl_layout_contiguous(FCL_LAYOUT_BSHD, desc->heads_kv, page_size,
                                          kvcache_head_dim_v(desc));
}

size_t fcl_kvcache_capacity(const fcl_kvcache_desc *d)
{
    return d->page_size == 0 ? d->cache_seqlen : d->max_pages_per_seq * d->page_size;
}

/* The shared-cache setting (flashcl.h, "Shared K/V cache"): 0 or 1, and
 * with 1 neither rotary (MLA's rotated columns are the last ones) nor FP8. */
static fcl_status check_shared_desc(const fcl_kvcache_desc *d)
{
    if (d->shared_kv != 0 && d->shared_kv != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (!d->shared_kv)
        return FCL_OK;
    if (d->rotary_dim > 0)
        return FCL_ERROR_INVALID_VALUE;
    return fcl_require_no_fp8(d->dtype);
}

fcl_status fcl_kvcache_check_v_given(const fcl_kvcache_desc *d, bool v_cache, bool v_new)
{
    if (d->shared_kv)
        return v_cache || v_new ? FCL_ERROR_INVALID_VALUE : FCL_OK;
    return !v_cache || (d->seqlen_new > 0 && !v_new) ? FCL_ERROR_NULL_ARGUMENT : FCL_OK;
}

/* The rotary settings (flashcl.h, fcl_kvcache_desc): even rotary_dim up to
 * head_dim, tables that cover every position the cache can hold, no FP8. */
static fcl_status check_rotary_desc(const fcl_kvcache_desc *d)
{
    if (d->rotary_interleaved != 0 && d->rotary_interleaved != 1)
        return FCL_ERROR_INVALID_VALUE;
    if (d->rotary_dim == 0)
        return FCL_OK;
    if (d->rotary_dim % 2 != 0 || d->rotary_dim > d->head_dim)
        return FCL_ERROR_INVALID_VALUE;
    if (d->rotary_rows < fcl_kvcache_capacity(d) || d->rotary_rows > FCL_MAX_ROTARY_ROWS)
        return FCL_ERROR_INVALID_VALUE;
    return fcl_require_no_fp8(d->dtype);
}

uint64_t fcl_kvcache_rotary_bytes(const fcl_kvcache_desc *d)
{
    return (uint64_t)d->rotary_rows * (d->rotary_dim / 2) * sizeof(float);
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
    /* heads, head_dim (this call's own maximum), dtype, scale, causal,
     * splits; window, softcap, the ALiBi mode, sinks */
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(d);
    FCL_TRY(fcl_check_forward_desc_upto(&fwd, FCL_MAX_HEAD_DIM_KVCACHE));
    FCL_TRY(check_shared_desc(d));
    return check_rotary_desc(d);
}

/* The forward problem of a KV-cache call: K/V are the caches, each sequence
 * holding up to `capacity` keys (V read through K's layout when shared). */
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
    a.v = d->shared_kv ? d->k_cache : d->v_cache;
    a.lse_offset = d->lse_offset;
    a.window_left = d->window_left;
    a.window_right = d->window_right;
    a.softcap = d->softcap;
    a.alibi = d->alibi;
    a.num_splits = d->num_splits;
    a.out_dtype = d->out_dtype;
    a.head_dim_v = kvcache_head_dim_v(d);
    a.sinks = d->sinks;
    return a;
}

void fcl_kvcache_tensors(const fcl_kvcache_desc *d, const fcl_kvcache_buffers *b,
                         fcl_tensor_ref t[FCL_KVCACHE_TENSORS], size_t *n)
{
    const size_t es = fcl_dtype_size(d->dtype), D = d->head_dim, Dv = kvcache_head_dim_v(d);
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(d);
    const size_t out_es = fcl_dtype_size(fcl_output_dtype(&fwd));
    const bool paged = d->page_size > 0, append = d->seqlen_new > 0;
    const size_t cache_batch = paged ? d->num_pages : d->batch;
    const size_t cache_rows = paged ? d->page_size : d->cache_seqlen;
    fcl_layout lse = {d->lse_offset, d->heads_q * d->seqlen_q, d->seqlen_q, 1};
    *n = 0;
    t[(*n)++] = fcl_tensor_ref_make(b->q, d->q, d->batch, d->heads_q, d->seqlen_q, D, es, 0);
    t[(*n)++] = fcl_tensor_ref_make(b->o, d->o, d->batch, d->heads_q, d->seqlen_q, Dv, out_es, 1);
    t[(*n)++] = fcl_tensor_ref_make(b->k_cache, d->k_cache, cache_batch, d->heads_kv, cache_rows, D,
                                    es, append);
    /* a shared cache is K's tensor alone (V's elements are among K's) */
    if (!d->shared_kv)
        t[(*n)++] = fcl_tensor_ref_make(b->v_cache, d->v_cache, cache_batch, d->heads_kv,
                                        cache_rows, Dv, es, append);
    if (append)
        t[(*n)++] = fcl_tensor_ref_make(b->k_new, d->k_new, d->batch, d->heads_kv, d->seqlen_new,
                                        D, es, 0);
    if (append && !d->shared_kv)
        t[(*n)++] = fcl_tensor_ref_make(b->v_new, d->v_new, d->batch, d->heads_kv, d->seqlen_new,
                                        Dv, es, 0);
    if (b->lse != NULL)
        t[(*n)++] = fcl_tensor_ref_make(b->lse, lse, d->batch, d->heads_q, d->seqlen_q, 1,
                                        sizeof(float), 1);
}

uint64_t fcl_kvcache_page_table_entries(const fcl_kvcache_desc *d)
{
    return (uint64_t)(d->batch - 1) * d->page_table_stride + d->max_pages_per_seq;
}

/* Work-items a work-group of the append step takes. */
static size_t append_group(const fcl_context *ctx)
{
    return ctx->info.max_work_group_size < 64 ? ctx->info.max_work_group_size : 64;
}

/* Work-groups per sequence of the append step (they share its rows): about
 * 8 elements per work-item, at most one group per row, 64 groups, and
 * 2^31 work-items in all. */
static size_t append_parts(const fcl_kvcache_desc *d, size_t local)
{
    size_t rows = d->seqlen_new * d->heads_kv;
    if (d->rotary_dim > 0)
        rows = rows > d->seqlen_q * d->heads_q ? rows : d->seqlen_q * d->heads_q;
    const size_t most = ((size_t)1 << 31) / (d->batch * local);
    size_t parts = (rows * d->head_dim + local * 8 - 1) / (local * 8);
    parts = parts < rows ? parts : rows;
    parts = parts < most ? parts : most;
    return parts < 1 ? 1 : parts > 64 ? 64 : parts;
}

/* The append step (cl/kvcache.cl): every sequence's new rows into its
 * cache and, with rotary, the rotation of those K rows and of Q into q_rot. */
static fcl_status enqueue_append(fcl_context *ctx, fcl_resolved *r, const fcl_kvcache_desc *d,
                                 const fcl_kvcache_buffers *b, cl_mem q_rot,
                                 const fcl_wait *wait, cl_event *done)
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
    fcl_arg_mem(&a, b->v_cache); /* NULL when shared: no V columns written (0 below) */
    fcl_arg_layout(&a, &d->k_cache);
    fcl_arg_layout(&a, &d->v_cache);
    fcl_arg_mem(&a, d->seqlen_new > 0 ? b->k_new : NULL);
    fcl_arg_mem(&a, d->seqlen_new > 0 ? b->v_new : NULL);
    fcl_arg_layout(&a, &d->k_new);
    fcl_arg_layout(&a, &d->v_new);
    fcl_arg_int(&a, (int)d->heads_kv);
    fcl_arg_int(&a, (int)d->head_dim);
    fcl_arg_int(&a, d->shared_kv ? 0 : (int)kvcache_head_dim_v(d));
    fcl_arg_mem(&a, b->q);
    fcl_arg_layout(&a, &d->q);
    fcl_arg_mem(&a, q_rot);
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_int(&a, (int)d->seqlen_q);
    fcl_arg_mem(&a, d->rotary_dim > 0 ? b->rotary_cos : NULL);
    fcl_arg_mem(&a, d->rotary_dim > 0 ? b->rotary_sin : NULL);
    fcl_arg_int(&a, (int)d->rotary_dim);
    fcl_arg_int(&a, d->rotary_interleaved);
    const size_t wg = append_group(ctx);
    const size_t parts = append_parts(d, wg), global = d->batch * parts * wg;
    fcl_arg_int(&a, (int)parts);
    err = a.err;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &wg, wait->count,
                                     wait->list, done);
    return err;
}

unsigned fcl_kvcache_features(const fcl_kvcache_desc *d)
{
    return FCL_FEAT_KVCACHE | (d->shared_kv ? FCL_FEAT_SHARED_KV : 0u);
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
                                   .descale_v = b->descale_v,
                                   .sinks = b->sinks};
    FCL_TRY(fcl_variants_prepare(ctx, fwd, &aux, 0, NULL, var));
    var->features |= fcl_kvcache_features(desc);
    kvcache_job_shape(desc, fwd, var, job);
    job->q = b->q;
    job->k = b->k_cache;
    job->v = desc->shared_kv ? b->k_cache : b->v_cache;
    job->o = b->o;
    job->lse = b->lse;
    job->cache_lens = b->cache_seqlens;
    job->page_table = desc->page_size > 0 ? b->page_table : NULL;
    return FCL_OK;
}

/* The rotary tables of a call: given exactly when rotary is on, large
 * enough, and in the context. */
static fcl_status check_rotary_buffers(const fcl_context *ctx, const fcl_kvcache_desc *d,
                                       const fcl_kvcache_buffers *b)
{
    if (d->rotary_dim == 0)
        return b->rotary_cos != NULL || b->rotary_sin != NULL ? FCL_ERROR_INVALID_VALUE : FCL_OK;
    FCL_TRY(fcl_check_aux_buffer(ctx, b->rotary_cos, fcl_kvcache_rotary_bytes(d)));
    return fcl_check_aux_buffer(ctx, b->rotary_sin, fcl_kvcache_rotary_bytes(d));
}

/* The buffers the device reads besides the tensors (lengths, pages, the
 * variants' aux buffers, the rotary tables), which no output may meet;
 * *n of them. */
static void read_only_refs(const fcl_kvcache_desc *d, const fcl_kvcache_buffers *b,
                           const fcl_variants *var, fcl_tensor_ref *read, size_t *n)
{
    *n = 0;
    read[(*n)++] = fcl_aux_ref(b->cache_seqlens, d->batch * sizeof(int32_t));
    if (d->page_size > 0)
        read[(*n)++] =
            fcl_aux_ref(b->page_table, fcl_kvcache_page_table_entries(d) * sizeof(int32_t));
    for (size_t i = 0; i < var->num_aux; ++i)
        read[(*n)++] = var->aux[i];
    if (d->rotary_dim > 0) {
        read[(*n)++] = fcl_aux_ref(b->rotary_cos, fcl_kvcache_rotary_bytes(d));
        read[(*n)++] = fcl_aux_ref(b->rotary_sin, fcl_kvcache_rotary_bytes(d));
    }
}

/* With rotary, the forward reads the rotated Q the append step writes into
 * the context's workspace: contiguous (batch, seqlen_q, heads_q, head_dim). */
static fcl_status use_rotated_q(fcl_context *ctx, const fcl_kvcache_desc *d,
                                fcl_attention_desc *fwd, fcl_forward_job *job)
{
    const size_t bytes = d->batch * d->seqlen_q * d->heads_q * d->head_dim * fcl_dtype_size(d->dtype);
    FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_ROTARY_Q, bytes, &job->q));
    fwd->q = fcl_layout_contiguous(FCL_LAYOUT_BSHD, d->heads_q, d->seqlen_q, d->head_dim);
    return FCL_OK;
}

/* Enqueues the checked call: the append step when there are new rows or
 * rotary, then the forward; the workspace's rotated Q is in use until the
 * forward ends. */
static fcl_status enqueue_kvcache(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                  const fcl_kvcache_buffers *b, fcl_forward_job *job,
                                  fcl_resolved *r, const fcl_wait *wait, cl_event *event)
{
    const bool rotary = desc->rotary_dim > 0, track = rotary && !ctx->queue_in_order;
    fcl_status st = FCL_OK;
    cl_event appended = NULL, done = NULL;
    fcl_wait before_forward = *wait;
    /* the forward waits for the append (an in-order queue runs it after it
     * by itself) */
    if (desc->seqlen_new > 0 || rotary) {
        st = enqueue_append(ctx, r, desc, b, rotary ? job->q : NULL, wait,
                            ctx->queue_in_order ? NULL : &appended);
        before_forward = (fcl_wait){appended != NULL ? 1 : 0, appended != NULL ? &appended : NULL,
                                    NULL};
    }
    if (st == FCL_OK)
        st = fcl_forward_enqueue(ctx, job, r, &before_forward,
                                 track || event != NULL ? &done : NULL);
    if (st == FCL_OK && track)
        fcl_scratch_used_until(ctx, done);
    if (st == FCL_OK && event != NULL)
        *event = done;
    else if (done != NULL)
        clReleaseEvent(done);
    if (appended != NULL)
        clReleaseEvent(appended);
    return st;
}

fcl_status fcl_attention_kvcache(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                 const fcl_kvcache_buffers *b, cl_uint num_wait,
                                 const cl_event *wait_list, cl_event *event)
{
    if (ctx == NULL || desc == NULL || b == NULL || b->q == NULL || b->k_cache == NULL ||
        b->o == NULL || b->cache_seqlens == NULL ||
        (desc->page_size > 0 && b->page_table == NULL) ||
        (desc->seqlen_new > 0 && b->k_new == NULL) ||
        (!desc->shared_kv && fcl_kvcache_check_v_given(desc, b->v_cache != NULL,
                                                       b->v_new != NULL) != FCL_OK) ||
        (desc->rotary_dim > 0 && (b->rotary_cos == NULL || b->rotary_sin == NULL)) ||
        (num_wait > 0 && wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_kvcache_check_desc(desc));
    FCL_TRY(fcl_kvcache_check_v_given(desc, b->v_cache != NULL, b->v_new != NULL));
    fcl_attention_desc fwd = fcl_kvcache_as_forward(desc);
    fcl_tensor_ref t[FCL_KVCACHE_TENSORS];
    size_t n = 0;
    fcl_kvcache_tensors(desc, b, t, &n);
    FCL_TRY(fcl_validate_tensors(ctx, t, n));
    FCL_TRY(fcl_check_aux_buffer(ctx, b->cache_seqlens, desc->batch * sizeof(int32_t)));
    if (desc->page_size > 0)
        FCL_TRY(fcl_check_aux_buffer(ctx, b->page_table,
                                     fcl_kvcache_page_table_entries(desc) * sizeof(int32_t)));
    FCL_TRY(check_rotary_buffers(ctx, desc, b));
    fcl_variants var;
    fcl_forward_job job;
    FCL_TRY(kvcache_job(ctx, desc, b, &fwd, &var, &job));
    /* the device reads lengths and pages again after checking them: no
     * output (O, LSE, an appended cache) may overlap them, nor the slopes,
     * descales and rotary tables */
    fcl_tensor_ref read[4 + sizeof var.aux / sizeof var.aux[0]];
    size_t num_read = 0;
    read_only_refs(desc, b, &var, read, &num_read);
    FCL_TRY(fcl_validate_apart(ctx, t, n, read, num_read));
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_forward_resolve(ctx, &job, &r));
    /* before the append changes the cache */
    FCL_TRY(fcl_forward_check_launch(ctx, &job, r));
    FCL_TRY(fcl_loop_check_kvcache(ctx, desc, &r->plan.pub, append_group(ctx),
                                   append_parts(desc, append_group(ctx))));
    if (desc->rotary_dim > 0)
        FCL_TRY(use_rotated_q(ctx, desc, &fwd, &job));

    fcl_wait wait;
    FCL_TRY(fcl_scratch_wait_list(ctx, num_wait, wait_list, &wait));
    const fcl_status st = enqueue_kvcache(ctx, desc, b, &job, r, &wait, event);
    free(wait.owned);
    return st;
}

fcl_status fcl_kvcache_plan_query(fcl_context *ctx, const fcl_kvcache_desc *desc, fcl_plan *plan)
{
    if (ctx == NULL || desc == NULL || plan == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_kvcache_check_desc(desc)); /* the call's descriptor checks, no buffer */
    const fcl_attention_desc fwd = fcl_kvcache_as_forward(desc);
    fcl_variants var = {.features = fcl_variants_features(&fwd) | fcl_kvcache_features(desc),
                        .longest_q = fwd.seqlen_q,
                        .longest_k = fwd.seqlen_k};
    fcl_forward_job job;
    kvcache_job_shape(desc, &fwd, &var, &job);
    FCL_TRY(fcl_forward_plan_of(ctx, &job, plan));
    return fcl_loop_check_kvcache(ctx, desc, plan, append_group(ctx),
                                  append_parts(desc, append_group(ctx)));
}
