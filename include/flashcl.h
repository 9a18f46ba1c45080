/*
 * flashcl.h - portable FlashAttention on OpenCL.
 *
 * flashcl computes exact attention
 *
 *     O = softmax(scale * Q K^T + mask) V
 *
 * on any OpenCL 1.2+ device (GPUs of any vendor, or a CPU through PoCL) with
 * tiled, online-softmax kernels: tiles of Q, K and V live in the device's
 * on-chip memory (OpenCL `__local`), and the N x N score matrix is never
 * stored.  It also computes the exact gradients dQ, dK, dV by recomputation.
 *
 * Everything public is in this one header.  Conventions:
 *   - Every name starts with `fcl_` / `FCL_`.
 *   - Every function that can fail returns an `fcl_status`: FCL_OK (0) on
 *     success, a positive FCL_ERROR_* code for a flashcl-level failure, or a
 *     negative OpenCL error code (CL_OUT_OF_RESOURCES, ...) passed through when
 *     OpenCL itself was the cause.  `fcl_status_string()` names any of them.
 *   - The library never prints, never exits or aborts, and keeps no global
 *     mutable state: two contexts in two threads never interfere.  One context
 *     must not be used by two threads at the same time.
 *   - On any error, nothing has been written to any output buffer.  Every
 *     call checks, in this order: its NULL arguments, its descriptor alone
 *     (sizes, dtype, scale, flags, variant settings: the checks the plan
 *     queries make too, so a query returns the status its call would return
 *     for that descriptor), its tensors (strides, buffer sizes and contexts,
 *     aliasing), its aux buffers or arrays, and for a host-pointer call the
 *     kernels' plans; only then does it read any array of yours beyond those
 *     it must read to check (cu_seqlens, cache lengths, page tables).  A
 *     refused call reads no other array and writes nothing.
 *   - Aliasing is decided on footprints: the bytes of a tensor's elements
 *     (see fcl_layout), not the range from its first to its last byte.  No
 *     output may share a byte with another tensor or aux array of its call
 *     (FCL_ERROR_BUFFER_ALIASING); tensors whose rows interleave without
 *     sharing a byte (K and V pages of one allocation, Q, K and V of one
 *     packed QKV tensor) are accepted, in one cl_mem or one host array alike.
 *
 * Minimal use (host pointers; see fcl_attention_forward for cl_mem buffers):
 *
 *     fcl_context *ctx = NULL;
 *     fcl_status st = fcl_context_create(NULL, &ctx);   // default device
 *     fcl_attention_desc desc;
 *     fcl_attention_desc_init(&desc, batch, heads, heads, seq, seq, 64,
 *                             FCL_DTYPE_FP32, FCL_LAYOUT_BSHD);
 *     desc.causal = 1;
 *     if (st == FCL_OK)
 *         st = fcl_attention_forward_host(ctx, &desc, q, k, v, o, NULL);
 *     if (st != FCL_OK) fprintf(stderr, "%s\n", fcl_status_string(st));
 *     fcl_context_destroy(ctx);
 */
#ifndef FLASHCL_H
#define FLASHCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/*  Export macro and version                                                */
/* ------------------------------------------------------------------------ */

#if defined(_WIN32) && defined(FCL_BUILDING_SHARED)
#define FCL_API __declspec(dllexport)
#elif defined(_WIN32) && defined(FCL_USING_SHARED)
#define FCL_API __declspec(dllimport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#define FCL_API __attribute__((visibility("default")))
#else
#define FCL_API
#endif

#define FCL_VERSION_MAJOR 0
#define FCL_VERSION_MINOR 1
#define FCL_VERSION_PATCH 0
#define FCL_VERSION_NUMBER \
    (FCL_VERSION_MAJOR * 10000 + FCL_VERSION_MINOR * 100 + FCL_VERSION_PATCH)

/*! fcl_version_number() :
 * @return the library's FCL_VERSION_NUMBER (may differ from the header's
 *         when linking against another build). */
FCL_API unsigned fcl_version_number(void);

/*! fcl_version_string() :
 * @return the version as "MAJOR.MINOR.PATCH"; a static string. */
FCL_API const char *fcl_version_string(void);

/* ------------------------------------------------------------------------ */
/*  Status codes                                                            */
/* ------------------------------------------------------------------------ */

/* One list generates the enum below and the strings of fcl_status_string().
 * Values are stable: new codes are only ever appended.
 * FCL_ERROR_DEVICE_LOOP_LIMIT: on a device that silently ends kernel loops
 * after a fixed number of iterations (Mesa's llvmpipe, found by a probe at
 * context creation) the forward splits long key ranges into chunks it can
 * walk; a call that still needs longer loops (the backward over many keys,
 * or over many query rows times the query heads that share a K/V head,
 * packed sequences, a forced num_splits too small) is refused with it
 * before anything is enqueued. */
#define FCL_STATUS_MAP(X)                                                              \
    X(OK, 0, "success")                                                                \
    X(ERROR_NULL_ARGUMENT, 1, "a required pointer argument is NULL")                   \
    X(ERROR_INVALID_SHAPE, 2, "a size is zero or larger than the library supports")    \
    X(ERROR_HEAD_DIM_UNSUPPORTED, 3, "head_dim is outside 1..256 (1..576 in the KV-cache call), or head_dim_v outside 1..head_dim") \
    X(ERROR_HEADS_NOT_DIVISIBLE, 4, "heads_q is not a multiple of heads_kv")           \
    X(ERROR_OVERLAPPING_STRIDES, 5, "a tensor's strides make two of its elements overlap") \
    X(ERROR_BUFFER_TOO_SMALL, 6, "a buffer is smaller than the tensor it must hold")   \
    X(ERROR_BUFFER_ALIASING, 7, "an output buffer overlaps another tensor of the call") \
    X(ERROR_DTYPE_UNSUPPORTED, 8, "the storage type is unknown or the device cannot do it") \
    X(ERROR_INVALID_VALUE, 9, "an option has an invalid value (scale, flag, index ...)") \
    X(ERROR_BUILD_FAILED, 10, "an OpenCL kernel failed to compile: see fcl_context_build_log()") \
    X(ERROR_NO_DEVICE, 11, "no OpenCL platform or device was found")                   \
    X(ERROR_DEVICE_NOT_FOUND, 12, "the requested platform/device index does not exist") \
    X(ERROR_BAD_DEVICE_SPEC, 13, "FLASHCL_DEVICE must look like \"P:D\" (platform:device indices)") \
    X(ERROR_OUT_OF_HOST_MEMORY, 14, "a host memory allocation failed")                 \
    X(ERROR_NO_PLAN, 15, "no tile plan fits this device's local memory and work-group limits") \
    X(ERROR_UNKNOWN_PROFILE, 16, "no emulated device profile has that name")           \
    X(ERROR_PROFILE_NOT_RUNNABLE, 17, "the emulated profile's plan cannot run on the real device") \
    X(ERROR_MISSING_LSE, 18, "the backward pass needs the forward's LSE buffer")        \
    X(ERROR_WRONG_CONTEXT, 19, "a cl_mem belongs to another OpenCL context than the fcl_context") \
    X(ERROR_INVALID_CU_SEQLENS, 20, "cu_seqlens must start at 0, never decrease, and fit total and max lengths") \
    X(ERROR_INVALID_CACHE_SEQLENS, 21, "a cache length is negative, or with the appended rows exceeds its sequence's cache") \
    X(ERROR_INVALID_PAGE_TABLE, 22, "a page-table entry that a sequence uses is outside [0, num_pages)") \
    X(ERROR_RANKS_DISAGREE, 23, "the ranks of a collective call were given different descriptors") \
    X(ERROR_MPI, 24, "an MPI call failed (flashcl_mpi)")                               \
    X(ERROR_DEVICE_LOOP_LIMIT, 25, "the device ends kernel loops after a fixed count (Mesa's llvmpipe: 65535 iterations) and this call's loops are longer")

#define FCL_STATUS_ENUM_ITEM_(name, value, text) FCL_##name = value,
/* Positive: flashcl errors.  Negative: OpenCL error codes passed through. */
enum fcl_status_code { FCL_STATUS_MAP(FCL_STATUS_ENUM_ITEM_) FCL_STATUS_COUNT_ };
#undef FCL_STATUS_ENUM_ITEM_
typedef int fcl_status;

/*! fcl_status_string() :
 * @return a static, human-readable description of `status`: flashcl codes,
 *         OpenCL error codes (e.g. "CL_OUT_OF_RESOURCES") or "unknown status". */
FCL_API const char *fcl_status_string(fcl_status status);

/* ------------------------------------------------------------------------ */
/*  Tensors                                                                 */
/* ------------------------------------------------------------------------ */

/* Storage type of Q, K, V, O and the gradients.  Arithmetic is always fp32.
 * FP16 is IEEE binary16 read with vload_half (no cl_khr_fp16 needed); BF16 is
 * bfloat16 held as 16-bit words.  Outputs are rounded to nearest even.
 *
 * FP8 (forward only; FlashAttention-3's scheme): Q, K and V are stored as
 * one byte each, O as fcl_attention_desc.out_dtype (FP32, FP16 or BF16).
 * Byte x = s eeee mmm (E4M3, OCP "E4M3FN") or s eeeee mm (E5M2) stands for
 *     (-1)^s * 2^(e - bias) * (1 + m / 2^mbits)   for e > 0,
 *     (-1)^s * 2^(1 - bias) * (m / 2^mbits)       for e = 0 (subnormals),
 * bias 7, mbits 3 for E4M3 (largest finite 448; no infinities; x & 0x7F ==
 * 0x7F is NaN) and bias 15, mbits 2 for E5M2 (largest finite 57344; e = 31
 * is +-infinity for m = 0 and NaN otherwise: E5M2 is the upper byte of an
 * IEEE binary16).  That value times the descale of its (batch, head) (see
 * fcl_attention_aux) is the element the call computes with.  Every device
 * decodes FP8 in its kernels (on NVIDIA sm_90 the forward may widen K and
 * V to fp16 in a workspace first: fcl_attention_forward).  On NVIDIA tensor
 * cores the bytes become fp16
 * (exactly: every value of both formats is an fp16 value) and the
 * probabilities are rounded to fp16 for the P V product, as with fp16
 * storage, so O is accurate to fp16's precision there even when out_dtype
 * is FP32 (unless FP8 products are asked for: fcl_attention_forward);
 * elsewhere the arithmetic is fp32 throughout.  A NaN or infinite
 * element (E5M2's infinities, either format's NaN) reaches the outputs that
 * "Non-finite inputs" (fcl_attention_desc) says, as in any other type. */
