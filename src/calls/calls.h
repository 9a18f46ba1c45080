/* calls.h - the attention calls: descriptors and their checks, tensors and
 * their footprints, the variants in kernel form, the forward's and the
 * backward's launches, and the host-pointer forms. */
#ifndef FCL_CALLS_H
#define FCL_CALLS_H

#include "device/context.h"

/* ---- validation (validate.c) ---------------------------------------------- */

typedef struct fcl_tensor_ref {
    cl_mem mem;                   /* the cl_mem calls' buffer, else NULL */
    const void *host;             /* the host-pointer calls' array, else NULL */
    fcl_layout layout;
    size_t batch, heads, seqlen, head_dim;
    size_t elem_size;
    int is_output;
} fcl_tensor_ref;

fcl_tensor_ref fcl_tensor_ref_make(cl_mem mem, fcl_layout layout, size_t batch,
                                   size_t heads, size_t seqlen, size_t head_dim,
                                   size_t elem_size, int is_output);
/* The tensors of a forward call (q, k, v, o, lse) and of a backward call
 * (q, k, v, o, lse, dout, dq, dk, dv, dsinks), shaped as desc says (packed
 * sequences as one batch entry of total rows; dsinks heads_q floats, an
 * output checked as the others are); lse_is_output for the forward. */
enum { FCL_FORWARD_TENSORS = 5, FCL_BACKWARD_TENSORS = 10 };
void fcl_forward_tensors(const fcl_attention_desc *d, const cl_mem mem[FCL_FORWARD_TENSORS],
                         fcl_tensor_ref t[FCL_FORWARD_TENSORS]);
void fcl_backward_tensors(const fcl_attention_desc *d, const cl_mem mem[FCL_BACKWARD_TENSORS],
                          fcl_tensor_ref t[FCL_BACKWARD_TENSORS]);
/* The largest head_dim of each call (flashcl.h): the forward and the
 * backward take up to FCL_MAX_HEAD_DIM, the KV-cache call (decoding, e.g.
 * DeepSeek's 576-wide latent cache) up to FCL_MAX_HEAD_DIM_KVCACHE. */
#define FCL_MAX_HEAD_DIM ((size_t)256)
#define FCL_MAX_HEAD_DIM_KVCACHE ((size_t)576)
/* The descriptor's sizes, dtype, scale and flags, with head_dim up to
 * FCL_MAX_HEAD_DIM (_upto: up to max_head_dim, the call's own maximum). */
fcl_status fcl_validate_desc(const fcl_attention_desc *desc);
fcl_status fcl_validate_desc_upto(const fcl_attention_desc *desc, size_t max_head_dim);
/* Everything the forward / backward calls (and their plan queries) check
 * on the descriptor alone, in the calls' order: fcl_validate_desc, for the
 * backward no FP8 dtype, then the variants' settings.  Every call makes
 * these checks before it looks at a buffer or array. */
fcl_status fcl_check_forward_desc(const fcl_attention_desc *desc);
fcl_status fcl_check_forward_desc_upto(const fcl_attention_desc *desc, size_t max_head_dim);
fcl_status fcl_check_backward_desc(const fcl_attention_desc *desc);
/* Bytes from the buffer start to one past the tensor's last element. */
fcl_status fcl_tensor_extent_bytes(const fcl_tensor_ref *t, uint64_t *bytes);
fcl_status fcl_validate_tensors(const fcl_context *ctx, const fcl_tensor_ref *tensors, size_t n);
/* A byte array a call reads (cu_seqlens, a block mask, slopes, cache
 * lengths, a page table), as a tensor of `bytes` one-byte elements. */
fcl_tensor_ref fcl_aux_ref(cl_mem mem, uint64_t bytes);
/* The bytes a tensor touches (footprint.c): rows of `row` bytes at `first`
 * plus up to three nested levels of count[k] copies stride[k] bytes apart. */
typedef struct fcl_footprint {
    uint64_t first;               /* byte address of the first row (in a buffer, or the host's) */
    uint64_t row;
    int levels;
    uint64_t count[3], stride[3]; /* by increasing stride */
} fcl_footprint;
/* t's footprint when its element 0 is at byte `first_byte` (strides must
 * nest: fcl_validate_tensors checks that first). */
fcl_footprint fcl_footprint_of(const fcl_tensor_ref *t, uint64_t first_byte);
/* Whether two footprints of one address space share a byte.  Exact, unless
 * they interleave with different strides in more than about a million places:
 * then the test gives up and answers true. */
bool fcl_footprints_meet(const fcl_footprint *a, const fcl_footprint *b);
/* Copies f's bytes from src to dst, both pointing at f's first byte. */
void fcl_footprint_copy(const fcl_footprint *f, unsigned char *dst, const unsigned char *src);
/* No output tensor shares bytes with an aux array (FCL_ERROR_BUFFER_ALIASING):
 * the kernels read those while they write, and check what they read (a
 * page index, a sequence's bounds) before they use it again. */
fcl_status fcl_validate_apart(const fcl_context *ctx, const fcl_tensor_ref *tensors, size_t n,
                              const fcl_tensor_ref *aux, size_t num_aux);

