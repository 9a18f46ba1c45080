/* kvcache_support.c - see kvcache_support.h. */
#include "kvcache_support.h"

#include "internal.h"
#include "reference.h"
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double kv_get(const unsigned char *p, fcl_dtype dt) { return fa_get_value(p, dt); }

static unsigned char *random_bytes(rng *r, size_t n, fcl_dtype dt, size_t es)
{
    unsigned char *x = malloc(n * es);
    for (size_t i = 0; i < n; ++i)
        fa_put_value(x + i * es, dt, rng_normal(r));
    return x;
}

/* Element (b, s, h, c) of a (batch, seq, heads, dim) layout. */
static size_t at(const fcl_layout *l, size_t b, size_t s, size_t h, size_t c)
{
    return l->offset + b * l->stride_batch + s * l->stride_seq + h * l->stride_head + c;
}

/* Where key j of sequence b, head hk starts in the cache of layout l. */
static size_t cache_at(const kv_state *st, const fcl_layout *l, size_t b, size_t j, size_t hk)
{
    const fcl_kvcache_desc *d = &st->desc;
    if (d->page_size == 0)
        return at(l, b, j, hk, 0);
    const size_t page = (size_t)st->pages[b * d->page_table_stride + j / d->page_size];
    return at(l, page, j % d->page_size, hk, 0);
}

size_t kv_cache_at(const kv_state *st, size_t b, size_t j, size_t hk)
{
    return cache_at(st, &st->desc.k_cache, b, j, hk);
}

/* The same in the V cache (interleaved: K's + v_shift). */
static size_t v_cache_at(const kv_state *st, size_t b, size_t j, size_t hk)
{
    return cache_at(st, &st->desc.v_cache, b, j, hk);
}

/* How K and V are kept: two caches, one allocation with their pages
 * interleaved, or one shared cache whose rows' first head_dim_v columns are V
 * (fcl_kvcache_desc.shared_kv). */
enum { KV_TWO_CACHES = 0, KV_INTERLEAVED = 1, KV_SHARED = 2 };

static void kv_init_full(const kv_case *c, const kv_fp8 *fp8, int interleaved, size_t dv,
                         int sinks, const kv_rotary *rot, kv_state *st);

void kv_init(const kv_case *c, kv_state *st) { kv_init_full(c, NULL, 0, 0, 0, NULL, st); }
void kv_init_interleaved(const kv_case *c, kv_state *st) { kv_init_full(c, NULL, 1, 0, 0, NULL, st); }
void kv_init_sinks(const kv_case *c, kv_state *st) { kv_init_full(c, NULL, 0, 0, 1, NULL, st); }
void kv_init_shared(const kv_case *c, size_t head_dim_v, int sinks, kv_state *st)
{
    kv_init_full(c, NULL, KV_SHARED, head_dim_v, sinks, NULL, st);
}
void kv_init_fp8(const kv_case *c, const kv_fp8 *fp8, kv_state *st)
{
    kv_init_full(c, fp8, 0, 0, 0, NULL, st);
}
void kv_init_rotary(const kv_case *c, const kv_rotary *rot, kv_state *st)
{
    kv_init_full(c, NULL, 0, 0, 0, rot, st);
}

/* Rotary tables of random angles (kv_rotary). */
static void init_rotary_tables(rng *r, const kv_case *c, const kv_rotary *rot, kv_state *st)
{
    fcl_kvcache_desc *d = &st->desc;
    d->rotary_dim = rot->rotary_dim;
    d->rotary_interleaved = rot->interleaved;
    d->rotary_rows = c->capacity + 5;
    const size_t n = d->rotary_rows * (rot->rotary_dim / 2);
    st->rot_floats = n;
    st->rot_cos = malloc(n * sizeof *st->rot_cos);
    st->rot_sin = malloc(n * sizeof *st->rot_sin);
    for (size_t i = 0; i < n; ++i) {
        const double angle = 6.283185307179586 * rng_uniform(r); /* [0, 2 pi) */
        st->rot_cos[i] = (float)cos(angle);
        st->rot_sin[i] = (float)sin(angle);
    }
}

/* Row x[0 .. head_dim) of the storage type, rotated in float64 at position
 * pos into out (doubles). */
