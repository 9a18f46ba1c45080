/* tile_nv_wgmma_fp8.cl - FP8 products on the wgmma piece's forward
 * (FCL_FP8_PRODUCTS=1: E4M3 storage, head_dim 128, 128 keys a tile, the
 * tensor memory accelerator's path, two buffers; the host's choice where
 * FLASHCL_FP8_PRODUCTS=1 asks, include/flashcl.h).  tile_nv_wgmma.cl's
 * forward with its tiles kept as bytes and both products on E4M3 wgmma
 * (m64n128k32, warpgroup_ptx.cl), so the tensor cores do half the work of
 * the fp16 products and the tiles are half the bytes:
 *   S = Q K^T: A = Q's bytes, B = K's, both K-major (a row: 128 bytes of
 *     head_dim), four wgmmas of 32 head_dim columns;
 *   O += P V: A = P from the score registers, times 2^8 (FCL_FWD_P_SHIFT,
 *     flash_fwd.cl) and rounded to E4M3 (fcl_e4m3x4); B = V^T's bytes,
 *     K-major (a row: one head_dim column's 128 keys), four wgmmas of 32
 *     keys.
 * What changes in the results: the scores carry the FP8 tensor cores'
 * accumulation error, and P is rounded to E4M3 (3 mantissa bits) for P V;
 * the header states the bound (fcl_attention_forward).  P's 2^8 keeps
 * probabilities down to 2^-17 of the row's largest in E4M3's range
 * (its subnormals start at 2^-9 before the scaling): O = acc / l is
 * unchanged, l being summed from the same scaled P, and the LSE takes the
 * 2^8 back.
 *
 * Tiles.  The host's first launch (flash_fwd.cl, fcl_forward_prepare8)
 * writes K and V^T into the workspace as the tiles the kernel holds:
 * each a contiguous block of 128-byte rows in the 128-byte swizzle
 * (warpgroup_ptx.cl: chunk j of row r at chunk j ^ (r % 8)), zeros past
 * the sequence and past head_dim, K's BC rows and V^T's 128 rows
 * (head_dim columns) a block of (batch, K/V head, key tile).  So each
 * tile comes in one bulk copy (cp.async.bulk, fcl_wg_bulk) signalled
 * through the mbarriers of tile_nv_wgmma.cl's accelerator path; no tensor
 * maps.  Q, read once per work-group, comes from the caller's array
 * itself by cp.async, 8 bytes a copy into the swizzled tile (its rows
 * start on multiples of 8 bytes, as every tensor-core layout's), before
 * K's first tiles are requested.
 *
 * V^T's keys.  A lane's score registers hold, for its rows g and g + 8,
 * keys 8 j + 2 t and 8 j + 2 t + 1 of each 8 (j = 0..3 in 32 keys); the
 * k32 A fragment wants k = 4 t .. 4 t + 3 in register 0 and 16 + 4 t ..
 * 16 + 4 t + 3 in register 2.  So V^T's column k = 16 h + 4 t + i (h, t,
 * i in 0..1, 0..3, 0..3) holds key 16 h + 8 (i >> 1) + 2 t + (i & 1) of
 * the tile, a permutation inside each 16 keys, and P's registers become A
 * registers as they are (FCL_FWD_PV). */
#if FCL_WGMMA && FCL_FP8_PRODUCTS && defined(FCL_KERNEL_FORWARD)
#if BC != 128 || D_PAD != 128 || !FCL_WG_TMA || FCL_DTYPE != 3 || FCL_WG_NBUF != 2
#error "FP8 products: E4M3, head_dim 128, 128-key tiles, the accelerator's path, 2 buffers"
#endif

#define FCL_FWD_P_SHIFT 8 /* P times 2^8 (FCL_EXP is exp2 here) */

/* One in 8 of P's exponentials on the FMA pipe (fcl_exp2_fma, tile_nv_mma.cl;
 * -DFCL_EXP2_EMU=n, n = 1 << 30 for none, measures others): with the
 * products on E4M3 the special-function unit bounds the softmax (one in
 * 16 and one in 8 measured 1.03-1.06x, one in 4 0.97-0.99x; NOTES.md, run
 * 53).  Their relative error, 2^-13.7 at most, is in the header's bound. */
