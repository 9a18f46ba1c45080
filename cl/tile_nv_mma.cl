/* tile_nv_mma.cl - the kernels' tile pieces on NVIDIA tensor cores (sm_80+),
 * written against the warp operations of warp_ptx.cl (mma.sync m16n8k16,
 * ldmatrix, shfl.sync, cp.async).  Built only with FCL_TILE_MMA=1, which the
 * host sets for NVIDIA devices of compute capability 8.0 and up (or, for
 * tests, with the emulated operations of warp_emulated.cl), fp16/bf16
 * storage or (forward only) FP8 storage decoded to fp16 as it is loaded,
 * head_dim a multiple of 16 up to 256 (dK/dV above 128 with its
 * accumulators' columns split over warps, FCL_WD, or built twice,
 * FCL_DKDV_PART), and rows aligned to 8 elements.
 *
 * Layout: WARPS = TY warps; each owns MB blocks of 16 consecutive rows of the
 * "row" operand (query rows in the forward and dQ, keys in dK/dV).  In the
 * accumulator layout a lane (grp = lane / 4, tig = lane % 4) holds, per
 * block, rows grp and grp + 8, and columns 2 tig, 2 tig + 1 of every
 * 8-column block: register tiles are x[2 * MB][columns / 4], four lanes share
 * a row.  Products never leave the registers: a tile of probabilities (or
 * dS) is repacked to 16 bits as the A operand of the next product
 * (FlashAttention-2's register reuse).  __local tiles hold 16-bit rows padded
 * by 8 halves (LDH), so the 8 rows of an ldmatrix fall in different banks.
 * With FCL_WGMMA the products of the forward, of dK/dV and of dQ are
 * tile_nv_wgmma.cl's instead, on tiles in wgmma's layout (FCL_H_AT_IN);
 * the rest of those kernels' pieces is this file's.
 */
#if FCL_TILE_MMA

#define WARPS TY
#ifndef FCL_WD
#define FCL_WD 1
#endif
#define LDH (D_PAD + 8)
/* Where element (r, c) of a 16-bit tile of `rows` rows lies, in halves
 * from its start (FCL_H_AT_IN), and the halves of such a tile: rows padded
 * to LDH, or, in the wgmma piece (FCL_WGMMA), wgmma's 128-byte swizzle (FCL_WG_AT,
 * warpgroup_ptx.cl), which the loads below fill alike: 8 values of a row
 * are 16 contiguous bytes in both.  FCL_H_ALIGNED: the tiles' alignment. */
#if FCL_WGMMA
#define FCL_H_AT_IN(rows, r, c) FCL_WG_AT(rows, r, c)
#define FCL_H_HALVES(rows) ((rows) * D_PAD)
#define FCL_H_ALIGNED FCL_WG_TILE_ALIGNED
/* Copy e of a tile's 16-byte copies: 8 consecutive copies fill the same
 * chunk of 8 rows of one atom, which the swizzle puts at 8 different
 * chunk positions (no two in one bank), and a warp's 32 copies take 64
 * contiguous bytes of each of 8 rows from global memory. */
#define FCL_TILE_COPY_ROW(e, chunks) ((((e) >> 3) / (chunks)) * 8 + ((e) & 7))
#define FCL_TILE_COPY_COL(e, chunks) (((e) >> 3) % (chunks))
/* tiles written by ordinary stores or cp.async are read by the tensor
 * cores' (async) proxy after the next barrier */
#define FCL_TILE_WRITTEN() fcl_wg_proxy_fence()
#if FCL_PAGE_SIZE > 0 || FCL_HAS(FCL_FEAT_SHARED_KV) || FCL_DKDV_PART != 0 || \
    (FCL_IS_FP8 && !defined(FCL_KERNEL_FORWARD))
#error "the wgmma piece: 16-bit tiles (FP8: the forward, decoded) of strided K/V, dK, dV in one launch"
#endif
#else
#define FCL_H_AT_IN(rows, r, c) ((r) * LDH + (c))
#define FCL_H_HALVES(rows) ((rows) * LDH)
#define FCL_H_ALIGNED FCL_ALIGNED
/* the row and 8-value column block of copy e of a tile, row-major */
#define FCL_TILE_COPY_ROW(e, chunks) ((e) / (chunks))
#define FCL_TILE_COPY_COL(e, chunks) ((e) % (chunks))
#define FCL_TILE_WRITTEN() (void)0
#endif
/* This work-item's cp.async copies have landed, and every work-item's are
 * visible to the whole work-group (and to the tensor cores' proxy). */
#define FCL_TILES_ARRIVED()               \
    do {                                  \
        fcl_cp_async_wait_all();          \
        FCL_TILE_WRITTEN();               \
        barrier(CLK_LOCAL_MEM_FENCE);     \
    } while (0)
/* 16-byte copies per work-item for one tile of BC keys */
#define FCL_KEY_TILE_STEPS ((BC * (D_PAD / 8) + WG - 1) / WG)

/* Scores in log2 units and the hardware's exp2 (fcl_exp2, ex2.approx: ~2
 * ulp): with 16-bit storage that error is 1000 times below the output's
 * rounding, and one instruction per score matters when the tensor cores do
 * the rest. */
#define FCL_EXP(x) fcl_exp2(x)
#define FCL_EXP_UNITS(x) ((x) * 1.4426950408889634f)

/* 2^x on the FMA pipe (x <= 64, or NaN), for a share of the forward's
 * probabilities where the special-function unit's exponentials are what
 * the softmax waits for (FlashAttention-4's emulation; FP8 products,
 * tile_nv_wgmma_fp8.cl): x clamped at -127 (NaN kept: max.NaN), 2^x =
 * 2^r 2^f with r = x rounded to nearest (the 1.5 * 2^23 addition) and f =
 * x - r in [-0.5, 0.5] exact, 2^f by a degree-3 polynomial (relative
 * error 7.5e-5 = 2^-13.7 at most, in fp32 too), 2^r made from r's bits
 * (0 at r = -127, so that -inf gives exactly 0).  Eight instructions
 * instead of one; where the tensor cores are what the loop waits for it
 * costs (NOTES.md, run 53). */
inline float fcl_exp2_fma(float x)
{
    const float xc = x < -127.0f ? -127.0f : x;
    const float t = xc + 12582912.0f;
    const float f = xc - (t - 12582912.0f);
    const float p = fma(fma(fma(0x1.c3f71ap-5f, f, 0x1.f0ddf2p-3f), f, 0x1.62f31ap-1f), f,
                        0x1.fff694p-1f);
    return p * as_float(as_uint(t) * 0x800000u + 0x3F800000u);
}
/* The exponential of register column j: one in n columns (compile-time
 * indices) by fcl_exp2_fma. */
#define FCL_EXP_ONE_IN(n, x, j) ((j) % (n) == (n) - 1 ? fcl_exp2_fma(x) : FCL_EXP(x))
/* -DFCL_EXP2_EMU=n, a measurement build's: one in n of every tensor-core
 * forward's */
#ifdef FCL_EXP2_EMU
#define FCL_EXP_P(x, j) FCL_EXP_ONE_IN(FCL_EXP2_EMU, x, j)
#endif
#define FCL_NATURAL_UNITS(x) ((x) * 0.6931471805599453f)

#define FCL_MMA_IDS                                                         \
    const int lid = (int)get_local_id(0);                                   \
    const int warp = lid >> 5, lane = lid & 31, grp = lane >> 2, tig = lane & 3

/* Register tile coordinates (RM = 2 * MB rows, columns in 8-blocks). */
#define FCL_ROW(i) ((warp * MB + ((i) >> 1)) * 16 + grp + 8 * ((i) & 1))
#define FCL_COL(j) (8 * ((j) >> 1) + 2 * tig + ((j) & 1))
#define FCL_OCOL(n) FCL_COL(n)
#define FCL_FIRST_IN_ROW (tig == 0)
/* A lane's output accumulators n and n + 1 (n even) are adjacent columns
 * FCL_OCOL(n), FCL_OCOL(n) + 1 with FCL_OCOL(n) even, here and in every
 * layout below (their column offsets are multiples of 8): a kernel's end
 * may write the pair as one 4-byte store of the storage type's bits,
 * fcl_store_pair, at an even element index i (16-bit storage only; that
 * it is defined is what tells the kernels so: common.cl,
 * FCL_STORE_ACC_PAIRS).  Pairs
 * instead of 2-byte stores: the mma.sync forward at head_dim 128 and 256
 * 1.09-1.16x at N 1024, the backwards (mma.sync and wgmma) 1.07-1.15x
 * there (H200, NOTES.md run 67). */
#define fcl_store_pair(p, i, v0, v1) (*(__global uint *)((p) + (i)) = fcl_pack2((v0), (v1)))

/* c = x[i0..i0+1][j0..j0+1] as one accumulator fragment; c += a b. */
#define FCL_MMA_INTO(x, i0, j0, a, b0, b1)                                      \
    do {                                                                        \
        float c_[4] = {x[i0][j0], x[i0][(j0) + 1], x[(i0) + 1][j0], x[(i0) + 1][(j0) + 1]}; \
        fcl_mma(c_, a, b0, b1);                                                 \
        x[i0][j0] = c_[0];                                                      \
        x[i0][(j0) + 1] = c_[1];                                                \
        x[(i0) + 1][j0] = c_[2];                                                \
        x[(i0) + 1][(j0) + 1] = c_[3];                                          \
    } while (0)

/* s[2 * MB][NCOLS / 4] = A B^T, summing over D_PAD: A = this warp's rows,
 * starting at tile row A_ROW0 of TA; B = the first NCOLS rows of TB as stored
 * (k = head dim, n = row of TB), so ldmatrix without .trans gives B's
 * fragments: four 8x8 matrices = two 8-row blocks x two 8-dim halves. */
