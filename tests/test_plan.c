/* test_plan.c - the planner as a pure function (every profile, kernel,
 * head_dim and dtype), the tuned table's choices, the paper's rule, plan
 * limits, agreement of the planned local memory with what the compiler
 * allocates, and the resource fallback after a failed launch. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal.h"
#include "kvcache_support.h"
#include "test_filters.h"
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const fcl_kernel_kind kinds[4] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DKDV,
                                         FCL_KERNEL_BACKWARD_DQ, FCL_KERNEL_DECODE};

static void check_plan(const fcl_caps *caps, const fcl_plan_full *p, size_t d,
                       const fcl_plan_limits *lim)
{
    const fcl_plan *pub = &p->pub;
    assert_int_equal(pub->head_dim, d);
    assert_true((size_t)p->d_pad >= d);
    assert_int_equal(p->d_pad % p->tx, 0);
    assert_true(p->d_pad - (int)d < p->tx);
    assert_int_equal(pub->work_group_size, (size_t)(p->ty * p->tx));
    assert_true(pub->work_group_size <= caps->max_work_group_size);
    assert_true(pub->local_bytes <= caps->local_mem_usable);
    if (lim != NULL && lim->local_bytes)
        assert_true(pub->local_bytes <= lim->local_bytes);
    if (lim != NULL && lim->work_group_size)
        assert_true(pub->work_group_size <= lim->work_group_size);
    const size_t rows = (size_t)(p->ty * p->rm), cols = (size_t)(p->tx * p->rn);
    if (pub->kernel == FCL_KERNEL_BACKWARD_DKDV) {
        assert_int_equal(pub->bc, rows);
        assert_int_equal(pub->br, cols);
    } else {
        assert_int_equal(pub->br, rows);
        assert_int_equal(pub->bc, cols);
    }
    assert_int_equal(pub->local_bytes,
                     fcl_plan_local_bytes(pub->kernel, 0, (int)rows, (int)cols, p->d_pad, p->tx));
}

/* Every emulated profile, kernel, head_dim 1..256 and dtype has a plan that
 * respects the profile's limits. */
static void test_every_profile_plans(void **state)
{
    (void)state;
    for (size_t i = 0; i < fcl_profile_count(); ++i) {
        const fcl_profile *prof = fcl_profile_find(fcl_profile_name(i));
        assert_non_null(prof);
        for (int k = 0; k < 3; ++k)
            for (size_t d = 1; d <= 256; ++d)
                for (int t = 0; t < 3; ++t) {
                    fcl_plan_full p;
                    assert_int_equal(fcl_plan_make(&prof->caps, kinds[k], d, (fcl_dtype)t, 0, NULL,
                                                   NULL, &p),
                                     FCL_OK);
                    check_plan(&prof->caps, &p, d, NULL);
                }
    }
}

