/* test_errors.c - every bad input returns its status and writes nothing.
 * Each case fills the outputs with a sentinel, makes one argument wrong, and
 * checks the status and that every output byte is unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal.h"
#include "test_support.h"

#include <math.h>
#include <string.h>


enum { B = 2, H = 4, HK = 2, S = 33, D = 24 };

static fcl_context *ctx;
static cl_mem q, k, v, o, lse, dout, dq, dk, dv, small;
static size_t tensor_bytes;

static cl_mem buffer(size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    return m;
}

static void fill(cl_mem m, size_t bytes, unsigned char byte)
{
    unsigned char *h = malloc(bytes);
    memset(h, byte, bytes);
    assert_int_equal(clEnqueueWriteBuffer(fcl_context_cl_queue(ctx), m, CL_TRUE, 0, bytes, h, 0,
                                          NULL, NULL),
                     CL_SUCCESS);
    free(h);
}

static int unchanged(cl_mem m, size_t bytes, unsigned char byte)
{
    return fa_buffer_all(ctx, m, bytes, byte);
}

static int setup(void **state)
{
    (void)state;
    ctx = test_context(NULL);
    if (ctx == NULL)
        return -1;
    tensor_bytes = (size_t)B * H * S * D * sizeof(float);
    q = buffer(tensor_bytes), k = buffer(tensor_bytes), v = buffer(tensor_bytes);
    o = buffer(tensor_bytes), dout = buffer(tensor_bytes), dq = buffer(tensor_bytes);
    dk = buffer(tensor_bytes), dv = buffer(tensor_bytes);
    lse = buffer((size_t)B * H * S * sizeof(float));
    small = buffer(64);
    fill(q, tensor_bytes, 0x3C), fill(k, tensor_bytes, 0x3C), fill(v, tensor_bytes, 0x3C);
    fill(dout, tensor_bytes, 0x3C);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cl_mem all[] = {q, k, v, o, lse, dout, dq, dk, dv, small};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
    fcl_context_destroy(ctx);
    return 0;
}

static fcl_attention_desc good_desc(void)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H, S, S, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    return d;
}

#define SENTINEL 0xA7

/* Runs the forward with `d` and the given buffers; outputs must stay intact. */
static void expect_forward(const fcl_attention_desc *d, cl_mem qq, cl_mem kk, cl_mem vv, cl_mem oo,
                           cl_mem ll, fcl_status expected)
{
    fill(o, tensor_bytes, SENTINEL);
    fill(lse, (size_t)B * H * S * 4, SENTINEL);
    assert_int_equal(fcl_attention_forward(ctx, d, qq, kk, vv, oo, ll, 0, NULL, NULL), expected);
    assert_true(unchanged(o, tensor_bytes, SENTINEL));
    assert_true(unchanged(lse, (size_t)B * H * S * 4, SENTINEL));
}

static void expect_backward(const fcl_attention_desc *d, cl_mem ll, cl_mem gq, fcl_status expected)
{
    fill(dq, tensor_bytes, SENTINEL), fill(dk, tensor_bytes, SENTINEL);
    fill(dv, tensor_bytes, SENTINEL);
    assert_int_equal(fcl_attention_backward(ctx, d, q, k, v, o, ll, dout, gq, dk, dv, 0, NULL, NULL),
                     expected);
    assert_true(unchanged(dq, tensor_bytes, SENTINEL));
    assert_true(unchanged(dk, tensor_bytes, SENTINEL));
    assert_true(unchanged(dv, tensor_bytes, SENTINEL));
}

static void test_null_arguments(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    expect_forward(&d, NULL, k, v, o, lse, FCL_ERROR_NULL_ARGUMENT);
    expect_forward(&d, q, k, v, NULL, lse, FCL_ERROR_NULL_ARGUMENT);
    expect_forward(NULL, q, k, v, o, lse, FCL_ERROR_NULL_ARGUMENT);
    assert_int_equal(fcl_attention_forward(NULL, &d, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_NULL_ARGUMENT);
    /* a wait list count without a list */
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o, lse, 1, NULL, NULL),
                     FCL_ERROR_NULL_ARGUMENT);
    assert_int_equal(fcl_context_create(NULL, NULL), FCL_ERROR_NULL_ARGUMENT);
}

