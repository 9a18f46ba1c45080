/* tile_portable.cl - the portable inner pieces: tile products with plain
 * multiply-adds on __local tiles, and row reductions through __local memory.
 * Every kernel of the family is written against these; a vendor fast path
 * replaces this file's pieces, not the kernels.
 *
 * Thread layout (all kernels): work-item lid is (ty, tx) = (lid / TX, lid % TX).
 * A work-item owns RM consecutive tile rows, ty*RM + i, and the columns
 * tx + TX*j: consecutive work-items read consecutive columns, so the operand
 * that differs per work-item is read without bank conflicts, and the one
 * shared by a row group (TX work-items) is a broadcast.
 */

#define WG (TY * TX)

/* On GPUs, loops over a work-item's register arrays must be unrolled, or the
 * arrays move to (slow) private memory.  CPUs (PoCL) vectorise across
 * work-items instead, and forced unrolling only makes their builds slower,
 * so the host sets FCL_FORCE_UNROLL for GPUs only. */
#if FCL_FORCE_UNROLL
#define FCL_UNROLL _Pragma("unroll")
#else
#define FCL_UNROLL
#endif

/* acc[i][j] += sum_{k < KLEN} A[k*AK + i] * B[j*BJ + k*BK]
 * A: the row operand, already offset to this work-item's first row; shared by
 *    the TX work-items of a row group (a broadcast).  When ROWS and AK are
 *    multiples of 4 it is read as float4 (one 16-byte load per 4 rows): the
 *    __local arrays are 16-byte aligned and every row offset is a multiple of 4.
 * B: the column operand, already offset to this work-item's first column;
 *    different per work-item, read as scalars without bank conflicts. */
#define FCL_TILE_PRODUCT(acc, ROWS, COLS, KLEN, A, AK, B, BJ, BK)                  \
    do {                                                                           \
        __local const float *a_ = (A);                                             \
        __local const float *b_ = (B);                                             \
        _Pragma("unroll 4")                                                        \
        for (int k_ = 0; k_ < (KLEN); ++k_) {                                      \
            float av_[ROWS], bv_[COLS];                                            \
            if (FCL_FORCE_UNROLL && (ROWS) % 4 == 0 && (AK) % 4 == 0) {            \
                _Pragma("unroll")                                                  \
                for (int i_ = 0; i_ < (ROWS); i_ += 4) {                           \
                    const float4 v_ = *(__local const float4 *)(a_ + k_ * (AK) + i_); \
                    av_[i_] = v_.x;                                                \
                    av_[i_ + 1] = v_.y;                                            \
                    av_[i_ + 2] = v_.z;                                            \
                    av_[i_ + 3] = v_.w;                                            \
                }                                                                  \
            } else {                                                               \
                _Pragma("unroll")                                                  \
                for (int i_ = 0; i_ < (ROWS); ++i_) av_[i_] = a_[k_ * (AK) + i_];  \
            }                                                                      \
            _Pragma("unroll")                                                      \
            for (int j_ = 0; j_ < (COLS); ++j_) bv_[j_] = b_[j_ * (BJ) + k_ * (BK)]; \
            _Pragma("unroll")                                                      \
            for (int i_ = 0; i_ < (ROWS); ++i_) {                                  \
                _Pragma("unroll")                                                  \
                for (int j_ = 0; j_ < (COLS); ++j_)                                \
                    acc[i_][j_] = mad(av_[i_], bv_[j_], acc[i_][j_]);              \
            }                                                                      \
        }                                                                          \
    } while (0)

/* 16-byte alignment for __local tiles read as float4. */
#define FCL_ALIGNED __attribute__((aligned(16)))

/* The row stride of a transposed tile of n rows: 4 floats of padding from 4
 * rows up (float4 reads, no bank conflicts), none below, where no float4 is
 * read and padding would be most of the tile (1- and 2-row plans of devices
 * with 16 KiB of local memory at head_dim 256).  Host: padded_ld in plan.c. */
#define FCL_LD_PAD(n) ((n) >= 4 ? (n) + 4 : (n))

