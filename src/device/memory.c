/* memory.c - the one path by which flashcl allocates device memory, counted so
 * that benchmarks report it and tests can prove no N x N buffer ever exists. */
#include "device/context.h"
#include "device/device.h"

cl_mem fcl_buffer_create(fcl_context *ctx, cl_mem_flags flags, size_t bytes, void *host,
                         fcl_status *status)
{
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(ctx->cl_ctx, flags, bytes, host, &err);
    if (err != CL_SUCCESS) {
        *status = err;
        return NULL;
    }
    fcl_memory_stats *s = &ctx->mem;
    s->allocations++;
    s->current_bytes += bytes;
    if (s->current_bytes > s->peak_bytes)
        s->peak_bytes = s->current_bytes;
    if (bytes > s->largest_bytes)
        s->largest_bytes = bytes;
    *status = FCL_OK;
    return mem;
}

void fcl_buffer_release(fcl_context *ctx, cl_mem mem, size_t bytes)
{
    if (mem == NULL)
        return;
    /* the size the caller asked for, not a query: a release path that can
     * fail would leave the counts wrong */
    ctx->mem.current_bytes -= bytes <= ctx->mem.current_bytes ? bytes : ctx->mem.current_bytes;
    clReleaseMemObject(mem);
}

fcl_status fcl_context_memory_stats(const fcl_context *ctx, fcl_memory_stats *stats)
{
    if (ctx == NULL || stats == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    *stats = ctx->mem;
    return FCL_OK;
}

void fcl_context_reset_memory_stats(fcl_context *ctx)
{
    if (ctx == NULL)
        return;
    ctx->mem.allocations = 0;
    ctx->mem.peak_bytes = ctx->mem.current_bytes;
    ctx->mem.largest_bytes = 0;
}
