/* reference.c - the CPU references (see reference.h). */
#include "reference.h"

#include "test_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ref_visible(const ref_problem *p, size_t i, size_t j)
{
    if (!p->causal)
        return 1;
    return (long long)j <= (long long)i + (long long)p->seqlen_k - (long long)p->seqlen_q;
}

static size_t idx(size_t heads, size_t seq, size_t dim, size_t b, size_t h, size_t s)
{
    return ((b * heads + h) * seq + s) * dim;
}

void ref_forward_f64(const ref_problem *p, const double *q, const double *k, const double *v,
                     double *o, double *lse)
{
    const size_t D = p->head_dim, Sq = p->seqlen_q, Sk = p->seqlen_k;
    const size_t group = p->heads_q / p->heads_kv;
    double *s = malloc(Sk * sizeof *s);
    for (size_t b = 0; b < p->batch; ++b)
        for (size_t h = 0; h < p->heads_q; ++h)
            for (size_t i = 0; i < Sq; ++i) {
                const double *qi = q + idx(p->heads_q, Sq, D, b, h, i);
                double *oi = o + idx(p->heads_q, Sq, D, b, h, i);
                double m = -INFINITY;
                for (size_t j = 0; j < Sk; ++j) {
                    s[j] = -INFINITY;
                    if (!ref_visible(p, i, j))
                        continue;
                    const double *kj = k + idx(p->heads_kv, Sk, D, b, h / group, j);
                    double dot = 0;
                    for (size_t d = 0; d < D; ++d)
                        dot += qi[d] * kj[d];
                    s[j] = dot * p->scale;
                    if (s[j] > m)
                        m = s[j];
                }
                memset(oi, 0, D * sizeof *oi);
                double l = 0;
                for (size_t j = 0; j < Sk; ++j) {
                    if (s[j] == -INFINITY)
                        continue;
                    const double e = exp(s[j] - m);
                    l += e;
                    const double *vj = v + idx(p->heads_kv, Sk, D, b, h / group, j);
                    for (size_t d = 0; d < D; ++d)
                        oi[d] += e * vj[d];
                }
                for (size_t d = 0; d < D && l > 0; ++d)
                    oi[d] /= l;
                lse[(b * p->heads_q + h) * Sq + i] = l > 0 ? m + log(l) : INFINITY;
            }
    free(s);
}

void ref_forward_lowp(const ref_problem *p, const double *q, const double *k, const double *v,
                      double *o, double *lse)
{
    const size_t D = p->head_dim, Sq = p->seqlen_q, Sk = p->seqlen_k;
    const size_t group = p->heads_q / p->heads_kv;
    const float scale = (float)p->scale;
    float *s = malloc(Sk * sizeof *s);
    float *acc = malloc(D * sizeof *acc);
    for (size_t b = 0; b < p->batch; ++b)
        for (size_t h = 0; h < p->heads_q; ++h)
            for (size_t i = 0; i < Sq; ++i) {
                const double *qi = q + idx(p->heads_q, Sq, D, b, h, i);
                double *oi = o + idx(p->heads_q, Sq, D, b, h, i);
                float m = -INFINITY;
                for (size_t jj = Sk; jj-- > 0;) { /* keys in reverse order */
                    s[jj] = -INFINITY;
                    if (!ref_visible(p, i, jj))
                        continue;
                    const double *kj = k + idx(p->heads_kv, Sk, D, b, h / group, jj);
                    float dot = 0;
                    for (size_t d = D; d-- > 0;)
                        dot += (float)qi[d] * (float)kj[d];
                    s[jj] = dot * scale;
                    m = fmaxf(m, s[jj]);
                }
                float l = 0;
                for (size_t jj = Sk; jj-- > 0;)
                    if (s[jj] != -INFINITY) {
                        s[jj] = expf(s[jj] - m);
                        l += s[jj];
                    }
                for (size_t d = 0; d < D; ++d)
                    acc[d] = 0;
                for (size_t jj = Sk; jj-- > 0;) {
                    if (s[jj] == -INFINITY || l == 0)
                        continue;
                    const float pj = s[jj] / l; /* normalised before PV, unlike the kernel */
                    const double *vj = v + idx(p->heads_kv, Sk, D, b, h / group, jj);
                    for (size_t d = 0; d < D; ++d)
                        acc[d] += pj * (float)vj[d];
                }
                for (size_t d = 0; d < D; ++d)
                    oi[d] = round_to_dtype(acc[d], p->dtype);
                lse[(b * p->heads_q + h) * Sq + i] = l > 0 ? (double)(m + logf(l)) : INFINITY;
            }
    free(acc);
    free(s);
}

