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
 * Tiles (16-bit values, D_PAD columns, rows a multiple of 8) are held in
 * wgmma's canonical layout without swizzle: core matrices of 8 rows x 8
 * values (16 bytes a row, 128 contiguous bytes), each 8-row block of the
 * tile its D_PAD / 8 core matrices in column order (FCL_WG_AT).  A 16-byte
 * copy of 8 values of a row lands whole in one core matrix's row.  Read
 * by a descriptor (fcl_wg_desc: the start address, LBO and SBO; PTX ISA,
 * "Matrix Descriptor Format" and "Canonical Layouts"):
 *   K-major (A = Q or B = K for S = Q K^T, k = head_dim): element (row, k)
 *     at start + (row % 8) * 16 + (row / 8) * SBO + (k % 8) * 2 + (k / 8) * LBO,
 *     so LBO = 128 (the next 8 columns), SBO = D_PAD * 16 (the next 8 rows);
 *   MN-major (B = V for O += P V, the transpose bit set: k = key, n =
 *     head_dim column): element (k, n) at start + (n % 8) * 2 + (n / 8) * SBO
 *     + (k % 8) * 16 + (k / 8) * LBO, so SBO = 128, LBO = D_PAD * 16.
 * Operations (m64, N = 64, k16; f32 accumulators d[32] of the layout below):
 *   fcl_wgmma_ss(ta, tb, d, da, db, acc)  d = A B^T (+ d when acc), A and B
 *       K-major from descriptors da, db (ta, tb: the tiles they point into,
 *       for the emulation)
 *   fcl_wgmma_rs_t(tb, d, a, db)          d += A B, A from registers (the
 *       mma.sync m16n8k16 A fragment of each warp's 16 rows, warp_ptx.cl),
 *       B MN-major from descriptor db
 *   fcl_wg_fence()                        before the first wgmma that reads
 *       registers written by other instructions (wgmma.fence)
 *   fcl_wg_commit_wait()                  closes the issued wgmmas as a group
 *       and waits for it (commit_group; wait_group 0)
 *   fcl_wg_proxy_fence()                  this work-item's ordinary writes to
 *       __local are seen by the tensor cores' reads after the next barrier
 *       (fence.proxy.async)
 * Accumulator layout of m64nNk16: warp w of the warpgroup holds rows
 * 16 w + g and 16 w + g + 8 (g = lane / 4, t = lane % 4); register r is
 * row 16 w + g + 8 ((r >> 1) & 1), column 8 (r >> 2) + 2 t + (r & 1): the
 * mma.sync accumulator layout, N / 8 blocks side by side. */
#if FCL_WGMMA

#if FCL_WD > 1 || D_PAD % 64 != 0 || BR % 64 != 0 || BC % 64 != 0 || WG != 2 * BR
#error "the wgmma piece: warpgroups of 64 rows (4 warps), 64-multiples of keys and head_dim"
#endif

/* Halves from a tile's start to element (r, c), core-matrix layout. */
#define FCL_WG_AT(r, c) ((((r) >> 3) * (D_PAD / 8) + ((c) >> 3)) * 64 + ((r) & 7) * 8 + ((c) & 7))
/* Byte strides of that layout: the next 8 columns, the next 8 rows. */
#define FCL_WG_COLS8 128
#define FCL_WG_ROWS8 (D_PAD * 16)

/* A no-swizzle descriptor: tile + `bytes`, LBO and SBO in bytes (multiples
 * of 16; bits 0-13 the address / 16, 16-29 LBO / 16, 32-45 SBO / 16, base
 * offset and layout type 0).  The emulation holds addresses relative to
 * the tile instead, which its operations are given. */
inline ulong fcl_wg_desc(__local const ushort *tile, int bytes, int lbo, int sbo)
{
#if FCL_MMA_EMULATE
    const uint addr = (uint)bytes;
#else
    const uint addr = (uint)(size_t)tile + (uint)bytes;
#endif
    return (ulong)((addr & 0x3FFFFu) >> 4) | ((ulong)(((uint)lbo & 0x3FFFFu) >> 4) << 16) |
           ((ulong)(((uint)sbo & 0x3FFFFu) >> 4) << 32);
}

#if !FCL_MMA_EMULATE

#define FCL_WG_REG_LIST                                                                  \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22," \
    "%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define FCL_WG_OUTS(d)                                                                     \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),   \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),        \
        "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),     \
        "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),     \
        "+f"(d[31])
#define FCL_WGMMA_OP "wgmma.mma_async.sync.aligned.m64n64k16.f32." FCL_MMA_TYPE "." FCL_MMA_TYPE

inline void fcl_wgmma_ss(__local const ushort *ta, __local const ushort *tb, float d[32], ulong da,
                         ulong db, int acc)
{
    (void)ta;
    (void)tb;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "// @sm90a@ " FCL_WGMMA_OP " " FCL_WG_REG_LIST ", %32, %33, p, 1, 1, 0, 0;\n}"
                 : FCL_WG_OUTS(d)
                 : "l"(da), "l"(db), "r"(acc)
                 : "memory");
}

inline void fcl_wgmma_rs_t(__local const ushort *tb, float d[32], const uint a[4], ulong db)
{
    (void)tb;
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "// @sm90a@ " FCL_WGMMA_OP " " FCL_WG_REG_LIST
                 ", {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}"
                 : FCL_WG_OUTS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)
                 : "memory");
}

inline void fcl_wg_fence(void) { asm volatile("// @sm90a@ wgmma.fence.sync.aligned;" ::: "memory"); }

inline void fcl_wg_commit_wait(void)
{
    asm volatile("// @sm90a@ wgmma.commit_group.sync.aligned;\n"
                 "// @sm90a@ wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

/* fence.proxy.async is plain sm_90 PTX (8.0) */
inline void fcl_wg_proxy_fence(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* Keeps the compiler from reading an accumulator before the wait that
 * makes it valid (the wgmma writes it in the background). */
#define FCL_WG_KEEP(x) asm volatile("" : "+f"(x)::"memory")

#endif
#endif
