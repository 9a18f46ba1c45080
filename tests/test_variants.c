/* test_variants.c - the attention variants against the float64 reference,
 * forward and backward: sliding windows, ALiBi, softcap, dropout (Philox
 * known answers, the mask itself, the kept fraction), packed variable-length
 * batches with empty sequences, block-sparse masks, all of them together,
 * and every invalid parameter's status with nothing written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reference.h"
#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ctx fa_ctx

static const fcl_dtype dtypes[] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};

static fa_case base_case(const fa_variants *v, uint64_t seed)
{
    fa_case c = {1, 2, 2, 75, 90, 40, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed, v};
    return c;
}

static void check_both(const fa_case *c)
{
    fa_result r;
    assert_true(fa_check_forward(ctx, c, &r));
    assert_true(fa_check_backward(ctx, c, &r));
}

/* Philox4x32-10 known answers (Random123's kat_vectors), on the device and
 * in the host reference. */
static void test_philox_known_answers(void **state)
{
    (void)state;
    const uint32_t ctr[12] = {0, 0, 0, 0, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
                              0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
    const uint32_t key[6] = {0, 0, 0xffffffffu, 0xffffffffu, 0xa4093822u, 0x299f31d0u};
    const uint32_t expect[12] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u,
                                 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu,
                                 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
    uint32_t out[12];
    assert_int_equal(fcl_philox_host(ctx, 3, ctr, key, out), FCL_OK);
    assert_memory_equal(out, expect, sizeof expect);
    for (int i = 0; i < 3; ++i) {
        ref_philox4x32_10(ctr + 4 * i, key + 2 * i, out + 4 * i);
        assert_memory_equal(out + 4 * i, expect + 4 * i, 16);
    }
}

static void test_sliding_window(void **state)
{
    (void)state;
    const long windows[][2] = {{16, 16}, {0, 0}, {5, -1}, {-1, 3}, {40, 0}, {1000, 1000}};
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; ++i) {
        fa_variants v = fa_no_variants();
        v.window_left = windows[i][0];
        v.window_right = windows[i][1];
        fa_case c = base_case(&v, 4000 + i);
        c.seqlen_q = i % 2 ? 130 : 70; /* the diagonal moves with seqlen_k - seqlen_q */
        c.dtype = dtypes[i % 3];
        c.causal = i == 4; /* causal and a left window together */
        check_both(&c);
    }
}

/* causal is exactly the window (-1, 0). */
static void test_causal_is_a_window(void **state)
{
    (void)state;
    fa_variants v = fa_no_variants();
    v.window_right = 0;
    fa_case windowed = base_case(&v, 4100), causal = base_case(NULL, 4100);
    causal.causal = 1;
    fa_result a, b;
    assert_true(fa_check_forward(ctx, &windowed, &a));
    assert_true(fa_check_forward(ctx, &causal, &b));
    assert_true(a.err == b.err); /* same inputs, same kernel result, same error */
}

static void test_alibi(void **state)
{
    (void)state;
    for (int mode = 1; mode <= 2; ++mode)
        for (int causal = 0; causal < 2; ++causal) {
            fa_variants v = fa_no_variants();
            v.alibi = (fcl_alibi_mode)mode;
            fa_case c = base_case(&v, 4200 + 2 * (uint64_t)mode + (uint64_t)causal);
            c.batch = 2;
            c.heads_q = 4;
            c.causal = causal;
            c.dtype = dtypes[(mode + causal) % 3];
            check_both(&c);
        }
}

static void test_softcap(void **state)
{
    (void)state;
    const float caps[] = {5.0f, 30.0f};
    for (int i = 0; i < 2; ++i) {
        fa_variants v = fa_no_variants();
        v.softcap = caps[i];
        fa_case c = base_case(&v, 4300 + (uint64_t)i);
        c.input_scale[0] = 4; /* scores well into the tanh's curve */
        c.causal = i;
        c.dtype = dtypes[i + 1];
        check_both(&c);
    }
}

