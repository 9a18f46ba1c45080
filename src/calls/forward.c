/* forward.c - plan, bind and launch the forward kernel: one launch, or,
 * with split-KV, one work-group per key chunk and then the merge of their
 * partial results (cl/combine.cl).  The forward call and the KV-cache call
 * (kvcache.c) both launch through fcl_forward_enqueue. */
#include "calls/calls.h"

#include <stddef.h>
#include <stdlib.h>

/* Split-KV: at most this many chunks chosen automatically, each of at least
 * this many key tiles (fewer would cost more in partials than they gain). */
enum { MAX_AUTO_SPLITS = 128, MIN_TILES_PER_SPLIT = 4 };
/* cl/combine.cl's work-group: 32 columns of a row, 8 work-items each */
enum { FCL_COMBINE_COLS = 32, FCL_COMBINE_WG = 256 };

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* The kernels' optional arrays ("optional arrays", cl/common.cl): bits of
 * their `arrays` argument, set for each array the call has. */
enum { FCL_ARRAY_DESCALE_Q = 1, FCL_ARRAY_DESCALE_K = 2, FCL_ARRAY_DESCALE_V = 4,
       FCL_ARRAY_SINKS = 8 };

/* Binds an optional array, or the context's placeholder when the call has
 * none (kernels never get NULL); returns `bit` when the array is real. */
static int arg_optional(fcl_args *a, const fcl_context *ctx, cl_mem m, int bit)
{
    fcl_arg_mem(a, m != NULL ? m : ctx->placeholder);
    return m != NULL ? bit : 0;
}

/* The largest divisor of q_per_kv whose packed rows still fit a decode plan. */
static int pack_factor(size_t q_per_kv, size_t seqlen_q)
{
    int best = 1;
    for (size_t p = 1; p <= q_per_kv; ++p)
        if (q_per_kv % p == 0 && seqlen_q * p <= FCL_DECODE_MAX_ROWS)
            best = (int)p;
    return best;
}

fcl_build fcl_forward_build(const fcl_context *ctx, const fcl_attention_desc *d,
                            unsigned features, int page_size)
{
    if (fcl_uses_tensor_cores(ctx, d, FCL_KERNEL_FORWARD))
        features |= FCL_BUILD_TILE_MMA;
    /* FP8 is planned as 16-bit storage is: every piece holds its tiles
     * decoded (fp32 __local on the portable and CPU pieces, fp16 on tensor
     * cores), so only the global reads shrink, and the tile sizes do not
     * depend on those (the CPU piece's cache working set counts bytes
     * read, plan_cpu.c).  The output type is part of the build. */
    fcl_build b = fcl_build_of(FCL_KERNEL_FORWARD, d->head_dim, d->dtype, features);
    b.out_dtype = fcl_output_dtype(d);
    b.page_size = page_size;
    if (d->seqlen_q <= FCL_DECODE_MAX_ROWS) {
        /* Few query rows: a decode plan, with the query heads of a K/V head
         * packed into one row block where the variants allow (dropout,
         * packed sequences and block masks are per head and position). */
        const bool packable = !(features & (FCL_FEAT_DROPOUT | FCL_FEAT_VARLEN | FCL_FEAT_BLOCKMASK)) &&
                              !fcl_dtype_is_fp8(d->dtype); /* one Q descale per work-group */
        b.kind = FCL_KERNEL_DECODE;
        b.pack = packable ? pack_factor(d->heads_q / d->heads_kv, d->seqlen_q) : 1;
        b.rows = (int)d->seqlen_q * b.pack;
    }
    if (fcl_uses_wgmma(ctx, d, b.kind, b.features)) {
        b.features |= FCL_BUILD_WGMMA;
        if (fcl_uses_wgmma_tma(ctx, d))
            b.features |= FCL_BUILD_WG_TMA;
        if (fcl_uses_fp8_products(d, b.features))
            b.features |= FCL_BUILD_FP8_PRODUCTS;
        /* the tile by the call's lengths (head_dim 64 in 16-bit storage) */
        b.features |= fcl_variants_wgmma_tile(d, b.kind, false);
    }
    /* no edge tile: none of the tests for them (tensor-core pieces) */
    b.features |= fcl_variants_whole_tiles(d, b.kind, b.features);
    return b;
}

