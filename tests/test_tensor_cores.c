/* test_tensor_cores.c - the tensor-core pieces (cl/tile_nv_mma.cl), forward
 * and backward, against the float64 reference.  On an NVIDIA sm_80+ device
 * they run on the real instructions; anywhere else (PoCL in CI) on the
 * emulated warp operations of cl/warp_emulated.cl, which check the pieces'
 * fragment layouts, masking, variants and barriers without a GPU.  Every
 * test first checks that the calls really plan the tensor-core pieces.
 * Shapes: fp16 and bf16, head_dim 16..256, odd lengths, GQA, causal,
 * variants, packed sequences, block masks on key tiles that leave
 * work-items idle, and forced tiles with two row blocks per warp (the
 * shapes the tuner may choose).  Tolerances: test_support.h. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "internal.h"
#include "build_bits.h"
#include "test_support.h"

#define ctx fa_ctx

static const char *plan_variant(fcl_kernel_kind kind, size_t head_dim, fcl_dtype dtype)
{
    static fcl_plan plan;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 2, 2, 64, 64, head_dim, dtype, FCL_LAYOUT_BSHD);
    if (fcl_plan_query(ctx, &d, kind, &plan) != FCL_OK)
        return "";
    return plan.variant;
}

/* How many bytes this device's kernels count for each declared __local
 * byte (CL_KERNEL_LOCAL_MEM_SIZE of a 4 KiB array): 1 on PoCL 3.1 and
 * NVIDIA, 2 on rusticl (NOTES.md, "Local memory as each implementation
 * counts it"); 0 until measured. */
static uint64_t local_count_factor;

static uint64_t measure_local_count_factor(void)
{
    static const char *src = "__kernel void f(__global float *o)\n"
                             "{\n"
                             "    __local float a[1024];\n"
                             "    a[get_local_id(0)] = 1.0f;\n"
                             "    barrier(CLK_LOCAL_MEM_FENCE);\n"
                             "    o[0] = a[1023 - get_local_id(0)];\n"
                             "}\n";
    cl_context clc = fcl_context_cl_context(ctx);
    cl_device_id dev = fcl_context_cl_device(ctx);
    cl_int err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(clc, 1, &src, NULL, &err);
    cl_kernel k = NULL;
    cl_ulong bytes = 0;
    if (err == CL_SUCCESS)
        err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
    if (err == CL_SUCCESS)
        k = clCreateKernel(prog, "f", &err);
    if (err == CL_SUCCESS)
        err = clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof bytes, &bytes, NULL);
    if (k != NULL)
        clReleaseKernel(k);
    if (prog != NULL)
        clReleaseProgram(prog);
    return err == CL_SUCCESS ? (bytes + 4095) / 4096 : 0;
}

/* The real instructions where the device has them, else the emulation:
 * the mma.sync piece, with the wgmma piece (test_wgmma's) turned off where
 * it would be the default (an sm_90 device at head_dim 64 and 128). */
static int setup(void **state)
{
    if (fa_group_setup(state) != 0 || fcl_debug_use_wgmma(ctx, -1) != FCL_OK ||
        fcl_debug_use_wgmma_backward(ctx, -1) != FCL_OK)
        return -1;
    if (strcmp(plan_variant(FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP16), "nvidia-mma-sync") != 0 &&
        fcl_debug_emulate_tensor_cores(ctx, 1) != FCL_OK)
        return -1;
    local_count_factor = measure_local_count_factor();
    return local_count_factor > 0 ? 0 : -1;
}

/* What the device does with the pieces' smallest tile of `kind` (one warp
 * of 16 rows, 16 per step: plan_mma.c's footprint, with the emulation's 24
 * bytes a lane): PLANS where it fits the device's local memory as its
 * kernels count it; PORTABLE where it does not fit even the memory the
 * device reports (the library then runs the portable piece, as on any
 * device too small); REFUSED in between, where only the built kernel's
 * count shows it (resolve.c: FCL_ERROR_NO_PLAN).  On rusticl, which counts
 * twice: the backward's at head_dim 128 and the forward's at 256 are
 * refused, the backward's at 256 portable; elsewhere every one plans. */
enum tile_outcome { PLANS, PORTABLE, REFUSED };

