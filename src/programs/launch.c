/* launch.c - kernel arguments with one error check, and the enqueue with its
 * resource fallback. */
#include "device/context.h"
#include "programs/programs.h"

#include <limits.h>

static void set_arg(fcl_args *a, size_t size, const void *value)
{
    if (a->err == CL_SUCCESS)
        a->err = clSetKernelArg(a->kernel, a->index, size, value);
    a->index++;
}

void fcl_arg_mem(fcl_args *a, cl_mem m) { set_arg(a, sizeof m, &m); }
void fcl_arg_int(fcl_args *a, int v) { set_arg(a, sizeof(cl_int), &v); }
void fcl_arg_uint(fcl_args *a, uint32_t v)
{
    cl_uint x = v;
    set_arg(a, sizeof x, &x);
}
void fcl_arg_long(fcl_args *a, int64_t v)
{
    cl_long x = (cl_long)v;
    set_arg(a, sizeof x, &x);
}
void fcl_arg_float(fcl_args *a, float v)
{
    cl_float x = v;
    set_arg(a, sizeof x, &x);
}
void fcl_arg_layout(fcl_args *a, const fcl_layout *l)
{
    fcl_arg_long(a, (int64_t)l->offset);
    fcl_arg_long(a, (int64_t)l->stride_batch);
    fcl_arg_long(a, (int64_t)l->stride_head);
    fcl_arg_long(a, (int64_t)l->stride_seq);
}

enum { MAX_LAUNCH_ATTEMPTS = 8 };

fcl_status fcl_launch(fcl_context *ctx, fcl_resolved *r, fcl_set_args_fn set_args,
                      const void *user, cl_uint num_wait, const cl_event *wait_list,
                      cl_event *event)
{
    for (int attempt = 0; attempt < MAX_LAUNCH_ATTEMPTS; ++attempt) {
        size_t groups = 0;
        FCL_TRY(set_args(r, r->kernel, user, &groups));
        /* the tiled kernels take their work-group index as an int: more
         * groups would need 2^31 row or key blocks (2^35 rows and more) */
        if (groups > (size_t)INT_MAX)
            return FCL_ERROR_INVALID_SHAPE;
        size_t local = r->plan.pub.work_group_size;
        size_t global = groups * local;
        cl_int err = clEnqueueNDRangeKernel(ctx->queue, r->kernel, 1, NULL, &global, &local,
                                            num_wait, wait_list, event);
        if (err == CL_SUCCESS)
            return FCL_OK;
        FCL_TRY(fcl_resolve_after_launch_failure(ctx, r, err));
    }
    return FCL_ERROR_NO_PLAN;
}
