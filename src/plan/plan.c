/* plan.c - from device capabilities and a problem to a tile plan.  Pure C.
 *
 * (c) The paper's rule (FlashAttention, Algorithm 1): with M the on-chip
 *     memory in elements, Bc = ceil(M / 4d), Br = min(Bc, d).  Always reported.
 * (d) The plan launched: the tuned table gives a target tile and thread grid
 *     for the device class; an exhaustive search over thread grids and
 *     register tiles then takes the largest tile not above the target that
 *     fits the device's usable local memory, its work-group limit and a
 *     register budget.  The paper's rule assumes four Br/Bc x d tiles fill M;
 *     our kernels also hold the score tile and pad for conflict-free access,
 *     so the two differ and the plan says why.
 */
#include "plan/plan.h"

#include <math.h>
#include <string.h>

/* The row stride of a transposed __local tile of n rows: 4 floats of
 * padding (bank-conflict-free float4 reads) from 4 rows up; none below,
 * where no float4 is read and the padding would be most of the tile.  Must
 * match FCL_LD_PAD in cl/tile_portable.cl. */
static uint64_t padded_ld(uint64_t n) { return n >= 4 ? n + 4 : n; }

/* Must match the __local arrays of cl/flash_fwd.cl and cl/flash_bwd.cl. */
uint64_t fcl_plan_local_bytes(fcl_kernel_kind kind, unsigned features, int rows, int cols,
                              int d_pad, int tx)
{
    uint64_t R = (uint64_t)rows, C = (uint64_t)cols, D = (uint64_t)d_pad;
    uint64_t floats = 0;
    switch (kind) {
    case FCL_KERNEL_FORWARD: /* Qt, Ks, Vs (none when V is K's tile), Pt, red, the flag */
    case FCL_KERNEL_DECODE:
        floats = D * padded_ld(R) + C * (D + 1) + ((features & FCL_FEAT_SHARED_KV) ? 0 : C * D) +
                 C * padded_ld(R) + R * (uint64_t)tx + 1;
        break;
    case FCL_KERNEL_BACKWARD_DQ: /* Qt, dOt, Ks, Vs, dSt, the non-finite flag */
        floats = 2 * D * padded_ld(R) + 2 * C * (D + 1) + C * padded_ld(R) + 1;
        break;
    case FCL_KERNEL_BACKWARD_DKDV: /* Kt, Vt, Qs, dOs, Ps, dSs, lse and delta (2 each), two
                                      non-finite flags */
        floats = 2 * D * padded_ld(R) + 2 * C * (D + 1) + 2 * C * padded_ld(R) + 4 * C + 2;
        break;
    }
    return floats * 4;
}

/* Floats a work-item keeps in registers (accumulators and tile registers). */
static int register_floats(fcl_kernel_kind kind, int rm, int rn, int dn)
{
    switch (kind) {
    case FCL_KERNEL_FORWARD:
    case FCL_KERNEL_DECODE:
        return rm * rn + rm * dn + 3 * rm + rn;
    case FCL_KERNEL_BACKWARD_DQ:
        return 2 * rm * rn + rm * dn + 2 * rm + rn;
    case FCL_KERNEL_BACKWARD_DKDV:
        return 2 * rm * rn + 2 * rm * dn + rm + 2 * rn;
    }
    return 0;
}

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* The device's limits, lowered by those a failed build or launch set. */
void fcl_plan_effective_limits(const fcl_caps *caps, const fcl_plan_limits *limits,
                               uint64_t *local_bytes, size_t *work_group_size)
{
    *local_bytes = caps->local_mem_usable;
    *work_group_size = caps->max_work_group_size;
    if (limits != NULL && limits->local_bytes != 0 && limits->local_bytes < *local_bytes)
        *local_bytes = limits->local_bytes;
    if (limits != NULL && limits->work_group_size != 0 && limits->work_group_size < *work_group_size)
        *work_group_size = limits->work_group_size;
}