static enum tile_outcome smallest_tile(fcl_kernel_kind kind, size_t head_dim)
{
    const uint64_t row_bytes = (head_dim + 8) * 2, rows = 16, inner = 16;
    uint64_t bytes = kind == FCL_KERNEL_FORWARD ? (rows + 2 * inner) * row_bytes + 4
                                                : (2 * rows + 4 * inner) * row_bytes + 4;
    if (kind == FCL_KERNEL_BACKWARD_DKDV)
        bytes += 4 * inner * 4 + 2 * 4;
    bytes += 32 * 6 * 4;
    fcl_device_info info;
    assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
    return bytes * local_count_factor <= info.local_mem_usable ? PLANS
           : bytes > info.local_mem_usable                     ? PORTABLE
                                                               : REFUSED;
}

static const fcl_kernel_kind kinds[3] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DQ,
                                         FCL_KERNEL_BACKWARD_DKDV};

/* Every kind plans as smallest_tile() says: the tensor-core piece, the
 * portable piece, or exactly FCL_ERROR_NO_PLAN. */
static void assert_tensor_core_plans(size_t head_dim, fcl_dtype dtype)
{
    for (int i = 0; i < 3; ++i) {
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, 1, 2, 2, 64, 64, head_dim, dtype, FCL_LAYOUT_BSHD);
        fcl_plan plan;
        const fcl_status st = fcl_plan_query(ctx, &d, kinds[i], &plan);
        const enum tile_outcome want = smallest_tile(kinds[i], head_dim);
        assert_int_equal(st, want == REFUSED ? FCL_ERROR_NO_PLAN : FCL_OK);
        if (want == PLANS)
            assert_non_null(strstr(plan.variant, "mma-sync"));
        else if (want == PORTABLE)
            assert_null(strstr(plan.variant, "mma"));
        if (want != PLANS)
            print_message("head_dim %zu, kernel kind %d: the smallest tensor-core tile does not "
                          "fit this device's count of local memory (x%llu): %s, as predicted\n",
                          head_dim, (int)kinds[i], (unsigned long long)local_count_factor,
                          want == REFUSED ? "refused" : "the portable piece");
    }
}

static fa_case base_case(uint64_t seed)
{
    fa_case c = {2, 4, 2, 70, 83, 64, FCL_DTYPE_FP16, 0, 0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0},
                 seed, NULL};
    return c;
}

/* Forward and backward against the reference; where the smallest tile of
 * a kind is refused (smallest_tile), its calls must be refused with
 * FCL_ERROR_NO_PLAN as their plan query predicts, outputs untouched. */
static int forced_tile_refused; /* the forced tile's plan query says NO_PLAN */

static void check_passes(const fa_case *c, int forward_too)
{
    fa_result r;
    int refused = forced_tile_refused;
    for (int i = 0; i < 3; ++i)
        refused = refused || smallest_tile(kinds[i], c->head_dim) == REFUSED;
    fa_accept_no_plan = refused;
    const int forward = !forward_too || fa_check_forward(ctx, c, &r);
    const int backward = fa_check_backward(ctx, c, &r);
    fa_accept_no_plan = 0;
    assert_true(forward);
    assert_true(backward);
}

static void check_both(const fa_case *c) { check_passes(c, 1); }

/* fp32 and head dims the pieces cannot take stay portable; 256 is taken
 * by all three kernels. */
static void test_selection(void **state)
{
    (void)state;
    assert_tensor_core_plans(64, FCL_DTYPE_FP16);
    assert_tensor_core_plans(128, FCL_DTYPE_BF16);
    assert_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 64, FCL_DTYPE_FP32), "mma"));
    assert_null(strstr(plan_variant(FCL_KERNEL_BACKWARD_DQ, 72, FCL_DTYPE_FP16), "mma"));
    assert_tensor_core_plans(256, FCL_DTYPE_BF16);
    assert_tensor_core_plans(256, FCL_DTYPE_FP16);
}

/* A value head dim below the key's: DeepSeek's 192/128 (dK/dV as two
 * launches), 64/32 in both storage types, forward and backward, on the
 * tensor cores; a head_dim_v that is no multiple of 16 plans the portable
 * piece. */
