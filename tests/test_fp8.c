/* test_fp8.c - FP8 storage (E4M3, E5M2) of Q, K, V in the forward.
 *
 * First the tests' own codec (fp8_codec.h) against known values and rules,
 * since the references read FP8 through it.  Then the kernels' decoder, all
 * 256 codes of each format on every tile piece, exactly: with one key the
 * softmax is exactly 1, so O is V's decoded row times V's descale.  Then
 * random problems against the float64 reference (tolerance: test_support.h,
 * which for FP8 follows the output type) with random per-head descales,
 * every output type, the variants, split-KV and decode plans, on the CPU
 * piece (PoCL's default), the portable piece, the emulated tensor-core piece
 * and every emulated device profile.  Last the statuses: no FP8 backward,
 * buffer sizes in bytes of each tensor's own type, descales only for FP8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fp8_codec.h"
#include "internal.h"
#include "kvcache_support.h"
#include "test_support.h"

#include <math.h>

static const fcl_dtype formats[2] = {FCL_DTYPE_FP8_E4M3, FCL_DTYPE_FP8_E5M2};

/* ---- the tests' codec ------------------------------------------------------ */

static void test_codec_known_values(void **state)
{
    (void)state;
    const struct {
        uint8_t code;
        double e4m3, e5m2;
    } known[] = {
        {0x00, 0.0, 0.0},
        {0x01, 0x1p-9, 0x1p-16},        /* smallest subnormals */
        {0x03, 3 * 0x1p-9, 3 * 0x1p-16},
        {0x07, 7 * 0x1p-9, 1.75 * 0x1p-14},
        {0x08, 0x1p-6, 0x1p-13},         /* E4M3's smallest normal; E5M2's 0 00010 00 */
        {0x38, 1.0, 0.5},
        {0x3C, 1.5, 1.0},
        {0x3D, 1.625, 1.25},
        {0x77, 240.0, 28672.0},
        {0x78, 256.0, 0x1p15},
        {0x7B, 352.0, 57344.0},          /* E5M2's largest finite */
        {0x7E, 448.0, NAN},              /* E4M3's largest finite */
        {0xB8, -1.0, -0.5},
        {0xFE, -448.0, NAN},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
        const double a = fp8_decode(known[i].code, FCL_DTYPE_FP8_E4M3);
        const double b = fp8_decode(known[i].code, FCL_DTYPE_FP8_E5M2);
        assert_true(a == known[i].e4m3);
        if (isnan(known[i].e5m2))
            assert_true(isnan(b));
        else
            assert_true(b == known[i].e5m2);
    }
    assert_true(signbit(fp8_decode(0x80, FCL_DTYPE_FP8_E4M3)) && fp8_decode(0x80, FCL_DTYPE_FP8_E4M3) == 0);
    /* E4M3: NaN only at S.1111.111, no infinities */
    for (int c = 0; c < 256; ++c)
        assert_int_equal(isnan(fp8_decode((uint8_t)c, FCL_DTYPE_FP8_E4M3)) != 0, (c & 0x7F) == 0x7F);
    /* E5M2: infinities at S.11111.00, NaN at the other three */
    assert_true(fp8_decode(0x7C, FCL_DTYPE_FP8_E5M2) == INFINITY);
    assert_true(fp8_decode(0xFC, FCL_DTYPE_FP8_E5M2) == -INFINITY);
    for (int c = 0x7D; c <= 0x7F; ++c) {
        assert_true(isnan(fp8_decode((uint8_t)c, FCL_DTYPE_FP8_E5M2)));
        assert_true(isnan(fp8_decode((uint8_t)(c | 0x80), FCL_DTYPE_FP8_E5M2)));
    }
    assert_true(fp8_max(FCL_DTYPE_FP8_E4M3) == 448.0 && fp8_max(FCL_DTYPE_FP8_E5M2) == 57344.0);
}

/* Every code: E5M2 is the upper byte of an fp16 (test_support's fp16
 * decoder); E4M3 by its rule: the positive codes increase, in steps of
 * 2^-9 up to 2^-6 and then of 2^(e-10) within binade e, and the sign bit
 * negates.  Both formats are exact in fp16, which the tensor-core piece
 * relies on. */
