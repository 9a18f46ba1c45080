/* reference.c - the CPU references (see reference.h). */
#include "reference.h"

#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t ref_len_q(const ref_problem *p, size_t b)
{
    return p->var && p->var->cu_q ? (size_t)(p->var->cu_q[b + 1] - p->var->cu_q[b]) : p->seqlen_q;
}

size_t ref_len_k(const ref_problem *p, size_t b)
{
    return p->var && p->var->cu_k ? (size_t)(p->var->cu_k[b + 1] - p->var->cu_k[b]) : p->seqlen_k;
}

int ref_visible(const ref_problem *p, size_t b, size_t h, size_t i, size_t j)
{
    const long diag = (long)ref_len_k(p, b) - (long)ref_len_q(p, b);
    const long li = (long)i, lj = (long)j;
    long left = -1, right = p->causal ? 0 : -1;
    if (p->var) {
        left = p->var->window_left;
        if (!p->causal)
            right = p->var->window_right;
    }
    if (j >= ref_len_k(p, b) || i >= ref_len_q(p, b))
        return 0;
    if (left >= 0 && lj < li + diag - left)
        return 0;
    if (right >= 0 && lj > li + diag + right)
        return 0;
    if (p->var && p->var->block_mask) {
        const ref_variants *v = p->var;
        const size_t nbn = (p->seqlen_k + v->block_n - 1) / v->block_n;
        const unsigned char *m = v->block_mask + b * v->block_stride_b + h * v->block_stride_h;
        if (!m[(i / v->block_m) * nbn + j / v->block_n])
            return 0;
    }
    return 1;
}

void ref_philox4x32_10(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr_in[0], ctr_in[1], ctr_in[2], ctr_in[3]};
    uint32_t k[2] = {key_in[0], key_in[1]};
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k[0] += 0x9E3779B9u;
            k[1] += 0xBB67AE85u;
        }
        const uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k[0], n1 = (uint32_t)p1;
        const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k[1], n3 = (uint32_t)p0;
        c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
    }
    memcpy(out, c, sizeof c);
}

double ref_dropout_factor(const ref_problem *p, size_t b, size_t h, size_t i, size_t j)
{
    const ref_variants *v = p->var;
    if (v == NULL || v->dropout_p == 0)
        return 1.0;
    const double t = floor(v->dropout_p * 4294967296.0 + 0.5);
    const uint32_t threshold = t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
    const uint32_t ctr[4] = {(uint32_t)j, (uint32_t)(i >> 2), (uint32_t)(b * p->heads_q + h),
                             v->dropout_offset};
    const uint32_t key[2] = {(uint32_t)v->dropout_seed, (uint32_t)(v->dropout_seed >> 32)};
    uint32_t r[4];
    ref_philox4x32_10(ctr, key, r);
    /* the kernels scale by the fp32 value of 1 / (1 - p) */
    return r[i & 3] >= threshold ? (double)(float)(1.0 / (1.0 - v->dropout_p)) : 0.0;
}

/* score of (i, j) from q.k: scale, softcap, ALiBi; *t = tanh for the softcap. */
static double score(const ref_problem *p, size_t b, size_t h, size_t i, size_t j, double qk,
                    double *t)
{
    double s = qk * p->scale;
    *t = 0;
    if (p->var && p->var->softcap > 0) {
        *t = tanh(s / p->var->softcap);
        s = p->var->softcap * *t;
    }
    if (p->var && p->var->alibi_slopes) {
        const long diag = (long)ref_len_k(p, b) - (long)ref_len_q(p, b);
        const double slope = p->var->alibi_slopes[b * p->var->alibi_stride_b + h];
        s -= slope * fabs((double)((long)i + diag - (long)j));
    }
    return s;
}

static float score_f(const ref_problem *p, size_t b, size_t h, size_t i, size_t j, float qk, float *t)
{
    float s = qk * (float)p->scale;
    *t = 0;
    if (p->var && p->var->softcap > 0) {
        *t = tanhf(s / (float)p->var->softcap);
        s = (float)p->var->softcap * *t;
    }
    if (p->var && p->var->alibi_slopes) {
        const long diag = (long)ref_len_k(p, b) - (long)ref_len_q(p, b);
        const float slope = (float)p->var->alibi_slopes[b * p->var->alibi_stride_b + h];
        s -= slope * (float)labs((long)i + diag - (long)j);
    }
    return s;
}

