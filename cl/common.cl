/* common.cl - pieces every flashcl kernel shares: storage types, masking.
 *
 * The host prepends a block of -D style #defines (see src/programs/kernel_options.c):
 *   FCL_DTYPE      0 fp32, 1 fp16, 2 bf16, 3 FP8 E4M3, 4 FP8 E5M2 (storage of
 *                  Q, K, V and the backward's tensors; arithmetic is fp32)
 *   FCL_OUT_DTYPE  0, 1 or 2: storage of the forward's O (FCL_DTYPE, but
 *                  for FP8 inputs)
 *   D_PAD          head_dim rounded up to the thread layout; padded columns
 *                  are loaded as zeros and never stored
 *   BR, BC         query rows / key columns per tile
 *   TY, TX         work-group = TY x TX threads (TX threads share one row)
 *   FCL_FEATURES   attention variants compiled in (bits below); 0 is plain
 *                  attention, whose code has none of the variants' cost
 *   FCL_DKDV_PART  the dK/dV kernel's outputs: 0 both, 1 dV only, 2 dK
 *                  only (the tensor-core piece above head_dim 128, where
 *                  one accumulator per launch fits in registers)
 *   FCL_FUSED_DQ   dK/dV kernel on tensor cores: 0 dQ is the dQ kernel's;
 *                  1 this kernel adds each key block's share of dQ into an
 *                  fp32 buffer in key-block order (bitwise repeatable), 2
 *                  in any order (atomics; flash_bwd.cl says more)
 *   FCL_PACK       forward: query heads packed into one work-group's rows
 *                  (GQA packing, see "rows" below); 1 elsewhere
 *   FCL_PAGE_SIZE  forward: keys per page of a paged K/V cache; 0 for
 *                  K/V rows at a fixed stride
 *   FCL_TILE_CPU   0, or the CPU piece (tile_cpu.cl) with this many tile
 *                  rows per vector (8 or 16: the SIMD width in floats)
 *   FCL_POCL_CPU   1 on PoCL's CPU devices: the tile loops' form that its
 *                  kernel compiler gets right (FCL_TILE_LOOP below)
 */

#define FCL_FEAT_SOFTCAP 1
#define FCL_FEAT_ALIBI 2
#define FCL_FEAT_DROPOUT 4
#define FCL_FEAT_VARLEN 8
#define FCL_FEAT_BLOCKMASK 16
#define FCL_FEAT_KVCACHE 32
/* A KV-cache call whose V is the first head_dim_v columns of K's rows (MLA's
 * latent cache): the host passes K's buffer and layout as V's, and the
 * portable and CPU pieces load each key tile once for both products. */
#define FCL_FEAT_SHARED_KV 64
#ifndef FCL_FEATURES
#define FCL_FEATURES 0
#endif
#define FCL_HAS(feature) ((FCL_FEATURES & (feature)) != 0)

/* FCL_TILE_LOOP(cond) { body }: `while (cond) { body }` for the kernels'
 * loops over tiles, whose bodies hold barriers.  PoCL 5.0's CPU kernel
 * compiler (its default work-group method, "loopvec"; Ubuntu 24.04's build
 * and one of v5.0 with LLVM 15 alike) miscompiles the plain loop when it can
 * run no iteration and the code after it holds a barrier (the forward's row
 * sums; the tensor-core piece's lane exchanges): it copies that code once
 * for each way into it, and the copy reached from the loop reads some of the
 * values the loop left in registers (two of four output accumulators, in
 * the smallest case found: one query row, head_dim 64, 16 work-items) as
 * the last work-item left them, not saved per work-item: every work-item
 * stored that work-item's O columns.  The emulated tensor-core backward at
 * head_dim 256 crashed without this form.  Unoptimised builds, PoCL 3.1 and
 * Oclgrind are right.  Here the loop starts each iteration, and its exit,
 * with a barrier: the code after the loop is reached one way only, from
 * that barrier, and nothing is copied.  It costs one barrier a tile, so only
 * PoCL's CPU devices get it (FCL_POCL_CPU, set by the host); GPUs keep the
 * plain loop, and so does Oclgrind, whose race checks must see exactly the
 * barriers the pieces need.  Nor does the CPU piece (FCL_TILE_CPU): one
 * work-item a group has no per-work-item values to lose, it passed on
 * PoCL 5.0 with the plain loop, and it is built to have no barrier. */
#ifndef FCL_POCL_CPU
#define FCL_POCL_CPU 0
#endif
#if FCL_POCL_CPU && !FCL_TILE_CPU
#define FCL_TILE_LOOP(cond) for (;;) if ((barrier(CLK_LOCAL_MEM_FENCE), !(cond))) break; else
#else
#define FCL_TILE_LOOP(cond) while (cond)
#endif
#ifndef FCL_DKDV_PART
#define FCL_DKDV_PART 0
#endif
#ifndef FCL_FUSED_DQ
#define FCL_FUSED_DQ 0
#endif
#ifndef FCL_RED_V4
#define FCL_RED_V4 0
#endif
#define FCL_WANT_DK (FCL_DKDV_PART != 1)
#define FCL_WANT_DV (FCL_DKDV_PART != 2)
#ifndef FCL_PACK
#define FCL_PACK 1
#endif
#ifndef FCL_PAGE_SIZE
#define FCL_PAGE_SIZE 0
#endif
#ifndef FCL_TILE_CPU
#define FCL_TILE_CPU 0
#endif

/* ---- rows as vector lanes ---------------------------------------------
 * The shared loops keep a work-item's per-row state (running max, sums,
 * output accumulators, the score tile's rows) in arrays of fcl_rowv, each
 * element FCL_RW consecutive register rows: one float on the GPU pieces,
 * a float8/float16 on the CPU piece, whose SIMD lanes are tile rows (a
 * row's softmax then needs no horizontal reduction, and every lane runs the
 * same operations in the same order as a scalar row would).  Register row i
 * of x[RM / FCL_RW] is FCL_LANE(x[i / FCL_RW], i % FCL_RW). */
#if FCL_TILE_CPU == 16
#define FCL_RW 16
typedef float16 fcl_rowv;
typedef int16 fcl_rowi;
#define FCL_LANE_IOTA ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#elif FCL_TILE_CPU == 8
#define FCL_RW 8
typedef float8 fcl_rowv;
typedef int8 fcl_rowi;
#define FCL_LANE_IOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define FCL_RW 1
typedef float fcl_rowv;
#endif
#if FCL_RW == 1
#define FCL_LANE(v, r) (v)
#else
#define FCL_LANE(v, r) (((float *)&(v))[r])
#endif
#define RMV (RM / FCL_RW)
/* The output accumulators' register rows: those of the score tile (RM,
 * FCL_ROW), unless a piece lays them out apart (FCL_ACC_RM and
 * FCL_ACC_ROW(i), defined before the kernels by the piece: the tensor-core
 * dK/dV with its accumulators' columns split over warps). */
#define FCL_ACC_RMV (FCL_ACC_RM / FCL_RW)
/* Register row i of x[RMV] (m, l, LSE, ...), and element (i, j) of
 * x[RMV][...] (score tiles, output accumulators). */
#define FCL_R(x, i) FCL_LANE((x)[(i) / FCL_RW], (i) % FCL_RW)
#define FCL_S(x, i, j) FCL_LANE((x)[(i) / FCL_RW][j], (i) % FCL_RW)

