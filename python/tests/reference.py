"""The float64 reference the Python tests compare with, and the tolerance
rule of tests/test_support.h.

Attention is computed straight from its definition in include/flashcl.h
(scores, softcap, ALiBi, the window mask, softmax, dropout, V), forward and
backward, in any NumPy float type: float64 is the reference, float32 with
the outputs rounded to the storage type is the "low-precision reference"
whose error says what the storage type alone explains.

Tolerance (tests/test_support.h, the same rule as the C tests), err = max |x - ref64|:
    err(ours) <= factor * err(lowp) + eps,
    eps = u * max|ref64| + u32 * sqrt(n) * max(max|ref64|, M)
u: the storage type's unit roundoff (2^-24 fp32, 2^-11 fp16, 2^-8 bf16),
u32 = 2^-24 for the fp32 arithmetic, n the longest sum behind an output
(head_dim + seqlen_k forward, head_dim + max(seqlen_q, seqlen_k) backward),
M (gradients only) the largest sum of |terms| behind one element, factor 2
forward and 3 for gradients.  The lowp reference stores inputs and outputs in
the same type and computes in fp32 in another order, so its error is what
the storage type explains; an indexing, masking or scaling bug costs orders
of magnitude more.  eps covers fp32 noise when the storage is fp32 itself
(two correct fp32 sums of n terms differ by ~sqrt(n) u32) and gradients that
cancel to ~0 (M).
"""
import numpy as np

import flashcl

U = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
U32 = 2.0 ** -24
STORAGE = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}


def store(x, dt):
    """float64 values rounded into the storage type's array."""
    if dt == "bf16":
        return flashcl.float32_to_bf16(np.asarray(x, np.float32))
    return np.asarray(x).astype(STORAGE[dt])


