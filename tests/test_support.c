/* test_support.c - see test_support.h. */
#include "test_support.h"

#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ------------------------------------------------------ */

uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double rng_normal(rng *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- storage types --------------------------------------------------------- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t float_to_half_bits(float f)
{
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7FFFFFFFu;
    if (mag >= 0x7F800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7C00u | (mag > 0x7F800000u ? 0x200u : 0u));
    if (mag >= 0x477FF000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7C00u);
    if (mag < 0x38800000u) { /* subnormal half (or zero) */
        float a = bits_float(mag);
        /* a / 2^-24, rounded to nearest even by the FPU */
        float scaled = a * 16777216.0f;
        uint32_t q = (uint32_t)scaled;
        float rem = scaled - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1u)))
            ++q;
        return (uint16_t)(sign | q);
    }
    uint32_t exp = ((mag >> 23) - 127 + 15) << 10;
    uint32_t mant = (mag >> 13) & 0x3FFu;
    uint32_t rest = mag & 0x1FFFu;
    uint32_t h = exp | mant;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        ++h; /* may carry into the exponent: still correct */
    return (uint16_t)(sign | h);
}

float half_bits_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    if (exp == 0)
        return bits_float(sign) + (sign ? -1.0f : 1.0f) * (float)mant * (1.0f / 16777216.0f);
    if (exp == 31)
        return bits_float(sign | 0x7F800000u | (mant << 13));
    return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16_bits(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float bf16_bits_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

double round_to_dtype(double x, fcl_dtype dtype)
{
    switch (dtype) {
    case FCL_DTYPE_FP16:
        return half_bits_to_float(float_to_half_bits((float)x));
    case FCL_DTYPE_BF16:
        return bf16_bits_to_float(float_to_bf16_bits((float)x));
    default:
        return (float)x;
    }
}

double unit_roundoff(fcl_dtype dtype)
{
    switch (dtype) {
    case FCL_DTYPE_FP16:
        return ldexp(1.0, -11);
    case FCL_DTYPE_BF16:
        return ldexp(1.0, -8);
    default:
        return ldexp(1.0, -24);
    }
}

/* ---- contexts -------------------------------------------------------------- */

fcl_context *test_context(const char *profile)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.profile = profile;
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(&o, &ctx);
    if (st != FCL_OK) {
        fprintf(stderr, "cannot create a context%s%s: %s\n", profile ? " for profile " : "",
                profile ? profile : "", fcl_status_string(st));
        return NULL;
    }
    return ctx;
}

/* ---- strided device tensors -------------------------------------------------- */

enum { GUARD_ELEMS = 37 };

typedef struct dev_tensor {
    fcl_layout layout;
    size_t batch, heads, seqlen, dim, es;
    size_t elems;            /* buffer length in elements, guards included */
    unsigned char *image;    /* host copy of the whole buffer */
    unsigned char *is_elem;  /* 1 where a tensor element lives */
    cl_mem mem;
} dev_tensor;

/* A NaN with a payload no computation produces, so "unwritten" is certain. */
static void put_fill(unsigned char *p, size_t es)
{
    if (es == 4) {
        uint32_t v = 0x7FC0DEADu;
        memcpy(p, &v, 4);
    } else {
        uint16_t v = 0x7E5Au; /* a NaN in both fp16 and bf16 */
        memcpy(p, &v, 2);
    }
}

static int is_fill(const unsigned char *p, size_t es)
{
    unsigned char f[4];
    put_fill(f, es);
    return memcmp(p, f, es) == 0;
}

static void put_value(unsigned char *p, fcl_dtype dt, double x)
{
    if (dt == FCL_DTYPE_FP32) {
        float f = (float)x;
        memcpy(p, &f, 4);
    } else {
        uint16_t b = dt == FCL_DTYPE_FP16 ? float_to_half_bits((float)x) : float_to_bf16_bits((float)x);
        memcpy(p, &b, 2);
    }
}

