"""Decoding against a KV cache (fcl_attention_kvcache[_host]), in
FlashAttention's flash_attn_with_kvcache conventions."""
import ctypes

import numpy as np

from . import _lib
from ._attention import alibi_mode, is_torch, set_window, sinks_flag
from ._context import default_context
from ._errors import ArgumentError
from ._tensors import CL, empty, invoke, operands, same_dtype

byref = ctypes.byref


def _set_rotary(desc, ops, interleaved):
    """The rotary fields from the cos/sin tables, (rotary_rows, rotary_dim / 2)
    float32 each, or none."""
    if ("rotary_cos" in ops) != ("rotary_sin" in ops):
        raise ArgumentError("give both rotary_cos and rotary_sin, or neither")
    if "rotary_cos" not in ops:
        return  # rotary_interleaved alone does nothing, as in flash_attn_with_kvcache
    shape = tuple(ops["rotary_cos"].shape)
    if len(shape) != 2:
        raise ArgumentError("rotary_cos must be (rotary_rows, rotary_dim / 2), got %s" % (shape,))
    for n in ("rotary_cos", "rotary_sin"):
        ops[n].dense(shape, np.float32, "rotary table")
    desc.rotary_rows, desc.rotary_dim = shape[0], 2 * shape[1]
    desc.rotary_interleaved = 1 if interleaved else 0


def _value_dim(ops, shared, head_dim_v):
    """V's columns: v_cache's head_dim, or with one shared cache (v_cache
    None) head_dim_v (default k_cache's head_dim)."""
    kc = ops["k_cache"].shape
    if shared:
        if "v_new" in ops:
            raise ArgumentError("a shared cache (v_cache None) takes no v: the appended k rows "
                                "hold V's columns")
        return kc[3] if head_dim_v is None else head_dim_v
    if head_dim_v is not None:
        raise ArgumentError("head_dim_v is for a shared cache (v_cache None); two caches take "
                            "it from v_cache's last axis")
    vcs = ops["v_cache"].shape
    if tuple(kc[:3]) != tuple(vcs[:3]):
        raise ArgumentError("k_cache and v_cache must have the same shape but for head_dim, "
                            "got %s and %s" % (tuple(kc), tuple(vcs)))
    if ("k_new" in ops) != ("v_new" in ops):
        raise ArgumentError("give both k and v (the rows to append), or neither")
    return vcs[3]


def _run(ctx, q, k_cache, v_cache, k, v, cache_seqlens, block_table, alibi_slopes, sinks,
         rotary_cos, rotary_sin, rotary_interleaved, causal, softmax_scale, window, softcap,
         num_splits, return_lse, head_dim_v):
    ops, kind = operands(ctx, q=q, k_cache=k_cache, v_cache=v_cache, k_new=k, v_new=v,
                         cache_seqlens=cache_seqlens, page_table=block_table,
                         alibi_slopes=alibi_slopes, sinks=sinks, rotary_cos=rotary_cos,
                         rotary_sin=rotary_sin)
    shared = v_cache is None
    code = same_dtype(ops, ["q", "k_cache", "v_cache", "k_new", "v_new"])
    for n in ("q", "k_cache", "v_cache", "k_new", "v_new"):
        if n in ops:
            ops[n].expect(4, "(batch-or-pages, seqlen, heads, head_dim)")
    b, sq, hq, d = ops["q"].shape
    kc = ops["k_cache"].shape
    hkv, dv = kc[2], _value_dim(ops, shared, head_dim_v)
    if kc[3] != d or hq % max(hkv, 1):
        raise ArgumentError("the cache's heads and head_dim %s do not fit q's %s (heads_q a "
                            "multiple of heads_kv, same head_dim)" % (tuple(kc), tuple(q.shape)))
    snew = 0
    if "k_new" in ops:
        snew = ops["k_new"].shape[1]
        for n, width in (("k_new", d), ("v_new", dv))[:1 if shared else 2]:
            if tuple(ops[n].shape) != (b, snew, hkv, width):
                raise ArgumentError("%s must be (batch, seqlen_new, heads_kv, its cache's "
                                    "head_dim) = %s, got %s"
                                    % (n[0], (b, snew, hkv, width), tuple(ops[n].shape)))
    ops["cache_seqlens"].dense((b,), np.int32, "cache lengths")
    desc = _lib.KvcacheDesc()
    _lib.fcl_kvcache_desc_init(byref(desc), b, hq, hkv, d, sq, snew, code)
    desc.head_dim_v = dv
    desc.shared_kv = 1 if shared else 0
    if "page_table" in ops:
        pt = ops["page_table"]
        if pt.dtype != np.int32 or len(pt.shape) != 2 or pt.shape[0] != b or \
                (pt.shape[1] > 1 and pt.strides[1] != 1):
            raise ArgumentError("block_table must be int32 (batch, max_pages_per_seq) with "
                                "contiguous rows, got %s %s" % (pt.dtype, tuple(pt.shape)))
        _lib.fcl_kvcache_desc_set_paged(byref(desc), kc[0], kc[1], pt.shape[1])
        desc.page_table_stride = pt.strides[0] if b > 1 else pt.shape[1]
    else:
        if kc[0] != b:
            raise ArgumentError("a contiguous cache is (batch, cache_seqlen, heads_kv, "
                                "head_dim) with q's batch %d, got %s" % (b, tuple(kc)))
        _lib.fcl_kvcache_desc_set_contiguous(byref(desc), kc[1])
    desc.causal = 1 if causal else 0
    desc.softmax_scale = 0.0 if softmax_scale is None else softmax_scale
    set_window(desc, window)
    desc.softcap = softcap
    desc.alibi = alibi_mode(ops.get("alibi_slopes"), b, hq)
    desc.sinks = sinks_flag(ops.get("sinks"), hq)
    desc.num_splits = num_splits
    _set_rotary(desc, ops, rotary_interleaved)
    for n in ("q", "k_cache", "v_cache", "k_new", "v_new"):
        if n in ops:
            ops[n].layout(getattr(desc, n))
    out = empty(kind, ctx, (b, sq, hq, dv), ops["q"].dtype)
    lse = empty(kind, ctx, (b, hq, sq), np.float32) if return_lse else None
    outs, _ = operands(ctx, o=out, lse=lse)
    outs["o"].layout(desc.o)
    arrays = (_lib.KvcacheBuffers if kind == CL else _lib.KvcacheHost)()
    for n, op in list(ops.items()) + list(outs.items()):
        setattr(arrays, n, op.ptr)
    written = [out, lse] + ([k_cache] + ([] if shared else [v_cache]) if snew else [])
    invoke(ctx, kind, ops.values(), _lib.fcl_attention_kvcache_host, _lib.fcl_attention_kvcache,
           (byref(desc), byref(arrays)), written, "the KV-cache attention")
    return (out, lse) if return_lse else out


