/* flashcl-bench - FlashAttention forward/backward throughput against standard
 * (materialising) attention on the same device, side by side in one run.
 *
 * Shapes follow the FlashAttention papers: batch * seqlen = --tokens and
 * heads * head_dim = --hidden, contiguous (batch, heads, seq, dim).  FLOPs:
 * forward 4 * B * H * N^2 * d (halved when causal), backward 2.5x forward;
 * with --head-dim-v dv (V, O, dO, dV dv wide, standard attention not run)
 * forward 2 * B * H * N^2 * (d + dv), backward 2 * B * H * N^2 * (3d + 2dv)
 * (Q K^T, P V; backward: Q K^T, dO V^T, P^T dO, dS K, dS^T Q).
 * With --q-per-kv G, K and V (dK, dV) have H / G heads, each shared by G
 * query heads (GQA; the FLOPs are the same; standard attention not run).
 * Each timing is the median of --reps runs after two warm-up runs, from
 * enqueue to clFinish.  The fp32 FMA ceiling of the device is measured in the
 * same run.  Our outputs are checked against the standard attention's where
 * both ran (fp32).  Writes a CSV (with # metadata lines) to --out.
 * With --profile the queue also times each call on the device (OpenCL's
 * profiling: from the end of a 4-byte fill enqueued just before the call to
 * the start of another just after it, every launch of the call and the gaps
 * between; fills, not markers, because NVIDIA's driver stamps a marker when
 * it is processed on the host, so a marker after a call of several kernels
 * can read earlier than one before it),
 * as CUDA events time PyTorch's calls in sdpa_backends.py; the CSV's
 * ours_device_ms / ours_device_tflops hold those medians (empty without). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "flashcl.h"

#include "bench_util.h"
#include "build_info.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char fcl_cl_reference[];

#define CHECK_CL(expr)                                                              \
    do {                                                                            \
        cl_int e_ = (expr);                                                         \
        if (e_ != CL_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,           \
                    fcl_status_string(e_));                                         \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

typedef struct config {
    const char *device;
    fcl_dtype dtype;
    size_t head_dims[8], n_head_dims;
    size_t seqlens[16], n_seqlens;
    int causals[2], n_causals;
    size_t tokens, hidden;
    int reps;
    int backward;
    int naive;
    int portable_only;
    const char *out;
    size_t head_dim_v;          /* V's columns; 0: each head_dim */
    int profile;                /* --profile: also the device's span of each call */
    size_t q_per_kv;            /* --q-per-kv: query heads a K/V head (GQA); 1: one each */
} config;

static double g_start;

/* Progress on stderr, so that a slow or stuck step shows where it is. */
static void progress(const char *what, size_t N, size_t d)
{
    fprintf(stderr, "[%7.1fs] N=%zu d=%zu: %s\n", bench_now_s() - g_start, N, d, what);
}

static size_t parse_list(const char *s, size_t *out, size_t cap)
{
    size_t n = 0;
    while (*s && n < cap) {
        char *end = NULL;
        out[n++] = (size_t)strtoull(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s) break;
    }
    return n;
}

/* ---- standard attention ---------------------------------------------------- */

typedef struct naive {
    cl_program prog;
    cl_kernel gemm, softmax, row_dot, softmax_grad;
} naive;

static void naive_init(naive *n, cl_context ctx, cl_device_id dev)
{
    cl_int err;
    const char *src = fcl_cl_reference;
    n->prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    CHECK_CL(err);
    err = clBuildProgram(n->prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[16384] = "";
        clGetProgramBuildInfo(n->prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "reference.cl: %s\n", log);
        exit(1);
    }
    n->gemm = clCreateKernel(n->prog, "ref_gemm", &err);
    CHECK_CL(err);
    n->softmax = clCreateKernel(n->prog, "ref_softmax_rows", &err);
    CHECK_CL(err);
    n->row_dot = clCreateKernel(n->prog, "ref_row_dot", &err);
    CHECK_CL(err);
    n->softmax_grad = clCreateKernel(n->prog, "ref_softmax_grad", &err);
    CHECK_CL(err);
}