static double log2_ratio(double a, double b) { return fabs(log2(a / b)); }

typedef struct candidate {
    int ty, tx, rm, rn, d_pad;
    uint64_t local_bytes;
    double work;      /* useful tile work: rows * cols, less heavy padding */
    double wg_dist;   /* distance from the target work-group size (log2) */
    double tx_dist;   /* distance from the target thread-grid width (log2) */
} candidate;

/* Larger is better, compared in order. */
static bool better(const candidate *a, const candidate *b)
{
    if (a->work != b->work)
        return a->work > b->work;
    if (a->wg_dist != b->wg_dist)
        return a->wg_dist < b->wg_dist;
    if (a->tx_dist != b->tx_dist)
        return a->tx_dist < b->tx_dist;
    int ar = a->ty * a->rm, ac = a->tx * a->rn, br = b->ty * b->rm, bc = b->tx * b->rn;
    if ((ar >= ac) != (br >= bc))
        return ar >= ac;
    return a->rm * a->rn > b->rm * b->rn;
}

/* The best tile (see `better`) not above the target that fits the limits,
 * over thread grids `txs` wide.  *target_fits: the target itself fits. */
static bool search_tiles(fcl_kernel_kind kind, unsigned features, int d,
                         const fcl_tuned_tile *target,
                         const int *txs, size_t ntx, uint64_t local_limit, size_t wg_limit,
                         int reg_budget, candidate *best, bool *target_fits)
{
    const int target_wg = target->ty * target->tx;
    bool found = false;
    for (size_t t = 0; t < ntx; ++t) {
        const int tx = txs[t];
        const int d_pad = round_up(d, tx);
        const int waste = d_pad - d;
        /* Padding up to an eighth of head_dim is treated as free, so that the
         * tuned thread grid is kept for e.g. d = 59 (pads to 64). */
        const double pad_eff = (8 * waste <= d) ? 1.0 : (double)d / d_pad;
        for (int ty = 1; ty <= 64; ty *= 2) {
            if ((size_t)(ty * tx) > wg_limit)
                continue;
            for (int rm = 1; rm <= 8; rm *= 2) {
                for (int rn = 1; rn <= 16; rn *= 2) {
                    const int rows = ty * rm, cols = tx * rn;
                    if (rows > target->rows || cols > target->cols)
                        continue;
                    if (register_floats(kind, rm, rn, d_pad / tx) > reg_budget)
                        continue;
                    const uint64_t bytes = fcl_plan_local_bytes(kind, features, rows, cols, d_pad, tx);
                    if (bytes > local_limit)
                        continue;
                    if (rows == target->rows && cols == target->cols)
                        *target_fits = true;
                    candidate c = {ty, tx, rm, rn, d_pad, bytes, (double)rows * cols * pad_eff,
                                   log2_ratio(ty * tx, target_wg), log2_ratio(tx, target->tx)};
                    if (!found || better(&c, best)) {
                        *best = c;
                        found = true;
                    }
                }
            }
        }
    }
    return found;
}

static const char *kernel_name(fcl_kernel_kind kind)
{
    switch (kind) {
    case FCL_KERNEL_FORWARD:
        return "forward";
    case FCL_KERNEL_BACKWARD_DKDV:
        return "backward dK/dV";
    case FCL_KERNEL_BACKWARD_DQ:
        return "backward dQ";
    case FCL_KERNEL_DECODE:
        return "decode (forward, few rows)";
    }
    return "?";
}

/* The smallest power of two >= x (x >= 1). */
static int pow2_at_least(int x)
{
    int p = 1;
    while (p < x)
        p *= 2;
    return p;
}

