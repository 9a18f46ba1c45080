/* flash_fwd.cl - FlashAttention-2 forward.
 *
 * One work-group per (Q block of BR rows, query head, batch entry).  The Q
 * block stays on chip while K/V blocks of BC keys stream through; each
 * work-item keeps its rows' running max m, partial sum l and output
 * accumulator in registers (online softmax).  Scores exist only as one
 * BR x BC tile on chip.  K/V blocks outside the window or the block-sparse
 * mask are skipped whole.
 *
 * The loop, the masking, the score modifiers and the online softmax are
 * written once, here.  How tiles are held and multiplied is a piece:
 * tile_portable.cl (fp32 __local tiles, multiply-adds; every device),
 * tile_nv_mma.cl (fp16/bf16 tiles, mma.sync tensor cores; NVIDIA sm_80+) or
 * tile_cpu.cl (one work-item a group, tile rows as SIMD lanes; CPUs).
 * A piece provides: RM, RN, DN (the work-item's register tile s[RM][RN] and
 * output acc[RM][DN], held as fcl_rowv s[RMV][RN] and acc[RMV][DN]: see
 * "rows as vector lanes" in common.cl), FCL_ROW(i) / FCL_COL(j) /
 * FCL_OCOL(n) (what tile row, key column and head_dim column those
 * registers are), FCL_FWD_IDS, FCL_FWD_LOCALS, FCL_FWD_LOAD_Q (Q, negated
 * when told; optionally finished by FCL_FWD_Q_ARRIVED, below),
 * FCL_FWD_KEY_STATE (what the loads keep from tile to tile, such as pages
 * read ahead), FCL_FWD_PREFETCH_K / FCL_FWD_TILE_BEGIN /
 * FCL_FWD_TILE_MID (where K and V tiles are loaded: both at the start of a
 * tile, or in the background, see the loop), FCL_FWD_QK, FCL_ROWS_MAX /
 * FCL_ROWS_SUM (over the work-items sharing a row), FCL_FIRST_IN_ROW,
 * FCL_FWD_SET_P (the probabilities of FCL_RW rows, one column),
 * optionally FCL_FWD_SHARE_P (hands them to other work-items before the
 * middle of the tile, whose barrier makes them visible) and FCL_FWD_PV, FCL_FWD_V_BAD / FCL_FWD_V_CLEAN (the V tile's non-finite
 * elements, see "non-finite operands" in common.cl), and the exponential it
 * uses: FCL_EXP_UNITS
 * converts a score to the units of FCL_EXP, FCL_NATURAL_UNITS converts back
 * (exp itself on the portable path, exp2 on the tensor-core one), and
 * optionally FCL_FWD_STAGE_O (O through __local, below).  Tiles are named
 * by fcl_rows (common.cl) and their first row.
 *
 * V has head_dim_v <= head_dim columns (O too): the pieces hold V's tile at
 * D_PAD columns like K's, reading the kernel's head_dim_v for V's rows and
 * loading zeros past it (or never reading past it, the CPU piece), so the
 * accumulator's columns from head_dim_v on stay unused and are not stored.
 *
 * Decoding is a plan of this kernel, not another kernel: with few query
 * rows, the FCL_PACK query heads that share a K/V head are one work-group's
 * rows (GQA packing: each K/V tile is read once for all of them), and the
 * keys are split into chunks of split_keys (split-KV, FlashDecoding), each
 * chunk a work-group that writes its partial O (fp32, normalised) and LSE
 * (-inf when it saw no key) to part_o / part_lse for the merge of
 * combine.cl.  A KV-cache call (FCL_FEAT_KVCACHE) reads K/V through a page
 * table when FCL_PAGE_SIZE > 0, and each sequence attends to its first
 * cache_lens[b] + seqlen_new keys (after kvcache.cl appended the new rows);
 * each work-group checks the length and the page-table entries of its own
 * keys first (fcl_kvcache_sequence_ok), and writes NaN when that fails: so
 * every row of a bad sequence is NaN (a chunk's NaN spreads in the merge)
 * and no key of it is read.
 */

/* a piece whose P V reads only the work-item's own probabilities shares none */
#ifndef FCL_FWD_SHARE_P
#define FCL_FWD_SHARE_P(s) (void)0
#endif

