/* common.cl - pieces every flashcl kernel shares: storage types, masking.
 *
 * The host prepends a block of -D style #defines (see src/kernel_options.c):
 *   FCL_DTYPE      0 fp32, 1 fp16, 2 bf16 (storage only; arithmetic is fp32)
 *   D_PAD          head_dim rounded up to the thread layout; padded columns
 *                  are loaded as zeros and never stored
 *   BR, BC         query rows / key columns per tile
 *   TY, TX         work-group = TY x TX threads (TX threads share one row)
 */

/* ---- storage types ---------------------------------------------------- */

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
/* bfloat16: the upper 16 bits of an IEEE float. */
typedef ushort fcl_storage;
inline float fcl_load(__global const fcl_storage *p, long i) { return as_float((uint)p[i] << 16); }
inline void fcl_store(__global fcl_storage *p, long i, float v)
{
    uint bits = as_uint(v);
    if (isnan(v)) {
        p[i] = (ushort)((bits >> 16) | 0x40u); /* keep it a (quiet) NaN */
        return;
    }
    bits += 0x7FFFu + ((bits >> 16) & 1u); /* round to nearest, ties to even */
    p[i] = (ushort)(bits >> 16);
}
#else
#error "FCL_DTYPE must be 0 (fp32), 1 (fp16) or 2 (bf16)"
#endif

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
