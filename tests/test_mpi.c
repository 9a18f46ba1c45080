/* test_mpi.c - flashcl_mpi under mpirun (1, 2 or 3 ranks): every rank
 * checks its shard of the ring's forward and gradients against the float64
 * reference of the whole sequence (tests/reference.c) and against the
 * single-device call on its own device; the cl_mem form (buffers at
 * offsets, events) against the host form, bitwise, and the same float64
 * checks; then the collective errors of both forms.
 *
 * Tolerance: tests/test_support.h's rule, err <= factor * err(low-precision
 * reference) + u * max|ref| + u32 * sqrt(n) * max(max|ref|, M), plus what the
 * ring adds by design (flashcl_mpi.h, "Accuracy"): each step's partial result
 * is rounded to the storage type before the fp32 sum, so
 *   O:          + u * max|V|   (a step's partial O is a convex combination of
 *                               rows of V, so |O_step| <= max|V|; the steps'
 *                               weights sum to 1)
 *   dQ, dK, dV: + u * max M    (the steps' parts of an element split the terms
 *                               behind it, so sum |part| <= M, the sum of the
 *                               terms' absolute values: reference.h)
 * LSE is fp32 from fp32 parts: the rule with u = 2^-24.  An indexing,
 * masking or merge error is orders of magnitude above these.  Against the
 * single-device call: both are within their tolerance of the float64
 * result, so they differ by at most twice the ring's.  With one rank the
 * calls are the plain ones: bitwise equal. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "dist/dist_internal.h" /* dist_debug_set_bounds, _trace, dist_upload_piece_asked */
#include "flashcl_mpi.h"
#include "reference.h"
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <unistd.h>
#endif

static int g_rank, g_size, g_checks, g_failures;

/* The tensors of the calls, in the backward's argument order. */
enum { DEV_Q, DEV_K, DEV_V, DEV_O, DEV_LSE, DEV_DOUT, DEV_DQ, DEV_DK, DEV_DV, DEV_TENSORS };
static fcl_mpi *g_m;

#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        ++g_checks;                                                         \
        if (!(cond)) {                                                      \
            ++g_failures;                                                   \
            fprintf(stderr, "rank %d/%d: FAIL %s:%d: ", g_rank, g_size, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
        }                                                                   \
    } while (0)

typedef struct mcase {
    size_t batch, heads_q, heads_kv, seqlen, head_dim;
    fcl_dtype dtype;
    int causal;
    fcl_mpi_sharding sharding;
    fcl_layout_kind layout;
    float scale;
    uint64_t seed;
} mcase;

/* The whole problem, as doubles (batch, heads, seq, dim), and its references. */
typedef struct problem {
    mcase c;
    ref_problem p;
    size_t nq, nk; /* elements of Q-side and K-side tensors */
    double *q, *k, *v, *dout;
    double *o, *lse, *dq, *dk, *dv;           /* float64 */
    double *o_lp, *lse_lp, *dq_lp, *dk_lp, *dv_lp; /* low precision */
    double *mq, *mk, *mv;                     /* magnitudes M */
} problem;

