/* flash_bwd.cl - FlashAttention-2 backward, by recomputation.
 *
 * With S = scale * Q K^T, P = exp(S - LSE) (rebuilt tile by tile from the
 * forward's LSE, never stored whole), delta_i = rowsum(dO_i * O_i):
 *     dV = P^T dO,   dP = dO V^T,   dS = P * (dP - delta),
 *     dQ = scale * dS K,   dK = scale * dS^T Q.
 * Three kernels, none with atomics, so results are bitwise reproducible:
 *   fcl_backward_delta  one work-item (CPUs) or 32 (GPUs) per query row: delta
 *                       (and with attention sinks fcl_backward_sink_grad,
 *                       one work-group per query head: the sinks' gradient)
 *   fcl_backward_dq     one work-group per (Q block, head, batch), streaming
 *                       K/V blocks; dQ accumulates in registers
 *   fcl_backward_dkdv   one work-group per (K/V block, kv head, batch),
 *                       streaming the Q blocks of every query head that shares
 *                       the K/V head; dK, dV accumulate in registers (the GQA
 *                       sum happens there, in a fixed order); built with
 *                       FCL_DKDV_PART it computes one of them, and the host
 *                       launches it twice (tensor cores above head_dim 128
 *                       where FCL_WD, the accumulators' columns split
 *                       over warps, does not fit)
 * On tensor cores the dK/dV kernel can compute dQ too (FCL_FUSED_DQ, below),
 * five products instead of seven; the dQ kernel then does not run.
 * Each program is built with one of FCL_KERNEL_DQ / FCL_KERNEL_DKDV, so the
 * two tile plans stay independent.  As in the forward, the loops, masks and
 * variants are written once here, and how tiles are held and multiplied is
 * a piece (tile_portable.cl, tile_nv_mma.cl, tile_cpu.cl): per kernel, its __local tiles
 * and loads (FCL_DQ_LOAD_Q_DO, FCL_DQ_PREFETCH_KV / FCL_DQ_TILE_BEGIN;
 * FCL_DKDV_LOAD_KV, FCL_DKDV_PREFETCH_Q_DO / FCL_DKDV_BLOCK_BEGIN: a piece
 * may fetch the next streamed tile into a second buffer, named by `buf`,
 * while the current one is used, or load it when the tile begins; the
 * hooks also get the tile's first row in its sequence (r0, or the key c0)
 * and its ordinal n, dK/dV's the query head's place g among those of its
 * K/V head, and FCL_DKDV_MAPS / FCL_DQ_MAPS ready a piece's copies by the
 * tensor memory accelerator),
 * the two
 * products that rebuild S and dP (FCL_DQ_S / FCL_DQ_DP,
 * FCL_DKDV_ST / FCL_DKDV_DPT), where P and dS go (FCL_DQ_SET_DS,
 * FCL_DKDV_SET, given FCL_RW rows of one column: register arrays are
 * fcl_rowv, see "rows as vector lanes" in common.cl) and the products that
 * accumulate the gradients
 * (FCL_DQ_ACC, FCL_DKDV_ACC; the tensor-core piece's skips the output
 * FCL_WANT_DK / FCL_WANT_DV leave out, the portable one is never split).
 * V and dO have head_dim_v <= head_dim columns: the pieces load them, as
 * the forward's V, at D_PAD columns with zeros past the kernel's head_dim_v
 * (or read no further, the CPU piece), so dP = dO V^T sums over head_dim_v
 * columns and dV's accumulator columns from head_dim_v on are not stored.
 * And the non-finite elements of those products' operands (FCL_DQ_K_BAD /
 * _CLEAN, FCL_DKDV_Q_BAD / _CLEAN, FCL_DKDV_DO_BAD / _CLEAN: see
 * "non-finite operands" in common.cl).
 * Masked scores are zeroed after the fact, on edge tiles only
 * (FCL_HIDE_MASKED).  The variants (common.cl) recompute the
 * forward's modified scores; the softcap multiplies dS by 1 - tanh^2, and
 * dropout scales dP (for dS) and P (for dV) by the same mask the forward
 * drew, while delta = rowsum(dO * O) stays exact because O is the dropped
 * output.
 */

/* A piece whose stationary tiles come by background copies (the tensor-core
 * pieces: FCL_DQ_LOAD_Q_DO, FCL_DKDV_LOAD_KV) waits for them here: K and V
 * arrived and visible before the fused dQ's scan of K
 * (FCL_DKDV_KV_ARRIVED), and every copy landed before a kernel's end, also
 * when its loop ran no tile (FCL_BWD_COPIES_DONE, this work-item's). */
#ifndef FCL_DKDV_KV_ARRIVED
#define FCL_DKDV_KV_ARRIVED() barrier(CLK_LOCAL_MEM_FENCE)
#endif
#ifndef FCL_BWD_COPIES_DONE
#define FCL_BWD_COPIES_DONE() (void)0
#endif

/* the output accumulators' rows: the score tile's, unless the piece says (common.cl) */
#ifndef FCL_ACC_RM
#define FCL_ACC_RM RM
#define FCL_ACC_ROW(i) FCL_ROW(i)
#endif

/* FCL_BWD_STORE_ROW(T, at, ncols, paired, X, i, factor): row i of the
 * accumulators X times `factor` into T from element `at` (common.cl,
 * FCL_STORE_ACC_ROW), a column pair a store where `paired` (16-bit
 * storage on a piece that defines fcl_store_pair; FCL_BWD_PAIRED(base, ss,
 * ncols): the rows' first elements and the count of columns even), else
 * a value at a time. */
#if defined(fcl_store_pair) && FCL_DTYPE != 0
#define FCL_BWD_STORE_ROW(T, at, ncols, paired, X, i, factor)        \
    do {                                                          \
        if (paired)                                               \
            FCL_STORE_ACC_PAIRS(T, at, ncols, X, i, factor);      \
        else                                                      \
            FCL_STORE_ACC_ROW(T, fcl_store, at, ncols, X, i, factor); \
    } while (0)
