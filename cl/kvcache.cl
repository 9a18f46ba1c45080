/* kvcache.cl - the append of a KV-cache call: each sequence's new K/V
 * rows written into its cache before the forward attends, and with rotary
 * position embedding the rotation of those K rows and of Q.
 *
 * Work-group b * parts + part: sequence b's rows are shared by its `parts`
 * groups, a row's columns by a group's work-items (one dimension: some
 * devices cap the groups of the others at 65535).  Its keys are the first
 * total = cache_lens[b] + seqlen_new rows of its cache: rows at a fixed
 * stride in a contiguous cache, or, with pages (FCL_PAGE_SIZE > 0), row j
 * in page page_table[b][j / FCL_PAGE_SIZE].  A sequence that fails the
 * check (fcl_kvcache_sequence_ok: length and every page it uses) is not
 * touched; the forward makes the same check and writes NaN for its rows,
 * so no table content ever leads to an access outside the cache.  A valid
 * sequence gets new row t (of seqlen_new) of each K/V head written at key
 * cache_lens[b] + t: head_dim columns of K, head_dim_v (<= head_dim) of V.
 *
 * Rotary (rotary_dim > 0, never FP8; flashcl.h gives the formula): new K
 * row t is rotated at position cache_lens[b] + t as it is written, and
 * query row i at max(total - seqlen_q + i, 0) into Qr, a contiguous
 * (batch, seqlen_q, heads_q, head_dim) copy of Q in the storage type that
 * the forward then reads instead of Q.  cos/sin row p is at p * rotary_dim / 2.
 */

#if !FCL_IS_FP8
/* Column c of the row of x starting at `row`, rotated with the table rows
 * cs and sn: x'_a = x_a cos - x_b sin, x'_b = x_b cos + x_a sin for the pair
 * (a, b) of column c; columns from rotary_dim on are x itself. */
inline float fcl_rotary_element(__global const fcl_storage *x, long row, int c, int rotary_dim,
                                int interleaved, __global const float *cs,
                                __global const float *sn)
{
    const float v = fcl_load(x, row + c);
    if (c >= rotary_dim)
        return v;
    const int pairs = rotary_dim / 2;
    const bool is_a = interleaved ? (c & 1) == 0 : c < pairs;
    const int i = interleaved ? c >> 1 : (is_a ? c : c - pairs);
    const int partner = interleaved ? c ^ 1 : (is_a ? c + pairs : c - pairs);
    const float w = fcl_load(x, row + partner);
    return is_a ? v * cs[i] - w * sn[i] : v * cs[i] + w * sn[i];
}
#endif

__kernel void fcl_kvcache_append(__global const int *cache_lens, __global const int *page_table,
                                 long pt_stride, int num_pages, int capacity, int seqlen_new,
                                 __global fcl_storage *Kc, __global fcl_storage *Vc,
                                 long kc_off, long kc_sb, long kc_sh, long kc_ss,
                                 long vc_off, long vc_sb, long vc_sh, long vc_ss,
                                 __global const fcl_storage *Kn, __global const fcl_storage *Vn,
                                 long kn_off, long kn_sb, long kn_sh, long kn_ss,
                                 long vn_off, long vn_sb, long vn_sh, long vn_ss,
                                 int heads_kv, int head_dim, int head_dim_v,
                                 __global const fcl_storage *Q, long q_off, long q_sb, long q_sh,
                                 long q_ss, __global fcl_storage *Qr, int heads_q, int seqlen_q,
                                 __global const float *rot_cos, __global const float *rot_sin,
                                 int rotary_dim, int rotary_interleaved, int parts)
{
    __local int check;
    const int b = (int)(get_group_id(0) / parts), lid = (int)get_local_id(0);
    const int wg = (int)get_local_size(0), part = (int)(get_group_id(0) % parts);
    const int len = cache_lens[b];
    __global const int *pages = page_table + (long)b * pt_stride;
    if (!fcl_kvcache_sequence_ok(len, seqlen_new, capacity, pages, 0, capacity, num_pages,
                                 &check, lid, wg))
        return; /* no barrier follows */

    fcl_rows kc = fcl_rows_strided(kc_off, kc_ss), vc = fcl_rows_strided(vc_off, vc_ss);
#if FCL_PAGE_SIZE > 0
    kc.pages = vc.pages = pages;
    kc.page_stride = kc_sb;
    vc.page_stride = vc_sb;
#else
    kc.base += (long)b * kc_sb;
    vc.base += (long)b * vc_sb;
#endif
    const long pairs = rotary_dim / 2;
    /* rows (t, hk) of the new K/V, then (i, h) of Q, `parts` groups apart;
     * the columns of a row over the work-items */
    for (long r = part; r < (long)seqlen_new * heads_kv; r += parts) {
        const int t = (int)(r / heads_kv), hk = (int)(r - (long)t * heads_kv);
        const long kn_row = kn_off + b * kn_sb + hk * kn_sh + t * kn_ss;
        const long vn_row = vn_off + b * vn_sb + hk * vn_sh + t * vn_ss;
        const long kc_row = fcl_row_offset(kc, true, len + t) + hk * kc_sh;
        const long vc_row = fcl_row_offset(vc, true, len + t) + hk * vc_sh;
        const long p = (long)(len + t) * pairs;
        for (int c = lid; c < head_dim; c += wg) {
#if !FCL_IS_FP8
            if (rotary_dim > 0)
                fcl_store(Kc, kc_row + c, fcl_rotary_element(Kn, kn_row, c, rotary_dim,
                                                             rotary_interleaved, rot_cos + p,
                                                             rot_sin + p));
            else
#endif
                fcl_copy(Kc, kc_row + c, Kn, kn_row + c);
            if (c < head_dim_v)
                fcl_copy(Vc, vc_row + c, Vn, vn_row + c);
        }
    }
#if !FCL_IS_FP8
    if (rotary_dim == 0)
        return;
    for (long r = part; r < (long)seqlen_q * heads_q; r += parts) {
        const int i = (int)(r / heads_q), h = (int)(r - (long)i * heads_q);
        const long q_row = q_off + b * q_sb + h * q_sh + i * q_ss;
        const long qr_row = ((long)b * seqlen_q + i) * heads_q * head_dim + (long)h * head_dim;
        const long p = (long)max(len + seqlen_new - seqlen_q + i, 0) * pairs;
        for (int c = lid; c < head_dim; c += wg)
            fcl_store(Qr, qr_row + c, fcl_rotary_element(Q, q_row, c, rotary_dim,
                                                         rotary_interleaved, rot_cos + p,
                                                         rot_sin + p));
    }
#endif
}
