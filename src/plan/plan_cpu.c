/* plan_cpu.c - tiles for the CPU piece (cl/tile_cpu.cl).
 *
 * On a CPU the memory that plays the paper's SRAM is the cache a core keeps
 * its tiles in, not the "local memory" PoCL reports (an ordinary buffer).
 * OpenCL names only the last-level cache, which all cores share, so a
 * core's share of it, between 256 KiB and 1 MiB (the L2 of current x86 and
 * Arm server cores), is the budget: the tiles a work-group touches per key
 * tile (Q transposed, the score tile, the output accumulators, one K and
 * one V tile) must fit in it.  The register block fixes the rest: rows come
 * in vectors of the SIMD width, and two vectors of rows by 8 keys are 16
 * accumulators, which x86's 16 (AVX2) or 32 (AVX-512) registers hold.
 */
#include "plan/plan.h"

#include <string.h>

enum { KIB = 1024, CACHE_SHARE_MIN = 256 * KIB, CACHE_SHARE_MAX = 1024 * KIB, KEY_BLOCK = 8 };

int fcl_cpu_piece_width(const fcl_caps *caps)
{
    if (!caps->is_cpu || (caps->native_float_width != 8 && caps->native_float_width != 16))
        return 0;
    return (int)caps->native_float_width;
}

static uint64_t cache_share(const fcl_caps *caps)
{
    uint64_t share = caps->compute_units > 0 ? caps->cache_bytes / caps->compute_units : 0;
    if (share < CACHE_SHARE_MIN)
        share = CACHE_SHARE_MIN;
    if (share > CACHE_SHARE_MAX)
        share = CACHE_SHARE_MAX;
    return share;
}

/* Bytes a work-group touches per step of its inner loop, with `rows` the
 * lanes (query rows; keys for dK/dV) and `cols` the streamed rows: the
 * transposed lane-side tiles in __local, the score tiles and accumulators in
 * private memory, `streams` streamed tiles read in place (and their fp32
 * copies for 16-bit storage): two, or one where V is K's rows. */
static uint64_t working_set(fcl_kernel_kind kind, int rows, int cols, int d, size_t storage,
                            int streams)
{
    const uint64_t R = (uint64_t)rows, C = (uint64_t)cols, D = (uint64_t)d;
    const uint64_t streamed = (uint64_t)streams * C * D * (storage + (storage == 4 ? 0 : 4));
    switch (kind) {
    case FCL_KERNEL_BACKWARD_DQ: /* Qt, dOt; S, dP; dQ */
        return 4 * (2 * D * R + 2 * R * C + R * D) + streamed;
    case FCL_KERNEL_BACKWARD_DKDV: /* Kt, Vt; P^T, dS^T; dK, dV */
        return 4 * (2 * D * R + 2 * R * C + 2 * R * D) + streamed;
    default: /* Qt; S; O */
        return 4 * (D * R + R * C + R * D) + streamed;
    }
}

/* __local bytes of the CPU piece's kernels (cl/tile_cpu.cl): the lane-side
 * tiles transposed, and the two streamed tiles widened to fp32 for 16-bit
 * storage (a one-row placeholder each for fp32; `streams` of them, as in
 * working_set).  The kernels' non-finite flags (common.cl) are never read
 * by a group of one work-item: the compiler drops them. */
static uint64_t local_bytes_of(fcl_kernel_kind kind, int rows, int cols, int d, size_t storage,
                               int streams)
{
    const uint64_t R = (uint64_t)rows, C = (uint64_t)cols, D = (uint64_t)d;
    const uint64_t staged = 4 * (uint64_t)streams * (storage == 4 ? 1 : C) * D;
    switch (kind) {
    case FCL_KERNEL_BACKWARD_DQ: /* Qt, dOt */
        return 4 * 2 * D * R + staged;
    case FCL_KERNEL_BACKWARD_DKDV: /* Kt, Vt, LSE and delta of two Q blocks */
        return 4 * (2 * D * R + 4 * C) + staged;
    default: /* Qt */
        return 4 * D * R + staged;
    }
}

