/* flashcl-bench-fp8 - the error of FP8 storage, as FlashAttention-3's paper
 * states it: the RMSE of O against float64 attention on the unquantised
 * inputs, beside fp16 storage.
 *
 * Inputs as the paper's: Q, K, V drawn from N(0, 1), with 0.1% of the
 * entries drawn from N(0, 10) instead (outlier features).  Storage:
 *   fp16  each value rounded to fp16;
 *   e4m3, e5m2  per-(batch, head) descale = amax / 448 (e4m3) or amax / 57344
 *         (e5m2), amax the largest |value| of that head's tensor; the bytes
 *         are value / descale rounded to nearest (fp8_codec.h), the call gets
 *         the descales (fcl_attention_aux).
 * O is written as fp16 (and, for FP8, also as fp32, which shows what the
 * input quantisation alone costs).  RMSE = sqrt(mean (O - O64)^2) over all
 * elements, and relative to the RMS of O64.  The float64 reference is
 * tests/reference.c's, on the unrounded inputs.  Writes a CSV to --out. */
#include "flashcl.h"

#include "build_info.h"
#include "fp8_codec.h"
#include "reference.h"
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    size_t batch, heads, seqlen, head_dim;
} shape;

static double *outlier_inputs(rng *r, size_t n)
{
    double *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i)
        x[i] = rng_uniform(r) < 0.001 ? 10.0 * rng_normal(r) : rng_normal(r);
    return x;
}

/* The stored form of x (contiguous (batch, heads, seq, dim), heads of `per`
 * elements): bytes of `dtype`, and for FP8 the descale of each head. */
static void *store(const double *x, size_t n, size_t per, fcl_dtype dtype, float *descale)
{
    const size_t es = fcl_dtype_size(dtype);
    unsigned char *out = malloc(n * es);
    if (es == 2) {
        for (size_t i = 0; i < n; ++i)
            fa_put_value(out + 2 * i, dtype, x[i]);
        return out;
    }
    for (size_t h = 0; h < n / per; ++h) {
        double amax = 0;
        for (size_t i = h * per; i < (h + 1) * per; ++i)
            amax = fmax(amax, fabs(x[i]));
        descale[h] = (float)(amax / fp8_max(dtype));
        for (size_t i = h * per; i < (h + 1) * per; ++i)
            out[i] = fp8_encode(x[i] / (double)descale[h], dtype);
    }
    return out;
}

typedef struct errors {
    double rmse, rel;
} errors;

