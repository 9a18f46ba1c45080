/* tile_cpu.cl - the CPU piece: one work-item a work-group, tile rows as
 * SIMD lanes.
 *
 * PoCL runs the work-items of a group as a loop on one core and vectorises
 * across them: the portable piece's register tiles then live in memory, one
 * copy per work-item, and every barrier cuts the kernel into separate loops.
 * This piece has one work-item per group (TY = TX = 1), which owns the whole
 * score tile as fcl_rowv s[BR / FCL_RW][BC]: FCL_RW consecutive query rows
 * per vector, FCL_RW the CPU's SIMD width in floats (common.cl).  The
 * softmax then works on whole vectors of rows with no reduction across
 * lanes, and there is no barrier at all.
 *
 * Products broadcast one operand and take the other as row vectors:
 *   scores  s[rows][key]  += Qt[k][rows]   * K[key][k]   (Q transposed in __local)
 *   output  acc[rows][n]  += P[rows][key]  * V[key][n]
 * The broadcast side (K, V) is read straight from global memory, which on a
 * CPU is the caches: a tile of K or V is a few KiB to a few tens of KiB,
 * read from L1/L2 once per work-group and tile (an FMA with a broadcast
 * memory operand is one instruction on AVX-512).  16-bit and FP8 storage is first
 * widened into an fp32 copy of the tile in __local, by vectors: converting
 * each broadcast scalar on its own doubled the time of fp16 products.
 * Register blocks are FCL_CPU_BLOCK keys or head_dim columns by RMV row
 * vectors (16 vector accumulators at BR = 32 on 16 lanes), unrolled so they
 * stay in registers.  Keys past the end of a tile read the tile's last key
 * again (their scores are masked; no read leaves the tensor), so the loops
 * have no bounds to test.  The backward is the same with dQ's lanes query
 * rows and dK/dV's lanes keys (Q and dO are then the broadcast side).
 */

/* The register tiles of each kernel (see flash_fwd.cl, flash_bwd.cl): dK/dV
 * walks keys by rows, so its lanes are keys. */
#if FCL_TILE_CPU && (defined(FCL_KERNEL_FORWARD) || defined(FCL_KERNEL_DQ))
#define RM BR
#define RN BC
#define DN D_PAD
#elif FCL_TILE_CPU && defined(FCL_KERNEL_DKDV)
#define RM BC
#define RN BR
#define DN D_PAD
#endif

#if FCL_TILE_CPU

/* keys or head_dim columns per register block */
#define FCL_CPU_BLOCK 8
/* Register blocks must be unrolled to stay in registers (2.2x on the
 * forward: NOTES.md, run 19); PoCL does not unroll them by itself. */
#define FCL_CPU_UNROLL _Pragma("unroll")

/* A vector function of the lanes' width: FCL_VN(vload) is vload8 or vload16. */
#define FCL_CAT_(a, b) a##b
#define FCL_CAT(a, b) FCL_CAT_(a, b)
#define FCL_VN(f) FCL_CAT(f, FCL_RW)

#if FCL_RW == 16
#define FCL_VLOAD_ROWS(p) vload16(0, p)
#else
#define FCL_VLOAD_ROWS(p) vload8(0, p)
#endif

/* The broadcast operand of the products: rows of a global tensor (fp32
 * storage), or the fp32 __local copy of a tile (16-bit and FP8 storage). */
#if FCL_DTYPE == 0
#define FCL_CPU_STAGED 0
typedef __global const fcl_storage *fcl_cpu_src;
#define FCL_CPU_READ(b, i) fcl_load(b, i)
#else
#define FCL_CPU_STAGED 1
typedef __local const float *fcl_cpu_src;
#define FCL_CPU_READ(b, i) ((b)[i])
#endif

/* s[iv][j] = sum_{k < klen} At[k * ald + iv * FCL_RW + lane] * B[b_at[j] + k]
 * for j < ncol (a multiple of FCL_CPU_BLOCK).  At: the row operand,
 * transposed, in __local; B: the broadcast rows at offsets b_at. */