#define FCL_MMA_ABT(s, TA, A_ROW0, TB, NCOLS)                                              \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int i_ = 0; i_ < 2 * MB; ++i_)                                                \
            FCL_UNROLL                                                                     \
            for (int j_ = 0; j_ < (NCOLS) / 4; ++j_) s[i_][j_] = 0.0f;                     \
        FCL_UNROLL                                                                         \
        for (int kb_ = 0; kb_ < D_PAD / 16; ++kb_) {                                       \
            uint a_[MB][4];                                                                \
            FCL_UNROLL                                                                     \
            for (int mb_ = 0; mb_ < MB; ++mb_)                                             \
                fcl_ldmatrix_x4(TA, ((A_ROW0) + 16 * mb_ + (lane & 7) + ((lane >> 3) & 1) * 8) * LDH \
                                    + kb_ * 16 + (lane >> 4) * 8, a_[mb_]);                \
            FCL_UNROLL                                                                     \
            for (int j2_ = 0; j2_ < (NCOLS) / 16; ++j2_) {                                 \
                uint b_[4];                                                                \
                fcl_ldmatrix_x4(TB, (j2_ * 16 + (lane & 7) + (lane >> 4) * 8) * LDH      \
                                        + kb_ * 16 + ((lane >> 3) & 1) * 8, b_);           \
                FCL_UNROLL                                                                 \
                for (int mb_ = 0; mb_ < MB; ++mb_) {                                       \
                    FCL_MMA_INTO(s, 2 * mb_, 4 * j2_, a_[mb_], b_[0], b_[1]);              \
                    FCL_MMA_INTO(s, 2 * mb_, 4 * j2_ + 2, a_[mb_], b_[2], b_[3]);          \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* acc[2 * MBN][NCOL / 4] += A B, summing over KLEN: A's fragments (MBN
 * blocks of 16 rows), each given by LOAD_A(SRC, mb, kk, a) for 16-row
 * block mb and 16-column step kk; B = TB, a tile of KLEN rows, as stored
 * (k = row of TB, n = head dim), its columns COL0 .. COL0 + NCOL - 1, so
 * ldmatrix .trans gives its fragments (8 values of a row are 16
 * contiguous bytes in either layout, FCL_H_AT_IN). */
#define FCL_MMA_A_B(acc, MBN, LOAD_A, SRC, TB, COL0, NCOL, KLEN)                           \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < (KLEN) / 16; ++kk_) {                                      \
            uint a_[MBN][4];                                                               \
            FCL_UNROLL                                                                     \
            for (int mb_ = 0; mb_ < (MBN); ++mb_) LOAD_A(SRC, mb_, kk_, a_[mb_]);          \
            FCL_UNROLL                                                                     \
            for (int n2_ = 0; n2_ < (NCOL) / 16; ++n2_) {                                  \
                uint b_[4];                                                                \
                fcl_ldmatrix_x4_trans(TB, FCL_H_AT_IN((KLEN), kk_ * 16 + (lane & 7)            \
                                                              + ((lane >> 3) & 1) * 8,         \
                                                      (COL0) + n2_ * 16 + (lane >> 4) * 8), b_); \
                FCL_UNROLL                                                                 \
                for (int mb_ = 0; mb_ < (MBN); ++mb_) {                                    \
                    FCL_MMA_INTO(acc, 2 * mb_, 4 * n2_, a_[mb_], b_[0], b_[1]);            \
                    FCL_MMA_INTO(acc, 2 * mb_, 4 * n2_ + 2, a_[mb_], b_[2], b_[3]);        \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* An A fragment from a register tile p[2 * MB][...] in the accumulator
 * layout, repacked to 16 bits (16 columns at a time: two 8-column blocks
 * side by side). */
#define FCL_A_FROM_REGS(p, mb, kk, a)                                                     \
    do {                                                                                  \
        (a)[0] = fcl_pack2(p[2 * (mb)][4 * (kk)], p[2 * (mb)][4 * (kk) + 1]);             \
        (a)[1] = fcl_pack2(p[2 * (mb) + 1][4 * (kk)], p[2 * (mb) + 1][4 * (kk) + 1]);     \
        (a)[2] = fcl_pack2(p[2 * (mb)][4 * (kk) + 2], p[2 * (mb)][4 * (kk) + 3]);         \
        (a)[3] = fcl_pack2(p[2 * (mb) + 1][4 * (kk) + 2], p[2 * (mb) + 1][4 * (kk) + 3]); \
    } while (0)

/* acc[2 * MB][D_PAD / 4] += P B, summing over KLEN: P = p[2 * MB][KLEN / 4]
 * in the accumulator layout, B = the first KLEN rows of TB as stored. */
#define FCL_MMA_AB(acc, p, TB, KLEN) FCL_MMA_A_B(acc, MB, FCL_A_FROM_REGS, p, TB, 0, D_PAD, KLEN)

/* Across the four lanes that share a row; the same order in every lane. */
#define FCL_LANES_MAX(v)                                                  \
    do {                                                                 \
        FCL_UNROLL                                                       \
        for (int i_ = 0; i_ < RM; ++i_) {                                \
            v[i_] = fmax(v[i_], fcl_shfl_xor(v[i_], 1));                 \
            v[i_] = fmax(v[i_], fcl_shfl_xor(v[i_], 2));                 \
        }                                                                \
    } while (0)

#define FCL_LANES_SUM(v)                                                  \
    do {                                                                 \
        FCL_UNROLL                                                       \
        for (int i_ = 0; i_ < RM; ++i_) {                                \
            v[i_] += fcl_shfl_xor(v[i_], 1);                             \
            v[i_] += fcl_shfl_xor(v[i_], 2);                             \
        }                                                                \
    } while (0)

#define FCL_ROWS_MAX(v) FCL_LANES_MAX(v)
#define FCL_ROWS_SUM(v) FCL_LANES_SUM(v)

/* A register tile x[RM][cols / 4] of this warp (rows FCL_ROW, columns
 * FCL_COL) into T as 16-bit pairs, LD halves a row: how a warp hands a
 * score tile to the warps that multiply it by another operand's columns.
 * FCL_SHARE_TILE_AT puts element (r, c) at AT(T, r, c, arg) instead (the
 * wgmma piece's swizzled dS^T). */
#define FCL_SHARE_TILE_AT(T, x, cols, AT, arg)                                       \
    FCL_UNROLL                                                                       \
    for (int i_ = 0; i_ < RM; ++i_)                                                  \
        FCL_UNROLL                                                                   \
        for (int j_ = 0; j_ < (cols) / 4; j_ += 2)                                   \
            *(__local uint *)(AT(T, FCL_ROW(i_), FCL_COL(j_), arg)) =                \
                fcl_pack2(x[i_][j_], x[i_][j_ + 1])
#define FCL_ROW_MAJOR_AT(T, r, c, LD) ((T) + (r) * (LD) + (c))
#define FCL_SHARE_TILE(T, x, cols, LD) FCL_SHARE_TILE_AT(T, x, cols, FCL_ROW_MAJOR_AT, LD)

/* 8 elements of a row as 8 16-bit tile values.  FP8 is decoded to fp16:
 * exact for both formats (E4M3's 3 mantissa bits and exponents 2^-9 ..
 * 2^8, E5M2's 2 bits and 2^-16 .. 2^15, infinities and NaN all exist in
 * fp16), so the fp16 products serve FP8 unchanged.
 * The loads' functions are always inlined (FCL_LOAD_INLINE): an inline
 * function is only an inline definition in OpenCL C (C99), and clang's
 * NVPTX build of the wgmma forward of FP8, whose loads decode, left calls
 * to fcl_load_rows_h, fcl_load_rows_h_async and fcl_copy8_h_async
 * unresolved (ptxas: "Unresolved extern function";
 * tools/wgmma_ptx_check.sh). */
#define FCL_LOAD_INLINE __attribute__((always_inline)) inline
#if FCL_IS_FP8
/* 8 FP8 values (raw's bytes, the first in the low byte) as 8 fp16:
 * E5M2 is an fp16's upper byte (its infinities, NaNs and subnormals
 * included), so each byte moves up; E4M3 takes the hardware's conversion
 * where the host sets FCL_CVT_FP8 (sm_89+, cvt.rn.f16x2.e4m3x2: exact),
 * else common.cl's decoder and a rounding to fp16 that is exact too. */
FCL_LOAD_INLINE uint4 fcl_fp8x8_to_h(uint2 raw)
{
#if FCL_DTYPE == 4
    return (uint4)(((raw.x << 8) & 0xFF00u) | ((raw.x << 16) & 0xFF000000u),
                   ((raw.x >> 8) & 0xFF00u) | (raw.x & 0xFF000000u),
                   ((raw.y << 8) & 0xFF00u) | ((raw.y << 16) & 0xFF000000u),
                   ((raw.y >> 8) & 0xFF00u) | (raw.y & 0xFF000000u));
#elif FCL_CVT_FP8
    return (uint4)(fcl_e4m3x4_to_h(raw.x), fcl_e4m3x4_to_h(raw.y));
#else
    uint4 h;
    vstore_half8_rte(fcl_decode_fp8_8(convert_uint8(as_uchar8(raw))), 0, (__private half *)&h);
    return h;
#endif
}
#endif

FCL_LOAD_INLINE uint4 fcl_load8_h(__global const fcl_storage *src)
{
#if FCL_IS_FP8
    return fcl_fp8x8_to_h(as_uint2(vload8(0, src)));
#else
    return *(__global const uint4 *)src;
#endif
}

/* 8 elements into a tile in the background (cp.async, zeros when !valid);
 * FP8 must be decoded on the way, so it is copied at once. */
FCL_LOAD_INLINE void fcl_copy8_h_async(__local ushort *dst, __global const fcl_storage *src,
                                       bool valid)
{
#if FCL_IS_FP8
    *(__local uint4 *)dst = valid ? fcl_load8_h(src) : (uint4)(0u);
#else
    fcl_cp_async16(dst, src, valid);
#endif
}

/* Whether a 16-bit tile value (fp16, or FP8 decoded to it, or bf16) is
 * infinite or NaN: its exponent bits all set. */
inline bool fcl_h_nonfinite(ushort h)
{
#if FCL_DTYPE == 2
    return (h & 0x7F80u) == 0x7F80u;
#else
    return (h & 0x7C00u) == 0x7C00u;
#endif
}
/* A 16-bit tile value as a float. */
inline float fcl_h_value(ushort h)
{
#if FCL_DTYPE == 2
    return as_float((uint)h << 16);
#else
    return vload_half(0, (const __private half *)&h);
#endif
}
/* Element (p, c) of a tile of `rows` rows is non-finite. */
#define FCL_H_BAD(tile, rows, p, c) fcl_h_nonfinite((tile)[FCL_H_AT_IN(rows, p, c)])
/* common.cl's FCL_ZERO_NONFINITE in this piece's layout */
#define FCL_H_CLEAN(tile, rows, n)                                                 \
    do {                                                                           \
        barrier(CLK_LOCAL_MEM_FENCE);                                              \
        FCL_FOR_SHARE(p_, c_, (n), D_PAD)                                          \
            if (fcl_h_nonfinite((tile)[FCL_H_AT_IN(rows, p_, c_)]))                \
                (tile)[FCL_H_AT_IN(rows, p_, c_)] = 0;                             \
        FCL_TILE_WRITTEN();                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                              \
    } while (0)

/* Whether this work-item's share of rows [0, n) of a 16-bit tile of
 * `rows` rows holds a non-finite value, read 8 values (16 bytes) at a
 * time: the edge tiles' scan (common.cl, FCL_GUARD_SCAN).  D_PAD is a
 * multiple of 16 here and LDH keeps rows 16-byte aligned. */
inline bool fcl_h_tile_bad(__local const ushort *tile, int rows, int n, int lid)
{
#if FCL_DTYPE == 2
    const uint lo = 0x7F80u, hi = 0x7F800000u;
#else
    const uint lo = 0x7C00u, hi = 0x7C000000u;
#endif
    bool bad = false;
    for (int e = lid; e < n * (D_PAD / 8); e += WG) {
        const int r = e / (D_PAD / 8), c = (e - r * (D_PAD / 8)) * 8;
        const uint4 x = *(__local const uint4 *)(tile + FCL_H_AT_IN(rows, r, c));
        bad |= any((x & lo) == lo) || any((x & hi) == hi);
    }
    return bad;
}
/* FCL_GUARD_SCAN for this piece: each operand's BAD names its tile as
 * FCL_H_TILE_<BAD>(X) and the tile's rows as FCL_H_ROWS_<BAD> */
#define FCL_GUARD_SCAN(bad, BAD, X, npart, width) \
    ((void)(width), bad = fcl_h_tile_bad(FCL_H_TILE_##BAD(X), FCL_H_ROWS_##BAD, (npart), lid))

/* Runs the statement that follows for e = lid, lid + WG, ... below n: the
 * copies of a tile shared out over the work-group.  Every work-item takes
 * the same number of steps, those past n doing nothing, as in the paged
 * loads below: the plain `for (e = lid; e < n; e += WG)`, whose trip count
 * differs between work-items unless WG divides n (key tiles of 32 and 64
 * copies at head_dim 16 and 32 in the decode plan's 128 work-items), was
 * miscompiled by PoCL 3.1 in the emulated build with a block mask compiled
 * in: wrong O at head_dim 32, a crash at 16, where Oclgrind and an
 * unoptimised build give the reference's results. */
#define FCL_FOR_TILE_CHUNKS(e, n, lid)                                              \
    for (int step_ = 0, e = (lid); step_ < ((n) + WG - 1) / WG; ++step_, e += WG) \
        if (e < (n))

/* rows x D_PAD of 16-bit storage into a padded __local tile, row r from
 * fcl_row_offset(src_rows, keys, r) (common.cl), zero rows from nvalid on
 * and zero columns from `width` on (D_PAD, or head_dim_v for V and dO; a
 * multiple of 8), negated when `negate` (the sign bits of fp16 and bf16
 * alike); 8 elements per access (the host guarantees the alignment). */
FCL_LOAD_INLINE void fcl_load_rows_h(__local ushort *dst, int nrows,
                                     __global const fcl_storage *src, const fcl_rows src_rows,
                                     bool keys, int nvalid, int width, bool negate, int lid)
{
    const uint flip = negate ? 0x80008000u : 0u;
    const int chunks = D_PAD / 8;
    FCL_FOR_TILE_CHUNKS(e, nrows * chunks, lid) {
        const int r = FCL_TILE_COPY_ROW(e, chunks), c = FCL_TILE_COPY_COL(e, chunks);
        uint4 x = (uint4)(0u);
        if (r < nvalid && c * 8 < width)
            x = fcl_load8_h(src + fcl_row_offset(src_rows, keys, r) + c * 8) ^ flip;
        *(__local uint4 *)(dst + FCL_H_AT_IN(nrows, r, c * 8)) = x;
    }
}

/* The loop of the cp.async loads below: copy e of a tile of nrows x D_PAD
 * elements (FCL_TILE_COPY_ROW / _COL) as COPY(e, r, c, at, valid), `at`
 * the 8 elements of row r from column 8 c (src itself where !valid: zero
 * rows from nvalid on, zero columns from `width` on), then one cp.async
 * group.  Where WG is a multiple of FCL_COPY_SPAN (the copies that
 * cover a block of rows whole: one row, or on the wgmma layout 8 rows) a
 * work-item's column stays the same from step to step and its row moves
 * on by FCL_COPY_STEP_ROWS; the stepped form (FCL_COPY_STEPPED) then moves
 * `at` on by the rows' fixed step where they have one (fcl_rows_linear):
 * one add a copy in place of the row's 64-bit offset and its selects. */
#if FCL_WGMMA
#define FCL_COPY_SPAN (8 * (D_PAD / 8))
#else
#define FCL_COPY_SPAN (D_PAD / 8)
#endif
#define FCL_COPY_STEP_ROWS (WG / (D_PAD / 8))
/* The stepped form where it measured faster (H200, fp16, NOTES.md run 68):
 * the mma.sync forward 1.01-1.07x, its backward at head_dim 64 1.04-1.10x.
 * Not the mma.sync backward above head_dim 64 (0.95-0.97x), nor the wgmma
 * pieces, whose streamed tiles mostly come by the accelerator (0.98-1.03x,
 * no gain). */
#if !FCL_WGMMA && (defined(FCL_KERNEL_FORWARD) || D_PAD <= 64)
#define FCL_COPY_STEPPED (WG % FCL_COPY_SPAN == 0)
#else
#define FCL_COPY_STEPPED 0
#endif
#define FCL_COPY_ROWS_ASYNC_ANY(nrows, src, src_rows, keys, nvalid, width, lid, COPY)         \
    do {                                                                                     \
        const int chunks_ = D_PAD / 8;                                                       \
        FCL_FOR_TILE_CHUNKS(e_, (nrows) * chunks_, lid) {                                    \
            const int r_ = FCL_TILE_COPY_ROW(e_, chunks_), c_ = FCL_TILE_COPY_COL(e_, chunks_); \
            const bool valid_ = r_ < (nvalid) && c_ * 8 < (width);                           \
            COPY(e_, r_, c_,                                                                 \
                 (src) + (valid_ ? fcl_row_offset(src_rows, keys, r_) + c_ * 8 : 0), valid_); \
        }                                                                                    \
    } while (0)
#if FCL_COPY_STEPPED
#define FCL_COPY_ROWS_ASYNC(nrows, src, src_rows, keys, nvalid, width, lid, COPY)             \
    do {                                                                                     \
        const int chunks_ = D_PAD / 8;                                                       \
        if (fcl_rows_linear(src_rows, keys, FCL_COPY_STEP_ROWS)) {                           \
            const int c_ = FCL_TILE_COPY_COL(lid, chunks_);                                  \
            const bool col_ = c_ * 8 < (width);                                              \
            const long stride_ = fcl_rows_step(src_rows, keys, FCL_COPY_STEP_ROWS);          \
            int r_ = FCL_TILE_COPY_ROW(lid, chunks_);                                        \
            long at_ = fcl_row_offset(src_rows, keys, r_) + c_ * 8;                          \
            FCL_FOR_TILE_CHUNKS(e_, (nrows) * chunks_, lid) {                                \
                const bool valid_ = r_ < (nvalid) && col_;                                   \
                COPY(e_, r_, c_, (src) + (valid_ ? at_ : 0), valid_);                        \
                r_ += FCL_COPY_STEP_ROWS;                                                    \
                at_ += stride_;                                                              \
            }                                                                                \
        } else {                                                                             \
            FCL_COPY_ROWS_ASYNC_ANY(nrows, src, src_rows, keys, nvalid, width, lid, COPY);   \
        }                                                                                    \
        fcl_cp_async_commit();                                                               \
    } while (0)
#else
#define FCL_COPY_ROWS_ASYNC(nrows, src, src_rows, keys, nvalid, width, lid, COPY)           \
    do {                                                                                   \
        FCL_COPY_ROWS_ASYNC_ANY(nrows, src, src_rows, keys, nvalid, width, lid, COPY);     \
        fcl_cp_async_commit();                                                             \
    } while (0)
#endif

/* The same as fcl_load_rows_h through cp.async, as one group: the copy
 * proceeds while the warps compute; FCL_TILES_ARRIVED() makes it visible. */
FCL_LOAD_INLINE void fcl_load_rows_h_async(__local ushort *dst, int nrows,
                                           __global const fcl_storage *src,
                                           const fcl_rows src_rows, bool keys, int nvalid,
                                           int width, int lid)
{
#define FCL_COPY_H_(e, r, c, at, valid) \
    fcl_copy8_h_async(dst + FCL_H_AT_IN(nrows, r, (c) * 8), at, valid)
    FCL_COPY_ROWS_ASYNC(nrows, src, src_rows, keys, nvalid, width, lid, FCL_COPY_H_);
#undef FCL_COPY_H_
}

/* The two for rows at a fixed stride `ss` from element `base`. */
FCL_LOAD_INLINE void fcl_load_tile_h(__local ushort *dst, int nrows,
                                     __global const fcl_storage *src, long base, long ss,
                                     int nvalid, int width, bool negate, int lid)
{
    fcl_load_rows_h(dst, nrows, src, fcl_rows_strided(base, ss), true, nvalid, width, negate,
                    lid);
}

FCL_LOAD_INLINE void fcl_load_tile_h_async(__local ushort *dst, int nrows,
                                           __global const fcl_storage *src, long base, long ss,
                                           int nvalid, int width, int lid)
{
    fcl_load_rows_h_async(dst, nrows, src, fcl_rows_strided(base, ss), true, nvalid, width, lid);
}

#if FCL_IS_FP8
/* An FP8 tile in two steps, so that its copy runs in the background as
 * the 16-bit tiles' cp.async does (decoding on the way, fcl_copy8_h_async,
 * makes every copy wait for its load): its raw bytes by cp.async into a
 * staging area half the 16-bit tile's size, then, once they have arrived
 * (FCL_TILES_ARRIVED), decoded into the tile by fcl_unstage_fp8.  Copy e
 * (fcl_load_rows_h_async's order) lands at byte 8 e: a warp's copies, and
 * its reads of them, are contiguous. */
FCL_LOAD_INLINE void fcl_stage_rows_fp8_async(__local uchar *stage, int nrows,
                                              __global const fcl_storage *src,
                                              const fcl_rows src_rows, bool keys, int nvalid,
                                              int width, int lid)
{
#define FCL_COPY_FP8_(e, r, c, at, valid) fcl_cp_async8(stage + 8 * (e), at, valid)
    FCL_COPY_ROWS_ASYNC(nrows, src, src_rows, keys, nvalid, width, lid, FCL_COPY_FP8_);
#undef FCL_COPY_FP8_
}

/* fcl_unstage_fp8 of the wgmma forward's Q (BR rows) when its bytes were
 * staged in the second half of its own tile (tile_nv_wgmma.cl): every
 * work-item reads its staged chunks first and, after a barrier, writes
 * them decoded.  Every work-item calls it. */
#if FCL_WGMMA && defined(FCL_KERNEL_FORWARD)
FCL_LOAD_INLINE void fcl_unstage_q_fp8_in_place(__local ushort *dst, __local const uchar *stage,
                                                int lid)
{
    /* BR * D_PAD / 8 chunks, D_PAD / 16 a work-item (WG = 2 BR), kept in
     * registers (constant indices) */
    const int chunks = D_PAD / 8;
    uint2 raw[D_PAD / 16];
    FCL_UNROLL
    for (int i = 0; i < D_PAD / 16; ++i)
        raw[i] = *(__local const uint2 *)(stage + 8 * (lid + i * WG));
    barrier(CLK_LOCAL_MEM_FENCE);
    FCL_UNROLL
    for (int i = 0; i < D_PAD / 16; ++i) {
        const int e = lid + i * WG;
        const int r = FCL_TILE_COPY_ROW(e, chunks), c = FCL_TILE_COPY_COL(e, chunks);
        *(__local uint4 *)(dst + FCL_H_AT_IN(BR, r, c * 8)) = fcl_fp8x8_to_h(raw[i]);
    }
}
#endif

/* The staged bytes of a tile of nrows rows into it as 16-bit values (the
 * rows and columns the copy left out are zero bytes: zeros). */
FCL_LOAD_INLINE void fcl_unstage_fp8(__local ushort *dst, int nrows, __local const uchar *stage,
                                     int lid)
{
    const int chunks = D_PAD / 8;
    FCL_FOR_TILE_CHUNKS(e, nrows * chunks, lid) {
        const int r = FCL_TILE_COPY_ROW(e, chunks), c = FCL_TILE_COPY_COL(e, chunks);
        *(__local uint4 *)(dst + FCL_H_AT_IN(nrows, r, c * 8)) =
            fcl_fp8x8_to_h(*(__local const uint2 *)(stage + 8 * e));
    }
}
#endif

/* ---- outputs through a tile ---------------------------------------------
 * A kernel's end may write a 16-bit output through a __local tile it is
 * done with (the forward's O through Q's tile, dK and dV through K's and
 * V's: FCL_FWD_STAGE_O, FCL_DKDV_STAGE below): each work-item puts its
 * accumulators' values, every column of D_PAD, into the tile in its layout
 * (the forward by fcl_stage_o: value v at element `at`, rounded as
 * fcl_store_o rounds; dK/dV a column pair at a time, below), and after a
 * barrier fcl_store_staged_o copies rows [0, nrows) and columns [0, width)
 * (a multiple of 8) of the tile of trows rows to o, row r from element
 * base + r * ss (16-byte aligned), 16 bytes a store.  A warp's writes, 8
 * rows x 4 values or pairs an instruction, fall in 32 banks (padded rows
 * and the 128-byte swizzle alike), and 8 consecutive work-items read a
 * row's 8 chunks of 16 bytes.  The accumulator layout's
 * own stores, 2 bytes each, a warp's instruction touching 8 rows 8 bytes
 * apiece, took about 6 us of a forward work-group's end on the H100
 * (NOTES.md, run 39). */
#if FCL_OUT_DTYPE == 1 || FCL_OUT_DTYPE == 2
#define FCL_STAGED_OUT 1
inline void fcl_stage_o(__local ushort *t, int at, float v)
{
#if FCL_OUT_DTYPE == 1
    vstore_half_rte(v, (size_t)at, (__local half *)t);
#else
    t[at] = fcl_bf16_bits(v);
#endif
}
inline void fcl_store_staged_o(__global fcl_ostorage *o, __local const ushort *t, int trows,
                               long base, long ss, int nrows, int width, int lid)
{
    const int chunks = D_PAD / 8;
    FCL_FOR_TILE_CHUNKS(e, trows * chunks, lid) {
        const int r = e / chunks, c = e % chunks;
        if (r < nrows && c * 8 < width)
            *(__global uint4 *)(o + base + (long)r * ss + c * 8) =
                *(__local const uint4 *)(t + FCL_H_AT_IN(trows, r, c * 8));
    }
}
#else
#define FCL_STAGED_OUT 0
#endif

/* ---- the forward's pieces (see flash_fwd.cl) ----------------------------
 * K and V have one buffer each, loaded as in FlashAttention-2: V of this
 * tile streams in during Q K^T and the softmax, K of the next tile during
 * P V. */
#if defined(FCL_KERNEL_FORWARD)

#if FCL_WD == 1
/* Warps own 16 * MB query rows each, every key of the tile and all of
 * head_dim: S, P and O stay in registers. */
#define MB (BR / (16 * WARPS))
#define RM (2 * MB)
#define FCL_FWD_KN BC
#define RN (BC / 4)
#define DN (D_PAD / 4)
#define FCL_FWD_SROW0 (warp * 16 * MB)
#define FCL_FWD_KEY0 0
#define FCL_FWD_LOCALS_SPLIT
#else
/* FCL_WD > 1: head_dims whose accumulator would not fit a lane's registers
 * (16 rows x d is d / 2 floats a lane: 288 at MLA's 576), as FlashMLA
 * splits V's columns over warps.  The RB = BR / 16 row blocks each have WD
 * warps; warp w takes row block w % RB and part w / RB:
 *   S = Q K^T: the part's BC / WD keys (KN), so a row's max is combined
 *     over its WD warps through __local (rowx), and its sum at the end;
 *   O += P V: the part's NCOL = D_PAD / WD head_dim columns over all BC
 *     keys, P read back from __local (Ps, 16-bit, as the product takes it)
 *     by ldmatrix.
 * Every warp of a row therefore rescales its columns by the same max. */
#define FCL_FWD_RB (BR / 16)
#define FCL_FWD_KN (BC / FCL_WD)
#define FCL_FWD_NCOL (D_PAD / FCL_WD)
#if BR % 16 != 0 || WARPS != FCL_FWD_RB * FCL_WD || FCL_FWD_KN % 16 != 0 || FCL_FWD_NCOL % 16 != 0
#error "FCL_WD: the warps must tile the score tile and the accumulators evenly"
#endif
#define MB 1
#define RM 2
#define RN (FCL_FWD_KN / 4)
#define DN (FCL_FWD_NCOL / 4)
#define FCL_FWD_PART (warp / FCL_FWD_RB)
#define FCL_FWD_SROW0 ((warp % FCL_FWD_RB) * 16)
#define FCL_FWD_KEY0 (FCL_FWD_PART * FCL_FWD_KN)
#undef FCL_ROW
#undef FCL_COL
#undef FCL_OCOL
#undef FCL_FIRST_IN_ROW
#define FCL_ROW(i) (FCL_FWD_SROW0 + grp + 8 * ((i) & 1))
#define FCL_COL(j) (FCL_FWD_KEY0 + 8 * ((j) >> 1) + 2 * tig + ((j) & 1))
#define FCL_OCOL(n) (FCL_FWD_PART * FCL_FWD_NCOL + 8 * ((n) >> 1) + 2 * tig + ((n) & 1))
#define FCL_FIRST_IN_ROW (tig == 0 && FCL_FWD_PART == 0)
#define LDP (BC + 8)
#define FCL_FWD_LOCALS_SPLIT                    \
    __local ushort Ps[BR * LDP] FCL_ALIGNED;    \
    __local float rowx[FCL_WD * BR] FCL_ALIGNED;
/* v[RM] (equal in a row's four lanes) combined by OP over the row's WD
 * warps, parts in order (a sum is the same in every warp and run).  rowx
 * is free again after the barrier that follows the next read of it. */
#define FCL_FWD_PARTS(v, OP)                                                   \
    do {                                                                       \
        if (tig == 0) {                                                        \
            FCL_UNROLL                                                         \
            for (int i_ = 0; i_ < RM; ++i_) rowx[FCL_FWD_PART * BR + FCL_ROW(i_)] = v[i_]; \
        }                                                                      \
        barrier(CLK_LOCAL_MEM_FENCE);                                          \
        FCL_UNROLL                                                             \
        for (int i_ = 0; i_ < RM; ++i_) {                                      \
            float t_ = rowx[FCL_ROW(i_)];                                      \
            for (int p_ = 1; p_ < FCL_WD; ++p_) t_ = OP(t_, rowx[p_ * BR + FCL_ROW(i_)]); \
            v[i_] = t_;                                                        \
        }                                                                      \
    } while (0)
#define FCL_FWD_ADD(a, b) ((a) + (b))
#undef FCL_ROWS_MAX
#undef FCL_ROWS_SUM
#define FCL_ROWS_MAX(v)              \
    do {                             \
        FCL_LANES_MAX(v);            \
        FCL_FWD_PARTS(v, fmax);      \
    } while (0)
/* after the loop: rowx's last reads were before the last tile's middle barrier */
#define FCL_ROWS_SUM(v)                 \
    do {                                \
        FCL_LANES_SUM(v);               \
        FCL_FWD_PARTS(v, FCL_FWD_ADD);  \
    } while (0)
/* the warp's P (its keys) for the other parts' products */
#define FCL_FWD_SHARE_P(s) FCL_SHARE_TILE(Ps, s, FCL_FWD_KN, LDP)
/* A fragments of P: this warp's 16 rows of Ps, 16 keys from 16 kk */
#define FCL_FWD_LOAD_P(TA, mb, kk, a)                                                     \
    fcl_ldmatrix_x4(TA, (FCL_FWD_SROW0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDP        \
                            + (kk) * 16 + (lane >> 4) * 8, a)
#endif
#define FCL_FWD_IDS FCL_MMA_IDS

/* K and V tiles.  Two caches: one buffer each, V of this tile streaming in
 * during Q K^T and the softmax, K of the next during P V (FlashAttention-2).
 * One shared cache (FCL_FEAT_SHARED_KV: V is the first head_dim_v columns of
 * K's rows, MLA): no V tile, K has two buffers, and the next tile's K
 * streams in while this one is multiplied twice. */
#if FCL_WGMMA
/* the wgmma piece keeps two K and two V tiles: tile_nv_wgmma.cl */
#elif FCL_HAS(FCL_FEAT_SHARED_KV)
#define FCL_FWD_KV_LOCALS __local ushort Kh[2 * FCL_H_HALVES(BC)] FCL_ALIGNED;
#define FCL_FWD_KT(buf) (Kh + (buf) * FCL_H_HALVES(BC))
#define FCL_FWD_KCUR FCL_FWD_KT(kcur_)
#define FCL_FWD_VT FCL_FWD_KCUR
#define FCL_FWD_KBUF_STATE int kcur_ = 0, knext_ = 0
#else
#define FCL_FWD_KV_LOCALS                       \
    __local ushort Kh[FCL_H_HALVES(BC)] FCL_ALIGNED;    \
    __local ushort Vh[FCL_H_HALVES(BC)] FCL_ALIGNED;
#define FCL_FWD_KCUR Kh
#define FCL_FWD_VT Vh
#define FCL_FWD_KBUF_STATE (void)0
#endif

#define FCL_FWD_LOCALS                                      \
    __local ushort Qh[FCL_H_HALVES(BR)] FCL_H_ALIGNED;      \
    FCL_FWD_KV_LOCALS                                       \
    FCL_FWD_LOCALS_SPLIT                                    \
    FCL_WARP_SCRATCH

#if FCL_WGMMA || D_PAD > 64
/* Q by cp.async (unless negated: a plain load then), waited for once K's
 * first tile is requested (FCL_FWD_Q_ARRIVED), so that the copies overlap
 * (the wgmma piece's, and the mma.sync piece's above head_dim 64).  On the
 * mma.sync piece a work-group's fixed cost was about eight tiles' time at
 * head_dim 128 on the H200, part of it plain loads of Q, each waiting for
 * its read before the next (16 a work-item); by cp.async the forward ran
 * 1.01-1.12x at head_dim 128 and 1.03-1.11x at 256, and 0.98-1.03x at 64,
 * which keeps the plain loads below (NOTES.md, run 50). */
#define FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, negate)                                   \
    do {                                                                                       \
        if (negate)                                                                            \
            fcl_load_rows_h(Qh, BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows), D_PAD, \
                            true, lid);                                                        \
        else                                                                                   \
            fcl_load_rows_h_async(Qh, BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows), \
                                  D_PAD, lid);                                                 \
    } while (0)
#define FCL_FWD_Q_ARRIVED() FCL_TILES_ARRIVED()
#else
#define FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, negate)                                   \
    do {                                                                                       \
        fcl_load_rows_h(Qh, BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows), D_PAD,    \
                        (negate), lid);                                                        \
        FCL_TILE_WRITTEN();                                                                    \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    } while (0)
#endif

#if FCL_PAGE_SIZE > 0 && FCL_PAGE_SIZE % BC != 0
/* Key tiles across pages.  A copy's address needs its row's page, a read
 * of the page table; made just before the copies, that read stalls them a
 * memory latency every tile (16-key pages ran at 60-72% of the copy
 * bandwidth, contiguous caches at 92-96%: NOTES.md, run 16).  So the pages
 * of a work-item's rows are read a step ahead: the next tile's while this
 * one computes, and K's pages serve V's copies of the same keys. */

/* pg[k] = the page of the row of copy step k of a tile of nvalid keys. */
inline void fcl_key_tile_pages(int *pg, const fcl_rows t, int nvalid, int lid)
{
    const int chunks = D_PAD / 8;
    FCL_UNROLL
    for (int k = 0; k < FCL_KEY_TILE_STEPS; ++k) {
        const int e = lid + k * WG, r = FCL_TILE_COPY_ROW(e, chunks);
        pg[k] = e < BC * chunks && r < nvalid ? t.pages[(t.first + r) / FCL_PAGE_SIZE] : 0;
    }
}

/* fcl_load_rows_h_async of a key tile whose pages pg are known. */
inline void fcl_load_key_tile_paged_async(__local ushort *dst, __global const fcl_storage *src,
                                          const fcl_rows t, const int *pg, int nvalid, int width,
                                          int lid)
{
    const int chunks = D_PAD / 8;
    FCL_UNROLL
    for (int k = 0; k < FCL_KEY_TILE_STEPS; ++k) {
        const int e = lid + k * WG, r = FCL_TILE_COPY_ROW(e, chunks),
                  c = FCL_TILE_COPY_COL(e, chunks);
        const bool valid = r < nvalid && c * 8 < width;
        const long at = t.base + (long)pg[k] * t.page_stride +
                        (long)((t.first + r) % FCL_PAGE_SIZE) * t.ss + c * 8;
        if (e < BC * chunks)
            fcl_copy8_h_async(dst + FCL_H_AT_IN(BC, r, c * 8), src + (valid ? at : 0), valid);
    }
    fcl_cp_async_commit();
}

#define FCL_FWD_PG_STATE int pg_now[FCL_KEY_TILE_STEPS], pg_next[FCL_KEY_TILE_STEPS]
#define FCL_FWD_LOAD_K_INTO(dst, k_rows, c0, cols, pg)                                     \
    fcl_load_key_tile_paged_async(dst, K, fcl_tile_rows(k_rows, true, c0), pg, (cols), D_PAD, lid)
#define FCL_FWD_LOAD_V(v_rows, c0, cols)                                                \
    fcl_load_key_tile_paged_async(Vh, V, fcl_tile_rows(v_rows, true, c0), pg_now, (cols), \
                                  head_dim_v, lid)
#define FCL_FWD_PAGES_NOW(k_rows, c0, cols) \
    fcl_key_tile_pages(pg_now, fcl_tile_rows(k_rows, true, c0), (cols), lid)
#define FCL_FWD_PAGES_NEXT(k_rows, c0, cols) \
    fcl_key_tile_pages(pg_next, fcl_tile_rows(k_rows, true, c0), (cols), lid)
#define FCL_FWD_PAGES_ADVANCE()                                          \
    do {                                                                 \
        FCL_UNROLL                                                       \
        for (int k_ = 0; k_ < FCL_KEY_TILE_STEPS; ++k_) pg_now[k_] = pg_next[k_]; \
    } while (0)
#else
#define FCL_FWD_PG_STATE (void)0
#define FCL_FWD_LOAD_K_INTO(dst, k_rows, c0, cols, pg)                                   \
    fcl_load_rows_h_async(dst, BC, K, fcl_tile_rows(k_rows, true, c0), true, (cols), D_PAD, lid)
#define FCL_FWD_LOAD_V(v_rows, c0, cols)                                                     \
    fcl_load_rows_h_async(Vh, BC, V, fcl_tile_rows(v_rows, true, c0), true, (cols), head_dim_v, \
                          lid)
#define FCL_FWD_PAGES_NOW(k_rows, c0, cols) (void)0
#define FCL_FWD_PAGES_NEXT(k_rows, c0, cols) (void)0
#define FCL_FWD_PAGES_ADVANCE() (void)0
#endif

#define FCL_FWD_KEY_STATE  \
    FCL_FWD_PG_STATE;      \
    FCL_FWD_KBUF_STATE

#if FCL_WGMMA
/* the wgmma piece loads both at a tile's start: tile_nv_wgmma.cl */
#elif FCL_HAS(FCL_FEAT_SHARED_KV)
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols)                             \
    do {                                                                 \
        FCL_FWD_PAGES_NOW(k_rows, c0, cols);                             \
        FCL_FWD_LOAD_K_INTO(FCL_FWD_KT(0), k_rows, c0, cols, pg_now);    \
    } while (0)

/* This tile's K has arrived, and every warp is done with the other buffer
 * (the previous tile's): the next tile's K goes there at once. */
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim) \
    do {                                                                              \
        FCL_TILES_ARRIVED();                                                          \
        kcur_ = knext_;                                                               \
        if (more) {                                                                   \
            knext_ = kcur_ ^ 1;                                                       \
            FCL_FWD_PAGES_NEXT(k_rows, next, next_cols);                              \
            FCL_FWD_LOAD_K_INTO(FCL_FWD_KT(knext_), k_rows, next, next_cols, pg_next); \
        }                                                                             \
    } while (0)

/* P of every part visible to every warp (the split); nothing else to wait for */
#if FCL_WD > 1
#define FCL_FWD_TILE_MID(more, k_rows, next, cols) barrier(CLK_LOCAL_MEM_FENCE)
#else
#define FCL_FWD_TILE_MID(more, k_rows, next, cols) (void)0
#endif
#else
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols)                     \
    do {                                                         \
        FCL_FWD_PAGES_NOW(k_rows, c0, cols);                     \
        FCL_FWD_LOAD_K_INTO(Kh, k_rows, c0, cols, pg_now);       \
    } while (0)

/* K has arrived, and every warp is done with the previous tile's V; the
 * next tile's pages are read while this one computes. */
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim) \
    do {                                                                              \
        FCL_TILES_ARRIVED();                                                          \
        FCL_FWD_LOAD_V(v_rows, c0, cols);                                             \
        if (more)                                                                     \
            FCL_FWD_PAGES_NEXT(k_rows, next, next_cols);                              \
    } while (0)