fcl_status fcl_plan_make_cpu(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                             fcl_dtype dtype, unsigned features, const fcl_plan_limits *limits,
                             const fcl_tuned_tile *forced, fcl_plan_full *out)
{
    if (head_dim < 1 || head_dim > fcl_plan_max_head_dim(kind))
        return FCL_ERROR_HEAD_DIM_UNSUPPORTED;
    const size_t storage = fcl_dtype_size(dtype);
    if (storage == 0)
        return FCL_ERROR_DTYPE_UNSUPPORTED;
    const int rw = fcl_cpu_piece_width(caps);
    if (rw == 0)
        return FCL_ERROR_NO_PLAN;
    fcl_tuned_tile target;
    if (forced != NULL) {
        if (forced->ty != 1 || forced->tx != 1 || forced->rows < 1 || forced->cols < 1)
            return FCL_ERROR_INVALID_VALUE;
        target = *forced;
    } else if (!fcl_tuned_lookup(caps, kind, head_dim, FCL_PIECE_CPU, &target)) {
        return FCL_ERROR_NO_PLAN;
    }
    memset(out, 0, sizeof *out);
    const int d = (int)head_dim;
    /* rows (the lanes): whole vectors, at most 32 (the forward's dropout
     * keeps a bit per row in a uint); cols: whole register blocks.  The
     * table's rows x cols are the S tile's, keys by queries for dK/dV. */
    const bool dkdv = kind == FCL_KERNEL_BACKWARD_DKDV;
    const int streams = (features & FCL_FEAT_SHARED_KV) ? 1 : 2; /* K and V tiles, or one */
    int rows = (target.rows + rw - 1) / rw * rw;
    if (rows > 32)
        rows = 32 / rw * rw;
    int cols = (target.cols + KEY_BLOCK - 1) / KEY_BLOCK * KEY_BLOCK;
    const uint64_t budget = cache_share(caps);
    while (cols > KEY_BLOCK && working_set(kind, rows, cols, d, storage, streams) > budget)
        cols /= 2;
    cols = cols / KEY_BLOCK * KEY_BLOCK;
    while (rows > rw && working_set(kind, rows, cols, d, storage, streams) > budget)
        rows -= rw;

    uint64_t local_limit;
    size_t wg_limit;
    fcl_plan_effective_limits(caps, limits, &local_limit, &wg_limit);
    /* within the limits (a device's own, or lowered after a launch ran out
     * of resources): fewer keys first (16-bit staging), then fewer rows */
    while (local_bytes_of(kind, rows, cols, d, storage, streams) > local_limit &&
           (cols > KEY_BLOCK || rows > rw)) {
        if (storage != 4 && cols > KEY_BLOCK)
            cols = cols / 2 / KEY_BLOCK * KEY_BLOCK;
        else if (rows > rw)
            rows -= rw;
        else
            cols = cols / 2 / KEY_BLOCK * KEY_BLOCK;
    }
    const uint64_t local_bytes = local_bytes_of(kind, rows, cols, d, storage, streams);
    if (local_bytes > local_limit || wg_limit < 1)
        return FCL_ERROR_NO_PLAN;

    out->ty = 1;
    out->tx = 1;
    out->rm = rows;
    out->rn = cols;
    out->d_pad = d;
    out->force_unroll = 0;
    out->tile_cpu = rw;
    fcl_plan *pub = &out->pub;
    fcl_plan_describe(pub, caps, kind, dtype, head_dim, head_dim, budget, 4);
    pub->br = (size_t)(dkdv ? cols : rows);
    pub->bc = (size_t)(dkdv ? rows : cols);
    pub->work_group_size = 1;
    pub->threads_row = 1;
    pub->threads_col = 1;
    pub->local_bytes = local_bytes;
    fcl_copy_string(pub->variant, sizeof pub->variant, rw == 16 ? "cpu-simd16" : "cpu-simd8");
    fcl_copy_string(pub->source, sizeof pub->source, "table: ");
    fcl_appendf(pub->source, sizeof pub->source, "%s", target.entry);
    fcl_appendf(pub->reason, sizeof pub->reason,
                "CPU piece: one work-item a group, tile rows as %d-float SIMD lanes, target "
                "%dx%d (%s); on-chip memory = a core's share of the %llu-byte cache, %llu B, "
                "which the tiles of one key step (%llu B) fit",
                rw, target.rows, target.cols, target.entry,
                (unsigned long long)caps->cache_bytes, (unsigned long long)budget,
                (unsigned long long)working_set(kind, rows, cols, d, storage, streams));
    if (rows != target.rows || cols != target.cols)
        fcl_appendf(pub->reason, sizeof pub->reason, "; target made %dx%d (whole vectors of "
                    "rows, at most 32, whole blocks of 8 keys, within the cache share)",
                    rows, cols);
    return FCL_OK;
}