static void test_value_head_dim(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_plan plan;
    fcl_attention_desc_init(&d, 1, 2, 2, 64, 64, 192, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    d.head_dim_v = 128;
    /* as smallest_tile says (rusticl's doubled count: the portable piece) */
    const enum tile_outcome want = smallest_tile(FCL_KERNEL_BACKWARD_DKDV, 192);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan),
                     want == REFUSED ? FCL_ERROR_NO_PLAN : FCL_OK);
    if (want == PLANS)
        assert_non_null(strstr(plan.variant, "mma"));
    d.head_dim_v = 40;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
    assert_null(strstr(plan.variant, "mma"));
    const size_t dims[][2] = {{192, 128}, {64, 32}, {128, 16}};
    for (size_t i = 0; i < 3; ++i) {
        fa_variants v = fa_no_variants();
        v.head_dim_v = dims[i][1];
        v.p_fp16 = 1;
        fa_case c = base_case(60 + i);
        c.head_dim = dims[i][0];
        c.dtype = i % 2 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        c.causal = (int)(i % 2);
        c.var = &v;
        check_both(&c);
    }
}

/* The plan query of c's dK/dV kernel (its variants aside). */
static fcl_status dkdv_plan(const fa_case *c, fcl_plan *plan)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k,
                            c->head_dim, c->dtype, c->layout);
    return fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, plan);
}

/* Whether the dK/dV kernel of `c` is planned with its accumulators'
 * columns split over warps (plan_mma.c says so in the plan's reason). */
static bool dkdv_columns_split(const fa_case *c)
{
    fcl_plan plan;
    return dkdv_plan(c, &plan) == FCL_OK && strstr(plan.reason, "columns split over") != NULL;
}

/* A local window (left, right) when !packed, else packed sequences of
 * lengths lq and lk. */
static fa_variants window_or_packed(int packed, long left, long right, const int *lq,
                                    const int *lk)
{
    fa_variants v = fa_no_variants();
    if (!packed) {
        v.window_left = left;
        v.window_right = right;
    } else {
        v.seqlens_q = lq;
        v.seqlens_k = lk;
    }
    return v;
}

/* head_dim 256: dK/dV in one launch, its accumulators' columns split over
 * warps (the default shape), and as two launches (dV, then dK: a forced
 * shape without the split). */
static void test_head_dim_256(void **state)
{
    (void)state;
    fa_case c = base_case(7050);
    c.heads_q = 2;
    c.heads_kv = 1;
    c.seqlen_q = 40;
    c.seqlen_k = 51;
    c.head_dim = 256;
    c.causal = 1;
    if (smallest_tile(FCL_KERNEL_BACKWARD_DKDV, 256) == PLANS &&
        strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 256, FCL_DTYPE_FP16), "mma") != NULL)
        assert_true(dkdv_columns_split(&c) || local_count_factor > 1);
    check_both(&c);
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 32, 64, 4, 32), FCL_OK);
    assert_false(dkdv_columns_split(&c));
    assert_int_equal(fcl_backward_builds_of(ctx, &(fcl_attention_desc){.head_dim = 256,
                                                                        .dtype = FCL_DTYPE_FP16},
                                            0)
                         .dkdv_launches,
                     strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 256, FCL_DTYPE_FP16), "mma")
                         ? 2
                         : 1);
    c.seed = 7051;
    check_passes(&c, 0);
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 0, 0, 0, 0), FCL_OK);
}

/* The split dK/dV at smaller head dims, forced (rows = query rows per step
 * x cols = keys, warps, column groups): each warp's score tile and
 * accumulators then cover different keys, with windows, GQA, packed
 * sequences of unaligned lengths and both 16-bit types. */
