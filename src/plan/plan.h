/* plan.h - tile plans for each piece (portable, NVIDIA tensor cores, CPU),
 * the tuned table, and which piece a kernel runs on.  Pure C: no OpenCL
 * call is made here. */
#ifndef FCL_PLAN_H
#define FCL_PLAN_H

#include "device/device.h"

/* ---- what a kernel is built for ------------------------------------------- */

/* Must match cl/common.cl.  FCL_BUILD_TILE_MMA is not a variant: it marks
 * kernels built with the tensor-core piece, in the same build-key word. */
enum {
    FCL_FEAT_SOFTCAP = 1,
    FCL_FEAT_ALIBI = 2,
    FCL_FEAT_DROPOUT = 4,
    FCL_FEAT_VARLEN = 8,
    FCL_FEAT_BLOCKMASK = 16,
    FCL_FEAT_KVCACHE = 32,
    /* a KV-cache call whose V is the first head_dim_v columns of K's rows
     * (fcl_kvcache_desc.shared_kv): one tile holds both */
    FCL_FEAT_SHARED_KV = 64,
    FCL_FEAT_MASK = 0xFF,
    FCL_BUILD_TILE_MMA = 0x100,
    /* dK/dV above head_dim 128 on tensor cores: one output per launch */
    FCL_BUILD_DV_ONLY = 0x200,
    FCL_BUILD_DK_ONLY = 0x400,
    /* dQ computed by the dK/dV kernel on tensor cores (flash_bwd.cl,
     * FCL_FUSED_DQ): in key-block order, or with _ANY_ORDER in any */
    FCL_BUILD_FUSED_DQ = 0x800,
    FCL_BUILD_FUSED_DQ_ANY_ORDER = 0x1000,
    /* the forward on the wgmma piece (cl/tile_nv_wgmma.cl), with
     * FCL_BUILD_TILE_MMA: where fcl_uses_wgmma says */
    FCL_BUILD_WGMMA = 0x2000,
    /* with FCL_BUILD_WGMMA: K and V tiles brought in by the tensor memory
     * accelerator (cl/warpgroup_ptx.cl, FCL_WG_TMA) instead of cp.async */
    FCL_BUILD_WG_TMA = 0x4000,
    /* with FCL_BUILD_WG_TMA, E4M3 at head_dim 128: both products on E4M3
     * wgmma (cl/tile_nv_wgmma_fp8.cl), where fcl_uses_fp8_products says */
    FCL_BUILD_FP8_PRODUCTS = 0x8000,
    /* with FCL_BUILD_WGMMA, the forward of fp16 or bf16 at head_dim 64: the
     * tile by the keys a call has (fcl_variants_wgmma_tile decides, plan_wgmma.c
     * plans): few (FCL_BUILD_WG_SHORT: at most FCL_WG_SHORT_KEYS keys, or
     * FCL_WG_SHORT_CAUSAL_KEYS under a causal mask) or many (FCL_BUILD_WG_LONG:
     * past those, with no mask and no window, or past FCL_WG_LONG_CAUSAL_KEYS
     * under a causal mask with no left window).  With FCL_BUILD_WGMMA, dK/dV
     * at head_dim 128 of few query rows (FCL_BUILD_WG_SHORT: at most
     * FCL_WG_FEW_ROWS rows a key block visits): one warpgroup of 64 keys.
     * With FCL_BUILD_WGMMA, dQ at head_dim 64 of many keys with no mask
     * (FCL_BUILD_WG_LONG: past FCL_WG_DQ_LONG_KEYS, no window): two
     * warpgroups of query rows.
     * calls/variants.c's fcl_variants_wgmma_tile holds these rules */
    FCL_BUILD_WG_SHORT = 0x10000,
    FCL_BUILD_WG_LONG = 0x20000,
    /* with FCL_BUILD_WG_TMA, dK/dV under GQA: a pair of tensor maps for
     * each query head of a K/V head (cl/tile_nv_wgmma.cl, FCL_WG_TMA 2) */
    FCL_BUILD_WG_TMA_HEADS = 0x40000,
    /* with FCL_BUILD_WGMMA, or FCL_BUILD_TILE_MMA at head_dim 64: the call
     * has no edge tile (no mask, no window, no block mask, no packed
     * sequences or KV cache, seqlen_k a multiple of FCL_WHOLE_TILE_KEYS), so
     * the kernels' edge tests compile as false (cl/common.cl,
     * FCL_WHOLE_KEYS); fcl_variants_whole_tiles decides */
    FCL_BUILD_WHOLE_TILES = 0x80000
};
/* The keys of which seqlen_k is a multiple for FCL_BUILD_WHOLE_TILES: every
 * key tile of 256 keys or of a divisor of 256 is whole */