static double *alloc_d(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static void fill(rng *r, double *x, size_t n, fcl_dtype dt)
{
    for (size_t i = 0; i < n; ++i)
        x[i] = round_to_dtype(rng_normal(r), dt);
}

static void problem_make(problem *pb, const mcase *c)
{
    memset(pb, 0, sizeof *pb);
    pb->c = *c;
    const size_t n = c->seqlen;
    pb->p = (ref_problem){c->batch, c->heads_q, c->heads_kv, n, n, c->head_dim,
                          c->scale > 0 ? c->scale : 1.0 / sqrt((double)c->head_dim), c->causal,
                          c->dtype, NULL, 0};
    pb->nq = c->batch * c->heads_q * n * c->head_dim;
    pb->nk = c->batch * c->heads_kv * n * c->head_dim;
    const size_t rows = c->batch * c->heads_q * n;
    double **q_side[] = {&pb->q, &pb->dout, &pb->o, &pb->dq, &pb->o_lp, &pb->dq_lp, &pb->mq};
    double **k_side[] = {&pb->k, &pb->v, &pb->dk, &pb->dv, &pb->dk_lp, &pb->dv_lp, &pb->mk, &pb->mv};
    for (size_t i = 0; i < sizeof q_side / sizeof q_side[0]; ++i)
        *q_side[i] = alloc_d(pb->nq);
    for (size_t i = 0; i < sizeof k_side / sizeof k_side[0]; ++i)
        *k_side[i] = alloc_d(pb->nk);
    pb->lse = alloc_d(rows);
    pb->lse_lp = alloc_d(rows);
    rng r = {c->seed};
    fill(&r, pb->q, pb->nq, c->dtype);
    fill(&r, pb->k, pb->nk, c->dtype);
    fill(&r, pb->v, pb->nk, c->dtype);
    fill(&r, pb->dout, pb->nq, c->dtype);
    ref_forward_f64(&pb->p, pb->q, pb->k, pb->v, pb->o, pb->lse);
    ref_forward_lowp(&pb->p, pb->q, pb->k, pb->v, pb->o_lp, pb->lse_lp);
    ref_backward_f64(&pb->p, pb->q, pb->k, pb->v, pb->dout, pb->dq, pb->dk, pb->dv);
    ref_backward_lowp(&pb->p, pb->q, pb->k, pb->v, pb->dout, pb->dq_lp, pb->dk_lp, pb->dv_lp);
    ref_backward_magnitudes(&pb->p, pb->q, pb->k, pb->v, pb->dout, pb->mq, pb->mk, pb->mv);
}

static void problem_free(problem *pb)
{
    double *all[] = {pb->q, pb->k, pb->v, pb->dout, pb->o, pb->lse, pb->dq, pb->dk, pb->dv,
                     pb->o_lp, pb->lse_lp, pb->dq_lp, pb->dk_lp, pb->dv_lp, pb->mq, pb->mk, pb->mv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
}

/* Element (b, h, s, c) of a contiguous tensor of `rows` rows in `layout`. */
static size_t at(fcl_layout_kind layout, size_t heads, size_t rows, size_t d, size_t b, size_t h,
                 size_t s, size_t c)
{
    return layout == FCL_LAYOUT_BSHD ? ((b * rows + s) * heads + h) * d + c
                                     : ((b * heads + h) * rows + s) * d + c;
}

/* Global position of local row t. */
static size_t position(const fcl_mpi_shard *sh, size_t t)
{
    return t < sh->len[0] ? sh->start[0] + t : sh->start[1] + (t - sh->len[0]);
}

/* A (b, h, seq, d) double tensor's rows `rows` (local, or all with sh = NULL)
 * as storage bytes in `layout`. */
static void *pack(const problem *pb, const double *x, size_t heads, const fcl_mpi_shard *sh)
{
    const mcase *c = &pb->c;
    const size_t rows = sh != NULL ? sh->rows : c->seqlen, es = fcl_dtype_size(c->dtype);
    unsigned char *out = malloc(c->batch * heads * rows * c->head_dim * es + 1);
    for (size_t b = 0; b < c->batch; ++b)
        for (size_t h = 0; h < heads; ++h)
            for (size_t t = 0; t < rows; ++t)
                for (size_t e = 0; e < c->head_dim; ++e) {
                    const size_t g = sh != NULL ? position(sh, t) : t;
                    fa_put_value(out + at(c->layout, heads, rows, c->head_dim, b, h, t, e) * es,
                                 c->dtype,
                                 x[((b * heads + h) * c->seqlen + g) * c->head_dim + e]);
                }
    return out;
}

/* Value of local element (b, h, t, e) of a storage tensor of `rows` rows. */
static double local_value(const problem *pb, const void *x, size_t heads, size_t rows, size_t b,
                          size_t h, size_t t, size_t e)
{
    const size_t es = fcl_dtype_size(pb->c.dtype);
    return fa_get_value((const unsigned char *)x +
                            at(pb->c.layout, heads, rows, pb->c.head_dim, b, h, t, e) * es,
                        pb->c.dtype);
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; ++i)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* The rule at the top on this rank's rows of one tensor.  ours: storage
 * tensor (or fp32 LSE when lse != 0); other: the single-device result in
 * the same form (NULL: none). */
static void check_tensor(const char *name, const problem *pb, const fcl_mpi_shard *sh,
                         size_t heads, const void *ours, const void *other, const double *ref,
                         const double *lowp, const double *magnitude, int is_lse, double factor,
                         double extra, size_t sum_terms)
{
    const mcase *c = &pb->c;
    const size_t d = is_lse ? 1 : c->head_dim;
    double err = 0, err_lp = 0, max_ref = 0, max_m = 0, diff_other = 0;
    int bad = 0;
    for (size_t b = 0; b < c->batch; ++b)
        for (size_t h = 0; h < heads; ++h)
            for (size_t t = 0; t < sh->rows; ++t)
                for (size_t e = 0; e < d; ++e) {
                    const size_t g = ((b * heads + h) * c->seqlen + position(sh, t)) * d + e;
                    double x, y = 0;
                    if (is_lse) {
                        x = ((const float *)ours)[(b * heads + h) * sh->rows + t];
                        if (other)
                            y = ((const float *)other)[(b * heads + h) * c->seqlen + position(sh, t)];
                    } else {
                        x = local_value(pb, ours, heads, sh->rows, b, h, t, e);
                        if (other)
                            y = local_value(pb, other, heads, c->seqlen, b, h, position(sh, t), e);
                    }
                    if (!isfinite(x) && isfinite(ref[g]))
                        bad = 1;
                    err = fmax(err, fabs(x - ref[g]));
                    err_lp = fmax(err_lp, fabs(lowp[g] - ref[g]));
                    max_ref = fmax(max_ref, fabs(ref[g]));
                    if (magnitude)
                        max_m = fmax(max_m, magnitude[g]);
                    if (other)
                        diff_other = fmax(diff_other, fabs(x - y));
                }
    const double u = unit_roundoff(is_lse ? FCL_DTYPE_FP32 : c->dtype), u32 = ldexp(1.0, -24);
    const double tol = factor * err_lp + u * max_ref +
                       u32 * sqrt((double)sum_terms) * fmax(max_ref, max_m) + extra;
    EXPECT(!bad && err <= tol, "%s: error %.3g > tolerance %.3g (low-precision reference %.3g)",
           name, err, tol, err_lp);
    if (other) {
        if (g_size == 1)
            EXPECT(diff_other == 0, "%s: one rank differs from the plain call by %.3g", name,
                   diff_other);
        else
            EXPECT(diff_other <= 2 * tol, "%s: differs from the single-device call by %.3g > %.3g",
                   name, diff_other, 2 * tol);
    }
}

/* The rule at the top for one rank's five results (indexed DEV_O ..
 * DEV_DV), against float64 and the single-device call's. */
static void check_results(const problem *pb, const fcl_mpi_shard *sh, const char *what,
                          void *const res[DEV_TENSORS], void *const single[DEV_TENSORS])
{
    const mcase *c = &pb->c;
    char name[256];
    const size_t fw_terms = c->head_dim + c->seqlen, bw_terms = c->head_dim + c->seqlen;
    const double uv = unit_roundoff(c->dtype) * max_abs(pb->v, pb->nk);
    const double um = unit_roundoff(c->dtype) *
                      fmax(max_abs(pb->mq, pb->nq), fmax(max_abs(pb->mk, pb->nk), max_abs(pb->mv, pb->nk)));
    snprintf(name, sizeof name, "%s O", what);
    check_tensor(name, pb, sh, c->heads_q, res[DEV_O], single[DEV_O], pb->o, pb->o_lp, NULL, 0, 2,
                 uv, fw_terms);
    snprintf(name, sizeof name, "%s LSE", what);
    check_tensor(name, pb, sh, c->heads_q, res[DEV_LSE], single[DEV_LSE], pb->lse, pb->lse_lp,
                 NULL, 1, 2, 0, fw_terms);
    snprintf(name, sizeof name, "%s dQ", what);
    check_tensor(name, pb, sh, c->heads_q, res[DEV_DQ], single[DEV_DQ], pb->dq, pb->dq_lp, pb->mq,
                 0, 3, um, bw_terms);
    snprintf(name, sizeof name, "%s dK", what);
    check_tensor(name, pb, sh, c->heads_kv, res[DEV_DK], single[DEV_DK], pb->dk, pb->dk_lp, pb->mk,
                 0, 3, um, bw_terms);
    snprintf(name, sizeof name, "%s dV", what);
    check_tensor(name, pb, sh, c->heads_kv, res[DEV_DV], single[DEV_DV], pb->dv, pb->dv_lp, pb->mv,
                 0, 3, um, bw_terms);
}

static void describe(const mcase *c, char *buf, size_t n)
{
    snprintf(buf, n, "B%zu Hq%zu Hkv%zu N%zu d%zu %s%s %s %s", c->batch, c->heads_q, c->heads_kv,
             c->seqlen, c->head_dim, fcl_dtype_name(c->dtype), c->causal ? " causal" : "",
             c->sharding == FCL_MPI_SHARD_ZIGZAG ? "zigzag" : "contiguous",
             c->layout == FCL_LAYOUT_BSHD ? "bshd" : "bhsd");
}

/* ---- the cl_mem form -------------------------------------------------------- */

enum { SENTINEL = 0x5A };

static cl_context g_cl;
static cl_command_queue g_queue;

/* A buffer of the handle's context: `init`'s bytes, or SENTINEL bytes. */
static cl_mem make_buffer(size_t bytes, const void *init)
{
    cl_int err = CL_SUCCESS;
    unsigned char *fill = NULL;
    if (init == NULL) {
        fill = malloc(bytes);
        memset(fill, SENTINEL, bytes);
    }
    cl_mem b = clCreateBuffer(g_cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                              (void *)(init != NULL ? init : fill), &err);
    free(fill);
    EXPECT(err == CL_SUCCESS, "clCreateBuffer of %zu bytes: %d", bytes, err);
    return b;
}

/* One buffer holding several tensors, each at an offset of its own type's
 * elements, 48 bytes of gap or more before each (the calls must not touch
 * them). */
typedef struct packed_buffer {
    cl_mem mem;
    size_t bytes;
    size_t at[DEV_TENSORS]; /* byte positions */
} packed_buffer;

/* t at the first multiple of unit elements 48 bytes or more past the last */
static void pack_place(packed_buffer *pb, int t, size_t bytes, size_t elem, size_t unit)
{
    const size_t step = elem * unit;
    pb->at[t] = (pb->bytes + 48 + step - 1) / step * step;
    pb->bytes = pb->at[t] + bytes;
}

static fcl_mpi_tensor tensor_at(const packed_buffer *pb, int t, size_t elem)
{
    return (fcl_mpi_tensor){pb->mem, pb->at[t] / elem};
}

static int read_untouched_gaps(const packed_buffer *pb, const unsigned char *bytes, const size_t *len)
{
    /* every byte outside the placed tensors still holds SENTINEL */
    for (size_t i = 0; i < pb->bytes; ++i) {
        int inside = 0;
        for (int t = 0; t < DEV_TENSORS && !inside; ++t)
            inside = len[t] > 0 && i >= pb->at[t] && i < pb->at[t] + len[t];
        if (!inside && bytes[i] != SENTINEL)
            return 0;
    }
    return 1;
}

/* The host form's results of one case, and what the cl_mem form must match. */
typedef struct shard_io {
    const void *in[DEV_TENSORS];  /* q k v o lse dout (host arrays) */
    void *out[DEV_TENSORS];       /* the cl_mem form's o lse dq dk dv, read back */
    size_t bytes[DEV_TENSORS];
    int aligned;                  /* tensors at multiples of 8 elements, else odd offsets */
    int same_pieces;              /* set: the offsets leave every call on the pieces the
                                     host form's own buffers (offset 0) get */
} shard_io;

/* Whether the single-device calls plan the same pieces for this rank's
 * shard at the offsets of t as at offset 0 (flashcl.h, fcl_layout: the
 * tensor-core pieces take rows at multiples of 8 elements only). */
static int same_pieces(const fcl_mpi_desc *d, const fcl_mpi_tensor *t)
{
    fcl_mpi_shard sh;
    if (fcl_mpi_shard_of(d, g_rank, g_size, &sh) != FCL_OK)
        return 0;
    fcl_attention_desc a;
    fcl_attention_desc_init(&a, d->batch, d->heads_q, d->heads_kv, sh.rows, sh.rows, d->head_dim,
                            d->dtype, d->layout);
    a.causal = d->causal;
    fcl_attention_desc at = a;
    at.q.offset = t[DEV_Q].offset;
    at.k.offset = t[DEV_K].offset;
    at.v.offset = t[DEV_V].offset;
    at.o.offset = t[DEV_O].offset;
    at.dout.offset = t[DEV_DOUT].offset;
    const fcl_kernel_kind kinds[] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DQ,
                                     FCL_KERNEL_BACKWARD_DKDV};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
        fcl_plan p0, p1;
        if (fcl_plan_query(fcl_mpi_context(g_m), &a, kinds[i], &p0) != FCL_OK ||
            fcl_plan_query(fcl_mpi_context(g_m), &at, kinds[i], &p1) != FCL_OK ||
            strcmp(p0.variant, p1.variant) != 0)
            return 0;
    }
    return 1;
}

