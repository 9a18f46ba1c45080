/* tile_nv_wgmma.cl - the tile piece of the forward and of the backward's
 * two kernels on Hopper's warpgroup MMA (wgmma, sm_90a; the operations and
 * the tile layout: warpgroup_ptx.cl).  Built with FCL_TILE_MMA=1 and
 * FCL_WGMMA=1 (the host's choice: on an NVIDIA sm_90 device the forward
 * unless FLASHCL_WGMMA=0, the backward unless FLASHCL_WGMMA_BACKWARD=0; in
 * the tests, emulated), for fp16/bf16 of strided K/V, head_dim 64 or 128,
 * and the forward of FP8, Q decoded as it is loaded: on the accelerator's
 * path its K and V widened to fp16 by the host's first launch (common.cl,
 * FCL_KV_WIDENED), which the loop then reads as fp16 storage; on the
 * cp.async path their bytes staged by cp.async and decoded to fp16 tiles by
 * the warps.  The backward's piece is at the end of the file.
 *
 * It is tile_nv_mma.cl's forward with its two products replaced: K and V
 * by the tensor memory accelerator (FCL_WG_TMA: one work-item issues a
 * tile's copies, mbarriers tell the warps they have landed) or by
 * tile_nv_mma.cl's cp.async loads (16 bytes a copy), both into wgmma's
 * 128-byte swizzle instead of padded rows; the same register tiles, the
 * same online softmax of flash_fwd.cl.  One or two warpgroups of 64 query rows each (BR = 64 or
 * 128); warp w holds rows 16 w .. 16 w + 15 in mma.sync's accumulator
 * layout, which is also wgmma's (MB = 1: FCL_ROW, FCL_COL and the row
 * reductions of tile_nv_mma.cl serve unchanged):
 *   S = Q K^T: A = the warpgroup's 64 rows of Q, B = K's tile, both K-major
 *     from descriptors, one m64nNk16 per N keys and 16 head_dim columns;
 *   O += P V: A = P from the score registers, repacked to 16 bits as
 *     mma.sync's A fragment (FCL_A_FROM_REGS), B = V's tile from a
 *     descriptor with the transpose bit (V is stored as loaded, rows =
 *     keys: MN-major for the product), one m64nNk16 per 16 keys and N
 *     head_dim columns
 *   (N 128 where the keys or head_dim allow, else 64).
 * A tile's P V runs behind the next tile's Q K^T and during its softmax
 * (the pipelined loop below); no warp specialisation (FlashAttention-3's
 * ping-pong of the warpgroups is a measurement switch, FCL_WG_PINGPONG). */
#if FCL_WGMMA

#define FCL_WG_INDEX (warp >> 2) /* this work-item's warpgroup */
/* wgmma's N over head_dim (O += P V, and dK/dV's products): 128 where it
 * allows, else 64.  One instruction of N 128 does the work of two of 64
 * and reads the A operand once. */
#if D_PAD % 128 == 0
#define FCL_WG_VN 128
#else
#define FCL_WG_VN 64
#endif

#define FCL_WG_CAT_(a, b) a##b
#define FCL_WG_CAT(a, b) FCL_WG_CAT_(a, b)

/* Register r of one m64nN accumulator, the N columns from N nb of a
 * register tile x[2][...] in the accumulator layout (warpgroup_ptx.cl). */
#define FCL_WG_REG(x, n, nb, r) x[((r) >> 1) & 1][(n) / 4 * (nb) + 2 * ((r) >> 2) + ((r) & 1)]

/* The accumulators of one product, as wgmma holds them: blocks of N
 * columns, N / 2 registers each (a private array the compiler keeps in
 * registers: constant indices), copied from and back to the register tile
 * x only before the product's first wgmma and after its wait.  A copy
 * between two wgmmas of a chain (each instruction's accumulators moved in
 * and out of x) makes ptxas inject a warpgroup.arrive before the next one
 * (C7519 in its verbose log), which waits for the tensor cores: the H100
 * ran the chain one instruction at a time, about 120 TFLOP/s a warpgroup
 * (NOTES.md). */
#define FCL_WG_TO_ACC(d, x, n, blocks)                                        \
    do {                                                                      \
        FCL_UNROLL                                                            \
        for (int nb_ = 0; nb_ < (blocks); ++nb_)                              \
            FCL_UNROLL                                                        \
            for (int r_ = 0; r_ < (n) / 2; ++r_) d[nb_][r_] = FCL_WG_REG(x, n, nb_, r_); \
    } while (0)
#define FCL_WG_FROM_ACC(x, d, n, blocks)                                      \
    do {                                                                      \
        FCL_UNROLL                                                            \
        for (int nb_ = 0; nb_ < (blocks); ++nb_)                              \
            FCL_UNROLL                                                        \
            for (int r_ = 0; r_ < (n) / 2; ++r_) FCL_WG_REG(x, n, nb_, r_) = d[nb_][r_]; \
    } while (0)

/* Pins the accumulators d[blocks][n / 2] to this point of the program:
 * after a product's wait, where they are read from (the wait orders
 * nothing the compiler sees), and before its fence, where they are
 * written to (a register write the compiler moved between the fence and a
 * wgmma, or between two wgmmas, makes ptxas inject a warpgroup.arrive
 * there, C7519, which waits for the instructions issued before it; NVIDIA's
 * compiler did so with P's repacking, below, on the H100). */
#define FCL_WG_KEEP_ACC(d, n, blocks)                                          \
    do {                                                                       \
        FCL_UNROLL                                                             \
        for (int nb_ = 0; nb_ < (blocks); ++nb_)                               \
            FCL_UNROLL                                                         \
            for (int r_ = 0; r_ < (n) / 2; ++r_) FCL_WG_KEEP(d[nb_][r_]);      \
    } while (0)

/* Descriptors (warpgroup_ptx.cl): 16 head_dim columns from 16 kk of the 64
 * rows from 64 blk of a K-major tile of `rows` rows (Q, K): the block of
 * those columns, 32 bytes a step of 16 inside it; 16 k's from 16 kk and
 * 64 columns from 64 nd of an MN-major tile of `rows` rows (k = its row:
 * V's tile of keys for P V; dO's and Q's of query rows for dK/dV). */
#define FCL_WG_DESC_K(T, rows, blk, kk)                                                   \
    fcl_wg_desc(T, ((kk) >> 2) * (rows) * 128 + (blk) * 64 * 128 + ((kk) & 3) * 32, 16, \
                FCL_WG_ATOM)
#define FCL_WG_DESC_MN(T, rows, kk, nd) \
    fcl_wg_desc(T, (nd) * (rows) * 128 + (kk) * 2 * FCL_WG_ATOM, (rows) * 128, FCL_WG_ATOM)

/* The two kinds of product every kernel of the piece issues (no fence,
 * commit or wait): the forward's Q K^T and P V, the backward's score
 * products and accumulations.
 * d_[nb][N / 2] = A B^T over D_PAD: A = this warpgroup's 64 rows of TA
 * (arows rows), B = the brows rows of TB, N (64 or 128) columns of them a
 * wgmma. */
#define FCL_WG_ISSUE_ABT(d_, TA, arows, TB, brows, N)                                      \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < D_PAD / 16; ++kk_) {                                       \
            const ulong da_ = FCL_WG_DESC_K(TA, arows, FCL_WG_INDEX, kk_);                 \
            FCL_UNROLL                                                                     \
            for (int nb_ = 0; nb_ < (brows) / (N); ++nb_)                                  \
                FCL_WG_CAT(fcl_wgmma_ss, N)(TA, TB, d_[nb_], da_,                          \
                                            FCL_WG_DESC_K(TB, brows, nb_ * ((N) / 64), kk_), \
                                            kk_ > 0);                                      \
        }                                                                                  \
    } while (0)

