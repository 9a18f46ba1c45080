/* warp_ptx.cl - warp-level matrix instructions of NVIDIA sm_80+, as inline
 * PTX (NVIDIA's OpenCL compiler passes asm through to ptxas).  The
 * tensor-core pieces (tile_nv_mma.cl) use only these; warp_emulated.cl gives
 * the same operations in portable OpenCL C, so the pieces can be tested on
 * any device (PoCL, Oclgrind).  Semantics, per warp of 32 lanes, with
 * g = lane / 4 and t = lane % 4:
 *   fcl_ldmatrix_x4(base, off, r)   lanes 8k..8k+7 name the 8 rows (16 bytes
 *       each) of matrix k at base + off; r[k] of lane L = row L/4, halves
 *       2t, 2t+1 of matrix k (low half first)
 *   fcl_ldmatrix_x4_trans           the same matrices transposed: r[k] of
 *       lane L = rows 2t, 2t+1 of column L/4
 *   fcl_mma(c, a, b0, b1)           c += A B, A 16x16 row-major, B 16x8,
 *       fp16/bf16 inputs, fp32 accumulation; fragments as in PTX's
 *       mma.m16n8k16 (a: rows g, g+8, k 2t..2t+1 and 2t+8..2t+9; b: k 2t..,
 *       2t+8.., column g; c: rows g, g+8, columns 2t, 2t+1)
 *   fcl_pack2(lo, hi)               two floats rounded to the storage type
 *   fcl_shfl_xor(v, mask)           v of lane (lane ^ mask)
 *   fcl_exp2(x)                     2^x by the special-function unit (~2 ulp;
 *       results below 2^-126 flush to zero, which a softmax cannot see)
 *   fcl_cp_async16(dst, src, valid) 16 bytes global -> __local in the
 *       background (zeros when !valid); fcl_cp_async_commit() closes a group,
 *       fcl_cp_async_wait_all() / fcl_cp_async_wait_but_one() wait for all
 *       groups / all but the newest
 *   fcl_cp_async8(dst, src, valid)  the same for 8 bytes (.ca: the only
 *       cp.async of that size), the FP8 tiles' raw bytes (tile_nv_mma.cl)
 *   fcl_e4m3x4_to_h(w)              the 4 E4M3 bytes of w (first in the low
 *       byte) as 4 fp16, low half first: cvt.rn.f16x2.e4m3x2 (sm_89+, exact),
 *       only where the host sets FCL_CVT_FP8
 *   fcl_red_add(p, v)               *p += v in global memory, atomically
 *       (performed at L2; the order of two adds to one element is the
 *       caller's business); fcl_red_add4(p, v) four floats at once where
 *       FCL_RED_V4 (sm_90)
 *   fcl_fence_device()              this work-item's earlier global writes
 *       and adds are seen by the whole device before its later ones
 * Every lane of a warp must execute each call (the .sync forms); the
 * emulation needs the whole work-group, so the pieces call these only in
 * uniform control flow. */
#if FCL_TILE_MMA && !FCL_MMA_EMULATE

#if FCL_DTYPE == 1 || FCL_IS_FP8 /* FP8 tiles are decoded to fp16 */
#define FCL_MMA_TYPE "f16"
#define FCL_CVT_PACK "cvt.rn.f16x2.f32"
#elif FCL_DTYPE == 2
#define FCL_MMA_TYPE "bf16"
#define FCL_CVT_PACK "cvt.rn.bf16x2.f32"
#else
#error "the tensor-core pieces need fp16 or bf16 storage"
#endif

/* Kernels declare this among their __local arrays; the instructions need no
 * scratch memory. */
#define FCL_WARP_SCRATCH

/* A __local pointer cast to 32 bits is a shared-space address. */
inline uint fcl_smem_addr(__local const void *p) { return (uint)(size_t)p; }

inline void fcl_ldmatrix_x4(__local const ushort *base, int off, uint r[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fcl_smem_addr(base + off))
                 : "memory"); /* reads __local memory: keep it after the barrier */
}

inline void fcl_ldmatrix_x4_trans(__local const ushort *base, int off, uint r[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fcl_smem_addr(base + off))
                 : "memory");
}

inline void fcl_mma(float c[4], const uint a[4], uint b0, uint b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." FCL_MMA_TYPE "." FCL_MMA_TYPE
                 ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

inline uint fcl_pack2(float lo, float hi)
{
    uint r;
    asm("" FCL_CVT_PACK " %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* .ftz: native_exp2 also handles subnormals, which cost 2-13% of the
 * forward's speed (NOTES.md, run 13). */
inline float fcl_exp2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

inline float fcl_shfl_xor(float v, int mask)
{
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=r"(r) : "r"(as_uint(v)), "r"(mask));
    return as_float(r);
}

/* .cg: through L2 only (each tile is read once per work-group); a source
 * size of 0 fills the 16 bytes with zeros, reading nothing. */
inline void fcl_cp_async16(__local ushort *dst, __global const fcl_storage *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(fcl_smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}

inline void fcl_cp_async8(__local uchar *dst, __global const uchar *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
                 :: "r"(fcl_smem_addr(dst)), "l"(src), "r"(valid ? 8 : 0)
                 : "memory");
}

#if FCL_CVT_FP8
inline uint2 fcl_e4m3x4_to_h(uint w)
{
    uint lo, hi;
    asm("{\n\t.reg .b16 a, b;\n\tmov.b32 {a, b}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, a;\n\tcvt.rn.f16x2.e4m3x2 %1, b;\n\t}"
        : "=r"(lo), "=r"(hi) : "r"(w));
    return (uint2)(lo, hi);
}
#endif

inline void fcl_red_add(__global float *p, float v)
{
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(p), "f"(v) : "memory");
}

/* Four adjacent floats in one instruction (16-byte aligned; sm_90 and PTX
 * 8.1 only: the host sets FCL_RED_V4 there). */
#if FCL_RED_V4
inline void fcl_red_add4(__global float *p, float4 v)
{
    asm volatile("red.global.v4.f32.add [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
#endif

inline void fcl_fence_device(void) { asm volatile("membar.gl;" ::: "memory"); }

inline void fcl_cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
inline void fcl_cp_async_wait_all(void) { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
inline void fcl_cp_async_wait_but_one(void) { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

#endif