/* V has arrived, and every warp is done with K (and has shared its P, the
 * split): fetch the next K. */
#define FCL_FWD_TILE_MID(more, k_rows, next, cols)                 \
    do {                                                           \
        FCL_TILES_ARRIVED();                                       \
        if (more) {                                                \
            FCL_FWD_LOAD_K_INTO(Kh, k_rows, next, cols, pg_next);  \
            FCL_FWD_PAGES_ADVANCE();                               \
        }                                                          \
    } while (0)
#endif

#define FCL_FWD_SET_P(s, i, j, p) (s[i][j] = (p)) /* P stays in the score registers */
#if !FCL_WGMMA /* the wgmma piece's products: tile_nv_wgmma.cl */
#define FCL_FWD_QK(s) \
    FCL_MMA_ABT(s, Qh, FCL_FWD_SROW0, FCL_FWD_KCUR + FCL_FWD_KEY0 * LDH, FCL_FWD_KN)
#if FCL_WD == 1
#define FCL_FWD_PV(acc, s) FCL_MMA_AB(acc, s, FCL_FWD_VT, BC)
#else
#define FCL_FWD_PV(acc, s)                                                                 \
    FCL_MMA_A_B(acc, 1, FCL_FWD_LOAD_P, Ps, FCL_FWD_VT, FCL_FWD_PART * FCL_FWD_NCOL,       \
                FCL_FWD_NCOL, BC)
