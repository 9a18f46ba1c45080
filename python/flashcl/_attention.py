"""The attention calls: forward, backward, packed (varlen) sequences, the
dropout mask, and plans.  Each maps its arguments onto one
fcl_attention_desc exactly as include/flashcl.h defines the fields; the
shapes and dtypes are checked here first, the values (head_dim range,
windows, dropout_p, cu_seqlens contents ...) by the library."""
import ctypes

import numpy as np

from . import _lib
from ._context import default_context
from ._errors import ArgumentError, check
from ._tensors import CL, DTYPE_NAMES, Operand, dtype_code, empty, invoke, operands, same_dtype

byref = ctypes.byref


def is_torch(x):
    return type(x).__module__.startswith("torch")


def set_variants(desc, n_batch, heads_q, ops, opts):
    """The options every attention call shares (a dict from _opts), onto desc's fields."""
    desc.causal = 1 if opts["causal"] else 0
    scale = opts["softmax_scale"]
    desc.softmax_scale = 0.0 if scale is None else scale
    set_window(desc, opts["window"])
    desc.softcap = opts["softcap"]
    desc.dropout_p = opts["dropout_p"]
    desc.dropout_seed = opts["seed"]
    desc.dropout_offset = opts["dropout_offset"]
    desc.alibi = alibi_mode(ops.get("alibi_slopes"), n_batch, heads_q)
    desc.sinks = sinks_flag(ops.get("sinks"), heads_q)


def sinks_flag(sinks, heads_q):
    """fcl_attention_desc.sinks (and fcl_kvcache_desc's): 1 for float32
    (heads_q,) sink logits, 0 for None."""
    if sinks is None:
        return 0
    sinks.dense((heads_q,), np.float32, "sinks")
    return 1


def set_window(desc, window):
    """desc.window_left/right from FlashAttention's window_size pair."""
    try:
        desc.window_left, desc.window_right = window
    except (TypeError, ValueError):
        raise ArgumentError("window must be a pair (left, right) of ints, -1 for unbounded, "
                            "got %r" % (window,)) from None


def alibi_mode(slopes, n_batch, heads_q):
    """FCL_ALIBI_PER_HEAD for (heads_q,) slopes, _PER_BATCH_HEAD for
    (batch, heads_q), as FlashAttention's alibi_slopes."""
    if slopes is None:
        return _lib.ALIBI_NONE
    if len(slopes.shape) == 1:
        slopes.dense((heads_q,), np.float32, "ALiBi slopes")
        return _lib.ALIBI_PER_HEAD
    slopes.dense((n_batch, heads_q), np.float32, "ALiBi slopes")
    return _lib.ALIBI_PER_BATCH_HEAD


def shapes(ops, packed):
    """(batch-or-None, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim,
    head_dim_v) of q, k, v, checked against each other: v is k's shape but
    for its last axis, head_dim_v (the library checks 1 <= head_dim_v <=
    head_dim)."""
    what = "(tokens, heads, head_dim)" if packed else "(batch, seqlen, heads, head_dim)"
    ndim = 3 if packed else 4
    for n in ("q", "k", "v"):
        ops[n].expect(ndim, what)
    q, k, v = ops["q"].shape, ops["k"].shape, ops["v"].shape
    if tuple(k[:-1]) != tuple(v[:-1]):
        raise ArgumentError("k and v must have the same shape but for head_dim, got %s and %s"
                            % (tuple(k), tuple(v)))
    if not packed and q[0] != k[0]:
        raise ArgumentError("q and k must have the same batch, got %s and %s"
                            % (tuple(q), tuple(k)))
    if q[-1] != k[-1]:
        raise ArgumentError("q and k must have the same head_dim, got %s and %s"
                            % (tuple(q), tuple(k)))
    if q[-2] % max(k[-2], 1):
        raise ArgumentError("q's heads (%d) must be a multiple of k's (%d)" % (q[-2], k[-2]))
    if packed:
        return None, q[0], k[0], q[1], k[1], q[2], v[2]
    return q[0], q[1], k[1], q[2], k[2], q[3], v[3]


def out_shape(ops):
    """O's (and dO's) shape: q's, with v's head_dim_v as the last axis."""
    return tuple(ops["q"].shape[:-1]) + (ops["v"].shape[-1],)


