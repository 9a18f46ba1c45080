/* test_nonfinite.c - a non-finite input element reaches exactly the outputs
 * of the rows and keys that see it (flashcl.h, "Non-finite inputs"), on
 * every piece: the CPU piece (the default device here), the portable one
 * (portable_only) and the tensor-core ones (emulated warp operations, or the
 * real ones on an NVIDIA sm_80+ device); the forward, the backward and the
 * KV-cache call.  nonfinite_support.h says how a case is checked: the
 * finite run against float64, then the outputs a non-finite element must
 * reach, may reach, and must leave as they were.  The elements sit at keys
 * (rows) that other rows (keys) of the same tile cannot see, where a masked
 * probability (exactly 0) would multiply them, under causal masks, sliding
 * windows, block masks and cache lengths, in every storage type.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "internal.h"
#include "nonfinite_support.h"
#include "test_support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the cases ------------------------------------------------------------ */

/* Spots for a mask of S x S: each tensor's at rows and keys that share a
 * tile with rows or keys that cannot see them (at any tile size). */
#define SPOT(t, h, r, c, v) {(t), (h), (r), (c), (v)}

/* The cases of one storage type and one tensor at a time, for the three
 * masks: causal, a sliding window, a block mask (with causal). */
static int nf_mask_cases(fcl_context *ctx, fcl_dtype dt, size_t S, size_t D, int backward,
                         uint64_t seed)
{
    const size_t j = S * 2 / 3, i = S / 3;
    const nf_spot by_tensor[NF_TENSORS][NF_MAX_SPOTS] = {
        {SPOT(NF_Q, 0, i, 1, INFINITY), SPOT(NF_Q, 1, i + 5, 2, NAN)},
        {SPOT(NF_K, 0, j, 0, INFINITY), SPOT(NF_K, 0, j - 61, 3, NAN)},
        {SPOT(NF_V, 0, j, 0, INFINITY), SPOT(NF_V, 0, j - 61, 5, -INFINITY),
         SPOT(NF_V, 0, j - 40, 2, NAN)},
        {SPOT(NF_DO, 0, i, 2, -INFINITY), SPOT(NF_DO, 1, i + 3, 0, NAN)},
    };
    const int is_fp8 = fcl_dtype_size(dt) == 1;
    int failures = 0;
    for (int mask = 0; mask < 3; ++mask)
        for (int t = 0; t < NF_TENSORS; ++t) {
            if (!backward && (t == NF_DO || (t == NF_Q && !is_fp8)))
                continue; /* forward only: dO unused; Q only spoils its own row */
            nf_case c = {2, 1, S, S, D, dt, mask != 1, mask == 1 ? 40 : -1, mask == 1 ? 9 : -1,
                         mask == 2 ? 16 : 0, 0, backward, {{0}}, seed + (uint64_t)(4 * mask + t)};
            memcpy(c.spots, by_tensor[t], sizeof c.spots);
            for (int s = 0; s < NF_MAX_SPOTS; ++s) {
                /* E4M3 has no infinity: NaN there */
                if (dt == FCL_DTYPE_FP8_E4M3 && isinf(c.spots[s].value))
                    c.spots[s].value = NAN;
            }
            failures += !nf_check(ctx, &c);
        }
    return failures;
}

static fcl_context *portable_context(void)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.portable_only = 1;
    fcl_context *ctx = NULL;
    return fcl_context_create(&o, &ctx) == FCL_OK ? ctx : NULL;
}

/* One storage type's cases on a piece: nf_mask_cases' arguments. */
typedef struct nf_dtype_run {
    fcl_dtype dtype;
    size_t seqlen, head_dim;
    int backward;
    uint64_t seed;
} nf_dtype_run;

/* The failures of runs[0..n) on ctx. */
static int nf_runs(fcl_context *ctx, const nf_dtype_run *runs, size_t n)
{
    int failures = 0;
    for (size_t i = 0; i < n; ++i)
        failures += nf_mask_cases(ctx, runs[i].dtype, runs[i].seqlen, runs[i].head_dim,
                                  runs[i].backward, runs[i].seed);
    return failures;
}