static void test_zero_sizes(void **state)
{
    (void)state;
    size_t *fields[6];
    fcl_attention_desc d;
    for (int i = 0; i < 6; ++i) {
        d = good_desc();
        fields[0] = &d.batch, fields[1] = &d.heads_q, fields[2] = &d.heads_kv;
        fields[3] = &d.seqlen_q, fields[4] = &d.seqlen_k, fields[5] = &d.head_dim;
        *fields[i] = 0;
        expect_forward(&d, q, k, v, o, lse, FCL_ERROR_INVALID_SHAPE);
    }
    d = good_desc();
    d.seqlen_q = (size_t)1 << 40; /* beyond the int indices the kernels use */
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_INVALID_SHAPE);
}

static void test_head_dim_too_large(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    d.head_dim = 257;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_HEAD_DIM_UNSUPPORTED);
}

/* head_dim_v above head_dim: refused by every call and plan query with
 * the status of head_dim's own range.  A head_dim_v the buffers are too
 * small for (V, O, dO, dV sized by the layouts for it) is refused as any
 * short buffer; a narrower one, with layouts for it, runs. */
static void test_value_head_dim(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    d.head_dim_v = D + 1;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    expect_backward(&d, lse, dq, FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &p),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &p),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    /* V, O, dO and dV each laid out wider than their buffers hold */
    for (int i = 0; i < 4; ++i) {
        d = good_desc();
        fcl_layout *w[4] = {&d.v, &d.o, &d.dout, &d.dv};
        *w[i] = fcl_layout_contiguous(FCL_LAYOUT_BSHD, H, S + 1, D);
        if (i < 2)
            expect_forward(&d, q, k, v, o, lse, FCL_ERROR_BUFFER_TOO_SMALL);
        expect_backward(&d, lse, dq, FCL_ERROR_BUFFER_TOO_SMALL);
    }
    d = good_desc();
    d.head_dim_v = D / 2;
    d.v = d.o = d.dout = d.dv = fcl_layout_contiguous(FCL_LAYOUT_BSHD, H, S, D / 2);
    fill(o, tensor_bytes, SENTINEL);
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o, lse, 0, NULL, NULL), FCL_OK);
    assert_int_equal(clFinish(fcl_context_cl_queue(ctx)), CL_SUCCESS);
    /* O's footprint is head_dim_v wide: the bytes past it are untouched */
    unsigned char *img = malloc(tensor_bytes);
    assert_int_equal(clEnqueueReadBuffer(fcl_context_cl_queue(ctx), o, CL_TRUE, 0, tensor_bytes,
                                         img, 0, NULL, NULL),
                     CL_SUCCESS);
    const size_t o_bytes = (size_t)B * H * S * (D / 2) * sizeof(float);
    for (size_t i = o_bytes; i < tensor_bytes; ++i)
        assert_int_equal(img[i], SENTINEL);
    free(img);
}

static void test_heads_not_divisible(void **state)
{
    (void)state;
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, 3, S, S, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_HEADS_NOT_DIVISIBLE);
}

static void test_bad_values(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    d.dtype = (fcl_dtype)7;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_DTYPE_UNSUPPORTED);
    d = good_desc();
    d.softmax_scale = (float)INFINITY;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_INVALID_VALUE);
    d = good_desc();
    d.causal = 2;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_INVALID_VALUE);
}

static void test_overlapping_strides(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    d.o.stride_seq = D - 1; /* rows of head_dim elements overlap */
    d.o.stride_batch = 1 << 16;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_OVERLAPPING_STRIDES);
    d = good_desc();
    d.q.stride_head = 0; /* two heads on the same elements */
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_OVERLAPPING_STRIDES);
}

static void test_buffers_too_small(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    expect_forward(&d, q, small, v, o, lse, FCL_ERROR_BUFFER_TOO_SMALL);
    expect_forward(&d, q, k, v, o, small, FCL_ERROR_BUFFER_TOO_SMALL);
    d.o.offset = 1; /* shifts the last element past the end */
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_BUFFER_TOO_SMALL);
    d = good_desc();
    d.lse_offset = 5;
    expect_forward(&d, q, k, v, o, lse, FCL_ERROR_BUFFER_TOO_SMALL);
}

