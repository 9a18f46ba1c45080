/* test_wgmma.c - the wgmma piece (cl/tile_nv_wgmma.cl), the forward's and
 * dK/dV's, against the float64 reference.  On an NVIDIA sm_90 device it runs the real
 * instructions (built through the sm_90a step); anywhere else (PoCL in CI)
 * the emulated ones of cl/warpgroup_emulated.cl, which decode the
 * descriptors as the PTX ISA defines them: so the swizzled layout of the
 * tiles, the descriptors' LBO, SBO and swizzle mode, V's transpose, the
 * m64nNk16 accumulator layout and P's repacking as the A operand are all
 * checked without a GPU.  Here the piece is asked for (fcl_debug_use_wgmma;
 * FLASHCL_WGMMA=1 for users); unasked, only a real sm_90 device uses it,
 * for the forward and for both backward kernels (fcl_debug_use_wgmma_backward,
 * FLASHCL_WGMMA_BACKWARD).
 * Small shapes: the emulation is slow.  Tolerances:
 * test_support.h. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "internal.h"
#include "build_bits.h"
#include "nonfinite_support.h"
#include "test_filters.h"
#include "test_support.h"

#define ctx fa_ctx

/* The variant a plan query gives: heads 2/2, seqlen_q rows, 96 keys. */
static const char *plan_variant(fcl_kernel_kind kind, size_t seqlen_q, size_t head_dim,
                                fcl_dtype dtype)
{
    static fcl_plan plan;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 2, 2, seqlen_q, 96, head_dim, dtype, FCL_LAYOUT_BSHD);
    if (fcl_plan_query(ctx, &d, kind, &plan) != FCL_OK)
        return "";
    return plan.variant;
}

/* Set where not even the smallest tile (one warpgroup, 64 keys, d 64)
 * has a plan: a device whose own count of the emulated kernel's local
 * memory exceeds what it has (rusticl's llvmpipe counts the emulation's
 * __local twice and has 32 KiB).  Every call must then be refused with
 * FCL_ERROR_NO_PLAN, as its plan query predicts, outputs untouched. */
static int wgmma_refused;

/* The real instructions on sm_90, else the emulation. */
static int setup(void **state)
{
    if (fa_group_setup(state) != 0 || fcl_debug_use_wgmma(ctx, 1) != FCL_OK)
        return -1;
    if (strcmp(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP16), "nvidia-wgmma") != 0 &&
        fcl_debug_emulate_tensor_cores(ctx, 1) != FCL_OK)
        return -1;
    if (fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 64, 64, 4, 32) != FCL_OK)
        return -1;
    fcl_attention_desc d;
    fcl_plan plan;
    fcl_attention_desc_init(&d, 1, 2, 2, 128, 96, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    const fcl_status q = fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan);
    if (fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 0, 0, 0, 0) != FCL_OK ||
        (q != FCL_OK && q != FCL_ERROR_NO_PLAN))
        return -1;
    wgmma_refused = q == FCL_ERROR_NO_PLAN;
    if (wgmma_refused)
        print_message("the smallest wgmma tile has no plan on this device (%s): every call "
                      "must be refused as its plan query predicts\n",
                      fcl_status_string(q));
    return 0;
}

static int clear_forced_tile(void **state)
{
    (void)state;
    return fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 0, 0, 0, 0) == FCL_OK ? 0 : -1;
}

static fa_case base_case(uint64_t seed)
{
    fa_case c = {1, 2, 2, 130, 83, 64, FCL_DTYPE_FP16, 0, 0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0},
                 seed, NULL};
    return c;
}

/* The call of case c. */
static fcl_attention_desc case_desc(const fa_case *c)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k,
                            c->head_dim, c->dtype, c->layout);
    d.causal = c->causal;
    return d;
}

/* Where no wgmma tile has a plan, case c's call (the forward, or the
 * backward) is refused with FCL_ERROR_NO_PLAN as its plan query predicts,
 * outputs untouched. */
static void check_refused(const fa_case *c, int backward)
{
    fa_result r;
    const int before = fa_no_plan_refusals;
    fa_accept_no_plan = 1;
    const int ok = backward ? fa_check_backward(ctx, c, &r) : fa_check_forward(ctx, c, &r);
    fa_accept_no_plan = 0;
    assert_true(ok);
    assert_int_equal(fa_no_plan_refusals, before + 1);
}

/* The case runs on the wgmma piece (its plan says so), and passes. */
static void check(const fa_case *c)
{
    const fcl_attention_desc d = case_desc(c);
    fcl_plan plan;
    fa_result r;
    if (wgmma_refused) {
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_ERROR_NO_PLAN);
        check_refused(c, 0);
        return;
    }
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
    assert_non_null(strstr(plan.variant, "wgmma"));
    assert_true(fa_check_forward(ctx, c, &r));
}

/* Asked for (by default on a real sm_90 device alone), and only where the
 * piece applies: the many-row forward of fp16/bf16 at head_dim 64 and
 * 128; decode plans, other head dims and fp32 keep their pieces, and the
 * backward's kernels follow their own ask. */
static void test_selection(void **state)
{
    (void)state;
    if (wgmma_refused) {
        /* refused, not another piece in its place; the other pieces'
         * plans on such a device are test_tensor_cores' */
        assert_string_equal(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP16), "");
        assert_string_equal(plan_variant(FCL_KERNEL_FORWARD, 65, 128, FCL_DTYPE_BF16), "");
        assert_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP32), "mma"));
        assert_string_equal(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP8_E4M3), "");
        return;
    }
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP16), "wgmma"));
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 65, 128, FCL_DTYPE_BF16), "wgmma"));
    /* FP8 storage too (fp16 tiles: widened first, or decoded on chip) */
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP8_E4M3), "wgmma"));
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 128, FCL_DTYPE_FP8_E5M2), "wgmma"));
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 32, FCL_DTYPE_FP16), "mma-sync"));
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 16, 64, FCL_DTYPE_FP16), "mma-sync"));
    /* the forward's ask leaves the backward's kernels to their own */
    assert_int_equal(fcl_debug_use_wgmma_backward(ctx, -1), FCL_OK);
    assert_non_null(
        strstr(plan_variant(FCL_KERNEL_BACKWARD_DQ, 128, 64, FCL_DTYPE_FP16), "mma-sync"));
    assert_int_equal(fcl_debug_use_wgmma_backward(ctx, 0), FCL_OK);
    assert_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP32), "mma"));
    /* turned off by the hook: the mma.sync piece, whatever the environment says */
    assert_int_equal(fcl_debug_use_wgmma(ctx, -1), FCL_OK);
    assert_non_null(strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 128, FCL_DTYPE_FP16), "mma-sync"));
    assert_int_equal(fcl_debug_use_wgmma(ctx, 2), FCL_ERROR_INVALID_VALUE);
    /* unasked: on a real sm_90 device only, at head_dim 64 and 128 */
    assert_int_equal(fcl_debug_use_wgmma(ctx, 0), FCL_OK);
    char off64[32], off128[32];
    snprintf(off64, sizeof off64, "%s", plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP16));
    snprintf(off128, sizeof off128, "%s",
             plan_variant(FCL_KERNEL_FORWARD, 128, 128, FCL_DTYPE_FP16));
    char off_fp8[32];
    snprintf(off_fp8, sizeof off_fp8, "%s",
             plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP8_E4M3));
    assert_int_equal(fcl_debug_use_wgmma(ctx, 1), FCL_OK);
    fcl_device_info info;
    assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
    const int sm90 = info.vendor_id == FCL_VENDOR_ID_NVIDIA && info.nv_compute_capability == 90;
    if (getenv("FLASHCL_WGMMA") == NULL) {
        /* FP8 storage too (run 41) */
        if (sm90) {
            assert_string_equal(off64, "nvidia-wgmma");
            assert_string_equal(off128, "nvidia-wgmma");
            assert_string_equal(off_fp8, "nvidia-wgmma");
        } else {
            assert_null(strstr(off64, "wgmma"));
            assert_null(strstr(off128, "wgmma"));
            assert_null(strstr(off_fp8, "wgmma"));
        }
    }
}

/* Case i of 5 for a default tile: both head dims and storage types, odd
 * lengths (edge tiles of keys and rows), causal or not; the last at head_dim
 * 64 with more keys than the tile for few keys takes (the tile for many). */