typedef enum fcl_dtype {
    FCL_DTYPE_FP32 = 0,
    FCL_DTYPE_FP16 = 1,
    FCL_DTYPE_BF16 = 2,
    FCL_DTYPE_FP8_E4M3 = 3,
    FCL_DTYPE_FP8_E5M2 = 4
} fcl_dtype;

/*! fcl_dtype_size() : @return bytes per element of `dtype` (1 for the FP8
 * types), 0 if unknown. */
FCL_API size_t fcl_dtype_size(fcl_dtype dtype);

/*! fcl_dtype_name() : @return "fp32", "fp16", "bf16", "e4m3", "e5m2", or
 * "unknown". */
FCL_API const char *fcl_dtype_name(fcl_dtype dtype);

/* Where the elements of one 4-D tensor (batch, head, seq, dim) lie in its
 * buffer, in elements (not bytes).  Element (b, h, s, d) is at
 *     offset + b * stride_batch + h * stride_head + s * stride_seq + d
 * i.e. the head_dim axis is always contiguous.  Strides must not make two
 * elements of one tensor meet (FCL_ERROR_OVERLAPPING_STRIDES): taken by
 * increasing stride, each stride of an axis longer than 1 is at least the
 * span of the axes below it.  The tensor's footprint is the bytes of its
 * elements: the bytes between its rows belong to it no more than to anyone
 * else (whatever lies there is never read as the tensor nor written).  Two
 * footprints are compared exactly, except in one case: footprints that
 * interleave with different strides in more than about a million places
 * are taken to meet (FCL_ERROR_BUFFER_ALIASING).
 * The layout can choose the piece that runs a call: NVIDIA's tensor-core
 * pieces read rows 16 bytes at a time and take a call only when the
 * offset and every stride of Q, K and V (and dO in the backward) are
 * multiples of 8 elements; otherwise the portable piece runs it, and its
 * results agree with theirs to the storage type's rounding, not bitwise
 * (fcl_plan_query's variant says which piece a descriptor gets). */
typedef struct fcl_layout {
    size_t offset;
    size_t stride_batch;
    size_t stride_head;
    size_t stride_seq;
} fcl_layout;

/* The two usual contiguous layouts, for fcl_attention_desc_init(). */
typedef enum fcl_layout_kind {
    FCL_LAYOUT_BSHD = 0, /* (batch, seq, heads, dim): PyTorch's (B, N, H, d) */
    FCL_LAYOUT_BHSD = 1  /* (batch, heads, seq, dim) */
} fcl_layout_kind;

/* ALiBi slopes: none, one per query head, or one per (batch entry, query head). */
typedef enum fcl_alibi_mode {
    FCL_ALIBI_NONE = 0,
    FCL_ALIBI_PER_HEAD = 1,       /* slopes[h], heads_q values */
    FCL_ALIBI_PER_BATCH_HEAD = 2  /* slopes[b * heads_q + h], batch * heads_q values */
} fcl_alibi_mode;

/* One attention problem.  Fill it with fcl_attention_desc_init(), then
 * change what differs.
 *
 * Shapes: Q, dQ are (batch, heads_q, seqlen_q, head_dim);
 *         O, dO are (batch, heads_q, seqlen_q, head_dim_v);
 *         K, dK are (batch, heads_kv, seqlen_k, head_dim);
 *         V, dV are (batch, heads_kv, seqlen_k, head_dim_v).
 * Value head dim: head_dim_v (0: equal to head_dim) is the width of V and
 * so of O and the gradients that go with them (DeepSeek-V3/R1's prefill:
 * head_dim 192, head_dim_v 128).  Scores use head_dim alone (q.k over
 * head_dim columns, default scale 1/sqrt(head_dim)); O[i][c] =
 * sum_j P[i][j] V[j][c] for c < head_dim_v.  fcl_attention_desc_init sets
 * head_dim_v = head_dim and every layout for head_dim: a caller who
 * changes head_dim_v sets v, o, dout and dv for it too (e.g.
 * fcl_layout_contiguous(kind, heads, seqlen, head_dim_v)); buffer sizes,
 * strides and aliasing are checked with each tensor's own width.  Every
 * call, piece and dtype takes head_dim_v <= head_dim (the kernels hold V's
 * tiles at head_dim's width, its columns past head_dim_v as zeros); NVIDIA
 * tensor cores run it when head_dim_v is, like head_dim, a multiple of 16.
 * heads_q must be a multiple of heads_kv: query head h reads K/V head
 * h / (heads_q / heads_kv) (MQA when heads_kv == 1, GQA otherwise).
 *
 * LSE (optional forward output, required backward input) is fp32 and always
 * contiguous: element (b, h, s) at lse_offset + (b * heads_q + h) * seqlen_q + s
 * ((h, t) at lse_offset + h * total_q + t for packed sequences).
 * LSE[row] = log(sum_j exp(score_j)) over the keys the row can see (with
 * attention sinks, log(exp(sink_h) + sum_j exp(score_j)): see "Sinks").
 *
 * Scores, in order: s = softmax_scale * q.k; with softcap > 0,
 * s = softcap * tanh(s / softcap); with ALiBi, s -= slope * |i + diag - j|
 * where diag = seqlen_k - seqlen_q (the bottom-right aligned diagonal).
 *
 * Masking: query i sees key j iff
 *     i + diag - window_left <= j <= i + diag + window_right
 * (a bound of -1 is unbounded) and, with a block mask, block
 * (i / block_m, j / block_n) is non-zero.  `causal` is window_right = 0.
 * Keys of K/V blocks entirely outside the window or the block mask are not
 * loaded.  A row that sees no key gets O = 0, LSE = +INFINITY and zero
 * gradients; never NaN (with sinks: O = 0 and LSE = sink_h, see "Sinks").
 *
 * Sinks (sinks = 1; gpt-oss's attention sinks): one fp32 logit sink_h per
 * query head, heads_q values in fcl_attention_aux.sinks, joins the softmax
 * denominator of every row of head h (every batch entry, every sequence)
 * and contributes no value:
 *     O_i   = sum_j exp(s_ij) V_j / (exp(sink_h) + sum_j exp(s_ij))
 *     LSE_i = log(exp(sink_h) + sum_j exp(s_ij))
 * with s_ij the row's scores after softcap and ALiBi, j over the keys row i
 * sees (the sink is never masked, capped, given a slope or dropped; FP8
 * descales do not scale it; with dropout the denominator is this one, V's
 * weights are dropped as usual).  LSE includes the sink, so the backward's
 * P = exp(s - LSE) needs nothing else.  A row that sees no key gets O = 0
 * and LSE = sink_h (the empty sum's value).  Non-finite sinks follow the
 * formulas: sink_h = -inf is no sink (except that a row seeing no key then
 * gets LSE = +inf, as without sinks), +inf gives O = 0 and LSE = +inf for
 * every row of head h, NaN makes head h's O and LSE NaN.  The backward also
 * returns, when fcl_attention_aux.dsinks is given, the sinks' gradient
 *     dsinks_h = -sum over batch entries b and rows i of head h of
 *                exp(sink_h - LSE_bhi) * D_bhi,   D_bhi = dO_bhi . O_bhi
 * (rows of every sequence; rows that see no key have O = 0 and count 0),
 * written (not added) as heads_q fp32 values, summed in a fixed order:
 * bitwise the same on every run (a non-finite sink_h, or a non-finite O,
 * dO or LSE in a row of head h, may make dsinks_h non-finite, and no other
 * value).  dQ, dK and dV are the usual formulas with that LSE.  Sinks
 * change no tile plan (fcl_plan_query answers as without them) and work
 * with every dtype, piece, variant and split-KV setting.
 *
 * Non-finite inputs (NaN, +-infinity): a row's outputs depend only on the
 * keys it sees and a key's gradients only on the rows that see it, on every
 * device and piece (whatever the tiling).  Forward: a non-finite V[j][c]
 * makes O[i][c] non-finite (NaN or +-infinity; which is not specified) for
 * every row i that sees key j, and changes no other element; a non-finite
 * element of Q row i or K row j may reach (through scores of +-infinity or
 * NaN) the O and LSE of row i, or of the rows that see key j, and nothing
 * else.  Dropout does not change who sees whom (a dropped probability times
 * an infinity is NaN).  Backward: dQ[i][c] is non-finite if row i sees a key
 * j with a non-finite K[j][c]; dK[j][c] (dV[j][c]) is non-finite if a row i
 * that sees key j has a non-finite Q[i][c] (dO[i][c]).  Beyond that a
 * non-finite value moves only along pairs that see each other: one in key
 * j's K or V may reach the dQ of the rows that see j and the dK, dV of the
 * keys those rows see; one in row i's Q, dO, O or LSE may reach dQ of row i
 * and the dK, dV of the keys row i sees.  Every other element is what it
 * would be with finite inputs there.
 *
 * Dropout (dropout_p > 0) multiplies probability (i, j) of head
 * bh = b * heads_q + h by 0 or 1 / (1 - p) after the softmax: it is kept when
 * word i % 4 of Philox4x32-10(counter = (j, i / 4, bh, dropout_offset),
 * key = (seed low 32 bits, seed high 32 bits)) is >= round(p * 2^32).  The
 * same mask is drawn on every device and in the backward; none is stored.
 * LSE is the undropped softmax's.
 *
 * Packed sequences (varlen = 1): `batch` sequences of different lengths are
 * stored one after another: Q/O/dO/dQ hold total_q rows (token t, head h at
 * offset + t * stride_seq + h * stride_head; stride_batch is ignored), K/V/dK/dV
 * total_k rows.  Sequence b holds query rows cu_seqlens_q[b] ..
 * cu_seqlens_q[b+1]-1 and key rows cu_seqlens_k[b] .. cu_seqlens_k[b+1]-1
 * (fcl_attention_aux); seqlen_q and seqlen_k are the longest lengths; each
 * sequence aligns its causal mask and ALiBi with its own lengths.  An empty
 * sequence produces nothing. */
