"""flashcl: portable FlashAttention on OpenCL, from Python.

The thinnest faithful binding of the C library (include/flashcl.h) through
ctypes, in FlashAttention's (batch, seqlen, heads, head_dim) conventions:

    import numpy as np, flashcl
    q, k, v = (np.random.randn(2, 128, 8, 64).astype(np.float32) for _ in range(3))
    o, lse = flashcl.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = flashcl.attention_backward(np.ones_like(o), q, k, v, o, lse, causal=True)

Arrays: NumPy (float32, float16, bfloat16 as uint16 bit patterns or
ml_dtypes.bfloat16), PyOpenCL arrays of a Context.from_pyopencl(queue)
(no copies), PyTorch CPU tensors (attention is differentiable).  Failures
raise flashcl.Error with the library's status name and message.
flashcl.check() tells whether flashcl is right on a device (flashcl-check).
"""
from ._lib import library_path
from ._errors import ArgumentError, Error
from ._context import Context, Device, default_context, devices
from ._attention import (attention, attention_backward, attention_varlen,
                         attention_varlen_backward, dropout_mask, plan)
from ._kvcache import attention_kvcache
from ._check import CheckResult, check
from ._bf16 import bf16_to_float32, float32_to_bf16
from . import _lib

__version__ = _lib.fcl_version_string().decode()

__all__ = ["Context", "Device", "Error", "ArgumentError", "attention", "attention_backward",
           "attention_varlen", "attention_varlen_backward", "attention_kvcache", "devices",
           "default_context", "dropout_mask", "plan", "bf16_to_float32", "float32_to_bf16",
           "library_path", "check", "CheckResult"]
