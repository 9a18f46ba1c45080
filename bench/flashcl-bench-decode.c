/* flashcl-bench-decode - decoding against a KV cache, and small-batch
 * prefill, timed on one device beside its copy bandwidth.
 *
 * Decode: the KV-cache call (fcl_attention_kvcache) at Hq = --heads-q,
 * Hkv = --heads-kv, d = --head-dim, causal, every sequence holding sk keys
 * (no append), for each batch, sk, query-row count and cache (contiguous, or
 * paged with the listed page sizes, pages shuffled).  Bytes moved = K, V, Q
 * and O once; GB/s over the time, and as a share of the copy bandwidth
 * measured in the same run (clEnqueueCopyBuffer of --copy-mib MiB, bytes read
 * plus written).  Prefill (--prefill-seqlens): the forward at B = 1,
 * H = --heads-q, d = --head-dim, N in the list, non-causal and causal, with
 * automatic split-KV and with splits forced to 1 (the launch before
 * split-KV existed); TFLOP/s counted as 4 B H N^2 d (halved when causal).
 *
 * --append N appends N new rows per sequence in each call (the cache then
 * holds sk - N keys before it; bytes moved count the new rows read and
 * written).  --rotary R times each decode row twice more: with rotary
 * position embedding on R columns (--rotary-interleaved: GPT-J pairs; fp32
 * tables of sk rows) and again without, alternated; the row "decode-rotary"
 * has the rotary call's time and, in its note, the ratio to the faster of
 * the two without (issue 26: target <= 1.05).
 *
 * --head-dim-v DV: V and O DV columns wide.  --shared-kv: one cache whose
 * rows' first DV columns are V (multi-head latent attention, e.g. --head-dim
 * 576 --head-dim-v 512 --heads-kv 1): rows of kind "mla", bytes moved = the
 * cache once, Q and O.  FLOPs: 2 B Hq rows sk (d + dv) (4 B Hq rows sk d when
 * dv = d).
 *
 * Each timing: --inner calls enqueued back to back, then clFinish, per call;
 * the median of --reps after one warm-up.  Inputs are random (never zeros).
 * Writes a CSV with # metadata lines to --out. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "flashcl.h"
#include "internal.h" /* fcl_debug_set_tile, for --decode-tile */

