/* warpgroup_emulated.cl - the operations of warpgroup_ptx.cl in portable
 * OpenCL C, for testing the wgmma piece (tile_nv_wgmma.cl) on devices
 * without them (PoCL in CI).  Built with FCL_WGMMA=1 and FCL_MMA_EMULATE=1,
 * which only the test hooks set.  The descriptors are decoded as the PTX
 * ISA defines them ("Canonical Layouts", the 128-byte swizzle the
 * piece's tiles use), so a wrong start address, LBO, SBO,
 * swizzle mode or transpose gives wrong results here too; their addresses
 * are relative to the tile the operation is given, which on the GPU starts
 * on a 1024-byte boundary, so the swizzle of the one is that of the
 * other.  Each
 * work-item computes its own accumulators (the m64nNk16 layout) as fp32
 * fused multiply-adds of the 16-bit inputs in k order; an A operand in
 * registers is exchanged through FCL_WARP_SCRATCH (warp_emulated.cl)
 * between two work-group barriers, so these too are called in uniform
 * control flow.  Fences, commits and waits have nothing to order here. */
#if FCL_WGMMA && FCL_MMA_EMULATE

/* Byte address fields of a descriptor. */
inline uint fcl_wg_start(ulong desc) { return (uint)(desc & 0x3FFFu) << 4; }
inline uint fcl_wg_lbo(ulong desc) { return (uint)((desc >> 16) & 0x3FFFu) << 4; }
inline uint fcl_wg_sbo(ulong desc) { return (uint)((desc >> 32) & 0x3FFFu) << 4; }
inline uint fcl_wg_swizzle(ulong desc) { return (uint)(desc >> 62); }

/* A byte address through the 128-byte swizzle (mode 1): bits 4-6, the
 * 16-byte chunk of a 128-byte row, XOR bits 7-9, the row of its
 * 1024-byte atom. */
inline uint fcl_wg_swizzled(uint at) { return at ^ (((at >> 7) & 7u) << 4); }

/* Byte (mn, k) of a K-major operand of esize-byte elements, 128-byte
 * swizzle: 128-byte rows of 8 chunks along k (one wgmma's 32 bytes of k
 * in one row, LBO unused), SBO between 8-row blocks along m or n. */
inline uint fcl_wg_kmajor_at(ulong desc, int mn, int k, uint esize)
{
    return fcl_wg_swizzled(fcl_wg_start(desc) + (uint)(mn & 7) * 128u +
                           (uint)(mn >> 3) * fcl_wg_sbo(desc) + (uint)k * esize);
}

/* Element (mn, k) of a K-major operand: 16-bit values (esize 2), or E4M3
 * bytes (esize 1, FP8 products) decoded exactly.  Another swizzle mode,
 * which the piece never asks for, reads NaN. */
inline float fcl_wg_kmajor(__local const ushort *t, ulong desc, int mn, int k, uint esize)
{
    const uint at = fcl_wg_kmajor_at(desc, mn, k, esize);
    if (fcl_wg_swizzle(desc) != FCL_WG_SWIZZLE_128B)
        return NAN;
    return esize == 1 ? fcl_decode_e4m3(((__local const uchar *)t)[at])
                      : fcl_half_to_float(t[at / 2]);
}

/* Element (k, n) of an MN-major operand (16-bit), 128-byte swizzle: 64
 * n-values a 128-byte row, LBO between atoms along n, SBO between 8-row
 * blocks along k. */
inline float fcl_wg_mnmajor(__local const ushort *t, ulong desc, int k, int n)
{
    const uint at = fcl_wg_swizzled(fcl_wg_start(desc) + (uint)(n & 63) * 2u +
                                    (uint)(n >> 6) * fcl_wg_lbo(desc) + (uint)(k & 7) * 128u +
                                    (uint)(k >> 3) * fcl_wg_sbo(desc));
    return fcl_wg_swizzle(desc) == FCL_WG_SWIZZLE_128B ? fcl_half_to_float(t[at / 2]) : NAN;
}

/* Row and column of this work-item's accumulator r (m64nN). */
inline int fcl_wg_row(int r)
{
    const int lid = (int)get_local_id(0);
    return 16 * ((lid >> 5) & 3) + ((lid & 31) >> 2) + 8 * ((r >> 1) & 1);
}
inline int fcl_wg_col(int r) { return 8 * (r >> 2) + 2 * (get_local_id(0) & 3) + (r & 1); }

/* d = A B^T (+ d when acc) over one wgmma's 32 bytes of k (16 16-bit
 * values or 32 E4M3 bytes, esize 2 or 1), A and B K-major; with `trans`
 * (both transpose bits; 16-bit only) A B, both MN-major: A's element (m,
 * k) lies where an MN-major operand's (k, n = m) does. */
