/* backward.c - validate, plan, bind and launch the three backward kernels:
 * delta = rowsum(dO * O), then dQ and dK/dV, which both only need delta
 * (and, with attention sinks, the sinks' gradient from delta and LSE). */
#include "calls/calls.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct backward_call {
    const fcl_attention_desc *desc;
    const fcl_variants *var;
    cl_mem q, k, v, o, lse, dout, dq, dk, dv, delta;
    /* fused dQ (flash_bwd.cl): fp32 sums, and the Q blocks' counters with
     * the failure flag at failed_at; NULL otherwise */
    cl_mem dq_acc, dq_sem;
    int sem_per_head;
    int64_t failed_at;
    cl_mem sinks, dsinks;         /* attention sinks and their gradient, or NULL */
    /* dK/dV's and dQ's tensor maps (FCL_BUILD_WG_TMA: the template and
     * each work-group's two; apart, as the two kernels may run at once),
     * else the context's placeholder */
    cl_mem maps, maps_dq;
} backward_call;

/* The arguments both tiled kernels start with: Q, K, V, dO, LSE, delta. */
static void common_head(fcl_args *a, const backward_call *c)
{
    fcl_arg_mem(a, c->q);
    fcl_arg_mem(a, c->k);
    fcl_arg_mem(a, c->v);
    fcl_arg_mem(a, c->dout);
    fcl_arg_mem(a, c->lse);
    fcl_arg_mem(a, c->delta);
}

/* ... and end with, after their output layouts. */
static void common_tail(fcl_args *a, const backward_call *c, int num_groups_bh)
{
    const fcl_attention_desc *d = c->desc;
    fcl_arg_long(a, (int64_t)d->lse_offset);
    fcl_arg_int(a, c->var->lse_rows);
    fcl_arg_int(a, (int)d->seqlen_q);
    fcl_arg_int(a, (int)d->seqlen_k);
    fcl_arg_int(a, (int)d->head_dim);
    fcl_arg_int(a, (int)fcl_head_dim_v(d));
    fcl_arg_int(a, (int)d->heads_q);
    fcl_arg_int(a, (int)(d->heads_q / d->heads_kv));
    fcl_arg_int(a, num_groups_bh);
    fcl_arg_float(a, fcl_effective_scale(d));
    fcl_arg_int(a, c->var->window_left);
    fcl_arg_int(a, c->var->window_right);
    fcl_arg_variants(a, c->var);
}

/* dQ's work-groups: Q blocks of r's plan times batch and query heads */
static size_t dq_groups(const fcl_resolved *r, const fcl_attention_desc *d,
                        const fcl_variants *var)
{
    return (var->longest_q + r->plan.pub.br - 1) / r->plan.pub.br * d->batch * d->heads_q;
}

static fcl_status set_dq_args(const fcl_resolved *r, cl_kernel kernel, const void *user,
                              size_t *groups)
{
    const backward_call *c = user;
    const fcl_attention_desc *d = c->desc;
    const size_t num_bh = d->batch * d->heads_q;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    common_head(&a, c);
    fcl_arg_mem(&a, c->dq);
    fcl_arg_layout(&a, &d->q);
    fcl_arg_layout(&a, &d->k);
    fcl_arg_layout(&a, &d->v);
    fcl_arg_layout(&a, &d->dout);
    fcl_arg_layout(&a, &d->dq);
    common_tail(&a, c, (int)num_bh);
    fcl_arg_mem(&a, c->maps_dq);
    *groups = dq_groups(r, d, c->var);
    return a.err;
}

/* dK/dV's work-groups: key blocks of r's plan times batch and K/V heads */
static size_t dkdv_groups(const fcl_resolved *r, const fcl_attention_desc *d,
                          const fcl_variants *var)
{
    return (var->longest_k + r->plan.pub.bc - 1) / r->plan.pub.bc * d->batch * d->heads_kv;
}

