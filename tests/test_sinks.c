/* test_sinks.c - attention sinks (flashcl.h, "Sinks") against the float64
 * reference: the forward and the backward (dQ, dK, dV and dsinks) with
 * windows, causal masks, GQA, packed sequences, ALiBi, softcap, dropout,
 * every storage type and FP8; split-KV forced (the merge adds the sink once);
 * rows that see no key (O = 0, LSE = sink); calls without sinks on an
 * emulated GPU's plan; non-finite sinks as the header says; bitwise
 * repeatable dsinks; and every bad input's status with nothing written.  The KV-cache call's sinks are in test_kvcache, the emulated
 * profiles' in test_profiles and test_tensor_cores. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ctx fa_ctx

static fa_case sink_case(const fa_variants *v, uint64_t seed)
{
    fa_case c = {2, 4, 2, 37, 70, 24, FCL_DTYPE_FP32, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed, v};
    return c;
}

static fa_variants with_sinks(void)
{
    fa_variants v = fa_no_variants();
    v.sinks = 1;
    return v;
}

static void check_both(const fa_case *c)
{
    fa_result r;
    assert_true(fa_check_forward(ctx, c, &r));
    assert_true(fa_check_backward(ctx, c, &r));
}

/* Every storage type, plain and causal, GQA, padded strides. */
static void test_dtypes_causal_gqa(void **state)
{
    (void)state;
    const fcl_dtype dtypes[] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};
    const fa_variants v = with_sinks();
    for (int i = 0; i < 3; ++i)
        for (int causal = 0; causal < 2; ++causal) {
            fa_case c = sink_case(&v, 100 + (uint64_t)(2 * i + causal));
            c.dtype = dtypes[i];
            c.causal = causal;
            c.padded = i == 1;
            c.layout = i == 2 ? FCL_LAYOUT_BHSD : FCL_LAYOUT_BSHD;
            check_both(&c);
        }
}

/* Windows (gpt-oss alternates windowed and full layers), ALiBi, softcap,
 * dropout, a block mask. */
static void test_with_variants(void **state)
{
    (void)state;
    for (int i = 0; i < 5; ++i) {
        fa_variants v = with_sinks();
        if (i == 0)
            v.window_left = 16, v.window_right = 0;
        if (i == 1)
            v.window_left = 5, v.window_right = 9;
        if (i == 2)
            v.alibi = FCL_ALIBI_PER_HEAD, v.softcap = 8.0f;
        if (i == 3)
            v.dropout_p = 0.2f, v.dropout_seed = 9;
        if (i == 4)
            v.block_m = 16, v.block_n = 16, v.block_density = 0.6;
        fa_case c = sink_case(&v, 200 + (uint64_t)i);
        c.dtype = i % 2 ? FCL_DTYPE_FP16 : FCL_DTYPE_FP32;
        check_both(&c);
    }
}

/* Packed sequences of different lengths, an empty one among them: dsinks
 * sums the rows of every sequence and nothing past the last. */
static void test_varlen(void **state)
{
    (void)state;
    static const int lq[3] = {20, 0, 37}, lk[3] = {33, 5, 70};
    fa_variants v = with_sinks();
    v.seqlens_q = lq;
    v.seqlens_k = lk;
    fa_case c = sink_case(&v, 300);
    c.batch = 3;
    c.causal = 1;
    c.padded = 1;
    check_both(&c);
    c.dtype = FCL_DTYPE_BF16;
    v.window_left = 8;
    check_both(&c);
}

/* Split-KV forced, on the forward's plan and on a decode plan (GQA packing):
 * the merge adds the sink once, and chunks that see no key change nothing;
 * the decode plan unsplit too (each packed row its own head's sink). */
static void test_split_kv(void **state)
{
    (void)state;
    const int splits[] = {2, 3, 7, 1};
    for (int i = 0; i < 4; ++i) {
        fa_variants v = with_sinks();
        v.num_splits = splits[i];
        fa_case c = sink_case(&v, 400 + (uint64_t)i);
        c.causal = i != 1;
        c.seqlen_q = i >= 2 ? 3 : 37; /* a decode plan, heads packed */
        c.seqlen_k = 150;
        c.heads_q = 8;
        fa_result r;
        assert_true(fa_check_forward(ctx, &c, &r));
        assert_true(fa_check_deterministic(ctx, &c, 0));
    }
}