/* C[b] = alpha op(A) op(B): M x N, inner K, for `batch` matrices. */
static cl_int gemm(cl_command_queue q, const naive *n, cl_mem A, cl_mem B, cl_mem C, int M, int N,
                   int K, int lda, int ldb, int ldc, long sa, long sb, long sc, int ta, int tb,
                   float alpha, size_t batch)
{
    cl_kernel k = n->gemm;
    cl_int e = 0;
    e |= clSetKernelArg(k, 0, sizeof A, &A);
    e |= clSetKernelArg(k, 1, sizeof B, &B);
    e |= clSetKernelArg(k, 2, sizeof C, &C);
    e |= clSetKernelArg(k, 3, sizeof M, &M);
    e |= clSetKernelArg(k, 4, sizeof N, &N);
    e |= clSetKernelArg(k, 5, sizeof K, &K);
    e |= clSetKernelArg(k, 6, sizeof lda, &lda);
    e |= clSetKernelArg(k, 7, sizeof ldb, &ldb);
    e |= clSetKernelArg(k, 8, sizeof ldc, &ldc);
    cl_long la = sa, lb = sb, lc = sc;
    e |= clSetKernelArg(k, 9, sizeof la, &la);
    e |= clSetKernelArg(k, 10, sizeof lb, &lb);
    e |= clSetKernelArg(k, 11, sizeof lc, &lc);
    e |= clSetKernelArg(k, 12, sizeof ta, &ta);
    e |= clSetKernelArg(k, 13, sizeof tb, &tb);
    e |= clSetKernelArg(k, 14, sizeof alpha, &alpha);
    if (e != CL_SUCCESS) return CL_INVALID_KERNEL_ARGS;
    size_t local[3] = {16, 16, 1};
    size_t global[3] = {((size_t)N + 15) / 16 * 16, ((size_t)M + 15) / 16 * 16, batch};
    return clEnqueueNDRangeKernel(q, k, 3, NULL, global, local, 0, NULL, NULL);
}

typedef struct tensors {
    size_t B, H, N, d;
    cl_mem q, k, v, o, lse, dout, dq, dk, dv; /* ours, in the storage type */
    cl_mem qf, kf, vf, of, doutf, dqf, dkf, dvf; /* fp32 copies for standard attention */
} tensors;

static cl_int naive_forward(cl_command_queue q, const naive *n, const tensors *t, cl_mem S,
                            int causal)
{
    const int N = (int)t->N, d = (int)t->d;
    const size_t bh = t->B * t->H;
    const float scale = 1.0f / sqrtf((float)d);
    cl_int e = gemm(q, n, t->qf, t->kf, S, N, N, d, d, d, N, (long)N * d, (long)N * d,
                    (long)N * N, 0, 1, scale, bh);
    if (e != CL_SUCCESS) return e;
    e |= clSetKernelArg(n->softmax, 0, sizeof S, &S);
    e |= clSetKernelArg(n->softmax, 1, sizeof N, &N);
    e |= clSetKernelArg(n->softmax, 2, sizeof N, &N);
    e |= clSetKernelArg(n->softmax, 3, sizeof causal, &causal);
    size_t local = 256, global = bh * (size_t)N * 256;
    if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(q, n->softmax, 1, NULL, &global, &local, 0, NULL, NULL);
    if (e != CL_SUCCESS) return e;
    return gemm(q, n, S, t->vf, t->of, N, d, N, N, d, d, (long)N * N, (long)N * d, (long)N * d, 0,
                0, 1.0f, bh);
}

/* Uses P (in S, from naive_forward) and a second N x N buffer dP. */
static cl_int naive_backward(cl_command_queue q, const naive *n, const tensors *t, cl_mem P,
                             cl_mem dP, cl_mem delta)
{
    const int N = (int)t->N, d = (int)t->d;
    const size_t bh = t->B * t->H;
    const long nd = (long)N * d, nn = (long)N * N;
    const float scale = 1.0f / sqrtf((float)d);
    cl_int e = gemm(q, n, P, t->doutf, t->dvf, N, d, N, N, d, d, nn, nd, nd, 1, 0, 1.0f, bh);
    if (e == CL_SUCCESS) e = gemm(q, n, t->doutf, t->vf, dP, N, N, d, d, d, N, nd, nd, nn, 0, 1, 1.0f, bh);
    if (e != CL_SUCCESS) return e;
    e |= clSetKernelArg(n->row_dot, 0, sizeof(cl_mem), &t->doutf);
    e |= clSetKernelArg(n->row_dot, 1, sizeof(cl_mem), &t->of);
    e |= clSetKernelArg(n->row_dot, 2, sizeof delta, &delta);
    e |= clSetKernelArg(n->row_dot, 3, sizeof d, &d);
    size_t rows = bh * (size_t)N, elems = bh * (size_t)N * (size_t)N;
    if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(q, n->row_dot, 1, NULL, &rows, NULL, 0, NULL, NULL);
    e |= clSetKernelArg(n->softmax_grad, 0, sizeof P, &P);
    e |= clSetKernelArg(n->softmax_grad, 1, sizeof dP, &dP);
    e |= clSetKernelArg(n->softmax_grad, 2, sizeof delta, &delta);
    e |= clSetKernelArg(n->softmax_grad, 3, sizeof N, &N);
    if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(q, n->softmax_grad, 1, NULL, &elems, NULL, 0, NULL, NULL);
    if (e == CL_SUCCESS) e = gemm(q, n, dP, t->kf, t->dqf, N, d, N, N, d, d, nn, nd, nd, 0, 0, scale, bh);
    if (e == CL_SUCCESS) e = gemm(q, n, dP, t->qf, t->dkf, N, d, N, N, d, d, nn, nd, nd, 1, 0, scale, bh);
    return e;
}