static void test_dkdv_columns_split(void **state)
{
    (void)state;
    static const struct {
        int rows, cols, warps, wd;
        size_t head_dim;
    } shapes[] = {{64, 64, 4, 2, 64}, {64, 128, 8, 2, 128}, {32, 64, 8, 2, 32}};
    const int lq[2] = {37, 90}, lk[2] = {61, 45};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, shapes[i].rows,
                                            shapes[i].cols, shapes[i].warps, 32),
                         FCL_OK);
        assert_int_equal(fcl_debug_set_tile_split(ctx, FCL_KERNEL_BACKWARD_DKDV, shapes[i].wd),
                         FCL_OK);
        /* one case a shape, alternating (each 8-warp emulated build costs
         * minutes of CI on the CPU implementations) */
        const int t = (int)(i % 2);
        fa_variants v = window_or_packed(t, 30, 7, lq, lk);
        fa_case c = base_case(7060 + (uint64_t)(10 * i + t));
        c.seqlen_q = 90;
        c.seqlen_k = 61;
        c.head_dim = shapes[i].head_dim;
        c.dtype = t ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        c.causal = t;
        c.var = &v;
        /* a forced tile does not fall back: where it does not fit the
         * device (rusticl counts local memory twice and builds the emulated
         * pieces for 32 work-items, one warp) the call must be refused
         * exactly as its plan query says */
        fcl_plan plan;
        const fcl_status q = dkdv_plan(&c, &plan);
        assert_true(q == FCL_OK || q == FCL_ERROR_NO_PLAN);
        if (local_count_factor == 1 &&
            smallest_tile(FCL_KERNEL_BACKWARD_DKDV, c.head_dim) == PLANS) {
            assert_int_equal(q, FCL_OK);
            assert_true(dkdv_columns_split(&c));
        }
        forced_tile_refused = q == FCL_ERROR_NO_PLAN;
        if (forced_tile_refused)
            print_message("forced split tile %dx%dx%dw%d at head_dim %zu does not fit this "
                          "device's limits: refused, as predicted\n",
                          shapes[i].rows, shapes[i].cols, shapes[i].warps, shapes[i].wd,
                          c.head_dim);
        check_passes(&c, 0);
        forced_tile_refused = 0;
    }
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 0, 0, 0, 0), FCL_OK);
}

/* Every head dim the pieces take, both 16-bit types, causal and not. */
static void test_head_dims(void **state)
{
    (void)state;
    /* one 16-bit type a head dim, the other at the next: the types differ
     * only in the conversions (warp_*.cl), which every head dim shares, and
     * each emulated build costs CI minutes on the CPU implementations */
    const size_t dims[4] = {16, 32, 64, 128};
    for (int i = 0; i < 4; ++i) {
        fa_case c = base_case(7000 + (uint64_t)i);
        c.dtype = i % 2 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        c.head_dim = dims[i];
        c.causal = (i / 2) % 2;
        assert_tensor_core_plans(c.head_dim, c.dtype);
        check_both(&c);
    }
}

/* More queries than keys and the reverse, one-row sequences, BHSD. */
static void test_lengths_and_layout(void **state)
{
    (void)state;
    const size_t lens[3][2] = {{130, 17}, {9, 140}, {1, 1}};
    for (int i = 0; i < 3; ++i) {
        fa_case c = base_case(7100 + (uint64_t)i);
        c.seqlen_q = lens[i][0];
        c.seqlen_k = lens[i][1];
        c.head_dim = 32;
        c.causal = i != 1;
        c.layout = i == 2 ? FCL_LAYOUT_BSHD : FCL_LAYOUT_BHSD;
        check_both(&c);
    }
}

/* The outputs' own layouts (O, dQ, dK, dV; the inputs' stay aligned, so
 * the tensor-core pieces run): the kernels write a lane's column pair as one
 * store where a row's first element is even (fcl_store_pair), an element at
 * a time elsewhere.  Even gaps (every row paired, O not staged at head_dim
 * 64); BHSD's odd gaps, whose heads alternate between the two; BSHD's odd
 * row stride (no row paired).  The kernels test_head_dims builds. */
static void test_output_layouts(void **state)
{
    (void)state;
    const struct {
        size_t d;
        fcl_dtype dtype;
        fcl_layout_kind layout;
        int pad;
    } cases[3] = {{64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD, FA_OUTPUTS_EVEN},
                  {128, FCL_DTYPE_BF16, FCL_LAYOUT_BHSD, FA_OUTPUTS_ODD},
                  {128, FCL_DTYPE_BF16, FCL_LAYOUT_BSHD, FA_OUTPUTS_ODD}};
    for (int i = 0; i < 3; ++i) {
        fa_case c = base_case(7960 + (uint64_t)i);
        c.head_dim = cases[i].d;
        c.dtype = cases[i].dtype;
        c.layout = cases[i].layout;
        c.padded = cases[i].pad;
        c.causal = 1;
        assert_tensor_core_plans(c.head_dim, c.dtype);
        check_both(&c);
    }
}