static void rotate_row(const kv_state *st, const unsigned char *x, long pos, double *out)
{
    const fcl_kvcache_desc *d = &st->desc;
    const size_t half = d->rotary_dim / 2, p = pos < 0 ? 0 : (size_t)pos;
    for (size_t c = 0; c < d->head_dim; ++c)
        out[c] = kv_get(x + c * st->es, d->dtype);
    ref_rotary(out, d->rotary_dim, d->rotary_interleaved, st->rot_cos + p * half,
               st->rot_sin + p * half);
}

/* Q as the scores use it: each row rotated at its position
 * max(T_b - seqlen_q + i, 0) and rounded to the storage type. */
static void init_rotated_q(const kv_case *c, kv_state *st)
{
    const fcl_kvcache_desc *d = &st->desc;
    double *row = malloc(c->head_dim * sizeof *row);
    st->q_ref = malloc(st->nq * st->es);
    memcpy(st->q_ref, st->q, st->nq * st->es);
    for (size_t b = 0; b < c->batch; ++b)
        for (size_t i = 0; i < c->seqlen_q; ++i)
            for (size_t h = 0; h < c->heads_q; ++h) {
                const long pos = (long)c->lens[b] + (long)c->seqlen_new - (long)c->seqlen_q + (long)i;
                const size_t e = at(&d->q, b, i, h, 0) * st->es;
                rotate_row(st, st->q + e, pos, row);
                for (size_t x = 0; x < c->head_dim; ++x)
                    fa_put_value(st->q_ref + e + x * st->es, c->dtype, row[x]);
            }
    free(row);
}

/* dv: head_dim_v, 0 for head_dim (interleaved caches only with that);
 * interleaved: one of KV_TWO_CACHES, KV_INTERLEAVED, KV_SHARED */