def load(a):
    """A stored array's values as float64."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return flashcl.bf16_to_float32(a).astype(np.float64)
    return a.astype(np.float64)


def rand(rng, shape, dt, scale=1.0):
    """Random normal values (never zeros), stored in dt."""
    return store(rng.standard_normal(shape) * scale, dt)


def _expand(x, hq):
    """(B, S, Hkv, d) -> (B, Hq, S, d), each K/V head repeated for its query heads."""
    return np.repeat(np.transpose(x, (0, 2, 1, 3)), hq // x.shape[2], axis=1)


def _mask(sq, sk, causal, window):
    wl, wr = window
    if causal:
        wr = 0
    i = np.arange(sq)[:, None] + (sk - sq)
    j = np.arange(sk)[None, :]
    ok = np.ones((sq, sk), bool)
    if wl >= 0:
        ok &= j >= i - wl
    if wr >= 0:
        ok &= j <= i + wr
    return ok, np.abs(i - j)


def forward(q, k, v, ft=np.float64, causal=False, scale=None, window=(-1, -1), softcap=0.0,
            alibi=None, dropout_p=0.0, keep=None, dout=None, sinks=None):
    """O (B, Sq, Hq, dv), LSE (B, Hq, Sq) and, given dout, (dq, dk, dv) and the
    magnitudes M of the gradients' terms, computed in float type ft from the
    stored q, k, v (v, O, dout and dv head_dim_v = v.shape[-1] wide, the scale
    from q's head_dim; q's array type names the storage type of O).  keep: the dropout mask (B, Hq, Sq, Sk) of 0/1.  sinks:
    (Hq,) logits in every row's denominator (flashcl.h, "Sinks"); then the
    gradients and magnitudes end with dsinks and its M."""
    dt = {np.dtype(t): n for n, t in STORAGE.items()}.get(np.asarray(q).dtype)
    q, k, v = (load(x).astype(ft) for x in (q, k, v))
    b, sq, hq, d = q.shape
    sk = k.shape[1]
    scale = ft(1.0 / np.sqrt(d)) if scale is None else ft(scale)
    qh = np.transpose(q, (0, 2, 1, 3))
    kh, vh = _expand(k, hq), _expand(v, hq)
    raw = scale * np.einsum("bhid,bhjd->bhij", qh, kh)
    s = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    ok, dist = _mask(sq, sk, causal, window)
    if alibi is not None:
        slopes = np.asarray(alibi, ft)
        slopes = slopes[None, :, None, None] if slopes.ndim == 1 else slopes[:, :, None, None]
        s = s - slopes * dist.astype(ft)
    s = np.where(ok, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    sink = None if sinks is None else np.asarray(sinks, ft)[None, :, None, None]
    if sink is not None:
        m = np.maximum(m, sink)
    seen = np.isfinite(m)
    e = np.where(ok, np.exp(s - np.where(seen, m, 0)), 0)
    tot = e.sum(-1, keepdims=True)
    if sink is not None:
        tot = tot + np.exp(sink - m)
    p = np.where(seen, e / np.where(seen, tot, 1), 0)
    lse = np.where(seen, np.log(np.where(seen, tot, 1)) + np.where(seen, m, 0), np.inf)[..., 0]
    drop = np.ones_like(p) if keep is None else keep.astype(ft) / ft(1 - dropout_p)
    pd = p * drop
    o = np.transpose(np.einsum("bhij,bhjd->bhid", pd, vh), (0, 2, 1, 3))
    if dout is None:
        return o, lse
    do = np.transpose(load(dout).astype(ft), (0, 2, 1, 3))
    # the backward is given O as stored: the low-precision pass takes its
    # delta = dO . O from O rounded to the storage type, as tests/reference.c does
    o_in = o if ft == np.float64 or dt is None else load(store(o, dt)).astype(ft)
    oh = np.transpose(o_in, (0, 2, 1, 3))
    dvh = np.einsum("bhij,bhid->bhjd", pd, do)
    dp = np.einsum("bhid,bhjd->bhij", do, vh) * drop
    delta = np.sum(do * oh, axis=-1, keepdims=True)
    ds = p * (dp - delta)
    if softcap > 0:
        ds = ds * (1 - np.tanh(raw / softcap) ** 2)
    dqh = scale * np.einsum("bhij,bhjd->bhid", ds, kh)
    dkh = scale * np.einsum("bhij,bhid->bhjd", ds, qh)
    g = hq // k.shape[2]

    def fold(x):  # (B, Hq, Sk, w) -> (B, Sk, Hkv, w), summed over each group
        x = x.reshape(b, hq // g, g, sk, x.shape[-1]).sum(2)
        return np.transpose(x, (0, 2, 1, 3))

    mags = (np.max(np.abs(scale) * np.einsum("bhij,bhjd->bhid", np.abs(ds), np.abs(kh))),
            np.max(np.abs(scale) * np.einsum("bhij,bhid->bhjd", np.abs(ds), np.abs(qh))),
            np.max(np.einsum("bhij,bhid->bhjd", np.abs(pd), np.abs(do))))
    grads = (np.transpose(dqh, (0, 2, 1, 3)), fold(dkh), fold(dvh))
    if sink is not None:  # dsinks_h = -sum over batch and rows of e^(sink - LSE) (dO . O)
        w = np.exp(sink - lse[..., None])
        grads += (-np.sum(w * delta, axis=(0, 2, 3)),)
        mags += (np.max(np.sum(w * np.sum(np.abs(do * oh), -1, keepdims=True), axis=(0, 2, 3))),)
    return o, lse, grads, mags


def assert_close(name, ours, lowp, ref, dt, n, factor, magnitude=0.0):
    """The tolerance rule above; ours and lowp as stored arrays or values."""
    ours, ref = load(ours), np.asarray(ref, np.float64)
    lowp = load(store(lowp, dt)) if dt != "fp32" else np.asarray(lowp, np.float64)
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(ours), finite), "%s: non-finite values differ" % name
    assert np.all(ours[~finite] == ref[~finite]), "%s: infinities differ" % name
    if not finite.any():
        return
    err = np.max(np.abs(ours[finite] - ref[finite]))
    err_lowp = np.max(np.abs(lowp[finite] - ref[finite]))
    big = np.max(np.abs(ref[finite]))
    tol = factor * err_lowp + U[dt] * big + U32 * np.sqrt(n) * max(big, magnitude)
    assert err <= tol, "%s (%s): error %.3g > tolerance %.3g (lowp reference %.3g)" % (
        name, dt, err, tol, err_lowp)
