/* plan_wgmma.c - tiles for the wgmma piece (cl/tile_nv_wgmma.cl): the
 * forward's, and the backward's (dK/dV, dQ: below).
 *
 * The forward:
 * One or two warpgroups of 64 query rows (m64, 4 warps each), `keys` keys a
 * tile in steps of wgmma's N = 64; head_dim 64 or 128.  __local holds Q
 * and two K and two V tiles (the pipelined loop of tile_nv_wgmma.cl) as
 * 16-bit tiles in wgmma's 128-byte swizzle (no padding; each tile on a
 * 1024-byte boundary, which the tiles' sizes keep without a gap):
 *     (rows + 4 * keys) * d * 2 bytes,
 * plus one int for the non-finite scan (common.cl), with the tensor memory
 * accelerator two mbarriers, the warps' arrival count and the two tensor
 * maps being written (276 bytes), and, emulated, 24 bytes a work-item.
 * Registers per lane: S is keys / 2 floats, O d / 2, and the previous
 * tile's P keys / 4 words while its P V runs.  The default,
 * 128 rows by 128 keys (160 KiB at d = 128: one work-group a
 * multiprocessor on an H100, as registers allow anyway), measured best or
 * level with 128 x 64 and 128 x 192 on the H100 (NOTES.md run 34); it
 * shrinks to 64 keys, then to one warpgroup, where the limits ask.
 * At head_dim 64 in fp16 or bf16 the tile follows the keys (plan.h;
 * fcl_variants_wgmma_tile decides).  With few (FCL_BUILD_WG_SHORT: at most
 * FCL_WG_SHORT_KEYS, FCL_WG_SHORT_CAUSAL_KEYS under a causal mask) one
 * warpgroup and 64 keys (40 KiB): there each work-group runs few tiles, so
 * its start and end weigh, and several work-groups a multiprocessor hide
 * each other's.  With more and no mask, or past FCL_WG_LONG_CAUSAL_KEYS
 * under a causal mask (FCL_BUILD_WG_LONG), two warpgroups and 256 keys
 * (144 KiB), whose longer loop wins there but loses with few keys.  On an
 * H200 side by side against 128 x 128 everywhere (NOTES.md runs 59-61):
 * few keys 1.06x non-causal and 1.16x causal at N 1024, 1.05-1.08x causal
 * at 2048 and 4096 (level at 8192, so the causal bound is 4096); many keys
 * 1.02-1.06x from N 2048 (at 1024 run 58 had 0.96x), and causal 0.91x at
 * 4096, level at 8192, 1.04-1.05x at 16384 and 1.11-1.18x at 32768.
 * Three warpgroups (192 rows, FlashAttention-3's tile at head_dim 64)
 * need more than the 168 registers a lane that 384
 * work-items leave: NVIDIA's compiler builds them for fewer work-items,
 * and the plan shrinks (run 59). */
#include "plan/plan.h"

#include <string.h>

typedef struct wgmma_shape {
    int warpgroups; /* of 64 rows: the query rows of the forward and dQ, dK/dV's keys */
    int inner;      /* the other side: keys a tile (forward, dQ), query rows a block (dK/dV) */
} wgmma_shape;

/* dK/dV (flash_bwd.cl, tile_nv_mma.cl's piece with wgmma's products):
 * warpgroups of 64 keys (K and V stay), query blocks of `inner` rows
 * (Q and dO twice: the next block arrives while this one is multiplied),
 * all as 16-bit tiles in the 128-byte swizzle:
 *     (2 * keys + 4 * rows) * d * 2 bytes,
 * plus LSE and delta of two blocks (16 bytes a row) and three ints for the
 * non-finite scans; emulated, 24 bytes a work-item.  Registers per lane:
 * dK and dV d / 2 floats each, S^T and dP^T rows / 2 each: at d 128 and 64
 * rows FlashAttention-3's backward shape (2 x 64 + 2 x 32 floats).  The
 * default: two warpgroups (128 keys) and 64 query rows at d 128, 128 rows
 * at d 64 (2 x 32 + 2 x 64 floats).  At d 128 with few query rows a key
 * block (FCL_BUILD_WG_SHORT, set by fcl_variants_wgmma_tile: at most
 * FCL_WG_FEW_ROWS, plan.h) one warpgroup (97 KiB, 128 work-items: two
 * work-groups a multiprocessor): on an H200 side by side 1.00-1.02x
 * non-causal at N 1024-4096 and 1.03-1.04x causal at 1024-8192, but
 * 0.97-0.99x non-causal from 8192 and causal at 16384 (NOTES.md run 60);
 * the fused dQ keeps two.
 *
 * dQ: warpgroups of 64 query rows (Q and dO stay), key tiles of `inner`
 * keys (K and V twice):
 *     (2 * rows + 4 * keys) * d * 2 bytes
 * plus one int; registers per lane: dQ d / 2 floats, S and dP keys / 2
 * each.  The default: two warpgroups (128 rows) and 128 keys at d 128 (192
 * KiB), one warpgroup and 64 keys at d 64, two past FCL_WG_DQ_LONG_KEYS
 * keys with no mask (FCL_BUILD_WG_LONG, fcl_variants_wgmma_tile: on an H200
 * 1.03-1.04x the backward at N 8192-16384, but 0.93-0.98x under a causal
 * mask, NOTES.md run 63).
 *
 * Those defaults measured best or level on an H100 at N 4096 (flashcl-tune,
 * NOTES.md run 40): at d 64, dK/dV's 128 rows 1.13x its 64 and dQ's one
 * warpgroup 1.06x two; at d 128 the others lose or tie (dK/dV: 128 rows
 * 0.92x, one warpgroup 0.55-0.98x; dQ: one warpgroup 0.68-0.96x, 128 keys
 * 1.00x).  Once the streamed tiles came by the accelerator (run 62, H200),
 * dQ's 128 keys at d 128 ran the backward 1.04-1.05x its 64. */