static void test_dropout(void **state)
{
    (void)state;
    const float ps[] = {0.1f, 0.5f, 0.85f};
    for (int i = 0; i < 3; ++i) {
        fa_variants v = fa_no_variants();
        v.dropout_p = ps[i];
        v.dropout_seed = 0x123456789abcdefull + (uint64_t)i;
        v.dropout_offset = 77u * (uint32_t)i;
        fa_case c = base_case(&v, 4400 + (uint64_t)i);
        c.heads_q = 4;
        c.heads_kv = 2;
        c.causal = i % 2;
        c.dtype = dtypes[i];
        check_both(&c);
    }
}

/* The device's dropout mask is the host reference's, and keeps 1 - p. */
static void test_dropout_mask_and_fraction(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 2, 4, 4, 300, 500, 16, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    d.dropout_p = 0.3f;
    d.dropout_seed = 42;
    d.dropout_offset = 9;
    const size_t n = 2 * 4 * 300 * 500;
    uint8_t *mask = malloc(n);
    assert_int_equal(fcl_dropout_mask_host(ctx, &d, mask), FCL_OK);
    ref_variants rv;
    memset(&rv, 0, sizeof rv);
    rv.window_left = rv.window_right = -1;
    rv.dropout_p = 0.3, rv.dropout_seed = 42, rv.dropout_offset = 9;
    ref_problem p = {2, 4, 4, 300, 500, 16, 0.25, 0, FCL_DTYPE_FP16, &rv, 0};
    size_t kept = 0, x = 0;
    for (size_t b = 0; b < 2; ++b)
        for (size_t h = 0; h < 4; ++h)
            for (size_t i = 0; i < 300; ++i)
                for (size_t j = 0; j < 500; ++j, ++x) {
                    assert_int_equal(mask[x], ref_dropout_factor(&p, b, h, i, j) != 0);
                    kept += mask[x];
                }
    assert_true(fabs((double)kept / (double)n - 0.7) < 0.01); /* 1.2M draws: sd 0.0004 */
    d.dropout_p = 0; /* no dropout: nothing to show */
    assert_int_equal(fcl_dropout_mask_host(ctx, &d, mask), FCL_ERROR_INVALID_VALUE);
    free(mask);
}

static void test_varlen(void **state)
{
    (void)state;
    /* very different lengths, a length-1 and an empty sequence */
    const int lq[5] = {37, 1, 0, 130, 64}, lk[5] = {50, 9, 0, 130, 1};
    for (int t = 0; t < 3; ++t) {
        fa_variants v = fa_no_variants();
        v.seqlens_q = lq;
        v.seqlens_k = lk;
        fa_case c = base_case(&v, 4500 + (uint64_t)t);
        c.batch = 5;
        c.heads_q = 4;
        c.heads_kv = 1 + (size_t)t % 2 * 1;
        c.seqlen_q = 130; /* the longest */
        c.seqlen_k = 130;
        c.causal = t != 1;
        c.padded = t == 2;
        c.dtype = dtypes[t];
        check_both(&c);
    }
    /* stated maxima above the longest sequences: the launches are sized by
     * the longest (a fuzzed call with seqlen_k 2^30 - 1 for 12 keys ran 2^24
     * empty work-groups, minutes on a CPU), the results stay right (the
     * references here hold seqlen_q x seqlen_k, so the maxima stay modest) */
    fa_variants v = fa_no_variants();
    v.seqlens_q = lq;
    v.seqlens_k = lk;
    fa_case c = base_case(&v, 4510);
    c.batch = 5;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seqlen_q = 300;
    c.seqlen_k = 700;
    c.causal = 1;
    c.dtype = FCL_DTYPE_FP16;
    check_both(&c);
}

static void test_block_sparse(void **state)
{
    (void)state;
    const size_t blocks[][2] = {{16, 32}, {64, 64}, {7, 13}};
    const double density[] = {0.5, 0.3, 0.8};
    for (int i = 0; i < 3; ++i) {
        fa_variants v = fa_no_variants();
        v.block_m = blocks[i][0];
        v.block_n = blocks[i][1];
        v.block_density = density[i];
        v.block_mask_shared = i == 1;
        fa_case c = base_case(&v, 4600 + (uint64_t)i);
        c.batch = 2;
        c.seqlen_q = 150;
        c.seqlen_k = 200;
        c.causal = i == 2;
        c.dtype = dtypes[i];
        check_both(&c);
    }
}

