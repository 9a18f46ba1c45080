/* flashcl-bench-cpu - flashcl on a CPU device beside standard attention on
 * OpenBLAS, on the same cores, in one run: forward, backward and decoding.
 *
 * The baseline is the simplest BLAS code (a benchmark-only dependency, never
 * linked into the library), per (batch, head) with OpenBLAS threading over
 * the cores.  Forward: S = Q K^T by sgemm, a row softmax (masked entries
 * zeroed when causal: the masked half is still computed), O = P V by sgemm.
 * Backward: S and P recomputed as in the forward, then dV = P^T dO,
 * dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = dS K, dK = dS^T Q (five
 * sgemms).  Decoding: one query row per head against sk keys, the query
 * heads of one K/V head as one sgemm each way.  The ceiling column is
 * OpenBLAS's own best sgemm rate (1024^3 to 4096^3) in the same run: what
 * the cores do on a dense product, the roof for both.  FLOPs are 4 B H N^2 d for the forward
 * and 2.5x that for the backward (halved when causal) for both codes, so a
 * ratio is a ratio of times; decoding reports K/V bytes read per second
 * (flashcl reads the storage type, OpenBLAS fp32).  Inputs random, medians
 * of --reps calls after a warm-up.  PoCL's threads: POCL_MAX_PTHREAD_COUNT
 * (PoCL 3) or POCL_CPU_MAX_CU_NUM (PoCL 4+); OpenBLAS's: OPENBLAS_NUM_THREADS.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* setenv, execv */

#include "bench_util.h"
#include "build_info.h"
#include <cblas.h>
#include <flashcl.h>

#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        fcl_status e_ = (expr);                                                              \
        if (e_ != FCL_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s\n%s", __FILE__, __LINE__, fcl_status_string(e_),     \
                    g_ctx ? fcl_context_build_log(g_ctx) : "");                              \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define CL_CHECK(expr)                                                                       \
    do {                                                                                     \
        cl_int e_ = (expr);                                                                  \
        if (e_ != CL_SUCCESS) {                                                              \
            fprintf(stderr, "%s:%d: OpenCL error %d\n", __FILE__, __LINE__, (int)e_);        \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static fcl_context *g_ctx;

static float *random_floats(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
    }
    return p;
}

/* ---- the baseline: standard attention on OpenBLAS, (B, N, H, d) layout ---- */

/* P = softmax of each row of the N x N scores s, in place (causal: entries
 * right of the diagonal are zeroed after being computed). */
static void softmax_rows(float *s, int N, int causal)
{
    for (int i = 0; i < N; ++i) {
        float *row = s + (size_t)i * N;
        const int last = causal ? i : N - 1;
        float m = -INFINITY, sum = 0.0f;
        for (int j = 0; j <= last; ++j) m = row[j] > m ? row[j] : m;
        for (int j = 0; j <= last; ++j) sum += (row[j] = expf(row[j] - m));
        const float inv = 1.0f / sum;
        for (int j = 0; j <= last; ++j) row[j] *= inv;
        for (int j = last + 1; j < N; ++j) row[j] = 0.0f;
    }
}

/* s = P = softmax(Q K^T / sqrt(d)) of one (batch, head), rows ld apart. */
static void probabilities(const float *q, const float *k, int ld, int N, int d, int causal,
                          float *s)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, d, 1.0f / sqrtf((float)d), q, ld,
                k, ld, 0.0f, s, N);
    softmax_rows(s, N, causal);
}

static void blas_attention(int B, int H, int N, int d, int causal, const float *q,
                           const float *k, const float *v, float *o, float *s)
{
    const int ld = H * d; /* row stride of the (B, N, H, d) tensors */
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const size_t at = (size_t)b * N * ld + (size_t)h * d;
            probabilities(q + at, k + at, ld, N, d, causal, s);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, d, N, 1.0f, s, N, v + at,
                        ld, 0.0f, o + at, ld);
        }
}