/* Head h's sink logit, -inf (no sink) without sinks. */
static double ref_sink(const ref_problem *p, size_t h)
{
    return p->var && p->var->sinks ? p->var->sinks[h] : -INFINITY;
}

static size_t idx(size_t heads, size_t seq, size_t dim, size_t b, size_t h, size_t s)
{
    return ((b * heads + h) * seq + s) * dim;
}

size_t ref_head_dim_v(const ref_problem *p)
{
    return p->head_dim_v != 0 ? p->head_dim_v : p->head_dim;
}

/* Row i of (b, h): its scores s[0..seqlen_k) (-inf where the key is
 * hidden); returns their max with the sink's logit (-inf if neither), and
 * in *mag (when asked) the largest sum_d |q_d k_jd| of a visible key. */
static double row_scores(const ref_problem *p, const double *q, const double *k, size_t b,
                         size_t h, size_t i, double *s, double *mag)
{
    const size_t D = p->head_dim, Sq = p->seqlen_q, Sk = p->seqlen_k;
    const double *qi = q + idx(p->heads_q, Sq, D, b, h, i);
    double m = -INFINITY, largest = 0, t;
    for (size_t j = 0; j < Sk; ++j) {
        s[j] = -INFINITY;
        if (!ref_visible(p, b, h, i, j))
            continue;
        const double *kj = k + idx(p->heads_kv, Sk, D, b, h / (p->heads_q / p->heads_kv), j);
        double dot = 0, abs_dot = 0;
        for (size_t d = 0; d < D; ++d) {
            dot += qi[d] * kj[d];
            abs_dot += fabs(qi[d] * kj[d]);
        }
        s[j] = score(p, b, h, i, j, dot, &t);
        if (s[j] > m)
            m = s[j];
        largest = fmax(largest, abs_dot);
    }
    if (mag != NULL)
        *mag = largest;
    const double sink = ref_sink(p, h);
    return sink > m ? sink : m;
}

void ref_forward_f64(const ref_problem *p, const double *q, const double *k, const double *v,
                     double *o, double *lse)
{
    const size_t Dv = ref_head_dim_v(p), Sq = p->seqlen_q, Sk = p->seqlen_k;
    const size_t group = p->heads_q / p->heads_kv;
    double *s = malloc(Sk * sizeof *s);
    memset(o, 0, p->batch * p->heads_q * Sq * Dv * sizeof *o);
    for (size_t x = 0; x < p->batch * p->heads_q * Sq; ++x)
        lse[x] = INFINITY;
    for (size_t b = 0; b < p->batch; ++b)
        for (size_t h = 0; h < p->heads_q; ++h)
            for (size_t i = 0; i < ref_len_q(p, b); ++i) {
                double *oi = o + idx(p->heads_q, Sq, Dv, b, h, i);
                const double m = row_scores(p, q, k, b, h, i, s, NULL);
                const double sink = ref_sink(p, h);
                double l = sink == -INFINITY ? 0.0 : exp(sink - m);
                for (size_t j = 0; j < Sk; ++j) {
                    if (s[j] == -INFINITY)
                        continue;
                    const double e = exp(s[j] - m);
                    l += e;
                    const double ez = e * ref_dropout_factor(p, b, h, i, j);
                    const double *vj = v + idx(p->heads_kv, Sk, Dv, b, h / group, j);
                    for (size_t d = 0; d < Dv; ++d)
                        oi[d] += ez * vj[d];
                }
                for (size_t d = 0; d < Dv && l > 0; ++d)
                    oi[d] /= l;
                lse[(b * p->heads_q + h) * Sq + i] = l > 0 ? m + log(l) : INFINITY;
            }
    free(s);
}

