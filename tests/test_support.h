/* test_support.h - what the tests share: random inputs, storage-type
 * conversions, strided device tensors with NaN fill and guard checks, and the
 * runners that compare a forward or backward call with the references.
 *
 * Tolerance rule (forward and backward alike), with err = max |x - ref64|:
 *     err(ours) <= factor * err(low-precision reference) + eps
 *     eps = u * max |ref64| + u32 * sqrt(n) * max(max |ref64|, M)
 *       u   = unit roundoff of the storage type (2^-24 fp32, 2^-11 fp16, 2^-8 bf16)
 *       u32 = 2^-24, the unit roundoff of the fp32 arithmetic
 *       n   = the longest sum behind an output: head_dim + seqlen_k (forward),
 *             head_dim + max(seqlen_q, seqlen_k) (backward)
 *       M   = gradients only: the largest sum of the absolute values of the
 *             terms behind one element (reference.h, ref_backward_magnitudes;
 *             0 for the forward)
 * factor = 2 for the forward, 3 for the gradients.  The low-precision reference
 * stores inputs and outputs in the same type and computes in fp32 in another
 * order, so its error is what the storage type alone explains; an indexing,
 * masking or rescaling bug costs orders of magnitude more.  eps covers what a
 * single reference cannot: two correct fp32 computations of a sum of n terms
 * differ by about sqrt(n) * u32 relative, and when the storage is fp32 that
 * noise is the whole error, so with few elements the reference can be luckier
 * than the kernel by more than 2x (seen: 3-row LSE, 5.3e-7 against 1.9e-7).
 * Why M: fp32 rounding of a sum is bounded by the sum of its terms' absolute
 * values, not by the result, and a gradient can cancel to exactly 0 (one
 * key: dK = dQ = 0, since dP = delta); the reference then has no error at all
 * (it computes dP and delta in the same order), while tensor cores compute dP
 * in another order than the delta kernel and leave ~1e-7 of M (seen: 3e-5 in
 * dK on the H200).  For fp16/bf16 storage the M term is far below u * max|ref|
 * in every other case.
 * eps stays near 1e-6 relative, far below any real bug.  Any NaN or Inf where
 * the reference is finite fails, as does an output element left unwritten or
 * a byte written outside
 * the output tensor (guards and the gaps of strided layouts).
 *
 * FP8 inputs: the references read the values the FP8 bytes stand for
 * (fp8_codec.h's decoder, times the descales), so the inputs are exact in
 * both and what is left is the fp32 arithmetic and the rounding of O: u is
 * then the OUTPUT type's (fp32, fp16 or bf16), and the low-precision
 * reference rounds its O to that type.  The tensor-core piece rounds P to
 * fp16 (the A operand of mma.sync): there u is fp16's for an fp32 O. */
#ifndef FCL_TEST_SUPPORT_H
#define FCL_TEST_SUPPORT_H

#include "flashcl.h"

#include <stddef.h>
#include <stdint.h>

/* ---- random numbers (deterministic, seeded) ---- */
typedef struct rng {
    uint64_t state;
} rng;
uint64_t rng_next(rng *r);
/* Moves r past n draws at once (splitmix64's state advances by a constant a
 * draw), so that threads can each draw their own part of one sequence. */
void rng_skip(rng *r, uint64_t n);
double rng_normal(rng *r);
double rng_uniform(rng *r); /* [0, 1) */

/* ---- storage types ---- */
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);
double round_to_dtype(double x, fcl_dtype dtype);
/* One element of the storage type at p, written from / read as a double. */
void fa_put_value(unsigned char *p, fcl_dtype dt, double x);
double fa_get_value(const unsigned char *p, fcl_dtype dt);
double unit_roundoff(fcl_dtype dtype);

/* ---- device buffers ---- */
/* A buffer of `bytes` bytes, each `byte` (NULL after printing why). */
cl_mem fa_filled_buffer(fcl_context *ctx, size_t bytes, unsigned char byte);
/* 1 if every one of the first `bytes` bytes of m is `byte` (after the queue finished). */
int fa_buffer_all(fcl_context *ctx, cl_mem m, size_t bytes, unsigned char byte);

/* ---- test contexts ---- */
/* The default device (or FLASHCL_DEVICE), optionally emulating a profile.
 * Returns NULL after printing why. */
fcl_context *test_context(const char *profile);