static void test_codec_every_code(void **state)
{
    (void)state;
    for (int c = 0; c < 256; ++c) {
        const double e5 = fp8_decode((uint8_t)c, FCL_DTYPE_FP8_E5M2);
        const double h = half_bits_to_float((uint16_t)(c << 8));
        assert_true(e5 == h || (isnan(e5) && isnan(h)));
    }
    for (int c = 1; c <= 0x7E; ++c) {
        const double prev = fp8_decode((uint8_t)(c - 1), FCL_DTYPE_FP8_E4M3);
        const double x = fp8_decode((uint8_t)c, FCL_DTYPE_FP8_E4M3);
        /* binade e: steps of 2^(e-10); into it from the one below, that
         * one's step; subnormals (e = 0) and binade 1 in steps of 2^-9 */
        const int e = c >> 3;
        const double step = e <= 1 ? 0x1p-9 : ldexp(1.0, (c & 7) == 0 ? e - 11 : e - 10);
        assert_true(x - prev == step);
        assert_true(fp8_decode((uint8_t)(c | 0x80), FCL_DTYPE_FP8_E4M3) == -x);
    }
    for (int f = 0; f < 2; ++f)
        for (int c = 0; c < 256; ++c) {
            const double x = fp8_decode((uint8_t)c, formats[f]);
            if (isnan(x))
                continue;
            assert_true(half_bits_to_float(float_to_half_bits((float)x)) == x);
            assert_int_equal(fp8_encode(x, formats[f]), c);
        }
}

/* Round to nearest, ties to the even code, saturation, specials. */
static void test_codec_encode(void **state)
{
    (void)state;
    const fcl_dtype e4 = FCL_DTYPE_FP8_E4M3, e5 = FCL_DTYPE_FP8_E5M2;
    assert_int_equal(fp8_encode(1.0625, e4), 0x38);  /* tie between 1 and 1.125: even */
    assert_int_equal(fp8_encode(1.1875, e4), 0x3A);  /* tie between 1.125 and 1.25: even */
    assert_int_equal(fp8_encode(1.07, e4), 0x39);
    assert_int_equal(fp8_encode(0x1p-10, e4), 0x00); /* half the smallest subnormal: to 0 */
    assert_int_equal(fp8_encode(0x1.8p-10, e4), 0x01);
    assert_int_equal(fp8_encode(-0.0, e4), 0x80);
    assert_int_equal(fp8_encode(460.0, e4), 0x7E);   /* saturates */
    assert_int_equal(fp8_encode(-1e9, e4), 0xFE);
    assert_int_equal(fp8_encode(INFINITY, e4), 0x7E);
    assert_int_equal(fp8_encode(NAN, e4), 0x7F);
    assert_int_equal(fp8_encode(1.125, e5), 0x3C);   /* tie between 1 and 1.25: even */
    assert_int_equal(fp8_encode(1.375, e5), 0x3E);   /* tie between 1.25 and 1.5: even */
    assert_int_equal(fp8_encode(1e6, e5), 0x7B);
    assert_int_equal(fp8_encode(-INFINITY, e5), 0xFC);
    assert_true(isnan(fp8_decode(fp8_encode(NAN, e5), e5)));
}

/* ---- the kernels' decoder ------------------------------------------------ */

enum { PIECE_CPU, PIECE_PORTABLE, PIECE_MMA, PIECES };

static const char *forward_variant(fcl_context *ctx, const fcl_attention_desc *d)
{
    static fcl_plan plan;
    if (fcl_plan_query(ctx, d, FCL_KERNEL_FORWARD, &plan) != FCL_OK)
        return "";
    return plan.variant;
}

/* Whether ctx runs an FP8 forward of this head_dim on tensor cores, which
 * round P to fp16 (fa_variants.p_fp16). */
static int rounds_p(fcl_context *ctx, fcl_dtype fmt, size_t head_dim)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 64, 64, head_dim, fmt, FCL_LAYOUT_BSHD);
    return strstr(forward_variant(ctx, &d), "mma") != NULL;
}