typedef struct fcl_attention_desc {
    size_t batch;
    size_t heads_q;
    size_t heads_kv;
    size_t seqlen_q;
    size_t seqlen_k;
    size_t head_dim;      /* 1..256, any value */
    fcl_dtype dtype;
    float softmax_scale;  /* 0 means 1/sqrt(head_dim); must be finite */
    int causal;           /* 0 or 1 */
    fcl_layout q, k, v, o;         /* forward tensors */
    fcl_layout dout, dq, dk, dv;   /* backward tensors (dout is dL/dO) */
    size_t lse_offset;             /* in floats */
    /* ---- variants: all off after fcl_attention_desc_init() ---- */
    int64_t window_left;           /* sliding window, -1: unbounded (>= -1) */
    int64_t window_right;          /* -1: unbounded (>= -1); causal forces 0 */
    float softcap;                 /* > 0: cap the scores; 0: off */
    fcl_alibi_mode alibi;          /* slopes in fcl_attention_aux */
    float dropout_p;               /* in [0, 1); 0: off */
    uint64_t dropout_seed;
    uint32_t dropout_offset;
    int varlen;                    /* 1: packed sequences, cu_seqlens in fcl_attention_aux;
                                      0 or 1 (else FCL_ERROR_INVALID_VALUE) */
    size_t total_q, total_k;       /* varlen: rows of the packed Q and K tensors */
    size_t block_m, block_n;       /* block-sparse mask of block_m x block_n blocks; 0: none */
    size_t block_mask_stride_batch;  /* bytes between batch entries' masks, 0: shared */
    size_t block_mask_stride_head;   /* bytes between heads' masks, 0: shared */
    /* ---- launch shape of the forward (results do not depend on it beyond
     * fp32 rounding; each setting is bitwise repeatable) ---- */
    int num_splits;                /* split-KV chunks: 0 automatic (from the device),
                                      1..1024 forced (else FCL_ERROR_INVALID_VALUE);
                                      see fcl_plan.num_splits */
    /* ---- FP8 storage ---- */
    fcl_dtype out_dtype;           /* storage type of O when dtype is FCL_DTYPE_FP8_E4M3 or
                                      _E5M2: FP32, FP16 or BF16 (else
                                      FCL_ERROR_DTYPE_UNSUPPORTED).  Ignored for the other
                                      dtypes, whose O has dtype.  fcl_attention_desc_init
                                      sets it to dtype, or FP16 for an FP8 dtype. */
    /* ---- value head dim ---- */
    size_t head_dim_v;             /* columns of V, O, dO and dV (Q, K, dQ, dK keep
                                      head_dim); 0 means head_dim, which
                                      fcl_attention_desc_init sets.  1 <= head_dim_v <=
                                      head_dim, else FCL_ERROR_HEAD_DIM_UNSUPPORTED
                                      (checked after head_dim's own range).  See
                                      "Value head dim" above. */
    /* ---- attention sinks ---- */
    int sinks;                     /* 0 or 1 (else FCL_ERROR_INVALID_VALUE); 1: one sink logit
                                      per query head in fcl_attention_aux.sinks (see "Sinks"
                                      above); 0 (fcl_attention_desc_init): none */
} fcl_attention_desc;

/* The device buffers some variants read (NULL where unused).  The block mask
 * of (batch b, query head h) is ceil(seqlen_q / block_m) rows of
 * ceil(seqlen_k / block_n) bytes at b * block_mask_stride_batch +
 * h * block_mask_stride_head; a non-zero byte lets its block be computed. */
typedef struct fcl_attention_aux {
    cl_mem alibi_slopes;           /* fp32, see fcl_alibi_mode */
    cl_mem cu_seqlens_q;           /* int32[batch + 1]: 0, then running totals */
    cl_mem cu_seqlens_k;           /* int32[batch + 1] */
    cl_mem block_mask;             /* uint8 */
    /* FP8 dtypes only (for any other dtype a non-NULL one is
     * FCL_ERROR_INVALID_VALUE); NULL means every descale is 1.0.  fp32:
     * descale_q holds batch * heads_q values, (b, h) at b * heads_q + h;
     * descale_k and descale_v batch * heads_kv, (b, hk) at b * heads_kv + hk
     * (b the sequence with packed sequences).  Element x of Q, K or V stands
     * for decode(x) * descale (see fcl_dtype), so the score of query i of
     * head h and key j is s = softmax_scale * dq * dk * (q_i . k_j) with the
     * bytes' decoded values, before softcap and ALiBi, and LSE is that of
     * these scores; V's descale multiplies O (O = dv * P decode(V)).  The
     * values are used as they are (a NaN or infinity spreads into O as one
     * in every element of the head's Q, K or V would: "Non-finite inputs",
     * fcl_attention_desc). */
    cl_mem descale_q;
    cl_mem descale_k;
    cl_mem descale_v;
    /* Attention sinks (desc->sinks = 1; with sinks = 0 a non-NULL one is
     * FCL_ERROR_INVALID_VALUE).  sinks: fp32 heads_q values, sink_h at h,
     * read by the forward and the backward (NULL: FCL_ERROR_NULL_ARGUMENT;
     * smaller than heads_q floats: FCL_ERROR_BUFFER_TOO_SMALL).  dsinks:
     * the backward's output, heads_q fp32 values written (never added to);
     * NULL: not computed.  It is checked with the call's tensors (size,
     * context; no byte shared with any other tensor or aux buffer of the
     * call: FCL_ERROR_BUFFER_ALIASING), and the forward calls ignore it. */
    cl_mem sinks;
    cl_mem dsinks;
} fcl_attention_aux;

/* The same as host arrays, for the host-pointer calls. */
typedef struct fcl_attention_aux_host {
    const float *alibi_slopes;
    const int32_t *cu_seqlens_q;
    const int32_t *cu_seqlens_k;
    const uint8_t *block_mask;
    const float *descale_q;
    const float *descale_k;
    const float *descale_v;
    const float *sinks;            /* heads_q values (desc->sinks = 1) */
    float *dsinks;                 /* backward output, heads_q values; NULL: not computed */
} fcl_attention_aux_host;

/*! fcl_attention_desc_init() :
 * Sets every field: the sizes given, scale 0 (default), no causal mask, all
 * eight tensors contiguous in `layout`, lse_offset 0, every variant off
 * (windows -1, no softcap, ALiBi, dropout, packing or block mask),
 * out_dtype = dtype (FCL_DTYPE_FP16 for an FP8 dtype).  Does nothing if desc
 * is NULL. */
FCL_API void fcl_attention_desc_init(fcl_attention_desc *desc, size_t batch, size_t heads_q,
                                     size_t heads_kv, size_t seqlen_q, size_t seqlen_k,
                                     size_t head_dim, fcl_dtype dtype, fcl_layout_kind layout);

/*! fcl_layout_contiguous() :
 * @return the contiguous layout of a (batch, heads, seqlen, head_dim) tensor
 *         in `kind`, offset 0. */
FCL_API fcl_layout fcl_layout_contiguous(fcl_layout_kind kind, size_t heads, size_t seqlen,
                                         size_t head_dim);

/* ------------------------------------------------------------------------ */
/*  Devices                                                                 */
/* ------------------------------------------------------------------------ */

/* An OpenCL device as listed by fcl_list_devices(). */
typedef struct fcl_device_ref {
    int platform_index;
    int device_index;
    cl_device_type type;
    char platform_name[128];
    char device_name[128];
} fcl_device_ref;

/*! fcl_list_devices() :
 * Lists every device of every OpenCL platform, in platform order.
 * Writes at most `capacity` entries to `out` (which may be NULL when capacity
 * is 0) and the total number of devices to `*count`.
 * @return FCL_OK (also when no platform exists: *count is then 0), or an
 *         OpenCL error. */
FCL_API fcl_status fcl_list_devices(fcl_device_ref *out, size_t capacity, size_t *count);

/* Vendors flashcl tells apart, from CL_DEVICE_VENDOR_ID. */
#define FCL_VENDOR_ID_NVIDIA 0x10DEu
#define FCL_VENDOR_ID_AMD 0x1002u
#define FCL_VENDOR_ID_INTEL 0x8086u