/* A second context (*ctx) on base's OpenCL context and device with an
 * out-of-order queue of its own (*queue: release it after the context).
 * Returns 1 when made, 0 (printed) where the device has no such queues, -1
 * (printed why) when the queue or the context could not be made. */
int test_out_of_order_context(fcl_context *base, cl_command_queue *queue, fcl_context **ctx);

/* A context on the default device for a cmocka group: fa_group_setup
 * creates it in fa_ctx, fa_group_teardown destroys it. */
extern fcl_context *fa_ctx;
int fa_group_setup(void **state);
int fa_group_teardown(void **state);

/* ---- one attention problem ---- */

/* Variants of a case (see fcl_attention_desc); start from fa_no_variants(). */
typedef struct fa_variants {
    long window_left, window_right; /* -1: unbounded */
    float softcap;                  /* 0: off */
    fcl_alibi_mode alibi;           /* slopes 2^(-8(h+1)/H), times 1 + b/4 per batch */
    float dropout_p;                /* 0: off */
    uint64_t dropout_seed;
    uint32_t dropout_offset;
    const int *seqlens_q;           /* packed sequences: `batch` lengths; NULL: not packed */
    const int *seqlens_k;
    size_t block_m, block_n;        /* block-sparse: a random mask; 0: none */
    double block_density;           /* fraction of non-zero blocks */
    int block_mask_shared;          /* 1: one mask for every batch entry and head */
    int num_splits;                 /* the forward's split-KV chunks: 0 automatic */
    /* FP8 storage (dtype FCL_DTYPE_FP8_*; forward only): inputs are random
     * values rounded to FP8, times the descales when they are on */
    fcl_dtype out_dtype;            /* O's type; FP16 from fa_no_variants (and without var) */
    int descales;                   /* 1: random descales 2^u, u uniform in [-2, 2), per
                                       (batch, head) for Q, K and V */
    int p_fp16;                     /* 1: the tensor-core piece, which rounds P to fp16 for
                                       the P V product: O is then held to fp16's u even
                                       when its type is fp32 */
    int fp8_products;               /* 1: the forward runs FP8 products (FLASHCL_FP8_PRODUCTS):
                                       O and LSE are held to reference.h's
                                       ref_forward_p8_bounds (FA_P8_EPS_S, FA_P8_EPS_P) times 2,
                                       plus O's rounding */
    size_t head_dim_v;              /* columns of V, O, dO, dV; 0: head_dim */
    /* attention sinks: 1: one logit per query head, log(seqlen_k) + N(0, 1) (about
     * the rows' own log-sum-exp, so the sink takes a fair share); the backward
     * then also checks dsinks (fp32, factor 3, u of the storage type: it is
     * made of O) */
    int sinks;
} fa_variants;

fa_variants fa_no_variants(void);

/* The scores' error bound of FP8 products as a fraction of |scale| sum_d
 * |q_d k_d| (flashcl.h, FLASHCL_FP8_PRODUCTS): 2^-10.  Hopper's FP8 tensor
 * cores keep about 14 bits in their sums (DeepSeek-V3's report), 2^-13 of
 * the terms' magnitude a rounding; four k32 steps at head_dim 128 and the
 * fp32 adds between them stay within 2^-10 with room (run 41d measured
 * the LSE's error at about 2^-12 of that magnitude). */
#define FA_P8_EPS_S 0x1p-10
/* ... and the probabilities' relative error before their rounding, in the
 * same units (added to the scores' bound): one in eight exponentials is a
 * degree-3 polynomial's, 2^-13.7 at most (cl/tile_nv_mma.cl,
 * fcl_exp2_fma) */
#define FA_P8_EPS_P 0x1p-13

typedef struct fa_case {
    size_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    fcl_dtype dtype;
    int causal;
    float scale;             /* 0: default */
    fcl_layout_kind layout;
    int padded;              /* strides with gaps and a non-zero offset (or FA_OUTPUTS_*) */
    double input_scale[3];   /* multiply q, k, v (0 means 1) */
    uint64_t seed;
    const fa_variants *var;  /* NULL: plain attention */
} fa_case;
/* fa_case.padded beyond 0 and 1: only O, dQ, dK and dV in other strides
 * (the inputs contiguous), with padded's gaps and odd offset, or with even
 * gaps (offset and strides even, no multiple of 8) */
#define FA_OUTPUTS_ODD 2
#define FA_OUTPUTS_EVEN 3

/* The columns of V, O, dO and dV of case c. */
size_t fa_head_dim_v(const fa_case *c);