/* The default device's own piece (the CPU piece under PoCL, tensor cores
 * on an NVIDIA GPU), the portable piece, and the tensor-core piece (on
 * emulated warp operations where the device has none). */
static fcl_context *piece_context(int piece)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.portable_only = piece == PIECE_PORTABLE;
    fcl_context *ctx = NULL;
    if (fcl_context_create(&o, &ctx) != FCL_OK)
        return NULL;
    if (piece == PIECE_MMA && !rounds_p(ctx, FCL_DTYPE_FP8_E4M3, 64) &&
        fcl_debug_emulate_tensor_cores(ctx, 1) != FCL_OK) {
        fcl_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}

/* 4 K/V heads x head_dim 64 = 256 values of V: every code once, the same
 * in each of SK keys.  Q = 0: every score is exactly 0 and every
 * probability exactly 1 on every piece (whatever the units of its
 * exponential), the sum is SK, and O = (SK * v) * (dv / SK) = v * dv
 * exactly (a power of two SK, values of at most 6 significant bits).  SK
 * is a multiple of the key tile: the CPU piece fills a partial tile with
 * its last key at probability 0, and 0 * infinity would be NaN. */
static void check_every_code(fcl_context *ctx, int piece, fcl_dtype fmt, float dv)
{
    enum { H = 4, D = 64, SQ = 3, SK = 256 };
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, H, H, SQ, SK, D, fmt, FCL_LAYOUT_BSHD);
    d.out_dtype = FCL_DTYPE_FP32;
    fcl_plan plan;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
    assert_int_equal(SK % plan.bc, 0);
    if (piece == PIECE_MMA)
        assert_non_null(strstr(plan.variant, "mma"));
    else if (piece == PIECE_PORTABLE)
        assert_string_equal(plan.variant, "portable-fma");
    static uint8_t q[H * SQ * D], k[SK * H * D], v[SK * H * D];
    memset(q, 0, sizeof q);
    for (int i = 0; i < SK * H * D; ++i) {
        k[i] = (uint8_t)(0x28 + (i * 7) % 16);
        v[i] = (uint8_t)(i % (H * D)); /* (key i / (H * D), head, column) */
    }
    float o[H * SQ * D], lse[H * SQ];
    const float ones[H] = {dv, dv, dv, dv};
    fcl_attention_aux_host aux;
    memset(&aux, 0, sizeof aux);
    aux.descale_v = ones;
    assert_int_equal(fcl_attention_forward_host_ex(ctx, &d, &aux, q, k, v, o, lse), FCL_OK);
    for (int s = 0; s < SQ; ++s)
        for (int i = 0; i < H * D; ++i) {
            const int h = i / D, c = i % D;
            const double want = fp8_decode((uint8_t)i, fmt) * (double)dv;
            const float got = o[(s * H + h) * D + c];
            if (isnan(want))
                assert_true(isnan(got));
            else
                assert_true((double)got == want);
        }
}

static void test_device_decoder_every_code(void **state)
{
    (void)state;
    for (int p = 0; p < PIECES; ++p) {
        fcl_context *ctx = piece_context(p);
        assert_non_null(ctx);
        for (int f = 0; f < 2; ++f) {
            check_every_code(ctx, p, formats[f], 1.0f);
            check_every_code(ctx, p, formats[f], 0.75f);
        }
        fcl_context_destroy(ctx);
    }
}

/* ---- random problems against the reference --------------------------------- */

static fa_case fp8_case(fcl_dtype fmt, const fa_variants *v, uint64_t seed)
{
    fa_case c = {2, 4, 2, 45, 70, 64, fmt, 0, 0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed, v};
    return c;
}

/* Every output type, both formats (each output type with the other format
 * on the next piece: every kernel build costs seconds under PoCL),
 * descales on and off, on one piece; the forward's plan (more than 64
 * query rows), head_dim a multiple of 16 and aligned rows, so the
 * tensor-core piece takes them too. */