#endif
#endif
/* O through Q's tile (flash_fwd.cl's FCL_FWD_STAGE_O; "outputs through a
 * tile", above) when a warp holds whole rows of O (FCL_WD 1) of a 16-bit
 * type.  On the mma.sync piece only up to head_dim 64: at 64 it measured
 * 1.01-1.13x on the H100, at 128 0.90-0.95x from N 4096 (its loop, not its
 * end, got slower; NOTES.md run 39). */
#ifndef FCL_MMA_STAGE_O_MAX_D /* a measurement build may set another */
#define FCL_MMA_STAGE_O_MAX_D 64
#endif
#if FCL_WD == 1 && FCL_STAGED_OUT && (FCL_WGMMA || D_PAD <= FCL_MMA_STAGE_O_MAX_D)
#define FCL_FWD_STAGE_O 1
#define FCL_FWD_O_STAGE(r, c, v) fcl_stage_o(Qh, FCL_H_AT_IN(BR, r, c), v)
#define FCL_FWD_O_STORE(o, base, ss, nrows, width) \
    fcl_store_staged_o(o, Qh, BR, base, ss, nrows, width, lid)
#endif

/* The operand of P V, V (common.cl, "non-finite operands"); with a shared
 * cache K's tile, whose products with Q are done by then */