inline void fcl_cpu_product_t(fcl_rowv (*s)[RN], int ncol, __local const float *at, int ald,
                              fcl_cpu_src b, const long *b_at, int klen)
{
    for (int j0 = 0; j0 < ncol; j0 += FCL_CPU_BLOCK) {
        fcl_rowv a[RMV][FCL_CPU_BLOCK];
        FCL_CPU_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_CPU_UNROLL
            for (int jj = 0; jj < FCL_CPU_BLOCK; ++jj) a[iv][jj] = 0.0f;
        for (int k = 0; k < klen; ++k) {
            fcl_rowv x[RMV];
            FCL_CPU_UNROLL
            for (int iv = 0; iv < RMV; ++iv) x[iv] = FCL_VLOAD_ROWS(at + k * ald + iv * FCL_RW);
            FCL_CPU_UNROLL
            for (int jj = 0; jj < FCL_CPU_BLOCK; ++jj) {
                const fcl_rowv y = FCL_CPU_READ(b, b_at[j0 + jj] + k);
                FCL_CPU_UNROLL
                for (int iv = 0; iv < RMV; ++iv) a[iv][jj] = fma(y, x[iv], a[iv][jj]);
            }
        }
        FCL_CPU_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_CPU_UNROLL
            for (int jj = 0; jj < FCL_CPU_BLOCK; ++jj) s[iv][j0 + jj] = a[iv][jj];
    }
}

/* acc[iv][n] += sum_{j < ncol} p[iv][j] * B[b_at[j] + n] for n < width:
 * blocks of FCL_CPU_BLOCK columns stay in registers over all j, then the
 * columns left one at a time. */
inline void fcl_cpu_accumulate(fcl_rowv (*acc)[DN], fcl_rowv (*p)[RN], int ncol,
                               fcl_cpu_src b, const long *b_at, int width)
{
    int n0 = 0;
    for (; n0 + FCL_CPU_BLOCK <= width; n0 += FCL_CPU_BLOCK) {
        fcl_rowv a[RMV][FCL_CPU_BLOCK];
        FCL_CPU_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_CPU_UNROLL
            for (int nn = 0; nn < FCL_CPU_BLOCK; ++nn) a[iv][nn] = acc[iv][n0 + nn];
        for (int j = 0; j < ncol; ++j) {
            FCL_CPU_UNROLL
            for (int nn = 0; nn < FCL_CPU_BLOCK; ++nn) {
                const fcl_rowv y = FCL_CPU_READ(b, b_at[j] + n0 + nn);
                FCL_CPU_UNROLL
                for (int iv = 0; iv < RMV; ++iv) a[iv][nn] = fma(y, p[iv][j], a[iv][nn]);
            }
        }
        FCL_CPU_UNROLL
        for (int iv = 0; iv < RMV; ++iv)
            FCL_CPU_UNROLL
            for (int nn = 0; nn < FCL_CPU_BLOCK; ++nn) acc[iv][n0 + nn] = a[iv][nn];
    }
    for (; n0 < width; ++n0)
        for (int j = 0; j < ncol; ++j) {
            const fcl_rowv y = FCL_CPU_READ(b, b_at[j] + n0);
            FCL_CPU_UNROLL
            for (int iv = 0; iv < RMV; ++iv) acc[iv][n0] = fma(y, p[iv][j], acc[iv][n0]);
        }
}

/* fcl_cpu_accumulate with B's non-finite elements read as 0: the exact
 * path's product (common.cl, "non-finite operands"), the same sums in the
 * same order, a column at a time. */
inline void fcl_cpu_accumulate_finite(fcl_rowv (*acc)[DN], fcl_rowv (*p)[RN], int ncol,
                                      fcl_cpu_src b, const long *b_at, int width)
{
    for (int n = 0; n < width; ++n)
        for (int j = 0; j < ncol; ++j) {
            const float y = FCL_CPU_READ(b, b_at[j] + n);
            const fcl_rowv yv = isfinite(y) ? y : 0.0f;
            for (int iv = 0; iv < RMV; ++iv) acc[iv][n] = fma(yv, p[iv][j], acc[iv][n]);
        }
}

/* The product of an operand that the exact path made read as 0 where it
 * is non-finite (`finite`, set by the piece's CLEAN), or not. */
#define FCL_CPU_ACCUMULATE(finite, acc, p, ncol, b, b_at, width)       \
    do {                                                               \
        if (finite)                                                    \
            fcl_cpu_accumulate_finite(acc, p, ncol, b, b_at, width);   \
        else                                                           \
            fcl_cpu_accumulate(acc, p, ncol, b, b_at, width);          \
    } while (0)
/* Whether operand element (row p, column c), of the rows at offsets `at`
 * in src, is non-finite.  The pieces' CLEAN sets the operand's `finite`
 * flag for FCL_CPU_ACCUMULATE. */