static uint64_t wgmma_bytes(fcl_kernel_kind kind, int d, wgmma_shape s, int emulated, int tma,
                            int fused_dq)
{
    const uint64_t m = 64u * (uint64_t)s.warpgroups, inner = (uint64_t)s.inner;
    uint64_t bytes;
    if (kind == FCL_KERNEL_BACKWARD_DKDV) {
        bytes = (2u * m + 4u * inner) * (uint64_t)d * 2u + 16u * inner + 12u;
        /* Q and dO by the accelerator: two mbarriers and the maps' staging */
        if (tma)
            bytes += 2u * 8u + 2u * 128u;
        /* the fused dQ (tile_nv_wgmma.cl): dS^T as 16-bit values in the
         * swizzle, and the share in fp32, rows of d + 4 (tile_nv_mma.cl) */
        if (fused_dq)
            bytes += m * inner * 2u + inner * ((uint64_t)d + 4u) * 4u;
    } else if (kind == FCL_KERNEL_BACKWARD_DQ) {
        bytes = (2u * m + 4u * inner) * (uint64_t)d * 2u + 4u;
        /* K and V by the accelerator: as dK/dV's Q and dO */
        if (tma)
            bytes += 2u * 8u + 2u * 128u;
    } else {
        bytes = (m + 4u * inner) * (uint64_t)d * 2u + 4u;
        if (tma)
            bytes += 2u * 8u + 4u + 2u * 128u;
    }
    if (emulated)
        bytes += 128u * (uint64_t)s.warpgroups * 6u * 4u;
    return bytes;
}

static bool wgmma_fits(fcl_kernel_kind kind, int d, wgmma_shape s, int emulated, int tma,
                       int fused_dq, uint64_t local_limit, size_t wg_limit)
{
    return wgmma_bytes(kind, d, s, emulated, tma, fused_dq) <= local_limit &&
           (size_t)(128 * s.warpgroups) <= wg_limit;
}

/* Whether the fused dQ's share splits over the shape's warpgroups
 * (tile_nv_wgmma.cl): whole 64-row blocks of query rows each, or the one
 * block and 64 head_dim columns or more each. */
static bool fused_split_ok(int d, wgmma_shape s)
{
    return s.inner / 64 >= s.warpgroups || d / s.warpgroups >= 64;
}

/* `target` as a shape of `kind`, or false where it is not one. */
static bool target_shape(fcl_kernel_kind kind, const fcl_tuned_tile *t, wgmma_shape *s)
{
    const bool dkdv = kind == FCL_KERNEL_BACKWARD_DKDV;
    const int m = dkdv ? t->cols : t->rows;
    s->warpgroups = m / 64;
    s->inner = dkdv ? t->rows : t->cols;
    const int inner_max = kind == FCL_KERNEL_FORWARD ? 256 : 128;
    return m % 64 == 0 && s->warpgroups >= 1 && s->warpgroups <= 2 &&
           t->ty == 4 * s->warpgroups && s->inner >= 64 && s->inner <= inner_max &&
           s->inner % 64 == 0 && t->wd <= 1;
}