/* A piece may defer a tile's P V into the next tile (FCL_FWD_DEFERRED_PV,
 * the wgmma piece: FlashAttention-3's pipelining): its FCL_FWD_QK then
 * also starts the previous tile's P V, guarding that tile's V itself;
 * FCL_FWD_PV only keeps P for it; FCL_FWD_ACC_READY(acc) waits for it
 * before the accumulators are rescaled, and FCL_FWD_LAST_PV(acc) runs the
 * last tile's after the loop.  The softmax is meant to run while that
 * product does; on sm_90a ptxas moves the wait ahead of it (NOTES.md, run
 * 46). */
#ifndef FCL_FWD_DEFERRED_PV
#define FCL_FWD_DEFERRED_PV 0
#define FCL_FWD_ACC_READY(acc) (void)0
#define FCL_FWD_LAST_PV(acc) (void)0
#endif

/* A piece may add work at the kernel's very end, reached by every
 * work-item (the wgmma piece's timestamps, FCL_WG_STAMPS). */
#ifndef FCL_FWD_END
#define FCL_FWD_END() (void)0
#endif

/* A piece may record timestamps where FCL_FWD_MARK(n) marks points of the
 * output's writing (the wgmma piece's FCL_WG_STAMPS). */
#ifndef FCL_FWD_MARK
#define FCL_FWD_MARK(n) (void)0
#endif

/* A piece may start Q's loads in FCL_FWD_LOAD_Q and finish them in
 * FCL_FWD_Q_ARRIVED, after the first keys are requested (the wgmma piece:
 * Q's copies run while the keys' are set up). */
#ifndef FCL_FWD_Q_ARRIVED
#define FCL_FWD_Q_ARRIVED() (void)0
#endif

/* A piece may write O through __local (FCL_FWD_STAGE_O): each work-item
 * puts its normalised outputs, every column of D_PAD, into a BR x D_PAD
 * tile with FCL_FWD_O_STAGE(tile row, column, value), and
 * FCL_FWD_O_STORE(O, first row's element, row stride, rows, columns) then
 * stores the tile's first `columns` in 16-byte pieces.  Only where every
 * row's start is 16-byte aligned and rows are whole 8-value pieces, and not
 * for packed or split blocks; the piece's tile must be free once all
 * work-items are past the loop (a barrier). */
#ifndef FCL_FWD_STAGE_O
#define FCL_FWD_STAGE_O 0
#endif
/* Otherwise a piece that stores accumulators' column pairs (common.cl,
 * FCL_STORE_ACC_PAIRS) writes O a pair at a time where O has the 16-bit
 * storage type and FCL_PAIRS_FIT. */
#if defined(fcl_store_pair) && FCL_OUT_DTYPE == FCL_DTYPE && !FCL_IS_FP8 && FCL_DTYPE != 0
#define FCL_FWD_O_PAIRS 1
#else
#define FCL_FWD_O_PAIRS 0
#endif

/* the output accumulators' rows: the score tile's, unless the piece says (common.cl) */
#ifndef FCL_ACC_RM
#define FCL_ACC_RM RM
#define FCL_ACC_ROW(i) FCL_ROW(i)
#endif

/* a probability, exponent x, of register column j (a piece may compute
 * some columns' otherwise) */
#ifndef FCL_EXP_P
#define FCL_EXP_P(x, j) FCL_EXP(x)
#endif