#define FCL_CPU_BAD(src, at, p, c) (!isfinite(FCL_CPU_READ(src, (at)[p] + (c))))

/* The offsets of a tile's n rows (key-side rows from c0, or query-side
 * rows), the rows past `valid` at the last one. */
inline void fcl_cpu_tile_rows(long *at, int n, const fcl_rows rows, bool keys, int c0, int valid)
{
    const fcl_rows t = fcl_tile_rows(rows, keys, c0);
    for (int j = 0; j < n; ++j) at[j] = fcl_row_offset(t, keys, min(j, valid - 1));
}
#define fcl_cpu_key_rows(at, rows, c0, cols) fcl_cpu_tile_rows(at, BC, rows, true, c0, cols)

/* The broadcast side of a tile of n rows (offsets `at` in `src`, made by
 * fcl_cpu_tile_rows), as the products read it: the rows in place for fp32
 * storage, else their first `width` columns (D_PAD, or head_dim_v for V and
 * dO, whose products read no further) widened (FP8: decoded) into
 * dst[n][D_PAD] by vectors, `at` then pointing there. */
inline fcl_cpu_src fcl_cpu_stage(__local float *dst, long *at, int n,
                                 __global const fcl_storage *src, int width)
{
#if FCL_CPU_STAGED
    for (int j = 0; j < n; ++j) {
        __global const fcl_storage *row = src + at[j];
        __local float *out = dst + j * D_PAD;
        int k = 0;
        for (; k + FCL_RW <= width; k += FCL_RW) { /* a SIMD register's width */
#if FCL_DTYPE == 1
            FCL_VN(vstore)(FCL_VN(vload_half)(0, row + k), 0, out + k);
#elif FCL_IS_FP8
            FCL_VN(vstore)(FCL_VN(fcl_decode_fp8_)(FCL_VN(convert_uint)(FCL_VN(vload)(0, row + k))), 0,
                           out + k);
#else
            FCL_VN(vstore)(FCL_VN(as_float)(FCL_VN(convert_uint)(FCL_VN(vload)(0, row + k)) << 16), 0,
                           out + k);
#endif
        }
        for (; k < width; ++k) out[k] = fcl_load(row, k);
        at[j] = (long)j * D_PAD;
    }
    return dst;
#else
    (void)dst;
    (void)at;
    (void)n;
    (void)width;
    return src;
#endif
}

/* __local room for staged tiles of n rows, none for fp32 storage */
#define FCL_CPU_STAGE_ROWS(n) (FCL_CPU_STAGED ? (n) : 1)

#endif

/* ---- the forward's pieces (see flash_fwd.cl), CPU version -----------------
 * __local: Qt [D_PAD][BR], the Q block transposed (row vectors of one
 * dimension are contiguous); Ks, Vs [BC][D_PAD], the key tile widened to
 * fp32 (16-bit storage).  Private: the key tile's row offsets. */
#if defined(FCL_KERNEL_FORWARD) && FCL_TILE_CPU

#define FCL_FWD_IDS FCL_PORTABLE_IDS
/* no V tile when V is K's rows (FCL_FEAT_SHARED_KV) */
#if FCL_HAS(FCL_FEAT_SHARED_KV)
#define FCL_CPU_V_TILE (void)0
#else
#define FCL_CPU_V_TILE __local float Vs[FCL_CPU_STAGE_ROWS(BC) * D_PAD] FCL_ALIGNED
#endif
#define FCL_FWD_LOCALS                                              \
    __local float Qt[D_PAD * BR] FCL_ALIGNED;                       \
    __local float Ks[FCL_CPU_STAGE_ROWS(BC) * D_PAD] FCL_ALIGNED;   \
    FCL_CPU_V_TILE

#define FCL_FWD_LOAD_Q(q_rows, r0, rows, head_dim, negate)                                    \
    fcl_load_rows_t(Qt, BR, BR, Q, fcl_tile_rows(q_rows, false, r0), false, (rows), (head_dim), \
                    (negate), lid)

#define FCL_FWD_KEY_STATE                 \
    long k_at[BC], v_at[BC];              \
    fcl_cpu_src k_src, v_src;             \
    bool v_finite
#define FCL_FWD_PREFETCH_K(k_rows, c0, cols) ((void)0)
#if FCL_HAS(FCL_FEAT_SHARED_KV)
/* V is the first head_dim_v columns of K's rows: the key tile is read (and
 * widened) once, and P V reads V's columns from it */
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim) \
    do {                                                                             \
        v_finite = false;                                                            \
        fcl_cpu_key_rows(k_at, (k_rows), (c0), (cols));                              \
        k_src = fcl_cpu_stage(Ks, k_at, BC, K, D_PAD);                               \
        v_src = k_src;                                                               \
        for (int j_ = 0; j_ < BC; ++j_) v_at[j_] = k_at[j_];                         \
    } while (0)