/* A call's variants in kernel form; the trailing kernel arguments. */
typedef struct fcl_variants {
    unsigned features;            /* FCL_FEAT_* bits: part of the kernel build */
    int window_left, window_right;
    int lse_rows;                 /* seqlen_q, or total_q for packed sequences */
    float softcap;
    cl_mem alibi;
    int64_t alibi_stride_batch;
    uint32_t seed_lo, seed_hi, dropout_offset, dropout_threshold;
    float keep_scale;
    cl_mem cu_q, cu_k;
    cl_mem block_mask;
    int64_t block_mask_stride_batch, block_mask_stride_head;
    int block_m, block_n, block_nbn;
    cl_mem descale_q, descale_k, descale_v; /* FP8: per-head descales, NULL = 1.0 */
    cl_mem sinks;                 /* heads_q sink logits, NULL: none */
    /* (the kernels get the context's placeholder and a bit for a NULL one:
     * FCL_ARRAY_*, "optional arrays" in cl/common.cl) */
    /* the longest query and key sequences, which size the launches:
     * seqlen_q and seqlen_k, or for packed sequences the longest ones
     * cu_seqlens hold (a generous stated maximum costs no empty groups) */
    size_t longest_q, longest_k;
    fcl_tensor_ref aux[8];        /* the aux buffers read (slopes, cu_seqlens, block
                                     mask, FP8 descales, sinks), for fcl_validate_apart */
    size_t num_aux;
} fcl_variants;

/* The variants' settings alone (windows, softcap, the ALiBi mode, dropout_p,
 * the varlen and sinks flags, block sizes): FCL_ERROR_INVALID_VALUE, or
 * FCL_ERROR_INVALID_SHAPE for a block mask past INT64_MAX bytes. */
fcl_status fcl_variants_check_settings(const fcl_attention_desc *desc);
/* The FCL_FEAT_* bits a call of desc compiles in. */
unsigned fcl_variants_features(const fcl_attention_desc *desc);
/* The tile a wgmma kernel of `kind` takes for desc's lengths (plan.h,
 * plan_wgmma.c), as FCL_BUILD_WG_SHORT, FCL_BUILD_WG_LONG or 0: the
 * forward at head_dim 64 in 16-bit storage by its keys (few; many without
 * a mask, or under a causal mask with no left window), dK/dV at head_dim
 * 128 without the fused dQ by the query rows a key block visits
 * (seqlen_q, half of it rounded up under a causal mask); 0 for the other
 * kernels.  A causal mask is `causal` or window_right = 0.  The one place
 * of these rules: the calls and their plan queries both build through
 * fcl_forward_build and fcl_backward_builds_of, which ask here. */
unsigned fcl_variants_wgmma_tile(const fcl_attention_desc *desc, fcl_kernel_kind kind,
                                 bool fused_dq);
/* FCL_BUILD_WHOLE_TILES where a tensor-core kernel of `kind` (wgmma, or
 * mma.sync at head_dim 64: FCL_BUILD_WGMMA or FCL_BUILD_TILE_MMA in
 * `features`, the call's build bits) has no edge tile: no mask (not causal,
 * no window), no packed sequences, block mask or KV cache, and seqlen_k a
 * multiple of FCL_WHOLE_TILE_KEYS; but not the forward's tile for many keys
 * (FCL_BUILD_WG_LONG), measured slower so; else 0.  Asked by
 * fcl_forward_build and fcl_backward_builds_of. */
unsigned fcl_variants_whole_tiles(const fcl_attention_desc *desc, fcl_kernel_kind kind,
                                  unsigned features);
/* cu_seqlens values: 0 first, never decreasing, no sequence longer than
 * max_len, the last within total (FCL_ERROR_INVALID_CU_SEQLENS); gives the
 * longest sequence. */
fcl_status fcl_check_cu_seqlens_values(const int32_t *cu, size_t batch, size_t max_len,
                                       size_t total, size_t *longest);
/* Checks desc's variants (fcl_variants_check_settings first) and aux's
 * buffers (reading cu_seqlens back after the wait list). */
fcl_status fcl_variants_prepare(fcl_context *ctx, const fcl_attention_desc *desc,
                                const fcl_attention_aux *aux, cl_uint num_wait,
                                const cl_event *wait, fcl_variants *v);
void fcl_arg_variants(fcl_args *a, const fcl_variants *v);
/* Bytes of desc's block mask (block_m, block_n > 0): FCL_ERROR_INVALID_SHAPE
 * past INT64_MAX. */
fcl_status fcl_block_mask_bytes(const fcl_attention_desc *d, uint64_t *bytes);
/* An aux buffer: not NULL, of the context, at least `bytes` large. */
fcl_status fcl_check_aux_buffer(const fcl_context *ctx, cl_mem mem, uint64_t bytes);

/* ---- the forward's launches (forward.c) ------------------------------------ */

/* One forward launch: a forward call, or the attention of a KV-cache call
 * (then desc->seqlen_k is the keys a sequence's cache can hold, and the
 * cache fields are set). */
