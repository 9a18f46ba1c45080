/* nonfinite_support.c - see nonfinite_support.h. */
#include "nonfinite_support.h"
#include "reference.h"
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inputs (storage bytes and the doubles they stand for) and outputs. */
typedef struct nf_state {
    const nf_case *c;
    fcl_attention_desc desc;
    fcl_attention_aux_host aux;
    ref_variants rv;
    ref_problem prob;
    fcl_dtype out_dt;
    size_t es, oes, n[NF_TENSORS], nl;
    double *x[NF_TENSORS];            /* Q, K, V, dO */
    unsigned char *bytes[NF_TENSORS];
    unsigned char *bad[NF_TENSORS];   /* 1 where the second run's input is non-finite */
    unsigned char *blocks;
    double *o, *dq, *dk, *dv;         /* outputs of one run */
    float *lse;
} nf_state;

static size_t nf_rows(const nf_case *c, int t)
{
    return t == NF_K || t == NF_V ? c->seqlen_k : c->seqlen_q;
}
static size_t nf_heads(const nf_case *c, int t)
{
    return t == NF_K || t == NF_V ? c->heads_kv : c->heads_q;
}
/* Element (head, row, col) of a (heads, rows, head_dim) tensor. */
static size_t nf_at(const nf_case *c, int t, size_t h, size_t r, size_t col)
{
    return (h * nf_rows(c, t) + r) * c->head_dim + col;
}

static void nf_init(const nf_case *c, nf_state *st)
{
    memset(st, 0, sizeof *st);
    st->c = c;
    rng r = {c->seed * 6151u + 3u};
    st->es = fcl_dtype_size(c->dtype);
    for (int t = 0; t < NF_TENSORS; ++t) {
        st->n[t] = nf_heads(c, t) * nf_rows(c, t) * c->head_dim;
        st->x[t] = malloc(st->n[t] * sizeof(double));
        st->bytes[t] = malloc(st->n[t] * st->es);
        st->bad[t] = calloc(st->n[t], 1);
        for (size_t i = 0; i < st->n[t]; ++i) {
            st->x[t][i] = round_to_dtype(rng_normal(&r), c->dtype);
            fa_put_value(st->bytes[t] + i * st->es, c->dtype, st->x[t][i]);
        }
    }
    st->nl = c->heads_q * c->seqlen_q;
    fcl_attention_desc *d = &st->desc;
    fcl_attention_desc_init(d, 1, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k, c->head_dim,
                            c->dtype, FCL_LAYOUT_BHSD);
    d->softmax_scale = (float)(1.0 / sqrt((double)c->head_dim));
    d->causal = c->causal;
    d->window_left = c->window_left;
    d->window_right = c->window_right;
    d->num_splits = c->num_splits;
    st->out_dt = fcl_dtype_size(c->dtype) == 1 ? d->out_dtype : c->dtype;
    st->oes = fcl_dtype_size(st->out_dt);
    st->rv = (ref_variants){c->window_left, c->window_right, 0, NULL, 0, 0, 0, 0, NULL, NULL,
                            NULL, 0, 0, 0, 0, NULL};
    if (c->block) { /* one mask for every head, three blocks in four on */
        const size_t nbm = (c->seqlen_q + c->block - 1) / c->block;
        const size_t nbn = (c->seqlen_k + c->block - 1) / c->block;
        st->blocks = malloc(nbm * nbn);
        for (size_t i = 0; i < nbm * nbn; ++i)
            st->blocks[i] = rng_uniform(&r) < 0.75 ? 1 : 0;
        d->block_m = d->block_n = c->block;
        st->rv.block_mask = st->blocks;
        st->rv.block_m = st->rv.block_n = c->block;
        st->aux.block_mask = st->blocks;
    }
    st->prob = (ref_problem){1, c->heads_q, c->heads_kv, c->seqlen_q, c->seqlen_k, c->head_dim,
                             (double)d->softmax_scale, c->causal, st->out_dt, &st->rv, 0};
    const size_t no = st->n[NF_Q];
    st->o = calloc(no, sizeof(double));
    st->dq = calloc(no, sizeof(double));
    st->dk = calloc(st->n[NF_K], sizeof(double));
    st->dv = calloc(st->n[NF_K], sizeof(double));
    st->lse = malloc(st->nl * sizeof(float));
}

