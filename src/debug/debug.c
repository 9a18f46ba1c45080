/* debug.c - hooks for tuning tools (bench/flashcl-tune.c), declared in
 * debug.h (reached through internal.h) only: forcing a target tile and
 * adding build options; for tests, a smaller local memory than the
 * device's and the pieces' test modes.  The top layer of src/: it reaches
 * into the calls' and programs' internals, and nothing below includes it. */
#include "calls/calls.h"
#include "debug/debug.h"

#include <stdlib.h>
#include <string.h>

fcl_status fcl_debug_set_tile(fcl_context *ctx, fcl_kernel_kind kind, int rows, int cols, int ty,
                              int tx)
{
    if (ctx == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if ((int)kind < 0 || (int)kind >= FCL_KERNEL_KINDS)
        return FCL_ERROR_INVALID_VALUE;
    if (rows == 0) { /* back to the table; nothing to plan again if none was forced */
        if (ctx->has_tile_override[kind]) {
            ctx->has_tile_override[kind] = 0;
            fcl_forget_resolved(ctx); /* the next call plans again */
        }
        return FCL_OK;
    }
    if (rows < 1 || cols < 1 || ty < 1 || tx < 1)
        return FCL_ERROR_INVALID_VALUE;
    fcl_tuned_tile t = {rows, cols, ty, tx, "forced by a tuning tool", 0};
    ctx->tile_override[kind] = t;
    ctx->has_tile_override[kind] = 1;
    fcl_forget_resolved(ctx); /* the next call plans again */
    return FCL_OK;
}

fcl_status fcl_debug_set_tile_split(fcl_context *ctx, fcl_kernel_kind kind, int wd)
{
    if (ctx == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if ((int)kind < 0 || (int)kind >= FCL_KERNEL_KINDS || !ctx->has_tile_override[kind] ||
        wd < 1)
        return FCL_ERROR_INVALID_VALUE;
    ctx->tile_override[kind].wd = wd;
    fcl_forget_resolved(ctx);
    return FCL_OK;
}

void fcl_debug_disk_cache_counts(const fcl_context *ctx, unsigned *loads, unsigned *stores)
{
    *loads = ctx->cache_loads;
    *stores = ctx->cache_stores;
}

fcl_status fcl_debug_set_build_options(fcl_context *ctx, const char *options)
{
    if (ctx == NULL || options == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (strlen(options) >= sizeof ctx->extra_build_options)
        return FCL_ERROR_INVALID_VALUE;
    fcl_copy_string(ctx->extra_build_options, sizeof ctx->extra_build_options, options);
    fcl_forget_resolved(ctx); /* the next call plans again */
    return FCL_OK;
}

fcl_status fcl_debug_kernel_log(fcl_context *ctx, const fcl_attention_desc *desc,
                                fcl_kernel_kind kind, char *log, size_t size)
{
    if (ctx == NULL || desc == NULL || log == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    /* the kernel a plain call of `desc` runs (of a split dK/dV, the dK
     * launch, the larger) */
    unsigned build = fcl_uses_tensor_cores(ctx, desc, kind) ? FCL_BUILD_TILE_MMA : 0;
    if (build && kind == FCL_KERNEL_BACKWARD_DKDV && fcl_mma_dkdv_split(&ctx->caps, ctx->emulate_tensor_cores, fcl_dkdv_forced_tile(ctx), desc->head_dim))
        build |= FCL_BUILD_DK_ONLY;
    fcl_build b = fcl_build_of(kind, desc->head_dim, desc->dtype, build);
    if (kind == FCL_KERNEL_FORWARD || kind == FCL_KERNEL_DECODE)
        b = fcl_forward_build(ctx, desc, 0, 0);
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_resolve(ctx, &b, &r));
    cl_program prog = NULL;
    cl_int err = clGetKernelInfo(r->kernel, CL_KERNEL_PROGRAM, sizeof prog, &prog, NULL);
    if (err == CL_SUCCESS)
        err = clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, size, log, NULL);
    return err;
}

/* A test mode's flag of ctx (not NULL) on or off. */
static fcl_status set_mode(fcl_context *ctx, int *flag, int on)
{
    *flag = on != 0;
    fcl_forget_resolved(ctx); /* the next call plans again */
    return FCL_OK;
}

fcl_status fcl_debug_emulate_tensor_cores(fcl_context *ctx, int on)
{
    return ctx == NULL ? FCL_ERROR_NULL_ARGUMENT : set_mode(ctx, &ctx->emulate_tensor_cores, on);
}

/* A three-way test mode of ctx: 1 on, -1 off, 0 left to the default. */
static fcl_status set_choice(fcl_context *ctx, int *flag, int choice)
{
    if (ctx == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (choice < -1 || choice > 1)
        return FCL_ERROR_INVALID_VALUE;
    *flag = choice;
    fcl_forget_resolved(ctx); /* the next call plans again */
    return FCL_OK;
}

fcl_status fcl_debug_use_wgmma(fcl_context *ctx, int choice)
{
    return set_choice(ctx, ctx == NULL ? NULL : &ctx->use_wgmma, choice);
}

fcl_status fcl_debug_use_wgmma_backward(fcl_context *ctx, int choice)
{
    return set_choice(ctx, ctx == NULL ? NULL : &ctx->use_wgmma_backward, choice);
}


fcl_status fcl_debug_limit_local_mem(fcl_context *ctx, uint64_t bytes)
{
    if (ctx == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    ctx->caps = ctx->profile != NULL ? ctx->profile->caps : fcl_caps_from_info(&ctx->info);
    if (bytes != 0 && bytes < ctx->caps.local_mem_usable)
        ctx->caps.local_mem_usable = bytes;
    if (bytes != 0 && bytes < ctx->caps.local_mem_reported)
        ctx->caps.local_mem_reported = bytes;
    fcl_forget_resolved(ctx); /* the next call plans again */
    return FCL_OK;
}

fcl_status fcl_debug_read_rotated_q(fcl_context *ctx, void *out, size_t bytes)
{
    if (ctx == NULL || out == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    const fcl_scratch *s = &ctx->scratch[FCL_SCRATCH_ROTARY_Q];
    if (s->mem == NULL || s->bytes < bytes)
        return FCL_ERROR_INVALID_VALUE;
    cl_event *after = ctx->scratch_busy != NULL ? &ctx->scratch_busy : NULL;
    return clEnqueueReadBuffer(ctx->queue, s->mem, CL_TRUE, 0, bytes, out, after ? 1 : 0, after,
                               NULL);
}