def attention_kvcache(q, k_cache, v_cache, k=None, v=None, *, cache_seqlens, block_table=None,
                      causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
                      alibi_slopes=None, sinks=None, rotary_cos=None, rotary_sin=None,
                      rotary_interleaved=True, num_splits=0, return_lse=False, head_dim_v=None,
                      context=None):
    """Attention of new query rows against a KV cache, appending k, v first
    (fcl_attention_kvcache; FlashAttention's flash_attn_with_kvcache).

    q: (batch, seqlen_q, heads_q, head_dim).  The cache: contiguous
    (batch, cache_seqlen, heads_kv, head_dim), or with block_table (int32,
    (batch, max_pages_per_seq)) paged (num_pages, page_size, heads_kv,
    head_dim).  v_cache (and v) may be narrower than k_cache (and k):
    head_dim_v columns, 1 <= head_dim_v <= head_dim, and o is then
    head_dim_v wide (fcl_kvcache_desc.head_dim_v).  v_cache=None: one
    shared cache (multi-head latent attention, fcl_kvcache_desc.shared_kv):
    V is the first head_dim_v columns (the argument; default head_dim) of
    k_cache's rows, e.g. DeepSeek's 576-wide latent with head_dim_v=512,
    heads_kv 1; v must then be None (the appended k rows hold V's columns),
    and rotary is refused.  head_dim is at most 576 here (256 in the other
    calls).  cache_seqlens: int32
    (batch,), keys each sequence holds before the call (not advanced: the
    caller does that).  k, v: optional (batch, seqlen_new, heads_kv,
    head_dim / head_dim_v) rows written into the cache at
    cache_seqlens[b] .. (in place: the caches are updated), then query row i
    of sequence b attends to its first T_b = cache_seqlens[b] + seqlen_new
    keys, masks aligned at position T_b - seqlen_q + i.  causal, softmax_scale,
    window, softcap, alibi_slopes, sinks as in attention().  rotary_cos, rotary_sin:
    optional float32 (rotary_rows, rotary_dim / 2) tables (row p: position p;
    rotary_rows at least the cache's keys per sequence): q and the appended
    k rows (not v) are rotated in their first rotary_dim columns before k
    enters the cache, k row t at cache_seqlens[b] + t and query row i at
    max(T_b - seqlen_q + i, 0), pairs (2i, 2i+1) with rotary_interleaved
    (GPT-J; the default, as in flash_attn_with_kvcache), else
    (i, i + rotary_dim / 2) (GPT-NeoX); x_a' = x_a cos - x_b
    sin, x_b' = x_b cos + x_a sin (flashcl.h, fcl_kvcache_desc, says it
    exactly; unlike flash_attn_with_kvcache, every query row is at its own
    position, also without causal, and k may be absent).  num_splits: split-KV
    chunks, 0 automatic.  Returns o, q's shape with head_dim_v columns (and lse, float32
    (batch, heads_q, seqlen_q), with return_lse=True).  Host arrays have
    their lengths and page indices checked first
    (FCL_ERROR_INVALID_CACHE_SEQLENS, FCL_ERROR_INVALID_PAGE_TABLE)."""
    ctx = context or default_context()
    options = dict(causal=causal, softmax_scale=softmax_scale, window=window, softcap=softcap,
                   rotary_interleaved=rotary_interleaved, num_splits=num_splits,
                   return_lse=return_lse, head_dim_v=head_dim_v)
    arrays = dict(q=q, k_cache=k_cache, v_cache=v_cache, k=k, v=v, cache_seqlens=cache_seqlens,
                  block_table=block_table, alibi_slopes=alibi_slopes, sinks=sinks,
                  rotary_cos=rotary_cos, rotary_sin=rotary_sin)
    if is_torch(q):
        from . import _torch
        return _torch.kvcache(lambda **a: _run(ctx, **a, **options), arrays)
    return _run(ctx, **arrays, **options)