void ref_forward_p8_bounds(const ref_problem *p, const double *q, const double *k,
                           const double *v, const double *o, double eps_s, double eps_p,
                           double *ob, double *lb)
{
    const size_t Dv = ref_head_dim_v(p), Sq = p->seqlen_q, Sk = p->seqlen_k;
    const size_t group = p->heads_q / p->heads_kv;
    double *s = malloc(Sk * sizeof *s);
    memset(ob, 0, p->batch * p->heads_q * Sq * Dv * sizeof *ob);
    memset(lb, 0, p->batch * p->heads_q * Sq * sizeof *lb);
    for (size_t b = 0; b < p->batch; ++b)
        for (size_t h = 0; h < p->heads_q; ++h)
            for (size_t i = 0; i < ref_len_q(p, b); ++i) {
                double mag;
                const double m = row_scores(p, q, k, b, h, i, s, &mag);
                const double sink = ref_sink(p, h);
                const double ds = eps_s * fabs(p->scale) * mag + eps_p;
                const double *oi = o + idx(p->heads_q, Sq, Dv, b, h, i);
                double *obi = ob + idx(p->heads_q, Sq, Dv, b, h, i);
                double l = sink == -INFINITY ? 0.0 : exp(sink - m);
                for (size_t j = 0; j < Sk; ++j) {
                    if (s[j] == -INFINITY)
                        continue;
                    const double e = exp(s[j] - m);
                    l += e;
                    const double *vj = v + idx(p->heads_kv, Sk, Dv, b, h / group, j);
                    for (size_t d = 0; d < Dv; ++d)
                        obi[d] += ldexp(e, -4) * fabs(vj[d]) + ldexp(fabs(vj[d]), -18) +
                                  ds * e * fabs(vj[d] - oi[d]);
                }
                if (!(l > 0)) /* a row that sees no key: obi stayed 0 */
                    continue;
                for (size_t d = 0; d < Dv; ++d)
                    obi[d] /= l;
                lb[(b * p->heads_q + h) * Sq + i] = ds;
            }
    free(s);
}

void ref_forward_lowp(const ref_problem *p, const double *q, const double *k, const double *v,
                      double *o, double *lse)
{
    const size_t D = p->head_dim, Dv = ref_head_dim_v(p), Sq = p->seqlen_q, Sk = p->seqlen_k;
    const size_t group = p->heads_q / p->heads_kv;
    float *s = malloc(Sk * sizeof *s);
    float *acc = malloc(Dv * sizeof *acc);
    memset(o, 0, p->batch * p->heads_q * Sq * Dv * sizeof *o);
    for (size_t x = 0; x < p->batch * p->heads_q * Sq; ++x)
        lse[x] = INFINITY;
    for (size_t b = 0; b < p->batch; ++b)
        for (size_t h = 0; h < p->heads_q; ++h)
            for (size_t i = 0; i < ref_len_q(p, b); ++i) {
                const double *qi = q + idx(p->heads_q, Sq, D, b, h, i);
                double *oi = o + idx(p->heads_q, Sq, Dv, b, h, i);
                float m = -INFINITY, t;
                for (size_t jj = Sk; jj-- > 0;) { /* keys in reverse order */
                    s[jj] = -INFINITY;
                    if (!ref_visible(p, b, h, i, jj))
                        continue;
                    const double *kj = k + idx(p->heads_kv, Sk, D, b, h / group, jj);
                    float dot = 0;
                    for (size_t d = D; d-- > 0;)
                        dot += (float)qi[d] * (float)kj[d];
                    s[jj] = score_f(p, b, h, i, jj, dot, &t);
                    m = fmaxf(m, s[jj]);
                }
                const float sink = (float)ref_sink(p, h);
                m = fmaxf(m, sink);
                float l = sink == -INFINITY ? 0.0f : expf(sink - m);
                for (size_t jj = Sk; jj-- > 0;)
                    if (s[jj] != -INFINITY) {
                        s[jj] = expf(s[jj] - m);
                        l += s[jj];
                    }
                for (size_t d = 0; d < Dv; ++d)
                    acc[d] = 0;
                for (size_t jj = Sk; jj-- > 0;) {
                    if (s[jj] == -INFINITY || l == 0)
                        continue;
                    /* normalised before PV, unlike the kernel */
                    const float pj = s[jj] / l * (float)ref_dropout_factor(p, b, h, i, jj);
                    const double *vj = v + idx(p->heads_kv, Sk, Dv, b, h / group, jj);
                    for (size_t d = 0; d < Dv; ++d)
                        acc[d] += pj * (float)vj[d];
                }
                for (size_t d = 0; d < Dv; ++d)
                    oi[d] = round_to_dtype(acc[d], p->dtype);
                lse[(b * p->heads_q + h) * Sq + i] = l > 0 ? (double)(m + logf(l)) : INFINITY;
            }
    free(acc);
    free(s);
}