/* wacc_[D_PAD / VN][VN / 2] += A T: A = the A fragments a_[k / 16] (16
 * k's each), T = krows rows (k) of head_dim columns, MN-major. */
#define FCL_WG_ISSUE_AB(wacc_, a_, T, krows)                                               \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < (krows) / 16; ++kk_)                                       \
            FCL_UNROLL                                                                     \
            for (int nd_ = 0; nd_ < D_PAD / FCL_WG_VN; ++nd_)                              \
                FCL_WG_CAT(fcl_wgmma_rs_t, FCL_WG_VN)(                                     \
                    T, wacc_[nd_], a_[kk_],                                                \
                    FCL_WG_DESC_MN(T, krows, kk_, nd_ * (FCL_WG_VN / 64)));                \
    } while (0)

#if defined(FCL_KERNEL_FORWARD)

/* wgmma's N for S = Q K^T: 128 where the tile's keys allow, else 64 (with
 * A from shared memory, Q, N 64 reads it twice as often per product). */
#if BC % 128 == 0
#define FCL_WG_QN 128
#else
#define FCL_WG_QN 64
#endif

/* Q by cp.async (tile_nv_mma.cl's FCL_FWD_LOAD_Q), waited for once the
 * first keys are requested, so that its copies overlap the tensor maps'
 * setup and those requests; the barrier also publishes the V tile that
 * tile 0's P V reads (FCL_FWD_KBUF_STATE). */

/* FP8's Q on the accelerator's path (FCL_KV_WIDENED): its bytes by
 * cp.async into the second half of Q's tile (BR x D_PAD bytes), then,
 * once they have arrived, decoded in place into the tile, so that its
 * copies run while the maps are written and the first keys requested, as
 * a 16-bit Q's do (decoded by the loads, each copy waited for its read).
 * A negated Q (a plain load, decoded on the way) is not staged. */
#if FCL_KV_WIDENED
#undef FCL_FWD_LOAD_Q
#undef FCL_FWD_Q_ARRIVED
#define FCL_WG_Q8 ((__local uchar *)(Qh + FCL_H_HALVES(BR) / 2))
#define FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, negate)                                   \
    const bool wg_q_staged_ = !(negate);                                                     \
    if (wg_q_staged_)                                                                        \
        fcl_stage_rows_fp8_async(FCL_WG_Q8, BR, Q, fcl_tile_rows(q_rows, false, r0), false,   \
                                 (rows), D_PAD, lid);                                        \
    else                                                                                     \
        fcl_load_rows_h(Qh, BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows), D_PAD,   \
                        true, lid)
#define FCL_FWD_Q_ARRIVED()                                                                  \
    do {                                                                                     \
        FCL_TILES_ARRIVED();                                                                 \
        if (wg_q_staged_) {                                                                  \
            fcl_unstage_q_fp8_in_place(Qh, FCL_WG_Q8, lid);                                  \
            FCL_TILE_WRITTEN();                                                              \
            barrier(CLK_LOCAL_MEM_FENCE);                                                    \
        }                                                                                    \
    } while (0)
#endif

/* O through Q's tile: tile_nv_mma.cl's FCL_FWD_STAGE_O */

/* ---- the pipelined loop (flash_fwd.cl's FCL_FWD_DEFERRED_PV) -----------
 * FlashAttention-3's intra-warpgroup overlap: tile t starts its Q K^T and
 * then tile t-1's P V as two wgmma groups, waits for the first only, and
 * runs tile t's softmax, meant to overlap P V; the rescale of the
 * accumulators waits for it (FCL_FWD_ACC_READY).  In the SASS that wait
 * lands before the softmax (ptxas moves it up to the wait before it;
 * NOTES.md, run 46, and tools/wgmma_ptx_check.sh): this warpgroup's softmax
 * runs after its P V, beside the other warpgroup's products only.  So a
 * tile reads K of tile t and V of
 * tile t-1: both are double-buffered (tile t's in buffer t % 2), and a
 * tile's start requests K of tile t+1 and V of tile t, which arrive during
 * it.  The hooks below use the names of flash_fwd.cl's loop (acc, c0,
 * cols, cover, mask, ...), as the other load hooks use Q, K and lid. */
#define FCL_FWD_DEFERRED_PV 1

/* The K and V buffers a tile is copied into: FCL_WG_STAGES of each on the
 * tensor memory accelerator's path (2 or 3: copies requested one or two
 * tiles ahead), two on the others.  3 is a measurement build's switch
 * (its plans count two buffers; 224 KiB of __local at head_dim 128):
 * on the H200 it measured 0.96-0.98x alone and 0.95-0.98x with ping-pong
 * (NOTES.md, run 49). */
#ifndef FCL_WG_STAGES
#define FCL_WG_STAGES 2
#endif
#if FCL_WG_TMA && FCL_WG_STAGES == 3
#define FCL_WG_NBUF 3
#define FCL_WG_SLOT(t) ((uint)(t) % 3u)
#elif FCL_WG_TMA && FCL_WG_STAGES != 2
#error "FCL_WG_STAGES is 2 or 3"
#else
#define FCL_WG_NBUF 2
#define FCL_WG_SLOT(t) ((t) & 1)
#endif

#if FCL_WG_TMA
/* the copies' mbarriers (buffer t % NBUF's: K of tile t and V of tile
 * t - 1), the warps' arrivals (fcl_wg_last_arrival), and the work-group's
 * two tensor maps while they are written */
#define FCL_WG_TMA_LOCALS \
    __local ulong wg_bar_[FCL_WG_NBUF]; \
    __local uint wg_done_[FCL_WG_NBUF]; \
    __local ulong wg_stage_[32] __attribute__((aligned(128)));
#else
#define FCL_WG_TMA_LOCALS
#endif

/* ---- ping-pong (FCL_WG_PINGPONG=1, the accelerator's path with two
 * warpgroups): FlashAttention-3's schedule of the two warpgroups' products.
 * A warpgroup issues a tile's wgmma groups only in its turn and passes the
 * turn once they are issued (named barriers 1 and 2, the turn's owner
 * waiting, the other arriving), so the tensor cores run one warpgroup's
 * products while the other computes its softmax.  Warpgroup 1 gives
 * warpgroup 0 the first turn; warpgroup 1 does not pass its last one,
 * so every barrier's arrivals match its waits.  A measurement build's
 * switch: with FCL_WG_PV_FENCE=1 (without it ptxas waits for P V before
 * the softmax, and ping-pong measured 1.00x) it put the warpgroups half a
 * tile apart but measured 0.97-0.99x on the H200 (NOTES.md, run 49). */
#ifndef FCL_WG_PINGPONG
#define FCL_WG_PINGPONG 0
#endif
#if FCL_WG_PINGPONG && FCL_WG_TMA && WG == 256
#define FCL_WG_TURN_WAIT() fcl_wg_named_sync(1 + FCL_WG_INDEX, 256)
#define FCL_WG_TURN_PASS() fcl_wg_named_arrive(2 - FCL_WG_INDEX, 256)
#define FCL_WG_TURN_FIRST()                                                                \
    do {                                                                                   \
        if (FCL_WG_INDEX == 1)                                                             \
            fcl_wg_named_arrive(1, 256);                                                   \
    } while (0)
