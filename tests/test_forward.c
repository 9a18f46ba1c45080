/* test_forward.c - the forward pass against the float64 reference on the
 * default device (PoCL in CI): every storage type and head_dim, awkward
 * lengths, seqlen_q != seqlen_k, batch/heads, GQA/MQA, both layouts with
 * strides and offsets, causal, custom scale, fully masked rows, determinism.
 * The tolerance rule is written in test_support.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_support.h"

#define ctx fa_ctx

static fa_case base_case(void)
{
    fa_case c = {1, 2, 2, 97, 113, 64, FCL_DTYPE_FP32, 0, 0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 1, NULL};
    return c;
}

static void check(const fa_case *c)
{
    fa_result r;
    assert_true(fa_check_forward(ctx, c, &r));
}

static const size_t head_dims[] = {8, 16, 32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 256};
static const fcl_dtype dtypes[] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};

/* Every head_dim in every storage type; causal on every other one. */
static void test_head_dims_and_dtypes(void **state)
{
    (void)state;
    for (size_t t = 0; t < 3; ++t)
        for (size_t i = 0; i < sizeof head_dims / sizeof head_dims[0]; ++i) {
            fa_case c = base_case();
            c.head_dim = head_dims[i];
            c.dtype = dtypes[t];
            c.causal = (int)((i + t) % 2);
            c.seed = 100 + i + 20 * t;
            check(&c);
        }
}

/* Head dims nobody uses but the API allows: 1, 2, 3, 5, 255. */
static void test_odd_small_head_dims(void **state)
{
    (void)state;
    const size_t dims[] = {1, 2, 3, 5, 255};
    for (size_t i = 0; i < 5; ++i) {
        fa_case c = base_case();
        c.head_dim = dims[i];
        c.seqlen_q = 33;
        c.seqlen_k = 47;
        c.causal = (int)(i % 2);
        c.seed = 300 + i;
        check(&c);
    }
}

static void test_seqlens(void **state)
{
    (void)state;
    const size_t lens[] = {1, 2, 3, 17, 97, 113, 127, 128, 129, 1023, 1025};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; ++i)
        for (int causal = 0; causal < 2; ++causal) {
            fa_case c = base_case();
            c.heads_q = c.heads_kv = 1;
            c.seqlen_q = c.seqlen_k = lens[i];
            c.causal = causal;
            c.seed = 400 + 2 * i + (size_t)causal;
            check(&c);
        }
}

static void test_unequal_seqlens(void **state)
{
    (void)state;
    const size_t pairs[][2] = {{1, 239}, {239, 1}, {113, 203}, {203, 113}, {128, 17}, {5, 1025}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i)
        for (int causal = 0; causal < 2; ++causal) {
            fa_case c = base_case();
            c.seqlen_q = pairs[i][0];
            c.seqlen_k = pairs[i][1];
            c.causal = causal;
            c.dtype = dtypes[i % 3];
            c.seed = 500 + 2 * i + (size_t)causal;
            check(&c);
        }
}

static void test_batch_heads_gqa(void **state)
{
    (void)state;
    /* (batch, heads_q, heads_kv): odd batch x heads, GQA, MQA; 70 heads
     * in all: more than one group of heads (common.cl, FCL_HEAD_GROUP) */
    const size_t shapes[][3] = {{3, 5, 5}, {2, 6, 2}, {3, 4, 1}, {1, 8, 4}, {5, 14, 14}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        fa_case c = base_case();
        c.batch = shapes[i][0];
        c.heads_q = shapes[i][1];
        c.heads_kv = shapes[i][2];
        c.seqlen_q = 37;
        c.seqlen_k = 70;
        c.head_dim = 40;
        c.causal = (int)(i % 2);
        c.dtype = dtypes[i % 3];
        c.seed = 600 + i;
        check(&c);
    }
}

