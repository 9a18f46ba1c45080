/* warpgroup_ptx.cl - Hopper's warpgroup matrix instructions (wgmma, sm_90a)
 * for the wgmma tile piece (tile_nv_wgmma.cl), and the shared-memory layout
 * they read.  NVIDIA's OpenCL compiler emits PTX for sm_90, where ptxas
 * refuses wgmma, so each instruction is written as a "// @sm90a@" comment
 * line of its inline asm, which the host turns into the instruction after
 * the first build (src/programs/ptx_rewrite.c; the build option
 * -DFCL_SM90A=1 asks for that step).  warpgroup_emulated.cl gives the same
 * operations in portable OpenCL C for the tests.
 *
 * A warpgroup is 4 consecutive warps (128 work-items, the first warp's
 * index a multiple of 4); every work-item of it executes each call.
 *
 * Tiles (16-bit values, D_PAD columns, a multiple of 64; `rows` rows, a
 * multiple of 8) are held in wgmma's canonical layout with the 128-byte
 * swizzle, the layout the tensor memory accelerator writes (NOTES.md, run
 * 36): the tile's columns are cut into blocks of 64 values (128 bytes), each
 * block a column of its own, `rows` rows of 128 bytes one after another,
 * then the next block's (FCL_WG_AT): what one copy of the accelerator of a
 * box of 64 values x `rows` rows writes, so a tile arrives in D_PAD / 64
 * copies.  Inside each 8-row atom (1024 contiguous bytes) the 16-byte
 * chunk j of row i (values 8 j .. 8 j + 7 of the block) lies at chunk j ^
 * (i % 8) of the row.  That XOR is what the hardware applies to bits 4-6 of
 * a byte address from bits 7-9, so a tile starts on a 1024-byte boundary
 * (FCL_WG_TILE_ALIGNED).  A 16-byte copy of 8 values of a row lands whole
 * in one chunk.  Read by a descriptor (fcl_wg_desc: the start address,
 * LBO and SBO, swizzle mode 1; PTX ISA, "Matrix Descriptor Format" and
 * "Canonical Layouts"), with SBO = 1024 (the next 8 rows):
 *   K-major (A = Q or B = K for S = Q K^T, k = head_dim): element (row, k)
 *     at start + (row % 8) * 128 + (row / 8) * SBO + 2 k before the XOR,
 *     the start at the block of the 16 k's plus 32 bytes per 16 k's inside
 *     it (LBO unused: one wgmma's 16 k's lie in one atom's row);
 *   MN-major (B = V for O += P V, the transpose bit set: k = key, n =
 *     head_dim column): element (k, n) at start + (k % 8) * 128 + (k / 8) *
 *     SBO + 2 (n % 64) + (n / 64) * LBO before the XOR, LBO = rows * 128
 *     (the next block of 64 columns).
 * Operations (m64, N = 64 or 128, k16; f32 accumulators d[N / 2] of the
 * layout below; the N is in the name):
 *   fcl_wgmma_ssN(ta, tb, d, da, db, acc) d = A B^T (+ d when acc), A and B
 *       K-major from descriptors da, db (ta, tb: the tiles they point into,
 *       for the emulation)
 *   fcl_wgmma_rs_tN(tb, d, a, db)         d += A B, A from registers (the
 *       mma.sync m16n8k16 A fragment of each warp's 16 rows, warp_ptx.cl),
 *       B MN-major from descriptor db
 *   fcl_wgmma_ss_ttN(ta, tb, d, da, db, acc) d = A B (+ d when acc), A and B
 *       both MN-major from descriptors (both transpose bits: A's element
 *       (m, k) where an MN-major B's (k, n) would be, m for n; the fused
 *       dQ's dS, stored as dS^T)
 *   fcl_wg_fence()                        before the first wgmma that reads
 *       registers written by other instructions (wgmma.fence)
 *   fcl_wg_commit(), fcl_wg_wait0(), fcl_wg_wait1()
 *                                         close the issued wgmmas as a group;
 *       wait until none, or only the newest group, is still running
 *   fcl_wg_proxy_fence()                  this work-item's ordinary writes to
 *       __local are seen by the tensor cores' reads after the next barrier
 *       (fence.proxy.async)
 *   fcl_wg_cta_fence()                    a memory fence of the work-group's
 *       scope (fence.acq_rel.cta), which ptxas does not schedule across
 *   fcl_wg_clock(), fcl_wg_smid()          the GPU's nanosecond timer and the
 *       multiprocessor's number (1 and 0 emulated), for timestamps
 * With FCL_WG_TMA, K and V tiles come by the tensor memory accelerator
 * (cp.async.bulk.tensor), one work-item issuing a tile's head_dim / 64
 * copies of a 64-value x BC-row box, which land in the layout above, zeros
 * where the box leaves the tensor, and signal an mbarrier (a __local ulong)
 * as their bytes arrive:
 *   fcl_wg_maps_make(maps, tmpl, stage, bars, K, k_base, k_ss, k_cols, V,
 *       v_base, v_ss, v_cols, rows, nbars, lid)  every work-item, uniform control
 *       flow: writes the work-group's two maps into maps[0..15] (K) and
 *       maps[16..31] (V): the host's template (tensor_maps.c) with the
 *       address of row 0 (K + k_base), k_cols columns, `rows` rows k_ss
 *       elements apart and boxes of FCL_WG_BOX_ROWS rows (BC; dK/dV's
 *       BR: its Q and dO in K's and V's places) put in (tensormap.replace,
 *       in the 256 bytes of __local `stage`, 128-byte aligned), and
 *       readies the mbarriers bars[0..nbars - 1] (none with nbars 0: a
 *       further pair of maps, made with the same stage after the first)
 *   fcl_wg_tma_tile(dst, map, src, row0, bar) one work-item: rows row0 ..
 *       row0 + FCL_WG_BOX_ROWS - 1 of the map's tensor (src: the tensor, for the
 *       emulation) into the tile dst, signalling bar
 *   fcl_wg_bar_expect(bar, bytes)         one work-item, before the copies:
 *       the next phase of bar completes when `bytes` have arrived
 *   fcl_wg_bar_wait(bar, parity)          every work-item, uniform control
 *       flow: until bar's phase of that parity has completed (the copies'
 *       bytes are then visible to the waiting work-item)
 * Accumulator layout of m64nNk16: warp w of the warpgroup holds rows
 * 16 w + g and 16 w + g + 8 (g = lane / 4, t = lane % 4); register r is
 * row 16 w + g + 8 ((r >> 1) & 1), column 8 (r >> 2) + 2 t + (r & 1): the
 * mma.sync accumulator layout, N / 8 blocks side by side. */