/* Work-groups the device runs at once (about), for the split heuristic: a
 * CPU runs one per core; a GPU as many per compute unit as its on-chip
 * memory and threads allow (2048 threads per unit, NVIDIA's and AMD's
 * order of magnitude), at most 8. */
static size_t resident_groups(const fcl_caps *caps, const fcl_plan *p)
{
    const size_t cus = caps->compute_units > 0 ? caps->compute_units : 1;
    if (!caps->is_gpu)
        return cus;
    size_t per_cu = p->local_bytes > 0 ? (size_t)(caps->local_mem_usable / p->local_bytes) : 8;
    const size_t by_threads = p->work_group_size > 0 ? 2048 / p->work_group_size : 8;
    per_cu = per_cu < by_threads ? per_cu : by_threads;
    per_cu = per_cu < 1 ? 1 : per_cu > 8 ? 8 : per_cu;
    return cus * per_cu;
}

fcl_split fcl_forward_splits(const fcl_context *ctx, const fcl_plan *p, size_t groups, size_t keys,
                             int forced)
{
    fcl_split s = {1, 0};
    const size_t tiles = div_up(keys, p->bc);
    size_t n = 1;
    if (forced > 0) {
        n = (size_t)forced;
    } else {
        /* FlashDecoding: split when the blocks alone leave at least half
         * the device idle (the forward's large blocks: one wave; decode
         * blocks: every resident slot), keeping a few tiles per chunk.
         * Splitting a nearly full wave only adds a second wave and the
         * merge: prefill B = 1, H = 32, N = 512 (128 blocks on 132 units)
         * ran at half speed with 2 chunks on an H100 (NOTES.md, run 16). */
        const size_t target =
            p->kernel == FCL_KERNEL_DECODE ? resident_groups(&ctx->caps, p) : ctx->caps.compute_units;
        if (2 * groups <= target) {
            /* as many chunks as fill the slots once, no more: rounding up
             * started a second wave nearly empty (MLA decoding: 64 and 16
             * row blocks on 132 slots ran 192 and 144 groups, 1.45 and
             * 1.09 waves; NOTES.md, run 30) */
            n = target / groups;
            const size_t by_keys = tiles / MIN_TILES_PER_SPLIT;
            n = n < by_keys ? n : by_keys;
            n = n < MAX_AUTO_SPLITS ? n : MAX_AUTO_SPLITS;
            n = n < 1 ? 1 : n;
        }
        /* a device that ends long loops (loop_limit.c): chunks it can walk */
        const uint64_t most = fcl_loop_max_outer(ctx, p);
        if (most >= p->bc && tiles > most / p->bc && n < div_up(tiles, most / p->bc))
            n = div_up(tiles, most / p->bc);
    }
    if (n > 1) {
        /* fixed chunks of whole tiles; forced counts are kept even where the
         * last chunks come out empty */
        s.num_splits = (int)n;
        s.split_keys = (int)(div_up(tiles, n) * p->bc);
        if (forced <= 0)
            s.num_splits = (int)div_up(keys, (size_t)s.split_keys);
        if (s.num_splits == 1)
            s.split_keys = 0;
    }
    return s;
}

/* ---- launching ------------------------------------------------------------ */

typedef struct forward_call {
    fcl_context *ctx;
    const fcl_forward_job *job;
    fcl_split split;              /* set by set_forward_args for the plan launched */
    cl_mem part_o, part_lse;
    cl_mem maps;                  /* the wgmma forward's tensor maps (FCL_BUILD_WG_TMA) */
    fcl_status scratch_status;
    /* K and V as the kernel reads them: the job's, or FP8's widened
     * copies (enqueue_widen) or FP8 products' tiles (enqueue_prepare8) */
    cl_mem k, v;
    fcl_layout k_layout, v_layout;
} forward_call;

static size_t head_groups(const fcl_attention_desc *d, const fcl_build *b)
{
    return d->batch * (d->heads_q / (size_t)b->pack);
}

static size_t row_blocks(const fcl_variants *v, const fcl_resolved *r)
{
    return div_up(v->longest_q * (size_t)r->build.pack, r->plan.pub.br);
}