static fcl_status set_dkdv_args(const fcl_resolved *r, cl_kernel kernel, const void *user,
                                size_t *groups)
{
    const backward_call *c = user;
    const fcl_attention_desc *d = c->desc;
    const size_t num_bhk = d->batch * d->heads_kv;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    common_head(&a, c);
    fcl_arg_mem(&a, c->dk);
    fcl_arg_mem(&a, c->dv);
    fcl_arg_layout(&a, &d->q);
    fcl_arg_layout(&a, &d->k);
    fcl_arg_layout(&a, &d->v);
    fcl_arg_layout(&a, &d->dout);
    fcl_arg_layout(&a, &d->dk);
    fcl_arg_layout(&a, &d->dv);
    common_tail(&a, c, (int)num_bhk);
    fcl_arg_mem(&a, c->dq_acc);
    fcl_arg_mem(&a, c->dq_sem);
    fcl_arg_int(&a, c->sem_per_head);
    fcl_arg_long(&a, c->failed_at);
    fcl_arg_mem(&a, c->maps);
    *groups = dkdv_groups(r, d, c->var);
    return a.err;
}

/* delta lives in the dQ kernel's program (it is always needed with it).
 * `lanes` work-items per query row (flash_bwd.cl): one on a CPU, where a
 * row's work-item reads it whole; 32 on other devices, whose neighbouring
 * work-items read a row's neighbouring elements together.  Groups of
 * DELTA_WG work-items, or the largest power of two the built kernel takes;
 * they stride over the rows past DELTA_GROUPS of them.  Packed sequences are
 * one batch entry of total_q rows, which makes delta (heads_q, total_q)
 * like their LSE. */
static fcl_status enqueue_delta(fcl_context *ctx, fcl_resolved *dq, const backward_call *c,
                                cl_uint num_wait, const cl_event *wait_list, cl_event *done)
{
    enum { DELTA_WG = 128, DELTA_GROUPS = 1 << 16 }; /* flash_bwd.cl's FCL_DELTA_WG */
    const fcl_attention_desc *d = c->desc;
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(dq, FCL_HELPER_DELTA, &kernel));
    cl_int err = CL_SUCCESS;
    const size_t batch = d->varlen ? 1 : d->batch;
    const size_t rows = batch * d->heads_q * (size_t)c->var->lse_rows;
    size_t local = DELTA_WG, kernel_max = 0;
    FCL_TRY(clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof kernel_max, &kernel_max, NULL));
    while (local > kernel_max && local > 1)
        local /= 2;
    const int lanes = ctx->caps.is_cpu ? 1 : (int)(local < 32 ? local : 32);
    const size_t rows_wg = local / (size_t)lanes;
    size_t groups = (rows + rows_wg - 1) / rows_wg;
    if (groups > DELTA_GROUPS)
        groups = DELTA_GROUPS;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->o);
    fcl_arg_mem(&a, c->dout);
    fcl_arg_mem(&a, c->delta);
    fcl_arg_layout(&a, &d->o);
    fcl_arg_layout(&a, &d->dout);
    fcl_arg_int(&a, c->var->lse_rows);
    fcl_arg_int(&a, (int)fcl_head_dim_v(d)); /* O's and dO's columns */
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_long(&a, (int64_t)rows);
    fcl_arg_int(&a, lanes);
    err = a.err;
    const size_t global = groups * local;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &local, num_wait,
                                     wait_list, done);
    return err;
}

/* Scales and stores the fused dK/dV kernel's dQ sums: one work-item per
 * element of dQ, rows as delta's. */
static fcl_status enqueue_dq_store(fcl_context *ctx, fcl_resolved *dkdv, const backward_call *c,
                                   cl_uint num_wait, const cl_event *wait_list, cl_event *done)
{
    const fcl_attention_desc *d = c->desc;
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(dkdv, FCL_HELPER_DQ_STORE, &kernel));
    const size_t batch = d->varlen ? 1 : d->batch;
    const size_t n = batch * d->heads_q * (size_t)c->var->lse_rows * d->head_dim;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->dq_acc);
    fcl_arg_mem(&a, c->dq_sem);
    fcl_arg_long(&a, c->failed_at);
    fcl_arg_mem(&a, c->dq);
    fcl_arg_layout(&a, &d->dq);
    fcl_arg_int(&a, c->var->lse_rows);
    fcl_arg_int(&a, (int)d->head_dim);
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_float(&a, fcl_effective_scale(d));
    fcl_arg_long(&a, (int64_t)n);
    if (a.err != CL_SUCCESS)
        return a.err;
    return clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &n, NULL, num_wait, wait_list, done);
}

