/* large_check.c - attention at sizes past 32-bit indices, checked on
 * sampled rows against float64.
 *
 *   flashcl-large-check [--batch B] [--heads H] [--seqlen N] [--seqlen-k NK]
 *                       [--head-dim D] [--dtype fp16|bf16|fp32] [--causal]
 *                       [--backward] [--rows R] [--seed S] [--threads T]
 *
 * Runs the forward (and with --backward the backward) of one problem, Q
 * (B, N, H, D) and K, V (B, NK, H, D) (NK = N unless given), with inputs
 * uniform in [-1, 1) (cheap to draw at billions of elements), through the cl_mem calls, then reads back R sampled query rows
 * (O, LSE, dQ) and R sampled key rows (dK, dV), spread over every batch
 * entry and head and always including the first and last row, and compares
 * each with a float64 computation from the same (rounded) inputs.  Nothing
 * of size N x N is ever held, here or in the library.
 *
 * What it is for: a single head with N^2 > 2^32 (score and dropout
 * counters, tile loops), tensors with more than 2^31 elements (element
 * offsets), more than 2^31 query rows in all (LSE and delta offsets, the
 * delta kernel's index: a short NK keeps that affordable).  Too slow for the test suite; see
 * NOTES.md for its runs and bench/gpu_session.sh (step large) for the GPU.
 *
 * The reference of dK and dV rows needs every query row's LSE and O
 * (delta = rowsum(dO * O)); computing those in float64 costs N^2 * D per
 * head, so the key rows use the device's LSE and O, themselves checked on
 * the sampled query rows.
 *
 * The host's work runs on T threads (default: every online core): the
 * inputs, drawn from one splitmix64 sequence (Q, K, V, dO in turn) that each
 * thread enters at its own element, so they do not depend on T, and the
 * float64 references of the sampled rows.  Progress lines are flushed as
 * they are printed, with the time of each phase.
 *
 * Tolerance, the suite's rule (tests/test_support.h) without its
 * low-precision reference: per tensor, max |ours - ref| <=
 * 2 * (u * max|ref| + u32 * sqrt(n) * max(max|ref|, M)), u the storage
 * type's unit roundoff (fp32's for LSE), u32 = 2^-24, n = D + N, M the largest sum of
 * absolute values of the terms behind one gradient element (0 for O). */
#include "test_support.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    size_t batch, heads, seqlen, seqlen_k, head_dim, rows, threads;
    fcl_dtype dtype;
    int causal, backward;
    uint64_t seed;
} options;