static double get_value(const unsigned char *p, fcl_dtype dt)
{
    if (dt == FCL_DTYPE_FP32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t b;
    memcpy(&b, p, 2);
    return dt == FCL_DTYPE_FP16 ? half_bits_to_float(b) : bf16_bits_to_float(b);
}

static fcl_layout case_layout(const fa_case *c, size_t heads, size_t seqlen)
{
    const size_t D = c->head_dim;
    fcl_layout l = fcl_layout_contiguous(c->layout, heads, seqlen, D);
    if (!c->padded)
        return l;
    if (c->layout == FCL_LAYOUT_BSHD) {
        l.stride_head = D + 3;
        l.stride_seq = heads * l.stride_head + 5;
        l.stride_batch = seqlen * l.stride_seq + 7;
        l.offset = 11;
    } else {
        l.stride_seq = D + 2;
        l.stride_head = seqlen * l.stride_seq + 3;
        l.stride_batch = heads * l.stride_head + 5;
        l.offset = 13;
    }
    return l;
}

static size_t elem_index(const dev_tensor *t, size_t b, size_t h, size_t s, size_t d)
{
    return t->layout.offset + b * t->layout.stride_batch + h * t->layout.stride_head +
           s * t->layout.stride_seq + d;
}

static int tensor_create(dev_tensor *t, fcl_context *ctx, fcl_layout layout, size_t B, size_t H,
                         size_t S, size_t D, fcl_dtype dt, const double *values)
{
    memset(t, 0, sizeof *t);
    t->layout = layout;
    t->batch = B;
    t->heads = H;
    t->seqlen = S;
    t->dim = D;
    t->es = dt == FCL_DTYPE_FP32 ? 4 : 2;
    t->elems = elem_index(t, B - 1, H - 1, S - 1, D - 1) + 1 + GUARD_ELEMS;
    t->image = malloc(t->elems * t->es);
    t->is_elem = calloc(t->elems, 1);
    for (size_t i = 0; i < t->elems; ++i)
        put_fill(t->image + i * t->es, t->es);
    size_t n = 0;
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < H; ++h)
            for (size_t s = 0; s < S; ++s)
                for (size_t d = 0; d < D; ++d, ++n) {
                    size_t at = elem_index(t, b, h, s, d);
                    t->is_elem[at] = 1;
                    if (values != NULL)
                        put_value(t->image + at * t->es, dt, values[n]);
                }
    cl_int err = CL_SUCCESS;
    t->mem = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                            t->elems * t->es, t->image, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer: %s\n", fcl_status_string(err));
        return 0;
    }
    return 1;
}

static void tensor_free(dev_tensor *t)
{
    if (t->mem)
        clReleaseMemObject(t->mem);
    free(t->image);
    free(t->is_elem);
    memset(t, 0, sizeof *t);
}

/* Reads the buffer back, checks fill/guards, gathers values (canonical order).
 * Returns the number of problems and adds them to res. */
static void tensor_read(fcl_context *ctx, const dev_tensor *t, fcl_dtype dt, double *out,
                        fa_result *res)
{
    unsigned char *img = malloc(t->elems * t->es);
    cl_int err = clEnqueueReadBuffer(fcl_context_cl_queue(ctx), t->mem, CL_TRUE, 0,
                                     t->elems * t->es, img, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clEnqueueReadBuffer: %s\n", fcl_status_string(err));
        res->unwritten++;
        free(img);
        return;
    }
    for (size_t i = 0; i < t->elems; ++i) {
        const unsigned char *p = img + i * t->es;
        if (!t->is_elem[i] && !is_fill(p, t->es))
            res->guard_bad++;
        if (t->is_elem[i] && is_fill(p, t->es))
            res->unwritten++;
    }
    size_t n = 0;
    for (size_t b = 0; b < t->batch; ++b)
        for (size_t h = 0; h < t->heads; ++h)
            for (size_t s = 0; s < t->seqlen; ++s)
                for (size_t d = 0; d < t->dim; ++d)
                    out[n++] = get_value(img + elem_index(t, b, h, s, d) * t->es, dt);
    free(img);
}

/* ---- comparisons ------------------------------------------------------------- */

