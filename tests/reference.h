/* reference.h - CPU attention for the tests: a float64 reference (the truth)
 * and a low-precision reference (fp32 arithmetic, another operation order,
 * outputs rounded to the storage type) that tells how large an error the
 * storage type alone explains.
 *
 * All arrays are contiguous (batch, heads, seq, dim); LSE is (batch, heads_q, seq_q).
 * Inputs are the storage-rounded values, as doubles. */
#ifndef FCL_TEST_REFERENCE_H
#define FCL_TEST_REFERENCE_H

#include "flashcl.h"

#include <stddef.h>

typedef struct ref_problem {
    size_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    double scale;
    int causal;
    fcl_dtype dtype;   /* storage type: what the low-precision reference rounds to */
} ref_problem;

/* 1 if query row i may see key j (causal aligned bottom-right). */
int ref_visible(const ref_problem *p, size_t i, size_t j);

/* float64 forward: o and lse (lse = +inf for a row that sees no key). */
void ref_forward_f64(const ref_problem *p, const double *q, const double *k, const double *v,
                     double *o, double *lse);

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

#endif