static double now_s(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

/* ---- host threads -------------------------------------------------------------- */

/* fn(arg, begin, end) over [0, n), cut into `threads` contiguous slices run
 * at once (a slice whose thread cannot start runs on this one). */
typedef void (*range_fn)(void *arg, size_t begin, size_t end);

typedef struct slice {
    range_fn fn;
    void *arg;
    size_t begin, end;
    pthread_t thread;
    int started;
} slice;

static void *run_slice(void *s_)
{
    slice *s = s_;
    s->fn(s->arg, s->begin, s->end);
    return NULL;
}

static void parallel_for(size_t threads, size_t n, range_fn fn, void *arg)
{
    slice *s = xmalloc(threads * sizeof *s);
    for (size_t t = 0; t < threads; ++t) {
        s[t] = (slice){fn, arg, n * t / threads, n * (t + 1) / threads, 0, 0};
        s[t].started = t > 0 && pthread_create(&s[t].thread, NULL, run_slice, &s[t]) == 0;
    }
    for (size_t t = 0; t < threads; ++t)
        if (!s[t].started)
            run_slice(&s[t]);
    for (size_t t = 0; t < threads; ++t)
        if (s[t].started)
            pthread_join(s[t].thread, NULL);
    free(s);
}

/* ---- the problem on the host: (B, N, H, D) arrays of the storage type ---- */

typedef struct problem {
    options o;
    size_t es, elems, elems_k;
    unsigned char *q, *k, *v, *dout;
    double scale;
} problem;

/* Element (b, s, h, 0) of a query-side (Q, O, dO, dQ) tensor, and of a key-side one. */
static size_t at(const problem *p, size_t b, size_t s, size_t h)
{
    return ((b * p->o.seqlen + s) * p->o.heads + h) * p->o.head_dim;
}
static size_t at_k(const problem *p, size_t b, size_t s, size_t h)
{
    return ((b * p->o.seqlen_k + s) * p->o.heads + h) * p->o.head_dim;
}

static double get(const problem *p, const unsigned char *x, size_t i)
{
    return fa_get_value(x + i * p->es, p->o.dtype);
}

/* Elements first .. first + elems - 1 of the input sequence, uniform in
 * [-1, 1), into x. */
typedef struct fill_job {
    const problem *p;
    unsigned char *x;
    uint64_t first;
} fill_job;

static void fill_range(void *job_, size_t begin, size_t end)
{
    const fill_job *job = job_;
    const size_t es = job->p->es;
    rng r = {job->p->o.seed};
    rng_skip(&r, job->first + begin);
    for (size_t i = begin; i < end; ++i)
        fa_put_value(job->x + i * es, job->p->o.dtype, 2.0 * rng_uniform(&r) - 1.0);
}

/* The next `elems` elements of the input sequence (*drawn of them so far),
 * as a new tensor of the storage type. */
static unsigned char *random_tensor(const problem *p, uint64_t *drawn, size_t elems)
{
    fill_job job = {p, xmalloc(elems * p->es), *drawn};
    parallel_for(p->o.threads, elems, fill_range, &job);
    *drawn += elems;
    return job.x;
}

/* causal: bottom-right aligned, as the header says */
static int visible(const problem *p, size_t i, size_t j)
{
    return !p->o.causal || j + p->o.seqlen <= i + p->o.seqlen_k;
}

/* Query row (b, i, h): the float64 O row (into o) and LSE; the keys' scores
 * into s (N doubles). */
static double ref_row(const problem *p, size_t b, size_t i, size_t h, double *s, double *o)
{
    const size_t N = p->o.seqlen_k, D = p->o.head_dim;
    double mx = -INFINITY;
    for (size_t j = 0; j < N; ++j) {
        s[j] = -INFINITY;
        if (!visible(p, i, j))
            continue;
        double dot = 0.0;
        for (size_t c = 0; c < D; ++c)
            dot += get(p, p->q, at(p, b, i, h) + c) * get(p, p->k, at_k(p, b, j, h) + c);
        s[j] = dot * p->scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    double l = 0.0;
    for (size_t c = 0; c < D; ++c)
        o[c] = 0.0;
    for (size_t j = 0; j < N; ++j) {
        if (s[j] == -INFINITY)
            continue;
        const double e = exp(s[j] - mx);
        l += e;
        for (size_t c = 0; c < D; ++c)
            o[c] += e * get(p, p->v, at_k(p, b, j, h) + c);
    }
    if (l == 0.0) /* a row that sees no key: O = 0, LSE = +inf */
        return INFINITY;
    for (size_t c = 0; c < D; ++c)
        o[c] /= l;
    return mx + log(l);
}

/* ---- comparison ------------------------------------------------------------- */

typedef struct check {
    const char *name;
    double err, max_ref, magnitude;
    size_t n;
} check;

static void note(check *c, double ours, double ref, double magnitude)
{
    const double e = ours == ref ? 0.0 : fabs(ours - ref); /* +inf LSE of an empty row */
    if (!(e <= c->err)) /* NaN counts as the worst */
        c->err = isnan(e) ? INFINITY : e;
    if (isfinite(ref))
        c->max_ref = fabs(ref) > c->max_ref ? fabs(ref) : c->max_ref;
    c->magnitude = magnitude > c->magnitude ? magnitude : c->magnitude;
}

static int report(const check *c, const problem *p)
{
    /* LSE is stored in fp32 whatever the tensors' type */
    const double u32 = ldexp(1.0, -24), u = strcmp(c->name, "LSE") == 0 ? u32 : unit_roundoff(p->o.dtype);
    const double m = c->max_ref > c->magnitude ? c->max_ref : c->magnitude;
    const double tol = 2.0 * (u * c->max_ref + u32 * sqrt((double)c->n) * m);
    const int ok = c->err <= tol;
    printf("  %-4s max err %.3e  tol %.3e  (max |ref| %.3e, M %.3e)  %s\n", c->name, c->err, tol,
           c->max_ref, c->magnitude, ok ? "ok" : "FAIL");
    return ok;
}

/* ---- device buffers ------------------------------------------------------------ */

static cl_mem device_copy(fcl_context *ctx, const void *host, size_t bytes)
{
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx),
                              CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                              (void *)host, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(%zu bytes): %s\n", bytes, fcl_status_string(err));
        exit(2);
    }
    return m;
}