/* P's scale, 2^FCL_FWD_P_SHIFT in FCL_EXP's units (a piece may set it) */
#ifndef FCL_FWD_P_SHIFT
#define FCL_FWD_P_SHIFT 0
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fcl_forward(__global const fcl_storage *Q, __global const fcl_kv_storage *K,
                 __global const fcl_kv_storage *V, __global fcl_ostorage *O, __global float *LSE,
                 long q_off, long q_sb, long q_sh, long q_ss,
                 long k_off, long k_sb, long k_sh, long k_ss,
                 long v_off, long v_sb, long v_sh, long v_ss,
                 long o_off, long o_sb, long o_sh, long o_ss,
                 long lse_off, int lse_rows, int write_lse,
                 int seqlen_q, int seqlen_k, int head_dim, int head_dim_v, int heads_q,
                 int q_per_kv, int num_bh, float scale, int window_left, int window_right,
                 /* variants (used only when compiled in, see common.cl) */
                 __global const int *cu_q, __global const int *cu_k,
                 float softcap, __global const float *alibi, long alibi_sb,
                 uint seed_lo, uint seed_hi, uint drop_offset, uint drop_threshold,
                 float keep_scale, __global const uchar *block_mask, long bm_sb, long bm_sh,
                 int block_m, int block_n, int block_nbn,
                 /* split-KV: partials of num_splits chunks of split_keys keys */
                 int num_splits, int split_keys, __global float *part_o,
                 __global float *part_lse, long part_rows,
                 /* KV-cache calls (FCL_FEAT_KVCACHE) */
                 __global const int *cache_lens, int seqlen_new, __global const int *page_table,
                 long pt_stride, int num_pages,
                 /* FP8: descales per (batch, query head) and (batch, K/V head), absent: 1.0 */
                 __global const float *descale_q, __global const float *descale_k,
                 __global const float *descale_v,
                 /* attention sinks: heads_q logits (joined here, or by the merge) */
                 __global const float *sinks,
                 /* which of the four are real: FCL_ARRAY_* ("optional arrays", common.cl) */
                 int arrays,
                 /* the wgmma piece's bulk tensor copies (FCL_WG_TMA, tile_nv_wgmma.cl):
                  * a tensor map template (128 bytes), then 2 x 128 bytes a work-group
                  * for its own K and V maps */
                 __global ulong *maps)
{
    FCL_FWD_LOCALS;
#if FCL_HAS(FCL_FEAT_KVCACHE)
    __local int kv_check;
#endif
    __local int nonfinite; /* fcl_group_any's flag: visible after the first tile's barrier */
    FCL_FWD_IDS;
    if (lid == 0)
        nonfinite = -1;
    const fcl_q_block blk = fcl_q_block_of_group(BR, num_bh, num_splits, heads_q, q_per_kv,
                                                 seqlen_q, seqlen_k, cu_q, cu_k, window_left,
                                                 window_right);
    const int bh = blk.bh, b = blk.b, h = blk.h, hk = blk.hk, r0 = blk.r0, rows = blk.rows;
    fcl_seq sq = blk.sq;
    bool valid = true;
#if FCL_HAS(FCL_FEAT_KVCACHE)
    /* seqlen_k is the cache's capacity per sequence; the chunk's keys */
    const int len = cache_lens[b];
    const int check_from = num_splits > 1 ? blk.split * split_keys : 0;
    const int check_to =
        num_splits > 1 ? (int)min((long)check_from + split_keys, (long)seqlen_k) : seqlen_k;
    valid = fcl_kvcache_sequence_ok(len, seqlen_new, seqlen_k, page_table + (long)b * pt_stride,
                                    check_from, check_to, num_pages, &kv_check, lid, WG);
    fcl_sequence_set_keys(&sq, valid ? len + seqlen_new : 0);
#endif
    const fcl_mask mask = sq.mask;
#if FCL_IS_FP8
    /* FP8: Q's and K's descales fold into this head's scale (the score is
     * scale * dq * dk * q.k of the decoded bytes), V's multiplies the
     * output.  One query head per work-group: FP8 plans do not pack. */
#if FCL_PACK > 1
#error "FP8 descales are per query head: no GQA packing"
#endif
    const long bhk = (long)b * (heads_q / q_per_kv) + hk;
    scale *= fcl_optional(descale_q, bh, arrays, FCL_ARRAY_DESCALE_Q, 1.0f) *
             fcl_optional(descale_k, bhk, arrays, FCL_ARRAY_DESCALE_K, 1.0f);
    const float out_scale = fcl_optional(descale_v, bhk, arrays, FCL_ARRAY_DESCALE_V, 1.0f);
#else
    const float out_scale = 1.0f;
#endif
    /* the query positions of the block's rows, [p0, p1) */
    const int p0 = FCL_POS(r0), p1 = rows > 0 ? FCL_POS(r0 + rows - 1) + 1 : p0;

    const fcl_variant_state vs = fcl_variant_state_make(FCL_VARIANT_ARGS(b, h));
    const fcl_score_mods mods = vs.mods;
    const fcl_dropout drop = vs.drop;
    const fcl_blocks blocks = vs.blocks;
    const float units_scale = FCL_EXP_UNITS(scale);
    /* scores (and m) times exp_scale are in the exponent's units */
    const float exp_scale = FCL_MODIFIED_SCORES ? 1.0f : fabs(units_scale);

    fcl_rows q_rows = fcl_rows_strided(q_off + fcl_batch_offset(b, q_sb) + h * q_sh +
                                       sq.q_row0 * q_ss, q_ss);
    q_rows.sh = q_sh;
    fcl_rows k_rows = fcl_rows_strided(k_off + hk * k_sh, k_ss);
    fcl_rows v_rows = fcl_rows_strided(v_off + hk * v_sh, v_ss);
#if FCL_PAGE_SIZE > 0
    k_rows.pages = v_rows.pages = page_table + (long)b * pt_stride;
    k_rows.page_stride = k_sb;
    v_rows.page_stride = v_sb;
#else
    k_rows.base += fcl_batch_offset(b, k_sb) + sq.k_row0 * k_ss;
    v_rows.base += fcl_batch_offset(b, v_sb) + sq.k_row0 * v_ss;
#endif

    FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, !FCL_MODIFIED_SCORES && scale < 0.0f);

    fcl_rowv m[RMV], l[RMV], acc[RMV][DN];
    FCL_UNROLL
    for (int iv = 0; iv < RMV; ++iv) {
        m[iv] = -INFINITY;
        l[iv] = 0.0f;
        FCL_UNROLL
        for (int n = 0; n < DN; ++n) acc[iv][n] = 0.0f;
    }

    /* The key tiles this Q block visits, in order: the next one is known a
     * tile ahead, so a piece can fetch it in the background.  K of the first
     * tile is requested here; each tile begins by waiting for its K (and
     * requesting V), and in the middle, after the softmax, waits for V and
     * requests the next K (FlashAttention-2's overlap of loads and math).
     * With split-KV the keys are this work-group's chunk of them. */
    int key_begin = fcl_key_begin(mask, p0);
    int key_end = rows > 0 ? fcl_key_end(mask, p1) : 0;
    if (num_splits > 1) {
        key_begin = max(key_begin, blk.split * split_keys);
        key_end = min(key_end, (blk.split + 1) * split_keys);
    }
    int c0 = fcl_next_key_tile(blocks, BC, p0, p1, (key_begin / BC) * BC, key_end, sq.seqlen_k);
    FCL_FWD_KEY_STATE;
    if (c0 < key_end) FCL_FWD_PREFETCH_K(k_rows, c0, sq.seqlen_k - c0);
    FCL_FWD_Q_ARRIVED();
    /* whole tiles first, then those on the mask's edge (FCL_FOR_RUNS, common.cl) */
    const int whole_end = min(key_end, fcl_whole_keys_end(mask, p0, p1, c0, BC));
    FCL_FOR_RUNS
    FCL_TILE_LOOP(c0 < (FCL_LAST_RUN ? key_end : whole_end)) {
        const int cols = min(BC, sq.seqlen_k - c0);
        const int next = fcl_next_key_tile(blocks, BC, p0, p1, c0 + BC, key_end, sq.seqlen_k);
        const int cover = fcl_tile_cover(blocks, p0, p1, c0, c0 + cols);
        FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, next < key_end, next, sq.seqlen_k - next,
                           head_dim);

        fcl_rowv s[RMV][RN];
        FCL_FWD_QK(s);

        /* Plain attention keeps the raw q.k: the row max is taken over
         * them and the scale goes into the exponent's fma, as in
         * FlashAttention-2 (one instruction per score fewer; it needs a
         * positive factor, so a negative scale negated Q as it was loaded).
         * Softcap and ALiBi modify the scores first, into the exponent's
         * units. */
