/* plan_wgmma.c - tiles for the forward's wgmma piece (cl/tile_nv_wgmma.cl).
 *
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
 * shrinks to 64 keys, then to one warpgroup, where the limits ask. */
#include "plan/plan.h"

#include <string.h>

typedef struct wgmma_shape {
    int warpgroups, keys;
} wgmma_shape;

static uint64_t wgmma_bytes(int d, wgmma_shape s, int emulated, int tma)
{
    const uint64_t rows = 64u * (uint64_t)s.warpgroups;
    uint64_t bytes = (rows + 4u * (uint64_t)s.keys) * (uint64_t)d * 2u + 4u;
    if (tma)
        bytes += 2u * 8u + 4u + 2u * 128u;
    if (emulated)
        bytes += 128u * (uint64_t)s.warpgroups * 6u * 4u;
    return bytes;
}

static bool wgmma_fits(int d, wgmma_shape s, int emulated, int tma, uint64_t local_limit,
                       size_t wg_limit)
{
    return wgmma_bytes(d, s, emulated, tma) <= local_limit &&
           (size_t)(128 * s.warpgroups) <= wg_limit;
}

fcl_status fcl_plan_make_wgmma(const fcl_caps *caps, size_t head_dim, fcl_dtype dtype,
                               const fcl_plan_limits *limits, const fcl_tuned_tile *target,
                               int emulated, int tma, fcl_plan_full *out)
{
    if ((head_dim != 64 && head_dim != 128) ||
        (dtype != FCL_DTYPE_FP16 && dtype != FCL_DTYPE_BF16))
        return FCL_ERROR_NO_PLAN;
    memset(out, 0, sizeof *out);
    const int d = (int)head_dim;
    wgmma_shape s = {2, 128};
    if (target != NULL) {
        s.warpgroups = target->rows / 64;
        s.keys = target->cols;
        if (target->rows % 64 != 0 || s.warpgroups < 1 || s.warpgroups > 2 ||
            target->ty != 4 * s.warpgroups || s.keys < 64 || s.keys > 256 || s.keys % 64 != 0 ||
            target->wd > 1)
            return FCL_ERROR_INVALID_VALUE;
    }
    uint64_t local_limit;
    size_t wg_limit;
    fcl_plan_effective_limits(caps, limits, &local_limit, &wg_limit);
    while (!wgmma_fits(d, s, emulated, tma, local_limit, wg_limit)) {
        if (s.keys > 64) /* half, in whole wgmma blocks of 64 (192 -> 64, not 96) */
            s.keys = s.keys >= 256 ? s.keys / 2 : 64;
        else if (s.warpgroups > 1)
            s.warpgroups = 1;
        else
            return FCL_ERROR_NO_PLAN;
    }
    const int warps = 4 * s.warpgroups;
    fcl_plan *pub = &out->pub;
    out->ty = warps;
    out->tx = 32;
    out->rm = 2;
    out->rn = s.keys / 4;
    out->d_pad = d;
    out->force_unroll = !emulated; /* emulated: CPUs, see FCL_FORCE_UNROLL */
    out->tile_mma = 1;
    out->mma_emulated = emulated;
    out->wd = 1;
    out->wgmma = 1;
    out->wg_tma = tma != 0;
    fcl_plan_describe(pub, caps, FCL_KERNEL_FORWARD, dtype, head_dim, head_dim,
                      caps->local_mem_usable, 2);
    pub->br = (size_t)(64 * s.warpgroups);
    pub->bc = (size_t)s.keys;
    pub->work_group_size = (size_t)(32 * warps);
    pub->threads_row = (size_t)warps;
    pub->threads_col = 32;
    pub->local_bytes = wgmma_bytes(d, s, emulated, tma);
    fcl_copy_string(pub->variant, sizeof pub->variant,
                    emulated ? "emulated-wgmma" : "nvidia-wgmma");
    fcl_copy_string(pub->source, sizeof pub->source, target ? target->entry : "wgmma default");
    fcl_appendf(pub->reason, sizeof pub->reason,
                "tensor cores: wgmma m64nNk16, N %d for Q K^T and %d for P V (%s inputs, "
                "fp32 accumulation; FLASHCL_WGMMA=0 turns it off); forward: %d warpgroup%s of 64 "
                "query rows, %d keys per step; Q, K, V as 16-bit tiles in the 128-byte "
                "swizzle, from descriptors, P from registers; K and V brought in by %s%s",
                s.keys % 128 == 0 ? 128 : 64, d % 128 == 0 ? 128 : 64, fcl_dtype_name(dtype),
                s.warpgroups, s.warpgroups > 1 ? "s" : "", s.keys,
                tma ? "the tensor memory accelerator (FLASHCL_WGMMA_TMA=0 turns it off)"
                    : "cp.async",
                emulated ? "; warpgroup operations emulated in OpenCL C (a test mode)" : "");
    return FCL_OK;
}