static void nf_free(nf_state *st)
{
    for (int t = 0; t < NF_TENSORS; ++t) {
        free(st->x[t]);
        free(st->bytes[t]);
        free(st->bad[t]);
    }
    free(st->blocks);
    free(st->o);
    free(st->dq);
    free(st->dk);
    free(st->dv);
    free(st->lse);
}

/* The case's spots into the input bytes; 0 (printed) if one does not
 * decode as non-finite. */
static int nf_poison(nf_state *st)
{
    int ok = 1;
    const nf_case *c = st->c;
    for (int s = 0; s < NF_MAX_SPOTS && c->spots[s].value != 0; ++s) {
        const nf_spot *sp = &c->spots[s];
        const size_t at = nf_at(c, sp->tensor, sp->head, sp->row, sp->col);
        unsigned char *p = st->bytes[sp->tensor] + at * st->es;
        fa_put_value(p, c->dtype, sp->value);
        if (isfinite(fa_get_value(p, c->dtype))) {
            printf("nonfinite: %g is finite in %s\n", sp->value, fcl_dtype_name(c->dtype));
            ok = 0;
        }
        st->bad[sp->tensor][at] = 1;
    }
    return ok;
}

static void nf_read(const unsigned char *bytes, fcl_dtype dt, size_t n, double *out)
{
    const size_t es = fcl_dtype_size(dt);
    for (size_t i = 0; i < n; ++i)
        out[i] = fa_get_value(bytes + i * es, dt);
}

/* One run of the forward (and the backward) on the state's input bytes. */
static int nf_run(fcl_context *ctx, nf_state *st)
{
    const nf_case *c = st->c;
    const size_t no = st->n[NF_Q], nk = st->n[NF_K];
    unsigned char *o = malloc(no * st->oes);
    int ok = fcl_attention_forward_host_ex(ctx, &st->desc, &st->aux, st->bytes[NF_Q],
                                           st->bytes[NF_K], st->bytes[NF_V], o, st->lse) == FCL_OK;
    nf_read(o, st->out_dt, no, st->o);
    if (ok && c->backward) {
        unsigned char *dq = malloc(no * st->es), *dk = malloc(nk * st->es), *dv = malloc(nk * st->es);
        ok = fcl_attention_backward_host_ex(ctx, &st->desc, &st->aux, st->bytes[NF_Q],
                                            st->bytes[NF_K], st->bytes[NF_V], o, st->lse,
                                            st->bytes[NF_DO], dq, dk, dv) == FCL_OK;
        nf_read(dq, c->dtype, no, st->dq);
        nf_read(dk, c->dtype, nk, st->dk);
        nf_read(dv, c->dtype, nk, st->dv);
        free(dq);
        free(dk);
        free(dv);
    }
    free(o);
    if (!ok)
        printf("nonfinite: a call failed\n");
    return ok;
}