#define FCL_BWD_PAIRED(base, ss, ncols) FCL_PAIRS_FIT(ncols, (base) | (ss))
#else
#define FCL_BWD_STORE_ROW(T, at, ncols, paired, X, i, factor)       \
    do {                                                         \
        (void)(paired);                                          \
        FCL_STORE_ACC_ROW(T, fcl_store, at, ncols, X, i, factor); \
    } while (0)
#define FCL_BWD_PAIRED(base, ss, ncols) false
#endif

/* A piece may write dK and dV through __local (FCL_DKDV_STAGE), as the
 * forward writes O (flash_fwd.cl, FCL_FWD_STAGE_O): once every work-item
 * is past the loop and the copies into K's and V's tiles have landed (a
 * barrier after FCL_BWD_COPIES_DONE), each work-item puts its
 * accumulators' rows, every column of D_PAD, dK (scaled) into K's tile
 * with FCL_DKDV_DK_STAGE(tile row, even column, its value, the next
 * column's) and dV into V's with FCL_DKDV_DV_STAGE, and after a barrier
 * FCL_DKDV_DK_STORE / FCL_DKDV_DV_STORE(output, first row's element, row
 * stride, rows, columns) store the tiles' first `columns` of their first
 * `rows` rows in 16-byte pieces.  Decided for each output where
 * FCL_STAGED_FIT (every row's start 16-byte aligned, its columns whole
 * 8-value pieces); otherwise it is written a row at a time
 * (FCL_BWD_STORE_ROW). */
#ifndef FCL_DKDV_STAGE
#define FCL_DKDV_STAGE 0
#endif

/* P and dS of one visible score, from its raw q.k (s) and dO.v (dp), with
 * LSE in the piece's exponent units: .x = P as dV sees it (dropped), .y = dS. */
inline float2 fcl_backward_score(float s, float dp, float lse_units, float delta,
                                 const fcl_score_mods mods, float units_scale, int diag,
                                 const fcl_dropout drop, int bh, int row, int col)
{
    float t; /* the softcap's tanh */
    float p = FCL_EXP(FCL_SCORE_UNITS(s, mods, units_scale, row, col, diag, &t) - lse_units);
#if FCL_HAS(FCL_FEAT_DROPOUT)
    const float keep = fcl_dropout_factor(drop, bh, row, col);
    dp *= keep;
#endif
    float ds = p * (dp - delta);
#if FCL_HAS(FCL_FEAT_SOFTCAP)
    ds *= 1.0f - t * t; /* d(cap * tanh(x / cap)) / dx */
#endif
#if FCL_HAS(FCL_FEAT_DROPOUT)
    p *= keep; /* dV sees the dropped probabilities */
#endif
    return (float2)(p, ds);
}

/* Plain attention (no score modifier, no dropout) on a piece with rows as
 * vector lanes: P and dS of FCL_RW scores at once, the same operations as
 * fcl_backward_score. */
#define FCL_BACKWARD_LANES (FCL_RW > 1 && !FCL_MODIFIED_SCORES && !FCL_HAS(FCL_FEAT_DROPOUT))

#ifndef FCL_DKDV_MAPS /* a piece without the accelerator's copies */
#define FCL_DKDV_MAPS(q_seq0, do_seq0) (void)maps
#endif
#ifndef FCL_DKDV_MAP_HEADS /* the query heads of a K/V head FCL_DKDV_MAPS maps */
#define FCL_DKDV_MAP_HEADS 1
#endif
#ifndef FCL_DQ_MAPS
#define FCL_DQ_MAPS(k_seq, v_seq) (void)maps
#endif

#if defined(FCL_KERNEL_DQ)

/* Each run of n entries of `part` (n a power of two dividing the group's
 * size; work-item lid wrote entry lid) summed into the run's first entry
 * by a tree of fixed shape, the same order on every run.  Every work-item
 * of the group calls it. */
