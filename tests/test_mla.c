/* test_mla - multi-head latent attention decoding: the KV-cache call on one
 * shared cache (fcl_kvcache_desc.shared_kv, V = the first head_dim_v
 * columns of K's rows), head_dim up to 576, against the float64 reference
 * (kvcache_support.h: random caches everywhere, shuffled pages, ragged
 * lengths, appends, the cache's exact bytes after the call, O and LSE by the
 * tolerance rule, bitwise repeatability).
 *
 * The shapes are DeepSeek's latent cache (576 / 512, one K/V head, 16 and
 * 128 query heads) on small caches, so that the program stays short on
 * PoCL: lengths 0, 1, past one 64-key page and up to three of them, appends
 * across a page boundary, split-KV 1, 3, 7 and automatic, fp16, bf16 and
 * fp32, causal with several query rows, sinks.  They run on the CPU piece
 * (PoCL's default), the portable piece (portable_only), and the emulated
 * H100 profile, whose plan is the portable piece's; then the cl_mem form, smaller shared caches on
 * emulated tensor cores, head_dim 576 on them (the piece an NVIDIA GPU
 * runs), the plan, and every bad input.
 */
#include "internal.h"
#include "kvcache_support.h"
#include "test_support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MLA_D = 576, MLA_DV = 512 };

static const int lens4[] = {0, 1, 130, 65};
static const int lens3[] = {150, 7, 64};
static const int lens2[] = {70, 129};

/* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
static const kv_case decode_cases[] = {
    /* one query row: lengths 0, 1, past a page; an append across a page boundary */
    {4, 16, 1, MLA_D, 1, 1, FCL_DTYPE_FP16, 64, 192, lens4, 1, -1, 0, 0, 1, 1},
    {3, 128, 1, MLA_D, 1, 1, FCL_DTYPE_BF16, 64, 192, lens3, 1, -1, 0, 0, 3, 2},
    {2, 16, 1, MLA_D, 1, 2, FCL_DTYPE_FP32, 0, 192, lens2, 1, -1, 0, 0, 7, 3},
    {3, 16, 1, MLA_D, 1, 0, FCL_DTYPE_FP16, 64, 192, lens3, 0, -1, 0, 0, 0, 4},
};

/* causal with several query rows (speculative decoding, a chunk), sinks */
static const kv_case causal_cases[] = {
    {2, 16, 1, MLA_D, 3, 2, FCL_DTYPE_FP16, 64, 192, lens2, 1, -1, 0, 0, 3, 5},
    {3, 128, 1, MLA_D, 2, 1, FCL_DTYPE_BF16, 64, 256, lens3, 1, -1, 0, 0, 0, 6},
};

/* Every decode and causal case on ctx, with sinks on the causal ones (and
 * one decode case); the number that failed. */
static int run_all(fcl_context *ctx)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof decode_cases / sizeof decode_cases[0]; ++i)
        failures += !kv_run_shared(ctx, &decode_cases[i], MLA_DV, i == 1);
    for (size_t i = 0; i < sizeof causal_cases / sizeof causal_cases[0]; ++i) {
        failures += !kv_run_shared(ctx, &causal_cases[i], MLA_DV, 0);
        failures += !kv_run_shared(ctx, &causal_cases[i], MLA_DV, 1);
    }
    return failures;
}

/* The default device's pieces (on PoCL the CPU piece). */
static void test_default_piece(void **state)
{
    (void)state;
    assert_int_equal(run_all(fa_ctx), 0);
}

/* The portable piece, which an NVIDIA GPU runs where its tensor cores do
 * not (fp32, or head_dim not a multiple of 32). */
static void test_portable_piece(void **state)
{
    (void)state;
    fcl_context_options opt;
    fcl_context_options_init(&opt);
    opt.portable_only = 1;
    fcl_context *ctx = NULL;
    assert_int_equal(fcl_context_create(&opt, &ctx), FCL_OK);
    assert_int_equal(run_all(ctx), 0);
    fcl_context_destroy(ctx);
}