static void test_paper_rule(void **state)
{
    (void)state;
    fcl_caps caps = {0, 1, 0, 49152, 49152, 1024, 32, 0, 80, 0, 0};
    fcl_plan_full p;
    assert_int_equal(fcl_plan_make(&caps, FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP32, 0, NULL, NULL, &p),
                     FCL_OK);
    /* M = 49152 / 4 = 12288 floats: Bc = ceil(12288 / 256) = 48, Br = min(48, 64) */
    assert_int_equal(p.pub.paper_m_elements, 12288);
    assert_int_equal(p.pub.paper_bc, 48);
    assert_int_equal(p.pub.paper_br, 48);
    assert_int_equal(fcl_plan_make(&caps, FCL_KERNEL_FORWARD, 100, FCL_DTYPE_FP32, 0, NULL, NULL, &p),
                     FCL_OK);
    assert_int_equal(p.pub.paper_bc, 31); /* ceil(12288 / 400) */
    assert_int_equal(p.pub.paper_br, 31);
    assert_int_equal(fcl_plan_make(&caps, FCL_KERNEL_FORWARD, 0, FCL_DTYPE_FP32, 0, NULL, NULL, &p),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    /* the forward kernels go to 576 (the KV-cache call's latent caches), the backward's to 256 */
    assert_int_equal(fcl_plan_make(&caps, FCL_KERNEL_FORWARD, 577, FCL_DTYPE_FP32, 0, NULL, NULL, &p),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    assert_int_equal(fcl_plan_make(&caps, FCL_KERNEL_DECODE, 576, FCL_DTYPE_FP32, 0, NULL, NULL, &p),
                     FCL_OK);
    assert_int_equal(fcl_plan_make(&caps, FCL_KERNEL_BACKWARD_DQ, 257, FCL_DTYPE_FP32, 0, NULL,
                                   NULL, &p),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
}

static void test_table_choices(void **state)
{
    (void)state;
    fcl_plan_full p;
    const fcl_profile *h100 = fcl_profile_find("nvidia-h100");
    assert_int_equal(fcl_plan_make(&h100->caps, FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP16, 0, NULL, NULL, &p),
                     FCL_OK);
    assert_non_null(strstr(p.pub.source, "nvidia sm_90 forward d<=64"));
    assert_int_equal(p.pub.br, 128);
    assert_int_equal(p.pub.bc, 32);
    assert_int_equal(fcl_plan_make(&h100->caps, FCL_KERNEL_FORWARD, 128, FCL_DTYPE_FP16, 0, NULL, NULL, &p),
                     FCL_OK);
    assert_non_null(strstr(p.pub.source, "nvidia sm_90 forward"));
    assert_int_equal(p.pub.bc, 64);
    /* the A100 (sm_80) is not measured: the generic GPU entry */
    const fcl_profile *a100 = fcl_profile_find("nvidia-a100");
    assert_int_equal(fcl_plan_make(&a100->caps, FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP16, 0, NULL, NULL, &p),
                     FCL_OK);
    assert_non_null(strstr(p.pub.source, "default gpu"));
    fcl_caps cpu = {FCL_VENDOR_ID_INTEL, 0, 1, 2097152, 2097152, 4096, 0, 0, 2, 0, 0};
    assert_int_equal(fcl_plan_make(&cpu, FCL_KERNEL_BACKWARD_DQ, 64, FCL_DTYPE_FP32, 0, NULL, NULL, &p),
                     FCL_OK);
    assert_non_null(strstr(p.pub.source, "default cpu"));
    assert_int_equal(p.force_unroll, 0);
}

/* Lower limits give smaller plans that respect them; impossible ones fail. */
static void test_limits(void **state)
{
    (void)state;
    const fcl_profile *h100 = fcl_profile_find("nvidia-h100");
    fcl_plan_full big, p;
    assert_int_equal(fcl_plan_make(&h100->caps, FCL_KERNEL_BACKWARD_DKDV, 128, FCL_DTYPE_FP32, 0, NULL,
                                   NULL, &big),
                     FCL_OK);
    fcl_plan_limits lim = {big.pub.local_bytes - 1, 0};
    assert_int_equal(fcl_plan_make(&h100->caps, FCL_KERNEL_BACKWARD_DKDV, 128, FCL_DTYPE_FP32, 0, &lim,
                                   NULL, &p),
                     FCL_OK);
    check_plan(&h100->caps, &p, 128, &lim);
    assert_true(p.pub.local_bytes < big.pub.local_bytes);
    lim.local_bytes = 0;
    lim.work_group_size = 64;
    assert_int_equal(fcl_plan_make(&h100->caps, FCL_KERNEL_FORWARD, 128, FCL_DTYPE_FP32, 0, &lim, NULL, &p),
                     FCL_OK);
    check_plan(&h100->caps, &p, 128, &lim);
    lim.local_bytes = 1024; /* nothing fits in 1 KiB at d = 128 */
    assert_int_equal(fcl_plan_make(&h100->caps, FCL_KERNEL_FORWARD, 128, FCL_DTYPE_FP32, 0, &lim, NULL, &p),
                     FCL_ERROR_NO_PLAN);
}

/* The local memories of the devices the planner must fit: 16 KiB (what
 * rusticl's 32 KiB holds as it counts) to 64 KiB (AMD's LDS, Intel Xe's
 * SLM); 32 KiB is Intel's CPU runtime and many mobile GPUs. */
static const uint64_t small_mems[] = {16384, 24576, 32768, 49152, 65536};
enum { SMALL_MEMS = sizeof small_mems / sizeof small_mems[0] };

/* Devices of 16..64 KiB: every kernel kind, head_dim 1..256 and dtype has a
 * portable plan within the memory, on a GPU, a CPU without the CPU piece
 * (rusticl's llvmpipe) and a small GPU; decode plans for 1, 8 and 64 rows. */
static void test_small_local_memory_plans(void **state)
{
    (void)state;
    const char *bases[] = {"amd-cdna", "intel-xe", "small-32k", "cpu-avx2"};
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; ++b)
        for (int m = 0; m < SMALL_MEMS; ++m) {
            fcl_caps caps = fcl_profile_find(bases[b])->caps;
            caps.local_mem_reported = caps.local_mem_usable = small_mems[m];
            caps.native_float_width = 1; /* the portable piece on the CPU */
            for (int k = 0; k < 4; ++k)
                for (size_t d = 1; d <= 256; ++d)
                    for (int t = 0; t < 3; ++t) {
                        fcl_build build = fcl_build_of(kinds[k], d, (fcl_dtype)t, 0);
                        fcl_tuned_tile target;
                        const fcl_tuned_tile *forced = NULL;
                        if (kinds[k] == FCL_KERNEL_DECODE) {
                            build.rows = t == 0 ? 1 : t == 1 ? 8 : 64;
                            assert_int_equal(fcl_decode_target(&caps, &build, FCL_PIECE_PORTABLE,
                                                               &target),
                                             FCL_OK);
                            forced = &target;
                        }
                        fcl_plan_full p;
                        assert_int_equal(fcl_plan_make(&caps, kinds[k], d, (fcl_dtype)t, 0, NULL,
                                                       forced, &p),
                                         FCL_OK);
                        check_plan(&caps, &p, d, NULL);
                    }
        }
}

/* Tensor-core tiles need 48 KiB and more at large head_dims: an H100 made
 * smaller runs those calls on the portable piece instead. */
static void test_small_local_memory_tensor_cores(void **state)
{
    (void)state;
    fcl_context *ctx = test_context("nvidia-h100");
    assert_non_null(ctx);
    assert_int_equal(fcl_debug_emulate_tensor_cores(ctx, 1), FCL_OK);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 64, 64, 256, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    assert_int_equal(fcl_debug_limit_local_mem(ctx, 16384), FCL_OK);
    for (int k = 0; k < 3; ++k)
        assert_false(fcl_uses_tensor_cores(ctx, &d, kinds[k]));
    d.head_dim = 16;
    assert_true(fcl_uses_tensor_cores(ctx, &d, FCL_KERNEL_FORWARD));
    assert_int_equal(fcl_debug_limit_local_mem(ctx, 0), FCL_OK);
    d.head_dim = 256;
    for (int k = 0; k < 3; ++k)
        assert_true(fcl_uses_tensor_cores(ctx, &d, kinds[k]));
    fcl_context_destroy(ctx);
}

/* PoCL 4.0 to 6.x answer CL_KERNEL_LOCAL_MEM_SIZE with 0 for every kernel
 * of their CPU devices, whatever __local arrays it declares (the answer
 * comes from per-device metadata that only their Level Zero driver and
 * program binaries fill; PoCL issue #1629, fixed in 7.0; PoCL 3.1 summed
 * the arrays).  Such a driver says nothing about the plan: the check below
 * needs one that reports. */
static bool driver_reports_no_local_size(const fcl_context *ctx, cl_ulong used)
{
    const int major = atoi(ctx->info.driver_version);
    return used == 0 && ctx->pocl_cpu && major >= 4 && major <= 6;
}

/* Mesa's rusticl (22.3) answers twice the bytes of the declared __local
 * arrays (float a[100]: 800), and launches kernels past its reported
 * limit all the same (NOTES.md): the planner takes its answer as the
 * limit, so the plans use half of its 32 KiB. */
static uint64_t as_driver_counts(const fcl_context *ctx, uint64_t declared)
{
    return strcmp(ctx->info.platform_name, "rusticl") == 0 ? 2 * declared : declared;
}

/* The planner's local-memory formula is what the compiler allocates. */
static void assert_local_bytes_planned(fcl_context *ctx, const fcl_resolved *r)
{
    cl_ulong used = 0;
    assert_int_equal(clGetKernelWorkGroupInfo(r->kernel, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE,
                                              sizeof used, &used, NULL),
                     CL_SUCCESS);
    if (driver_reports_no_local_size(ctx, used))
        return;
    /* drivers may add a little of their own (NVIDIA: tens of bytes) */
    const uint64_t counted = as_driver_counts(ctx, r->plan.pub.local_bytes);
    assert_true(used >= counted);
    assert_true(used <= counted + 1024);
}

static void test_local_bytes_match_compiler(void **state)
{
    (void)state;
    const char *profiles[] = {NULL, "small-32k", "nvidia-h100"};
    for (int i = 0; i < 3; ++i) {
        fcl_context *ctx = test_context(profiles[i]);
        assert_non_null(ctx);
        for (int k = 0; k < 4; ++k) {
            fcl_resolved *r = NULL;
            fcl_build b = fcl_build_of(kinds[k], 80, FCL_DTYPE_FP16, 0);
            b.rows = kinds[k] == FCL_KERNEL_DECODE ? 8 : 0;
            assert_int_equal(fcl_resolve(ctx, &b, &r), FCL_OK);
            assert_local_bytes_planned(ctx, r);
        }
        fcl_context_destroy(ctx);
    }
}

/* The tensor-core tiles: the measured defaults reach the A100 (not
 * measured) unchanged where they fit its probed memory and shrink to fit
 * where they do not, respect lowered limits, and refuse what the pieces
 * cannot do. */
static void test_tensor_core_plans(void **state)
{
    (void)state;
    const fcl_profile *h100 = fcl_profile_find("nvidia-h100");
    const fcl_profile *a100 = fcl_profile_find("nvidia-a100");
    const size_t dims[4] = {16, 64, 128, 256};
    for (int k = 0; k < 3; ++k)
        for (int i = 0; i < 4; ++i) {
            fcl_plan_full ph, pa;
            const fcl_status want = dims[i] > (size_t)fcl_mma_max_head_dim(kinds[k])
                                        ? FCL_ERROR_NO_PLAN
                                        : FCL_OK;
            assert_int_equal(fcl_plan_make_mma(&h100->caps, kinds[k], dims[i], FCL_DTYPE_BF16,
                                               false, NULL, NULL, 0, &ph),
                             want);
            assert_int_equal(fcl_plan_make_mma(&a100->caps, kinds[k], dims[i], FCL_DTYPE_FP16,
                                               false, NULL, NULL, 0, &pa),
                             want);
            if (want != FCL_OK)
                continue;
            assert_true(pa.pub.local_bytes <= a100->caps.local_mem_usable);
            if (ph.pub.local_bytes <= a100->caps.local_mem_usable) {
                assert_int_equal(pa.pub.br, ph.pub.br);
                assert_int_equal(pa.pub.bc, ph.pub.bc);
                assert_int_equal(pa.pub.work_group_size, ph.pub.work_group_size);
            } else {
                assert_true(pa.pub.br * pa.pub.bc < ph.pub.br * ph.pub.bc);
            }
            assert_int_equal(pa.tile_mma, 1);
            /* four-float atomic adds for the fused dQ on sm_90 alone */
            assert_int_equal(ph.red_v4, 1);
            assert_int_equal(pa.red_v4, 0);
            assert_int_equal(pa.pub.work_group_size, 32 * (size_t)pa.ty);
            /* half the memory: a smaller plan that fits */
            fcl_plan_limits lim = {pa.pub.local_bytes / 2, 0};
            fcl_plan_full small;
            assert_int_equal(fcl_plan_make_mma(&a100->caps, kinds[k], dims[i], FCL_DTYPE_FP16,
                                               false, &lim, NULL, 0, &small),
                             FCL_OK);
            assert_true(small.pub.local_bytes <= lim.local_bytes);
        }
    fcl_plan_full p;
    /* the d = 256 dQ: 8 warps of 16 rows by 32 keys where 198 KiB fit (the
     * H100); on the A100 its second shape, 4 warps by 32 keys, not the
     * first shrunk to 16 keys */
    assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_BACKWARD_DQ, 256, FCL_DTYPE_FP16,
                                       false, NULL, NULL, 0, &p),
                     FCL_OK);
    assert_int_equal(p.pub.br, 128);
    assert_int_equal(p.pub.bc, 32);
    assert_int_equal(fcl_plan_make_mma(&a100->caps, FCL_KERNEL_BACKWARD_DQ, 256, FCL_DTYPE_FP16,
                                       false, NULL, NULL, 0, &p),
                     FCL_OK);
    assert_int_equal(p.pub.br, 64);
    assert_int_equal(p.pub.bc, 32);
    /* dK/dV computing dQ too (FLASHCL_BACKWARD_DQ) has its own default at
     * d <= 128: 8 warps, the accumulators' columns over 2 of them (whole
     * 16-column halves: d = 16 keeps the separate kernels' shape) */
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_BACKWARD_DKDV, dims[i],
                                           FCL_DTYPE_FP16, true, NULL, NULL, 0, &p),
                         FCL_OK);
        assert_int_equal(p.wd, i == 0 ? 1 : 2);
        assert_int_equal(p.pub.work_group_size, i == 0 ? 128 : 256);
    }
    assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP32, false,
                                       NULL, NULL, 0, &p),
                     FCL_ERROR_NO_PLAN);
    assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_FORWARD, 72, FCL_DTYPE_FP16, false,
                                       NULL, NULL, 0, &p),
                     FCL_ERROR_NO_PLAN);
    /* a forced shape that is not whole 16-row blocks per warp */
    const fcl_tuned_tile odd = {40, 64, 2, 32, "test", 0};
    assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP16, false,
                                       NULL, &odd, 0, &p),
                     FCL_ERROR_INVALID_VALUE);
}