static void check_piece_cases(int piece, uint64_t seed)
{
    fcl_context *ctx = piece_context(piece);
    assert_non_null(ctx);
    const fcl_dtype outs[3] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};
    fa_result r;
    for (int o = 0; o < 3; ++o) {
        const int f = (o + piece) % 2;
        fa_variants v = fa_no_variants();
        v.out_dtype = outs[o];
        v.descales = o != 1;
        v.p_fp16 = rounds_p(ctx, formats[f], 64);
        fa_case c = fp8_case(formats[f], &v, seed + (uint64_t)o);
        c.seqlen_q = 100;
        c.causal = o == 2;
        c.layout = f ? FCL_LAYOUT_BHSD : FCL_LAYOUT_BSHD;
        c.input_scale[1] = f ? 8.0 : 1.0; /* larger scores, a peakier softmax */
        if (piece == PIECE_MMA) {
            fcl_attention_desc d;
            fcl_attention_desc_init(&d, 1, 1, 1, 100, 70, 64, formats[f], c.layout);
            assert_non_null(strstr(forward_variant(ctx, &d), "mma"));
        }
        assert_true(fa_check_forward(ctx, &c, &r));
    }
    fcl_context_destroy(ctx);
}

static void test_forward_cpu_piece(void **state) { (void)state; check_piece_cases(PIECE_CPU, 8000); }
static void test_forward_portable(void **state) { (void)state; check_piece_cases(PIECE_PORTABLE, 8100); }
static void test_forward_tensor_cores(void **state) { (void)state; check_piece_cases(PIECE_MMA, 8200); }

/* The variants with descales (the scale they fold into comes before softcap
 * and ALiBi), GQA, packed sequences, dropout, block masks, odd head_dim,
 * padded strides, split-KV (the merge writes the output type) and a decode
 * plan (few query rows: no head packing for FP8). */
static void test_forward_variants(void **state)
{
    (void)state;
    fa_result r;
    const int lq[3] = {30, 0, 45}, lk[3] = {52, 7, 70};
    for (int p = 0; p < PIECES; ++p) {
        fcl_context *ctx = piece_context(p);
        assert_non_null(ctx);
        {
            const int f = p % 2; /* one format a piece: each build costs seconds */
            fa_variants v = fa_no_variants();
            v.descales = 1;
            v.out_dtype = f ? FCL_DTYPE_BF16 : FCL_DTYPE_FP32;
            v.window_left = 25;
            v.softcap = 20.0f;
            v.alibi = FCL_ALIBI_PER_BATCH_HEAD;
            v.seqlens_q = lq;
            v.seqlens_k = lk;
            v.p_fp16 = rounds_p(ctx, formats[f], 64);
            fa_case c = fp8_case(formats[f], &v, 8300 + (uint64_t)(10 * p + f));
            c.batch = 3;
            c.causal = 1;
            assert_true(fa_check_forward(ctx, &c, &r));

            fa_variants w = fa_no_variants();
            w.descales = 1;
            w.out_dtype = FCL_DTYPE_FP16;
            w.dropout_p = 0.2f;
            w.dropout_seed = 5;
            w.block_m = 16;
            w.block_n = 16;
            w.block_density = 0.7;
            w.p_fp16 = rounds_p(ctx, formats[f], 64);
            fa_case c2 = fp8_case(formats[f], &w, 8400 + (uint64_t)(10 * p + f));
            c2.padded = p != PIECE_MMA; /* padded rows leave the tensor-core piece */
            c2.head_dim = p == PIECE_MMA ? 64 : 40;
            assert_true(fa_check_forward(ctx, &c2, &r));

            fa_variants s = fa_no_variants();
            s.descales = 1;
            s.out_dtype = f ? FCL_DTYPE_FP32 : FCL_DTYPE_BF16;
            s.num_splits = 3;
            s.p_fp16 = rounds_p(ctx, formats[f], 64);
            fa_case c3 = fp8_case(formats[f], &s, 8500 + (uint64_t)(10 * p + f));
            c3.heads_q = 8;
            c3.heads_kv = 2;
            c3.seqlen_q = 2; /* a decode plan, split into 3 key chunks */
            c3.seqlen_k = 150;
            fcl_attention_desc d;
            fcl_attention_desc_init(&d, 2, 8, 2, 2, 150, 64, formats[f], FCL_LAYOUT_BSHD);
            d.num_splits = 3;
            fcl_plan plan;
            assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
            assert_int_equal(plan.kernel, FCL_KERNEL_DECODE);
            assert_int_equal(plan.pack, 1);
            assert_int_equal(plan.num_splits, 3);
            assert_true(fa_check_forward(ctx, &c3, &r));
        }
        fcl_context_destroy(ctx);
    }
}