/* ---- storage types ----------------------------------------------------
 * Q, K, V (and every tensor of the backward) are FCL_DTYPE: fcl_storage,
 * read by fcl_load and written by fcl_store.  The forward's O is
 * FCL_OUT_DTYPE: fcl_ostorage, written by fcl_store_o, the same type except
 * for FP8 inputs (whose outputs are 16 or 32 bits). */
#ifndef FCL_OUT_DTYPE
#define FCL_OUT_DTYPE FCL_DTYPE
#endif
#define FCL_IS_FP8 (FCL_DTYPE == 3 || FCL_DTYPE == 4)

/* bfloat16: the upper 16 bits of an IEEE float. */
inline ushort fcl_bf16_bits(float v)
{
    uint bits = as_uint(v);
    if (isnan(v))
        return (ushort)((bits >> 16) | 0x40u); /* keep it a (quiet) NaN */
    bits += 0x7FFFu + ((bits >> 16) & 1u);     /* round to nearest, ties to even */
    return (ushort)(bits >> 16);
}

/* FP8 bytes (s, e, m) as floats: exponent and mantissa moved into an IEEE
 * float's fields for e > 0, m * 2^(1 - bias - mbits) for the subnormals (an
 * exact product, not a float subnormal: devices may flush those), then
 * the specials: E4M3 (OCP E4M3FN: bias 7, 3 mantissa bits) has NaN at
 * x & 0x7F == 0x7F and no infinities; E5M2 (bias 15, 2 bits; the upper
 * byte of an fp16) has infinities and NaNs at e = 31.  Every result is
 * exact.  One body for scalars and vectors (N empty, 8 or 16): the
 * CPU piece decodes tiles a vector at a time. */