/* A built kernel, as this implementation counts it, within `limit`. */
static void assert_kernel_fits(const fcl_context *ctx, cl_kernel k, uint64_t limit)
{
    cl_ulong used = 0;
    assert_int_equal(clGetKernelWorkGroupInfo(k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE,
                                              sizeof used, &used, NULL),
                     CL_SUCCESS);
    assert_true(used <= limit);
}

/* The device made 16..64 KiB small: every kernel kind resolves (head_dim
 * and dtype sampled: 1 fp32, 72 fp16, 256 bf16; decode for 8 rows), and
 * each built kernel and the other kernels of its program (merge, append,
 * delta) fit as this implementation counts them, whether it counts the
 * declared arrays (PoCL 3.1, NVIDIA) or more (rusticl). */
static void test_small_local_memory_builds(void **state)
{
    (void)state;
    static const struct {
        size_t d;
        fcl_dtype t;
    } shapes[] = {{1, FCL_DTYPE_FP32}, {72, FCL_DTYPE_FP16}, {256, FCL_DTYPE_BF16}};
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    for (int m = 0; m < SMALL_MEMS; ++m) {
        assert_int_equal(fcl_debug_limit_local_mem(ctx, small_mems[m]), FCL_OK);
        for (int k = 0; k < 4; ++k)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
                fcl_build b = fcl_build_of(kinds[k], shapes[i].d, shapes[i].t, 0);
                b.rows = kinds[k] == FCL_KERNEL_DECODE ? 8 : 0;
                fcl_resolved *r = NULL;
                assert_int_equal(fcl_resolve(ctx, &b, &r), FCL_OK);
                assert_kernel_fits(ctx, r->kernel, small_mems[m]);
                for (int h = 0; h < FCL_HELPER_COUNT; ++h)
                    if (r->helpers[h] != NULL)
                        assert_kernel_fits(ctx, r->helpers[h], small_mems[m]);
            }
    }
    /* the smallest plans compute right: 16 KiB at head_dim 256 (as
     * rusticl counts, two keys a tile, thread grids of 2), causal, GQA
     * (9 rows: dK/dV walks both query heads' rows, 18 of them, which this
     * smallest plan's loop bound still allows on llvmpipe) */
    assert_int_equal(fcl_debug_limit_local_mem(ctx, small_mems[0]), FCL_OK);
    fa_case c = {1, 2, 1, 9, 23, 256, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 7, NULL};
    fa_result res;
    assert_true(fa_check_backward(ctx, &c, &res)); /* its forward included */
    fcl_context_destroy(ctx);
}