def make_desc(ops, packed, cu_q, cu_k, max_seqlen_q, max_seqlen_k, opts):
    """A filled fcl_attention_desc for q, k, v (and the varlen sizes)."""
    code = same_dtype(ops, ["q", "k", "v", "out", "dout"])
    batch, sq, sk, hq, hkv, d, dv = shapes(ops, packed)
    desc = _lib.AttentionDesc()
    if packed:
        for name in ("cu_seqlens_q", "cu_seqlens_k"):
            if ops[name].dtype != np.int32 or len(ops[name].shape) != 1 or \
                    ops[name].shape[0] < 1:
                raise ArgumentError("%s must be a 1-D int32 array (batch + 1 entries)" % name)
        batch = ops["cu_seqlens_q"].shape[0] - 1
        ops["cu_seqlens_q"].dense((batch + 1,), np.int32, "cu_seqlens")
        ops["cu_seqlens_k"].dense((batch + 1,), np.int32, "cu_seqlens")
        if max_seqlen_q is None or max_seqlen_k is None:
            if ops["cu_seqlens_q"].kind == CL:
                raise ArgumentError("give max_seqlen_q and max_seqlen_k with PyOpenCL cu_seqlens")
            max_seqlen_q = int(np.diff(cu_q).max()) if batch else 0
            max_seqlen_k = int(np.diff(cu_k).max()) if batch else 0
        _lib.fcl_attention_desc_init(byref(desc), batch, hq, hkv, max_seqlen_q, max_seqlen_k,
                                     d, code, _lib.LAYOUT_BSHD)
        desc.varlen = 1
        desc.total_q, desc.total_k = sq, sk
    else:
        _lib.fcl_attention_desc_init(byref(desc), batch, hq, hkv, sq, sk, d, code,
                                     _lib.LAYOUT_BSHD)
    desc.head_dim_v = dv
    set_variants(desc, batch, hq, ops, opts)
    for name in ("q", "k", "v"):
        ops[name].layout(getattr(desc, name))
    return desc


def lse_shape(desc, packed):
    return (desc.heads_q, desc.total_q) if packed else (desc.batch, desc.heads_q, desc.seqlen_q)


def _aux(kind, ops):
    """fcl_attention_aux (or _host) of the aux operands in ops, None without any."""
    names = [n for n in ("alibi_slopes", "cu_seqlens_q", "cu_seqlens_k", "sinks", "dsinks")
             if n in ops]
    if not names:
        return None
    aux = _lib.AttentionAux() if kind == CL else _lib.AttentionAuxHost()
    for n in names:
        setattr(aux, n, ops[n].ptr)
    return byref(aux)


def run_forward(ctx, q, k, v, opts, *, packed=False, cu_seqlens_q=None, cu_seqlens_k=None,
                max_seqlen_q=None, max_seqlen_k=None, alibi_slopes=None, sinks=None,
                return_lse=False, out=None):
    ops, kind = operands(ctx, q=q, k=k, v=v, alibi_slopes=alibi_slopes,
                         cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, sinks=sinks)
    desc = make_desc(ops, packed, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opts)
    if out is None:
        out = empty(kind, ctx, out_shape(ops), ops["q"].dtype)
    out_op = Operand(out, "out")
    if (out_op.kind != kind or tuple(out_op.shape) != out_shape(ops)
            or out_op.dtype != ops["q"].dtype):
        raise ArgumentError("out must be an array of q's kind (%s), shape %s and dtype %s, "
                            "got %s %s of %s" % (type(q).__name__, out_shape(ops),
                                                 ops["q"].dtype, type(out).__name__,
                                                 tuple(out_op.shape), out_op.dtype))
    out_op.expect(len(ops["q"].shape), "like q")
    out_op.layout(desc.o)
    lse = empty(kind, ctx, lse_shape(desc, packed), np.float32) if return_lse else None
    aux = _aux(kind, ops)
    args = (ops["q"].ptr, ops["k"].ptr, ops["v"].ptr, out_op.ptr,
            None if lse is None else Operand(lse, "lse").ptr)
    # a caller's out may still be busy (its events join the wait list)
    invoke(ctx, kind, list(ops.values()) + [out_op], _lib.fcl_attention_forward_host_ex,
           _lib.fcl_attention_forward_ex, (byref(desc), aux) + args, [out, lse],
           "the attention forward")
    return (out, lse) if return_lse else out