/* The backward, given O: gradients of every (batch, head), as described above. */
static void blas_attention_backward(int B, int H, int N, int d, int causal, const float *q,
                                    const float *k, const float *v, const float *o,
                                    const float *dout, float *dq, float *dk, float *dv, float *s,
                                    float *dp)
{
    const float scale = 1.0f / sqrtf((float)d);
    const int ld = H * d;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const size_t at = (size_t)b * N * ld + (size_t)h * d;
            probabilities(q + at, k + at, ld, N, d, causal, s);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, d, N, 1.0f, s, N, dout + at,
                        ld, 0.0f, dv + at, ld);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, d, 1.0f, dout + at, ld,
                        v + at, ld, 0.0f, dp, N);
            for (int i = 0; i < N; ++i) {
                const float *oi = o + at + (size_t)i * ld, *gi = dout + at + (size_t)i * ld;
                float delta = 0.0f;
                for (int t = 0; t < d; ++t) delta += oi[t] * gi[t];
                float *srow = s + (size_t)i * N, *prow = dp + (size_t)i * N;
                for (int j = 0; j < N; ++j) srow[j] *= prow[j] - delta; /* dS in place of P */
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, d, N, scale, s, N, k + at,
                        ld, 0.0f, dq + at, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, d, N, scale, s, N, q + at, ld,
                        0.0f, dk + at, ld);
        }
}

/* Decoding: q (B, Hq, d), k/v (B, sk, Hkv, d); per (batch, K/V head) its
 * Hq/Hkv query rows at once. */
static void blas_decode(int B, int Hq, int Hkv, int sk, int d, const float *q, const float *k,
                        const float *v, float *o, float *s)
{
    const float scale = 1.0f / sqrtf((float)d);
    const int g = Hq / Hkv, ld = Hkv * d;
    for (int b = 0; b < B; ++b)
        for (int hk = 0; hk < Hkv; ++hk) {
            const float *qb = q + ((size_t)b * Hq + (size_t)hk * g) * d;
            const size_t at = (size_t)b * sk * ld + (size_t)hk * d;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g, sk, d, scale, qb, d, k + at,
                        ld, 0.0f, s, sk);
            for (int i = 0; i < g; ++i) {
                float *row = s + (size_t)i * sk, m = -INFINITY, sum = 0.0f;
                for (int j = 0; j < sk; ++j) m = row[j] > m ? row[j] : m;
                for (int j = 0; j < sk; ++j) sum += (row[j] = expf(row[j] - m));
                for (int j = 0; j < sk; ++j) row[j] /= sum;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g, d, sk, 1.0f, s, sk, v + at,
                        ld, 0.0f, o + ((size_t)b * Hq + (size_t)hk * g) * d, d);
        }
}

/* OpenBLAS 0.3.21 does not know newer Xeons and falls back to its SSE3
 * (Prescott) kernels, 5x below what the cores do on an sgemm (41 against
 * 217-245 GFLOP/s on this 2-core AVX-512 Xeon): a baseline that weak would
 * flatter us.  It reads OPENBLAS_CORETYPE when loaded, so run again with the
 * newest kernels the CPU can execute. */
static void fair_openblas(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") != NULL || strstr(openblas_get_config(), "Prescott") == NULL)
        return;
    __builtin_cpu_init();
    const char *core = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : NULL;
    if (core == NULL || setenv("OPENBLAS_CORETYPE", core, 1) != 0)
        return;
    execv("/proc/self/exe", argv); /* returns only on failure: go on as we are */
}

/* OpenBLAS's sgemm rate on n^3 (median of reps). */
static double sgemm_gflops_at(int n, int reps)
{
    float *a = random_floats((size_t)n * n, 1), *b = random_floats((size_t)n * n, 2),
          *c = random_floats((size_t)n * n, 3);
    double t[16];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    for (int r = 0; r < reps; ++r) {
        const double t0 = bench_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        t[r] = bench_now_s() - t0;
    }
    free(a), free(b), free(c);
    return 2.0 * n * n * (double)n / bench_median(t, reps) / 1e9;
}

