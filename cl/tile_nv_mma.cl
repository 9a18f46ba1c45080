/* tile_nv_mma.cl - the forward's tile pieces on NVIDIA tensor cores (sm_80+),
 * through inline PTX: mma.sync m16n8k16 (fp16 or bf16 inputs, fp32
 * accumulation), ldmatrix from padded __local tiles, shfl.sync for row
 * reductions.  Built only with FCL_TILE_MMA=1, which the host sets only for
 * NVIDIA devices of compute capability 8.0 and up, fp16/bf16 storage,
 * head_dim a multiple of 16 (at most 128), and 16-byte aligned rows.
 *
 * Layout: WARPS = TY warps, each owning 16 query rows of the Q block
 * (BR = 16 * WARPS).  In mma.sync's accumulator layout a lane (group
 * g = lane / 4, t = lane % 4) holds rows g and g + 8 of its warp's 16, and
 * columns 2t, 2t+1 of every 8-column block, so the register tile is
 * s[2][BC / 4] and acc[2][D_PAD / 4]; four lanes share a row.  The scores
 * never leave the registers: P is repacked to fp16/bf16 as the A operand of
 * P V (FlashAttention-2's register reuse).
 */
#if FCL_TILE_MMA

#if FCL_DTYPE == 1
#define FCL_MMA_TYPE "f16"
#define FCL_CVT_PACK "cvt.rn.f16x2.f32"
#elif FCL_DTYPE == 2
#define FCL_MMA_TYPE "bf16"
#define FCL_CVT_PACK "cvt.rn.bf16x2.f32"
#else
#error "the tensor-core piece needs fp16 or bf16 storage"
#endif

#define WARPS TY
#define LDH (D_PAD + 8) /* halves per __local row: 16-byte shift per row, no bank conflicts */

inline uint fcl_smem_addr(__local const void *p) { return (uint)(size_t)p; }

inline void fcl_ldmatrix_x4(__local const ushort *p, uint r[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fcl_smem_addr(p))
                 : "memory"); /* reads __local memory: keep it after the barrier */
}

inline void fcl_ldmatrix_x4_trans(__local const ushort *p, uint r[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fcl_smem_addr(p))
                 : "memory");
}