/* What one probe of a device found.  Strings are truncated to fit. */
typedef struct fcl_device_info {
    char name[256];
    char vendor[128];
    char driver_version[128];
    char device_version[128];     /* "OpenCL 3.0 CUDA ..." */
    char platform_name[128];
    cl_device_type type;
    uint32_t vendor_id;
    uint32_t compute_units;
    size_t max_work_group_size;
    size_t max_work_item_sizes[3];
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    /* On-chip memory ("SRAM"): what CL_DEVICE_LOCAL_MEM_SIZE reports, and
     * what a work-group can really use with compile-time sized __local arrays
     * (probed on GPUs; equal to the reported value where no probe ran).  The
     * probe's answer is kept in the kernel cache folder (see
     * fcl_context_options.cache_dir) per device, driver and platform, so it
     * runs once, not in every process. */
    uint64_t local_mem_reported;
    uint64_t local_mem_usable;
    int local_mem_probed;          /* 1 if local_mem_usable comes from a probe (now or
                                      an earlier one kept on disk) */
    int local_mem_is_dedicated;    /* CL_LOCAL (on-chip) rather than CL_GLOBAL */
    uint32_t simd_width;           /* warp / wavefront / sub-group width, 0 if unknown */
    uint32_t native_float_width;   /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: floats per SIMD
                                      register on CPUs (16 with AVX-512, 8 with AVX2) */
    uint64_t cache_bytes;          /* CL_DEVICE_GLOBAL_MEM_CACHE_SIZE (on CPUs the last-level
                                      cache, shared by all cores) */
    int nv_compute_capability;     /* e.g. 90 for sm_90, 0 if not NVIDIA */
    int has_fp64;
    int has_fp16_arith;            /* cl_khr_fp16 (not needed for FP16 storage) */
    int has_subgroups;
    const char *extensions;        /* owned by the context, valid until destroy */
    const char *profile_name;      /* emulated profile in use, or NULL */
} fcl_device_info;

/* ------------------------------------------------------------------------ */
/*  Contexts                                                                */
/* ------------------------------------------------------------------------ */

typedef struct fcl_context fcl_context;

typedef struct fcl_context_options {
    /* Which device.  -1/-1 (the default) means: the FLASHCL_DEVICE environment
     * variable ("P:D", platform and device indices as in fcl_list_devices) if
     * set, else the first GPU of any platform, else the first device of any
     * platform (a CPU under PoCL).  Explicit indices beat the variable. */
    int platform_index;
    int device_index;
    /* Plan as if the device were this emulated profile (see
     * fcl_profile_name()), while still running on the real device.  For
     * checking other vendors' tilings on a CPU.  NULL: plan for the real one. */
    const char *profile;
    /* Compiled kernels are kept on disk, so that a new process does not
     * build them again (the first call of each kind otherwise costs a
     * kernel build: about 0.4-1.1 s on an H100, seconds under PoCL).
     * disk_cache: 1 (the default) keeps them; 0 keeps them in memory only,
     * whatever the folder settings say.
     * cache_dir: the folder; NULL (the default) means the FLASHCL_CACHE_DIR
     * environment variable if set and not empty ("off": no disk cache), else,
     * on a GPU, $XDG_CACHE_HOME/flashcl (an absolute XDG_CACHE_HOME), else
     * $HOME/.cache/flashcl; on other devices no disk cache (PoCL, the CPU
     * driver, keeps its own, and handing a program's binary out makes it
     * compile all the program's kernels at once).  The folder is created
     * with its parents; if a
     * folder given here cannot be, fcl_context_create fails with
     * FCL_ERROR_INVALID_VALUE, while a folder from the environment or the
     * default that cannot be means no disk cache.
     * Entries are keyed by device, driver, platform, build options and
     * kernel sources, written to a temporary file and renamed (several
     * processes may share a folder), checked (size, key, checksum) before
     * use: a damaged or foreign entry is rebuilt and replaced, never
     * trusted.  A folder that cannot be read or written only costs builds.
     * cache_max_bytes: after each store the least recently used entries are
     * removed until the folder's entries take at most this many bytes;
     * 0 (the default) means 256 MiB. */
    int disk_cache;
    const char *cache_dir;
    uint64_t cache_max_bytes;
    /* 1: create the queue with CL_QUEUE_PROFILING_ENABLE (for benchmarks). */
    int enable_profiling;
    /* 1: trust CL_DEVICE_LOCAL_MEM_SIZE and skip the on-chip memory probe. */
    int skip_local_mem_probe;
    /* 1: never use a device-specific piece (the NVIDIA tensor-core forward
     * and backward, the CPU piece); the portable kernels everywhere, e.g. to
     * compare them. */
    int portable_only;
} fcl_context_options;

/*! fcl_context_options_init() : sets the defaults described above (call
 * it before setting fields: a zeroed struct has disk_cache = 0). */
FCL_API void fcl_context_options_init(fcl_context_options *opts);

/*! fcl_context_create() :
 * Picks a device (see fcl_context_options), creates an OpenCL context and an
 * in-order queue on it, probes the device once (fcl_device_info) and
 * creates the context's one 4-byte buffer ("Device memory accounting").
 * `opts` may be NULL (defaults).
 * @return FCL_OK and a new context in *out; otherwise *out is NULL and the
 *         status says why (FCL_ERROR_NO_DEVICE, FCL_ERROR_DEVICE_NOT_FOUND,
 *         FCL_ERROR_BAD_DEVICE_SPEC, FCL_ERROR_UNKNOWN_PROFILE, an OpenCL error). */
FCL_API fcl_status fcl_context_create(const fcl_context_options *opts, fcl_context **out);

/*! fcl_context_create_from_cl() :
 * Wraps a caller's own OpenCL objects: the queue must belong to `cl_ctx` and
 * `device`.  They are retained (clRetain*) and released on destroy; the
 * caller keeps its own references.  No data is ever copied: the caller passes
 * its own cl_mem buffers to the calls below.  The context's one 4-byte
 * buffer ("Device memory accounting") is created in `cl_ctx`.  `opts` may
 * be NULL; its device indices are ignored.
 * @return FCL_OK and *out, or an error (*out is then NULL). */
FCL_API fcl_status fcl_context_create_from_cl(cl_context cl_ctx, cl_command_queue queue,
                                              cl_device_id device,
                                              const fcl_context_options *opts,
                                              fcl_context **out);

/*! fcl_context_destroy() : releases everything the context owns.  NULL is a no-op. */
FCL_API void fcl_context_destroy(fcl_context *ctx);

/*! fcl_context_device_info() :
 * @return FCL_OK and a copy of the device probe in *info (with the emulated
 *         profile's limits if one is in use), or FCL_ERROR_NULL_ARGUMENT. */
FCL_API fcl_status fcl_context_device_info(const fcl_context *ctx, fcl_device_info *info);

/*! fcl_context_cl_context(), fcl_context_cl_queue(), fcl_context_cl_device() :
 * @return the OpenCL objects the context uses (not retained for the caller),
 *         or NULL if ctx is NULL.  Create buffers for fcl_attention_forward()
 *         in this cl_context; work is enqueued on this queue. */
FCL_API cl_context fcl_context_cl_context(const fcl_context *ctx);
FCL_API cl_command_queue fcl_context_cl_queue(const fcl_context *ctx);
FCL_API cl_device_id fcl_context_cl_device(const fcl_context *ctx);

/*! fcl_context_cache_dir() :
 * @return the folder this context keeps compiled kernels in (see
 *         fcl_context_options.cache_dir), or NULL when it has no disk cache
 *         (or ctx is NULL).  Valid while the context lives. */
FCL_API const char *fcl_context_cache_dir(const fcl_context *ctx);

/*! fcl_context_build_log() :
 * @return the OpenCL build log of the last kernel that failed to compile in
 *         this context ("" if none).  Valid until the next call on ctx. */
FCL_API const char *fcl_context_build_log(const fcl_context *ctx);

/* ------------------------------------------------------------------------ */
/*  Emulated device profiles                                                */
/* ------------------------------------------------------------------------ */

/*! fcl_profile_count() : @return how many emulated device profiles exist. */
FCL_API size_t fcl_profile_count(void);

/*! fcl_profile_name() / fcl_profile_description() :
 * @return the name (e.g. "nvidia-h100") / a one-line description of profile
 *         `index`, or NULL if index >= fcl_profile_count(). */
FCL_API const char *fcl_profile_name(size_t index);
FCL_API const char *fcl_profile_description(size_t index);

/* ------------------------------------------------------------------------ */
/*  Tile plans                                                              */
/* ------------------------------------------------------------------------ */

typedef enum fcl_kernel_kind {
    FCL_KERNEL_FORWARD = 0,        /* one work-group per (Q block, head, batch[, key chunk]) */
    FCL_KERNEL_BACKWARD_DKDV = 1,  /* one work-group per (K/V block, kv head, batch) */
    FCL_KERNEL_BACKWARD_DQ = 2,    /* one work-group per (Q block, head, batch) */
    /* The forward kernel planned for few query rows (at most 64 per K/V head,
     * heads packed: see fcl_plan.pack): decoding and short queries, the
     * KV-cache call.  One work-group per (row block, head group, batch, key
     * chunk). */
    FCL_KERNEL_DECODE = 3
} fcl_kernel_kind;