#define FCL_FP8_DECODER(NAME, N, E4M3)                                                   \
    inline float##N NAME(uint##N x)                                                      \
    {                                                                                    \
        const uint mbits = E4M3 ? 3u : 2u, bias = E4M3 ? 7u : 15u;                       \
        const uint##N e = (x >> mbits) & (0x7Fu >> mbits), m = x & ((1u << mbits) - 1u); \
        const uint##N sign = (x & 0x80u) << 24;                                          \
        const uint##N normal = sign | ((e + (127u - bias)) << 23) | (m << (23u - mbits)); \
        const uint##N sub = sign | as_uint##N(convert_float##N(m) *                      \
                                               (E4M3 ? 0x1p-9f : 0x1p-16f));             \
        uint##N bits = select(normal, sub, as_uint##N(e == 0u));                          \
        if (E4M3) {                                                                      \
            bits = select(bits, (uint##N)0x7FC00000u, as_uint##N((x & 0x7Fu) == 0x7Fu));  \
        } else {                                                                         \
            const uint##N special = select((uint##N)0x7FC00000u, (uint##N)0x7F800000u,   \
                                           as_uint##N(m == 0u));                          \
            bits = select(bits, sign | special, as_uint##N(e == 31u));                    \
        }                                                                                \
        return as_float##N(bits);                                                        \
    }
FCL_FP8_DECODER(fcl_decode_e4m3, , 1)
FCL_FP8_DECODER(fcl_decode_e4m3_8, 8, 1)
FCL_FP8_DECODER(fcl_decode_e5m2, , 0)
FCL_FP8_DECODER(fcl_decode_e5m2_8, 8, 0)
/* 16 lanes only where the CPU piece has them (AVX-512): elsewhere a
 * function of 16-wide vectors is compiled for nothing, and PoCL's compiler
 * warns on AVX2 CPUs that such vectors change the calling convention */
#if FCL_TILE_CPU == 16
FCL_FP8_DECODER(fcl_decode_e4m3_16, 16, 1)
FCL_FP8_DECODER(fcl_decode_e5m2_16, 16, 0)
#endif

#if FCL_DTYPE == 0
typedef float fcl_storage;
inline float fcl_load(__global const fcl_storage *p, long i) { return p[i]; }
inline void fcl_store(__global fcl_storage *p, long i, float v) { p[i] = v; }
#elif FCL_DTYPE == 1
/* `half` is usable as a storage type through vload_half/vstore_half, which
 * are core OpenCL: no cl_khr_fp16 needed. */
typedef half fcl_storage;
inline float fcl_load(__global const fcl_storage *p, long i) { return vload_half((size_t)i, p); }
inline void fcl_store(__global fcl_storage *p, long i, float v) { vstore_half_rte(v, (size_t)i, p); }
#elif FCL_DTYPE == 2
typedef ushort fcl_storage;
inline float fcl_load(__global const fcl_storage *p, long i) { return as_float((uint)p[i] << 16); }
inline void fcl_store(__global fcl_storage *p, long i, float v) { p[i] = fcl_bf16_bits(v); }
#elif FCL_IS_FP8
/* Read only: FP8 is an input of the forward (no fcl_store). */
typedef uchar fcl_storage;
#if FCL_DTYPE == 3
#define fcl_decode_fp8 fcl_decode_e4m3
#define fcl_decode_fp8_8 fcl_decode_e4m3_8
#define fcl_decode_fp8_16 fcl_decode_e4m3_16
#else
#define fcl_decode_fp8 fcl_decode_e5m2
#define fcl_decode_fp8_8 fcl_decode_e5m2_8
#define fcl_decode_fp8_16 fcl_decode_e5m2_16
#endif
inline float fcl_load(__global const fcl_storage *p, long i) { return fcl_decode_fp8((uint)p[i]); }
#else
#error "FCL_DTYPE must be 0 (fp32), 1 (fp16), 2 (bf16), 3 (FP8 E4M3) or 4 (FP8 E5M2)"
#endif

/* Element j of src to element i of dst, both of the storage type (the
 * KV-cache append): FP8 bytes are copied as they are. */
#if FCL_IS_FP8
#define fcl_copy(dst, i, src, j) ((dst)[i] = (src)[j])
#else
#define fcl_copy(dst, i, src, j) fcl_store((dst), (i), fcl_load((src), (j)))
#endif

#if FCL_OUT_DTYPE == FCL_DTYPE
typedef fcl_storage fcl_ostorage;
#define fcl_store_o fcl_store
#elif FCL_OUT_DTYPE == 0
typedef float fcl_ostorage;
inline void fcl_store_o(__global fcl_ostorage *p, long i, float v) { p[i] = v; }
#elif FCL_OUT_DTYPE == 1
typedef half fcl_ostorage;
inline void fcl_store_o(__global fcl_ostorage *p, long i, float v) { vstore_half_rte(v, (size_t)i, p); }
#elif FCL_OUT_DTYPE == 2
typedef ushort fcl_ostorage;
inline void fcl_store_o(__global fcl_ostorage *p, long i, float v) { p[i] = fcl_bf16_bits(v); }
#else
#error "FCL_OUT_DTYPE must be 0 (fp32), 1 (fp16) or 2 (bf16)"
#endif

/* ---- an output row from the accumulators ------------------------------
 * FCL_STORE_ACC_ROW(T, STORE, at, ncols, X, i, factor): row i of the
 * accumulators X (a lane's column n is FCL_OCOL(n), n below DN) times
 * `factor` into T, column c at element `at` + c for the columns below
 * ncols, a value at a time by STORE(T, element, value).
 * FCL_STORE_ACC_PAIRS(T, at, ncols, X, i, factor): the same, a column
 * pair at a time by fcl_store_pair, which a tile piece defines where a
 * lane's accumulators n, n + 1 (n even) are adjacent columns with
 * FCL_OCOL(n) even (tile_nv_mma.cl): only for 16-bit T of the storage
 * type, where FCL_PAIRS_FIT(ncols, offsets): an even count of columns and
 * every row start even (`offsets`: the OR of the first row's element
 * offset and the strides between rows). */
#define FCL_STORE_ACC_ROW(T, STORE, at, ncols, X, i, factor)          \
    do {                                                             \
        FCL_UNROLL                                                   \
        for (int n_ = 0; n_ < DN; ++n_)                              \
            if (FCL_OCOL(n_) < (ncols))                              \
                STORE(T, (at) + FCL_OCOL(n_), FCL_S(X, i, n_) * (factor)); \
    } while (0)
#define FCL_STORE_ACC_PAIRS(T, at, ncols, X, i, factor)                        \
    do {                                                                      \
        FCL_UNROLL                                                            \
        for (int n_ = 0; n_ < DN; n_ += 2)                                    \
            if (FCL_OCOL(n_) < (ncols))                                       \
                fcl_store_pair(T, (at) + FCL_OCOL(n_), FCL_S(X, i, n_) * (factor), \
                               FCL_S(X, i, n_ + 1) * (factor));               \
    } while (0)
#define FCL_PAIRS_FIT(ncols, offsets) ((ncols) % 2 == 0 && ((offsets) & 1) == 0)
/* FCL_STAGE_ACC_PAIRS(STAGE, r, X, i, factor): the same row into row r of
 * a piece's __local tile, a column pair at a time by STAGE(r, column,
 * value, next column's value), every column below D_PAD with no test a
 * column (flash_fwd.cl's staged O: a test and branch a column cost 3500
 * cycles a work-group), for the piece's 16-byte stores of whole rows later
 * (tile_nv_mma.cl, "outputs through a tile"), where FCL_STAGED_FIT: a
 * count of columns in whole 8-value pieces and every row start 16-byte
 * aligned (`offsets` as above). */
#define FCL_STAGE_ACC_PAIRS(STAGE, r, X, i, factor)                           \
    do {                                                                     \
        FCL_UNROLL                                                           \
        for (int n_ = 0; n_ < DN; n_ += 2)                                   \
            STAGE(r, FCL_OCOL(n_), FCL_S(X, i, n_) * (factor),               \
                  FCL_S(X, i, n_ + 1) * (factor));                           \
    } while (0)
#define FCL_STAGED_FIT(ncols, offsets) ((ncols) % 8 == 0 && ((offsets) & 7) == 0)

/* The forward's K and V: fcl_kv_storage, the storage type, except in the
 * FP8 forward on the wgmma piece's tensor memory accelerator path, which
 * copies bytes as they are: there the host first widens K's and V's bytes
 * to fp16 (flash_fwd.cl's fcl_forward_widen, exact) and the forward reads
 * those (FCL_KV_WIDENED), unless its products are FP8's own
 * (FCL_FP8_PRODUCTS: the bytes, laid out as tiles by the host's first
 * launch, tile_nv_wgmma_fp8.cl). */
#ifndef FCL_FP8_PRODUCTS
#define FCL_FP8_PRODUCTS 0 /* FP8 products on wgmma (tile_nv_wgmma_fp8.cl) */
#endif
/* The rows of a tensor memory accelerator copy's box (warpgroup_ptx.cl,
 * warpgroup_emulated.cl): a streamed tile's, the forward's and dQ's K and V
 * tiles, dK/dV's Q and dO blocks (tile_nv_wgmma.cl) */
#if defined(FCL_KERNEL_DKDV)
#define FCL_WG_BOX_ROWS BR
#else
#define FCL_WG_BOX_ROWS BC
#endif
#if FCL_IS_FP8 && FCL_WG_TMA && defined(FCL_KERNEL_FORWARD) && !FCL_FP8_PRODUCTS
#define FCL_KV_WIDENED 1
typedef ushort fcl_kv_storage;
#else
#define FCL_KV_WIDENED 0
typedef fcl_storage fcl_kv_storage;
#endif

/* ---- rows of a tensor --------------------------------------------------
 * Where row r of a tile source starts, in elements.  Query-side rows are
 * packed: with GQA packing the FCL_PACK query heads that share a K/V head
 * are one work-group's rows, row r being head r % FCL_PACK at query
 * position r / FCL_PACK (the heads of one position side by side, so a tile
 * spans few positions and a causal mask cuts few of its rows).  Key-side
 * rows are at a fixed stride, or go through a page table: key j lies in
 * page pages[j / FCL_PAGE_SIZE], row j % FCL_PAGE_SIZE of it. */
typedef struct {
    long base;                  /* element offset of row 0 (for paged keys: of page 0) */
    long ss;                    /* between positions, or between the rows of a page */
    long sh;                    /* packed rows: between the heads of one position */
    long page_stride;           /* paged keys: between pages */
    __global const int *pages;  /* paged keys: this sequence's page-table row, else 0 */
    int first;                  /* row 0 here is row `first` of the tensor */
} fcl_rows;

inline fcl_rows fcl_rows_strided(long base, long ss)
{
    fcl_rows t = {base, ss, 0, 0, 0, 0};
    return t;
}

/* The query position of packed row r. */
#define FCL_POS(r) ((r) / FCL_PACK)

/* Where row r of query-side (keys = false) or key-side (keys = true) rows
 * starts; callers pass a constant for `keys`, so one branch folds away. */
inline long fcl_row_offset(const fcl_rows t, bool keys, int r)
{
    r += t.first;
    if (!keys)
        return t.base + (long)(r / FCL_PACK) * t.ss + (long)(r % FCL_PACK) * t.sh;
#if FCL_PAGE_SIZE > 0
    if (t.pages != 0)
        return t.base + (long)t.pages[r / FCL_PAGE_SIZE] * t.page_stride +
               (long)(r % FCL_PAGE_SIZE) * t.ss;
#endif
    return t.base + (long)r * t.ss;
}

/* Whether row r + dr of `t` lies a fixed number of elements,
 * fcl_rows_step(t, keys, dr), after row r for every r: key rows unless
 * paged, query rows where dr is a multiple of FCL_PACK (packed heads: the
 * same head, dr / FCL_PACK positions on).  dr is a constant of the caller. */
inline bool fcl_rows_linear(const fcl_rows t, bool keys, int dr)
{
#if FCL_PAGE_SIZE > 0
    if (keys)
        return t.pages == 0;
#else
    (void)t;
#endif
    return keys ? true : dr % FCL_PACK == 0;
}
inline long fcl_rows_step(const fcl_rows t, bool keys, int dr)
{
    return (long)(keys ? dr : dr / FCL_PACK) * t.ss;
}

/* The rows of a tile that starts at row `first`.  Key tiles start at
 * multiples of BC: when a page holds whole tiles, the tile is strided and
 * its page is looked up once, not per row. */
inline fcl_rows fcl_tile_rows(const fcl_rows t, bool keys, int first)
{
    fcl_rows s = t;
    s.first = t.first + first;
#if FCL_PAGE_SIZE > 0
#if FCL_PAGE_SIZE % BC == 0
    if (keys && t.pages != 0) {
        s.base = fcl_row_offset(s, true, 0);
        s.pages = 0;
        s.first = 0;
    }
#endif
#endif
    return s;
}

/* ---- masking ------------------------------------------------------------
 * A key j is visible from query row i when it exists (j < seqlen_k) and lies
 * inside the window around the bottom-right aligned diagonal:
 *     i + diag - left <= j <= i + diag + right,   diag = seqlen_k - seqlen_q
 * where a negative left/right bound means "unbounded".  causal = (-1, 0). */
typedef struct {
    int seqlen_k;
    int diag;
    int left;
    int right;
} fcl_mask;

inline bool fcl_visible(const fcl_mask m, int i, int j)
{
    if (j >= m.seqlen_k) return false;
    if (m.left >= 0 && j < i + m.diag - m.left) return false;
    if (m.right >= 0 && j > i + m.diag + m.right) return false;
    return true;
}

#if FCL_RW > 1
/* Which lanes of register rows iv * FCL_RW .. iv * FCL_RW + FCL_RW - 1 have
 * their score in column j hidden by the mask (all bits set there), on a
 * piece whose rows are lanes (FCL_ROW(i) = i, FCL_COL(j) = j): fcl_visible
 * for a whole vector.  TRANSPOSED (dK/dV): the lanes are keys and the
 * columns query rows. */
inline fcl_rowi fcl_hidden_lanes(const fcl_mask m, bool transposed, int r0, int c0, int iv, int j)
{
    const fcl_rowi lane = iv * FCL_RW + FCL_LANE_IOTA;
    const fcl_rowi pos = transposed ? (fcl_rowi)FCL_POS(r0 + j) : (r0 + lane) / FCL_PACK;
    const fcl_rowi key = transposed ? c0 + lane : (fcl_rowi)(c0 + j);
    fcl_rowi hidden = key >= m.seqlen_k;
    if (m.left >= 0)
        hidden |= key < pos + (m.diag - m.left);
    if (m.right >= 0)
        hidden |= key > pos + (m.diag + m.right);
    return hidden;
}
#endif

/* First key visible from any of rows [r0, r1), and one past the last. */
inline int fcl_key_begin(const fcl_mask m, int r0)
{
    if (m.left < 0) return 0;
    return max(0, r0 + m.diag - m.left);
}
inline int fcl_key_end(const fcl_mask m, int r1)
{
    if (m.right < 0) return m.seqlen_k;
    return clamp(r1 - 1 + m.diag + m.right + 1, 0, m.seqlen_k);
}

/* Whether every key of [c0, c1) is visible from every row of [r0, r1): then
 * a tile needs no per-score mask. */
inline bool fcl_tile_inside(const fcl_mask m, int r0, int r1, int c0, int c1)
{
    if (c1 > m.seqlen_k) return false;
    if (m.left >= 0 && c0 < (r1 - 1) + m.diag - m.left) return false;
    if (m.right >= 0 && c1 - 1 > r0 + m.diag + m.right) return false;
    return true;
}

/* The end of the run of whole tiles (inside the mask, fcl_tile_inside)
 * that a loop over the key tiles of bc keys of rows [r0, r1), from key c,
 * begins with: its tiles that start before it.  The left bound's test is
 * met by every tile after the first that meets it, the others by every
 * tile before the last. */
inline int fcl_whole_keys_end(const fcl_mask m, int r0, int r1, int c, int bc)
{
    if (m.left >= 0 && c < (r1 - 1) + m.diag - m.left) return c;
    int lim = m.seqlen_k;
    if (m.right >= 0) lim = min(lim, r0 + m.diag + m.right + 1);
    return max(c, lim - bc + 1);
}

/* The first query position whose row sees every key of [c0, c1), and so
 * does every row after it (no left bound); INT_MAX where no run of such
 * rows ends the rows (a left bound, or keys past seqlen_k). */
inline int fcl_whole_rows_begin(const fcl_mask m, int c0, int c1)
{
    if (c1 > m.seqlen_k || m.left >= 0) return INT_MAX;
    return m.right < 0 ? 0 : max(0, c1 - 1 - m.diag - m.right);
}

/* The same question from the key side (backward dK/dV): rows that can see
 * any of keys [c0, c1), as [begin, end) clamped to [0, seqlen_q). */
inline int fcl_row_begin(const fcl_mask m, int c0)
{
    if (m.right < 0) return 0;
    return max(0, c0 - m.diag - m.right);
}
inline int fcl_row_end(const fcl_mask m, int c1, int seqlen_q)
{
    if (m.left < 0) return seqlen_q;
    return clamp(c1 - 1 - m.diag + m.left + 1, 0, seqlen_q);
}

/* ---- one sequence of the batch -------------------------------------------
 * With variable-length batches (FCL_FEAT_VARLEN) sequence b holds rows
 * cu_q[b] .. cu_q[b+1]-1 of the packed Q/O (keys likewise), and its own
 * lengths align its mask; otherwise every sequence has the full lengths and
 * starts at row 0 of its batch entry. */
typedef struct {
    int seqlen_q, seqlen_k;
    long q_row0, k_row0; /* packed row of the first query / key (varlen), else 0 */
    fcl_mask mask;
} fcl_seq;

inline fcl_seq fcl_sequence(int b, int seqlen_q, int seqlen_k, __global const int *cu_q,
                            __global const int *cu_k, int window_left, int window_right)
{
    fcl_seq s;
#if FCL_HAS(FCL_FEAT_VARLEN)
    s.q_row0 = cu_q[b];
    s.k_row0 = cu_k[b];
    s.seqlen_q = cu_q[b + 1] - cu_q[b];
    s.seqlen_k = cu_k[b + 1] - cu_k[b];
#else
    s.q_row0 = 0;
    s.k_row0 = 0;
    s.seqlen_q = seqlen_q;
    s.seqlen_k = seqlen_k;
#endif
    s.mask.seqlen_k = s.seqlen_k;
    s.mask.diag = s.seqlen_k - s.seqlen_q;
    s.mask.left = window_left;
    s.mask.right = window_right;
    return s;
}

/* The GPU pieces visit heads in groups of FCL_HEAD_GROUP (below); 0 is one
 * group of every head.  The wgmma pieces, forward and backward, take 8: with
 * 64 heads in flight (N 4096, B 4 x 16 heads at d 128) the K and V rows the
 * running work-groups read (2 MB a head) outgrew the H200's L2 and the
 * forward's tile took 2.21 us against 1.98 with 8; side by side 1.00-1.08x
 * on the forward and 1.00-1.15x on the backward, no row slower.  The
 * mma.sync forward keeps 64 and its backward one group: there 8 lost
 * 5-6% on causal N 1024 forwards (NOTES.md, run 71).  A measurement build
 * may set it. */
#ifndef FCL_HEAD_GROUP
#if FCL_WGMMA
#define FCL_HEAD_GROUP 8
#elif defined(FCL_KERNEL_FORWARD) && !FCL_TILE_CPU
#define FCL_HEAD_GROUP 64
#else
#define FCL_HEAD_GROUP 0
#endif
#endif

/* Work-group g of a launch of num_ranks blocks (Q blocks, or K blocks of the
 * dK/dV kernel) times num_heads heads, as the block's rank (0: the block
 * with the most work under a causal mask, num_ranks - 1: the least) and its
 * head (*head).  GPU pieces: heads in groups of FCL_HEAD_GROUP (the last
 * group may be smaller), the groups one after another, and within a group
 * ranks in order, heads fastest, so the heavy blocks start first and the
 * tail of the launch is short.  Groups keep the K/V rows that the running
 * work-groups read together few: with every head in one group and many
 * heads (B 16 x 32 heads at N 1024, d 64), the running work-groups each read
 * another head's K/V and the forward ran 7-11% slower than with groups of
 * 64 heads on the H100; the mma.sync backward gained nothing from groups,
 * and a group of one head (ranks fastest) lost 4-10% on long causal
 * forwards (NOTES.md, run 36); the wgmma pieces' groups of 8 are above.
 * Ranks still ascend with g within a head, which the fused dQ's ordering
 * needs (flash_bwd.cl).  The CPU piece:
 * PoCL's pthread driver hands each thread a contiguous run of groups, the
 * first runs the longest (a thread takes ceil(remaining / threads)), so
 * there the first thread got only the heaviest blocks and the causal
 * forward ran at 0.55x the non-causal rate on 16 threads (NOTES.md, run
 * 21).  There a head's blocks are adjacent, alternately heavy and light
 * (ranks 0, n-1, 1, n-2, ...), so every run of groups is an even mix. */
inline int fcl_rank_of_group(int g, int num_ranks, int num_heads, int *head)
{
#if FCL_TILE_CPU
    *head = g / num_ranks;
    const int slot = g - *head * num_ranks;
    return (slot & 1) ? num_ranks - 1 - (slot >> 1) : slot >> 1;
#else
    const int group = FCL_HEAD_GROUP > 0 ? min(FCL_HEAD_GROUP, num_heads) : num_heads;
    const int first = g / (group * num_ranks) * group; /* the group's first head */
    const int in_group = min(group, num_heads - first);
    const int slot = g - first * num_ranks;
    const int rank = slot / in_group;
    *head = first + slot - rank * in_group;
    return rank;
#endif
}

/* The Q block (of br rows) a work-group of the forward or dQ kernel owns.
 * Work-groups are (Q block, head group, batch, split), the split (split-KV:
 * which chunk of keys, forward only) fastest, then batch * head groups; a
 * head group is FCL_PACK query heads sharing a K/V head (GQA packing,
 * forward only), whose rows are packed (fcl_rows), so a block's rows are
 * counted in packed rows.  Under a causal mask the last Q blocks see the
 * most keys: fcl_rank_of_group orders them.  Q blocks past a shorter packed
 * sequence get rows = 0: they load zeros, visit no key block and store
 * nothing (not an early return: PoCL miscompiled one before the barriers,
 * writing past the output). */
typedef struct {
    int bh, b, h, hk; /* batch * heads_q + h, batch entry, (first) query head, its K/V head */
    int r0, rows;     /* first (packed) row of the block, and its rows inside the sequence */
    int split;        /* the key chunk of split-KV; 0 without */
    fcl_seq sq;
} fcl_q_block;

inline fcl_q_block fcl_q_block_of_group(int br, int num_bh, int num_splits, int heads_q,
                                        int q_per_kv, int seqlen_q, int seqlen_k,
                                        __global const int *cu_q, __global const int *cu_k,
                                        int window_left, int window_right)
{
    fcl_q_block q;
    const int g = (int)get_group_id(0) / num_splits;
    const int num_qb = (int)get_num_groups(0) / (num_bh * num_splits);
    const int groups_per_b = heads_q / FCL_PACK;
    int hg;
    const int rank = fcl_rank_of_group(g, num_qb, num_bh, &hg);
    q.split = (int)get_group_id(0) - g * num_splits;
    q.b = hg / groups_per_b;
    q.h = (hg - q.b * groups_per_b) * FCL_PACK;
    q.bh = q.b * heads_q + q.h;
    q.hk = q.h / q_per_kv;
    q.sq = fcl_sequence(q.b, seqlen_q, seqlen_k, cu_q, cu_k, window_left, window_right);
    q.r0 = (num_qb - 1 - rank) * br;
    q.rows = clamp(q.sq.seqlen_q * FCL_PACK - q.r0, 0, br);
    return q;
}

/* A KV-cache call (FCL_FEAT_KVCACHE): sequence b attends to its first
 * seqlen_k keys, or to none when the cache check failed for it. */
inline void fcl_sequence_set_keys(fcl_seq *s, int seqlen_k)
{
    s->seqlen_k = seqlen_k;
    s->mask.seqlen_k = seqlen_k;
    s->mask.diag = seqlen_k - s->seqlen_q;
}

/* The check of a KV-cache sequence (FCL_FEAT_KVCACHE), made by every
 * work-group that reads or writes its cache: its len cached keys and
 * seqlen_new appended ones fit the cache (capacity keys per sequence), and
 * the page-table entries of its keys in [first, end) lie in [0, num_pages).
 * The same answer for every work-item, which must all call it (a barrier);
 * `flag` is __local scratch.  Page entries past the sequence's keys are
 * never read: they may hold anything. */
inline bool fcl_kvcache_sequence_ok(int len, int seqlen_new, int capacity,
                                    __global const int *pages, int first, int end, int num_pages,
                                    volatile __local int *flag, int lid, int wg)
{
    const long total = (long)len + seqlen_new;
    const bool length_ok = len >= 0 && total <= capacity;
#if FCL_PAGE_SIZE > 0
    if (lid == 0)
        *flag = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (length_ok) {
        const int last = (int)min((long)end, total);
        for (int p = first / FCL_PAGE_SIZE + lid; p < (last + FCL_PAGE_SIZE - 1) / FCL_PAGE_SIZE;
             p += wg)
            if (pages[p] < 0 || pages[p] >= num_pages)
                atomic_or(flag, 1);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return length_ok && *flag == 0;
#else
    (void)pages; (void)first; (void)end; (void)num_pages; (void)flag; (void)lid; (void)wg;
    return length_ok;
#endif
}

/* The element offset of batch entry b: packed sequences have none. */
inline long fcl_batch_offset(int b, long stride_batch)
{
    return FCL_HAS(FCL_FEAT_VARLEN) ? 0 : (long)b * stride_batch;
}

/* LSE (and delta) are (batch, heads_q, seqlen_q), or (heads_q, total_q) for
 * packed sequences; lse_rows is seqlen_q or total_q. */
inline long fcl_lse_index(int b, int h, int heads_q, int lse_rows, const fcl_seq s, int row)
{
    const long head = FCL_HAS(FCL_FEAT_VARLEN) ? h : (long)b * heads_q + h;
    return head * lse_rows + s.q_row0 + row;
}

/* ---- optional arrays -------------------------------------------------------
 * A per-head array a call may leave out (the sinks, FP8's descales) is never
 * a NULL argument: the host binds a one-float placeholder in its place and
 * says which arrays are real in the kernel's `arrays` bits.  fcl_optional
 * reads element i of a real array, else gives `absent`; its load runs
 * whatever the bit says and stays in bounds (index 0 of the placeholder), so
 * a compiler that hoists a load past its condition reads nothing it must
 * not.  Intel's CPU runtime (2026.2) did that to `sinks != 0 ? sinks[h] : x`
 * (one address for the whole work-group, between two branches that differ
 * per work-item): its 8-wide form loaded from NULL and crashed (NOTES.md,
 * "Intel"). */
#define FCL_ARRAY_DESCALE_Q 1
#define FCL_ARRAY_DESCALE_K 2
#define FCL_ARRAY_DESCALE_V 4
#define FCL_ARRAY_SINKS 8
inline float fcl_optional(__global const float *a, long i, int arrays, int bit, float absent)
{
    const bool real = (arrays & bit) != 0;
    const float x = a[real ? i : 0];
    return real ? x : absent;
}

/* ---- attention sinks -------------------------------------------------------
 * log(exp(a) + exp(b)) without overflow: a row's log-sum-exp `a` (-inf when
 * it saw no key) with a sink logit `b` joined (flash_fwd.cl's last step and
 * combine.cl's merge, so split and unsplit rows agree).  NaN in either is
 * NaN (fmax would drop it); -inf + -inf is -inf; +inf in either is +inf. */
inline float fcl_lse_add(float a, float b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    const float m = fmax(a, b);
    if (isinf(m))
        return m;
    return m + log(exp(a - m) + exp(b - m));
}

/* ---- score modifiers, in FlashAttention-2's order --------------------------
 * s = scale * q.k; with a softcap, s = cap * tanh(s / cap); with ALiBi,
 * s -= slope * |i + diag - j| (the distance to the bottom-right aligned
 * diagonal).  *t receives tanh(s / cap) for the softcap's gradient. */
typedef struct {
    float scale;
    float softcap;
    float slope;
} fcl_score_mods;

inline float fcl_modify_score(float qk, const fcl_score_mods m, int i, int j, int diag, float *t)
{
    float s = qk * m.scale;
#if FCL_HAS(FCL_FEAT_SOFTCAP)
    const float th = tanh(s / m.softcap);
    *t = th;
    s = m.softcap * th;
#else
    *t = 0.0f;
#endif
#if FCL_HAS(FCL_FEAT_ALIBI)
    s -= m.slope * (float)abs(i + diag - j);
#endif
    return s;
}

/* A score q.k, modified, in the exponent units of the tile piece
 * (FCL_EXP_UNITS, defined by the piece; `units_scale` is
 * FCL_EXP_UNITS(scale)).  Without softcap and ALiBi it is one multiply: the
 * scale and the units' factor folded together.  `t` as for fcl_modify_score. */
#define FCL_MODIFIED_SCORES (FCL_HAS(FCL_FEAT_SOFTCAP) || FCL_HAS(FCL_FEAT_ALIBI))
#if FCL_MODIFIED_SCORES
#define FCL_SCORE_UNITS(qk, mods, units_scale, i, j, diag, t) \
    FCL_EXP_UNITS(fcl_modify_score((qk), (mods), (i), (j), (diag), (t)))
#else
#define FCL_SCORE_UNITS(qk, mods, units_scale, i, j, diag, t) (*(t) = 0.0f, (qk) * (units_scale))
#endif

/* ---- Philox4x32-10 (Salmon et al., SC'11): integer arithmetic only, so
 * every device draws the same numbers. --------------------------------------- */
inline uint4 fcl_philox4x32_10(uint4 ctr, uint2 key)
{
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            key.x += 0x9E3779B9u;
            key.y += 0xBB67AE85u;
        }
        const uint lo0 = 0xD2511F53u * ctr.x, hi0 = mul_hi(0xD2511F53u, ctr.x);
        const uint lo1 = 0xCD9E8D57u * ctr.z, hi1 = mul_hi(0xCD9E8D57u, ctr.z);
        ctr = (uint4)(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
    }
    return ctr;
}

/* Dropout of attention probability (i, j) of head bh = b * heads_q + h:
 * counter (j, i / 4, bh, offset), key (seed low, seed high) and word i % 4 of
 * the result; kept when that word >= threshold = round(p * 2^32), and then
 * scaled by 1 / (1 - p).  Positions are within the sequence. */
typedef struct {
    uint2 key;
    uint offset;
    uint threshold;
    float keep_scale;
} fcl_dropout;

inline float fcl_dropout_factor(const fcl_dropout d, int bh, int i, int j)
{
    const uint4 r = fcl_philox4x32_10((uint4)((uint)j, (uint)i >> 2, (uint)bh, d.offset), d.key);
    const int w = i & 3;
    const uint word = w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
    return word >= d.threshold ? d.keep_scale : 0.0f;
}

/* ---- block-sparse masks ------------------------------------------------------
 * A caller's mask of block_m x block_n blocks, one byte each (non-zero: the
 * block is computed), row-major with nbn blocks per row, already offset to
 * this (batch, head).  Independent of the tile plan. */
typedef struct {
    __global const uchar *mask;
    int block_m, block_n, nbn;
} fcl_blocks;

inline bool fcl_block_on(const fcl_blocks bl, int i, int j)
{
    return bl.mask[(long)(i / bl.block_m) * bl.nbn + j / bl.block_n] != 0;
}

/* How the blocks meet rows [r0, r1) x keys [c0, c1) (both non-empty): none
 * on (the tile is skipped whole), all on (no per-score test needed), or some. */
enum { FCL_BLOCKS_NONE = 0, FCL_BLOCKS_SOME = 1, FCL_BLOCKS_ALL = 2 };

inline int fcl_blocks_cover(const fcl_blocks bl, int r0, int r1, int c0, int c1)
{
    bool any = false, all = true;
    for (int bi = r0 / bl.block_m; bi <= (r1 - 1) / bl.block_m; ++bi)
        for (int bj = c0 / bl.block_n; bj <= (c1 - 1) / bl.block_n; ++bj) {
            const bool on = bl.mask[(long)bi * bl.nbn + bj] != 0;
            any = any || on;
            all = all && on;
        }
    return !any ? FCL_BLOCKS_NONE : all ? FCL_BLOCKS_ALL : FCL_BLOCKS_SOME;
}

/* How the block mask covers a tile; FCL_BLOCKS_ALL when none is compiled in. */
inline int fcl_tile_cover(const fcl_blocks bl, int r0, int r1, int c0, int c1)
{
#if FCL_HAS(FCL_FEAT_BLOCKMASK)
    return fcl_blocks_cover(bl, r0, r1, c0, c1);
#else
    return FCL_BLOCKS_ALL;
#endif
}

/* The first key tile of bc keys at or after column c (a multiple of bc)
 * that rows [r0, r1) have to visit: with a block-sparse mask, tiles it covers
 * with zero blocks only are skipped.  key_end when there is none. */
inline int fcl_next_key_tile(const fcl_blocks bl, int bc, int r0, int r1, int c, int key_end,
                             int seqlen_k)
{
    while (c < key_end && fcl_tile_cover(bl, r0, r1, c, min(c + bc, seqlen_k)) == FCL_BLOCKS_NONE)
        c += bc;
    return c < key_end ? c : key_end;
}

/* Whether the scores of the tile (query rows [r0, r1), keys [c0, c1)) need
 * the per-score test of fcl_score_visible: tiles inside the mask, wholly
 * covered by the block mask, skip it (padding rows need none: the kernels
 * give them zero probability through their LSE or output). */
inline bool fcl_tile_edge(const fcl_mask m, int cover, int r0, int r1, int c0, int c1)
{
    return !fcl_tile_inside(m, r0, r1, c0, c1) || cover != FCL_BLOCKS_ALL;
}

/* Score (i, j) of an edge tile: inside the mask and, unless the block mask
 * covers the whole tile, in a non-zero block (rows past seqlen_q have no
 * block). */
inline bool fcl_score_visible(const fcl_mask m, const fcl_blocks bl, int cover, int seqlen_q, int i,
                              int j)
{
    bool vis = fcl_visible(m, i, j);
#if FCL_HAS(FCL_FEAT_BLOCKMASK)
    vis = vis && (cover == FCL_BLOCKS_ALL || (i < seqlen_q && fcl_block_on(bl, i, j)));
#endif
    return vis;
}

/* Runs the statement HIDE, written on i_ and j_, for each register (i_, j_)
 * of the work-item's score tile (RM x RN, from the piece) whose score is
 * masked.  Only edge tiles test scores: a branch per tile, the same for the
 * whole work-group, and no test per score elsewhere.  Register (i, j) is
 * score (r0 + FCL_ROW(i), c0 + FCL_COL(j)); TRANSPOSED (dK/dV's tiles of
 * keys x queries) swaps them.  Query rows may be packed (FCL_POS): the mask
 * sees their positions.  On a piece with rows as lanes and no block mask,
 * HIDE_LANES runs instead, written on iv_, j_ and hid_ (fcl_hidden_lanes):
 * one vector of rows at a time. */
/* FCL_WHOLE_KEYS (the host's FCL_BUILD_WHOLE_TILES: no mask, no window, no
 * block mask, fixed lengths, seqlen_k a multiple of it): every key tile
 * is whole and inside, so where BC divides it no tile is an edge tile and
 * the tests, the masking and the guards of edge tiles compile away
 * (measured: NOTES.md, run 65).
 *
 * Elsewhere FCL_SPLIT_EDGES splits the loops so that the edge tiles' code
 * costs registers, and spills, only in the tiles that run it: on the wgmma
 * piece, and on mma.sync's at head_dim 64 (at 128 NVIDIA's compiler made
 * mma.sync's causal forward 3-5% slower so; NOTES.md, run 66).  A kernel's
 * loop over tiles is written
 *     FCL_FOR_RUNS FCL_TILE_LOOP(cond) { body }
 * with `cond` bounded by FCL_LAST_RUN, and the compiler builds the body
 * twice (the loop over the two runs is unrolled): once for the run of whole
 * tiles, inside the mask, where FCL_EDGE_TILE is false at compile time, and
 * once for the run that holds the edge tiles.  The whole tiles are one run
 * at the loop's start for the loops over key tiles (forward, dQ: the keys
 * before the causal diagonal; fcl_whole_keys_end), in their order, and at
 * its end for dK/dV's loop over query blocks (the rows after it;
 * fcl_whole_rows_begin; under GQA each head's edge blocks, then each head's
 * whole ones: flash_bwd.cl); FCL_EDGE_RUN is the run of edge tiles.  Where
 * a loop has no such run (a left window, a block mask) every tile goes to
 * the edge run and is tested as before.  Without the split, one run and
 * the test per tile. */
#ifndef FCL_SPLIT_EDGES
#define FCL_SPLIT_EDGES (FCL_WGMMA || (FCL_TILE_MMA && D_PAD == 64))
#endif
#if defined(FCL_KERNEL_DKDV)
#define FCL_EDGE_RUN 0
#else
#define FCL_EDGE_RUN 1
#endif
#if FCL_WHOLE_KEYS > 0 && FCL_WHOLE_KEYS % BC == 0
#define FCL_EDGE_RUNS 1
#define FCL_EDGE_TILE(mask, cover, r0, rows, c0) false
#elif FCL_SPLIT_EDGES && !FCL_HAS(FCL_FEAT_BLOCKMASK)
#define FCL_EDGE_RUNS 2
#define FCL_EDGE_TILE(mask, cover, r0, rows, c0)                                             \
    (fcl_run_ == FCL_EDGE_RUN &&                                                           \
     fcl_tile_edge(mask, cover, FCL_POS(r0), FCL_POS((r0) + (rows) - 1) + 1, c0, (c0) + BC))
#else
#define FCL_EDGE_RUNS 1
#define FCL_EDGE_TILE(mask, cover, r0, rows, c0) \
    fcl_tile_edge(mask, cover, FCL_POS(r0), FCL_POS((r0) + (rows) - 1) + 1, c0, (c0) + BC)
#endif
#if FCL_EDGE_RUNS == 2
#define FCL_FOR_RUNS FCL_UNROLL for (int fcl_run_ = 0; fcl_run_ < 2; ++fcl_run_)
#define FCL_LAST_RUN (fcl_run_ == 1)
#else
#define FCL_FOR_RUNS
#define FCL_LAST_RUN true
#endif
#if FCL_RW > 1 && !FCL_HAS(FCL_FEAT_BLOCKMASK)
#define FCL_HIDE_MASKED(TRANSPOSED, mask, blocks, cover, seqlen_q, r0, rows, c0, HIDE, HIDE_LANES) \
    do {                                                                                   \
        if (FCL_EDGE_TILE(mask, cover, r0, rows, c0)) {                                    \
            for (int iv_ = 0; iv_ < RMV; ++iv_)                                            \
                for (int j_ = 0; j_ < RN; ++j_) {                                          \
                    const fcl_rowi hid_ = fcl_hidden_lanes(mask, TRANSPOSED, r0, c0, iv_, j_); \
                    HIDE_LANES;                                                            \
                }                                                                          \
        }                                                                                  \
    } while (0)
#else
#define FCL_HIDE_MASKED(TRANSPOSED, mask, blocks, cover, seqlen_q, r0, rows, c0, HIDE, HIDE_LANES) \
    do {                                                                                   \
        if (FCL_EDGE_TILE(mask, cover, r0, rows, c0)) {                                    \
            FCL_UNROLL                                                                     \
            for (int i_ = 0; i_ < RM; ++i_)                                                \
                FCL_UNROLL                                                                 \
                for (int j_ = 0; j_ < RN; ++j_)                                            \
                    if (!fcl_score_visible(mask, blocks, cover, seqlen_q,                  \
                                           FCL_POS((r0) + ((TRANSPOSED) ? FCL_COL(j_) : FCL_ROW(i_))), \
                                           (c0) + ((TRANSPOSED) ? FCL_ROW(i_) : FCL_COL(j_)))) \
                        HIDE;                                                              \
        }                                                                                  \
    } while (0)
#endif

/* ---- non-finite operands of edge tiles ---------------------------------------
 * A row's outputs depend only on the keys it sees, also when an input holds
 * a NaN or an infinity.  After the softmax a masked score is an exact zero
 * (P, dS), and a product of one with a non-finite operand element (0 * inf
 * = NaN) would reach a row that cannot see it: the forward's P V (through
 * V), dQ's dS K (K), dK/dV's P^T dO and dS^T Q (dO, Q).  Only edge tiles
 * (FCL_EDGE_TILE) hold masked scores: elsewhere the operand is left as it
 * is.  In an edge tile the work-group first looks for a non-finite element
 * among the operand tile's valid rows (FCL_GUARD_NONFINITE: each work-item
 * a share, then fcl_group_any, one barrier); only when there is one (rare)
 * does it take the exact path: every output accumulator whose row sees a
 * partner with a non-finite element in the accumulator's column becomes NaN
 * (FCL_POISON; a NaN survives the later rescaling and sums), and the piece
 * makes the tile's non-finite elements read as 0 in the product (CLEAN:
 * zeroed on chip, or read through a select), which is then exact for every
 * other accumulator (a masked zero times 0 adds nothing).  Padding rows of
 * a tile are zeros or copies of its last valid row, which the scan covers.
 * The piece gives per operand BAD(X, p, c), whether element (p, c) of the
 * tile is non-finite (X: the tile's buffer, where it has two), and CLEAN(X,
 * n) for its first n rows. */

/* The statement that follows, for this work-item's share (p, c) of the
 * first nrows rows and `width` columns of a tile: a row at a time, so one
 * work-item (the CPU piece) walks each row as a vectorisable loop. */
#define FCL_FOR_SHARE(p, c, nrows, width)  \
    for (int p = 0; p < (nrows); ++p)      \
        for (int c = lid; c < (width); c += WG)

/* Sets to NaN each accumulator acc[i][n] (register row i, tile row
 * FCL_ACC_ROW(i), head_dim column FCL_OCOL(n)) whose row sees a partner
 * p < npart (key c0 + p of the tile; TRANSPOSED, dK/dV: query row r0 + p)
 * with BAD(X, p, FCL_OCOL(n)).  A
 * partner at a time, so the register arrays keep constant indices; BAD is
 * read again rather than kept, which would cost registers on every path. */
#define FCL_POISON(acc, TRANSPOSED, mask, blocks, cover, seqlen_q, r0, c0, npart, BAD, X)  \
    do {                                                                             \
        for (int p_ = 0; p_ < (npart); ++p_) {                                       \
            bool any_ = false;                                                       \
            FCL_UNROLL                                                               \
            for (int n_ = 0; n_ < DN; ++n_) any_ = any_ || BAD(X, p_, FCL_OCOL(n_)); \
            if (!any_) continue;                                                     \
            FCL_UNROLL                                                               \
            for (int i_ = 0; i_ < FCL_ACC_RM; ++i_) {                                \
                const int row_ = (r0) + ((TRANSPOSED) ? p_ : FCL_ACC_ROW(i_));       \
                const int key_ = (c0) + ((TRANSPOSED) ? FCL_ACC_ROW(i_) : p_);       \
                if (!fcl_score_visible(mask, blocks, cover, seqlen_q, FCL_POS(row_), key_)) \
                    continue;                                                        \
                FCL_UNROLL                                                           \
                for (int n_ = 0; n_ < DN; ++n_)                                      \
                    if (BAD(X, p_, FCL_OCOL(n_))) FCL_S(acc, i_, n_) = NAN;          \
            }                                                                        \
        }                                                                            \
    } while (0)

/* The scan itself is the piece's FCL_GUARD_SCAN(bad, BAD, X, npart, width):
 * bad |= whether this work-item's share of the first npart rows and
 * `width` columns holds a BAD element (FCL_SCAN_SHARE, element by element,
 * on the portable and CPU pieces; 16 bytes at a time on the tensor-core
 * piece, where a scan of single elements cost more than the tile's
 * products, NOTES.md). */
#define FCL_SCAN_SHARE(bad, BAD, X, npart, width) \
    FCL_FOR_SHARE(p_, c_, npart, width) bad |= BAD(X, p_, c_)

/* Before the product of an edge tile's accumulators acc with its operand
 * tile of npart valid rows (see above): scan, and on a find poison acc and
 * CLEAN the tile.  `flag` is __local scratch for fcl_group_any, `tag` this
 * tile's (see there).  Every work-item must reach it. */
#define FCL_GUARD_NONFINITE(acc, TRANSPOSED, mask, blocks, cover, seqlen_q, r0, rows, c0, npart, \
                            head_dim, flag, tag, BAD, CLEAN, X)                        \
    FCL_GUARD_NONFINITE_IF(FCL_EDGE_TILE(mask, cover, r0, rows, c0), acc, TRANSPOSED, mask, \
                           blocks, cover, seqlen_q, r0, c0, npart, head_dim, flag, tag, BAD, \
                           CLEAN, X)
/* The same where the piece knows already whether the tile is an edge tile
 * (`edge`, FCL_EDGE_TILE's answer, kept from an earlier test). */
#define FCL_GUARD_NONFINITE_IF(edge, acc, TRANSPOSED, mask, blocks, cover, seqlen_q, r0, c0,  \
                               npart, head_dim, flag, tag, BAD, CLEAN, X)             \
    do {                                                                             \
        if (edge) {                                                                  \
            bool bad_ = false;                                                       \
            FCL_GUARD_SCAN(bad_, BAD, X, npart, head_dim);                           \
            if (fcl_group_any(bad_, flag, tag)) {                                    \
                FCL_POISON(acc, TRANSPOSED, mask, blocks, cover, seqlen_q, r0, c0, npart, BAD, X); \
                CLEAN(X, npart);                                                     \
            }                                                                        \
        }                                                                            \
    } while (0)

