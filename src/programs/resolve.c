/* resolve.c - a plan becomes a built, checked kernel.
 *
 * After building, the driver's own numbers are checked: CL_KERNEL_WORK_GROUP_SIZE
 * (registers can make it smaller than the device maximum) and
 * CL_KERNEL_LOCAL_MEM_SIZE.  If the kernel cannot run as planned, or its build
 * fails while relying on more local memory than the device reports (the probed
 * extra may not fit this kernel), the plan is made again under lower limits.
 * A launch that fails for resources does the same.  What happened is written
 * into the plan's reason, so the reported plan is always the launched one.
 */
#include "internal.h"

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

static fcl_status build_checked(fcl_context *ctx, fcl_resolved *r)
{
    for (int attempt = 0; attempt < MAX_ATTEMPTS; ++attempt) {
        const fcl_build *b = &r->build;
        const fcl_tuned_tile *target =
            ctx->has_tile_override[b->kind] ? &ctx->tile_override[b->kind] : NULL;
        /* The CPU piece on CPUs, unless told otherwise or tuned with more
         * than one work-item a group (the portable piece's tiles). */
        const bool cpu_piece = !(b->features & FCL_BUILD_TILE_MMA) && !ctx->portable_only &&
                               fcl_cpu_piece_width(&ctx->caps) > 0 &&
                               (target == NULL || (target->ty == 1 && target->tx == 1));
        fcl_tuned_tile decode_target;
        if (target == NULL && b->kind == FCL_KERNEL_DECODE) {
            FCL_TRY(fcl_decode_target(&ctx->caps, b, cpu_piece ? FCL_PIECE_CPU : FCL_PIECE_PORTABLE,
                                      &decode_target));
            target = &decode_target;
        }
        if (b->features & FCL_BUILD_TILE_MMA)
            FCL_TRY(fcl_plan_make_mma(&ctx->caps, b->kind, b->head_dim, b->dtype, &r->limits,
                                      target, ctx->emulate_tensor_cores, &r->plan));
        else if (cpu_piece)
            FCL_TRY(fcl_plan_make_cpu(&ctx->caps, b->kind, b->head_dim, b->dtype, &r->limits,
                                      target, &r->plan));
        else
            FCL_TRY(fcl_plan_make(&ctx->caps, b->kind, b->head_dim, b->dtype, &r->limits, target,
                                  &r->plan));
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
            uint64_t over = kernel_local - r->plan.pub.local_bytes;
            r->limits.local_bytes = ctx->caps.local_mem_usable > over
                                        ? ctx->caps.local_mem_usable - over
                                        : 1;
            continue;
        }
        r->kernel = kernel;
        if (r->fallback[0] != '\0') {
            fcl_appendf(r->plan.pub.reason, sizeof r->plan.pub.reason, "; fallback: %s",
                        r->fallback);
            fcl_appendf(r->plan.pub.source, sizeof r->plan.pub.source, " + fallback");
        }
        return FCL_OK;
    }
    return FCL_ERROR_NO_PLAN;
}

static const char *const helper_names[FCL_HELPER_COUNT] = {
    [FCL_HELPER_COMBINE] = "fcl_combine",
    [FCL_HELPER_KVCACHE_APPEND] = "fcl_kvcache_append",
    [FCL_HELPER_DELTA] = "fcl_backward_delta",
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

fcl_build fcl_build_of(fcl_kernel_kind kind, size_t head_dim, fcl_dtype dtype, unsigned features)
{
    fcl_build b = {kind, head_dim, dtype, dtype, features, 1, 0, 0};
    return b;
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
