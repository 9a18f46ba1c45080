/* resolve.c - a plan becomes a built, checked kernel.
 *
 * After building, the driver's own numbers are checked: CL_KERNEL_WORK_GROUP_SIZE
 * (registers can make it smaller than the device maximum) and
 * CL_KERNEL_LOCAL_MEM_SIZE.  If the kernel cannot run as planned, or its build
 * fails while relying on more local memory than the device reports (the probed
 * extra may not fit this kernel), the plan is made again under lower limits.
 * A launch that fails for resources does the same.  What happened is written
 * into the plan's reason, so the reported plan is always the launched one.
 *
 * Implementations count CL_KERNEL_LOCAL_MEM_SIZE differently (NOTES.md,
 * "Local memory as each implementation counts it"): PoCL 3.1 and NVIDIA
 * the declared __local arrays (NVIDIA adds tens of bytes), PoCL 4-6 on CPUs
 * 0, Mesa 22.3's rusticl twice the declared bytes.  The re-plan therefore
 * trusts only the built kernel's answer and converges from it, whether the
 * driver adds a constant or scales.  The other kernels of the program (the
 * split-KV merge, the KV-cache append, the backward's delta) have fixed
 * __local arrays: they are checked as built, and a device that cannot take
 * them gets FCL_ERROR_NO_PLAN, never a launch that fails later.
 */
#include "device/context.h"
#include "programs/programs.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_ATTEMPTS = 16 };

static const char *kernel_function(fcl_kernel_kind kind)
{
    switch (kind) {
    case FCL_KERNEL_FORWARD:
    case FCL_KERNEL_DECODE:
        return "fcl_forward";
    case FCL_KERNEL_BACKWARD_DKDV:
        return "fcl_backward_dkdv";
    case FCL_KERNEL_BACKWARD_DQ:
        return "fcl_backward_dq";
    }
    return "";
}

static void note_fallback(fcl_resolved *r, const char *what, unsigned long long value)
{
    fcl_appendf(r->fallback, sizeof r->fallback, "%s%s %llu", r->fallback[0] ? "; " : "", what,
                value);
}

void fcl_reason_add_fallback(char *reason, size_t size, const char *fallback)
{
    static const char lead[] = "; fallback: ", cut[] = " ...";
    const size_t tail = sizeof lead - 1 + strlen(fallback);
    /* a note too long for `size` by itself is appended as far as it fits */
    if (size > tail + sizeof cut && strlen(reason) + tail >= size) {
        size_t keep = size - tail - sizeof cut; /* leaves the cut, the note and the end */
        while (keep > 0 && reason[keep] != ' ')
            --keep;
        memcpy(reason + keep, cut, sizeof cut);
    }
    fcl_appendf(reason, size, "%s%s", lead, fallback);
}

static const char *const helper_names[FCL_HELPER_COUNT] = {
    [FCL_HELPER_COMBINE] = "fcl_combine",
    [FCL_HELPER_KVCACHE_APPEND] = "fcl_kvcache_append",
    [FCL_HELPER_DELTA] = "fcl_backward_delta",
    [FCL_HELPER_DQ_STORE] = "fcl_backward_dq_store",
    [FCL_HELPER_SINK_GRAD] = "fcl_backward_sink_grad",
    [FCL_HELPER_WIDEN] = "fcl_forward_widen",
    [FCL_HELPER_PREPARE8] = "fcl_forward_prepare8",
};

/* Kernel objects are made once: creating one costs the host as much as a
 * launch, and a decode step launches up to three. */
