"""PyTorch CPU tensors: viewed as NumPy arrays (no copies; bfloat16 as its
16-bit patterns), and attention as a torch.autograd.Function whose backward
is the library's, so loss.backward() gives dQ, dK, dV."""
import numpy as np
import torch

from ._attention import run_backward, run_forward
from ._context import default_context
from ._errors import ArgumentError

_VIEWABLE = (torch.float32, torch.float16, torch.int32)


def to_numpy(t, name):
    """A NumPy view of a CPU tensor (None stays None)."""
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise ArgumentError("%s must be a torch.Tensor like q, not %s" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise ArgumentError("%s is on %s: flashcl takes PyTorch CPU tensors (its own device "
                            "buffers are PyOpenCL arrays)" % (name, t.device))
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype in _VIEWABLE:
        return t.numpy()
    raise ArgumentError("%s has dtype %s; flashcl takes float32, float16 and bfloat16"
                        % (name, t.dtype))


def from_numpy(a):
    """The tensor over a result array (bfloat16 for uint16 patterns)."""
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _numpy_args(call):
    return {n: (to_numpy(x, n) if isinstance(x, torch.Tensor) else x) for n, x in call.items()}


class AttentionFunction(torch.autograd.Function):
    """o, lse = AttentionFunction.apply(q, k, v, sinks, call): the forward
    keeps q, k, v, the sinks (None: none), o, lse; the backward runs
    fcl_attention_backward with the same options (call: the context, the
    options of _attention._opts and the other keyword arguments of the
    forward) and gives the sinks' gradient too.  lse is not differentiable."""

    @staticmethod
    def forward(fctx, q, k, v, sinks, call):
        ctx = call["context"]
        kwargs = _numpy_args(call["kwargs"])
        out, lse = run_forward(ctx, to_numpy(q, "q"), to_numpy(k, "k"), to_numpy(v, "v"),
                               call["opts"], return_lse=True, sinks=to_numpy(sinks, "sinks"),
                               **kwargs)
        o, lse_t = from_numpy(out), torch.from_numpy(lse)
        fctx.save_for_backward(q, k, v, sinks, o, lse_t)
        fctx.call = call
        fctx.mark_non_differentiable(lse_t)
        return o, lse_t

    @staticmethod
    def backward(fctx, dout, _dlse):
        q, k, v, sinks, o, lse = fctx.saved_tensors
        call = fctx.call
        # a gradient arriving with stride-0 axes (from .sum()) is made dense
        grads = run_backward(call["context"], to_numpy(dout.contiguous(), "dout"),
                             to_numpy(q, "q"), to_numpy(k, "k"), to_numpy(v, "v"),
                             to_numpy(o, "out"), to_numpy(lse, "lse"), call["opts"],
                             sinks=to_numpy(sinks, "sinks"), **_numpy_args(call["kwargs"]))
        dsinks = torch.from_numpy(grads[3]) if sinks is not None else None
        return from_numpy(grads[0]), from_numpy(grads[1]), from_numpy(grads[2]), dsinks, None


def attention(q, k, v, opts, *, return_lse, context, sinks=None, **kwargs):
    call = {"context": context or default_context(), "opts": opts, "kwargs": kwargs}
    o, lse = AttentionFunction.apply(q, k, v, sinks, call)
    return (o, lse) if return_lse else o


def backward(ctx, dout, q, k, v, out, lse, opts, **kwargs):
    grads = run_backward(ctx, to_numpy(dout, "dout"), to_numpy(q, "q"), to_numpy(k, "k"),
                         to_numpy(v, "v"), to_numpy(out, "out"), to_numpy(lse, "lse"), opts,
                         **_numpy_args(kwargs))
    return tuple(from_numpy(g) for g in grads[:3]) + tuple(torch.from_numpy(g) for g in grads[3:])


def kvcache(run, arrays, **kwargs):
    """The KV-cache call on tensors: the caches are updated in place."""
    out = run(**{n: (to_numpy(x, n) if isinstance(x, torch.Tensor) else x)
                 for n, x in arrays.items()}, **kwargs)
    if isinstance(out, tuple):
        return from_numpy(out[0]), torch.from_numpy(out[1])
    return from_numpy(out)