/* The tiling of one kernel for one problem on this context's device. */
typedef struct fcl_plan {
    fcl_kernel_kind kernel;
    fcl_dtype dtype;
    size_t head_dim;
    size_t head_dim_padded;        /* head_dim rounded up for the thread layout */
    /* (a), (b): the device's on-chip memory, reported and usable.  On the
     * CPU piece (variant "cpu-simd16" / "cpu-simd8") local_mem_usable is the
     * memory the tiles were sized for instead: a core's share of the cache
     * (fcl_device_info.cache_bytes / compute units, clamped to 256 KiB ..
     * 1 MiB), since a CPU's "local memory" is ordinary memory. */
    uint64_t local_mem_reported;
    uint64_t local_mem_usable;
    /* (c): the FlashAttention paper's rule (Algorithm 1), with M the usable
     * on-chip memory counted in elements of the on-chip tile type (fp32 on
     * the portable path, 16-bit on NVIDIA tensor cores):
     * Bc = ceil(M / 4d), Br = min(Bc, d). */
    uint64_t paper_m_elements;
    size_t paper_bc;
    size_t paper_br;
    /* (d): what is launched */
    size_t br;                     /* query rows per tile */
    size_t bc;                     /* key columns per tile */
    size_t work_group_size;
    size_t threads_row;            /* work-group = threads_row x threads_col */
    size_t threads_col;
    uint64_t local_bytes;          /* __local bytes of the kernel */
    char variant[32];              /* the tile piece: "portable-fma"; "nvidia-mma-sync"
                                      (tensor cores; "emulated-mma-sync" in the tests'
                                      emulation); "nvidia-wgmma" (Hopper's warpgroup
                                      MMA: the forward at head_dim 64 and 128 on sm_90, see
                                      fcl_attention_forward; "emulated-wgmma" in tests); "cpu-simd16" / "cpu-simd8" (CPUs with
                                      16- or 8-float SIMD: one work-item a group, tile rows
                                      as vector lanes) */
    char source[64];               /* "analytic", "tuned: <entry>", ...; " + fallback"
                                      appended where the built kernel's limits made the
                                      library plan again, smaller */
    char reason[384];              /* why (d) differs from (c); after such a fallback it
                                      ends with "; fallback: " and what made the library
                                      plan again, whole (the text before gives way to
                                      " ..." where both do not fit) */
    /* (e): how a forward or KV-cache call with this plan is launched (1, 1
     * and 0 for the backward kernels) */
    size_t pack;                   /* query heads sharing a K/V head in one row block (GQA
                                      packing): a row block's rows are pack heads x positions */
    size_t num_splits;             /* key chunks (split-KV): > 1 means each chunk is a
                                      work-group writing a partial result, merged after */
    size_t split_keys;             /* keys per chunk (a multiple of bc); 0 when not split */
} fcl_plan;

/*! fcl_plan_query() :
 * Plans `kernel` for `desc` on the context's device (or its emulated
 * profile), builds the kernel and checks it against CL_KERNEL_WORK_GROUP_SIZE
 * and CL_KERNEL_LOCAL_MEM_SIZE, falling back to smaller plans as a launch
 * would.  The result is exactly what fcl_attention_forward/backward launch.
 * FCL_KERNEL_FORWARD and FCL_KERNEL_DECODE both give the plan of the
 * forward call: a decode plan (plan.kernel == FCL_KERNEL_DECODE) when it has
 * few query rows (seqlen_q x pack <= 64, see fcl_plan.pack), with its
 * packing and split-KV chunks for desc's sizes.  FP8 dtypes plan the
 * forward only (FCL_ERROR_DTYPE_UNSUPPORTED for the backward kernels); their
 * plans have no GQA packing (pack 1: the packed rows of one block would
 * belong to query heads of different Q descales).
 * FCL_KERNEL_BACKWARD_DQ and _DKDV give the backward call's kernels for
 * desc's variants (above head_dim 128 on tensor cores dK/dV may be two
 * launches, dV then dK, with this plan each: the plan's reason says so).
 * @return FCL_OK and *plan, or the status the call (the forward for
 *         FCL_KERNEL_FORWARD and _DECODE, the backward for the others) would
 *         return for this descriptor with valid buffers: the same descriptor
 *         checks, in the same order (see the conventions at the top), then
 *         the kernel's build and plan (FCL_ERROR_NO_PLAN,
 *         FCL_ERROR_BUILD_FAILED). */
FCL_API fcl_status fcl_plan_query(fcl_context *ctx, const fcl_attention_desc *desc,
                                  fcl_kernel_kind kernel, fcl_plan *plan);

/* ------------------------------------------------------------------------ */
/*  Attention                                                               */
/* ------------------------------------------------------------------------ */

/*! fcl_attention_forward() :
 * Enqueues O = softmax(scale * Q K^T [causal]) V on the context's queue.
 * q, k, v, o are cl_mem buffers of the context's cl_context laid out as
 * desc->q/k/v/o say; lse may be NULL (not written) or a buffer of
 * lse_offset + batch*heads_q*seqlen_q floats.  The call returns once the work
 * is enqueued; it waits for `num_wait` events first, and if `event` is not
 * NULL returns an event for its completion (release it with clReleaseEvent).
 * Buffer sizes count elements of desc->dtype for q, k, v and of the output
 * type (out_dtype for FP8 dtypes, else dtype) for o.  A NaN or infinity in
 * q, k or v reaches only the outputs fcl_attention_desc's "Non-finite
 * inputs" names.
 * On an NVIDIA sm_90 device a forward of fp16, bf16 or FP8 storage at
 * head_dim 64 or 128 with more than 64 query rows, not a KV-cache call,
 * runs on the Hopper piece (warpgroup MMA; its plan's variant is
 * "nvidia-wgmma", its program built through a PTX rewrite to sm_90a): on
 * an H100 1.6-1.8x the mma.sync piece at head_dim 128 and 1.08-1.45x at 64
 * (NOTES.md, run 39); FP8 storage 0.79-1.04x fp16's forward on an H200
 * with the tensor memory accelerator below (run 50), else 0.53-0.72x.  The
 * results agree with the mma.sync piece's to the storage type's rounding
 * (FP8: to fp16's rounding of P, which both pieces make).  The
 * environment's FLASHCL_WGMMA, read at each call, set to 0 keeps such
 * forwards on the mma.sync piece; other values count as unset.
 * Where NVIDIA's CUDA driver library (libcuda.so.1) encodes a tensor map
 * when the context is made, that piece brings K and V in by the tensor
 * memory accelerator (its plan's reason says so; 1.14-1.30x its cp.async
 * loads at head_dim 128, NOTES.md run 38), which needs a row stride of K
 * and V (stride_seq) below 2^39 elements, and a workspace the context keeps
 * and grows (128 bytes, and 256 a work-group, counted by
 * fcl_context_memory_stats); FLASHCL_WGMMA_TMA=0, read at each call, keeps
 * the cp.async loads.  The first call that needs a larger workspace waits
 * for the queue once, to fill it.  On that path a forward of FP8 storage
 * first widens K and V to fp16 (exactly) in a second workspace by a launch
 * of its own, 2 bytes per element of K and of V (batch * heads_kv *
 * seqlen_k * (head_dim + head_dim_v) * 2 bytes; total_k rows with packed
 * sequences), which the context keeps, grows and counts as the other; the
 * accelerator copies bytes as they are, and the cp.async path decodes FP8
 * on chip instead.  The widening reads k and v only, after the call's
 * events, and the forward then reads the copies.
 * FP8 products (FLASHCL_FP8_PRODUCTS=1 in the environment, read at each
 * call; any other value counts as unset): on that path (the wgmma piece,
 * the accelerator's maps available, FLASHCL_WGMMA_TMA not 0), a forward
 * of FCL_DTYPE_FP8_E4M3 at head_dim 128 (head_dim_v up to 128) without
 * packed sequences or dropout multiplies on the FP8 tensor cores instead: Q K^T and
 * P V on E4M3 wgmma with fp32 accumulation, P = exp(s - m) times 2^8
 * rounded to E4M3 (to nearest even) for P V.  Its first launch, in place
 * of the widening, lays K and V^T out as the kernel's tiles in the
 * workspaces (bytes as they are: batch * heads_kv * ceil(seqlen_k / 128)
 * * 16384 bytes for each of K and V, kept, grown and counted as the
 * widened copies; no tensor maps then: each tile comes in one plain bulk
 * copy); the forward reads q itself.
 * What the call then computes differs from the other pieces' within this
 * bound, per row and output column d (P_j = exp(s_j - max s), l = its sum
 * with the sink's term, s_j the exact scores, O the exact output):
 *   |O_d - exact| <= (2^-4 sum_j P_j |v_jd| + 2^-18 sum_j |v_jd|) / l
 *                    + ds * sum_j P_j |v_jd - O_d| / l,
 * to first order in ds, the bound of the scores' error: ds = 2^-10 *
 * |scale| * max_j sum_c |q_c k_jc| + 2^-13, q and k the elements the call
 * computes with (the bytes' values times their descales; the FP8 tensor
 * cores keep fewer bits in their sums than fp32; 2^-13: one in eight of
 * the exponentials is a polynomial's, within 2^-13 of exp relatively);
 * |LSE - exact| <= ds; plus O's rounding to out_dtype.  The first term is P's rounding (E4M3 keeps 3
 * bits: half an ulp is 2^-4 of the value; below 2^-14 of the row's
 * largest P, E4M3's subnormals, steps of 2^-17), as FlashAttention-3's FP8
 * forward rounds it.
 * The tests hold the H200's results to twice this bound (NOTES.md, runs
 * 52 and 53: within a fifth of it).  On an H200 1.10-1.30x the forward of
 * fp16 storage at head_dim 128 (1.01-1.26x causal; NOTES.md, run 53).  The
 * plan's reason names it; elsewhere the variable changes nothing.
 * @return FCL_OK, or an error; on error nothing was enqueued or written. */
FCL_API fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *desc,
                                         cl_mem q, cl_mem k, cl_mem v, cl_mem o, cl_mem lse,
                                         cl_uint num_wait, const cl_event *wait_list,
                                         cl_event *event);