/* A call without sinks binds a placeholder there, never NULL (cl/common.cl,
 * "optional arrays"): Intel's CPU runtime (2026.2) loaded from the NULL it
 * had before and crashed in every emulated GPU profile's portable forward
 * (its register loops unrolled, many work-items a group; NOTES.md, "Intel").
 * The smallest profile's (256 work-items), fp32, head_dim 64, causal,
 * 70 x 90: without sinks, with them, and split without them (the merge's
 * read). */
static void test_absent_sinks_gpu_profile(void **state)
{
    (void)state;
    fcl_context *gpu = test_context("small-32k");
    assert_non_null(gpu);
    const fa_variants none = fa_no_variants(), sinks = with_sinks();
    fa_variants split = none;
    split.num_splits = 3;
    const fa_variants *vars[] = {&none, &sinks, &split};
    for (int i = 0; i < 3; ++i) {
        const fa_case c = {1, 2, 2, 70, 90, 64, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0,
                           {0, 0, 0}, 450 + (uint64_t)i, vars[i]};
        fa_result r;
        assert_true(fa_check_forward(gpu, &c, &r));
    }
    fcl_context_destroy(gpu);
}

/* FP8 inputs: the sink is a logit, not scaled by the descales. */
static void test_fp8(void **state)
{
    (void)state;
    const fcl_dtype fp8[] = {FCL_DTYPE_FP8_E4M3, FCL_DTYPE_FP8_E5M2};
    for (int i = 0; i < 2; ++i) {
        fa_variants v = with_sinks();
        v.descales = 1;
        v.out_dtype = i ? FCL_DTYPE_FP32 : FCL_DTYPE_BF16;
        v.num_splits = i ? 3 : 0;
        fa_case c = sink_case(&v, 500 + (uint64_t)i);
        c.dtype = fp8[i];
        c.causal = 1;
        fa_result r;
        assert_true(fa_check_forward(ctx, &c, &r));
    }
}

/* dsinks, like dQ, dK and dV, is bitwise the same on every run. */
static void test_repeatable(void **state)
{
    (void)state;
    fa_variants v = with_sinks();
    v.window_left = 20;
    fa_case c = sink_case(&v, 600);
    c.causal = 1;
    c.dtype = FCL_DTYPE_FP16;
    c.seqlen_q = 300;
    assert_true(fa_check_deterministic(ctx, &c, 1));
}

/* ---- rows that see no key, non-finite sinks --------------------------------- */

enum { NB = 1, NH = 2, NQ = 12, NK = 5, ND = 8 };

/* Forward on host arrays: causal with more rows than keys (rows 0 .. NQ-NK-1
 * see no key), sinks as given, num_splits forced. */
static void forward_rows(const float sinks[NH], int splits, float *o, float *lse)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, NB, NH, NH, NQ, NK, ND, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.causal = 1;
    d.num_splits = splits;
    d.sinks = sinks != NULL;
    float q[NB * NQ * NH * ND], kv[NB * NK * NH * ND];
    rng r = {77};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i)
        q[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; ++i)
        kv[i] = (float)rng_normal(&r);
    const fcl_attention_aux_host aux = {.sinks = sinks};
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, q, kv, kv, o, lse), FCL_OK);
}

static void test_rows_without_keys(void **state)
{
    (void)state;
    const float sinks[NH] = {0.75f, -2.5f};
    for (int splits = 1; splits <= 2; ++splits) {
        float o[NQ * NH * ND], lse[NH * NQ];
        forward_rows(sinks, splits, o, lse);
        for (int h = 0; h < NH; ++h)
            for (int i = 0; i < NQ - NK; ++i) {
                assert_true(lse[h * NQ + i] == sinks[h]);
                for (int c = 0; c < ND; ++c)
                    assert_true(o[(i * NH + h) * ND + c] == 0.0f);
            }
    }
}

/* -inf is no sink (but a row without keys keeps LSE = +inf); +inf leaves
 * O = 0 and LSE = +inf in its head; NaN makes its head NaN.  Split or not. */
static void test_nonfinite_sinks(void **state)
{
    (void)state;
    for (int splits = 1; splits <= 2; ++splits) {
        float o0[NQ * NH * ND], lse0[NH * NQ], o[NQ * NH * ND], lse[NH * NQ];
        forward_rows(NULL, splits, o0, lse0);
        const float none[NH] = {-INFINITY, -INFINITY};
        forward_rows(none, splits, o, lse);
        assert_memory_equal(o, o0, sizeof o);
        assert_memory_equal(lse, lse0, sizeof lse);
        const float odd[NH] = {INFINITY, NAN};
        forward_rows(odd, splits, o, lse);
        for (int i = 0; i < NQ; ++i) { /* rows with keys and without alike */
            assert_true(lse[i] == INFINITY);
            assert_true(isnan(lse[NQ + i]));
            for (int c = 0; c < ND; ++c) {
                assert_true(o[(i * NH) * ND + c] == 0.0f);
                assert_true(isnan(o[(i * NH + 1) * ND + c]));
            }
        }
    }
}