#define FCL_FWD_V_BAD(X, p, c) FCL_H_BAD(FCL_FWD_VT, BC, p, c)
#define FCL_H_TILE_FCL_FWD_V_BAD(X) (FCL_FWD_VT)
#define FCL_H_ROWS_FCL_FWD_V_BAD BC
#define FCL_FWD_V_CLEAN(X, n) FCL_H_CLEAN(FCL_FWD_VT, BC, n)

#endif

/* ---- the backward's pieces (see flash_bwd.cl) ---------------------------
 * The streamed operand (K and V for dQ, Q and dO for dK/dV) has two
 * buffers: the next tile arrives by cp.async while this one is multiplied.
 * A tile begins by waiting for its copies; the barrier also tells that every
 * warp is done with the other buffer, which the next request then fills. */
#define FCL_BUF(tile, rows, buf) ((tile) + (buf) * FCL_H_HALVES(rows))

/* The stationary tiles (dQ's Q and dO, dK/dV's K and V), visible after the
 * first tile's FCL_TILES_ARRIVED.  Above head_dim 64 by cp.async, so that
 * they overlap the first streamed tile's copies (plain loads wait for each
 * read in turn): on the H200 the backward ran 1.02-1.12x at N 1024 and
 * 0.99-1.02x at 16384 (head_dim 128 and 256, both pieces); at 64 the wgmma
 * backward ran 0.96-0.97x at N 16384 (NOTES.md, run 50), so plain loads
 * stay there.  FCL_TILES_ARRIVED waits for every copy; flash_bwd.cl's
 * FCL_BWD_COPIES_DONE where no tile came. */