/* The H100's plan (emulated): a profile plans the portable piece (only the
 * real device runs the tensor cores), with tiles sized for 228 KiB; the shared cache's plan holds
 * no V tile, so it is smaller than two caches' plan of the same tile. */
static void test_h100_profile(void **state)
{
    (void)state;
    fcl_context *ctx = test_context("nvidia-h100");
    assert_non_null(ctx);
    kv_state st;
    kv_init_shared(&decode_cases[0], MLA_DV, 0, &st);
    fcl_plan shared;
    const fcl_status q = fcl_kvcache_plan_query(ctx, &st.desc, &shared);
    if (q == FCL_ERROR_DEVICE_LOOP_LIMIT) {
        /* the profile's tiles on a device that ends long loops (llvmpipe):
         * no plan to look at; the calls must be refused as predicted */
        print_message("the H100 profile's plan on this device: %s\n", fcl_status_string(q));
        kv_free(&st);
        assert_int_equal(kv_run_shared(ctx, &decode_cases[0], MLA_DV, 0), 1);
        fcl_context_destroy(ctx);
        return;
    }
    assert_int_equal(q, FCL_OK);
    assert_int_equal(shared.kernel, FCL_KERNEL_DECODE);
    assert_string_equal(shared.variant, "portable-fma");
    assert_int_equal(shared.head_dim, MLA_D);
    assert_int_equal(shared.pack, 16); /* every query head in one row block */
    assert_int_equal(shared.local_bytes,
                     fcl_plan_local_bytes(FCL_KERNEL_DECODE, FCL_FEAT_SHARED_KV, (int)shared.br,
                                          (int)shared.bc, (int)shared.head_dim_padded,
                                          (int)shared.threads_col));
    assert_true(shared.local_bytes + shared.bc * shared.head_dim_padded * sizeof(float) ==
                fcl_plan_local_bytes(FCL_KERNEL_DECODE, 0, (int)shared.br, (int)shared.bc,
                                     (int)shared.head_dim_padded, (int)shared.threads_col));
    kv_free(&st);
    assert_int_equal(kv_run_shared(ctx, &decode_cases[0], MLA_DV, 0), 1);
    assert_int_equal(kv_run_shared(ctx, &causal_cases[1], MLA_DV, 1), 1);
    fcl_context_destroy(ctx);
}

/* The cl_mem form: no V buffers, the append writes K's rows alone. */
static void test_buffers(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; ++i) {
        kv_state st;
        kv_init_shared(&causal_cases[i], MLA_DV, (int)i, &st);
        assert_int_equal(kv_run_on_buffers(fa_ctx, &st, 0), FCL_OK);
        assert_memory_equal(st.kc, st.kc_expect, st.ncache * st.es);
        assert_true(kv_check_outputs(&causal_cases[i], &st, "cl_mem, shared"));
        kv_free(&st);
    }
}

/* A shared cache below head_dim 256 on the emulated tensor cores (V's
 * columns read from the K tile), and on the default piece:
 * any head_dim_v, GQA packing, contiguous and paged. */
static void test_small_shared(void **state)
{
    (void)state;
    const kv_case cases[] = {
        {2, 8, 2, 64, 1, 1, FCL_DTYPE_FP16, 16, 160, lens2, 1, -1, 0, 0, 2, 7},
        {2, 16, 1, 96, 2, 1, FCL_DTYPE_BF16, 0, 160, lens2, 1, -1, 0, 0, 0, 8},
    };
    const size_t dv[] = {48, 96};
    fcl_context *mma = test_context(NULL);
    assert_non_null(mma);
    assert_int_equal(fcl_debug_emulate_tensor_cores(mma, 1), FCL_OK);
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        failures += !kv_run_shared(fa_ctx, &cases[i], dv[i], 0);
        failures += !kv_run_shared(mma, &cases[i], dv[i], 1);
    }
    fcl_context_destroy(mma);
    assert_int_equal(failures, 0);
}

/* head_dim 576 on the emulated tensor cores: the forward piece with each
 * 16-row block's keys and V's columns split over 4 warps, or 2 where there
 * are several blocks (tile_nv_mma.cl, FCL_WD), as an NVIDIA GPU runs MLA:
 * one row block (16 heads), four (64
 * packed rows of 128 heads, or 3 query rows x 16 heads with sinks), a
 * shared cache and two caches, and a KV call with more rows than a decode
 * plan (the forward kernel's plan).  The plans must be the split ones. */
