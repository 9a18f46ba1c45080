/* test_support.c - see test_support.h. */
#include "test_support.h"

#include "fp8_codec.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ------------------------------------------------------ */

#define RNG_STEP 0x9E3779B97F4A7C15ull /* splitmix64's state increment */

uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += RNG_STEP); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_skip(rng *r, uint64_t n) { r->state += n * RNG_STEP; }

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
    /* round to nearest even, without a branch (random inputs would mispredict
     * it half the time); a carry into the exponent is still correct */
    h += (uint32_t)(rest > 0x1000u) | ((uint32_t)(rest == 0x1000u) & h & 1u);
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
    case FCL_DTYPE_FP8_E4M3:
    case FCL_DTYPE_FP8_E5M2:
        return fp8_decode(fp8_encode(x, dtype), dtype);
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
    case FCL_DTYPE_FP8_E4M3:
        return ldexp(1.0, -4);
    case FCL_DTYPE_FP8_E5M2:
        return ldexp(1.0, -3);
    default:
        return ldexp(1.0, -24);
    }
}

/* ---- device buffers ------------------------------------------------------------ */

cl_mem fa_filled_buffer(fcl_context *ctx, size_t bytes, unsigned char byte)
{
    unsigned char *host = malloc(bytes);
    memset(host, byte, bytes);
    cl_int err;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              bytes, host, &err);
    free(host);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer: %s\n", fcl_status_string(err));
        return NULL;
    }
    return m;
}