typedef struct fcl_forward_job {
    const fcl_attention_desc *desc;
    const fcl_variants *var;
    cl_mem q, k, v, o, lse;
    int page_size;                /* keys per page; 0: strided K/V */
    cl_mem cache_lens;            /* int32[batch]: KV-cache calls (FCL_FEAT_KVCACHE) */
    cl_mem page_table;            /* int32: paged caches */
    int64_t page_table_stride;
    int seqlen_new;
    int num_pages;                /* paged caches: pages, for the forward's check */
} fcl_forward_job;

/* The most split-KV chunks, forced or automatic (cl/combine.cl's
 * FCL_COMBINE_MAX_SPLITS holds a weight for each). */
#define FCL_MAX_SPLITS 1024

/* Split-KV: num_splits chunks of split_keys keys (0 when not split). */
typedef struct fcl_split {
    int num_splits;
    int split_keys;
} fcl_split;

/* The kernel build of a forward of `d`: a decode plan with GQA packing for
 * few query rows, the forward's otherwise; tensor cores where they apply. */
fcl_build fcl_forward_build(const fcl_context *ctx, const fcl_attention_desc *d,
                            unsigned features, int page_size);
/* The key chunks for `groups` work-groups of plan p over `keys` keys;
 * forced > 0 gives exactly that many. */
fcl_split fcl_forward_splits(const fcl_context *ctx, const fcl_plan *p, size_t groups, size_t keys,
                             int forced);
fcl_status fcl_forward_resolve(fcl_context *ctx, const fcl_forward_job *job, fcl_resolved **out);
/* The public plan of a job: the resolved plan with its packing and chunks. */
fcl_status fcl_forward_plan_of(fcl_context *ctx, const fcl_forward_job *job, fcl_plan *plan);
/* FCL_OK when the device can run the job with r's plan as it would be
 * launched (its key chunks within a loop limit, see loop_limit.c). */
fcl_status fcl_forward_check_launch(fcl_context *ctx, const fcl_forward_job *job,
                                    const fcl_resolved *r);
/* Launches the job (and the merge of its chunks) after `wait`; `event`, if
 * not NULL, receives the completion of the last kernel. */
fcl_status fcl_forward_enqueue(fcl_context *ctx, const fcl_forward_job *job, fcl_resolved *r,
                               const fcl_wait *wait, cl_event *event);

/* ---- the backward's kernels (backward.c) ----------------------------------- */

/* The kernel builds of a backward of `desc` with `features`: each on tensor
 * cores where it can be; there, above head_dim 128, dK/dV may be two
 * launches (dV, then dK: dkdv[1] the second; fcl_mma_dkdv_split), and at or below it dK/dV computes dQ
 * as well where fused_dq says (backward.c). */
typedef struct fcl_backward_builds {
    fcl_build dq;                 /* with fused_dq, only its delta kernel runs */
    fcl_build dkdv[2];
    int dkdv_launches;            /* 1 or 2 */
    bool fused_dq;                /* dK/dV computes dQ too (flash_bwd.cl, FCL_FUSED_DQ) */
} fcl_backward_builds;
fcl_backward_builds fcl_backward_builds_of(const fcl_context *ctx, const fcl_attention_desc *desc,
                                           unsigned features);
/* The outer loop's length of one work-group of a backward kernel, as
 * fcl_loop_check takes it: the keys for dQ; for dK/dV the query rows of
 * every query head that shares the work-group's K/V head (flash_bwd.cl walks
 * heads_q / heads_kv heads of seqlen_q rows each). */
size_t fcl_backward_loop_outer(const fcl_attention_desc *desc, fcl_kernel_kind kind);

/* ---- host-pointer calls (host_calls.c) ------------------------------------- */

/* One tensor of a host-pointer call: the byte range [offset, end of its last
 * element) of the caller's array, and the buffer it travels in. */
typedef struct fcl_host_tensor {
    const void *src;              /* host bytes at the tensor's first element */
    void *dst;                    /* where outputs go back; NULL for inputs */
    size_t bytes;
    cl_mem mem;
    fcl_footprint fp;             /* outputs: the bytes written back, from src/dst */
} fcl_host_tensor;

/* Creates a buffer for each h[i] with a source (src and bytes set), copying
 * its bytes in; fcl_host_release releases them (also after a failure). */
fcl_status fcl_host_upload(fcl_context *ctx, fcl_host_tensor *h, size_t n);
void fcl_host_release(fcl_context *ctx, fcl_host_tensor *h, size_t n);
/* Reads the outputs (dst set) of h[0..n) back through one host staging
 * copy: the caller's arrays change only once every read has succeeded, and
 * only in the outputs' footprints (the bytes of their elements), so
 * another tensor between an output's rows (V between K's pages) is never
 * written. */
fcl_status fcl_host_read_outputs(fcl_context *ctx, const fcl_host_tensor *h, size_t n);
/* Describes tensor `t` of host array `base` and re-bases its layout to 0. */
fcl_status fcl_host_range(const fcl_tensor_ref *t, const void *base, fcl_layout *rebased,
                          fcl_host_tensor *h);

#endif /* FCL_CALLS_H */