/* The tensor-core pieces' local-memory formula is what the compiler
 * allocates (emulated warp operations, so on any device). */
static void test_tensor_core_local_bytes(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    assert_int_equal(fcl_debug_emulate_tensor_cores(ctx, 1), FCL_OK);
    for (int k = 0; k < 4; ++k) {
        fcl_resolved *r = NULL;
        fcl_build b = fcl_build_of(kinds[k], 64, FCL_DTYPE_FP16, FCL_BUILD_TILE_MMA);
        b.rows = kinds[k] == FCL_KERNEL_DECODE ? 4 : 0;
        assert_int_equal(fcl_resolve(ctx, &b, &r), FCL_OK);
        assert_int_equal(r->plan.tile_mma, 1);
        assert_local_bytes_planned(ctx, r);
    }
    /* the split of a 16-row block over warps (head_dim above 256): the
     * decode plan of one block (4 warps) and of two (2 warps each) */
    for (int rows = 16; rows <= 32; rows += 16) {
        fcl_resolved *r = NULL;
        fcl_build b = fcl_build_of(FCL_KERNEL_DECODE, 320, FCL_DTYPE_FP16, FCL_BUILD_TILE_MMA);
        b.rows = rows;
        const fcl_status st = fcl_resolve(ctx, &b, &r);
        if (st == FCL_ERROR_NO_PLAN) {
            /* a device too small for any split tile (llvmpipe's 32 KiB):
             * the planner says so before building */
            fcl_tuned_tile t;
            fcl_plan_full f;
            assert_int_equal(fcl_decode_target(&ctx->caps, &b, FCL_PIECE_PORTABLE, &t), FCL_OK);
            assert_int_equal(fcl_plan_make_mma(&ctx->caps, FCL_KERNEL_DECODE, 320, FCL_DTYPE_FP16,
                                               false, NULL, &t, 1, &f),
                             FCL_ERROR_NO_PLAN);
            continue;
        }
        assert_int_equal(st, FCL_OK);
        assert_int_equal(r->plan.wd, rows == 16 ? 4 : 2);
        assert_local_bytes_planned(ctx, r);
    }
    fcl_context_destroy(ctx);
}