/* The first run against the float64 reference (test_support.h's rule). */
static int nf_check_reference(const nf_state *st)
{
    const nf_case *c = st->c;
    const size_t no = st->n[NF_Q], nk = st->n[NF_K];
    const ref_problem *p = &st->prob;
    double *r64 = malloc(no * sizeof(double)), *rlp = malloc(no * sizeof(double));
    double *l64 = malloc(st->nl * sizeof(double)), *llp = malloc(st->nl * sizeof(double));
    double *lours = malloc(st->nl * sizeof(double));
    unsigned char *valid = malloc(no > nk ? no : nk);
    memset(valid, 1, no > nk ? no : nk);
    fa_result res;
    memset(&res, 0, sizeof res);
    const double *q = st->x[NF_Q], *k = st->x[NF_K], *v = st->x[NF_V], *dout = st->x[NF_DO];
    ref_forward_f64(p, q, k, v, r64, l64);
    for (size_t i = 0; i < st->nl; ++i)
        lours[i] = st->lse[i];
    const size_t terms = c->head_dim + c->seqlen_k;
    int ok;
    if (nf_fp8_products) {
        /* rlp and llp hold the bounds instead */
        ref_forward_p8_bounds(p, q, k, v, r64, FA_P8_EPS_S, FA_P8_EPS_P, rlp, llp);
        ok = fa_compare_bound("o", st->o, r64, rlp, valid, no, 2.0, st->out_dt, &res);
        ok = fa_compare_bound("lse", lours, l64, llp, valid, st->nl, 2.0, FCL_DTYPE_FP32, &res) &&
             ok;
    } else {
        ref_forward_lowp(p, q, k, v, rlp, llp);
        ok = fa_compare("o", st->o, rlp, r64, NULL, valid, no, 2.0, st->out_dt, terms, &res);
        ok = fa_compare("lse", lours, llp, l64, NULL, valid, st->nl, 2.0, FCL_DTYPE_FP32, terms,
                        &res) &&
             ok;
    }
    if (c->backward) {
        double *g64[3], *glp[3], *mag[3];
        const size_t n[3] = {no, nk, nk};
        for (int t = 0; t < 3; ++t) {
            g64[t] = malloc(n[t] * sizeof(double));
            glp[t] = malloc(n[t] * sizeof(double));
            mag[t] = malloc(n[t] * sizeof(double));
        }
        ref_backward_f64(p, q, k, v, dout, g64[0], g64[1], g64[2]);
        ref_backward_lowp(p, q, k, v, dout, glp[0], glp[1], glp[2]);
        ref_backward_magnitudes(p, q, k, v, dout, mag[0], mag[1], mag[2]);
        const double *ours[3] = {st->dq, st->dk, st->dv};
        const char *names[3] = {"dq", "dk", "dv"};
        const size_t bterms =
            c->head_dim + (c->seqlen_q > c->seqlen_k ? c->seqlen_q : c->seqlen_k);
        for (int t = 0; t < 3; ++t) {
            ok = fa_compare(names[t], ours[t], glp[t], g64[t], mag[t], valid, n[t], 3.0, c->dtype,
                            bterms, &res) && ok;
            free(g64[t]);
            free(glp[t]);
            free(mag[t]);
        }
    }
    ok = ok && res.nonfinite == 0;
    if (!ok)
        printf("nonfinite: the finite run fails the reference: %s err %.3g (lowp %.3g, tol %.3g), "
               "nonfinite %d\n", res.worst ? res.worst : "?", res.err, res.err_lowp, res.tol,
               res.nonfinite);
    free(r64);
    free(rlp);
    free(l64);
    free(llp);
    free(lours);
    free(valid);
    return ok;
}

/* Element classes of the second run. */
enum { NF_UNTOUCHED = 0, NF_FREE = 1, NF_REQUIRED = 2 };

int nf_dq_rounding;
int nf_fp8_products;

/* One unit in the last place of storage type dt at |x| (subnormals
 * included; fp32 never takes a tensor-core path, see nf_dq_rounding). */
static double nf_storage_ulp(double x, fcl_dtype dt)
{
    const double a = fabs(x);
    switch (dt) {
    case FCL_DTYPE_FP16:
        return a < 0x1p-14 ? 0x1p-24 : ldexp(1.0, ilogb(a) - 10);
    case FCL_DTYPE_BF16:
        return a < 0x1p-126 ? 0x1p-133 : ldexp(1.0, ilogb(a) - 7);
    default:
        return 0.0;
    }
}