static void kv_init_full(const kv_case *c, const kv_fp8 *fp8, int interleaved, size_t dv, int sinks,
                         const kv_rotary *rot, kv_state *st)
{
    const int shared = interleaved == KV_SHARED;
    interleaved = interleaved == KV_INTERLEAVED;
    memset(st, 0, sizeof *st);
    rng r = {c->seed * 7919 + 13};
    fcl_kvcache_desc *d = &st->desc;
    fcl_kvcache_desc_init(d, c->batch, c->heads_q, c->heads_kv, c->head_dim, c->seqlen_q,
                          c->seqlen_new, c->dtype);
    st->dv = dv != 0 ? dv : c->head_dim;
    d->head_dim_v = st->dv;
    d->o = fcl_layout_contiguous(FCL_LAYOUT_BSHD, c->heads_q, c->seqlen_q, st->dv);
    d->v_new = fcl_layout_contiguous(FCL_LAYOUT_BSHD, c->heads_kv, c->seqlen_new, st->dv);
    d->causal = c->causal;
    d->window_left = c->window_left;
    d->softcap = c->softcap;
    d->alibi = c->alibi ? FCL_ALIBI_PER_HEAD : FCL_ALIBI_NONE;
    d->num_splits = c->num_splits;
    if (fp8 != NULL)
        d->out_dtype = fp8->out_dtype;
    st->out_dtype = fcl_dtype_size(c->dtype) == 1 ? d->out_dtype : c->dtype;
    st->p_fp16 = fp8 != NULL && fp8->p_fp16;
    st->es = fcl_dtype_size(c->dtype);
    st->oes = fcl_dtype_size(st->out_dtype);
    /* elements of one block: a page, or a contiguous cache's sequence */
    const size_t block = (c->page_size ? c->page_size : c->capacity) * c->heads_kv * c->head_dim;
    const size_t v_block = block / c->head_dim * st->dv;
    if (c->page_size == 0) {
        fcl_kvcache_desc_set_contiguous(d, c->capacity);
        st->npages = 0;
        st->ncache = c->batch * block;
        st->nvcache = c->batch * v_block;
    } else {
        const size_t per_seq = c->capacity / c->page_size;
        st->npages = c->batch * per_seq + 3; /* spare pages nobody owns */
        fcl_kvcache_desc_set_paged(d, st->npages, c->page_size, per_seq);
        d->page_table_stride = per_seq + 2; /* rows with a gap */
        st->ncache = st->npages * block;
        st->nvcache = st->npages * v_block;
        /* a shuffled permutation: pages in any order */
        int32_t *perm = malloc(st->npages * sizeof *perm);
        for (size_t i = 0; i < st->npages; ++i)
            perm[i] = (int32_t)i;
        for (size_t i = st->npages - 1; i > 0; --i) {
            const size_t j = rng_next(&r) % (i + 1);
            const int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        st->pages = malloc(c->batch * d->page_table_stride * sizeof *st->pages);
        for (size_t b = 0; b < c->batch; ++b)
            for (size_t p = 0; p < d->page_table_stride; ++p)
                st->pages[b * d->page_table_stride + p] =
                    p < per_seq ? perm[b * per_seq + p] : -7; /* the gap is never read */
        free(perm);
    }
    st->nq = c->batch * c->seqlen_q * c->heads_q * c->head_dim;
    st->no = c->batch * c->seqlen_q * c->heads_q * st->dv;
    st->nlse = c->batch * c->heads_q * c->seqlen_q;
    st->nnew = c->batch * c->seqlen_new * c->heads_kv * c->head_dim;
    if (interleaved) { /* one allocation, K and V blocks alternating */
        d->k_cache.stride_batch = d->v_cache.stride_batch = 2 * block;
        d->v_cache.offset = block;
        st->v_shift = block;
        st->ncache *= 2;
        st->nvcache = st->ncache;
    }
    if (shared) { /* V is K's rows' first dv columns: read through K's layout */
        d->shared_kv = 1;
        d->v_cache = d->k_cache;
        st->shared = 1;
        st->nvcache = st->ncache;
        interleaved = 1; /* one array for both, as below */
    }
    st->q = random_bytes(&r, st->nq, c->dtype, st->es);
    st->kc = random_bytes(&r, st->ncache, c->dtype, st->es);
    st->vc = interleaved ? st->kc : random_bytes(&r, st->nvcache, c->dtype, st->es);
    st->kn = random_bytes(&r, st->nnew ? st->nnew : 1, c->dtype, st->es);
    st->vn = random_bytes(&r, st->nnew ? st->nnew : 1, c->dtype, st->es);
    st->o = malloc(st->no * st->oes);
    memset(st->o, 0xA5, st->no * st->oes);
    st->lse = malloc(c->batch * c->heads_q * c->seqlen_q * sizeof(float));
    memset(st->lse, 0xA5, c->batch * c->heads_q * c->seqlen_q * sizeof(float));
    st->lens = malloc(c->batch * sizeof *st->lens);
    for (size_t b = 0; b < c->batch; ++b)
        st->lens[b] = c->lens[b];
    st->alibi = malloc(c->heads_q * sizeof *st->alibi);
    for (size_t h = 0; h < c->heads_q; ++h)
        st->alibi[h] = (float)ldexp(1.0, -(int)(h + 1));
    /* the caches as the call must leave them */
    st->kc_expect = malloc(st->ncache * st->es);
    st->vc_expect = interleaved ? st->kc_expect : malloc(st->nvcache * st->es);
    memcpy(st->kc_expect, st->kc, st->ncache * st->es);
    memcpy(st->vc_expect, st->vc, st->nvcache * st->es);
    if (rot != NULL && rot->rotary_dim > 0) {
        init_rotary_tables(&r, c, rot, st);
        init_rotated_q(c, st);
        st->k_rot = malloc((st->nnew ? st->nnew : 1) * sizeof *st->k_rot);
    }
    for (size_t b = 0; b < c->batch; ++b)
        for (size_t t = 0; t < c->seqlen_new; ++t)
            for (size_t hk = 0; hk < c->heads_kv; ++hk) {
                const size_t dst = kv_cache_at(st, b, (size_t)c->lens[b] + t, hk);
                const size_t vdst = v_cache_at(st, b, (size_t)c->lens[b] + t, hk);
                const size_t src = at(&d->k_new, b, t, hk, 0);
                memcpy(st->kc_expect + dst * st->es, st->kn + src * st->es, c->head_dim * st->es);
                if (st->k_rot != NULL) { /* rotated at L_b + t, rounded once */
                    rotate_row(st, st->kn + src * st->es, (long)c->lens[b] + (long)t,
                               st->k_rot + src);
                    for (size_t x = 0; x < c->head_dim; ++x)
                        fa_put_value(st->kc_expect + (dst + x) * st->es, c->dtype,
                                     st->k_rot[src + x]);
                }
                if (!shared) /* a shared cache's V is the K row just written */
                    memcpy(st->vc_expect + vdst * st->es,
                           st->vn + at(&d->v_new, b, t, hk, 0) * st->es, st->dv * st->es);
            }
    if (sinks) { /* about a sequence's log-sum-exp, drawn apart from the other inputs */
        rng rs = {c->seed * 104729u + 5u};
        st->sinks = malloc(c->heads_q * sizeof *st->sinks);
        for (size_t h = 0; h < c->heads_q; ++h)
            st->sinks[h] = (float)(log((double)c->capacity / 2 + 1) + rng_normal(&rs));
        d->sinks = 1;
    }
    if (fp8 != NULL && fp8->descales)
        for (int t = 0; t < 3; ++t) {
            const size_t n = c->batch * (t == 0 ? c->heads_q : c->heads_kv);
            st->descale[t] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; ++i)
                st->descale[t][i] = (float)exp2(4.0 * rng_uniform(&r) - 2.0);
        }
}