#include "bench_util.h"
#include "build_info.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        fcl_status e_ = (expr);                                                              \
        if (e_ != FCL_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n%s", __FILE__, __LINE__, #expr,                  \
                    fcl_status_string(e_), fcl_context_build_log(g_ctx));                     \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static fcl_context *g_ctx;

typedef struct config {
    fcl_dtype dtypes[3];
    size_t n_dtypes;
    size_t batches[8], n_batches;
    size_t seqlens[8], n_seqlens;
    size_t rows[4], n_rows;
    size_t pages[4], n_pages;      /* 0: contiguous */
    size_t prefill[8], n_prefill;
    size_t heads_q, heads_kv, head_dim;
    size_t head_dim_v;             /* --head-dim-v: V's and O's columns (0: head_dim) */
    int shared_kv;                 /* --shared-kv: V is the first head_dim_v columns of K */
    size_t max_cache_mib;
    size_t copy_mib;
    int reps, inner;
    int portable_only;
    int tile[5];                   /* --decode-tile: rows, cols, ty, tx (and wd, tensor cores:
                                      warps a row block's keys and columns split over) */
    int sequential_pages;          /* --sequential-pages: page table in order, not shuffled */
    int splits;                    /* --splits: forced split-KV chunks (0: the plan's) */
    int profile;                   /* --profile: a call's span and its last kernel, from
                                      OpenCL's profiling, after each decode row */
    size_t append;                 /* --append: new rows per sequence and call */
    size_t rotary;                 /* --rotary: rotary_dim of the rotary rows (0: none) */
    int rotary_interleaved;
    const char *out;
} config;

static size_t parse_list(const char *s, size_t *out, size_t cap)
{
    size_t n = 0;
    while (*s && n < cap) {
        char *end = NULL;
        out[n++] = (size_t)strtoull(s, &end, 10);
        if (end == s)
            break;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* A device buffer of n random values of the storage type (uniform in
 * [-1, 1], 16-bit types by truncating fp32: any non-zero data will do).
 * Large buffers repeat a block of CHUNK values, copied on the device. */
enum { CHUNK = 1 << 24 };

static cl_mem random_buffer(size_t n, fcl_dtype dt, unsigned seed)
{
    const size_t es = fcl_dtype_size(dt), m = n < CHUNK ? n : CHUNK;
    unsigned char *h = malloc(m * es);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < m; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float f = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        uint32_t x;
        memcpy(&x, &f, 4);
        if (dt == FCL_DTYPE_FP32) {
            memcpy(h + 4 * i, &f, 4);
        } else {
            uint16_t b;
            if (dt == FCL_DTYPE_BF16) {
                b = (uint16_t)(x >> 16);
            } else { /* |f| <= 1: normal fp16 or flushed to a signed zero */
                const uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7FFFFFFFu;
                b = mag < 0x38800000u ? (uint16_t)sign
                                      : (uint16_t)(sign | (((mag >> 23) - 112) << 10) | ((mag >> 13) & 0x3FFu));
            }
            memcpy(h + 2 * i, &b, 2);
        }
    }
    cl_int err = CL_SUCCESS;
    cl_command_queue q = fcl_context_cl_queue(g_ctx);
    cl_mem buf = clCreateBuffer(fcl_context_cl_context(g_ctx), CL_MEM_READ_WRITE, n * es, NULL, &err);
    CHECK(err);
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, m * es, h, 0, NULL, NULL));
    for (size_t done = m; done < n;) { /* double what is there */
        const size_t count = done < n - done ? done : n - done;
        CHECK(clEnqueueCopyBuffer(q, buf, buf, 0, done * es, count * es, 0, NULL, NULL));
        done += count;
    }
    CHECK(clFinish(q));
    free(h);
    return buf;
}

static cl_mem int_buffer(const int32_t *v, size_t n)
{
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(g_ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              n * sizeof *v, (void *)v, &err);
    CHECK(err);
    return m;
}

typedef fcl_status (*call_fn)(const void *arg);

/* Seconds per call: the median of reps batches of `inner` calls. */
static double time_calls(call_fn fn, const void *arg, int reps, int inner)
{
    cl_command_queue q = fcl_context_cl_queue(g_ctx);
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = -1; r < reps; ++r) {
        CHECK(clFinish(q));
        const double t0 = bench_now_s();
        for (int i = 0; i < inner; ++i)
            CHECK(fn(arg));
        CHECK(clFinish(q));
        if (r >= 0)
            t[r] = (bench_now_s() - t0) / inner;
    }
    const double m = bench_median(t, reps);
    free(t);
    return m;
}

/* Copy bandwidth: bytes read plus written per second. */
static double copy_bandwidth(size_t mib, int reps)
{
    const size_t bytes = mib << 20;
    cl_int err = CL_SUCCESS;
    cl_context cx = fcl_context_cl_context(g_ctx);
    cl_command_queue q = fcl_context_cl_queue(g_ctx);
    cl_mem a = random_buffer(bytes / 4, FCL_DTYPE_FP32, 9);
    cl_mem b = clCreateBuffer(cx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    CHECK(err);
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = -1; r < reps; ++r) {
        CHECK(clFinish(q));
        const double t0 = bench_now_s();
        CHECK(clEnqueueCopyBuffer(q, a, b, 0, 0, bytes, 0, NULL, NULL));
        CHECK(clFinish(q));
        if (r >= 0)
            t[r] = bench_now_s() - t0;
    }
    const double s = bench_median(t, reps);
    free(t);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    return 2.0 * (double)bytes / s;
}