def run_backward(ctx, dout, q, k, v, out, lse, opts, *, packed=False, cu_seqlens_q=None,
                 cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, alibi_slopes=None,
                 sinks=None):
    """(dq, dk, dv), and dsinks (float32 (heads_q,)) when sinks are given."""
    ops, kind = operands(ctx, q=q, k=k, v=v, out=out, dout=dout, lse=lse,
                         alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
                         cu_seqlens_k=cu_seqlens_k, sinks=sinks)
    desc = make_desc(ops, packed, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opts)
    for name in ("out", "dout"):
        if tuple(ops[name].shape) != out_shape(ops):
            raise ArgumentError("%s must have O's shape %s (q's, head_dim_v wide), got %s"
                                % (name, out_shape(ops), tuple(ops[name].shape)))
        ops[name].expect(len(ops["q"].shape), "like q")
    ops["out"].layout(desc.o)
    ops["dout"].layout(desc.dout)
    ops["lse"].dense(lse_shape(desc, packed), np.float32, "the forward's LSE")
    desc.lse_offset = ops["lse"].offset
    grads = {}
    for g, src in (("dq", "q"), ("dk", "k"), ("dv", "v")):
        grads[g] = empty(kind, ctx, ops[src].shape, ops[src].dtype)
    gops, _ = operands(ctx, **grads)
    for g in grads:
        gops[g].layout(getattr(desc, g))
    if sinks is not None:
        grads["dsinks"] = empty(kind, ctx, (desc.heads_q,), np.float32)
        gops["dsinks"] = Operand(grads["dsinks"], "dsinks")
    aux = _aux(kind, dict(ops, **{n: gops[n] for n in gops if n == "dsinks"}))
    args = [ops[n].ptr for n in ("q", "k", "v", "out", "lse", "dout")] + \
        [gops[g].ptr for g in ("dq", "dk", "dv")]
    invoke(ctx, kind, ops.values(), _lib.fcl_attention_backward_host_ex,
           _lib.fcl_attention_backward_ex, [byref(desc), aux] + args, list(grads.values()),
           "the attention backward")
    return tuple(grads.values())


_DOC_OPTIONS = """
    causal: mask query i from keys j > i + seqlen_k - seqlen_q (bottom-right aligned).
    softmax_scale: None for 1/sqrt(head_dim).
    window: (left, right) sliding window around that diagonal, -1 unbounded.
    softcap: > 0 caps the scores: cap * tanh(s / cap).
    alibi_slopes: float32 (heads_q,) or (batch, heads_q); adds -slope * |i + diag - j|.
    dropout_p, seed, dropout_offset: dropout after the softmax, Philox4x32-10
        drawn from (seed, offset) (fcl_attention_desc; dropout_mask() shows it).
    sinks: float32 (heads_q,) attention sinks (gpt-oss): sink_h joins the
        softmax denominator of every row of head h and adds no value, so
        O_i = sum_j e^s_ij v_j / (e^sink_h + sum_j e^s_ij) and
        LSE_i = log(e^sink_h + sum_j e^s_ij) (a row that sees no key: O = 0,
        LSE = sink_h).  The backward then also returns dsinks, float32
        (heads_q,): -sum over batch and rows of e^(sink_h - LSE) (dO . O).
    context: a flashcl.Context (default: one on the default device).
    Arrays: NumPy (float32, float16, bfloat16 as uint16 or ml_dtypes), PyOpenCL
    arrays of the context's cl_context (Context.from_pyopencl; no copies, the
    call is enqueued and returns), or PyTorch CPU tensors (differentiable).
    Any strides with a contiguous head_dim axis are taken as they are."""


def _opts(causal, softmax_scale, window, softcap, dropout_p, seed, dropout_offset):
    return dict(causal=causal, softmax_scale=softmax_scale, window=window, softcap=softcap,
                dropout_p=dropout_p, seed=seed, dropout_offset=dropout_offset)