/* Checks one output tensor of the second run against its classes; counts
 * and prints the first few violations.  An untouched element equals the
 * first run's, bitwise, or within `ulps` units in the last place of dt. */
static int nf_check_classes(const char *name, const double *ours, const double *first,
                            const unsigned char *cls, size_t n, size_t head_dim, int ulps,
                            fcl_dtype dt)
{
    int wrong = 0;
    for (size_t e = 0; e < n; ++e) {
        const int same = ours[e] == first[e] ||
                         (ulps > 0 && isfinite(ours[e]) && isfinite(first[e]) &&
                          fabs(ours[e] - first[e]) <=
                              ulps * nf_storage_ulp(fmax(fabs(ours[e]), fabs(first[e])), dt));
        const int ok = cls[e] == NF_REQUIRED ? !isfinite(ours[e])
                     : cls[e] == NF_UNTOUCHED ? same : 1;
        if (!ok && wrong++ < 4)
            printf("nonfinite: %s row %zu col %zu: %g, %s %g\n", name, e / head_dim, e % head_dim,
                   ours[e], cls[e] == NF_REQUIRED ? "must be non-finite; first run" : "first run",
                   first[e]);
    }
    return wrong == 0;
}

/* Whether query row i of head h sees key j. */
#define NF_SEES(st, h, i, j) ref_visible(&(st)->prob, 0, (h), (i), (j))

static int nf_row_bad(const nf_state *st, int t, size_t h, size_t r)
{
    const unsigned char *b = st->bad[t] + nf_at(st->c, t, h, r, 0);
    for (size_t x = 0; x < st->c->head_dim; ++x)
        if (b[x])
            return 1;
    return 0;
}

/* The classes of O and LSE, and rt[h * Sq + i]: whether query row i of head
 * h may be non-finite anywhere in the backward (its O, LSE or dO, or a key
 * it sees). */
static void nf_forward_classes(const nf_state *st, unsigned char *o_cls, unsigned char *lse_cls,
                               unsigned char *rt)
{
    const nf_case *c = st->c;
    const size_t D = c->head_dim, group = c->heads_q / c->heads_kv;
    for (size_t h = 0; h < c->heads_q; ++h)
        for (size_t i = 0; i < c->seqlen_q; ++i) {
            const size_t hk = h / group, row = h * c->seqlen_q + i;
            int scores_bad = nf_row_bad(st, NF_Q, h, i), v_bad = 0;
            unsigned char *cls = o_cls + row * D;
            memset(cls, NF_UNTOUCHED, D);
            for (size_t j = 0; j < c->seqlen_k; ++j) {
                if (!NF_SEES(st, h, i, j))
                    continue;
                scores_bad |= nf_row_bad(st, NF_K, hk, j);
                v_bad |= nf_row_bad(st, NF_V, hk, j);
                for (size_t x = 0; x < D; ++x)
                    if (st->bad[NF_V][nf_at(c, NF_V, hk, j, x)])
                        cls[x] = NF_REQUIRED;
            }
            if (scores_bad)
                for (size_t x = 0; x < D; ++x)
                    cls[x] = cls[x] == NF_REQUIRED ? NF_REQUIRED : NF_FREE;
            lse_cls[row] = scores_bad ? NF_FREE : NF_UNTOUCHED;
            rt[row] = scores_bad || v_bad || nf_row_bad(st, NF_DO, h, i);
        }
}