/* The gradient recipe shared by both precisions: T is double or float. */
#define BACKWARD_BODY(T, EXP, SCORE, FORWARD, ROUND)                                      \
    const size_t D = p->head_dim, Dv = ref_head_dim_v(p), Sq = p->seqlen_q, Sk = p->seqlen_k; \
    const size_t group = p->heads_q / p->heads_kv;                                         \
    const size_t nq = p->batch * p->heads_q * Sq * D, nk = p->batch * p->heads_kv * Sk * D; \
    const size_t nov = p->batch * p->heads_q * Sq * Dv, nv = p->batch * p->heads_kv * Sk * Dv; \
    double *o = malloc(nov * sizeof *o);                                                   \
    double *lse = malloc(p->batch * p->heads_q * Sq * sizeof *lse);                        \
    T *gk = calloc(nk, sizeof *gk), *gv = calloc(nv, sizeof *gv);                          \
    T *gq = malloc(D * sizeof *gq);                                                        \
    FORWARD(p, q, k, v, o, lse);                                                           \
    memset(dq, 0, nq * sizeof *dq);                                                        \
    const T scale = (T)p->scale;                                                           \
    for (size_t b = 0; b < p->batch; ++b)                                                  \
        for (size_t h = 0; h < p->heads_q; ++h)                                            \
            for (size_t i = 0; i < ref_len_q(p, b); ++i) {                                 \
                const size_t qo = idx(p->heads_q, Sq, D, b, h, i);                         \
                const size_t oo = idx(p->heads_q, Sq, Dv, b, h, i);                        \
                const T L = (T)lse[(b * p->heads_q + h) * Sq + i];                         \
                T delta = 0;                                                               \
                for (size_t d = 0; d < Dv; ++d)                                            \
                    delta += (T)dout[oo + d] * (T)o[oo + d];                               \
                for (size_t d = 0; d < D; ++d)                                             \
                    gq[d] = 0;                                                             \
                for (size_t j = 0; j < Sk; ++j) {                                          \
                    if (!ref_visible(p, b, h, i, j) || isinf((double)L))                   \
                        continue;                                                          \
                    const size_t ko = idx(p->heads_kv, Sk, D, b, h / group, j);            \
                    const size_t vo = idx(p->heads_kv, Sk, Dv, b, h / group, j);           \
                    T qk = 0, dp = 0, t;                                                   \
                    for (size_t d = 0; d < D; ++d)                                         \
                        qk += (T)q[qo + d] * (T)k[ko + d];                                 \
                    for (size_t d = 0; d < Dv; ++d)                                        \
                        dp += (T)dout[oo + d] * (T)v[vo + d];                              \
                    const T z = (T)ref_dropout_factor(p, b, h, i, j);                      \
                    const T pij = EXP(SCORE(p, b, h, i, j, qk, &t) - L);                   \
                    const T ds = pij * (dp * z - delta) * (1 - t * t);                     \
                    for (size_t d = 0; d < Dv; ++d)                                        \
                        gv[vo + d] += pij * z * (T)dout[oo + d];                           \
                    for (size_t d = 0; d < D; ++d) {                                       \
                        gk[ko + d] += scale * ds * (T)q[qo + d];                           \
                        gq[d] += scale * ds * (T)k[ko + d];                                \
                    }                                                                      \
                }                                                                          \
                for (size_t d = 0; d < D; ++d)                                             \
                    dq[qo + d] = ROUND(gq[d]);                                             \
            }                                                                              \
    for (size_t x = 0; x < nk; ++x)                                                        \
        dk[x] = ROUND(gk[x]);                                                              \
    for (size_t x = 0; x < nv; ++x)                                                        \
        dv[x] = ROUND(gv[x]);                                                              \
    free(gq);                                                                              \
    free(gk);                                                                              \
    free(gv);                                                                              \
    free(lse);                                                                             \
    free(o)

#define ROUND_NONE(x) ((double)(x))
#define ROUND_STORAGE(x) round_to_dtype((x), p->dtype)

void ref_backward_f64(const ref_problem *p, const double *q, const double *k, const double *v,
                      const double *dout, double *dq, double *dk, double *dv)
{
    BACKWARD_BODY(double, exp, score, ref_forward_f64, ROUND_NONE);
}

void ref_backward_lowp(const ref_problem *p, const double *q, const double *k, const double *v,
                       const double *dout, double *dq, double *dk, double *dv)
{
    BACKWARD_BODY(float, expf, score_f, ref_forward_lowp, ROUND_STORAGE);
}