def attention(q, k, v, *, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
              alibi_slopes=None, dropout_p=0.0, seed=0, dropout_offset=0, sinks=None,
              return_lse=False, context=None, out=None):
    opts = _opts(causal, softmax_scale, window, softcap, dropout_p, seed, dropout_offset)
    if is_torch(q):
        if out is not None:
            raise ArgumentError("out= takes NumPy or PyOpenCL arrays, not PyTorch tensors")
        from . import _torch
        return _torch.attention(q, k, v, opts, return_lse=return_lse, context=context,
                                alibi_slopes=alibi_slopes, sinks=sinks)
    return run_forward(context or default_context(), q, k, v, opts, alibi_slopes=alibi_slopes,
                       sinks=sinks, return_lse=return_lse, out=out)


attention.__doc__ = """O = softmax(scale * Q K^T + mask) V  (fcl_attention_forward).

    q: (batch, seqlen_q, heads_q, head_dim); k: (batch, seqlen_k, heads_kv,
    head_dim), heads_q a multiple of heads_kv (GQA/MQA); v: (batch, seqlen_k,
    heads_kv, head_dim_v), 1 <= head_dim_v <= head_dim (DeepSeek's 192/128;
    fcl_attention_desc.head_dim_v).  Returns o (batch, seqlen_q, heads_q,
    head_dim_v) of q's dtype, and with return_lse=True also lse, float32
    (batch, heads_q, seqlen_q) (+inf for a row that sees no key; with sinks,
    see below).  PyTorch tensors are differentiable, sinks included.
    out: None (a new array), or an array of q's kind, o's shape and dtype (any
    strides with a contiguous last axis) that receives O and is returned;
    it saves an allocation per call (PyOpenCL's costs about 13 us).  Not
    for PyTorch tensors.  On an error it is left as it was.
""" + _DOC_OPTIONS


def attention_backward(dout, q, k, v, out, lse, *, causal=False, softmax_scale=None,
                       window=(-1, -1), softcap=0.0, alibi_slopes=None, dropout_p=0.0, seed=0,
                       dropout_offset=0, sinks=None, context=None):
    ops_torch = is_torch(q)
    ctx = context or default_context()
    opts = _opts(causal, softmax_scale, window, softcap, dropout_p, seed, dropout_offset)
    if ops_torch:
        from . import _torch
        return _torch.backward(ctx, dout, q, k, v, out, lse, opts, alibi_slopes=alibi_slopes,
                               sinks=sinks)
    return run_backward(ctx, dout, q, k, v, out, lse, opts, alibi_slopes=alibi_slopes,
                        sinks=sinks)