#if FCL_MODIFIED_SCORES
        FCL_UNROLL
        for (int i = 0; i < RM; ++i) {
            fcl_score_mods mods_i = mods;
#if FCL_HAS(FCL_FEAT_ALIBI) && FCL_PACK > 1
            /* packed rows belong to different heads.  Read in the loop, not
             * kept in a private array from before it: Intel's CPU runtime
             * (2026.2) gives such an array, read in a loop with barriers,
             * other work-items' values (NOTES.md, "Intel") */
            mods_i.slope = alibi[(long)b * alibi_sb + h + (r0 + FCL_ROW(i)) % FCL_PACK];
#endif
            FCL_UNROLL
            for (int j = 0; j < RN; ++j) {
                float t;
                FCL_S(s, i, j) = FCL_SCORE_UNITS(FCL_S(s, i, j), mods_i, units_scale,
                                                 FCL_POS(r0 + FCL_ROW(i)), c0 + FCL_COL(j),
                                                 mask.diag, &t);
            }
        }
#endif
        FCL_HIDE_MASKED(0, mask, blocks, cover, sq.seqlen_q, r0, rows, c0,
                        FCL_S(s, i_, j_) = -INFINITY,
                        s[iv_][j_] = select(s[iv_][j_], (fcl_rowv)(-INFINITY), hid_));
        fcl_rowv mt[RMV];
        FCL_UNROLL
        for (int iv = 0; iv < RMV; ++iv) {
            mt[iv] = -INFINITY;
            FCL_UNROLL
            for (int j = 0; j < RN; ++j) mt[iv] = fmax(mt[iv], s[iv][j]);
        }
        FCL_ROWS_MAX(mt);
