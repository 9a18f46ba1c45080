/* combine.cl - the log-sum-exp merge of partial attention results.
 *
 * A row's attention over a set of keys, computed in parts over disjoint
 * subsets s (the key chunks of split-KV; later, other devices' shards), is
 *     LSE = log sum_s exp(LSE_s),    O = sum_s exp(LSE_s - LSE) O_s
 * where O_s is part s's output normalised by its own softmax sum and LSE_s
 * its log-sum-exp: the online softmax's own rescaling, applied once per
 * part.  A part that saw no key has LSE_s = -inf and weight 0; when every
 * part is empty the row sees no key, and gets the library's convention for
 * that: O = 0, LSE = +inf.  The parts are taken in index order, so the
 * result is bitwise the same on every run.
 */

/* The merged LSE of n parts lse[0], lse[stride], ...: -inf if all are empty. */
inline float fcl_merge_lse(__global const float *lse, long stride, int n)
{
    float m = -INFINITY;
    for (int s = 0; s < n; ++s) m = fmax(m, lse[s * stride]);
    if (m == -INFINITY)
        return -INFINITY;
    float sum = 0.0f;
    for (int s = 0; s < n; ++s) sum += exp(lse[s * stride] - m);
    return m + log(sum);
}

/* The weight of a part in the merge: exp(lse_s - lse), 0 for an empty part. */
inline float fcl_merge_weight(float lse_part, float lse) { return exp(lse_part - lse); }

/* One work-item per element (row, col) of the output.  Rows are
 * (batch, head, position) as the LSE counts them, part_rows of them; part s
 * of row r is part_lse[s * part_rows + r] and part_o[(s * part_rows + r) *
 * head_dim + col].  With check_ok, rows of a sequence whose KV-cache check
 * failed (seq_ok[b] == 0, see kvcache.cl) get NaN. */
__kernel void fcl_combine(__global const float *part_o, __global const float *part_lse,
                          int num_splits, long part_rows, int head_dim, int seqlen_q, int heads_q,
                          __global fcl_storage *O, long o_off, long o_sb, long o_sh, long o_ss,
                          __global float *LSE, long lse_off, int write_lse,
                          __global const int *seq_ok, int check_ok)
{
    const long e = (long)get_global_id(0);
    const long row = e / head_dim;
    const int col = (int)(e - row * head_dim);
    if (row >= part_rows)
        return;
    const int pos = (int)(row % seqlen_q);
    const long bh = row / seqlen_q;
    const int h = (int)(bh % heads_q), b = (int)(bh / heads_q);
    const bool ok = !check_ok || seq_ok[b] != 0;

    const float lse = fcl_merge_lse(part_lse + row, part_rows, num_splits);
    float o = 0.0f;
    if (lse != -INFINITY)
        for (int s = 0; s < num_splits; ++s) {
            const long at = (long)s * part_rows + row;
            o += fcl_merge_weight(part_lse[at], lse) * part_o[at * head_dim + col];
        }
    fcl_store(O, o_off + b * o_sb + h * o_sh + pos * o_ss + col, ok ? o : NAN);
    if (write_lse && col == 0)
        LSE[lse_off + row] = ok ? (lse == -INFINITY ? INFINITY : lse) : NAN;
}