/* The default device's pieces (the CPU piece under PoCL). */
static void test_default_piece(void **state)
{
    (void)state;
    const nf_dtype_run runs[] = {
        {FCL_DTYPE_FP32, 300, 24, 1, 100},      {FCL_DTYPE_FP16, 300, 40, 1, 200},
        {FCL_DTYPE_BF16, 200, 16, 1, 300},      {FCL_DTYPE_FP8_E5M2, 300, 32, 0, 400},
        {FCL_DTYPE_FP8_E4M3, 200, 32, 0, 500},
    };
    assert_int_equal(nf_runs(fa_ctx, runs, sizeof runs / sizeof runs[0]), 0);
}

static void test_portable_piece(void **state)
{
    (void)state;
    fcl_context *ctx = portable_context();
    assert_non_null(ctx);
    const nf_dtype_run runs[] = {
        {FCL_DTYPE_FP32, 300, 24, 1, 600}, {FCL_DTYPE_FP16, 200, 40, 1, 700},
        {FCL_DTYPE_BF16, 200, 16, 1, 800}, {FCL_DTYPE_FP8_E5M2, 200, 32, 0, 900},
    };
    const int failures = nf_runs(ctx, runs, sizeof runs / sizeof runs[0]);
    fcl_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* The tensor-core pieces: the real instructions where the device has them,
 * else the emulated warp operations. */
/* A context whose kernels run on tensor cores: real ones where the device
 * has them, else emulated; *d a small fp16 problem they take. */
static fcl_context *tensor_core_context(fcl_attention_desc *d)
{
    fcl_context *ctx = test_context(NULL);
    assert_non_null(ctx);
    fcl_plan plan;
    fcl_attention_desc_init(d, 1, 2, 1, 64, 64, 32, FCL_DTYPE_FP16, FCL_LAYOUT_BHSD);
    assert_int_equal(fcl_plan_query(ctx, d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
    if (strstr(plan.variant, "mma") == NULL)
        assert_int_equal(fcl_debug_emulate_tensor_cores(ctx, 1), FCL_OK);
    assert_int_equal(fcl_plan_query(ctx, d, FCL_KERNEL_BACKWARD_DKDV, &plan), FCL_OK);
    assert_non_null(strstr(plan.variant, "mma"));
    return ctx;
}

static void test_tensor_core_pieces(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_context *ctx = tensor_core_context(&d);
    /* the storage types and head dims of test_tensor_cores' first two
     * head-dim cases (and test_tensor_cores' block-mask forwards): those
     * kernels come from PoCL's kernel cache when that program built them */
    const nf_dtype_run runs[] = {
        {FCL_DTYPE_BF16, 160, 32, 1, 1000},
        {FCL_DTYPE_FP16, 130, 16, 1, 1100},
        {FCL_DTYPE_FP8_E5M2, 160, 32, 0, 1200},
    };
    const int failures = nf_runs(ctx, runs, sizeof runs / sizeof runs[0]);
    fcl_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* The fused dQ option of the tensor-core backward (FLASHCL_BACKWARD_DQ,
 * README.md): a non-finite K element reaches the dQ of the rows that see
 * its key alone (flash_bwd.cl, fcl_dq_exact), under a causal mask and a
 * window, with a key tile past the last key. */
static void test_fused_dq(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_context *ctx = tensor_core_context(&d);
    assert_int_equal(setenv("FLASHCL_BACKWARD_DQ", "ordered", 1), 0);
    /* a device that ends long loops keeps the dQ kernel (backward.c) */
    assert_int_equal(fcl_backward_builds_of(ctx, &d, fcl_variants_features(&d)).fused_dq,
                     ctx->loop_limit == 0);
    int failures = 0;
    /* head_dim 48 in fp16: the ordered fused kernel of test_tensor_cores'
     * windowed case, from PoCL's kernel cache when that program built it */
    for (int mask = 0; mask < 2; ++mask) {
        nf_case c = {2, 1, 150, 150, 48, FCL_DTYPE_FP16, mask == 0, mask ? 40 : -1, mask ? 9 : -1,
                     0, 0, 1, {SPOT(NF_K, 0, 100, 0, INFINITY), SPOT(NF_K, 0, 39, 3, NAN),
                               SPOT(NF_K, 0, 149, 5, -INFINITY)},
                     1300 + (uint64_t)mask};
        nf_dq_rounding = 1; /* nonfinite_support.h */
        failures += !nf_check(ctx, &c);
        nf_dq_rounding = 0;
    }
    assert_int_equal(unsetenv("FLASHCL_BACKWARD_DQ"), 0);
    fcl_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* GQA (two query heads a K/V head, summed in dK/dV) and forced split-KV
 * chunks, whose merge must keep a chunk's NaN in the rows that saw it. */
static void test_gqa_and_splits(void **state)
{
    (void)state;
    const nf_case cases[] = {
        {4, 2, 150, 150, 32, FCL_DTYPE_FP32, 1, -1, -1, 0, 0, 1,
         {SPOT(NF_V, 1, 100, 3, INFINITY), SPOT(NF_Q, 2, 40, 0, NAN), SPOT(NF_DO, 3, 90, 1, INFINITY)},
         1300},
        {2, 1, 40, 400, 32, FCL_DTYPE_FP16, 1, -1, -1, 0, 3, 0,
         {SPOT(NF_V, 0, 380, 3, INFINITY), SPOT(NF_V, 0, 250, 1, NAN)}, 1301},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        failures += !nf_check(fa_ctx, &cases[i]);
    assert_int_equal(failures, 0);
}

/* Chunked prefill and speculative decoding against caches of different
 * lengths (contiguous and paged, GQA packing, split-KV): the rows of a
 * sequence's last positions see keys its earlier rows do not.  A spot past
 * a sequence's length is seen by no row.  On the default device, the
 * portable piece and the tensor-core ones. */
static void test_kvcache(void **state)
{
    (void)state;
    static const int lens[] = {90, 61};
    /* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
    const kv_case cases[] = {
        {2, 4, 2, 32, 6, 2, FCL_DTYPE_FP16, 0, 128, lens, 1, -1, 0, 0, 0, 1400},
        {2, 4, 2, 32, 5, 0, FCL_DTYPE_BF16, 16, 128, lens, 1, 30, 0, 0, 2, 1401},
        {2, 2, 2, 32, 40, 3, FCL_DTYPE_FP32, 48, 144, lens, 1, -1, 0, 0, 1, 1402},
        {2, 4, 2, 32, 6, 2, FCL_DTYPE_FP8_E5M2, 16, 128, lens, 1, -1, 0, 0, 0, 1403},
    };
    /* sequence 0 has 90 + new keys: key 89 is seen by its last rows only */
    const nf_kv_spot spots[] = {{0, 1, 89, 3, INFINITY}, {0, 0, 88, 0, NAN},
                                {1, 0, 60, 5, -INFINITY}, {1, 1, 100, 2, INFINITY}};
    fcl_context *contexts[3] = {fa_ctx, portable_context(), test_context(NULL)};
    assert_non_null(contexts[1]);
    assert_non_null(contexts[2]);
    assert_int_equal(fcl_debug_emulate_tensor_cores(contexts[2], 1), FCL_OK);
    int failures = 0;
    for (int k = 0; k < 3; ++k)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
            if (k == 2 && cases[i].dtype == FCL_DTYPE_FP32)
                continue; /* no tensor-core piece for fp32 */
            failures += !nf_kv_check(contexts[k], &cases[i], spots, 4);
        }
    fcl_context_destroy(contexts[1]);
    fcl_context_destroy(contexts[2]);
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_piece),
        cmocka_unit_test(test_portable_piece),
        cmocka_unit_test(test_tensor_core_pieces),
        cmocka_unit_test(test_fused_dq),
        cmocka_unit_test(test_gqa_and_splits),
        cmocka_unit_test(test_kvcache),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