#else
#define FCL_FWD_TILE_BEGIN(k_rows, v_rows, c0, cols, more, next, next_cols, head_dim) \
    do {                                                                             \
        v_finite = false;                                                            \
        fcl_cpu_key_rows(k_at, (k_rows), (c0), (cols));                              \
        fcl_cpu_key_rows(v_at, (v_rows), (c0), (cols));                              \
        k_src = fcl_cpu_stage(Ks, k_at, BC, K, D_PAD);                               \
        v_src = fcl_cpu_stage(Vs, v_at, BC, V, head_dim_v);                          \
    } while (0)
#endif
#define FCL_FWD_TILE_MID(more, k_rows, next, cols) ((void)0)

#define FCL_FWD_QK(s) fcl_cpu_product_t(s, BC, Qt, BR, k_src, k_at, D_PAD)
/* one work-item holds whole rows */
#define FCL_ROWS_MAX(v) ((void)0)
#define FCL_ROWS_SUM(v) ((void)0)
#define FCL_FWD_SET_P(s, iv, j, p) (s[iv][j] = (p)) /* P replaces S in place */
#define FCL_FWD_PV(acc, s) FCL_CPU_ACCUMULATE(v_finite, acc, s, BC, v_src, v_at, head_dim_v)
/* The operand of P V, V (common.cl, "non-finite operands"): head_dim_v columns */
#define FCL_FWD_V_BAD(X, p, c) ((c) < head_dim_v && FCL_CPU_BAD(v_src, v_at, p, c))
#define FCL_FWD_V_CLEAN(X, n) (v_finite = true)

#endif

/* ---- the backward's pieces (see flash_bwd.cl), CPU version ----------------
 * dQ: lanes are query rows.  __local Qt, dOt [D_PAD][BR] (transposed);
 * K and V rows are read in place (offsets of the key tile), or from Ks, Vs
 * for 16-bit storage.  dS stays in the score registers. */
#if defined(FCL_KERNEL_DQ) && FCL_TILE_CPU

#define FCL_BWD_IDS FCL_PORTABLE_IDS
#define FCL_DQ_LOCALS                                               \
    __local float Qt[D_PAD * BR] FCL_ALIGNED;                       \
    __local float dOt[D_PAD * BR] FCL_ALIGNED;                      \
    __local float Ks[FCL_CPU_STAGE_ROWS(BC) * D_PAD] FCL_ALIGNED;   \
    __local float Vs[FCL_CPU_STAGE_ROWS(BC) * D_PAD] FCL_ALIGNED;   \
    long k_at[BC], v_at[BC];                                        \
    fcl_cpu_src k_src, v_src;                                       \
    bool k_finite

#define FCL_DQ_LOAD_Q_DO(q_base, q_ss, do_base, do_ss, rows, head_dim)                        \
    do {                                                                                      \
        fcl_load_tile_t(Qt, BR, BR, Q, (q_base), (q_ss), (rows), (head_dim), false, lid);     \
        fcl_load_tile_t(dOt, BR, BR, dO, (do_base), (do_ss), (rows), head_dim_v, false, lid); \
    } while (0)
#define FCL_DQ_PREFETCH_KV(k_base, k_ss, v_base, v_ss, cols, buf, c0) ((void)0)
#define FCL_DQ_TILE_BEGIN(k_base, k_ss, v_base, v_ss, cols, head_dim, buf, n)            \
    do {                                                                              \
        k_finite = false;                                                             \
        fcl_cpu_key_rows(k_at, fcl_rows_strided((k_base), (k_ss)), 0, (cols));        \
        fcl_cpu_key_rows(v_at, fcl_rows_strided((v_base), (v_ss)), 0, (cols));        \
        k_src = fcl_cpu_stage(Ks, k_at, BC, K, D_PAD);                                \
        v_src = fcl_cpu_stage(Vs, v_at, BC, V, head_dim_v);                           \
    } while (0)