#if FCL_HAS(FCL_FEAT_DROPOUT)
        /* which of this work-item's probabilities dropout keeps (bit i for
         * register row i), one Philox call per four rows when its rows come
         * in aligned fours */
#if RM > 32
#error "dropout keeps one bit per register row in a uint"
#endif
        uint keep[RN];
        FCL_UNROLL
        for (int j = 0; j < RN; ++j) {
            keep[j] = 0;
            const int col = c0 + FCL_COL(j);
#if !FCL_TILE_MMA && RM % 4 == 0
            FCL_UNROLL
            for (int i4 = 0; i4 < RM; i4 += 4)
                keep[j] |= fcl_dropout_keep4(drop, bh, r0 + FCL_ROW(i4), col) << i4;
#else
            FCL_UNROLL
            for (int i = 0; i < RM; ++i)
                keep[j] |= (uint)(fcl_dropout_factor(drop, bh, r0 + FCL_ROW(i), col) != 0.0f) << i;
#endif
        }
#endif

        const fcl_rowv exp_scale_v = exp_scale;
        fcl_rowv alpha[RMV];
        FCL_UNROLL
        for (int iv = 0; iv < RMV; ++iv) {
            const fcl_rowv m_new = fmax(m[iv], mt[iv]);
            /* A row with no visible key so far keeps m = -inf; subtracting 0
             * instead keeps exp at exactly 0 rather than NaN. */
            const fcl_rowv m_use = (m_new == -INFINITY) ? (fcl_rowv)0.0f : m_new * exp_scale_v;
            alpha[iv] = FCL_EXP(fma(m[iv], exp_scale_v, -m_use));
            /* P (and l) times 2^FCL_FWD_P_SHIFT in FCL_EXP's units: a
             * piece whose P V takes P in a narrow type shifts it into its
             * range (tile_nv_wgmma_fp8.cl); O = acc / l is unchanged, the
             * LSE takes the shift back */
            const fcl_rowv m_p = m_use - (fcl_rowv)FCL_FWD_P_SHIFT;
            m[iv] = m_new;
            l[iv] *= alpha[iv];
#if !FCL_FWD_DEFERRED_PV
            FCL_UNROLL
            for (int n = 0; n < DN; ++n) acc[iv][n] *= alpha[iv];
#endif
            FCL_UNROLL
            for (int j = 0; j < RN; ++j) {
                fcl_rowv p = FCL_EXP_P(fma(s[iv][j], exp_scale_v, -m_p), j);
                l[iv] += p; /* the softmax sums what dropout will drop */
#if FCL_HAS(FCL_FEAT_DROPOUT)
                for (int r = 0; r < FCL_RW; ++r)
                    FCL_LANE(p, r) *= (keep[j] >> (iv * FCL_RW + r)) & 1u ? drop.keep_scale : 0.0f;
#endif
                FCL_FWD_SET_P(s, iv, j, p);
            }
        }