/* Everything at once: window + ALiBi + softcap + dropout + packed sequences +
 * block mask, with GQA, in every storage type and both layouts of padding. */
static void test_all_together(void **state)
{
    (void)state;
    const int lq[3] = {70, 0, 33}, lk[3] = {90, 12, 33};
    for (int t = 0; t < 3; ++t) {
        fa_variants v = fa_no_variants();
        v.window_left = 24;
        v.window_right = t == 0 ? 8 : -1;
        v.alibi = FCL_ALIBI_PER_BATCH_HEAD;
        v.softcap = t == 1 ? 0.0f : 20.0f;
        v.dropout_p = 0.2f;
        v.dropout_seed = 99 + (uint64_t)t;
        v.seqlens_q = lq;
        v.seqlens_k = lk;
        v.block_m = 16;
        v.block_n = 16;
        v.block_density = 0.7;
        fa_case c = base_case(&v, 4700 + (uint64_t)t);
        c.batch = 3;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seqlen_q = 70;
        c.seqlen_k = 90;
        c.causal = t == 2;
        c.padded = t == 1;
        c.dtype = dtypes[t];
        check_both(&c);
    }
}

/* Shapes the NVIDIA tensor-core forward takes (fp16/bf16, head_dim a
 * multiple of 16, aligned rows): there every variant runs through mma.sync;
 * elsewhere these are more portable cases. */
static void test_tensor_core_shapes(void **state)
{
    (void)state;
    const int lq[2] = {100, 64}, lk[2] = {130, 64};
    for (int t = 0; t < 4; ++t) {
        fa_variants v = fa_no_variants();
        if (t >= 1) {
            v.window_left = 40;
            v.alibi = FCL_ALIBI_PER_HEAD;
            v.dropout_p = 0.1f;
            v.dropout_seed = 11;
        }
        if (t >= 2) {
            v.softcap = 15.0f;
            v.block_m = 32;
            v.block_n = 32;
            v.block_density = 0.6;
        }
        if (t == 3) {
            v.seqlens_q = lq;
            v.seqlens_k = lk;
        }
        fa_case c = base_case(&v, 4900 + (uint64_t)t);
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seqlen_q = 100;
        c.seqlen_k = 130;
        c.head_dim = t % 2 ? 128 : 64;
        c.dtype = t % 2 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        c.causal = t >= 2;
        check_both(&c);
    }
}

static void test_repeatable_with_dropout(void **state)
{
    (void)state;
    fa_variants v = fa_no_variants();
    v.dropout_p = 0.25f;
    v.dropout_seed = 5;
    v.window_left = 30;
    v.alibi = FCL_ALIBI_PER_HEAD;
    fa_case c = base_case(&v, 4800);
    c.causal = 1;
    assert_true(fa_check_deterministic(ctx, &c, 1));
}

/* ---- invalid parameters: a status, and nothing written -------------------- */

enum { B = 2, H = 2, S = 40, D = 8 };
#define SENTINEL 0x5Au

static cl_mem buffer(size_t bytes, const void *init)
{
    cl_int err;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx),
                              CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                              (void *)init, &err);
    assert_int_equal(err, CL_SUCCESS);
    return m;
}

static void expect_status(const fcl_attention_desc *d, const fcl_attention_aux *aux,
                          fcl_status expected)
{
    const size_t n = (size_t)B * H * S * D * 4;
    unsigned char *fill = malloc(n), *back = malloc(n);
    memset(fill, SENTINEL, n);
    cl_mem in = buffer(n, fill), o = buffer(n, fill), lse = buffer(n, fill);
    cl_mem dq = buffer(n, fill), dk = buffer(n, fill), dv = buffer(n, fill);
    assert_int_equal(fcl_attention_forward_ex(ctx, d, aux, in, in, in, o, lse, 0, NULL, NULL),
                     expected);
    assert_int_equal(fcl_attention_backward_ex(ctx, d, aux, in, in, in, in, lse, in, dq, dk, dv, 0,
                                               NULL, NULL),
                     expected);
    assert_int_equal(clFinish(fcl_context_cl_queue(ctx)), CL_SUCCESS);
    cl_mem outs[5] = {o, lse, dq, dk, dv};
    for (int i = 0; i < 5; ++i) {
        assert_int_equal(clEnqueueReadBuffer(fcl_context_cl_queue(ctx), outs[i], CL_TRUE, 0, n,
                                             back, 0, NULL, NULL),
                         CL_SUCCESS);
        assert_memory_equal(back, fill, n);
        clReleaseMemObject(outs[i]);
    }
    clReleaseMemObject(in);
    free(fill);
    free(back);
}