static fa_case default_tile_case(uint64_t seed, int i)
{
    fa_case c = base_case(seed + (uint64_t)i);
    c.head_dim = i < 2 || i == 4 ? 64 : 128;
    c.dtype = i % 2 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
    c.causal = i == 1 || i == 2;
    c.seqlen_k = i == 3 ? 200 : i == 4 ? 1100 : 83;
    if (i == 4)
        c.seqlen_q = 70;
    return c;
}

/* The forward's default tile at head_dim 64 (plan.h,
 * fcl_variants_wgmma_tile): for few keys (one warpgroup, 64 keys), for many
 * (two warpgroups, 256 keys: without a mask, or past 8192 keys under a
 * causal mask with no left window) or the default (two, 128 keys); the
 * plan's reason names the first two. */
typedef enum { TILE_DEFAULT, TILE_FEW_KEYS, TILE_MANY_KEYS } tile_kind;

static tile_kind expected_tile(size_t head_dim, size_t seqlen_k, int causal)
{
    if (head_dim != 64)
        return TILE_DEFAULT;
    if (seqlen_k <= (causal ? 4096u : 1024u))
        return TILE_FEW_KEYS;
    return causal && seqlen_k <= 8192u ? TILE_DEFAULT : TILE_MANY_KEYS;
}

/* A forward plan has the tile `kind`, or what the device's limits shrink
 * it to (the reason still names it). */
static void assert_tile(const fcl_plan *plan, tile_kind kind)
{
    assert_int_equal(strstr(plan->reason, "tile for few keys") != NULL, kind == TILE_FEW_KEYS);
    assert_int_equal(strstr(plan->reason, "tile for many keys") != NULL, kind == TILE_MANY_KEYS);
    if (kind == TILE_FEW_KEYS) {
        assert_int_equal(plan->br, 64);
        assert_int_equal(plan->bc, 64);
    } else {
        assert_true(plan->br <= 128 && plan->bc <= (kind == TILE_MANY_KEYS ? 256u : 128u));
    }
}

/* The default tiles: each case's plan says which it runs, and its result
 * passes. */
static void test_default_tile(void **state)
{
    (void)state;
    for (int i = 0; i < 5; ++i) {
        const fa_case c = default_tile_case(9100, i);
        check(&c);
        if (wgmma_refused)
            continue;
        const fcl_attention_desc d = case_desc(&c);
        fcl_plan plan;
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
        assert_tile(&plan, expected_tile(c.head_dim, c.seqlen_k, c.causal));
    }
}

/* The tiles' boundaries: few keys up to 1024 keys, 4096 under a causal
 * mask (also as window_right = 0), at head_dim 64 alone; many keys past
 * 1024 without a mask, not with a window; the query rows move neither. */
static void test_tile_boundaries(void **state)
{
    (void)state;
    if (wgmma_refused)
        skip();
    const size_t keys[7] = {64, 1024, 1025, 4096, 4097, 8192, 8193}, dims[2] = {64, 128};
    for (int i = 0; i < 7; ++i)
        for (int j = 0; j < 2; ++j)
            for (int mask = 0; mask < 5; ++mask) {
                fcl_attention_desc d;
                fcl_attention_desc_init(&d, 1, 2, 2, 4096, keys[i], dims[j], FCL_DTYPE_BF16,
                                        FCL_LAYOUT_BSHD);
                d.causal = mask == 1;
                if (mask == 2)
                    d.window_right = 0; /* causal by its window */
                if (mask >= 3)
                    d.window_left = 512; /* a window: not many keys' tile */
                if (mask == 4)
                    d.window_right = 0; /* causal, but a left window */
                fcl_plan plan;
                assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
                tile_kind want = expected_tile(dims[j], keys[i], mask == 1 || mask == 2 || mask == 4);
                if (mask >= 3 && want == TILE_MANY_KEYS)
                    want = TILE_DEFAULT;
                assert_tile(&plan, want);
            }
}

/* One warpgroup and 64 keys a tile, or two and 192 (three 64-key
 * wgmma blocks), or two and 256 under a causal mask (the tile for many
 * keys, which long causal calls take): GQA, BHSD, more keys than rows. */
static void test_forced_tiles(void **state)
{
    (void)state;
    const int tiles[3][3] = {{64, 64, 4}, {128, 192, 8}, {128, 256, 8}};
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, tiles[i][0], tiles[i][1],
                                            tiles[i][2], 32),
                         FCL_OK);
        fcl_plan plan;
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, 1, 2, 2, 128, 96, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
        const fcl_status q = fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan);
        assert_int_equal(q, wgmma_refused ? FCL_ERROR_NO_PLAN : FCL_OK);
        if (q == FCL_OK) {
            assert_int_equal(plan.br, tiles[i][0]);
            assert_int_equal(plan.bc, tiles[i][1]);
        }
        fa_case c = base_case(9200 + (uint64_t)i);
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seqlen_q = 100;
        c.seqlen_k = 230;
        c.head_dim = i == 0 ? 128 : 64;
        c.layout = FCL_LAYOUT_BHSD;
        c.causal = i >= 1;
        if (i == 2) { /* two Q blocks, the diagonal across both key tiles */
            c.seqlen_q = 200;
            c.seqlen_k = 300;
        }
        check(&c);
    }
}

/* A sliding window with softcap: scores modified, tiles skipped, edge
 * tiles masked. */
static fa_variants window_softcap(void)
{
    fa_variants v = fa_no_variants();
    v.window_left = 40;
    v.window_right = 3;
    v.softcap = 5.0f;
    return v;
}

/* The loop's variants go through the piece's registers as on mma.sync. */
static void test_variants(void **state)
{
    (void)state;
    const fa_variants v = window_softcap();
    fa_case c = base_case(9300);
    c.var = &v;
    check(&c);
}

/* Non-finite V values reach exactly the rows that see their keys: the
 * pipelined loop guards a tile's V a tile late, when its P V starts
 * (tile_nv_wgmma.cl), with that tile's keys and mask.  200 keys: two
 * tiles of 128, the spots in both, causal and a sliding window (edge
 * tiles, where the guard scans). */