/* The ceiling: the best of 1024^3, 2048^3 and 4096^3.  One size is not
 * enough: 16 threads do not fill up on 1024^3 (1.0 TFLOP/s there, while the
 * attention forward reached 1.6: NOTES.md, run 21). */
static double sgemm_gflops(int reps, int *best_n)
{
    double best = 0.0;
    for (int n = 1024; n <= 4096; n *= 2) {
        const double g = sgemm_gflops_at(n, reps);
        if (g > best)
            best = g, *best_n = n;
    }
    return best;
}

/* ---- flashcl ------------------------------------------------------------------- */

static cl_mem buffer_of(const void *host, size_t bytes)
{
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(g_ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              bytes, (void *)host, &err);
    CL_CHECK(err);
    return m;
}

/* fp32 values as the storage type's bits (fp16 by rounding) */
static void *as_storage(const float *x, size_t n, fcl_dtype dt)
{
    if (dt == FCL_DTYPE_FP32) {
        float *p = malloc(n * sizeof *p);
        memcpy(p, x, n * sizeof *p);
        return p;
    }
    uint16_t *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; ++i) {
        /* inputs lie in [-1, 1]: normal halves or zero, round to nearest */
        const float a = fabsf(x[i]);
        uint16_t h = 0;
        if (a >= 6.103515625e-05f) {
            int e = 0;
            const float m = frexpf(a, &e); /* a = m 2^e, m in [0.5, 1) */
            unsigned mant = (unsigned)lrintf((m * 2.0f - 1.0f) * 1024.0f);
            int ex = e - 1 + 15;
            if (mant == 1024) mant = 0, ++ex;
            h = (uint16_t)((ex << 10) | mant);
        }
        p[i] = (uint16_t)(h | (x[i] < 0 ? 0x8000u : 0u));
    }
    return p;
}

/* fp16 bits as a float (normal, subnormal or zero: outputs are finite) */
static float half_to_float(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const float a = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000u) ? -a : a;
}

/* A speed measured on wrong results is no measurement: flashcl's output is
 * read back and compared with OpenBLAS's from the same inputs, and the run
 * stops on a mismatch.  Inputs lie in [-1, 1], so |O| <= 1.  fp32: two
 * fp32 codes differing in summation order and exp, far below 1e-4.  fp16:
 * flashcl sees Q, K, V rounded to fp16 (relative 2^-11) and rounds O
 * (2^-11), OpenBLAS computes on the fp32 values: a few 1e-3 at most, so
 * 1e-2; a broken kernel is off by tenths. */
static void check_output(cl_mem mo, const float *ref, size_t n, fcl_dtype dt, const char *what)
{
    const size_t es = dt == FCL_DTYPE_FP32 ? 4 : 2;
    unsigned char *raw = malloc(n * es);
    CL_CHECK(clEnqueueReadBuffer(fcl_context_cl_queue(g_ctx), mo, CL_TRUE, 0, n * es, raw, 0, NULL,
                                 NULL));
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
        float x;
        if (dt == FCL_DTYPE_FP32) {
            memcpy(&x, raw + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            x = half_to_float(h);
        }
        const double err = fabs((double)x - (double)ref[i]);
        if (!(err <= worst)) /* NaN too */
            worst = isnan(err) ? INFINITY : err;
    }
    free(raw);
    const double tol = dt == FCL_DTYPE_FP32 ? 1e-4 : 1e-2;
    if (!(worst <= tol)) {
        fprintf(stderr, "MISMATCH %s: max |O - O_openblas| = %g > %g\n", what, worst, tol);
        exit(1);
    }
}

typedef struct options {
    int reps, quick, backward, decode;
} options;

static FILE *g_out;
static double g_ceiling;

/* out = the median time of `reps` runs of the statement(s) after it, after
 * one untimed warm-up run. */