#define FCL_WHOLE_TILE_KEYS 256
/* The keys up to which a wgmma forward at head_dim 64 takes the tile for
 * few keys (FCL_BUILD_WG_SHORT), without and with a causal mask */
#define FCL_WG_SHORT_KEYS 1024
#define FCL_WG_SHORT_CAUSAL_KEYS 4096
/* The keys past which it takes the tile for many keys under a causal mask
 * (FCL_BUILD_WG_LONG; without a mask past FCL_WG_SHORT_KEYS) */
#define FCL_WG_LONG_CAUSAL_KEYS 8192
/* The query rows a key block visits (seqlen_q, half of it under a causal
 * mask) up to which dK/dV at head_dim 128 takes one warpgroup */
#define FCL_WG_FEW_ROWS 4096
/* The keys past which dQ at head_dim 64 with no mask and no window takes two
 * warpgroups (FCL_BUILD_WG_LONG) */
#define FCL_WG_DQ_LONG_KEYS 4096

/* What a kernel is built for: the resolved-kernel cache's key. */
typedef struct fcl_build {
    fcl_kernel_kind kind;
    size_t head_dim;
    fcl_dtype dtype;              /* of Q, K, V (FCL_DTYPE) */
    fcl_dtype out_dtype;          /* of O (FCL_OUT_DTYPE): dtype but for FP8 forwards */
    unsigned features;            /* FCL_FEAT_* and FCL_BUILD_* bits compiled in */
    int pack;                     /* FCL_PACK: query heads packed per row block (forward), else 1 */
    int page_size;                /* FCL_PAGE_SIZE: keys per K/V page, 0 for strided K/V */
    int rows;                     /* decode plans: (packed) rows to plan for; 0 otherwise */
} fcl_build;

/* A plain build of `kind`: no packing, no pages. */
fcl_build fcl_build_of(fcl_kernel_kind kind, size_t head_dim, fcl_dtype dtype, unsigned features);

/* Whether b is the FP8 forward whose K and V the call first widens to fp16
 * (the wgmma piece on the tensor memory accelerator: cl/common.cl's
 * FCL_KV_WIDENED), so its program holds fcl_forward_widen. */
bool fcl_forward_widens(const fcl_build *b);
/* Whether b is the FP8 forward with FP8 products (FCL_BUILD_FP8_PRODUCTS),
 * whose K and V^T the call first lays out as the kernel's tiles, so its
 * program holds fcl_forward_prepare8 (cl/flash_fwd.cl). */
bool fcl_forward_prepares8(const fcl_build *b);

/* ---- the tuned table (plan_table.c) --------------------------------------- */

typedef struct fcl_tuned_tile {
    int rows, cols, ty, tx;
    const char *entry;           /* which entry matched, for the plan's report */
    int wd;                      /* tensor cores: warps over head_dim's columns (0, 1: none;
                                    dK/dV, and the forward above head_dim 256) */
} fcl_tuned_tile;

/* Which tile piece a table entry is for: the portable one (cl/tile_portable.cl)
 * or the CPU one (cl/tile_cpu.cl, one work-item a group).  The tensor-core
 * piece sizes its tiles in plan_mma.c. */
typedef enum fcl_piece { FCL_PIECE_PORTABLE, FCL_PIECE_CPU } fcl_piece;

bool fcl_tuned_lookup(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                      fcl_piece piece, fcl_tuned_tile *out);

/* ---- plans (plan.c: pure C, no OpenCL) ------------------------------------ */

/* The plan plus the thread layout the kernel is compiled with.  The S tile
 * of a kernel has rows = ty * rm and cols = tx * rn: (Br, Bc) for the forward
 * and dQ kernels, (Bc, Br) for dK/dV, which walks keys by rows. */