#if FCL_WGMMA

/* The rows the warpgroups own, 64 each: the query rows of the forward and
 * of dQ, the keys of dK/dV (its transposed score tile). */
#if defined(FCL_KERNEL_DKDV)
#define FCL_WG_M BC
#else
#define FCL_WG_M BR
#endif
#if FCL_WD > 1 || D_PAD % 64 != 0 || BR % 64 != 0 || BC % 64 != 0 || WG != 2 * FCL_WG_M
#error "the wgmma piece: warpgroups of 64 rows (4 warps), 64-multiples of keys and head_dim"
#endif

/* Halves from the start of a tile of `rows` rows to element (r, c),
 * 128-byte swizzle. */
#define FCL_WG_AT(rows, r, c)                                                  \
    ((((c) >> 6) * (rows) + (r)) * 64 + (((((c) >> 3) & 7) ^ ((r) & 7)) << 3) + ((c) & 7))
/* Bytes of one atom (8 rows of 128 bytes: the stride between 8-row blocks,
 * SBO) and the tiles' alignment, the swizzle's period. */
#define FCL_WG_ATOM 1024
#define FCL_WG_TILE_ALIGNED __attribute__((aligned(FCL_WG_ATOM)))

/* A descriptor of the 128-byte swizzle: tile + `bytes`, LBO and SBO in
 * bytes (multiples of 16; bits 0-13 the address / 16, 16-29 LBO / 16,
 * 32-45 SBO / 16, base offset 0: atoms start on 1024-byte boundaries,
 * bits 62-63 the swizzle mode, 1).  The emulation holds addresses relative
 * to the tile instead, which its operations are given. */
#define FCL_WG_SWIZZLE_128B 1u
inline ulong fcl_wg_desc(__local const ushort *tile, int bytes, int lbo, int sbo)
{
#if FCL_MMA_EMULATE
    const uint addr = (uint)bytes;
#else
    const uint addr = (uint)(size_t)tile + (uint)bytes;
#endif
    return (ulong)((addr & 0x3FFFFu) >> 4) | ((ulong)(((uint)lbo & 0x3FFFFu) >> 4) << 16) |
           ((ulong)(((uint)sbo & 0x3FFFFu) >> 4) << 32) | ((ulong)FCL_WG_SWIZZLE_128B << 62);
}

#if !FCL_MMA_EMULATE