/* Row reductions across the TX work-items that share rows ty*RM .. ty*RM+RM-1.
 * `red` holds RROWS*TX floats.  Every work-item reduces in the same order, so
 * all of a row group get bitwise the same result.  Contains one barrier; the
 * caller must put a barrier between two uses of `red`. */
inline void fcl_rows_max(float v[], int nrows, __local float *red, int ty, int tx)
{
    for (int i = 0; i < nrows; ++i) red[(ty * nrows + i) * TX + tx] = v[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < nrows; ++i) {
        __local const float *r = red + (ty * nrows + i) * TX;
        float x = r[0];
        for (int t = 1; t < TX; ++t) x = fmax(x, r[t]);
        v[i] = x;
    }
}

inline void fcl_rows_sum(float v[], int nrows, __local float *red, int ty, int tx)
{
    for (int i = 0; i < nrows; ++i) red[(ty * nrows + i) * TX + tx] = v[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = 0; i < nrows; ++i) {
        __local const float *r = red + (ty * nrows + i) * TX;
        float x = r[0];
        for (int t = 1; t < TX; ++t) x += r[t];
        v[i] = x;
    }
}

/* Whether `x` holds for any work-item of the group: the same answer for
 * every work-item, which must all call it (one barrier; none when the group
 * is one work-item).  `flag` is __local scratch, set to -1 before the first
 * call and written only by work-items whose x holds, with `tag`: a value
 * that differs from the previous call's (the tile's first key, say), so it
 * needs no reset.  Two calls with one flag need a barrier between them (the
 * next tile's). */
inline bool fcl_group_any(bool x, volatile __local int *flag, int tag)
{
#if WG == 1
    (void)flag;
    (void)tag;
    return x;
#else
    if (x)
        atomic_xchg(flag, tag);
    barrier(CLK_LOCAL_MEM_FENCE);
    return *flag == tag;
#endif
}

/* The exact path's CLEAN for a __local tile (common.cl, "non-finite
 * operands"): the elements of rows [0, nrows) for which BAD_VALUE holds
 * become 0, once every work-item is done with them (a barrier before and
 * after). */
#define FCL_ZERO_NONFINITE(tile, ld, nrows, BAD_VALUE)                  \
    do {                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                   \
        FCL_FOR_SHARE(p_, c_, nrows, D_PAD)                             \
            if (BAD_VALUE((tile)[p_ * (ld) + c_])) (tile)[p_ * (ld) + c_] = 0; \
        barrier(CLK_LOCAL_MEM_FENCE);                                   \
    } while (0)
#define FCL_NOT_FINITE(x) (!isfinite(x))

/* Copy rows [0, nvalid) of a (rows x head_dim) block (row r at
 * fcl_row_offset(src_rows, keys, r)) into a __local tile, zero-filling rows
 * >= nvalid and columns >= head_dim up to D_PAD.  Natural layout:
 * dst[r*ld + k].  Consecutive work-items read consecutive elements of a row
 * (coalesced). */
inline void fcl_load_rows(__local float *dst, int ld, int nrows, __global const fcl_storage *src,
                          const fcl_rows src_rows, bool keys, int nvalid, int head_dim, int lid)
{
    for (int e = lid; e < nrows * D_PAD; e += WG) {
        int r = e / D_PAD, k = e - r * D_PAD;
        float x = 0.0f;
        if (r < nvalid && k < head_dim) x = fcl_load(src, fcl_row_offset(src_rows, keys, r) + k);
        dst[r * ld + k] = x;
    }
}

/* The same, stored transposed: dst[k*ld + r], negated when `negate`. */
inline void fcl_load_rows_t(__local float *dst, int ld, int nrows, __global const fcl_storage *src,
                            const fcl_rows src_rows, bool keys, int nvalid, int head_dim,
                            bool negate, int lid)
{
    for (int e = lid; e < nrows * D_PAD; e += WG) {
        int r = e / D_PAD, k = e - r * D_PAD;
        float x = 0.0f;
        if (r < nvalid && k < head_dim) x = fcl_load(src, fcl_row_offset(src_rows, keys, r) + k);
        dst[k * ld + r] = negate ? -x : x;
    }
}