static double *random_tensor(rng *r, size_t n, double scale, fcl_dtype dt)
{
    double *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i)
        x[i] = round_to_dtype(rng_normal(r) * scale, dt);
    return x;
}

/* Applies the tolerance rule to one tensor; keeps the worst ratio in res. */
static int compare(const char *name, const double *ours, const double *lowp, const double *ref,
                   size_t n, double factor, fcl_dtype dt, size_t sum_terms, fa_result *res)
{
    double err = 0, err_lp = 0, maxref = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!isfinite(ref[i])) {
            if (!(ours[i] == ref[i]))
                res->nonfinite++;
            continue;
        }
        if (!isfinite(ours[i])) {
            res->nonfinite++;
            continue;
        }
        err = fmax(err, fabs(ours[i] - ref[i]));
        err_lp = fmax(err_lp, fabs(lowp[i] - ref[i]));
        maxref = fmax(maxref, fabs(ref[i]));
    }
    const double eps = (unit_roundoff(dt) + ldexp(1.0, -24) * sqrt((double)sum_terms)) * maxref;
    const double tol = factor * err_lp + eps;
    if (res->worst == NULL || err / (tol > 0 ? tol : 1) > res->err / (res->tol > 0 ? res->tol : 1)) {
        res->err = err;
        res->err_lowp = err_lp;
        res->tol = tol;
        res->worst = name;
    }
    return err <= tol;
}

static ref_problem problem_of(const fa_case *c)
{
    ref_problem p = {c->batch,    c->heads_q,
                     c->heads_kv, c->seqlen_q,
                     c->seqlen_k, c->head_dim,
                     c->scale != 0 ? (double)c->scale : 1.0 / sqrt((double)c->head_dim),
                     c->causal,   c->dtype};
    return p;
}

static fcl_attention_desc desc_of(const fa_case *c)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k,
                            c->head_dim, c->dtype, c->layout);
    d.softmax_scale = c->scale;
    d.causal = c->causal;
    d.q = d.o = d.dout = d.dq = case_layout(c, c->heads_q, c->seqlen_q);
    d.k = d.v = d.dk = d.dv = case_layout(c, c->heads_kv, c->seqlen_k);
    d.lse_offset = c->padded ? 3 : 0;
    return d;
}

void fa_describe(const fa_case *c, char *buf, size_t n)
{
    snprintf(buf, n, "B=%zu Hq=%zu Hk=%zu Sq=%zu Sk=%zu d=%zu %s%s scale=%g %s%s seed=%llu",
             c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k, c->head_dim,
             fcl_dtype_name(c->dtype), c->causal ? " causal" : "", (double)c->scale,
             c->layout == FCL_LAYOUT_BSHD ? "bshd" : "bhsd", c->padded ? " padded" : "",
             (unsigned long long)c->seed);
}

static int report(const char *what, const fa_case *c, int ok, const fa_result *res)
{
    char buf[256];
    fa_describe(c, buf, sizeof buf);
    if (ok && getenv("FCL_TEST_VERBOSE") != NULL)
        fprintf(stderr, "ok %s [%s]: worst %s err %.3g low-precision %.3g tol %.3g (%.0f%% of tol)\n",
                what, buf, res->worst ? res->worst : "-", res->err, res->err_lowp, res->tol,
                100.0 * res->err / (res->tol > 0 ? res->tol : 1));
    if (ok)
        return 1;
    fprintf(stderr,
            "FAIL %s [%s]: worst %s err %.3g (low-precision ref %.3g, tol %.3g); unwritten %d, "
            "guard/gap bytes changed %d, unexpected non-finite %d, masked rows %s\n",
            what, buf, res->worst ? res->worst : "-", res->err, res->err_lowp, res->tol,
            res->unwritten, res->guard_bad, res->nonfinite,
            res->masked_rows_ok < 0 ? "n/a" : res->masked_rows_ok ? "ok" : "WRONG");
    return 0;
}

/* The inputs of a case, canonical order, storage-rounded. */
typedef struct case_inputs {
    double *q, *k, *v, *dout;
    size_t nq, nk, nlse;
} case_inputs;