#define FCL_WG_TURN_LAST()                                                                 \
    do {                                                                                   \
        if (FCL_WG_INDEX == 0)                                                             \
            FCL_WG_TURN_PASS();                                                            \
    } while (0)
#else
#define FCL_WG_TURN_WAIT() (void)0
#define FCL_WG_TURN_PASS() (void)0
#define FCL_WG_TURN_FIRST() (void)0
#define FCL_WG_TURN_LAST() (void)0
#endif

/* ---- timestamps (FCL_WG_STAMPS=1: a measurement build, never a plan's;
 * bench/flashcl-stamps.c reads them) ------------------------------------
 * Lane 0 of each warpgroup's first warp records the GPU's nanosecond timer
 * (fcl_wg_clock) into wg_stamps_[warpgroup][slot]: slot 0 once the loop's
 * state is set up, then for tiles t = 0..6 slot 1 + 4 t before the tile's
 * products are issued, 2 + 4 t once Q K^T is waited for, 3 + 4 t before
 * the wait for P V and 4 + 4 t after it; slot 31 is the multiprocessor's
 * number.  At the kernel's end the work-group writes them over the LSE of
 * its first 128 rows (FCL_FWD_END): row i holds the low (i even) or high
 * (i odd) 32 bits of wg_stamps_[i / 64][(i % 64) / 2], as a float's bits.
 * Unrecorded slots read 0.  FCL_WG_STAMPS=1 leaves out the stamp before
 * P V's wait (slot 3 + 4 t), which, a read of the timer stored to
 * __local, holds that wait after the softmax in the SASS (FCL_WG_PV_ANCHOR):
 * level 1 times the kernel as built by default, level 2 as with that wait
 * held back.  Level 3 is level 2 with seven stamps a tile, for tiles
 * t = 0..2 (slots 1 + 7 t + k): k = 0..3 as above, 4 once P is repacked
 * (the tile's end), 5 at the tile's start once the buffers are requested
 * (the tensor memory accelerator's path and cp.async's), 6 once they have
 * arrived; and at the end, slot 22 after the loop, 23 once the last V has
 * arrived, 24 once the last P V is done, 25, 26 and 27 where flash_fwd.cl
 * marks the output's writing (FCL_FWD_MARK: its start, its end, and the
 * staged tile's stores issued), 30 at the kernel's end. */
#ifndef FCL_WG_STAMPS
#define FCL_WG_STAMPS 0
#endif
#if FCL_WG_STAMPS
#define FCL_WG_STAMP_LOCALS __local ulong wg_stamps_[WG / 128][32];
#define FCL_WG_STAMP(slot)                                                                 \
    do {                                                                                   \
        if ((lid & 127) == 0)                                                              \
            wg_stamps_[FCL_WG_INDEX][slot] = fcl_wg_clock();                               \
    } while (0)
#define FCL_WG_STAMP_EACH (FCL_WG_STAMPS >= 3 ? 7 : 4)  /* stamps a tile */
#define FCL_WG_STAMP_TILES (FCL_WG_STAMPS >= 3 ? 3 : 7) /* tiles stamped */
#define FCL_WG_TILE_STAMP(k)                                                               \
    do {                                                                                   \
        if (wg_tile_ < FCL_WG_STAMP_TILES && ((k) != 2 || FCL_WG_STAMPS >= 2) &&           \
            ((k) < 4 || FCL_WG_STAMPS >= 3))                                               \
            FCL_WG_STAMP(1 + FCL_WG_STAMP_EACH * wg_tile_ + (k));                          \
    } while (0)
#define FCL_WG_LEVEL3_STAMP(slot)                                                          \
    do {                                                                                   \
        if (FCL_WG_STAMPS >= 3)                                                            \
            FCL_WG_STAMP(slot);                                                            \
    } while (0)
#define FCL_FWD_MARK(slot) FCL_WG_LEVEL3_STAMP(slot)
#define FCL_WG_STAMPS_START()                                                              \
    do {                                                                                   \
        for (int i_ = lid; i_ < WG / 128 * 32; i_ += WG)                                   \
            wg_stamps_[i_ / 32][i_ % 32] = 0;                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        FCL_WG_STAMP(0);                                                                   \
        if ((lid & 127) == 0)                                                              \
            wg_stamps_[FCL_WG_INDEX][31] = fcl_wg_smid();                                  \
    } while (0)
#define FCL_FWD_END()                                                                      \
    do {                                                                                   \
        FCL_WG_LEVEL3_STAMP(30);                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        if (lid < 128 && lid < rows && write_lse && num_splits <= 1) {                     \
            const ulong v_ = wg_stamps_[lid / 64 % (WG / 128)][lid % 64 / 2];              \
            LSE[lse_off + fcl_lse_index(b, h, heads_q, lse_rows, sq, FCL_POS(r0 + lid))] =  \
                as_float((uint)((lid & 1) ? v_ >> 32 : v_));                               \
        }                                                                                  \
    } while (0)
#else
#define FCL_WG_STAMP_LOCALS
#define FCL_WG_TILE_STAMP(k) (void)0
#define FCL_WG_LEVEL3_STAMP(slot) (void)0
#define FCL_WG_STAMPS_START() (void)0
#endif

#define FCL_FWD_KV_LOCALS                                                      \
    __local ushort Kh[FCL_WG_NBUF * FCL_H_HALVES(BC)] FCL_WG_TILE_ALIGNED;     \
    __local ushort Vh[FCL_WG_NBUF * FCL_H_HALVES(BC)] FCL_WG_TILE_ALIGNED;     \
    FCL_WG_TMA_LOCALS                                                          \
    FCL_WG_STAMP_LOCALS
#define FCL_WG_BUF(T, t) ((T) + FCL_WG_SLOT(t) * FCL_H_HALVES(BC))
#if FCL_IS_FP8 && !FCL_KV_WIDENED && !FCL_FP8_PRODUCTS
#define FCL_FWD_KCUR Kh /* one K buffer: the other holds the raw bytes (below) */
#else
#define FCL_FWD_KCUR FCL_WG_BUF(Kh, wg_tile_)
#endif
/* the V tile the next P V reads, the previous tile's (also what
 * FCL_FWD_V_BAD / FCL_FWD_V_CLEAN guard, tile_nv_mma.cl) */
#define FCL_FWD_VT FCL_WG_BUF(Vh, wg_tile_ + FCL_WG_NBUF - 1)

/* Keys a group of P's four A registers covers (a k step of P V): 16 as
 * 16-bit values (tile_nv_wgmma_fp8.cl: 32 as E4M3 bytes) */
#define FCL_WG_P_KEYS 16

/* From tile to tile: the tile's number, and of the previous tile whether
 * there is one and it is an edge tile (FCL_EDGE_TILE: its V is guarded),
 * its keys, its P repacked as the A operand, and the accumulators in
 * wgmma's order while its P V runs. */
#define FCL_FWD_KBUF_STATE                                                                 \
    int wg_tile_ = 0, wg_prev_edge_ = 0, wg_prev_c0_ = 0, wg_prev_cols_ = 0;               \
    int wg_prev_cover_ = 0, wg_guarded_ = 0;                                               \
    uint wg_p_[BC / FCL_WG_P_KEYS][4] = {{0}};                                             \
    float wg_o_[D_PAD / FCL_WG_VN][FCL_WG_VN / 2] = {{0.0f}};                              \
    FCL_WG_MAPS_STATE;                                                                     \
    fcl_wg_zero_tile(FCL_WG_BUF(Vh, FCL_WG_NBUF - 1), lid);                                \
    FCL_WG_STAMPS_START();                                                                 \
    FCL_WG_TURN_FIRST()