/* ---- the fp32 FMA ceiling ------------------------------------------------------- */

static const char *ceiling_src =
    "__kernel void fma_peak(__global float *out, float a, float b) {\n"
    "  float x0 = get_global_id(0), x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;\n"
    "  float x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;\n"
    "  for (int i = 0; i < 2048; ++i) {\n"
    "    x0 = mad(x0, a, b); x1 = mad(x1, a, b); x2 = mad(x2, a, b); x3 = mad(x3, a, b);\n"
    "    x4 = mad(x4, a, b); x5 = mad(x5, a, b); x6 = mad(x6, a, b); x7 = mad(x7, a, b);\n"
    "  }\n"
    "  out[get_global_id(0)] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;\n"
    "}\n";

static double measure_fma_ceiling(cl_context ctx, cl_device_id dev, cl_command_queue q,
                                  cl_uint units)
{
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &ceiling_src, NULL, &err);
    CHECK_CL(err);
    CHECK_CL(clBuildProgram(p, 1, &dev, "", NULL, NULL));
    cl_kernel k = clCreateKernel(p, "fma_peak", &err);
    CHECK_CL(err);
    size_t global = (size_t)units * 2048 * 4, local = 256;
    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, global * sizeof(float), NULL, &err);
    CHECK_CL(err);
    float a = 0.999f, b = 0.001f;
    CHECK_CL(clSetKernelArg(k, 0, sizeof out, &out));
    CHECK_CL(clSetKernelArg(k, 1, sizeof a, &a));
    CHECK_CL(clSetKernelArg(k, 2, sizeof b, &b));
    double t[7];
    for (int r = 0; r < 7; ++r) {
        CHECK_CL(clFinish(q));
        double t0 = bench_now_s();
        CHECK_CL(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL));
        CHECK_CL(clFinish(q));
        t[r] = bench_now_s() - t0;
    }
    double flops = 2.0 * 8 * 2048 * (double)global;
    clReleaseMemObject(out);
    clReleaseKernel(k);
    clReleaseProgram(p);
    return flops / bench_median(t, 7) / 1e12;
}

/* ---- buffers --------------------------------------------------------------------- */

static cl_mem make_buffer(cl_context ctx, size_t bytes, const void *host)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                              (void *)host, &err);
    CHECK_CL(err);
    return m;
}

/* Allocates a buffer, or returns NULL if the device refuses.  Drivers may
 * allocate lazily: a later failure shows up when the kernels run. */
static cl_mem try_buffer(cl_context ctx, cl_device_id dev, size_t bytes)
{
    cl_ulong max_alloc = 0;
    CHECK_CL(clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL));
    if (bytes > max_alloc) return NULL;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    return err == CL_SUCCESS ? m : NULL;
}

static uint16_t to_bits(float f, fcl_dtype dt)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (dt == FCL_DTYPE_BF16) return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
    /* fp16 for |f| < 65504 and normal range, round to nearest even */
    uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7FFFFFFFu;
    if (mag < 0x38800000u) return (uint16_t)sign; /* tiny: flush (inputs are O(1)) */
    uint32_t h = ((mag >> 23) - 112) << 10 | ((mag >> 13) & 0x3FFu), rest = mag & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return (uint16_t)(sign | h);
}

static int bench_is_fp8(fcl_dtype dt) { return dt == FCL_DTYPE_FP8_E4M3 || dt == FCL_DTYPE_FP8_E5M2; }

/* An FP8 tensor (the forward's storage; --dtype e4m3 / e5m2): random
 * normal codes of magnitude 1/8 .. 1.875 (exponent fields 4-7 of E4M3,
 * 12-15 of E5M2) and either sign, and their values (flashcl.h, fcl_dtype)
 * as the fp32 copy, so the reference computes with exactly the stored
 * inputs. */