typedef struct fa_result {
    double err, err_lowp, tol;   /* worst tensor's numbers */
    const char *worst;           /* which tensor */
    int unwritten, guard_bad, nonfinite;
    int masked_rows_ok;          /* -1 if the case has no fully masked row */
} fa_result;

/* Case i of a sweep over value head dims: c with head_dim d and v (set
 * here, from fa_no_variants) with head_dim_v dv; fp32, fp16 and bf16 in
 * turn, causal every other case, 4 query heads on 2 or 1 K/V heads,
 * BSHD and BHSD, strided layouts with gaps every third case. */
void fa_value_dim_case(fa_case *c, fa_variants *v, size_t d, size_t dv, size_t i);

/* O's storage type for case c (out_dtype for FP8 inputs, else dtype). */
fcl_dtype fa_out_dtype(const fa_case *c);

/* Runs the forward on `c` and compares; returns 1 on pass, prints on failure.
 * On a device that ends long loops (Mesa's llvmpipe, src/programs/loop_limit.c)
 * a call refused with FCL_ERROR_DEVICE_LOOP_LIMIT passes too, when its plan
 * query predicts exactly that and its outputs are untouched (it is printed,
 * and counted in fa_loop_refusals); a refusal the query does not predict, or
 * a prediction the call does not keep, fails. */
int fa_check_forward(fcl_context *ctx, const fa_case *c, fa_result *res);
/* Forward (ours) then backward; compares dQ, dK, dV (and dsinks with sinks). */
int fa_check_backward(fcl_context *ctx, const fa_case *c, fa_result *res);
/* Calls refused for the device's loop limit so far (see fa_check_forward). */
extern int fa_loop_refusals;
/* The refusal fcl_plan_query predicts for a call of d (the first of the
 * backward's two kernels that has one; FCL_ERROR_NO_PLAN only where
 * fa_accept_no_plan is set), or FCL_OK. */
fcl_status fa_refusal_prediction(fcl_context *ctx, const fcl_attention_desc *d, int backward);
/* Set by a test that has shown, from the device's own count of local memory,
 * that no plan of its case can fit (test_tensor_cores: the emulated pieces
 * on rusticl): a call refused with FCL_ERROR_NO_PLAN then passes as above,
 * when its plan query predicts exactly that and its outputs are untouched
 * (printed, and counted in fa_no_plan_refusals).  0 everywhere else: there
 * FCL_ERROR_NO_PLAN fails. */
extern int fa_accept_no_plan;
extern int fa_no_plan_refusals;
/* Runs the forward twice (and the backward if `backward`), 1 if bitwise equal. */
int fa_check_deterministic(fcl_context *ctx, const fa_case *c, int backward);
/* The same, with between(arg) called before the second run (a switch of
 * the environment, say): 1 if both runs' outputs are bitwise equal. */
int fa_check_same_after(fcl_context *ctx, const fa_case *c, int backward,
                        void (*between)(void *), void *arg);

/* The tolerance rule above on one tensor of n elements (those with
 * valid[i] != 0): 1 if it holds; the worst ratio is kept in res.
 * magnitude may be NULL (the forward's M = 0). */
int fa_compare(const char *name, const double *ours, const double *lowp, const double *ref,
               const double *magnitude, const unsigned char *valid, size_t n, double factor,
               fcl_dtype dt, size_t sum_terms, fa_result *res);

/* FP8 products' rule (fa_variants.fp8_products): ours within factor *
 * bound[i] of ref, plus ref's rounding to dt and fp32's at the scale of
 * the largest |ref|; non-finite elements must equal ref's.  1 if it holds;
 * the worst ratio is kept in res (err_lowp: that element's bound). */
int fa_compare_bound(const char *name, const double *ours, const double *ref,
                     const double *bound, const unsigned char *valid, size_t n, double factor,
                     fcl_dtype dt, fa_result *res);

/* Prints one line describing a case (for failure messages). */
void fa_describe(const fa_case *c, char *buf, size_t n);

/* FCL_POISON(p, n): under AddressSanitizer, any access to the n bytes at p
 * is reported until FCL_UNPOISON(p, n) (for checks that a call reads no
 * array); without it, nothing. */
#if defined(__SANITIZE_ADDRESS__)
#define FCL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FCL_ASAN 1
#endif
#endif
#ifdef FCL_ASAN
#include <sanitizer/asan_interface.h>
#define FCL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define FCL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define FCL_POISON(p, n) ((void)(p), (void)(n))
#define FCL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#endif