/* The products run the same way at every tile, the first included: a
 * branch around a wgmma group, or between its issue and its wait, made
 * NVIDIA's compiler copy accumulators there and ptxas wait for the group
 * at once (C7517) and serialise the pipeline (C7513).  So tile 0 also
 * runs a "previous" P V, of P = 0 (wg_p_'s start) and a V buffer zeroed
 * here (published by the first tile's barrier): it adds exact zeros. */
inline void fcl_wg_zero_tile(__local ushort *t, int lid)
{
    for (int e = lid; e < FCL_H_HALVES(BC) / 8; e += WG) *(__local uint4 *)(t + 8 * e) = (uint4)(0u);
}

#if FCL_WG_TMA
/* The tensor memory accelerator (warpgroup_ptx.cl): the work-group's maps
 * of this sequence's K and V rows (keys past its end read as zeros, as
 * the cp.async loads below make them), written at the start.  Buffer
 * t % NBUF's mbarrier counts K of tile t and V of tile t - 1, and tile t
 * waits for phase t / NBUF of it.  Work-item 0 requests the first two
 * tiles' (K of tiles 0 and 1, V of tile 0; with three buffers also K of
 * tile 2 and V of tile 1) before Q is loaded; from then on tile t's start
 * requests K of tile t + 1 and V of tile t (three buffers: K of tile t + 2
 * and V of tile t + 1), into buffers whose last reader was tile t - 1,
 * once every warp is done with them: the last warp to get there issues the
 * copies (fcl_wg_last_arrival), and no warp waits for another (a
 * work-group barrier every tile kept the two warpgroups in step: both at
 * their softmax at once, the tensor cores idle then).  The arrivals are
 * counted per buffer (wg_done_[t % NBUF]): a warp can be up to NBUF tiles
 * ahead of the slowest (the copies it waits for bound it), and one count
 * for all tiles would then take its arrival at tile t + 1 for the last
 * one of tile t, and refill buffers a slower warp still reads. */
#define FCL_WG_TILE_BYTES (FCL_H_HALVES(BC) * 2)
#define FCL_WG_MAPS_STATE                                                                  \
    __global ulong *const wg_maps_ = maps + 16 + 32 * (long)get_group_id(0);               \
    if (lid < FCL_WG_NBUF)                                                                 \
        wg_done_[lid] = 0;                                                                 \
    fcl_wg_maps_make(wg_maps_, maps, wg_stage_, wg_bar_, K, k_rows.base, k_rows.ss, \
                     head_dim, V, v_rows.base, v_rows.ss, head_dim_v, sq.seqlen_k, FCL_WG_NBUF, lid)
/* One work-item: K's tile from key `at` into dst, and V's, counted by
 * mbarrier bar (FCL_WG_TILE_BYTES each) */
#define FCL_WG_COPY_K(dst, at, bar) fcl_wg_tma_tile(dst, wg_maps_, K, at, bar)
#define FCL_WG_COPY_V(dst, at, bar) fcl_wg_tma_tile(dst, wg_maps_ + 16, V, at, bar)
#define FCL_WG_ARRIVED(t) \
    fcl_wg_bar_wait(wg_bar_ + FCL_WG_SLOT(t), ((uint)(t) / FCL_WG_NBUF) & 1)
/* One work-item: K of tile u at key `kat` (when `kmore`) into K buffer u
 * and V of tile u - 1 at key `vat` into V buffer u - 1, both counted by
 * mbarrier u % NBUF, which tile u waits for (or, for the last tile's V,
 * the loop's end). */
#define FCL_WG_REQUEST(u, kmore, kat, vat)                                                 \
    do {                                                                                   \
        __local ulong *bar_ = wg_bar_ + FCL_WG_SLOT(u);                                    \
        fcl_wg_bar_expect(bar_, ((kmore) ? 2 : 1) * FCL_WG_TILE_BYTES);                    \
        if (kmore)                                                                         \
            FCL_WG_COPY_K(FCL_WG_BUF(Kh, u), kat, bar_);                                   \
        FCL_WG_COPY_V(FCL_WG_BUF(Vh, (u) + FCL_WG_NBUF - 1), vat, bar_);                   \
    } while (0)
/* The next key tile after the one at key c (flash_fwd.cl's names) */
#define FCL_WG_TILE_AFTER(c) fcl_next_key_tile(blocks, BC, p0, p1, (c) + BC, key_end, sq.seqlen_k)