static case_inputs make_inputs(const fa_case *c)
{
    case_inputs in;
    rng r = {c->seed * 7919u + 17u};
    in.nq = c->batch * c->heads_q * c->seqlen_q * c->head_dim;
    in.nk = c->batch * c->heads_kv * c->seqlen_k * c->head_dim;
    in.nlse = c->batch * c->heads_q * c->seqlen_q;
    double s[3];
    for (int i = 0; i < 3; ++i)
        s[i] = c->input_scale[i] != 0 ? c->input_scale[i] : 1.0;
    in.q = random_tensor(&r, in.nq, s[0], c->dtype);
    in.k = random_tensor(&r, in.nk, s[1], c->dtype);
    in.v = random_tensor(&r, in.nk, s[2], c->dtype);
    in.dout = random_tensor(&r, in.nq, 1.0, c->dtype);
    return in;
}

static void free_inputs(case_inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->dout);
}

/* The forward's device tensors for a case. */
typedef struct fwd_buffers {
    dev_tensor q, k, v, o;
    dev_tensor lse; /* as a (B, Hq, Sq, 1) tensor at lse_offset */
} fwd_buffers;

static int make_forward_buffers(fcl_context *ctx, const fa_case *c, const fcl_attention_desc *d,
                                const case_inputs *in, fwd_buffers *fb)
{
    fcl_layout lse_layout = {d->lse_offset, c->heads_q * c->seqlen_q, c->seqlen_q, 1};
    return tensor_create(&fb->q, ctx, d->q, c->batch, c->heads_q, c->seqlen_q, c->head_dim,
                         c->dtype, in->q) &&
           tensor_create(&fb->k, ctx, d->k, c->batch, c->heads_kv, c->seqlen_k, c->head_dim,
                         c->dtype, in->k) &&
           tensor_create(&fb->v, ctx, d->v, c->batch, c->heads_kv, c->seqlen_k, c->head_dim,
                         c->dtype, in->v) &&
           tensor_create(&fb->o, ctx, d->o, c->batch, c->heads_q, c->seqlen_q, c->head_dim,
                         c->dtype, NULL) &&
           tensor_create(&fb->lse, ctx, lse_layout, c->batch, c->heads_q, c->seqlen_q, 1,
                         FCL_DTYPE_FP32, NULL);
}

static void free_forward_buffers(fwd_buffers *fb)
{
    tensor_free(&fb->q);
    tensor_free(&fb->k);
    tensor_free(&fb->v);
    tensor_free(&fb->o);
    tensor_free(&fb->lse);
}

static int run_forward(fcl_context *ctx, const fcl_attention_desc *d, fwd_buffers *fb)
{
    fcl_status st = fcl_attention_forward(ctx, d, fb->q.mem, fb->k.mem, fb->v.mem, fb->o.mem,
                                          fb->lse.mem, 0, NULL, NULL);
    if (st == FCL_OK)
        st = clFinish(fcl_context_cl_queue(ctx));
    if (st != FCL_OK) {
        fprintf(stderr, "forward: %s\n%s\n", fcl_status_string(st), fcl_context_build_log(ctx));
        return 0;
    }
    return 1;
}

/* Rows that see no key (causal with seqlen_q > seqlen_k): O = 0, LSE = +inf. */
static int check_masked_rows(const fa_case *c, const double *o, const double *lse)
{
    if (!c->causal || c->seqlen_q <= c->seqlen_k)
        return -1;
    const size_t masked = c->seqlen_q - c->seqlen_k;
    for (size_t bh = 0; bh < c->batch * c->heads_q; ++bh)
        for (size_t i = 0; i < masked; ++i) {
            if (!(isinf(lse[bh * c->seqlen_q + i]) && lse[bh * c->seqlen_q + i] > 0))
                return 0;
            for (size_t d = 0; d < c->head_dim; ++d)
                if (o[(bh * c->seqlen_q + i) * c->head_dim + d] != 0.0)
                    return 0;
        }
    return 1;
}