static void test_nonfinite_v(void **state)
{
    (void)state;
    if (wgmma_refused) {
        print_message("no wgmma plan on this device: nothing to run\n");
        return;
    }
    /* the third: causal over three key tiles (a guard's zeroes of one V
     * tile, then that buffer refilled two tiles later) */
    for (int i = 0; i < 3; ++i) {
        const int mask = i == 1, three = i == 2;
        const size_t n = three ? 300 : 200;
        nf_case c = {2, 1, n, n, 64, FCL_DTYPE_FP16, mask == 0, mask ? 40 : -1, mask ? 9 : -1,
                     0, 0, 0,
                     {{NF_V, 0, 133, 0, INFINITY}, {NF_V, 0, 72, 5, -INFINITY},
                      {NF_V, 0, 93, 2, NAN}, {NF_V, 0, three ? 260 : 150, 7, NAN}},
                     9400 + (uint64_t)i};
        fcl_attention_desc d;
        fcl_plan plan;
        fcl_attention_desc_init(&d, 1, 2, 1, 200, 200, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
        assert_non_null(strstr(plan.variant, "wgmma"));
        assert_true(nf_check(ctx, &c));
    }
}

/* K and V come by the tensor memory accelerator where it is there (the
 * emulation, or an sm_90 device whose driver encodes a tensor map) and
 * FLASHCL_WGMMA_TMA=0 is not set, by cp.async otherwise: both loads pass
 * at both head dims, with keys past the end of the sequence (the
 * accelerator's zeros) and causal edge tiles. */
static void test_loads(void **state)
{
    (void)state;
    if (wgmma_refused) {
        print_message("no wgmma plan on this device: nothing to run\n");
        return;
    }
    fcl_device_info info;
    assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
    for (int off = 0; off < 2; ++off) {
        if (off)
            assert_int_equal(setenv("FLASHCL_WGMMA_TMA", "0", 1), 0);
        fcl_attention_desc d;
        fcl_plan plan;
        fcl_attention_desc_init(&d, 1, 2, 2, 130, 83, 128, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
        const bool tma = strstr(plan.reason, "tensor memory accelerator") != NULL;
        if (off)
            assert_non_null(strstr(plan.reason, "by cp.async"));
        else if (strstr(plan.variant, "emulated") != NULL)
            assert_true(tma);
        print_message("K and V by %s\n", tma ? "the tensor memory accelerator" : "cp.async");
        for (int i = 0; i < 2; ++i) {
            fa_case c = base_case(9500 + (uint64_t)(2 * off + i));
            c.head_dim = i ? 128 : 64;
            c.causal = i == 0;
            c.seqlen_k = i ? 83 : 291;
            check(&c);
        }
        if (off)
            assert_int_equal(unsetenv("FLASHCL_WGMMA_TMA"), 0);
    }
}

/* The wgmma pieces visit heads in groups of 8 (common.cl, FCL_HEAD_GROUP):
 * a call of two batch entries of 10 query heads over 5 K/V heads has 20
 * (batch, query head) pairs, so two whole groups and a partial third; causal,
 * so each group starts from its heaviest blocks.  Every block must still be
 * visited once. */
static fa_case head_groups_case(uint64_t seed)
{
    fa_case c = base_case(seed);
    c.batch = 2;
    c.heads_q = 10;
    c.heads_kv = 5;
    c.seqlen_q = 200;
    c.seqlen_k = 190;
    c.causal = 1;
    return c;
}

static void test_head_groups(void **state)
{
    (void)state;
    fa_case c = head_groups_case(9960);
    check(&c);
}

/* The accelerator path's measurement switches (tile_nv_wgmma.cl; NOTES.md,
 * run 49), built in through the build options: three K and V buffers
 * with copies requested two tiles ahead (FCL_WG_STAGES=3) and the
 * warpgroups' turns (FCL_WG_PINGPONG=1, no turns in the emulation, where
 * this checks that it builds).  Key ranges of 1, 2, 3 and 6 tiles (the
 * prologue's requests with and without a second and third tile, and the
 * ring's wrap), causal, a sliding window and a block mask (tiles skipped,
 * so the tile two ahead is not always two tiles on), both head dims. */
static void test_ring_switches(void **state)
{
    (void)state;
    if (wgmma_refused) {
        print_message("no wgmma plan on this device: nothing to run\n");
        return;
    }
    assert_int_equal(fcl_debug_set_build_options(ctx, "-DFCL_WG_STAGES=3 -DFCL_WG_PINGPONG=1"),
                     FCL_OK);
    fa_variants window = fa_no_variants(), sparse = fa_no_variants();
    window.window_left = 150;
    window.window_right = 20;
    sparse.block_m = 64;
    sparse.block_n = 128;
    sparse.block_density = 0.5;
    const size_t keys[4] = {100, 200, 300, 700};
    for (int i = 0; i < 6; ++i) {
        fa_case c = base_case(9700 + (uint64_t)i);
        c.seqlen_q = 130;
        c.seqlen_k = keys[i % 4];
        c.head_dim = i % 2 ? 128 : 64;
        c.causal = i == 2;
        if (i == 4)
            c.var = &window;
        if (i == 5) {
            c.seqlen_q = 300;
            c.var = &sparse;
        }
        check(&c);
    }
}

static int clear_build_options(void **state)
{
    return fcl_debug_set_build_options(ctx, "") == FCL_OK ? clear_forced_tile(state) : -1;
}

/* FP8 storage (the forward only), Q decoded as it is loaded, on both of
 * the piece's paths: by default (the emulation has the tensor memory
 * accelerator) K and V widened to fp16 in the workspace by the call's first
 * launch and brought in by the accelerator; with FLASHCL_WGMMA_TMA=0 their
 * bytes staged by cp.async and decoded by the warps.  The products are
 * fp16's either way.  Both formats, every output type, descales on and off,
 * causal, GQA, BHSD, both head dims, larger scores (a peakier softmax),
 * packed sequences (the widened copy's one batch entry of total_k rows),
 * a narrower V (head_dim_v: the copy's own row width) and a negative
 * scale (Q negated by a plain load, not staged).  Tolerance: test_support.h's
 * FP8 inputs, P rounded to fp16 as on mma.sync (p_fp16). */
static void test_fp8(void **state)
{
    (void)state;
    const fcl_dtype formats[2] = {FCL_DTYPE_FP8_E4M3, FCL_DTYPE_FP8_E5M2};
    const fcl_dtype outs[3] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};
    static const int packed_q[3] = {130, 70, 1}, packed_k[3] = {300, 9, 190};
    for (int staged = 0; staged < 2; ++staged) {
        if (staged)
            assert_int_equal(setenv("FLASHCL_WGMMA_TMA", "0", 1), 0);
        for (int i = 0; i < 5; ++i) {
            fa_variants v = fa_no_variants();
            v.out_dtype = outs[i % 3];
            v.descales = i != 1;
            v.p_fp16 = 1;
            fa_case c = base_case(9500 + (uint64_t)(10 * staged + i));
            c.dtype = formats[(i + staged) % 2];
            c.heads_q = 4;
            c.head_dim = i == 2 || i == 4 ? 128 : 64;
            c.causal = i == 1 || i == 3;
            c.layout = i == 2 ? FCL_LAYOUT_BHSD : FCL_LAYOUT_BSHD;
            c.input_scale[1] = i == 0 ? 1.0 : 8.0;
            /* three key tiles or more, the last one partial: K and V
             * staged across tiles (tile_nv_wgmma.cl) */
            c.seqlen_k = 300;
            if (i == 3) {
                c.batch = 3;
                v.seqlens_q = packed_q;
                v.seqlens_k = packed_k;
            }
            if (i == 4) {
                v.head_dim_v = 64;
                c.scale = -0.08f; /* Q negated as it is loaded, not staged */
            }
            c.var = &v;
            if (!wgmma_refused) {
                const fcl_attention_desc d = case_desc(&c);
                fcl_plan plan;
                assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
                const bool emulated = strstr(plan.variant, "emulated") != NULL;
                if (staged) {
                    assert_non_null(strstr(plan.reason, "FP8 bytes, decoded to fp16"));
                    assert_non_null(strstr(plan.reason, "brought in by cp.async"));
                } else if (emulated) {
                    assert_non_null(strstr(plan.reason, "widened to fp16 in the workspace"));
                }
            }
            check(&c);
        }
        if (staged)
            assert_int_equal(unsetenv("FLASHCL_WGMMA_TMA"), 0);
    }
}

/* FP8 products (FLASHCL_FP8_PRODUCTS=1; cl/tile_nv_wgmma_fp8.cl): E4M3 at
 * head_dim 128, Q K^T and P V on E4M3 wgmma from tiles the call's first
 * launch lays out (V^T with its keys permuted).  Held to the header's
 * bound (test_support.h, fp8_products), not to fp16's products.  Peaked
 * softmaxes (K times 8: a key's value misplaced within its 16 or its
 * tile shows), three key tiles the last one partial, two Q blocks the
 * second partial, causal, GQA, BHSD, descales, every output type, a
 * negative scale (Q's bytes negated on chip), a narrower V, split-KV
 * chunks, sinks, and a short sequence (one partial tile of each) with a
 * softcap.  Not with dropout, nor at head_dim 64. */
static void test_fp8_products(void **state)
{
    (void)state;
    const fcl_dtype outs[3] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};
    assert_int_equal(setenv("FLASHCL_FP8_PRODUCTS", "1", 1), 0);
    for (int i = 0; i < 7; ++i) {
        fa_variants v = fa_no_variants();
        v.out_dtype = outs[i % 3];
        v.descales = i != 1;
        v.fp8_products = 1;
        fa_case c = base_case(9800 + (uint64_t)i);
        c.dtype = FCL_DTYPE_FP8_E4M3;
        c.heads_q = 4;
        c.heads_kv = i == 3 ? 1 : 2;
        c.head_dim = 128;
        c.seqlen_k = 300;
        c.causal = i == 1 || i == 3;
        c.layout = i == 2 ? FCL_LAYOUT_BHSD : FCL_LAYOUT_BSHD;
        c.input_scale[1] = i == 0 ? 1.0 : 8.0;
        if (i == 4) {
            v.head_dim_v = 64;
            c.scale = -0.06f; /* Q's bytes negated on chip */
        }
        if (i == 5)
            v.num_splits = 2;
        if (i == 3)
            v.sinks = 1;
        if (i == 6) {
            c.seqlen_q = 70;
            c.seqlen_k = 41;
            v.softcap = 20.0f;
        }
        c.var = &v;
        if (!wgmma_refused) {
            const fcl_attention_desc d = case_desc(&c);
            fcl_plan plan;
            assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
            assert_non_null(strstr(plan.reason, "FP8 products"));
            /* how near the bound the device comes (NOTES.md) */
            fa_result r;
            assert_true(fa_check_forward(ctx, &c, &r));
            print_message("fp8 products case %d: worst %s error %.3g, tolerance %.3g (bound "
                          "%.3g)\n", i, r.worst, r.err, r.tol, r.err_lowp);
        } else {
            check(&c);
        }
    }
    /* not with dropout, nor at head_dim 64: the widened path's plan */
    if (!wgmma_refused) {
        fcl_attention_desc d;
        fcl_plan plan;
        fcl_attention_desc_init(&d, 1, 2, 2, 130, 300, 128, FCL_DTYPE_FP8_E4M3, FCL_LAYOUT_BSHD);
        d.dropout_p = 0.1f;
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
        assert_null(strstr(plan.reason, "FP8 products"));
        fcl_attention_desc_init(&d, 1, 2, 2, 130, 300, 64, FCL_DTYPE_FP8_E4M3, FCL_LAYOUT_BSHD);
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
        assert_null(strstr(plan.reason, "FP8 products"));
    }
    assert_int_equal(unsetenv("FLASHCL_FP8_PRODUCTS"), 0);
}

