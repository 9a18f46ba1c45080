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
        const fcl_tuned_tile *forced =
            ctx->has_tile_override[r->kind] ? &ctx->tile_override[r->kind] : NULL;
        if (r->features & FCL_BUILD_TILE_MMA)
            FCL_TRY(fcl_plan_make_mma(&ctx->caps, r->kind, r->head_dim, r->dtype, &r->limits,
                                      forced, ctx->emulate_tensor_cores, &r->plan));
        else
            FCL_TRY(fcl_plan_make(&ctx->caps, r->kind, r->head_dim, r->dtype, &r->limits, forced,
                                  &r->plan));
        char options[640];
        int n = fcl_kernel_options(&r->plan, r->features, options, sizeof options);
        if (ctx->extra_build_options[0] != '\0' && n > 0 && (size_t)n < sizeof options)
            fcl_appendf(options, sizeof options, " %s", ctx->extra_build_options);
        fcl_program_id pid =
            r->kind == FCL_KERNEL_FORWARD ? FCL_PROGRAM_FORWARD : FCL_PROGRAM_BACKWARD;
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
        cl_kernel kernel = clCreateKernel(prog, kernel_function(r->kind), &err);
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

fcl_status fcl_resolve(fcl_context *ctx, fcl_kernel_kind kind, size_t head_dim, fcl_dtype dtype,
                       unsigned features, fcl_resolved **out)
{
    for (size_t i = 0; i < ctx->num_resolved; ++i) {
        fcl_resolved *r = ctx->resolved[i];
        if (r->kind == kind && r->head_dim == head_dim && r->dtype == dtype &&
            r->features == features) {
            *out = r;
            return FCL_OK;
        }
    }
    fcl_resolved *r = calloc(1, sizeof *r);
    fcl_resolved **grown = realloc(ctx->resolved, (ctx->num_resolved + 1) * sizeof *grown);
    if (r == NULL || grown == NULL) {
        free(r);
        if (grown != NULL)
            ctx->resolved = grown;
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    }
    ctx->resolved = grown;
    r->kind = kind;
    r->head_dim = head_dim;
    r->dtype = dtype;
    r->features = features;
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
    clReleaseKernel(r->kernel);
    r->kernel = NULL;
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

fcl_status fcl_plan_query(fcl_context *ctx, const fcl_attention_desc *desc, fcl_kernel_kind kernel,
                          fcl_plan *plan)
{
    if (ctx == NULL || desc == NULL || plan == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (kernel != FCL_KERNEL_FORWARD && kernel != FCL_KERNEL_BACKWARD_DKDV &&
        kernel != FCL_KERNEL_BACKWARD_DQ)
        return FCL_ERROR_INVALID_VALUE;
    FCL_TRY(fcl_validate_desc(desc));
    const unsigned build =
        fcl_uses_tensor_cores(ctx, desc, kernel) ? FCL_BUILD_TILE_MMA : 0;
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_resolve(ctx, kernel, desc->head_dim, desc->dtype, build, &r));
    *plan = r->plan.pub;
    return FCL_OK;
}

void fcl_forget_resolved(fcl_context *ctx)
{
    for (size_t i = 0; i < ctx->num_resolved; ++i) {
        if (ctx->resolved[i]->kernel != NULL)
            clReleaseKernel(ctx->resolved[i]->kernel);
        free(ctx->resolved[i]);
    }
    free(ctx->resolved);
    ctx->resolved = NULL;
    ctx->num_resolved = 0;
}