/* ---- bad inputs: one status each, nothing written ---------------------------- */

enum { B = 2, H = 4, S = 16, D = 8 };
#define SENTINEL 0x5Au
#define BYTES ((size_t)B * H * S * D * 4)

static cl_mem buffer(size_t bytes)
{
    unsigned char *fill = malloc(bytes);
    memset(fill, SENTINEL, bytes);
    cl_int err;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              bytes, fill, &err);
    assert_int_equal(err, CL_SUCCESS);
    free(fill);
    return m;
}

static fcl_attention_desc small_desc(void)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H / 2, S, S, D, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.sinks = 1;
    return d;
}

/* The forward (fwd_status) and the backward (bwd_status) of d with aux are
 * refused, with every output (dsinks included) as it was; a forward
 * expected to run (FCL_OK) is not checked further. */
static void expect_refused(const fcl_attention_desc *d, const fcl_attention_aux *aux,
                           fcl_status fwd_status, fcl_status bwd_status)
{
    cl_mem in = buffer(BYTES), o = buffer(BYTES), lse = buffer(BYTES);
    cl_mem dq = buffer(BYTES), dk = buffer(BYTES), dv = buffer(BYTES);
    assert_int_equal(fcl_attention_forward_ex(ctx, d, aux, in, in, in, o, lse, 0, NULL, NULL),
                     fwd_status);
    assert_int_equal(fcl_attention_backward_ex(ctx, d, aux, in, in, in, in, lse, in, dq, dk, dv, 0,
                                               NULL, NULL),
                     bwd_status);
    const cl_mem outs[6] = {dq, dk, dv, aux != NULL ? aux->dsinks : NULL, o, lse};
    for (int i = 0; i < (fwd_status == FCL_OK ? 4 : 6); ++i) {
        if (outs[i] == NULL)
            continue;
        size_t size = 0;
        assert_int_equal(clGetMemObjectInfo(outs[i], CL_MEM_SIZE, sizeof size, &size, NULL),
                         CL_SUCCESS);
        assert_true(fa_buffer_all(ctx, outs[i], size, SENTINEL));
    }
    cl_mem mine[6] = {in, o, lse, dq, dk, dv};
    for (int i = 0; i < 6; ++i)
        clReleaseMemObject(mine[i]);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    fcl_attention_desc d = small_desc();
    /* sinks = 1 without a sinks buffer; one shorter than heads_q floats */
    expect_refused(&d, NULL, FCL_ERROR_NULL_ARGUMENT, FCL_ERROR_NULL_ARGUMENT);
    fcl_attention_aux aux = {.sinks = buffer((H - 1) * sizeof(float))};
    expect_refused(&d, &aux, FCL_ERROR_BUFFER_TOO_SMALL, FCL_ERROR_BUFFER_TOO_SMALL);
    clReleaseMemObject(aux.sinks);
    aux.sinks = buffer(H * sizeof(float));
    /* dsinks too short: the backward's tensor check; the forward ignores it */
    aux.dsinks = buffer((H - 1) * sizeof(float));
    expect_refused(&d, &aux, FCL_OK, FCL_ERROR_BUFFER_TOO_SMALL);
    clReleaseMemObject(aux.dsinks);
    assert_int_equal(clFinish(fcl_context_cl_queue(ctx)), CL_SUCCESS);
    /* dsinks sharing bytes with the sinks it is the gradient of */
    aux.dsinks = aux.sinks;
    cl_mem in = buffer(BYTES), lse = buffer(BYTES), dq = buffer(BYTES), dk = buffer(BYTES),
           dv = buffer(BYTES);
    assert_int_equal(fcl_attention_backward_ex(ctx, &d, &aux, in, in, in, in, lse, in, dq, dk, dv,
                                               0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    /* ... with an input (the LSE) and with another output (dQ), as sub-buffers */
    const cl_buffer_region head = {0, 64}; /* (aligned as any device wants) */
    cl_int err;
    const cl_mem parents[2] = {lse, dq};
    for (int i = 0; i < 2; ++i) {
        aux.dsinks = clCreateSubBuffer(parents[i], CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                       &head, &err);
        assert_int_equal(err, CL_SUCCESS);
        assert_int_equal(fcl_attention_backward_ex(ctx, &d, &aux, in, in, in, in, lse, in, dq, dk,
                                                   dv, 0, NULL, NULL),
                         FCL_ERROR_BUFFER_ALIASING);
        clReleaseMemObject(aux.dsinks);
    }
    aux.dsinks = NULL;
    const cl_mem outs[4] = {lse, dq, dk, dv};
    for (int i = 0; i < 4; ++i) {
        assert_true(fa_buffer_all(ctx, outs[i], BYTES, SENTINEL));
        clReleaseMemObject(outs[i]);
    }
    /* an output over the sinks: the kernels read them while they write */
    d.sinks = 1;
    cl_mem o = buffer(BYTES);
    fcl_attention_aux over = {.sinks = o};
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &over, in, in, in, o, NULL, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(fa_buffer_all(ctx, o, BYTES, SENTINEL));
    clReleaseMemObject(o);
    clReleaseMemObject(in);
    /* sinks = 2; sinks or dsinks given with sinks = 0 */
    d.sinks = 2;
    expect_refused(&d, &aux, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE);
    fcl_plan p;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &p), FCL_ERROR_INVALID_VALUE);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &p), FCL_ERROR_INVALID_VALUE);
    d.sinks = 0;
    expect_refused(&d, &aux, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE);
    fcl_attention_aux only_grad = {.dsinks = buffer(H * sizeof(float))};
    expect_refused(&d, &only_grad, FCL_ERROR_INVALID_VALUE, FCL_ERROR_INVALID_VALUE);
    clReleaseMemObject(only_grad.dsinks);
    clReleaseMemObject(aux.sinks);
}