/* The classes of dQ, dK and dV from rt (nf_forward_classes). */
static void nf_backward_classes(const nf_state *st, const unsigned char *rt, unsigned char *dq_cls,
                                unsigned char *dk_cls, unsigned char *dv_cls)
{
    const nf_case *c = st->c;
    const size_t D = c->head_dim, group = c->heads_q / c->heads_kv;
    for (size_t h = 0; h < c->heads_q; ++h)
        for (size_t i = 0; i < c->seqlen_q; ++i) {
            unsigned char *cls = dq_cls + (h * c->seqlen_q + i) * D;
            memset(cls, rt[h * c->seqlen_q + i] ? NF_FREE : NF_UNTOUCHED, D);
            for (size_t j = 0; j < c->seqlen_k; ++j)
                for (size_t x = 0; x < D; ++x)
                    if (NF_SEES(st, h, i, j) && st->bad[NF_K][nf_at(c, NF_K, h / group, j, x)])
                        cls[x] = NF_REQUIRED;
        }
    for (size_t hk = 0; hk < c->heads_kv; ++hk)
        for (size_t j = 0; j < c->seqlen_k; ++j) {
            int kt = nf_row_bad(st, NF_K, hk, j) || nf_row_bad(st, NF_V, hk, j);
            unsigned char *kc = dk_cls + nf_at(c, NF_K, hk, j, 0), *vc = dv_cls + nf_at(c, NF_V, hk, j, 0);
            memset(kc, NF_UNTOUCHED, D);
            memset(vc, NF_UNTOUCHED, D);
            for (size_t h = hk * group; h < (hk + 1) * group; ++h)
                for (size_t i = 0; i < c->seqlen_q; ++i) {
                    if (!NF_SEES(st, h, i, j))
                        continue;
                    kt |= rt[h * c->seqlen_q + i];
                    for (size_t x = 0; x < D; ++x) {
                        if (st->bad[NF_Q][nf_at(c, NF_Q, h, i, x)])
                            kc[x] = NF_REQUIRED;
                        if (st->bad[NF_DO][nf_at(c, NF_DO, h, i, x)])
                            vc[x] = NF_REQUIRED;
                    }
                }
            for (size_t x = 0; kt && x < D; ++x) {
                kc[x] = kc[x] == NF_REQUIRED ? NF_REQUIRED : NF_FREE;
                vc[x] = vc[x] == NF_REQUIRED ? NF_REQUIRED : NF_FREE;
            }
        }
}

static void nf_describe(const nf_case *c)
{
    printf("nonfinite case: Hq=%zu Hk=%zu sq=%zu sk=%zu d=%zu %s causal=%d window=(%ld,%ld) "
           "block=%zu splits=%d backward=%d seed=%llu, spots:", c->heads_q, c->heads_kv,
           c->seqlen_q, c->seqlen_k, c->head_dim, fcl_dtype_name(c->dtype), c->causal,
           c->window_left, c->window_right, c->block, c->num_splits, c->backward,
           (unsigned long long)c->seed);
    static const char *const names[NF_TENSORS] = {"Q", "K", "V", "dO"};
    for (int s = 0; s < NF_MAX_SPOTS && c->spots[s].value != 0; ++s)
        printf(" %s[h%zu][%zu][%zu]=%g", names[c->spots[s].tensor], c->spots[s].head,
               c->spots[s].row, c->spots[s].col, c->spots[s].value);
    printf("\n");
}

/* On a device that ends long loops (loop_limit.c): 1 when the backward of
 * c is refused there, as its plan query predicts, with its outputs
 * untouched (it reads no input then, so none is given a value); -1 when
 * the call does not keep the prediction; 0 when none is predicted. */
