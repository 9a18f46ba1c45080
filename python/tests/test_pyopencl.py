"""PyOpenCL arrays: the library's cl_mem calls on the arrays' own buffers,
through a context wrapping the PyOpenCL queue (Context.from_pyopencl)."""
import numpy as np
import pytest

import flashcl
from reference import rand

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


def queue_keeping_context(device):
    """A queue on a new context, the Context object kept with it (as
    queue.keep).  OpenCL says a queue retains its context, and PoCL and Mesa
    keep it; Intel's CPU runtime (2026.22.10) frees the context once PyOpenCL
    releases the Context object although the queue still holds it, and then
    every call on the queue fails with CL_INVALID_CONTEXT (NOTES.md, "Intel's
    OpenCL CPU runtime")."""
    context = cl.Context([device])
    queue = cl.CommandQueue(context)
    queue.keep = context
    return queue


@pytest.fixture(scope="module")
def queue(ctx):
    # the device the default context uses (FLASHCL_DEVICE or the first GPU, else any)
    want = ctx.info()["name"]
    for platform in cl.get_platforms():
        for device in platform.get_devices():
            if device.name == want:
                return queue_keeping_context(device)
    pytest.fail("PyOpenCL does not see the device %r" % want)


@pytest.fixture(scope="module")
def wrapped(queue):
    return flashcl.Context.from_pyopencl(queue)


def test_context_wraps_the_pyopencl_objects(wrapped, queue):
    assert wrapped.cl_context_ptr() == queue.context.int_ptr


def test_forward_backward_on_device_arrays_match_host(rng, wrapped, queue):
    q, dout = (rand(rng, (2, 40, 4, 32), "fp16") for _ in range(2))
    k, v = (rand(rng, (2, 52, 2, 32), "fp16") for _ in range(2))
    # q as a window of a larger device buffer: a non-zero offset, row gaps
    big = rand(rng, (2, 42, 4, 40), "fp16")
    big[:, 1:41, :, 8:40] = q
    big_d = cla.to_device(queue, big)
    q_d = big_d[:, 1:41, :, 8:40]
    assert q_d.offset > 0 and not q_d.flags.c_contiguous
    k_d, v_d, dout_d = (cla.to_device(queue, x) for x in (k, v, dout))
    wrapped.memory_stats()
    o_d, lse_d = flashcl.attention(q_d, k_d, v_d, causal=True, return_lse=True, context=wrapped)
    assert isinstance(o_d, cla.Array) and o_d.context == queue.context
    grads_d = flashcl.attention_backward(dout_d, q_d, k_d, v_d, o_d, lse_d, causal=True,
                                         context=wrapped)
    o, lse = flashcl.attention(q, k, v, causal=True, return_lse=True)
    grads = flashcl.attention_backward(dout, q, k, v, o, lse, causal=True)
    # the same kernels on the same device: bitwise the same results
    assert np.array_equal(o_d.get(), o) and np.array_equal(lse_d.get(), lse)
    for gd, g in zip(grads_d, grads):
        assert np.array_equal(gd.get(), g)


def test_out_on_device_receives_the_result(rng, wrapped, queue):
    q, k, v = (rand(rng, (1, 30, 2, 32), "fp32") for _ in range(3))
    q_d, k_d, v_d = (cla.to_device(queue, x) for x in (q, k, v))
    out_d = cla.to_device(queue, np.full(q.shape, 5.0, np.float32))
    got = flashcl.attention(q_d, k_d, v_d, causal=True, context=wrapped, out=out_d)
    assert got is out_d
    assert np.array_equal(out_d.get(), flashcl.attention(q, k, v, causal=True))
    # a host array for device inputs, and out over q's own buffer: refused
    with pytest.raises(flashcl.ArgumentError):
        flashcl.attention(q_d, k_d, v_d, context=wrapped, out=np.empty_like(q))
    with pytest.raises(flashcl.Error) as e:
        flashcl.attention(q_d, k_d, v_d, context=wrapped, out=q_d)
    assert e.value.name == "FCL_ERROR_BUFFER_ALIASING"
    assert np.array_equal(q_d.get(), q)


def test_no_copies_of_the_tensors(rng, wrapped, queue):
    # the library allocates no buffer as large as a tensor on the cl_mem path
    # (the host path must, for q, k, v and o)
    q, k, v = (cla.to_device(queue, rand(rng, (1, 256, 2, 64), "fp32")) for _ in range(3))
    flashcl.attention(q, k, v, context=wrapped).get()
    before = wrapped.memory_stats()
    flashcl.attention(q, k, v, context=wrapped).get()
    after = wrapped.memory_stats()
    grown = after["allocations"] - before["allocations"]
    assert grown == 0 or after["largest_bytes"] < q.nbytes, (before, after)
    # the same measure sees the host path's copies
    host = flashcl.Context()
    flashcl.attention(q.get(), k.get(), v.get(), context=host)
    assert host.memory_stats()["largest_bytes"] >= q.nbytes


def test_kvcache_appends_into_the_device_cache(rng, wrapped, queue):
    kc, vc = (rand(rng, (2, 16, 1, 32), "fp32") for _ in range(2))
    knew, vnew = (rand(rng, (2, 2, 1, 32), "fp32") for _ in range(2))
    q = rand(rng, (2, 1, 2, 32), "fp32")
    lens = np.array([3, 9], np.int32)
    dev = [cla.to_device(queue, x) for x in (q, kc, vc, knew, vnew, lens)]
    o_d = flashcl.attention_kvcache(*dev[:5], cache_seqlens=dev[5], context=wrapped)
    o = flashcl.attention_kvcache(q, kc, vc, knew, vnew, cache_seqlens=lens)
    assert np.array_equal(o_d.get(), o)
    assert np.array_equal(dev[1].get(), kc) and np.array_equal(dev[2].get(), vc)


def test_arrays_of_another_context_are_refused(rng, queue, wrapped):
    other = queue_keeping_context(queue.device)
    q, k, v = (cla.to_device(other, rand(rng, (1, 8, 1, 16), "fp32")) for _ in range(3))
    with pytest.raises(flashcl.Error) as e:
        flashcl.attention(q, k, v, context=wrapped)
    assert e.value.name == "FCL_ERROR_WRONG_CONTEXT"
    with pytest.raises(flashcl.ArgumentError, match="from_pyopencl"):
        flashcl.attention(q, k, v)
    with pytest.raises(flashcl.ArgumentError, match="mixed"):
        flashcl.attention(q, k.get(), v, context=wrapped)


def test_varlen_and_alibi_on_device_arrays_match_host(rng, wrapped, queue):
    cu = np.array([0, 5, 5, 21], np.int32)
    q, k, v = (rand(rng, (21, 2, 16), "fp32") for _ in range(3))
    slopes = np.array([0.5, 0.25], np.float32)
    dev = [cla.to_device(queue, x) for x in (q, k, v, cu, slopes)]
    with pytest.raises(flashcl.ArgumentError, match="max_seqlen"):
        flashcl.attention_varlen(*dev[:3], dev[3], dev[3], context=wrapped)
    o_d = flashcl.attention_varlen(*dev[:3], dev[3], dev[3], 16, 16, causal=True,
                                   alibi_slopes=dev[4], context=wrapped)
    o = flashcl.attention_varlen(q, k, v, cu, cu, causal=True, alibi_slopes=slopes)
    assert np.array_equal(o_d.get(), o)
