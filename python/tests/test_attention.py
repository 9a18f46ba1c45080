"""Forward, backward and packed sequences on NumPy arrays against the
float64 reference (reference.py), in every storage type and variant."""
import sys
import threading

import numpy as np
import pytest

import flashcl
from reference import U, assert_close, forward, load, rand, store

DTYPES = ["fp32", "fp16", "bf16"]


def check(rng, dt, b=2, sq=37, sk=45, hq=4, hkv=2, d=32, dv=None, backward=True,
          softmax_scale=None, alibi=None, arrays=None, sinks=None, **opts):
    """Runs attention (and its backward) and compares every output; dv: V's
    head_dim_v (None: d)."""
    q, k, v = arrays or (rand(rng, (b, sq, hq, d), dt), rand(rng, (b, sk, hkv, d), dt),
                         rand(rng, (b, sk, hkv, dv or d), dt))
    b, sq, hq, d = q.shape
    sk, dv = k.shape[1], v.shape[3]
    dout = rand(rng, (b, sq, hq, dv), dt)
    keep = None
    if opts.get("dropout_p", 0) > 0:
        keep = flashcl.dropout_mask(b, hq, sq, sk, opts["dropout_p"], opts.get("seed", 0))
    call = dict(softmax_scale=softmax_scale, alibi_slopes=alibi, sinks=sinks, **opts)
    o, lse = flashcl.attention(q, k, v, return_lse=True, **call)
    assert o.dtype == q.dtype and o.shape == (b, sq, hq, dv) and lse.shape == (b, hq, sq)
    ref_opts = dict(causal=opts.get("causal", False), scale=softmax_scale,
                    window=opts.get("window", (-1, -1)), softcap=opts.get("softcap", 0.0),
                    alibi=alibi, dropout_p=opts.get("dropout_p", 0.0), keep=keep, dout=dout,
                    sinks=sinks)
    o64, lse64, g64, mags = forward(q, k, v, np.float64, **ref_opts)
    o32, lse32, g32, _ = forward(q, k, v, np.float32, **ref_opts)
    assert_close("O", o, o32, o64, dt, d + sk, 2)
    assert_close("LSE", lse, lse32, lse64, "fp32", d + sk, 2)
    if backward:
        grads = flashcl.attention_backward(dout, q, k, v, o, lse, **call)
        assert len(grads) == (3 if sinks is None else 4)
        for name, ours, lowp, ref, mag, like in zip(("dQ", "dK", "dV"), grads, g32, g64,
                                                    mags, (q, k, v)):
            assert ours.dtype == q.dtype and ours.shape == like.shape
            assert_close(name, ours, lowp, ref, dt, d + max(sq, sk), 3, mag)
        if sinks is not None:  # fp32, made of O: the storage type's rounding
            assert grads[3].dtype == np.float32 and grads[3].shape == (hq,)
            assert_close("dsinks", grads[3], g32[3], g64[3], dt, b * sq + d, 3, mags[3])
    return o


@pytest.mark.parametrize("dt", DTYPES)
def test_plain_every_dtype(rng, dt):
    check(rng, dt)


def test_causal_with_fully_masked_rows(rng):
    # seqlen_q > seqlen_k: the first rows see no key (O = 0, LSE = +inf)
    o = check(rng, "fp16", sq=45, sk=20, causal=True)
    assert np.all(load(o)[:, :5] == 0)


def test_every_variant_together(rng):
    b, hq = 2, 4
    slopes = (2.0 ** -np.arange(1, b * hq + 1, dtype=np.float32)).reshape(b, hq)
    check(rng, "fp32", b=b, hq=hq, window=(9, 3), softcap=4.0, alibi=slopes, dropout_p=0.25,
          seed=1234, softmax_scale=0.3)


@pytest.mark.parametrize("dt", DTYPES)
def test_sinks(rng, dt):
    # gpt-oss's sinks: about each row's log-sum-exp, so they take a fair share
    sinks = (np.log(45) + rng.standard_normal(4)).astype(np.float32)
    check(rng, dt, sinks=sinks, causal=True, window=(20, 0))
    # rows that see no key: O = 0, LSE = the sink
    o, lse = flashcl.attention(rand(rng, (1, 9, 4, 16), dt), rand(rng, (1, 4, 2, 16), dt),
                               rand(rng, (1, 4, 2, 16), dt), causal=True, sinks=sinks,
                               return_lse=True)
    assert np.all(load(o)[:, :5] == 0) and np.all(lse[0, :, :5] == sinks[:, None])


@pytest.mark.parametrize("dt", DTYPES)
def test_value_head_dim_deepseek_192_128(rng, dt):
    # V, O, dO and dV narrower than Q and K (head_dim_v), with GQA and causal
    check(rng, dt, sq=33, sk=40, d=192, dv=128, causal=True)