/* Whether dK/dV computes dQ too, and how (FCL_BUILD_FUSED_DQ bits), when
 * FLASHCL_BACKWARD_DQ asks for it: "ordered" (key-block order, bitwise
 * repeatable) or "any-order" (atomics, not repeatable).  Off by default:
 * on the H100 the fused kernel ran the whole backward at 0.76-0.84x the
 * separate dQ kernel's speed (NOTES.md, run 24).  Possible on tensor cores
 * in one launch (head_dim <= 128), without a block mask (the key blocks
 * that visit a Q block must be consecutive, flash_bwd.cl), on a device
 * that ends no loops (the waits are loops: loop_limit.c). */
static unsigned fused_dq_bits(const fcl_context *ctx, unsigned build_dkdv, bool wide)
{
    const fcl_dq_form form = fcl_backward_dq_form();
    const bool any_order = form == FCL_DQ_ANY_ORDER;
    if (form == FCL_DQ_SEPARATE || !(build_dkdv & FCL_BUILD_TILE_MMA) || wide ||
        (build_dkdv & FCL_FEAT_BLOCKMASK) || ctx->loop_limit != 0)
        return 0;
    return FCL_BUILD_FUSED_DQ | (any_order ? FCL_BUILD_FUSED_DQ_ANY_ORDER : 0);
}

/* The sinks' gradient, one work-group per query head (flash_bwd.cl),
 * after delta. */
static fcl_status enqueue_sink_grad(fcl_context *ctx, fcl_resolved *dq, const backward_call *c,
                                    const cl_event *after, cl_event *done)
{
    enum { SINK_GRAD_WG = 64 }; /* flash_bwd.cl's FCL_SINK_GRAD_WG */
    const fcl_attention_desc *d = c->desc;
    cl_kernel kernel = NULL;
    FCL_TRY(fcl_resolved_kernel(dq, FCL_HELPER_SINK_GRAD, &kernel));
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->lse);
    fcl_arg_long(&a, (int64_t)d->lse_offset);
    fcl_arg_mem(&a, c->delta);
    fcl_arg_mem(&a, c->sinks);
    fcl_arg_mem(&a, c->dsinks);
    fcl_arg_int(&a, (int)d->batch);
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_int(&a, c->var->lse_rows);
    fcl_arg_mem(&a, c->var->cu_q);
    cl_int err = a.err;
    const size_t local = SINK_GRAD_WG, global = d->heads_q * local;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &local, 1, after, done);
    return err;
}

size_t fcl_backward_loop_outer(const fcl_attention_desc *desc, fcl_kernel_kind kind)
{
    if (kind == FCL_KERNEL_BACKWARD_DQ)
        return desc->seqlen_k;
    return desc->seqlen_q * (desc->heads_q / desc->heads_kv);
}