static size_t part_rows(const fcl_attention_desc *d) { return d->batch * d->heads_q * d->seqlen_q; }

/* The key chunks of a launch of job with r's plan, after checking that
 * the device can walk them (a device that ends long loops, loop_limit.c:
 * FCL_ERROR_DEVICE_LOOP_LIMIT).  The call, its plan query and the KV-cache
 * call before its append all decide here. */
static fcl_status job_split(fcl_context *ctx, const fcl_forward_job *j, const fcl_resolved *r,
                            fcl_split *split)
{
    const fcl_attention_desc *d = j->desc;
    const size_t base_groups = row_blocks(j->var, r) * head_groups(d, &r->build);
    *split = d->varlen ? (fcl_split){1, 0}
                       : fcl_forward_splits(ctx, &r->plan.pub, base_groups, d->seqlen_k,
                                            d->num_splits);
    /* the stated lengths (not packed sequences' longest), as the plan query sees them */
    return fcl_loop_check(ctx, &r->plan.pub,
                          split->num_splits > 1 ? (size_t)split->split_keys : d->seqlen_k);
}

fcl_status fcl_forward_check_launch(fcl_context *ctx, const fcl_forward_job *job,
                                    const fcl_resolved *r)
{
    fcl_split split;
    return job_split(ctx, job, r, &split);
}

static fcl_status set_forward_args(const fcl_resolved *r, cl_kernel kernel, const void *user,
                                   size_t *groups)
{
    forward_call *c = (forward_call *)user; /* the split is decided here, per plan */
    const fcl_forward_job *j = c->job;
    const fcl_attention_desc *d = j->desc;
    const size_t num_hg = head_groups(d, &r->build);
    const size_t base_groups = row_blocks(j->var, r) * num_hg;
    c->part_o = c->part_lse = c->maps = NULL;
    FCL_TRY(job_split(c->ctx, j, r, &c->split));
    if (c->split.num_splits > 1) {
        const size_t rows = part_rows(d) * (size_t)c->split.num_splits;
        FCL_TRY(fcl_scratch_get(c->ctx, FCL_SCRATCH_PART_O,
                                rows * fcl_head_dim_v(d) * sizeof(float), &c->part_o));
        FCL_TRY(fcl_scratch_get(c->ctx, FCL_SCRATCH_PART_LSE, rows * sizeof(float), &c->part_lse));
    }
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, j->q);
    fcl_arg_mem(&a, c->k);
    fcl_arg_mem(&a, c->v);
    fcl_arg_mem(&a, j->o);
    fcl_arg_mem(&a, j->lse);
    fcl_arg_layout(&a, &d->q);
    fcl_arg_layout(&a, &c->k_layout);
    fcl_arg_layout(&a, &c->v_layout);
    fcl_arg_layout(&a, &d->o);
    fcl_arg_long(&a, (int64_t)d->lse_offset);
    fcl_arg_int(&a, j->var->lse_rows);
    fcl_arg_int(&a, j->lse != NULL);
    fcl_arg_int(&a, (int)d->seqlen_q);
    fcl_arg_int(&a, (int)d->seqlen_k);
    fcl_arg_int(&a, (int)d->head_dim);
    fcl_arg_int(&a, (int)fcl_head_dim_v(d));
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_int(&a, (int)(d->heads_q / d->heads_kv));
    fcl_arg_int(&a, (int)num_hg);
    fcl_arg_float(&a, fcl_effective_scale(d));
    fcl_arg_int(&a, j->var->window_left);
    fcl_arg_int(&a, j->var->window_right);
    fcl_arg_variants(&a, j->var);
    fcl_arg_int(&a, c->split.num_splits);
    fcl_arg_int(&a, c->split.split_keys);
    fcl_arg_mem(&a, c->part_o);
    fcl_arg_mem(&a, c->part_lse);
    fcl_arg_long(&a, (int64_t)part_rows(d));
    fcl_arg_mem(&a, j->cache_lens);
    fcl_arg_int(&a, j->seqlen_new);
    fcl_arg_mem(&a, j->page_table);
    fcl_arg_long(&a, j->page_table_stride);
    fcl_arg_int(&a, j->num_pages);
    int arrays = arg_optional(&a, c->ctx, j->var->descale_q, FCL_ARRAY_DESCALE_Q);
    arrays |= arg_optional(&a, c->ctx, j->var->descale_k, FCL_ARRAY_DESCALE_K);
    arrays |= arg_optional(&a, c->ctx, j->var->descale_v, FCL_ARRAY_DESCALE_V);
    arrays |= arg_optional(&a, c->ctx, j->var->sinks, FCL_ARRAY_SINKS);
    fcl_arg_int(&a, arrays);
    *groups = base_groups * (size_t)c->split.num_splits;
    /* the wgmma forward with the tensor memory accelerator: the template
     * (none emulated) and room for each work-group's two maps (FP8
     * products take none: their tiles come by plain bulk copies) */
    if ((r->build.features & FCL_BUILD_WG_TMA) && !(r->build.features & FCL_BUILD_FP8_PRODUCTS))
        FCL_TRY(fcl_tensor_maps_buffer(c->ctx, FCL_SCRATCH_TENSOR_MAPS, *groups, &c->maps));
    (void)arg_optional(&a, c->ctx, c->maps, 0);
    return a.err;
}