/* K of the first tile, then the copies the loop would have requested
 * before it: K of tile 1 and V of tile 0 (and with three buffers K of tile
 * 2 and V of tile 1). */
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols)                                               \
    do {                                                                                   \
        if (lid == 0) {                                                                    \
            const int n1_ = FCL_WG_TILE_AFTER(c0);                                         \
            fcl_wg_bar_expect(wg_bar_, FCL_WG_TILE_BYTES);                                 \
            FCL_WG_COPY_K(FCL_WG_BUF(Kh, 0), c0, wg_bar_);                                 \
            FCL_WG_REQUEST(1, n1_ < key_end, n1_, c0);                                     \
            if (FCL_WG_NBUF == 3 && n1_ < key_end) {                                       \
                const int n2_ = FCL_WG_TILE_AFTER(n1_);                                    \
                FCL_WG_REQUEST(2, n2_ < key_end, n2_, n1_);                                \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* Tile t's requests, once every warp is done with tile t - 1: with two
 * buffers K of tile t + 1 and V of tile t, with three K of tile t + 2 and
 * V of tile t + 1 (none after the last tile's V). */
#if FCL_WG_NBUF == 3
#define FCL_WG_REQUEST_AHEAD(t, more, next, c0)                                            \
    do {                                                                                   \
        if (more) {                                                                        \
            const int n2_ = FCL_WG_TILE_AFTER(next);                                       \
            FCL_WG_REQUEST((t) + 2, n2_ < key_end, n2_, next);                             \
        }                                                                                  \
    } while (0)
#else
#define FCL_WG_REQUEST_AHEAD(t, more, next, c0) FCL_WG_REQUEST((t) + 1, more, next, c0)
#endif

/* The warps are done with tile t - 1's buffers (K of tile t - 1, V of
 * tile t - 2: both products waited for before its rescale): the last of
 * them issues the requests FCL_WG_REQUEST_AHEAD names (two buffers: K of
 * the next tile and V of this one, there).  Then K of this tile and V of
 * the previous one have arrived.  A guard's
 * fcl_group_any in the previous tile (an edge tile's) takes a barrier
 * before the next one's (common.cl: two calls with one flag). */
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim)      \
    do {                                                                                   \
        FCL_WG_GUARDS_APART();                                                             \
        if (wg_tile_ > 0) {                                                                \
            FCL_TILE_WRITTEN();                                                            \
            if (fcl_wg_last_arrival(wg_done_ + FCL_WG_SLOT(wg_tile_), lane))               \
                FCL_WG_REQUEST_AHEAD(wg_tile_, more, next, c0);                            \
        }                                                                                  \
        FCL_WG_TILE_STAMP(5);                                                              \
        FCL_WG_ARRIVED(wg_tile_);                                                          \
        FCL_WG_TILE_STAMP(6);                                                              \
    } while (0)
/* the last tile's V (none requested without a tile) */
#define FCL_WG_LAST_ARRIVED()                                                              \
    do {                                                                                   \
        FCL_WG_GUARDS_APART();                                                             \
        if (wg_tile_ > 0)                                                                  \
            FCL_WG_ARRIVED(wg_tile_);                                                      \
    } while (0)
#define FCL_WG_GUARDS_APART()                                                              \
    do {                                                                                   \
        if (wg_guarded_)                                                                   \
            barrier(CLK_LOCAL_MEM_FENCE);                                                  \
        wg_guarded_ = 0;                                                                   \
    } while (0)
#else
#define FCL_WG_MAPS_STATE (void)0
#if FCL_IS_FP8
/* FP8 on the cp.async path (the accelerator's reads K and V widened by
 * the host, FCL_KV_WIDENED): K's bytes of the next tile and V's of this one are
 * staged by cp.async (tile_nv_mma.cl, fcl_stage_rows_fp8_async) in K's
 * second buffer, half of it each, during the tile's products, and decoded
 * at the next tile's start into the one K buffer and into V's buffer of
 * the tile before, which every warp is done with then (both products of
 * the tile before were waited for before its rescale).  A second barrier
 * a tile publishes the decoded tiles and frees the staging area. */
#define FCL_WG_K8 ((__local uchar *)FCL_WG_BUF(Kh, 1))
#define FCL_WG_V8 (FCL_WG_K8 + BC * D_PAD)
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols)                                                \
    fcl_stage_rows_fp8_async(FCL_WG_K8, BC, K, fcl_tile_rows(k_rows, true, c0), true, (cols), \
                             D_PAD, lid)
/* K of this tile and V of the previous one decoded and published, then K
 * of the next tile and V of this one requested */
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim)      \
    do {                                                                                   \
        FCL_WG_UNSTAGE(1);                                                                 \
        if (more)                                                                          \
            fcl_stage_rows_fp8_async(FCL_WG_K8, BC, K, fcl_tile_rows(k_rows, true, next),  \
                                     true, (next_cols), D_PAD, lid);                       \
        fcl_stage_rows_fp8_async(FCL_WG_V8, BC, V, fcl_tile_rows(v_rows, true, c0), true,  \
                                 (cols), head_dim_v, lid);                                 \
    } while (0)
/* The staged copies have arrived: K's decoded when `k`, V's of the
 * previous tile when there is one; then published. */
#define FCL_WG_UNSTAGE(k)                                                                  \
    do {                                                                                   \
        FCL_TILES_ARRIVED();                                                               \
        if (k)                                                                             \
            fcl_unstage_fp8(Kh, BC, FCL_WG_K8, lid);                                       \
        if (wg_tile_ > 0)                                                                  \
            fcl_unstage_fp8(FCL_FWD_VT, BC, FCL_WG_V8, lid);                               \
        FCL_TILE_WRITTEN();                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    } while (0)
/* the last tile's V (none requested without a tile) */
#define FCL_WG_LAST_ARRIVED() FCL_WG_UNSTAGE(0)
#else
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols) \
    FCL_FWD_LOAD_K_INTO(FCL_WG_BUF(Kh, 0), k_rows, c0, cols, pg_now)

/* K of this tile and V of the previous one have arrived, and every warp is
 * done with the buffers the requests fill: the previous tile's K (its
 * Q K^T was waited for before its softmax) and V of the tile before it
 * (waited for before the previous tile's rescale). */
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim)      \
    do {                                                                                   \
        FCL_WG_TILE_STAMP(5);                                                              \
        FCL_TILES_ARRIVED();                                                               \
        FCL_WG_TILE_STAMP(6);                                                              \
        if (more)                                                                          \
            FCL_FWD_LOAD_K_INTO(FCL_WG_BUF(Kh, wg_tile_ + 1), k_rows, next, next_cols, pg_next); \
        fcl_load_rows_h_async(FCL_WG_BUF(Vh, wg_tile_), BC, V, fcl_tile_rows(v_rows, true, c0), \
                              true, (cols), head_dim_v, lid);                              \
    } while (0)
#define FCL_WG_LAST_ARRIVED() FCL_TILES_ARRIVED()
#endif /* FCL_IS_FP8 */
#endif
#ifndef FCL_WG_GUARDS_APART
#define FCL_WG_GUARDS_APART() (void)0 /* every tile starts with a barrier */
#endif
#define FCL_FWD_TILE_MID(more, k_rows, next, cols) (void)0

/* The previous tile's V, guarded as flash_fwd.cl guards a tile's before
 * its P V (common.cl, "non-finite operands") when that tile was an edge
 * tile, as its own test found (wg_prev_edge_): the test made again here,
 * right before the products' issue, cost some 200 cycles a tile on the
 * H200 in tiles that need no guard (NOTES.md, run 47).  wg_guarded_ says
 * whether the guard took fcl_group_any. */
#define FCL_WG_GUARD_PREV_V()                                                               \
    do {                                                                                    \
        wg_guarded_ = wg_prev_edge_;                                                        \
        FCL_GUARD_NONFINITE_IF(wg_prev_edge_, acc, 0, mask, blocks, wg_prev_cover_,         \
                               sq.seqlen_q, r0, wg_prev_c0_, wg_prev_cols_, head_dim_v,     \
                               &nonfinite, wg_prev_c0_, FCL_FWD_V_BAD, FCL_FWD_V_CLEAN, 0); \
    } while (0)

/* Before the fence that starts the previous tile's P V: its V guarded
 * (when that tile was an edge tile), the accumulators moved into wgmma's
 * order, and they and P pinned there. */
#define FCL_WG_PREPARE_PV()                                                                \
    do {                                                                                   \
        FCL_WG_GUARD_PREV_V();                                                             \
        FCL_WG_TO_ACC(wg_o_, acc, FCL_WG_VN, D_PAD / FCL_WG_VN);                           \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / FCL_WG_P_KEYS; ++kk_)                                 \
            FCL_UNROLL                                                                     \
            for (int i_ = 0; i_ < 4; ++i_) FCL_WG_KEEP_U(wg_p_[kk_][i_]);                  \
        FCL_WG_KEEP_ACC(wg_o_, FCL_WG_VN, D_PAD / FCL_WG_VN);                              \
    } while (0)

/* wg_o_ += P V of the previous tile, one wgmma group (after a fence). */
#define FCL_WG_ISSUE_PV()                                                                  \
    do {                                                                                   \
        FCL_WG_ISSUE_AB(wg_o_, wg_p_, FCL_FWD_VT, BC);                                     \
        fcl_wg_commit();                                                                   \
    } while (0)

/* s[2][BC / 4] = Q K^T over D_PAD, with the previous tile's P V started
 * behind it; returns when Q K^T is done. */
#define FCL_FWD_QK(s)                                                                      \
    do {                                                                                   \
        FCL_WG_PREPARE_PV();                                                               \
        float d_[BC / FCL_WG_QN][FCL_WG_QN / 2];                                           \
        FCL_UNROLL                                                                         \
        for (int nb_ = 0; nb_ < BC / FCL_WG_QN; ++nb_)                                     \
            FCL_UNROLL                                                                     \
            for (int r_ = 0; r_ < FCL_WG_QN / 2; ++r_) d_[nb_][r_] = 0.0f;                 \
        FCL_WG_KEEP_ACC(d_, FCL_WG_QN, BC / FCL_WG_QN);                                    \
        FCL_WG_TILE_STAMP(0);                                                              \
        FCL_WG_TURN_WAIT();                                                                \
        fcl_wg_fence();                                                                    \
        FCL_WG_ISSUE_ABT(d_, Qh, BR, FCL_FWD_KCUR, BC, FCL_WG_QN);                         \
        fcl_wg_commit();                                                                   \
        FCL_WG_ISSUE_PV();                                                                 \
        FCL_WG_TURN_PASS();                                                                \
        fcl_wg_wait1();                                                                    \
        FCL_WG_TILE_STAMP(1);                                                              \
        FCL_WG_KEEP_ACC(d_, FCL_WG_QN, BC / FCL_WG_QN);                                    \
        FCL_WG_FROM_ACC(s, d_, FCL_WG_QN, BC / FCL_WG_QN);                                 \
    } while (0)