static int nf_backward_refused(fcl_context *ctx, const nf_case *c)
{
    nf_state st;
    nf_init(c, &st);
    const fcl_status predicted = fa_refusal_prediction(ctx, &st.desc, 1);
    int refused = 0;
    if (predicted == FCL_ERROR_DEVICE_LOOP_LIMIT) {
        const size_t bytes = (st.n[NF_Q] + 2 * st.n[NF_K]) * st.es;
        unsigned char *out = malloc(bytes), *o = calloc(st.n[NF_Q], st.oes);
        memset(out, 0xA5, bytes);
        const fcl_status s = fcl_attention_backward_host_ex(
            ctx, &st.desc, &st.aux, st.bytes[NF_Q], st.bytes[NF_K], st.bytes[NF_V], o, st.lse,
            st.bytes[NF_DO], out, out + st.n[NF_Q] * st.es, out + (st.n[NF_Q] + st.n[NF_K]) * st.es);
        refused = s == predicted ? 1 : -1;
        for (size_t i = 0; i < bytes && refused == 1; ++i)
            refused = out[i] == 0xA5 ? 1 : -1;
        printf("nonfinite: backward %s (%s)\n",
               refused == 1 ? "refused as its plan query predicts, nothing written; its forward checked"
                            : "NOT refused as its plan query predicts, or an output written",
               fcl_status_string(s));
        fa_loop_refusals += refused == 1;
        free(out);
        free(o);
    }
    nf_free(&st);
    return refused;
}

int nf_check(fcl_context *ctx, const nf_case *c)
{
    if (c->backward) {
        const int refused = nf_backward_refused(ctx, c);
        if (refused != 0) {
            nf_case forward = *c;
            forward.backward = 0;
            return refused == 1 ? nf_check(ctx, &forward) : (nf_describe(c), 0);
        }
    }
    nf_state st;
    nf_init(c, &st);
    int ok = nf_run(ctx, &st) && nf_check_reference(&st);
    const size_t no = st.n[NF_Q], nk = st.n[NF_K];
    double *first[4] = {malloc(no * sizeof(double)), malloc(no * sizeof(double)),
                        malloc(nk * sizeof(double)), malloc(nk * sizeof(double))};
    double *lse_first = malloc(st.nl * sizeof(double)), *lse_ours = malloc(st.nl * sizeof(double));
    memcpy(first[0], st.o, no * sizeof(double));
    memcpy(first[1], st.dq, no * sizeof(double));
    memcpy(first[2], st.dk, nk * sizeof(double));
    memcpy(first[3], st.dv, nk * sizeof(double));
    for (size_t i = 0; i < st.nl; ++i)
        lse_first[i] = st.lse[i];
    ok = nf_poison(&st) && ok;
    ok = ok && nf_run(ctx, &st);
    if (ok) {
        unsigned char *o_cls = malloc(no), *lse_cls = malloc(st.nl), *rt = malloc(st.nl);
        nf_forward_classes(&st, o_cls, lse_cls, rt);
        for (size_t i = 0; i < st.nl; ++i)
            lse_ours[i] = st.lse[i];
        ok = nf_check_classes("o", st.o, first[0], o_cls, no, c->head_dim, 0, c->dtype);
        ok = nf_check_classes("lse", lse_ours, lse_first, lse_cls, st.nl, 1, 0, c->dtype) && ok;
        if (c->backward) {
            unsigned char *dq_cls = malloc(no), *dk_cls = malloc(nk), *dv_cls = malloc(nk);
            nf_backward_classes(&st, rt, dq_cls, dk_cls, dv_cls);
            ok = nf_check_classes("dq", st.dq, first[1], dq_cls, no, c->head_dim, nf_dq_rounding,
                                  c->dtype) && ok;
            ok = nf_check_classes("dk", st.dk, first[2], dk_cls, nk, c->head_dim, 0, c->dtype) && ok;
            ok = nf_check_classes("dv", st.dv, first[3], dv_cls, nk, c->head_dim, 0, c->dtype) && ok;
            free(dq_cls);
            free(dk_cls);
            free(dv_cls);
        }
        free(o_cls);
        free(lse_cls);
        free(rt);
    }
    if (!ok)
        nf_describe(c);
    for (int t = 0; t < 4; ++t)
        free(first[t]);
    free(lse_first);
    free(lse_ours);
    nf_free(&st);
    return ok;
}

/* Whether query row i of sequence b sees key j: the call's mask
 * (flashcl.h, fcl_attention_kvcache). */