/* The accumulator operands of an m64nNk16: N / 2 registers, %0 .. %(N/2-1). */
#define FCL_WG_LIST32                                                                   \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22," \
    "%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define FCL_WG_LIST64                                                                     \
    FCL_WG_LIST32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,"  \
                  "%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define FCL_WG_OUT8(d, i)                                                              \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),          \
        "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FCL_WG_OUTS32(d) FCL_WG_OUT8(d, 0), FCL_WG_OUT8(d, 8), FCL_WG_OUT8(d, 16), FCL_WG_OUT8(d, 24)
#define FCL_WG_OUTS64(d) FCL_WG_OUTS32(d), FCL_WG_OUT8(d, 32), FCL_WG_OUT8(d, 40), FCL_WG_OUT8(d, 48), \
    FCL_WG_OUT8(d, 56)
#define FCL_WGMMA_OP(n) \
    "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." FCL_MMA_TYPE "." FCL_MMA_TYPE

/* fcl_wgmma_ss64 / ss128 and ss_tt64 / ss_tt128 (`trans`: both transpose
 * bits), then rs_t64 / rs_t128: N = 64 or 128 (the operand numbers after
 * the N / 2 accumulators are spelled out per N: the descriptors, then the
 * flag for p). */
#define FCL_WGMMA_SS(name, n, list, outs, descs, flag, trans)                              \
    inline void name(__local const ushort *ta, __local const ushort *tb, float d[(n) / 2],   \
                     ulong da, ulong db, int acc)                                          \
    {                                                                                     \
        (void)ta;                                                                         \
        (void)tb;                                                                         \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " flag ", 0;\n"                    \
                     "// @sm90a@ " FCL_WGMMA_OP(n) " {" list "}, " descs ", p, 1, 1, " trans \
                     ";\n}"                                                               \
                     : outs(d)                                                            \
                     : "l"(da), "l"(db), "r"(acc)                                         \
                     : "memory");                                                         \
    }
FCL_WGMMA_SS(fcl_wgmma_ss64, 64, FCL_WG_LIST32, FCL_WG_OUTS32, "%32, %33", "%34", "0, 0")
FCL_WGMMA_SS(fcl_wgmma_ss128, 128, FCL_WG_LIST64, FCL_WG_OUTS64, "%64, %65", "%66", "0, 0")
FCL_WGMMA_SS(fcl_wgmma_ss_tt64, 64, FCL_WG_LIST32, FCL_WG_OUTS32, "%32, %33", "%34", "1, 1")
FCL_WGMMA_SS(fcl_wgmma_ss_tt128, 128, FCL_WG_LIST64, FCL_WG_OUTS64, "%64, %65", "%66", "1, 1")

inline void fcl_wgmma_rs_t64(__local const ushort *tb, float d[32], const uint a[4], ulong db)
{
    (void)tb;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "// @sm90a@ " FCL_WGMMA_OP(64) " {" FCL_WG_LIST32
                 "}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}"
                 : FCL_WG_OUTS32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)
                 : "memory");
}

inline void fcl_wgmma_rs_t128(__local const ushort *tb, float d[64], const uint a[4], ulong db)
{
    (void)tb;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "// @sm90a@ " FCL_WGMMA_OP(128) " {" FCL_WG_LIST64
                 "}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}"
                 : FCL_WG_OUTS64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)
                 : "memory");
}

inline void fcl_wg_fence(void) { asm volatile("// @sm90a@ wgmma.fence.sync.aligned;" ::: "memory"); }

/* a group's close and the waits (wait_group n leaves the newest n groups
 * running: products that overlap) */