/* The descale of tensor t (0 Q, 1 K, 2 V) for (sequence b, head h). */
static double descale_of(const kv_state *st, int t, size_t b, size_t heads, size_t h)
{
    return st->descale[t] != NULL ? (double)st->descale[t][b * heads + h] : 1.0;
}

void kv_free(kv_state *st)
{
    free(st->q);
    if (st->vc != st->kc)
        free(st->vc);
    free(st->kc);
    free(st->kn);
    free(st->vn);
    free(st->o);
    free(st->lse);
    free(st->lens);
    free(st->pages);
    free(st->alibi);
    free(st->sinks);
    if (st->vc_expect != st->kc_expect)
        free(st->vc_expect);
    free(st->kc_expect);
    for (int t = 0; t < 3; ++t)
        free(st->descale[t]);
    free(st->rot_cos);
    free(st->rot_sin);
    free(st->q_ref);
    free(st->k_rot);
}

/* Whether a rotated element the call computed is its float64 rotation
 * `exact` up to one rounding of an fp32 value (products and a sum of terms
 * of at most row_max) to the storage type, and fp16's subnormal step. */
static int rotated_close(const kv_state *st, const unsigned char *got, double exact,
                         double row_max, const char *what, size_t b, size_t row, size_t h,
                         size_t x)
{
    const double tol = 2.0 * unit_roundoff(st->desc.dtype) * fabs(exact) +
                       ldexp(1.0, -21) * row_max + ldexp(1.0, -24);
    const double v = kv_get(got, st->desc.dtype);
    if (fabs(v - exact) <= tol)
        return 1;
    printf("kvcache rotary: %s of sequence %zu row %zu head %zu column %zu is %g, float64 "
           "rotation %g\n", what, b, row, h, x, v, exact);
    return 0;
}

/* The largest magnitude of a row of head_dim stored values. */
static double row_max_of(const kv_state *st, const unsigned char *x)
{
    double m = 0;
    for (size_t c = 0; c < st->desc.head_dim; ++c)
        m = fmax(m, fabs(kv_get(x + c * st->es, st->desc.dtype)));
    return m;
}

/* The appended K rows (kv_adopt_rotation). */
static int adopt_rotated_keys(kv_state *st)
{
    const fcl_kvcache_desc *d = &st->desc;
    int ok = 1;
    for (size_t b = 0; b < d->batch; ++b)
        for (size_t t = 0; t < d->seqlen_new; ++t)
            for (size_t hk = 0; hk < d->heads_kv; ++hk) {
                const size_t dst = kv_cache_at(st, b, (size_t)st->lens[b] + t, hk);
                const size_t src = at(&d->k_new, b, t, hk, 0);
                const double row_max = row_max_of(st, st->kn + src * st->es);
                for (size_t x = 0; x < d->head_dim && ok; ++x)
                    ok = rotated_close(st, st->kc + (dst + x) * st->es, st->k_rot[src + x],
                                       row_max, "K", b, t, hk, x);
                memcpy(st->kc_expect + dst * st->es, st->kc + dst * st->es, d->head_dim * st->es);
            }
    return ok;
}