static int nf_kv_sees(const kv_case *c, size_t b, size_t i, size_t j)
{
    const long T = (long)c->lens[b] + (long)c->seqlen_new, pos = T - (long)c->seqlen_q + (long)i;
    const long lj = (long)j;
    return lj < T && (!c->causal || lj <= pos) && (c->window_left < 0 || lj >= pos - c->window_left);
}

/* Runs case c on random finite caches (checked against float64 by
 * kv_check_outputs), then from the same caches with the spots made
 * non-finite: O must be non-finite in a spot's column for the rows that see
 * its key, and equal to the first run's everywhere else. */
int nf_kv_check(fcl_context *ctx, const kv_case *c, const nf_kv_spot *spots, size_t nspots)
{
    kv_state st;
    kv_init(c, &st);
    const size_t cache_bytes = st.ncache * st.es, obytes = st.no * st.oes;
    unsigned char *kc0 = malloc(cache_bytes), *vc0 = malloc(cache_bytes), *o1 = malloc(obytes);
    memcpy(kc0, st.kc, cache_bytes);
    memcpy(vc0, st.vc, cache_bytes);
    fcl_kvcache_host a = kv_host_arrays(&st);
    int ok = fcl_attention_kvcache_host(ctx, &st.desc, &a) == FCL_OK &&
             kv_check_outputs(c, &st, "finite inputs");
    memcpy(o1, st.o, obytes);
    memcpy(st.kc, kc0, cache_bytes); /* the appends again, onto the same caches */
    memcpy(st.vc, vc0, cache_bytes);
    for (size_t s = 0; s < nspots; ++s) {
        unsigned char *p = st.vc + (kv_cache_at(&st, spots[s].b, spots[s].key, spots[s].hk) +
                                    spots[s].col) * st.es;
        fa_put_value(p, c->dtype, spots[s].value);
        ok = ok && !isfinite(kv_get(p, c->dtype));
    }
    ok = ok && fcl_attention_kvcache_host(ctx, &st.desc, &a) == FCL_OK;
    const fcl_layout *lo = &st.desc.o;
    const size_t group = c->heads_q / c->heads_kv;
    int wrong = 0;
    for (size_t b = 0; ok && b < c->batch; ++b)
        for (size_t i = 0; i < c->seqlen_q; ++i)
            for (size_t h = 0; h < c->heads_q; ++h)
                for (size_t x = 0; x < c->head_dim; ++x) {
                    int required = 0;
                    for (size_t s = 0; s < nspots; ++s)
                        required |= spots[s].b == b && spots[s].hk == h / group &&
                                    spots[s].col == x && nf_kv_sees(c, b, i, spots[s].key);
                    const size_t at = (lo->offset + b * lo->stride_batch + i * lo->stride_seq +
                                       h * lo->stride_head + x) * st.oes;
                    const double ours = kv_get(st.o + at, st.out_dtype);
                    const double first = kv_get(o1 + at, st.out_dtype);
                    if (required ? isfinite(ours) : ours != first) {
                        if (wrong++ < 4)
                            printf("nonfinite kvcache: b %zu row %zu head %zu col %zu: %g "
                                   "(%s %g)\n", b, i, h, x, ours,
                                   required ? "must be non-finite; first run" : "first run", first);
                    }
                }
    ok = ok && wrong == 0;
    if (!ok)
        printf("nonfinite kvcache case: B=%zu Hq=%zu Hk=%zu d=%zu sq=%zu new=%zu %s page=%zu "
               "causal=%d window=%ld splits=%d\n", c->batch, c->heads_q, c->heads_kv,
               c->head_dim, c->seqlen_q, c->seqlen_new, fcl_dtype_name(c->dtype), c->page_size,
               c->causal, c->window_left, c->num_splits);
    free(kc0);
    free(vc0);
    free(o1);
    kv_free(&st);
    return ok;
}