def test_value_head_dim_with_variants_and_out(rng):
    o = check(rng, "fp32", d=48, dv=24, window=(7, 2), softcap=3.0, softmax_scale=0.2)
    b, sq, hq, _ = o.shape
    q = rand(rng, (b, sq, hq, 48), "fp32")
    k, v = rand(rng, (b, 45, 2, 48), "fp32"), rand(rng, (b, 45, 2, 24), "fp32")
    out = np.full((b, sq, hq, 24), 5.0, np.float32)
    assert flashcl.attention(q, k, v, out=out) is out
    assert np.array_equal(out, flashcl.attention(q, k, v))
    with pytest.raises(flashcl.ArgumentError):  # O is head_dim_v wide, not head_dim
        flashcl.attention(q, k, v, out=np.zeros(q.shape, np.float32))


def test_value_head_dim_refused(rng):
    q, k = rand(rng, (1, 8, 2, 16), "fp32"), rand(rng, (1, 8, 2, 16), "fp32")
    with pytest.raises(flashcl.Error) as e:   # head_dim_v > head_dim: the library's check
        flashcl.attention(q, k, rand(rng, (1, 8, 2, 32), "fp32"))
    assert e.value.name == "FCL_ERROR_HEAD_DIM_UNSUPPORTED"
    with pytest.raises(flashcl.ArgumentError):  # v's keys or heads unlike k's
        flashcl.attention(q, k, rand(rng, (1, 9, 2, 8), "fp32"))


def test_dropout_mask_is_random_and_reproducible():
    m = flashcl.dropout_mask(2, 3, 40, 50, 0.3, seed=5)
    assert m.shape == (2, 3, 40, 50) and set(np.unique(m)) <= {0, 1}
    kept = m.mean()
    # 12000 Bernoulli(0.7) draws: the standard deviation of the mean is 0.004
    assert abs(kept - 0.7) < 0.02, kept
    assert np.array_equal(m, flashcl.dropout_mask(2, 3, 40, 50, 0.3, seed=5))
    assert not np.array_equal(m, flashcl.dropout_mask(2, 3, 40, 50, 0.3, seed=6))


def test_strided_views_are_taken_as_they_are(rng):
    b, s, h, d = 2, 33, 4, 32
    # q: a (batch, heads, seq, dim) array seen as (batch, seq, heads, dim);
    # k, v: windows of larger arrays (gaps between rows, a non-zero start)
    q = rand(rng, (b, h, s, d), "fp32").transpose(0, 2, 1, 3)
    k = rand(rng, (b, s + 3, h, d + 8), "fp32")[:, 2:s + 2, :, 4:d + 4]
    v = rand(rng, (b, s, 2 * h, d), "fp32")[:, :, ::2, :]
    assert not (q.flags.c_contiguous or k.flags.c_contiguous or v.flags.c_contiguous)
    o = check(rng, "fp32", arrays=(q, k, v), causal=True)
    dense = flashcl.attention(*(np.ascontiguousarray(x) for x in (q, k, v)), causal=True)
    assert np.array_equal(o, dense)


def test_out_receives_the_result(rng):
    q, k, v = (rand(rng, (2, 21, 4, 16), "fp16") for _ in range(3))
    want = flashcl.attention(q, k, v, causal=True)
    # a strided window of a larger array, filled with a sentinel first
    big = np.full((2, 21, 4, 24), 7.0, np.float16)
    out = big[:, :, :, 4:20]
    got = flashcl.attention(q, k, v, causal=True, out=out)
    assert got is out and np.array_equal(out, want)
    assert np.all(big[..., :4] == 7.0) and np.all(big[..., 20:] == 7.0)
    # wrong shape, dtype or kind: refused before the call, out untouched
    for bad in (np.zeros((2, 21, 4, 8), np.float16), np.zeros((2, 21, 4, 16), np.float32),
                [[0.0]]):
        before = np.array(bad, copy=True)
        with pytest.raises(flashcl.ArgumentError):
            flashcl.attention(q, k, v, out=bad)
        assert np.array_equal(np.array(bad), before)
    # an error leaves it as it was too
    out[...] = 3.0
    with pytest.raises(flashcl.Error):
        flashcl.attention(q, k, v, window=(-5, 0), out=out)
    assert np.all(out == 3.0)


def test_ml_dtypes_bfloat16(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed "
                                    "(Debian 12 has no package); bf16 is tested as uint16")
    q, k, v = (rand(rng, (1, 16, 2, 32), "bf16") for _ in range(3))
    o_bits = flashcl.attention(q, k, v)
    o = flashcl.attention(*(x.view(ml_dtypes.bfloat16) for x in (q, k, v)))
    assert o.dtype == ml_dtypes.bfloat16
    assert np.array_equal(o.view(np.uint16), o_bits)


def test_bf16_conversion_rounds_to_nearest_even():
    x = np.array([1.0, -2.5, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, np.inf], np.float32)
    bits = flashcl.float32_to_bf16(x)
    assert list(bits) == [0x3F80, 0xC020, 0x3F80, 0x3F82, 0x7F80]
    assert np.array_equal(flashcl.bf16_to_float32(bits)[:2], x[:2])