#define MEDIAN_TIME(reps, out, ...)                                  \
    do {                                                             \
        __VA_ARGS__;                                                 \
        double t_[16];                                               \
        for (int r_ = 0; r_ < (reps); ++r_) {                        \
            const double t0_ = bench_now_s();                        \
            __VA_ARGS__;                                             \
            t_[r_] = bench_now_s() - t0_;                            \
        }                                                            \
        (out) = bench_median(t_, (reps));                            \
    } while (0)

static void report(const char *pass, const char *dtype, int B, int H, int N, int d, int causal,
                   const char *variant, double ours, double blas, const char *unit)
{
    printf("%-6s %-5s %3d %2d %6d %4d %6d %-12s | %10.1f %10.1f %7.2f %6.1f%%  %s\n", pass, dtype,
           B, H, N, d, causal, variant, ours, blas, ours / blas,
           strcmp(unit, "GFLOP/s") == 0 ? 100.0 * ours / g_ceiling : 0.0, unit);
    fflush(stdout);
    if (g_out)
        fprintf(g_out, "%s,%s,%d,%d,%d,%d,%d,%s,%.2f,%.2f,%.3f,%.4f,%s\n", pass, dtype, B, H, N, d,
                causal, variant, ours, blas, ours / blas,
                strcmp(unit, "GFLOP/s") == 0 ? ours / g_ceiling : 0.0, unit);
}

/* Forward and (opts->backward) backward of one shape. */
static void bench_prefill(const options *opts, fcl_dtype dt, int B, int H, int N, int d,
                          int causal)
{
    const int reps = opts->reps;
    const size_t n = (size_t)B * N * H * d;
    float *q = random_floats(n, 1), *k = random_floats(n, 2), *v = random_floats(n, 3),
          *dout = random_floats(n, 4), *o = malloc(n * sizeof *o),
          *s = malloc((size_t)N * N * sizeof *s);
    double tb, tf;
    MEDIAN_TIME(reps, tb, blas_attention(B, H, N, d, causal, q, k, v, o, s));
    const size_t es = dt == FCL_DTYPE_FP32 ? 4 : 2;
    void *qs = as_storage(q, n, dt), *ks = as_storage(k, n, dt), *vs = as_storage(v, n, dt),
         *gs = as_storage(dout, n, dt);
    cl_mem mq = buffer_of(qs, n * es), mk = buffer_of(ks, n * es), mv = buffer_of(vs, n * es),
           mo = buffer_of(qs, n * es), mg = buffer_of(gs, n * es), mdq = buffer_of(qs, n * es),
           mdk = buffer_of(qs, n * es), mdv = buffer_of(qs, n * es);
    float *lse_init = calloc((size_t)B * H * N, sizeof *lse_init);
    cl_mem mlse = buffer_of(lse_init, (size_t)B * H * N * sizeof(float));
    fcl_attention_desc desc;
    fcl_attention_desc_init(&desc, B, H, H, N, N, d, dt, FCL_LAYOUT_BSHD);
    desc.causal = causal;
    cl_command_queue queue = fcl_context_cl_queue(g_ctx);
    MEDIAN_TIME(reps, tf, CHECK(fcl_attention_forward(g_ctx, &desc, mq, mk, mv, mo, mlse, 0, NULL, NULL));
                CL_CHECK(clFinish(queue)));
    check_output(mo, o, n, dt, "forward");
    fcl_plan plan;
    CHECK(fcl_plan_query(g_ctx, &desc, FCL_KERNEL_FORWARD, &plan));
    const double flops = 4.0 * B * H * (double)N * N * d * (causal ? 0.5 : 1.0);
    report("fwd", fcl_dtype_name(dt), B, H, N, d, causal, plan.variant,
           flops / tf / 1e9, flops / tb / 1e9, "GFLOP/s");
    if (opts->backward) {
        float *dq = malloc(n * sizeof *dq), *dk = malloc(n * sizeof *dk),
              *dv = malloc(n * sizeof *dv), *dp = malloc((size_t)N * N * sizeof *dp);
        MEDIAN_TIME(reps, tb,
                    blas_attention_backward(B, H, N, d, causal, q, k, v, o, dout, dq, dk, dv, s, dp));
        MEDIAN_TIME(reps, tf,
                    CHECK(fcl_attention_backward(g_ctx, &desc, mq, mk, mv, mo, mlse, mg, mdq, mdk,
                                                 mdv, 0, NULL, NULL));
                    CL_CHECK(clFinish(queue)));
        CHECK(fcl_plan_query(g_ctx, &desc, FCL_KERNEL_BACKWARD_DQ, &plan));
        report("bwd", fcl_dtype_name(dt), B, H, N, d, causal, plan.variant,
               2.5 * flops / tf / 1e9, 2.5 * flops / tb / 1e9, "GFLOP/s");
        free(dq), free(dk), free(dv), free(dp);
    }
    cl_mem all[] = {mq, mk, mv, mo, mg, mdq, mdk, mdv, mlse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) clReleaseMemObject(all[i]);
    free(q), free(k), free(v), free(dout), free(o), free(s), free(qs), free(ks), free(vs),
        free(gs), free(lse_init);
}