fcl_backward_builds fcl_backward_builds_of(const fcl_context *ctx, const fcl_attention_desc *desc,
                                           unsigned features)
{
    const size_t D = desc->head_dim;
    const unsigned mma = FCL_BUILD_TILE_MMA;
    const unsigned build_dq =
        features | (fcl_uses_tensor_cores(ctx, desc, FCL_KERNEL_BACKWARD_DQ) ? mma : 0);
    const unsigned build_dkdv =
        features | (fcl_uses_tensor_cores(ctx, desc, FCL_KERNEL_BACKWARD_DKDV) ? mma : 0);
    /* above head_dim 128 dK/dV splits its columns over warps or its
     * outputs over two launches (fcl_mma_dkdv_split); dQ stays apart */
    const bool wide = (build_dkdv & mma) && D > 128;
    const bool split = wide && fcl_mma_dkdv_split(&ctx->caps, ctx->emulate_tensor_cores, fcl_dkdv_forced_tile(ctx), D);
    fcl_backward_builds bb;
    /* either piece of dK/dV takes the fused dQ forms; the dQ kernel's
     * program then serves delta alone */
    const unsigned fused = fused_dq_bits(ctx, build_dkdv, wide);
    bb.fused_dq = fused != 0;
    const unsigned wgmma_dq =
        fcl_uses_wgmma(ctx, desc, FCL_KERNEL_BACKWARD_DQ, build_dq) ? FCL_BUILD_WGMMA : 0;
    /* K and V by the accelerator (tile_nv_wgmma.cl) where it applies */
    const unsigned tma_dq =
        wgmma_dq && !fused && fcl_uses_wgmma_backward_tma(ctx, desc, FCL_KERNEL_BACKWARD_DQ)
            ? FCL_BUILD_WG_TMA
            : 0;
    /* the tile by the call's lengths: two warpgroups at head_dim 64 with many
     * keys and no mask */
    const unsigned many_keys =
        wgmma_dq && !fused ? fcl_variants_wgmma_tile(desc, FCL_KERNEL_BACKWARD_DQ, false) : 0;
    /* ... and where the call has no edge tile, none of the tests for them */
    unsigned dq_bits = build_dq | wgmma_dq | tma_dq | many_keys;
    dq_bits |= fcl_variants_whole_tiles(desc, FCL_KERNEL_BACKWARD_DQ, dq_bits);
    bb.dq = fcl_build_of(FCL_KERNEL_BACKWARD_DQ, D, desc->dtype, dq_bits);
    /* dK/dV on the wgmma piece (fcl_uses_wgmma) */
    const unsigned wgmma =
        fcl_uses_wgmma(ctx, desc, FCL_KERNEL_BACKWARD_DKDV, build_dkdv) ? FCL_BUILD_WGMMA : 0;
    /* the tile by the call's lengths: one warpgroup at head_dim 128 with
     * few query rows a key block (the fused dQ keeps the tile it was
     * measured with) */
    const unsigned few_rows =
        wgmma ? fcl_variants_wgmma_tile(desc, FCL_KERNEL_BACKWARD_DKDV, fused != 0) : 0;
    /* Q and dO by the accelerator (tile_nv_wgmma.cl) where it applies, under
     * GQA by a pair of maps for each query head of a K/V head; with the
     * fused dQ only where FLASHCL_WGMMA_BACKWARD_TMA=1 asks (a measurement's
     * form: NOTES.md, run 65) */
    const unsigned tma =
        !wgmma || (fused && !fcl_wgmma_backward_tma_asked()) ||
                !fcl_uses_wgmma_backward_tma(ctx, desc, FCL_KERNEL_BACKWARD_DKDV)
            ? 0
        : desc->heads_q != desc->heads_kv ? FCL_BUILD_WG_TMA | FCL_BUILD_WG_TMA_HEADS
                                          : FCL_BUILD_WG_TMA;
    unsigned dkdv_bits =
        build_dkdv | wgmma | fused | few_rows | tma | (split ? FCL_BUILD_DV_ONLY : 0);
    dkdv_bits |= fcl_variants_whole_tiles(desc, FCL_KERNEL_BACKWARD_DKDV, dkdv_bits);
    bb.dkdv[0] = fcl_build_of(FCL_KERNEL_BACKWARD_DKDV, D, desc->dtype, dkdv_bits);
    bb.dkdv[1] = fcl_build_of(FCL_KERNEL_BACKWARD_DKDV, D, desc->dtype,
                              build_dkdv | FCL_BUILD_DK_ONLY);
    bb.dkdv_launches = split ? 2 : 1;
    return bb;
}