/* The end of an emulated plan's reason.  The reasons' texts are sized to fit
 * fcl_plan's reason (383 characters) in their longest forms: the fused dQ,
 * FP8's widened K and V, emulated (test_plan's test_reasons_whole) */
static const char emulated_note[] = "; emulated (a test mode)";

fcl_status fcl_plan_make_wgmma(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                               fcl_dtype dtype, const fcl_plan_limits *limits,
                               const fcl_tuned_tile *target, int emulated, unsigned build,
                               fcl_plan_full *out)
{
    const bool dkdv = kind == FCL_KERNEL_BACKWARD_DKDV, fwd = kind == FCL_KERNEL_FORWARD;
    int tma = (build & FCL_BUILD_WG_TMA) != 0, fused_dq = (build & FCL_BUILD_FUSED_DQ) != 0;
    const int fp8_products = (build & FCL_BUILD_FP8_PRODUCTS) != 0;
    /* the tile the call's length asks for, unless a tile is forced: the
     * forward's for few or many keys, dK/dV's for few query rows
     * (fcl_variants_wgmma_tile) */
    const unsigned by_length = target == NULL ? build : 0;
    const bool short_keys = fwd && (by_length & FCL_BUILD_WG_SHORT);
    const bool long_keys = fwd && (by_length & FCL_BUILD_WG_LONG);
    const bool few_rows = dkdv && (by_length & FCL_BUILD_WG_SHORT);
    const bool dq_many_keys = kind == FCL_KERNEL_BACKWARD_DQ && (by_length & FCL_BUILD_WG_LONG);
    /* FP8 (the forward only) is held as fp16 tiles: the same tiles and
     * bytes as 16-bit storage (on the accelerator's path K and V widened
     * to fp16 before the forward, forward.c; on cp.async their bytes
     * staged in K's second buffer and decoded on chip, tile_nv_wgmma.cl) */
    const bool fp8 = fcl_dtype_is_fp8(dtype);
    if ((!fwd && !dkdv && kind != FCL_KERNEL_BACKWARD_DQ) || (head_dim != 64 && head_dim != 128) ||
        (dtype != FCL_DTYPE_FP16 && dtype != FCL_DTYPE_BF16 && !(fwd && fp8)))
        return FCL_ERROR_NO_PLAN;
    memset(out, 0, sizeof *out);
    if (!fcl_wgmma_tma_allowed(kind))
        tma = 0;
    if (!dkdv)
        fused_dq = 0;
    const int d = (int)head_dim;
    wgmma_shape s = {2, fwd ? 128 : 64};
    if (short_keys)
        s = (wgmma_shape){1, 64};
    else if (long_keys)
        s.inner = 256;
    else if (dkdv && d == 64)
        s.inner = 128;
    else if (few_rows)
        s.warpgroups = 1;
    else if (!fwd && !dkdv && d == 64)
        s.warpgroups = dq_many_keys ? 2 : 1; /* NOTES.md, run 63 */
    else if (!fwd && !dkdv)
        s.inner = 128; /* dQ at d 128: 128 keys a step (NOTES.md, run 62) */
    if (target != NULL &&
        (!target_shape(kind, target, &s) || (fused_dq && !fused_split_ok(d, s)) ||
         (fp8_products && s.inner != 128)))
        return FCL_ERROR_INVALID_VALUE;
    uint64_t local_limit;
    size_t wg_limit;
    fcl_plan_effective_limits(caps, limits, &local_limit, &wg_limit);
    while (!wgmma_fits(kind, d, s, emulated, tma, fused_dq, local_limit, wg_limit) ||
           (fused_dq && !fused_split_ok(d, s))) {
        /* half, in whole wgmma blocks of 64 (192 -> 64, not 96); FP8
         * products' tiles keep their 128 keys */
        if (s.inner > 64 && !fp8_products)
            s.inner = s.inner >= 256 ? s.inner / 2 : 64;
        else if (s.warpgroups > 1)
            s.warpgroups = 1;
        else
            return FCL_ERROR_NO_PLAN;
    }
    const int warps = 4 * s.warpgroups, m = 64 * s.warpgroups;
    fcl_plan *pub = &out->pub;
    out->ty = warps;
    out->tx = 32;
    out->rm = 2;
    out->rn = s.inner / 4;
    out->d_pad = d;
    out->force_unroll = !emulated; /* emulated: CPUs, see FCL_FORCE_UNROLL */
    out->tile_mma = 1;
    out->mma_emulated = emulated;
    out->wd = 1;
    out->wgmma = 1;
    /* 2: dK/dV's maps, a pair for each query head of a K/V head (GQA) */
    out->wg_tma = !tma ? 0 : dkdv && (build & FCL_BUILD_WG_TMA_HEADS) ? 2 : 1;
    fcl_plan_describe(pub, caps, kind, dtype, head_dim, head_dim, caps->local_mem_usable, 2);
    pub->br = (size_t)(dkdv ? s.inner : m);
    pub->bc = (size_t)(dkdv ? m : s.inner);
    pub->work_group_size = (size_t)(32 * warps);
    pub->threads_row = (size_t)warps;
    pub->threads_col = 32;
    pub->local_bytes = wgmma_bytes(kind, d, s, emulated, tma, fused_dq);
    /* red.global.v4.f32 for the fused dQ's adds on the real device (plan_mma.c) */
    out->red_v4 = fused_dq && !emulated;
    out->cvt_fp8 = !emulated && caps->nv_compute_capability >= 89; /* as plan_mma.c */
    fcl_copy_string(pub->variant, sizeof pub->variant,
                    emulated ? "emulated-wgmma" : "nvidia-wgmma");
    fcl_copy_string(pub->source, sizeof pub->source, target ? target->entry : "wgmma default");
    if (!fwd)
        fcl_appendf(pub->reason, sizeof pub->reason,
                    "wgmma m64nNk16, N %d for %s, %d for %s (%s inputs, fp32 sums; "
                    "FLASHCL_WGMMA_BACKWARD=0 turns it off); %s: %d warpgroup%s of 64 %s%s, "
                    "%d %s a step; K, V, Q, dO in the 128-byte swizzle, %s in registers; %s "
                    "brought in by %s%s%s",
                    s.inner % 128 == 0 ? 128 : 64, dkdv ? "S^T and dP^T" : "S and dP",
                    d % 128 == 0 ? 128 : 64, dkdv ? "dV and dK" : "dQ", fcl_dtype_name(dtype),
                    dkdv ? "dK/dV" : "dQ", s.warpgroups, s.warpgroups > 1 ? "s" : "",
                    dkdv ? "keys" : "query rows",
                    few_rows       ? " (the tile for few query rows)"
                    : dq_many_keys ? " (the tile for many keys)"
                                   : "",
                    s.inner, dkdv ? "query rows" : "keys",
                    dkdv ? "P^T and dS^T" : "dS", dkdv ? "Q and dO" : "K and V",
                    tma ? "TMA" : "cp.async",
                    fused_dq ? "; dQ's shares dS K on wgmma too, added in here "
                               "(FLASHCL_BACKWARD_DQ)"
                             : "",
                    emulated ? emulated_note : "");
    else if (fp8_products)
        fcl_appendf(pub->reason, sizeof pub->reason,
                    "FP8 products (FLASHCL_FP8_PRODUCTS=1): wgmma m64n128k32 of e4m3 for Q K^T "
                    "and P V (fp32 sums, P rounded to e4m3; FLASHCL_WGMMA=0 turns wgmma off); "
                    "forward: %d warpgroup%s of 64 query rows, 128 keys per step; K and V^T "
                    "as bytes in the 128-byte swizzle, laid out by the call's first launch, "
                    "a bulk copy a tile, Q copied by the forward%s",
                    s.warpgroups, s.warpgroups > 1 ? "s" : "", emulated ? emulated_note : "");
    else
        fcl_appendf(pub->reason, sizeof pub->reason,
                    "wgmma m64nNk16, N %d for Q K^T and %d for P V (%s inputs, fp32 sums; "
                    "FLASHCL_WGMMA=0 turns it off); forward: %d warpgroup%s of 64 query rows, "
                    "%d keys per step%s; Q, K, V in the 128-byte swizzle, P in registers; K "
                    "and V brought in by %s%s",
                    s.inner % 128 == 0 ? 128 : 64, d % 128 == 0 ? 128 : 64, fcl_dtype_name(dtype),
                    s.warpgroups, s.warpgroups > 1 ? "s" : "", s.inner,
                    short_keys  ? " (the tile for few keys)"
                    : long_keys ? " (the tile for many keys)"
                                : "",
                    fp8 && tma ? "the tensor memory accelerator, widened to fp16 in the "
                                 "workspace first (FLASHCL_WGMMA_TMA=0: FP8 bytes, decoded "
                                 "on chip)"
                    : fp8 ? "cp.async as FP8 bytes, decoded to fp16 by the warps at the "
                            "next tile's start"
                    : tma ? "the tensor memory accelerator (FLASHCL_WGMMA_TMA=0: cp.async)"
                          : "cp.async",
                    emulated ? emulated_note : "");
    return FCL_OK;
}