attention_backward.__doc__ = """(dq, dk, dv) of attention (fcl_attention_backward);
    (dq, dk, dv, dsinks) with sinks.

    dout = dL/dO like out; out and lse are the forward's (return_lse=True),
    with the same options.  dq, dk, dv have q's, k's and v's shapes (dv is
    head_dim_v wide); dk and dv are summed over the query heads that share a
    K/V head.  Deterministic.
""" + _DOC_OPTIONS


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                     *, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
                     alibi_slopes=None, dropout_p=0.0, seed=0, dropout_offset=0, sinks=None,
                     return_lse=False, context=None):
    packed = dict(packed=True, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                  max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    opts = _opts(causal, softmax_scale, window, softcap, dropout_p, seed, dropout_offset)
    if is_torch(q):
        from . import _torch
        return _torch.attention(q, k, v, opts, return_lse=return_lse, context=context,
                                alibi_slopes=alibi_slopes, sinks=sinks, **packed)
    return run_forward(context or default_context(), q, k, v, opts, alibi_slopes=alibi_slopes,
                       sinks=sinks, return_lse=return_lse, **packed)


attention_varlen.__doc__ = """Attention over packed sequences of different lengths
    (FlashAttention's varlen layout; fcl_attention_desc.varlen).

    q: (total_q, heads_q, head_dim), k: (total_k, heads_kv, head_dim), v:
    (total_k, heads_kv, head_dim_v) (as in attention(); o is head_dim_v wide);
    sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 of q and
    cu_seqlens_k[b] .. cu_seqlens_k[b+1]-1 of k and v (int32, batch + 1
    entries, starting at 0).  max_seqlen_q/k: the longest lengths (computed
    from host cu_seqlens when None).  Masks and ALiBi align per sequence.
    lse (return_lse=True) is float32 (heads_q, total_q).
""" + _DOC_OPTIONS


def attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                              max_seqlen_q=None, max_seqlen_k=None, *, causal=False,
                              softmax_scale=None, window=(-1, -1), softcap=0.0,
                              alibi_slopes=None, dropout_p=0.0, seed=0, dropout_offset=0,
                              sinks=None, context=None):
    """(dq, dk, dv) of attention_varlen ((dq, dk, dv, dsinks) with sinks);
    arguments as there and in attention_backward."""
    ctx = context or default_context()
    packed = dict(packed=True, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                  max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    opts = _opts(causal, softmax_scale, window, softcap, dropout_p, seed, dropout_offset)
    if is_torch(q):
        from . import _torch
        return _torch.backward(ctx, dout, q, k, v, out, lse, opts, alibi_slopes=alibi_slopes,
                               sinks=sinks, **packed)
    return run_backward(ctx, dout, q, k, v, out, lse, opts, alibi_slopes=alibi_slopes,
                        sinks=sinks, **packed)


def dropout_mask(batch, heads, seqlen_q, seqlen_k, dropout_p, seed=0, dropout_offset=0, *,
                 context=None):
    """The dropout mask attention draws for these sizes and (p, seed, offset),
    computed by the kernels' own code (fcl_dropout_mask_host): uint8
    (batch, heads, seqlen_q, seqlen_k), 1 kept (scaled by 1/(1-p)), 0 dropped."""
    ctx = context or default_context()
    desc = _lib.AttentionDesc()
    _lib.fcl_attention_desc_init(byref(desc), batch, heads, heads, seqlen_q, seqlen_k, 1,
                                 _lib.DTYPE_FP32, _lib.LAYOUT_BSHD)
    desc.dropout_p, desc.dropout_seed, desc.dropout_offset = dropout_p, seed, dropout_offset
    mask = np.empty((batch, heads, seqlen_q, seqlen_k), np.uint8)
    with ctx._lock:
        status = _lib.fcl_dropout_mask_host(ctx.handle, byref(desc), mask.ctypes.data)
    check(status, "fcl_dropout_mask_host", ctx.handle)
    return mask


def _dtype_arg(dtype):
    if isinstance(dtype, str) and dtype in ("fp32", "fp16", "bf16"):
        return {"fp32": 0, "fp16": 1, "bf16": 2}[dtype]
    code = dtype_code(np.dtype(dtype))
    if code is None:
        raise ArgumentError("dtype must be fp32, fp16, bf16 or a NumPy dtype of those, got %r"
                            % (dtype,))
    return code


def plan(head_dim, *, seqlen_q=4096, seqlen_k=None, batch=1, heads=1, heads_kv=None,
         dtype="fp32", kernel="forward", causal=False, context=None):
    """The tiling `kernel` ("forward", "backward_dkdv", "backward_dq",
    "decode") launches for these sizes on the context's device
    (fcl_plan_query), as a dict of fcl_plan's fields: local_mem_reported and
    local_mem_usable are the device's SRAM in bytes, paper_br/paper_bc the
    FlashAttention paper's tile, br/bc what runs, variant the tile piece,
    reason why they differ; plus "device" (its name)."""
    ctx = context or default_context()
    if kernel not in _lib.KERNELS:
        raise ArgumentError("kernel must be one of %s, got %r" % (sorted(_lib.KERNELS), kernel))
    desc = _lib.AttentionDesc()
    _lib.fcl_attention_desc_init(byref(desc), batch, heads, heads_kv or heads, seqlen_q,
                                 seqlen_k or seqlen_q, head_dim, _dtype_arg(dtype),
                                 _lib.LAYOUT_BSHD)
    desc.causal = 1 if causal else 0
    p = _lib.Plan()
    with ctx._lock:
        status = _lib.fcl_plan_query(ctx.handle, byref(desc), _lib.KERNELS[kernel], byref(p))
    check(status, "fcl_plan_query", ctx.handle)
    kinds = {v: k for k, v in _lib.KERNELS.items()}
    out = {"device": ctx.info()["name"]}
    for name, _ in _lib.Plan._fields_:
        value = getattr(p, name)
        out[name] = value.decode(errors="replace") if isinstance(value, bytes) else value
    out["kernel"] = kinds.get(out["kernel"], out["kernel"])
    out["dtype"] = DTYPE_NAMES.get(out["dtype"], out["dtype"])
    return out
