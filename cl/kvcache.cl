/* kvcache.cl - the append of a KV-cache call: each sequence's new K/V
 * rows written into its cache before the forward attends.
 *
 * One work-group per sequence b.  Its keys are the first
 * total = cache_lens[b] + seqlen_new rows of its cache: rows at a fixed
 * stride in a contiguous cache, or, with pages (FCL_PAGE_SIZE > 0), row j
 * in page page_table[b][j / FCL_PAGE_SIZE].  A sequence that fails the
 * check (fcl_kvcache_sequence_ok: length and every page it uses) is not
 * touched; the forward makes the same check and writes NaN for its rows,
 * so no table content ever leads to an access outside the cache.  A valid
 * sequence gets new row t (of seqlen_new) of each K/V head written at key
 * cache_lens[b] + t: head_dim columns of K, head_dim_v (<= head_dim) of V.
 */
__kernel void fcl_kvcache_append(__global const int *cache_lens, __global const int *page_table,
                                 long pt_stride, int num_pages, int capacity, int seqlen_new,
                                 __global fcl_storage *Kc, __global fcl_storage *Vc,
                                 long kc_off, long kc_sb, long kc_sh, long kc_ss,
                                 long vc_off, long vc_sb, long vc_sh, long vc_ss,
                                 __global const fcl_storage *Kn, __global const fcl_storage *Vn,
                                 long kn_off, long kn_sb, long kn_sh, long kn_ss,
                                 long vn_off, long vn_sb, long vn_sh, long vn_ss,
                                 int heads_kv, int head_dim, int head_dim_v)
{
    __local int check;
    const int b = (int)get_group_id(0), lid = (int)get_local_id(0), wg = (int)get_local_size(0);
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
    const long per_row = (long)heads_kv * head_dim; /* heads_kv up to 2^24: past 2^31 */
    for (long e = lid; e < (long)seqlen_new * per_row; e += wg) {
        const int t = (int)(e / per_row);
        const long rem = e - (long)t * per_row;
        const int hk = (int)(rem / head_dim), c = (int)(rem - (long)hk * head_dim);
        const long kn_at = kn_off + b * kn_sb + hk * kn_sh + t * kn_ss + c;
        const long vn_at = vn_off + b * vn_sb + hk * vn_sh + t * vn_ss + c;
        fcl_copy(Kc, fcl_row_offset(kc, true, len + t) + hk * kc_sh + c, Kn, kn_at);
        if (c < head_dim_v)
            fcl_copy(Vc, fcl_row_offset(vc, true, len + t) + hk * vc_sh + c, Vn, vn_at);
    }
}