#if FCL_FWD_DEFERRED_PV
        /* the rescale after the probabilities: the deferred P V writes acc
         * until here (the other pieces rescale before them, above: this
         * order measured 3-4% slower on the mma.sync forward at head_dim
         * 128 on the H100, NOTES run 34) */
        FCL_FWD_ACC_READY(acc);
        FCL_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_UNROLL
            for (int n = 0; n < DN; ++n) acc[iv][n] *= alpha[iv];
#endif
        FCL_FWD_SHARE_P(s);
        FCL_FWD_TILE_MID(next < key_end, k_rows, next, sq.seqlen_k - next);
        /* a non-finite V element reaches the rows that see its key alone */
#if !FCL_FWD_DEFERRED_PV
        FCL_GUARD_NONFINITE(acc, 0, mask, blocks, cover, sq.seqlen_q, r0, rows, c0, cols,
                            head_dim_v, &nonfinite, c0, FCL_FWD_V_BAD, FCL_FWD_V_CLEAN, 0);
#endif
        FCL_FWD_PV(acc, s);
        c0 = next;
    }
    FCL_FWD_LAST_PV(acc);

    FCL_ROWS_SUM(l);

    /* Each row's output: O and LSE, or this chunk's partial of them
     * (normalised by its own sum, LSE -inf when it saw no key).  A sink
     * joins the row's sum here when the keys are not split (the merge adds
     * it otherwise): LSE becomes log(exp(LSE) + exp(sink)) and O shrinks by
     * exp(old LSE - new LSE). */
    const bool add_sink = (arrays & FCL_ARRAY_SINKS) && num_splits <= 1;
    fcl_rows o_rows = fcl_rows_strided(o_off + fcl_batch_offset(b, o_sb) + h * o_sh +
                                       sq.q_row0 * o_ss, o_ss);
    o_rows.sh = o_sh;
#if FCL_FWD_STAGE_O && FCL_PACK == 1
    const bool staged = num_splits <= 1 && FCL_STAGED_FIT(head_dim_v, o_rows.base | o_ss);
    if (staged)
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
#if FCL_FWD_O_PAIRS
    const bool paired = num_splits <= 1 &&
                        FCL_PAIRS_FIT(head_dim_v, o_rows.base | o_ss | (FCL_PACK > 1 ? o_sh : 0));
#endif
    FCL_FWD_MARK(25);
    FCL_UNROLL
    for (int i = 0; i < RM; ++i) {
        const int row = r0 + FCL_ROW(i);
        if (row >= sq.seqlen_q * FCL_PACK) continue;
        const int head = h + row % FCL_PACK, pos = FCL_POS(row);
        const long at = fcl_lse_index(b, head, heads_q, lse_rows, sq, pos);
        const float l_i = FCL_R(l, i);
        const float m_i = FCL_R(m, i);
        /* (the shift only where a piece sets it: its subtraction keeps
         * compilers from contracting the product and the log's add) */
#if FCL_FWD_P_SHIFT
        const float keys_lse =
            (l_i > 0.0f) ? FCL_NATURAL_UNITS(m_i * exp_scale - FCL_FWD_P_SHIFT) + log(l_i)
                         : -INFINITY;
#else
        const float keys_lse = (l_i > 0.0f) ? FCL_NATURAL_UNITS(m_i * exp_scale) + log(l_i)
                                            : -INFINITY;
#endif
        const float sink = fcl_optional(sinks, head, arrays, FCL_ARRAY_SINKS, -INFINITY);
        const float lse_all = add_sink ? fcl_lse_add(keys_lse, sink) : keys_lse;
        /* (a NaN sink makes even a row without keys NaN, as the merge does) */
        const float inv = (l_i > 0.0f) ? out_scale / l_i * (add_sink ? exp(keys_lse - lse_all) : 1.0f)
                                       : (isnan(lse_all) ? NAN : 0.0f);
        const float lse = lse_all == -INFINITY && num_splits <= 1 ? INFINITY : lse_all;
        const long o_row = fcl_row_offset(o_rows, false, row);
        const float factor = valid ? inv : NAN;
#if FCL_FWD_STAGE_O && FCL_PACK == 1
        if (staged) {
            /* Every column of the tile, with no test a column: the stores
             * below take those under head_dim_v.  A test and branch a
             * column made the wgmma forward's end 3500 cycles a
             * work-group at head_dim 128 on the H200 (NOTES.md, run 48). */
            FCL_UNROLL
            for (int n = 0; n < DN; ++n)
                FCL_FWD_O_STAGE(FCL_ROW(i), FCL_OCOL(n), FCL_S(acc, i, n) * factor);
        } else
#endif
#if FCL_FWD_O_PAIRS
        if (paired) {
            FCL_STORE_ACC_PAIRS(O, o_row, head_dim_v, acc, i, factor);
        } else
#endif
        if (num_splits > 1) {
            FCL_UNROLL
            for (int n = 0; n < DN; ++n) {
                const int col = FCL_OCOL(n);
                if (col < head_dim_v)
                    part_o[((long)blk.split * part_rows + at) * head_dim_v + col] =
                        FCL_S(acc, i, n) * factor;
            }
        } else {
            FCL_STORE_ACC_ROW(O, fcl_store_o, o_row, head_dim_v, acc, i, factor);
        }
        if (FCL_FIRST_IN_ROW) {
            if (num_splits > 1)
                part_lse[(long)blk.split * part_rows + at] = valid ? lse : NAN;
            else if (write_lse)
                LSE[lse_off + at] = valid ? lse : NAN;
        }
    }
    FCL_FWD_MARK(26);