int fa_check_forward(fcl_context *ctx, const fa_case *c, fa_result *res)
{
    memset(res, 0, sizeof *res);
    case_inputs in = make_inputs(c);
    fcl_attention_desc d = desc_of(c);
    fwd_buffers fb;
    memset(&fb, 0, sizeof fb);
    int ok = make_forward_buffers(ctx, c, &d, &in, &fb) && run_forward(ctx, &d, &fb);
    if (ok) {
        double *o = malloc(in.nq * sizeof *o), *lse = malloc(in.nlse * sizeof *lse);
        double *o64 = malloc(in.nq * sizeof *o), *lse64 = malloc(in.nlse * sizeof *lse);
        double *olp = malloc(in.nq * sizeof *o), *lselp = malloc(in.nlse * sizeof *lse);
        tensor_read(ctx, &fb.o, c->dtype, o, res);
        tensor_read(ctx, &fb.lse, FCL_DTYPE_FP32, lse, res);
        ref_problem p = problem_of(c);
        ref_forward_f64(&p, in.q, in.k, in.v, o64, lse64);
        ref_forward_lowp(&p, in.q, in.k, in.v, olp, lselp);
        const size_t terms = c->head_dim + c->seqlen_k;
        ok = compare("o", o, olp, o64, in.nq, 2.0, c->dtype, terms, res);
        ok = compare("lse", lse, lselp, lse64, in.nlse, 2.0, FCL_DTYPE_FP32, terms, res) && ok;
        res->masked_rows_ok = check_masked_rows(c, o, lse);
        ok = ok && res->masked_rows_ok != 0 && res->unwritten == 0 && res->guard_bad == 0 &&
             res->nonfinite == 0;
        free(o), free(lse), free(o64), free(lse64), free(olp), free(lselp);
    }
    free_forward_buffers(&fb);
    free_inputs(&in);
    return report("forward", c, ok, res);
}

int fa_check_backward(fcl_context *ctx, const fa_case *c, fa_result *res)
{
    memset(res, 0, sizeof *res);
    res->masked_rows_ok = -1;
    case_inputs in = make_inputs(c);
    fcl_attention_desc d = desc_of(c);
    fwd_buffers fb;
    dev_tensor dout, dq, dk, dv;
    memset(&fb, 0, sizeof fb);
    memset(&dout, 0, sizeof dout), memset(&dq, 0, sizeof dq);
    memset(&dk, 0, sizeof dk), memset(&dv, 0, sizeof dv);
    const size_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim;
    int ok = make_forward_buffers(ctx, c, &d, &in, &fb) && run_forward(ctx, &d, &fb) &&
             tensor_create(&dout, ctx, d.dout, B, Hq, c->seqlen_q, D, c->dtype, in.dout) &&
             tensor_create(&dq, ctx, d.dq, B, Hq, c->seqlen_q, D, c->dtype, NULL) &&
             tensor_create(&dk, ctx, d.dk, B, Hk, c->seqlen_k, D, c->dtype, NULL) &&
             tensor_create(&dv, ctx, d.dv, B, Hk, c->seqlen_k, D, c->dtype, NULL);
    if (ok) {
        fcl_status st = fcl_attention_backward(ctx, &d, fb.q.mem, fb.k.mem, fb.v.mem, fb.o.mem,
                                               fb.lse.mem, dout.mem, dq.mem, dk.mem, dv.mem, 0,
                                               NULL, NULL);
        if (st == FCL_OK)
            st = clFinish(fcl_context_cl_queue(ctx));
        if (st != FCL_OK) {
            fprintf(stderr, "backward: %s\n%s\n", fcl_status_string(st),
                    fcl_context_build_log(ctx));
            ok = 0;
        }
    }
    if (ok) {
        double *g[3], *g64[3], *glp[3];
        size_t n[3] = {in.nq, in.nk, in.nk};
        for (int i = 0; i < 3; ++i) {
            g[i] = malloc(n[i] * sizeof(double));
            g64[i] = malloc(n[i] * sizeof(double));
            glp[i] = malloc(n[i] * sizeof(double));
        }
        tensor_read(ctx, &dq, c->dtype, g[0], res);
        tensor_read(ctx, &dk, c->dtype, g[1], res);
        tensor_read(ctx, &dv, c->dtype, g[2], res);
        ref_problem p = problem_of(c);
        ref_backward_f64(&p, in.q, in.k, in.v, in.dout, g64[0], g64[1], g64[2]);
        ref_backward_lowp(&p, in.q, in.k, in.v, in.dout, glp[0], glp[1], glp[2]);
        static const char *names[3] = {"dq", "dk", "dv"};
        const size_t terms =
            c->head_dim + (c->seqlen_q > c->seqlen_k ? c->seqlen_q : c->seqlen_k);
        for (int i = 0; i < 3; ++i)
            ok = compare(names[i], g[i], glp[i], g64[i], n[i], 3.0, c->dtype, terms, res) && ok;
        ok = ok && res->unwritten == 0 && res->guard_bad == 0 && res->nonfinite == 0;
        for (int i = 0; i < 3; ++i)
            free(g[i]), free(g64[i]), free(glp[i]);
    }
    tensor_free(&dout), tensor_free(&dq), tensor_free(&dk), tensor_free(&dv);
    free_forward_buffers(&fb);
    free_inputs(&in);
    return report("backward", c, ok, res);
}

