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
 *     from descriptors, one m64n64k16 per 64 keys and 16 head_dim columns;
 *   O += P V: A = P from the score registers, repacked to 16 bits as
 *     mma.sync's A fragment (FCL_A_FROM_REGS), B = V's tile from a
 *     descriptor with the transpose bit (V is stored as loaded, rows =
 *     keys: MN-major for the product), one m64n64k16 per 16 keys and 64
 *     head_dim columns.
 * Each product is one wgmma group, waited for before its results are read
 * (no overlap of products and softmax yet, no warp specialisation, no
 * bulk copies: issue 27's later steps). */
#if FCL_WGMMA && defined(FCL_KERNEL_FORWARD)

#define FCL_WG_INDEX (warp >> 2) /* this work-item's warpgroup */

/* Register r of one m64n64 accumulator, the 64 columns from 64 nb of a
 * register tile x[2][...] in the accumulator layout (warpgroup_ptx.cl). */
#define FCL_WG_REG(x, nb, r) x[((r) >> 1) & 1][16 * (nb) + 2 * ((r) >> 2) + ((r) & 1)]

/* x[..][64 nb ..] = OP(d, ...), the 32 registers through d_ (a private
 * array the compiler keeps in registers: constant indices). */
#define FCL_WG_ACCUMULATE(x, nb, CALL)                                  \
    do {                                                                \
        float d_[32];                                                   \
        FCL_UNROLL                                                      \
        for (int r_ = 0; r_ < 32; ++r_) d_[r_] = FCL_WG_REG(x, nb, r_); \
        CALL;                                                           \
        FCL_UNROLL                                                      \
        for (int r_ = 0; r_ < 32; ++r_) FCL_WG_REG(x, nb, r_) = d_[r_]; \
    } while (0)

/* After a product's wait: its results are read from here on. */
#define FCL_WG_KEEP_TILE(x, cols)                                    \
    do {                                                             \
        FCL_UNROLL                                                   \
        for (int i_ = 0; i_ < 2; ++i_)                               \
            FCL_UNROLL                                               \
            for (int j_ = 0; j_ < (cols) / 4; ++j_) FCL_WG_KEEP(x[i_][j_]); \
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
        FCL_UNROLL                                                                         \
        for (int i_ = 0; i_ < 2; ++i_)                                                     \
            FCL_UNROLL                                                                     \
            for (int j_ = 0; j_ < RN; ++j_) s[i_][j_] = 0.0f;                              \
        fcl_wg_fence();                                                                    \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < D_PAD / 16; ++kk_) {                                       \
            const ulong dq_ = FCL_WG_DESC_K(Qh, FCL_WG_INDEX, kk_);                        \
            FCL_UNROLL                                                                     \
            for (int nb_ = 0; nb_ < BC / 64; ++nb_)                                        \
                FCL_WG_ACCUMULATE(s, nb_,                                                  \
                                  fcl_wgmma_ss(Qh, FCL_FWD_KCUR, d_, dq_,                  \
                                               FCL_WG_DESC_K(FCL_FWD_KCUR, nb_, kk_), kk_ > 0)); \
        }                                                                                  \
        fcl_wg_commit_wait();                                                              \
        FCL_WG_KEEP_TILE(s, BC);                                                           \
    } while (0)

/* acc[2][D_PAD / 4] += P V, P = s[2][BC / 4] (probabilities), all of it
 * repacked before the fence: wgmma reads its A registers in the
 * background too. */
#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        uint a_[BC / 16][4];                                                               \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / 16; ++kk_) FCL_A_FROM_REGS(s, 0, kk_, a_[kk_]);       \
        fcl_wg_fence();                                                                    \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / 16; ++kk_)                                            \
            FCL_UNROLL                                                                     \
            for (int nd_ = 0; nd_ < D_PAD / 64; ++nd_)                                     \
                FCL_WG_ACCUMULATE(acc, nd_,                                                \
                                  fcl_wgmma_rs_t(FCL_FWD_VT, d_, a_[kk_],                  \
                                                 FCL_WG_DESC_V(FCL_FWD_VT, kk_, nd_)));    \
        fcl_wg_commit_wait();                                                              \
        FCL_WG_KEEP_TILE(acc, D_PAD);                                                      \
    } while (0)

#endif