#ifndef FCL_EXP2_EMU
#define FCL_EXP_P(x, j) FCL_EXP_ONE_IN(8, x, j)
#endif

/* bytes of a tile row, and of a tile */
#define FCL_P8_ROW 128
#define FCL_P8_BYTES(rows) ((rows) * FCL_P8_ROW)
/* byte (r, c) of a tile in the swizzle */
#define FCL_P8_AT(r, c) ((r) * FCL_P8_ROW + (((((c) >> 4) ^ ((r) & 7))) << 4) + ((c) & 15))
/* V^T's column that holds key p of the tile (the permutation's inverse) */
#define FCL_P8_KEY_COL(p) \
    (((p) & ~15) | ((((p) >> 1) & 3) << 2) | ((((p) >> 3) & 1) << 1) | ((p) & 1))

/* the tiles' blocks in the workspace (fcl_forward_prepare8's layout) */
#define FCL_P8_KV_TILE(T, c)                                                              \
    ((__global const uchar *)(T) +                                                        \
     (bhk * ((seqlen_k + BC - 1) / BC) + (c) / BC) * (long)FCL_P8_BYTES(BC))

/* the mbarriers and arrivals of the buffers (tile_nv_wgmma.cl's, no maps) */
#undef FCL_WG_TMA_LOCALS
#define FCL_WG_TMA_LOCALS                \
    __local ulong wg_bar_[FCL_WG_NBUF]; \
    __local uint wg_done_[FCL_WG_NBUF];

/* The mbarriers made ready.  (In place of the tensor maps' setup.) */
#undef FCL_WG_MAPS_STATE
#define FCL_WG_MAPS_STATE                                                                  \
    if (lid < FCL_WG_NBUF)                                                                 \
        wg_done_[lid] = 0;                                                                 \
    if (lid == 0) {                                                                        \
        for (int i_ = 0; i_ < FCL_WG_NBUF; ++i_)                                           \
            fcl_wg_bar_init(wg_bar_ + i_);                                                 \
        fcl_wg_proxy_fence(); /* the copies' completions see them */                       \
    }                                                                                      \
    barrier(CLK_LOCAL_MEM_FENCE)

/* Q's rows by cp.async into its swizzled tile, zeros past the block's
 * rows; a negated Q (negative scale) is negated on chip once it has
 * arrived: an FP8 byte's sign bit, exact. */
#undef FCL_FWD_LOAD_Q
#undef FCL_FWD_Q_ARRIVED
#define FCL_P8_COPY_Q_(e, r, c, at, valid) \
    fcl_cp_async8((__local uchar *)Qh + FCL_P8_AT(r, 8 * (c)), at, valid)
#define FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, negate)                                 \
    const bool wg_q_neg_ = (negate);                                                       \
    FCL_COPY_ROWS_ASYNC(BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows), (head_dim), \
                        lid, FCL_P8_COPY_Q_)
#define FCL_FWD_Q_ARRIVED()                                                                \
    do {                                                                                   \
        fcl_cp_async_wait_all();                                                           \
        if (wg_q_neg_) {                                                                   \
            barrier(CLK_LOCAL_MEM_FENCE);                                                  \
            for (int e_ = lid; e_ < FCL_P8_BYTES(BR) / 16; e_ += WG)                       \
                ((__local uint4 *)Qh)[e_] ^= (uint4)(0x80808080u);                         \
        }                                                                                  \
        FCL_TILE_WRITTEN(); /* and tile 0's zero V (FCL_FWD_KBUF_STATE) */                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    } while (0)

/* K's and V^T's tiles, BC x 128 and 128 x BC bytes */
#undef FCL_WG_TILE_BYTES
#define FCL_WG_TILE_BYTES FCL_P8_BYTES(BC)
#undef FCL_WG_COPY_K
#undef FCL_WG_COPY_V
#define FCL_WG_COPY_K(dst, at, bar) fcl_wg_bulk(dst, FCL_P8_KV_TILE(K, at), FCL_WG_TILE_BYTES, bar)
#define FCL_WG_COPY_V(dst, at, bar) fcl_wg_bulk(dst, FCL_P8_KV_TILE(V, at), FCL_WG_TILE_BYTES, bar)

