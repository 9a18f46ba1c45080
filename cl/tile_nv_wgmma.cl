/* tile_nv_wgmma.cl - the forward's tile piece on Hopper's warpgroup MMA
 * (wgmma, sm_90a; the operations and the tile layout: warpgroup_ptx.cl).
 * Built with FCL_TILE_MMA=1 and FCL_WGMMA=1 (the host's opt-in:
 * FLASHCL_WGMMA=1 on an NVIDIA sm_90 device; in the tests, emulated), for
 * fp16/bf16 forwards of strided K/V, head_dim 64 or 128.
 *
 * It is tile_nv_mma.cl's forward with its two products replaced: the same
 * loads (cp.async, 16 bytes a copy, into wgmma's core-matrix layout instead
 * of padded rows), the same register tiles, the same online softmax of
 * flash_fwd.cl.  One or two warpgroups of 64 query rows each (BR = 64 or
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
 * Each product is one wgmma group, waited for before its results are read
 * (no overlap of products and softmax yet, no warp specialisation, no
 * bulk copies: issue 27's later steps). */
#if FCL_WGMMA && defined(FCL_KERNEL_FORWARD)

#define FCL_WG_INDEX (warp >> 2) /* this work-item's warpgroup */

/* wgmma's N for each product: 128 where the tile's keys (S = Q K^T) or
 * head_dim (O += P V) allow, else 64.  One instruction of N 128 does the
 * work of two of 64 and reads the A operand once: with A from shared
 * memory (Q for S) N 64 reads it twice as often per product. */
#if BC % 128 == 0
#define FCL_WG_QN 128
#else
#define FCL_WG_QN 64
#endif
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

/* Descriptors: 16 head_dim columns from 16 kk of the 64 rows from 64 blk
 * of a K-major tile (Q, K); 16 keys from 16 kk and 64 columns from 64 nd
 * of V's tile, MN-major. */
#define FCL_WG_DESC_K(T, blk, kk) \
    fcl_wg_desc(T, (blk) * 8 * FCL_WG_ROWS8 + (kk) * 2 * FCL_WG_COLS8, FCL_WG_COLS8, FCL_WG_ROWS8)
#define FCL_WG_DESC_V(T, kk, nd) \
    fcl_wg_desc(T, (kk) * 2 * FCL_WG_ROWS8 + (nd) * 8 * FCL_WG_COLS8, FCL_WG_ROWS8, FCL_WG_COLS8)

/* s[2][BC / 4] = Q K^T over D_PAD. */
#define FCL_FWD_QK(s)                                                                      \
    do {                                                                                   \
        float d_[BC / FCL_WG_QN][FCL_WG_QN / 2];                                           \
        FCL_UNROLL                                                                         \
        for (int nb_ = 0; nb_ < BC / FCL_WG_QN; ++nb_)                                     \
            FCL_UNROLL                                                                     \
            for (int r_ = 0; r_ < FCL_WG_QN / 2; ++r_) d_[nb_][r_] = 0.0f;                 \
        FCL_WG_KEEP_ACC(d_, FCL_WG_QN, BC / FCL_WG_QN);                                    \
        fcl_wg_fence();                                                                    \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < D_PAD / 16; ++kk_) {                                       \
            const ulong dq_ = FCL_WG_DESC_K(Qh, FCL_WG_INDEX, kk_);                        \
            FCL_UNROLL                                                                     \
            for (int nb_ = 0; nb_ < BC / FCL_WG_QN; ++nb_)                                 \
                FCL_WG_CAT(fcl_wgmma_ss, FCL_WG_QN)(                                       \
                    Qh, FCL_FWD_KCUR, d_[nb_], dq_,                                        \
                    FCL_WG_DESC_K(FCL_FWD_KCUR, nb_ * (FCL_WG_QN / 64), kk_), kk_ > 0);    \
        }                                                                                  \
        fcl_wg_commit_wait();                                                              \
        FCL_WG_KEEP_ACC(d_, FCL_WG_QN, BC / FCL_WG_QN);                                    \
        FCL_WG_FROM_ACC(s, d_, FCL_WG_QN, BC / FCL_WG_QN);                                 \
    } while (0)

/* acc[2][D_PAD / 4] += P V, P = s[2][BC / 4] (probabilities), all of it
 * repacked, and pinned, before the fence: wgmma reads its A registers in
 * the background too. */
#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        uint a_[BC / 16][4];                                                               \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / 16; ++kk_) {                                          \
            FCL_A_FROM_REGS(s, 0, kk_, a_[kk_]);                                           \
            FCL_UNROLL                                                                     \
            for (int i_ = 0; i_ < 4; ++i_) FCL_WG_KEEP_U(a_[kk_][i_]);                     \
        }                                                                                  \
        float d_[D_PAD / FCL_WG_VN][FCL_WG_VN / 2];                                        \
        FCL_WG_TO_ACC(d_, acc, FCL_WG_VN, D_PAD / FCL_WG_VN);                              \
        FCL_WG_KEEP_ACC(d_, FCL_WG_VN, D_PAD / FCL_WG_VN);                                 \
        fcl_wg_fence();                                                                    \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / 16; ++kk_)                                            \
            FCL_UNROLL                                                                     \
            for (int nd_ = 0; nd_ < D_PAD / FCL_WG_VN; ++nd_)                              \
                FCL_WG_CAT(fcl_wgmma_rs_t, FCL_WG_VN)(                                     \
                    FCL_FWD_VT, d_[nd_], a_[kk_],                                          \
                    FCL_WG_DESC_V(FCL_FWD_VT, kk_, nd_ * (FCL_WG_VN / 64)));               \
        fcl_wg_commit_wait();                                                              \
        FCL_WG_KEEP_ACC(d_, FCL_WG_VN, D_PAD / FCL_WG_VN);                                 \
        FCL_WG_FROM_ACC(acc, d_, FCL_WG_VN, D_PAD / FCL_WG_VN);                            \
    } while (0)

#endif