inline void fcl_wgmma_ss_emulated(__local const ushort *ta, __local const ushort *tb, float *d,
                                  ulong da, ulong db, int acc, int n, int trans, uint esize)
{
    for (int r = 0; r < n / 2; ++r) {
        const int row = fcl_wg_row(r), col = fcl_wg_col(r);
        float sum = acc ? d[r] : 0.0f;
        for (int k = 0; k < 32 / (int)esize; ++k)
            sum = fma(trans ? fcl_wg_mnmajor(ta, da, k, row) : fcl_wg_kmajor(ta, da, row, k, esize),
                      trans ? fcl_wg_mnmajor(tb, db, k, col) : fcl_wg_kmajor(tb, db, col, k, esize),
                      sum);
        d[r] = sum;
    }
}

/* d += A B with A in registers, the fragment warpgroup_ptx.cl describes:
 * 16-bit A (esize 2, the mma.sync fragment of warp_ptx.cl) with B MN-major,
 * or E4M3 A (esize 1, four bytes a register) with B K-major (FP8 products'
 * V^T). */
inline void fcl_wgmma_rs_emulated(__local uint *x, __local const ushort *tb, float *d,
                                  const uint a[4], ulong db, int n, uint esize)
{
    const int lid = (int)get_local_id(0), lane = lid & 31;
    const int per = 4 / (int)esize, span = 4 * per; /* k's a register, a lane quad */
    __local uint *w = x + (lid - lane) * 6; /* this warp's 32 x 6 words */
    for (int i = 0; i < 4; ++i) w[lane * 6 + i] = a[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = 0; r < n / 2; ++r) {
        const int row = fcl_wg_row(r) & 15, col = fcl_wg_col(r); /* the warp's 16 rows */
        float sum = d[r];
        for (int k = 0; k < 32 / (int)esize; ++k) {
            const int a_lane = 4 * (row & 7) + (k % span) / per;
            const int a_reg = (row >> 3) + 2 * (k / span);
            const uint word = w[a_lane * 6 + a_reg];
            const float av = esize == 1 ? fcl_decode_e4m3((word >> (8 * (k & 3))) & 0xFFu)
                                        : fcl_unpack(word, k & 1);
            const float bv =
                esize == 1 ? fcl_wg_kmajor(tb, db, col, k, 1) : fcl_wg_mnmajor(tb, db, k, col);
            sum = fma(av, bv, sum);
        }
        d[r] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

#if FCL_FP8_PRODUCTS
/* FP8 products (warpgroup_ptx.cl): m64n128k32 on E4M3 bytes */
#define fcl_wgmma_ss8_128(ta, tb, d, da, db, acc) \
    fcl_wgmma_ss_emulated(ta, tb, d, da, db, acc, 128, 0, 1)
#define fcl_wgmma_rs8_128(tb, d, a, db) \
    fcl_wgmma_rs_emulated(fcl_warp_x, (tb), (d), (a), (db), 128, 1)

/* x to E4M3 (OCP E4M3FN), to nearest even, saturated at 448 as
 * cvt.rn.satfinite does; NaN to 0x7F */
inline uint fcl_e4m3_rn(float x)
{
    const uint s = (as_uint(x) >> 24) & 0x80u;
    const float a = fabs(x);
    if (isnan(x))
        return s | 0x7Fu;
    if (a >= 448.0f)
        return s | 0x7Eu;
    if (a < 0x1p-6f) /* subnormal: steps of 2^-9 (8 rounds up to the smallest normal) */
        return s | (uint)rint(a * 512.0f);
    int e;
    float q = rint(frexp(a, &e) * 16.0f); /* a = q / 16 * 2^e, q in [8, 16] */
    if (q == 16.0f) {
        q = 8.0f;
        ++e;
    }
    return s | ((uint)(e + 6) << 3) | ((uint)q - 8u);
}
inline uint fcl_e4m3x4(float a0, float a1, float a2, float a3)
{
    return fcl_e4m3_rn(a0) | fcl_e4m3_rn(a1) << 8 | fcl_e4m3_rn(a2) << 16 | fcl_e4m3_rn(a3) << 24;
}

/* a bulk copy, by the one work-item that issues it; the wait is a barrier */
inline void fcl_wg_bulk(__local ushort *dst, __global const uchar *src, uint bytes,
                        __local ulong *bar)
{
    (void)bar;
    for (uint i = 0; i < bytes / 16; ++i)
        ((__local uint4 *)dst)[i] = ((__global const uint4 *)src)[i];
}
#define fcl_wg_bar_init(bar) ((void)(bar))
#endif

#if FCL_WG_TMA
/* The tensor memory accelerator: the work-group's "maps" hold where each
 * tensor's rows are (base, row stride, columns, rows); one work-item
 * copies a box as the accelerator would, zeros outside the tensor, into
 * the 128-byte swizzle; a wait is a barrier (its callers are uniform),
 * which also publishes the copy. */
inline void fcl_wg_maps_make(__global ulong *maps, __global const ulong *tmpl, __local ulong *stage,
                             __local ulong *bars, __global const fcl_kv_storage *k, long k_base,
                             long k_ss, int k_cols, __global const fcl_kv_storage *v, long v_base,
                             long v_ss, int v_cols, int rows, int nbars, int lid)
{
    (void)tmpl;
    (void)stage;
    (void)bars;
    (void)nbars;
    (void)k;
    (void)v;
    if (lid == 0) {
        maps[0] = (ulong)k_base;
        maps[1] = (ulong)k_ss;
        maps[2] = (ulong)k_cols;
        maps[3] = (ulong)rows;
        maps[16] = (ulong)v_base;
        maps[17] = (ulong)v_ss;
        maps[18] = (ulong)v_cols;
        maps[19] = (ulong)rows;
    }
}

inline void fcl_wg_tma_tile(__local ushort *dst, __global const ulong *map,
                            __global const fcl_kv_storage *src, int row0, __local ulong *bar)
{
    (void)bar;
    __global const ushort *t = (__global const ushort *)src;
    const long base = (long)map[0], ss = (long)map[1];
    const int cols = (int)map[2], rows = (int)map[3];
    for (int r = 0; r < FCL_WG_BOX_ROWS; ++r)
        for (int c = 0; c < D_PAD; ++c)
            dst[FCL_WG_AT(FCL_WG_BOX_ROWS, r, c)] =
                row0 + r < rows && c < cols ? t[base + (long)(row0 + r) * ss + c] : (ushort)0;
}

/* every work-item has arrived (a barrier), and work-item 0 issues */
inline bool fcl_wg_last_arrival(volatile __local uint *count, int lane)
{
    (void)count;
    (void)lane;
    barrier(CLK_LOCAL_MEM_FENCE);
    return get_local_id(0) == 0;
}

/* no named barriers in OpenCL C: the emulation's warpgroups take no turns */
#define fcl_wg_named_sync(id, count) ((void)(id), (void)(count))
#define fcl_wg_named_arrive(id, count) ((void)(id), (void)(count))
#define fcl_wg_bar_expect(bar, bytes) ((void)(bar), (void)(bytes))
#define fcl_wg_bar_wait(bar, parity) ((void)(bar), (void)(parity), barrier(CLK_LOCAL_MEM_FENCE))
#endif

#define fcl_wgmma_ss64(ta, tb, d, da, db, acc) \
    fcl_wgmma_ss_emulated(ta, tb, d, da, db, acc, 64, 0, 2)
#define fcl_wgmma_ss128(ta, tb, d, da, db, acc) \
    fcl_wgmma_ss_emulated(ta, tb, d, da, db, acc, 128, 0, 2)
#define fcl_wgmma_ss_tt64(ta, tb, d, da, db, acc) \
    fcl_wgmma_ss_emulated(ta, tb, d, da, db, acc, 64, 1, 2)
#define fcl_wgmma_ss_tt128(ta, tb, d, da, db, acc) \
    fcl_wgmma_ss_emulated(ta, tb, d, da, db, acc, 128, 1, 2)
#define fcl_wgmma_rs_t64(tb, d, a, db) \
    fcl_wgmma_rs_emulated(fcl_warp_x, (tb), (d), (a), (db), 64, 2)
#define fcl_wgmma_rs_t128(tb, d, a, db) \
    fcl_wgmma_rs_emulated(fcl_warp_x, (tb), (d), (a), (db), 128, 2)
#define fcl_wg_fence() ((void)0)
#define fcl_wg_commit() ((void)0)
#define fcl_wg_wait0() ((void)0)
#define fcl_wg_wait1() ((void)0)
#define fcl_wg_proxy_fence() ((void)0)
#define fcl_wg_cta_fence() mem_fence(CLK_LOCAL_MEM_FENCE)
/* no timer in OpenCL C: the timestamps of FCL_WG_STAMPS read 1 */
#define fcl_wg_clock() ((ulong)1)
#define fcl_wg_smid() 0u
#define FCL_WG_KEEP(x) ((void)0)
#define FCL_WG_KEEP_U(x) ((void)0)

#endif