typedef struct fcl_plan_full {
    fcl_plan pub;
    int ty, tx, rm, rn;
    int d_pad;
    int force_unroll;             /* GPUs: unroll register-array loops */
    int tile_mma;                 /* the tensor-core piece (tile_nv_mma.cl) */
    int mma_emulated;             /* ... on emulated warp operations (tests) */
    int tile_cpu;                 /* the CPU piece (tile_cpu.cl): tile rows per vector, else 0 */
    int wd;                       /* tensor cores: warps the accumulators' columns are split
                                     over (FCL_WD: dK/dV, and the forward above head_dim
                                     256), 1 otherwise */
    int red_v4;                   /* tensor cores on sm_90+: the fused dQ adds four floats
                                     an instruction (FCL_RED_V4) */
    int cvt_fp8;                  /* tensor cores on sm_89+: E4M3 tiles decoded by the
                                     hardware's conversion (FCL_CVT_FP8) */
    int wgmma;                    /* the forward's wgmma piece (tile_nv_wgmma.cl): built
                                     through the sm_90a step unless emulated */
    int wg_tma;                   /* ... with K and V by the tensor memory accelerator */
} fcl_plan_full;

/* Limits a plan must respect beyond the caps: lowered after a build or
 * launch shows the device cannot take a plan (resource fallback). */
typedef struct fcl_plan_limits {
    uint64_t local_bytes;
    size_t work_group_size;
} fcl_plan_limits;

/* The largest head_dim a portable or CPU-piece plan of `kind` takes: 576
 * for the forward and decode kernels (the KV-cache call's latent caches),
 * 256 for the backward's. */
size_t fcl_plan_max_head_dim(fcl_kernel_kind kind);
/* `target` NULL: look the target tile up in the tuned table.  `features`:
 * the build's FCL_FEAT_* bits (FCL_FEAT_SHARED_KV holds one key tile for
 * K and V; the others do not change the tiles). */
fcl_status fcl_plan_make(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                         fcl_dtype dtype, unsigned features, const fcl_plan_limits *limits,
                         const fcl_tuned_tile *target, fcl_plan_full *out);
/* The fields of a plan every planner fills alike: the problem, the on-chip
 * memory (reported, and `usable_bytes`, what the tiles were sized for) and
 * the paper's rule with M counted in tile elements of `tile_elem_bytes`. */
void fcl_plan_describe(fcl_plan *pub, const fcl_caps *caps, fcl_kernel_kind kind,
                       fcl_dtype dtype, size_t head_dim, size_t head_dim_padded,
                       uint64_t usable_bytes, unsigned tile_elem_bytes);
/* The caps' local memory and work-group size, lowered by `limits`. */
void fcl_plan_effective_limits(const fcl_caps *caps, const fcl_plan_limits *limits,
                               uint64_t *local_bytes, size_t *work_group_size);
/* A kernel on the tensor-core pieces (plan_mma.c, cl/tile_nv_mma.cl).
 * `target` (forced by a tuning tool): rows x cols of the S tile as for
 * fcl_plan_make, ty = warps.  `emulated`: the warp operations of
 * cl/warp_emulated.cl (tests on any device). */
/* The largest head_dim the tensor-core kernel of `kind` takes: 576 for the
 * forward and decode (above 256 with the accumulators' columns split over
 * warps, head_dim a multiple of 32), 256 for the backward. */
int fcl_mma_max_head_dim(fcl_kernel_kind kind);
/* Whether the tensor-core dK/dV of this head_dim runs as two launches, dV
 * and then dK (FCL_BUILD_DV_ONLY / FCL_BUILD_DK_ONLY): one d-wide
 * accumulator per lane each, as the other kernels have.  Above head_dim 128
 * the default shape instead splits the accumulators' columns over warps
 * (one launch) where the device's local memory takes it; a tuning tool's
 * `forced` tile (NULL: none) without a split (wd <= 1) takes the two
 * launches. */
bool fcl_mma_dkdv_split(const fcl_caps *caps, int emulated, const fcl_tuned_tile *forced,
                        size_t head_dim);