fcl_status fcl_decode_target(const fcl_caps *caps, const fcl_build *build, fcl_piece piece,
                             fcl_tuned_tile *out)
{
    const int rows = build->rows < 1 ? 1 : build->rows > FCL_DECODE_MAX_ROWS ? FCL_DECODE_MAX_ROWS
                                                                            : build->rows;
    if (build->features & FCL_BUILD_TILE_MMA) {
        /* Warps of 16 rows, 16 keys per step: decoding is bound by memory,
         * and small tiles let more work-groups share a multiprocessor
         * (13 KiB at d = 128).  H100, fp16, Hq/Hkv 32/8, d 128, 1 row, share
         * of the copy bandwidth (NOTES.md, run 16): at B = 32, sk = 131072
         * 16 x 32: 97.8%; 16 x 64: 85.6%; 32 x 64 (2 warps): 87.1%;
         * 16 x 128: 78.9%; at B = 8, sk = 32768, contiguous / 16-key pages
         * 16 x 16: 93.1 / 90.9%; 16 x 32: 89.9 / 76.3%; 16 x 64: 75.6 /
         * 62.0% (a page holding whole tiles needs one page-table read a
         * tile, not one a row). */
        const int blocks = (pow2_at_least(rows) + 15) / 16;
        if (build->head_dim > 256) {
            /* MLA's 576: each 16-row block's keys and V's columns over 4
             * warps (64 keys a tile, 72 accumulators a lane) for one block,
             * over 2 (32 keys, 144) for more or where head_dim / 4 is no
             * multiple of 16.  H100, fp16, B 16/64, 16k/64k
             * tokens, % of copy (NOTES.md, run 32): 16 rows, 4 warps x 64
             * keys 65.6-89.9, 2 x 32 61.6-93.9, 2 x 64 46.7-55.7; 64 rows,
             * 2 warps a block x 32 keys 19.1-26.9, against 4 x 64 (which
             * plans 32 rows: 234 KiB at 64) 16.4-21.2 */
            if (blocks == 1 && build->head_dim % 64 == 0) /* 4 parts of 16-column steps */
                *out = (fcl_tuned_tile){16, 64, 4, 32,
                                        "decode above head_dim 256: 4 warps a 16-row block, 64 keys",
                                        4};
            else
                *out = (fcl_tuned_tile){16 * blocks, 32, 2 * blocks, 32,
                                        "decode above head_dim 256: 2 warps a 16-row block, 32 keys",
                                        2};
            return FCL_OK;
        }
        *out = (fcl_tuned_tile){16 * blocks, 16, blocks, 32, "decode: 16 rows a warp, 16 keys", 0};
        return FCL_OK;
    }
    if (!fcl_tuned_lookup(caps, FCL_KERNEL_DECODE, build->head_dim, piece, out))
        return FCL_ERROR_NO_PLAN;
    /* no more rows than the call has */
    const int cap = pow2_at_least(rows);
    if (out->rows > cap) {
        out->ty = out->ty * cap / out->rows > 0 ? out->ty * cap / out->rows : 1;
        out->rows = cap;
    }
    return FCL_OK;
}

void fcl_plan_describe(fcl_plan *pub, const fcl_caps *caps, fcl_kernel_kind kind,
                       fcl_dtype dtype, size_t head_dim, size_t head_dim_padded,
                       uint64_t usable_bytes, unsigned tile_elem_bytes)
{
    pub->kernel = kind;
    pub->dtype = dtype;
    pub->head_dim = head_dim;
    pub->head_dim_padded = head_dim_padded;
    pub->local_mem_reported = caps->local_mem_reported;
    pub->local_mem_usable = usable_bytes;
    pub->paper_m_elements = usable_bytes / tile_elem_bytes;
    pub->paper_bc = (size_t)((pub->paper_m_elements + 4 * head_dim - 1) / (4 * head_dim));
    pub->paper_br = pub->paper_bc < head_dim ? pub->paper_bc : head_dim;
}

size_t fcl_plan_max_head_dim(fcl_kernel_kind kind)
{
    return kind == FCL_KERNEL_FORWARD || kind == FCL_KERNEL_DECODE ? 576 : 256;
}