fcl_status fcl_resolved_kernel(fcl_resolved *r, fcl_helper helper, cl_kernel *out)
{
    if (r->helpers[helper] == NULL) {
        cl_program prog = NULL;
        cl_int err = clGetKernelInfo(r->kernel, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
        if (err == CL_SUCCESS)
            r->helpers[helper] = clCreateKernel(prog, helper_names[helper], &err);
        if (err != CL_SUCCESS) {
            r->helpers[helper] = NULL;
            return err;
        }
    }
    *out = r->helpers[helper];
    return FCL_OK;
}

/* r's kernels, before its program changes or r goes. */
static void release_kernels(fcl_resolved *r)
{
    if (r->kernel != NULL)
        clReleaseKernel(r->kernel);
    r->kernel = NULL;
    for (int i = 0; i < FCL_HELPER_COUNT; ++i) {
        if (r->helpers[i] != NULL)
            clReleaseKernel(r->helpers[i]);
        r->helpers[i] = NULL;
    }
}

/* The local-memory limit for the next plan after a kernel planned at
 * `planned` bytes was built at `built` > `usable`: the larger of what an
 * added constant (built - planned) and what a scale (built / planned) would
 * leave, and always below `planned`, so the attempts shrink until the
 * built kernel fits or nothing does. */
static uint64_t next_local_limit(uint64_t usable, uint64_t planned, uint64_t built)
{
    const uint64_t extra = built - planned;
    const uint64_t if_added = usable > extra ? usable - extra : 0;
    const uint64_t if_scaled = (uint64_t)((double)usable * (double)planned / (double)built);
    uint64_t next = if_added > if_scaled ? if_added : if_scaled;
    if (next >= planned)
        next = planned - 1;
    return next;
}

/* r's plan under r->limits: the wgmma or tensor-core piece when the build
 * asks for it; else the CPU piece on CPUs (unless told otherwise or tuned with more
 * than one work-item a group), falling back to the portable piece where
 * the CPU piece's tiles do not fit the limits (a small local memory); else
 * the portable piece. */
static fcl_status make_plan(fcl_context *ctx, fcl_resolved *r)
{
    const fcl_build *b = &r->build;
    const fcl_tuned_tile *forced =
        ctx->has_tile_override[b->kind] ? &ctx->tile_override[b->kind] : NULL;
    if (b->features & FCL_BUILD_WGMMA)
        return fcl_plan_make_wgmma(&ctx->caps, b->kind, b->head_dim, b->dtype, &r->limits, forced,
                                   ctx->emulate_tensor_cores, b->features, &r->plan);
    if (b->features & FCL_BUILD_TILE_MMA) {
        fcl_tuned_tile decode_target;
        if (forced == NULL && b->kind == FCL_KERNEL_DECODE) {
            FCL_TRY(fcl_decode_target(&ctx->caps, b, FCL_PIECE_PORTABLE, &decode_target));
            forced = &decode_target;
        }
        return fcl_plan_make_mma(&ctx->caps, b->kind, b->head_dim, b->dtype,
                                 (b->features & FCL_BUILD_FUSED_DQ) != 0, &r->limits, forced,
                                 ctx->emulate_tensor_cores, &r->plan);
    }
    const bool cpu_piece = !ctx->portable_only && fcl_cpu_piece_width(&ctx->caps) > 0 &&
                           (forced == NULL || (forced->ty == 1 && forced->tx == 1));
    for (int cpu = cpu_piece ? 1 : 0; cpu >= 0; --cpu) {
        const fcl_tuned_tile *target = forced;
        fcl_tuned_tile decode_target;
        if (target == NULL && b->kind == FCL_KERNEL_DECODE) {
            FCL_TRY(fcl_decode_target(&ctx->caps, b, cpu ? FCL_PIECE_CPU : FCL_PIECE_PORTABLE,
                                      &decode_target));
            target = &decode_target;
        }
        const fcl_status st =
            cpu ? fcl_plan_make_cpu(&ctx->caps, b->kind, b->head_dim, b->dtype, b->features,
                                    &r->limits, target, &r->plan)
                : fcl_plan_make(&ctx->caps, b->kind, b->head_dim, b->dtype, b->features,
                                &r->limits, target, &r->plan);
        if (st != FCL_ERROR_NO_PLAN || !cpu || forced != NULL)
            return st;
        note_fallback(r, "CPU piece fits no tile within local bytes",
                      r->limits.local_bytes ? r->limits.local_bytes : ctx->caps.local_mem_usable);
    }
    return FCL_ERROR_NO_PLAN;
}

/* Whether the program's other kernels run on this device as built: their
 * __local arrays are fixed, and so is the merge's work-group size
 * (reqd_work_group_size), which is checked against the device's limit,
 * not the kernel's answer: rusticl (Mesa 22.3) answers 32 for every
 * kernel, even one that requires 256, and launches either.  Checked here,
 * at resolve, so a call is refused before anything is enqueued. */
static fcl_status check_helpers(fcl_context *ctx, fcl_resolved *r)
{
    const bool forward = r->build.kind == FCL_KERNEL_FORWARD || r->build.kind == FCL_KERNEL_DECODE;
    for (int h = 0; h < FCL_HELPER_COUNT; ++h) {
        /* the dQ program holds the delta and the sinks' gradient, a fused
         * dK/dV program the dQ store, the FP8 forward on the accelerator's
         * path the widening (common.cl, FCL_KV_WIDENED), every forward's
         * the other two */
        const bool dq_helper = h == FCL_HELPER_DELTA || h == FCL_HELPER_SINK_GRAD;
        const bool here =
            dq_helper                  ? r->build.kind == FCL_KERNEL_BACKWARD_DQ
            : h == FCL_HELPER_DQ_STORE ? (r->build.features & FCL_BUILD_FUSED_DQ) != 0
            : h == FCL_HELPER_WIDEN    ? forward && fcl_forward_widens(&r->build)
            : h == FCL_HELPER_PREPARE8 ? forward && fcl_forward_prepares8(&r->build)
                                       : forward;
        if (!here)
            continue;
        cl_kernel k = NULL;
        FCL_TRY(fcl_resolved_kernel(r, (fcl_helper)h, &k));
        size_t compiled[3] = {0, 0, 0};
        cl_ulong local = 0;
        cl_int err = clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE,
                                              sizeof local, &local, NULL);
        if (err == CL_SUCCESS)
            err = clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                           sizeof compiled, compiled, NULL);
        if (err != CL_SUCCESS)
            return err;
        const size_t needed = compiled[0] * (compiled[1] ? compiled[1] : 1) *
                              (compiled[2] ? compiled[2] : 1);
        if (local > ctx->caps.local_mem_usable) {
            note_fallback(r, "a helper kernel needs local bytes", local);
            return FCL_ERROR_NO_PLAN;
        }
        if (needed > ctx->caps.max_work_group_size) {
            note_fallback(r, "a helper kernel needs work-items", needed);
            return FCL_ERROR_NO_PLAN;
        }
    }
    return FCL_OK;
}