/* FP8 products' guard of non-finite V (E4M3's NaN bytes) in the edge
 * tiles (tile_nv_wgmma_fp8.cl: V^T's bytes, a key's column through the
 * permutation): a NaN reaches exactly the rows that see its key.  300 keys
 * (three tiles), NaNs in V in two tiles, causal and a sliding window. */
static void test_fp8_products_nonfinite(void **state)
{
    (void)state;
    if (wgmma_refused) {
        print_message("no wgmma plan on this device: nothing to run\n");
        return;
    }
    assert_int_equal(setenv("FLASHCL_FP8_PRODUCTS", "1", 1), 0);
    for (int i = 0; i < 2; ++i) {
        const int window = i == 1;
        nf_case c = {2, 1, 300, 300, 128, FCL_DTYPE_FP8_E4M3, !window, window ? 40 : -1,
                     window ? 9 : -1, 0, 0, 0,
                     {{NF_V, 0, 133, 0, NAN}, {NF_V, 0, 72, 5, NAN}, {NF_V, 0, 93, 2, NAN},
                      {NF_V, 0, 260, 127, NAN}},
                     9900 + (uint64_t)i};
        fcl_attention_desc d;
        fcl_plan plan;
        fcl_attention_desc_init(&d, 1, 2, 1, 300, 300, 128, FCL_DTYPE_FP8_E4M3, FCL_LAYOUT_BSHD);
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
        assert_non_null(strstr(plan.reason, "FP8 products"));
        nf_fp8_products = 1;
        const int ok = nf_check(ctx, &c);
        nf_fp8_products = 0;
        assert_true(ok);
    }
    assert_int_equal(unsetenv("FLASHCL_FP8_PRODUCTS"), 0);
}

/* A caller's out-of-order queue: FP8's widening launch, the forward that
 * reads its copies and the next call's widening into the same workspace
 * must be chained by events (forward.c).  Two rounds of two FP8 cases
 * (the second round reuses the workspace, the second case grows it).
 * PoCL runs such a queue's commands in order, so there this checks the
 * events' path (the forward not waiting for its widening still passed
 * there); a device that overlaps the commands checks the chaining. */
static void test_fp8_out_of_order_queue(void **state)
{
    (void)state;
    if (wgmma_refused) {
        print_message("no wgmma plan on this device: nothing to run\n");
        return;
    }
    cl_command_queue q = NULL;
    fcl_context *ooo = NULL;
    const int made = test_out_of_order_context(ctx, &q, &ooo);
    assert_true(made >= 0);
    if (made == 0)
        return;
    assert_int_equal(fcl_debug_use_wgmma(ooo, 1), FCL_OK);
    if (strstr(plan_variant(FCL_KERNEL_FORWARD, 128, 64, FCL_DTYPE_FP16), "emulated") != NULL)
        assert_int_equal(fcl_debug_emulate_tensor_cores(ooo, 1), FCL_OK);
    fa_variants v = fa_no_variants();
    v.out_dtype = FCL_DTYPE_FP16;
    v.descales = 1;
    v.p_fp16 = 1;
    int failures = 0;
    for (int round = 0; round < 2; ++round)
        for (int i = 0; i < 2; ++i) {
            fa_case c = base_case(9800 + (uint64_t)(2 * round + i));
            c.dtype = FCL_DTYPE_FP8_E4M3;
            c.seqlen_k = i ? 300 : 150;
            c.head_dim = i ? 128 : 64;
            c.causal = i;
            c.var = &v;
            const fcl_attention_desc d = case_desc(&c);
            fcl_plan plan;
            assert_int_equal(fcl_plan_query(ooo, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
            assert_non_null(strstr(plan.variant, "wgmma"));
            fa_result r;
            failures += !fa_check_forward(ooo, &c, &r);
        }
    fcl_context_destroy(ooo);
    clReleaseCommandQueue(q);
    assert_int_equal(failures, 0);
}

/* Under lowered limits (a build that reported more local memory than
 * planned) the plan shrinks in whole wgmma blocks of 64 keys, then to one
 * warpgroup, and every plan it gives fits the limit; a forced 192-key tile
 * once halved to 96, which the kernel refuses to build (rusticl). */
static void test_shrink(void **state)
{
    (void)state;
    const fcl_tuned_tile forced = {128, 192, 8, 32, "test", 1};
    for (int i = 0; i < 4; ++i) {
        const int tma = i >> 1; /* with the tensor memory accelerator's 276 bytes */
        for (uint64_t kib = 8; kib <= 160; kib += 4) {
            const fcl_plan_limits limits = {kib * 1024, 1024};
            fcl_plan_full f;
            const fcl_status st = fcl_plan_make_wgmma(&ctx->caps, FCL_KERNEL_FORWARD, 64,
                                                      FCL_DTYPE_FP16, &limits,
                                                      i & 1 ? &forced : NULL, 0,
                                                      tma ? FCL_BUILD_WG_TMA : 0, &f);
            uint64_t local; /* the limit, or the device's own where smaller */
            size_t wg;
            fcl_plan_effective_limits(&ctx->caps, &limits, &local, &wg);
            if (st == FCL_ERROR_NO_PLAN) {
                /* not even 64 x 64 */
                assert_true(local < (64 + 4 * 64) * 64 * 2 + 4 + (tma ? 276u : 0u) || wg < 128);
                continue;
            }
            assert_int_equal(st, FCL_OK);
            assert_true(f.pub.bc % 64 == 0 && f.pub.br % 64 == 0);
            assert_true(f.pub.local_bytes <= local);
            assert_int_equal(f.pub.work_group_size, 2 * f.pub.br);
        }
    }
}

/* ---- the backward ------------------------------------------------------------ */

/* The backward's plans under lowered limits, from their defaults at both
 * head dims: every plan fits the limit, in whole wgmma blocks (warpgroups
 * of 64 keys for dK/dV, of 64 rows for dQ, 128 work-items each; 64 or 128
 * on the other side), and only a limit below the smallest tile (one
 * warpgroup, 64 on the other side) has none; with room, the defaults. */
static void test_backward_shrink(void **state)
{
    (void)state;
    for (int i = 0; i < 6; ++i) {
        const bool dkdv = i < 2 || i >= 4, fused = i >= 4; /* 4, 5: with the fused dQ */
        const fcl_kernel_kind kind = dkdv ? FCL_KERNEL_BACKWARD_DKDV : FCL_KERNEL_BACKWARD_DQ;
        const uint64_t d = i % 2 ? 128 : 64;
        /* plan_wgmma.c's count of the smallest tile (the fused dQ's dS^T and
         * fp32 share beside) */
        const uint64_t smallest = (2 * 64 + 4 * 64) * d * 2 + (dkdv ? 16 * 64 + 12 : 4) +
                                  (fused ? 64 * 64 * 2 + 64 * (d + 4) * 4 : 0);
        for (uint64_t kib = 8; kib <= 232; kib += 4) {
            const fcl_plan_limits limits = {kib * 1024, 1024};
            fcl_plan_full f;
            const fcl_status st = fcl_plan_make_wgmma(&ctx->caps, kind, d, FCL_DTYPE_BF16,
                                                      &limits, NULL, 0,
                                                      fused ? FCL_BUILD_FUSED_DQ : 0, &f);
            uint64_t local;
            size_t wg;
            fcl_plan_effective_limits(&ctx->caps, &limits, &local, &wg);
            if (st == FCL_ERROR_NO_PLAN) {
                assert_true(local < smallest || wg < 128);
                continue;
            }
            assert_int_equal(st, FCL_OK);
            const size_t m = dkdv ? f.pub.bc : f.pub.br, inner = dkdv ? f.pub.br : f.pub.bc;
            assert_true(m % 64 == 0 && m <= 128 && (inner == 64 || inner == 128));
            assert_int_equal(f.pub.work_group_size, 2 * m);
            assert_true(f.pub.local_bytes <= local);
            assert_true(f.pub.local_bytes >= smallest);
            /* the fused share splits over the warpgroups (tile_nv_wgmma.cl):
             * whole 64-row blocks of query rows, or 64 columns or more each */
            if (fused)
                assert_true(inner / 64 >= m / 64 || d / (m / 64) >= 64);
            if (kib == 232 && local >= 200 * 1024) { /* room for every default */
                assert_int_equal(f.pub.br, dkdv ? (d == 64 ? 128 : 64) : (d == 64 ? 64 : 128));
                assert_int_equal(f.pub.bc, dkdv || d == 128 ? 128 : 64);
            }
        }
    }
}

/* The backward's case runs both kernels, dK/dV and dQ, on the wgmma piece
 * (their plans say so) and passes: dQ, dK, dV against the references. */
static void check_backward(const fa_case *c)
{
    const fcl_attention_desc d = case_desc(c);
    fcl_plan plan;
    fa_result r;
    if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) == FCL_ERROR_NO_PLAN) {
        check_refused(c, 1); /* a device too small for the emulated tile */
        return;
    }
    assert_non_null(strstr(plan.variant, "wgmma"));
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &plan), FCL_OK);
    assert_non_null(strstr(plan.variant, "wgmma"));
    assert_true(fa_check_backward(ctx, c, &r));
}