/* The two for rows at a fixed stride `ss` from element `base` (strided
 * rows without pages: key-side rows of no page table). */
inline void fcl_load_tile(__local float *dst, int ld, int nrows, __global const fcl_storage *src,
                          long base, long ss, int nvalid, int head_dim, int lid)
{
    fcl_load_rows(dst, ld, nrows, src, fcl_rows_strided(base, ss), true, nvalid, head_dim, lid);
}

inline void fcl_load_tile_t(__local float *dst, int ld, int nrows, __global const fcl_storage *src,
                            long base, long ss, int nvalid, int head_dim, bool negate, int lid)
{
    fcl_load_rows_t(dst, ld, nrows, src, fcl_rows_strided(base, ss), true, nvalid, head_dim,
                    negate, lid);
}

#if !FCL_TILE_MMA
/* The edge tiles' non-finite scan (common.cl), element by element. */
#define FCL_GUARD_SCAN FCL_SCAN_SHARE
#endif

#if !FCL_TILE_MMA
/* Natural units and exp: fp32 storage keeps the rounding of a plain softmax
 * (exp2 with log2(e) folded into the scores adds two roundings). */
#define FCL_EXP(x) exp(x)
#define FCL_EXP_UNITS(x) (x)
#define FCL_NATURAL_UNITS(x) (x)

#define FCL_PORTABLE_IDS                     \
    const int lid = (int)get_local_id(0);    \
    const int ty = lid / TX, tx = lid - (lid / TX) * TX

/* Register tile coordinates: rows ty*RM + i, columns tx + TX*j. */
#define FCL_ROW(i) (ty * RM + (i))
#define FCL_COL(j) (tx + TX * (j))
#define FCL_OCOL(n) (tx + TX * (n))
#define FCL_FIRST_IN_ROW (tx == 0)

/* x[RM][RN] = 0 */
#define FCL_ZERO_TILE(x)                                \
    do {                                                \
        FCL_UNROLL                                      \
        for (int i_ = 0; i_ < RM; ++i_)                 \
            FCL_UNROLL                                  \
            for (int j_ = 0; j_ < RN; ++j_) x[i_][j_] = 0.0f; \
    } while (0)
#endif

/* ---- the forward's pieces (see flash_fwd.cl), portable version ------------
 * A work-item owns rows ty*RM .. ty*RM+RM-1 of the Q block, key columns
 * tx + TX*j of the score tile and head_dim columns tx + TX*n of the output.
 * __local tiles (fp32):
 *   Qt [D_PAD][QT_LD]  Q block transposed: a row group reads its RM rows of
 *                      one dimension as one contiguous run (broadcast)
 *   Ks [BC][KS_LD]     K block, odd row stride: work-items read different
 *                      keys of one dimension without bank conflicts
 *   Vs [BC][D_PAD]     V block
 *   Pt [BC][PT_LD]     probabilities, transposed like Qt
 *   red[BR][TX]        row reductions
 * With a shared K/V cache (FCL_FEAT_SHARED_KV: V is the first head_dim_v
 * columns of K's rows) there is no Vs: the key tile is loaded once into Ks
 * and P V reads its columns there (Vs names Ks; the accumulator's columns
 * from head_dim_v on then sum K's other columns, which are never stored). */
#if defined(FCL_KERNEL_FORWARD) && !FCL_TILE_MMA && !FCL_TILE_CPU

#define RM (BR / TY)
#define RN (BC / TX)
#define DN (D_PAD / TX)
#define QT_LD FCL_LD_PAD(BR)
#define KS_LD (D_PAD + 1)
#define PT_LD FCL_LD_PAD(BR)
#if FCL_HAS(FCL_FEAT_SHARED_KV)
#define VS_LD KS_LD
#define FCL_FWD_V_TILE (void)0
#define Vs Ks
#else
#define VS_LD (D_PAD)
#define FCL_FWD_V_TILE __local float Vs[BC * VS_LD] FCL_ALIGNED
#endif