static cl_mem random_fp8(cl_context ctx, size_t n, fcl_dtype dt, unsigned seed, cl_mem *f32)
{
    const int e4m3 = dt == FCL_DTYPE_FP8_E4M3, mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    float *f = malloc(n * sizeof *f);
    uint8_t *b = malloc(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const unsigned r = (unsigned)(s >> 33), m = r & ((1u << mbits) - 1u);
        const int e = bias - 3 + (int)((r >> 4) & 3u);
        b[i] = (uint8_t)(((r >> 8) & 1u) << 7 | (unsigned)e << mbits | m);
        f[i] = (float)ldexp(1.0 + m / (double)(1u << mbits), e - bias) * ((r >> 8) & 1u ? -1.0f : 1.0f);
    }
    *f32 = make_buffer(ctx, n * sizeof(float), f);
    cl_mem mem = make_buffer(ctx, n, b);
    free(f);
    free(b);
    return mem;
}

static cl_mem random_tensor(cl_context ctx, size_t n, fcl_dtype dt, unsigned seed, cl_mem *f32)
{
    if (bench_is_fp8(dt))
        return random_fp8(ctx, n, dt, seed, f32);
    float *f = malloc(n * sizeof *f);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        f[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 1.7f;
        if (dt != FCL_DTYPE_FP32) { /* fp32 copy holds exactly the stored values */
            uint16_t b = to_bits(f[i], dt);
            if (dt == FCL_DTYPE_BF16) {
                uint32_t x = (uint32_t)b << 16;
                memcpy(&f[i], &x, 4);
            } else {
                uint32_t e = (b >> 10) & 0x1Fu, m = b & 0x3FFu, sg = (uint32_t)(b & 0x8000u) << 16;
                uint32_t x = e ? (sg | ((e + 112) << 23) | (m << 13)) : sg;
                memcpy(&f[i], &x, 4);
            }
        }
    }
    *f32 = make_buffer(ctx, n * sizeof(float), f);
    cl_mem m;
    if (dt == FCL_DTYPE_FP32) {
        m = make_buffer(ctx, n * sizeof(float), f);
    } else {
        uint16_t *h = malloc(n * sizeof *h);
        for (size_t i = 0; i < n; ++i) h[i] = to_bits(f[i], dt);
        m = make_buffer(ctx, n * sizeof *h, h);
        free(h);
    }
    free(f);
    return m;
}

/* max |a - b| / max |b| over two fp32 buffers, or over our storage type read as fp32. */
static double rel_diff(cl_command_queue q, cl_mem ours, fcl_dtype dt, cl_mem ref, size_t n)
{
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (dt == FCL_DTYPE_FP32) {
        CHECK_CL(clEnqueueReadBuffer(q, ours, CL_TRUE, 0, n * 4, a, 0, NULL, NULL));
    } else {
        uint16_t *h = malloc(n * 2);
        CHECK_CL(clEnqueueReadBuffer(q, ours, CL_TRUE, 0, n * 2, h, 0, NULL, NULL));
        for (size_t i = 0; i < n; ++i) {
            uint32_t x;
            if (dt == FCL_DTYPE_BF16) x = (uint32_t)h[i] << 16;
            else {
                uint32_t e = (h[i] >> 10) & 0x1Fu, m = h[i] & 0x3FFu, sg = (uint32_t)(h[i] & 0x8000u) << 16;
                x = e ? (sg | ((e + 112) << 23) | (m << 13)) : sg;
            }
            memcpy(&a[i], &x, 4);
        }
        free(h);
    }
    CHECK_CL(clEnqueueReadBuffer(q, ref, CL_TRUE, 0, n * 4, b, 0, NULL, NULL));
    double err = 0, mx = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(a[i])) { err = INFINITY; break; }
        err = fmax(err, fabs((double)a[i] - b[i]));
        mx = fmax(mx, fabs((double)b[i]));
    }
    free(a);
    free(b);
    return mx > 0 ? err / mx : err;
}