/*! fcl_attention_backward() :
 * Enqueues the gradients of O = softmax(scale * Q K^T [causal]) V:
 * given q, k, v, the forward's o and lse, and dout = dL/dO, writes dq, dk,
 * dv (in the storage type, laid out as desc->dq/dk/dv).  dk and dv are summed
 * over the query heads that share a K/V head.  The N x N matrices are never
 * stored: P is recomputed tile by tile from Q, K and LSE.  Extra device
 * memory: one fp32 value per query row (batch*heads_q*seqlen_q floats;
 * total_q rows for packed sequences) in a workspace the context keeps
 * between calls and grows when a call needs more (counted by
 * fcl_context_memory_stats; the call that grows it may wait for the queue
 * once), so that the call returns without waiting for the device.
 * Deterministic: the same inputs give bitwise the same
 * gradients.  (FLASHCL_BACKWARD_DQ in the environment selects other forms
 * of the tensor-core backward for measurements, README.md: with "ordered"
 * or "any-order" the extra memory is head_dim + 1 fp32 values per query
 * row, kept as that workspace is, and "any-order" is not repeatable; either
 * form runs on the Hopper piece below too.)  On an NVIDIA sm_90
 * device both backward kernels (dK/dV and dQ) of fp16 or bf16 at head_dim
 * 64 or 128 run on the Hopper piece, "nvidia-wgmma" in their plans (on an
 * H100 1.02-1.41x the mma.sync piece, NOTES.md run 40): the same outputs
 * to the storage type's rounding as the mma.sync piece, deterministic, the
 * same extra memory plus the tensor maps' workspace below.
 * FLASHCL_WGMMA_BACKWARD in the environment, read at each call, set to 0
 * keeps the mma.sync piece there instead; other values count as unset.
 * That piece's dQ kernel brings K and V in by the tensor memory
 * accelerator, and where the separate dQ kernel runs, its dK/dV kernel
 * brings Q and dO in so too; each with a workspace of 256 bytes per
 * work-group for its tensor maps (dK/dV's times the query heads a K/V head
 * shares, heads_q / heads_kv) and 128 for their template, kept as the
 * forward's is.
 * FLASHCL_WGMMA_BACKWARD_TMA=0 in the environment (read at each call;
 * values other than 0 and 1 count as unset) copies them by cp.async
 * instead, with no such workspace.  Both give the same gradients bit for bit.  With a fused dQ
 * form (FLASHCL_BACKWARD_DQ) dK/dV copies Q and dO by cp.async, unless
 * FLASHCL_WGMMA_BACKWARD_TMA=1 asks for the accelerator there too (a
 * measurement's form, with the same workspace per work-group; the same
 * gradients bit for bit as cp.async with "ordered").
 * A NaN
 * or infinity in q, k, v, o, lse or dout reaches only the gradients
 * fcl_attention_desc's "Non-finite inputs" names: it moves only along
 * (row, key) pairs that see each other.
 * FP8 dtypes have no backward (as in FlashAttention-3): with one, once the
 * NULL-argument, LSE and fcl_attention_desc checks pass (shape, head_dim,
 * heads, dtype, scale, causal, num_splits, varlen sizes, in that order: as
 * for any dtype), the call returns FCL_ERROR_DTYPE_UNSUPPORTED.
 * @return FCL_OK, or an error (FCL_ERROR_MISSING_LSE if lse is NULL); on
 *         error nothing was written. */
FCL_API fcl_status fcl_attention_backward(fcl_context *ctx, const fcl_attention_desc *desc,
                                          cl_mem q, cl_mem k, cl_mem v, cl_mem o, cl_mem lse,
                                          cl_mem dout, cl_mem dq, cl_mem dk, cl_mem dv,
                                          cl_uint num_wait, const cl_event *wait_list,
                                          cl_event *event);

/*! fcl_attention_forward_host() :
 * The same as fcl_attention_forward() on host arrays laid out as desc says
 * (elements of desc->dtype; FP16/BF16 as uint16_t bit patterns, FP8 as
 * uint8_t; o of the output type, see fcl_attention_forward).  Copies in,
 * runs, copies out, and waits.  lse may be NULL.  The outputs come back
 * through one host staging copy (host memory of their size during the call,
 * for every host-pointer call), so that a failed read changes none of them,
 * and only their footprints' bytes are written (see fcl_layout).  Each
 * tensor is read as the bytes from its first to its last element.  Aliasing
 * is checked on the arrays' addresses as fcl_attention_forward checks it in
 * one buffer.
 * @return FCL_OK, or an error; on error the outputs are untouched. */
FCL_API fcl_status fcl_attention_forward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                              const void *q, const void *k, const void *v,
                                              void *o, float *lse);

/*! fcl_attention_backward_host() :
 * The same as fcl_attention_backward() on host arrays.
 * @return FCL_OK, or an error; on error the outputs are untouched. */
FCL_API fcl_status fcl_attention_backward_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                               const void *q, const void *k, const void *v,
                                               const void *o, const float *lse,
                                               const void *dout, void *dq, void *dk, void *dv);

/*! fcl_attention_forward_ex(), fcl_attention_backward_ex() :
 * The calls above with the buffers of ALiBi, packed sequences and block
 * masks (`aux` may be NULL when the descriptor uses none of them).  With
 * packed sequences the call reads cu_seqlens back (batch + 1 integers each,
 * after the wait list) to check them.
 * @return as fcl_attention_forward()/backward(); also FCL_ERROR_NULL_ARGUMENT
 *         for a missing aux buffer, FCL_ERROR_INVALID_VALUE for a bad variant
 *         setting (window < -1, softcap < 0, dropout_p outside [0, 1), ...)
 *         or a descale buffer given with a dtype that is not FP8, or a sinks
 *         or dsinks buffer with sinks = 0,
 *         FCL_ERROR_INVALID_CU_SEQLENS, FCL_ERROR_BUFFER_TOO_SMALL for a block
 *         mask, slopes, descale or sinks buffer smaller than its shape (and
 *         in the backward a dsinks buffer under heads_q floats),
 *         FCL_ERROR_INVALID_SHAPE for a block mask whose strides put its size
 *         past INT64_MAX bytes, FCL_ERROR_BUFFER_ALIASING for an output that
 *         shares bytes with an aux buffer (the kernels read those while they
 *         write), or, in the backward, a dsinks buffer that shares bytes with
 *         any tensor or aux buffer of the call.  With sinks and
 *         aux->dsinks given, the backward also writes dsinks (one more small
 *         kernel of the call; `event` completes with it too). */
FCL_API fcl_status fcl_attention_forward_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                            const fcl_attention_aux *aux, cl_mem q, cl_mem k,
                                            cl_mem v, cl_mem o, cl_mem lse, cl_uint num_wait,
                                            const cl_event *wait_list, cl_event *event);
FCL_API fcl_status fcl_attention_backward_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                             const fcl_attention_aux *aux, cl_mem q, cl_mem k,
                                             cl_mem v, cl_mem o, cl_mem lse, cl_mem dout,
                                             cl_mem dq, cl_mem dk, cl_mem dv, cl_uint num_wait,
                                             const cl_event *wait_list, cl_event *event);

/*! fcl_attention_forward_host_ex(), fcl_attention_backward_host_ex() :
 * The host-pointer calls with host arrays for the aux buffers (`aux` may be
 * NULL when unused).
 * @return as the calls without _ex; on error the outputs are untouched. */
FCL_API fcl_status fcl_attention_forward_host_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                                 const fcl_attention_aux_host *aux,
                                                 const void *q, const void *k, const void *v,
                                                 void *o, float *lse);
FCL_API fcl_status fcl_attention_backward_host_ex(fcl_context *ctx,
                                                  const fcl_attention_desc *desc,
                                                  const fcl_attention_aux_host *aux,
                                                  const void *q, const void *k, const void *v,
                                                  const void *o, const float *lse,
                                                  const void *dout, void *dq, void *dk, void *dv);

/*! fcl_dropout_mask_host() :
 * For tests and debugging: writes the dropout mask `desc` draws, one byte
 * per probability (1 kept, 0 dropped), as batch x heads_q x seqlen_q x
 * seqlen_k bytes to `mask` (not for packed sequences).  It is what the
 * kernels use, computed by the same device code.
 * @return FCL_OK, FCL_ERROR_INVALID_VALUE (dropout_p outside (0, 1), varlen),
 *         or an error. */
FCL_API fcl_status fcl_dropout_mask_host(fcl_context *ctx, const fcl_attention_desc *desc,
                                         uint8_t *mask);

/*! fcl_philox_host() :
 * Runs the kernels' Philox4x32-10 on the context's device: out[4i..4i+3] =
 * Philox4x32-10(counter ctr[4i..4i+3], key key[2i..2i+1]) for i < n.  For
 * known-answer tests of every device.
 * @return FCL_OK or an error. */
FCL_API fcl_status fcl_philox_host(fcl_context *ctx, size_t n, const uint32_t *ctr,
                                   const uint32_t *key, uint32_t *out);

/* ------------------------------------------------------------------------ */
/*  Decoding against a KV cache                                             */
/* ------------------------------------------------------------------------ */