#if FCL_FWD_STAGE_O && FCL_PACK == 1
    if (staged) {
        barrier(CLK_LOCAL_MEM_FENCE);
        FCL_FWD_O_STORE(O, o_rows.base + (long)r0 * o_ss, o_ss, rows, head_dim_v);
    }
#endif
    FCL_FWD_MARK(27);
    FCL_FWD_END();
}

#if FCL_KV_WIDENED
/* The FP8 forward on the wgmma piece's tensor memory accelerator path
 * (common.cl, FCL_KV_WIDENED): the host's first launch widens K's and V's
 * bytes to fp16 (exact: every value of both formats is an fp16 value,
 * infinities and NaNs included) into the context's workspace, where the
 * forward's copies read them as they read fp16 storage.  Element (b, h, s,
 * c) of K (cols = head_dim columns) or V (head_dim_v) goes to
 * ((b * heads + h) * rows + s) * cols + c of Kw or Vw: `batch` entries
 * (1 with packed sequences) of `heads` K/V heads of `rows` rows (seqlen_k,
 * or the packed total).  Work-item i widens 8 values: K's chunks first
 * (k_chunks of them), then V's; the launch may round up past `chunks`.
 * Rows start on multiples of 8 elements (the tensor-core pieces ask it of
 * every layout), so each reads 8 bytes and writes 16. */
__kernel void fcl_forward_widen(__global const fcl_storage *K, long k_off, long k_sb, long k_sh,
                                long k_ss, int k_cols, __global const fcl_storage *V, long v_off,
                                long v_sb, long v_sh, long v_ss, int v_cols, int heads, int rows,
                                long k_chunks, long chunks, __global ushort *Kw,
                                __global ushort *Vw)
{
    const long i = (long)get_global_id(0);
    if (i >= chunks)
        return;
    const bool is_k = i < k_chunks;
    const long j = is_k ? i : i - k_chunks;
    const int cols = is_k ? k_cols : v_cols;
    const long per_row = cols / 8, row = j / per_row; /* row of (b * heads + h) * rows + s */
    const int c = (int)(j - row * per_row) * 8;
    const long bh = row / rows, s = row - bh * rows, b = bh / heads, h = bh - b * heads;
    const long at = is_k ? k_off + b * k_sb + h * k_sh + s * k_ss
                         : v_off + b * v_sb + h * v_sh + s * v_ss;
    const uint4 wide = fcl_load8_h((is_k ? K : V) + at + c);
    *(__global uint4 *)((is_k ? Kw : Vw) + row * cols + c) = wide;
}
#endif

