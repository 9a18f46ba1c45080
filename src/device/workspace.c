/* workspace.c - device scratch a context keeps between calls: the partial
 * results of split-KV.
 *
 * Buffers only grow (released once a larger one is needed; OpenCL frees them
 * after the kernels that use them).  Two calls must not use them at once:
 * an in-order queue sees to that; with an out-of-order queue of the
 * caller's the context remembers the event of the last call that used
 * them, and the next one waits for it.  Every buffer is counted by
 * fcl_context_memory_stats.
 */
#include "device/context.h"
#include "device/device.h"

#include <stdlib.h>

fcl_status fcl_scratch_get(fcl_context *ctx, fcl_scratch_slot slot, size_t bytes, cl_mem *out)
{
    fcl_scratch *s = &ctx->scratch[slot];
    if (bytes == 0)
        bytes = 1;
    if (s->mem == NULL || s->bytes < bytes) {
        fcl_status st = FCL_OK;
        cl_mem mem = fcl_buffer_create(ctx, CL_MEM_READ_WRITE, bytes, NULL, &st);
        FCL_TRY(st);
        fcl_buffer_release(ctx, s->mem, s->bytes);
        s->mem = mem;
        s->bytes = bytes;
    }
    *out = s->mem;
    return FCL_OK;
}

fcl_status fcl_scratch_wait_list(fcl_context *ctx, cl_uint num_wait, const cl_event *wait_list,
                                 fcl_wait *w)
{
    w->count = num_wait;
    w->list = wait_list;
    w->owned = NULL;
    if (ctx->queue_in_order || ctx->scratch_busy == NULL)
        return FCL_OK;
    w->owned = fcl_host_malloc((num_wait + 1) * sizeof *w->owned);
    if (w->owned == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    for (cl_uint i = 0; i < num_wait; ++i)
        w->owned[i] = wait_list[i];
    w->owned[num_wait] = ctx->scratch_busy;
    w->count = num_wait + 1;
    w->list = w->owned;
    return FCL_OK;
}

void fcl_scratch_used_until(fcl_context *ctx, cl_event done)
{
    if (done == NULL || clRetainEvent(done) != CL_SUCCESS)
        return; /* keep the older event: later calls still wait for something */
    if (ctx->scratch_busy != NULL)
        clReleaseEvent(ctx->scratch_busy);
    ctx->scratch_busy = done;
}

void fcl_scratch_release(fcl_context *ctx)
{
    for (int i = 0; i < FCL_SCRATCH_COUNT; ++i) {
        fcl_buffer_release(ctx, ctx->scratch[i].mem, ctx->scratch[i].bytes);
        ctx->scratch[i].mem = NULL;
        ctx->scratch[i].bytes = 0;
    }
    if (ctx->scratch_busy != NULL)
        clReleaseEvent(ctx->scratch_busy);
    ctx->scratch_busy = NULL;
}