static fcl_status build_checked(fcl_context *ctx, fcl_resolved *r)
{
    for (int attempt = 0; attempt < MAX_ATTEMPTS; ++attempt) {
        FCL_TRY(make_plan(ctx, r));
        char options[640];
        int n = fcl_kernel_options(&r->plan, &r->build, ctx->pocl_cpu, options, sizeof options);
        if (ctx->extra_build_options[0] != '\0' && n > 0 && (size_t)n < sizeof options)
            fcl_appendf(options, sizeof options, " %s", ctx->extra_build_options);
        fcl_program_id pid = r->build.kind == FCL_KERNEL_FORWARD || r->build.kind == FCL_KERNEL_DECODE
                                 ? FCL_PROGRAM_FORWARD
                                 : FCL_PROGRAM_BACKWARD;
        cl_program prog = NULL;
        fcl_status st = fcl_get_program(ctx, pid, options, &prog);
        if (st == FCL_ERROR_BUILD_FAILED &&
            r->plan.pub.local_bytes > ctx->caps.local_mem_reported) {
            note_fallback(r, "build failed with local bytes", r->plan.pub.local_bytes);
            r->limits.local_bytes = r->plan.pub.local_bytes - 1;
            continue;
        }
        FCL_TRY(st);

        cl_int err = CL_SUCCESS;
        cl_kernel kernel = clCreateKernel(prog, kernel_function(r->build.kind), &err);
        if (err != CL_SUCCESS)
            return err;
        size_t kernel_wg = 0;
        cl_ulong kernel_local = 0;
        err = clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                       sizeof kernel_wg, &kernel_wg, NULL);
        if (err == CL_SUCCESS)
            err = clGetKernelWorkGroupInfo(kernel, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE,
                                           sizeof kernel_local, &kernel_local, NULL);
        if (err != CL_SUCCESS) {
            clReleaseKernel(kernel);
            return err;
        }
        if (kernel_wg < r->plan.pub.work_group_size) {
            clReleaseKernel(kernel);
            note_fallback(r, "kernel allows only work-items", kernel_wg);
            r->limits.work_group_size = kernel_wg;
            continue;
        }
        if (kernel_local > ctx->caps.local_mem_usable) {
            clReleaseKernel(kernel);
            note_fallback(r, "kernel needs local bytes", kernel_local);
            r->limits.local_bytes = next_local_limit(ctx->caps.local_mem_usable,
                                                     r->plan.pub.local_bytes, kernel_local);
            if (r->limits.local_bytes == 0)
                return FCL_ERROR_NO_PLAN;
            continue;
        }
        r->kernel = kernel;
        const fcl_status helpers = check_helpers(ctx, r);
        if (helpers != FCL_OK) {
            release_kernels(r);
            return helpers;
        }
        if (r->fallback[0] != '\0') {
            fcl_reason_add_fallback(r->plan.pub.reason, sizeof r->plan.pub.reason, r->fallback);
            fcl_appendf(r->plan.pub.source, sizeof r->plan.pub.source, " + fallback");
        }
        return FCL_OK;
    }
    return FCL_ERROR_NO_PLAN;
}