/* One KV-cache call (FlashAttention's flash_attn_with_kvcache): `batch`
 * sequences, each with its own number of cached keys, optionally appending
 * new K/V rows to the cache, then attending from seqlen_q query rows (1 for
 * decoding, a few for speculative decoding, many for chunked prefill).
 *
 * Sequence b holds L_b = cache_seqlens[b] keys (int32, >= 0) before the call.
 * With seqlen_new > 0 the call first writes rows t = 0 .. seqlen_new-1 of
 * k_new/v_new (batch, seqlen_new, heads_kv, head_dim) into the cache at key
 * L_b + t; then query row i of sequence b attends to its first
 * T_b = L_b + seqlen_new keys.  cache_seqlens itself is not changed: the
 * caller advances it.  Causal masks and windows are aligned bottom-right on
 * each sequence's own length: query row i is at position T_b - seqlen_q + i
 * and sees key j iff
 *     i + T_b - seqlen_q - window_left <= j <= i + T_b - seqlen_q + window_right
 * (-1: unbounded; causal is window_right = 0).  A row that sees no key
 * (T_b = 0, or a causal row before the first key) gets O = 0, LSE = +inf
 * (with sinks: O = 0, LSE = sink_h).  With sinks = 1 every row of query
 * head h has sink_h (fcl_kvcache_buffers.sinks, heads_q fp32 values) in its
 * softmax denominator, exactly as fcl_attention_desc's "Sinks" says.
 * Scores are as in fcl_attention_desc: scale, softcap, then ALiBi with
 * distance |i + T_b - seqlen_q - j|.  Non-finite elements of Q, the caches
 * and the new rows reach O and LSE as fcl_attention_desc's "Non-finite
 * inputs" says for the forward, with this mask: a non-finite V element of
 * key j makes O non-finite in its column for exactly the rows that see j;
 * keys at or past T_b are never read.  Dropout, packed sequences and block
 * masks are not offered here (inference has no dropout; per-sequence lengths
 * replace packing; a block mask would need the cache's positions).
 *
 * The cache, one tensor each for K and V:
 *   contiguous (page_size == 0): (batch, cache_seqlen, heads_kv, head_dim);
 *       key j of sequence b, head hk at
 *       offset + b * stride_batch + j * stride_seq + hk * stride_head;
 *       sequence b may hold up to cache_seqlen keys.
 *   paged (page_size 1..1024): (num_pages, page_size, heads_kv, head_dim)
 *       with an int32 page table (batch, max_pages_per_seq), row b at
 *       b * page_table_stride: key j of sequence b is row j % page_size of
 *       page page_table[b][j / page_size], i.e. at offset + page *
 *       stride_batch + (j % page_size) * stride_seq + hk * stride_head
 *       (stride_batch is the stride between pages).  Pages may come in any
 *       order and be shared between sequences (appends must not meet).
 *       Sequence b may hold up to max_pages_per_seq * page_size keys; only
 *       the entries of pages it uses (the first ceil(T_b / page_size)) are
 *       read.  Fastest when page_size is a multiple of the plan's key tile
 *       (fcl_kvcache_plan_query's bc: 16 for decoding on NVIDIA tensor cores).
 * FP8 dtypes: Q, the caches and the new rows are bytes, O has out_dtype,
 * and the descales of fcl_kvcache_buffers act as fcl_attention_aux's (the
 * append copies bytes: new rows must be quantised with their sequence's
 * descales); FP8 decode plans pack no heads (fcl_plan_query).
 * Value head dim: as in fcl_attention_desc, head_dim_v (0: head_dim) is
 * the width of v_cache, v_new and O (K, Q and k_new keep head_dim), and
 * 1 <= head_dim_v <= head_dim (else FCL_ERROR_HEAD_DIM_UNSUPPORTED).
 * fcl_kvcache_desc_init sets head_dim_v = head_dim and the layouts of Q, O,
 * k_new, v_new for head_dim: set head_dim_v first, then o and v_new for it;
 * fcl_kvcache_desc_set_contiguous and _set_paged lay v_cache out with
 * head_dim_v columns.  An append writes head_dim columns of each new K row
 * and head_dim_v of each new V row.
 * Q and O are (batch, seqlen_q, heads_q, head_dim / head_dim_v) as their layouts say;
 * LSE (optional, fp32) is contiguous (batch, heads_q, seqlen_q) from
 * lse_offset, as for fcl_attention_forward.
 *
 * Rotary position embedding (rotary_dim > 0; FlashAttention's rotary_cos,
 * rotary_sin, rotary_interleaved): the buffers' rotary_cos and rotary_sin
 * are contiguous fp32 tables of rotary_rows rows of rotary_dim / 2 values,
 * row p (at p * rotary_dim / 2) for position p.  Q and the appended K rows
 * (never V, never keys already in the cache) are rotated before anything
 * else: a row x at position p becomes x' where, for i < rotary_dim / 2,
 * with c = cos[p][i], s = sin[p][i] and the pair
 *     (a, b) = (2i, 2i + 1)                 rotary_interleaved = 1 (GPT-J),
 *     (a, b) = (i, i + rotary_dim / 2)      rotary_interleaved = 0 (GPT-NeoX),
 *     x'_a = x_a c - x_b s,   x'_b = x_b c + x_a s,
 * and x'_d = x_d for d >= rotary_dim.  Appended row t of sequence b is at
 * position L_b + t; query row i at max(T_b - seqlen_q + i, 0), the position
 * the mask gives it (a row before position 0 sees no key under a causal
 * mask), whether or not the call is causal or windowed, and also when
 * seqlen_new = 0 (Q alone is rotated then).  The rotation is computed in
 * fp32 on the stored values (x_a, x_b as the storage type holds them); a
 * rotated K element is rounded once to the storage type (nearest even) as
 * it enters the cache, and a rotated Q element is rounded to the storage
 * type too, before the scores use it (as FlashAttention, which rotates Q
 * into its fp16/bf16 tile; no rounding for fp32).  So the scores are those
 * of the forward above with Q and the new K rows replaced by their rounded
 * rotations (a non-finite element of a row, or of the table row it is
 * rotated with, can reach only that row's rotated elements, and from there
 * what "Non-finite inputs" says).  Where this differs from FlashAttention's
 * flash_attn_with_kvcache:
 * a non-causal, non-windowed FlashAttention call rotates every query row at
 * position L_b, and a causal or windowed one row i at L_b + i; here row i is
 * always at T_b - seqlen_q + i (the same for one-token decoding, and for any
 * causal or windowed call with seqlen_q == seqlen_new), so that every score
 * depends on the distance the mask uses; FlashAttention refuses rotary
 * without new rows and asks rotary_dim % 16 == 0, here any even rotary_dim
 * and seqlen_new = 0 are accepted.  Checks on the descriptor (both forms
 * and the plan query alike, FCL_ERROR_INVALID_VALUE): rotary_dim even and
 * <= head_dim, rotary_interleaved 0 or 1 (also when rotary_dim is 0), and
 * capacity <= rotary_rows <= 2^30, where capacity is the keys a sequence's
 * cache holds (cache_seqlen, or max_pages_per_seq * page_size: every
 * position the call can use is below it; the cl_mem form cannot read the
 * lengths, so the host form asks the same).  Rows at or past the capacity
 * are never read.  FP8 dtypes refuse rotary (FCL_ERROR_DTYPE_UNSUPPORTED):
 * their append copies bytes, and a rotated value would need re-encoding.
 *
 * Shared K/V cache (shared_kv = 1; multi-head latent attention decoding,
 * FlashMLA's absorbed form: DeepSeek-V2/V3/R1 keep one latent row of 576
 * values per token, read by every query head, with V its first 512): the
 * cache is k_cache alone, laid out as described above for K (contiguous or
 * paged, head_dim columns), and V is its first head_dim_v columns:
 *     V[b][j][hk][c] = K[b][j][hk][c]   for c < head_dim_v,
 * the same elements, so O_i = sum_j P_ij K_j[0 .. head_dim_v-1].  The
 * buffers' (arrays') v_cache and v_new must be NULL and the descriptor's
 * v_cache and v_new layouts are not used (FCL_ERROR_INVALID_VALUE when
 * either pointer is given: a second cache would be silently ignored); an
 * append writes the head_dim columns of each k_new row, nothing else.
 * Everything else is as for two caches (heads_kv, usually 1 with heads_q
 * 16..128 query heads: MQA; lengths, pages, split-KV, masks, variants,
 * sinks, LSE); k_cache is the one tensor checked for size and aliasing,
 * so it is never taken to alias itself.  Refused with shared_kv
 * (FCL_ERROR_INVALID_VALUE): rotary_dim > 0 (MLA rotates the last 64
 * columns, k_pe, which rotary_dim's first columns cannot name: rotate them
 * before the append); FP8 dtypes refuse it (FCL_ERROR_DTYPE_UNSUPPORTED).
 * Every piece loads each key tile once for K and V (the bytes moved are
 * the cache's once).
 * head_dim above 256 (up to 576; this call only, the forward and backward
 * stop at 256: FCL_ERROR_HEAD_DIM_UNSUPPORTED): the portable piece and the
 * CPU piece run it, with tiles the planner shrinks to the device's local
 * memory or cache share (fcl_kvcache_plan_query and flashcl-info
 * --head-dim 576 --head-dim-v 512 --shared-kv show them); the NVIDIA
 * tensor-core piece (fp16 and bf16) runs it when head_dim is a multiple of
 * 32 and head_dim_v of 16, two or four warps to each 16-row block (plan
 * variant nvidia-mma-sync, 16 to 64 rows, 32 or 64 keys a tile), and the
 * portable piece otherwise or where those tiles do not fit the device's
 * local memory. */