static void test_output_aliasing(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    /* O on top of Q */
    fill(q, tensor_bytes, 0x3C);
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, q, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(unchanged(q, tensor_bytes, 0x3C));
    /* A sub-buffer of Q's buffer is the same memory. */
    cl_int err;
    cl_buffer_region region = {0, tensor_bytes / 2};
    cl_mem sub = clCreateSubBuffer(q, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    assert_int_equal(err, CL_SUCCESS);
    d.lse_offset = 0;
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o, sub, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    clReleaseMemObject(sub);
    assert_true(unchanged(q, tensor_bytes, 0x3C));
}

/* The arrays the kernels read besides the tensors (block mask, slopes,
 * cu_seqlens) must not overlap an output either: the kernels read them
 * again while outputs are written. */
static void test_aux_aliasing(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    d.block_m = d.block_n = 8;
    d.alibi = FCL_ALIBI_PER_HEAD;
    fcl_attention_aux aux = {.alibi_slopes = k, .block_mask = o}; /* the mask in O's buffer */
    fill(o, tensor_bytes, SENTINEL);
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &aux, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(unchanged(o, tensor_bytes, SENTINEL));
    aux.block_mask = v;
    aux.alibi_slopes = lse; /* the slopes in LSE's */
    fill(lse, (size_t)B * H * S * 4, SENTINEL);
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &aux, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(unchanged(lse, (size_t)B * H * S * 4, SENTINEL));
    aux.alibi_slopes = k;
    fill(dq, tensor_bytes, SENTINEL);
    aux.block_mask = dq;
    assert_int_equal(fcl_attention_backward_ex(ctx, &d, &aux, q, k, v, o, lse, dout, dq, dk, dv,
                                               0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(unchanged(dq, tensor_bytes, SENTINEL));
}

/* Block-mask strides whose products pass 2^64: the mask's size must not
 * wrap around to a small number that the buffer holds (the kernels would
 * then read at the strides' offsets, outside it). */
static void test_block_mask_strides_overflow(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    d.block_m = d.block_n = 8;
    d.block_mask_stride_batch = (size_t)1 << 63; /* (B-1) * 2^63 + (H-1) * 2^63 = 2^65 */
    d.block_mask_stride_head = (size_t)1 << 63;
    const fcl_attention_aux aux = {.block_mask = k};
    fill(o, tensor_bytes, SENTINEL);
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &aux, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_INVALID_SHAPE);
    assert_true(unchanged(o, tensor_bytes, SENTINEL));
    /* the host call checks before it copies the mask */
    float *a = calloc((size_t)B * H * S * D, sizeof(float));
    float *out = malloc(tensor_bytes);
    memset(out, SENTINEL, tensor_bytes);
    const uint8_t mask[16] = {1};
    const fcl_attention_aux_host host = {.block_mask = mask};
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &host, a, a, a, out, NULL),
                     FCL_ERROR_INVALID_SHAPE);
    for (size_t i = 0; i < tensor_bytes; ++i)
        assert_int_equal(((unsigned char *)out)[i], SENTINEL);
    free(a);
    free(out);
}

