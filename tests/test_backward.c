/* test_backward.c - dQ, dK, dV against the float64 analytic gradients on the
 * default device: every storage type and head_dim, awkward and unequal
 * lengths, batch/heads, GQA/MQA (dK, dV summed over the sharing heads), both
 * layouts with strides (dO non-contiguous too), causal, custom scale, fully
 * masked rows, large scores, bitwise repeatability.  Tolerance rule:
 * test_support.h (factor 3 for gradients). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reference.h"
#include "test_support.h"

#include <math.h>
#include <stdlib.h>

#define ctx fa_ctx

static fa_case base_case(void)
{
    fa_case c = {1, 2, 2, 67, 91, 64, FCL_DTYPE_FP32, 0, 0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 1, NULL};
    return c;
}

static void check(const fa_case *c)
{
    fa_result r;
    assert_true(fa_check_backward(ctx, c, &r));
}

static const size_t head_dims[] = {8, 16, 32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 256};
static const fcl_dtype dtypes[] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};

static void test_head_dims_and_dtypes(void **state)
{
    (void)state;
    for (size_t t = 0; t < 3; ++t)
        for (size_t i = 0; i < sizeof head_dims / sizeof head_dims[0]; ++i) {
            fa_case c = base_case();
            c.head_dim = head_dims[i];
            c.dtype = dtypes[t];
            c.causal = (int)((i + t) % 2);
            c.seed = 1100 + i + 20 * t;
            check(&c);
        }
}

static void test_odd_small_head_dims(void **state)
{
    (void)state;
    const size_t dims[] = {1, 3, 255};
    for (size_t i = 0; i < 3; ++i) {
        fa_case c = base_case();
        c.head_dim = dims[i];
        c.seqlen_q = 29;
        c.seqlen_k = 41;
        c.causal = (int)(i % 2);
        c.seed = 1300 + i;
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
            c.head_dim = lens[i] > 1000 ? 32 : 64;
            c.causal = causal;
            c.seed = 1400 + 2 * i + (size_t)causal;
            check(&c);
        }
}

static void test_unequal_seqlens(void **state)
{
    (void)state;
    const size_t pairs[][2] = {{1, 239}, {239, 1}, {113, 203}, {203, 113}, {128, 17}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i)
        for (int causal = 0; causal < 2; ++causal) {
            fa_case c = base_case();
            c.seqlen_q = pairs[i][0];
            c.seqlen_k = pairs[i][1];
            c.causal = causal;
            c.dtype = dtypes[i % 3];
            c.seed = 1500 + 2 * i + (size_t)causal;
            check(&c);
        }
}

static void test_batch_heads_gqa(void **state)
{
    (void)state;
    const size_t shapes[][3] = {{3, 5, 5}, {2, 6, 2}, {3, 4, 1}, {1, 8, 4}};
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
        c.seed = 1600 + i;
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
            c.causal = 1 - padded;
            c.dtype = dtypes[(layout + padded) % 3];
            c.seed = 1700 + (uint64_t)(2 * layout + padded);
            check(&c);
        }
}

static void test_custom_scale(void **state)
{
    (void)state;
    const float scales[] = {0.3f, 1.7f};
    for (size_t i = 0; i < 2; ++i) {
        fa_case c = base_case();
        c.scale = scales[i];
        c.causal = (int)i;
        c.seed = 1800 + i;
        check(&c);
    }
}

/* Rows that see no key get zero gradients, never NaN. */
static void test_fully_masked_rows(void **state)
{
    (void)state;
    for (size_t t = 0; t < 3; ++t) {
        fa_case c = base_case();
        c.seqlen_q = 150;
        c.seqlen_k = 40;
        c.causal = 1;
        c.dtype = dtypes[t];
        c.seed = 1900 + t;
        check(&c);
    }
}

/* The overflow case: Q x5, K and V x3, short sequences. */
static void test_large_scores(void **state)
{
    (void)state;
    const size_t lens[] = {1, 2, 5, 17, 128};
    for (size_t i = 0; i < 5; ++i)
        for (size_t t = 0; t < 3; ++t) {
            fa_case c = base_case();
            c.seqlen_q = c.seqlen_k = lens[i];
            c.input_scale[0] = 5;
            c.input_scale[1] = 3;
            c.input_scale[2] = 3;
            c.dtype = dtypes[t];
            c.causal = (int)((i + t) % 2);
            c.seed = 2000 + 3 * i + t;
            check(&c);
        }
}

