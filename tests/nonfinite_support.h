/* nonfinite_support.h - checking that a non-finite input element reaches
 * exactly the outputs that see it (flashcl.h, "Non-finite inputs"), for
 * test_nonfinite and the Oclgrind cases.
 *
 * nf_check runs a case twice.  First on random finite inputs, checked
 * against the float64 reference by the rule of test_support.h.  Then with
 * the case's elements made +inf, -inf or NaN.  Each output element of the
 * second run is then one of
 *   required: non-finite.  O[i][c] where row i sees a key j with a
 *       non-finite V[j][c]; dQ[i][c] where i sees j with a non-finite
 *       K[j][c]; dK[j][c] (dV[j][c]) where a row i that sees j has a
 *       non-finite Q[i][c] (dO[i][c]);
 *   free: what the math lets a non-finite value reach through pairs that
 *       see each other (a non-finite K row gives the rows that see it
 *       scores of +-inf or NaN; the backward spreads a row's non-finite O,
 *       LSE or dO to every key the row sees, and a key's to the rows that
 *       see it);
 *   untouched: every other element, equal to the first run's.
 * nf_kv_check does the same for the KV-cache call's O. */
#ifndef FCL_NONFINITE_SUPPORT_H
#define FCL_NONFINITE_SUPPORT_H

#include "flashcl.h"
#include "kvcache_support.h"

#include <stddef.h>
#include <stdint.h>

enum { NF_Q, NF_K, NF_V, NF_DO, NF_TENSORS };
enum { NF_MAX_SPOTS = 4 };

/* One element made non-finite: tensor, head (query head for Q and dO, K/V
 * head for K and V), row and column.  value 0 ends a list. */
typedef struct nf_spot {
    int tensor;
    size_t head, row, col;
    double value;
} nf_spot;

typedef struct nf_case {
    size_t heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    fcl_dtype dtype;
    int causal;
    long window_left, window_right;
    size_t block;   /* a random block mask of block x block blocks; 0: none */
    int num_splits; /* the forward's split-KV chunks, 0: automatic */
    int backward;
    nf_spot spots[NF_MAX_SPOTS];
    uint64_t seed;
} nf_case;

/* ---- the KV-cache call --------------------------------------------------- */

/* V of the cache made non-finite: key `key` of sequence b, K/V head hk,
 * column col. */
typedef struct nf_kv_spot {
    size_t b, hk, key, col;
    double value;
} nf_kv_spot;

/* Units in the last place of the storage type by which an untouched dQ
 * element may differ from the first run's (0, the default: bitwise equal).
 * The fused dQ (FLASHCL_BACKWARD_DQ) computes the share of a key tile that
 * holds a non-finite K element by an exact sum in key order (flash_bwd.cl,
 * fcl_dq_exact) for every row of that tile, where the clean run used the
 * tensor cores: both fp32 sums of the same products in different orders,
 * so the stored dQ of a row that sees no bad key can round one unit apart
 * (the H100; emulated on CPUs the two orders agree). */
extern int nf_dq_rounding;

/* 1 where the forward runs FP8 products (FLASHCL_FP8_PRODUCTS, which the
 * caller sets): the first run is then held to their bound (test_support.h,
 * fp8_products) instead of the storage type's rule (0, the default). */
extern int nf_fp8_products;

/* Runs case c on ctx both ways; 1 if every check holds, else prints. */
int nf_check(fcl_context *ctx, const nf_case *c);

/* The same for a KV-cache case with nspots spots in the cache's V. */
int nf_kv_check(fcl_context *ctx, const kv_case *c, const nf_kv_spot *spots, size_t nspots);

#endif