typedef struct fcl_kvcache_desc {
    size_t batch;
    size_t heads_q;
    size_t heads_kv;              /* divides heads_q (GQA/MQA) */
    size_t head_dim;              /* 1..576 (the forward and backward: 1..256) */
    size_t seqlen_q;              /* query rows per sequence, >= 1 */
    size_t seqlen_new;            /* rows appended per sequence before attending, >= 0 */
    fcl_dtype dtype;              /* of Q, O, the cache and the new rows (O: out_dtype
                                     for FP8) */
    float softmax_scale;          /* 0 means 1/sqrt(head_dim); must be finite */
    int causal;                   /* 0 or 1 */
    int64_t window_left;          /* -1: unbounded (>= -1) */
    int64_t window_right;         /* -1: unbounded (>= -1); causal forces 0 */
    float softcap;                /* > 0: cap the scores; 0: off */
    fcl_alibi_mode alibi;         /* slopes in the buffers' alibi_slopes */
    /* the cache: set by fcl_kvcache_desc_set_contiguous() or _set_paged() */
    size_t page_size;             /* 0: contiguous; 1..1024: keys per page */
    size_t cache_seqlen;          /* contiguous: keys per sequence the cache holds */
    size_t num_pages;             /* paged: pages in the cache */
    size_t max_pages_per_seq;     /* paged: entries per page-table row */
    size_t page_table_stride;     /* paged: int32 elements between page-table rows */
    fcl_layout q, o, k_cache, v_cache, k_new, v_new;
    size_t lse_offset;            /* in floats */
    int num_splits;               /* split-KV chunks: 0 automatic, 1..1024 forced
                                     (else FCL_ERROR_INVALID_VALUE) */
    /* ---- FP8 caches (dtype FCL_DTYPE_FP8_*: Q, both caches and the new rows
     * are FP8; see fcl_dtype and fcl_attention_aux) ---- */
    fcl_dtype out_dtype;          /* O's type for FP8 dtypes, as fcl_attention_desc.out_dtype;
                                     fcl_kvcache_desc_init sets dtype, FP16 for FP8 */
    /* ---- value head dim (see "Value head dim" above) ---- */
    size_t head_dim_v;            /* columns of v_cache, v_new and O; 0 means head_dim, which
                                     fcl_kvcache_desc_init sets */
    int sinks;                    /* 0 or 1 (else FCL_ERROR_INVALID_VALUE): sinks in the
                                     buffers' sinks, as fcl_attention_desc.sinks */
    /* ---- rotary position embedding (see above; fcl_kvcache_desc_init: off) ---- */
    size_t rotary_dim;            /* 0: off; else even, <= head_dim: columns rotated */
    int rotary_interleaved;       /* 1: pairs (2i, 2i+1); 0: pairs (i, i + rotary_dim/2) */
    size_t rotary_rows;           /* rows (positions) of the cos/sin tables, >= capacity */
    /* ---- one cache for K and V (see "Shared K/V cache" above) ---- */
    int shared_kv;                /* 0 (fcl_kvcache_desc_init): K and V caches; 1: V is the
                                     first head_dim_v columns of k_cache's rows, v_cache and
                                     v_new must be NULL; else FCL_ERROR_INVALID_VALUE */
} fcl_kvcache_desc;

/*! fcl_kvcache_desc_init() :
 * Sets every field: the sizes given, scale 0 (default), no mask or variant,
 * Q/O/k_new/v_new contiguous (batch, seq, heads, head_dim), lse_offset 0,
 * automatic splits, and no cache yet (call one of the two below).  Does
 * nothing if desc is NULL. */
FCL_API void fcl_kvcache_desc_init(fcl_kvcache_desc *desc, size_t batch, size_t heads_q,
                                   size_t heads_kv, size_t head_dim, size_t seqlen_q,
                                   size_t seqlen_new, fcl_dtype dtype);

/*! fcl_kvcache_desc_set_contiguous() :
 * A contiguous cache of cache_seqlen keys per sequence: k_cache and v_cache
 * become contiguous (batch, cache_seqlen, heads_kv, head_dim), page_size 0.
 * Does nothing if desc is NULL. */
FCL_API void fcl_kvcache_desc_set_contiguous(fcl_kvcache_desc *desc, size_t cache_seqlen);

/*! fcl_kvcache_desc_set_paged() :
 * A paged cache: k_cache and v_cache become contiguous (num_pages,
 * page_size, heads_kv, head_dim), the page table (batch, max_pages_per_seq)
 * contiguous.  Does nothing if desc is NULL. */
FCL_API void fcl_kvcache_desc_set_paged(fcl_kvcache_desc *desc, size_t num_pages,
                                        size_t page_size, size_t max_pages_per_seq);

/* The device buffers of a KV-cache call (NULL where unused). */
typedef struct fcl_kvcache_buffers {
    cl_mem q;
    cl_mem k_cache, v_cache;      /* read, and written where rows are appended */
    cl_mem cache_seqlens;         /* int32[batch] */
    cl_mem page_table;            /* int32, paged caches only */
    cl_mem k_new, v_new;          /* when seqlen_new > 0 */
    cl_mem alibi_slopes;          /* fp32, when alibi is set (see fcl_alibi_mode) */
    cl_mem o;
    cl_mem lse;                   /* optional output */
    /* FP8 dtypes only (else non-NULL is FCL_ERROR_INVALID_VALUE), NULL = 1.0:
     * fp32 descales as fcl_attention_aux's, descale_q (batch, heads_q),
     * descale_k and descale_v (batch, heads_kv), b the sequence.  Appended
     * rows are stored as they are: quantise them with their sequence's
     * descales. */
    cl_mem descale_q, descale_k, descale_v;
    /* fp32, heads_q values, when desc->sinks = 1 (else non-NULL is
     * FCL_ERROR_INVALID_VALUE); checked as fcl_attention_aux.sinks */
    cl_mem sinks;
    /* Rotary (rotary_dim > 0 only, else non-NULL is FCL_ERROR_INVALID_VALUE):
     * fp32 (rotary_rows, rotary_dim / 2) tables, each at least rotary_rows *
     * rotary_dim / 2 floats (FCL_ERROR_BUFFER_TOO_SMALL); no output may share
     * a byte with them (FCL_ERROR_BUFFER_ALIASING). */
    cl_mem rotary_cos, rotary_sin;
} fcl_kvcache_buffers;

/* The same as host arrays (k_cache and v_cache are updated in place when
 * rows are appended). */
typedef struct fcl_kvcache_host {
    const void *q;
    void *k_cache, *v_cache;
    const int32_t *cache_seqlens;
    const int32_t *page_table;
    const void *k_new, *v_new;
    const float *alibi_slopes;
    void *o;
    float *lse;
    const float *descale_q, *descale_k, *descale_v;
    const float *sinks;
    const float *rotary_cos, *rotary_sin;
} fcl_kvcache_host;

/*! fcl_attention_kvcache() :
 * Enqueues the KV-cache call described above on the context's queue: the
 * append of every sequence's new rows (when seqlen_new > 0), the attention
 * (split-KV and GQA packing as planned, see fcl_kvcache_plan_query), and the
 * merge of the key chunks.  Waits for
 * `num_wait` events first; `event` (if not NULL) completes with the whole
 * call.  The shapes, layouts, buffer sizes, contexts and aliasing (no
 * output, nor a cache that rows are appended to, may share bytes with
 * another tensor, cache_seqlens, the page table or the slopes) are
 * checked before anything is enqueued (sharing is decided on footprints:
 * K and V pages interleaved in one allocation, [page][2][page_size]
 * [heads_kv][head_dim] with k_cache.offset 0, v_cache.offset one page and
 * both page strides two pages, as FlashInfer and vLLM keep them, are one
 * cl_mem passed as both caches); cache_seqlens and the page table are
 * not read back (that would stall the queue): the device checks them, never
 * reads or writes outside the cache, and a sequence whose length is negative
 * or exceeds its cache with the appended rows, or which uses a page-table
 * entry outside [0, num_pages), gets NaN in all its O and LSE rows and no
 * append.  fcl_attention_kvcache_host() checks them on the host instead.
 * Split-KV uses a workspace the context keeps and grows (fp32 partial O and
 * LSE, counted by fcl_context_memory_stats), and so does rotary (the
 * rotated Q, written by the append step, which then runs even when
 * seqlen_new is 0; Q itself is never written); calls are bitwise repeatable
 * for a given plan.
 * @return FCL_OK, or an error; on error nothing was enqueued. */
FCL_API fcl_status fcl_attention_kvcache(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                         const fcl_kvcache_buffers *buffers, cl_uint num_wait,
                                         const cl_event *wait_list, cl_event *event);

/*! fcl_attention_kvcache_host() :
 * The same on host arrays: checks everything that needs no array (as the
 * cl_mem form, aliasing on the arrays' addresses; then the plan), then
 * cache_seqlens and the page table (FCL_ERROR_INVALID_CACHE_SEQLENS,
 * FCL_ERROR_INVALID_PAGE_TABLE), then copies in, runs, copies O, LSE and
 * (when appending) the caches' footprints back, and waits.  k_cache and
 * v_cache may point into one array (interleaved pages, as above).
 * @return FCL_OK, or an error; on error no output or cache was changed. */
FCL_API fcl_status fcl_attention_kvcache_host(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                              const fcl_kvcache_host *arrays);

/*! fcl_kvcache_plan_query() :
 * The plan fcl_attention_kvcache() launches for `desc` (a decode plan for
 * seqlen_q x pack <= 64 rows, else the forward's), with its packing and
 * split-KV chunks (chunks come from the cache's capacity per sequence).
 * @return FCL_OK and *plan, or the status the call would return for this
 *         descriptor with valid buffers (the same descriptor checks, then
 *         the kernel's build and plan). */
FCL_API fcl_status fcl_kvcache_plan_query(fcl_context *ctx, const fcl_kvcache_desc *desc,
                                          fcl_plan *plan);

/* ------------------------------------------------------------------------ */
/*  Device memory accounting                                                */
/* ------------------------------------------------------------------------ */

/* Every device buffer flashcl allocates for itself goes through one path
 * that keeps these counts (the caller's own buffers are not counted).  A
 * context holds one 4-byte buffer from its creation to its destruction
 * (bound where a call leaves out an optional array, so that no kernel gets
 * a NULL argument), counted here too.  Workspaces a context keeps between
 * calls (split-KV's partials, KV-cache rotary's rotated Q, the Hopper
 * forward's tensor maps, FP8's widened K and V or its products' tiles, the
 * backward's per-row sums: see the calls) are counted as they are made and
 * released with the context. */
typedef struct fcl_memory_stats {
    uint64_t allocations;          /* buffers created */
    uint64_t current_bytes;        /* live now */
    uint64_t peak_bytes;           /* most live at once */
    uint64_t largest_bytes;        /* the largest single buffer */
} fcl_memory_stats;

/*! fcl_context_memory_stats() :
 * @return FCL_OK and the counts since creation (or the last reset), or
 *         FCL_ERROR_NULL_ARGUMENT. */
FCL_API fcl_status fcl_context_memory_stats(const fcl_context *ctx, fcl_memory_stats *stats);

/*! fcl_context_reset_memory_stats() : zeroes allocations/peak/largest
 * (current_bytes stays).  NULL is a no-op. */
FCL_API void fcl_context_reset_memory_stats(fcl_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_H */
