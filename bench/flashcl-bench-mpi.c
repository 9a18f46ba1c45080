/* flashcl-bench-mpi - ring attention (flashcl_mpi) across the ranks of
 * mpirun: forward and backward time of one long sequence, and the share of
 * time the ranks spent waiting on messages after their device had finished
 * a step (fcl_mpi_timing.wait_seconds: communication the compute did not
 * hide, load imbalance included) and outside the ring steps (fcl_mpi_timing's
 * total less ring_seconds: the checks, the host form's copies and staging,
 * the own shard's load and the final write); the rest is the steps' compute.
 *
 *   mpirun -np R flashcl-bench-mpi [--seqlens 131072,524288] [--heads 8]
 *       [--head-dim 128] [--dtype fp16] [--causal 1] [--sharding zigzag]
 *       [--reps 3] [--warmup first|each] [--form host|device|both] [--out FILE.csv]
 *       [--trace 1]
 *   mpirun -np R flashcl-bench-mpi --probe-comm BYTES   (the copies' bandwidths alone)
 *
 * B = 1.  Every rank draws its own shard's inputs (the numbers do not
 * matter to the time).  A call's time is the slowest rank's, after a
 * barrier, after one unmeasured call of each kind (before the first N only
 * by default: kernels and buffers do not depend on N beyond growing, and a
 * 4M-token warm-up costs minutes); the median over the repetitions is reported, with the wait
 * and stage shares of the median call's slowest rank.  One rank is the plain
 * single-device call (fcl_attention_*_host), so R = 1 is the baseline of the
 * speed-up that bench/compare_mpi.py computes from the files of 1, 2, 4
 * ranks.  Times include the host copies of the host-pointer calls on every
 * rank count alike.  --form device times the cl_mem calls
 * (fcl_mpi_attention_forward/backward) on the same inputs kept in device
 * buffers, each call waited for through its event; "both" times each form
 * in turn at each N (one row each, column `form`).  --trace 1 prints rank
 * 0's host timeline of the last forward and the last backward at each N
 * (what the host had just done, when: the library's dist_debug_trace), to
 * place time the shares leave unexplained. */
#include "build_info.h"
#include "dist/dist_internal.h" /* dist_debug_trace */
#include "flashcl_mpi.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank;