/* The forward's helper launches (the combine, FP8's widening and products'
 * tiles): `groups` work-groups of `local` work-items over one dimension,
 * after the wait list, once every argument of a was set. */
static fcl_status enqueue_groups(fcl_context *ctx, const fcl_args *a, size_t groups,
                                 size_t local, const fcl_wait *wait, cl_event *done)
{
    if (a->err != CL_SUCCESS)
        return a->err;
    const size_t global = groups * local;
    return clEnqueueNDRangeKernel(ctx->queue, a->kernel, 1, NULL, &global, &local, wait->count,
                                  wait->list, done);
}

/* The merge of the chunks' partials into O and LSE (combine.cl). */
static fcl_status enqueue_combine(fcl_context *ctx, fcl_resolved *r, const forward_call *c,
                                  const fcl_wait *after, cl_event *done)
{
    const fcl_forward_job *j = c->job;
    const fcl_attention_desc *d = j->desc;
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(r, FCL_HELPER_COMBINE, &kernel));
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->part_o);
    fcl_arg_mem(&a, c->part_lse);
    fcl_arg_int(&a, c->split.num_splits);
    fcl_arg_long(&a, (int64_t)part_rows(d));
    fcl_arg_int(&a, (int)fcl_head_dim_v(d)); /* O's columns */
    fcl_arg_int(&a, (int)d->seqlen_q);
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_mem(&a, j->o);
    fcl_arg_layout(&a, &d->o);
    fcl_arg_mem(&a, j->lse);
    fcl_arg_long(&a, (int64_t)d->lse_offset);
    fcl_arg_int(&a, j->lse != NULL);
    /* the sinks are joined once, here */
    fcl_arg_int(&a, arg_optional(&a, ctx, j->var->sinks, FCL_ARRAY_SINKS));
    return enqueue_groups(ctx, &a, part_rows(d) * div_up(fcl_head_dim_v(d), FCL_COMBINE_COLS),
                          FCL_COMBINE_WG, after, done);
}

/* The FP8 forward on the wgmma piece's tensor memory accelerator path
 * (fcl_forward_widens): K's and V's bytes widened to fp16 into the
 * workspace (cl/flash_fwd.cl, fcl_forward_widen: exact), which the forward
 * then reads in c->k and c->v, laid out (batch, K/V head, row, column) with
 * one batch entry of total_k rows for packed sequences.  Only the
 * workspace is written. */