/* Every emulated device profile's plan, the formats by turns. */
static void test_forward_profiles(void **state)
{
    (void)state;
    fa_result r;
    for (size_t i = 0; i < fcl_profile_count(); ++i) {
        fcl_context *ctx = test_context(fcl_profile_name(i));
        assert_non_null(ctx);
        {
            const int f = (int)(i % 2); /* the formats by turns */
            fa_variants v = fa_no_variants();
            v.descales = 1;
            v.out_dtype = f ? FCL_DTYPE_FP16 : FCL_DTYPE_FP32;
            fa_case c = fp8_case(formats[f], &v, 8600 + 10 * i + (uint64_t)f);
            c.heads_q = 2;
            c.heads_kv = 1;
            c.batch = 1;
            c.causal = f;
            c.head_dim = f ? 128 : 48;
            assert_true(fa_check_forward(ctx, &c, &r));
        }
        fcl_context_destroy(ctx);
    }
}

/* ---- statuses ---------------------------------------------------------------- */

static cl_mem device_buffer(fcl_context *ctx, size_t bytes, unsigned char fill)
{
    cl_mem m = fa_filled_buffer(ctx, bytes, fill);
    assert_non_null(m);
    return m;
}

static void test_dtype_names_and_sizes(void **state)
{
    (void)state;
    assert_int_equal(fcl_dtype_size(FCL_DTYPE_FP8_E4M3), 1);
    assert_int_equal(fcl_dtype_size(FCL_DTYPE_FP8_E5M2), 1);
    assert_string_equal(fcl_dtype_name(FCL_DTYPE_FP8_E4M3), "e4m3");
    assert_string_equal(fcl_dtype_name(FCL_DTYPE_FP8_E5M2), "e5m2");
    assert_int_equal(fcl_dtype_size((fcl_dtype)5), 0);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 8, 8, 16, FCL_DTYPE_FP8_E5M2, FCL_LAYOUT_BSHD);
    assert_int_equal(d.out_dtype, FCL_DTYPE_FP16);
    fcl_attention_desc_init(&d, 1, 1, 1, 8, 8, 16, FCL_DTYPE_BF16, FCL_LAYOUT_BSHD);
    assert_int_equal(d.out_dtype, FCL_DTYPE_BF16);
}

/* Sizes in bytes of each tensor's own type, the output type, aliasing,
 * descales, the backward and the KV-cache call: each status exact, nothing
 * written on error. */
