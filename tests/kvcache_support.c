/* kvcache_support.c - see kvcache_support.h. */
#include "kvcache_support.h"

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

/* Where key j of sequence b, head hk starts in the cache. */
size_t kv_cache_at(const kv_state *st, size_t b, size_t j, size_t hk)
{
    const fcl_kvcache_desc *d = &st->desc;
    if (d->page_size == 0)
        return at(&d->k_cache, b, j, hk, 0);
    const size_t page = (size_t)st->pages[b * d->page_table_stride + j / d->page_size];
    return at(&d->k_cache, page, j % d->page_size, hk, 0);
}

static void kv_init_full(const kv_case *c, const kv_fp8 *fp8, int interleaved, kv_state *st);

void kv_init(const kv_case *c, kv_state *st) { kv_init_full(c, NULL, 0, st); }
void kv_init_interleaved(const kv_case *c, kv_state *st) { kv_init_full(c, NULL, 1, st); }
void kv_init_fp8(const kv_case *c, const kv_fp8 *fp8, kv_state *st)
{
    kv_init_full(c, fp8, 0, st);
}

static void kv_init_full(const kv_case *c, const kv_fp8 *fp8, int interleaved, kv_state *st)
{
    memset(st, 0, sizeof *st);
    rng r = {c->seed * 7919 + 13};
    fcl_kvcache_desc *d = &st->desc;
    fcl_kvcache_desc_init(d, c->batch, c->heads_q, c->heads_kv, c->head_dim, c->seqlen_q,
                          c->seqlen_new, c->dtype);
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
    if (c->page_size == 0) {
        fcl_kvcache_desc_set_contiguous(d, c->capacity);
        st->npages = 0;
        st->ncache = c->batch * block;
    } else {
        const size_t per_seq = c->capacity / c->page_size;
        st->npages = c->batch * per_seq + 3; /* spare pages nobody owns */
        fcl_kvcache_desc_set_paged(d, st->npages, c->page_size, per_seq);
        d->page_table_stride = per_seq + 2; /* rows with a gap */
        st->ncache = st->npages * block;
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
    st->nlse = c->batch * c->heads_q * c->seqlen_q;
    st->nnew = c->batch * c->seqlen_new * c->heads_kv * c->head_dim;
    if (interleaved) { /* one allocation, K and V blocks alternating */
        d->k_cache.stride_batch = d->v_cache.stride_batch = 2 * block;
        d->v_cache.offset = block;
        st->v_shift = block;
        st->ncache *= 2;
    }
    st->q = random_bytes(&r, st->nq, c->dtype, st->es);
    st->kc = random_bytes(&r, st->ncache, c->dtype, st->es);
    st->vc = interleaved ? st->kc : random_bytes(&r, st->ncache, c->dtype, st->es);
    st->kn = random_bytes(&r, st->nnew ? st->nnew : 1, c->dtype, st->es);
    st->vn = random_bytes(&r, st->nnew ? st->nnew : 1, c->dtype, st->es);
    st->o = malloc(st->nq * st->oes);
    memset(st->o, 0xA5, st->nq * st->oes);
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
    st->vc_expect = interleaved ? st->kc_expect : malloc(st->ncache * st->es);
    memcpy(st->kc_expect, st->kc, st->ncache * st->es);
    memcpy(st->vc_expect, st->vc, st->ncache * st->es);
    for (size_t b = 0; b < c->batch; ++b)
        for (size_t t = 0; t < c->seqlen_new; ++t)
            for (size_t hk = 0; hk < c->heads_kv; ++hk) {
                const size_t dst = kv_cache_at(st, b, (size_t)c->lens[b] + t, hk);
                const size_t src = at(&d->k_new, b, t, hk, 0);
                memcpy(st->kc_expect + dst * st->es, st->kn + src * st->es, c->head_dim * st->es);
                memcpy(st->vc_expect + (dst + st->v_shift) * st->es, st->vn + src * st->es,
                       c->head_dim * st->es);
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
    if (st->vc_expect != st->kc_expect)
        free(st->vc_expect);
    free(st->kc_expect);
    for (int t = 0; t < 3; ++t)
        free(st->descale[t]);
}

fcl_kvcache_host kv_host_arrays(kv_state *st)
{
    fcl_kvcache_host a = {st->q,     st->kc,          st->vc,          st->lens,
                          st->pages, st->kn,          st->vn,          st->alibi,
                          st->o,     st->lse,         st->descale[0], st->descale[1],
                          st->descale[2]};
    return a;
}

/* Compares O and LSE with the reference of each sequence's first T_b keys
 * of the expected caches; 1 on pass. */
int kv_check_outputs(const kv_case *c, const kv_state *st, const char *what)
{
    const fcl_kvcache_desc *d = &st->desc;
    const size_t B = c->batch, Hq = c->heads_q, Hk = c->heads_kv, D = c->head_dim, Sq = c->seqlen_q;
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
    double *v = calloc(B * Hk * tmax * D, sizeof *v);
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < Hq; ++h)
            for (size_t i = 0; i < Sq; ++i)
                for (size_t x = 0; x < D; ++x)
                    q[((b * Hq + h) * Sq + i) * D + x] =
                        kv_get(st->q + at(&d->q, b, i, h, x) * st->es, c->dtype) *
                        descale_of(st, 0, b, Hq, h);
    for (size_t b = 0; b < B; ++b)
        for (size_t hk = 0; hk < Hk; ++hk)
            for (size_t j = 0; j < (size_t)(cu_k[b + 1] - cu_k[b]); ++j)
                for (size_t x = 0; x < D; ++x) {
                    const size_t e = (kv_cache_at(st, b, j, hk) + x) * st->es;
                    k[((b * Hk + hk) * tmax + j) * D + x] =
                        kv_get(st->kc_expect + e, c->dtype) * descale_of(st, 1, b, Hk, hk);
                    v[((b * Hk + hk) * tmax + j) * D + x] =
                        kv_get(st->vc_expect + e + st->v_shift * st->es, c->dtype) *
                        descale_of(st, 2, b, Hk, hk);
                }
    double slopes[64];
    for (size_t h = 0; h < Hq && h < 64; ++h)
        slopes[h] = st->alibi[h];
    ref_variants rv = {c->window_left, -1, c->softcap, c->alibi ? slopes : NULL, 0, 0, 0, 0,
                       cu_q, cu_k, NULL, 0, 0, 0, 0};
    const double scale = (double)(float)(1.0 / sqrt((double)D)); /* the default, as the library rounds it */
    ref_problem p = {B, Hq, Hk, Sq, tmax, D, scale, c->causal, st->out_dtype, &rv};
    const size_t no = B * Hq * Sq * D, nl = B * Hq * Sq;
    double *o64 = malloc(no * sizeof *o64), *olp = malloc(no * sizeof *olp);
    double *l64 = malloc(nl * sizeof *l64), *llp = malloc(nl * sizeof *llp);
    double *ours = malloc(no * sizeof *ours), *lours = malloc(nl * sizeof *lours);
    ref_forward_f64(&p, q, k, v, o64, l64);
    ref_forward_lowp(&p, q, k, v, olp, llp);
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < Hq; ++h)
            for (size_t i = 0; i < Sq; ++i) {
                for (size_t x = 0; x < D; ++x)
                    ours[((b * Hq + h) * Sq + i) * D + x] =
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
               "window=%ld softcap=%g alibi=%d splits=%d: %s err %.3g (lowp %.3g, tol %.3g), "
               "nonfinite %d\n",
               what, B, Hq, Hk, D, Sq, c->seqlen_new, fcl_dtype_name(c->dtype), c->page_size,
               c->capacity, c->causal, c->window_left, c->softcap, c->alibi, c->num_splits,
               res.worst ? res.worst : "?", res.err, res.err_lowp, res.tol, res.nonfinite);
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
static int kv_run_full(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8, int interleaved);

int kv_run(fcl_context *ctx, const kv_case *c) { return kv_run_full(ctx, c, NULL, 0); }
int kv_run_fp8(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8)
{
    return kv_run_full(ctx, c, fp8, 0);
}
int kv_run_interleaved(fcl_context *ctx, const kv_case *c) { return kv_run_full(ctx, c, NULL, 1); }

static int kv_run_full(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8, int interleaved)
{
    kv_state st;
    kv_init_full(c, fp8, interleaved, &st);
    const size_t cache_bytes = st.ncache * st.es;
    unsigned char *kc0 = malloc(cache_bytes), *vc0 = malloc(cache_bytes);
    memcpy(kc0, st.kc, cache_bytes);
    memcpy(vc0, st.vc, cache_bytes);
    fcl_kvcache_host a = kv_host_arrays(&st);
    const size_t out_bytes = st.nq * st.oes;
    unsigned char *o0 = malloc(out_bytes);
    memcpy(o0, st.o, out_bytes);
    fcl_status s = fcl_attention_kvcache_host(ctx, &st.desc, &a);
    if (s == FCL_ERROR_DEVICE_LOOP_LIMIT) {
        /* a device that ends long loops (loop_limit.c): a refusal passes when
         * the plan query predicts it and nothing was written */
        fcl_plan p;
        const int ok = fcl_kvcache_plan_query(ctx, &st.desc, &p) == s &&
                       memcmp(st.kc, kc0, cache_bytes) == 0 && memcmp(st.vc, vc0, cache_bytes) == 0 &&
                       memcmp(st.o, o0, out_bytes) == 0;
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
    if (ok && (memcmp(st.kc, st.kc_expect, cache_bytes) != 0 ||
               memcmp(st.vc, st.vc_expect, cache_bytes) != 0)) {
        printf("kvcache: the caches after the call are not as expected\n");
        ok = 0;
    }
    ok = ok && kv_check_outputs(c, &st, "host");
    if (ok) { /* again from the original caches: bitwise the same */
        unsigned char *o1 = malloc(st.nq * st.oes);
        float *l1 = malloc(c->batch * c->heads_q * c->seqlen_q * sizeof *l1);
        memcpy(o1, st.o, st.nq * st.oes);
        memcpy(l1, st.lse, c->batch * c->heads_q * c->seqlen_q * sizeof *l1);
        memcpy(st.kc, kc0, cache_bytes);
        memcpy(st.vc, vc0, cache_bytes);
        ok = fcl_attention_kvcache_host(ctx, &st.desc, &a) == FCL_OK &&
             memcmp(o1, st.o, st.nq * st.oes) == 0 &&
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