#define FCL_FWD_IDS FCL_PORTABLE_IDS

#define FCL_FWD_LOCALS                                  \
    __local float Qt[D_PAD * QT_LD] FCL_ALIGNED;        \
    __local float Ks[BC * KS_LD] FCL_ALIGNED;           \
    FCL_FWD_V_TILE;                                     \
    __local float Pt[BC * PT_LD] FCL_ALIGNED;           \
    __local float red[BR * TX] FCL_ALIGNED

/* Q rows and K/V rows are fcl_rows (common.cl), tiles named by their
 * first row. */
#define FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, negate)                                 \
    fcl_load_rows_t(Qt, QT_LD, BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows),       \
                    (head_dim), (negate), lid)

/* No background copies: K and V are loaded together at the start of a
 * tile (K alone when V is its columns). */
#define FCL_FWD_KEY_STATE (void)0
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols) ((void)0)
#if FCL_HAS(FCL_FEAT_SHARED_KV)
#define FCL_FWD_LOAD_V(v_rows, c0, cols) ((void)0)
#else
#define FCL_FWD_LOAD_V(v_rows, c0, cols)                                                       \
    fcl_load_rows(Vs, VS_LD, BC, V, fcl_tile_rows(v_rows, true, c0), true, (cols), head_dim_v, lid)
#endif
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim)          \
    do {                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */                       \
        fcl_load_rows(Ks, KS_LD, BC, K, fcl_tile_rows(k_rows, true, c0), true, (cols), (head_dim), \
                      lid);                                                                      \
        FCL_FWD_LOAD_V(v_rows, c0, cols);                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
    } while (0)
#define FCL_FWD_TILE_MID(more, k_rows, next, cols) ((void)0)

#define FCL_FWD_QK(s)                                                                      \
    do {                                                                                   \
        FCL_ZERO_TILE(s);                                                                  \
        FCL_TILE_PRODUCT(s, RM, RN, D_PAD, Qt + ty * RM, QT_LD, Ks + tx * KS_LD, TX * KS_LD, 1); \
    } while (0)

#define FCL_ROWS_MAX(v) fcl_rows_max(v, RM, red, ty, tx)
#define FCL_ROWS_SUM(v) fcl_rows_sum(v, RM, red, ty, tx)

#define FCL_FWD_SET_P(s, i, j, p) (Pt[(tx + TX * (j)) * PT_LD + ty * RM + (i)] = (p))

/* The operand of P V, V (common.cl, "non-finite operands"): its
 * head_dim_v columns (past them a shared tile holds K's other columns) */
#define FCL_FWD_V_BAD(X, p, c) ((c) < head_dim_v && FCL_NOT_FINITE(Vs[(p) * VS_LD + (c)]))
#define FCL_FWD_V_CLEAN(X, n) FCL_ZERO_NONFINITE(Vs, VS_LD, (n), FCL_NOT_FINITE)

#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE); /* every P of the tile is in Pt */                   \
        FCL_TILE_PRODUCT(acc, RM, DN, BC, Pt + ty * RM, PT_LD, Vs + tx, TX, VS_LD);         \
    } while (0)

#endif

/* ---- the backward's pieces (see flash_bwd.cl), portable version ---------- */
#if defined(FCL_KERNEL_DQ) && !FCL_TILE_MMA && !FCL_TILE_CPU

/* __local: Qt, dOt [D_PAD][QT_LD] (transposed), Ks, Vs [BC][KS_LD], dSt
 * [BC][ST_LD]: dS goes through __local memory, transposed like Qt, to be the
 * row operand of dQ += dS K. */
#define RM (BR / TY)
#define RN (BC / TX)
#define DN (D_PAD / TX)
#define QT_LD FCL_LD_PAD(BR)
#define KS_LD (D_PAD + 1)
#define ST_LD FCL_LD_PAD(BR)
#define FCL_BWD_IDS FCL_PORTABLE_IDS

