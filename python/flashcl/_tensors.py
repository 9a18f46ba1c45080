"""Arrays as the C calls see them: a pointer (host) or cl_mem (PyOpenCL), a
storage type, and element strides that become an fcl_layout.  Nothing here
copies: a NumPy array is passed by its data pointer with its own strides, a
PyOpenCL array by its buffer, offset and strides."""
import ctypes

import numpy as np

from . import _lib
from ._errors import ArgumentError, check

HOST, CL = "NumPy", "PyOpenCL"

_FP32, _FP16, _U16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint16)
DTYPE_NAMES = {_lib.DTYPE_FP32: "fp32", _lib.DTYPE_FP16: "fp16", _lib.DTYPE_BF16: "bf16"}


_CODES = {_FP32: _lib.DTYPE_FP32, _FP16: _lib.DTYPE_FP16, _U16: _lib.DTYPE_BF16}


def dtype_code(dt):
    """fcl_dtype of a NumPy dtype: float32, float16, and bfloat16 as uint16
    bit patterns or ml_dtypes.bfloat16; None for anything else."""
    code = _CODES.get(dt)
    if code is None and dt.name == "bfloat16":
        code = _lib.DTYPE_BF16
    return code


def is_pyopencl(x):
    return type(x).__module__.startswith("pyopencl")


class Operand:
    """One array of a call."""
    __slots__ = ("name", "array", "kind", "ptr", "dtype", "code", "shape", "strides", "offset")

    def __init__(self, x, name):
        self.name = name
        self.array = x
        if isinstance(x, np.ndarray):
            self.kind = HOST
            self.ptr = x.ctypes.data
            self.offset = 0
        elif is_pyopencl(x) and hasattr(x, "base_data"):
            self.kind = CL
            self.ptr = x.base_data.int_ptr
            if x.offset % x.dtype.itemsize:
                raise ArgumentError("%s: its offset (%d bytes) is not a whole number of "
                                    "elements" % (name, x.offset))
            self.offset = x.offset // x.dtype.itemsize
        else:
            raise ArgumentError("%s must be a NumPy array, a PyOpenCL array or a PyTorch CPU "
                                "tensor, not %s" % (name, type(x).__name__))
        self.dtype = x.dtype
        self.code = dtype_code(x.dtype)
        self.shape = x.shape
        item = x.dtype.itemsize
        strides = []
        for size, st in zip(x.shape, x.strides):
            if size <= 1:
                strides.append(0)           # never stepped over: any stride is the same
            elif st <= 0 or st % item:
                raise ArgumentError(
                    "%s: strides %s (bytes) cannot be described to flashcl: every axis "
                    "needs a positive stride that is a whole number of elements "
                    "(make the array contiguous first)" % (name, x.strides))
            else:
                strides.append(st // item)
        self.strides = strides

    def expect(self, ndim, what):
        if len(self.shape) != ndim:
            raise ArgumentError("%s must be %d-D %s, got shape %s"
                                % (self.name, ndim, what, tuple(self.shape)))
        if self.strides and self.strides[-1] > 1:
            raise ArgumentError("%s: the head_dim axis (the last) must be contiguous, got "
                                "strides %s (bytes)" % (self.name, self.array.strides))

    def layout(self, into):
        """Writes this (batch, seq, heads, dim) or packed (tokens, heads, dim)
        array's fcl_layout into `into` (element strides, offset)."""
        st = self.strides
        into.offset = self.offset
        if len(st) == 4:
            into.stride_batch, into.stride_seq, into.stride_head = st[0], st[1], st[2]
        else:
            into.stride_batch, into.stride_seq, into.stride_head = 0, st[0], st[1]

    def dense(self, shape, dtype, what):
        """Checks a small array the library reads whole (slopes, lengths,
        LSE): exactly this shape and dtype, contiguous."""
        if tuple(self.shape) != tuple(shape) or self.dtype != np.dtype(dtype):
            raise ArgumentError("%s (%s) must be %s of shape %s, got %s of shape %s"
                                % (self.name, what, np.dtype(dtype).name, tuple(shape),
                                   self.dtype.name, tuple(self.shape)))
        expect = 1
        for size, st in reversed(list(zip(self.shape, self.strides))):
            if size > 1 and st != expect:
                raise ArgumentError("%s (%s) must be contiguous" % (self.name, what))
            expect *= size


def operands(ctx, **arrays):
    """Operands of one call (None entries skipped); all NumPy or all PyOpenCL
    arrays, PyOpenCL only with a context wrapping a PyOpenCL queue."""
    ops, kind = {}, None
    for name, x in arrays.items():
        if x is None:
            continue
        op = ops[name] = Operand(x, name)
        if kind is None:
            kind = op.kind
        elif op.kind != kind:
            raise ArgumentError("mixed NumPy and PyOpenCL arrays in one call: %s" % ", ".join(
                "%s %s" % (n, o.kind) for n, o in ops.items()))
    if kind == CL and ctx.pyopencl_queue is None:
        raise ArgumentError("PyOpenCL arrays need context=flashcl.Context.from_pyopencl(queue) "
                            "on their own OpenCL context")
    return ops, kind or HOST


def same_dtype(ops, names):
    first = ops[names[0]]
    if first.code is None:
        raise ArgumentError("%s has dtype %s; flashcl takes float32, float16, and bfloat16 "
                            "(as uint16 bit patterns or ml_dtypes.bfloat16)"
                            % (first.name, first.dtype))
    for n in names[1:]:
        if n in ops and ops[n].dtype != first.dtype:
            raise ArgumentError("%s has dtype %s but %s has %s: all must match"
                                % (n, ops[n].dtype, first.name, first.dtype))
    return first.code


def empty(kind, ctx, shape, dtype):
    """A new contiguous output array of the call's kind."""
    if kind == HOST:
        return np.empty(shape, dtype)
    import pyopencl.array as cla
    return cla.empty(ctx.pyopencl_queue, shape, dtype)


def wait_list(ops):
    """The events PyOpenCL arrays carry (their pending writes), as a C array."""
    events = [e for op in ops for e in getattr(op.array, "events", ())]
    if not events:
        return 0, None
    return len(events), (_lib.cl_handle * len(events))(*[e.int_ptr for e in events])


def attach_event(event, arrays):
    """Hands the call's completion event to the written PyOpenCL arrays."""
    import pyopencl as cl
    ev = cl.Event.from_int_ptr(event.value, retain=False)
    for a in arrays:
        a.add_event(ev)


def invoke(ctx, kind, inputs, host_fn, cl_fn, args, written, what):
    """One C call under the context's lock: host_fn(handle, *args) for NumPy
    arrays; for PyOpenCL arrays cl_fn(handle, *args, waits..., &event) after
    the inputs' events, the event then handed to the `written` arrays."""
    h = ctx.handle
    with ctx._lock:
        if kind == CL:
            n, waits = wait_list(inputs)
            event = _lib.cl_handle()
            status = cl_fn(h, *args, n, waits, ctypes.byref(event))
        else:
            status = host_fn(h, *args)
    check(status, what, h)
    if kind == CL:
        attach_event(event, [a for a in written if a is not None])