/* Forward and backward of the cl_mem form: inputs in one buffer (they may
 * share one), outputs in another, at odd offsets or at multiples of 8
 * elements (io->aligned); the inputs' upload is the
 * forward's wait list, the forward's event the backward's.  The outputs
 * come back in io->out; every other byte of the output buffer untouched. */
static fcl_status run_device(const fcl_mpi_desc *d, shard_io *io, const char *what)
{
    const size_t es = fcl_dtype_size(d->dtype);
    const int in_t[] = {DEV_Q, DEV_K, DEV_V, DEV_O, DEV_LSE, DEV_DOUT};
    const int out_t[] = {DEV_O, DEV_LSE, DEV_DQ, DEV_DK, DEV_DV};
    /* odd first offsets, or multiples of 8 elements */
    packed_buffer in = {NULL, (io->aligned ? 8 : 3) * es, {0}},
                  out = {NULL, (io->aligned ? 16 : 5) * es, {0}};
    const size_t unit = io->aligned ? 8 : 1; /* elements */
    size_t out_len[DEV_TENSORS] = {0};
    for (size_t i = 0; i < sizeof in_t / sizeof in_t[0]; ++i)
        pack_place(&in, in_t[i], io->bytes[in_t[i]], in_t[i] == DEV_LSE ? sizeof(float) : es,
                   unit);
    for (size_t i = 0; i < sizeof out_t / sizeof out_t[0]; ++i) {
        pack_place(&out, out_t[i], io->bytes[out_t[i]], out_t[i] == DEV_LSE ? sizeof(float) : es,
                   unit);
        out_len[out_t[i]] = io->bytes[out_t[i]];
    }
    unsigned char *host_in = calloc(in.bytes, 1), *host_out = malloc(out.bytes);
    for (size_t i = 0; i < sizeof in_t / sizeof in_t[0]; ++i)
        memcpy(host_in + in.at[in_t[i]], io->in[in_t[i]], io->bytes[in_t[i]]);
    in.mem = make_buffer(in.bytes, NULL);
    out.mem = make_buffer(out.bytes, NULL);
    cl_event uploaded = NULL, fw = NULL, bw = NULL;
    fcl_status st = clEnqueueWriteBuffer(g_queue, in.mem, CL_FALSE, 0, in.bytes, host_in, 0, NULL,
                                         &uploaded);
    fcl_mpi_tensor t[DEV_TENSORS];
    for (int i = 0; i < DEV_TENSORS; ++i)
        t[i] = tensor_at(&in, i, i == DEV_LSE ? sizeof(float) : es);
    const fcl_mpi_tensor lse_out = tensor_at(&out, DEV_LSE, sizeof(float));
    io->same_pieces = same_pieces(d, t);
    if (st == FCL_OK)
        st = fcl_mpi_attention_forward(g_m, d, t[DEV_Q], t[DEV_K], t[DEV_V],
                                       tensor_at(&out, DEV_O, es), lse_out, 1, &uploaded, &fw);
    EXPECT(st == FCL_OK && fw != NULL, "%s: cl_mem forward: %s", what, fcl_status_string(st));
    /* the backward reads the host form's O and LSE (in `in`), after the forward */
    if (st == FCL_OK)
        st = fcl_mpi_attention_backward(g_m, d, t[DEV_Q], t[DEV_K], t[DEV_V], t[DEV_O], t[DEV_LSE],
                                        t[DEV_DOUT], tensor_at(&out, DEV_DQ, es),
                                        tensor_at(&out, DEV_DK, es), tensor_at(&out, DEV_DV, es),
                                        1, &fw, &bw);
    EXPECT(st == FCL_OK && bw != NULL, "%s: cl_mem backward: %s", what, fcl_status_string(st));
    if (st == FCL_OK)
        st = clEnqueueReadBuffer(g_queue, out.mem, CL_FALSE, 0, out.bytes, host_out, 1, &bw, NULL);
    if (st == FCL_OK)
        st = clFinish(g_queue);
    cl_int ev_status = CL_QUEUED;
    if (st == FCL_OK)
        st = clGetEventInfo(bw, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof ev_status, &ev_status,
                            NULL);
    EXPECT(st == FCL_OK && ev_status == CL_COMPLETE, "%s: cl_mem read-back: %d, event %d", what,
           st, ev_status);
    if (st == FCL_OK) {
        EXPECT(read_untouched_gaps(&out, host_out, out_len),
               "%s: the cl_mem form wrote outside its outputs", what);
        for (size_t i = 0; i < sizeof out_t / sizeof out_t[0]; ++i)
            memcpy(io->out[out_t[i]], host_out + out.at[out_t[i]], io->bytes[out_t[i]]);
    }
    cl_event evs[] = {uploaded, fw, bw};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; ++i)
        if (evs[i] != NULL)
            clReleaseEvent(evs[i]);
    clReleaseMemObject(in.mem);
    clReleaseMemObject(out.mem);
    free(host_in);
    free(host_out);
    return st;
}