fcl_status fcl_plan_make(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                         fcl_dtype dtype, unsigned features, const fcl_plan_limits *limits,
                         const fcl_tuned_tile *forced, fcl_plan_full *out)
{
    if (head_dim < 1 || head_dim > fcl_plan_max_head_dim(kind))
        return FCL_ERROR_HEAD_DIM_UNSUPPORTED;
    if (fcl_dtype_size(dtype) == 0)
        return FCL_ERROR_DTYPE_UNSUPPORTED;
    memset(out, 0, sizeof *out);
    fcl_plan *pub = &out->pub;
    const int d = (int)head_dim;

    uint64_t local_limit;
    size_t wg_limit;
    fcl_plan_effective_limits(caps, limits, &local_limit, &wg_limit);
    const int reg_budget = caps->is_cpu ? 1024 : 192;

    fcl_tuned_tile target;
    if (forced != NULL)
        target = *forced;
    else if (!fcl_tuned_lookup(caps, kind, head_dim, FCL_PIECE_PORTABLE, &target))
        return FCL_ERROR_NO_PLAN;
    /* Thread grids 4..32 wide; 1 and 2 only where none of those fits (a
     * 16 KiB device at head_dim 256 holds K and V tiles of only two keys). */
    static const int wide[] = {4, 8, 16, 32}, narrow[] = {1, 2};
    candidate best = {0};
    bool target_fits = false;
    bool found = search_tiles(kind, features, d, &target, wide, 4, local_limit, wg_limit,
                              reg_budget, &best, &target_fits);
    if (!found)
        found = search_tiles(kind, features, d, &target, narrow, 2, local_limit, wg_limit,
                             reg_budget, &best, &target_fits);
    if (!found)
        return FCL_ERROR_NO_PLAN;

    out->ty = best.ty;
    out->tx = best.tx;
    out->rm = best.rm;
    out->rn = best.rn;
    out->d_pad = best.d_pad;
    out->force_unroll = !caps->is_cpu;
    const int rows = best.ty * best.rm, cols = best.tx * best.rn;
    const bool keys_are_rows = kind == FCL_KERNEL_BACKWARD_DKDV;

    fcl_plan_describe(pub, caps, kind, dtype, head_dim, (size_t)best.d_pad,
                      caps->local_mem_usable, 4);
    pub->br = (size_t)(keys_are_rows ? cols : rows);
    pub->bc = (size_t)(keys_are_rows ? rows : cols);
    pub->work_group_size = (size_t)(best.ty * best.tx);
    pub->threads_row = (size_t)best.ty;
    pub->threads_col = (size_t)best.tx;
    pub->local_bytes = best.local_bytes;
    fcl_copy_string(pub->variant, sizeof pub->variant, "portable-fma");
    fcl_copy_string(pub->source, sizeof pub->source, "table: ");
    fcl_appendf(pub->source, sizeof pub->source, "%s", target.entry);

    char *why = pub->reason;
    const size_t n = sizeof pub->reason;
    fcl_appendf(why, n, "%s: target tile %dx%d, %dx%d work-items (%s)", kernel_name(kind),
                keys_are_rows ? target.cols : target.rows, keys_are_rows ? target.rows : target.cols,
                target.ty, target.tx, target.entry);
    if (!target_fits)
        fcl_appendf(why, n, "; the target does not fit %llu B local / %zu work-items / %d "
                    "registers, so the largest tile that does",
                    (unsigned long long)local_limit, wg_limit, reg_budget);
    if (best.d_pad != d)
        fcl_appendf(why, n, "; head_dim %d padded to %d for %d columns of work-items", d,
                    best.d_pad, best.tx);
    if (pub->paper_bc > pub->bc || pub->paper_br > pub->br)
        fcl_appendf(why, n, "; the paper's rule sizes only Q, K, V, O tiles and ignores the "
                    "score tile, registers and parallelism, so it asks for more than we use");
    return FCL_OK;
}
