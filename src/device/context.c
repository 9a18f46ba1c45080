/* context.c - creating and destroying a context: device choice, one probe of
 * the device (with its usable on-chip memory), the queue, the emulated
 * profile, the placeholder buffer of absent optional arrays. */
#include "device/context.h"
#include "device/device.h"

#include <stdlib.h>
#include <string.h>

void fcl_context_options_init(fcl_context_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof *opts);
    opts->platform_index = -1;
    opts->device_index = -1;
    opts->disk_cache = 1;
}

/* Everything after the OpenCL objects exist: probe, profile, cache folder. */
static fcl_status finish_setup(fcl_context *ctx, const fcl_context_options *opts)
{
    FCL_TRY(fcl_probe_device(ctx->device, &ctx->info, &ctx->extensions));
    ctx->portable_only = opts->portable_only != 0;
    /* PoCL's CPU kernel compiler needs one form of the tile loops (common.cl) */
    ctx->pocl_cpu = (ctx->info.type & CL_DEVICE_TYPE_CPU) &&
                    strcmp(ctx->info.platform_name, "Portable Computing Language") == 0;
    cl_command_queue_properties qprops = 0;
    cl_int err = clGetCommandQueueInfo(ctx->queue, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops,
                                       NULL);
    if (err != CL_SUCCESS)
        return err;
    ctx->queue_in_order = !(qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
    FCL_TRY(fcl_disk_cache_setup(ctx, opts));
    FCL_TRY(fcl_probe_loop_limit(ctx));
    /* Only GPUs with dedicated on-chip memory can hold more than they report;
     * a CPU's "local" memory is ordinary memory. */
    if ((ctx->info.type & CL_DEVICE_TYPE_GPU) && ctx->info.local_mem_is_dedicated &&
        !opts->skip_local_mem_probe) {
        /* a dozen kernel builds: once per device and driver, then from disk */
        if (!fcl_disk_cache_load_probe(ctx, &ctx->info.local_mem_usable)) {
            FCL_TRY(fcl_probe_local_mem(ctx->device, ctx->info.local_mem_reported,
                                        &ctx->info.local_mem_usable));
            fcl_disk_cache_store_probe(ctx, ctx->info.local_mem_usable);
        }
        ctx->info.local_mem_probed = 1;
    }
    ctx->caps = fcl_caps_from_info(&ctx->info);
    if (opts->profile != NULL) {
        ctx->profile = fcl_profile_find(opts->profile);
        if (ctx->profile == NULL)
            return FCL_ERROR_UNKNOWN_PROFILE;
        ctx->caps = ctx->profile->caps;
        /* The plan must still run here: never more work-items than this device allows. */
        if (ctx->caps.max_work_group_size > ctx->info.max_work_group_size)
            return FCL_ERROR_PROFILE_NOT_RUNNABLE;
    }
    ctx->build_log = fcl_strdup("");
    if (ctx->build_log == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    /* kernels never get a NULL array: an absent one is bound to this */
    float zero = 0.0f;
    fcl_status st = FCL_OK;
    ctx->placeholder = fcl_buffer_create(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                         sizeof zero, &zero, &st);
    if (st == FCL_OK)
        fcl_tensor_maps_setup(ctx);
    return st;
}

fcl_status fcl_context_create(const fcl_context_options *opts, fcl_context **out)
{
    if (out == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    *out = NULL;
    fcl_context_options defaults;
    fcl_context_options_init(&defaults);
    if (opts == NULL)
        opts = &defaults;

    fcl_context *ctx = fcl_host_calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    fcl_status st = fcl_select_device(opts->platform_index, opts->device_index, &ctx->device);
    if (st == FCL_OK) {
        cl_int err = CL_SUCCESS;
        ctx->cl_ctx = clCreateContext(NULL, 1, &ctx->device, NULL, NULL, &err);
        if (err == CL_SUCCESS) {
            cl_command_queue_properties props =
                opts->enable_profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
            ctx->queue = clCreateCommandQueue(ctx->cl_ctx, ctx->device, props, &err);
        }
        st = err;
    }
    if (st == FCL_OK)
        st = finish_setup(ctx, opts);
    if (st != FCL_OK) {
        fcl_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FCL_OK;
}

fcl_status fcl_context_create_from_cl(cl_context cl_ctx, cl_command_queue queue,
                                      cl_device_id device, const fcl_context_options *opts,
                                      fcl_context **out)
{
    if (out == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    *out = NULL;
    if (cl_ctx == NULL || queue == NULL || device == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    fcl_context_options defaults;
    fcl_context_options_init(&defaults);
    if (opts == NULL)
        opts = &defaults;
    /* The queue must belong to this context and device. */
    cl_context q_ctx = NULL;
    cl_device_id q_dev = NULL;
    cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof q_ctx, &q_ctx, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof q_dev, &q_dev, NULL);
    if (err != CL_SUCCESS)
        return err;
    if (q_ctx != cl_ctx || q_dev != device)
        return FCL_ERROR_INVALID_VALUE;

    fcl_context *ctx = fcl_host_calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    err = clRetainContext(cl_ctx);
    if (err != CL_SUCCESS) {
        free(ctx);
        return err;
    }
    ctx->cl_ctx = cl_ctx;
    err = clRetainCommandQueue(queue);
    if (err != CL_SUCCESS) {
        fcl_context_destroy(ctx);
        return err;
    }
    ctx->queue = queue;
    ctx->device = device;
    fcl_status st = finish_setup(ctx, opts);
    if (st != FCL_OK) {
        fcl_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FCL_OK;
}

void fcl_context_destroy(fcl_context *ctx)
{
    if (ctx == NULL)
        return;
    fcl_forget_resolved(ctx);
    fcl_scratch_release(ctx);
    fcl_buffer_release(ctx, ctx->placeholder, sizeof(float));
    for (size_t i = 0; i < ctx->num_programs; ++i) {
        clReleaseProgram(ctx->programs[i].program);
        free(ctx->programs[i].key);
    }
    free(ctx->programs);
    if (ctx->queue != NULL)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->cl_ctx != NULL)
        clReleaseContext(ctx->cl_ctx);
    free(ctx->extensions);
    free(ctx->cache_dir);
    free(ctx->build_log);
    free(ctx);
}

fcl_status fcl_context_device_info(const fcl_context *ctx, fcl_device_info *info)
{
    if (ctx == NULL || info == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    *info = ctx->info;
    info->extensions = ctx->extensions;
    if (ctx->profile != NULL) {
        const fcl_caps *c = &ctx->caps;
        info->profile_name = ctx->profile->name;
        info->vendor_id = c->vendor_id;
        info->local_mem_reported = c->local_mem_reported;
        info->local_mem_usable = c->local_mem_usable;
        info->local_mem_probed = 0;
        info->max_work_group_size = c->max_work_group_size;
        info->simd_width = c->simd_width;
        info->native_float_width = c->native_float_width;
        info->cache_bytes = c->cache_bytes;
        info->nv_compute_capability = c->nv_compute_capability;
        info->compute_units = c->compute_units;
    }
    return FCL_OK;
}

cl_context fcl_context_cl_context(const fcl_context *ctx) { return ctx ? ctx->cl_ctx : NULL; }
cl_command_queue fcl_context_cl_queue(const fcl_context *ctx) { return ctx ? ctx->queue : NULL; }
cl_device_id fcl_context_cl_device(const fcl_context *ctx) { return ctx ? ctx->device : NULL; }

const char *fcl_context_build_log(const fcl_context *ctx)
{
    if (ctx == NULL || ctx->build_log == NULL)
        return "";
    return ctx->build_log;
}