/* Head dims above 256 on tensor cores (MLA): each 16-row block's keys and
 * V's columns over 4 warps (one block, head_dim a multiple of 64) or 2
 * (otherwise), shrunk to fewer
 * warps a block before fewer blocks where memory is short; a head_dim that
 * is no multiple of 32 has no such plan (the portable piece runs it). */
static void test_tensor_core_split_plans(void **state)
{
    (void)state;
    const fcl_profile *h100 = fcl_profile_find("nvidia-h100");
    const fcl_profile *a100 = fcl_profile_find("nvidia-a100");
    const size_t dims[] = {288, 320, 544, 576, 560};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i)
        for (int rows = 16; rows <= 64; rows *= 4)
            for (int p = 0; p < 2; ++p) {
                const fcl_caps *caps = p ? &a100->caps : &h100->caps;
                fcl_build b = fcl_build_of(FCL_KERNEL_DECODE, dims[i], FCL_DTYPE_BF16,
                                           FCL_BUILD_TILE_MMA);
                b.rows = rows;
                fcl_tuned_tile t;
                assert_int_equal(fcl_decode_target(caps, &b, FCL_PIECE_PORTABLE, &t), FCL_OK);
                fcl_plan_full f;
                const fcl_status st = fcl_plan_make_mma(caps, FCL_KERNEL_DECODE, dims[i],
                                                        FCL_DTYPE_BF16, false, NULL, &t, 0, &f);
                if (dims[i] % 32 != 0) {
                    assert_int_equal(st, FCL_ERROR_INVALID_VALUE); /* the target cannot tile it */
                    continue;
                }
                assert_int_equal(st, FCL_OK);
                assert_true(f.pub.local_bytes <= caps->local_mem_usable);
                assert_int_equal(f.pub.work_group_size, 32 * f.ty);
                assert_int_equal(f.ty, f.wd * (int)f.pub.br / 16); /* warps = blocks x wd */
                assert_int_equal(f.pub.bc % (16 * (size_t)f.wd), 0);
                /* the H100 holds every first choice; the A100's 164 KiB
                 * not 4 warps x 64 keys at 544 and 576, which give a block
                 * 2 warps instead */
                const bool four = rows == 16 && dims[i] % 64 == 0 && (p == 0 || dims[i] < 544);
                assert_int_equal(f.wd, four ? 4 : 2);
                assert_int_equal(f.pub.br, (size_t)rows);
            }
    /* the default of the forward kernel's plan (more rows than decoding) */
    fcl_plan_full f;
    assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_FORWARD, 560, FCL_DTYPE_FP16,
                                       false, NULL, NULL, 0, &f),
                     FCL_ERROR_NO_PLAN);
    assert_int_equal(fcl_plan_make_mma(&h100->caps, FCL_KERNEL_FORWARD, 576, FCL_DTYPE_FP16,
                                       false, NULL, NULL, 0, &f),
                     FCL_OK);
    assert_int_equal(f.wd, 2);
    assert_int_equal(f.pub.br, 64);
    assert_int_equal(f.pub.bc, 32);
}