typedef struct kv_call {
    fcl_kvcache_desc desc;
    fcl_kvcache_buffers buf;
} kv_call;

static fcl_status run_kvcache(const void *arg)
{
    const kv_call *c = arg;
    return fcl_attention_kvcache(g_ctx, &c->desc, &c->buf, 0, NULL, NULL);
}

static double event_ns(cl_event e, cl_profiling_info what)
{
    cl_ulong t = 0;
    CHECK(clGetEventProfilingInfo(e, what, sizeof t, &t, NULL));
    return (double)t;
}

/* One call under OpenCL's profiling: from the end of a marker before it to
 * its end (every launch and the gaps between), and its last kernel alone
 * (the merge when split). */
static void profile_kvcache(const kv_call *c)
{
    cl_command_queue q = fcl_context_cl_queue(g_ctx);
    cl_event before = NULL, done = NULL;
    CHECK(clFinish(q));
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &before));
    CHECK(fcl_attention_kvcache(g_ctx, &c->desc, &c->buf, 0, NULL, &done));
    CHECK(clFinish(q));
    const double end = event_ns(done, CL_PROFILING_COMMAND_END);
    printf("    profile: call %.1f us, last kernel %.1f us\n",
           (end - event_ns(before, CL_PROFILING_COMMAND_END)) / 1e3,
           (end - event_ns(done, CL_PROFILING_COMMAND_START)) / 1e3);
    clReleaseEvent(before);
    clReleaseEvent(done);
}

typedef struct fwd_call {
    fcl_attention_desc desc;
    cl_mem q, k, v, o;
} fwd_call;

static fcl_status run_forward(const void *arg)
{
    const fwd_call *c = arg;
    return fcl_attention_forward(g_ctx, &c->desc, c->q, c->k, c->v, c->o, NULL, 0, NULL, NULL);
}

/* --rotary: the call with rotary position embedding (tables of sk rows of
 * random values) and without, alternated twice; returns the faster median
 * with rotary, and lowers *plain to the faster one without. */
static double time_rotary(kv_call *call, const config *c, size_t sk, double *plain)
{
    kv_call rot = *call;
    rot.desc.rotary_dim = c->rotary;
    rot.desc.rotary_interleaved = c->rotary_interleaved;
    rot.desc.rotary_rows = sk;
    rot.buf.rotary_cos = random_buffer(sk * c->rotary / 2, FCL_DTYPE_FP32, 12);
    rot.buf.rotary_sin = random_buffer(sk * c->rotary / 2, FCL_DTYPE_FP32, 13);
    double best = INFINITY;
    for (int round = 0; round < 2; ++round) {
        const double t = time_calls(run_kvcache, &rot, c->reps, c->inner);
        best = t < best ? t : best;
        if (round == 0) {
            const double p = time_calls(run_kvcache, call, c->reps, c->inner);
            *plain = p < *plain ? p : *plain;
        }
    }
    clReleaseMemObject(rot.buf.rotary_cos);
    clReleaseMemObject(rot.buf.rotary_sin);
    return best;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: flashcl-bench-decode [--dtypes fp16,bf16] [--batches 1,8,32]\n"
            "       [--seqlens 1024,8192,32768,131072] [--rows 1,4] [--pages 0,16,256]\n"
            "       [--prefill-seqlens 128,256,512,1024] [--heads-q 32] [--heads-kv 8]\n"
            "       [--head-dim 128] [--max-cache-mib 40000] [--copy-mib 1024] [--reps 20]\n"
            "       [--inner 10] [--portable-only] [--decode-tile ROWS,COLS,TY,TX[,WD]]\n"
            "       [--sequential-pages] [--splits N] [--profile] [--append N]\n"
            "       [--rotary R [--rotary-interleaved]] [--head-dim-v DV] [--shared-kv]\n"
            "       [--out results.csv]\n");
}

static fcl_dtype parse_dtype(const char *s)
{
    return !strcmp(s, "fp32") ? FCL_DTYPE_FP32 : !strcmp(s, "bf16") ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
}