#define CHECK(expr)                                                                       \
    do {                                                                                  \
        fcl_status st_ = (expr);                                                          \
        if (st_ != FCL_OK) {                                                              \
            if (g_rank == 0)                                                              \
                fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,             \
                        fcl_status_string(st_));                                          \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

/* Random storage values in [-1, 1) (a fixed generator per rank and tensor). */
static void *random_array(size_t n, fcl_dtype dt, uint64_t seed)
{
    const size_t es = fcl_dtype_size(dt);
    unsigned char *p = malloc(n * es + 1);
    if (p == NULL)
        return NULL;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float x = (float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
        uint32_t bits;
        memcpy(&bits, &x, sizeof bits);
        if (dt == FCL_DTYPE_FP32) {
            memcpy(p + i * 4, &x, 4);
        } else if (dt == FCL_DTYPE_BF16) {
            const uint16_t h = (uint16_t)(bits >> 16);
            memcpy(p + i * 2, &h, 2);
        } else { /* fp16 of a value in [-1, 1): exponent and 10 mantissa bits */
            const uint32_t sign = (bits >> 16) & 0x8000u;
            const float a = fabsf(x);
            uint16_t h = (uint16_t)sign;
            if (a >= 6.103515625e-05f) {
                int e;
                const float mant = frexpf(a, &e); /* a = mant * 2^e, mant in [0.5, 1) */
                h |= (uint16_t)(((e - 1 + 15) << 10) | ((uint32_t)(mant * 2048.0f) & 0x3FFu));
            }
            memcpy(p + i * 2, &h, 2);
        }
    }
    return p;
}

static fcl_dtype parse_dtype(const char *s)
{
    return strcmp(s, "fp32") == 0 ? FCL_DTYPE_FP32 : strcmp(s, "bf16") == 0 ? FCL_DTYPE_BF16
                                                                           : FCL_DTYPE_FP16;
}

typedef struct sample {
    double seconds;     /* the slowest rank's */
    double wait_share;  /* that rank's wait / total */
    double stage_share; /* that rank's (total - ring) / total: checks, host copies and
                           staging outside the ring steps, and the final agreement (which
                           waits for the other ranks); NAN with one rank (the plain call,
                           no ring) */
    double device_share; /* that rank's steps' device work / total (the device's clock,
                            fcl_mpi_timing); NAN with one rank */
    double gap_share;    /* its device's time between steps / total; NAN with one rank */
    double home_share;   /* the backward's last hop / total (of the wait); NAN with one rank */
    double copy_gbs;     /* the ranks' own copies: GB/s of its reads; NAN without them */
} sample;

/* The cl_mem form's tensors, in the backward's argument order: q k v o lse
 * dout dq dk dv (NULL mem: the host form is measured). */
enum { T_Q, T_K, T_V, T_O, T_LSE, T_DOUT, T_DQ, T_DK, T_DV, T_COUNT };

/* The host arrays a[] (q k v o dout dq dk dv) and lse as device buffers. */
static void device_copies(fcl_mpi *m, void **a, float *lse, size_t bytes, size_t lse_bytes,
                          fcl_mpi_tensor t[T_COUNT])
{
    void *host[T_COUNT] = {a[0], a[1], a[2], a[3], lse, a[4], a[5], a[6], a[7]};
    for (int i = 0; i < T_COUNT; ++i) {
        cl_int err = CL_SUCCESS;
        t[i].mem = clCreateBuffer(fcl_context_cl_context(fcl_mpi_context(m)),
                                  CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                  i == T_LSE ? lse_bytes : bytes, host[i], &err);
        t[i].offset = 0;
        CHECK(err);
    }
}

/* One call of either form, waited for. */
static void call(fcl_mpi *m, int backward, const fcl_mpi_desc *d, void **a, float *lse,
                 const fcl_mpi_tensor *t)
{
    if (t == NULL && backward)
        CHECK(fcl_mpi_attention_backward_host(m, d, a[0], a[1], a[2], a[3], lse, a[4], a[5], a[6],
                                              a[7]));
    else if (t == NULL)
        CHECK(fcl_mpi_attention_forward_host(m, d, a[0], a[1], a[2], a[3], lse));
    if (t == NULL)
        return;
    cl_event done = NULL;
    if (backward)
        CHECK(fcl_mpi_attention_backward(m, d, t[T_Q], t[T_K], t[T_V], t[T_O], t[T_LSE], t[T_DOUT],
                                         t[T_DQ], t[T_DK], t[T_DV], 0, NULL, &done));
    else
        CHECK(fcl_mpi_attention_forward(m, d, t[T_Q], t[T_K], t[T_V], t[T_O], t[T_LSE], 0, NULL,
                                        &done));
    CHECK(clWaitForEvents(1, &done));
    CHECK(clReleaseEvent(done));
}

/* One timed call on every rank: its time and wait share, gathered. */
static sample measure(fcl_mpi *m, int backward, const fcl_mpi_desc *d, void **a, float *lse,
                      const fcl_mpi_tensor *dev)
{
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    call(m, backward, d, a, lse, dev);
    const double mine = MPI_Wtime() - t0;
    fcl_mpi_timing t;
    CHECK(fcl_mpi_last_timing(m, &t));
    const double share = t.total_seconds > 0 ? t.wait_seconds / t.total_seconds : 0;
    const double stage =
        t.total_seconds > 0 ? (t.total_seconds - t.ring_seconds) / t.total_seconds : 0;
    /* the time and both shares of one rank, the slowest (shares taken as
     * maxima over different ranks could add up to more than the whole) */
    struct {
        double value;
        int rank;
    } in = {mine, g_rank}, slowest;
    MPI_Allreduce(&in, &slowest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    double shares[6] = {share, stage,
                        t.total_seconds > 0 ? t.device_seconds / t.total_seconds : 0,
                        t.total_seconds > 0 ? t.device_gap_seconds / t.total_seconds : 0,
                        t.total_seconds > 0 ? t.home_seconds / t.total_seconds : 0,
                        t.copy_seconds > 0 ? (double)t.copy_bytes / t.copy_seconds * 1e-9 : NAN};
    MPI_Bcast(shares, 6, MPI_DOUBLE, slowest.rank, MPI_COMM_WORLD);
    const int ring = t.steps > 0;
    sample s = {slowest.value, shares[0], ring ? shares[1] : NAN, ring ? shares[2] : NAN,
                ring ? shares[3] : NAN, ring ? shares[4] : NAN, shares[5]};
    return s;
}

/* --trace: rank 0's host timeline of its last call, one line a mark, with
 * the time since the mark before. */
static void print_trace(const fcl_mpi *m, const char *pass, size_t n)
{
    if (g_rank != 0)
        return;
    const dist_mark *marks = NULL;
    const int count = dist_debug_trace(m, &marks);
    printf("trace %s N %zu, rank 0 (step -1: outside the ring; step = ranks: the last hop):\n",
           pass, n);
    for (int i = 0; i < count; ++i)
        printf("trace   %9.3f ms  +%9.3f ms  step %2d  %s\n", 1e3 * marks[i].at,
               1e3 * (marks[i].at - (i > 0 ? marks[i - 1].at : 0)), marks[i].step,
               marks[i].what);
    fflush(stdout);
}

/* Rank 0's progress on stderr, seconds since the start: a run cut short by
 * its time limit (4M tokens: minutes a call) still says how far it got. */
static double g_start;
static void stamp(const char *what, size_t n, double seconds)
{
    if (g_rank != 0)
        return;
    fprintf(stderr, "flashcl-bench-mpi: %8.1f s  N %zu: %s", MPI_Wtime() - g_start, n, what);
    if (seconds >= 0)
        fprintf(stderr, " (%.3f s)", seconds);
    fputc('\n', stderr);
    fflush(stderr);
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* --probe-comm BYTES: the bandwidths a ring step's copies move at, without
 * attention: device to host and host to device through mapped memory of
 * CL_MEM_ALLOC_HOST_PTR buffers (the handle's staging kind), the ring's
 * exchange (every rank sends BYTES to the next and receives BYTES from the
 * previous, in pieces of at most 1 GiB, between such memory), and, for
 * issue 28's alternative to the ring, MPI_Allgather of BYTES from every
 * rank (each rank receives (ranks - 1) x BYTES; its rate counts those, so
 * it compares with the ring's, which moves the same bytes in ranks - 1
 * steps, each hidden behind a step's compute).  Medians of 5, slowest rank. */
static void probe_comm(fcl_mpi *m, size_t bytes, int size)
{
    cl_context cx = fcl_context_cl_context(fcl_mpi_context(m));
    cl_command_queue q = fcl_context_cl_queue(fcl_mpi_context(m));
    cl_int err = CL_SUCCESS;
    cl_mem dev = clCreateBuffer(cx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CHECK(err);
    cl_mem pin[2];
    void *host[2];
    for (int i = 0; i < 2; ++i) {
        pin[i] = clCreateBuffer(cx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL, &err);
        CHECK(err);
        host[i] = clEnqueueMapBuffer(q, pin[i], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0,
                                     NULL, NULL, &err);
        CHECK(err);
        memset(host[i], 1 + i, bytes);
    }
    const unsigned char zero = 0;
    CHECK(clEnqueueFillBuffer(q, dev, &zero, 1, 0, bytes, 0, NULL, NULL));
    CHECK(clFinish(q));
    enum { REPS = 5 };
    const char *what[4] = {"device to host", "host to device", "MPI ring exchange",
                           "MPI all-gather (bytes received)"};
    double gbs[4] = {0, 0, 0, 0};
    /* the all-gather's buffer: every rank's BYTES (plain memory, as MPI's) */
    const int gather = size > 1 && bytes <= (size_t)INT32_MAX;
    char *all = gather ? malloc(bytes * (size_t)size) : NULL;
    if (all != NULL)
        memset(all, 3, bytes * (size_t)size);
    const int next = (g_rank + 1) % size, prev = (g_rank + size - 1) % size;
    for (int k = 0; k < (all != NULL ? 4 : 3); ++k) {
        double t[REPS];
        for (int r = 0; r < REPS + 1; ++r) { /* the first unmeasured */
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            if (k == 0)
                CHECK(clEnqueueReadBuffer(q, dev, CL_TRUE, 0, bytes, host[0], 0, NULL, NULL));
            else if (k == 1)
                CHECK(clEnqueueWriteBuffer(q, dev, CL_TRUE, 0, bytes, host[0], 0, NULL, NULL));
            else if (size > 1) {
                MPI_Request req[64];
                int n = 0;
                for (size_t at = 0; at < bytes && n + 2 <= 64; at += (size_t)1 << 30) {
                    const int len = (int)(bytes - at < ((size_t)1 << 30) ? bytes - at
                                                                         : ((size_t)1 << 30));
                    MPI_Irecv((char *)host[1] + at, len, MPI_BYTE, prev, 7, MPI_COMM_WORLD,
                              &req[n++]);
                    MPI_Isend((char *)host[0] + at, len, MPI_BYTE, next, 7, MPI_COMM_WORLD,
                              &req[n++]);
                }
                MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
            } else if (k == 3)
                MPI_Allgather(host[0], (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                              MPI_COMM_WORLD);
            const double mine = MPI_Wtime() - t0;
            double slowest = mine;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r > 0)
                t[r - 1] = slowest;
        }
        qsort(t, REPS, sizeof t[0], cmp_double);
        const double moved = k == 3 ? (double)bytes * (size - 1) : (double)bytes;
        gbs[k] = t[REPS / 2] > 0 ? moved / t[REPS / 2] * 1e-9 : 0;
    }
    free(all);
    if (g_rank == 0) {
        printf("comm probe, %d ranks, %.0f MiB:", size, (double)bytes / (1 << 20));
        for (int k = 0; k < 4; ++k)
            printf(" %s %.1f GB/s%s", what[k], gbs[k], k < 3 ? "," : "\n");
        fflush(stdout);
    }
    for (int i = 0; i < 2; ++i) {
        CHECK(clEnqueueUnmapMemObject(q, pin[i], host[i], 0, NULL, NULL));
        CHECK(clReleaseMemObject(pin[i]));
    }
    CHECK(clFinish(q));
    CHECK(clReleaseMemObject(dev));
}

static int cmp_sample(const void *x, const void *y)
{
    const double a = ((const sample *)x)->seconds, b = ((const sample *)y)->seconds;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    g_start = MPI_Wtime();
    const char *seqlens = "131072,524288", *out_path = NULL, *sharding = "zigzag";
    size_t heads = 8, head_dim = 128;
    fcl_dtype dtype = FCL_DTYPE_FP16;
    int causal = 1, reps = 3, trace = 0;
    int warmup_each = 0; /* 1: warm up before every N; 0: before the first (then -1) */
    const char *form = "host";
    size_t probe_bytes = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--seqlens") == 0) seqlens = v;
        else if (strcmp(k, "--heads") == 0) heads = strtoul(v, NULL, 10);
        else if (strcmp(k, "--head-dim") == 0) head_dim = strtoul(v, NULL, 10);
        else if (strcmp(k, "--dtype") == 0) dtype = parse_dtype(v);
        else if (strcmp(k, "--causal") == 0) causal = atoi(v);
        else if (strcmp(k, "--sharding") == 0) sharding = v;
        else if (strcmp(k, "--reps") == 0) reps = atoi(v);
        else if (strcmp(k, "--out") == 0) out_path = v;
        else if (strcmp(k, "--warmup") == 0) warmup_each = strcmp(v, "each") == 0;
        else if (strcmp(k, "--form") == 0) form = v;
        else if (strcmp(k, "--probe-comm") == 0) probe_bytes = strtoull(v, NULL, 10);
        else if (strcmp(k, "--trace") == 0) trace = atoi(v);
    }
    if (reps < 1 || reps > 32)
        reps = 3;
    /* the queue records profiling: the device's own timeline of the steps
     * (fcl_mpi_timing's device fields) */
    fcl_context_options opts;
    fcl_context_options_init(&opts);
    opts.enable_profiling = 1;
    fcl_mpi *m = NULL;
    CHECK(fcl_mpi_create(MPI_COMM_WORLD, NULL, &opts, &m));
    fcl_device_info info;
    CHECK(fcl_context_device_info(fcl_mpi_context(m), &info));
    if (probe_bytes > 0) {
        probe_comm(m, probe_bytes, size);
        fcl_mpi_destroy(m);
        MPI_Finalize();
        return 0;
    }
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    FILE *out = NULL;
    if (g_rank == 0) {
        printf("flashcl-bench-mpi: %d ranks, rank 0 on %s (%s, driver %s); commit %s, %s\n"
               "messages moved by %s; "
               "B 1, H %zu, d %zu, %s, %s, %s sharding; median of %d; time = slowest rank, "
               "wait = its share of time waiting on messages, stg = its share outside "
               "the ring steps, dev / gap = its device's work in the steps / between them "
               "(the device's clock), home = the backward's last hop (of its wait), copy = "
               "the rate of its own copies' reads, forward / backward\n\n",
               size, info.name, info.platform_name, info.driver_version, FCL_GIT_COMMIT, date,
               fcl_mpi_copy_threads(m) > 0 ? "the ranks' own copies (FLASHCL_MPI_COPY_THREADS)"
                                           : "MPI",
               heads, head_dim, fcl_dtype_name(dtype), causal ? "causal" : "full", sharding, reps);
        printf("%5s %9s %11s %11s %11s %9s %9s %8s %8s %8s %8s %8s %8s %8s %8s %8s %11s %6s\n",
               "ranks", "N", "fwd s", "bwd s", "fwd+bwd s", "fwd TF/s", "bwd TF/s", "fwd wait",
               "bwd wait", "fwd stg", "bwd stg", "fwd dev", "fwd gap", "bwd dev", "bwd gap",
               "bwd home", "copy GB/s", "form");
        fflush(stdout);
        out = out_path ? fopen(out_path, "w") : NULL;
        if (out)
            fprintf(out, "# device: %s\n# platform: %s\n# driver: %s\n# date: %s\n# commit: %s\n"
                         "# ranks: %d\nranks,N,H,d,dtype,causal,sharding,fwd_s,bwd_s,fwd_wait_share,"
                         "bwd_wait_share,fwd_tflops,bwd_tflops,form,fwd_stage_share,bwd_stage_share,"
                         "copy_threads,fwd_device_share,fwd_gap_share,bwd_device_share,"
                         "bwd_gap_share,bwd_home_share,fwd_copy_gbs,bwd_copy_gbs,upload_piece\n",
                    info.name, info.platform_name, info.driver_version, date, FCL_GIT_COMMIT, size);
    }
    for (const char *p = seqlens; *p; warmup_each = warmup_each > 0 ? 1 : -1) {
        const size_t n = strtoul(p, NULL, 10);
        const char *comma = strchr(p, ',');
        p = comma ? comma + 1 : p + strlen(p);
        fcl_mpi_desc d;
        fcl_mpi_desc_init(&d, 1, heads, heads, n, head_dim, dtype, FCL_LAYOUT_BSHD);
        d.causal = causal;
        d.sharding = strcmp(sharding, "contiguous") == 0 ? FCL_MPI_SHARD_CONTIGUOUS
                                                         : FCL_MPI_SHARD_ZIGZAG;
        fcl_mpi_shard sh;
        CHECK(fcl_mpi_shard_of(&d, g_rank, size, &sh));
        const size_t elems = sh.rows * heads * head_dim;
        /* q k v o dout dq dk dv: the inputs random; O (and LSE), which the
         * first forward writes before any backward reads them, and the
         * gradients start as zeros (at 4M tokens drawing all eight costs a
         * minute a rank) */
        void *a[8];
        for (int i = 0; i < 8; ++i) {
            const int input = i < 3 || i == 4;
            a[i] = input ? random_array(elems, dtype, (uint64_t)g_rank * 16 + (uint64_t)i + 1)
                         : calloc(elems, fcl_dtype_size(dtype));
            if (a[i] == NULL)
                CHECK(FCL_ERROR_OUT_OF_HOST_MEMORY);
        }
        float *lse = calloc(sh.rows * heads, sizeof(float));
        stamp("inputs drawn", n, -1);
        const int both = strcmp(form, "both") == 0, first = both || strcmp(form, "host") == 0;
        for (int f_i = first ? 0 : 1; f_i < (both || !first ? 2 : 1); ++f_i) {
            fcl_mpi_tensor t[T_COUNT];
            if (f_i == 1)
                device_copies(m, a, lse, elems * fcl_dtype_size(dtype),
                               sh.rows * heads * sizeof(float), t);
            if (f_i == 1)
                stamp("tensors on the device", n, -1);
            const fcl_mpi_tensor *dev = f_i == 1 ? t : NULL;
            const char *name = f_i == 1 ? "device" : "host";
            sample fw[32], bw[32];
            if (warmup_each >= 0) /* warm-up: kernels built, buffers grown */
                stamp("forward warm-up", n, measure(m, 0, &d, a, lse, dev).seconds);
            for (int r = 0; r < reps; ++r) {
                fw[r] = measure(m, 0, &d, a, lse, dev);
                stamp("forward", n, fw[r].seconds);
            }
            if (trace)
                print_trace(m, "forward", n);
            if (warmup_each >= 0)
                stamp("backward warm-up", n, measure(m, 1, &d, a, lse, dev).seconds);
            for (int r = 0; r < reps; ++r) {
                bw[r] = measure(m, 1, &d, a, lse, dev);
                stamp("backward", n, bw[r].seconds);
            }
            if (trace)
                print_trace(m, "backward", n);
            qsort(fw, (size_t)reps, sizeof fw[0], cmp_sample);
            qsort(bw, (size_t)reps, sizeof bw[0], cmp_sample);
            const sample f = fw[reps / 2], b = bw[reps / 2];
            /* causal: half the score matrix; the backward does 2.5 forwards' products */
            const double flops = 4.0 * (double)n * (double)n * (double)heads * (double)head_dim *
                                 (causal ? 0.5 : 1.0);
            if (g_rank == 0) {
                printf("%5d %9zu %11.4f %11.4f %11.4f %9.2f %9.2f %7.1f%% %7.1f%% %7.1f%% %7.1f%% "
                       "%7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %5.1f/%5.1f %6s\n",
                       size, n, f.seconds, b.seconds, f.seconds + b.seconds,
                       flops / f.seconds * 1e-12, 2.5 * flops / b.seconds * 1e-12,
                       100 * f.wait_share, 100 * b.wait_share, 100 * f.stage_share,
                       100 * b.stage_share, 100 * f.device_share, 100 * f.gap_share,
                       100 * b.device_share, 100 * b.gap_share, 100 * b.home_share, f.copy_gbs,
                       b.copy_gbs, name);
                fflush(stdout);
                if (out)
                    fprintf(out,
                            "%d,%zu,%zu,%zu,%s,%d,%s,%.6f,%.6f,%.4f,%.4f,%.3f,%.3f,%s,%.4f,%.4f,"
                            "%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%zu\n",
                            size, n, heads, head_dim, fcl_dtype_name(dtype), causal, sharding,
                            f.seconds, b.seconds, f.wait_share, b.wait_share,
                            flops / f.seconds * 1e-12, 2.5 * flops / b.seconds * 1e-12, name,
                            f.stage_share, b.stage_share, fcl_mpi_copy_threads(m),
                            f.device_share, f.gap_share, b.device_share, b.gap_share,
                            b.home_share, f.copy_gbs, b.copy_gbs, dist_upload_piece_asked());
                if (out)
                    fflush(out); /* a run cut short by its time limit keeps its rows */
            }
            for (int i = 0; dev != NULL && i < T_COUNT; ++i)
                CHECK(clReleaseMemObject(t[i].mem));
        }
        for (int i = 0; i < 8; ++i)
            free(a[i]);
        free(lse);
    }
    if (out)
        fclose(out);
    fcl_mpi_destroy(m);
    MPI_Finalize();
    return 0;
}