enum { FCL_WIDEN_WG = 256, FCL_PREPARE8_WG = 256 /* cl/flash_fwd.cl's FCL_PREP8_WG */ };
static fcl_status enqueue_widen(fcl_context *ctx, fcl_resolved *r, forward_call *c,
                                const fcl_wait *wait, cl_event *done)
{
    const fcl_attention_desc *d = c->job->desc;
    const size_t batch = d->varlen ? 1 : d->batch, rows = d->varlen ? d->total_k : d->seqlen_k;
    const size_t k_cols = d->head_dim, v_cols = fcl_head_dim_v(d);
    const size_t k_elems = batch * d->heads_kv * rows * k_cols;
    const size_t v_elems = batch * d->heads_kv * rows * v_cols;
    FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_WIDE_K, k_elems * 2, &c->k));
    FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_WIDE_V, v_elems * 2, &c->v));
    c->k_layout = (fcl_layout){0, d->heads_kv * rows * k_cols, rows * k_cols, k_cols};
    c->v_layout = (fcl_layout){0, d->heads_kv * rows * v_cols, rows * v_cols, v_cols};
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(r, FCL_HELPER_WIDEN, &kernel));
    const size_t k_chunks = k_elems / 8, chunks = k_chunks + v_elems / 8;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->job->k);
    fcl_arg_layout(&a, &d->k);
    fcl_arg_int(&a, (int)k_cols);
    fcl_arg_mem(&a, c->job->v);
    fcl_arg_layout(&a, &d->v);
    fcl_arg_int(&a, (int)v_cols);
    fcl_arg_int(&a, (int)d->heads_kv);
    fcl_arg_int(&a, (int)rows);
    fcl_arg_long(&a, (int64_t)k_chunks);
    fcl_arg_long(&a, (int64_t)chunks);
    fcl_arg_mem(&a, c->k);
    fcl_arg_mem(&a, c->v);
    return enqueue_groups(ctx, &a, div_up(chunks, FCL_WIDEN_WG), FCL_WIDEN_WG, wait, done);
}

/* FP8 products (fcl_forward_prepares8): K and V^T laid out as the
 * kernel's tiles in the workspace (cl/flash_fwd.cl, fcl_forward_prepare8;
 * cl/tile_nv_wgmma_fp8.cl says how), which the forward then reads in c->k
 * and c->v (Q it reads from the caller's array).  Only the workspace is
 * written. */
static fcl_status enqueue_prepare8(fcl_context *ctx, fcl_resolved *r, forward_call *c,
                                   const fcl_wait *wait, cl_event *done)
{
    const fcl_attention_desc *d = c->job->desc;
    const size_t bc = r->plan.pub.bc, row = 128; /* bytes a tile row */
    const size_t kv_bytes = d->batch * d->heads_kv * div_up(d->seqlen_k, bc) * bc * row;
    FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_WIDE_K, kv_bytes, &c->k));
    FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_WIDE_V, kv_bytes, &c->v));
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(r, FCL_HELPER_PREPARE8, &kernel));
    /* a work-group a tile's block: K's, then V^T's */
    const size_t kv_blocks = kv_bytes / (bc * row);
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->job->k);
    fcl_arg_layout(&a, &d->k);
    fcl_arg_mem(&a, c->job->v);
    fcl_arg_layout(&a, &d->v);
    fcl_arg_int(&a, (int)d->seqlen_k);
    fcl_arg_int(&a, (int)d->heads_kv);
    fcl_arg_int(&a, (int)fcl_head_dim_v(d));
    fcl_arg_long(&a, (int64_t)kv_blocks);
    fcl_arg_mem(&a, c->k);
    fcl_arg_mem(&a, c->v);
    return enqueue_groups(ctx, &a, 2 * kv_blocks, FCL_PREPARE8_WG, wait, done);
}

fcl_status fcl_forward_resolve(fcl_context *ctx, const fcl_forward_job *job, fcl_resolved **out)
{
    const fcl_build b = fcl_forward_build(ctx, job->desc, job->var->features, job->page_size);
    return fcl_resolve(ctx, &b, out);
}

fcl_status fcl_forward_plan_of(fcl_context *ctx, const fcl_forward_job *job, fcl_plan *plan)
{
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_forward_resolve(ctx, job, &r));
    fcl_split s;
    FCL_TRY(job_split(ctx, job, r, &s));
    *plan = r->plan.pub;
    plan->pack = (size_t)r->build.pack;
    plan->num_splits = (size_t)s.num_splits;
    plan->split_keys = (size_t)s.split_keys;
    return FCL_OK;
}