/* Q as the call rotated it (kv_adopt_rotation). */
static int adopt_rotated_q(fcl_context *ctx, kv_state *st)
{
    const fcl_kvcache_desc *d = &st->desc;
    const size_t D = d->head_dim;
    unsigned char *got = malloc(st->nq * st->es);
    double *exact = malloc(D * sizeof *exact);
    int ok = fcl_debug_read_rotated_q(ctx, got, st->nq * st->es) == FCL_OK;
    for (size_t b = 0; b < d->batch && ok; ++b)
        for (size_t i = 0; i < d->seqlen_q; ++i)
            for (size_t h = 0; h < d->heads_q; ++h) {
                const long pos = (long)st->lens[b] + (long)d->seqlen_new - (long)d->seqlen_q + (long)i;
                const unsigned char *row = got + ((b * d->seqlen_q + i) * d->heads_q + h) * D * st->es;
                const size_t e = at(&d->q, b, i, h, 0) * st->es;
                rotate_row(st, st->q + e, pos, exact);
                const double row_max = row_max_of(st, st->q + e);
                for (size_t x = 0; x < D && ok; ++x)
                    ok = rotated_close(st, row + x * st->es, exact[x], row_max, "Q", b, i, h, x);
                memcpy(st->q_ref + e, row, D * st->es);
            }
    free(got);
    free(exact);
    return ok;
}

int kv_adopt_rotation(fcl_context *ctx, kv_state *st)
{
    if (st->k_rot == NULL)
        return 1;
    const int keys_ok = adopt_rotated_keys(st);
    return adopt_rotated_q(ctx, st) && keys_ok;
}

fcl_kvcache_host kv_host_arrays(kv_state *st)
{
    fcl_kvcache_host a = {.q = st->q,
                          .k_cache = st->kc,
                          .v_cache = st->shared ? NULL : st->vc,
                          .cache_seqlens = st->lens,
                          .page_table = st->pages,
                          .k_new = st->kn,
                          .v_new = st->shared ? NULL : st->vn,
                          .alibi_slopes = st->alibi,
                          .o = st->o,
                          .lse = st->lse,
                          .descale_q = st->descale[0],
                          .descale_k = st->descale[1],
                          .descale_v = st->descale[2],
                          .sinks = st->sinks,
                          .rotary_cos = st->rot_cos,
                          .rotary_sin = st->rot_sin};
    return a;
}

/* Compares O and LSE with the reference of each sequence's first T_b keys
 * of the expected caches; 1 on pass. */