/* A call at head_dim 64 with no edge tile (no mask, seqlen_k a multiple of
 * 256: every key tile whole) builds the mma.sync kernels with the edge
 * tests compiled away (FCL_BUILD_WHOLE_TILES, common.cl's FCL_WHOLE_KEYS),
 * as it does the wgmma piece's (test_wgmma); at 128 it keeps them (measured
 * slower so).  Forward and backward against float64. */
static void test_whole_tiles(void **state)
{
    (void)state;
    fa_case c = base_case(7950);
    c.seqlen_k = 256;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k,
                            c.head_dim, c.dtype, c.layout);
    unsigned bits[3];
    fa_build_bits(ctx, &d, bits);
    for (int k = 0; k < 3; ++k) {
        assert_int_equal(bits[k] & FCL_BUILD_WGMMA, 0);
        assert_int_equal((bits[k] & FCL_BUILD_WHOLE_TILES) != 0,
                         (bits[k] & FCL_BUILD_TILE_MMA) != 0);
    }
    check_both(&c);
    fcl_attention_desc_init(&d, c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k, 128,
                            c.dtype, c.layout);
    fa_build_bits(ctx, &d, bits);
    for (int k = 0; k < 3; ++k)
        assert_int_equal(bits[k] & FCL_BUILD_WHOLE_TILES, 0);
}

/* Plain attention takes the row max over raw q.k and puts the scale into
 * the exponent, negating Q for a negative scale; softcap scales first.
 * Each case runs on kernels another test builds too (each emulated build
 * costs CI a minute on the CPU implementations): fp16 those of
 * test_lengths_and_layout, bf16 those of test_head_dims, and softcap those
 * of test_variants' softcap case, whose block mask keeps every block here. */
static void test_scales(void **state)
{
    (void)state;
    const float scales[3] = {0.7f, -0.3f, -0.125f};
    for (int i = 0; i < 3; ++i) {
        fa_variants v = fa_no_variants();
        v.softcap = 2.0f;
        v.block_m = 16;
        v.block_n = 32;
        v.block_density = 1.0;
        fa_case c = base_case(7300 + (uint64_t)i);
        c.scale = scales[i];
        c.causal = i == 1;
        c.head_dim = 32;
        c.dtype = i == 0 ? FCL_DTYPE_FP16 : FCL_DTYPE_BF16;
        c.var = i == 2 ? &v : NULL;
        check_both(&c);
    }
}

static void test_variants(void **state)
{
    (void)state;
    const int lq[2] = {50, 33}, lk[2] = {61, 40};
    for (int t = 0; t < 3; ++t) {
        fa_variants v = fa_no_variants();
        if (t == 0) {
            v.window_left = 20;
            v.window_right = 9;
            v.alibi = FCL_ALIBI_PER_HEAD;
            v.dropout_p = 0.15f;
            v.dropout_seed = 3;
        } else if (t == 1) {
            v.softcap = 12.0f;
            v.block_m = 16;
            v.block_n = 32;
            v.block_density = 0.5;
        } else {
            v.seqlens_q = lq;
            v.seqlens_k = lk;
        }
        fa_case c = base_case(7200 + (uint64_t)t);
        c.var = &v;
        c.head_dim = 32;
        /* packed sequences in bf16: the kernels of test_sinks' packed case */
        c.dtype = t == 0 ? FCL_DTYPE_FP16 : FCL_DTYPE_BF16;
        c.causal = t == 2;
        check_both(&c);
    }
}

/* Block masks where a key tile is fewer 16-byte copies than the
 * work-group has work-items, so some copy nothing: the decode plan of 64
 * query rows (4 warps of 16 rows, 16 keys) at head_dim 32 and 16.  Their
 * copy loops once ran a trip count that differed between work-items, which
 * PoCL miscompiled with a block mask compiled in (O off by ~1 at 32, a
 * crash at 16; cl/tile_nv_mma.cl, FCL_FOR_TILE_CHUNKS).  The forward only:
 * the backward's kernels have other plans, and its check would repeat this
 * one (it runs our forward first) at twice the build time. */
/* Attention sinks: the exp2 units of the piece's softmax, windows, GQA,
 * packed sequences, and split-KV on a decode plan (the merge adds them). */
