"""What the binding rejects before the C call, and the library's statuses
surfacing as flashcl.Error with their header names."""
import os
import re

import numpy as np
import pytest

import flashcl
from flashcl import _lib

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                      "flashcl.h")


def arrays(shape_q=(1, 8, 2, 16), shape_kv=(1, 8, 2, 16), dtype=np.float32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal(shape_q).astype(dtype),
            rng.standard_normal(shape_kv).astype(dtype),
            rng.standard_normal(shape_kv).astype(dtype))


@pytest.mark.parametrize("make, words", [
    (lambda: arrays((8, 2, 16)), "must be 4-D"),
    (lambda: arrays(shape_kv=(1, 8, 3, 16)), "multiple of"),
    (lambda: arrays(shape_kv=(2, 8, 2, 16)), "same batch"),
    (lambda: arrays(shape_kv=(1, 8, 2, 8)), "same head_dim"),
    (lambda: arrays(dtype=np.float64), "float32, float16, and bfloat16"),
    (lambda: (arrays()[0], arrays()[1].astype(np.float16), arrays()[2]), "all must match"),
    (lambda: (arrays()[0], arrays()[1], arrays()[2][:, :7]), "same shape"),
    (lambda: (arrays()[0][:, ::-1], *arrays()[1:]), "positive stride"),
    (lambda: (np.broadcast_to(arrays()[0][:, :1], (1, 8, 2, 16)), *arrays()[1:]),
     "positive stride"),
    (lambda: (arrays((1, 8, 2, 32))[0][..., ::2], *arrays()[1:]), "must be contiguous"),
    (lambda: (arrays()[0].tolist(), *arrays()[1:]), "must be a NumPy array"),
])
def test_bad_arrays_are_rejected_before_the_call(make, words):
    with pytest.raises(flashcl.ArgumentError, match=words) as e:
        flashcl.attention(*make())
    assert isinstance(e.value, flashcl.Error) and isinstance(e.value, ValueError)


def test_bad_options_are_rejected():
    q, k, v = arrays()
    with pytest.raises(flashcl.ArgumentError, match="window"):
        flashcl.attention(q, k, v, window=3)
    with pytest.raises(flashcl.ArgumentError, match="ALiBi|alibi"):
        flashcl.attention(q, k, v, alibi_slopes=np.ones(3, np.float32))
    o, lse = flashcl.attention(q, k, v, return_lse=True)
    with pytest.raises(flashcl.ArgumentError, match="LSE"):
        flashcl.attention_backward(o, q, k, v, o, lse[:, :1])


@pytest.mark.parametrize("call, name", [
    (lambda q, k, v: flashcl.attention(q, k, v, window=(-2, 0)), "FCL_ERROR_INVALID_VALUE"),
    (lambda q, k, v: flashcl.attention(q, k, v, dropout_p=1.5), "FCL_ERROR_INVALID_VALUE"),
    (lambda q, k, v: flashcl.attention(*arrays((1, 4, 1, 300), (1, 4, 1, 300))),
     "FCL_ERROR_HEAD_DIM_UNSUPPORTED"),
    (lambda q, k, v: flashcl.attention_varlen(
        q[0], k[0], v[0], np.array([0, 6, 4], np.int32), np.array([0, 4, 8], np.int32), 6, 4),
     "FCL_ERROR_INVALID_CU_SEQLENS"),
    (lambda q, k, v: flashcl.Context(device="9:9"), "FCL_ERROR_DEVICE_NOT_FOUND"),
    (lambda q, k, v: flashcl.Context(profile="no-such-gpu"), "FCL_ERROR_UNKNOWN_PROFILE"),
])
def test_library_statuses_raise_flashcl_error(call, name):
    with pytest.raises(flashcl.Error) as e:
        call(*arrays())
    err = e.value
    assert err.name == name and err.status == {v: k for k, v in _lib.STATUS_NAMES.items()}[name]
    assert err.message.startswith(_lib.fcl_status_string(err.status).decode())
    assert name in str(err)


def test_device_spec_is_checked():
    with pytest.raises(flashcl.ArgumentError, match="P:D"):
        flashcl.Context(device="first")


def test_status_names_match_the_header():
    text = open(HEADER).read()
    found = {int(v): "FCL_" + n for n, v in re.findall(r"X\((\w+), (\d+), \"", text)}
    assert found == _lib.STATUS_NAMES