static fcl_attention_desc small_desc(void)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H, S, S, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    return d;
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    fcl_attention_desc d = small_desc();
    const float bad_p[] = {1.0f, -0.1f, NAN, 7.0f};
    for (int i = 0; i < 4; ++i) {
        d = small_desc();
        d.dropout_p = bad_p[i];
        expect_status(&d, NULL, FCL_ERROR_INVALID_VALUE);
    }
    d = small_desc();
    d.window_left = -2;
    expect_status(&d, NULL, FCL_ERROR_INVALID_VALUE);
    d = small_desc();
    d.window_right = -5;
    expect_status(&d, NULL, FCL_ERROR_INVALID_VALUE);
    d = small_desc();
    d.softcap = -1.0f;
    expect_status(&d, NULL, FCL_ERROR_INVALID_VALUE);
    d = small_desc();
    d.softcap = INFINITY;
    expect_status(&d, NULL, FCL_ERROR_INVALID_VALUE);
    d = small_desc();
    d.alibi = FCL_ALIBI_PER_HEAD; /* no slopes given */
    expect_status(&d, NULL, FCL_ERROR_NULL_ARGUMENT);
    const float one_slope = 0.5f;
    fcl_attention_aux aux = {.alibi_slopes = buffer(sizeof one_slope, &one_slope)};
    expect_status(&d, &aux, FCL_ERROR_BUFFER_TOO_SMALL); /* H slopes needed */
    clReleaseMemObject(aux.alibi_slopes);
    d.alibi = (fcl_alibi_mode)3;
    expect_status(&d, NULL, FCL_ERROR_INVALID_VALUE);

    /* block masks of the wrong shape */
    d = small_desc();
    d.block_m = 16;
    d.block_n = 16;
    expect_status(&d, NULL, FCL_ERROR_NULL_ARGUMENT);
    unsigned char blocks[9];
    memset(blocks, 1, sizeof blocks);
    aux = (fcl_attention_aux){.block_mask = buffer(sizeof blocks, blocks)};
    d.block_mask_stride_head = 9; /* two heads need 18 bytes */
    expect_status(&d, &aux, FCL_ERROR_BUFFER_TOO_SMALL);
    d.block_mask_stride_head = 0;
    d.block_n = 0;
    expect_status(&d, &aux, FCL_ERROR_INVALID_VALUE);
    clReleaseMemObject(aux.block_mask);

    /* cu_seqlens: unsorted, not starting at 0, too long, past the total */
    d = small_desc();
    d.varlen = 1;
    d.total_q = d.total_k = 40;
    expect_status(&d, NULL, FCL_ERROR_NULL_ARGUMENT);
    const int bad[][3] = {{0, 30, 20}, {1, 10, 20}, {0, 5, 46}, {0, 0, 41}};
    const int good[3] = {0, 20, 40};
    for (int i = 0; i < 4; ++i) {
        aux = (fcl_attention_aux){.cu_seqlens_q = buffer(sizeof bad[i], bad[i]),
                                  .cu_seqlens_k = buffer(sizeof good, good)};
        expect_status(&d, &aux, FCL_ERROR_INVALID_CU_SEQLENS);
        clReleaseMemObject(aux.cu_seqlens_q);
        clReleaseMemObject(aux.cu_seqlens_k);
    }
    d.total_q = 0;
    expect_status(&d, NULL, FCL_ERROR_INVALID_SHAPE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_causal_is_a_window),
        cmocka_unit_test(test_alibi),
        cmocka_unit_test(test_softcap),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_dropout_mask_and_fraction),
        cmocka_unit_test(test_varlen),
        cmocka_unit_test(test_block_sparse),
        cmocka_unit_test(test_all_together),
        cmocka_unit_test(test_tensor_core_shapes),
        cmocka_unit_test(test_repeatable_with_dropout),
        cmocka_unit_test(test_invalid_parameters),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
