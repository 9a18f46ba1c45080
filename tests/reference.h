/* reference.h - CPU attention for the tests: a float64 reference (the truth)
 * and a low-precision reference (fp32 arithmetic, another operation order,
 * outputs rounded to the storage type) that tells how large an error the
 * storage type alone explains.
 *
 * All arrays are contiguous (batch, heads, seq, dim), dim head_dim for Q, K,
 * dQ, dK and head_dim_v for V, O, dO, dV; LSE is (batch, heads_q, seq_q).
 * Inputs are the storage-rounded values, as doubles. */
#ifndef FCL_TEST_REFERENCE_H
#define FCL_TEST_REFERENCE_H

#include "flashcl.h"

#include <stddef.h>
#include <stdint.h>

/* The attention variants, as the library defines them (flashcl.h). */
typedef struct ref_variants {
    long window_left, window_right;  /* -1: unbounded */
    double softcap;                  /* 0: off */
    const double *alibi_slopes;      /* NULL: none; slope of (b, h) at b * alibi_stride_b + h */
    size_t alibi_stride_b;
    double dropout_p;                /* 0: off */
    uint64_t dropout_seed;
    uint32_t dropout_offset;
    const int *cu_q, *cu_k;          /* NULL: every sequence has the full lengths */
    const unsigned char *block_mask; /* NULL: none */
    size_t block_m, block_n, block_stride_b, block_stride_h;
    const double *sinks;             /* NULL: none; else heads_q logits in every row's
                                        denominator, no value (flashcl.h, "Sinks") */
} ref_variants;

typedef struct ref_problem {
    size_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    double scale;
    int causal;
    fcl_dtype dtype;   /* storage type: what the low-precision reference rounds to */
    const ref_variants *var; /* NULL: plain attention */
    size_t head_dim_v; /* columns of V, O, dO and dV; 0: head_dim */
} ref_problem;

/* The columns of V, O, dO and dV. */
size_t ref_head_dim_v(const ref_problem *p);

/* Sequence b's lengths (its own with cu_seqlens, else the full ones). */
size_t ref_len_q(const ref_problem *p, size_t b);
size_t ref_len_k(const ref_problem *p, size_t b);

/* 1 if query row i of sequence b may see key j (window/causal aligned
 * bottom-right on the sequence's own lengths, and the block mask). */
int ref_visible(const ref_problem *p, size_t b, size_t h, size_t i, size_t j);

/* Philox4x32-10 on the host, and the dropout factor 0 or 1/(1-p) of (i, j). */
void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
double ref_dropout_factor(const ref_problem *p, size_t b, size_t h, size_t i, size_t j);

/* float64 forward: o and lse (lse = +inf for a row that sees no key; with
 * sinks, lse = the sink, or +inf for a sink of -inf). */
void ref_forward_f64(const ref_problem *p, const double *q, const double *k, const double *v,
                     double *o, double *lse);

/* The error bound of the forward with FP8 products (flashcl.h,
 * FLASHCL_FP8_PRODUCTS), from the float64 forward's P = exp(s - m), l =
 * sum P and O (o: ref_forward_f64's output for the same inputs): per
 * output element
 *   ob = (2^-4 sum_j P_j |v_jd| + 2^-18 sum_j |v_jd|) / l
 *        + ds * sum_j P_j |v_jd - O_d| / l,
 * P rounded to E4M3 (3 mantissa bits: half an ulp is 2^-4 of the value;
 * its subnormals, P times 2^8 below 2^-6, steps of 2^-17 of P), then to
 * first order a score error of at most ds; per row lb = ds, the LSE's
 * error to first order.  ds = eps_s * |scale| * max_j sum_d |q_d k_jd| +
 * eps_p: the scores' bound as a fraction of their terms' magnitude (the
 * FP8 tensor cores' accumulation), and P's relative error before its
 * rounding (a relative error of P is a score error in these units).
 * Plain attention (no dropout) only; rows that see no key get 0. */
void ref_forward_p8_bounds(const ref_problem *p, const double *q, const double *k,
                           const double *v, const double *o, double eps_s, double eps_p,
                           double *ob, double *lb);

/* fp32 forward with a two-pass softmax over keys in reverse order; o is
 * rounded to the storage type, lse is fp32. */
void ref_forward_lowp(const ref_problem *p, const double *q, const double *k, const double *v,
                      double *o, double *lse);

/* float64 analytic gradients of O = softmax(scale QK^T) V for dL/dO = dout. */
void ref_backward_f64(const ref_problem *p, const double *q, const double *k, const double *v,
                      const double *dout, double *dq, double *dk, double *dv);

/* fp32 gradients from the low-precision forward, rounded to the storage type. */
void ref_backward_lowp(const ref_problem *p, const double *q, const double *k, const double *v,
                       const double *dout, double *dq, double *dk, double *dv);

/* The sinks' gradient (p->var->sinks set): dsinks[h] = -sum over batch
 * entries and rows of exp(sink_h - LSE) * (dO . O), from the float64
 * forward (lowp = 0: float64 sums) or the low-precision one (lowp = 1:
 * fp32 sums in reverse order); magnitude[h] (may be NULL) gets the sum of
 * the terms' absolute values, sum |exp(sink_h - LSE)| * sum_d |dO_d O_d|. */
void ref_sinks_grad(const ref_problem *p, const double *q, const double *k, const double *v,
                    const double *dout, int lowp, double *dsinks, double *magnitude);

/* For each gradient element, the sum of the absolute values of the terms
 * that make it up (dS_ij counted as P_ij (sum |dO_i v_j| + sum |dO_i o_i|),
 * the two dot products that cancel in dP - delta).  Rounding errors of a
 * correct computation are bounded relative to these sums, not to the
 * gradient itself, which can be 0 exactly (one key: dK = dQ = 0). */
void ref_backward_magnitudes(const ref_problem *p, const double *q, const double *k,
                             const double *v, const double *dout, double *mq, double *mk,
                             double *mv);

/* Rotary position embedding of one row x[0 .. rotary_dim) in place, in
 * float64, as flashcl.h defines it (fcl_kvcache_desc): pair i is (2i, 2i+1)
 * when interleaved, else (i, i + rotary_dim / 2); cos_row and sin_row are
 * the tables' row of the position. */
void ref_rotary(double *x, size_t rotary_dim, int interleaved, const float *cos_row,
                const float *sin_row);

#endif