/* Reads a whole buffer into a new host array. */
static unsigned char *read_all(fcl_context *ctx, const dev_tensor *t)
{
    unsigned char *img = malloc(t->elems * t->es);
    if (clEnqueueReadBuffer(fcl_context_cl_queue(ctx), t->mem, CL_TRUE, 0, t->elems * t->es, img,
                            0, NULL, NULL) != CL_SUCCESS) {
        free(img);
        return NULL;
    }
    return img;
}

int fa_check_deterministic(fcl_context *ctx, const fa_case *c, int backward)
{
    case_inputs in = make_inputs(c);
    fcl_attention_desc d = desc_of(c);
    unsigned char *first[4] = {NULL, NULL, NULL, NULL};
    int same = 1;
    for (int rep = 0; rep < 2 && same; ++rep) {
        fwd_buffers fb;
        dev_tensor dout, dq, dk, dv;
        memset(&fb, 0, sizeof fb);
        memset(&dout, 0, sizeof dout), memset(&dq, 0, sizeof dq);
        memset(&dk, 0, sizeof dk), memset(&dv, 0, sizeof dv);
        const size_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim;
        int ok = make_forward_buffers(ctx, c, &d, &in, &fb) && run_forward(ctx, &d, &fb);
        const dev_tensor *outs[4] = {&fb.o, NULL, NULL, NULL};
        if (ok && backward) {
            ok = tensor_create(&dout, ctx, d.dout, B, Hq, c->seqlen_q, D, c->dtype, in.dout) &&
                 tensor_create(&dq, ctx, d.dq, B, Hq, c->seqlen_q, D, c->dtype, NULL) &&
                 tensor_create(&dk, ctx, d.dk, B, Hk, c->seqlen_k, D, c->dtype, NULL) &&
                 tensor_create(&dv, ctx, d.dv, B, Hk, c->seqlen_k, D, c->dtype, NULL) &&
                 fcl_attention_backward(ctx, &d, fb.q.mem, fb.k.mem, fb.v.mem, fb.o.mem,
                                        fb.lse.mem, dout.mem, dq.mem, dk.mem, dv.mem, 0, NULL,
                                        NULL) == FCL_OK;
            outs[1] = &dq, outs[2] = &dk, outs[3] = &dv;
        }
        for (int i = 0; i < 4 && ok; ++i) {
            if (outs[i] == NULL)
                continue;
            unsigned char *img = read_all(ctx, outs[i]);
            if (img == NULL) {
                ok = 0;
            } else if (rep == 0) {
                first[i] = img;
            } else {
                same = same && memcmp(first[i], img, outs[i]->elems * outs[i]->es) == 0;
                free(img);
            }
        }
        same = same && ok;
        tensor_free(&dout), tensor_free(&dq), tensor_free(&dk), tensor_free(&dv);
        free_forward_buffers(&fb);
    }
    for (int i = 0; i < 4; ++i)
        free(first[i]);
    free_inputs(&in);
    return same;
}
