/* dist.cl - the ring attention's bookkeeping on the device (flashcl_mpi):
 * partial results widened to fp32 for combine.cl's merge, and fp32 sums of
 * partial gradients.  Built after common.cl (storage types) and combine.cl
 * (the log-sum-exp merge, which the ring reuses as it is) with only
 * FCL_DTYPE defined.
 *
 * "Rows" arrays are fp32 (batch * heads, rows, head_dim), row-major, from
 * element `base`: row (bh, s) at base + (bh * rows + s) * head_dim.  A storage
 * tensor element (b, h, s, c) is at off + b * sb + h * sh + s * ss + c, as
 * fcl_layout says.  Work-item (c, bh * n + s) handles column c of row s of a
 * run of n rows; the launches cover exactly head_dim x (batch * heads * n). */

inline long fcl_dist_elem(long off, long sb, long sh, long ss, int heads, long bh, long s)
{
    return off + (bh / heads) * sb + (bh % heads) * sh + s * ss;
}

/* Rows row0 .. row0 + n - 1 of a rows array (`rows` rows per head) from a
 * partial forward result: O of n query rows (strided storage) and its LSE,
 * contiguous (batch * heads, n).  A row that saw no key carries LSE = +inf
 * out of flashcl's forward; the merge wants -inf (weight 0) for it. */
__kernel void fcl_dist_widen(__global const fcl_storage *part, long p_off, long p_sb, long p_sh,
                             long p_ss, __global const float *part_lse, int n, int row0, int heads,
                             int rows, int head_dim, __global float *dst, long dst_base,
                             __global float *dst_lse, long dst_lse_base, long total)
{
    const int c = (int)get_global_id(0);
    for (long r = (long)get_global_id(1); r < total; r += (long)get_global_size(1)) {
        const long bh = r / n, s = r % n;
        const long at = fcl_dist_elem(p_off, p_sb, p_sh, p_ss, heads, bh, s) + c;
        dst[dst_base + (bh * rows + row0 + s) * head_dim + c] = fcl_load(part, at);
        if (c == 0) {
            const float lse = part_lse[r];
            dst_lse[dst_lse_base + bh * rows + row0 + s] = lse == INFINITY ? -INFINITY : lse;
        }
    }
}

/* acc rows row0 .. row0 + n - 1 (+)= a strided storage tensor's n rows:
 * the sum of partial gradients, one fp32 add per part in the order the
 * host launches them.  assign = 1 stores instead of adding. */
__kernel void fcl_dist_accumulate(__global float *acc, long acc_base, int rows, int row0,
                                  int heads, int head_dim, __global const fcl_storage *part,
                                  long p_off, long p_sb, long p_sh, long p_ss, int n, int assign,
                                  long total)
{
    const int c = (int)get_global_id(0);
    for (long r = (long)get_global_id(1); r < total; r += (long)get_global_size(1)) {
        const long bh = r / n, s = r % n;
        const float x = fcl_load(part, fcl_dist_elem(p_off, p_sb, p_sh, p_ss, heads, bh, s) + c);
        __global float *a = acc + acc_base + (bh * rows + row0 + s) * head_dim + c;
        *a = assign ? x : *a + x;
    }
}

/* A strided storage tensor of n rows per head = rows 0 .. n - 1 of an fp32
 * rows array, rounded to the storage type (the one rounding of a sum). */
__kernel void fcl_dist_store(__global const float *acc, long acc_base, int rows, int heads,
                             int head_dim, __global fcl_storage *out, long o_off, long o_sb,
                             long o_sh, long o_ss, int n, long total)
{
    const int c = (int)get_global_id(0);
    for (long r = (long)get_global_id(1); r < total; r += (long)get_global_size(1)) {
        const long bh = r / n, s = r % n;
        fcl_store(out, fcl_dist_elem(o_off, o_sb, o_sh, o_ss, heads, bh, s) + c,
                  acc[acc_base + (bh * rows + s) * head_dim + c]);
    }
}