static int backward_on(void **state)
{
    (void)state;
    return fcl_debug_use_wgmma_backward(ctx, 1) == FCL_OK ? 0 : -1;
}

static int backward_off(void **state)
{
    (void)state;
    return fcl_debug_use_wgmma_backward(ctx, 0) == FCL_OK &&
                   fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 0, 0, 0, 0) == FCL_OK &&
                   fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DQ, 0, 0, 0, 0) == FCL_OK
               ? 0
               : -1;
}

/* Asked for (by default on a real sm_90 device alone), and only at
 * head_dim 64 and 128 in fp16/bf16, both kernels. */
static void test_backward_selection(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_plan plan;
    fcl_attention_desc_init(&d, 1, 2, 2, 128, 96, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) == FCL_ERROR_NO_PLAN) {
        print_message("the smallest dK/dV wgmma tile has no plan on this device\n");
        return;
    }
    assert_non_null(strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 128, 64, FCL_DTYPE_FP16),
                           "wgmma"));
    assert_non_null(strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 128, 128, FCL_DTYPE_BF16),
                           "wgmma"));
    assert_non_null(strstr(plan_variant(FCL_KERNEL_BACKWARD_DQ, 128, 128, FCL_DTYPE_FP16),
                           "wgmma"));
    assert_null(strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 128, 32, FCL_DTYPE_FP16), "wgmma"));
    assert_null(strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 128, 64, FCL_DTYPE_FP32), "mma"));
    /* turned off by the hook: the mma.sync piece, whatever the environment says */
    assert_int_equal(fcl_debug_use_wgmma_backward(ctx, -1), FCL_OK);
    assert_non_null(
        strstr(plan_variant(FCL_KERNEL_BACKWARD_DKDV, 128, 64, FCL_DTYPE_FP16), "mma-sync"));
    assert_non_null(
        strstr(plan_variant(FCL_KERNEL_BACKWARD_DQ, 128, 64, FCL_DTYPE_BF16), "mma-sync"));
    /* unasked: the default on a real sm_90 device alone */
    assert_int_equal(fcl_debug_use_wgmma_backward(ctx, 0), FCL_OK);
    if (getenv("FLASHCL_WGMMA_BACKWARD") == NULL) {
        fcl_device_info info;
        assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
        const int sm90 = info.vendor_id == FCL_VENDOR_ID_NVIDIA && info.nv_compute_capability == 90;
        for (int k = 0; k < 2; ++k) {
            const char *unasked = plan_variant(k ? FCL_KERNEL_BACKWARD_DQ : FCL_KERNEL_BACKWARD_DKDV,
                                               128, 128, FCL_DTYPE_FP16);
            if (sm90)
                assert_string_equal(unasked, "nvidia-wgmma");
            else
                assert_null(strstr(unasked, "wgmma"));
        }
    }
    assert_int_equal(fcl_debug_use_wgmma_backward(ctx, 1), FCL_OK);
}

/* The default tiles (plan_wgmma.c: dK/dV two warpgroups of keys, 64 query
 * rows a step at head_dim 128 and 128 at 64; dQ 64 keys a step, two
 * warpgroups of rows at head_dim 128 and one at 64) at both head dims and
 * storage types: edge blocks of keys and rows, causal, GQA (the query
 * heads of a K/V head summed in one work-group), BHSD. */
static void test_backward_default_tile(void **state)
{
    (void)state;
    for (int i = 0; i < 4; ++i) {
        fa_case c = default_tile_case(9600, i);
        c.seqlen_q = i == 3 ? 70 : 130;
        if (i == 2) {
            c.heads_q = 4;
            c.layout = FCL_LAYOUT_BHSD;
        }
        check_backward(&c);
    }
}

/* dK/dV: one warpgroup (64 keys) with 64 query rows, and two with 128
 * query rows (wgmma's N 128 for S^T and dP^T); dQ: one warpgroup (64
 * rows) with 64 keys, and two with 128 keys (N 128 for S and dP).  Then
 * head_dim 128's defaults for many query rows: dK/dV two warpgroups with 64
 * query rows, dQ two with 64 keys. */
static void test_backward_forced_tiles(void **state)
{
    (void)state;
    /* rows, keys, warps: dK/dV's, then dQ's */
    const int tiles[3][2][3] = {{{64, 64, 4}, {64, 64, 4}},
                                {{128, 128, 8}, {128, 128, 8}},
                                {{64, 128, 8}, {128, 64, 8}}};
    for (int i = 0; i < 3; ++i) {
        for (int k = 0; k < 2; ++k)
            assert_int_equal(fcl_debug_set_tile(ctx,
                                                k ? FCL_KERNEL_BACKWARD_DQ
                                                  : FCL_KERNEL_BACKWARD_DKDV,
                                                tiles[i][k][0], tiles[i][k][1], tiles[i][k][2],
                                                32),
                             FCL_OK);
        fcl_plan plan;
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, 1, 2, 2, 128, 96, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
        for (int k = 0; k < 2; ++k) {
            const fcl_status q = fcl_plan_query(
                ctx, &d, k ? FCL_KERNEL_BACKWARD_DQ : FCL_KERNEL_BACKWARD_DKDV, &plan);
            if (q == FCL_OK) {
                assert_int_equal(plan.br, tiles[i][k][0]);
                assert_int_equal(plan.bc, tiles[i][k][1]);
            } else {
                assert_int_equal(q, FCL_ERROR_NO_PLAN);
            }
        }
        fa_case c = base_case(9700 + (uint64_t)i);
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seqlen_q = 150;
        c.seqlen_k = 100;
        c.head_dim = i == 1 ? 64 : 128;
        c.causal = i == 1;
        check_backward(&c);
    }
}

/* dK/dV at head_dim 128 takes one warpgroup up to 4096 query rows a key
 * block visits (half of seqlen_q, rounded up, under a causal mask, also as
 * window_right = 0), two past them; head_dim 64 keeps its default.  dQ at
 * head_dim 64 takes two warpgroups past 4096 keys with no mask and no
 * window (a window of 100 keys to the left, or a causal mask, keeps one). */
