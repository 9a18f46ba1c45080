/* struct_layout.c - prints sizeof and every field's offset and size of the
 * public structures, as this compiler lays them out from include/flashcl.h.
 * The Python binding's ctypes mirrors are checked against it
 * (python/tests/test_struct_layout.py).  Lines: "struct field offset size",
 * and "struct - sizeof 0" for the whole structure. */
#include "flashcl.h"

#include <stddef.h>
#include <stdio.h>

#define SIZE(s) printf("%s - %zu 0\n", #s, sizeof(s))
#define FIELD(s, f) printf("%s %s %zu %zu\n", #s, #f, offsetof(s, f), sizeof(((s *)0)->f))

int main(void)
{
    SIZE(fcl_layout);
    FIELD(fcl_layout, offset); FIELD(fcl_layout, stride_batch);
    FIELD(fcl_layout, stride_head); FIELD(fcl_layout, stride_seq);

    SIZE(fcl_attention_desc);
    FIELD(fcl_attention_desc, batch); FIELD(fcl_attention_desc, heads_q);
    FIELD(fcl_attention_desc, heads_kv); FIELD(fcl_attention_desc, seqlen_q);
    FIELD(fcl_attention_desc, seqlen_k); FIELD(fcl_attention_desc, head_dim);
    FIELD(fcl_attention_desc, dtype); FIELD(fcl_attention_desc, softmax_scale);
    FIELD(fcl_attention_desc, causal); FIELD(fcl_attention_desc, q);
    FIELD(fcl_attention_desc, k); FIELD(fcl_attention_desc, v); FIELD(fcl_attention_desc, o);
    FIELD(fcl_attention_desc, dout); FIELD(fcl_attention_desc, dq);
    FIELD(fcl_attention_desc, dk); FIELD(fcl_attention_desc, dv);
    FIELD(fcl_attention_desc, lse_offset); FIELD(fcl_attention_desc, window_left);
    FIELD(fcl_attention_desc, window_right); FIELD(fcl_attention_desc, softcap);
    FIELD(fcl_attention_desc, alibi); FIELD(fcl_attention_desc, dropout_p);
    FIELD(fcl_attention_desc, dropout_seed); FIELD(fcl_attention_desc, dropout_offset);
    FIELD(fcl_attention_desc, varlen); FIELD(fcl_attention_desc, total_q);
    FIELD(fcl_attention_desc, total_k); FIELD(fcl_attention_desc, block_m);
    FIELD(fcl_attention_desc, block_n); FIELD(fcl_attention_desc, block_mask_stride_batch);
    FIELD(fcl_attention_desc, block_mask_stride_head); FIELD(fcl_attention_desc, num_splits);
    FIELD(fcl_attention_desc, out_dtype); FIELD(fcl_attention_desc, head_dim_v);
    FIELD(fcl_attention_desc, sinks);

    SIZE(fcl_attention_aux);
    FIELD(fcl_attention_aux, alibi_slopes); FIELD(fcl_attention_aux, cu_seqlens_q);
    FIELD(fcl_attention_aux, cu_seqlens_k); FIELD(fcl_attention_aux, block_mask);
    FIELD(fcl_attention_aux, descale_q); FIELD(fcl_attention_aux, descale_k);
    FIELD(fcl_attention_aux, descale_v); FIELD(fcl_attention_aux, sinks);
    FIELD(fcl_attention_aux, dsinks);
    SIZE(fcl_attention_aux_host);
    FIELD(fcl_attention_aux_host, alibi_slopes); FIELD(fcl_attention_aux_host, cu_seqlens_q);
    FIELD(fcl_attention_aux_host, cu_seqlens_k); FIELD(fcl_attention_aux_host, block_mask);
    FIELD(fcl_attention_aux_host, descale_q); FIELD(fcl_attention_aux_host, descale_k);
    FIELD(fcl_attention_aux_host, descale_v); FIELD(fcl_attention_aux_host, sinks);
    FIELD(fcl_attention_aux_host, dsinks);

    SIZE(fcl_device_ref);
    FIELD(fcl_device_ref, platform_index); FIELD(fcl_device_ref, device_index);
    FIELD(fcl_device_ref, type); FIELD(fcl_device_ref, platform_name);
    FIELD(fcl_device_ref, device_name);

    SIZE(fcl_device_info);
    FIELD(fcl_device_info, name); FIELD(fcl_device_info, vendor);
    FIELD(fcl_device_info, driver_version); FIELD(fcl_device_info, device_version);
    FIELD(fcl_device_info, platform_name); FIELD(fcl_device_info, type);
    FIELD(fcl_device_info, vendor_id); FIELD(fcl_device_info, compute_units);
    FIELD(fcl_device_info, max_work_group_size); FIELD(fcl_device_info, max_work_item_sizes);
    FIELD(fcl_device_info, global_mem_bytes); FIELD(fcl_device_info, max_alloc_bytes);
    FIELD(fcl_device_info, local_mem_reported); FIELD(fcl_device_info, local_mem_usable);
    FIELD(fcl_device_info, local_mem_probed); FIELD(fcl_device_info, local_mem_is_dedicated);
    FIELD(fcl_device_info, simd_width); FIELD(fcl_device_info, native_float_width);
    FIELD(fcl_device_info, cache_bytes); FIELD(fcl_device_info, nv_compute_capability);
    FIELD(fcl_device_info, has_fp64); FIELD(fcl_device_info, has_fp16_arith);
    FIELD(fcl_device_info, has_subgroups); FIELD(fcl_device_info, extensions);
    FIELD(fcl_device_info, profile_name);

    SIZE(fcl_context_options);
    FIELD(fcl_context_options, platform_index); FIELD(fcl_context_options, device_index);
    FIELD(fcl_context_options, profile); FIELD(fcl_context_options, disk_cache);
    FIELD(fcl_context_options, cache_dir); FIELD(fcl_context_options, cache_max_bytes);
    FIELD(fcl_context_options, enable_profiling);
    FIELD(fcl_context_options, skip_local_mem_probe); FIELD(fcl_context_options, portable_only);

    SIZE(fcl_plan);
    FIELD(fcl_plan, kernel); FIELD(fcl_plan, dtype); FIELD(fcl_plan, head_dim);
    FIELD(fcl_plan, head_dim_padded); FIELD(fcl_plan, local_mem_reported);
    FIELD(fcl_plan, local_mem_usable); FIELD(fcl_plan, paper_m_elements);
    FIELD(fcl_plan, paper_bc); FIELD(fcl_plan, paper_br); FIELD(fcl_plan, br);
    FIELD(fcl_plan, bc); FIELD(fcl_plan, work_group_size); FIELD(fcl_plan, threads_row);
    FIELD(fcl_plan, threads_col); FIELD(fcl_plan, local_bytes); FIELD(fcl_plan, variant);
    FIELD(fcl_plan, source); FIELD(fcl_plan, reason); FIELD(fcl_plan, pack);
    FIELD(fcl_plan, num_splits); FIELD(fcl_plan, split_keys);

    SIZE(fcl_kvcache_desc);
    FIELD(fcl_kvcache_desc, batch); FIELD(fcl_kvcache_desc, heads_q);
    FIELD(fcl_kvcache_desc, heads_kv); FIELD(fcl_kvcache_desc, head_dim);
    FIELD(fcl_kvcache_desc, seqlen_q); FIELD(fcl_kvcache_desc, seqlen_new);
    FIELD(fcl_kvcache_desc, dtype); FIELD(fcl_kvcache_desc, softmax_scale);
    FIELD(fcl_kvcache_desc, causal); FIELD(fcl_kvcache_desc, window_left);
    FIELD(fcl_kvcache_desc, window_right); FIELD(fcl_kvcache_desc, softcap);
    FIELD(fcl_kvcache_desc, alibi); FIELD(fcl_kvcache_desc, page_size);
    FIELD(fcl_kvcache_desc, cache_seqlen); FIELD(fcl_kvcache_desc, num_pages);
    FIELD(fcl_kvcache_desc, max_pages_per_seq); FIELD(fcl_kvcache_desc, page_table_stride);
    FIELD(fcl_kvcache_desc, q); FIELD(fcl_kvcache_desc, o); FIELD(fcl_kvcache_desc, k_cache);
    FIELD(fcl_kvcache_desc, v_cache); FIELD(fcl_kvcache_desc, k_new);
    FIELD(fcl_kvcache_desc, v_new); FIELD(fcl_kvcache_desc, lse_offset);
    FIELD(fcl_kvcache_desc, num_splits); FIELD(fcl_kvcache_desc, out_dtype);
    FIELD(fcl_kvcache_desc, head_dim_v);
    FIELD(fcl_kvcache_desc, sinks);
    FIELD(fcl_kvcache_desc, rotary_dim); FIELD(fcl_kvcache_desc, rotary_interleaved);
    FIELD(fcl_kvcache_desc, rotary_rows);

    SIZE(fcl_kvcache_buffers);
    FIELD(fcl_kvcache_buffers, q); FIELD(fcl_kvcache_buffers, k_cache);
    FIELD(fcl_kvcache_buffers, v_cache); FIELD(fcl_kvcache_buffers, cache_seqlens);
    FIELD(fcl_kvcache_buffers, page_table); FIELD(fcl_kvcache_buffers, k_new);
    FIELD(fcl_kvcache_buffers, v_new); FIELD(fcl_kvcache_buffers, alibi_slopes);
    FIELD(fcl_kvcache_buffers, o); FIELD(fcl_kvcache_buffers, lse);
    FIELD(fcl_kvcache_buffers, descale_q); FIELD(fcl_kvcache_buffers, descale_k);
    FIELD(fcl_kvcache_buffers, descale_v); FIELD(fcl_kvcache_buffers, sinks);
    FIELD(fcl_kvcache_buffers, descale_v);
    FIELD(fcl_kvcache_buffers, rotary_cos); FIELD(fcl_kvcache_buffers, rotary_sin);
    SIZE(fcl_kvcache_host);
    FIELD(fcl_kvcache_host, q); FIELD(fcl_kvcache_host, k_cache);
    FIELD(fcl_kvcache_host, v_cache); FIELD(fcl_kvcache_host, cache_seqlens);
    FIELD(fcl_kvcache_host, page_table); FIELD(fcl_kvcache_host, k_new);
    FIELD(fcl_kvcache_host, v_new); FIELD(fcl_kvcache_host, alibi_slopes);
    FIELD(fcl_kvcache_host, o); FIELD(fcl_kvcache_host, lse);
    FIELD(fcl_kvcache_host, descale_q); FIELD(fcl_kvcache_host, descale_k);
    FIELD(fcl_kvcache_host, descale_v); FIELD(fcl_kvcache_host, sinks);
    FIELD(fcl_kvcache_host, descale_v);
    FIELD(fcl_kvcache_host, rotary_cos); FIELD(fcl_kvcache_host, rotary_sin);

    SIZE(fcl_memory_stats);
    FIELD(fcl_memory_stats, allocations); FIELD(fcl_memory_stats, current_bytes);
    FIELD(fcl_memory_stats, peak_bytes); FIELD(fcl_memory_stats, largest_bytes);
    return 0;
}