static void test_bitwise_repeatable(void **state)
{
    (void)state;
    fa_case c = base_case();
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seqlen_q = c.seqlen_k = 200;
    c.causal = 1;
    c.dtype = FCL_DTYPE_BF16;
    assert_true(fa_check_deterministic(ctx, &c, 1));
}

/* A caller's out-of-order queue: two backward calls enqueued one after
 * the other with no event between them share the context's workspace
 * (delta), so each must wait for the one before (fcl_scratch_wait_list).
 * Their gradients must be bitwise those of the same call run alone
 * (the backward is deterministic); were the workspace unguarded, the second
 * call's delta could overwrite the first's while its kernels read it. */
static void test_out_of_order_queue(void **state)
{
    (void)state;
    cl_command_queue q = NULL;
    fcl_context *ooo = NULL;
    const int made = test_out_of_order_context(ctx, &q, &ooo);
    assert_true(made >= 0);
    if (made == 0)
        return;
    enum { B = 1, H = 2, N = 192, D = 32, CALLS = 3, IN = 6, OUT = 3, ROUNDS = 4 };
    const size_t n = (size_t)B * N * H * D, rows = (size_t)B * H * N;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H, N, N, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.causal = 1;
    const cl_context clc = fcl_context_cl_context(ooo);
    const cl_command_queue queue = fcl_context_cl_queue(ooo);
    cl_mem in[CALLS][IN], out[CALLS][OUT];
    float *alone[CALLS][OUT], *host = malloc(n * sizeof *host);
    rng r = {4242};
    cl_int err = CL_SUCCESS;
    for (int c = 0; c < CALLS; ++c) {
        for (int i = 0; i < IN; ++i) { /* q, k, v, dout random; o, lse from the forward */
            const size_t bytes = (i == 5 ? rows : n) * sizeof(float);
            for (size_t j = 0; j < n; ++j)
                host[j] = (float)rng_normal(&r);
            in[c][i] = clCreateBuffer(clc, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host,
                                      &err);
            assert_int_equal(err, CL_SUCCESS);
        }
        assert_int_equal(fcl_attention_forward(ooo, &d, in[c][0], in[c][1], in[c][2], in[c][4],
                                               in[c][5], 0, NULL, NULL),
                         FCL_OK);
        assert_int_equal(clFinish(queue), CL_SUCCESS);
        for (int i = 0; i < OUT; ++i) {
            out[c][i] = clCreateBuffer(clc, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
            assert_int_equal(err, CL_SUCCESS);
            alone[c][i] = malloc(n * sizeof(float));
        }
    }
    for (int round = 0; round < ROUNDS; ++round) { /* alone, then the calls back to back */
        for (int c = 0; c < CALLS; ++c) {
            assert_int_equal(fcl_attention_backward(ooo, &d, in[c][0], in[c][1], in[c][2],
                                                    in[c][4], in[c][5], in[c][3], out[c][0],
                                                    out[c][1], out[c][2], 0, NULL, NULL),
                             FCL_OK);
            if (round == 0)
                assert_int_equal(clFinish(queue), CL_SUCCESS);
        }
        assert_int_equal(clFinish(queue), CL_SUCCESS);
        for (int c = 0; c < CALLS; ++c)
            for (int i = 0; i < OUT; ++i) {
                float *got = round == 0 ? alone[c][i] : host;
                assert_int_equal(clEnqueueReadBuffer(queue, out[c][i], CL_TRUE, 0,
                                                     n * sizeof(float), got, 0, NULL, NULL),
                                 CL_SUCCESS);
                if (round > 0)
                    assert_memory_equal(host, alone[c][i], n * sizeof(float));
                const cl_float zero = 0.0f; /* the next round writes them again */
                assert_int_equal(clEnqueueFillBuffer(queue, out[c][i], &zero, sizeof zero, 0,
                                                     n * sizeof(float), 0, NULL, NULL),
                                 CL_SUCCESS);
                assert_int_equal(clFinish(queue), CL_SUCCESS);
            }
    }
    for (int c = 0; c < CALLS; ++c) {
        for (int i = 0; i < IN; ++i)
            clReleaseMemObject(in[c][i]);
        for (int i = 0; i < OUT; ++i)
            clReleaseMemObject(out[c][i]), free(alone[c][i]);
    }
    free(host);
    fcl_context_destroy(ooo);
    clReleaseCommandQueue(q);
}

/* L = sum(O * dO) as a function of one input, in float64. */
static double loss(const ref_problem *p, const double *q, const double *k, const double *v,
                   const double *dout, size_t nq)
{
    double *o = malloc(nq * sizeof *o), *lse = malloc(p->batch * p->heads_q * p->seqlen_q * 8);
    ref_forward_f64(p, q, k, v, o, lse);
    double l = 0;
    for (size_t i = 0; i < nq; ++i)
        l += o[i] * dout[i];
    free(o);
    free(lse);
    return l;
}

/* Central differences of the float64 forward (h = 1e-5: truncation ~1e-10,
 * cancellation ~1e-11) check the analytic float64 gradients to 1e-7, and our
 * fp32 kernel's gradients to the fp32 rule: 3x the low-precision reference's
 * distance from the differences, plus eps as in test_support.h.  A tiny
 * case: GQA, causal with seqlen_q < seqlen_k. */
/* dQ, dK, dV with a value head dim below the key's (head_dim_v): 192/128
 * in every storage type, GQA (dV summed over the group), causal, strided
 * layouts with gaps, odd widths. */
static void test_value_head_dim(void **state)
{
    (void)state;
    const size_t dims[][2] = {{192, 128}, {192, 128}, {192, 128}, {64, 32}, {40, 7}, {33, 1}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i) {
        fa_variants v;
        fa_case c = base_case();
        fa_value_dim_case(&c, &v, dims[i][0], dims[i][1], i);
        c.seed = 950 + i;
        check(&c);
    }
}

static void test_finite_differences(void **state)
{
    (void)state;
    enum { B = 1, HQ = 2, HK = 1, SQ = 5, SK = 7, D = 4 };
    const size_t nq = B * HQ * SQ * D, nk = B * HK * SK * D;
    ref_problem p = {B, HQ, HK, SQ, SK, D, 0.5, 1, FCL_DTYPE_FP32, NULL, 0};
    double x[3][B * HQ * SK * D], dout[B * HQ * SQ * D];
    const size_t n[3] = {nq, nk, nk};
    rng g = {77};
    for (int t = 0; t < 3; ++t)
        for (size_t i = 0; i < n[t]; ++i) x[t][i] = (float)rng_normal(&g);
    for (size_t i = 0; i < nq; ++i) dout[i] = (float)rng_normal(&g);

    double g64[3][B * HQ * SK * D], glp[3][B * HQ * SK * D];
    ref_backward_f64(&p, x[0], x[1], x[2], dout, g64[0], g64[1], g64[2]);
    ref_backward_lowp(&p, x[0], x[1], x[2], dout, glp[0], glp[1], glp[2]);

    /* ours, through the host call (fp32 storage) */
    float xf[3][B * HQ * SK * D], df[B * HQ * SQ * D], of[B * HQ * SQ * D], lse[B * HQ * SQ];
    float gf[3][B * HQ * SK * D];
    for (int t = 0; t < 3; ++t)
        for (size_t i = 0; i < n[t]; ++i) xf[t][i] = (float)x[t][i];
    for (size_t i = 0; i < nq; ++i) df[i] = (float)dout[i];
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, HQ, HK, SQ, SK, D, FCL_DTYPE_FP32, FCL_LAYOUT_BHSD);
    d.causal = 1;
    d.softmax_scale = 0.5f;
    assert_int_equal(fcl_attention_forward_host(ctx, &d, xf[0], xf[1], xf[2], of, lse), FCL_OK);
    assert_int_equal(fcl_attention_backward_host(ctx, &d, xf[0], xf[1], xf[2], of, lse, df, gf[0],
                                                 gf[1], gf[2]),
                     FCL_OK);

    const double h = 1e-5;
    for (int t = 0; t < 3; ++t) {
        double err64 = 0, err_ours = 0, err_lp = 0, maxfd = 0;
        for (size_t i = 0; i < n[t]; ++i) {
            const double keep = x[t][i];
            x[t][i] = keep + h;
            const double up = loss(&p, x[0], x[1], x[2], dout, nq);
            x[t][i] = keep - h;
            const double down = loss(&p, x[0], x[1], x[2], dout, nq);
            x[t][i] = keep;
            const double fd = (up - down) / (2 * h);
            err64 = fmax(err64, fabs(g64[t][i] - fd));
            err_ours = fmax(err_ours, fabs(gf[t][i] - fd));
            err_lp = fmax(err_lp, fabs(glp[t][i] - fd));
            maxfd = fmax(maxfd, fabs(fd));
        }
        assert_true(maxfd > 0.1); /* a real gradient, not zeros */
        assert_true(err64 <= 1e-7 * maxfd);
        const double eps = (ldexp(1.0, -24) * (1 + sqrt((double)(D + SK)))) * maxfd;
        assert_true(err_ours <= 3 * err_lp + eps);
    }
}

