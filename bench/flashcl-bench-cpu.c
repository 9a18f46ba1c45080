/* flashcl-bench-cpu - flashcl's forward on a CPU device beside standard
 * attention on OpenBLAS, on the same cores, in one run.
 *
 * The baseline is the simplest BLAS code (a benchmark-only dependency, never
 * linked into the library): for each (batch, head), S = Q K^T by sgemm, a
 * row softmax (masked entries set to -inf when causal: the masked half is
 * still computed), O = P V by sgemm; OpenBLAS threads over the cores.  The
 * ceiling column is OpenBLAS's own sgemm rate (1024^3) in the same run:
 * what the cores do on a dense product, the roof for both.
 * FLOPs are 4 B H N^2 d (halved when causal) for both, so the ratio is a
 * ratio of times.  Inputs random, medians of --reps calls after a warm-up.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"
#include "build_info.h"
#include <cblas.h>
#include <flashcl.h>

#include <math.h>
#include <stdio.h>
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

static void blas_attention(int B, int H, int N, int d, int causal, const float *q,
                           const float *k, const float *v, float *o, float *s)
{
    const float scale = 1.0f / sqrtf((float)d);
    const int ld = H * d; /* row stride of the (B, N, H, d) tensors */
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const size_t at = (size_t)b * N * ld + (size_t)h * d;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, d, scale, q + at, ld,
                        k + at, ld, 0.0f, s, N);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, d, N, 1.0f, s, N, v + at,
                        ld, 0.0f, o + at, ld);
        }
}

static double sgemm_gflops(int reps)
{
    const int n = 1024;
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

int main(int argc, char **argv)
{
    int reps = 3;
    const char *out_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out_path = argv[++i];
        else {
            fprintf(stderr, "usage: flashcl-bench-cpu [--reps 3] [--out results.csv]\n"
                            "  the device: FLASHCL_DEVICE=P:D (default: the first GPU, else CPU)\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 16)
        reps = 3;
    CHECK(fcl_context_create(NULL, &g_ctx));
    fcl_device_info info;
    CHECK(fcl_context_device_info(g_ctx, &info));
    const double ceiling = sgemm_gflops(reps);
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("device: %s (%s, driver %s), %u compute units\nflashcl commit %s, %s; OpenBLAS %s; "
           "sgemm 1024^3: %.1f GFLOP/s; median of %d\n\n",
           info.name, info.platform_name, info.driver_version, info.compute_units, FCL_GIT_COMMIT,
           date, openblas_get_config(), ceiling, reps);
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out)
        fprintf(out, "# device: %s\n# platform: %s\n# driver: %s\n# date: %s\n# commit: %s\n"
                     "# openblas: %s\n# sgemm_gflops: %.2f\n"
                     "dtype,B,H,N,d,causal,variant,flashcl_gflops,openblas_gflops,ratio,share_of_sgemm\n",
                info.name, info.platform_name, info.driver_version, date, FCL_GIT_COMMIT,
                openblas_get_config(), ceiling);
    printf("%-5s %3s %2s %5s %4s %6s %-14s | %10s %10s %7s %7s\n", "dtype", "B", "H", "N", "d",
           "causal", "variant", "flashcl", "OpenBLAS", "ratio", "%sgemm");
    const int H = 4, tokens = 8192;
    const int seqlens[] = {512, 1024, 2048, 4096, 8192}, dims[] = {64, 128};
    const fcl_dtype dtypes[] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16};
    for (int di = 0; di < 2; ++di)
        for (int ti = 0; ti < 2; ++ti)
            for (int ni = 0; ni < 5; ++ni)
                for (int causal = 0; causal <= 1; ++causal) {
                    const int d = dims[di], N = seqlens[ni], B = tokens / N;
                    const fcl_dtype dt = dtypes[ti];
                    const size_t n = (size_t)B * N * H * d;
                    float *q = random_floats(n, 1), *k = random_floats(n, 2),
                          *v = random_floats(n, 3), *o = malloc(n * sizeof *o),
                          *s = malloc((size_t)N * N * sizeof *s);
                    double tb[16], tf[16];
                    blas_attention(B, H, N, d, causal, q, k, v, o, s);
                    for (int r = 0; r < reps; ++r) {
                        const double t0 = bench_now_s();
                        blas_attention(B, H, N, d, causal, q, k, v, o, s);
                        tb[r] = bench_now_s() - t0;
                    }
                    const size_t es = dt == FCL_DTYPE_FP32 ? 4 : 2;
                    void *qs = as_storage(q, n, dt), *ks = as_storage(k, n, dt),
                         *vs = as_storage(v, n, dt);
                    cl_mem mq = buffer_of(qs, n * es), mk = buffer_of(ks, n * es),
                           mv = buffer_of(vs, n * es), mo = buffer_of(qs, n * es);
                    fcl_attention_desc desc;
                    fcl_attention_desc_init(&desc, B, H, H, N, N, d, dt, FCL_LAYOUT_BSHD);
                    desc.causal = causal;
                    cl_command_queue queue = fcl_context_cl_queue(g_ctx);
                    CHECK(fcl_attention_forward(g_ctx, &desc, mq, mk, mv, mo, NULL, 0, NULL, NULL));
                    CL_CHECK(clFinish(queue));
                    for (int r = 0; r < reps; ++r) {
                        const double t0 = bench_now_s();
                        CHECK(fcl_attention_forward(g_ctx, &desc, mq, mk, mv, mo, NULL, 0, NULL,
                                                    NULL));
                        CL_CHECK(clFinish(queue));
                        tf[r] = bench_now_s() - t0;
                    }
                    fcl_plan plan;
                    CHECK(fcl_plan_query(g_ctx, &desc, FCL_KERNEL_FORWARD, &plan));
                    const double flops = 4.0 * B * H * (double)N * N * d * (causal ? 0.5 : 1.0);
                    const double gf = flops / bench_median(tf, reps) / 1e9;
                    const double gb = flops / bench_median(tb, reps) / 1e9;
                    printf("%-5s %3d %2d %5d %4d %6d %-14s | %10.1f %10.1f %7.2f %6.1f%%\n",
                           fcl_dtype_name(dt), B, H, N, d, causal, plan.variant, gf, gb, gf / gb,
                           100.0 * gf / ceiling);
                    fflush(stdout);
                    if (out)
                        fprintf(out, "%s,%d,%d,%d,%d,%d,%s,%.2f,%.2f,%.3f,%.4f\n",
                                fcl_dtype_name(dt), B, H, N, d, causal, plan.variant, gf, gb,
                                gf / gb, gf / ceiling);
                    clReleaseMemObject(mq), clReleaseMemObject(mk), clReleaseMemObject(mv),
                        clReleaseMemObject(mo);
                    free(q), free(k), free(v), free(o), free(s), free(qs), free(ks), free(vs);
                }
    if (out)
        fclose(out);
    fcl_context_destroy(g_ctx);
    return 0;
}
