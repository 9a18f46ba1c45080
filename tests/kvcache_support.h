/* kvcache_support.h - checking the KV-cache call against the float64
 * reference, for test_kvcache and the Oclgrind cases.
 *
 * kv_run fills a cache (contiguous, or paged with a shuffled page table and
 * spare pages) with random keys and values everywhere, so a read of a slot
 * a sequence does not own changes the result; gives every sequence its own
 * length; appends new rows; runs the host call; and checks that the caches
 * hold exactly the expected bytes afterwards (appended rows at each
 * sequence's length, nothing else changed), O and LSE against the float64
 * reference of each sequence's keys (tests/reference.h with per-sequence
 * lengths) by the tolerance rule of test_support.h (factor 2, as the
 * forward), and that a second run is bitwise the same. */
#ifndef FCL_KVCACHE_SUPPORT_H
#define FCL_KVCACHE_SUPPORT_H

#include "flashcl.h"

#include <stddef.h>
#include <stdint.h>

typedef struct kv_case {
    size_t batch, heads_q, heads_kv, head_dim, seqlen_q, seqlen_new;
    fcl_dtype dtype;
    size_t page_size;        /* 0: contiguous */
    size_t capacity;         /* keys per sequence: cache_seqlen, or max_pages * page_size */
    const int *lens;         /* cache_seqlens, batch of them */
    int causal;
    long window_left;
    float softcap;
    int alibi;
    int num_splits;
    uint64_t seed;
} kv_case;

/* FP8 caches (dtype FCL_DTYPE_FP8_*): O's type, random descales 2^u (u
 * uniform in [-2, 2)) per (sequence, head) for Q, K and V, and whether the
 * piece rounds P to fp16 (the tensor-core piece: O is then held to fp16's
 * rounding even when it is fp32; test_support.h). */
typedef struct kv_fp8 {
    fcl_dtype out_dtype;
    int descales;
    int p_fp16;
} kv_fp8;

/* Rotary position embedding (fcl_kvcache_desc): rotary_dim 0 is off.  The
 * tables have capacity + 5 rows of random angles (cos and sin of one angle
 * uniform in [0, 2 pi) per position and pair), so a wrong position or pair
 * changes the result. */
typedef struct kv_rotary {
    size_t rotary_dim;
    int interleaved;
} kv_rotary;

/* Host state of one case: every array in storage bytes (O in its own type). */
typedef struct kv_state {
    fcl_kvcache_desc desc;
    size_t es, oes, nq, nlse, ncache, nnew, npages;
    fcl_dtype out_dtype;
    int p_fp16;
    float *descale[3];            /* FP8: of Q, K, V, or NULL */
    unsigned char *q, *kc, *vc, *kn, *vn, *o;
    unsigned char *kc_expect, *vc_expect; /* the caches as the call must leave them */
    size_t v_shift;               /* interleaved: vc == kc, V's element = K's + v_shift */
    int shared;                   /* shared_kv: vc == kc, V is K's rows' first dv columns
                                     (v_shift 0); the call gets no V arrays */
    size_t dv, no, nvcache;       /* head_dim_v; O's and the V cache's elements */
    int32_t *lens, *pages;
    float *alibi, *lse;
    float *sinks;                 /* attention sinks (heads_q), or NULL */
    float *rot_cos, *rot_sin;     /* rotary tables, or NULL */
    size_t rot_floats;            /* in each table */
    unsigned char *q_ref;         /* rotary: Q rotated in float64 and rounded to the
                                     storage type, as the scores use it; else NULL */
    double *k_rot;                /* rotary: the appended K rows rotated in float64,
                                     indexed as k_new, unrounded */
} kv_state;

void kv_init(const kv_case *c, kv_state *st);
/* The same with K and V of a page (of a sequence, contiguous) in one
 * allocation, [page][2][page_size][heads_kv][d], as FlashInfer and vLLM keep
 * them: k_cache.offset 0, v_cache.offset one page, both page strides two
 * pages; st->kc == st->vc. */
void kv_init_interleaved(const kv_case *c, kv_state *st);
/* The same with one shared cache (fcl_kvcache_desc.shared_kv): V is the
 * first head_dim_v columns of K's rows, st->vc == st->kc, and an append
 * writes K's rows alone; with sinks as kv_run_sinks when `sinks`. */
void kv_init_shared(const kv_case *c, size_t head_dim_v, int sinks, kv_state *st);
/* The same with attention sinks (see kv_run_sinks). */
void kv_init_sinks(const kv_case *c, kv_state *st);
/* The same with FP8 options (fp8 may be NULL: no descales, fp16 O). */
void kv_init_fp8(const kv_case *c, const kv_fp8 *fp8, kv_state *st);
/* The same with rotary (rot may be NULL: none). */
void kv_init_rotary(const kv_case *c, const kv_rotary *rot, kv_state *st);
void kv_free(kv_state *st);
/* Rotary, after a call on ctx: checks every appended K element the call
 * left in st->kc, and every element of the rotated Q it left in ctx's
 * workspace, against its float64 rotation (within the storage type's
 * rounding plus fp32 arithmetic: rounding an fp32 value may differ from
 * rounding the exact one by a unit), then takes the call's values into
 * kc_expect and q_ref, so the caches' other bytes are still compared
 * exactly and the reference attends with the Q and K the call used.
 * 1 on pass (and without rotary), prints on failure. */
int kv_adopt_rotation(fcl_context *ctx, kv_state *st);
fcl_kvcache_host kv_host_arrays(kv_state *st);
/* Element index where key j of sequence b, head hk starts in the K cache
 * (in the V cache: that plus st->v_shift). */
size_t kv_cache_at(const kv_state *st, size_t b, size_t j, size_t hk);
/* A stored value of the storage type. */
double kv_get(const unsigned char *p, fcl_dtype dt);
/* Checks st's O and LSE (as left by a call) for the first c->batch
 * sequences; 1 on pass, prints on failure. */
int kv_check_outputs(const kv_case *c, const kv_state *st, const char *what);
/* Runs the case through fcl_attention_kvcache_host and checks everything
 * above; 1 on pass, prints on failure. */
int kv_run(fcl_context *ctx, const kv_case *c);
int kv_run_fp8(fcl_context *ctx, const kv_case *c, const kv_fp8 *fp8);
int kv_run_rotary(fcl_context *ctx, const kv_case *c, const kv_rotary *rot);
/* kv_run on the interleaved layout of kv_init_interleaved. */
int kv_run_interleaved(fcl_context *ctx, const kv_case *c);
/* kv_run with V, v_new and O head_dim_v columns wide (K, Q head_dim). */
int kv_run_value_dim(fcl_context *ctx, const kv_case *c, size_t head_dim_v);
/* kv_run with attention sinks: one logit per query head, log(capacity / 2
 * + 1) + N(0, 1) (at most 128 heads). */
int kv_run_sinks(fcl_context *ctx, const kv_case *c);
/* kv_run on one shared cache (kv_init_shared): MLA's latent cache. */
int kv_run_shared(fcl_context *ctx, const kv_case *c, size_t head_dim_v, int sinks);

/* The cl_mem form on st's arrays, with K and V in one buffer when they
 * share one array (kv_init_interleaved), no V buffers for a shared cache
 * (kv_init_shared), a sinks buffer sinks_missing floats short of heads_q;
 * reads O, LSE and the caches back into st.  Returns the call's status
 * (or an OpenCL error of the buffers' creation or reads). */
fcl_status kv_run_on_buffers(fcl_context *ctx, kv_state *st, size_t sinks_missing);

#endif