static errors run(fcl_context *ctx, const shape *s, fcl_dtype dtype, fcl_dtype out_dtype,
                  const double *q, const double *k, const double *v, const double *o64)
{
    const size_t n = s->batch * s->heads * s->seqlen * s->head_dim, per = s->seqlen * s->head_dim;
    const size_t bh = s->batch * s->heads;
    float *ds[3];
    for (int i = 0; i < 3; ++i)
        ds[i] = malloc(bh * sizeof(float));
    void *sq = store(q, n, per, dtype, ds[0]), *sk = store(k, n, per, dtype, ds[1]),
         *sv = store(v, n, per, dtype, ds[2]);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, s->batch, s->heads, s->heads, s->seqlen, s->seqlen, s->head_dim,
                            dtype, FCL_LAYOUT_BHSD);
    d.out_dtype = out_dtype;
    fcl_attention_aux_host aux;
    memset(&aux, 0, sizeof aux);
    if (fcl_dtype_size(dtype) == 1) {
        aux.descale_q = ds[0];
        aux.descale_k = ds[1];
        aux.descale_v = ds[2];
    }
    const size_t oes = fcl_dtype_size(out_dtype);
    unsigned char *o = malloc(n * oes);
    const fcl_status st = fcl_attention_forward_host_ex(ctx, &d, &aux, sq, sk, sv, o, NULL);
    errors e = {NAN, NAN};
    if (st != FCL_OK) {
        fprintf(stderr, "forward (%s): %s\n", fcl_dtype_name(dtype), fcl_status_string(st));
    } else {
        double se = 0, sr = 0;
        for (size_t i = 0; i < n; ++i) {
            const double diff = fa_get_value(o + i * oes, out_dtype) - o64[i];
            se += diff * diff;
            sr += o64[i] * o64[i];
        }
        e.rmse = sqrt(se / (double)n);
        e.rel = sqrt(se / sr);
    }
    free(o), free(sq), free(sk), free(sv);
    for (int i = 0; i < 3; ++i)
        free(ds[i]);
    return e;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out_path = argv[++i];
        } else {
            fprintf(stderr, "usage: flashcl-bench-fp8 [--out results.csv]\n");
            return 2;
        }
    }
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(NULL, &ctx);
    if (st != FCL_OK) {
        fprintf(stderr, "context: %s\n", fcl_status_string(st));
        return 1;
    }
    fcl_device_info info;
    fcl_context_device_info(ctx, &info);
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out_path && !out) {
        fprintf(stderr, "cannot write %s\n", out_path);
        return 1;
    }
    printf("device: %s (%s, driver %s)\nflashcl %s, commit %s, %s\n", info.name, info.platform_name,
           info.driver_version, fcl_version_string(), FCL_GIT_COMMIT, date);
    printf("inputs N(0,1), 0.1%% of entries N(0,10); RMSE of O against float64 attention on "
           "the unquantised inputs\n\n");
    printf("%-5s %-4s %3s %2s %5s %4s | %10s %10s\n", "store", "out", "B", "H", "N", "d", "RMSE",
           "rel RMSE");
    if (out)
        fprintf(out, "# device: %s\n# driver: %s\n# date: %s\n# commit: %s\n# inputs: N(0,1) with "
                     "0.1%% of entries N(0,10); FP8 descale per (batch, head) = amax / max "
                     "finite\nstorage,out,B,H,N,d,rmse,rel_rmse\n",
                info.name, info.driver_version, date, FCL_GIT_COMMIT);

    const shape shapes[] = {{1, 4, 1024, 64}, {1, 4, 1024, 128}, {1, 2, 4096, 128}};
    const struct {
        fcl_dtype store, out;
    } runs[] = {{FCL_DTYPE_FP16, FCL_DTYPE_FP16},     {FCL_DTYPE_FP8_E4M3, FCL_DTYPE_FP16},
                {FCL_DTYPE_FP8_E5M2, FCL_DTYPE_FP16}, {FCL_DTYPE_FP8_E4M3, FCL_DTYPE_FP32},
                {FCL_DTYPE_FP8_E5M2, FCL_DTYPE_FP32}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
        const shape *s = &shapes[si];
        const size_t n = s->batch * s->heads * s->seqlen * s->head_dim;
        rng r = {1000 + si};
        double *q = outlier_inputs(&r, n), *k = outlier_inputs(&r, n), *v = outlier_inputs(&r, n);
        double *o64 = malloc(n * sizeof *o64), *lse64 = malloc(n / s->head_dim * sizeof *lse64);
        const ref_problem p = {s->batch, s->heads, s->heads, s->seqlen, s->seqlen, s->head_dim,
                               1.0 / sqrt((double)s->head_dim), 0, FCL_DTYPE_FP32, NULL, 0};
        ref_forward_f64(&p, q, k, v, o64, lse64);
        for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ++ri) {
            const errors e = run(ctx, s, runs[ri].store, runs[ri].out, q, k, v, o64);
            printf("%-5s %-4s %3zu %2zu %5zu %4zu | %10.3e %10.3e\n", fcl_dtype_name(runs[ri].store),
                   fcl_dtype_name(runs[ri].out), s->batch, s->heads, s->seqlen, s->head_dim, e.rmse,
                   e.rel);
            if (out)
                fprintf(out, "%s,%s,%zu,%zu,%zu,%zu,%.4e,%.4e\n", fcl_dtype_name(runs[ri].store),
                        fcl_dtype_name(runs[ri].out), s->batch, s->heads, s->seqlen, s->head_dim,
                        e.rmse, e.rel);
        }
        free(q), free(k), free(v), free(o64), free(lse64);
    }
    if (out)
        fclose(out);
    fcl_context_destroy(ctx);
    return 0;
}