static void test_backward_tile_boundaries(void **state)
{
    (void)state;
    const size_t rows[4] = {4096, 4097, 8192, 8193}, dims[2] = {64, 128};
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j)
            for (int mask = 0; mask < 3; ++mask) {
                fcl_attention_desc d;
                fcl_attention_desc_init(&d, 1, 2, 2, rows[i], 512, dims[j], FCL_DTYPE_FP16,
                                        FCL_LAYOUT_BSHD);
                d.causal = mask == 1;
                if (mask == 2)
                    d.window_right = 0;
                fcl_plan plan;
                if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) != FCL_OK ||
                    strstr(plan.variant, "wgmma") == NULL)
                    skip(); /* no wgmma dK/dV plan on this device */
                const size_t visited = mask ? (rows[i] + 1) / 2 : rows[i];
                const bool few = dims[j] == 128 && visited <= 4096;
                assert_int_equal(strstr(plan.reason, "few query rows") != NULL, few);
                if (few)
                    assert_int_equal(plan.bc, 64);
                else
                    assert_true(plan.bc <= 128);
            }
    const size_t keys[3] = {4096, 4097, 16384};
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
            for (int mask = 0; mask < 3; ++mask) {
                fcl_attention_desc d;
                fcl_attention_desc_init(&d, 1, 2, 2, 512, keys[i], dims[j], FCL_DTYPE_FP16,
                                        FCL_LAYOUT_BSHD);
                d.causal = mask == 1;
                if (mask == 2)
                    d.window_left = 100;
                fcl_plan plan;
                assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &plan), FCL_OK);
                const bool many = dims[j] == 64 && mask == 0 && keys[i] > 4096;
                assert_int_equal(strstr(plan.reason, "tile for many keys") != NULL, many);
                if (many)
                    assert_int_equal(plan.br, 128);
                else if (dims[j] == 64)
                    assert_int_equal(plan.br, 64);
            }
}

/* The backward's kernels in groups of 8 heads too (dK/dV: 10 (batch, K/V
 * head) pairs, dQ: 20; head_groups_case). */
static void test_backward_head_groups(void **state)
{
    (void)state;
    fa_case c = head_groups_case(9961);
    check_backward(&c);
}

/* The loop's variants reach the backward's registers as on mma.sync: a
 * sliding window with softcap, and dropout. */
static void test_backward_variants(void **state)
{
    (void)state;
    const fa_variants v = window_softcap();
    fa_case c = base_case(9800);
    c.var = &v;
    check_backward(&c);
    fa_variants w = fa_no_variants();
    w.dropout_p = 0.2f;
    w.dropout_seed = 77;
    fa_case e = base_case(9801);
    e.var = &w;
    e.head_dim = 128;
    check_backward(&e);
}

/* Non-finite Q and dO values reach exactly the dK and dV of the keys
 * that see their rows (the guards scan Q and dO tiles of BR rows, which
 * the swizzle lays out by their own row count), and non-finite K values
 * the dQ of the rows that see their keys (dQ's guard on K tiles). */
static void test_backward_nonfinite(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_plan plan;
    fcl_attention_desc_init(&d, 1, 2, 1, 150, 140, 128, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) != FCL_OK) {
        print_message("no dK/dV wgmma plan on this device: nothing to run\n");
        return;
    }
    assert_non_null(strstr(plan.variant, "wgmma"));
    for (int mask = 0; mask < 2; ++mask) {
        nf_case c = {2, 1, 150, 140, 128, FCL_DTYPE_FP16, mask == 0, mask ? 40 : -1, mask ? 9 : -1,
                     0, 0, 1,
                     {{NF_Q, 0, 133, 70, INFINITY}, {NF_DO, 1, 72, 5, -INFINITY},
                      {NF_K, 0, 93, 100, NAN}, {NF_DO, 0, 10, 127, NAN}},
                     9900 + (uint64_t)mask};
        assert_true(nf_check(ctx, &c));
    }
}

/* Calls with no edge tile (no mask, no window, seqlen_k a multiple of 256,
 * so every key tile is whole) build the wgmma kernels with their edge tests
 * compiled away (FCL_BUILD_WHOLE_TILES, common.cl's FCL_WHOLE_KEYS); masks,
 * windows and other lengths keep them.  Results against float64 at both
 * head dims, and non-finite inputs reaching the rows and keys they should
 * (with no score masked: all of them). */
static void test_whole_tiles(void **state)
{
    (void)state;
    const struct {
        size_t seqlen_k;
        int causal;
        long window_left;
        int whole;
    } cases[] = {{256, 0, -1, 1}, {1024, 0, -1, 1}, {2048, 0, -1, 1}, {320, 0, -1, 0},
                 {256, 1, -1, 0}, {256, 0, 100, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, 1, 2, 2, 130, cases[i].seqlen_k, 64, FCL_DTYPE_FP16,
                                FCL_LAYOUT_BSHD);
        d.causal = cases[i].causal;
        d.window_left = cases[i].window_left;
        unsigned bits[3];
        fa_build_bits(ctx, &d, bits);
        for (int k = 0; k < 3; ++k) {
            /* the forward's tile for many keys keeps its tests */
            const bool long_fwd = k == 0 && (bits[k] & FCL_BUILD_WG_LONG);
            assert_int_equal((bits[k] & FCL_BUILD_WHOLE_TILES) != 0,
                             (bits[k] & FCL_BUILD_TILE_MMA) != 0 && cases[i].whole && !long_fwd);
        }
        assert_true((bits[0] & FCL_BUILD_WGMMA) || wgmma_refused);
        if (bits[0] & FCL_BUILD_WGMMA) /* 2048 keys: the forward's tile for many keys */
            assert_int_equal((bits[0] & FCL_BUILD_WG_LONG) != 0, cases[i].seqlen_k == 2048);
    }
    for (int j = 0; j < 2; ++j) {
        fa_case c = base_case(9940 + (uint64_t)j);
        c.seqlen_k = 256;
        c.head_dim = j ? 128 : 64;
        check(&c);
        check_backward(&c);
    }
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 2, 1, 150, 256, 128, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    fcl_plan plan;
    if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) != FCL_OK) {
        print_message("no dK/dV wgmma plan on this device: no non-finite case to run\n");
        return;
    }
    nf_case n = {2, 1, 150, 256, 128, FCL_DTYPE_FP16, 0, -1, -1, 0, 0, 1,
                 {{NF_Q, 0, 133, 70, INFINITY}, {NF_DO, 1, 72, 5, -INFINITY},
                  {NF_K, 0, 93, 100, NAN}, {NF_V, 0, 255, 127, NAN}},
                 9950};
    assert_true(nf_check(ctx, &n));
}

/* The loops' two runs (common.cl, FCL_FOR_RUNS): the whole tiles apart
 * from the edge tiles, whose masking and guards only the edge run holds.
 * Each case puts the boundary between the runs elsewhere: a causal
 * diagonal right of the main one (more keys than queries) and left of it
 * (rows that see no key), a right window alone, a left window (no run of
 * whole tiles: every tile in the edge run), and GQA, whose dK/dV loop
 * visits each of two heads' edge blocks, then each one's whole blocks
 * (causal), or every block in one run (without a mask: every key block's
 * blocks whole but the last key block's, which reaches past seqlen_k).
 * Forward and backward against float64, at both head dims. */