/* One query row per head against sk keys: B = 8, 32 query heads on 8 K/V heads. */
static void bench_decode(const options *opts, fcl_dtype dt, int sk, int d)
{
    const int reps = opts->reps, B = 8, Hq = 32, Hkv = 8;
    const size_t nq = (size_t)B * Hq * d, nkv = (size_t)B * sk * Hkv * d;
    float *q = random_floats(nq, 1), *k = random_floats(nkv, 2), *v = random_floats(nkv, 3),
          *o = malloc(nq * sizeof *o), *s = malloc((size_t)Hq / Hkv * sk * sizeof *s);
    double tb, tf;
    MEDIAN_TIME(reps, tb, blas_decode(B, Hq, Hkv, sk, d, q, k, v, o, s));
    const size_t es = dt == FCL_DTYPE_FP32 ? 4 : 2;
    void *qs = as_storage(q, nq, dt), *ks = as_storage(k, nkv, dt), *vs = as_storage(v, nkv, dt);
    cl_mem mq = buffer_of(qs, nq * es), mk = buffer_of(ks, nkv * es), mv = buffer_of(vs, nkv * es),
           mo = buffer_of(qs, nq * es);
    fcl_attention_desc desc;
    fcl_attention_desc_init(&desc, B, Hq, Hkv, 1, sk, d, dt, FCL_LAYOUT_BSHD);
    cl_command_queue queue = fcl_context_cl_queue(g_ctx);
    MEDIAN_TIME(reps, tf, CHECK(fcl_attention_forward(g_ctx, &desc, mq, mk, mv, mo, NULL, 0, NULL, NULL));
                CL_CHECK(clFinish(queue)));
    check_output(mo, o, nq, dt, "decode");
    fcl_plan plan;
    CHECK(fcl_plan_query(g_ctx, &desc, FCL_KERNEL_FORWARD, &plan));
    const double ours = 2.0 * nkv * es / tf / 1e9;
    const double blas = 2.0 * nkv * 4 / tb / 1e9;
    /* the ratio is of times: OpenBLAS's bytes are fp32 */
    report("decode", fcl_dtype_name(dt), B, Hq, sk, d, 0, plan.variant, ours,
           blas * (double)es / 4.0, "GB/s");
    clReleaseMemObject(mq), clReleaseMemObject(mk), clReleaseMemObject(mv), clReleaseMemObject(mo);
    free(q), free(k), free(v), free(o), free(s), free(qs), free(ks), free(vs);
}