int main(int argc, char **argv)
{
    config c = {{FCL_DTYPE_FP16, FCL_DTYPE_BF16}, 2, {1, 8, 32}, 3, {1024, 8192, 32768, 131072}, 4,
                {1, 4}, 2, {0, 16, 256}, 3, {128, 256, 512, 1024}, 4, 32, 8, 128, 0, 0, 40000,
                1024, 20, 10, 0, {0, 0, 0, 0}, 0, 0, 0, 0, 0, 0, NULL};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--dtypes")) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "%s", v);
            c.n_dtypes = 0;
            for (char *t = strtok(tmp, ","); t && c.n_dtypes < 3; t = strtok(NULL, ","))
                c.dtypes[c.n_dtypes++] = parse_dtype(t);
            ++i;
        } else if (!strcmp(a, "--batches")) c.n_batches = parse_list(v, c.batches, 8), ++i;
        else if (!strcmp(a, "--seqlens")) c.n_seqlens = parse_list(v, c.seqlens, 8), ++i;
        else if (!strcmp(a, "--rows")) c.n_rows = parse_list(v, c.rows, 4), ++i;
        else if (!strcmp(a, "--pages")) c.n_pages = parse_list(v, c.pages, 4), ++i;
        else if (!strcmp(a, "--prefill-seqlens")) c.n_prefill = parse_list(v, c.prefill, 8), ++i;
        else if (!strcmp(a, "--heads-q")) c.heads_q = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--heads-kv")) c.heads_kv = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--head-dim")) c.head_dim = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--head-dim-v")) c.head_dim_v = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--shared-kv")) c.shared_kv = 1;
        else if (!strcmp(a, "--max-cache-mib")) c.max_cache_mib = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--copy-mib")) c.copy_mib = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--reps")) c.reps = atoi(v), ++i;
        else if (!strcmp(a, "--inner")) c.inner = atoi(v), ++i;
        else if (!strcmp(a, "--portable-only")) c.portable_only = 1;
        else if (!strcmp(a, "--sequential-pages")) c.sequential_pages = 1;
        else if (!strcmp(a, "--splits")) c.splits = atoi(v), ++i;
        else if (!strcmp(a, "--profile")) c.profile = 1;
        else if (!strcmp(a, "--append")) c.append = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--rotary")) c.rotary = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--rotary-interleaved")) c.rotary_interleaved = 1;
        else if (!strcmp(a, "--decode-tile")) {
            if (sscanf(v, "%d,%d,%d,%d,%d", &c.tile[0], &c.tile[1], &c.tile[2], &c.tile[3],
                       &c.tile[4]) < 4) {
                usage();
                return 2;
            }
            ++i;
        }
        else if (!strcmp(a, "--out")) c.out = v, ++i;
        else { usage(); return 2; }
    }
    if (c.head_dim_v == 0)
        c.head_dim_v = c.head_dim;
    if (c.reps < 1 || c.inner < 1 || c.heads_kv == 0 || c.heads_q % c.heads_kv != 0) {
        usage();
        return 2;
    }
    fcl_context_options co;
    fcl_context_options_init(&co);
    co.portable_only = c.portable_only;
    co.enable_profiling = c.profile;
    fcl_status st = fcl_context_create(&co, &g_ctx);
    if (st != FCL_OK) {
        fprintf(stderr, "flashcl-bench-decode: %s\n", fcl_status_string(st));
        return 1;
    }
    if (c.tile[0] > 0)
        CHECK(fcl_debug_set_tile(g_ctx, FCL_KERNEL_DECODE, c.tile[0], c.tile[1], c.tile[2], c.tile[3]));
    if (c.tile[0] > 0 && c.tile[4] > 1)
        CHECK(fcl_debug_set_tile_split(g_ctx, FCL_KERNEL_DECODE, c.tile[4]));
    fcl_device_info info;
    fcl_context_device_info(g_ctx, &info);
    const double bw = copy_bandwidth(c.copy_mib, c.reps);
    char date[64];
    time_t tt = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
    FILE *out = c.out ? fopen(c.out, "w") : NULL;
    if (c.out && !out) {
        perror(c.out);
        return 1;
    }
    printf("device: %s (%s, driver %s)\nflashcl %s, commit %s, %s\n", info.name, info.platform_name,
           info.driver_version, fcl_version_string(), FCL_GIT_COMMIT, date);
    printf("copy bandwidth %.0f GB/s (read + write); Hq %zu, Hkv %zu, d %zu, dv %zu%s; median of "
           "%d x %d calls\n\n", bw / 1e9, c.heads_q, c.heads_kv, c.head_dim, c.head_dim_v,
           c.shared_kv ? ", one shared K/V cache" : "", c.reps, c.inner);
    if (out) {
        fprintf(out, "# device: %s\n# platform: %s\n# driver: %s\n# date: %s\n# commit: %s\n",
                info.name, info.platform_name, info.driver_version, date, FCL_GIT_COMMIT);
        fprintf(out, "# page_table: %s\n", c.sequential_pages ? "sequential" : "shuffled");
        if (c.splits > 0)
            fprintf(out, "# forced splits: %d\n", c.splits);
        if (c.append > 0)
            fprintf(out, "# appended rows per call: %zu\n", c.append);
        if (c.rotary > 0)
            fprintf(out, "# rotary: %zu columns, %s pairs; decode-rotary against the faster of two "
                         "alternated medians without\n",
                    c.rotary, c.rotary_interleaved ? "interleaved" : "half-split");
        fprintf(out, "# copy_bandwidth_gbs: %.1f\n# reps: %d x %d calls (median)\n", bw / 1e9,
                c.reps, c.inner);
        fprintf(out, "# head_dim_v: %zu\n# shared_kv: %d\n", c.head_dim_v, c.shared_kv);
        fprintf(out, "kind,dtype,B,Hq,Hkv,d,sk,rows,page,causal,variant,pack,splits,us,gbs,"
                     "pct_copy_bw,tflops,note\n");
    }
    printf("%-7s %-4s %3s %7s %4s %5s %-17s %4s %6s | %9s %8s %6s %8s\n", "kind", "type", "B", "sk",
           "rows", "page", "variant", "pack", "splits", "us", "GB/s", "%bw", "TFLOP/s");

    for (size_t ti = 0; ti < c.n_dtypes; ++ti) {
        const fcl_dtype dt = c.dtypes[ti];
        const size_t es = fcl_dtype_size(dt), D = c.head_dim, Hq = c.heads_q, Hk = c.heads_kv;
        const size_t Dv = c.head_dim_v, caches = c.shared_kv ? 1 : 2;
        const char *decode_kind = c.shared_kv ? "mla" : "decode";
        for (size_t bi = 0; bi < c.n_batches; ++bi)
            for (size_t si = 0; si < c.n_seqlens; ++si) {
                const size_t B = c.batches[bi], sk = c.seqlens[si];
                const size_t cache_elems = B * sk * Hk * D, v_elems = c.shared_kv ? 0 : B * sk * Hk * Dv;
                if ((cache_elems + v_elems) * es > (c.max_cache_mib << 20))
                    continue;
                cl_mem kc = random_buffer(cache_elems, dt, 2);
                cl_mem vc = c.shared_kv ? NULL : random_buffer(v_elems, dt, 3);
                for (size_t pi = 0; pi < c.n_pages; ++pi)
                    for (size_t ri = 0; ri < c.n_rows; ++ri) {
                        const size_t page = c.pages[pi], rows = c.rows[ri];
                        if (page > 0 && sk % page != 0)
                            continue;
                        kv_call call;
                        fcl_kvcache_desc *d = &call.desc;
                        if (c.append >= sk)
                            continue;
                        fcl_kvcache_desc_init(d, B, Hq, Hk, D, rows, c.append, dt);
                        d->head_dim_v = Dv; /* before the layouts that use it */
                        d->o = fcl_layout_contiguous(FCL_LAYOUT_BSHD, Hq, rows, Dv);
                        d->v_new = fcl_layout_contiguous(FCL_LAYOUT_BSHD, Hk, c.append, Dv);
                        d->shared_kv = c.shared_kv;
                        d->causal = 1;
                        d->num_splits = c.splits;
                        int32_t *lens = malloc(B * sizeof *lens), *table = NULL;
                        for (size_t b = 0; b < B; ++b)
                            lens[b] = (int32_t)(sk - c.append);
                        if (page == 0) {
                            fcl_kvcache_desc_set_contiguous(d, sk);
                        } else { /* the same cache as pages, handed out shuffled (or in
                                  * order: the cost of the page table alone) */
                            const size_t per_seq = sk / page, np = B * per_seq;
                            fcl_kvcache_desc_set_paged(d, np, page, per_seq);
                            table = malloc(np * sizeof *table);
                            for (size_t p = 0; p < np; ++p)
                                table[p] = (int32_t)p;
                            uint64_t s = 12345;
                            for (size_t p = np - 1; p > 0 && !c.sequential_pages; --p) {
                                s = s * 6364136223846793005ull + 1442695040888963407ull;
                                const size_t j = (size_t)(s >> 33) % (p + 1);
                                const int32_t x = table[p];
                                table[p] = table[j];
                                table[j] = x;
                            }
                        }
                        memset(&call.buf, 0, sizeof call.buf);
                        call.buf.q = random_buffer(B * rows * Hq * D, dt, 1);
                        call.buf.o = random_buffer(B * rows * Hq * Dv, dt, 4);
                        call.buf.k_cache = kc;
                        call.buf.v_cache = vc;
                        call.buf.cache_seqlens = int_buffer(lens, B);
                        call.buf.page_table = table ? int_buffer(table, B * (sk / page)) : NULL;
                        if (c.append > 0) {
                            call.buf.k_new = random_buffer(B * c.append * Hk * D, dt, 10);
                            call.buf.v_new =
                                c.shared_kv ? NULL : random_buffer(B * c.append * Hk * Dv, dt, 11);
                        }
                        fcl_plan plan;
                        CHECK(fcl_kvcache_plan_query(g_ctx, d, &plan));
                        double s = time_calls(run_kvcache, &call, c.reps, c.inner), s_rot = 0;
                        if (c.rotary > 0)
                            s_rot = time_rotary(&call, &c, sk, &s);
                        /* the caches once (one of them when shared), Q, O, and the
                         * appended rows read and written */
                        const double bytes = (double)(cache_elems + v_elems + B * rows * Hq * (D + Dv) +
                                                      2 * B * c.append * Hk * (caches == 1 ? D : D + Dv)) *
                                             (double)es;
                        const double gbs = bytes / s / 1e9;
                        const double fl = 2.0 * B * Hq * rows * (double)sk * (double)(D + Dv);
                        printf("%-7s %-4s %3zu %7zu %4zu %5zu %-17s %4zu %6zu | %9.1f %8.0f %5.1f%% %8.2f\n",
                               decode_kind, fcl_dtype_name(dt), B, sk, rows, page, plan.variant, plan.pack,
                               plan.num_splits, s * 1e6, gbs, 100.0 * bytes / s / bw, fl / s / 1e12);
                        if (c.profile)
                            profile_kvcache(&call);
                        fflush(stdout);
                        if (out)
                            fprintf(out, "%s,%s,%zu,%zu,%zu,%zu,%zu,%zu,%zu,1,%s,%zu,%zu,%.2f,%.1f,%.2f,%.3f,\n",
                                    decode_kind, fcl_dtype_name(dt), B, Hq, Hk, D, sk, rows, page, plan.variant,
                                    plan.pack, plan.num_splits, s * 1e6, gbs, 100.0 * bytes / s / bw,
                                    fl / s / 1e12);
                        if (c.rotary > 0) {
                            printf("%-7s %-4s %3zu %7zu %4zu %5zu %-17s %4zu %6zu | %9.1f   rotary %zu: "
                                   "x%.3f\n", "+rotary", fcl_dtype_name(dt), B, sk, rows, page,
                                   plan.variant, plan.pack, plan.num_splits, s_rot * 1e6, c.rotary,
                                   s_rot / s);
                            if (out)
                                fprintf(out, "decode-rotary,%s,%zu,%zu,%zu,%zu,%zu,%zu,%zu,1,%s,%zu,%zu,"
                                             "%.2f,%.1f,%.2f,%.3f,ratio=%.4f\n",
                                        fcl_dtype_name(dt), B, Hq, Hk, D, sk, rows, page, plan.variant,
                                        plan.pack, plan.num_splits, s_rot * 1e6, bytes / s_rot / 1e9,
                                        100.0 * bytes / s_rot / bw, fl / s_rot / 1e12, s_rot / s);
                        }
                        clReleaseMemObject(call.buf.q);
                        clReleaseMemObject(call.buf.o);
                        clReleaseMemObject(call.buf.cache_seqlens);
                        if (call.buf.page_table)
                            clReleaseMemObject(call.buf.page_table);
                        if (call.buf.k_new)
                            clReleaseMemObject(call.buf.k_new);
                        if (call.buf.v_new)
                            clReleaseMemObject(call.buf.v_new);
                        free(lens);
                        free(table);
                    }
                clReleaseMemObject(kc);
                if (vc)
                    clReleaseMemObject(vc);
            }
        /* small-batch prefill: automatic splits against none */
        for (size_t ni = 0; ni < c.n_prefill; ++ni)
            for (int causal = 0; causal <= 1; ++causal) {
                const size_t N = c.prefill[ni], n = Hq * N * D;
                fwd_call call;
                fcl_attention_desc_init(&call.desc, 1, Hq, Hq, N, N, D, dt, FCL_LAYOUT_BHSD);
                call.desc.causal = causal;
                call.q = random_buffer(n, dt, 5);
                call.k = random_buffer(n, dt, 6);
                call.v = random_buffer(n, dt, 7);
                call.o = random_buffer(n, dt, 8);
                const double fl = 4.0 * Hq * (double)N * N * D * (causal ? 0.5 : 1.0);
                for (int forced = 0; forced <= 1; ++forced) {
                    call.desc.num_splits = forced;
                    fcl_plan plan;
                    CHECK(fcl_plan_query(g_ctx, &call.desc, FCL_KERNEL_FORWARD, &plan));
                    const double s = time_calls(run_forward, &call, c.reps, c.inner);
                    const char *kind = forced ? "prefill-nosplit" : "prefill";
                    printf("%-7s %-4s %3d %7zu %4zu %5s %-17s %4zu %6zu | %9.1f %8s %6s %8.2f%s\n", kind,
                           fcl_dtype_name(dt), 1, N, N, "-", plan.variant, plan.pack, plan.num_splits,
                           s * 1e6, "-", "-", fl / s / 1e12, causal ? " causal" : "");
                    fflush(stdout);
                    if (out)
                        fprintf(out, "%s,%s,1,%zu,%zu,%zu,%zu,%zu,0,%d,%s,%zu,%zu,%.2f,,,%.3f,\n", kind,
                                fcl_dtype_name(dt), Hq, Hq, D, N, N, causal, plan.variant, plan.pack,
                                plan.num_splits, s * 1e6, fl / s / 1e12);
                }
                clReleaseMemObject(call.q);
                clReleaseMemObject(call.k);
                clReleaseMemObject(call.v);
                clReleaseMemObject(call.o);
            }
    }
    if (out)
        fclose(out);
    fcl_context_destroy(g_ctx);
    return 0;
}