fcl_status fcl_forward_enqueue(fcl_context *ctx, const fcl_forward_job *job, fcl_resolved *r,
                               const fcl_wait *wait, cl_event *event)
{
    /* On an in-order queue the combine follows the attention by itself and
     * scratch needs no guard: no event is made unless the caller asks. */
    const bool track = !ctx->queue_in_order;
    const bool want_events = track || event != NULL;
    forward_call call = {ctx,  job,     {1, 0},         NULL,           NULL, NULL, FCL_OK,
                         job->k, job->v, job->desc->k, job->desc->v};
    cl_event ev_widen = NULL, ev_attn = NULL, ev_combine = NULL;
    fcl_status st = FCL_OK;
    fcl_wait attn_wait = *wait;
    if (fcl_forward_widens(&r->build) || fcl_forward_prepares8(&r->build)) {
        /* the forward waits for the widening (or the tiles' layout), which
         * waits for the caller's events (on an in-order queue it simply
         * follows it) */
        st = fcl_forward_widens(&r->build)
                 ? enqueue_widen(ctx, r, &call, wait, track ? &ev_widen : NULL)
                 : enqueue_prepare8(ctx, r, &call, wait, track ? &ev_widen : NULL);
        attn_wait = (fcl_wait){track ? 1 : 0, track ? &ev_widen : NULL, NULL};
    }
    if (st == FCL_OK)
        st = fcl_launch(ctx, r, set_forward_args, &call, attn_wait.count, attn_wait.list,
                        want_events ? &ev_attn : NULL);
    if (st == FCL_OK && call.split.num_splits > 1) {
        const fcl_wait after = {track ? 1 : 0, track ? &ev_attn : NULL, NULL};
        st = enqueue_combine(ctx, r, &call, &after, want_events ? &ev_combine : NULL);
    }
    const cl_event last = ev_combine != NULL ? ev_combine
                          : ev_attn != NULL  ? ev_attn
                                             : ev_widen;
    /* The workspace is busy until the last command enqueued, also when a
     * later step failed: a widening or an attention left running must not
     * meet the next call's use of the same buffers. */
    if (track && last != NULL &&
        (call.split.num_splits > 1 || call.maps != NULL || ev_widen != NULL))
        fcl_scratch_used_until(ctx, last);
    if (st == FCL_OK && event != NULL) {
        st = clRetainEvent(last);
        *event = st == FCL_OK ? last : NULL;
    }
    if (ev_widen != NULL)
        clReleaseEvent(ev_widen);
    if (ev_attn != NULL)
        clReleaseEvent(ev_attn);
    if (ev_combine != NULL)
        clReleaseEvent(ev_combine);
    return st;
}

fcl_status fcl_attention_forward_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                    const fcl_attention_aux *aux, cl_mem q, cl_mem k, cl_mem v,
                                    cl_mem o, cl_mem lse, cl_uint num_wait,
                                    const cl_event *wait_list, cl_event *event)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        (num_wait > 0 && wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_check_forward_desc(desc));
    const cl_mem mem[FCL_FORWARD_TENSORS] = {q, k, v, o, lse};
    fcl_tensor_ref t[FCL_FORWARD_TENSORS];
    fcl_forward_tensors(desc, mem, t);
    FCL_TRY(fcl_validate_tensors(ctx, t, lse != NULL ? 5 : 4));
    fcl_variants var;
    FCL_TRY(fcl_variants_prepare(ctx, desc, aux, num_wait, wait_list, &var));
    FCL_TRY(fcl_validate_apart(ctx, t, lse != NULL ? 5 : 4, var.aux, var.num_aux));

    const fcl_forward_job job = {desc, &var, q, k, v, o, lse, 0, NULL, NULL, 0, 0, 0};
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_forward_resolve(ctx, &job, &r));
    fcl_wait wait;
    FCL_TRY(fcl_scratch_wait_list(ctx, num_wait, wait_list, &wait));
    const fcl_status st = fcl_forward_enqueue(ctx, &job, r, &wait, event);
    free(wait.owned);
    return st;
}

fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *desc, cl_mem q,
                                 cl_mem k, cl_mem v, cl_mem o, cl_mem lse, cl_uint num_wait,
                                 const cl_event *wait_list, cl_event *event)
{
    return fcl_attention_forward_ex(ctx, desc, NULL, q, k, v, o, lse, num_wait, wait_list, event);
}