fcl_build fcl_build_of(fcl_kernel_kind kind, size_t head_dim, fcl_dtype dtype, unsigned features)
{
    fcl_build b = {kind, head_dim, dtype, dtype, features, 1, 0, 0};
    return b;
}

bool fcl_forward_widens(const fcl_build *b)
{
    return b->kind == FCL_KERNEL_FORWARD && fcl_dtype_is_fp8(b->dtype) &&
           (b->features & FCL_BUILD_WGMMA) && (b->features & FCL_BUILD_WG_TMA) &&
           !(b->features & FCL_BUILD_FP8_PRODUCTS);
}

bool fcl_forward_prepares8(const fcl_build *b)
{
    return b->kind == FCL_KERNEL_FORWARD && (b->features & FCL_BUILD_FP8_PRODUCTS);
}

static bool same_build(const fcl_build *a, const fcl_build *b)
{
    return a->kind == b->kind && a->head_dim == b->head_dim && a->dtype == b->dtype &&
           a->out_dtype == b->out_dtype && a->features == b->features && a->pack == b->pack && a->page_size == b->page_size &&
           a->rows == b->rows;
}

fcl_status fcl_resolve(fcl_context *ctx, const fcl_build *build, fcl_resolved **out)
{
    for (size_t i = 0; i < ctx->num_resolved; ++i) {
        if (same_build(&ctx->resolved[i]->build, build)) {
            /* a re-plan after a launch failure that failed itself (a build
             * or an allocation) left no kernel: plan again, within the
             * limits learned so far, rather than launch nothing */
            if (ctx->resolved[i]->kernel == NULL)
                FCL_TRY(build_checked(ctx, ctx->resolved[i]));
            *out = ctx->resolved[i];
            return FCL_OK;
        }
    }
    fcl_resolved *r = fcl_host_calloc(1, sizeof *r);
    fcl_resolved **grown = fcl_host_realloc(ctx->resolved, (ctx->num_resolved + 1) * sizeof *grown);
    if (r == NULL || grown == NULL) {
        free(r);
        if (grown != NULL)
            ctx->resolved = grown;
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    }
    ctx->resolved = grown;
    r->build = *build;
    fcl_status st = build_checked(ctx, r);
    if (st != FCL_OK) {
        free(r);
        return st;
    }
    ctx->resolved[ctx->num_resolved++] = r;
    *out = r;
    return FCL_OK;
}

fcl_status fcl_resolve_after_launch_failure(fcl_context *ctx, fcl_resolved *r, cl_int cl_err)
{
    if (cl_err != CL_OUT_OF_RESOURCES && cl_err != CL_INVALID_WORK_GROUP_SIZE)
        return cl_err;
    if (r->plan.pub.local_bytes <= 1)
        return cl_err;
    release_kernels(r);
    note_fallback(r, cl_err == CL_OUT_OF_RESOURCES ? "launch out of resources at local bytes"
                                                   : "launch refused work-group size",
                  cl_err == CL_OUT_OF_RESOURCES ? r->plan.pub.local_bytes
                                                : r->plan.pub.work_group_size);
    if (cl_err == CL_OUT_OF_RESOURCES)
        r->limits.local_bytes = r->plan.pub.local_bytes - 1;
    else
        r->limits.work_group_size = r->plan.pub.work_group_size / 2;
    return build_checked(ctx, r);
}

void fcl_forget_resolved(fcl_context *ctx)
{
    for (size_t i = 0; i < ctx->num_resolved; ++i) {
        release_kernels(ctx->resolved[i]);
        free(ctx->resolved[i]);
    }
    free(ctx->resolved);
    ctx->resolved = NULL;
    ctx->num_resolved = 0;
}