static void test_tensor_cores_576(void **state)
{
    (void)state;
    static const int lens1[] = {40};
    const kv_case many_rows = {1, 2, 1, MLA_D, 80, 80, FCL_DTYPE_FP16, 64, 192, lens1, 1, -1, 0, 0, 0, 9};
    fcl_context *mma = test_context(NULL);
    assert_non_null(mma);
    assert_int_equal(fcl_debug_emulate_tensor_cores(mma, 1), FCL_OK);
    const kv_case *plans[] = {&decode_cases[0], &decode_cases[1], &causal_cases[0], &many_rows};
    const size_t rows[] = {16, 64, 64, 64}; /* the planner's first choice */
    for (size_t i = 0; i < 4; ++i) {
        kv_state st;
        kv_init_shared(plans[i], MLA_DV, 0, &st);
        fcl_plan p;
        const fcl_status q = fcl_kvcache_plan_query(mma, &st.desc, &p);
        kv_free(&st);
        if (q == FCL_ERROR_DEVICE_LOOP_LIMIT) {
            /* a device that ends long loops (llvmpipe): the calls below
             * must be refused as predicted */
            print_message("head_dim 576 on emulated tensor cores here: %s\n", fcl_status_string(q));
            continue;
        }
        assert_int_equal(q, FCL_OK);
        if (strcmp(p.variant, "emulated-mma-sync") != 0) {
            /* the portable piece only where not even the smallest split
             * tile (16 rows, 32 keys, 2 warps) fits the device */
            const fcl_tuned_tile smallest = {16, 32, 2, 32, "test", 2};
            fcl_plan_full f;
            assert_int_equal(fcl_plan_make_mma(&mma->caps, FCL_KERNEL_DECODE, MLA_D, plans[i]->dtype,
                                               false, NULL, &smallest, 1, &f),
                             FCL_ERROR_NO_PLAN);
            continue;
        }
        assert_int_equal(p.kernel, i == 3 ? FCL_KERNEL_FORWARD : FCL_KERNEL_DECODE);
        /* the rows asked for, or fewer where the device's memory says so;
         * 4 warps to one 16-row block, 2 to each of several */
        assert_true(p.br % 16 == 0 && p.br <= rows[i] && p.br >= 16);
        assert_int_equal(p.work_group_size, 32 * (p.br == 16 ? 4 : 2) * p.br / 16);
    }
    int failures = 0;
    failures += !kv_run_shared(mma, &decode_cases[0], MLA_DV, 0);
    failures += !kv_run_shared(mma, &decode_cases[1], MLA_DV, 1);
    failures += !kv_run_shared(mma, &causal_cases[0], MLA_DV, 1);
    failures += !kv_run_shared(mma, &many_rows, MLA_DV, 0);
    failures += !kv_run_value_dim(mma, &decode_cases[0], MLA_DV); /* two caches */
    fcl_context_destroy(mma);
    assert_int_equal(failures, 0);
}

/* The host form's status, with nothing written. */
static void expect_host_status(kv_state *st, const fcl_kvcache_host *a, fcl_status want)
{
    const size_t cache_bytes = st->ncache * st->es, o_bytes = st->no * st->oes;
    unsigned char *kc0 = malloc(cache_bytes), *o0 = malloc(o_bytes);
    memcpy(kc0, st->kc, cache_bytes);
    memcpy(o0, st->o, o_bytes);
    assert_int_equal(fcl_attention_kvcache_host(fa_ctx, &st->desc, a), want);
    assert_memory_equal(st->kc, kc0, cache_bytes);
    assert_memory_equal(st->o, o0, o_bytes);
    free(kc0);
    free(o0);
}

/* The same status from the plan query, the host form and (where the
 * descriptor is wrong, not the arrays) the cl_mem form. */