static void test_sinks(void **state)
{
    (void)state;
    static const int lq[2] = {33, 70}, lk[2] = {70, 51};
    for (int i = 0; i < 3; ++i) {
        fa_variants v = fa_no_variants();
        v.sinks = 1;
        if (i == 0)
            v.window_left = 24, v.window_right = 0;
        if (i == 1)
            v.seqlens_q = lq, v.seqlens_k = lk;
        if (i == 2)
            v.num_splits = 3;
        fa_case c = base_case(7400 + (uint64_t)i);
        c.var = &v;
        c.dtype = i == 1 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        c.causal = i != 2;
        /* packed at head_dim 32: the kernels of test_variants' packed case */
        if (i == 1)
            c.head_dim = 32;
        if (i == 2) {
            c.seqlen_q = 2;
            c.heads_q = 8;
            c.seqlen_k = 200;
            fa_result r;
            assert_true(fa_check_forward(ctx, &c, &r));
        } else {
            check_both(&c);
        }
    }
}

static void test_block_mask_short_tiles(void **state)
{
    (void)state;
    const size_t dims[2] = {32, 16};
    for (int t = 0; t < 2; ++t) {
        fa_variants v = fa_no_variants();
        v.block_m = 16;
        v.block_n = 32;
        v.block_density = t ? 0.5 : 1.0;
        fa_case c = {1, 1, 1, 64, 64, dims[t], t ? FCL_DTYPE_FP16 : FCL_DTYPE_BF16, t, 0.0f,
                     FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 7500 + (uint64_t)t, &v};
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, 1, 1, 1, 64, 64, c.head_dim, c.dtype, FCL_LAYOUT_BSHD);
        d.block_m = v.block_m;
        d.block_n = v.block_n;
        fcl_plan p;
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_OK);
        assert_non_null(strstr(p.variant, "mma-sync"));
        /* a device whose kernels take one warp (rusticl answers 32 for
         * every kernel) has no such tile: the check still runs */
        if (strstr(p.reason, "kernel allows only work-items") == NULL)
            assert_true(p.bc * c.head_dim / 8 < p.work_group_size);
        else
            print_message("one warp a group here: no work-item is idle (%s)\n", p.reason);
        fa_result r;
        assert_true(fa_check_forward(ctx, &c, &r));
    }
}

/* Tiles the defaults do not use: two 16-row blocks per warp, 32-row steps. */
static void test_forced_tiles(void **state)
{
    (void)state;
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 64, 32, 2, 32), FCL_OK);
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DQ, 64, 32, 2, 32), FCL_OK);
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 32, 64, 2, 32), FCL_OK);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 2, 2, 64, 64, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &p), FCL_OK);
    /* as forced, unless the built kernel's own numbers made resolve re-plan
     * (rusticl: 32 work-items a kernel, twice the local bytes); the calls
     * are checked either way */
    if (strstr(p.reason, "fallback:") == NULL) {
        assert_int_equal(p.bc, 64);
        assert_int_equal(p.br, 32);
        assert_int_equal(p.work_group_size, 64);
    } else {
        print_message("the forced tile was re-planned here: %s\n", p.reason);
    }
    /* one storage type, so both cases run on one build of the forced tile
     * (the 16-bit types differ only in conversions, which the default
     * tiles' tests check in both) */
    for (int t = 0; t < 2; ++t) {
        fa_case c = base_case(7300 + (uint64_t)t);
        c.causal = t;
        check_both(&c);
    }
    for (int k = 0; k < 3; ++k)
        assert_int_equal(fcl_debug_set_tile(ctx, (fcl_kernel_kind)k, 0, 0, 0, 0), FCL_OK);
}

static void test_deterministic(void **state)
{
    (void)state;
    fa_case c = base_case(7400);
    c.causal = 1;
    assert_true(fa_check_deterministic(ctx, &c, 1));
}

/* dQ in the dK/dV kernel (flash_bwd.cl, FCL_FUSED_DQ): off by default,
 * taken when FLASHCL_BACKWARD_DQ asks for it at head_dim <= 128 without a
 * block mask, and each setting gives the reference's gradients on shapes
 * whose Q blocks are visited by different runs of key blocks: a window on
 * both sides with more keys than queries, GQA, and packed sequences of
 * unaligned lengths (each sequence's key-block counts start at its own
 * first visiting block). */