#if D_PAD > 64
#define FCL_BWD_LOAD_STATIONARY(T, rows, src, base, ss, n, width) \
    fcl_load_tile_h_async(T, rows, src, base, ss, n, width, lid)
#define FCL_BWD_COPIES_DONE() fcl_cp_async_wait_all()
#define FCL_DKDV_KV_ARRIVED() FCL_TILES_ARRIVED()
#else
#define FCL_BWD_LOAD_STATIONARY(T, rows, src, base, ss, n, width) \
    fcl_load_tile_h(T, rows, src, base, ss, n, width, false, lid)
#endif
/* The backward's locals for its streamed tiles' copies by the tensor memory
 * accelerator: the wgmma piece's (tile_nv_wgmma.cl, FCL_WG_STREAM_LOCALS),
 * none here */
#if !FCL_WGMMA || !FCL_WG_TMA
#define FCL_BWD_STREAM_LOCALS
#endif
#if defined(FCL_KERNEL_DQ)

/* Warps own query rows; S, dP and dS stay in registers. */
#define MB (BR / (16 * WARPS))
#define RM (2 * MB)
#define RN (BC / 4)
#define DN (D_PAD / 4)
#define FCL_BWD_IDS FCL_MMA_IDS

#define FCL_DQ_LOCALS                                       \
    __local ushort Qh[FCL_H_HALVES(BR)] FCL_H_ALIGNED;      \
    __local ushort dOh[FCL_H_HALVES(BR)] FCL_H_ALIGNED;     \
    __local ushort Kh[2 * FCL_H_HALVES(BC)] FCL_H_ALIGNED;  \
    __local ushort Vh[2 * FCL_H_HALVES(BC)] FCL_H_ALIGNED;  \
    FCL_BWD_STREAM_LOCALS                                   \
    FCL_WARP_SCRATCH

#define FCL_DQ_LOAD_Q_DO(q_base, q_ss, do_base, do_ss, rows, head_dim)                       \
    do {                                                                                     \
        FCL_BWD_LOAD_STATIONARY(Qh, BR, Q, (q_base), (q_ss), (rows), D_PAD);                 \
        FCL_BWD_LOAD_STATIONARY(dOh, BR, dO, (do_base), (do_ss), (rows), head_dim_v);        \
    } while (0)

#define FCL_DQ_PREFETCH_KV(k_base, k_ss, v_base, v_ss, cols, buf, c0)                          \
    do {                                                                                   \
        fcl_load_tile_h_async(FCL_BUF(Kh, BC, buf), BC, K, (k_base), (k_ss), (cols), D_PAD, lid); \
        fcl_load_tile_h_async(FCL_BUF(Vh, BC, buf), BC, V, (v_base), (v_ss), (cols), head_dim_v,  \
                              lid);                                                              \
    } while (0)

#define FCL_DQ_TILE_BEGIN(k_base, k_ss, v_base, v_ss, cols, head_dim, buf, n) \
    FCL_TILES_ARRIVED()

#if !FCL_WGMMA /* the wgmma piece's products: tile_nv_wgmma.cl */
#define FCL_DQ_S(s, buf) FCL_MMA_ABT(s, Qh, warp * 16 * MB, FCL_BUF(Kh, BC, buf), BC)
#define FCL_DQ_DP(dp, buf) FCL_MMA_ABT(dp, dOh, warp * 16 * MB, FCL_BUF(Vh, BC, buf), BC)
#define FCL_DQ_ACC(acc, s, buf) FCL_MMA_AB(acc, s, FCL_BUF(Kh, BC, buf), BC)
#endif
#define FCL_DQ_SET_DS(s, i, j, ds) (s[i][j] = (ds))
/* The operand of dS K, K (common.cl, "non-finite operands") */
#define FCL_DQ_K_BAD(buf, p, c) FCL_H_BAD(FCL_BUF(Kh, BC, buf), BC, p, c)
#define FCL_H_TILE_FCL_DQ_K_BAD(buf) FCL_BUF(Kh, BC, buf)
#define FCL_H_ROWS_FCL_DQ_K_BAD BC
#define FCL_DQ_K_CLEAN(buf, n) FCL_H_CLEAN(FCL_BUF(Kh, BC, buf), BC, n)

#elif defined(FCL_KERNEL_DKDV)

#if FCL_WD == 1
/* Warps own keys (the transposed score tile) and all of head_dim; P^T and
 * dS^T stay in registers. */