/* Mesa's llvmpipe ends a work-item's loops after 65535 iterations in all
 * (NOTES.md): on such a device a forward over many keys is split into
 * chunks it can walk and comes out right, and a backward whose loops are
 * too long is refused with FCL_ERROR_DEVICE_LOOP_LIMIT, outputs untouched.
 * Elsewhere the probe finds no limit. */
/* A long KV-cache append (4200 new rows x 8 heads x 128): it once ran cut
 * short with FCL_OK (one work-group a sequence walked 67200 elements a
 * work-item); now the append step shares a sequence's rows over up to 64
 * work-groups (about 1600 iterations a work-item), so the query plans it
 * and the call appends every row (kv_run checks the caches and O against
 * the reference).  A refusal is what fcl_loop_check_kvcache gives past
 * that, and the query and the call share it. */
static void test_kvcache_append_limit(fcl_context *ctx)
{
    static const int lens[1] = {10};
    const kv_case c = {1, 8, 8, 128, 1, 4200, FCL_DTYPE_FP32, 0, 4210, lens, 1, -1, 0, 0, 0, 31};
    kv_state st;
    kv_init(&c, &st);
    fcl_plan p;
    assert_int_equal(fcl_kvcache_plan_query(ctx, &st.desc, &p), FCL_OK);
    kv_free(&st);
    assert_true(kv_run(ctx, &c));
}

/* dK/dV walks the query rows of every query head that shares its K/V head:
 * 8 heads of half the rows the limit allows were checked as half, and the
 * call returned FCL_OK with dK and dV wrong (flashcl-check on llvmpipe:
 * dV off by 0.77 at 8/1 heads, 200 x 333, head_dim 128, fp16).  Now the
 * plan query and the call refuse it, outputs untouched. */
static void test_backward_gqa_limit(fcl_context *ctx)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 8, 1, 16, 16, 128, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &p), FCL_OK);
    d.seqlen_q = (size_t)(fcl_loop_max_outer(ctx, &p) / 2);
    assert_true(d.seqlen_q > 0);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &p),
                     FCL_ERROR_DEVICE_LOOP_LIMIT);
    const int refused = fa_loop_refusals;
    fa_case c = {1, 8, 1, d.seqlen_q, 16, 128, FCL_DTYPE_FP16, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0},
                 14, NULL};
    fa_result res;
    assert_true(fa_check_backward(ctx, &c, &res));
    assert_int_equal(fa_loop_refusals, refused + 1);
}

