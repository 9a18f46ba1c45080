"""Contexts and devices: flashcl.Context, flashcl.devices()."""
import ctypes
import threading
from collections import namedtuple

from . import _lib
from ._errors import ArgumentError, check

Device = namedtuple("Device", "platform_index device_index type platform_name device_name")
Device.spec = property(lambda d: "%d:%d" % (d.platform_index, d.device_index))
Device.__doc__ = ("An OpenCL device as fcl_list_devices lists it; .spec is its \"P:D\" "
                  "string for Context(device=...) and FLASHCL_DEVICE.")

_DEVICE_TYPES = {1 << 1: "cpu", 1 << 2: "gpu", 1 << 3: "accelerator", 1 << 4: "custom"}


def devices():
    """Every OpenCL device of every platform, in platform order (a list of Device)."""
    count = ctypes.c_size_t(0)
    check(_lib.fcl_list_devices(None, 0, ctypes.byref(count)), "fcl_list_devices")
    refs = (_lib.DeviceRef * max(count.value, 1))()
    check(_lib.fcl_list_devices(refs, count.value, ctypes.byref(count)), "fcl_list_devices")
    return [Device(r.platform_index, r.device_index,
                   _DEVICE_TYPES.get(r.type & 0x1E, "other"),
                   r.platform_name.decode(errors="replace"),
                   r.device_name.decode(errors="replace")) for r in refs[:count.value]]


def _device_indices(device):
    if device is None:
        return -1, -1                       # FLASHCL_DEVICE, else the first GPU, else any
    if isinstance(device, Device):
        return device.platform_index, device.device_index
    if isinstance(device, str):
        parts = device.split(":")
        if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
        raise ArgumentError("device must look like \"P:D\" (platform:device), got %r" % device)
    if isinstance(device, tuple) and len(device) == 2:
        return int(device[0]), int(device[1])
    raise ArgumentError("device must be None, \"P:D\", (P, D) or a flashcl.Device, got %r"
                        % (device,))


class Context:
    """One flashcl context: an OpenCL device, its queue, its compiled kernels.

    Context(device=None, *, profile=None, portable_only=False, disk_cache=True,
            cache_dir=None)
    device: None (FLASHCL_DEVICE, else the first GPU, else the first device),
    "P:D", (P, D) or an entry of flashcl.devices().  The other options are
    fcl_context_options' fields of the same names.  Calls on one context are
    serialised by a lock (the library allows one thread per context at a
    time); use one context per thread for parallel work.

    Context.from_pyopencl(queue) wraps a PyOpenCL queue instead, so that
    PyOpenCL arrays of that queue's context are used with no copies."""

    def __init__(self, device=None, *, profile=None, portable_only=False, disk_cache=True,
                 cache_dir=None, _wrap=None):
        self._handle = None
        self._lock = threading.Lock()
        self.pyopencl_queue = None
        opts = _lib.ContextOptions()
        _lib.fcl_context_options_init(ctypes.byref(opts))
        opts.platform_index, opts.device_index = _device_indices(device)
        opts.profile = profile.encode() if profile else None
        opts.portable_only = 1 if portable_only else 0
        opts.disk_cache = 1 if disk_cache else 0
        opts.cache_dir = cache_dir.encode() if cache_dir else None
        handle = ctypes.c_void_p()
        if _wrap is None:
            check(_lib.fcl_context_create(ctypes.byref(opts), ctypes.byref(handle)),
                  "fcl_context_create")
        else:
            queue = _wrap
            check(_lib.fcl_context_create_from_cl(queue.context.int_ptr, queue.int_ptr,
                                                  queue.device.int_ptr, ctypes.byref(opts),
                                                  ctypes.byref(handle)),
                  "fcl_context_create_from_cl")
            self.pyopencl_queue = queue
        self._handle = handle.value
        self._destroy = _lib.fcl_context_destroy

    @classmethod
    def from_pyopencl(cls, queue, **options):
        """A context on a PyOpenCL CommandQueue's own context, device and
        queue (fcl_context_create_from_cl; the objects are retained, nothing
        is copied).  PyOpenCL arrays of that context can then be passed to
        every call; work is enqueued on `queue`, after the events the input
        arrays carry, and the outputs carry the call's event."""
        return cls(_wrap=queue, **options)

    def close(self):
        """Releases the context now (also done when it is garbage-collected)."""
        if self._handle:
            with self._lock:
                self._destroy(self._handle)
                self._handle = None

    def __del__(self):
        if getattr(self, "_handle", None):
            self._destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self):
        if not self._handle:
            raise ArgumentError("the context was closed")
        return self._handle

    def info(self):
        """The device probe (fcl_device_info) as a dict; local_mem_reported /
        local_mem_usable are the device's on-chip memory ("SRAM") in bytes."""
        info = _lib.DeviceInfo()
        check(_lib.fcl_context_device_info(self.handle, ctypes.byref(info)),
              "fcl_context_device_info")
        out = {}
        for name, _ in _lib.DeviceInfo._fields_:
            value = getattr(info, name)
            if isinstance(value, bytes):
                value = value.decode(errors="replace")
            elif name == "max_work_item_sizes":
                value = tuple(value)
            out[name] = value
        return out

    def cl_context_ptr(self):
        """The cl_context this context uses, as an integer (int_ptr)."""
        return _lib.fcl_context_cl_context(self.handle)

    def memory_stats(self):
        """fcl_context_memory_stats as a dict (the library's own buffers)."""
        stats = _lib.MemoryStats()
        check(_lib.fcl_context_memory_stats(self.handle, ctypes.byref(stats)),
              "fcl_context_memory_stats")
        return {name: getattr(stats, name) for name, _ in _lib.MemoryStats._fields_}

    def __repr__(self):
        if not self._handle:
            return "<flashcl.Context closed>"
        return "<flashcl.Context on %s>" % self.info()["name"]


_default = None
_default_lock = threading.Lock()


def default_context():
    """The context calls use when none is given: created on first use on the
    default device (FLASHCL_DEVICE, else the first GPU, else any device)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Context()
    return _default