static void test_split_runs(void **state)
{
    (void)state;
    const struct {
        size_t seqlen_q, seqlen_k, heads_q;
        int causal;
        long left, right;
    } cases[] = {{300, 520, 2, 1, -1, -1}, {520, 300, 2, 1, -1, -1}, {300, 300, 2, 0, -1, 37},
                 {300, 300, 2, 0, 150, 0},  {300, 300, 4, 1, -1, -1}, {200, 300, 4, 0, -1, -1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        fa_variants v = fa_no_variants();
        v.window_left = cases[i].left;
        v.window_right = cases[i].right;
        fa_case c = base_case(9990 + (uint64_t)i);
        c.seqlen_q = cases[i].seqlen_q;
        c.seqlen_k = cases[i].seqlen_k;
        c.heads_q = cases[i].heads_q;
        c.head_dim = i % 2 ? 128 : 64;
        c.causal = cases[i].causal;
        c.var = &v;
        check(&c);
        check_backward(&c);
    }
}

/* The fused dQ forms (FLASHCL_BACKWARD_DQ, README.md) on the wgmma piece:
 * the dK/dV kernel adds each key block's share dS K (mma.sync, K read from
 * its swizzled tile) into an fp32 buffer, in key-block order ("ordered",
 * bitwise repeatable) or in any order; both head dims and storage types,
 * causal, GQA, edge blocks, and a non-finite K element, whose edge tile
 * takes the exact per-element path (fcl_dq_exact, K's swizzled places). */
static void test_backward_fused_dq(void **state)
{
    (void)state;
    if (ctx->loop_limit != 0) {
        print_message("a device that ends long loops keeps the dQ kernel: nothing to run\n");
        return;
    }
    static const char *const forms[2] = {"ordered", "any-order"};
    for (int f = 0; f < 2; ++f) {
        assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", forms[f], 1), 0);
        fa_case c = default_tile_case(9960 + (uint64_t)(4 * f), f ? 2 : 1);
        c.heads_q = 4;
        fcl_attention_desc d = case_desc(&c);
        fcl_plan plan;
        if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) != FCL_OK) {
            check_backward(&c); /* refused, as the plan query says */
            continue;
        }
        /* the fused kernel's dS^T and fp32 share on chip */
        assert_true(fcl_backward_builds_of(ctx, &d, 0).fused_dq);
        check_backward(&c);
        nf_case n = {2, 1, 150, 140, f ? 64 : 128, FCL_DTYPE_FP16, f == 0, -1, -1, 0, 0, 1,
                     {{NF_K, 0, 93, 100 % (f ? 64 : 128), NAN}, {NF_K, 0, 139, 3, INFINITY},
                      {NF_Q, 0, 20, 7, NAN}, {NF_DO, 1, 72, 5, -INFINITY}},
                     9970 + (uint64_t)f};
        nf_dq_rounding = 1; /* nonfinite_support.h: the exact path's order */
        const int held = nf_check(ctx, &n);
        nf_dq_rounding = 0;
        assert_true(held);
    }
    /* forced tiles (query rows x keys, warps): two 64-row blocks for one
     * warpgroup at d 64 (N 64 twice), one block and all of d 128 for one
     * warpgroup (N 128); the defaults above split one block's columns
     * (d 128) or give each warpgroup a block (d 64) */
    assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", "ordered", 1), 0);
    const int tiles[2][4] = {{128, 64, 4, 64}, {64, 64, 4, 128}}; /* rows, keys, warps, d */
    for (int i = 0; i < 2; ++i) {
        assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, tiles[i][0],
                                            tiles[i][1], tiles[i][2], 32),
                         FCL_OK);
        fa_case c = base_case(9990 + (uint64_t)i);
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seqlen_q = 150;
        c.seqlen_k = 100;
        c.head_dim = (size_t)tiles[i][3];
        c.causal = i == 0;
        const fcl_attention_desc d = case_desc(&c);
        fcl_plan plan;
        const fcl_status q = fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan);
        if (q == FCL_OK) {
            assert_int_equal(plan.br, tiles[i][0]);
            assert_int_equal(plan.bc, tiles[i][1]);
        }
        check_backward(&c);
    }
    /* one 64-row block over two warpgroups at d 64 would leave each 32
     * columns, fewer than the share's wgmma takes: the forced tile is
     * refused, not built */
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 64, 128, 8, 32), FCL_OK);
    {
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, 1, 2, 2, 128, 96, 64, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
        fcl_plan plan;
        const fcl_status q = fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan);
        assert_true(q == FCL_ERROR_INVALID_VALUE || q == FCL_ERROR_NO_PLAN);
    }
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 0, 0, 0, 0), FCL_OK);
    fa_case r = default_tile_case(9980, 2);
    const fcl_attention_desc d = case_desc(&r);
    fcl_plan plan;
    if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) == FCL_OK)
        assert_true(fa_check_deterministic(ctx, &r, 1));
    assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
}

/* The backward's streamed tiles by the tensor memory accelerator (the
 * default; emulated, one work-item copies each box as the accelerator
 * would): dK/dV's Q and dO blocks (under GQA a pair of maps for each query
 * head of a K/V head, FCL_BUILD_WG_TMA_HEADS; with one query head a K/V
 * head a pair alone), dQ's K and V tiles; neither with
 * FLASHCL_WGMMA_BACKWARD_TMA=0, which gives the same gradients bit for bit
 * by cp.async.  Both head dims and storage types, causal and not, a last
 * block past the sequence (its rows read as zeros), packed sequences (a
 * map of each sequence's rows), boxes of 64 and 128 rows, the tile for few
 * query rows and two warpgroups' at d 128, and non-finite Q, dO, K and V
 * values, which the guards find in the copied tiles; and the fused dQ's
 * dK/dV by the accelerator where FLASHCL_WGMMA_BACKWARD_TMA=1 asks.  (The
 * other backward tests here take it too.) */
static void cp_async_copies(void *arg)
{
    (void)arg;
    assert_int_equal(setenv("FLASHCL_WGMMA_BACKWARD_TMA", "0", 1), 0);
}