/* Forward and backward of one case on every rank, checked against the
 * references and the single-device call; run twice when `repeat`, bitwise. */
static void run_case(const mcase *c, int repeat)
{
    char what[128], name[192];
    describe(c, what, sizeof what);
    problem pb;
    problem_make(&pb, c);
    fcl_mpi_desc d;
    fcl_mpi_desc_init(&d, c->batch, c->heads_q, c->heads_kv, c->seqlen, c->head_dim, c->dtype,
                      c->layout);
    d.causal = c->causal;
    d.sharding = c->sharding;
    d.softmax_scale = c->scale;
    fcl_mpi_shard sh;
    EXPECT(fcl_mpi_shard_of(&d, g_rank, g_size, &sh) == FCL_OK, "%s: shard", what);
    const size_t es = fcl_dtype_size(c->dtype);
    const size_t lq = c->batch * c->heads_q * sh.rows * c->head_dim;
    const size_t lk = c->batch * c->heads_kv * sh.rows * c->head_dim;
    const size_t lrows = c->batch * c->heads_q * sh.rows;
    void *q = pack(&pb, pb.q, c->heads_q, &sh), *k = pack(&pb, pb.k, c->heads_kv, &sh);
    void *v = pack(&pb, pb.v, c->heads_kv, &sh), *dout = pack(&pb, pb.dout, c->heads_q, &sh);
    void *o = malloc(lq * es), *dq = malloc(lq * es), *dk = malloc(lk * es), *dv = malloc(lk * es);
    float *lse = malloc(lrows * sizeof(float));
    fcl_status st = fcl_mpi_attention_forward_host(g_m, &d, q, k, v, o, lse);
    EXPECT(st == FCL_OK, "%s: forward: %s", what, fcl_status_string(st));
    if (st == FCL_OK) {
        st = fcl_mpi_attention_backward_host(g_m, &d, q, k, v, o, lse, dout, dq, dk, dv);
        EXPECT(st == FCL_OK, "%s: backward: %s", what, fcl_status_string(st));
    }
    /* the single-device call on this rank's device */
    fcl_attention_desc plain;
    fcl_attention_desc_init(&plain, c->batch, c->heads_q, c->heads_kv, c->seqlen, c->seqlen,
                            c->head_dim, c->dtype, c->layout);
    plain.causal = c->causal;
    plain.softmax_scale = c->scale;
    void *gq = pack(&pb, pb.q, c->heads_q, NULL), *gk = pack(&pb, pb.k, c->heads_kv, NULL);
    void *gv = pack(&pb, pb.v, c->heads_kv, NULL), *gdout = pack(&pb, pb.dout, c->heads_q, NULL);
    void *go = malloc(pb.nq * es), *gdq = malloc(pb.nq * es), *gdk = malloc(pb.nk * es),
         *gdv = malloc(pb.nk * es);
    float *glse = malloc(c->batch * c->heads_q * c->seqlen * sizeof(float));
    fcl_context *ctx = fcl_mpi_context(g_m);
    fcl_status sp = fcl_attention_forward_host(ctx, &plain, gq, gk, gv, go, glse);
    if (sp == FCL_OK)
        sp = fcl_attention_backward_host(ctx, &plain, gq, gk, gv, go, glse, gdout, gdq, gdk, gdv);
    EXPECT(sp == FCL_OK, "%s: single-device call: %s %s", what, fcl_status_string(sp),
           sp == FCL_ERROR_BUILD_FAILED ? fcl_context_build_log(ctx) : "");
    void *const single[DEV_TENSORS] = {[DEV_O] = go, [DEV_LSE] = glse, [DEV_DQ] = gdq,
                                       [DEV_DK] = gdk, [DEV_DV] = gdv};
    void *const host[DEV_TENSORS] = {[DEV_O] = o, [DEV_LSE] = lse, [DEV_DQ] = dq, [DEV_DK] = dk,
                                     [DEV_DV] = dv};
    if (st == FCL_OK && sp == FCL_OK)
        check_results(&pb, &sh, what, host, single);
    if (st == FCL_OK) {
        /* the cl_mem form on the same inputs: bitwise the host form's where
         * its offsets leave the calls on the same pieces (always at
         * multiples of 8 elements, which every other case takes), else
         * within the tolerances against float64 and the single-device call */
        const size_t q_bytes = lq * es, k_bytes = lk * es;
        shard_io io = {{q, k, v, o, lse, dout},
                       {NULL},
                       {q_bytes, k_bytes, k_bytes, q_bytes, lrows * sizeof(float), q_bytes,
                        q_bytes, k_bytes, k_bytes},
                       c->seed % 2 == 1,
                       0};
        const int outs[] = {DEV_O, DEV_LSE, DEV_DQ, DEV_DK, DEV_DV};
        for (size_t i = 0; i < sizeof outs / sizeof outs[0]; ++i)
            io.out[outs[i]] = malloc(io.bytes[outs[i]]);
        if (run_device(&d, &io, what) == FCL_OK) {
            EXPECT(io.same_pieces || !io.aligned,
                   "%s: offsets at multiples of 8 elements change the pieces", what);
            for (size_t i = 0; io.same_pieces && i < sizeof outs / sizeof outs[0]; ++i)
                EXPECT(memcmp(io.out[outs[i]], host[outs[i]], io.bytes[outs[i]]) == 0,
                       "%s: the cl_mem form's output %d differs from the host form's", what,
                       outs[i]);
            snprintf(name, sizeof name, "%s cl_mem%s", what,
                     io.same_pieces ? "" : " (offsets of other pieces)");
            if (sp == FCL_OK)
                check_results(&pb, &sh, name, io.out, single);
        }
        for (size_t i = 0; i < sizeof outs / sizeof outs[0]; ++i)
            free(io.out[outs[i]]);
    }
    if (repeat && st == FCL_OK) {
        /* bitwise the same on a second run, made with the handle's bounds
         * on one command (dist_internal.h) small enough that the ring's
         * launches loop over their rows (5 a launch) and its fills come in
         * pieces (3 floats), as they do past 65536 rows or 1 GiB */
        void *o2 = malloc(lq * es), *dq2 = malloc(lq * es), *dk2 = malloc(lk * es),
             *dv2 = malloc(lk * es);
        float *lse2 = malloc(lrows * sizeof(float));
        dist_debug_set_bounds(g_m, 5, 3 * sizeof(float));
        st = fcl_mpi_attention_forward_host(g_m, &d, q, k, v, o2, lse2);
        if (st == FCL_OK)
            st = fcl_mpi_attention_backward_host(g_m, &d, q, k, v, o, lse, dout, dq2, dk2, dv2);
        dist_debug_set_bounds(g_m, DIST_LAUNCH_ROWS, DIST_COMMAND_BYTES);
        EXPECT(st == FCL_OK && memcmp(o, o2, lq * es) == 0 &&
                   memcmp(lse, lse2, lrows * sizeof(float)) == 0 && memcmp(dq, dq2, lq * es) == 0 &&
                   memcmp(dk, dk2, lk * es) == 0 && memcmp(dv, dv2, lk * es) == 0,
               "%s: a second run, its launches and fills cut short, is not bitwise the same (%s)",
               what, fcl_status_string(st));
        free(o2), free(dq2), free(dk2), free(dv2), free(lse2);
    }
    void *all[] = {q, k, v, dout, o, dq, dk, dv, lse, gq, gk, gv, gdout, go, gdq, gdk, gdv, glse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
    problem_free(&pb);
}

/* ---- the device's timeline (fcl_mpi_timing's device fields) ---------------- */

/* The last call's device fields on handle h: zeros without profiling or
 * with one rank; else the steps' device work is there, and it and the gaps
 * between steps lie within the ring's wall-clock time (the device's clock
 * and the host's may differ a little: 5% and a millisecond allowed). */
static void check_device_timing(fcl_mpi *h, int profiling, const char *what)
{
    fcl_mpi_timing t;
    EXPECT(fcl_mpi_last_timing(h, &t) == FCL_OK, "%s: last timing", what);
    if (!profiling || g_size == 1) {
        EXPECT(t.device_seconds == 0 && t.device_gap_seconds == 0,
               "%s: device fields %g and %g without a timeline", what, t.device_seconds,
               t.device_gap_seconds);
        return;
    }
    const double bound = 1.05 * t.ring_seconds + 1e-3;
    EXPECT(t.device_seconds > 0 && t.device_gap_seconds >= 0 &&
               t.device_seconds + t.device_gap_seconds <= bound,
           "%s: device work %g s and gaps %g s against a ring of %g s", what, t.device_seconds,
           t.device_gap_seconds, t.ring_seconds);
}

/* The last call's copy and last-hop fields on handle h for descriptor d:
 * with the ranks' own copies this rank read every message of the call,
 * exactly these bytes (the ring's rules, flashcl_mpi.h: each other rank's
 * K/V shard; the backward also R - 1 fp32 dK/dV sums of the longest shard
 * and its own dK/dV home in the storage type), and nothing without them;
 * the backward's last hop is part of its wait, the forward has none. */
static void check_copy_timing(fcl_mpi *h, const fcl_mpi_desc *d, int backward, const char *what)
{
    fcl_mpi_timing t;
    EXPECT(fcl_mpi_last_timing(h, &t) == FCL_OK, "%s: last timing", what);
    const size_t per_row = d->batch * d->heads_kv * d->head_dim, elem = fcl_dtype_size(d->dtype);
    size_t expect = 0, longest = 0, own = 0;
    for (int r = 0; r < g_size; ++r) {
        fcl_mpi_shard sh;
        EXPECT(fcl_mpi_shard_of(d, r, g_size, &sh) == FCL_OK, "%s: shard %d", what, r);
        longest = sh.rows > longest ? sh.rows : longest;
        if (r != g_rank)
            expect += 2 * sh.rows * per_row * elem;
        else
            own = sh.rows;
    }
    if (backward && g_size > 1)
        expect += (size_t)(g_size - 1) * 2 * longest * per_row * sizeof(float) +
                  2 * own * per_row * elem;
    if (fcl_mpi_copy_threads(h) == 0 || g_size == 1)
        expect = 0;
    EXPECT(t.copy_bytes == expect && (expect > 0 ? t.copy_seconds > 0 : t.copy_seconds == 0) &&
               t.copy_seconds <= t.total_seconds,
           "%s: own copies read %zu bytes in %g s (expected %zu bytes, call %g s)", what,
           t.copy_bytes, t.copy_seconds, expect, t.total_seconds);
    EXPECT(backward && g_size > 1 ? t.home_seconds > 0 && t.home_seconds <= t.wait_seconds
                                  : t.home_seconds == 0,
           "%s: last hop %g s, wait %g s", what, t.home_seconds, t.wait_seconds);
}

/* The last call's host timeline (dist_debug_trace): in time order, within
 * the call, ending with the call's end; with more than one rank every
 * step has its "device done", and the backward's last hop ends "home". */
static void check_trace(fcl_mpi *h, int backward, const char *what)
{
    const dist_mark *marks = NULL;
    const int n = dist_debug_trace(h, &marks);
    fcl_mpi_timing t;
    EXPECT(fcl_mpi_last_timing(h, &t) == FCL_OK, "%s: last timing", what);
    int ordered = n > 0, done = 0, home = 0, streamed = 0;
    for (int i = 0; i < n; ++i) {
        ordered &= marks[i].at >= (i > 0 ? marks[i - 1].at : 0) && marks[i].at <= t.total_seconds;
        done += strcmp(marks[i].what, "device done") == 0;
        home += strcmp(marks[i].what, "home") == 0 && marks[i].step == g_size;
        streamed += strcmp(marks[i].what, "upload streamed") == 0;
    }
    EXPECT(ordered && strcmp(marks[n - 1].what, "call done") == 0,
           "%s: %d marks out of order or not ending the call", what, n);
    if (g_size > 1)
        EXPECT(done == g_size && home == backward, "%s: %d steps done, %d last hops in the trace",
               what, done, home);
    /* with FLASHCL_MPI_UPLOAD_PIECE and the ranks' own copies, every
     * uploaded message goes up as it is read: the next shard at each step
     * but the last, and in the backward the dK/dV sum that came with it
     * from step 1 on; else none */
    const int pieces = dist_upload_piece_asked() > 0 && fcl_mpi_copy_threads(h) > 0;
    const int want = pieces ? (g_size - 1) * (backward ? 2 : 1) : 0;
    EXPECT(streamed == want, "%s: %d uploads streamed, %d expected", what, streamed, want);
}

/* A forward and a backward on a handle whose context records profiling,
 * and one on g_m, which does not. */
static void timeline_checks(void)
{
    fcl_mpi_desc d;
    fcl_mpi_desc_init(&d, 1, 2, 2, 64, 32, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.causal = 1;
    d.sharding = FCL_MPI_SHARD_ZIGZAG;
    fcl_mpi_shard sh;
    EXPECT(fcl_mpi_shard_of(&d, g_rank, g_size, &sh) == FCL_OK, "timeline: shard");
    const size_t n = sh.rows * 2 * 32;
    float *a[8];
    rng r = {77u + (uint64_t)g_rank};
    for (int i = 0; i < 8; ++i) {
        a[i] = malloc(n * sizeof(float));
        for (size_t e = 0; e < n; ++e)
            a[i][e] = (float)rng_normal(&r);
    }
    float *lse = malloc(sh.rows * 2 * sizeof(float));
    fcl_context_options po;
    fcl_context_options_init(&po);
    po.enable_profiling = 1;
    fcl_mpi *prof = NULL;
    fcl_status st = fcl_mpi_create(MPI_COMM_WORLD, NULL, &po, &prof);
    EXPECT(st == FCL_OK, "timeline: a handle with profiling: %s", fcl_status_string(st));
    fcl_mpi *handles[2] = {prof, g_m};
    for (int h = 0; h < 2 && st == FCL_OK; ++h) {
        const char *what = h == 0 ? "timeline, profiling" : "timeline, no profiling";
        st = fcl_mpi_attention_forward_host(handles[h], &d, a[0], a[1], a[2], a[3], lse);
        EXPECT(st == FCL_OK, "%s: forward: %s", what, fcl_status_string(st));
        if (st == FCL_OK) {
            check_device_timing(handles[h], h == 0, what);
            check_copy_timing(handles[h], &d, 0, what);
            check_trace(handles[h], 0, what);
        }
        if (st == FCL_OK)
            st = fcl_mpi_attention_backward_host(handles[h], &d, a[0], a[1], a[2], a[3], lse,
                                                 a[4], a[5], a[6], a[7]);
        EXPECT(st == FCL_OK, "%s: backward: %s", what, fcl_status_string(st));
        if (st == FCL_OK) {
            check_device_timing(handles[h], h == 0, what);
            check_copy_timing(handles[h], &d, 1, what);
            check_trace(handles[h], 1, what);
        }
    }
    fcl_mpi_destroy(prof);
    for (int i = 0; i < 8; ++i)
        free(a[i]);
    free(lse);
}

/* ---- the collective errors ------------------------------------------------ */

static int untouched(const void *p, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (((const unsigned char *)p)[i] != SENTINEL)
            return 0;
    return 1;
}

/* `change` alters rank `who`'s descriptor or arrays (who = -1: every
 * rank); every rank must return `want` and leave its outputs alone. */
typedef struct bad_call {
    const char *what;
    int who;
    int backward;
    fcl_status want;
    void (*change)(fcl_mpi_desc *d, const void **q, const float **lse);
} bad_call;

static void longer(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->seqlen++; }
static void no_q(fcl_mpi_desc *d, const void **q, const float **lse) { (void)d, (void)lse, *q = NULL; }
static void no_lse(fcl_mpi_desc *d, const void **q, const float **lse) { (void)d, (void)q, *lse = NULL; }
static void fp16(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->dtype = FCL_DTYPE_FP16; }
static void causal(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->causal = 1; }
static void head_dim_300(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->head_dim = 300; }
static void heads_3_2(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->heads_q = 3, d->heads_kv = 2; }
static void too_short(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->seqlen = 2 * (size_t)g_size - 1; }
static void bad_flag(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->causal = 2; }
static void bad_dtype(fcl_mpi_desc *d, const void **q, const float **lse) { (void)q, (void)lse, d->dtype = (fcl_dtype)7; }

static void run_bad_call(const bad_call *bc)
{
    fcl_mpi_desc d;
    fcl_mpi_desc_init(&d, 1, 2, 2, 24, 32, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.sharding = FCL_MPI_SHARD_ZIGZAG;
    const size_t big = 1 << 16; /* larger than any shard here */
    float *in = calloc(big, sizeof(float));
    unsigned char *out[4];
    for (int i = 0; i < 4; ++i) {
        out[i] = malloc(big);
        memset(out[i], SENTINEL, big);
    }
    for (size_t i = 0; i < big; ++i)
        in[i] = (float)((i * 37 % 101) / 101.0 - 0.5); /* any finite values */
    const void *q = in;
    const float *lse = in;
    if (bc->who < 0 || bc->who == g_rank % g_size)
        bc->change(&d, &q, &lse);
    fcl_status st = bc->backward
                        ? fcl_mpi_attention_backward_host(g_m, &d, q, in, in, in, lse, in, out[0],
                                                          out[1], out[2])
                        : fcl_mpi_attention_forward_host(g_m, &d, q, in, in, out[0], (float *)out[1]);
    EXPECT(st == bc->want, "%s: %s, want %s", bc->what, fcl_status_string(st),
           fcl_status_string(bc->want));
    for (int i = 0; i < 4; ++i)
        EXPECT(untouched(out[i], big), "%s: output %d written on error", bc->what, i);
    free(in);
    for (int i = 0; i < 4; ++i)
        free(out[i]);
}

/* ---- the cl_mem form's bad calls --------------------------------------------- */

/* One cl_mem call's arguments, and buffers a change may point them at. */
typedef struct dev_call {
    fcl_mpi_desc d;
    fcl_mpi_tensor t[DEV_TENSORS];
    cl_uint num_wait;
    const cl_event *wait_list;
    cl_mem small;                 /* 16 bytes */
    cl_mem foreign;               /* of another cl_context on the same device */
    cl_mem in, out, out_tail;     /* inputs; outputs (sentinel); out from float OUT_GAP on */
} dev_call;

/* Where the outputs go in `out`: O, LSE or dQ, dK, dV 16 KiB apart. */
enum { OUT_GAP = 16384 };

typedef struct bad_dev_call {
    const char *what;
    int who;
    int backward;
    fcl_status want;
    void (*change)(dev_call *c);
} bad_dev_call;

static void dev_longer(dev_call *c) { c->d.seqlen++; }
static void dev_small_q(dev_call *c) { c->t[DEV_Q].mem = c->small; }
static void dev_far_k(dev_call *c) { c->t[DEV_K].offset = SIZE_MAX - 3; }
static void dev_foreign_v(dev_call *c) { c->t[DEV_V].mem = c->foreign; }
static void dev_no_q(dev_call *c) { c->t[DEV_Q].mem = NULL; }
static void dev_no_lse(dev_call *c) { c->t[DEV_LSE].mem = NULL; }
static void dev_no_list(dev_call *c) { c->wait_list = NULL; }
static void dev_lse_on_o(dev_call *c) { c->t[DEV_LSE] = c->t[DEV_O]; c->t[DEV_LSE].offset += 8; }
static void dev_o_on_q(dev_call *c) { c->t[DEV_O] = (fcl_mpi_tensor){c->in, 16}; }
static void dev_dq_on_dout(dev_call *c) { c->t[DEV_DQ] = c->t[DEV_DOUT]; }
/* dV at the start of a sub-buffer of `out` that starts where dK does, 16
 * floats into it (a sub-buffer's start must be aligned) */
static void dev_dv_on_dk(dev_call *c)
{
    c->t[DEV_DV] = (fcl_mpi_tensor){c->out_tail, 0};
    c->t[DEV_DK].offset = OUT_GAP - 16;
}

/* Every rank makes the call (rank `who` changed, or every rank for -1)
 * with a wait list whose event never completes: it must return `want`,
 * enqueue nothing that waits (it returns at all), give no event and leave
 * the output buffer as it was. */
static void run_bad_dev_call(const bad_dev_call *bc, dev_call base)
{
    dev_call c = base;
    cl_int err = CL_SUCCESS;
    cl_event never = clCreateUserEvent(g_cl, &err);
    EXPECT(err == CL_SUCCESS, "clCreateUserEvent: %d", err);
    c.num_wait = 1;
    c.wait_list = &never;
    if (bc->who < 0 || bc->who == g_rank % g_size)
        bc->change(&c);
    cl_event ev = (cl_event)&c; /* any non-NULL value: the call must set NULL */
    fcl_mpi_tensor *t = c.t;
    fcl_status st =
        bc->backward
            ? fcl_mpi_attention_backward(g_m, &c.d, t[DEV_Q], t[DEV_K], t[DEV_V], t[DEV_O],
                                         t[DEV_LSE], t[DEV_DOUT], t[DEV_DQ], t[DEV_DK], t[DEV_DV],
                                         c.num_wait, c.wait_list, &ev)
            : fcl_mpi_attention_forward(g_m, &c.d, t[DEV_Q], t[DEV_K], t[DEV_V], t[DEV_O],
                                        t[DEV_LSE], c.num_wait, c.wait_list, &ev);
    EXPECT(st == bc->want && ev == NULL, "cl_mem %s: %s, want %s", bc->what,
           fcl_status_string(st), fcl_status_string(bc->want));
    clSetUserEventStatus(never, CL_COMPLETE);
    clReleaseEvent(never);
    size_t bytes = 0;
    clGetMemObjectInfo(c.out, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
    unsigned char *back = malloc(bytes);
    err = clEnqueueReadBuffer(g_queue, c.out, CL_TRUE, 0, bytes, back, 0, NULL, NULL);
    EXPECT(err == CL_SUCCESS && untouched(back, bytes), "cl_mem %s: output written on error (%d)",
           bc->what, err);
    free(back);
}

/* The bad calls of the cl_mem form, on run_bad_call's problem. */
static void bad_device_calls(void)
{
    dev_call c;
    memset(&c, 0, sizeof c);
    fcl_mpi_desc_init(&c.d, 1, 2, 2, 24, 32, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    c.d.sharding = FCL_MPI_SHARD_ZIGZAG;
    const size_t big = 1 << 16; /* floats: larger than any shard here */
    float *values = malloc(big * sizeof(float));
    for (size_t i = 0; i < big; ++i)
        values[i] = (float)((i * 37 % 101) / 101.0 - 0.5); /* any finite values */
    c.in = make_buffer(big * sizeof(float), values);
    c.out = make_buffer(3 * OUT_GAP * sizeof(float), NULL);
    c.small = make_buffer(16, values);
    const cl_buffer_region tail = {OUT_GAP * sizeof(float), 2 * OUT_GAP * sizeof(float)};
    cl_int err = CL_SUCCESS;
    c.out_tail = clCreateSubBuffer(c.out, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &tail,
                                   &err);
    EXPECT(err == CL_SUCCESS, "clCreateSubBuffer: %d", err);
    cl_device_id dev = fcl_context_cl_device(fcl_mpi_context(g_m));
    cl_context other = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    EXPECT(err == CL_SUCCESS, "clCreateContext: %d", err);
    c.foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, big * sizeof(float), NULL, &err);
    EXPECT(err == CL_SUCCESS, "clCreateBuffer in another context: %d", err);
    /* inputs: every one the same bytes of `in` (inputs may share) */
    for (int i = 0; i < DEV_TENSORS; ++i)
        c.t[i] = (fcl_mpi_tensor){c.in, 4};
    c.t[DEV_O] = c.t[DEV_DQ] = (fcl_mpi_tensor){c.out, 0};
    c.t[DEV_LSE] = (fcl_mpi_tensor){c.out, OUT_GAP};
    c.t[DEV_DK] = (fcl_mpi_tensor){c.out, OUT_GAP};
    c.t[DEV_DV] = (fcl_mpi_tensor){c.out, 2 * OUT_GAP};
    const int last = g_size - 1;
    /* backward: O and LSE are inputs, at `in` */
    dev_call bw = c;
    bw.t[DEV_O] = bw.t[DEV_LSE] = (fcl_mpi_tensor){c.in, 4};
    const bad_dev_call bad[] = {
        {"last rank's seqlen differs", last, 0, FCL_ERROR_RANKS_DISAGREE, dev_longer},
        {"last rank's Q buffer too small", last, 0, FCL_ERROR_BUFFER_TOO_SMALL, dev_small_q},
        {"rank 0's K offset past any buffer", 0, 1, FCL_ERROR_BUFFER_TOO_SMALL, dev_far_k},
        {"rank 0's V of another context", 0, 0, FCL_ERROR_WRONG_CONTEXT, dev_foreign_v},
        {"last rank's V of another context", last, 1, FCL_ERROR_WRONG_CONTEXT, dev_foreign_v},
        {"last rank passes no Q", last, 1, FCL_ERROR_NULL_ARGUMENT, dev_no_q},
        {"rank 0 passes no LSE to the backward", 0, 1, FCL_ERROR_MISSING_LSE, dev_no_lse},
        {"rank 0 passes a wait count without a list", 0, 0, FCL_ERROR_NULL_ARGUMENT, dev_no_list},
        {"LSE overlaps O everywhere", -1, 0, FCL_ERROR_BUFFER_ALIASING, dev_lse_on_o},
        {"last rank's O overlaps Q", last, 0, FCL_ERROR_BUFFER_ALIASING, dev_o_on_q},
        {"dQ on dO everywhere", -1, 1, FCL_ERROR_BUFFER_ALIASING, dev_dq_on_dout},
        {"dV a sub-buffer over dK's end on rank 0", 0, 1, FCL_ERROR_BUFFER_ALIASING, dev_dv_on_dk},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        if (g_size > 1 || bad[i].want != FCL_ERROR_RANKS_DISAGREE)
            run_bad_dev_call(&bad[i], bad[i].backward ? bw : c);
    /* the same arguments unchanged are a good call (so each refusal above
     * is its change's), the forward's also without LSE */
    cl_event ev = NULL;
    fcl_mpi_tensor *t = c.t;
    const fcl_mpi_tensor no_lse = {NULL, 0};
    fcl_status st = fcl_mpi_attention_forward(g_m, &c.d, t[DEV_Q], t[DEV_K], t[DEV_V], t[DEV_O],
                                              no_lse, 0, NULL, &ev);
    EXPECT(st == FCL_OK && ev != NULL, "cl_mem forward of the bad calls' problem: %s",
           fcl_status_string(st));
    if (ev != NULL)
        clReleaseEvent(ev), ev = NULL;
    t = bw.t;
    st = fcl_mpi_attention_backward(g_m, &bw.d, t[DEV_Q], t[DEV_K], t[DEV_V], t[DEV_O], t[DEV_LSE],
                                    t[DEV_DOUT], t[DEV_DQ], t[DEV_DK], t[DEV_DV], 0, NULL, NULL);
    EXPECT(st == FCL_OK, "cl_mem backward of the bad calls' problem: %s", fcl_status_string(st));
    EXPECT(clFinish(g_queue) == CL_SUCCESS, "clFinish");
    cl_mem all[] = {c.in, c.out_tail, c.out, c.small, c.foreign};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (all[i] != NULL)
            clReleaseMemObject(all[i]);
    if (other != NULL)
        clReleaseContext(other);
    free(values);
}

static void shard_geometry(void)
{
    fcl_mpi_desc d;
    for (size_t n = 6; n < 40; n += 7)
        for (int z = 0; z < 2; ++z) {
            fcl_mpi_desc_init(&d, 1, 1, 1, n, 8, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
            d.sharding = z ? FCL_MPI_SHARD_ZIGZAG : FCL_MPI_SHARD_CONTIGUOUS;
            unsigned char seen[40] = {0};
            size_t total = 0;
            for (int r = 0; r < 3; ++r) {
                fcl_mpi_shard s;
                EXPECT(fcl_mpi_shard_of(&d, r, 3, &s) == FCL_OK, "shard_of n %zu", n);
                total += s.rows;
                for (size_t t = 0; t < s.rows; ++t)
                    seen[position(&s, t)]++;
                /* chunk c of C starts at floor(c n / C) */
                const size_t chunks = z ? 6 : 3;
                EXPECT(s.start[0] == (size_t)r * n / chunks, "chunk start n %zu", n);
            }
            EXPECT(total == n, "shards cover %zu of %zu", total, n);
            for (size_t i = 0; i < n; ++i)
                EXPECT(seen[i] == 1, "position %zu held %d times", i, seen[i]);
        }
    fcl_mpi_desc_init(&d, 1, 1, 1, 5, 8, FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
    d.sharding = FCL_MPI_SHARD_ZIGZAG;
    fcl_mpi_shard s;
    EXPECT(fcl_mpi_shard_of(&d, 0, 3, &s) == FCL_ERROR_INVALID_SHAPE, "5 positions, 6 chunks");
    EXPECT(fcl_mpi_shard_of(&d, 3, 3, &s) == FCL_ERROR_INVALID_VALUE, "rank out of range");
    EXPECT(fcl_mpi_shard_of(NULL, 0, 3, &s) == FCL_ERROR_NULL_ARGUMENT, "NULL desc");
}

/* Whether Linux lets this process read a sibling's memory (Yama's
 * ptrace_scope 0, no Yama, or root). */
static int may_read_siblings(void)
{
#if defined(__linux__)
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;
    if (f != NULL) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = 1;
        fclose(f);
    }
    return scope == 0 || (scope <= 2 && geteuid() == 0);
#else
    return 0;
#endif
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    /* Each rank its own PoCL kernel cache (FCL_TEST_POCL_CACHE/rankN, set by
     * ctest): ranks that compile the same kernels at once into one cache
     * have failed a build under PoCL 3.1, once in a few cold runs. */
    const char *pocl_cache = getenv("FCL_TEST_POCL_CACHE");
    if (pocl_cache != NULL && pocl_cache[0] != '\0') {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/rank%d", pocl_cache, g_rank);
        setenv("POCL_CACHE_DIR", dir, 1);
    }
    /* "--quick": the cases that need several ranks most (causal with both
     * shardings, GQA/MQA, the three dtypes), for the slowest rank count */
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    fcl_status st = fcl_mpi_create(MPI_COMM_WORLD, NULL, NULL, &g_m);
    EXPECT(st == FCL_OK, "fcl_mpi_create: %s", fcl_status_string(st));
    if (st == FCL_OK) {
        EXPECT(fcl_mpi_rank(g_m) == g_rank && fcl_mpi_size(g_m) == g_size, "rank and size");
        /* the copies within a host (flashcl_mpi.h: 8 threads unless
         * FLASHCL_MPI_COPY_THREADS says 0..64; ctest's test_mpi_np3 asks
         * for MPI's transport, test_mpi_np3_copy for 3 threads): the ranks
         * share one host and one user; the kernel lets them read each
         * other's memory unless Yama allows only descendants to non-root
         * users, and then every rank keeps MPI's */
        const char *copy_env = getenv("FLASHCL_MPI_COPY_THREADS");
        char *end = NULL;
        const long asked_env = copy_env != NULL && copy_env[0] != '\0'
                                   ? strtol(copy_env, &end, 10) : -1;
        const int asked =
            asked_env >= 0 && asked_env <= 64 && *end == '\0' ? (int)asked_env : 8;
        const int copies = fcl_mpi_copy_threads(g_m);
        if (g_size > 1 && may_read_siblings())
            EXPECT(copies == asked, "copy threads: %d, asked %d", copies, asked);
        else if (g_size > 1)
            EXPECT(copies == asked || copies == 0, "copy threads: %d, asked %d", copies, asked);
        else
            EXPECT(copies == 0, "copy threads: %d with one rank", copies);
        if (g_rank == 0)
            printf("test_mpi: messages moved by %s\n", copies > 0 ? "the ranks' own copies" : "MPI");
        g_cl = fcl_context_cl_context(fcl_mpi_context(g_m));
        g_queue = fcl_context_cl_queue(fcl_mpi_context(g_m));
        shard_geometry();
        const int last = g_size - 1;
        /* Small shapes and few head_dims (several ranks share two cores
         * here, and each builds every kernel it uses); every dtype, both
         * shardings with causal masks, GQA and MQA, both layouts, lengths
         * that do not divide by the chunks. */
        const mcase cases[] = {
            {1, 2, 2, 37, 32, FCL_DTYPE_FP32, 0, FCL_MPI_SHARD_CONTIGUOUS, FCL_LAYOUT_BSHD, 0, 1},
            {1, 2, 2, 37, 32, FCL_DTYPE_FP32, 1, FCL_MPI_SHARD_ZIGZAG, FCL_LAYOUT_BSHD, 0.3f, 2},
            {2, 4, 2, 41, 32, FCL_DTYPE_FP16, 1, FCL_MPI_SHARD_ZIGZAG, FCL_LAYOUT_BHSD, 0, 3},
            {2, 3, 1, 29, 32, FCL_DTYPE_BF16, 1, FCL_MPI_SHARD_CONTIGUOUS, FCL_LAYOUT_BSHD, 0, 4},
            {1, 2, 1, 23, 32, FCL_DTYPE_FP16, 0, FCL_MPI_SHARD_ZIGZAG, FCL_LAYOUT_BSHD, 0, 5},
            {1, 2, 2, 30, 40, FCL_DTYPE_BF16, 1, FCL_MPI_SHARD_ZIGZAG, FCL_LAYOUT_BHSD, 0, 6},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
            if (!quick || (i >= 1 && i <= 3))
                run_case(&cases[i], i == 2);
        const bad_call bad[] = {
            {"last rank's seqlen differs", last, 0, g_size > 1 ? FCL_ERROR_RANKS_DISAGREE : FCL_OK, longer},
            {"rank 0's dtype differs", 0, 1, g_size > 1 ? FCL_ERROR_RANKS_DISAGREE : FCL_OK, fp16},
            {"last rank's causal flag differs", last, 0, g_size > 1 ? FCL_ERROR_RANKS_DISAGREE : FCL_OK, causal},
            {"last rank passes no Q", last, 0, FCL_ERROR_NULL_ARGUMENT, no_q},
            {"rank 0 passes no LSE to the backward", 0, 1, FCL_ERROR_MISSING_LSE, no_lse},
            {"head_dim 300 everywhere", -1, 0, FCL_ERROR_HEAD_DIM_UNSUPPORTED, head_dim_300},
            {"heads 3 over 2 everywhere", -1, 1, FCL_ERROR_HEADS_NOT_DIVISIBLE, heads_3_2},
            {"fewer positions than chunks", -1, 0, FCL_ERROR_INVALID_SHAPE, too_short},
            {"causal = 2 everywhere", -1, 0, FCL_ERROR_INVALID_VALUE, bad_flag},
            {"an unknown dtype everywhere", -1, 1, FCL_ERROR_DTYPE_UNSUPPORTED, bad_dtype},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
            if (bad[i].want != FCL_OK)
                run_bad_call(&bad[i]);
        bad_device_calls();
        /* the ranks still work together after the errors */
        run_case(&cases[quick ? 1 : 0], 0);
        /* a handle on the caller's context: used, and left alive by destroy */
        fcl_mpi *own = g_m, *other = NULL;
        st = fcl_mpi_create(MPI_COMM_WORLD, fcl_mpi_context(own), NULL, &other);
        EXPECT(st == FCL_OK && fcl_mpi_context(other) == fcl_mpi_context(own) &&
                   fcl_mpi_local_rank(other) == fcl_mpi_local_rank(own) &&
                   fcl_mpi_local_rank(own) >= 0 && fcl_mpi_local_rank(own) < g_size,
               "fcl_mpi_create on a given context: %s", fcl_status_string(st));
        timeline_checks(); /* small, and the uploads' pieces are checked there */
        if (st == FCL_OK && !quick) {
            g_m = other;
            run_case(&cases[4], 0);
            g_m = own;
            fcl_mpi_destroy(other);
            run_case(&cases[4], 0);
        } else {
            fcl_mpi_destroy(other);
        }
    }
    fcl_mpi_destroy(g_m);
    int failures = 0, checks = 0;
    MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi: %d ranks, %d checks, %d failed\n", g_size, checks, failures);
    MPI_Finalize();
    return failures == 0 ? 0 : 1;
}