inline void fcl_tree_sums(__local float *part, int lid, int n)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = n / 2; s > 0; s /= 2) {
        if ((lid & (n - 1)) < s)
            part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* delta = rowsum(dO * O), `lanes` work-items a row (a power of two up to
 * the group's size; the host's choice: one on CPUs, 32 on GPUs), in groups
 * of a power of two up to FCL_DELTA_WG work-items.  Lane t of a
 * row reads its columns t, t + lanes, ...: on a GPU a row's work-items
 * read neighbouring elements together, where one work-item a row would
 * make every load of a warp touch 32 rows' cache lines.  The lanes' sums
 * meet in a tree of fixed shape, so the order is the same on every run.
 * A work-group takes its size / lanes rows, then the same rows of the
 * next stretch of get_num_groups(0) groups' rows, as long as there are
 * rows (batch * heads_q * seqlen_q rows may pass 2^31: long indices). */
#define FCL_DELTA_WG 128
__kernel void fcl_backward_delta(__global const fcl_storage *O, __global const fcl_storage *dO,
                        __global float *delta, long o_off, long o_sb, long o_sh, long o_ss,
                        long do_off, long do_sb, long do_sh, long do_ss, int seqlen_q,
                        int head_dim_v, int heads_q, long total_rows, int lanes)
{
    __local float part[FCL_DELTA_WG];
    const int lid = (int)get_local_id(0), lane = lid & (lanes - 1);
    const long rows_wg = (long)get_local_size(0) / lanes;
    const long stretch = rows_wg * (long)get_num_groups(0);
    for (long gid = (long)get_group_id(0) * rows_wg + lid / lanes;
         gid - lid / lanes < total_rows; gid += stretch) {
        float sum = 0.0f;
        if (gid < total_rows) {
            const int row = (int)(gid % seqlen_q), bh = (int)(gid / seqlen_q);
            const int h = bh % heads_q, b = bh / heads_q;
            const long o = o_off + b * o_sb + h * o_sh + (long)row * o_ss;
            const long g = do_off + b * do_sb + h * do_sh + (long)row * do_ss;
            for (int k = lane; k < head_dim_v; k += lanes)
                sum = mad(fcl_load(O, o + k), fcl_load(dO, g + k), sum);
        }
        part[lid] = sum;
        fcl_tree_sums(part, lid, lanes);
        /* (lane 0 reads its own entry, which no work-item writes before it
         * does in the next stretch) */
        if (lane == 0 && gid < total_rows)
            delta[gid] = part[lid];
    }
}

/* The gradient of attention sinks: dsinks_h = -sum over the rows of head h
 * (every batch entry) of exp(sink_h - LSE) * delta, LSE holding the sink
 * (rows that see no key have O = 0, so delta = 0 and they count 0).  One
 * work-group per query head: work-item t sums rows t, t + WG, ... of each
 * batch entry in turn, then a tree of fixed shape adds the work-items'
 * sums, so the order is the same on every run.  Packed sequences are one
 * batch entry of cu_q[batch] rows (rows past the last sequence belong to
 * none, and their LSE was never written). */
#define FCL_SINK_GRAD_WG 64
__kernel __attribute__((reqd_work_group_size(FCL_SINK_GRAD_WG, 1, 1)))
void fcl_backward_sink_grad(__global const float *LSE, long lse_off, __global const float *delta,
                            __global const float *sinks, __global float *dsinks, int batch,
                            int heads_q, int lse_rows, __global const int *cu_q)
{
    __local float part[FCL_SINK_GRAD_WG];
    const int h = (int)get_group_id(0), lid = (int)get_local_id(0);
    const int entries = FCL_HAS(FCL_FEAT_VARLEN) ? 1 : batch;
    const int rows = FCL_HAS(FCL_FEAT_VARLEN) ? cu_q[batch] : lse_rows;
    const float sink = sinks[h];
    float sum = 0.0f;
    for (int b = 0; b < entries; ++b) {
        const long base = ((long)b * heads_q + h) * lse_rows;
        for (int r = lid; r < rows; r += FCL_SINK_GRAD_WG)
            sum += exp(sink - LSE[lse_off + base + r]) * delta[base + r];
    }
    part[lid] = sum;
    fcl_tree_sums(part, lid, FCL_SINK_GRAD_WG);
    if (lid == 0)
        dsinks[h] = -part[0];
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_backward_dq(__global const fcl_storage *Q, __global const fcl_storage *K,
                     __global const fcl_storage *V, __global const fcl_storage *dO,
                     __global const float *LSE, __global const float *delta,
                     __global fcl_storage *dQ,
                     long q_off, long q_sb, long q_sh, long q_ss,
                     long k_off, long k_sb, long k_sh, long k_ss,
                     long v_off, long v_sb, long v_sh, long v_ss,
                     long do_off, long do_sb, long do_sh, long do_ss,
                     long dq_off, long dq_sb, long dq_sh, long dq_ss,
                     long lse_off, int lse_rows, int seqlen_q, int seqlen_k, int head_dim,
                     int head_dim_v, int heads_q, int q_per_kv, int num_bh, float scale,
                     int window_left, int window_right,
                     __global const int *cu_q, __global const int *cu_k,
                     float softcap, __global const float *alibi, long alibi_sb,
                     uint seed_lo, uint seed_hi, uint drop_offset, uint drop_threshold,
                     float keep_scale, __global const uchar *block_mask, long bm_sb, long bm_sh,
                     int block_m, int block_n, int block_nbn,
                     /* FCL_WG_TMA: the tensor maps' workspace (tile_nv_wgmma.cl) */
                     __global ulong *maps)
{
    FCL_DQ_LOCALS;
    __local int nonfinite; /* fcl_group_any's flag: visible after the first tile's barrier */
    FCL_BWD_IDS;
    if (lid == 0)
        nonfinite = -1;
    const fcl_q_block blk = fcl_q_block_of_group(BR, num_bh, 1, heads_q, q_per_kv, seqlen_q, seqlen_k,
                                                 cu_q, cu_k, window_left, window_right);
    const int bh = blk.bh, b = blk.b, h = blk.h, hk = blk.hk, r0 = blk.r0, rows = blk.rows;
    const fcl_seq sq = blk.sq;
    const fcl_mask mask = sq.mask;
    const fcl_variant_state vs = fcl_variant_state_make(FCL_VARIANT_ARGS(b, h));
    const fcl_score_mods mods = vs.mods;
    const fcl_dropout drop = vs.drop;
    const fcl_blocks blocks = vs.blocks;
    const float units_scale = FCL_EXP_UNITS(scale);

    const long q_row = sq.q_row0 + r0;
    FCL_DQ_LOAD_Q_DO(q_off + fcl_batch_offset(b, q_sb) + h * q_sh + q_row * q_ss, q_ss,
                     do_off + fcl_batch_offset(b, do_sb) + h * do_sh + q_row * do_ss, do_ss, rows,
                     head_dim);

    /* This work-item's rows: LSE in the piece's exponent units (+inf for
     * padding rows, so their P is 0) and delta. */
    fcl_rowv lse[RMV], dlt[RMV], acc[RMV][DN];
    FCL_UNROLL
    for (int i = 0; i < RM; ++i) {
        const int row = r0 + FCL_ROW(i);
        const long at = fcl_lse_index(b, h, heads_q, lse_rows, sq, row);
        FCL_R(lse, i) = row < sq.seqlen_q ? FCL_EXP_UNITS(LSE[lse_off + at]) : INFINITY;
        FCL_R(dlt, i) = row < sq.seqlen_q ? delta[at] : 0.0f;
    }
    FCL_UNROLL
    for (int iv = 0; iv < RMV; ++iv)
        FCL_UNROLL
        for (int n = 0; n < DN; ++n) acc[iv][n] = 0.0f;

    const long k_head = k_off + fcl_batch_offset(b, k_sb) + hk * k_sh + sq.k_row0 * k_ss;
    const long v_head = v_off + fcl_batch_offset(b, v_sb) + hk * v_sh + sq.k_row0 * v_ss;
    /* a piece whose K and V tiles come by the tensor memory accelerator:
     * its maps of this sequence's rows (every work-item) */
    FCL_DQ_MAPS(k_head, v_head);
    /* Key tiles in order, each requested a tile ahead (see flash_fwd.cl):
     * a piece with background copies and two K/V buffers loads the next
     * tile while this one is multiplied; `issued` and `used` count tiles, so
     * their parity names the buffer. */
    const int key_begin = fcl_key_begin(mask, r0);
    const int key_end = rows > 0 ? fcl_key_end(mask, r0 + rows) : 0;
    int issued = 0, used = 0;
    int c0 = fcl_next_key_tile(blocks, BC, r0, r0 + rows, (key_begin / BC) * BC, key_end,
                               sq.seqlen_k);
    if (c0 < key_end) {
        FCL_DQ_PREFETCH_KV(k_head + (long)c0 * k_ss, k_ss, v_head + (long)c0 * v_ss, v_ss,
                           sq.seqlen_k - c0, issued & 1, c0);
        ++issued;
    }
    /* whole tiles first, then those on the mask's edge (FCL_FOR_RUNS, common.cl) */
    const int whole_end = min(key_end, fcl_whole_keys_end(mask, r0, r0 + rows, c0, BC));
    FCL_FOR_RUNS
    FCL_TILE_LOOP(c0 < (FCL_LAST_RUN ? key_end : whole_end)) {
        const int cols = min(BC, sq.seqlen_k - c0);
        const int next =
            fcl_next_key_tile(blocks, BC, r0, r0 + rows, c0 + BC, key_end, sq.seqlen_k);
        const int cover = fcl_tile_cover(blocks, r0, r0 + rows, c0, c0 + cols);
        const int buf = used++ & 1;
        FCL_DQ_TILE_BEGIN(k_head + (long)c0 * k_ss, k_ss, v_head + (long)c0 * v_ss, v_ss, cols,
                          head_dim, buf, used - 1);
        if (next < key_end) {
            FCL_DQ_PREFETCH_KV(k_head + (long)next * k_ss, k_ss, v_head + (long)next * v_ss, v_ss,
                               sq.seqlen_k - next, issued & 1, next);
            ++issued;
        }

        fcl_rowv s[RMV][RN], dp[RMV][RN];
        FCL_DQ_S(s, buf);
        FCL_DQ_DP(dp, buf);
        /* dS in place of S, then zero where masked */
#if FCL_BACKWARD_LANES
        for (int iv = 0; iv < RMV; ++iv)
            for (int j = 0; j < RN; ++j)
                s[iv][j] = FCL_EXP(s[iv][j] * units_scale - lse[iv]) * (dp[iv][j] - dlt[iv]);
#else
        FCL_UNROLL
        for (int i = 0; i < RM; ++i)
            FCL_UNROLL
            for (int j = 0; j < RN; ++j)
                FCL_S(s, i, j) = fcl_backward_score(FCL_S(s, i, j), FCL_S(dp, i, j), FCL_R(lse, i),
                                                    FCL_R(dlt, i), mods, units_scale, mask.diag,
                                                    drop, bh, r0 + FCL_ROW(i), c0 + FCL_COL(j)).y;
#endif
        FCL_HIDE_MASKED(0, mask, blocks, cover, sq.seqlen_q, r0, rows, c0, FCL_S(s, i_, j_) = 0.0f,
                        s[iv_][j_] = select(s[iv_][j_], (fcl_rowv)(0.0f), hid_));
        FCL_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_UNROLL
            for (int j = 0; j < RN; ++j) FCL_DQ_SET_DS(s, iv, j, s[iv][j]);
        /* a non-finite K element reaches the rows that see its key alone */
        FCL_GUARD_NONFINITE(acc, 0, mask, blocks, cover, sq.seqlen_q, r0, rows, c0, cols,
                            head_dim, &nonfinite, c0, FCL_DQ_K_BAD, FCL_DQ_K_CLEAN, buf);
        FCL_DQ_ACC(acc, s, buf);
        c0 = next;
    }
    FCL_BWD_COPIES_DONE();

    const long dq_base = dq_off + fcl_batch_offset(b, dq_sb) + h * dq_sh + sq.q_row0 * dq_ss;
    const bool dq_paired = FCL_BWD_PAIRED(dq_base, dq_ss, head_dim);
    FCL_UNROLL
    for (int i = 0; i < RM; ++i) {
        const int row = r0 + FCL_ROW(i);
        if (row >= sq.seqlen_q) continue;
        FCL_BWD_STORE_ROW(dQ, dq_base + (long)row * dq_ss, head_dim, dq_paired, acc, i, scale);
    }
}

#elif defined(FCL_KERNEL_DKDV)

/* ---- dQ in the dK/dV kernel (FCL_FUSED_DQ) ----------------------------------
 * dQ_i = scale * sum_j dS_ij K_j over key blocks j: the work-group of key
 * block j has dS_ij (as dS^T) and K_j on chip for every Q block i it
 * visits, so it adds its share into dq_acc (fp32, row (b, h, r) at
 * fcl_lse_index * head_dim, zeroed by the host), and fcl_backward_dq_store
 * scales and stores dQ after the launch: the dQ kernel's two products that
 * rebuild S and dP are saved (FlashAttention-2's backward).
 * FCL_FUSED_DQ 1: the shares of a Q block are added in key-block order, so
 * dQ is bitwise repeatable.  dq_sem[fcl_dq_sem_index(Q block)] counts the
 * key blocks that have added theirs; block j waits until the count equals
 * the number of key blocks before it that visit the Q block, j -
 * fcl_key_begin / BC (the visiting blocks are consecutive: a band mask, no
 * block mask), adds, then counts itself (a step later, fcl_dq_count).
 * Work-groups run in group order
 * (ranks ascend with the group id, heads fastest: fcl_rank_of_group), so a
 * work-group only waits for ones started before it, which never wait for
 * it: no deadlock on a device that starts groups in order.  A wait longer
 * than FCL_DQ_SPIN_LIMIT polls gives up and sets dq_sem[failed_at] (the
 * other waits then end at once): dQ becomes NaN in every element
 * (fcl_backward_dq_store), loud, never silently wrong.  FCL_FUSED_DQ 2: no order (atomics, as FlashAttention-2
 * does by default): the sum's rounding depends on timing. */
#if FCL_FUSED_DQ
#if FCL_MMA_EMULATE
#define FCL_DQ_SPIN_LIMIT (1L << 34) /* CPUs run the groups it waits for much slower */
#else
#define FCL_DQ_SPIN_LIMIT (1L << 24)
#endif
inline long fcl_dq_sem_index(int b, int h, int heads_q, int sem_per_head, const fcl_seq sq,
                             int r0)
{
    /* packed sequences: block i of sequence b gets q_row0 / BR + b + i, which
     * no block of another sequence gets (each starts at or past the
     * previous one's last row) */
    const long head = FCL_HAS(FCL_FEAT_VARLEN) ? h : (long)b * heads_q + h;
    const long block = FCL_HAS(FCL_FEAT_VARLEN) ? sq.q_row0 / BR + b + r0 / BR : r0 / BR;
    return head * sem_per_head + block;
}

inline void fcl_dq_wait(volatile __global int *sem, long at, int expected, long failed_at, int lid)
{
#if FCL_FUSED_DQ == 1
    if (lid == 0) {
        for (long spins = 0; sem[at] != expected; ++spins) {
            if (sem[failed_at] != 0) break; /* another gave up: dQ is NaN already */
            if (spins == FCL_DQ_SPIN_LIMIT) {
                atomic_xchg(&sem[failed_at], 1);
                break;
            }
        }
        fcl_fence_device();
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
#endif
}

/* Counts a share's adds (FCL_FUSED_DQ 1) one step late, so that no step
 * waits for its own adds to land: each work-item's fence before the next
 * share's staging (its barrier) orders its adds of the share before, issued
 * a step earlier and so long done, then work-item 0 counts that share here
 * (at = -1: none yet); after the loop, the last share.  A work-group still
 * waits only for ones started before it, which count without waiting for
 * it (above). */
inline void fcl_dq_count(volatile __global int *sem, long at, int lid)
{
#if FCL_FUSED_DQ == 1
    if (lid == 0 && at >= 0) atomic_inc(&sem[at]);
#endif
}
#endif

/* The score tile is transposed here: the piece's rows (FCL_ROW) are keys,
 * its columns (FCL_COL) query rows. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_backward_dkdv(__global const fcl_storage *Q, __global const fcl_storage *K,
                       __global const fcl_storage *V, __global const fcl_storage *dO,
                       __global const float *LSE, __global const float *delta,
                       __global fcl_storage *dK, __global fcl_storage *dV,
                       long q_off, long q_sb, long q_sh, long q_ss,
                       long k_off, long k_sb, long k_sh, long k_ss,
                       long v_off, long v_sb, long v_sh, long v_ss,
                       long do_off, long do_sb, long do_sh, long do_ss,
                       long dk_off, long dk_sb, long dk_sh, long dk_ss,
                       long dv_off, long dv_sb, long dv_sh, long dv_ss,
                       long lse_off, int lse_rows, int seqlen_q, int seqlen_k, int head_dim,
                       int head_dim_v, int heads_q, int q_per_kv, int num_bhk, float scale,
                       int window_left, int window_right,
                       __global const int *cu_q, __global const int *cu_k,
                       float softcap, __global const float *alibi, long alibi_sb,
                       uint seed_lo, uint seed_hi, uint drop_offset, uint drop_threshold,
                       float keep_scale, __global const uchar *block_mask, long bm_sb, long bm_sh,
                       int block_m, int block_n, int block_nbn,
                       /* FCL_FUSED_DQ: see above */
                       __global float *dq_acc, volatile __global int *dq_sem, int sem_per_head,
                       long failed_at,
                       /* FCL_WG_TMA: the tensor maps' workspace (tile_nv_wgmma.cl) */
                       __global ulong *maps)
{
    FCL_DKDV_LOCALS;
    /* fcl_group_any's flags, for Q, dO and K: visible after the first block's barrier */
    __local int nonfinite[3];
    FCL_BWD_IDS;
    if (lid == 0)
        nonfinite[0] = nonfinite[1] = nonfinite[2] = -1;
    int bhk; /* under a causal mask the first K blocks see the most rows */
    const int kb = fcl_rank_of_group((int)get_group_id(0), (int)get_num_groups(0) / num_bhk,
                                     num_bhk, &bhk);
    const int heads_kv = heads_q / q_per_kv;
    const int hk = bhk % heads_kv, b = bhk / heads_kv;
    const fcl_seq sq = fcl_sequence(b, seqlen_q, seqlen_k, cu_q, cu_k, window_left, window_right);
    const int c0 = kb * BC;
    /* no early return before the barriers: see flash_fwd.cl */
    const int cols = clamp(sq.seqlen_k - c0, 0, BC);
    const fcl_mask mask = sq.mask;
    const fcl_dropout drop = fcl_variant_state_make(FCL_VARIANT_ARGS(b, 0)).drop;
    const float units_scale = FCL_EXP_UNITS(scale);

    const long k_row = sq.k_row0 + c0;
    FCL_DKDV_LOAD_KV(k_off + fcl_batch_offset(b, k_sb) + hk * k_sh + k_row * k_ss, k_ss,
                     v_off + fcl_batch_offset(b, v_sb) + hk * v_sh + k_row * v_ss, v_ss, cols,
                     head_dim);
    /* a piece whose Q and dO blocks come by the tensor memory accelerator:
     * its maps of this sequence's rows, of each of the FCL_DKDV_MAP_HEADS
     * query heads it maps (every work-item; the bases of the K/V head's
     * first query head's rows) */
    FCL_DKDV_MAPS(q_off + fcl_batch_offset(b, q_sb) + hk * FCL_DKDV_MAP_HEADS * q_sh +
                      sq.q_row0 * q_ss,
                  do_off + fcl_batch_offset(b, do_sb) + hk * FCL_DKDV_MAP_HEADS * do_sh +
                      sq.q_row0 * do_ss);
#if FCL_FUSED_DQ
    /* whether K holds a non-finite value, for dQ's exact path (rare) */
    FCL_DKDV_KV_ARRIVED();
    const bool k_bad = fcl_group_any(fcl_h_tile_bad(Kh, BC, cols, lid), &nonfinite[2], 1);
#endif

    /* Both accumulators, or one of them (FCL_DKDV_PART; the other is never
     * read, so it costs no registers). */
    fcl_rowv dk[FCL_ACC_RMV][DN], dv[FCL_ACC_RMV][DN];
    FCL_UNROLL
    for (int iv = 0; iv < FCL_ACC_RMV; ++iv)
        FCL_UNROLL
        for (int n = 0; n < DN; ++n) dk[iv][n] = dv[iv][n] = 0.0f;

    /* The Q blocks to visit, of every query head sharing this K/V head, as
     * one sequence t = 0 .. total-1, each requested a block ahead: a piece
     * with background copies loads the next Q and dO blocks while this one
     * is multiplied.  LSE and delta of a block go to one of two __local
     * buffers when it is requested.  With the loop's two runs (FCL_FOR_RUNS,
     * common.cl) the first visits the blocks on the mask's edge, the second
     * the whole ones: of each head (head-major in each run), the blocks
     * before the first row that sees every key of the tile (`edge_blocks`),
     * then the others.  Under GQA the fused dQ keeps the head-major order
     * of all blocks (its ordered adds wait for each block's earlier key
     * blocks, which visit in that order), every block in the edge run; so
     * does one run. */
    const int row_begin = fcl_row_begin(mask, c0);
    const int row_end = cols > 0 ? fcl_row_end(mask, c0 + cols, sq.seqlen_q) : 0;
    const int rb0 = row_begin / BR;
    const int blocks_per_head = max(0, (row_end + BR - 1) / BR - rb0);
    const int total = q_per_kv * blocks_per_head;
    const int whole_pos = fcl_whole_rows_begin(mask, c0, c0 + BC);
#if FCL_FUSED_DQ
    const bool regroup = FCL_EDGE_RUNS == 2 && q_per_kv == 1;
#else
    const bool regroup = FCL_EDGE_RUNS == 2;
#endif
    const int edge_blocks =
        !regroup || whole_pos == INT_MAX
            ? blocks_per_head
            : clamp((int)(((long)whole_pos * FCL_PACK + BR - 1) / BR) - rb0, 0, blocks_per_head);
    const int edge_end = q_per_kv * edge_blocks;
    const int whole_blocks = blocks_per_head - edge_blocks;
#define FCL_Q_BLOCK_HEAD(t)                                                                  \
    (hk * q_per_kv + ((t) < edge_end ? (t) / max(edge_blocks, 1)                             \
                                     : ((t) - edge_end) / max(whole_blocks, 1)))
#define FCL_Q_BLOCK_ROW(t)                                                                   \
    ((rb0 + ((t) < edge_end ? (t) % max(edge_blocks, 1)                                     \
                            : edge_blocks + ((t) - edge_end) % max(whole_blocks, 1))) * BR)
#define FCL_SKIP_EMPTY_Q_BLOCKS(t)                                                          \
    while ((t) < total &&                                                                  \
           fcl_tile_cover(fcl_variant_state_make(FCL_VARIANT_ARGS(b, FCL_Q_BLOCK_HEAD(t))).blocks, \
                          FCL_Q_BLOCK_ROW(t), min(FCL_Q_BLOCK_ROW(t) + BR, sq.seqlen_q), c0,   \
                          c0 + cols) == FCL_BLOCKS_NONE)                                   \
        ++(t)
/* The next block's Q and dO copies, and its rows' LSE and delta into
 * __local buffer buf_.  Where the work-group has a work-item a row, those
 * two values are read into registers here and stored by
 * FCL_STORE_Q_BLOCK_STATS at the block's end (the loop's barrier then
 * publishes them): a store right after its read waited for global
 * memory before the block's products were issued, every block. */
#define FCL_STATS_IN_REGS (BR <= WG)
#define FCL_REQUEST_Q_BLOCK(t)                                                              \
    do {                                                                                   \
        const int h_ = FCL_Q_BLOCK_HEAD(t), r0_ = FCL_Q_BLOCK_ROW(t), buf_ = issued++ & 1;    \
        const int rows_ = min(BR, sq.seqlen_q - r0_);                                      \
        FCL_DKDV_PREFETCH_Q_DO(q_off + fcl_batch_offset(b, q_sb) + h_ * q_sh + (sq.q_row0 + r0_) * q_ss, \
                               q_ss,                                                       \
                               do_off + fcl_batch_offset(b, do_sb) + h_ * do_sh + (sq.q_row0 + r0_) * do_ss, \
                               do_ss, rows_, buf_, r0_, h_ - hk * q_per_kv);               \
        if (FCL_STATS_IN_REGS) {                                                           \
            stats_buf = buf_;                                                              \
            stats_ok = lid < rows_;                                                        \
            if (stats_ok) {                                                                \
                const long at_ = fcl_lse_index(b, h_, heads_q, lse_rows, sq, r0_ + lid);   \
                lse_next = LSE[lse_off + at_];                                             \
                dlt_next = delta[at_];                                                     \
            }                                                                              \
        } else {                                                                           \
            for (int r_ = lid; r_ < BR; r_ += WG) {                                        \
                const long at_ = fcl_lse_index(b, h_, heads_q, lse_rows, sq, r0_ + r_);    \
                lse_s[buf_ * BR + r_] = r_ < rows_ ? FCL_EXP_UNITS(LSE[lse_off + at_]) : INFINITY; \
                dlt_s[buf_ * BR + r_] = r_ < rows_ ? delta[at_] : 0.0f;                    \
            }                                                                              \
        }                                                                                  \
    } while (0)
#define FCL_STORE_Q_BLOCK_STATS()                                                           \
    do {                                                                                   \
        if (FCL_STATS_IN_REGS && lid < BR) {                                               \
            lse_s[stats_buf * BR + lid] = stats_ok ? FCL_EXP_UNITS(lse_next) : INFINITY;   \
            dlt_s[stats_buf * BR + lid] = stats_ok ? dlt_next : 0.0f;                      \
        }                                                                                  \
    } while (0)

    int issued = 0, used = 0;
    int t = 0;
#if FCL_FUSED_DQ
    long dq_counted_next = -1; /* the share fcl_dq_count counts next (-1: none) */
#endif
    int stats_buf = 0;
    bool stats_ok = false;
    float lse_next = 0.0f, dlt_next = 0.0f;
    FCL_SKIP_EMPTY_Q_BLOCKS(t);
    if (t < total) {
        FCL_REQUEST_Q_BLOCK(t);
        FCL_STORE_Q_BLOCK_STATS();
    }
    /* the blocks on the mask's edge, then the whole ones (see above) */
    FCL_FOR_RUNS
    FCL_TILE_LOOP(t < (FCL_LAST_RUN ? total : edge_end)) {
        const int h = FCL_Q_BLOCK_HEAD(t), r0 = FCL_Q_BLOCK_ROW(t);
        const int bh = b * heads_q + h;
        const int rows = min(BR, sq.seqlen_q - r0);
        const long q_base = q_off + fcl_batch_offset(b, q_sb) + h * q_sh + (sq.q_row0 + r0) * q_ss;
        const long do_base =
            do_off + fcl_batch_offset(b, do_sb) + h * do_sh + (sq.q_row0 + r0) * do_ss;
        const fcl_variant_state vs = fcl_variant_state_make(FCL_VARIANT_ARGS(b, h));
        const fcl_score_mods mods = vs.mods;
        const fcl_blocks blocks = vs.blocks;
        const int cover = fcl_tile_cover(blocks, r0, r0 + rows, c0, c0 + cols);
        int next = t + 1;
        FCL_SKIP_EMPTY_Q_BLOCKS(next);
        const int buf = used++ & 1;
        __local const float *lse_b = lse_s + buf * BR;
        __local const float *dlt_b = dlt_s + buf * BR;
        FCL_DKDV_BLOCK_BEGIN(q_base, q_ss, do_base, do_ss, rows, head_dim, buf, used - 1);
        if (next < total) FCL_REQUEST_Q_BLOCK(next);

        fcl_rowv st[RMV][RN], dpt[RMV][RN];
        FCL_DKDV_ST(st, buf);
        if (FCL_WANT_DK) {
            FCL_DKDV_DPT(dpt, buf);
        } else { /* dV alone needs no dP */
            FCL_UNROLL
            for (int iv = 0; iv < RMV; ++iv)
                FCL_UNROLL
                for (int j = 0; j < RN; ++j) dpt[iv][j] = 0.0f;
        }
        /* P^T and dS^T in place of S^T and dP^T, then zero where masked */
#if FCL_BACKWARD_LANES
        for (int iv = 0; iv < RMV; ++iv)
            for (int j = 0; j < RN; ++j) {
                const int r = FCL_COL(j);
                const fcl_rowv p = FCL_EXP(st[iv][j] * units_scale - lse_b[r]);
                dpt[iv][j] = p * (dpt[iv][j] - dlt_b[r]);
                st[iv][j] = p;
            }
#else
        FCL_UNROLL
        for (int i = 0; i < RM; ++i)
            FCL_UNROLL
            for (int j = 0; j < RN; ++j) {
                const int r = FCL_COL(j);
                const float2 pd = fcl_backward_score(FCL_S(st, i, j), FCL_S(dpt, i, j), lse_b[r],
                                                     dlt_b[r], mods, units_scale, mask.diag, drop,
                                                     bh, r0 + r, c0 + FCL_ROW(i));
                FCL_S(st, i, j) = pd.x;
                FCL_S(dpt, i, j) = pd.y;
            }
#endif
        FCL_HIDE_MASKED(1, mask, blocks, cover, sq.seqlen_q, r0, rows, c0,
                        FCL_S(st, i_, j_) = FCL_S(dpt, i_, j_) = 0.0f,
                        (st[iv_][j_] = select(st[iv_][j_], (fcl_rowv)(0.0f), hid_),
                         dpt[iv_][j_] = select(dpt[iv_][j_], (fcl_rowv)(0.0f), hid_)));
        FCL_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_UNROLL
            for (int j = 0; j < RN; ++j) FCL_DKDV_SET(st, dpt, iv, j, st[iv][j], dpt[iv][j]);
        /* a non-finite Q (dO) element reaches the dK (dV) of the keys that see its row alone */
        if (FCL_WANT_DK)
            FCL_GUARD_NONFINITE(dk, 1, mask, blocks, cover, sq.seqlen_q, r0, rows, c0, rows,
                                head_dim, &nonfinite[0], t, FCL_DKDV_Q_BAD, FCL_DKDV_Q_CLEAN, buf);
        if (FCL_WANT_DV)
            FCL_GUARD_NONFINITE(dv, 1, mask, blocks, cover, sq.seqlen_q, r0, rows, c0, rows,
                                head_dim_v, &nonfinite[1], t, FCL_DKDV_DO_BAD, FCL_DKDV_DO_CLEAN, buf);
        FCL_DKDV_ACC(dk, dv, st, dpt, buf);
#if FCL_FUSED_DQ
        {
            float dqs[FCL_DQ_RM][FCL_DQ_DN];
            FCL_DKDV_DQ_SHARE(dqs, dpt);
            if (k_bad && FCL_EDGE_TILE(mask, cover, r0, rows, c0)) {
                FCL_UNROLL
                for (int i = 0; i < FCL_DQ_RM; ++i)
                    FCL_UNROLL
                    for (int n = 0; n < FCL_DQ_DN; ++n)
                        dqs[i][n] = fcl_dq_exact(FCL_DQ_DS_TILE, Kh, FCL_DQ_ROW(i), FCL_DQ_COL(n),
                                                 cols, mask, sq.seqlen_q, r0, c0);
            }
#if FCL_FUSED_DQ == 1
            fcl_fence_device(); /* the previous share's adds, before its count */
#endif
            FCL_DKDV_DQ_STAGE(dqs);
            fcl_dq_count(dq_sem, dq_counted_next, lid);
            const long sem = fcl_dq_sem_index(b, h, heads_q, sem_per_head, sq, r0);
            fcl_dq_wait(dq_sem, sem, kb - fcl_key_begin(mask, r0) / BC, failed_at, lid);
            __global float *acc0 =
                dq_acc + fcl_lse_index(b, h, heads_q, lse_rows, sq, r0) * head_dim;
            FCL_DKDV_DQ_ADD(acc0, rows, head_dim);
            dq_counted_next = sem;
        }
#endif
        if (next < total) FCL_STORE_Q_BLOCK_STATS();
        t = next;
    }
#undef FCL_Q_BLOCK_HEAD
#undef FCL_Q_BLOCK_ROW
#undef FCL_SKIP_EMPTY_Q_BLOCKS
#undef FCL_REQUEST_Q_BLOCK
#undef FCL_STORE_Q_BLOCK_STATS
#undef FCL_STATS_IN_REGS
#if FCL_FUSED_DQ == 1
    fcl_fence_device(); /* the last share's adds, before its count */
    barrier(CLK_GLOBAL_MEM_FENCE);
    fcl_dq_count(dq_sem, dq_counted_next, lid);
#endif
    FCL_BWD_COPIES_DONE();

    const long dk_base = dk_off + fcl_batch_offset(b, dk_sb) + hk * dk_sh + sq.k_row0 * dk_ss;
    const long dv_base = dv_off + fcl_batch_offset(b, dv_sb) + hk * dv_sh + sq.k_row0 * dv_ss;
    const bool dk_paired = FCL_BWD_PAIRED(dk_base, dk_ss, head_dim);
    const bool dv_paired = FCL_BWD_PAIRED(dv_base, dv_ss, head_dim_v);
#if FCL_DKDV_STAGE
    const bool dk_staged = FCL_WANT_DK ? FCL_STAGED_FIT(head_dim, dk_base | dk_ss) : false;
    const bool dv_staged = FCL_WANT_DV ? FCL_STAGED_FIT(head_dim_v, dv_base | dv_ss) : false;
    /* every work-item past the loop, whose products read K and V last,
     * and its copies into them landed (FCL_BWD_COPIES_DONE) */
    if (dk_staged || dv_staged)
        barrier(CLK_LOCAL_MEM_FENCE);
#else
    const bool dk_staged = false, dv_staged = false;
#endif
    /* the outputs written a row at a time */
    const bool dk_rows = FCL_WANT_DK ? !dk_staged : false;
    const bool dv_rows = FCL_WANT_DV ? !dv_staged : false;
    FCL_UNROLL
    for (int i = 0; i < FCL_ACC_RM; ++i) {
#if FCL_DKDV_STAGE
        /* every row of the tile, keys past the block's too: the stores
         * below take the first cols */
        if (dk_staged)
            FCL_STAGE_ACC_PAIRS(FCL_DKDV_DK_STAGE, FCL_ACC_ROW(i), dk, i, scale);
        if (dv_staged)
            FCL_STAGE_ACC_PAIRS(FCL_DKDV_DV_STAGE, FCL_ACC_ROW(i), dv, i, 1.0f);
#endif
        const int key = c0 + FCL_ACC_ROW(i);
        if (key >= sq.seqlen_k) continue;
        if (dk_rows)
            FCL_BWD_STORE_ROW(dK, dk_base + (long)key * dk_ss, head_dim, dk_paired, dk, i, scale);
        if (dv_rows)
            FCL_BWD_STORE_ROW(dV, dv_base + (long)key * dv_ss, head_dim_v, dv_paired, dv, i, 1.0f);
    }
#if FCL_DKDV_STAGE
    if (dk_staged || dv_staged) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (dk_staged)
            FCL_DKDV_DK_STORE(dK, dk_base + (long)c0 * dk_ss, dk_ss, cols, head_dim);
        if (dv_staged)
            FCL_DKDV_DV_STORE(dV, dv_base + (long)c0 * dv_ss, dv_ss, cols, head_dim_v);
    }
#endif
}

#if FCL_FUSED_DQ
/* dQ = scale * dq_acc in dQ's type and layout, one work-item per element;
 * NaN everywhere when a wait gave up (see above).  Packed sequences are one
 * batch entry of lse_rows = total_q rows, as for delta. */
__kernel void fcl_backward_dq_store(__global const float *dq_acc, __global const int *dq_sem,
                                    long failed_at, __global fcl_storage *dQ, long dq_off,
                                    long dq_sb, long dq_sh, long dq_ss, int lse_rows,
                                    int head_dim, int heads_q, float scale, long total)
{
    const long gid = (long)get_global_id(0);
    if (gid >= total) return;
    const long row_all = gid / head_dim;
    const int col = (int)(gid - row_all * head_dim);
    const long bh = row_all / lse_rows;
    const int row = (int)(row_all - bh * lse_rows);
    const int h = (int)(bh % heads_q), b = (int)(bh / heads_q);
    const float v = dq_sem[failed_at] != 0 ? NAN : dq_acc[gid] * scale;
    fcl_store(dQ, dq_off + fcl_batch_offset(b, dq_sb) + h * dq_sh + (long)row * dq_ss + col, v);
}
#endif

#endif