/* c += A(16x16) B(16x8) */
inline void fcl_mma(float c[4], const uint a[4], uint b0, uint b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." FCL_MMA_TYPE "." FCL_MMA_TYPE
                 ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats as one register of two 16-bit values, lo in the low half. */
inline uint fcl_pack2(float lo, float hi)
{
    uint r;
    asm("" FCL_CVT_PACK " %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

inline float fcl_shfl_xor(float v, int mask)
{
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=r"(r) : "r"(as_uint(v)), "r"(mask));
    return as_float(r);
}

/* ---- the forward's pieces (see flash_fwd.cl) ---------------------------- */

#define RM 2
#define RN (BC / 4)
#define DN (D_PAD / 4)

#define FCL_FWD_IDS                                                         \
    const int lid = (int)get_local_id(0);                                   \
    const int warp = lid >> 5, lane = lid & 31, grp = lane >> 2, tig = lane & 3

/* Scores in log2 units and the hardware's exp2 (ex2.approx, ~2 ulp): with
 * 16-bit storage that error is 1000 times below the output's rounding, and
 * one instruction per score matters when the tensor cores do the rest. */
#define FCL_EXP(x) native_exp2(x)
#define FCL_EXP_UNITS(x) ((x) * 1.4426950408889634f)
#define FCL_NATURAL_UNITS(x) ((x) * 0.6931471805599453f)

#define FCL_ROW(i) (warp * 16 + grp + 8 * (i))
#define FCL_COL(j) (8 * ((j) >> 1) + 2 * tig + ((j) & 1))
#define FCL_OCOL(n) (8 * ((n) >> 1) + 2 * tig + ((n) & 1))
#define FCL_FIRST_IN_ROW (tig == 0)

#define FCL_FWD_LOCALS                                      \
    __local ushort Qh[BR * LDH] FCL_ALIGNED;                \
    __local ushort Kh[BC * LDH] FCL_ALIGNED;                \
    __local ushort Vh[BC * LDH] FCL_ALIGNED;                \
    uint qf[D_PAD / 16][4] /* this warp's Q rows as A operands */

/* rows x D_PAD of 16-bit storage into a padded __local tile, zero rows past
 * nvalid; 16 bytes per access (the host guarantees the alignment). */
inline void fcl_load_tile_h(__local ushort *dst, int nrows, __global const fcl_storage *src,
                            long base, long ss, int nvalid, int lid)
{
    const int chunks = D_PAD / 8;
    for (int e = lid; e < nrows * chunks; e += WG) {
        const int r = e / chunks, c = e - r * chunks;
        uint4 x = (uint4)(0u);
        if (r < nvalid) x = *(__global const uint4 *)(src + base + (long)r * ss + c * 8);
        *(__local uint4 *)(dst + r * LDH + c * 8) = x;
    }
}

#define FCL_FWD_LOAD_Q(q_base, q_ss, rows, head_dim)                                      \
    do {                                                                                  \
        fcl_load_tile_h(Qh, BR, Q, (q_base), (q_ss), (rows), lid);                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                     \
        FCL_UNROLL                                                                        \
        for (int kb_ = 0; kb_ < D_PAD / 16; ++kb_) {                                      \
            const int m_ = lane >> 3;                                                     \
            fcl_ldmatrix_x4(Qh + (warp * 16 + (lane & 7) + (m_ & 1) * 8) * LDH + kb_ * 16 \
                                + (m_ >> 1) * 8, qf[kb_]);                                \
        }                                                                                 \
    } while (0)

#define FCL_FWD_LOAD_KV(k_base, k_ss, v_base, v_ss, cols, head_dim)        \
    do {                                                                   \
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */ \
        fcl_load_tile_h(Kh, BC, K, (k_base), (k_ss), (cols), lid);         \
        fcl_load_tile_h(Vh, BC, V, (v_base), (v_ss), (cols), lid);         \
        barrier(CLK_LOCAL_MEM_FENCE);                                      \
    } while (0)

/* s = Q K^T for this warp's 16 rows and the BC keys of the tile.  B operands
 * (k = head dim, n = key) are K's rows as stored: ldmatrix without .trans,
 * four 8x8 matrices = two 8-key blocks x two 8-dim halves. */
#define FCL_FWD_QK(s)                                                                      \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int j2_ = 0; j2_ < BC / 16; ++j2_) {                                          \
            float c0_[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1_[4] = {0.0f, 0.0f, 0.0f, 0.0f};    \
            FCL_UNROLL                                                                     \
            for (int kb_ = 0; kb_ < D_PAD / 16; ++kb_) {                                   \
                const int m_ = lane >> 3;                                                  \
                uint b_[4];                                                                \
                fcl_ldmatrix_x4(Kh + (j2_ * 16 + (lane & 7) + (m_ >> 1) * 8) * LDH         \
                                    + kb_ * 16 + (m_ & 1) * 8, b_);                        \
                fcl_mma(c0_, qf[kb_], b_[0], b_[1]);                                       \
                fcl_mma(c1_, qf[kb_], b_[2], b_[3]);                                       \
            }                                                                              \
            s[0][4 * j2_ + 0] = c0_[0];                                                    \
            s[0][4 * j2_ + 1] = c0_[1];                                                    \
            s[1][4 * j2_ + 0] = c0_[2];                                                    \
            s[1][4 * j2_ + 1] = c0_[3];                                                    \
            s[0][4 * j2_ + 2] = c1_[0];                                                    \
            s[0][4 * j2_ + 3] = c1_[1];                                                    \
            s[1][4 * j2_ + 2] = c1_[2];                                                    \
            s[1][4 * j2_ + 3] = c1_[3];                                                    \
        }                                                                                  \
    } while (0)

/* Across the four lanes that share a row; the same order in every lane. */
#define FCL_ROWS_MAX(v)                                                  \
    do {                                                                 \
        FCL_UNROLL                                                       \
        for (int i_ = 0; i_ < RM; ++i_) {                                \
            v[i_] = fmax(v[i_], fcl_shfl_xor(v[i_], 1));                 \
            v[i_] = fmax(v[i_], fcl_shfl_xor(v[i_], 2));                 \
        }                                                                \
    } while (0)

#define FCL_ROWS_SUM(v)                                                  \
    do {                                                                 \
        FCL_UNROLL                                                       \
        for (int i_ = 0; i_ < RM; ++i_) {                                \
            v[i_] += fcl_shfl_xor(v[i_], 1);                             \
            v[i_] += fcl_shfl_xor(v[i_], 2);                             \
        }                                                                \
    } while (0)

/* P stays in the score registers. */
#define FCL_FWD_SET_P(s, i, j, p) (s[i][j] = (p))

/* acc += P V: P repacked as A operands (16 keys at a time, two 8-key blocks
 * of the accumulator layout side by side), V's rows as stored are k = key,
 * n = dim, so ldmatrix .trans gives the B operands. */
#define FCL_FWD_PV(acc, s)                                                                 \
    do {                                                                                   \
        FCL_UNROLL                                                                         \
        for (int kk_ = 0; kk_ < BC / 16; ++kk_) {                                          \
            const uint a_[4] = {fcl_pack2(s[0][4 * kk_ + 0], s[0][4 * kk_ + 1]),           \
                                fcl_pack2(s[1][4 * kk_ + 0], s[1][4 * kk_ + 1]),           \
                                fcl_pack2(s[0][4 * kk_ + 2], s[0][4 * kk_ + 3]),           \
                                fcl_pack2(s[1][4 * kk_ + 2], s[1][4 * kk_ + 3])};          \
            FCL_UNROLL                                                                     \
            for (int n2_ = 0; n2_ < D_PAD / 16; ++n2_) {                                   \
                const int m_ = lane >> 3;                                                  \
                uint b_[4];                                                                \
                fcl_ldmatrix_x4_trans(Vh + (kk_ * 16 + (lane & 7) + (m_ & 1) * 8) * LDH    \
                                          + n2_ * 16 + (m_ >> 1) * 8, b_);                 \
                float c0_[4] = {acc[0][4 * n2_ + 0], acc[0][4 * n2_ + 1],                  \
                                acc[1][4 * n2_ + 0], acc[1][4 * n2_ + 1]};                 \
                float c1_[4] = {acc[0][4 * n2_ + 2], acc[0][4 * n2_ + 3],                  \
                                acc[1][4 * n2_ + 2], acc[1][4 * n2_ + 3]};                 \
                fcl_mma(c0_, a_, b_[0], b_[1]);                                            \
                fcl_mma(c1_, a_, b_[2], b_[3]);                                            \
                acc[0][4 * n2_ + 0] = c0_[0];                                              \
                acc[0][4 * n2_ + 1] = c0_[1];                                              \
                acc[1][4 * n2_ + 0] = c0_[2];                                              \
                acc[1][4 * n2_ + 1] = c0_[3];                                              \
                acc[0][4 * n2_ + 2] = c1_[0];                                              \
                acc[0][4 * n2_ + 3] = c1_[1];                                              \
                acc[1][4 * n2_ + 2] = c1_[2];                                              \
                acc[1][4 * n2_ + 3] = c1_[3];                                              \
            }                                                                              \
        }                                                                                  \
    } while (0)

#endif /* FCL_TILE_MMA */