inline void fcl_wg_commit(void) { asm volatile("// @sm90a@ wgmma.commit_group.sync.aligned;" ::: "memory"); }
inline void fcl_wg_wait0(void) { asm volatile("// @sm90a@ wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
inline void fcl_wg_wait1(void) { asm volatile("// @sm90a@ wgmma.wait_group.sync.aligned 1;" ::: "memory"); }

/* The GPU's nanosecond timer (its cycle counter with
 * -DFCL_WG_STAMP_CYCLES=1) and this multiprocessor's number (the
 * timestamps of a measurement build, tile_nv_wgmma.cl's FCL_WG_STAMPS) */
inline ulong fcl_wg_clock(void)
{
    ulong t;
#if FCL_WG_STAMP_CYCLES
    /* the multiprocessor's cycle counter: finer and cheaper to read than
     * the global timer's 32 ns steps, and comparable within a work-group */
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
#else
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
#endif
    return t;
}
inline uint fcl_wg_smid(void)
{
    uint id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

/* A memory fence of the work-group's scope (tile_nv_wgmma.cl's
 * FCL_WG_PV_FENCE: it bounds ptxas's reordering) */
inline void fcl_wg_cta_fence(void) { asm volatile("fence.acq_rel.cta;" ::: "memory"); }

/* fence.proxy.async is plain sm_90 PTX (8.0) */
inline void fcl_wg_proxy_fence(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

#if FCL_FP8_PRODUCTS
/* FP8 products (tile_nv_wgmma_fp8.cl): m64n128k32 of E4M3 inputs, fp32
 * accumulators of the same layout as m64nNk16's.  Byte tiles are held as
 * the 16-bit ones are, 128 bytes a row in the 128-byte swizzle, so one
 * wgmma's 32 k's (32 bytes) take the place of 16 16-bit values.  FP8
 * wgmma has no transpose: both operands are K-major.
 *   fcl_wgmma_ss8_128(ta, tb, d, da, db, acc)  d = A B^T (+ d when acc), A
 *       and B from descriptors (k = a byte column)
 *   fcl_wgmma_rs8_128(tb, d, a, db)            d += A B^T, A from registers:
 *       a warp's 16 rows x 32 k's in 4 registers of 4 bytes (the lowest
 *       byte the lowest k): register 0 row g, k 4t..4t+3; 1 row g + 8, the
 *       same k's; 2 and 3 the same rows at k 16 + 4t..16 + 4t + 3 (g = lane
 *       / 4, t = lane % 4; PTX ISA, wgmma's "Register Fragments" for
 *       .e4m3), B = tb's rows (n) from db, K-major
 *   fcl_e4m3x4(a0, a1, a2, a3)                 four floats rounded to E4M3
 *       (to nearest even, saturated at 448), a0 in the lowest byte
 *   fcl_wg_bulk(dst, src, bytes, bar)          one work-item: `bytes`
 *       contiguous bytes from src into dst (16-byte aligned, a multiple of
 *       16), counted by mbarrier bar (cp.async.bulk) */
#define FCL_WGMMA8_OP "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
inline void fcl_wgmma_ss8_128(__local const ushort *ta, __local const ushort *tb, float d[64],
                              ulong da, ulong db, int acc)
{
    (void)ta;
    (void)tb;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "// @sm90a@ " FCL_WGMMA8_OP " {" FCL_WG_LIST64 "}, %64, %65, p, 1, 1;\n}"
                 : FCL_WG_OUTS64(d)
                 : "l"(da), "l"(db), "r"(acc)
                 : "memory");
}

inline void fcl_wgmma_rs8_128(__local const ushort *tb, float d[64], const uint a[4], ulong db)
{
    (void)tb;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "// @sm90a@ " FCL_WGMMA8_OP " {" FCL_WG_LIST64
                 "}, {%64,%65,%66,%67}, %68, p, 1, 1;\n}"
                 : FCL_WG_OUTS64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)
                 : "memory");
}

/* cvt's first source goes to the upper byte (sm_89 and up) */
inline uint fcl_e4m3x4(float a0, float a1, float a2, float a3)
{
    uint r;
    asm("{\n.reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
        "mov.b32 %0, {lo, hi};\n}"
        : "=r"(r)
        : "f"(a0), "f"(a1), "f"(a2), "f"(a3));
    return r;
}

#endif

#if FCL_WG_TMA
/* The tensor memory accelerator and mbarriers (all sm_90 but
 * tensormap.replace; written through the rewrite alike).  Shared-memory
 * operands are 32-bit __local addresses. */
inline uint fcl_wg_saddr(__local const void *p) { return (uint)(size_t)p; }

inline void fcl_wg_bar_init(__local ulong *bar)
{
    asm volatile("// @sm90a@ mbarrier.init.shared.b64 [%0], 1;" ::"r"(fcl_wg_saddr(bar)) : "memory");
}

inline void fcl_wg_bar_expect(__local ulong *bar, uint bytes)
{
    asm volatile("// @sm90a@ mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(
                     fcl_wg_saddr(bar)),
                 "r"(bytes)
                 : "memory");
}

inline void fcl_wg_bar_wait(__local ulong *bar, int parity)
{
    uint done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\n"
                     "// @sm90a@ mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(fcl_wg_saddr(bar)), "r"(parity)
                     : "memory");
}

/* Named barrier `id` (1..15; OpenCL's barrier() is 0) of `count`
 * work-items: wait there, or arrive without waiting (whole warps). */