int kv_check_outputs(const kv_case *c, const kv_state *st, const char *what)
{
    const fcl_kvcache_desc *d = &st->desc;
    const size_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim, Sq = c->seqlen_q;
    const size_t Dv = st->dv;
    size_t tmax = 1;
    int *cu_q = malloc((B + 1) * sizeof *cu_q), *cu_k = malloc((B + 1) * sizeof *cu_k);
    cu_q[0] = cu_k[0] = 0;
    for (size_t b = 0; b < B; ++b) {
        const size_t T = (size_t)c->lens[b] + c->seqlen_new;
        tmax = T > tmax ? T : tmax;
        cu_q[b + 1] = cu_q[b] + (int)Sq;
        cu_k[b + 1] = cu_k[b] + (int)T;
    }
    /* reference arrays: (batch, heads, seq, dim), keys padded to tmax */
    double *q = calloc(B * Hq * Sq * D, sizeof *q), *k = calloc(B * Hk * tmax * D, sizeof *k);
    double *v = calloc(B * Hk * tmax * Dv, sizeof *v);
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < Hq; ++h)
            for (size_t i = 0; i < Sq; ++i)
                for (size_t x = 0; x < D; ++x)
                    q[((b * Hq + h) * Sq + i) * D + x] =
                        kv_get((st->q_ref ? st->q_ref : st->q) + at(&d->q, b, i, h, x) * st->es,
                               c->dtype) *
                        descale_of(st, 0, b, Hq, h);
    for (size_t b = 0; b < B; ++b)
        for (size_t hk = 0; hk < Hk; ++hk)
            for (size_t j = 0; j < (size_t)(cu_k[b + 1] - cu_k[b]); ++j)
                for (size_t x = 0; x < D; ++x) {
                    const size_t e = (kv_cache_at(st, b, j, hk) + x) * st->es;
                    k[((b * Hk + hk) * tmax + j) * D + x] =
                        kv_get(st->kc_expect + e, c->dtype) * descale_of(st, 1, b, Hk, hk);
                    if (x < Dv)
                        v[((b * Hk + hk) * tmax + j) * Dv + x] =
                            kv_get(st->vc_expect + (v_cache_at(st, b, j, hk) + x) * st->es,
                                   c->dtype) * descale_of(st, 2, b, Hk, hk);
                }
    double slopes[128];
    for (size_t h = 0; h < Hq && h < 128; ++h)
        slopes[h] = st->alibi[h];
    double sinks[128];
    for (size_t h = 0; h < Hq && h < 128 && st->sinks != NULL; ++h)
        sinks[h] = st->sinks[h];
    ref_variants rv = {c->window_left, -1, c->softcap, c->alibi ? slopes : NULL, 0, 0, 0, 0,
                       cu_q, cu_k, NULL, 0, 0, 0, 0, st->sinks != NULL ? sinks : NULL};
    const double scale = (double)(float)(1.0 / sqrt((double)D)); /* the default, as the library rounds it */
    ref_problem p = {B, Hq, Hk, Sq, tmax, D, scale, c->causal, st->out_dtype, &rv, Dv};
    const size_t no = B * Hq * Sq * Dv, nl = B * Hq * Sq;
    double *o64 = malloc(no * sizeof *o64), *olp = malloc(no * sizeof *olp);
    double *l64 = malloc(nl * sizeof *l64), *llp = malloc(nl * sizeof *llp);
    double *ours = malloc(no * sizeof *ours), *lours = malloc(nl * sizeof *lours);
    ref_forward_f64(&p, q, k, v, o64, l64);
    ref_forward_lowp(&p, q, k, v, olp, llp);
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < Hq; ++h)
            for (size_t i = 0; i < Sq; ++i) {
                for (size_t x = 0; x < Dv; ++x)
                    ours[((b * Hq + h) * Sq + i) * Dv + x] =
                        kv_get(st->o + at(&d->o, b, i, h, x) * st->oes, st->out_dtype);
                lours[(b * Hq + h) * Sq + i] = st->lse[(b * Hq + h) * Sq + i];
            }
    unsigned char *valid = malloc(no);
    memset(valid, 1, no);
    fa_result res;
    memset(&res, 0, sizeof res);
    /* FP8: the output type's rounding (test_support.h) */
    const fcl_dtype o_tol =
        st->p_fp16 && st->out_dtype == FCL_DTYPE_FP32 ? FCL_DTYPE_FP16 : st->out_dtype;
    int ok = fa_compare("o", ours, olp, o64, NULL, valid, no, 2.0, o_tol, D + tmax, &res);
    ok = fa_compare("lse", lours, llp, l64, NULL, valid, nl, 2.0, FCL_DTYPE_FP32, D + tmax, &res) && ok;
    ok = ok && res.nonfinite == 0;
    if (!ok)
        printf("kvcache %s: B=%zu Hq=%zu Hk=%zu d=%zu sq=%zu new=%zu %s page=%zu cap=%zu causal=%d "
               "window=%ld softcap=%g alibi=%d splits=%d sinks=%d: %s err %.3g (lowp %.3g, tol %.3g), "
               "nonfinite %d\n",
               what, B, Hq, Hk, D, Sq, c->seqlen_new, fcl_dtype_name(c->dtype), c->page_size,
               c->capacity, c->causal, c->window_left, c->softcap, c->alibi, c->num_splits,
               st->sinks != NULL, res.worst ? res.worst : "?", res.err, res.err_lowp, res.tol, res.nonfinite);
    free(cu_q);
    free(cu_k);
    free(q);
    free(k);
    free(v);
    free(o64);
    free(olp);
    free(l64);
    free(llp);
    free(ours);
    free(lours);
    free(valid);
    return ok;
}

/* Runs a case through the host call; checks caches, outputs, and that a
 * second run from the same inputs is bitwise the same. */
static int kv_run_full(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8, int interleaved,
                       size_t dv, int sinks, const kv_rotary *rot);