fcl_status fcl_attention_backward_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                     const fcl_attention_aux *aux, cl_mem q, cl_mem k, cl_mem v,
                                     cl_mem o, cl_mem lse, cl_mem dout, cl_mem dq, cl_mem dk,
                                     cl_mem dv, cl_uint num_wait, const cl_event *wait_list,
                                     cl_event *event)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        dout == NULL || dq == NULL || dk == NULL || dv == NULL ||
        (num_wait > 0 && wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    if (lse == NULL)
        return FCL_ERROR_MISSING_LSE;
    FCL_TRY(fcl_check_backward_desc(desc));
    /* dsinks is an output tensor of the call when sinks are on (with them
     * off, fcl_variants_prepare refuses a dsinks buffer) */
    const cl_mem dsinks = desc->sinks && aux != NULL ? aux->dsinks : NULL;
    const cl_mem mem[FCL_BACKWARD_TENSORS] = {q, k, v, o, lse, dout, dq, dk, dv, dsinks};
    fcl_tensor_ref t[FCL_BACKWARD_TENSORS];
    fcl_backward_tensors(desc, mem, t);
    FCL_TRY(fcl_validate_tensors(ctx, t, FCL_BACKWARD_TENSORS));
    fcl_variants var;
    FCL_TRY(fcl_variants_prepare(ctx, desc, aux, num_wait, wait_list, &var));
    FCL_TRY(fcl_validate_apart(ctx, t, FCL_BACKWARD_TENSORS, var.aux, var.num_aux));

    /* Build and check every kernel before anything is enqueued. */
    fcl_resolved *r_dq = NULL, *r_dkdv[2] = {NULL, NULL};
    fcl_backward_builds bb = fcl_backward_builds_of(ctx, desc, var.features);
    const bool split = bb.dkdv_launches == 2;
    FCL_TRY(fcl_resolve(ctx, &bb.dq, &r_dq));
    FCL_TRY(fcl_resolve(ctx, &bb.dkdv[0], &r_dkdv[0]));
    if (split)
        FCL_TRY(fcl_resolve(ctx, &bb.dkdv[1], &r_dkdv[1]));
    /* a device that ends long loops (loop_limit.c): the stated lengths, as
     * the plan query sees them */
    FCL_TRY(fcl_loop_check(ctx, &r_dq->plan.pub,
                           fcl_backward_loop_outer(desc, FCL_KERNEL_BACKWARD_DQ)));
    FCL_TRY(fcl_loop_check(ctx, &r_dkdv[0]->plan.pub,
                           fcl_backward_loop_outer(desc, FCL_KERNEL_BACKWARD_DKDV)));

    /* delta (and the fused dQ's sums) in workspaces the context keeps:
     * a buffer made and released by each call made NVIDIA's driver wait at
     * the release for every kernel queued before it, so the call held the
     * host for the device's work (NOTES.md, run 57). */
    const size_t batch = desc->varlen ? 1 : desc->batch;
    const size_t rows = batch * desc->heads_q * (size_t)var.lse_rows;
    cl_mem delta = NULL;
    FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_DELTA, rows * sizeof(float), &delta));
    backward_call call = {desc, &var, q, k, v, o, lse, dout, dq, dk, dv, delta,
                          NULL, NULL, 0, 0, var.sinks, dsinks, ctx->placeholder,
                          ctx->placeholder};
    /* dK/dV: a pair of maps a work-group, under GQA one for each query head
     * of its K/V head */
    const unsigned dkdv_features = r_dkdv[0]->build.features;
    if (dkdv_features & FCL_BUILD_WG_TMA)
        FCL_TRY(fcl_tensor_maps_buffer(
            ctx, FCL_SCRATCH_TENSOR_MAPS,
            dkdv_groups(r_dkdv[0], desc, &var) *
                (dkdv_features & FCL_BUILD_WG_TMA_HEADS ? desc->heads_q / desc->heads_kv : 1),
            &call.maps));
    if (r_dq->build.features & FCL_BUILD_WG_TMA)
        FCL_TRY(fcl_tensor_maps_buffer(ctx, FCL_SCRATCH_TENSOR_MAPS_DQ,
                                       dq_groups(r_dq, desc, &var), &call.maps_dq));
    size_t acc_bytes = 0, sem_bytes = 0;
    if (bb.fused_dq) {
        /* counters per Q block of the dK/dV plan (flash_bwd.cl,
         * fcl_dq_sem_index), then the failure flag */
        const size_t br = r_dkdv[0]->plan.pub.br;
        const size_t per_head = desc->varlen ? desc->total_q / br + desc->batch
                                             : (desc->seqlen_q + br - 1) / br;
        const size_t heads = batch * desc->heads_q;
        acc_bytes = rows * desc->head_dim * sizeof(float);
        sem_bytes = (heads * per_head + 1) * sizeof(cl_int);
        call.sem_per_head = (int)per_head;
        call.failed_at = (int64_t)(heads * per_head);
        FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_DQ_ACC, acc_bytes, &call.dq_acc));
        FCL_TRY(fcl_scratch_get(ctx, FCL_SCRATCH_DQ_SEM, sem_bytes, &call.dq_sem));
    }
    /* on a caller's out-of-order queue, after the last call that used the
     * workspaces */
    fcl_wait wait;
    FCL_TRY(fcl_scratch_wait_list(ctx, num_wait, wait_list, &wait));
    /* Events chain the kernels, so a caller's out-of-order queue works too:
     * delta (and the zeroed sums), then dQ and the dK/dV launches, or the
     * fused launch and the dQ store; the sinks' gradient after delta. */
    fcl_status st = FCL_OK;
    cl_event ev_start[4] = {NULL, NULL, NULL, NULL}, ev_parts[4] = {NULL, NULL, NULL, NULL};
    cl_uint starts = 0, parts = 0;
    st = enqueue_delta(ctx, r_dq, &call, wait.count, wait.list, &ev_start[starts++]);
    if (st == FCL_OK && bb.fused_dq) {
        const cl_float zero = 0.0f;
        const cl_int none = 0;
        st = clEnqueueFillBuffer(ctx->queue, call.dq_acc, &zero, sizeof zero, 0, acc_bytes,
                                 wait.count, wait.list, &ev_start[starts++]);
        if (st == FCL_OK)
            st = clEnqueueFillBuffer(ctx->queue, call.dq_sem, &none, sizeof none, 0, sem_bytes,
                                     wait.count, wait.list, &ev_start[starts++]);
        cl_event ev_fused = NULL;
        if (st == FCL_OK)
            st = fcl_launch(ctx, r_dkdv[0], set_dkdv_args, &call, starts, ev_start, &ev_fused);
        /* one of the parts (released with them): if the dQ store then fails
         * to enqueue, the fused launch is still what the workspaces are busy
         * with (below) */
        if (ev_fused != NULL)
            ev_parts[parts++] = ev_fused;
        if (st == FCL_OK)
            st = enqueue_dq_store(ctx, r_dkdv[0], &call, 1, &ev_fused, &ev_parts[parts++]);
    } else if (st == FCL_OK) {
        st = fcl_launch(ctx, r_dq, set_dq_args, &call, starts, ev_start, &ev_parts[parts++]);
        for (int i = 0; i < bb.dkdv_launches && st == FCL_OK; ++i)
            st = fcl_launch(ctx, r_dkdv[i], set_dkdv_args, &call, starts, ev_start,
                            &ev_parts[parts++]);
    }
    if (st == FCL_OK && dsinks != NULL)
        st = enqueue_sink_grad(ctx, r_dq, &call, &ev_start[0], &ev_parts[parts++]);
    free(wait.owned);
    /* The end of every command enqueued (the workspaces are busy until
     * then, also after a later step failed), when a caller's event or an
     * out-of-order queue needs it. */
    cl_event last = NULL;
    const bool track = !ctx->queue_in_order;
    cl_uint ended = 0;
    const cl_event *ends = ev_parts;
    for (cl_uint i = 0; i < parts && ev_parts[i] != NULL; ++i)
        ended = i + 1;
    if (ended == 0) { /* nothing past the start commands */
        ends = ev_start;
        for (cl_uint i = 0; i < starts && ev_start[i] != NULL; ++i)
            ended = i + 1;
    }
    if ((track || (st == FCL_OK && event != NULL)) && ended > 0) {
        const fcl_status marked = clEnqueueMarkerWithWaitList(ctx->queue, ended, ends, &last);
        st = st != FCL_OK ? st : marked;
    }
    if (track && last != NULL)
        fcl_scratch_used_until(ctx, last);
    if (st == FCL_OK && event != NULL) {
        *event = last;
        last = NULL;
    }
    if (last != NULL)
        clReleaseEvent(last);
    for (int i = 0; i < 4; ++i) {
        if (ev_parts[i] != NULL)
            clReleaseEvent(ev_parts[i]);
        if (ev_start[i] != NULL)
            clReleaseEvent(ev_start[i]);
    }
    return st;
}

fcl_status fcl_attention_backward(fcl_context *ctx, const fcl_attention_desc *desc, cl_mem q,
                                  cl_mem k, cl_mem v, cl_mem o, cl_mem lse, cl_mem dout,
                                  cl_mem dq, cl_mem dk, cl_mem dv, cl_uint num_wait,
                                  const cl_event *wait_list, cl_event *event)
{
    return fcl_attention_backward_ex(ctx, desc, NULL, q, k, v, o, lse, dout, dq, dk, dv, num_wait,
                                     wait_list, event);
}