inline void fcl_wg_named_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
inline void fcl_wg_named_arrive(int id, int count)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* Whether this work-item is the one to refill buffers that every warp of
 * the work-group is now done with: lane 0 of the warp that arrives last.
 * `count` gets one arrival a warp and is never reset (a multiple of WG / 32
 * arrivals ends a round; a uint's wrap keeps that).  No warp waits for
 * another: the work-group's warps keep their own pace, up to the copies
 * they wait for. */
inline bool fcl_wg_last_arrival(volatile __local uint *count, int lane)
{
    bool last = false;
    mem_fence(CLK_LOCAL_MEM_FENCE); /* this work-item's reads of the buffers come first */
    asm volatile("bar.warp.sync -1;" ::: "memory"); /* and those of its warp */
    if (lane == 0)
        last = atomic_inc(count) % (WG / 32) == WG / 32 - 1;
    return last;
}

inline void fcl_wg_tma_tile(__local ushort *dst, __global const ulong *map,
                            __global const fcl_kv_storage *src, int row0, __local ulong *bar)
{
    (void)src;
    FCL_UNROLL
    for (int c = 0; c < D_PAD / 64; ++c)
        asm volatile("// @sm90a@ cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                     ".mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                         fcl_wg_saddr(dst) + (uint)(c * FCL_WG_BOX_ROWS * 128)),
                     "l"((ulong)map), "r"(c * 64), "r"(row0), "r"(fcl_wg_saddr(bar))
                     : "memory");
}

#if FCL_FP8_PRODUCTS
/* fcl_wg_bulk (FP8 products, above) */
inline void fcl_wg_bulk(__local ushort *dst, __global const uchar *src, uint bytes,
                        __local ulong *bar)
{
    asm volatile("// @sm90a@ cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" ::"r"(fcl_wg_saddr(dst)),
                 "l"((ulong)src), "r"(bytes), "r"(fcl_wg_saddr(bar))
                 : "memory");
}
#endif

/* A map in __local made that of `cols` x `rows` elements from `address`,
 * rows `stride` bytes apart, in boxes of 64 x FCL_WG_BOX_ROWS. */
inline void fcl_wg_map_fill(__local ulong *m, ulong address, int cols, int rows, long stride)
{
    const uint s = fcl_wg_saddr(m);
    asm volatile("// @sm90a@ tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                 ::"r"(s), "l"(address) : "memory");
    asm volatile("// @sm90a@ tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %1;"
                 ::"r"(s), "r"(cols) : "memory");
    asm volatile("// @sm90a@ tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %1;"
                 ::"r"(s), "r"(rows) : "memory");
    asm volatile("// @sm90a@ tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %1;"
                 ::"r"(s), "l"(stride) : "memory");
    asm volatile("// @sm90a@ tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, %1;"
                 ::"r"(s), "r"(FCL_WG_BOX_ROWS) : "memory");
}

inline void fcl_wg_maps_make(__global ulong *maps, __global const ulong *tmpl, __local ulong *stage,
                             __local ulong *bars, __global const fcl_kv_storage *k, long k_base,
                             long k_ss, int k_cols, __global const fcl_kv_storage *v, long v_base,
                             long v_ss, int v_cols, int rows, int nbars, int lid)
{
    if (lid < 32)
        stage[lid] = tmpl[lid & 15];
    if (lid == 0) {
        for (int i = 0; i < nbars; ++i)
            fcl_wg_bar_init(bars + i);
        fcl_wg_proxy_fence(); /* the copies' completions see them */
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        fcl_wg_map_fill(stage, (ulong)(k + k_base), k_cols, max(rows, 1), k_ss * 2);
        fcl_wg_map_fill(stage + 16, (ulong)(v + v_base), v_cols, max(rows, 1), v_ss * 2);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* to global memory, where the copies read maps; a warp-wide instruction */
    if (lid < 32)
        for (int i = 0; i < 2; ++i)
            asm volatile("// @sm90a@ tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic"
                         ".release.gpu.sync.aligned [%0], [%1], 128;" ::"l"((ulong)(maps + 16 * i)),
                         "r"(fcl_wg_saddr(stage + 16 * i))
                         : "memory");
    if (lid == 0)
        for (int i = 0; i < 2; ++i)
            asm volatile("// @sm90a@ fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                             (ulong)(maps + 16 * i))
                         : "memory");
}
#endif

/* Keeps the compiler from moving a read or write of an accumulator (a
 * float) or of an A register (a uint) across the fence, wgmmas and wait
 * around it: the wgmma reads and writes them in the background. */
#define FCL_WG_KEEP(x) asm volatile("" : "+f"(x)::"memory")
#define FCL_WG_KEEP_U(x) asm volatile("" : "+r"(x)::"memory")

#endif
#endif