/* The gradient recipe shared by both precisions: T is double or float. */
#define BACKWARD_BODY(T, EXP, FORWARD, ROUND)                                              \
    const size_t D = p->head_dim, Sq = p->seqlen_q, Sk = p->seqlen_k;                      \
    const size_t group = p->heads_q / p->heads_kv;                                         \
    const size_t nq = p->batch * p->heads_q * Sq * D, nk = p->batch * p->heads_kv * Sk * D; \
    double *o = malloc(nq * sizeof *o);                                                    \
    double *lse = malloc(p->batch * p->heads_q * Sq * sizeof *lse);                        \
    T *gk = calloc(nk, sizeof *gk), *gv = calloc(nk, sizeof *gv);                          \
    T *gq = malloc(D * sizeof *gq);                                                        \
    FORWARD(p, q, k, v, o, lse);                                                           \
    const T scale = (T)p->scale;                                                           \
    for (size_t b = 0; b < p->batch; ++b)                                                  \
        for (size_t h = 0; h < p->heads_q; ++h)                                            \
            for (size_t i = 0; i < Sq; ++i) {                                              \
                const size_t qo = idx(p->heads_q, Sq, D, b, h, i);                         \
                const T L = (T)lse[(b * p->heads_q + h) * Sq + i];                         \
                T delta = 0;                                                               \
                for (size_t d = 0; d < D; ++d)                                             \
                    delta += (T)dout[qo + d] * (T)o[qo + d];                               \
                for (size_t d = 0; d < D; ++d)                                             \
                    gq[d] = 0;                                                             \
                for (size_t j = 0; j < Sk; ++j) {                                          \
                    if (!ref_visible(p, i, j) || isinf((double)L))                         \
                        continue;                                                          \
                    const size_t ko = idx(p->heads_kv, Sk, D, b, h / group, j);            \
                    T s = 0, dp = 0;                                                       \
                    for (size_t d = 0; d < D; ++d) {                                       \
                        s += (T)q[qo + d] * (T)k[ko + d];                                  \
                        dp += (T)dout[qo + d] * (T)v[ko + d];                              \
                    }                                                                      \
                    const T pij = EXP(s * scale - L);                                      \
                    const T ds = pij * (dp - delta);                                       \
                    for (size_t d = 0; d < D; ++d) {                                       \
                        gv[ko + d] += pij * (T)dout[qo + d];                               \
                        gk[ko + d] += scale * ds * (T)q[qo + d];                           \
                        gq[d] += scale * ds * (T)k[ko + d];                                \
                    }                                                                      \
                }                                                                          \
                for (size_t d = 0; d < D; ++d)                                             \
                    dq[qo + d] = ROUND(gq[d]);                                             \
            }                                                                              \
    for (size_t x = 0; x < nk; ++x) {                                                      \
        dk[x] = ROUND(gk[x]);                                                              \
        dv[x] = ROUND(gv[x]);                                                              \
    }                                                                                      \
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
    BACKWARD_BODY(double, exp, ref_forward_f64, ROUND_NONE);
}

void ref_backward_lowp(const ref_problem *p, const double *q, const double *k, const double *v,
                       const double *dout, double *dq, double *dk, double *dv)
{
    BACKWARD_BODY(float, expf, ref_forward_lowp, ROUND_STORAGE);
}