static void test_statuses(void **state)
{
    (void)state;
    fcl_context *ctx = fa_ctx;
    enum { B = 2, H = 2, S = 8, D = 16, N = B * H * S * D };
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H, S, S, D, FCL_DTYPE_FP8_E4M3, FCL_LAYOUT_BSHD);
    d.out_dtype = FCL_DTYPE_FP32;
    cl_mem q = device_buffer(ctx, N, 0x38), k = device_buffer(ctx, N, 0x38),
           v = device_buffer(ctx, N, 0x38), o = device_buffer(ctx, 4 * N, 0xAB),
           lse = device_buffer(ctx, 4 * B * H * S, 0xAB);
    cl_mem q_short = device_buffer(ctx, N - 1, 0x38), o_short = device_buffer(ctx, 4 * N - 1, 0xAB);
    cl_mem o16 = device_buffer(ctx, 2 * N, 0xAB);
    cl_mem ds_short = device_buffer(ctx, 4 * B * H - 1, 0), ds = device_buffer(ctx, 4 * B * H, 0);
    fcl_attention_aux aux;
    memset(&aux, 0, sizeof aux);

    /* one byte per Q element, four per fp32 O element: exactly enough passes */
    assert_int_equal(fcl_attention_forward(ctx, &d, q_short, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o_short, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o16, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    assert_true(fa_buffer_all(ctx, o16, 2 * N, 0xAB) && fa_buffer_all(ctx, o_short, 4 * N - 1, 0xAB));
    d.out_dtype = FCL_DTYPE_FP16;
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o16, NULL, 0, NULL, NULL), FCL_OK);
    d.out_dtype = FCL_DTYPE_FP32;
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o, lse, 0, NULL, NULL), FCL_OK);
    assert_int_equal(clFinish(fcl_context_cl_queue(ctx)), CL_SUCCESS);
    assert_false(fa_buffer_all(ctx, o, 4 * N, 0xAB));

    /* O over Q's bytes */
    assert_int_equal(fcl_attention_forward(ctx, &d, o, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    /* the output type: 16 or 32 bits */
    d.out_dtype = FCL_DTYPE_FP8_E5M2;
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_DTYPE_UNSUPPORTED);
    d.out_dtype = (fcl_dtype)7;
    assert_int_equal(fcl_attention_forward(ctx, &d, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_DTYPE_UNSUPPORTED);
    d.out_dtype = FCL_DTYPE_FP32;

    /* descales: batch * heads floats each */
    aux.descale_k = ds_short;
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &aux, q, k, v, o, lse, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_TOO_SMALL);
    aux.descale_k = ds;
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &aux, q, k, v, o, lse, 0, NULL, NULL), FCL_OK);
    /* a descale in an output's bytes: the kernels read it while they write */
    assert_int_equal(clFinish(fcl_context_cl_queue(ctx)), CL_SUCCESS);
    cl_mem lse_copy = device_buffer(ctx, 4 * B * H * S, 0xCD);
    aux.descale_v = lse_copy;
    assert_int_equal(fcl_attention_forward_ex(ctx, &d, &aux, q, k, v, o, lse_copy, 0, NULL, NULL),
                     FCL_ERROR_BUFFER_ALIASING);
    assert_true(fa_buffer_all(ctx, lse_copy, 4 * B * H * S, 0xCD));
    aux.descale_v = NULL;
    clReleaseMemObject(lse_copy);

    /* descales of a dtype without them */
    fcl_attention_desc d16 = d;
    d16.dtype = FCL_DTYPE_FP16;
    assert_int_equal(fcl_attention_forward_ex(ctx, &d16, &aux, o16, o16, o16, o, lse, 0, NULL,
                                              NULL),
                     FCL_ERROR_INVALID_VALUE);
    /* ... where out_dtype is ignored: O is fp16, 2 bytes an element */
    d16.out_dtype = FCL_DTYPE_FP32;
    aux.descale_k = NULL;
    cl_mem x16 = device_buffer(ctx, 2 * N, 0x3C);
    assert_int_equal(fcl_attention_forward(ctx, &d16, x16, x16, x16, o16, NULL, 0, NULL, NULL),
                     FCL_OK);

    /* no backward: nothing written */
    cl_mem g[4] = {device_buffer(ctx, N, 0x38), device_buffer(ctx, N, 0xCD),
                   device_buffer(ctx, N, 0xCD), device_buffer(ctx, N, 0xCD)};
    assert_int_equal(clFinish(fcl_context_cl_queue(ctx)), CL_SUCCESS);
    assert_int_equal(fcl_attention_backward(ctx, &d, q, k, v, o, lse, g[0], g[1], g[2], g[3], 0,
                                            NULL, NULL),
                     FCL_ERROR_DTYPE_UNSUPPORTED);
    assert_int_equal(fcl_attention_backward(ctx, &d, q, k, v, o, NULL, g[0], g[1], g[2], g[3], 0,
                                            NULL, NULL),
                     FCL_ERROR_MISSING_LSE);
    for (int i = 1; i < 4; ++i)
        assert_true(fa_buffer_all(ctx, g[i], N, 0xCD));
    uint8_t hq[N], hg[3][N];
    float ho[N], hl[B * H * S];
    memset(hq, 0x38, sizeof hq);
    memset(hg, 0xCD, sizeof hg);
    assert_int_equal(fcl_attention_backward_host(ctx, &d, hq, hq, hq, ho, hl, hq, hg[0], hg[1],
                                                 hg[2]),
                     FCL_ERROR_DTYPE_UNSUPPORTED);
    for (size_t i = 0; i < sizeof hg; ++i)
        assert_int_equal(((uint8_t *)hg)[i], 0xCD);
    fcl_plan plan;
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DQ, &plan),
                     FCL_ERROR_DTYPE_UNSUPPORTED);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_BACKWARD_DKDV, &plan),
                     FCL_ERROR_DTYPE_UNSUPPORTED);
    assert_int_equal(fcl_plan_query(ctx, &d, FCL_KERNEL_FORWARD, &plan), FCL_OK);
    assert_int_equal(plan.dtype, FCL_DTYPE_FP8_E4M3);

    /* FP8 KV caches: decode plans without head packing; O's type checked */
    fcl_kvcache_desc kd;
    fcl_kvcache_desc_init(&kd, 1, 2, 1, 16, 1, 0, FCL_DTYPE_FP8_E5M2);
    assert_int_equal(kd.out_dtype, FCL_DTYPE_FP16);
    fcl_kvcache_desc_set_contiguous(&kd, 32);
    assert_int_equal(fcl_kvcache_plan_query(ctx, &kd, &plan), FCL_OK);
    assert_int_equal(plan.pack, 1);
    kd.out_dtype = FCL_DTYPE_FP8_E4M3;
    assert_int_equal(fcl_kvcache_plan_query(ctx, &kd, &plan), FCL_ERROR_DTYPE_UNSUPPORTED);

    cl_mem all[] = {q, k, v, o, lse, q_short, o_short, o16, ds_short, ds, x16, g[0], g[1], g[2], g[3]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
}