#define FCL_DQ_LOCALS                                   \
    __local float Qt[D_PAD * QT_LD] FCL_ALIGNED;        \
    __local float dOt[D_PAD * QT_LD] FCL_ALIGNED;       \
    __local float Ks[BC * KS_LD] FCL_ALIGNED;           \
    __local float Vs[BC * KS_LD] FCL_ALIGNED;           \
    __local float dSt[BC * ST_LD] FCL_ALIGNED

#define FCL_DQ_LOAD_Q_DO(q_base, q_ss, do_base, do_ss, rows, head_dim)                           \
    do {                                                                                         \
        fcl_load_tile_t(Qt, QT_LD, BR, Q, (q_base), (q_ss), (rows), (head_dim), false, lid);     \
        fcl_load_tile_t(dOt, QT_LD, BR, dO, (do_base), (do_ss), (rows), head_dim_v, false, lid); \
    } while (0)

/* No background copies: K and V are loaded when a tile begins (one buffer). */
#define FCL_DQ_PREFETCH_KV(k_base, k_ss, v_base, v_ss, cols, buf, c0) ((void)0)
#define FCL_DQ_TILE_BEGIN(k_base, k_ss, v_base, v_ss, cols, head_dim, buf, n)           \
    do {                                                                             \
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */           \
        fcl_load_tile(Ks, KS_LD, BC, K, (k_base), (k_ss), (cols), (head_dim), lid);  \
        fcl_load_tile(Vs, KS_LD, BC, V, (v_base), (v_ss), (cols), head_dim_v, lid);  \
        barrier(CLK_LOCAL_MEM_FENCE);                                                \
    } while (0)

#define FCL_DQ_S(s, buf)                                                                        \
    do {                                                                                   \
        FCL_ZERO_TILE(s);                                                                  \
        FCL_TILE_PRODUCT(s, RM, RN, D_PAD, Qt + ty * RM, QT_LD, Ks + tx * KS_LD, TX * KS_LD, 1); \
    } while (0)
#define FCL_DQ_DP(dp, buf)                                                                      \
    do {                                                                                   \
        FCL_ZERO_TILE(dp);                                                                 \
        FCL_TILE_PRODUCT(dp, RM, RN, D_PAD, dOt + ty * RM, QT_LD, Vs + tx * KS_LD, TX * KS_LD, 1); \
    } while (0)
#define FCL_DQ_SET_DS(s, i, j, ds) (dSt[(tx + TX * (j)) * ST_LD + ty * RM + (i)] = (ds))
/* The operand of dS K, K (common.cl, "non-finite operands") */
#define FCL_DQ_K_BAD(buf, p, c) FCL_NOT_FINITE(Ks[(p) * KS_LD + (c)])
#define FCL_DQ_K_CLEAN(buf, n) FCL_ZERO_NONFINITE(Ks, KS_LD, (n), FCL_NOT_FINITE)
#define FCL_DQ_ACC(acc, s, buf)                                                                 \
    do {                                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE); /* every dS of the tile is in dSt */                 \
        FCL_TILE_PRODUCT(acc, RM, DN, BC, dSt + ty * RM, ST_LD, Ks + tx, TX, KS_LD);        \
    } while (0)

#elif defined(FCL_KERNEL_DKDV) && !FCL_TILE_MMA && !FCL_TILE_CPU

/* Here the score tile is transposed: rows are keys (BC = TY*RM), columns
 * are query rows (BR = TX*RN).  __local: Kt, Vt [D_PAD][KT_LD] (transposed),
 * Qs, dOs [BR][QS_LD], Ps, dSs [BR][PS_LD], lse_s, dlt_s [2][BR] (the body
 * fills LSE and delta of the next Q block while this one is used). */
#define RM (BC / TY)
#define RN (BR / TX)
#define DN (D_PAD / TX)
#define KT_LD FCL_LD_PAD(BC)
#define QS_LD (D_PAD + 1)
#define PS_LD FCL_LD_PAD(BC)
#define FCL_BWD_IDS FCL_PORTABLE_IDS