static void test_backward_tma(void **state)
{
    (void)state;
    assert_int_equal(unsetenv("FLASHCL_WGMMA_BACKWARD_TMA"), 0);
    fa_case c = base_case(9700);
    c.seqlen_q = 150;
    c.seqlen_k = 140;
    c.head_dim = 128;
    fcl_attention_desc d = case_desc(&c);
    fcl_plan plan;
    if (fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan) != FCL_OK) {
        print_message("no dK/dV wgmma plan on this device: nothing to run\n");
        return;
    }
    fcl_plan dq_plan;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &dq_plan), FCL_OK);
    assert_true(fcl_backward_builds_of(ctx, &d, 0).dkdv[0].features & FCL_BUILD_WG_TMA);
    assert_false(fcl_backward_builds_of(ctx, &d, 0).dkdv[0].features & FCL_BUILD_WG_TMA_HEADS);
    assert_true(fcl_backward_builds_of(ctx, &d, 0).dq.features & FCL_BUILD_WG_TMA);
    assert_non_null(strstr(plan.reason, "Q and dO brought in by TMA"));
    assert_non_null(strstr(dq_plan.reason, "K and V brought in by TMA"));
    assert_int_equal(setenv("FLASHCL_WGMMA_BACKWARD_TMA", "0", 1), 0);
    assert_false(fcl_backward_builds_of(ctx, &d, 0).dkdv[0].features & FCL_BUILD_WG_TMA);
    assert_false(fcl_backward_builds_of(ctx, &d, 0).dq.features & FCL_BUILD_WG_TMA);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan), FCL_OK);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &dq_plan), FCL_OK);
    assert_non_null(strstr(plan.reason, "Q and dO brought in by cp.async"));
    assert_non_null(strstr(dq_plan.reason, "K and V brought in by cp.async"));
    assert_int_equal(unsetenv("FLASHCL_WGMMA_BACKWARD_TMA"), 0);
    d.heads_q = 2 * d.heads_kv;
    const unsigned gqa_tma = FCL_BUILD_WG_TMA | FCL_BUILD_WG_TMA_HEADS;
    assert_int_equal(fcl_backward_builds_of(ctx, &d, 0).dkdv[0].features & gqa_tma, gqa_tma);
    assert_false(fcl_backward_builds_of(ctx, &d, 0).dq.features & FCL_BUILD_WG_TMA_HEADS);
    assert_true(fcl_backward_builds_of(ctx, &d, 0).dq.features & FCL_BUILD_WG_TMA);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan), FCL_OK);
    assert_non_null(strstr(plan.reason, "Q and dO brought in by TMA"));
    check_backward(&c);
    assert_true(fa_check_same_after(ctx, &c, 1, cp_async_copies, NULL));
    assert_int_equal(unsetenv("FLASHCL_WGMMA_BACKWARD_TMA"), 0);
    fa_case e = base_case(9701);
    e.causal = 1;
    e.dtype = FCL_DTYPE_BF16;
    e.heads_q = 2 * e.heads_kv; /* both by the accelerator, dK/dV a map pair a query head */
    check_backward(&e);
    static const int packed_q[2] = {70, 129}, packed_k[2] = {90, 60};
    fa_variants v = fa_no_variants();
    v.seqlens_q = packed_q;
    v.seqlens_k = packed_k;
    fa_case p = base_case(9702);
    p.batch = 2;
    p.seqlen_q = 129;
    p.seqlen_k = 90;
    p.head_dim = 128;
    p.causal = 1;
    p.var = &v;
    check_backward(&p);
    /* two warpgroups of 64 keys, as long calls take at d 128 */
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 64, 128, 8, 32), FCL_OK);
    fa_case t = base_case(9704);
    t.head_dim = 128;
    t.seqlen_k = 200;
    t.causal = 1;
    check_backward(&t);
    assert_int_equal(fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 0, 0, 0, 0), FCL_OK);
    nf_case n = {1, 1, 150, 140, 128, FCL_DTYPE_FP16, 1, -1, -1, 0, 0, 1,
                 {{NF_Q, 0, 133, 70, INFINITY}, {NF_DO, 0, 72, 5, -INFINITY},
                  {NF_DO, 0, 10, 127, NAN}},
                 9703};
    assert_true(nf_check(ctx, &n));
    /* dK/dV under GQA: a pair of maps for each query head of a K/V head,
     * three query heads a K/V head, then two in packed sequences */
    assert_int_equal(unsetenv("FLASHCL_WGMMA_BACKWARD_TMA"), 0);
    fa_case g = base_case(9706);
    g.heads_q = 3 * g.heads_kv;
    g.layout = FCL_LAYOUT_BHSD;
    g.seqlen_q = 150;
    g.seqlen_k = 140;
    g.causal = 1;
    check_backward(&g);
    assert_true(fa_check_same_after(ctx, &g, 1, cp_async_copies, NULL));
    assert_int_equal(unsetenv("FLASHCL_WGMMA_BACKWARD_TMA"), 0);
    p.heads_q = 2 * p.heads_kv; /* packed sequences */
    check_backward(&p);
    nf_case gn = {2, 1, 150, 140, 64, FCL_DTYPE_BF16, 0, -1, -1, 0, 0, 1,
                  {{NF_Q, 1, 133, 7, NAN}, {NF_DO, 1, 20, 50, INFINITY}, {NF_DO, 0, 90, 3, NAN}},
                  9707};
    assert_true(nf_check(ctx, &gn));
    /* in dQ's K and V tiles, with two query heads a K/V head */
    nf_case kv = {2, 1, 150, 140, 64, FCL_DTYPE_BF16, 1, -1, -1, 0, 0, 1,
                  {{NF_K, 0, 131, 3, NAN}, {NF_V, 0, 66, 60, INFINITY}},
                  9705};
    assert_true(nf_check(ctx, &kv));
    /* the fused dQ keeps cp.async for dK/dV's Q and dO unless
     * FLASHCL_WGMMA_BACKWARD_TMA=1 asks: then the accelerator, and in key
     * order the same gradients bit for bit as cp.async (GQA: map pairs) */
    if (ctx->loop_limit != 0)
        return; /* such a device keeps the dQ kernel */
    assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", "ordered", 1), 0);
    fa_case f = base_case(9708);
    f.heads_q = 2 * f.heads_kv;
    f.seqlen_q = 150;
    f.seqlen_k = 140;
    f.causal = 1;
    const fcl_attention_desc fd = case_desc(&f);
    assert_false(fcl_backward_builds_of(ctx, &fd, 0).dkdv[0].features & FCL_BUILD_WG_TMA);
    assert_int_equal(setenv("FLASHCL_WGMMA_BACKWARD_TMA", "1", 1), 0);
    const fcl_backward_builds fb = fcl_backward_builds_of(ctx, &fd, 0);
    assert_true(fb.fused_dq);
    assert_true(fb.dkdv[0].features & FCL_BUILD_WG_TMA);
    assert_true(fb.dkdv[0].features & FCL_BUILD_WG_TMA_HEADS);
    check_backward(&f);
    assert_true(fa_check_same_after(ctx, &f, 1, cp_async_copies, NULL));
    assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
}

/* After the accelerator's test, whether it passed or failed: the default
 * again. */
static int backward_tma_off(void **state)
{
    return unsetenv("FLASHCL_WGMMA_BACKWARD_TMA") == 0 && unsetenv("FLASHCL_BACKWARD_DQ") == 0
               ? backward_off(state)
               : -1;
}

/* After the fused dQ's test, whether it passed or failed: the separate
 * kernels again. */
static int backward_fused_off(void **state)
{
    return unsetenv("FLASHCL_BACKWARD_DQ") == 0 ? backward_off(state) : -1;
}

/* A part of main's table by name runs alone (ctest runs them as test_wgmma,
 * test_wgmma_fp8, test_wgmma_fp8_products, test_wgmma_backward and
 * test_wgmma_head_groups, each within ctest's time limit on a two-core
 * machine whose PoCL has compiled none of their kernels yet: the FP8 cases
 * together ran past 1500 s there, each FP8 products case a program of its
 * own, and the backward with its head groups' case took 1498 s); no argument
 * runs every part, any other fails. */
struct wgmma_part {
    const char *name;
    const struct CMUnitTest *tests;
    size_t count;
};
#define WGMMA_PART(name, tests) {name, tests, sizeof(tests) / sizeof((tests)[0])}

int main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "";
    fa_test_filters();
    const struct CMUnitTest forward[] = {
        cmocka_unit_test_teardown(test_selection, clear_forced_tile),
        cmocka_unit_test_teardown(test_default_tile, clear_forced_tile),
        cmocka_unit_test(test_tile_boundaries),
        cmocka_unit_test_teardown(test_forced_tiles, clear_forced_tile),
        cmocka_unit_test_teardown(test_variants, clear_forced_tile),
        cmocka_unit_test_teardown(test_nonfinite_v, clear_forced_tile),
        cmocka_unit_test_teardown(test_loads, clear_forced_tile),
        cmocka_unit_test_teardown(test_ring_switches, clear_build_options),
        cmocka_unit_test(test_shrink),
    };
    const struct CMUnitTest fp8[] = {
        cmocka_unit_test_teardown(test_fp8, clear_forced_tile),
        cmocka_unit_test_teardown(test_fp8_out_of_order_queue, clear_forced_tile),
    };
    const struct CMUnitTest fp8_products[] = {
        cmocka_unit_test_teardown(test_fp8_products, clear_forced_tile),
        cmocka_unit_test_teardown(test_fp8_products_nonfinite, clear_forced_tile),
    };
    const struct CMUnitTest backward[] = {
        cmocka_unit_test(test_backward_shrink),
        cmocka_unit_test_setup_teardown(test_backward_selection, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_backward_default_tile, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_backward_forced_tiles, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_backward_tile_boundaries, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_backward_variants, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_backward_nonfinite, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_whole_tiles, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_split_runs, backward_on, backward_off),
        cmocka_unit_test_setup_teardown(test_backward_fused_dq, backward_on, backward_fused_off),
        cmocka_unit_test_setup_teardown(test_backward_tma, backward_on, backward_tma_off),
    };
    const struct CMUnitTest head_groups[] = {
        cmocka_unit_test(test_head_groups),
        cmocka_unit_test_setup_teardown(test_backward_head_groups, backward_on, backward_off),
    };
    const struct wgmma_part parts[] = {
        WGMMA_PART("forward", forward),
        WGMMA_PART("fp8", fp8),
        WGMMA_PART("fp8_products", fp8_products),
        WGMMA_PART("backward", backward),
        WGMMA_PART("head_groups", head_groups),
    };
    const size_t num_parts = sizeof(parts) / sizeof(parts[0]);
    const bool all = part[0] == '\0';
    size_t i = 0;
    while (!all && i < num_parts && strcmp(part, parts[i].name) != 0)
        i++;
    if (i == num_parts) {
        fprintf(stderr, "test_wgmma: no part named \"%s\" (", part);
        for (i = 0; i < num_parts; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", parts[i].name);
        fprintf(stderr, ")\n");
        return 1;
    }
    /* every part, or the one found */
    const size_t end = all ? num_parts : i + 1;
    int failed = 0;
    for (; i < end; i++) {
        char name[64];
        snprintf(name, sizeof(name), "test_wgmma %s", parts[i].name);
        /* what cmocka_run_group_tests_name expands to, with the table's count */
        failed += _cmocka_run_group_tests(name, parts[i].tests, parts[i].count, setup,
                                          fa_group_teardown);
    }
    return failed;
}