static bool fused_for(fcl_attention_desc *d, size_t head_dim, size_t block)
{
    d->head_dim = head_dim;
    d->block_m = d->block_n = block;
    return fcl_backward_builds_of(ctx, d, fcl_variants_features(d)).fused_dq;
}

static void test_fused_dq(void **state)
{
    (void)state;
    /* a device that ends long loops (llvmpipe) keeps the dQ kernel: the
     * waits are loops */
    const bool fusable = ctx->loop_limit == 0;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 2, 2, 64, 64, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
    assert_false(fused_for(&d, 64, 0));
    assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", "ordered", 1), 0);
    assert_int_equal(fused_for(&d, 64, 0), fusable);
    assert_false(fused_for(&d, 256, 0)); /* dK/dV split over warps (or launches) */
    assert_false(fused_for(&d, 64, 16));

    /* the separate kernels (the default) are every other test's; here
     * the two fused forms */
    static const char *const modes[3] = {"separate", "any-order", "ordered"};
    const int lq[2] = {77, 150}, lk[2] = {203, 90};
    assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", modes[0], 1), 0);
    assert_false(fused_for(&d, 128, 0));
    for (int m = 1; m < 3; ++m) {
        assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", modes[m], 1), 0);
        assert_int_equal(fused_for(&d, 128, 0), fusable);
        for (int t = 0; t < 2; ++t) {
            fa_variants v = window_or_packed(t, 70, 25, lq, lk);
            fa_case c = {2, 4, 2, 150, 203, 64, FCL_DTYPE_FP16, t, 0.0f, FCL_LAYOUT_BSHD, 0,
                         {0, 0, 0}, 7500 + (uint64_t)(10 * m + t), &v};
            c.dtype = m == 1 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
            /* d 64 and 128 take the fused default, the accumulators'
             * columns over 2 warps; 48 the unsplit shape (plan_mma.c) */
            c.head_dim = t ? 128 : m == 2 ? 48 : 64;
            check_passes(&c, 0);
        }
    }
    assert_true(fa_check_deterministic(ctx, &(fa_case){2, 4, 2, 150, 203, 64, FCL_DTYPE_FP16, 1,
                                                      0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 7530,
                                                      NULL},
                                       1));
    assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
}

/* After each test, whether it passed or failed: no forced tile is left to
 * the next (a failed assertion leaves the test before its own reset). */
static int clear_forced_tiles(void **state)
{
    (void)state;
    forced_tile_refused = 0;
    for (int i = 0; i < 3; ++i)
        if (fcl_debug_set_tile(ctx, kinds[i], 0, 0, 0, 0) != FCL_OK)
            return -1;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_selection, clear_forced_tiles),
        cmocka_unit_test_teardown(test_head_dims, clear_forced_tiles),
        /* early: test_nonfinite takes its ordered fused kernel from PoCL's
         * kernel cache when this program built it first */
        cmocka_unit_test_teardown(test_fused_dq, clear_forced_tiles),
        cmocka_unit_test_teardown(test_head_dim_256, clear_forced_tiles),
        cmocka_unit_test_teardown(test_dkdv_columns_split, clear_forced_tiles),
        cmocka_unit_test_teardown(test_value_head_dim, clear_forced_tiles),
        cmocka_unit_test_teardown(test_lengths_and_layout, clear_forced_tiles),
        cmocka_unit_test_teardown(test_whole_tiles, clear_forced_tiles),
        cmocka_unit_test_teardown(test_output_layouts, clear_forced_tiles),
        cmocka_unit_test_teardown(test_scales, clear_forced_tiles),
        cmocka_unit_test_teardown(test_variants, clear_forced_tiles),
        cmocka_unit_test_teardown(test_sinks, clear_forced_tiles),
        cmocka_unit_test_teardown(test_block_mask_short_tiles, clear_forced_tiles),
        cmocka_unit_test_teardown(test_forced_tiles, clear_forced_tiles),
        cmocka_unit_test_teardown(test_deterministic, clear_forced_tiles),
    };
    return cmocka_run_group_tests(tests, setup, fa_group_teardown);
}
