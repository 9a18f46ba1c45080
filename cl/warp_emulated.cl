/* warp_emulated.cl - the operations of warp_ptx.cl in portable OpenCL C, for
 * testing the tensor-core pieces on devices without them (PoCL in CI, and
 * Oclgrind, which then checks the pieces' barriers and __local accesses).
 * Built with FCL_MMA_EMULATE=1, which only the test hook
 * fcl_debug_emulate_tensor_cores() sets.  Lanes exchange operands through
 * FCL_WARP_SCRATCH, a __local array of 6 words per work-item, between two
 * work-group barriers: slow, and correct only because the pieces call these
 * in uniform control flow.  Products are fp32 fused multiply-adds of the
 * 16-bit inputs in k order; cp.async becomes a plain copy, so a missing
 * barrier around it shows up as a race under Oclgrind. */
#if FCL_TILE_MMA && FCL_MMA_EMULATE

#define FCL_WARP_SCRATCH __local uint fcl_warp_x[WG * 6] FCL_ALIGNED

/* exp2, not native_exp2: the hardware's ex2.approx is within a few ulps,
 * and some implementations' native_exp2 is not (Intel's CPU runtime failed
 * the tolerance of test_tensor_cores with it, NOTES.md) */
inline float fcl_exp2(float x) { return exp2(x); }

inline float fcl_half_to_float(uint bits16)
{
#if FCL_DTYPE == 1 || FCL_IS_FP8 /* FP8 tiles are decoded to fp16 */
    const ushort h = (ushort)bits16;
    return vload_half(0, (const __private half *)&h);
#else
    return as_float(bits16 << 16);
#endif
}

inline uint fcl_pack2(float lo, float hi)
{
#if FCL_DTYPE == 1 || FCL_IS_FP8 /* FP8 tiles are decoded to fp16 */
    ushort h[2];
    vstore_half_rte(lo, 0, (__private half *)h);
    vstore_half_rte(hi, 1, (__private half *)h);
    return (uint)h[0] | ((uint)h[1] << 16);
#else
    return (uint)fcl_bf16_bits(lo) | ((uint)fcl_bf16_bits(hi) << 16);
#endif
}

/* The low (upper = 0) or high 16-bit element of a packed register. */
inline float fcl_unpack(uint reg, int upper) { return fcl_half_to_float(upper ? reg >> 16 : reg & 0xFFFFu); }

inline void fcl_ldmatrix_emulated(__local uint *x, __local const ushort *base, int off, uint r[4],
                                  bool trans)
{
    const int lid = (int)get_local_id(0), lane = lid & 31, warp0 = lid - lane;
    const int g = lane >> 2, t = lane & 3;
    x[lid] = (uint)off;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < 4; ++k) {
        uint lo, hi;
        if (trans) { /* rows 2t and 2t+1 of matrix k, column g */
            lo = base[x[warp0 + 8 * k + 2 * t] + g];
            hi = base[x[warp0 + 8 * k + 2 * t + 1] + g];
        } else {     /* row g of matrix k, columns 2t and 2t+1 */
            const int row = x[warp0 + 8 * k + g];
            lo = base[row + 2 * t];
            hi = base[row + 2 * t + 1];
        }
        r[k] = lo | (hi << 16);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

inline void fcl_mma_emulated(__local uint *x, float c[4], const uint a[4], uint b0, uint b1)
{
    const int lid = (int)get_local_id(0), lane = lid & 31;
    __local uint *w = x + (lid - lane) * 6; /* this warp's 32 x 6 words */
    for (int i = 0; i < 4; ++i) w[lane * 6 + i] = a[i];
    w[lane * 6 + 4] = b0;
    w[lane * 6 + 5] = b1;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        float sum = c[e];
        for (int k = 0; k < 16; ++k) {
            const int a_lane = 4 * (row & 7) + ((k & 7) >> 1);
            const int a_reg = (row >> 3) + 2 * (k >> 3);
            const int b_lane = 4 * col + ((k & 7) >> 1);
            const int b_reg = 4 + (k >> 3);
            sum = fma(fcl_unpack(w[a_lane * 6 + a_reg], k & 1),
                      fcl_unpack(w[b_lane * 6 + b_reg], k & 1), sum);
        }
        c[e] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

inline float fcl_shfl_xor_emulated(__local uint *x, float v, int mask)
{
    const int lid = (int)get_local_id(0), lane = lid & 31;
    x[lid] = as_uint(v);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float r = as_float(x[lid - lane + (lane ^ mask)]);
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline void fcl_cp_async16(__local ushort *dst, __global const fcl_storage *src, bool valid)
{
    uint4 v = (uint4)(0u);
    if (valid) v = *(__global const uint4 *)src;
    *(__local uint4 *)dst = v;
}

inline void fcl_cp_async8(__local uchar *dst, __global const uchar *src, bool valid)
{
    uint2 v = (uint2)(0u);
    if (valid) v = *(__global const uint2 *)src;
    *(__local uint2 *)dst = v;
}

/* A compare-and-swap loop: exact, as the hardware's add is. */
inline void fcl_red_add(__global float *p, float v)
{
    volatile __global uint *u = (volatile __global uint *)p;
    uint old = *u, seen;
    while ((seen = atomic_cmpxchg(u, old, as_uint(as_float(old) + v))) != old) old = seen;
}

#if FCL_RED_V4
inline void fcl_red_add4(__global float *p, float4 v)
{
    fcl_red_add(p, v.x);
    fcl_red_add(p + 1, v.y);
    fcl_red_add(p + 2, v.z);
    fcl_red_add(p + 3, v.w);
}
#endif

inline void fcl_fence_device(void) { mem_fence(CLK_GLOBAL_MEM_FENCE); }

#define fcl_ldmatrix_x4(base, off, r) fcl_ldmatrix_emulated(fcl_warp_x, (base), (off), (r), false)
#define fcl_ldmatrix_x4_trans(base, off, r) fcl_ldmatrix_emulated(fcl_warp_x, (base), (off), (r), true)
#define fcl_mma(c, a, b0, b1) fcl_mma_emulated(fcl_warp_x, (c), (a), (b0), (b1))
#define fcl_shfl_xor(v, mask) fcl_shfl_xor_emulated(fcl_warp_x, (v), (mask))
#define fcl_cp_async_commit() ((void)0)
#define fcl_cp_async_wait_all() ((void)0)
#define fcl_cp_async_wait_but_one() ((void)0)

#endif