int fa_buffer_all(fcl_context *ctx, cl_mem m, size_t bytes, unsigned char byte)
{
    unsigned char *h = malloc(bytes);
    int same = clFinish(fcl_context_cl_queue(ctx)) == CL_SUCCESS &&
               clEnqueueReadBuffer(fcl_context_cl_queue(ctx), m, CL_TRUE, 0, bytes, h, 0, NULL,
                                   NULL) == CL_SUCCESS;
    for (size_t i = 0; i < bytes && same; ++i)
        same = h[i] == byte;
    free(h);
    return same;
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

int test_out_of_order_context(fcl_context *base, cl_command_queue *queue, fcl_context **ctx)
{
    cl_context clc = fcl_context_cl_context(base);
    cl_device_id dev = fcl_context_cl_device(base);
    cl_command_queue_properties supported = 0;
    *queue = NULL;
    *ctx = NULL;
    cl_int err = clGetDeviceInfo(dev, CL_DEVICE_QUEUE_PROPERTIES, sizeof supported, &supported,
                                 NULL);
    if (err == CL_SUCCESS && !(supported & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) {
        printf("device has no out-of-order queues: nothing to check\n");
        return 0;
    }
    if (err == CL_SUCCESS)
        *queue = clCreateCommandQueue(clc, dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    const fcl_status st =
        err == CL_SUCCESS ? fcl_context_create_from_cl(clc, *queue, dev, NULL, ctx) : err;
    if (st == FCL_OK)
        return 1;
    fprintf(stderr, "cannot make a context on an out-of-order queue: %s\n",
            fcl_status_string(st));
    if (*queue != NULL)
        clReleaseCommandQueue(*queue);
    *queue = NULL;
    *ctx = NULL;
    return -1;
}

fcl_context *fa_ctx;

int fa_group_setup(void **state)
{
    (void)state;
    fa_ctx = test_context(NULL);
    return fa_ctx == NULL ? -1 : 0;
}

int fa_group_teardown(void **state)
{
    (void)state;
    fcl_context_destroy(fa_ctx);
    fa_ctx = NULL;
    if (fa_loop_refusals > 0)
        fprintf(stderr, "%d calls refused for the device's loop limit (each as predicted)\n",
                fa_loop_refusals);
    if (fa_no_plan_refusals > 0)
        fprintf(stderr, "%d calls refused for want of a plan (each as predicted)\n",
                fa_no_plan_refusals);
    return 0;
}

/* ---- strided device tensors -------------------------------------------------- */

enum { GUARD_ELEMS = 37 };

/* A (batch, heads, seqlen, dim) tensor in a device buffer with guards.  With
 * `cu` (packed sequences) sequence b holds rows cu[b] .. cu[b+1]-1 of one
 * packed batch entry; canonical rows past a sequence's length do not exist. */
typedef struct dev_tensor {
    fcl_layout layout;
    size_t batch, heads, seqlen, dim, es;
    const int *cu;
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
    } else if (es == 1) {
        *p = 0x7F; /* a NaN in E4M3 and E5M2 */
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

void fa_put_value(unsigned char *p, fcl_dtype dt, double x)
{
    uint16_t b;
    switch (dt) { /* no library call: this runs billions of times in large_check.c */
    case FCL_DTYPE_FP32: {
        const float f = (float)x;
        memcpy(p, &f, 4);
        return;
    }
    case FCL_DTYPE_FP16:
        b = float_to_half_bits((float)x);
        break;
    case FCL_DTYPE_BF16:
        b = float_to_bf16_bits((float)x);
        break;
    default:
        *p = fp8_encode(x, dt);
        return;
    }
    memcpy(p, &b, 2);
}

double fa_get_value(const unsigned char *p, fcl_dtype dt)
{
    float f;
    uint16_t b;
    switch (dt) { /* no library call, as in fa_put_value */
    case FCL_DTYPE_FP32:
        memcpy(&f, p, 4);
        return f;
    case FCL_DTYPE_FP16:
        memcpy(&b, p, 2);
        return half_bits_to_float(b);
    case FCL_DTYPE_BF16:
        memcpy(&b, p, 2);
        return bf16_bits_to_float(b);
    default:
        return fp8_decode(*p, dt);
    }
}

static size_t rows_of(const dev_tensor *t, size_t b)
{
    return t->cu ? (size_t)(t->cu[b + 1] - t->cu[b]) : t->seqlen;
}

static size_t elem_index(const dev_tensor *t, size_t b, size_t h, size_t s, size_t d)
{
    if (t->cu)
        return t->layout.offset + ((size_t)t->cu[b] + s) * t->layout.stride_seq +
               h * t->layout.stride_head + d;
    return t->layout.offset + b * t->layout.stride_batch + h * t->layout.stride_head +
           s * t->layout.stride_seq + d;
}

/* Runs the statements given for every element that exists, with `at` its
 * index in the buffer and `n` its canonical index. */
#define FOR_EACH_ELEMENT(t, at, n, ...)                                           \
    for (size_t b_ = 0, n = 0; b_ < (t)->batch; ++b_)                              \
        for (size_t h_ = 0; h_ < (t)->heads; ++h_)                                 \
            for (size_t s_ = 0; s_ < (t)->seqlen; ++s_)                            \
                for (size_t d_ = 0; d_ < (t)->dim; ++d_, ++n)                      \
                    if (s_ < rows_of((t), b_)) {                                   \
                        const size_t at = elem_index((t), b_, h_, s_, d_);         \
                        __VA_ARGS__                                                \
                    }

static int tensor_create(dev_tensor *t, fcl_context *ctx, fcl_layout layout, size_t B, size_t H,
                         size_t S, size_t D, const int *cu, fcl_dtype dt, const double *values)
{
    memset(t, 0, sizeof *t);
    t->layout = layout;
    t->batch = B;
    t->heads = H;
    t->seqlen = S;
    t->dim = D;
    t->cu = cu;
    t->es = fcl_dtype_size(dt);
    size_t last = 0;
    FOR_EACH_ELEMENT(t, at, n, { if (at > last) last = at; })
    t->elems = last + 1 + GUARD_ELEMS;
    t->image = malloc(t->elems * t->es);
    t->is_elem = calloc(t->elems, 1);
    for (size_t i = 0; i < t->elems; ++i)
        put_fill(t->image + i * t->es, t->es);
    FOR_EACH_ELEMENT(t, at, n, {
        t->is_elem[at] = 1;
        if (values != NULL)
            fa_put_value(t->image + at * t->es, dt, values[n]);
    })
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

/* Reads the buffer back, checks fill and guards, gathers the values in
 * canonical order (0 where a packed sequence has no such row). */
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
    memset(out, 0, t->batch * t->heads * t->seqlen * t->dim * sizeof *out);
    FOR_EACH_ELEMENT(t, at, n, { out[n] = fa_get_value(img + at * t->es, dt); })
    free(img);
}

/* 1 for canonical elements that exist. */
static unsigned char *tensor_valid(const dev_tensor *t)
{
    unsigned char *v = calloc(t->batch * t->heads * t->seqlen * t->dim, 1);
    FOR_EACH_ELEMENT(t, at, n, { (void)at; v[n] = 1; })
    return v;
}

/* ---- comparisons ------------------------------------------------------------- */

static double *random_tensor(rng *r, size_t n, double scale, fcl_dtype dt)
{
    double *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; ++i)
        x[i] = round_to_dtype(rng_normal(r) * scale, dt);
    return x;
}

/* Applies the tolerance rule to one tensor's existing elements; keeps the
 * worst ratio in res. */
int fa_compare(const char *name, const double *ours, const double *lowp, const double *ref,
                   const double *magnitude, const unsigned char *valid, size_t n, double factor,
                   fcl_dtype dt, size_t sum_terms, fa_result *res)
{
    double err = 0, err_lp = 0, maxref = 0, maxmag = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!valid[i])
            continue;
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
        maxmag = fmax(maxmag, magnitude != NULL ? magnitude[i] : fabs(ref[i]));
    }
    const double eps = unit_roundoff(dt) * maxref +
                       ldexp(1.0, -24) * sqrt((double)sum_terms) * fmax(maxref, maxmag);
    const double tol = factor * err_lp + eps;
    if (res->worst == NULL || err / (tol > 0 ? tol : 1) > res->err / (res->tol > 0 ? res->tol : 1)) {
        res->err = err;
        res->err_lowp = err_lp;
        res->tol = tol;
        res->worst = name;
    }
    return err <= tol;
}

int fa_compare_bound(const char *name, const double *ours, const double *ref,
                     const double *bound, const unsigned char *valid, size_t n, double factor,
                     fcl_dtype dt, fa_result *res)
{
    double maxref = 0;
    for (size_t i = 0; i < n; ++i)
        if (valid[i] && isfinite(ref[i]))
            maxref = fmax(maxref, fabs(ref[i]));
    int ok = 1;
    for (size_t i = 0; i < n; ++i) {
        if (!valid[i])
            continue;
        if (!isfinite(ref[i]) || !isfinite(ours[i])) {
            if (!(ours[i] == ref[i]))
                res->nonfinite++;
            continue;
        }
        const double err = fabs(ours[i] - ref[i]);
        const double tol = factor * bound[i] + unit_roundoff(dt) * fabs(ref[i]) +
                           ldexp(maxref, -20);
        if (res->worst == NULL || err / tol > res->err / (res->tol > 0 ? res->tol : 1)) {
            res->err = err;
            res->err_lowp = bound[i];
            res->tol = tol;
            res->worst = name;
        }
        ok = ok && err <= tol;
    }
    return ok;
}

fa_variants fa_no_variants(void)
{
    fa_variants v;
    memset(&v, 0, sizeof v);
    v.window_left = v.window_right = -1;
    v.out_dtype = FCL_DTYPE_FP16;
    return v;
}

void fa_value_dim_case(fa_case *c, fa_variants *v, size_t d, size_t dv, size_t i)
{
    static const fcl_dtype dtypes[3] = {FCL_DTYPE_FP32, FCL_DTYPE_FP16, FCL_DTYPE_BF16};
    *v = fa_no_variants();
    v->head_dim_v = dv;
    c->head_dim = d;
    c->dtype = dtypes[i % 3];
    c->causal = (int)(i % 2);
    c->heads_q = 4;
    c->heads_kv = i % 3 == 2 ? 1 : 2;
    c->padded = (int)(i % 3 == 1);
    c->layout = i % 2 ? FCL_LAYOUT_BHSD : FCL_LAYOUT_BSHD;
    c->var = v;
}

fcl_dtype fa_out_dtype(const fa_case *c)
{
    if (fcl_dtype_size(c->dtype) != 1)
        return c->dtype;
    return c->var != NULL ? c->var->out_dtype : FCL_DTYPE_FP16;
}

size_t fa_head_dim_v(const fa_case *c)
{
    return c->var != NULL && c->var->head_dim_v != 0 ? c->var->head_dim_v : c->head_dim;
}

void fa_describe(const fa_case *c, char *buf, size_t n)
{
    snprintf(buf, n, "B=%zu Hq=%zu Hk=%zu Sq=%zu Sk=%zu d=%zu dv=%zu %s%s scale=%g %s%s seed=%llu",
             c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k, c->head_dim,
             fa_head_dim_v(c),
             fcl_dtype_name(c->dtype), c->causal ? " causal" : "", (double)c->scale,
             c->layout == FCL_LAYOUT_BSHD ? "bshd" : "bhsd",
             c->padded == 1 ? " padded" : c->padded ? " outputs padded" : "",
             (unsigned long long)c->seed);
    const fa_variants *v = c->var;
    if (v == NULL)
        return;
    size_t used = strlen(buf);
    snprintf(buf + used, n - used, " window=(%ld,%ld) softcap=%g alibi=%d dropout=%g%s block=%zux%zu@%.2f",
             v->window_left, v->window_right, (double)v->softcap, (int)v->alibi,
             (double)v->dropout_p, v->seqlens_q ? " varlen" : "", v->block_m, v->block_n,
             v->block_density);
    if (v->sinks || v->num_splits) {
        used = strlen(buf);
        snprintf(buf + used, n - used, "%s splits=%d", v->sinks ? " sinks" : "", v->num_splits);
    }
    if (fcl_dtype_size(c->dtype) == 1) {
        used = strlen(buf);
        snprintf(buf + used, n - used, " out=%s%s", fcl_dtype_name(v->out_dtype),
                 v->descales ? " descales" : "");
    }
}

static int report(const char *what, const fa_case *c, int ran, int ok, const fa_result *res)
{
    char buf[512];
    fa_describe(c, buf, sizeof buf);
    if (ran == 2) { /* said on every run: a device's refusals are part of its results */
        fprintf(stderr, "refused %s [%s]: %s, as its plan query predicted\n", what, buf,
                fa_accept_no_plan ? "no plan fits (or the loop limit)" : "the device's loop limit");
        return 1;
    }
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

/* ---- one case: inputs, descriptor, references, aux buffers ------------------- */

typedef struct case_state {
    const fa_case *c;
    double *q, *k, *v, *dout;      /* canonical, storage-rounded */
    double *q_ref, *k_ref, *v_ref; /* what the references read: FP8 values times their
                                      descales (q, k, v themselves without descales) */
    float *descale[3];             /* FP8 descales of Q, K, V, or NULL */
    size_t nq, nk, nlse;
    size_t no, nv;                 /* O / dO and V / dV elements (head_dim_v columns) */
    int *cu_q, *cu_k;              /* packed sequences, else NULL */
    float *slopes;                 /* ALiBi slopes as the device sees them */
    double *slopes_d;
    unsigned char *blocks;         /* block mask */
    float *sinks;                  /* attention sinks as the device sees them */
    double *sinks_d;
    fcl_attention_desc desc;
    ref_variants rvar;
    ref_problem prob;
    fcl_attention_aux aux;         /* device copies */
} case_state;

/* The strides of one tensor of a case: contiguous, with gaps and an odd
 * offset, or with even gaps and offset (none a multiple of 8). */
typedef enum { GAPS_NONE, GAPS_ODD, GAPS_EVEN } case_gaps;

/* The layout of a tensor of case c with D columns and gaps `pad`. */
static fcl_layout case_layout(const fa_case *c, case_gaps pad, size_t heads, size_t seqlen,
                              size_t D)
{
    if (pad == GAPS_EVEN) {
        fcl_layout l = fcl_layout_contiguous(FCL_LAYOUT_BSHD, heads, seqlen, D);
        l.stride_head = D + 2;
        l.stride_seq = heads * l.stride_head + 4;
        l.stride_batch = c->var && c->var->seqlens_q ? 0 : seqlen * l.stride_seq + 6;
        l.offset = 2;
        return l;
    }
    if (c->var && c->var->seqlens_q) { /* packed: (total, heads, dim) */
        fcl_layout l = fcl_layout_contiguous(FCL_LAYOUT_BSHD, heads, seqlen, D);
        l.stride_batch = 0;
        if (pad == GAPS_ODD) {
            l.stride_head = D + 3;
            l.stride_seq = heads * l.stride_head + 5;
            l.offset = 11;
        }
        return l;
    }
    fcl_layout l = fcl_layout_contiguous(c->layout, heads, seqlen, D);
    if (pad == GAPS_NONE)
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

static cl_mem device_copy(fcl_context *ctx, const void *host, size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              bytes, (void *)host, &err);
    return err == CL_SUCCESS ? m : NULL;
}

static int *prefix_sums(const int *lengths, size_t n)
{
    int *cu = malloc((n + 1) * sizeof *cu);
    cu[0] = 0;
    for (size_t i = 0; i < n; ++i)
        cu[i + 1] = cu[i] + lengths[i];
    return cu;
}

/* FP8 descales 2^u per (batch, head), u uniform in [-2, 2): on the device,
 * and multiplied into the references' copies of Q, K and V (canonical
 * (batch, heads, seq, dim) order: element n belongs to (batch, head)
 * n / (seqlen * head_dim), the descale's own index). */
static void init_descales(fcl_context *ctx, case_state *st, rng *r)
{
    const fa_case *c = st->c;
    const size_t heads[3] = {c->heads_q, c->heads_kv, c->heads_kv};
    const size_t per[3] = {c->seqlen_q * c->head_dim, c->seqlen_k * c->head_dim,
                           c->seqlen_k * fa_head_dim_v(c)};
    const size_t n[3] = {st->nq, st->nk, st->nv};
    const double *x[3] = {st->q, st->k, st->v};
    double *scaled[3];
    cl_mem *dev[3] = {&st->aux.descale_q, &st->aux.descale_k, &st->aux.descale_v};
    for (int t = 0; t < 3; ++t) {
        const size_t count = c->batch * heads[t];
        st->descale[t] = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; ++i)
            st->descale[t][i] = (float)exp2(4.0 * rng_uniform(r) - 2.0);
        scaled[t] = malloc(n[t] * sizeof(double));
        for (size_t i = 0; i < n[t]; ++i)
            scaled[t][i] = x[t][i] * (double)st->descale[t][i / per[t]];
        *dev[t] = device_copy(ctx, st->descale[t], count * sizeof(float));
    }
    st->q_ref = scaled[0], st->k_ref = scaled[1], st->v_ref = scaled[2];
}

static void case_init(fcl_context *ctx, const fa_case *c, case_state *st)
{
    memset(st, 0, sizeof *st);
    st->c = c;
    rng r = {c->seed * 7919u + 17u};
    st->nq = c->batch * c->heads_q * c->seqlen_q * c->head_dim;
    st->nk = c->batch * c->heads_kv * c->seqlen_k * c->head_dim;
    st->no = c->batch * c->heads_q * c->seqlen_q * fa_head_dim_v(c);
    st->nv = c->batch * c->heads_kv * c->seqlen_k * fa_head_dim_v(c);
    st->nlse = c->batch * c->heads_q * c->seqlen_q;
    double sc[3];
    for (int i = 0; i < 3; ++i)
        sc[i] = c->input_scale[i] != 0 ? c->input_scale[i] : 1.0;
    st->q = random_tensor(&r, st->nq, sc[0], c->dtype);
    st->k = random_tensor(&r, st->nk, sc[1], c->dtype);
    st->v = random_tensor(&r, st->nv, sc[2], c->dtype);
    st->dout = random_tensor(&r, st->no, 1.0, c->dtype);
    st->q_ref = st->q, st->k_ref = st->k, st->v_ref = st->v;

    fcl_attention_desc *d = &st->desc;
    fcl_attention_desc_init(d, c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k,
                            c->head_dim, c->dtype, c->layout);
    d->num_splits = c->var != NULL ? c->var->num_splits : 0;
    d->softmax_scale = c->scale;
    d->causal = c->causal;
    d->head_dim_v = fa_head_dim_v(c);
    const case_gaps in_pad = c->padded == 1 ? GAPS_ODD : GAPS_NONE;
    const case_gaps out_pad = c->padded == FA_OUTPUTS_EVEN ? GAPS_EVEN
                              : c->padded != 0             ? GAPS_ODD
                                                           : GAPS_NONE;
    const size_t Dv = fa_head_dim_v(c);
    d->q = case_layout(c, in_pad, c->heads_q, c->seqlen_q, c->head_dim);
    d->dout = case_layout(c, in_pad, c->heads_q, c->seqlen_q, Dv);
    d->k = case_layout(c, in_pad, c->heads_kv, c->seqlen_k, c->head_dim);
    d->v = case_layout(c, in_pad, c->heads_kv, c->seqlen_k, Dv);
    d->dq = case_layout(c, out_pad, c->heads_q, c->seqlen_q, c->head_dim);
    d->o = case_layout(c, out_pad, c->heads_q, c->seqlen_q, Dv);
    d->dk = case_layout(c, out_pad, c->heads_kv, c->seqlen_k, c->head_dim);
    d->dv = case_layout(c, out_pad, c->heads_kv, c->seqlen_k, Dv);
    d->lse_offset = c->padded ? 3 : 0;
    st->prob = (ref_problem){c->batch, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k,
                             c->head_dim, c->scale != 0 ? (double)c->scale : 1.0 / sqrt((double)c->head_dim),
                             c->causal, fa_out_dtype(c), NULL, fa_head_dim_v(c)};
    d->out_dtype = fa_out_dtype(c);
    const fa_variants *v = c->var;
    if (v == NULL)
        return;
    if (v->descales)
        init_descales(ctx, st, &r);
    ref_variants *rv = &st->rvar;
    st->prob.var = rv;
    rv->window_left = v->window_left;
    rv->window_right = v->window_right;
    d->window_left = v->window_left;
    d->window_right = v->window_right;
    rv->softcap = v->softcap;
    d->softcap = v->softcap;
    if (v->alibi != FCL_ALIBI_NONE) {
        const size_t n = v->alibi == FCL_ALIBI_PER_HEAD ? c->heads_q : c->batch * c->heads_q;
        st->slopes = malloc(n * sizeof *st->slopes);
        st->slopes_d = malloc(n * sizeof *st->slopes_d);
        for (size_t i = 0; i < n; ++i) {
            const size_t h = i % c->heads_q, b = i / c->heads_q;
            st->slopes[i] = (float)(pow(2.0, -8.0 * (double)(h + 1) / (double)c->heads_q) *
                                    (1.0 + 0.25 * (double)b));
            st->slopes_d[i] = st->slopes[i];
        }
        rv->alibi_slopes = st->slopes_d;
        rv->alibi_stride_b = v->alibi == FCL_ALIBI_PER_HEAD ? 0 : c->heads_q;
        d->alibi = v->alibi;
        st->aux.alibi_slopes = device_copy(ctx, st->slopes, n * sizeof(float));
    }
    rv->dropout_p = v->dropout_p;
    rv->dropout_seed = v->dropout_seed;
    rv->dropout_offset = v->dropout_offset;
    d->dropout_p = v->dropout_p;
    d->dropout_seed = v->dropout_seed;
    d->dropout_offset = v->dropout_offset;
    if (v->seqlens_q) {
        st->cu_q = prefix_sums(v->seqlens_q, c->batch);
        st->cu_k = prefix_sums(v->seqlens_k, c->batch);
        rv->cu_q = st->cu_q;
        rv->cu_k = st->cu_k;
        d->varlen = 1;
        d->total_q = (size_t)st->cu_q[c->batch];
        d->total_k = (size_t)st->cu_k[c->batch];
        d->lse_offset = c->padded ? 3 : 0;
        st->aux.cu_seqlens_q = device_copy(ctx, st->cu_q, (c->batch + 1) * sizeof(int));
        st->aux.cu_seqlens_k = device_copy(ctx, st->cu_k, (c->batch + 1) * sizeof(int));
    }
    if (v->block_m) {
        const size_t nbm = (c->seqlen_q + v->block_m - 1) / v->block_m;
        const size_t nbn = (c->seqlen_k + v->block_n - 1) / v->block_n;
        const size_t per = nbm * nbn, count = v->block_mask_shared ? 1 : c->batch * c->heads_q;
        st->blocks = malloc(per * count);
        for (size_t i = 0; i < per * count; ++i)
            st->blocks[i] = rng_uniform(&r) < v->block_density ? (unsigned char)(1 + i % 3) : 0;
        rv->block_mask = st->blocks;
        rv->block_m = d->block_m = v->block_m;
        rv->block_n = d->block_n = v->block_n;
        rv->block_stride_h = d->block_mask_stride_head = v->block_mask_shared ? 0 : per;
        rv->block_stride_b = d->block_mask_stride_batch = v->block_mask_shared ? 0 : per * c->heads_q;
        st->aux.block_mask = device_copy(ctx, st->blocks, per * count);
    }
    if (v->sinks) { /* drawn apart, so the other inputs stay those of the case without */
        rng rs = {c->seed * 104729u + 5u};
        st->sinks = malloc(c->heads_q * sizeof *st->sinks);
        st->sinks_d = malloc(c->heads_q * sizeof *st->sinks_d);
        for (size_t h = 0; h < c->heads_q; ++h) {
            st->sinks[h] = (float)(log((double)c->seqlen_k) + rng_normal(&rs));
            st->sinks_d[h] = st->sinks[h];
        }
        rv->sinks = st->sinks_d;
        d->sinks = 1;
        st->aux.sinks = device_copy(ctx, st->sinks, c->heads_q * sizeof(float));
    }
}

static void case_free(case_state *st)
{
    if (st->q_ref != st->q)
        free(st->q_ref), free(st->k_ref), free(st->v_ref);
    for (int i = 0; i < 3; ++i)
        free(st->descale[i]);
    free(st->q), free(st->k), free(st->v), free(st->dout);
    free(st->cu_q), free(st->cu_k), free(st->slopes), free(st->slopes_d), free(st->blocks);
    free(st->sinks), free(st->sinks_d);
    cl_mem aux[8] = {st->aux.alibi_slopes, st->aux.cu_seqlens_q, st->aux.cu_seqlens_k,
                     st->aux.block_mask,   st->aux.descale_q,    st->aux.descale_k,
                     st->aux.descale_v,    st->aux.sinks};
    for (int i = 0; i < 8; ++i)
        if (aux[i])
            clReleaseMemObject(aux[i]);
}

/* The forward's device tensors for a case. */
typedef struct fwd_buffers {
    dev_tensor q, k, v, o;
    dev_tensor lse; /* as a (B, Hq, Sq, 1) tensor at lse_offset */
} fwd_buffers;

static fcl_layout lse_layout(const case_state *st)
{
    const fa_case *c = st->c;
    if (st->cu_q) /* (heads_q, total_q) */
        return (fcl_layout){st->desc.lse_offset, 0, st->desc.total_q, 1};
    return (fcl_layout){st->desc.lse_offset, c->heads_q * c->seqlen_q, c->seqlen_q, 1};
}

static int make_forward_buffers(fcl_context *ctx, const case_state *st, fwd_buffers *fb)
{
    const fa_case *c = st->c;
    const fcl_attention_desc *d = &st->desc;
    const size_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim;
    const size_t Dv = fa_head_dim_v(c);
    return tensor_create(&fb->q, ctx, d->q, B, Hq, c->seqlen_q, D, st->cu_q, c->dtype, st->q) &&
           tensor_create(&fb->k, ctx, d->k, B, Hk, c->seqlen_k, D, st->cu_k, c->dtype, st->k) &&
           tensor_create(&fb->v, ctx, d->v, B, Hk, c->seqlen_k, Dv, st->cu_k, c->dtype, st->v) &&
           tensor_create(&fb->o, ctx, d->o, B, Hq, c->seqlen_q, Dv, st->cu_q, fa_out_dtype(c),
                         NULL) &&
           tensor_create(&fb->lse, ctx, lse_layout(st), B, Hq, c->seqlen_q, 1, st->cu_q,
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

/* ---- devices that end long loops (src/programs/loop_limit.c) ------------------ */

int fa_loop_refusals;
int fa_accept_no_plan;
int fa_no_plan_refusals;

/* Whether a call may be refused with s: the loop limit always (a device
 * without one never refuses so), no plan where the test has said so. */
static int refusal(fcl_status s)
{
    return s == FCL_ERROR_DEVICE_LOOP_LIMIT || (fa_accept_no_plan && s == FCL_ERROR_NO_PLAN);
}

fcl_status fa_refusal_prediction(fcl_context *ctx, const fcl_attention_desc *d, int backward)
{
    fcl_plan p;
    const fcl_status a =
        fcl_plan_query(ctx, d, backward ? FCL_KERNEL_BACKWARD_DQ : FCL_KERNEL_FORWARD, &p);
    const fcl_status b = backward ? fcl_plan_query(ctx, d, FCL_KERNEL_BACKWARD_DKDV, &p) : FCL_OK;
    return refusal(a) ? a : refusal(b) ? b : FCL_OK;
}

/* 1 if every byte of t (its guards included) is still the fill. */
static int untouched(fcl_context *ctx, const dev_tensor *t)
{
    if (t->mem == NULL)
        return 1;
    fa_result r;
    memset(&r, 0, sizeof r);
    double *out = malloc(t->batch * t->heads * t->seqlen * t->dim * sizeof *out);
    tensor_read(ctx, t, t->es == 4 ? FCL_DTYPE_FP32 : FCL_DTYPE_FP16, out, &r);
    free(out);
    size_t elems = 0;
    for (size_t i = 0; i < t->elems; ++i)
        elems += t->is_elem[i];
    return r.guard_bad == 0 && (size_t)r.unwritten == elems;
}

/* The status of a forward (backward) call that returned s: 1 when it ran,
 * 2 when it was refused (refusal()) exactly as its plan query predicted,
 * with its outputs untouched (the library's contract: refused, never
 * truncated); 0 otherwise, after printing why. */
static int call_outcome(fcl_context *ctx, const fcl_attention_desc *d, int backward, fcl_status s,
                        const dev_tensor *const *outs, int num_outs)
{
    const char *what = backward ? "backward" : "forward";
    const fcl_status predicted = fa_refusal_prediction(ctx, d, backward);
    if ((refusal(s) || refusal(predicted)) && s != predicted) {
        fprintf(stderr, "%s: %s, where its plan query says %s\n", what, fcl_status_string(s),
                fcl_status_string(predicted));
        return 0;
    }
    if (refusal(s)) {
        for (int i = 0; i < num_outs; ++i)
            if (!untouched(ctx, outs[i])) {
                fprintf(stderr, "%s: refused (%s), but an output was written\n", what,
                        fcl_status_string(s));
                return 0;
            }
        ++*(s == FCL_ERROR_NO_PLAN ? &fa_no_plan_refusals : &fa_loop_refusals);
        return 2;
    }
    if (s == FCL_OK)
        s = clFinish(fcl_context_cl_queue(ctx));
    if (s != FCL_OK) {
        fprintf(stderr, "%s: %s\n%s\n", what, fcl_status_string(s), fcl_context_build_log(ctx));
        return 0;
    }
    return 1;
}

static int run_forward(fcl_context *ctx, const case_state *st, fwd_buffers *fb)
{
    const fcl_status s = fcl_attention_forward_ex(ctx, &st->desc, &st->aux, fb->q.mem, fb->k.mem,
                                                  fb->v.mem, fb->o.mem, fb->lse.mem, 0, NULL, NULL);
    const dev_tensor *outs[2] = {&fb->o, &fb->lse};
    return call_outcome(ctx, &st->desc, 0, s, outs, 2);
}

/* The backward's extra tensors (dsinks: with sinks only). */
typedef struct bwd_buffers {
    dev_tensor dout, dq, dk, dv, dsinks;
} bwd_buffers;

static int make_backward_buffers(fcl_context *ctx, const case_state *st, bwd_buffers *bb)
{
    const fa_case *c = st->c;
    const fcl_attention_desc *d = &st->desc;
    const size_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim;
    const size_t Dv = fa_head_dim_v(c);
    return tensor_create(&bb->dout, ctx, d->dout, B, Hq, c->seqlen_q, Dv, st->cu_q, c->dtype,
                         st->dout) &&
           tensor_create(&bb->dq, ctx, d->dq, B, Hq, c->seqlen_q, D, st->cu_q, c->dtype, NULL) &&
           tensor_create(&bb->dk, ctx, d->dk, B, Hk, c->seqlen_k, D, st->cu_k, c->dtype, NULL) &&
           tensor_create(&bb->dv, ctx, d->dv, B, Hk, c->seqlen_k, Dv, st->cu_k, c->dtype, NULL) &&
           (st->sinks == NULL ||
            tensor_create(&bb->dsinks, ctx, (fcl_layout){0, 0, 0, 0}, 1, 1, 1, Hq, NULL,
                          FCL_DTYPE_FP32, NULL));
}

static void free_backward_buffers(bwd_buffers *bb)
{
    tensor_free(&bb->dout);
    tensor_free(&bb->dq);
    tensor_free(&bb->dk);
    tensor_free(&bb->dv);
    tensor_free(&bb->dsinks);
}

static int run_backward(fcl_context *ctx, const case_state *st, fwd_buffers *fb, bwd_buffers *bb)
{
    fcl_attention_aux aux = st->aux;
    aux.dsinks = bb->dsinks.mem;
    const fcl_status s = fcl_attention_backward_ex(
        ctx, &st->desc, &aux, fb->q.mem, fb->k.mem, fb->v.mem, fb->o.mem, fb->lse.mem,
        bb->dout.mem, bb->dq.mem, bb->dk.mem, bb->dv.mem, 0, NULL, NULL);
    const dev_tensor *outs[4] = {&bb->dq, &bb->dk, &bb->dv, &bb->dsinks};
    return call_outcome(ctx, &st->desc, 1, s, outs, 4);
}

/* Rows that see no key (causal with seqlen_q > seqlen_k): O = 0, LSE = +inf. */
static int check_masked_rows(const fa_case *c, const double *o, const double *lse)
{
    if (!c->causal || c->seqlen_q <= c->seqlen_k || c->var != NULL)
        return -1;
    const size_t masked = c->seqlen_q - c->seqlen_k, Dv = fa_head_dim_v(c);
    for (size_t bh = 0; bh < c->batch * c->heads_q; ++bh)
        for (size_t i = 0; i < masked; ++i) {
            if (!(isinf(lse[bh * c->seqlen_q + i]) && lse[bh * c->seqlen_q + i] > 0))
                return 0;
            for (size_t d = 0; d < Dv; ++d)
                if (o[(bh * c->seqlen_q + i) * Dv + d] != 0.0)
                    return 0;
        }
    return 1;
}

int fa_check_forward(fcl_context *ctx, const fa_case *c, fa_result *res)
{
    memset(res, 0, sizeof *res);
    case_state st;
    case_init(ctx, c, &st);
    fwd_buffers fb;
    memset(&fb, 0, sizeof fb);
    const int ran = make_forward_buffers(ctx, &st, &fb) ? run_forward(ctx, &st, &fb) : 0;
    int ok = ran != 0;
    if (ran == 1) {
        double *o = malloc(st.no * sizeof *o), *lse = malloc(st.nlse * sizeof *lse);
        double *o64 = malloc(st.no * sizeof *o), *lse64 = malloc(st.nlse * sizeof *lse);
        double *olp = malloc(st.no * sizeof *o), *lselp = malloc(st.nlse * sizeof *lse);
        tensor_read(ctx, &fb.o, fa_out_dtype(c), o, res);
        tensor_read(ctx, &fb.lse, FCL_DTYPE_FP32, lse, res);
        ref_forward_f64(&st.prob, st.q_ref, st.k_ref, st.v_ref, o64, lse64);
        unsigned char *vo = tensor_valid(&fb.o), *vl = tensor_valid(&fb.lse);
        const size_t terms = c->head_dim + c->seqlen_k;
        const int p_fp16 = c->var != NULL && c->var->p_fp16 && fa_out_dtype(c) == FCL_DTYPE_FP32;
        if (c->var != NULL && c->var->fp8_products) {
            /* olp and lselp hold the bounds instead */
            ref_forward_p8_bounds(&st.prob, st.q_ref, st.k_ref, st.v_ref, o64, FA_P8_EPS_S,
                                  FA_P8_EPS_P, olp, lselp);
            ok = fa_compare_bound("o", o, o64, olp, vo, st.no, 2.0, fa_out_dtype(c), res);
            ok = fa_compare_bound("lse", lse, lse64, lselp, vl, st.nlse, 2.0, FCL_DTYPE_FP32, res) &&
                 ok;
        } else {
            ref_forward_lowp(&st.prob, st.q_ref, st.k_ref, st.v_ref, olp, lselp);
            ok = fa_compare("o", o, olp, o64, NULL, vo, st.no, 2.0,
                            p_fp16 ? FCL_DTYPE_FP16 : fa_out_dtype(c), terms, res);
            ok = fa_compare("lse", lse, lselp, lse64, NULL, vl, st.nlse, 2.0, FCL_DTYPE_FP32,
                            terms, res) &&
                 ok;
        }
        res->masked_rows_ok = check_masked_rows(c, o, lse);
        ok = ok && res->masked_rows_ok != 0 && res->unwritten == 0 && res->guard_bad == 0 &&
             res->nonfinite == 0;
        free(o), free(lse), free(o64), free(lse64), free(olp), free(lselp), free(vo), free(vl);
    }
    free_forward_buffers(&fb);
    case_free(&st);
    return report("forward", c, ran, ok, res);
}

/* The sinks' gradient against the references (test_support.h's rule with
 * factor 3; the sum behind it has batch * seqlen_q terms of head_dim). */
static int check_dsinks(fcl_context *ctx, const case_state *st, const dev_tensor *t,
                        fa_result *res)
{
    const fa_case *c = st->c;
    const size_t H = c->heads_q;
    double *ours = malloc(H * sizeof *ours), *ref = malloc(H * sizeof *ref);
    double *lowp = malloc(H * sizeof *lowp), *mag = malloc(H * sizeof *mag);
    tensor_read(ctx, t, FCL_DTYPE_FP32, ours, res);
    ref_sinks_grad(&st->prob, st->q, st->k, st->v, st->dout, 0, ref, mag);
    ref_sinks_grad(&st->prob, st->q, st->k, st->v, st->dout, 1, lowp, NULL);
    unsigned char *valid = tensor_valid(t);
    const int ok = fa_compare("dsinks", ours, lowp, ref, mag, valid, H, 3.0, c->dtype,
                              c->batch * c->seqlen_q + c->head_dim, res);
    free(ours), free(ref), free(lowp), free(mag), free(valid);
    return ok;
}

int fa_check_backward(fcl_context *ctx, const fa_case *c, fa_result *res)
{
    memset(res, 0, sizeof *res);
    res->masked_rows_ok = -1;
    case_state st;
    case_init(ctx, c, &st);
    fwd_buffers fb;
    bwd_buffers bb;
    memset(&fb, 0, sizeof fb);
    memset(&bb, 0, sizeof bb);
    int ran = make_forward_buffers(ctx, &st, &fb) ? run_forward(ctx, &st, &fb) : 0;
    if (ran == 1)
        ran = make_backward_buffers(ctx, &st, &bb) ? run_backward(ctx, &st, &fb, &bb) : 0;
    int ok = ran != 0;
    if (ran == 1) {
        double *g[3], *g64[3], *glp[3];
        unsigned char *valid[3];
        const size_t n[3] = {st.nq, st.nk, st.nv};
        const dev_tensor *out[3] = {&bb.dq, &bb.dk, &bb.dv};
        for (int i = 0; i < 3; ++i) {
            g[i] = malloc(n[i] * sizeof(double));
            g64[i] = malloc(n[i] * sizeof(double));
            glp[i] = malloc(n[i] * sizeof(double));
            tensor_read(ctx, out[i], c->dtype, g[i], res);
            valid[i] = tensor_valid(out[i]);
        }
        ref_backward_f64(&st.prob, st.q, st.k, st.v, st.dout, g64[0], g64[1], g64[2]);
        ref_backward_lowp(&st.prob, st.q, st.k, st.v, st.dout, glp[0], glp[1], glp[2]);
        double *mag[3];
        for (int i = 0; i < 3; ++i)
            mag[i] = malloc(n[i] * sizeof *mag[i]);
        ref_backward_magnitudes(&st.prob, st.q, st.k, st.v, st.dout, mag[0], mag[1], mag[2]);
        static const char *names[3] = {"dq", "dk", "dv"};
        const size_t terms =
            c->head_dim + (c->seqlen_q > c->seqlen_k ? c->seqlen_q : c->seqlen_k);
        for (int i = 0; i < 3; ++i)
            ok = fa_compare(names[i], g[i], glp[i], g64[i], mag[i], valid[i], n[i], 3.0, c->dtype,
                         terms, res) && ok;
        if (st.sinks != NULL)
            ok = check_dsinks(ctx, &st, &bb.dsinks, res) && ok;
        ok = ok && res->unwritten == 0 && res->guard_bad == 0 && res->nonfinite == 0;
        for (int i = 0; i < 3; ++i)
            free(g[i]), free(g64[i]), free(glp[i]), free(valid[i]), free(mag[i]);
    }
    free_backward_buffers(&bb);
    free_forward_buffers(&fb);
    case_free(&st);
    return report("backward", c, ran, ok, res);
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
    return fa_check_same_after(ctx, c, backward, NULL, NULL);
}

int fa_check_same_after(fcl_context *ctx, const fa_case *c, int backward,
                        void (*between)(void *), void *arg)
{
    case_state st;
    case_init(ctx, c, &st);
    unsigned char *first[5] = {NULL, NULL, NULL, NULL, NULL};
    int same = 1;
    for (int rep = 0; rep < 2 && same; ++rep) {
        if (rep == 1 && between != NULL)
            between(arg);
        fwd_buffers fb;
        bwd_buffers bb;
        memset(&fb, 0, sizeof fb);
        memset(&bb, 0, sizeof bb);
        int ok = make_forward_buffers(ctx, &st, &fb) && run_forward(ctx, &st, &fb);
        const dev_tensor *outs[5] = {&fb.o, NULL, NULL, NULL, NULL};
        if (ok && backward) {
            ok = make_backward_buffers(ctx, &st, &bb) && run_backward(ctx, &st, &fb, &bb);
            outs[1] = &bb.dq, outs[2] = &bb.dk, outs[3] = &bb.dv;
            outs[4] = st.sinks != NULL ? &bb.dsinks : NULL;
        }
        for (int i = 0; i < 5 && ok; ++i) {
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
        free_backward_buffers(&bb);
        free_forward_buffers(&fb);
    }
    for (int i = 0; i < 5; ++i)
        free(first[i]);
    case_free(&st);
    return same;
}
