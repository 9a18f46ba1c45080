/* test_profiles.c - every emulated device profile's plan (its tile sizes and
 * work-group shape, from its local memory and limits) runs on the real
 * device and is checked against the float64 reference, forward and backward,
 * plain and with every attention variant (attention sinks included) at once,
 * and a decode forward with sinks and split-KV. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal.h"
#include "test_support.h"

static void run_profile(const char *name, uint64_t seed)
{
    fcl_context *ctx = test_context(name);
    assert_non_null(ctx);
    /* B Hq Hk Sq Sk d dtype causal scale layout padded scales seed */
    const fa_case forward[] = {
        {1, 2, 2, 77, 77, 64, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed, NULL},
        {2, 4, 2, 50, 131, 128, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BHSD, 1, {0, 0, 0}, seed + 1, NULL},
        {1, 3, 1, 65, 40, 40, FCL_DTYPE_BF16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed + 2, NULL},
        {1, 1, 1, 70, 90, 256, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed + 3, NULL},
        /* 70 heads: more than one group of heads (common.cl, FCL_HEAD_GROUP) */
        {5, 14, 14, 70, 45, 16, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed + 20, NULL},
    };
    const fa_case backward[] = {
        {1, 2, 1, 70, 53, 64, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 1, {0, 0, 0}, seed + 4, NULL},
        {1, 2, 2, 45, 66, 128, FCL_DTYPE_BF16, 0, 0, FCL_LAYOUT_BHSD, 0, {0, 0, 0}, seed + 5, NULL},
        {1, 1, 1, 33, 33, 256, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed + 6, NULL},
    };
    fa_result r;
    for (size_t i = 0; i < sizeof forward / sizeof forward[0]; ++i)
        assert_true(fa_check_forward(ctx, &forward[i], &r));
    for (size_t i = 0; i < sizeof backward / sizeof backward[0]; ++i)
        assert_true(fa_check_backward(ctx, &backward[i], &r));

    /* every variant at once, on this profile's tiles */
    const int lq[3] = {45, 0, 70}, lk[3] = {60, 9, 70};
    fa_variants v = fa_no_variants();
    v.window_left = 20;
    v.alibi = FCL_ALIBI_PER_HEAD;
    v.softcap = 25.0f;
    v.dropout_p = 0.15f;
    v.dropout_seed = seed;
    v.seqlens_q = lq;
    v.seqlens_k = lk;
    v.block_m = 16;
    v.block_n = 24;
    v.block_density = 0.75;
    v.sinks = 1;
    const fa_case all = {3, 4, 2, 70, 70, 48, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0,
                         {0, 0, 0}, seed + 7, &v};
    assert_true(fa_check_forward(ctx, &all, &r));
    assert_true(fa_check_backward(ctx, &all, &r));
    /* decoding with sinks: GQA packing, the keys split (the merge adds them) */
    fa_variants dv = fa_no_variants();
    dv.sinks = 1;
    dv.num_splits = 4;
    const fa_case decode = {2, 8, 2, 1, 300, 64, FCL_DTYPE_FP16, 0, 0, FCL_LAYOUT_BSHD, 0,
                            {0, 0, 0}, seed + 8, &dv};
    assert_true(fa_check_forward(ctx, &decode, &r));
    fcl_context_destroy(ctx);
}

static void test_nvidia_h100(void **state) { (void)state; run_profile("nvidia-h100", 3000); }
static void test_nvidia_a100(void **state) { (void)state; run_profile("nvidia-a100", 3100); }
static void test_amd_cdna(void **state) { (void)state; run_profile("amd-cdna", 3200); }
static void test_amd_rdna(void **state) { (void)state; run_profile("amd-rdna", 3300); }
static void test_intel_xe(void **state) { (void)state; run_profile("intel-xe", 3400); }
static void test_small_32k(void **state) { (void)state; run_profile("small-32k", 3500); }

/* The plans of every kernel for one problem use `variant`; on a device
 * that ends long loops (llvmpipe) a plan whose one tile outruns the limit
 * is refused instead (the emulated AVX2 CPU's), as the query says. */
static void assert_variant(fcl_context *ctx, const char *variant)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 2, 2, 100, 100, 64, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    const fcl_kernel_kind kinds[] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DKDV,
                                     FCL_KERNEL_BACKWARD_DQ};
    for (size_t i = 0; i < 3; ++i) {
        fcl_plan p;
        const fcl_status st = fcl_plan_query(ctx, &d, kinds[i], &p);
        if (ctx->loop_limit != 0 && st == FCL_ERROR_DEVICE_LOOP_LIMIT) {
            print_message("kernel kind %d: %s\n", (int)kinds[i], fcl_status_string(st));
            continue;
        }
        assert_int_equal(st, FCL_OK);
        assert_string_equal(p.variant, variant);
    }
}

/* An AVX2 CPU: the CPU piece with 8 rows a vector (float8), whatever this
 * machine's own width. */
static void test_cpu_avx2(void **state)
{
    (void)state;
    fcl_context *ctx = test_context("cpu-avx2");
    assert_non_null(ctx);
    assert_variant(ctx, "cpu-simd8");
    fcl_context_destroy(ctx);
    run_profile("cpu-avx2", 3600);
}

/* A CPU device with 8- or 16-float SIMD runs the CPU piece, and the portable
 * one when told to (portable_only); both pass the same checks. */
static void test_cpu_piece_selected(void **state)
{
    (void)state;
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    fcl_device_info info;
    assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
    const int cpu = (info.type & CL_DEVICE_TYPE_CPU) != 0 &&
                    (info.native_float_width == 8 || info.native_float_width == 16);
    if (cpu)
        assert_variant(ctx, info.native_float_width == 16 ? "cpu-simd16" : "cpu-simd8");
    fcl_context_destroy(ctx);
    if (!cpu)
        return;
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.portable_only = 1;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_OK);
    assert_variant(ctx, "portable-fma");
    const fa_case c = {1, 2, 1, 70, 53, 64, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 1,
                       {0, 0, 0}, 3700, NULL};
    fa_result r;
    assert_true(fa_check_forward(ctx, &c, &r));
    assert_true(fa_check_backward(ctx, &c, &r));
    fcl_context_destroy(ctx);
}

/* A new profile must be added here too. */
static void test_every_profile_covered(void **state)
{
    (void)state;
    assert_int_equal(fcl_profile_count(), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvidia_h100), cmocka_unit_test(test_nvidia_a100),
        cmocka_unit_test(test_amd_cdna),    cmocka_unit_test(test_amd_rdna),
        cmocka_unit_test(test_intel_xe),    cmocka_unit_test(test_small_32k),
        cmocka_unit_test(test_cpu_avx2),    cmocka_unit_test(test_cpu_piece_selected),
        cmocka_unit_test(test_every_profile_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