fcl_status fcl_plan_make_mma(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                             fcl_dtype dtype, bool fused_dq, const fcl_plan_limits *limits,
                             const fcl_tuned_tile *target, int emulated, fcl_plan_full *out);
/* The wgmma piece's plans (plan_wgmma.c, cl/tile_nv_wgmma.cl), `kind`
 * FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DKDV or _DQ: one or two
 * warpgroups of 64 rows (the query rows of the forward and dQ, dK/dV's
 * keys).  The forward: 64 to 256 keys a tile; `target` (forced by a
 * tuning tool): rows = 64 x warpgroups, cols a multiple of 64 up to 256,
 * ty = rows / 16 warps.  dQ: the same with 64 or 128 keys a tile.  dK/dV:
 * blocks of 64 or 128 query rows; `target`: rows = the query rows, cols =
 * 64 x warpgroups keys, ty = cols / 16.  Else the default,
 * shrunk to the limits.  `dtype`: fp16 or bf16, or FP8 for the forward
 * (its tiles decoded to fp16 on chip: the same plan, never `tma`).
 * `emulated`: cl/warpgroup_emulated.cl.  `build`, the build's FCL_BUILD_*
 * bits that shape the tile: FCL_BUILD_WG_TMA (the forward only): K and V
 * by the tensor memory accelerator; FCL_BUILD_FUSED_DQ (dK/dV only): the
 * kernel computes dQ too, which takes more local memory, and no tile that
 * would leave a warpgroup fewer than 64 of the share's columns (shrunk
 * past; a forced one: FCL_ERROR_INVALID_VALUE); FCL_BUILD_FP8_PRODUCTS
 * (the forward of E4M3 at head_dim 128 with the accelerator): both
 * products on E4M3 wgmma, whose tiles keep 128 keys (never shrunk below:
 * FCL_ERROR_NO_PLAN); FCL_BUILD_WG_SHORT and FCL_BUILD_WG_LONG (set by
 * fcl_forward_build and fcl_backward_builds_of): the forward's default for
 * few keys, one warpgroup and 64 keys, and for many, two warpgroups and
 * 256 keys; dK/dV's for few query rows, one warpgroup.  Other bits are
 * ignored. */
fcl_status fcl_plan_make_wgmma(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                               fcl_dtype dtype, const fcl_plan_limits *limits,
                               const fcl_tuned_tile *target, int emulated, unsigned build,
                               fcl_plan_full *out);
/* __local bytes of a portable-piece kernel (features: as fcl_plan_make). */
uint64_t fcl_plan_local_bytes(fcl_kernel_kind kind, unsigned features, int rows, int cols,
                              int d_pad, int tx);

/* Decode plans (FCL_KERNEL_DECODE) are forward plans for at most this many
 * (packed) query rows per block. */
#define FCL_DECODE_MAX_ROWS 64
/* The target tile of a decode plan: the table's (or 16-row warps on tensor
 * cores), with no more rows than build->rows rounded up to a power of two. */
fcl_status fcl_decode_target(const fcl_caps *caps, const struct fcl_build *build,
                             fcl_piece piece, fcl_tuned_tile *out);

/* The CPU piece (plan_cpu.c, cl/tile_cpu.cl; every kernel has its CPU
 * code): its rows per vector on this device (the SIMD width in floats, 8 or
 * 16), or 0 where it does not run (not a CPU, or another SIMD width). */
int fcl_cpu_piece_width(const fcl_caps *caps);
/* `target` NULL: the table's CPU-piece entry.  A forced target must have
 * ty = tx = 1 (one work-item a group). */
fcl_status fcl_plan_make_cpu(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                             fcl_dtype dtype, unsigned features, const fcl_plan_limits *limits,
                             const fcl_tuned_tile *target, fcl_plan_full *out);

/* Whether kernel `kind` of a call of `desc` runs on the tensor-core pieces
 * (tensor_cores.c). */
bool fcl_uses_tensor_cores(const fcl_context *ctx, const fcl_attention_desc *desc,
                           fcl_kernel_kind kind);