/* ---- FP8 KV caches ------------------------------------------------------------ */

/* The KV-cache call with FP8 caches (kvcache_support.h): appends copy the
 * bytes, pages smaller and larger than a key tile, GQA, split-KV, chunked
 * prefill rows, descales per (sequence, head), on every piece. */
static void test_kvcache(void **state)
{
    (void)state;
    static const int lens[3] = {37, 0, 70};
    /* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
    const kv_case cases[4] = {
        {3, 4, 2, 64, 1, 2, FCL_DTYPE_FP8_E4M3, 16, 96, lens, 1, -1, 0, 0, 0, 9000},
        {3, 8, 2, 64, 3, 0, FCL_DTYPE_FP8_E5M2, 0, 80, lens, 1, 30, 0, 1, 3, 9001},
        {3, 2, 1, 32, 70, 5, FCL_DTYPE_FP8_E4M3, 64, 128, lens, 1, -1, 15.0f, 0, 0, 9002},
        {3, 4, 4, 48, 2, 1, FCL_DTYPE_FP8_E5M2, 8, 80, lens, 0, -1, 0, 0, 2, 9003},
    };
    const fcl_dtype outs[4] = {FCL_DTYPE_FP16, FCL_DTYPE_FP32, FCL_DTYPE_BF16, FCL_DTYPE_FP32};
    for (int p = 0; p < PIECES; ++p) {
        fcl_context *ctx = piece_context(p);
        assert_non_null(ctx);
        for (int i = 0; i < 4; ++i) {
            /* every case on the device's own piece, half of them on each other one */
            if ((p == PIECE_PORTABLE && i % 2 == 0) || (p == PIECE_MMA && i % 2 == 1))
                continue;
            const kv_fp8 f = {outs[i], 1, rounds_p(ctx, cases[i].dtype, cases[i].head_dim)};
            assert_true(kv_run_fp8(ctx, &cases[i], &f));
        }
        fcl_context_destroy(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_known_values),
        cmocka_unit_test(test_codec_every_code),
        cmocka_unit_test(test_codec_encode),
        cmocka_unit_test(test_dtype_names_and_sizes),
        cmocka_unit_test(test_device_decoder_every_code),
        cmocka_unit_test(test_forward_cpu_piece),
        cmocka_unit_test(test_forward_portable),
        cmocka_unit_test(test_forward_tensor_cores),
        cmocka_unit_test(test_forward_variants),
        cmocka_unit_test(test_forward_profiles),
        cmocka_unit_test(test_statuses),
        cmocka_unit_test(test_kvcache),
    };
    return cmocka_run_group_tests(tests, fa_group_setup, fa_group_teardown);
}