void ref_sinks_grad(const ref_problem *p, const double *q, const double *k, const double *v,
                    const double *dout, int lowp, double *dsinks, double *magnitude)
{
    const size_t D = p->head_dim, Sq = p->seqlen_q;
    double *o = malloc(p->batch * p->heads_q * Sq * D * sizeof *o);
    double *lse = malloc(p->batch * p->heads_q * Sq * sizeof *lse);
    (lowp ? ref_forward_lowp : ref_forward_f64)(p, q, k, v, o, lse);
    for (size_t h = 0; h < p->heads_q; ++h) {
        double sum = 0, mag = 0;
        float sum_f = 0;
        for (size_t b = p->batch; b-- > 0;)
            for (size_t i = ref_len_q(p, b); i-- > 0;) {
                const size_t qo = idx(p->heads_q, Sq, D, b, h, i);
                double delta = 0, delta_abs = 0;
                float delta_f = 0;
                for (size_t d = 0; d < D; ++d) {
                    delta += dout[qo + d] * o[qo + d];
                    delta_f += (float)dout[qo + d] * (float)o[qo + d];
                    delta_abs += fabs(dout[qo + d] * o[qo + d]);
                }
                const double w = exp(p->var->sinks[h] - lse[(b * p->heads_q + h) * Sq + i]);
                sum += w * delta;
                sum_f += (float)w * delta_f;
                mag += w * delta_abs;
            }
        dsinks[h] = lowp ? -(double)sum_f : -sum;
        if (magnitude != NULL)
            magnitude[h] = mag;
    }
    free(lse);
    free(o);
}

void ref_backward_magnitudes(const ref_problem *p, const double *q, const double *k,
                             const double *v, const double *dout, double *mq, double *mk,
                             double *mv)
{
    const size_t D = p->head_dim, Dv = ref_head_dim_v(p), Sq = p->seqlen_q, Sk = p->seqlen_k;
    const size_t group = p->heads_q / p->heads_kv;
    const size_t nq = p->batch * p->heads_q * Sq * D, nk = p->batch * p->heads_kv * Sk * D;
    const size_t nv = p->batch * p->heads_kv * Sk * Dv;
    double *o = malloc(p->batch * p->heads_q * Sq * Dv * sizeof *o);
    double *lse = malloc(p->batch * p->heads_q * Sq * sizeof *lse);
    ref_forward_f64(p, q, k, v, o, lse);
    memset(mq, 0, nq * sizeof *mq);
    memset(mk, 0, nk * sizeof *mk);
    memset(mv, 0, nv * sizeof *mv);
    const double scale = fabs(p->scale);
    for (size_t b = 0; b < p->batch; ++b)
        for (size_t h = 0; h < p->heads_q; ++h)
            for (size_t i = 0; i < ref_len_q(p, b); ++i) {
                const size_t qo = idx(p->heads_q, Sq, D, b, h, i);
                const size_t oo = idx(p->heads_q, Sq, Dv, b, h, i);
                const double L = lse[(b * p->heads_q + h) * Sq + i];
                double delta_abs = 0;
                for (size_t d = 0; d < Dv; ++d)
                    delta_abs += fabs(dout[oo + d] * o[oo + d]);
                for (size_t j = 0; j < Sk; ++j) {
                    if (!ref_visible(p, b, h, i, j) || isinf(L))
                        continue;
                    const size_t ko = idx(p->heads_kv, Sk, D, b, h / group, j);
                    const size_t vo = idx(p->heads_kv, Sk, Dv, b, h / group, j);
                    double qk = 0, dp_abs = 0, t;
                    for (size_t d = 0; d < D; ++d)
                        qk += q[qo + d] * k[ko + d];
                    for (size_t d = 0; d < Dv; ++d)
                        dp_abs += fabs(dout[oo + d] * v[vo + d]);
                    const double z = ref_dropout_factor(p, b, h, i, j);
                    const double pij = exp(score(p, b, h, i, j, qk, &t) - L);
                    const double ds_abs = pij * (dp_abs * z + delta_abs) * fabs(1 - t * t);
                    for (size_t d = 0; d < Dv; ++d)
                        mv[vo + d] += pij * z * fabs(dout[oo + d]);
                    for (size_t d = 0; d < D; ++d) {
                        mk[ko + d] += scale * ds_abs * fabs(q[qo + d]);
                        mq[qo + d] += scale * ds_abs * fabs(k[ko + d]);
                    }
                }
            }
    free(lse);
    free(o);
}

void ref_rotary(double *x, size_t rotary_dim, int interleaved, const float *cos_row,
                const float *sin_row)
{
    const size_t half = rotary_dim / 2;
    for (size_t i = 0; i < half; ++i) {
        const size_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        const double c = cos_row[i], s = sin_row[i], xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
    }
}