static void read_back(fcl_context *ctx, cl_mem m, size_t offset, size_t bytes, void *dst)
{
    const cl_int err = clEnqueueReadBuffer(fcl_context_cl_queue(ctx), m, CL_TRUE, offset, bytes,
                                           dst, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer: %s\n", fcl_status_string(err));
        exit(2);
    }
}

/* Sampled row k of R over (B, H, n) rows (k = 0 and k = R-1 are the
 * first and the last); returns (b, h, i). */
static void sample(const problem *p, size_t n, size_t k, size_t *b, size_t *h, size_t *i)
{
    const size_t R = p->o.rows, total = p->o.batch * p->o.heads * n;
    const size_t flat = R > 1 ? (size_t)((double)k * (double)(total - 1) / (double)(R - 1)) : 0;
    *i = flat % n;
    *h = (flat / n) % p->o.heads;
    *b = flat / (n * p->o.heads);
}

/* ---- float64 references of the sampled rows, computed on every thread ---------- */

/* R sampled rows' references, D values a row: query rows' LSE, O and (with
 * --backward) dQ with the magnitudes M of its terms; key rows' dK and dV with
 * theirs, from the device's O and LSE (o_dev, lse_dev). */
typedef struct refs {
    const problem *p;
    double *lse, *o, *dq, *dq_mag;
    double *dk, *dk_mag, *dv, *dv_mag;
    const unsigned char *o_dev;
    const float *lse_dev;
} refs;

static double *doubles(size_t n) { return xmalloc(n * sizeof(double)); }

static void refs_alloc(refs *r, const problem *p)
{
    const size_t n = p->o.rows * p->o.head_dim;
    *r = (refs){p, doubles(p->o.rows), doubles(n), doubles(n), doubles(n),
                doubles(n), doubles(n), doubles(n), doubles(n), NULL, NULL};
}

static void refs_free(refs *r)
{
    double *all[] = {r->lse, r->o, r->dq, r->dq_mag, r->dk, r->dk_mag, r->dv, r->dv_mag};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
}

/* Sampled query rows begin .. end - 1: LSE, O and dQ. */
static void query_refs(void *r_, size_t begin, size_t end)
{
    refs *r = r_;
    const problem *p = r->p;
    const size_t D = p->o.head_dim;
    double *s = doubles(p->o.seqlen_k);
    for (size_t smp = begin; smp < end; ++smp) {
        size_t b, h, i;
        sample(p, p->o.seqlen, smp, &b, &h, &i);
        double *o = r->o + smp * D, *dref = r->dq + smp * D, *dmag = r->dq_mag + smp * D;
        const double lse = r->lse[smp] = ref_row(p, b, i, h, s, o);
        if (!p->o.backward)
            continue;
        /* dS_ij = P_ij (dO_i . V_j - delta_i), delta_i = dO_i . O_i (float64 O);
         * dQ_i = scale * sum_j dS_ij K_j */
        double delta = 0.0;
        for (size_t c = 0; c < D; ++c)
            delta += get(p, p->dout, at(p, b, i, h) + c) * o[c];
        for (size_t c = 0; c < D; ++c)
            dref[c] = dmag[c] = 0.0;
        for (size_t j = 0; j < p->o.seqlen_k; ++j) {
            if (s[j] == -INFINITY)
                continue;
            const double pij = exp(s[j] - lse);
            double dp = 0.0;
            for (size_t c = 0; c < D; ++c)
                dp += get(p, p->dout, at(p, b, i, h) + c) * get(p, p->v, at_k(p, b, j, h) + c);
            const double ds = pij * (dp - delta);
            for (size_t c = 0; c < D; ++c) {
                const double kv = get(p, p->k, at_k(p, b, j, h) + c);
                dref[c] += ds * kv * p->scale;
                dmag[c] += fabs(ds * kv * p->scale);
            }
        }
    }
    free(s);
}

