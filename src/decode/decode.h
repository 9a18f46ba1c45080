/* decode.h - decoding against a KV cache (kvcache.c, kvcache_host.c): the
 * forward kernel on the cache, with the append of new rows. */
#ifndef FCL_DECODE_H
#define FCL_DECODE_H

#include "calls/calls.h"

/* ---- the KV-cache call (kvcache.c, kvcache_host.c) ------------------------- */

enum { FCL_KVCACHE_TENSORS = 7 };
/* Keys one sequence's cache can hold. */
size_t fcl_kvcache_capacity(const fcl_kvcache_desc *d);
/* Everything the KV-cache call (both forms) and its plan query check on the
 * descriptor alone, before any buffer or array. */
fcl_status fcl_kvcache_check_desc(const fcl_kvcache_desc *d);
fcl_attention_desc fcl_kvcache_as_forward(const fcl_kvcache_desc *d);
/* Whether the V buffers (arrays) given fit the descriptor: with a shared
 * cache none (else FCL_ERROR_INVALID_VALUE), without one v_cache and, when
 * rows are appended, v_new (else FCL_ERROR_NULL_ARGUMENT). */
fcl_status fcl_kvcache_check_v_given(const fcl_kvcache_desc *d, bool v_cache, bool v_new);
/* The kernel features of every KV-cache call of d: FCL_FEAT_KVCACHE, and
 * FCL_FEAT_SHARED_KV for a shared cache. */
unsigned fcl_kvcache_features(const fcl_kvcache_desc *d);
/* The call's tensors (q, o, k_cache[, v_cache][, k_new][, v_new][, lse]:
 * no V tensors with a shared cache), *n of them. */
void fcl_kvcache_tensors(const fcl_kvcache_desc *d, const fcl_kvcache_buffers *b,
                         fcl_tensor_ref t[FCL_KVCACHE_TENSORS], size_t *n);
/* Rows a rotary table may have (flashcl.h: 2^30). */
#define FCL_MAX_ROTARY_ROWS ((size_t)1 << 30)
/* Bytes each rotary table must hold: rotary_rows x rotary_dim / 2 floats. */
uint64_t fcl_kvcache_rotary_bytes(const fcl_kvcache_desc *d);
/* int32 entries the page table must hold. */
uint64_t fcl_kvcache_page_table_entries(const fcl_kvcache_desc *d);

#endif /* FCL_DECODE_H */
