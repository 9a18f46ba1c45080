"""PyTorch CPU tensors: attention as an autograd Function, gradients against
the float64 reference and against PyTorch's own autograd of a float64
attention written with its operators."""
import math
import os

import numpy as np
import pytest

import flashcl
from reference import assert_close, forward, rand

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed (tools/deps.sh test installs Debian's "
    "python3-torch); the autograd Function is untested here")


def sdpa64(q, k, v, causal, scale):
    """float64 attention from PyTorch's operators: (B, S, H, d) in and out.
    torch.nn.functional.scaled_dot_product_attention where it exists (2.0+)."""
    qh, kh, vh = (x.transpose(1, 2).double() for x in (q, k, v))
    g = qh.shape[1] // kh.shape[1]
    kh, vh = kh.repeat_interleave(g, 1), vh.repeat_interleave(g, 1)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None and (causal is False or q.shape[1] == k.shape[1]):
        return sdpa(qh, kh, vh, is_causal=causal, scale=scale).transpose(1, 2)
    s = scale * qh @ kh.transpose(-1, -2)
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        i = torch.arange(sq)[:, None] + (sk - sq)
        s = s.masked_fill(torch.arange(sk)[None, :] > i, float("-inf"))
    return (torch.softmax(s, -1) @ vh).transpose(1, 2)


@pytest.mark.parametrize("causal,dv", [(False, 32), (True, 32), (True, 24)])
def test_autograd_gradients(rng, causal, dv):
    # dv: V's head_dim_v (24: narrower than Q and K's 32, O and dV follow it)
    b, sq, sk, hq, hkv, d = 2, 29, 29, 4, 2, 32
    q, k, v = (torch.from_numpy(rand(rng, s, "fp32")).requires_grad_()
               for s in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, dv)))
    w = torch.from_numpy(rand(rng, (b, sq, hq, dv), "fp32"))
    o = flashcl.attention(q, k, v, causal=causal)
    assert isinstance(o, torch.Tensor) and o.requires_grad
    (o * w).sum().backward()
    # 1. the float64 reference with the tolerance rule
    arrays = [x.detach().numpy() for x in (q, k, v)]
    o64, _, g64, mags = forward(*arrays, causal=causal, dout=w.numpy())
    o32, _, g32, _ = forward(*arrays, np.float32, causal=causal, dout=w.numpy())
    assert_close("O", o.detach().numpy(), o32, o64, "fp32", d + sk, 2)
    for name, t, lowp, ref, mag in zip("QKV", (q, k, v), g32, g64, mags):
        assert_close("d" + name, t.grad.numpy(), lowp, ref, "fp32", d + max(sq, sk), 3, mag)
    # 2. PyTorch's autograd of the same attention in float64
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    (sdpa64(q64, k64, v64, causal, 1 / math.sqrt(d)) * w.double()).sum().backward()
    for name, ours, ref in zip("QKV", (q, k, v), (q64, k64, v64)):
        err = (ours.grad.double() - ref.grad).abs().max().item()
        assert err <= 1e-5 * max(ref.grad.abs().max().item(), 1), (name, err)


def sink_attention64(q, k, v, sinks, scale):
    """float64 causal attention with sinks from PyTorch's operators: the sink
    is one more column of the softmax, dropped before P V."""
    qh, kh, vh = (x.transpose(1, 2).double() for x in (q, k, v))
    g = qh.shape[1] // kh.shape[1]
    kh, vh = kh.repeat_interleave(g, 1), vh.repeat_interleave(g, 1)
    s = scale * qh @ kh.transpose(-1, -2)
    sq, sk = q.shape[1], k.shape[1]
    s = s.masked_fill(torch.arange(sk)[None, :] > torch.arange(sq)[:, None] + (sk - sq),
                      float("-inf"))
    col = sinks.double().view(1, -1, 1, 1).expand(s.shape[0], -1, sq, 1)
    p = torch.softmax(torch.cat([s, col], -1), -1)[..., :-1]
    return (p @ vh).transpose(1, 2)