/* What holds the wait for P V after the softmax in the SASS, where ptxas
 * would move it up (NOTES.md, run 46): a memory fence (fence.acq_rel.cta,
 * MEMBAR.ALL.CTA; no memory access of this tile needs it) with
 * -DFCL_WG_PV_FENCE=1, a measurement build until the GPU has timed it, or
 * the timestamp before that wait (FCL_WG_STAMPS=2), which holds it too;
 * else nothing, and ptxas puts the wait before the softmax.
 * tools/wgmma_ptx_check.sh counts the exponentials before it. */
#ifndef FCL_WG_PV_FENCE
#define FCL_WG_PV_FENCE 0
#endif
#define FCL_WG_PV_ANCHOR()                                                                 \
    do {                                                                                   \
        FCL_WG_TILE_STAMP(2);                                                              \
        if (FCL_WG_PV_FENCE)                                                               \
            fcl_wg_cta_fence();                                                            \
    } while (0)

/* The previous tile's P V is done: acc holds its sum again. */
#define FCL_FWD_ACC_READY(acc)                                                             \
    do {                                                                                   \
        FCL_WG_PV_ANCHOR();                                                                \
        fcl_wg_wait0();                                                                    \
        FCL_WG_TILE_STAMP(3);                                                              \
        FCL_WG_KEEP_ACC(wg_o_, FCL_WG_VN, D_PAD / FCL_WG_VN);                              \
        FCL_WG_FROM_ACC(acc, wg_o_, FCL_WG_VN, D_PAD / FCL_WG_VN);                         \
    } while (0)

/* P (s, probabilities) kept for the next tile's start, repacked to 16
 * bits as the A operand. */
#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / 16; ++kk_) FCL_A_FROM_REGS(s, 0, kk_, wg_p_[kk_]);    \
        FCL_WG_TILE_DONE();                                                                \
    } while (0)
/* The tile's end, once P is kept: what the next tile's P V needs of it
 * (its guard: whether it is an edge tile, its keys) */
#define FCL_WG_TILE_DONE()                                                                 \
    do {                                                                                   \
        FCL_WG_TILE_STAMP(4);                                                              \
        wg_prev_edge_ = FCL_EDGE_TILE(mask, cover, r0, rows, c0);                          \
        wg_prev_c0_ = c0;                                                                  \
        wg_prev_cols_ = cols;                                                              \
        wg_prev_cover_ = cover;                                                            \
        ++wg_tile_;                                                                        \
    } while (0)

/* The last tile's P V, once its V has arrived (with no tile at all, the
 * zero product of tile 0's). */
#define FCL_FWD_LAST_PV(acc)                                                               \
    do {                                                                                   \
        FCL_WG_LEVEL3_STAMP(22);                                                           \
        FCL_WG_LAST_ARRIVED();                                                             \
        FCL_WG_LEVEL3_STAMP(23);                                                           \
        FCL_WG_PREPARE_PV();                                                               \
        FCL_WG_TURN_WAIT();                                                                \
        fcl_wg_fence();                                                                    \
        FCL_WG_ISSUE_PV();                                                                 \
        FCL_WG_TURN_LAST();                                                                \
        FCL_FWD_ACC_READY(acc);                                                            \
        FCL_WG_LEVEL3_STAMP(24);                                                           \
    } while (0)

#else /* the backward's kernels */

/* ---- the backward (flash_bwd.cl): dK/dV, and dQ ---------------------------
 * tile_nv_mma.cl's pieces at FCL_WD = 1 (its loads, buffers, guards and
 * register tiles: warps own 16 rows each, so warpgroup g owns rows 64 g ..
 * 64 g + 63 of the kernel's stationary block, 64 a warpgroup) with their
 * products on wgmma, the tiles in the 128-byte swizzle.  Each kernel's
 * two score products (K-major A and B over head_dim, N = the streamed
 * block's rows, at most 128 a wgmma) run as one wgmma group and are waited
 * for at once; its one or two accumulating products (A = dS, or P, from
 * the score registers repacked to 16 bits, as the forward's P; B = the
 * streamed tile MN-major, k = its row) as another, waited for before the
 * next tile's loads reuse the buffers:
 *   dK/dV (keys stationary): S^T = K Q^T, dP^T = V dO^T, then
 *     dV += P^T dO, dK += dS^T Q;
 *   dQ (query rows stationary): S = Q K^T, dP = dO V^T, then dQ += dS K.
 * No pipelining across tiles yet (issue 27's next step for the
 * backward). */

/* x = TA TB^T and y = TY TYB^T (when want_y) as one group, waited for: x,
 * y register tiles [2][brows / 4] (flash_bwd.cl's), through wgmma's
 * accumulator order. */
#define FCL_WG_TWO_SCORES(x, TA, TB, y, TY, TYB, arows, brows, N, want_y)                  \
    do {                                                                                   \
        float dx_[(brows) / (N)][(N) / 2], dy_[(brows) / (N)][(N) / 2];                    \
        FCL_UNROLL                                                                         \
        for (int nb_ = 0; nb_ < (brows) / (N); ++nb_)                                      \
            FCL_UNROLL                                                                     \
            for (int r_ = 0; r_ < (N) / 2; ++r_) dx_[nb_][r_] = dy_[nb_][r_] = 0.0f;       \
        FCL_WG_KEEP_ACC(dx_, N, (brows) / (N));                                            \
        FCL_WG_KEEP_ACC(dy_, N, (brows) / (N));                                            \
        fcl_wg_fence();                                                                    \
        FCL_WG_ISSUE_ABT(dx_, TA, arows, TB, brows, N);                                    \
        if (want_y)                                                                        \
            FCL_WG_ISSUE_ABT(dy_, TY, arows, TYB, brows, N);                               \
        fcl_wg_commit();                                                                   \
        fcl_wg_wait0();                                                                    \
        FCL_WG_KEEP_ACC(dx_, N, (brows) / (N));                                            \
        FCL_WG_KEEP_ACC(dy_, N, (brows) / (N));                                            \
        FCL_WG_FROM_ACC(x, dx_, N, (brows) / (N));                                         \
        if (want_y)                                                                        \
            FCL_WG_FROM_ACC(y, dy_, N, (brows) / (N));                                     \
    } while (0)

/* acc += x T (and acc2 += x2 T2 when two), x, x2 register tiles of krows
 * columns, acc, acc2 of D_PAD columns: one group, waited for. */