static void test_layouts_and_strides(void **state)
{
    (void)state;
    for (int layout = 0; layout < 2; ++layout)
        for (int padded = 0; padded < 2; ++padded) {
            fa_case c = base_case();
            c.batch = 2;
            c.heads_q = 4;
            c.heads_kv = 2;
            c.layout = (fcl_layout_kind)layout;
            c.padded = padded;
            c.causal = padded;
            c.dtype = dtypes[(layout + padded) % 3];
            c.seed = 700 + (uint64_t)(2 * layout + padded);
            check(&c);
        }
}

static void test_custom_scale(void **state)
{
    (void)state;
    const float scales[] = {0.3f, 1.7f, -0.2f};
    for (size_t i = 0; i < 3; ++i) {
        fa_case c = base_case();
        c.scale = scales[i];
        c.causal = (int)(i % 2);
        c.seed = 800 + i;
        check(&c);
    }
}

/* causal with seqlen_q > seqlen_k: the first rows see no key. */
static void test_fully_masked_rows(void **state)
{
    (void)state;
    for (size_t t = 0; t < 3; ++t) {
        fa_case c = base_case();
        c.seqlen_q = 150;
        c.seqlen_k = 40;
        c.causal = 1;
        c.dtype = dtypes[t];
        c.seed = 900 + t;
        fa_result r;
        assert_true(fa_check_forward(ctx, &c, &r));
        assert_int_equal(r.masked_rows_ok, 1);
    }
}

/* Large scores (inputs x5 / x3): the online softmax must not overflow. */
static void test_large_scores(void **state)
{
    (void)state;
    for (size_t t = 0; t < 3; ++t) {
        fa_case c = base_case();
        c.input_scale[0] = 5;
        c.input_scale[1] = 3;
        c.input_scale[2] = 3;
        c.dtype = dtypes[t];
        c.causal = 1;
        c.seed = 950 + t;
        check(&c);
    }
}

/* A value head dim below the key's (head_dim_v): DeepSeek-V3/R1's 192/128
 * in every storage type, split-KV (the merge's width), GQA, strided layouts
 * with gaps, and widths that are no multiple of anything (1, 7, 33). */
static void test_value_head_dim(void **state)
{
    (void)state;
    const size_t dims[][2] = {{192, 128}, {192, 128}, {192, 128}, {64, 32},
                              {40, 7},    {33, 1},    {256, 16},  {96, 33}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i) {
        fa_variants v;
        fa_case c = base_case();
        fa_value_dim_case(&c, &v, dims[i][0], dims[i][1], i);
        v.num_splits = i % 4 == 2 ? 3 : 0;
        c.seed = 900 + i;
        check(&c);
    }
    /* decode-sized (few query rows: GQA packing, automatic split-KV) */
    fa_variants v = fa_no_variants();
    v.head_dim_v = 128;
    fa_case c = base_case();
    c.head_dim = 192, c.var = &v, c.dtype = FCL_DTYPE_FP16;
    c.heads_q = 8, c.heads_kv = 1, c.seqlen_q = 1, c.seqlen_k = 700, c.seed = 920;
    check(&c);
}

static void test_bitwise_repeatable(void **state)
{
    (void)state;
    fa_case c = base_case();
    c.batch = 2;
    c.seqlen_q = c.seqlen_k = 300;
    c.causal = 1;
    c.dtype = FCL_DTYPE_FP16;
    assert_true(fa_check_deterministic(ctx, &c, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_dims_and_dtypes),
        cmocka_unit_test(test_odd_small_head_dims),
        cmocka_unit_test(test_seqlens),
        cmocka_unit_test(test_unequal_seqlens),
        cmocka_unit_test(test_batch_heads_gqa),
        cmocka_unit_test(test_layouts_and_strides),
        cmocka_unit_test(test_custom_scale),
        cmocka_unit_test(test_fully_masked_rows),
        cmocka_unit_test(test_large_scores),
        cmocka_unit_test(test_value_head_dim),
        cmocka_unit_test(test_bitwise_repeatable),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