/* Sampled key rows begin .. end - 1: dK_j = scale * sum_i dS_ij Q_i,
 * dV_j = sum_i P_ij dO_i, with P_ij from the device's LSE (checked on the
 * query rows) and delta_i from the device's O row (a float64 O of every row
 * would cost N^2 D). */
static void key_refs(void *r_, size_t begin, size_t end)
{
    refs *r = r_;
    const problem *p = r->p;
    const size_t D = p->o.head_dim, N = p->o.seqlen;
    for (size_t smp = begin; smp < end; ++smp) {
        size_t b, h, j;
        sample(p, p->o.seqlen_k, smp, &b, &h, &j);
        const float *lse_bh = r->lse_dev + (b * p->o.heads + h) * N;
        double *dref = r->dk + smp * D, *dmag = r->dk_mag + smp * D;
        double *vref = r->dv + smp * D, *vmag = r->dv_mag + smp * D;
        for (size_t c = 0; c < D; ++c)
            dref[c] = dmag[c] = vref[c] = vmag[c] = 0.0;
        for (size_t i = 0; i < N; ++i) {
            if (!visible(p, i, j))
                continue;
            double dot = 0.0, dp = 0.0, delta = 0.0;
            for (size_t c = 0; c < D; ++c) {
                const double dout = get(p, p->dout, at(p, b, i, h) + c);
                dot += get(p, p->q, at(p, b, i, h) + c) * get(p, p->k, at_k(p, b, j, h) + c);
                dp += dout * get(p, p->v, at_k(p, b, j, h) + c);
                delta += dout * get(p, r->o_dev, at(p, b, i, h) + c);
            }
            const double pij = exp(dot * p->scale - (double)lse_bh[i]);
            const double ds = pij * (dp - delta);
            for (size_t c = 0; c < D; ++c) {
                const double qv = get(p, p->q, at(p, b, i, h) + c) * p->scale;
                const double gv = get(p, p->dout, at(p, b, i, h) + c);
                dref[c] += ds * qv;
                dmag[c] += fabs(ds * qv);
                vref[c] += pij * gv;
                vmag[c] += fabs(pij * gv);
            }
        }
    }
}

/* The device's D values of row `row` (an element index) of m against
 * ref[0 .. D), noted into c. */