static void test_wrong_context(void **state)
{
    (void)state;
    fcl_context *other = test_context(NULL);
    assert_non_null(other);
    cl_int err;
    cl_mem foreign = clCreateBuffer(fcl_context_cl_context(other), CL_MEM_READ_WRITE, tensor_bytes,
                                    NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    fcl_attention_desc d = good_desc();
    expect_forward(&d, q, k, foreign, o, lse, FCL_ERROR_WRONG_CONTEXT);
    clReleaseMemObject(foreign);
    fcl_context_destroy(other);
}

static void test_backward_bad_inputs(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    expect_backward(&d, NULL, dq, FCL_ERROR_MISSING_LSE);
    expect_backward(&d, lse, NULL, FCL_ERROR_NULL_ARGUMENT);
    expect_backward(&d, small, dq, FCL_ERROR_BUFFER_TOO_SMALL);
    /* a shape that does not match the forward's buffers */
    fcl_attention_desc big = d;
    big.seqlen_q = big.seqlen_k = 2 * S;
    big.q = big.o = big.dout = big.dq = fcl_layout_contiguous(FCL_LAYOUT_BSHD, H, 2 * S, D);
    big.k = big.v = big.dk = big.dv = big.q;
    expect_backward(&big, lse, dq, FCL_ERROR_BUFFER_TOO_SMALL);
    /* dq on top of dk */
    fcl_attention_desc same = d;
    fill(dk, tensor_bytes, SENTINEL);
    assert_int_equal(fcl_attention_backward(ctx, &same, q, k, v, o, lse, dout, dk, dk, dv, 0, NULL,
                                            NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(unchanged(dk, tensor_bytes, SENTINEL));
}

/* A kernel that fails to compile: a status, and the OpenCL log to read. */
static void test_build_failure_keeps_log(void **state)
{
    (void)state;
    fcl_context *c = test_context(NULL);
    assert_non_null(c);
    assert_int_equal(fcl_debug_set_build_options(c, "-DFCL_DTYPE=9"), FCL_OK);
    cl_int err;
    cl_mem out = clCreateBuffer(fcl_context_cl_context(c), CL_MEM_READ_WRITE, tensor_bytes, NULL, &err);
    cl_mem in = clCreateBuffer(fcl_context_cl_context(c), CL_MEM_READ_WRITE, tensor_bytes, NULL, &err);
    fcl_attention_desc d = good_desc();
    assert_string_equal(fcl_context_build_log(c), "");
    assert_int_equal(fcl_attention_forward(c, &d, in, in, in, out, NULL, 0, NULL, NULL),
                     FCL_ERROR_BUILD_FAILED);
    assert_non_null(strstr(fcl_context_build_log(c), "FCL_DTYPE"));
    clReleaseMemObject(in);
    clReleaseMemObject(out);
    fcl_context_destroy(c);
}

static void test_host_call_errors(void **state)
{
    (void)state;
    fcl_attention_desc d = good_desc();
    float *a = calloc((size_t)B * H * S * D, sizeof(float));
    float *out = malloc(tensor_bytes);
    memset(out, SENTINEL, tensor_bytes);
    d.head_dim = 300;
    assert_int_equal(fcl_attention_forward_host(ctx, &d, a, a, a, out, NULL),
                     FCL_ERROR_HEAD_DIM_UNSUPPORTED);
    d = good_desc();
    assert_int_equal(fcl_attention_forward_host(ctx, &d, a, NULL, a, out, NULL),
                     FCL_ERROR_NULL_ARGUMENT);
    assert_int_equal(fcl_attention_backward_host(ctx, &d, a, a, a, a, NULL, a, out, out, out),
                     FCL_ERROR_MISSING_LSE);
    for (size_t i = 0; i < tensor_bytes; ++i)
        assert_int_equal(((unsigned char *)out)[i], SENTINEL);
    free(a);
    free(out);
}

/* Every descriptor field's invalid values: fcl_plan_query returns exactly
 * the status of the call it plans (the forward call for the forward and
 * decode kinds, the backward call for both backward kinds), which reads no
 * buffer and writes nothing.  (The query once said FCL_OK where the call
 * refused the setting.) */
static void test_plan_query_agrees(void **state)
{
    (void)state;
    enum { F_SHAPE, F_HEADS, F_DIM, F_DIM_V, F_DTYPE, F_OUT, F_SCALE, F_CAUSAL, F_SPLITS, F_WL, F_WR,
           F_SOFTCAP, F_ALIBI, F_DROPOUT, F_VARLEN, F_TOTAL, F_BLOCK_M, F_BLOCK_N, F_FP8_BWD };
    static const struct {
        int field;
        double value;
        fcl_status want_fwd, want_bwd;
    } cases[] = {
        {F_SHAPE, 0, FCL_ERROR_INVALID_SHAPE, FCL_ERROR_INVALID_SHAPE},
        {F_HEADS, 3, FCL_ERROR_HEADS_NOT_DIVISIBLE, FCL_ERROR_HEADS_NOT_DIVISIBLE},
        {F_DIM, 257, FCL_ERROR_HEAD_DIM_UNSUPPORTED, FCL_ERROR_HEAD_DIM_UNSUPPORTED},
        {F_DIM_V, D + 1, FCL_ERROR_HEAD_DIM_UNSUPPORTED, FCL_ERROR_HEAD_DIM_UNSUPPORTED},
        {F_DTYPE, 9, FCL_ERROR_DTYPE_UNSUPPORTED, FCL_ERROR_DTYPE_UNSUPPORTED},
        {F_OUT, FCL_DTYPE_FP8_E5M2, FCL_ERROR_DTYPE_UNSUPPORTED, FCL_ERROR_DTYPE_UNSUPPORTED},
        {F_SCALE, NAN, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_SCALE, INFINITY, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_CAUSAL, 2, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_SPLITS, -1, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_SPLITS, 1025, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_WL, -2, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_WR, -9, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_SOFTCAP, -1, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_SOFTCAP, NAN, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_ALIBI, 7, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_ALIBI, -1, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_DROPOUT, 1.0, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_DROPOUT, -0.25, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_DROPOUT, NAN, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_VARLEN, 2, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_TOTAL, 0, FCL_ERROR_INVALID_SHAPE, FCL_ERROR_INVALID_SHAPE},
        {F_BLOCK_M, S + 1, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_BLOCK_N, 0, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE},
        {F_FP8_BWD, 0, FCL_OK, FCL_ERROR_DTYPE_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        fcl_attention_desc d = good_desc();
        const double x = cases[i].value;
        switch (cases[i].field) {
        case F_SHAPE: d.seqlen_k = (size_t)x; break;
        case F_HEADS: d.heads_kv = (size_t)x; break;
        case F_DIM: d.head_dim = (size_t)x; break;
        case F_DIM_V: d.head_dim_v = (size_t)x; break;
        case F_DTYPE: d.dtype = (fcl_dtype)(int)x; break;
        case F_OUT: d.dtype = FCL_DTYPE_FP8_E4M3, d.out_dtype = (fcl_dtype)(int)x; break;
        case F_SCALE: d.softmax_scale = (float)x; break;
        case F_CAUSAL: d.causal = (int)x; break;
        case F_SPLITS: d.num_splits = (int)x; break;
        case F_WL: d.window_left = (int64_t)x; break;
        case F_WR: d.window_right = (int64_t)x; break;
        case F_SOFTCAP: d.softcap = (float)x; break;
        case F_ALIBI: d.alibi = (fcl_alibi_mode)(int)x; break;
        case F_DROPOUT: d.dropout_p = (float)x; break;
        case F_VARLEN: d.varlen = (int)x; break;
        case F_TOTAL: d.varlen = 1, d.total_q = (size_t)x, d.total_k = 4; break;
        case F_BLOCK_M: d.block_m = (size_t)x, d.block_n = 4; break;
        case F_BLOCK_N: d.block_m = 4, d.block_n = (size_t)x; break;
        case F_FP8_BWD: d.dtype = FCL_DTYPE_FP8_E4M3, d.out_dtype = FCL_DTYPE_FP32; break;
        }
        fcl_plan plan;
        if (cases[i].want_fwd != FCL_OK) {
            expect_forward(&d, q, k, v, o, lse, cases[i].want_fwd);
            assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), cases[i].want_fwd);
            assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_DECODE, &plan), cases[i].want_fwd);
        }
        expect_backward(&d, lse, dq, cases[i].want_bwd);
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &plan), cases[i].want_bwd);
        assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan),
                         cases[i].want_bwd);
    }
}

