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

/* Copy rows [0, nvalid) of a (rows x head_dim) block starting at element
 * `base` (row stride `ss`) into a __local tile, zero-filling rows >= nvalid and
 * columns >= head_dim up to D_PAD.  Natural layout: dst[r*ld + k].
 * Consecutive work-items read consecutive elements of a row (coalesced). */
inline void fcl_load_tile(__local float *dst, int ld, int nrows, __global const fcl_storage *src,
                          long base, long ss, int nvalid, int head_dim, int lid)
{
    for (int e = lid; e < nrows * D_PAD; e += WG) {
        int r = e / D_PAD, k = e - r * D_PAD;
        float x = 0.0f;
        if (r < nvalid && k < head_dim) x = fcl_load(src, base + (long)r * ss + k);
        dst[r * ld + k] = x;
    }
}

/* The same, stored transposed: dst[k*ld + r]. */
inline void fcl_load_tile_t(__local float *dst, int ld, int nrows, __global const fcl_storage *src,
                            long base, long ss, int nvalid, int head_dim, int lid)
{
    for (int e = lid; e < nrows * D_PAD; e += WG) {
        int r = e / D_PAD, k = e - r * D_PAD;
        float x = 0.0f;
        if (r < nvalid && k < head_dim) x = fcl_load(src, base + (long)r * ss + k);
        dst[k * ld + r] = x;
    }
}

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
 *   red[BR][TX]        row reductions */
#if defined(FCL_KERNEL_FORWARD) && !FCL_TILE_MMA

#define RM (BR / TY)
#define RN (BC / TX)
#define DN (D_PAD / TX)
#define QT_LD (BR + 4)
#define KS_LD (D_PAD + 1)
#define VS_LD (D_PAD)
#define PT_LD (BR + 4)

#define FCL_FWD_IDS                          \
    const int lid = (int)get_local_id(0);    \
    const int ty = lid / TX, tx = lid - (lid / TX) * TX

/* Natural units and exp: fp32 storage keeps the rounding of a plain softmax
 * (exp2 with log2(e) folded into the scores adds two roundings). */
#define FCL_EXP(x) exp(x)
#define FCL_EXP_UNITS(x) (x)
#define FCL_NATURAL_UNITS(x) (x)

#define FCL_ROW(i) (ty * RM + (i))
#define FCL_COL(j) (tx + TX * (j))
#define FCL_OCOL(n) (tx + TX * (n))
#define FCL_FIRST_IN_ROW (tx == 0)

#define FCL_FWD_LOCALS                                  \
    __local float Qt[D_PAD * QT_LD] FCL_ALIGNED;        \
    __local float Ks[BC * KS_LD] FCL_ALIGNED;           \
    __local float Vs[BC * VS_LD] FCL_ALIGNED;           \
    __local float Pt[BC * PT_LD] FCL_ALIGNED;           \
    __local float red[BR * TX] FCL_ALIGNED

#define FCL_FWD_LOAD_Q(q_base, q_ss, rows, head_dim) \
    fcl_load_tile_t(Qt, QT_LD, BR, Q, (q_base), (q_ss), (rows), (head_dim), lid)

#define FCL_FWD_LOAD_KV(k_base, k_ss, v_base, v_ss, cols, head_dim)                  \
    do {                                                                             \
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */           \
        fcl_load_tile(Ks, KS_LD, BC, K, (k_base), (k_ss), (cols), (head_dim), lid);  \
        fcl_load_tile(Vs, VS_LD, BC, V, (v_base), (v_ss), (cols), (head_dim), lid);  \
        barrier(CLK_LOCAL_MEM_FENCE);                                                \
    } while (0)

#define FCL_FWD_QK(s)                                                                      \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int i_ = 0; i_ < RM; ++i_)                                                    \
            FCL_UNROLL                                                                     \
            for (int j_ = 0; j_ < RN; ++j_) s[i_][j_] = 0.0f;                              \
        FCL_TILE_PRODUCT(s, RM, RN, D_PAD, Qt + ty * RM, QT_LD, Ks + tx * KS_LD, TX * KS_LD, 1); \
    } while (0)

#define FCL_ROWS_MAX(v) fcl_rows_max(v, RM, red, ty, tx)
#define FCL_ROWS_SUM(v) fcl_rows_sum(v, RM, red, ty, tx)

#define FCL_FWD_SET_P(s, i, j, p) (Pt[(tx + TX * (j)) * PT_LD + ty * RM + (i)] = (p))

#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE); /* every P of the tile is in Pt */                   \
        FCL_TILE_PRODUCT(acc, RM, DN, BC, Pt + ty * RM, PT_LD, Vs + tx, TX, VS_LD);         \
    } while (0)

#endif
