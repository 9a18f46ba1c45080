/* loop_limit.c - devices that end long kernel loops early.
 *
 * Mesa's llvmpipe (the CPU device of rusticl) compiles kernels with a loop
 * limiter meant for graphics shaders: every loop iteration of a work-item,
 * over all loops of the kernel together, counts down 65535, and at zero
 * every loop exits at its next iteration.  Nothing reports it: a forward
 * over a few thousand keys returns FCL_OK with the later key tiles left
 * out (NOTES.md, "rusticl", has the reproduction).  So on such a device the
 * library bounds the loop iterations of every launch: the forward splits
 * the keys into chunks short enough (split-KV), and a call whose loops
 * cannot be made short enough is refused with FCL_ERROR_DEVICE_LOOP_LIMIT.
 *
 * The limit is measured, not assumed: a probe kernel counts the iterations
 * of one long loop.  It runs on Mesa's platforms only (the limiter is
 * Mesa's gallivm), once per context.
 */
#include "device/context.h"
#include "programs/programs.h"

#include <string.h>

static const char *probe_source =
    "__kernel void fcl_probe_loop(__global uint *count, uint n)\n"
    "{\n"
    "    uint c = 0;\n"
    "    for (uint i = 0; i < n; ++i) c += 1u;\n"
    "    count[0] = c;\n"
    "}\n";

/* Iterations asked of the probe: far past any limiter's count. */
enum { PROBE_ITERATIONS = 1u << 20 };

/* The iterations one loop of `n` really ran on the context's device. */
static fcl_status run_probe(fcl_context *ctx, cl_uint n, cl_uint *ran)
{
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(ctx->cl_ctx, 1, &probe_source, NULL, &err);
    cl_kernel kern = NULL;
    cl_mem out = NULL;
    if (err == CL_SUCCESS)
        err = clBuildProgram(prog, 1, &ctx->device, "", NULL, NULL);
    if (err == CL_SUCCESS)
        kern = clCreateKernel(prog, "fcl_probe_loop", &err);
    if (err == CL_SUCCESS)
        out = clCreateBuffer(ctx->cl_ctx, CL_MEM_WRITE_ONLY, sizeof(cl_uint), NULL, &err);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kern, 0, sizeof out, &out);
    if (err == CL_SUCCESS)
        err = clSetKernelArg(kern, 1, sizeof n, &n);
    const size_t one = 1;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(ctx->queue, kern, 1, NULL, &one, &one, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(ctx->queue, out, CL_TRUE, 0, sizeof *ran, ran, 0, NULL, NULL);
    if (out != NULL)
        clReleaseMemObject(out);
    if (kern != NULL)
        clReleaseKernel(kern);
    if (prog != NULL)
        clReleaseProgram(prog);
    return err;
}

fcl_status fcl_probe_loop_limit(fcl_context *ctx)
{
    ctx->loop_limit = 0;
    const char *p = ctx->info.platform_name;
    if (strcmp(p, "rusticl") != 0 && strcmp(p, "Clover") != 0)
        return FCL_OK;
    cl_uint ran = 0;
    FCL_TRY(run_probe(ctx, PROBE_ITERATIONS, &ran));
    if (ran < PROBE_ITERATIONS)
        ctx->loop_limit = ran;
    return FCL_OK;
}

/* An upper bound on the loop iterations a work-item of plan p runs per
 * tile of its outer loop (keys for the forward and dQ, query rows for
 * dK/dV): the products' inner loops (head_dim, tile length), the tile
 * loads (elements per work-item), and the register-tile loops of masking,
 * softmax and variants, generously.  Measured on llvmpipe
 * (bench/flashcl-loop-count, NOTES.md): between 4% and 20% below this
 * bound at head_dim 256 (dK/dV: 1872 where it gives 1958), several times
 * below it at small head_dim, where the compiler unrolls the register-tile
 * loops. */