/* ---- main ---------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: flashcl-bench [--device P:D] [--dtype fp32|fp16|bf16|e4m3|e5m2] [--head-dims 64,128]\n"
            "       [--seqlens 512,1024,...] [--causal 0,1] [--tokens 16384] [--hidden 2048]\n"
            "       [--reps 10] [--backward] [--no-naive] [--portable-only] [--out results.csv]\n"
            "       [--head-dim-v DV] [--profile] [--q-per-kv G]\n");
}

int main(int argc, char **argv)
{
    config c = {NULL, FCL_DTYPE_FP32, {64, 128}, 2, {512, 1024, 2048, 4096, 8192, 16384}, 6,
                {0, 1}, 2, 16384, 2048, 10, 0, 1, 0, NULL, 0, 0, 1};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--device")) c.device = v, ++i;
        else if (!strcmp(a, "--dtype")) {
            c.dtype = !strcmp(v, "fp16")   ? FCL_DTYPE_FP16
                      : !strcmp(v, "bf16") ? FCL_DTYPE_BF16
                      : !strcmp(v, "e4m3") ? FCL_DTYPE_FP8_E4M3
                      : !strcmp(v, "e5m2") ? FCL_DTYPE_FP8_E5M2
                                           : FCL_DTYPE_FP32;
            ++i;
        } else if (!strcmp(a, "--head-dims")) c.n_head_dims = parse_list(v, c.head_dims, 8), ++i;
        else if (!strcmp(a, "--seqlens")) c.n_seqlens = parse_list(v, c.seqlens, 16), ++i;
        else if (!strcmp(a, "--causal")) {
            size_t tmp[2];
            c.n_causals = (int)parse_list(v, tmp, 2);
            for (int j = 0; j < c.n_causals; ++j) c.causals[j] = (int)tmp[j];
            ++i;
        } else if (!strcmp(a, "--tokens")) c.tokens = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--hidden")) c.hidden = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--reps")) c.reps = atoi(v), ++i;
        else if (!strcmp(a, "--backward")) c.backward = 1;
        else if (!strcmp(a, "--no-naive")) c.naive = 0;
        else if (!strcmp(a, "--portable-only")) c.portable_only = 1;
        else if (!strcmp(a, "--out")) c.out = v, ++i;
        else if (!strcmp(a, "--head-dim-v")) c.head_dim_v = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--profile")) c.profile = 1;
        else if (!strcmp(a, "--q-per-kv")) c.q_per_kv = strtoull(v, NULL, 10), ++i;
        else { usage(); return 2; }
    }
    if (c.head_dim_v)
        c.naive = 0; /* standard attention (cl/reference.cl) takes V as wide as K */
    if (c.q_per_kv < 1) {
        usage();
        return 2;
    }
    for (size_t di = 0; di < c.n_head_dims; ++di) {
        /* every shape's query heads (hidden / head_dim, at least one) in
         * whole groups, or the call would run another grouping */
        const size_t d = c.head_dims[di], h = d && c.hidden / d ? c.hidden / d : 1;
        if (h % c.q_per_kv) {
            fprintf(stderr, "flashcl-bench: %zu query heads at head_dim %zu are not groups of %zu\n",
                    h, d, c.q_per_kv);
            return 2;
        }
    }
    if (c.q_per_kv > 1)
        c.naive = 0; /* and a K/V head for each query head */
    if (bench_is_fp8(c.dtype) && c.backward) {
        fprintf(stderr, "flashcl-bench: FP8 storage has no backward (flashcl.h)\n");
        return 2;
    }
    if (c.reps < 1 || c.reps > 1000) c.reps = 10;
    g_start = bench_now_s();

    fcl_context_options co;
    fcl_context_options_init(&co);
    co.portable_only = c.portable_only;
    co.enable_profiling = c.profile;
    if (c.device && sscanf(c.device, "%d:%d", &co.platform_index, &co.device_index) != 2) {
        usage();
        return 2;
    }
    fcl_context *fctx = NULL;
    fcl_status st = fcl_context_create(&co, &fctx);
    if (st != FCL_OK) {
        fprintf(stderr, "flashcl-bench: %s\n", fcl_status_string(st));
        return 1;
    }
    fcl_device_info info;
    fcl_context_device_info(fctx, &info);
    cl_context ctx = fcl_context_cl_context(fctx);
    cl_command_queue q = fcl_context_cl_queue(fctx);
    cl_device_id dev = fcl_context_cl_device(fctx);
    naive nv;
    naive_init(&nv, ctx, dev);
    cl_mem span_mark = make_buffer(ctx, 8, NULL); /* --profile's fills around each call */
    const double ceiling = measure_fma_ceiling(ctx, dev, q, info.compute_units);

    char date[64];
    time_t tt = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
    FILE *out = c.out ? fopen(c.out, "w") : NULL;
    if (c.out && !out) { perror(c.out); return 1; }
    printf("device: %s (%s, driver %s)\nflashcl %s, commit %s, %s\n", info.name, info.platform_name,
           info.driver_version, fcl_version_string(), FCL_GIT_COMMIT, date);
    /* CPUs are slow enough that TFLOP/s would print as zeros */
    const double unit = ceiling < 1.0 ? 1e9 : 1e12;
    const char *unit_name = ceiling < 1.0 ? "GFLOP/s" : "TFLOP/s";
    printf("measured fp32 FMA ceiling: %.2f %s; storage %s; tokens %zu, hidden %zu; median of %d\n\n",
           ceiling * 1e12 / unit, unit_name, fcl_dtype_name(c.dtype), c.tokens, c.hidden, c.reps);
    if (out) {
        fprintf(out, "# device: %s\n# platform: %s\n# driver: %s\n# date: %s\n# commit: %s\n",
                info.name, info.platform_name, info.driver_version, date, FCL_GIT_COMMIT);
        fprintf(out, "# fp32_fma_ceiling_tflops: %.3f\n# tokens: %zu\n# hidden: %zu\n# reps: %d (median)\n",
                ceiling, c.tokens, c.hidden, c.reps);
        if (c.head_dim_v)
            fprintf(out, "# head_dim_v: %zu\n", c.head_dim_v);
        if (c.q_per_kv > 1)
            fprintf(out, "# q_per_kv: %zu\n", c.q_per_kv);
        fprintf(out, "pass,dtype,d,causal,N,B,H,variant,ours_ms,ours_tflops,pct_of_fp32_ceiling,"
                     "naive_ms,naive_tflops,speedup,ours_extra_mib,naive_extra_mib,rel_diff_vs_naive,"
                     "note,ours_device_ms,ours_device_tflops\n");
    }
    printf("%-4s %-4s %4s %6s %6s %4s %4s | %9s %8s %6s | %9s %8s | %7s | %9s %10s | %9s %s\n", "pass",
           "type", "d", "causal", "N", "B", "H", "ours ms", unit_name, "%ceil", "naive ms",
           unit_name, "speedup", "ours MiB", "naive MiB", "rel diff", "note");

    /* bytes of an input element, and of O's (FP8: fp16, the default
     * out_dtype, which the comparison reads) */
    const size_t es = fcl_dtype_size(c.dtype);
    const fcl_dtype o_dtype = bench_is_fp8(c.dtype) ? FCL_DTYPE_FP16 : c.dtype;
    for (size_t di = 0; di < c.n_head_dims; ++di)
        for (int ci = 0; ci < c.n_causals; ++ci)
            for (size_t ni = 0; ni < c.n_seqlens; ++ni) {
                tensors t;
                memset(&t, 0, sizeof t);
                t.d = c.head_dims[di];
                t.N = c.seqlens[ni];
                t.B = c.tokens / t.N ? c.tokens / t.N : 1;
                t.H = c.hidden / t.d ? c.hidden / t.d : 1;
                const int causal = c.causals[ci];
                const size_t dv = c.head_dim_v ? c.head_dim_v : t.d;
                const size_t hk = t.H / c.q_per_kv; /* K/V heads (checked above) */
                const size_t n = t.B * t.H * t.N * t.d, n_v = t.B * t.H * t.N * dv;
                const size_t n_k = t.B * hk * t.N * t.d, n_kv = t.B * hk * t.N * dv;
                progress("inputs", t.N, t.d);
                t.q = random_tensor(ctx, n, c.dtype, 1, &t.qf);
                t.k = random_tensor(ctx, n_k, c.dtype, 2, &t.kf);
                t.v = random_tensor(ctx, n_kv, c.dtype, 3, &t.vf);
                t.dout = random_tensor(ctx, n_v, c.dtype, 4, &t.doutf);
                t.o = make_buffer(ctx, n_v * fcl_dtype_size(o_dtype), NULL);
                t.of = make_buffer(ctx, n_v * 4, NULL);
                t.lse = make_buffer(ctx, t.B * t.H * t.N * 4, NULL);
                fcl_attention_desc desc;
                fcl_attention_desc_init(&desc, t.B, t.H, hk, t.N, t.N, t.d, c.dtype, FCL_LAYOUT_BHSD);
                desc.causal = causal;
                desc.head_dim_v = dv;
                desc.o = desc.dout = fcl_layout_contiguous(FCL_LAYOUT_BHSD, t.H, t.N, dv);
                desc.v = desc.dv = fcl_layout_contiguous(FCL_LAYOUT_BHSD, hk, t.N, dv);
                /* FLOPs of the products over d and over dv (the header comment) */
                const double pairs = 2.0 * t.B * t.H * (double)t.N * t.N * (causal ? 0.5 : 1.0);

                for (int pass = 0; pass < 1 + c.backward; ++pass) {
                    const int bwd = pass == 1;
                    if (bwd) {
                        t.dq = make_buffer(ctx, n * es, NULL);
                        t.dk = make_buffer(ctx, n_k * es, NULL);
                        t.dv = make_buffer(ctx, n_kv * es, NULL);
                        t.dqf = make_buffer(ctx, n * 4, NULL);
                        t.dkf = make_buffer(ctx, n * 4, NULL);
                        t.dvf = make_buffer(ctx, n_v * 4, NULL);
                    }
                    double *times = malloc((size_t)c.reps * sizeof *times);
                    double *dev_times = malloc((size_t)c.reps * sizeof *dev_times);
                    progress(bwd ? "flashcl backward" : "flashcl forward", t.N, t.d);
                    fcl_context_reset_memory_stats(fctx);
                    for (int r = -2; r < c.reps; ++r) {
                        cl_event before = NULL, after = NULL;
                        const cl_uint stamp = 0;
                        CHECK_CL(clFinish(q));
                        double t0 = bench_now_s();
                        if (c.profile)
                            CHECK_CL(clEnqueueFillBuffer(q, span_mark, &stamp, sizeof stamp, 0, sizeof stamp, 0,
                                                         NULL, &before));
                        st = bwd ? fcl_attention_backward(fctx, &desc, t.q, t.k, t.v, t.o, t.lse, t.dout,
                                                          t.dq, t.dk, t.dv, 0, NULL, NULL)
                                 : fcl_attention_forward(fctx, &desc, t.q, t.k, t.v, t.o, t.lse, 0, NULL, NULL);
                        if (st != FCL_OK) {
                            fprintf(stderr, "flashcl: %s\n%s\n", fcl_status_string(st), fcl_context_build_log(fctx));
                            return 1;
                        }
                        if (c.profile)
                            CHECK_CL(clEnqueueFillBuffer(q, span_mark, &stamp, sizeof stamp, sizeof stamp,
                                                         sizeof stamp, 0, NULL, &after));
                        CHECK_CL(clFinish(q));
                        if (r >= 0) times[r] = bench_now_s() - t0;
                        if (c.profile) {
                            cl_ulong from = 0, to = 0;
                            CHECK_CL(clGetEventProfilingInfo(before, CL_PROFILING_COMMAND_END, sizeof from,
                                                             &from, NULL));
                            CHECK_CL(clGetEventProfilingInfo(after, CL_PROFILING_COMMAND_START, sizeof to, &to,
                                                             NULL));
                            /* an in-order queue runs the fills around the call; a
                             * device that stamps otherwise gets no span, not a wrapped one */
                            if (r >= 0) dev_times[r] = to >= from ? (double)(to - from) * 1e-9 : NAN;
                            CHECK_CL(clReleaseEvent(before));
                            CHECK_CL(clReleaseEvent(after));
                        }
                    }
                    const double ours_dev = c.profile ? bench_median(dev_times, c.reps) : NAN;
                    free(dev_times);
                    fcl_memory_stats ms;
                    fcl_context_memory_stats(fctx, &ms);
                    const double ours = bench_median(times, c.reps);
                    const double pfl = bwd ? pairs * (3.0 * t.d + 2.0 * dv) : pairs * (double)(t.d + dv);
                    /* extra device memory beyond inputs and outputs: LSE (+ our own buffers) */
                    const double ours_mib = (t.B * t.H * t.N * 4.0 + (double)ms.peak_bytes) / 1048576.0;
                    double naive_s = NAN, diff = NAN, naive_mib = NAN;
                    char note[96] = "";
                    if (c.naive) {
                        const size_t nn = t.B * t.H * t.N * t.N * 4;
                        naive_mib = (double)nn * (bwd ? 2 : 1) / 1048576.0 + (bwd ? t.B * t.H * t.N * 4.0 / 1048576.0 : 0);
                        progress("standard attention: allocating", t.N, t.d);
                        cl_mem S = try_buffer(ctx, dev, nn);
                        cl_mem dP = bwd && S ? try_buffer(ctx, dev, nn) : NULL;
                        cl_mem delta = bwd ? make_buffer(ctx, t.B * t.H * t.N * 4, NULL) : NULL;
                        if (S == NULL || (bwd && dP == NULL)) {
                            snprintf(note, sizeof note, "naive: %s x %.2f GiB does not fit",
                                     bwd ? "2" : "1", nn / 1073741824.0);
                        } else {
                            progress("standard attention: running", t.N, t.d);
                            for (int r = -1; r < c.reps; ++r) {
                                CHECK_CL(clFinish(q));
                                double t0 = bench_now_s();
                                cl_int e = naive_forward(q, &nv, &t, S, causal);
                                if (e == CL_SUCCESS && bwd) {
                                    CHECK_CL(clFinish(q));
                                    t0 = bench_now_s(); /* time the backward alone */
                                    e = naive_backward(q, &nv, &t, S, dP, delta);
                                }
                                if (e == CL_SUCCESS) e = clFinish(q);
                                if (e != CL_SUCCESS) {
                                    snprintf(note, sizeof note, "naive failed: %s", fcl_status_string(e));
                                    break;
                                }
                                if (r >= 0) times[r] = bench_now_s() - t0;
                            }
                            if (!note[0]) {
                                progress("comparing outputs", t.N, t.d);
                                naive_s = bench_median(times, c.reps);
                                diff = bwd ? fmax(rel_diff(q, t.dq, c.dtype, t.dqf, n),
                                                  fmax(rel_diff(q, t.dk, c.dtype, t.dkf, n),
                                                       rel_diff(q, t.dv, c.dtype, t.dvf, n)))
                                           : rel_diff(q, t.o, o_dtype, t.of, n);
                            }
                        }
                        if (S) clReleaseMemObject(S);
                        if (dP) clReleaseMemObject(dP);
                        if (delta) clReleaseMemObject(delta);
                    }
                    fcl_plan plan, plan_dkdv;
                    st = fcl_plan_query(fctx, &desc, bwd ? FCL_KERNEL_BACKWARD_DQ : FCL_KERNEL_FORWARD, &plan);
                    if (st == FCL_OK && bwd)
                        st = fcl_plan_query(fctx, &desc, FCL_KERNEL_BACKWARD_DKDV, &plan_dkdv);
                    if (st != FCL_OK) {
                        fprintf(stderr, "flashcl: plan: %s\n", fcl_status_string(st));
                        return 1;
                    }
                    char path[80]; /* the backward's two kernels may take different paths */
                    if (bwd && strcmp(plan.variant, plan_dkdv.variant) != 0)
                        snprintf(path, sizeof path, "dq %s + dkdv %s", plan.variant, plan_dkdv.variant);
                    else
                        snprintf(path, sizeof path, "%s", plan.variant);
                    const double tf = pfl / ours / 1e12, ntf = pfl / naive_s / 1e12;
                    const double shown = tf * 1e12 / unit, nshown = ntf * 1e12 / unit;
                    printf("%-4s %-4s %4zu %6d %6zu %4zu %4zu | %9.3f %8.2f %5.1f%% | %9.3f %8.2f | %6.2fx | %9.2f %10.1f | %9.2e %s%s\n",
                           bwd ? "bwd" : "fwd", fcl_dtype_name(c.dtype), t.d, causal, t.N, t.B, t.H,
                           ours * 1e3, shown, 100 * tf / ceiling, naive_s * 1e3, nshown, naive_s / ours, ours_mib,
                           naive_mib, diff, note, strstr(path, "mma") ? " [tensor cores]" : "");
                    if (c.profile)
                        printf("     device span: %.3f ms, %.2f %s\n", ours_dev * 1e3, pfl / ours_dev / unit, unit_name);
                    fflush(stdout);
                    if (out)
                        fprintf(out, "%s,%s,%zu,%d,%zu,%zu,%zu,%s,%.4f,%.6f,%.1f,%.4f,%.6f,%.2f,%.3f,%.1f,%.2e,%s",
                                bwd ? "bwd" : "fwd", fcl_dtype_name(c.dtype), t.d, causal, t.N, t.B, t.H,
                                path, ours * 1e3, tf, 100 * tf / ceiling, naive_s * 1e3, ntf, naive_s / ours,
                                ours_mib, naive_mib, diff, note);
                    if (out && c.profile)
                        fprintf(out, ",%.4f,%.6f\n", ours_dev * 1e3, pfl / ours_dev / 1e12);
                    else if (out)
                        fprintf(out, ",,\n");
                    free(times);
                }
                cl_mem all[] = {t.q, t.k, t.v, t.o, t.lse, t.dout, t.dq, t.dk, t.dv,
                                t.qf, t.kf, t.vf, t.of, t.doutf, t.dqf, t.dkf, t.dvf};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
                    if (all[i]) clReleaseMemObject(all[i]);
            }
    if (out) fclose(out);
    clReleaseMemObject(span_mark);
    fcl_context_destroy(fctx);
    return 0;
}
