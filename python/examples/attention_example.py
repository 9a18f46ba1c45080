#!/usr/bin/env python3
"""flashcl from Python: the device and its tiling, causal attention forward
and backward on NumPy fp16 arrays checked against a plain NumPy float64
attention, and (when PyTorch is installed) loss.backward() through it.

    python3 python/examples/attention_example.py        # default device
    FLASHCL_DEVICE=1:0 python3 python/examples/attention_example.py
"""
import numpy as np

import flashcl


def numpy_attention(q, k, v):
    """Causal softmax(q k^T / sqrt(d)) v in float64, (batch, seq, heads, dim)."""
    q, k, v = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3)


def main():
    ctx = flashcl.default_context()
    info = ctx.info()
    print("device: %s (%s)" % (info["name"], info["platform_name"]))
    plan = flashcl.plan(64, dtype="fp16", seqlen_q=512)
    print("SRAM: reported %d B, usable %d B; forward tile %d x %d (paper %d x %d), %s"
          % (plan["local_mem_reported"], plan["local_mem_usable"], plan["br"], plan["bc"],
             plan["paper_br"], plan["paper_bc"], plan["variant"]))

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 512, 8, 64)).astype(np.float16) for _ in range(3))
    o, lse = flashcl.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = flashcl.attention_backward(np.ones_like(o), q, k, v, o, lse, causal=True)
    ref = numpy_attention(q, k, v)
    err = np.abs(o.astype(np.float64) - ref).max()
    # storing O in fp16 alone costs up to 2^-11 |O|; allow twice that
    bound = 2 * 2.0 ** -11 * np.abs(ref).max()
    print("forward fp16: max |O - O_float64| = %.2e (bound %.2e)" % (err, bound))
    print("backward: dq %s, dk %s, dv %s" % (dq.shape, dk.shape, dv.shape))

    try:
        import torch
    except ImportError:
        print("PyTorch not installed: autograd part skipped")
        return 0 if err <= bound else 1
    qt, kt, vt = (torch.from_numpy(x.astype(np.float32)).requires_grad_() for x in (q, k, v))
    flashcl.attention(qt, kt, vt, causal=True).sum().backward()
    print("torch: loss.backward() gave dq with |dq| max %.3f" % qt.grad.abs().max().item())
    return 0 if err <= bound else 1


if __name__ == "__main__":
    raise SystemExit(main())