def test_autograd_sinks(rng):
    # the autograd Function gives the sinks' gradient too
    b, sq, sk, hq, hkv, d = 2, 21, 29, 4, 2, 32
    q, k, v = (torch.from_numpy(rand(rng, s, "fp32")).requires_grad_()
               for s in ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d)))
    sinks = torch.from_numpy((np.log(sk) + rng.standard_normal(hq)).astype(np.float32))
    sinks.requires_grad_()
    w = torch.from_numpy(rand(rng, (b, sq, hq, d), "fp32"))
    (flashcl.attention(q, k, v, causal=True, sinks=sinks) * w).sum().backward()
    arrays = [x.detach().numpy() for x in (q, k, v)]
    _, _, g64, mags = forward(*arrays, causal=True, dout=w.numpy(), sinks=sinks.detach().numpy())
    _, _, g32, _ = forward(*arrays, np.float32, causal=True, dout=w.numpy(),
                           sinks=sinks.detach().numpy())
    for name, t, lowp, ref, mag in zip(("dQ", "dK", "dV", "dsinks"), (q, k, v, sinks), g32,
                                       g64, mags):
        assert_close(name, t.grad.numpy(), lowp, ref, "fp32", d + b * sq, 3, mag)
    q64, k64, v64, s64 = (x.detach().double().requires_grad_() for x in (q, k, v, sinks))
    (sink_attention64(q64, k64, v64, s64, 1 / math.sqrt(d)) * w.double()).sum().backward()
    for name, ours, ref in zip(("q", "k", "v", "sinks"), (q, k, v, sinks), (q64, k64, v64, s64)):
        err = (ours.grad.double() - ref.grad).abs().max().item()
        assert err <= 1e-5 * max(ref.grad.abs().max().item(), 1), (name, err)


def test_bf16_tensors_and_lse(rng):
    q, k, v = (torch.randn(1, 24, 2, 16, dtype=torch.bfloat16) for _ in range(3))
    o, lse = flashcl.attention(q, k, v, return_lse=True)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32 and lse.shape == (1, 2, 24)
    as_bits = [x.view(torch.int16).numpy().view(np.uint16) for x in (q, k, v)]
    assert np.array_equal(o.view(torch.int16).numpy().view(np.uint16),
                          flashcl.attention(*as_bits))


def test_varlen_autograd_matches_numpy_backward(rng):
    cu = np.array([0, 7, 19], np.int32)
    q, k, v = (torch.from_numpy(rand(rng, (19, 2, 16), "fp16")).requires_grad_()
               for _ in range(3))
    o = flashcl.attention_varlen(q, k, v, torch.from_numpy(cu), torch.from_numpy(cu),
                                 causal=True)
    o.float().sum().backward()
    arrays = [x.detach().numpy() for x in (q, k, v)]
    o_np, lse = flashcl.attention_varlen(*arrays, cu, cu, causal=True, return_lse=True)
    grads = flashcl.attention_varlen_backward(np.ones_like(o_np), *arrays, o_np, lse, cu, cu,
                                              causal=True)
    assert np.array_equal(o.detach().numpy(), o_np)
    for t, g in zip((q, k, v), grads):
        assert np.array_equal(t.grad.numpy(), g)


def test_tensors_elsewhere_or_of_other_types_are_refused():
    x = torch.zeros(1, 4, 1, 8, dtype=torch.float64)
    with pytest.raises(flashcl.ArgumentError, match="float32"):
        flashcl.attention(x, x, x)
    if os.environ.get("FLASHCL_TEST_CUDA") == "1" and torch.cuda.is_available():
        y = torch.zeros(1, 4, 1, 8, device="cuda")
        with pytest.raises(flashcl.ArgumentError, match="CPU"):
            flashcl.attention(y, y, y)