/* The host forms: the same statuses, before any array is read (poisoned
 * under AddressSanitizer) and with nothing written. */
static void test_bad_host_inputs(void **state)
{
    (void)state;
    const size_t n = (size_t)B * H * S * D;
    float *a = malloc(n * sizeof *a), *out = malloc(n * sizeof *out), *out2 = malloc(n * sizeof *out);
    float *freed = malloc(n * sizeof *freed);
    for (size_t i = 0; i < n; ++i)
        a[i] = 0.5f;
    memset(out, SENTINEL, n * sizeof *out);
    memset(out2, SENTINEL, n * sizeof *out2);
    FCL_POISON(freed, n * sizeof *freed);
    fcl_attention_desc d = small_desc();
    fcl_attention_aux_host aux = {0};
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, freed, freed, freed, out, NULL),
                     FCL_ERROR_NULL_ARGUMENT);
    assert_int_equal(fcl_attention_backward_host_ex(ctx, &d, &aux, freed, freed, freed, freed,
                                                    freed, freed, out, out2, out2 + n / 2),
                     FCL_ERROR_NULL_ARGUMENT);
    /* dsinks over dQ, then over the sinks themselves */
    aux.sinks = freed;
    aux.dsinks = out + 4;
    assert_int_equal(fcl_attention_backward_host_ex(ctx, &d, &aux, freed, freed, freed, freed,
                                                    freed, freed, out, out2, out2 + n / 2),
                     FCL_ERROR_BUFFER_ALIASING);
    aux.dsinks = freed + 2;
    assert_int_equal(fcl_attention_backward_host_ex(ctx, &d, &aux, a, a, a, a, a, a, out, out2,
                                                    out2 + n / 2),
                     FCL_ERROR_BUFFER_ALIASING);
    d.sinks = 2;
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, freed, freed, freed, out, NULL),
                     FCL_ERROR_INVALID_VALUE);
    d.sinks = 0;
    aux.dsinks = NULL;
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, freed, freed, freed, out, NULL),
                     FCL_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < n * sizeof *out; ++i) {
        assert_int_equal(((unsigned char *)out)[i], SENTINEL);
        assert_int_equal(((unsigned char *)out2)[i], SENTINEL);
    }
    FCL_UNPOISON(freed, n * sizeof *freed);
    free(freed);
    free(a);
    free(out);
    free(out2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes_causal_gqa),
        cmocka_unit_test(test_with_variants),
        cmocka_unit_test(test_varlen),
        cmocka_unit_test(test_split_kv),
        cmocka_unit_test(test_absent_sinks_gpu_profile),
        cmocka_unit_test(test_fp8),
        cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_rows_without_keys),
        cmocka_unit_test(test_nonfinite_sinks),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_bad_host_inputs),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