int main(int argc, char **argv)
{
    options opts = {3, 0, 1, 1};
    const char *out_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            opts.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out_path = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            opts.quick = 1;
        else if (!strcmp(argv[i], "--no-backward"))
            opts.backward = 0;
        else if (!strcmp(argv[i], "--no-decode"))
            opts.decode = 0;
        else {
            fprintf(stderr,
                    "usage: flashcl-bench-cpu [--reps 3] [--quick] [--no-backward] [--no-decode]\n"
                    "                         [--out results.csv]\n"
                    "  --quick: fp32, d 128, N 1024 and 4096 only (thread scaling)\n"
                    "  the device: FLASHCL_DEVICE=P:D (default: the first GPU, else CPU)\n");
            return 2;
        }
    }
    if (opts.reps < 1 || opts.reps > 16)
        opts.reps = 3;
    fair_openblas(argv);
    CHECK(fcl_context_create(NULL, &g_ctx));
    fcl_device_info info;
    CHECK(fcl_context_device_info(g_ctx, &info));
    int sgemm_n = 0;
    g_ceiling = sgemm_gflops(opts.reps, &sgemm_n);
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char *pocl_threads = getenv("POCL_MAX_PTHREAD_COUNT");
    if (pocl_threads == NULL)
        pocl_threads = getenv("POCL_CPU_MAX_CU_NUM");
    const char *blas_threads = getenv("OPENBLAS_NUM_THREADS");
    printf("device: %s (%s, driver %s), %u compute units\nflashcl commit %s, %s; OpenBLAS %s "
           "(threads %s); sgemm (best of 1024^3..4096^3, at %d): %.1f GFLOP/s; median of %d\n\n",
           info.name, info.platform_name, info.driver_version, info.compute_units, FCL_GIT_COMMIT,
           date, openblas_get_config(), blas_threads ? blas_threads : "default", sgemm_n,
           g_ceiling, opts.reps);
    g_out = out_path ? fopen(out_path, "w") : NULL;
    if (g_out)
        fprintf(g_out, "# device: %s\n# platform: %s\n# driver: %s\n# date: %s\n# commit: %s\n"
                       "# openblas: %s\n# sgemm_gflops: %.2f\n# compute_units: %u\n"
                       "# threads: pocl %s, openblas %s\n"
                       "pass,dtype,B,H,N,d,causal,variant,flashcl,openblas,ratio,share_of_sgemm,unit\n",
                info.name, info.platform_name, info.driver_version, date, FCL_GIT_COMMIT,
                openblas_get_config(), g_ceiling, info.compute_units,
                pocl_threads ? pocl_threads : "default", blas_threads ? blas_threads : "default");
    printf("%-6s %-5s %3s %2s %6s %4s %6s %-12s | %10s %10s %7s %7s\n", "pass", "dtype", "B", "H",
           "N", "d", "causal", "variant", "flashcl", "OpenBLAS", "ratio", "%sgemm");
    const int H = 4, tokens = 8192;
    const int seqlens[] = {512, 1024, 2048, 4096, 8192}, quick_seqlens[] = {1024, 4096};
    const int dims[] = {64, 128};
    const fcl_dtype dtypes[] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16};
    const int ndt = opts.quick ? 1 : 2, nd = opts.quick ? 1 : 2, nn = opts.quick ? 2 : 5;
    for (int di = 0; di < nd; ++di)
        for (int ti = 0; ti < ndt; ++ti)
            for (int ni = 0; ni < nn; ++ni)
                for (int causal = 0; causal <= 1; ++causal) {
                    const int d = opts.quick ? 128 : dims[di];
                    const int N = opts.quick ? quick_seqlens[ni] : seqlens[ni];
                    bench_prefill(&opts, dtypes[ti], tokens / N, H, N, d, causal);
                }
    if (opts.decode) {
        const int sks[] = {1024, 8192, 32768};
        for (int ti = 0; ti < ndt; ++ti)
            for (int si = 0; si < 3; ++si) bench_decode(&opts, dtypes[ti], sks[si], 128);
    }
    if (g_out)
        fclose(g_out);
    fcl_context_destroy(g_ctx);
    return 0;
}