#define FCL_DKDV_LOCALS                                 \
    __local float Kt[D_PAD * KT_LD] FCL_ALIGNED;        \
    __local float Vt[D_PAD * KT_LD] FCL_ALIGNED;        \
    __local float Qs[BR * QS_LD] FCL_ALIGNED;           \
    __local float dOs[BR * QS_LD] FCL_ALIGNED;          \
    __local float Ps[BR * PS_LD] FCL_ALIGNED;           \
    __local float dSs[BR * PS_LD] FCL_ALIGNED;          \
    __local float lse_s[2 * BR] FCL_ALIGNED;            \
    __local float dlt_s[2 * BR] FCL_ALIGNED

#define FCL_DKDV_LOAD_KV(k_base, k_ss, v_base, v_ss, cols, head_dim)                         \
    do {                                                                                     \
        fcl_load_tile_t(Kt, KT_LD, BC, K, (k_base), (k_ss), (cols), (head_dim), false, lid); \
        fcl_load_tile_t(Vt, KT_LD, BC, V, (v_base), (v_ss), (cols), head_dim_v, false, lid); \
    } while (0)

/* No background copies: Q and dO are loaded when a block begins. */
#define FCL_DKDV_PREFETCH_Q_DO(q_base, q_ss, do_base, do_ss, rows, buf, r0, g) ((void)0)
#define FCL_DKDV_BLOCK_BEGIN(q_base, q_ss, do_base, do_ss, rows, head_dim, buf, n)         \
    do {                                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous block is consumed */                \
        fcl_load_tile(Qs, QS_LD, BR, Q, (q_base), (q_ss), (rows), (head_dim), lid);        \
        fcl_load_tile(dOs, QS_LD, BR, dO, (do_base), (do_ss), (rows), head_dim_v, lid);    \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    } while (0)

#define FCL_DKDV_ST(st, buf)                                                                    \
    do {                                                                                   \
        FCL_ZERO_TILE(st);                                                                 \
        FCL_TILE_PRODUCT(st, RM, RN, D_PAD, Kt + ty * RM, KT_LD, Qs + tx * QS_LD, TX * QS_LD, 1); \
    } while (0)
#define FCL_DKDV_DPT(dpt, buf)                                                                  \
    do {                                                                                   \
        FCL_ZERO_TILE(dpt);                                                                \
        FCL_TILE_PRODUCT(dpt, RM, RN, D_PAD, Vt + ty * RM, KT_LD, dOs + tx * QS_LD, TX * QS_LD, 1); \
    } while (0)
/* The operands of P^T dO and dS^T Q (common.cl, "non-finite operands") */
#define FCL_DKDV_DO_BAD(buf, p, c) FCL_NOT_FINITE(dOs[(p) * QS_LD + (c)])
#define FCL_DKDV_DO_CLEAN(buf, n) FCL_ZERO_NONFINITE(dOs, QS_LD, (n), FCL_NOT_FINITE)
#define FCL_DKDV_Q_BAD(buf, p, c) FCL_NOT_FINITE(Qs[(p) * QS_LD + (c)])
#define FCL_DKDV_Q_CLEAN(buf, n) FCL_ZERO_NONFINITE(Qs, QS_LD, (n), FCL_NOT_FINITE)
#define FCL_DKDV_SET(st, dpt, i, j, p, ds)                                  \
    (Ps[(tx + TX * (j)) * PS_LD + ty * RM + (i)] = (p),                     \
     dSs[(tx + TX * (j)) * PS_LD + ty * RM + (i)] = (ds))
#define FCL_DKDV_ACC(dk, dv, st, dpt, buf)                                                      \
    do {                                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE); /* every P and dS of the tile is on chip */         \
        FCL_TILE_PRODUCT(dv, RM, DN, BR, Ps + ty * RM, PS_LD, dOs + tx, TX, QS_LD);         \
        FCL_TILE_PRODUCT(dk, RM, DN, BR, dSs + ty * RM, PS_LD, Qs + tx, TX, QS_LD);         \
    } while (0)

#endif