int kv_run(fcl_context *ctx, const kv_case *c) { return kv_run_full(ctx, c, NULL, 0, 0, 0, NULL); }
int kv_run_sinks(fcl_context *ctx, const kv_case *c)
{
    return kv_run_full(ctx, c, NULL, 0, 0, 1, NULL);
}
int kv_run_fp8(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8)
{
    return kv_run_full(ctx, c, fp8, 0, 0, 0, NULL);
}
int kv_run_interleaved(fcl_context *ctx, const kv_case *c)
{
    return kv_run_full(ctx, c, NULL, 1, 0, 0, NULL);
}
int kv_run_value_dim(fcl_context *ctx, const kv_case *c, size_t head_dim_v)
{
    return kv_run_full(ctx, c, NULL, 0, head_dim_v, 0, NULL);
}
int kv_run_rotary(fcl_context *ctx, const kv_case *c, const kv_rotary *rot)
{
    return kv_run_full(ctx, c, NULL, 0, 0, 0, rot);
}
int kv_run_shared(fcl_context *ctx, const kv_case *c, size_t head_dim_v, int sinks)
{
    return kv_run_full(ctx, c, NULL, KV_SHARED, head_dim_v, sinks, NULL);
}

static int kv_run_full(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8, int interleaved,
                       size_t dv, int sinks, const kv_rotary *rot)
{
    kv_state st;
    kv_init_full(c, fp8, interleaved, dv, sinks, rot, &st);
    const size_t cache_bytes = st.ncache * st.es, vcache_bytes = st.nvcache * st.es;
    unsigned char *kc0 = malloc(cache_bytes), *vc0 = malloc(vcache_bytes);
    memcpy(kc0, st.kc, cache_bytes);
    memcpy(vc0, st.vc, vcache_bytes);
    fcl_kvcache_host a = kv_host_arrays(&st);
    const size_t out_bytes = st.no * st.oes; /* O has head_dim_v columns */
    unsigned char *o0 = malloc(out_bytes);
    memcpy(o0, st.o, out_bytes);
    fcl_status s = fcl_attention_kvcache_host(ctx, &st.desc, &a);
    if (s == FCL_ERROR_DEVICE_LOOP_LIMIT) {
        /* a device that ends long loops (loop_limit.c): a refusal passes when
         * the plan query predicts it and nothing was written */
        fcl_plan p;
        const fcl_status predicted = fcl_kvcache_plan_query(ctx, &st.desc, &p);
        const int k_kept = memcmp(st.kc, kc0, cache_bytes) == 0,
                  v_kept = memcmp(st.vc, vc0, vcache_bytes) == 0,
                  o_kept = memcmp(st.o, o0, out_bytes) == 0;
        const int ok = predicted == s && k_kept && v_kept && o_kept;
        if (!ok)
            printf("kvcache: plan query %s; K cache %s, V cache %s, O %s\n",
                   fcl_status_string(predicted), k_kept ? "untouched" : "written",
                   v_kept ? "untouched" : "written", o_kept ? "untouched" : "written");
        printf("kvcache: %s (B=%zu d=%zu sq=%zu new=%zu %s page=%zu cap=%zu)%s\n",
               fcl_status_string(s), c->batch, c->head_dim, c->seqlen_q, c->seqlen_new,
               fcl_dtype_name(c->dtype), c->page_size, c->capacity,
               ok ? ": refused as its plan query predicts, nothing written"
                  : ": NOT predicted by the plan query, or an output written");
        free(o0);
        free(kc0);
        free(vc0);
        kv_free(&st);
        if (ok)
            ++fa_loop_refusals;
        return ok;
    }
    free(o0);
    int ok = s == FCL_OK;
    if (!ok)
        printf("kvcache: status %s\n%s", fcl_status_string(s), fcl_context_build_log(ctx));
    ok = ok && kv_adopt_rotation(ctx, &st);
    if (ok && (memcmp(st.kc, st.kc_expect, cache_bytes) != 0 ||
               memcmp(st.vc, st.vc_expect, vcache_bytes) != 0)) {
        printf("kvcache: the caches after the call are not as expected\n");
        ok = 0;
    }
    ok = ok && kv_check_outputs(c, &st, "host");
    if (ok) { /* again from the original caches: bitwise the same */
        unsigned char *o1 = malloc(st.no * st.oes);
        float *l1 = malloc(c->batch * c->heads_q * c->seqlen_q * sizeof *l1);
        memcpy(o1, st.o, st.no * st.oes);
        memcpy(l1, st.lse, c->batch * c->heads_q * c->seqlen_q * sizeof *l1);
        memcpy(st.kc, kc0, cache_bytes);
        memcpy(st.vc, vc0, vcache_bytes);
        ok = fcl_attention_kvcache_host(ctx, &st.desc, &a) == FCL_OK &&
             memcmp(o1, st.o, st.no * st.oes) == 0 &&
             memcmp(l1, st.lse, c->batch * c->heads_q * c->seqlen_q * sizeof *l1) == 0;
        if (!ok)
            printf("kvcache: a second run differs\n");
        free(o1);
        free(l1);
    }
    free(kc0);
    free(vc0);
    kv_free(&st);
    return ok;
}