static void test_loop_limit(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    if (strcmp(ctx->info.platform_name, "rusticl") == 0 &&
        strncmp(ctx->info.name, "llvmpipe", 8) == 0)
        assert_int_equal(ctx->loop_limit, 65535);
    if (ctx->loop_limit == 0) {
        fcl_context_destroy(ctx);
        return;
    }
    /* 64 rows, 5000 keys, head_dim 128: O was 100% wrong before the split */
    fa_case c = {1, 1, 1, 64, 5000, 128, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 11,
                 NULL};
    fa_result res;
    assert_true(fa_check_forward(ctx, &c, &res));
    /* the dQ kernel's plan (a short call's), the longest walk it allows,
     * and the query of the long call: refused, as the call is */
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 16, 16, 128, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &p), FCL_OK);
    d.seqlen_k = 5000;
    const uint64_t most = fcl_loop_max_outer(ctx, &p);
    assert_true(most > 0 && most < d.seqlen_k);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &p),
                     FCL_ERROR_DEVICE_LOOP_LIMIT);
    /* the call: refused with exactly that status, outputs untouched */
    const int refused = fa_loop_refusals;
    fa_case bc = {1, 1, 1, 16, 5000, 128, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 13,
                  NULL};
    assert_true(fa_check_backward(ctx, &bc, &res));
    assert_int_equal(fa_loop_refusals, refused + 1);
    test_backward_gqa_limit(ctx);
    test_kvcache_append_limit(ctx);
    fcl_context_destroy(ctx);

    /* An emulated CPU's key tile (32 x 64 at head_dim 48, one work-item)
     * costs more iterations than the whole limit: its forward returned
     * FCL_OK with O unwritten (the bound's 0 read as "no limit").  Now it
     * runs right or is refused as its plan query predicts (fa_check_forward). */
    fcl_context *cpu = test_context("cpu-avx2");
    assert_non_null(cpu);
    fa_case e = {1, 2, 1, 45, 70, 48, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 12,
                 NULL};
    assert_true(fa_check_forward(cpu, &e, &res));
    fcl_context_destroy(cpu);
}

/* A launch refused for resources re-plans smaller, says so, and still
 * computes the right answer. */
static void test_launch_failure_fallback(void **state)
{
    (void)state;
    fcl_context *ctx = test_context("nvidia-h100");
    assert_non_null(ctx);
    fcl_resolved *r = NULL;
    const fcl_build b = fcl_build_of(FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP32, 0);
    assert_int_equal(fcl_resolve(ctx, &b, &r), FCL_OK);
    const uint64_t before = r->plan.pub.local_bytes;
    assert_int_equal(fcl_resolve_after_launch_failure(ctx, r, CL_OUT_OF_RESOURCES), FCL_OK);
    assert_true(r->plan.pub.local_bytes < before);
    assert_non_null(strstr(r->plan.pub.reason, "fallback"));
    assert_non_null(strstr(r->plan.pub.source, "fallback"));
    fcl_attention_desc d;
    /* more query rows than a decode plan takes: the forward's plan */
    fcl_attention_desc_init(&d, 1, 1, 1, 100, 100, 64, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    fcl_plan shown;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &shown), FCL_OK);
    assert_int_equal(shown.local_bytes, r->plan.pub.local_bytes); /* the report follows */
    fa_case c = {1, 2, 2, 70, 90, 64, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 5, NULL};
    fa_result res;
    assert_true(fa_check_forward(ctx, &c, &res));
    /* other errors are not resource problems: passed through */
    assert_int_equal(fcl_resolve_after_launch_failure(ctx, r, CL_INVALID_KERNEL_ARGS),
                     CL_INVALID_KERNEL_ARGS);
    fcl_context_destroy(ctx);
}

/* A re-plan after a launch failure that fails itself (here its build, made
 * to fail by an option that breaks the source) leaves the cached entry
 * without a kernel; the next call of that build plans again and computes
 * the right result, instead of launching no kernel. */
static void test_failed_replan_recovers(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    fcl_resolved *r = NULL;
    const fcl_build b = fcl_build_of(FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP32, 0);
    assert_int_equal(fcl_resolve(ctx, &b, &r), FCL_OK);
    const uint64_t before = r->plan.pub.local_bytes;
    snprintf(ctx->extra_build_options, sizeof ctx->extra_build_options, "-Dinline=)");
    assert_int_not_equal(fcl_resolve_after_launch_failure(ctx, r, CL_OUT_OF_RESOURCES), FCL_OK);
    assert_null(r->kernel);
    ctx->extra_build_options[0] = '\0';
    fcl_resolved *again = NULL;
    assert_int_equal(fcl_resolve(ctx, &b, &again), FCL_OK);
    assert_ptr_equal(again, r);
    assert_non_null(again->kernel);
    assert_true(again->plan.pub.local_bytes < before); /* the lowered limit holds */
    fa_case c = {1, 2, 2, 70, 90, 64, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 6, NULL};
    fa_result res;
    assert_true(fa_check_forward(ctx, &c, &res));
    fcl_context_destroy(ctx);
}

/* The environment of one form of the tensor-core plans: the fused dQ's
 * (FLASHCL_BACKWARD_DQ: NULL, "ordered", "any-order") and, by `copies`,
 * the accelerator's copies (0), cp.async (1) or FP8 products (2). */
static void reason_form(const char *dq_form, int copies)
{
    if (dq_form != NULL)
        assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", dq_form, 1), 0);
    else
        assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
    const char *off = copies == 1 ? "0" : "";
    assert_int_equal(setenv("FLASHCL_WGMMA_TMA", off, 1), 0);
    assert_int_equal(setenv("FLASHCL_WGMMA_BACKWARD_TMA", off, 1), 0);
    assert_int_equal(setenv("FLASHCL_FP8_PRODUCTS", copies == 2 ? "1" : "", 1), 0);
}

