/* combine.cl - the log-sum-exp merge of partial attention results.
 *
 * A row's attention over a set of keys, computed in parts over disjoint
 * subsets s (the key chunks of split-KV; later, other devices' shards), is
 *     LSE = log sum_s exp(LSE_s),    O = sum_s exp(LSE_s - LSE) O_s
 * where O_s is part s's output normalised by its own softmax sum and LSE_s
 * its log-sum-exp: the online softmax's own rescaling, applied once per
 * part.  A part that saw no key has LSE_s = -inf and weight 0; when every
 * part is empty the row sees no key, and gets the library's convention for
 * that: O = 0, LSE = +inf.  An attention sink (one logit per query head,
 * no value) joins the merged sum once, as a part with no output would:
 * LSE = log(exp(sink) + sum_s exp(LSE_s)), and a row whose parts are all
 * empty gets O = 0, LSE = sink.  Sums run in a fixed order, so the result
 * is bitwise the same on every run.
 */

/* A work-group merges FCL_COMBINE_COLS columns of one row, each column
 * summed over the parts by FCL_COMBINE_SLICES work-items (part s by slice
 * s % FCL_COMBINE_SLICES).  At most FCL_COMBINE_MAX_SPLITS parts (the
 * host's FCL_MAX_SPLITS, which fcl_validate_desc enforces).  A build may
 * set the first two (flashcl_mpi merges two parts at a time: one slice). */
#ifndef FCL_COMBINE_COLS
#define FCL_COMBINE_COLS 32
#endif
#ifndef FCL_COMBINE_SLICES
#define FCL_COMBINE_SLICES 8
#endif
#define FCL_COMBINE_WG (FCL_COMBINE_COLS * FCL_COMBINE_SLICES)
#define FCL_COMBINE_MAX_SPLITS 1024

/* A NaN-propagating max: a NaN part (one that failed its KV-cache check)
 * makes the row NaN, where fmax would drop it. */
inline float fcl_max_nan(float a, float b) { return isnan(a) || isnan(b) ? NAN : fmax(a, b); }

/* The merged LSE of n parts: -inf when every part is empty, NaN when one
 * failed.  Every work-item computes it from __local memory in the same
 * order (cheaper than a tree of barriers when parts are few). */
inline float fcl_merge_lse(__local const float *lse, int n)
{
    float m = -INFINITY;
    for (int s = 0; s < n; ++s) m = fcl_max_nan(m, lse[s]);
    if (!isfinite(m))
        return m;
    float sum = 0.0f;
    for (int s = 0; s < n; ++s) sum += exp(lse[s] - m);
    return m + log(sum);
}

/* Rows are (batch, head, position) as the LSE counts them, part_rows of
 * them; part s of row r is part_lse[s * part_rows + r] and
 * part_o[(s * part_rows + r) * head_dim + col].  Work-group (row, column
 * block): the parts' LSE are read at once into __local memory and merged;
 * then each work-item sums its column over its slice of the parts with
 * weights exp(LSE_s - LSE) (0 for an empty part), four loads in flight,
 * and the slices are added in order.  `sinks` holds heads_q logits when
 * `arrays` has FCL_ARRAY_SINKS, else it is a placeholder ("optional
 * arrays", common.cl).  A merge is latency, not bandwidth:
 * one work-item per column walking the parts one by one took 0.33 us a
 * part on an H100 (40 us for 128 parts, more than the attention itself:
 * NOTES.md, run 16).  Every sum has a fixed order. */
__kernel __attribute__((reqd_work_group_size(FCL_COMBINE_WG, 1, 1)))
void fcl_combine(__global const float *part_o, __global const float *part_lse, int num_splits,
                 long part_rows, int head_dim, int seqlen_q, int heads_q,
                 __global fcl_ostorage *O, long o_off, long o_sb, long o_sh, long o_ss,
                 __global float *LSE, long lse_off, int write_lse,
                 __global const float *sinks, int arrays)
{
    __local float part[FCL_COMBINE_MAX_SPLITS];
    __local float slice_sum[FCL_COMBINE_SLICES][FCL_COMBINE_COLS];
    const int col_blocks = (head_dim + FCL_COMBINE_COLS - 1) / FCL_COMBINE_COLS;
    const long row = (long)get_group_id(0) / col_blocks;
    const int lid = (int)get_local_id(0);
    const int c = lid % FCL_COMBINE_COLS, slice = lid / FCL_COMBINE_COLS;
    const int col = (int)(get_group_id(0) % col_blocks) * FCL_COMBINE_COLS + c;
    const int pos = (int)(row % seqlen_q);
    const long bh = row / seqlen_q;
    const int h = (int)(bh % heads_q), b = (int)(bh / heads_q);

    for (int s = lid; s < num_splits; s += FCL_COMBINE_WG) part[s] = part_lse[s * part_rows + row];
    barrier(CLK_LOCAL_MEM_FENCE);
    const float keys_lse = fcl_merge_lse(part, num_splits);
    const float sink = fcl_optional(sinks, h, arrays, FCL_ARRAY_SINKS, -INFINITY);
    const float lse = (arrays & FCL_ARRAY_SINKS) ? fcl_lse_add(keys_lse, sink) : keys_lse;

    float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (col < head_dim && isfinite(lse)) {
        const long step = part_rows * head_dim;
        __global const float *p = part_o + row * head_dim + col;
        const int stride = FCL_COMBINE_SLICES;
        int s = slice;
        for (; s + 3 * stride < num_splits; s += 4 * stride)
            for (int k = 0; k < 4; ++k)
                o[k] += exp(part[s + k * stride] - lse) * p[(s + k * stride) * step];
        for (; s < num_splits; s += stride) o[0] += exp(part[s] - lse) * p[s * step];
    }
    slice_sum[slice][c] = (o[0] + o[1]) + (o[2] + o[3]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (slice == 0 && col < head_dim) {
        float out = 0.0f;
        for (int k = 0; k < FCL_COMBINE_SLICES; ++k) out += slice_sum[k][c];
        fcl_store_o(O, o_off + b * o_sb + h * o_sh + pos * o_ss + col, isnan(lse) ? NAN : out);
    }
    if (write_lse && lid == 0 && get_group_id(0) % col_blocks == 0)
        LSE[lse_off + row] = lse == -INFINITY ? INFINITY : lse;
}