/* Whether a build of `kind` with `features` (FCL_FEAT_* and
 * FCL_BUILD_TILE_MMA) runs on the wgmma piece: fp16/bf16 with strided K/V
 * (no KV-cache call), head_dim 64 or 128, on an NVIDIA sm_90 device or the
 * emulation, and
 *   a many-row forward (FCL_KERNEL_FORWARD, not a decode plan) when asked
 *   for (FLASHCL_WGMMA=1 in the environment, or the tests'
 *   fcl_debug_use_wgmma), and by default on a real sm_90 device unless
 *   FLASHCL_WGMMA=0;
 *   the backward's kernels (FCL_KERNEL_BACKWARD_DKDV, _DQ) when asked for
 *   (FLASHCL_WGMMA_BACKWARD=1, or fcl_debug_use_wgmma_backward), and by
 *   default on a real sm_90 device unless FLASHCL_WGMMA_BACKWARD=0.
 * The tests' hooks at -1 turn either off whatever the environment says.
 * Never a decode plan. */
bool fcl_uses_wgmma(const fcl_context *ctx, const fcl_attention_desc *desc, fcl_kernel_kind kind,
                    unsigned features);
/* The backward's dQ form FLASHCL_BACKWARD_DQ names, read at each call:
 * "ordered" or "any-order" (the fused forms of the mma.sync piece,
 * README.md), else the separate dQ kernel. */
typedef enum { FCL_DQ_SEPARATE, FCL_DQ_ORDERED, FCL_DQ_ANY_ORDER } fcl_dq_form;
fcl_dq_form fcl_backward_dq_form(void);
/* Whether the wgmma forward (fcl_uses_wgmma) brings K and V in by
 * the tensor memory accelerator (FCL_BUILD_WG_TMA): where the context has
 * a tensor map template (tensor_maps.c) or emulates the tensor cores, K's
 * and V's rows suit a tensor map (FP8's: always, its maps describe the
 * widened copies), and FLASHCL_WGMMA_TMA=0 is not set (read at each
 * call). */
bool fcl_uses_wgmma_tma(const fcl_context *ctx, const fcl_attention_desc *desc);
/* The one rule of which wgmma kernels can take their streamed tiles by the
 * accelerator: the forward (K and V), of every storage type it takes (the
 * accelerator copies bytes as they are: FP8's K and V are first widened to
 * fp16 in the workspace by the forward call, forward.c, and the kernel
 * reads those; cl/common.cl's FCL_KV_WIDENED), dK/dV (Q and dO) and dQ
 * (K and V; both where fcl_uses_wgmma_backward_tma says).  The plan asks
 * it (and drops `tma` elsewhere, so its wg_tma is the build's). */
bool fcl_wgmma_tma_allowed(fcl_kernel_kind kind);
/* Whether a wgmma backward kernel of `kind` takes its streamed tiles by the
 * accelerator (FCL_BUILD_WG_TMA): a context with a tensor map template (or
 * emulated tensor cores), FLASHCL_WGMMA_BACKWARD_TMA not 0 in the
 * environment (read at each call), and for dQ, K's and V's rows suiting a
 * map; for dK/dV (with the fused dQ only where
 * fcl_wgmma_backward_tma_asked, which the caller checks), Q's and dO's
 * (under GQA a pair of maps a query head: the caller adds
 * FCL_BUILD_WG_TMA_HEADS). */
bool fcl_uses_wgmma_backward_tma(const fcl_context *ctx, const fcl_attention_desc *desc,
                                 fcl_kernel_kind kind);
/* Whether FLASHCL_WGMMA_BACKWARD_TMA=1 is set (read at each call): the
 * fused dQ's dK/dV then takes Q and dO by the accelerator too, where
 * fcl_uses_wgmma_backward_tma allows it. */
bool fcl_wgmma_backward_tma_asked(void);
/* Whether a wgmma forward on the accelerator's path (`features` with
 * FCL_BUILD_WGMMA and FCL_BUILD_WG_TMA) takes FP8 products
 * (FCL_BUILD_FP8_PRODUCTS): asked for by FLASHCL_FP8_PRODUCTS=1 in the
 * environment (read at each call; any other value counts as unset), for
 * E4M3 storage at head_dim 128 without packed sequences or dropout (the
 * header's error bound is stated without it). */
bool fcl_uses_fp8_products(const fcl_attention_desc *desc, unsigned features);

#endif /* FCL_PLAN_H */
