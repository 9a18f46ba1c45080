/* util.cl - small kernels for checking what the attention kernels rely on:
 * the Philox generator (known-answer tests on each device) and the dropout
 * mask of a call (for tests and debugging; it is N x N by nature). */

/* out[i] = Philox4x32-10(ctr[i], key[i]) */
__kernel void fcl_philox(__global const uint4 *ctr, __global const uint2 *key, __global uint4 *out,
                         int n)
{
    const int i = (int)get_global_id(0);
    if (i < n) out[i] = fcl_philox4x32_10(ctr[i], key[i]);
}

/* mask[((b * heads_q + h) * seqlen_q + i) * seqlen_k + j] = 1 where dropout
 * keeps probability (i, j) of head h in batch entry b, else 0. */
__kernel void fcl_dropout_mask(__global uchar *mask, int heads_q, int seqlen_q, int seqlen_k,
                               uint seed_lo, uint seed_hi, uint offset, uint threshold)
{
    const int j = (int)get_global_id(0), i = (int)get_global_id(1), bh = (int)get_global_id(2);
    if (j >= seqlen_k || i >= seqlen_q) return;
    const fcl_dropout d = {(uint2)(seed_lo, seed_hi), offset, threshold, 1.0f};
    mask[((long)bh * seqlen_q + i) * seqlen_k + j] = fcl_dropout_factor(d, bh, i, j) != 0.0f;
}