def _varlen_case(rng, dt, lens_q, lens_k, hq=4, hkv=2, d=32, dv=32):
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rand(rng, (cu_q[-1], hq, d), dt)
    k, v = rand(rng, (cu_k[-1], hkv, d), dt), rand(rng, (cu_k[-1], hkv, dv), dt)
    return q, k, v, cu_q, cu_k


@pytest.mark.parametrize("dt,dv", [("fp32", 32), ("fp16", 32), ("fp16", 16)])
def test_varlen_forward_backward(rng, dt, dv):
    lens_q, lens_k = [5, 0, 17, 9], [9, 3, 20, 4]
    q, k, v, cu_q, cu_k = _varlen_case(rng, dt, lens_q, lens_k, dv=dv)
    dout = rand(rng, q.shape[:2] + (dv,), dt)
    o, lse = flashcl.attention_varlen(q, k, v, cu_q, cu_k, causal=True, return_lse=True)
    assert lse.shape == (q.shape[1], q.shape[0])
    dq, dk, dv = flashcl.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k,
                                                   max(lens_q), max(lens_k), causal=True)
    d = q.shape[2]
    for i in range(len(lens_q)):
        rq, rk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        if lens_q[i] == 0:
            continue
        one = lambda x, r: x[r][None]  # noqa: E731  one sequence as batch 1
        o64, lse64, g64, mags = forward(one(q, rq), one(k, rk), one(v, rk), causal=True,
                                        dout=one(dout, rq))
        o32, lse32, g32, _ = forward(one(q, rq), one(k, rk), one(v, rk), np.float32,
                                     causal=True, dout=one(dout, rq))
        n = d + lens_k[i]
        assert_close("O[%d]" % i, one(o, rq), o32, o64, dt, n, 2)
        assert_close("LSE[%d]" % i, lse[:, rq][None], lse32, lse64, "fp32", n, 2)
        nb = d + max(lens_q[i], lens_k[i])
        for name, ours, r, lowp, ref, mag in zip(("dQ", "dK", "dV"), (dq, dk, dv),
                                                 (rq, rk, rk), g32, g64, mags):
            assert_close("%s[%d]" % (name, i), one(ours, r), lowp, ref, dt, nb, 3, mag)
    # keys of the sequence with no query rows get no gradient
    assert np.all(load(dk)[cu_k[1]:cu_k[2]] == 0)


def test_plan_reports_sram_and_tiles(ctx):
    # 256 keys: a backward every device plans (4096, the default, is refused
    # on one that ends long loops: Mesa's llvmpipe, FCL_ERROR_DEVICE_LOOP_LIMIT)
    p = flashcl.plan(64, seqlen_q=256, dtype="fp16", kernel="backward_dq")
    assert p["kernel"] == "backward_dq" and p["dtype"] == "fp16" and p["head_dim"] == 64
    assert p["local_mem_usable"] > 0 and p["br"] > 0 and p["bc"] > 0 and p["variant"]
    assert p["device"] == ctx.info()["name"]
    assert ctx.info()["local_mem_reported"] == p["local_mem_reported"] or \
        p["variant"].startswith("cpu")
    assert flashcl.devices(), "no device listed"


def test_calls_release_the_gil(monkeypatch):
    # While a thread is inside the C call, this thread must run Python code.
    # The switch interval is raised past any call's length, so a thread that
    # holds the GIL keeps it until it blocks: this thread can only look at
    # `returned` before the call is over if the binding released the GIL
    # around it.  No duration is measured, so the device's speed does not
    # matter (the thread wakes in microseconds; the call takes milliseconds).
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2048, 4, 64)).astype(np.float32) for _ in range(3))
    flashcl.attention(q[:, :64], k[:, :64], v[:, :64])  # kernels built beforehand
    real = flashcl._lib.fcl_attention_forward_host_ex
    entered, state = threading.Event(), {"returned": False}

    def traced(*args):
        entered.set()  # wakes this thread, which then needs the GIL
        try:
            return real(*args)
        finally:
            state["returned"] = True

    def worker():
        try:
            flashcl.attention(q, k, v)
        finally:
            entered.set()  # never leave the waiter hanging

    monkeypatch.setattr(flashcl._lib, "fcl_attention_forward_host_ex", traced)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(60.0)
    try:
        th = threading.Thread(target=worker)
        th.start()
        entered.wait()
        ran_inside = not state["returned"]  # Python progress here, during the call?
        th.join()
    finally:
        sys.setswitchinterval(interval)
    assert state["returned"], "the C call was not made"
    assert ran_inside, "this thread could not run until the C call returned: GIL held"


def test_unit_roundoff_table_matches_the_header():
    # the tolerance table follows the storage types' mantissas
    assert U["fp16"] == np.finfo(np.float16).eps / 2 and U["fp32"] == np.finfo(np.float32).eps / 2
    assert load(store(1 + 2 ** -8, "bf16")) == 1.0