/* No plan's reason is cut at fcl_plan's 384 bytes (plan_mma.c and
 * plan_wgmma.c size their texts for the longest forms): both tensor-core
 * pieces emulated, every kernel, head_dim 64 to 256, 16-bit and FP8
 * storage, few and many keys and rows, causal or not, under GQA, with the
 * fused dQ forms, the accelerator's copies, cp.async and FP8 products. */
static void test_reasons_whole(void **state)
{
    (void)state;
    static const char *const dq_forms[3] = {NULL, "ordered", "any-order"};
    static const size_t dims[3] = {64, 128, 256}, lens[3] = {512, 2000, 20000};
    static const fcl_dtype dtypes[3] = {FCL_DTYPE_BF16, FCL_DTYPE_FP16, FCL_DTYPE_FP8_E4M3};
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    assert_int_equal(fcl_debug_emulate_tensor_cores(ctx, 1), FCL_OK);
    int planned = 0;
    for (int w = 0; w < 2; ++w) {
        assert_int_equal(fcl_debug_use_wgmma(ctx, w), FCL_OK);
        assert_int_equal(fcl_debug_use_wgmma_backward(ctx, w), FCL_OK);
        for (int f = 0; f < 3; ++f)
            for (int copies = 0; copies < 3; ++copies) {
                reason_form(dq_forms[f], copies);
                for (int i = 0; i < 27 * 2 * 3; ++i) {
                    const int k = i % 3, causal = i / 3 % 2, n = i / 6 % 3, j = i / 18 % 3;
                    const fcl_dtype dt = dtypes[i / 54];
                    if (fcl_dtype_is_fp8(dt) && k != 0)
                        continue; /* FP8 has no backward */
                    fcl_attention_desc d;
                    fcl_attention_desc_init(&d, 1, 4, 2, lens[n], lens[n], dims[j], dt,
                                            FCL_LAYOUT_BSHD);
                    d.causal = causal;
                    fcl_plan plan;
                    if (fcl_plan_query(ctx, &d, kinds[k], &plan) != FCL_OK)
                        continue;
                    ++planned;
                    if (strlen(plan.reason) >= sizeof plan.reason - 1)
                        fail_msg("a reason cut: %s", plan.reason);
                }
            }
    }
    assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
    assert_int_equal(unsetenv("FLASHCL_WGMMA_TMA"), 0);
    assert_int_equal(unsetenv("FLASHCL_WGMMA_BACKWARD_TMA"), 0);
    assert_int_equal(unsetenv("FLASHCL_FP8_PRODUCTS"), 0);
    assert_true(planned > 100);
    fcl_context_destroy(ctx);
}

/* A resource fallback's note ends the plan's reason whole, with the
 * reason's last words giving way (" ...") where both do not fit: a
 * fallback after the longest reasons above (377 characters) used to be cut
 * off. */
static void test_fallback_note_whole(void **state)
{
    (void)state;
    char reason[sizeof ((fcl_plan *)NULL)->reason];
    const char *note = "launch out of resources at local bytes 232448; kernel needs local bytes "
                       "240000";
    for (size_t len = 0; len < sizeof reason; len += 7) {
        for (size_t i = 0; i < len; ++i)
            reason[i] = i % 6 == 5 ? ' ' : (char)('a' + i % 26);
        reason[len < sizeof reason ? len : sizeof reason - 1] = '\0';
        const size_t before = strlen(reason);
        fcl_reason_add_fallback(reason, sizeof reason, note);
        const size_t after = strlen(reason), tail = strlen("; fallback: ") + strlen(note);
        assert_true(after < sizeof reason);
        assert_true(after >= tail);
        assert_string_equal(reason + after - strlen(note), note);
        assert_memory_equal(reason + after - tail, "; fallback: ", 12);
        if (before + tail < sizeof reason) { /* it fitted: nothing else changed */
            assert_int_equal(after, before + tail);
        } else { /* cut at a word's end, marked */
            assert_true(after - tail >= 5);
            assert_memory_equal(reason + after - tail - 4, " ...", 4);
            assert_true(reason[after - tail - 5] != ' ');
        }
    }
}

int main(void)
{
    fa_test_filters();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_profile_plans),
        cmocka_unit_test(test_paper_rule),
        cmocka_unit_test(test_table_choices),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_small_local_memory_plans),
        cmocka_unit_test(test_small_local_memory_tensor_cores),
        cmocka_unit_test(test_small_local_memory_builds),
        cmocka_unit_test(test_loop_limit),
        cmocka_unit_test(test_local_bytes_match_compiler),
        cmocka_unit_test(test_launch_failure_fallback),
        cmocka_unit_test(test_failed_replan_recovers),
        cmocka_unit_test(test_tensor_core_plans),
        cmocka_unit_test(test_tensor_core_local_bytes),
        cmocka_unit_test(test_tensor_core_split_plans),
        cmocka_unit_test(test_reasons_whole),
        cmocka_unit_test(test_fallback_note_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