/* A refused host-pointer call reads no array: the arrays it must not read
 * are poisoned, so that AddressSanitizer (tools/sanitize.sh runs this test)
 * reports any read.  A descale array with a dtype that is not FP8, slopes
 * with an invalid ALiBi mode, a descriptor error: none is read. */
static void test_refused_host_calls_read_nothing(void **state)
{
    (void)state;
    const size_t n = (size_t)B * H * S * D;
    float *a = malloc(n * sizeof *a), *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < n; ++i)
        a[i] = 0.5f;
    memset(out, SENTINEL, n * sizeof *out);
    float *freed = malloc(n * sizeof *freed); /* "freed": unreadable while poisoned */
    FCL_POISON(freed, n * sizeof *freed);
    fcl_attention_desc d = good_desc();
    fcl_attention_aux_host aux = {.descale_q = freed};
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, a, a, a, out, NULL),
                     FCL_ERROR_INVALID_VALUE);
    aux = (fcl_attention_aux_host){.alibi_slopes = freed};
    d.alibi = (fcl_alibi_mode)7;
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, a, a, a, out, NULL),
                     FCL_ERROR_INVALID_VALUE);
    d = good_desc();
    d.causal = 3;
    assert_int_equal(fcl_attention_forward_host(ctx, &d, freed, freed, freed, out, NULL),
                     FCL_ERROR_INVALID_VALUE);
    assert_int_equal(fcl_attention_backward_host(ctx, &d, freed, freed, freed, freed,
                                                 (const float *)freed, freed, out, out, out),
                     FCL_ERROR_INVALID_VALUE);
    /* an output that shares bytes with an input: refused before anything is read */
    d = good_desc();
    assert_int_equal(fcl_attention_forward_host(ctx, &d, a, a, a, a, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    for (size_t i = 0; i < n * sizeof *out; ++i)
        assert_int_equal(((unsigned char *)out)[i], SENTINEL);
    FCL_UNPOISON(freed, n * sizeof *freed);
    free(freed);
    free(a);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_zero_sizes),
        cmocka_unit_test(test_head_dim_too_large),
        cmocka_unit_test(test_value_head_dim),
        cmocka_unit_test(test_heads_not_divisible),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_overlapping_strides),
        cmocka_unit_test(test_buffers_too_small),
        cmocka_unit_test(test_output_aliasing),
        cmocka_unit_test(test_aux_aliasing),
        cmocka_unit_test(test_block_mask_strides_overflow),
        cmocka_unit_test(test_wrong_context),
        cmocka_unit_test(test_backward_bad_inputs),
        cmocka_unit_test(test_build_failure_keeps_log),
        cmocka_unit_test(test_host_call_errors),
        cmocka_unit_test(test_plan_query_agrees),
        cmocka_unit_test(test_refused_host_calls_read_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