static uint64_t iterations_per_tile(const fcl_plan *p)
{
    const bool dkdv = p->kernel == FCL_KERNEL_BACKWARD_DKDV;
    const uint64_t rows = dkdv ? p->bc : p->br, cols = dkdv ? p->br : p->bc;
    const uint64_t ty = p->threads_row ? p->threads_row : 1, tx = p->threads_col ? p->threads_col : 1;
    const uint64_t wg = p->work_group_size ? p->work_group_size : 1, d = p->head_dim_padded;
    const uint64_t rm = (rows + ty - 1) / ty, rn = (cols + tx - 1) / tx, dn = (d + tx - 1) / tx;
    const uint64_t products = dkdv || p->kernel == FCL_KERNEL_BACKWARD_DQ ? 2 * d + 2 * cols
                                                                            : d + cols;
    const uint64_t loads = 2 * ((cols * d + wg - 1) / wg) + 2 * cols;
    /* the accumulators' update, a tile column at a time over the output
     * columns (O; dQ; dK and dV) */
    const uint64_t accumulate = (dkdv ? 2 : 1) * cols * rm * dn;
    return products + loads + accumulate + 8 * rm * (rn + tx + dn) + 16 * rm * rn + 64;
}

uint64_t fcl_loop_max_outer(const fcl_context *ctx, const fcl_plan *p)
{
    if (ctx->loop_limit == 0)
        return UINT64_MAX;
    /* a quarter of the count for what runs before and after the outer
     * loop (the Q block's load, the output's store, a cache's page check);
     * 0 when not even one tile fits (a large tile of an emulated CPU
     * profile): every call with that plan is refused */
    const uint64_t tiles = (uint64_t)ctx->loop_limit * 3 / 4 / iterations_per_tile(p);
    const uint64_t streamed = p->kernel == FCL_KERNEL_BACKWARD_DKDV ? p->br : p->bc;
    return tiles * streamed;
}

fcl_status fcl_loop_check(const fcl_context *ctx, const fcl_plan *p, size_t outer)
{
    return outer > fcl_loop_max_outer(ctx, p) ? FCL_ERROR_DEVICE_LOOP_LIMIT : FCL_OK;
}

static uint64_t div_up64(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The KV-cache call's plain loops (kvcache.cl, common.cl's
 * fcl_kvcache_sequence_ok): each work-group checks the pages its sequence
 * uses, a work-item's share of them, before the forward's key loop (out of
 * the quarter fcl_loop_max_outer keeps for such work: half of it at most)
 * and before the append step, whose work-items then walk their group's
 * share of the rows (new K/V rows, and with rotary Q's), one iteration per
 * row and one per column they copy (three quarters of the limit, as a tile
 * walk). */
fcl_status fcl_loop_check_kvcache(const fcl_context *ctx, const fcl_kvcache_desc *d,
                                  const fcl_plan *p, size_t append_wg, size_t append_parts)
{
    if (ctx->loop_limit == 0)
        return FCL_OK;
    const uint64_t pages = d->page_size > 0 ? d->max_pages_per_seq : 0;
    const uint64_t wg = p->work_group_size ? p->work_group_size : 1;
    if (div_up64(pages, wg) > (uint64_t)ctx->loop_limit / 8)
        return FCL_ERROR_DEVICE_LOOP_LIMIT;
    const uint64_t per_row = 1 + div_up64(d->head_dim, append_wg);
    const uint64_t rows_new = (uint64_t)d->seqlen_new * d->heads_kv;
    const uint64_t rows_q = d->rotary_dim > 0 ? (uint64_t)d->seqlen_q * d->heads_q : 0;
    const uint64_t walk = (div_up64(rows_new, append_parts) + div_up64(rows_q, append_parts)) *
                          per_row;
    if ((rows_new > 0 || rows_q > 0) &&
        div_up64(pages, append_wg) + walk > (uint64_t)ctx->loop_limit * 3 / 4)
        return FCL_ERROR_DEVICE_LOOP_LIMIT;
    return FCL_OK;
}