static void compare_row(fcl_context *ctx, const problem *p, cl_mem m, size_t row, unsigned char *buf,
                        const double *ref, const double *mag, check *c)
{
    const size_t D = p->o.head_dim;
    read_back(ctx, m, row * p->es, D * p->es, buf);
    for (size_t k = 0; k < D; ++k)
        note(c, fa_get_value(buf + k * p->es, p->o.dtype), ref[k], mag ? mag[k] : 0.0);
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){1, 1, 70000, 0, 16, 16, 0, FCL_DTYPE_FP16, 0, 0, 7};
    for (int a = 1; a < argc; ++a) {
        const char *s = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (strcmp(s, "--causal") == 0) {
            o->causal = 1;
            continue;
        }
        if (strcmp(s, "--backward") == 0) {
            o->backward = 1;
            continue;
        }
        if (v == NULL)
            return 0;
        ++a;
        if (strcmp(s, "--batch") == 0)
            o->batch = strtoull(v, NULL, 10);
        else if (strcmp(s, "--heads") == 0)
            o->heads = strtoull(v, NULL, 10);
        else if (strcmp(s, "--seqlen") == 0)
            o->seqlen = strtoull(v, NULL, 10);
        else if (strcmp(s, "--seqlen-k") == 0)
            o->seqlen_k = strtoull(v, NULL, 10);
        else if (strcmp(s, "--head-dim") == 0)
            o->head_dim = strtoull(v, NULL, 10);
        else if (strcmp(s, "--rows") == 0)
            o->rows = strtoull(v, NULL, 10);
        else if (strcmp(s, "--seed") == 0)
            o->seed = strtoull(v, NULL, 10);
        else if (strcmp(s, "--threads") == 0)
            o->threads = strtoull(v, NULL, 10);
        else if (strcmp(s, "--dtype") == 0)
            o->dtype = strcmp(v, "fp32") == 0   ? FCL_DTYPE_FP32
                       : strcmp(v, "bf16") == 0 ? FCL_DTYPE_BF16
                                                : FCL_DTYPE_FP16;
        else
            return 0;
    }
    if (o->seqlen_k == 0)
        o->seqlen_k = o->seqlen;
    if (o->threads == 0) {
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = cores > 0 ? (size_t)cores : 1;
    }
    return o->batch > 0 && o->heads > 0 && o->seqlen > 0 && o->head_dim > 0 && o->rows > 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes, also into a pipe */
    const double start = now_s();
    problem p;
    if (!parse(argc, argv, &p.o)) {
        fprintf(stderr, "usage: %s [--batch B] [--heads H] [--seqlen N] [--seqlen-k NK] [--head-dim D] "
                        "[--dtype fp16|bf16|fp32] [--causal] [--backward] [--rows R] [--seed S] [--threads T]\n",
                argv[0]);
        return 2;
    }
    const options *o = &p.o;
    const size_t B = o->batch, H = o->heads, N = o->seqlen, NK = o->seqlen_k, D = o->head_dim;
    p.es = fcl_dtype_size(o->dtype);
    p.elems = B * N * H * D;
    p.elems_k = B * NK * H * D;
    p.scale = 1.0 / sqrt((double)D);
    printf("B=%zu H=%zu N=%zu NK=%zu D=%zu %s%s: %zu elements in Q (%s 2^31), %zu query rows "
           "(%s 2^31), N x NK = %.3g (%s 2^32)\n",
           B, H, N, NK, D, fcl_dtype_name(o->dtype), o->causal ? " causal" : "", p.elems,
           p.elems > ((size_t)1 << 31) ? ">" : "<=", B * H * N,
           B * H * N > ((size_t)1 << 31) ? ">" : "<=", (double)N * (double)NK,
           (double)N * (double)NK > 4294967296.0 ? ">" : "<=");
    uint64_t drawn = 0;
    double t0 = now_s();
    p.q = random_tensor(&p, &drawn, p.elems);
    p.k = random_tensor(&p, &drawn, p.elems_k);
    p.v = random_tensor(&p, &drawn, p.elems_k);
    p.dout = o->backward ? random_tensor(&p, &drawn, p.elems) : NULL;
    printf("inputs: %.1f s (%zu threads)\n", now_s() - t0, o->threads);

    t0 = now_s();
    fcl_context *ctx = test_context(NULL);
    if (ctx == NULL)
        return 2;
    fcl_device_info info;
    fcl_context_device_info(ctx, &info);
    printf("device: %s (%s), context %.1f s\n", info.name, info.driver_version, now_s() - t0);
    t0 = now_s();
    const size_t bytes = p.elems * p.es, bytes_k = p.elems_k * p.es;
    const size_t lse_bytes = B * H * N * sizeof(float);
    cl_mem q = device_copy(ctx, p.q, bytes), k = device_copy(ctx, p.k, bytes_k);
    cl_mem v = device_copy(ctx, p.v, bytes_k), out = device_copy(ctx, NULL, bytes);
    cl_mem lse = device_copy(ctx, NULL, lse_bytes);
    printf("device buffers: %.1f s\n", now_s() - t0);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H, N, NK, D, o->dtype, FCL_LAYOUT_BSHD);
    d.causal = o->causal;

    t0 = now_s();
    fcl_status st = fcl_attention_forward(ctx, &d, q, k, v, out, lse, 0, NULL, NULL);
    if (st == FCL_OK)
        st = clFinish(fcl_context_cl_queue(ctx));
    if (st != FCL_OK) {
        printf("forward: %s\n%s", fcl_status_string(st), fcl_context_build_log(ctx));
        return 1;
    }
    printf("forward: %.2f s (with the kernel build)\n", now_s() - t0);
    cl_mem dq = NULL, dk = NULL, dv = NULL, dout = NULL;
    if (o->backward) {
        dout = device_copy(ctx, p.dout, bytes);
        dq = device_copy(ctx, NULL, bytes), dk = device_copy(ctx, NULL, bytes_k);
        dv = device_copy(ctx, NULL, bytes_k);
        t0 = now_s();
        st = fcl_attention_backward(ctx, &d, q, k, v, out, lse, dout, dq, dk, dv, 0, NULL, NULL);
        if (st == FCL_OK)
            st = clFinish(fcl_context_cl_queue(ctx));
        if (st != FCL_OK) {
            printf("backward: %s\n%s", fcl_status_string(st), fcl_context_build_log(ctx));
            return 1;
        }
        printf("backward: %.2f s (with the kernel builds)\n", now_s() - t0);
    }

    /* sampled query rows: O, LSE, dQ; then key rows: dK, dV */
    unsigned char *row = xmalloc(D * p.es);
    const size_t longest = N > NK ? N : NK;
    check c_o = {"O", 0, 0, 0, D + NK}, c_lse = {"LSE", 0, 0, 0, D + NK};
    check c_dq = {"dQ", 0, 0, 0, D + longest}, c_dk = {"dK", 0, 0, 0, D + longest};
    check c_dv = {"dV", 0, 0, 0, D + longest};
    refs r;
    refs_alloc(&r, &p);
    t0 = now_s();
    parallel_for(o->threads, o->rows, query_refs, &r);
    for (size_t smp = 0; smp < o->rows; ++smp) {
        size_t b, h, i;
        sample(&p, N, smp, &b, &h, &i);
        float lse_ours = 0.0f;
        read_back(ctx, lse, ((b * H + h) * N + i) * sizeof(float), sizeof(float), &lse_ours);
        note(&c_lse, lse_ours, r.lse[smp], 0.0);
        compare_row(ctx, &p, out, at(&p, b, i, h), row, r.o + smp * D, NULL, &c_o);
        if (o->backward)
            compare_row(ctx, &p, dq, at(&p, b, i, h), row, r.dq + smp * D, r.dq_mag + smp * D,
                        &c_dq);
    }
    if (o->backward) {
        /* the device's O (for delta) and LSE, whole */
        unsigned char *o_all = xmalloc(bytes);
        float *lse_all = xmalloc(lse_bytes);
        read_back(ctx, out, 0, bytes, o_all);
        read_back(ctx, lse, 0, lse_bytes, lse_all);
        r.o_dev = o_all, r.lse_dev = lse_all;
        parallel_for(o->threads, o->rows, key_refs, &r);
        for (size_t smp = 0; smp < o->rows; ++smp) {
            size_t b, h, j;
            sample(&p, NK, smp, &b, &h, &j);
            compare_row(ctx, &p, dk, at_k(&p, b, j, h), row, r.dk + smp * D, r.dk_mag + smp * D,
                        &c_dk);
            compare_row(ctx, &p, dv, at_k(&p, b, j, h), row, r.dv + smp * D, r.dv_mag + smp * D,
                        &c_dv);
        }
        free(o_all);
        free(lse_all);
    }
    printf("checked %zu sampled query rows%s in %.1f s:\n", o->rows,
           o->backward ? " and key rows" : "", now_s() - t0);
    int ok = report(&c_o, &p) & report(&c_lse, &p);
    if (o->backward)
        ok &= report(&c_dq, &p) & report(&c_dk, &p) & report(&c_dv, &p);
    printf("%s (%.1f s in all)\n", ok ? "PASS" : "FAIL", now_s() - start);

    cl_mem all[] = {q, k, v, out, lse, dout, dq, dk, dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (all[i] != NULL)
            clReleaseMemObject(all[i]);
    fcl_context_destroy(ctx);
    free(p.q), free(p.k), free(p.v), free(p.dout);
    refs_free(&r);
    free(row);
    return ok ? 0 : 1;
}