/* ---- the per-(batch, head) state of the variants, as every kernel needs it */
typedef struct {
    fcl_score_mods mods;
    fcl_dropout drop;
    fcl_blocks blocks;
} fcl_variant_state;

inline fcl_variant_state fcl_variant_state_make(int b, int h, float scale, float softcap,
                                                __global const float *alibi, long alibi_sb,
                                                uint seed_lo, uint seed_hi, uint drop_offset,
                                                uint drop_threshold, float keep_scale,
                                                __global const uchar *block_mask, long bm_sb,
                                                long bm_sh, int block_m, int block_n,
                                                int block_nbn)
{
    fcl_variant_state v;
    v.mods.scale = scale;
    v.mods.softcap = softcap;
    v.mods.slope = 0.0f;
#if FCL_HAS(FCL_FEAT_ALIBI)
    v.mods.slope = alibi[(long)b * alibi_sb + h];
#endif
    v.drop.key = (uint2)(seed_lo, seed_hi);
    v.drop.offset = drop_offset;
    v.drop.threshold = drop_threshold;
    v.drop.keep_scale = keep_scale;
    v.blocks.mask = block_mask;
    v.blocks.block_m = block_m;
    v.blocks.block_n = block_n;
    v.blocks.nbn = block_nbn;
#if FCL_HAS(FCL_FEAT_BLOCKMASK)
    v.blocks.mask += (long)b * bm_sb + (long)h * bm_sh;
#endif
    return v;
}

/* The kernel arguments that fcl_variant_state_make takes, in order. */
#define FCL_VARIANT_ARGS(b, h)                                                          \
    (b), (h), scale, softcap, alibi, alibi_sb, seed_lo, seed_hi, drop_offset,           \
        drop_threshold, keep_scale, block_mask, bm_sb, bm_sh, block_m, block_n, block_nbn

/* Dropout of four consecutive rows i4 .. i4+3 (i4 a multiple of 4) at key j,
 * from one Philox call: bit w set when row i4 + w is kept. */
inline uint fcl_dropout_keep4(const fcl_dropout d, int bh, int i4, int j)
{
    const uint4 r = fcl_philox4x32_10((uint4)((uint)j, (uint)i4 >> 2, (uint)bh, d.offset), d.key);
    return (uint)(r.x >= d.threshold) | (uint)(r.y >= d.threshold) << 1 |
           (uint)(r.z >= d.threshold) << 2 | (uint)(r.w >= d.threshold) << 3;
}