/* P as A registers: 4 a 32 keys */
#undef FCL_WG_P_KEYS
#define FCL_WG_P_KEYS 32

/* The products (FCL_FWD_QK and FCL_WG_ISSUE_PV of tile_nv_wgmma.cl name
 * these): S = Q K^T in four k32 steps of head_dim, N = the tile's 128
 * keys; O += P V^T's rows in four k32 steps of keys, N = 128 head_dim
 * columns. */
#undef FCL_WG_ISSUE_ABT
#define FCL_WG_ISSUE_ABT(d_, TA, arows, TB, brows, N)                                      \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < FCL_P8_ROW / 32; ++kk_)                                    \
            fcl_wgmma_ss8_128(TA, TB, d_[0], FCL_WG_DESC_K(TA, arows, FCL_WG_INDEX, kk_),  \
                              FCL_WG_DESC_K(TB, brows, 0, kk_), kk_ > 0);                  \
    } while (0)
#undef FCL_WG_ISSUE_AB
#define FCL_WG_ISSUE_AB(wacc_, a_, T, krows)                                               \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < (krows) / 32; ++kk_)                                       \
            fcl_wgmma_rs8_128(T, wacc_[0], a_[kk_], FCL_WG_DESC_K(T, D_PAD, 0, kk_));      \
    } while (0)

/* P rounded to E4M3 as the next tile's A registers (the score registers'
 * keys in V^T's order, above) */
#undef FCL_FWD_PV
#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int q_ = 0; q_ < BC / FCL_WG_P_KEYS; ++q_)                                    \
            FCL_UNROLL                                                                     \
            for (int i_ = 0; i_ < 4; ++i_) {                                               \
                const int j_ = 8 * q_ + 4 * (i_ >> 1), r_ = i_ & 1;                        \
                wg_p_[q_][i_] = fcl_e4m3x4(FCL_S(s, r_, j_), FCL_S(s, r_, j_ + 1),         \
                                           FCL_S(s, r_, j_ + 2), FCL_S(s, r_, j_ + 3));    \
            }                                                                              \
        FCL_WG_TILE_DONE();                                                                \
    } while (0)

/* V^T's non-finite bytes (E4M3's NaNs, x & 0x7F == 0x7F) for the edge
 * tiles' guard (common.cl, "non-finite operands"): element (key p, column
 * c) of V, the scan (of the whole tile: past the sequence it is zeros) and
 * the clean, which zeroes every NaN byte. */
#undef FCL_FWD_V_BAD
#undef FCL_FWD_V_CLEAN
#undef FCL_GUARD_SCAN
#define FCL_FWD_V_BAD(X, p, c)                                                             \
    ((((__local const uchar *)FCL_FWD_VT)[FCL_P8_AT(c, FCL_P8_KEY_COL(p))] & 0x7Fu) == 0x7Fu)
/* bit 7 of each byte of w (a uint or uint4) whose low 7 bits are all set */
#define FCL_P8_NAN_BITS(w) ((((w) & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u)
inline bool fcl_p8_tile_bad(__local const ushort *tile, int lid)
{
    bool bad = false;
    for (int e = lid; e < FCL_P8_BYTES(BC) / 16; e += WG) {
        bad |= any(FCL_P8_NAN_BITS(((__local const uint4 *)tile)[e]) != 0u);
    }
    return bad;
}
#define FCL_GUARD_SCAN(bad, BAD, X, npart, width) \
    ((void)(width), (void)(npart), bad = fcl_p8_tile_bad(FCL_FWD_VT, lid))
#define FCL_FWD_V_CLEAN(X, n)                                                              \
    do {                                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        for (int e_ = lid; e_ < FCL_P8_BYTES(BC) / 16; e_ += WG) {                         \
            __local uint4 *x_ = (__local uint4 *)FCL_FWD_VT + e_;                          \
            *x_ &= ~((FCL_P8_NAN_BITS(*x_) >> 7u) * 0xFFu);                                \
        }                                                                                  \
        FCL_TILE_WRITTEN();                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    } while (0)

#endif