#define MB (BC / (16 * WARPS))
#define RM (2 * MB)
#define RN (BR / 4)
#define DN (D_PAD / 4)
#define FCL_DKDV_SROW0 (warp * 16 * MB)
#define FCL_DKDV_SQ0 0
#define FCL_DKDV_QN BR
#define FCL_DKDV_LOCALS_SPLIT
#else
/* FCL_WD > 1: the accumulators' head_dim columns split over WD warps,
 * as FlashAttention-2's dK/dV does at large head dims, so that dK and dV
 * both fit one launch (two accumulators of 2 * MB * d / 4 floats a lane
 * would not at d = 256).  The score tiles and the accumulators then have
 * different owners:
 *   S^T, dP^T: warp w computes 16 keys (block w % KB, KB = BC / 16) by the
 *     QN = BR / (WARPS / KB) query rows of part w / KB: MB = 1, RN = QN / 4;
 *     P^T and dS^T go to __local as 16-bit values (the precision the
 *     products take them in anyway), rows = keys, LDP halves apart;
 *   dV += P^T dO, dK += dS^T Q: warp w owns MBA blocks of 16 keys (from
 *     block (w / WD) * MBA) and the NCOL = D_PAD / WD columns from
 *     (w % WD) * NCOL, its A operand read back from __local by ldmatrix.
 * FCL_ACC_RM / FCL_ACC_ROW (common.cl) name the accumulators' rows. */
#define FCL_DKDV_KB (BC / 16)
#define FCL_DKDV_QPARTS (WARPS / FCL_DKDV_KB)
#define FCL_DKDV_QN (BR / FCL_DKDV_QPARTS)
#define FCL_DKDV_MBA (FCL_DKDV_KB * FCL_WD / WARPS)
#define FCL_DKDV_NCOL (D_PAD / FCL_WD)
#if WARPS % FCL_DKDV_KB != 0 || BR % (16 * FCL_DKDV_QPARTS) != 0 || \
    (FCL_DKDV_KB * FCL_WD) % WARPS != 0 || FCL_DKDV_MBA < 1 || FCL_DKDV_NCOL % 16 != 0
#error "FCL_WD: the warps must tile the score tile and the accumulators evenly"
#endif
#if FCL_DKDV_PART != 0
#error "FCL_WD: one launch for dK and dV"
#endif
#define MB 1
#define RM 2
#define RN (FCL_DKDV_QN / 4)
#define DN (FCL_DKDV_NCOL / 4)
#define FCL_DKDV_SROW0 ((warp % FCL_DKDV_KB) * 16)
#define FCL_DKDV_SQ0 ((warp / FCL_DKDV_KB) * FCL_DKDV_QN)
#undef FCL_ROW
#undef FCL_COL
#undef FCL_OCOL
#define FCL_ROW(i) (FCL_DKDV_SROW0 + grp + 8 * ((i) & 1))
#define FCL_COL(j) (FCL_DKDV_SQ0 + 8 * ((j) >> 1) + 2 * tig + ((j) & 1))
#define FCL_DKDV_AROW0 ((warp / FCL_WD) * FCL_DKDV_MBA * 16)
#define FCL_DKDV_ACOL0 ((warp % FCL_WD) * FCL_DKDV_NCOL)
#define FCL_ACC_RM (2 * FCL_DKDV_MBA)
#define FCL_ACC_ROW(i) (FCL_DKDV_AROW0 + ((i) >> 1) * 16 + grp + 8 * ((i) & 1))
#define FCL_OCOL(n) (FCL_DKDV_ACOL0 + 8 * ((n) >> 1) + 2 * tig + ((n) & 1))
#define LDP (BR + 8)
#define FCL_DKDV_LOCALS_SPLIT                   \
    __local ushort Pth[BC * LDP] FCL_ALIGNED;   \
    __local ushort dSth[BC * LDP] FCL_ALIGNED;
#endif
#define FCL_BWD_IDS FCL_MMA_IDS

#define FCL_DKDV_LOCALS                                     \
    __local ushort Kh[FCL_H_HALVES(BC)] FCL_H_ALIGNED;      \
    __local ushort Vh[FCL_H_HALVES(BC)] FCL_H_ALIGNED;      \
    __local ushort Qh[2 * FCL_H_HALVES(BR)] FCL_H_ALIGNED;  \
    __local ushort dOh[2 * FCL_H_HALVES(BR)] FCL_H_ALIGNED; \
    __local float lse_s[2 * BR] FCL_ALIGNED;                \
    __local float dlt_s[2 * BR] FCL_ALIGNED;                \
    FCL_DQ_LOCALS_FUSED                                     \
    FCL_DKDV_LOCALS_SPLIT                                   \
    FCL_BWD_STREAM_LOCALS                                   \
    FCL_WARP_SCRATCH

/* dK through K's tile and dV through V's (flash_bwd.cl's FCL_DKDV_STAGE;
 * "outputs through a tile", above), on both pieces, either layout of the
 * accumulators (FCL_WD 1 or split: the work-items' accumulators cover the
 * tiles' BC x D_PAD as they cover the outputs).  A column pair goes in as
 * one 4-byte word of fcl_pack2, the rounding of fcl_store_pair (the
 * backward's outputs are of the storage type), so the outputs are bitwise
 * those of the pairs' stores.  A word a pair also keeps the kernel's end
 * small: a value at a time (fcl_stage_o), fp16's rounding (libclc's
 * vstore_half_rte) makes it too large for clang's NVPTX build
 * (tools/wgmma_ptx_check.sh) to unroll in some plans at head_dim 128 and
 * 256 ("loop not unrolled").  The tiles are stationary, read only by the
 * loop's products (the fused dQ's too), and have BC rows of D_PAD
 * columns, V's as well. */
#if FCL_STAGED_OUT
#define FCL_DKDV_STAGE 1
#define FCL_DKDV_STAGE_PAIR(T, r, c, v0, v1) \
    (*(__local uint *)((T) + FCL_H_AT_IN(BC, r, c)) = fcl_pack2((v0), (v1)))
#define FCL_DKDV_DK_STAGE(r, c, v0, v1) FCL_DKDV_STAGE_PAIR(Kh, r, c, v0, v1)
#define FCL_DKDV_DV_STAGE(r, c, v0, v1) FCL_DKDV_STAGE_PAIR(Vh, r, c, v0, v1)
#define FCL_DKDV_DK_STORE(o, base, ss, nrows, width) \
    fcl_store_staged_o(o, Kh, BC, base, ss, nrows, width, lid)
#define FCL_DKDV_DV_STORE(o, base, ss, nrows, width) \
    fcl_store_staged_o(o, Vh, BC, base, ss, nrows, width, lid)
#endif

/* As dQ's (above): visible after the first block's FCL_TILES_ARRIVED, or
 * FCL_DKDV_KV_ARRIVED before the fused dQ's scan. */
#define FCL_DKDV_LOAD_KV(k_base, k_ss, v_base, v_ss, cols, head_dim)                         \
    do {                                                                                     \
        FCL_BWD_LOAD_STATIONARY(Kh, BC, K, (k_base), (k_ss), (cols), D_PAD);                 \
        FCL_BWD_LOAD_STATIONARY(Vh, BC, V, (v_base), (v_ss), (cols), head_dim_v);            \
    } while (0)

#define FCL_DKDV_PREFETCH_Q_DO(q_base, q_ss, do_base, do_ss, rows, buf, r0, g)                     \
    do {                                                                                        \
        fcl_load_tile_h_async(FCL_BUF(Qh, BR, buf), BR, Q, (q_base), (q_ss), (rows), D_PAD, lid); \
        fcl_load_tile_h_async(FCL_BUF(dOh, BR, buf), BR, dO, (do_base), (do_ss), (rows),          \
                              head_dim_v, lid);                                                   \
    } while (0)

#define FCL_DKDV_BLOCK_BEGIN(q_base, q_ss, do_base, do_ss, rows, head_dim, buf, n) \
    FCL_TILES_ARRIVED()

#if !FCL_WGMMA /* the wgmma piece's products: tile_nv_wgmma.cl */
#define FCL_DKDV_ST(st, buf)                                                                \
    FCL_MMA_ABT(st, Kh, FCL_DKDV_SROW0, FCL_BUF(Qh, BR, buf) + FCL_DKDV_SQ0 * LDH, FCL_DKDV_QN)
#define FCL_DKDV_DPT(dpt, buf)                                                              \
    FCL_MMA_ABT(dpt, Vh, FCL_DKDV_SROW0, FCL_BUF(dOh, BR, buf) + FCL_DKDV_SQ0 * LDH, FCL_DKDV_QN)
#endif
#define FCL_DKDV_SET(st, dpt, i, j, p, ds) (st[i][j] = (p), dpt[i][j] = (ds))
/* The operands of P^T dO and dS^T Q (common.cl, "non-finite operands") */
#define FCL_DKDV_DO_BAD(buf, p, c) FCL_H_BAD(FCL_BUF(dOh, BR, buf), BR, p, c)
#define FCL_H_TILE_FCL_DKDV_DO_BAD(buf) FCL_BUF(dOh, BR, buf)
#define FCL_H_ROWS_FCL_DKDV_DO_BAD BR
#define FCL_DKDV_DO_CLEAN(buf, n) FCL_H_CLEAN(FCL_BUF(dOh, BR, buf), BR, n)
#define FCL_DKDV_Q_BAD(buf, p, c) FCL_H_BAD(FCL_BUF(Qh, BR, buf), BR, p, c)
#define FCL_H_TILE_FCL_DKDV_Q_BAD(buf) FCL_BUF(Qh, BR, buf)
#define FCL_H_ROWS_FCL_DKDV_Q_BAD BR
#define FCL_DKDV_Q_CLEAN(buf, n) FCL_H_CLEAN(FCL_BUF(Qh, BR, buf), BR, n)
#define FCL_DKDV_SHARE(T, x, LD) FCL_SHARE_TILE(T, x, 4 * RN, LD)
#if FCL_WGMMA
/* FCL_DKDV_ACC: tile_nv_wgmma.cl */
#elif FCL_WD == 1
#define FCL_DKDV_ACC(dk, dv, st, dpt, buf)                              \
    do {                                                               \
        if (FCL_WANT_DV) FCL_MMA_AB(dv, st, FCL_BUF(dOh, BR, buf), BR);  \
        if (FCL_WANT_DK) FCL_MMA_AB(dk, dpt, FCL_BUF(Qh, BR, buf), BR);  \
    } while (0)