static void expect_everywhere(kv_state *st, fcl_status want)
{
    fcl_plan plan;
    assert_int_equal(fcl_kvcache_plan_query(fa_ctx, &st->desc, &plan), want);
    const fcl_kvcache_host a = kv_host_arrays(st);
    expect_host_status(st, &a, want);
    assert_int_equal(kv_run_on_buffers(fa_ctx, st, 0), want);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    kv_state st;
    kv_init_shared(&decode_cases[0], MLA_DV, 0, &st);
    const fcl_kvcache_desc good = st.desc;
    /* a second cache, or new V rows, beside a shared one: refused, not ignored */
    fcl_kvcache_host a = kv_host_arrays(&st);
    a.v_cache = st.kc;
    expect_host_status(&st, &a, FCL_ERROR_INVALID_VALUE);
    a = kv_host_arrays(&st);
    a.v_new = st.vn;
    expect_host_status(&st, &a, FCL_ERROR_INVALID_VALUE);
    /* two caches wanted, V's missing */
    st.desc.shared_kv = 0;
    a = kv_host_arrays(&st);
    expect_host_status(&st, &a, FCL_ERROR_NULL_ARGUMENT);
    st.desc = good;
    struct {
        size_t head_dim, head_dim_v;
        int shared;
        fcl_dtype dtype;
        fcl_status want;
    } cases[] = {
        {577, MLA_DV, 1, FCL_DTYPE_FP16, FCL_ERROR_HEAD_DIM_UNSUPPORTED},
        {MLA_D, 577, 1, FCL_DTYPE_FP16, FCL_ERROR_HEAD_DIM_UNSUPPORTED},
        {MLA_D, 0, 2, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},
        {MLA_D, MLA_DV, -1, FCL_DTYPE_FP16, FCL_ERROR_INVALID_VALUE},
        {MLA_D, MLA_DV, 1, FCL_DTYPE_FP8_E4M3, FCL_ERROR_DTYPE_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        st.desc.head_dim = cases[i].head_dim;
        st.desc.head_dim_v = cases[i].head_dim_v;
        st.desc.shared_kv = cases[i].shared;
        st.desc.dtype = cases[i].dtype;
        if (cases[i].shared == 1) {
            expect_everywhere(&st, cases[i].want);
        } else { /* not a shared cache, so v_cache is wanted: the descriptor decides first */
            fcl_plan plan;
            assert_int_equal(fcl_kvcache_plan_query(fa_ctx, &st.desc, &plan), cases[i].want);
            a = kv_host_arrays(&st);
            a.v_cache = st.kc;
            a.v_new = st.kn;
            expect_host_status(&st, &a, cases[i].want);
        }
        st.desc = good;
    }
    /* rotary with a shared cache (its tables given, so that the descriptor decides) */
    st.desc.rotary_dim = 64;
    st.desc.rotary_rows = st.desc.max_pages_per_seq * st.desc.page_size;
    st.rot_floats = st.desc.rotary_rows * 32;
    st.rot_cos = calloc(st.rot_floats, sizeof(float));
    st.rot_sin = calloc(st.rot_floats, sizeof(float));
    expect_everywhere(&st, FCL_ERROR_INVALID_VALUE);
    kv_free(&st);
    /* 576 is the KV-cache call's alone: the forward and its plan refuse it */
    fcl_attention_desc f;
    fcl_attention_desc_init(&f, 1, 16, 1, 1, 64, MLA_D, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    f.head_dim_v = MLA_DV;
    fcl_plan plan;
    assert_int_equal(fcl_plan_query(fa_ctx, &f, FCL_KERNEL_FORWARD, &plan),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    assert_int_equal(fcl_plan_query(fa_ctx, &f, FCL_KERNEL_BACKWARD_DQ, &plan),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    const size_t n = 16 * 64 * MLA_D;
    uint16_t *x = calloc(n, sizeof *x);
    assert_int_equal(fcl_attention_forward_host(fa_ctx, &f, x, x, x, x, NULL),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_inputs),   cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_small_shared),
        cmocka_unit_test(test_tensor_cores_576), cmocka_unit_test(test_h100_profile),
        cmocka_unit_test(test_default_piece), cmocka_unit_test(test_portable_piece),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