#define FCL_DQ_S(s, buf) fcl_cpu_product_t(s, BC, Qt, BR, k_src, k_at, D_PAD)
#define FCL_DQ_DP(dp, buf) fcl_cpu_product_t(dp, BC, dOt, BR, v_src, v_at, head_dim_v)
#define FCL_DQ_SET_DS(s, iv, j, ds) ((void)0) /* dS replaces S in place */
#define FCL_DQ_ACC(acc, s, buf) FCL_CPU_ACCUMULATE(k_finite, acc, s, BC, k_src, k_at, D_PAD)
/* The operand of dS K, K (common.cl, "non-finite operands") */
#define FCL_DQ_K_BAD(buf, p, c) FCL_CPU_BAD(k_src, k_at, p, c)
#define FCL_DQ_K_CLEAN(buf, n) (k_finite = true)

/* dK/dV: lanes are keys.  __local Kt, Vt [D_PAD][BC] (transposed, loaded
 * once), LSE and delta of the Q block (2 x BR each: the shared loop names a
 * buffer); Q and dO rows are read in place, or from Qs, dOs for 16-bit
 * storage.  P^T and dS^T stay in the score registers. */
#elif defined(FCL_KERNEL_DKDV) && FCL_TILE_CPU

#define FCL_BWD_IDS FCL_PORTABLE_IDS
#define FCL_DKDV_LOCALS                          \
    __local float Kt[D_PAD * BC] FCL_ALIGNED;    \
    __local float Vt[D_PAD * BC] FCL_ALIGNED;    \
    __local float lse_s[2 * BR];                 \
    __local float dlt_s[2 * BR];                 \
    __local float Qs[FCL_CPU_STAGE_ROWS(BR) * D_PAD] FCL_ALIGNED;  \
    __local float dOs[FCL_CPU_STAGE_ROWS(BR) * D_PAD] FCL_ALIGNED; \
    long q_at[BR], do_at[BR];                    \
    fcl_cpu_src q_src, do_src;                   \
    bool q_finite, do_finite

#define FCL_DKDV_LOAD_KV(k_base, k_ss, v_base, v_ss, cols, head_dim)                     \
    do {                                                                                 \
        fcl_load_tile_t(Kt, BC, BC, K, (k_base), (k_ss), (cols), (head_dim), false, lid); \
        fcl_load_tile_t(Vt, BC, BC, V, (v_base), (v_ss), (cols), head_dim_v, false, lid); \
    } while (0)
#define FCL_DKDV_PREFETCH_Q_DO(q_base, q_ss, do_base, do_ss, rows, buf, r0, g) ((void)0)
#define FCL_DKDV_BLOCK_BEGIN(q_base, q_ss, do_base, do_ss, rows, head_dim, buf, n)         \
    do {                                                                                  \
        q_finite = do_finite = false;                                                     \
        fcl_cpu_tile_rows(q_at, BR, fcl_rows_strided((q_base), (q_ss)), false, 0, (rows)); \
        fcl_cpu_tile_rows(do_at, BR, fcl_rows_strided((do_base), (do_ss)), false, 0, (rows));\
        q_src = fcl_cpu_stage(Qs, q_at, BR, Q, D_PAD);                                    \
        do_src = fcl_cpu_stage(dOs, do_at, BR, dO, head_dim_v);                           \
    } while (0)
#define FCL_DKDV_ST(st, buf) fcl_cpu_product_t(st, BR, Kt, BC, q_src, q_at, D_PAD)
#define FCL_DKDV_DPT(dpt, buf) fcl_cpu_product_t(dpt, BR, Vt, BC, do_src, do_at, head_dim_v)
#define FCL_DKDV_SET(st, dpt, iv, j, p, ds) ((void)0) /* in place */
#define FCL_DKDV_ACC(dk, dv, st, dpt, buf)                                           \
    do {                                                                             \
        FCL_CPU_ACCUMULATE(do_finite, dv, st, BR, do_src, do_at, head_dim_v);        \
        if (FCL_WANT_DK) FCL_CPU_ACCUMULATE(q_finite, dk, dpt, BR, q_src, q_at, D_PAD); \
    } while (0)
/* The operands of P^T dO and dS^T Q (common.cl, "non-finite operands") */
#define FCL_DKDV_DO_BAD(buf, p, c) ((c) < head_dim_v && FCL_CPU_BAD(do_src, do_at, p, c))
#define FCL_DKDV_DO_CLEAN(buf, n) (do_finite = true)
#define FCL_DKDV_Q_BAD(buf, p, c) FCL_CPU_BAD(q_src, q_at, p, c)
#define FCL_DKDV_Q_CLEAN(buf, n) (q_finite = true)

#endif