/* Q, K, V of one packed (B, S, 3, H, d) array, and dQ, dK, dV written into
 * one such array, as PyTorch's packed QKV projections keep them: bitwise the
 * gradients of separate arrays, and every gradient lands (the host form once
 * copied each output's whole byte range back, so dV's range, written last,
 * put back the old bytes between its rows: dQ's and dK's). */
static void test_packed_qkv_gradients(void **state)
{
    (void)state;
    enum { Bp = 2, Sp = 45, Hp = 3, Dp = 32 };
    const size_t row = 3 * Hp * Dp, n = (size_t)Bp * Sp * row, one = (size_t)Bp * Sp * Hp * Dp;
    float *qkv = malloc(n * sizeof *qkv), *dqkv = malloc(n * sizeof *dqkv);
    float *o = malloc(one * sizeof *o), *dout = malloc(one * sizeof *dout);
    float *lse = malloc((size_t)Bp * Hp * Sp * sizeof *lse);
    float *sep = malloc(3 * one * sizeof *sep); /* dQ, dK, dV of separate arrays */
    rng r = {77};
    for (size_t i = 0; i < n; ++i)
        qkv[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < one; ++i)
        dout[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < n; ++i)
        dqkv[i] = NAN; /* every element must be written */
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, Bp, Hp, Hp, Sp, Sp, Dp, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.causal = 1;
    fcl_layout packed = {0, Sp * row, Dp, row};
    d.q = d.k = d.v = packed;
    d.k.offset = Hp * Dp;
    d.v.offset = 2 * Hp * Dp;
    assert_int_equal(fcl_attention_forward_host(ctx, &d, qkv, qkv, qkv, o, lse), FCL_OK);
    fcl_attention_desc ds = d; /* separate, contiguous gradients */
    ds.dq = ds.dk = ds.dv = fcl_layout_contiguous(FCL_LAYOUT_BSHD, Hp, Sp, Dp);
    assert_int_equal(fcl_attention_backward_host(ctx, &ds, qkv, qkv, qkv, o, lse, dout, sep,
                                                 sep + one, sep + 2 * one),
                     FCL_OK);
    d.dq = d.q, d.dk = d.k, d.dv = d.v;
    assert_int_equal(fcl_attention_backward_host(ctx, &d, qkv, qkv, qkv, o, lse, dout, dqkv, dqkv,
                                                 dqkv),
                     FCL_OK);
    for (size_t t = 0; t < 3; ++t)
        for (size_t b = 0; b < Bp; ++b)
            for (size_t s = 0; s < Sp; ++s)
                for (size_t h = 0; h < Hp; ++h)
                    for (size_t x = 0; x < Dp; ++x) {
                        const float want = sep[t * one + ((b * Sp + s) * Hp + h) * Dp + x];
                        const float got = dqkv[b * Sp * row + s * row + (t * Hp + h) * Dp + x];
                        assert_memory_equal(&got, &want, sizeof got);
                    }
    free(qkv), free(dqkv), free(o), free(dout), free(lse), free(sep);
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
        cmocka_unit_test(test_bitwise_repeatable),
        cmocka_unit_test(test_out_of_order_queue),
        cmocka_unit_test(test_value_head_dim),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_packed_qkv_gradients),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