#define FCL_WG_ACCUMULATE(acc, x, T, acc2, x2, T2, krows, two)                            \
    do {                                                                                   \
        uint a1_[(krows) / 16][4], a2_[(krows) / 16][4];                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < (krows) / 16; ++kk_) {                                     \
            FCL_A_FROM_REGS(x, 0, kk_, a1_[kk_]);                                          \
            if (two)                                                                       \
                FCL_A_FROM_REGS(x2, 0, kk_, a2_[kk_]);                                     \
        }                                                                                  \
        float w1_[D_PAD / FCL_WG_VN][FCL_WG_VN / 2], w2_[D_PAD / FCL_WG_VN][FCL_WG_VN / 2]; \
        FCL_WG_TO_ACC(w1_, acc, FCL_WG_VN, D_PAD / FCL_WG_VN);                             \
        if (two)                                                                           \
            FCL_WG_TO_ACC(w2_, acc2, FCL_WG_VN, D_PAD / FCL_WG_VN);                        \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < (krows) / 16; ++kk_)                                       \
            FCL_UNROLL                                                                     \
            for (int i_ = 0; i_ < 4; ++i_) {                                               \
                FCL_WG_KEEP_U(a1_[kk_][i_]);                                               \
                if (two)                                                                   \
                    FCL_WG_KEEP_U(a2_[kk_][i_]);                                           \
            }                                                                              \
        FCL_WG_KEEP_ACC(w1_, FCL_WG_VN, D_PAD / FCL_WG_VN);                                \
        if (two)                                                                           \
            FCL_WG_KEEP_ACC(w2_, FCL_WG_VN, D_PAD / FCL_WG_VN);                            \
        fcl_wg_fence();                                                                    \
        FCL_WG_ISSUE_AB(w1_, a1_, T, krows);                                               \
        if (two)                                                                           \
            FCL_WG_ISSUE_AB(w2_, a2_, T2, krows);                                          \
        fcl_wg_commit();                                                                   \
        fcl_wg_wait0();                                                                    \
        FCL_WG_KEEP_ACC(w1_, FCL_WG_VN, D_PAD / FCL_WG_VN);                                \
        FCL_WG_FROM_ACC(acc, w1_, FCL_WG_VN, D_PAD / FCL_WG_VN);                           \
        if (two) {                                                                         \
            FCL_WG_KEEP_ACC(w2_, FCL_WG_VN, D_PAD / FCL_WG_VN);                            \
            FCL_WG_FROM_ACC(acc2, w2_, FCL_WG_VN, D_PAD / FCL_WG_VN);                      \
        }                                                                                  \
    } while (0)

#if FCL_WG_TMA
/* The streamed tiles by the tensor memory accelerator, as the forward's K
 * and V (plan_wgmma.c, fcl_uses_wgmma_backward_tma): dK/dV's Q and dO
 * blocks, dQ's K and V tiles, two of each (buf 0 and 1).  The work-group
 * maps the two tensors' rows of its sequence (rows past it read as zeros,
 * as the cp.async loads make them), boxes of FCL_WG_BOX_ROWS rows (common.cl):
 * `pairs` pairs of maps, pair g of the rows a_step (b_step) elements past
 * pair 0's (dK/dV's query heads sharing a K/V head), 32 ulongs a pair;
 * work-item 0 requests the streamed tile at sequence row `at` of pair g
 * into buffer buf, counted by that buffer's mbarrier, whose n / 2-th phase
 * the n-th tile (n from 0) waits for.  The stationary tiles still come by cp.async,
 * waited for with the first streamed one.  The barrier after the wait
 * stays: it tells that every warp is done with the other buffer, which the
 * next request refills. */
#define FCL_WG_STREAM_LOCALS                  \
    __local ulong wg_bar_[2];                 \
    __local ulong wg_stage_[32] __attribute__((aligned(128)));
#define FCL_BWD_STREAM_LOCALS FCL_WG_STREAM_LOCALS /* tile_nv_mma.cl's locals */
#define FCL_WG_STREAM_MAPS(pairs, a_step, b_step, A, a_seq, a_ss, a_cols, B, b_seq, b_ss, \
                           b_cols, rows)                                                   \
    __global ulong *const wg_maps_ = maps + 16 + 32 * (long)(pairs) * get_group_id(0);     \
    for (int g_ = 0; g_ < (pairs); ++g_)                                                   \
    fcl_wg_maps_make(wg_maps_ + 32 * g_, maps, wg_stage_, wg_bar_, A, (a_seq) + g_ * (a_step), \
                     a_ss, a_cols, B, (b_seq) + g_ * (b_step), b_ss, b_cols, rows,         \
                     g_ == 0 ? 2 : 0, lid)
#define FCL_WG_STREAM_REQUEST(TA, A, TB, B, at, buf, g)                                    \
    do {                                                                                   \
        if (lid == 0) {                                                                    \
            __local ulong *bar_ = wg_bar_ + (buf);                                         \
            __global const ulong *map_ = wg_maps_ + 32 * (g);                              \
            fcl_wg_bar_expect(bar_, 2 * FCL_H_HALVES(FCL_WG_BOX_ROWS) * 2);                \
            fcl_wg_tma_tile(FCL_BUF(TA, FCL_WG_BOX_ROWS, buf), map_, A, (at), bar_);       \
            fcl_wg_tma_tile(FCL_BUF(TB, FCL_WG_BOX_ROWS, buf), map_ + 16, B, (at), bar_);  \
        }                                                                                  \
    } while (0)
#define FCL_WG_STREAM_ARRIVED(buf, n)                                                      \
    do {                                                                                   \
        fcl_cp_async_wait_all(); /* the stationary tiles, before the first */              \
        fcl_wg_bar_wait(wg_bar_ + (buf), ((n) >> 1) & 1);                                  \
        FCL_TILE_WRITTEN();                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    } while (0)
#endif

/* the score products' N: the streamed block's rows, 128 at most a wgmma */
#if defined(FCL_KERNEL_DKDV)
#define FCL_WG_STREAMED BR
#else
#define FCL_WG_STREAMED BC
#endif
#if FCL_WG_STREAMED % 128 == 0
#define FCL_WG_SN 128
#else
#define FCL_WG_SN 64
#endif

#if defined(FCL_KERNEL_DKDV)
/* st = S^T and (for dK) dpt = dP^T of this Q block: FCL_DKDV_DPT then has
 * nothing left to do (flash_bwd.cl names dpt). */
#define FCL_DKDV_ST(st, buf)                                                                \
    FCL_WG_TWO_SCORES(st, Kh, FCL_BUF(Qh, BR, buf), dpt, Vh, FCL_BUF(dOh, BR, buf), BC, BR, \
                      FCL_WG_SN, FCL_WANT_DK)
#define FCL_DKDV_DPT(dpt, buf) (void)0
#define FCL_DKDV_ACC(dk, dv, st, dpt, buf)                                                 \
    FCL_WG_ACCUMULATE(dv, st, FCL_BUF(dOh, BR, buf), dk, dpt, FCL_BUF(Qh, BR, buf), BR, 1)

#if FCL_WG_TMA
/* Q's and dO's blocks by the tensor memory accelerator (FCL_WG_STREAM_*,
 * above): a pair of maps of one query head's rows, or with FCL_WG_TMA 2
 * (GQA, plan_wgmma.c) one for each of the q_per_kv query heads sharing the
 * K/V head, the one of query head g (its place among them) for its blocks;
 * with one, MHA's code is that of a map pair alone */
#if FCL_WG_TMA == 2
#define FCL_DKDV_MAP_HEADS q_per_kv
#define FCL_DKDV_MAP_PAIR(g) (g)
#else
#define FCL_DKDV_MAP_HEADS 1
#define FCL_DKDV_MAP_PAIR(g) 0
#endif
#define FCL_DKDV_MAPS(q_seq0, do_seq0)                                                     \
    FCL_WG_STREAM_MAPS(FCL_DKDV_MAP_HEADS, q_sh, do_sh, Q, (q_seq0), q_ss, head_dim, dO,    \
                       (do_seq0), do_ss, head_dim_v, sq.seqlen_q)