#if FCL_FP8_PRODUCTS
/* FP8 products on the wgmma piece (tile_nv_wgmma_fp8.cl): the host's first
 * launch lays K and V out as the kernel's tiles in the workspace, each a
 * block of 128-byte rows in the 128-byte swizzle (FCL_P8_AT: chunk j of
 * row r at chunk j ^ (r % 8)), zeros past the sequence and past the head's
 * columns: Kt, BC rows a block of (batch, K/V head, key tile); Vt, V^T's
 * 128 rows (V's columns) of BC keys a block, in the same order, the keys
 * of each 16 permuted: V^T's column k = 16 h + 4 t + i holds key 16 h +
 * 8 (i >> 1) + 2 t + (i & 1) (P's registers as wgmma's A registers, see
 * there).  (Q, read once per work-group, the forward copies itself.)
 * Work-group g makes block g: K's (kv_blocks), then V^T's (as many), each
 * row read 8 bytes at a time (rows start on multiples of 8 elements, as
 * the tensor-core pieces ask of every layout); V^T's through __local,
 * V's tile read by rows and written by columns.  Bytes are copied as they
 * are (head_dim is 128). */
#define FCL_PREP8_WG 256
#define FCL_PREP8_LD 136 /* bytes a row of V's tile in __local (8-byte aligned) */
__kernel __attribute__((reqd_work_group_size(FCL_PREP8_WG, 1, 1)))
void fcl_forward_prepare8(__global const fcl_storage *K, long k_off, long k_sb, long k_sh,
                          long k_ss, __global const fcl_storage *V, long v_off, long v_sb,
                          long v_sh, long v_ss, int seqlen_k, int heads_kv, int head_dim_v,
                          long kv_blocks, __global uchar *Kt, __global uchar *Vt)
{
    __local uchar vtile[BC * FCL_PREP8_LD] __attribute__((aligned(16)));
    const long g = (long)get_group_id(0);
    const int lid = (int)get_local_id(0);
    const int nk = (seqlen_k + BC - 1) / BC;
    if (g < kv_blocks) {
        /* a block of K's rows: 8 chunks of 16 head_dim columns a row */
        const long bh = g / nk, b = bh / heads_kv, h = bh % heads_kv;
        const int s0 = (int)(g % nk) * BC;
        __global const uchar *src = K + k_off + b * k_sb + h * k_sh;
        __global uchar *dst = Kt + g * (long)(BC * 128);
        for (int c = lid; c < BC * 8; c += FCL_PREP8_WG) {
            const int r = c >> 3, j = c & 7;
            uint4 x = (uint4)(0u);
            if (s0 + r < seqlen_k) {
                __global const uint2 *p = (__global const uint2 *)(src + (s0 + r) * k_ss + 16 * j);
                x = (uint4)(p[0], p[1]);
            }
            *(__global uint4 *)(dst + FCL_P8_AT(r, 16 * j)) = x;
        }
        return;
    }
    /* a block of V^T: V's BC rows of the tile into __local (8 bytes at a
     * time; zeros past the sequence and past head_dim_v), then V^T's rows
     * (V's columns, neighbouring work-items neighbouring columns), each of
     * 8 chunks of 16 keys in the permuted order */
    const long block = g - kv_blocks;
    const long bh = block / nk, b = bh / heads_kv, h = bh % heads_kv;
    const int key0 = (int)(block % nk) * BC;
    __global const uchar *src = V + v_off + b * v_sb + h * v_sh;
    for (int c = lid; c < BC * 16; c += FCL_PREP8_WG) {
        const int key = c >> 4, col = (c & 15) * 8;
        uint2 x = (uint2)(0u);
        /* head_dim_v: a multiple of 16 on the tensor-core pieces (tensor_cores.c) */
        if (key0 + key < seqlen_k && col < head_dim_v)
            x = *(__global const uint2 *)(src + (key0 + key) * v_ss + col);
        *(__local uint2 *)(vtile + key * FCL_PREP8_LD + col) = x;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    __global uchar *dst = Vt + block * (long)(BC * 128);
    for (int c = lid; c < 128 * 8; c += FCL_PREP8_WG) {
        const int d = c & 127, j = c >> 7;
        uint w[4] = {0u, 0u, 0u, 0u};
        for (int k = 0; k < 16; ++k) {
            const int key = 16 * j + 8 * ((k & 3) >> 1) + 2 * (k >> 2) + (k & 1);
            w[k >> 2] |= (uint)vtile[key * FCL_PREP8_LD + d] << (8 * (k & 3));
        }
        *(__global uint4 *)(dst + FCL_P8_AT(d, 16 * j)) = (uint4)(w[0], w[1], w[2], w[3]);
    }
}
#endif
