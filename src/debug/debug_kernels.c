/* debug_kernels.c - the kernels that let tests check what the attention
 * kernels rely on, on the device itself: Philox known answers and the
 * dropout mask of a call. */
#include "calls/calls.h"
#include "debug/debug.h"

#include <string.h>

/* The util program and one of its kernels. */
static fcl_status util_kernel(fcl_context *ctx, const char *name, cl_kernel *out)
{
    cl_program prog = NULL;
    FCL_TRY(fcl_get_program(ctx, FCL_PROGRAM_UTIL, "-cl-std=CL1.2 -DFCL_DTYPE=0", &prog));
    cl_int err = CL_SUCCESS;
    *out = clCreateKernel(prog, name, &err);
    return err;
}

fcl_status fcl_philox_host(fcl_context *ctx, size_t n, const uint32_t *ctr, const uint32_t *key,
                           uint32_t *out)
{
    if (ctx == NULL || ctr == NULL || key == NULL || out == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if (n == 0 || n > (1u << 24))
        return FCL_ERROR_INVALID_VALUE;
    cl_kernel kernel = NULL;
    FCL_TRY(util_kernel(ctx, "fcl_philox", &kernel));
    fcl_status st = FCL_OK;
    cl_mem c = fcl_buffer_create(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 16, (void *)ctr, &st);
    cl_mem k = st == FCL_OK ? fcl_buffer_create(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 8,
                                                (void *)key, &st)
                            : NULL;
    cl_mem o = st == FCL_OK ? fcl_buffer_create(ctx, CL_MEM_WRITE_ONLY, n * 16, NULL, &st) : NULL;
    if (st == FCL_OK) {
        fcl_args a = {kernel, 0, CL_SUCCESS};
        fcl_arg_mem(&a, c);
        fcl_arg_mem(&a, k);
        fcl_arg_mem(&a, o);
        fcl_arg_int(&a, (int)n);
        st = a.err;
    }
    if (st == FCL_OK)
        st = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &n, NULL, 0, NULL, NULL);
    if (st == FCL_OK)
        st = clEnqueueReadBuffer(ctx->queue, o, CL_TRUE, 0, n * 16, out, 0, NULL, NULL);
    fcl_buffer_release(ctx, c, n * 16);
    fcl_buffer_release(ctx, k, n * 8);
    fcl_buffer_release(ctx, o, n * 16);
    clReleaseKernel(kernel);
    return st;
}

fcl_status fcl_dropout_mask_host(fcl_context *ctx, const fcl_attention_desc *desc, uint8_t *mask)
{
    if (ctx == NULL || desc == NULL || mask == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_validate_desc(desc));
    if (desc->varlen || !(desc->dropout_p > 0.0f && desc->dropout_p < 1.0f))
        return FCL_ERROR_INVALID_VALUE;
    /* the same conversion of p, seed and offset as the attention calls */
    fcl_attention_desc only_dropout;
    fcl_attention_desc_init(&only_dropout, desc->batch, desc->heads_q, desc->heads_q,
                            desc->seqlen_q, desc->seqlen_k, desc->head_dim, desc->dtype,
                            FCL_LAYOUT_BHSD);
    only_dropout.dropout_p = desc->dropout_p;
    only_dropout.dropout_seed = desc->dropout_seed;
    only_dropout.dropout_offset = desc->dropout_offset;
    fcl_variants var;
    FCL_TRY(fcl_variants_prepare(ctx, &only_dropout, NULL, 0, NULL, &var));

    const size_t bytes = desc->batch * desc->heads_q * desc->seqlen_q * desc->seqlen_k;
    cl_kernel kernel = NULL;
    FCL_TRY(util_kernel(ctx, "fcl_dropout_mask", &kernel));
    fcl_status st = FCL_OK;
    cl_mem m = fcl_buffer_create(ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &st);
    if (st == FCL_OK) {
        fcl_args a = {kernel, 0, CL_SUCCESS};
        fcl_arg_mem(&a, m);
        fcl_arg_int(&a, (int)desc->heads_q);
        fcl_arg_int(&a, (int)desc->seqlen_q);
        fcl_arg_int(&a, (int)desc->seqlen_k);
        fcl_arg_uint(&a, var.seed_lo);
        fcl_arg_uint(&a, var.seed_hi);
        fcl_arg_uint(&a, var.dropout_offset);
        fcl_arg_uint(&a, var.dropout_threshold);
        st = a.err;
    }
    const size_t global[3] = {desc->seqlen_k, desc->seqlen_q, desc->batch * desc->heads_q};
    if (st == FCL_OK)
        st = clEnqueueNDRangeKernel(ctx->queue, kernel, 3, NULL, global, NULL, 0, NULL, NULL);
    if (st == FCL_OK)
        st = clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0, bytes, mask, 0, NULL, NULL);
    fcl_buffer_release(ctx, m, bytes);
    clReleaseKernel(kernel);
    return st;
}