#else
/* acc += TA TB over BR query rows: TA = this warp's keys of a shared score
 * tile (rows = keys, as stored: ldmatrix as FCL_MMA_ABT's A), TB = a Q or
 * dO tile (rows = query rows), the warp's NCOL columns. */
#define FCL_DKDV_LOAD_ST(TA, mb, kk, a)                                                     \
    fcl_ldmatrix_x4(TA, (FCL_DKDV_AROW0 + 16 * (mb) + (lane & 7) + ((lane >> 3) & 1) * 8) * LDP \
                            + (kk) * 16 + (lane >> 4) * 8, a)
/* P^T and dS^T through __local; they are free again after the next
 * block's first barrier (FCL_DKDV_BLOCK_BEGIN). */
#define FCL_DKDV_ACC(dk, dv, st, dpt, buf)                    \
    do {                                                     \
        FCL_DKDV_SHARE(Pth, st, LDP);                        \
        FCL_DKDV_SHARE(dSth, dpt, LDP);                      \
        barrier(CLK_LOCAL_MEM_FENCE);                        \
        FCL_MMA_A_B(dv, FCL_DKDV_MBA, FCL_DKDV_LOAD_ST, Pth, FCL_BUF(dOh, BR, buf), \
                    FCL_DKDV_ACOL0, FCL_DKDV_NCOL, BR);                             \
        FCL_MMA_A_B(dk, FCL_DKDV_MBA, FCL_DKDV_LOAD_ST, dSth, FCL_BUF(Qh, BR, buf), \
                    FCL_DKDV_ACOL0, FCL_DKDV_NCOL, BR);                             \
    } while (0)
#endif

#if FCL_FUSED_DQ
/* dQ in the dK/dV kernel (flash_bwd.cl): the Q block's share dS K of this
 * key block, from dS^T in __local as 16-bit values (the precision dK's
 * product already uses), into the register tile dqs[FCL_DQ_RM][FCL_DQ_DN],
 * whose register (i, n) is query row FCL_DQ_ROW(i) and head_dim column
 * FCL_DQ_COL(n) (FCL_DKDV_DQ_SHARE; the wgmma piece's own form:
 * tile_nv_wgmma.cl); then staged and added (below, both pieces).
 * FCL_DQ_DS_AT(c, q): where dS^T's element (key c, query row q) lies. */
#if FCL_WGMMA
/* rows = keys in the 128-byte swizzle, 64-column blocks of query rows */
#define FCL_DQ_DS_AT(c, q) FCL_WG_AT(BC, c, q)
#else
/* mma.sync: rows = keys, LDS halves apart (8 of padding: the 8 rows of an
 * ldmatrix fall in different banks); the warps split the Q block:
 * FCL_DQ_MQ blocks of 16 query rows each and all of head_dim, or, with
 * fewer row blocks than warps, one row block and a share of the columns.
 * A = dS (query rows x keys) is dS^T read with ldmatrix .trans; B = K as
 * stored, as in FCL_MMA_AB. */
#define LDS (BR + 8)
#define FCL_DQ_DS_AT(c, q) ((c) * LDS + (q))
#define FCL_DQ_ROWB (BR / 16)
#define FCL_DQ_MQ (FCL_DQ_ROWB >= WARPS ? FCL_DQ_ROWB / WARPS : 1)
#define FCL_DQ_NCOL (FCL_DQ_ROWB >= WARPS ? D_PAD : D_PAD / (WARPS / FCL_DQ_ROWB))
#define FCL_DQ_RM (2 * FCL_DQ_MQ)
#define FCL_DQ_DN (FCL_DQ_NCOL / 4)
#if FCL_DQ_NCOL % 16 != 0
#error "fused dQ: each warp's share of head_dim must be a multiple of 16"
#endif
#if FCL_WD > 1
/* the columns split: FCL_DKDV_ACC stored dS^T (LDP = LDS) and waited */
#define FCL_DQ_DS_TILE dSth
#define FCL_DQ_DS_STORE(dpt)
#define FCL_DQ_DS_LOCAL
#else
#define FCL_DQ_DS_TILE dSh
#define FCL_DQ_DS_STORE(dpt)                   \
    FCL_DKDV_SHARE(dSh, dpt, LDS);             \
    barrier(CLK_LOCAL_MEM_FENCE)
#define FCL_DQ_DS_LOCAL __local ushort dSh[BC * LDS] FCL_ALIGNED;
#endif
/* First query row block and first column of this warp's share. */
#define FCL_DQ_ROWBLK0 (FCL_DQ_ROWB >= WARPS ? warp * FCL_DQ_MQ : warp % FCL_DQ_ROWB)
#define FCL_DQ_COL0 (FCL_DQ_ROWB >= WARPS ? 0 : (warp / FCL_DQ_ROWB) * FCL_DQ_NCOL)
/* Register (i, n) of the share: tile row and head_dim column. */
#define FCL_DQ_ROW(i) ((FCL_DQ_ROWBLK0 + ((i) >> 1)) * 16 + grp + 8 * ((i) & 1))
#define FCL_DQ_COL(n) (FCL_DQ_COL0 + 8 * ((n) >> 1) + 2 * tig + ((n) & 1))

#define FCL_DQ_LOAD_DS(TA, mq, kk, a)                                                      \
    fcl_ldmatrix_x4_trans(TA, ((kk) * 16 + (lane >> 4) * 8 + (lane & 7)) * LDS               \
                                   + (FCL_DQ_ROWBLK0 + (mq)) * 16 + ((lane >> 3) & 1) * 8, a)
#define FCL_DKDV_DQ_SHARE(dqs, dpt)                                                          \
    do {                                                                                     \
        FCL_DQ_DS_STORE(dpt);                                                                \
        FCL_UNROLL                                                                           \
        for (int i_ = 0; i_ < FCL_DQ_RM; ++i_)                                               \
            FCL_UNROLL                                                                       \
            for (int n_ = 0; n_ < FCL_DQ_DN; ++n_) dqs[i_][n_] = 0.0f;                       \
        FCL_MMA_A_B(dqs, FCL_DQ_MQ, FCL_DQ_LOAD_DS, FCL_DQ_DS_TILE, Kh, FCL_DQ_COL0,           \
                    FCL_DQ_NCOL, BC);                                                        \
    } while (0)
#endif /* mma.sync's share */
/* the share in fp32, staged for the adds, LDQ floats a row */
#define LDQ (D_PAD + 4)
#define FCL_DQ_LOCALS_FUSED                    \
    FCL_DQ_DS_LOCAL                            \
    __local float dQs[BR * LDQ] FCL_ALIGNED;

/* Adds the share (rows [0, rows), head_dim columns) into dq (row stride
 * head_dim) through dQs, so that a warp's adds cover whole rows: 32
 * consecutive floats per instruction, or 4 per work-item with FCL_RED_V4.
 * (Adding from the registers' layout, four lanes to 8 columns of 8 rows,
 * used a quarter of each 32-byte sector and ran the whole backward at 0.45x
 * the separate dQ kernel's speed: NOTES.md.)  dQs is free again after the
 * next barrier. */
#define FCL_DKDV_DQ_STAGE(dqs)                                                             \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int i_ = 0; i_ < FCL_DQ_RM; ++i_)                                             \
            FCL_UNROLL                                                                     \
            for (int n_ = 0; n_ < FCL_DQ_DN; n_ += 2)                                      \
                *(__local float2 *)(dQs + FCL_DQ_ROW(i_) * LDQ + FCL_DQ_COL(n_)) =         \
                    (float2)(dqs[i_][n_], dqs[i_][n_ + 1]);                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    } while (0)
#if FCL_RED_V4
#define FCL_DKDV_DQ_ADD(dq, rows, head_dim)                                                \
    FCL_FOR_TILE_CHUNKS(e_, BR * (D_PAD / 4), lid) {                                       \
        const int r_ = e_ / (D_PAD / 4), c_ = (e_ - r_ * (D_PAD / 4)) * 4;                 \
        if (r_ < (rows) && c_ < (head_dim))                                                \
            fcl_red_add4((dq) + (long)r_ * (head_dim) + c_, vload4(0, dQs + r_ * LDQ + c_)); \
    }
#else
#define FCL_DKDV_DQ_ADD(dq, rows, head_dim)                                                \
    FCL_FOR_TILE_CHUNKS(e_, BR * D_PAD, lid) {                                             \
        const int r_ = e_ / D_PAD, c_ = e_ - r_ * D_PAD;                                   \
        if (r_ < (rows) && c_ < (head_dim))                                                \
            fcl_red_add((dq) + (long)r_ * (head_dim) + c_, dQs[r_ * LDQ + c_]);            \
    }
#endif

/* The exact share of one element when the K tile holds a non-finite value
 * (rare; common.cl, "non-finite operands"): NaN when the row sees a key
 * whose K is non-finite in this column, else the sum over the other keys. */
inline float fcl_dq_exact(__local const ushort *ds, __local const ushort *kt, int qrow, int col,
                          int cols, const fcl_mask mask, int seqlen_q, int r0, int c0)
{
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) {
        const ushort kh = kt[FCL_H_AT_IN(BC, c, col)];
        if (fcl_h_nonfinite(kh)) {
            if (fcl_visible(mask, r0 + qrow, c0 + c) && r0 + qrow < seqlen_q) return NAN;
            continue;
        }
        sum = fma(fcl_h_value(ds[FCL_DQ_DS_AT(c, qrow)]), fcl_h_value(kh), sum);
    }
    return sum;
}
#else
#define FCL_DQ_LOCALS_FUSED
#endif

#endif

#endif /* FCL_TILE_MMA */