/* A buffer holding a copy of `bytes` at host; *err keeps the first error. */
static cl_mem buffer_of(cl_context clx, const void *host, size_t bytes, cl_int *err)
{
    cl_int e = CL_SUCCESS;
    cl_mem m = clCreateBuffer(clx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)host, &e);
    if (*err == CL_SUCCESS)
        *err = e;
    return m;
}

fcl_status kv_run_on_buffers(fcl_context *ctx, kv_state *st, size_t sinks_missing)
{
    cl_context clx = fcl_context_cl_context(ctx);
    cl_command_queue queue = fcl_context_cl_queue(ctx);
    const fcl_kvcache_desc *d = &st->desc;
    const size_t cache_bytes = st->ncache * st->es, o_bytes = st->no * st->oes;
    const size_t lse_bytes = st->nlse * sizeof(float);
    const size_t table_bytes = d->page_size ? d->batch * d->page_table_stride * sizeof(int32_t) : 4;
    const size_t new_bytes = (st->nnew ? st->nnew : 1) * st->es;
    cl_int err = CL_SUCCESS;
#define BUF(ptr, bytes) buffer_of(clx, (ptr), (bytes), &err)
    cl_mem kc = BUF(st->kc, cache_bytes);
    cl_mem vc = st->shared ? NULL : st->vc == st->kc ? kc : BUF(st->vc, cache_bytes);
    const size_t rot_bytes = st->rot_floats * sizeof(float);
    cl_mem q = BUF(st->q, st->nq * st->es);
    cl_mem lens = BUF(st->lens, d->batch * sizeof(int32_t));
    cl_mem pages = d->page_size ? BUF(st->pages, table_bytes) : NULL;
    cl_mem kn = BUF(st->kn, new_bytes);
    cl_mem vn = st->shared ? NULL : BUF(st->vn, new_bytes);
    cl_mem alibi = d->alibi != FCL_ALIBI_NONE ? BUF(st->alibi, d->heads_q * sizeof(float)) : NULL;
    cl_mem o = BUF(st->o, o_bytes);
    cl_mem lse = BUF(st->lse, lse_bytes);
    cl_mem sinks = st->sinks ? BUF(st->sinks, (d->heads_q - sinks_missing) * sizeof(float)) : NULL;
    cl_mem rcos = st->rot_cos ? BUF(st->rot_cos, rot_bytes) : NULL;
    cl_mem rsin = st->rot_sin ? BUF(st->rot_sin, rot_bytes) : NULL;
#undef BUF
    const fcl_kvcache_buffers b = {.q = q, .k_cache = kc, .v_cache = vc, .cache_seqlens = lens,
                                   .page_table = pages, .k_new = kn, .v_new = vn,
                                   .alibi_slopes = alibi, .o = o, .lse = lse, .sinks = sinks,
                                   .rotary_cos = rcos, .rotary_sin = rsin};
    fcl_status status = err != CL_SUCCESS ? err : fcl_attention_kvcache(ctx, d, &b, 0, NULL, NULL);
    if (status == FCL_OK)
        status = clEnqueueReadBuffer(queue, o, CL_TRUE, 0, o_bytes, st->o, 0, NULL, NULL);
    if (status == FCL_OK)
        status = clEnqueueReadBuffer(queue, lse, CL_TRUE, 0, lse_bytes, st->lse, 0, NULL, NULL);
    if (status == FCL_OK)
        status = clEnqueueReadBuffer(queue, kc, CL_TRUE, 0, cache_bytes, st->kc, 0, NULL, NULL);
    if (status == FCL_OK && vc != NULL && vc != kc)
        status = clEnqueueReadBuffer(queue, vc, CL_TRUE, 0, cache_bytes, st->vc, 0, NULL, NULL);
    cl_mem all[] = {q,  kc, vc != kc ? vc : NULL, lens, pages, kn, vn,
                    o,  lse, rcos, rsin, alibi, sinks};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (all[i] != NULL)
            clReleaseMemObject(all[i]);
    return status;
}