#undef FCL_DKDV_PREFETCH_Q_DO
#define FCL_DKDV_PREFETCH_Q_DO(q_base, q_ss, do_base, do_ss, rows, buf, r0, g) \
    FCL_WG_STREAM_REQUEST(Qh, Q, dOh, dO, (r0), (buf), FCL_DKDV_MAP_PAIR(g))
#undef FCL_DKDV_BLOCK_BEGIN
#define FCL_DKDV_BLOCK_BEGIN(q_base, q_ss, do_base, do_ss, rows, head_dim, buf, n) \
    FCL_WG_STREAM_ARRIVED((buf), (n))
#endif

#if FCL_FUSED_DQ
/* dQ in the dK/dV kernel (FCL_FUSED_DQ, flash_bwd.cl; staged and added by
 * tile_nv_mma.cl's shared part): the Q block's share dS K of this key
 * block as one wgmma group.  dS^T leaves the registers (dpt) for __local
 * in the 128-byte swizzle, rows = keys and 64-column blocks of query rows
 * (FCL_DQ_DS_AT), which is dS MN-major: A = dS (m = query row, k = key)
 * through the transpose bit, B = K's tile MN-major (k = key, n = head_dim),
 * as V in the forward's P V.  The warpgroups split the share: with as many
 * 64-row blocks of query rows as warpgroups or more, warpgroup g takes
 * FCL_DQ_WMB of them and all of head_dim; with one block and two
 * warpgroups, the block and half of head_dim each (64 columns at least:
 * the plan takes no tile that would need fewer, plan_wgmma.c). */
#define FCL_DQ_MBLK (BR / 64)
#define FCL_DQ_WGS (BC / 64)
#if FCL_DQ_MBLK >= FCL_DQ_WGS
#define FCL_DQ_WMB (FCL_DQ_MBLK / FCL_DQ_WGS)
#define FCL_DQ_WN D_PAD
#define FCL_DQ_M0 (FCL_WG_INDEX * FCL_DQ_WMB)
#define FCL_DQ_C0 0
#else
#define FCL_DQ_WMB 1
#define FCL_DQ_WN (D_PAD / FCL_DQ_WGS)
#define FCL_DQ_M0 0
#define FCL_DQ_C0 (FCL_WG_INDEX * FCL_DQ_WN)
#endif
/* the share's operation, by its N (FCL_DQ_WN is an expression) */
#if FCL_DQ_WN == 64
#define FCL_DQ_SS_TT fcl_wgmma_ss_tt64
#elif FCL_DQ_WN == 128
#define FCL_DQ_SS_TT fcl_wgmma_ss_tt128
#else
#error "the wgmma piece's fused dQ: 64 or 128 head_dim columns a warpgroup"
#endif
#define FCL_DQ_RM (2 * FCL_DQ_WMB)
#define FCL_DQ_DN (FCL_DQ_WN / 4)
/* register (i, n) of the share: its query row and head_dim column */
#define FCL_DQ_ROW(i) ((FCL_DQ_M0 + ((i) >> 1)) * 64 + 16 * (warp & 3) + grp + 8 * ((i) & 1))
#define FCL_DQ_COL(n) (FCL_DQ_C0 + 8 * ((n) >> 1) + 2 * tig + ((n) & 1))
#define FCL_DQ_DS_TILE dSw
#define FCL_DQ_DS_LOCAL __local ushort dSw[BC * BR] FCL_WG_TILE_ALIGNED;
#define FCL_DQ_DS_PTR(T, r, c, unused) ((T) + FCL_DQ_DS_AT(r, c))
#define FCL_DKDV_DQ_SHARE(dqs, dpt)                                                          \
    do {                                                                                     \
        FCL_SHARE_TILE_AT(dSw, dpt, 4 * RN, FCL_DQ_DS_PTR, 0);                               \
        fcl_wg_proxy_fence();                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                        \
        float dw_[FCL_DQ_WMB][FCL_DQ_WN / 2];                                                \
        FCL_UNROLL                                                                           \
        for (int mb_ = 0; mb_ < FCL_DQ_WMB; ++mb_)                                           \
            FCL_UNROLL                                                                       \
            for (int r_ = 0; r_ < FCL_DQ_WN / 2; ++r_) dw_[mb_][r_] = 0.0f;                  \
        FCL_WG_KEEP_ACC(dw_, FCL_DQ_WN, FCL_DQ_WMB);                                         \
        fcl_wg_fence();                                                                      \
        FCL_UNROLL                                                                           \
        for (int mb_ = 0; mb_ < FCL_DQ_WMB; ++mb_)                                           \
            FCL_UNROLL                                                                       \
            for (int kk_ = 0; kk_ < BC / 16; ++kk_)                                          \
                FCL_DQ_SS_TT(dSw, Kh, dw_[mb_],                                              \
                             FCL_WG_DESC_MN(dSw, BC, kk_, FCL_DQ_M0 + mb_),                  \
                             FCL_WG_DESC_MN(Kh, BC, kk_, FCL_DQ_C0 / 64), kk_ > 0);          \
        fcl_wg_commit();                                                                     \
        fcl_wg_wait0();                                                                      \
        FCL_WG_KEEP_ACC(dw_, FCL_DQ_WN, FCL_DQ_WMB);                                         \
        FCL_UNROLL                                                                           \
        for (int mb_ = 0; mb_ < FCL_DQ_WMB; ++mb_)                                           \
            FCL_UNROLL                                                                       \
            for (int r_ = 0; r_ < FCL_DQ_WN / 2; ++r_)                                       \
                FCL_WG_REG((dqs + 2 * mb_), FCL_DQ_WN, 0, r_) = dw_[mb_][r_];                \
    } while (0)
#endif
#else
/* s = S and dp = dP of this key tile (FCL_DQ_DP: nothing left to do) */
#if FCL_WG_TMA
/* K's and V's tiles by the tensor memory accelerator (the maps are of the
 * K/V head's rows; FCL_WG_STREAM_*, above) */
#define FCL_DQ_MAPS(k_seq, v_seq)                                                          \
    FCL_WG_STREAM_MAPS(1, 0, 0, K, (k_seq), k_ss, head_dim, V, (v_seq), v_ss, head_dim_v,   \
                       sq.seqlen_k)
#undef FCL_DQ_PREFETCH_KV
#define FCL_DQ_PREFETCH_KV(k_base, k_ss, v_base, v_ss, cols, buf, c0) \
    FCL_WG_STREAM_REQUEST(Kh, K, Vh, V, (c0), (buf), 0)
#undef FCL_DQ_TILE_BEGIN
#define FCL_DQ_TILE_BEGIN(k_base, k_ss, v_base, v_ss, cols, head_dim, buf, n) \
    FCL_WG_STREAM_ARRIVED((buf), (n))
#endif
#define FCL_DQ_S(s, buf)                                                                    \
    FCL_WG_TWO_SCORES(s, Qh, FCL_BUF(Kh, BC, buf), dp, dOh, FCL_BUF(Vh, BC, buf), BR, BC,   \
                      FCL_WG_SN, 1)
#define FCL_DQ_DP(dp, buf) (void)0
#define FCL_DQ_ACC(acc, s, buf) \
    FCL_WG_ACCUMULATE(acc, s, FCL_BUF(Kh, BC, buf), acc, s, FCL_BUF(Kh, BC, buf), BC, 0)
#endif

#endif /* the kernels */
#endif
