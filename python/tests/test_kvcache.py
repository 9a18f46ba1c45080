"""Decoding against a KV cache (contiguous and paged, with appends) against
the float64 reference: each sequence's keys are its cached rows then the
appended ones, and its query rows sit at the end of them."""
import numpy as np
import pytest

import flashcl
from reference import assert_close, forward, load, rand, store


def _check(o, q, keys, values, dt, causal, window=(-1, -1), sinks=None):
    """Every sequence against the reference on its own keys."""
    d = q.shape[3]
    for b in range(q.shape[0]):
        kb, vb = keys[b][None], values[b][None]
        if kb.shape[1] == 0:
            assert np.all(load(o[b]) == 0)  # no key: O = 0
            continue
        o64, _ = forward(q[b:b + 1], kb, vb, causal=causal, window=window, sinks=sinks)
        o32, _ = forward(q[b:b + 1], kb, vb, np.float32, causal=causal, window=window,
                         sinks=sinks)
        assert_close("O[%d]" % b, o[b:b + 1], o32, o64, dt, d + kb.shape[1], 2)


def test_sinks_paged_split(rng):
    # sinks per query head, GQA packing, split-KV forced, a paged cache
    b, hq, hkv, d, page, pages_per_seq = 2, 8, 2, 16, 8, 6
    lens = np.array([13, 40], np.int32)
    kc, vc = (rand(rng, (b * pages_per_seq, page, hkv, d), "fp16") for _ in range(2))
    table = rng.permutation(b * pages_per_seq).astype(np.int32).reshape(b, pages_per_seq)
    q = rand(rng, (b, 1, hq, d), "fp16")
    sinks = (np.log(20) + rng.standard_normal(hq)).astype(np.float32)
    o, lse = flashcl.attention_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table,
                                       sinks=sinks, num_splits=3, return_lse=True)
    rows = [np.concatenate([c[table[i, j // page], j % page][None] for j in range(n)])
            for c in (kc, vc) for i, n in enumerate(lens)]
    _check(o, q, rows[:b], rows[b:], "fp16", causal=False, sinks=sinks)


@pytest.mark.parametrize("dt", ["fp32", "bf16"])
def test_contiguous_cache_with_appends(rng, dt):
    b, hq, hkv, d, cache, sq, snew = 3, 4, 2, 32, 40, 2, 3
    lens = np.array([7, 0, 30], np.int32)
    kc, vc = (rand(rng, (b, cache, hkv, d), dt) for _ in range(2))
    knew, vnew = (rand(rng, (b, snew, hkv, d), dt) for _ in range(2))
    q = rand(rng, (b, sq, hq, d), dt)
    before = kc.copy(), vc.copy()
    o = flashcl.attention_kvcache(q, kc, vc, knew, vnew, cache_seqlens=lens, causal=True)
    for cache_now, old, new in ((kc, before[0], knew), (vc, before[1], vnew)):
        for i, n in enumerate(lens):
            assert np.array_equal(cache_now[i, n:n + snew], new[i])        # appended
            assert np.array_equal(cache_now[i, :n], old[i, :n])            # kept
            assert np.array_equal(cache_now[i, n + snew:], old[i, n + snew:])
    _check(o, q, [kc[i, :n + snew] for i, n in enumerate(lens)],
           [vc[i, :n + snew] for i, n in enumerate(lens)], dt, causal=True)


def test_paged_cache_gqa_decoding(rng):
    dt, b, hq, hkv, d, page, pages, maxp = "fp16", 3, 8, 2, 64, 16, 12, 4
    lens = np.array([33, 5, 64], np.int32)
    kc, vc = (rand(rng, (pages, page, hkv, d), dt) for _ in range(2))
    table = rng.permutation(pages)[:b * maxp].reshape(b, maxp).astype(np.int32)
    q = rand(rng, (b, 1, hq, d), dt)
    o, lse = flashcl.attention_kvcache(q, kc, vc, cache_seqlens=lens, block_table=table,
                                       window=(20, -1), return_lse=True)
    assert lse.shape == (b, hq, 1)

    def seq(cache, i):
        return np.concatenate([cache[p] for p in table[i]])[:lens[i]]

    _check(o, q, [seq(kc, i) for i in range(b)], [seq(vc, i) for i in range(b)], dt,
           causal=False, window=(20, -1))


@pytest.mark.parametrize("num_splits", [1, 3])
def test_value_head_dim_paged_appends(rng, num_splits):
    # v_cache, v and O head_dim_v = 128 wide, K and Q 192: appends, shuffled pages, splits
    dt, b, hq, hkv, d, dv, page, pages, maxp, snew = "fp16", 2, 4, 1, 192, 128, 8, 10, 4, 2
    lens = np.array([19, 3], np.int32)
    kc, vc = rand(rng, (pages, page, hkv, d), dt), rand(rng, (pages, page, hkv, dv), dt)
    knew, vnew = rand(rng, (b, snew, hkv, d), dt), rand(rng, (b, snew, hkv, dv), dt)
    table = rng.permutation(pages)[:b * maxp].reshape(b, maxp).astype(np.int32)
    q = rand(rng, (b, 1, hq, d), dt)
    o = flashcl.attention_kvcache(q, kc, vc, knew, vnew, cache_seqlens=lens,
                                  block_table=table, num_splits=num_splits)
    assert o.shape == (b, 1, hq, dv)

    def seq(cache, i):
        return np.concatenate([cache[p] for p in table[i]])[:lens[i] + snew]

    for i in range(b):
        assert np.array_equal(seq(vc, i)[lens[i]:], vnew[i])     # appended, 128 wide
    _check(o, q, [seq(kc, i) for i in range(b)], [seq(vc, i) for i in range(b)], dt,
           causal=False)


def test_bad_cache_contents_raise_and_write_nothing(rng):
    q = rand(rng, (2, 1, 2, 32), "fp32")
    kc, vc = (rand(rng, (2, 8, 2, 32), "fp32") for _ in range(2))
    knew, vnew = (rand(rng, (2, 1, 2, 32), "fp32") for _ in range(2))
    before = kc.copy()
    with pytest.raises(flashcl.Error) as e:
        flashcl.attention_kvcache(q, kc, vc, knew, vnew, cache_seqlens=np.array([3, 8], np.int32))
    assert e.value.name == "FCL_ERROR_INVALID_CACHE_SEQLENS"
    assert np.array_equal(kc, before)
    table = np.array([[0, 1], [1, 7]], np.int32)  # page 7 of 4
    kp, vp = (rand(rng, (4, 4, 2, 32), "fp32") for _ in range(2))
    with pytest.raises(flashcl.Error) as e:
        flashcl.attention_kvcache(q, kp, vp, cache_seqlens=np.array([2, 6], np.int32),
                                  block_table=table)
    assert e.value.name == "FCL_ERROR_INVALID_PAGE_TABLE"


def _rotate(x, pos, cos, sin, interleaved):
    """Row x (head_dim,) rotated at position pos in float64 (flashcl.h,
    fcl_kvcache_desc): pair i is (2i, 2i + 1) interleaved, else
    (i, i + rotary_dim / 2)."""
    y, half = np.array(x, np.float64), cos.shape[1]
    i = np.arange(half)
    a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
    c, s = cos[pos].astype(np.float64), sin[pos].astype(np.float64)
    y[a], y[b] = x[a] * c - x[b] * s, x[b] * c + x[a] * s
    return y


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary(rng, interleaved):
    """Q and the appended K rows rotated at their positions (query rows at
    T_b - seqlen_q + i without a causal mask too, before 0 at 0), V not."""
    dt, b, hq, hkv, d, cache, sq, snew, rd = "fp32", 2, 4, 2, 32, 40, 3, 2, 16
    lens = np.array([9, 0], np.int32)
    angles = rng.uniform(0, 2 * np.pi, (cache, rd // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    kc, vc = (rand(rng, (b, cache, hkv, d), dt) for _ in range(2))
    knew, vnew = (rand(rng, (b, snew, hkv, d), dt) for _ in range(2))
    q = rand(rng, (b, sq, hq, d), dt)
    o = flashcl.attention_kvcache(q, kc, vc, knew, vnew, cache_seqlens=lens, rotary_cos=cos,
                                  rotary_sin=sin, rotary_interleaved=interleaved)
    qr = np.empty(q.shape)
    for s, n in enumerate(lens):
        for t in range(snew):
            for h in range(hkv):
                exact = _rotate(load(knew[s, t, h]), n + t, cos, sin, interleaved)
                assert np.allclose(load(kc[s, n + t, h]), exact, rtol=1e-6, atol=1e-6)
        assert np.array_equal(vc[s, n:n + snew], vnew[s])
        for i in range(sq):
            for h in range(hq):
                qr[s, i, h] = _rotate(load(q[s, i, h]), max(n + snew - sq + i, 0), cos, sin,
                                      interleaved)
    _check(o, store(qr, dt), [kc[i, :n + snew] for i, n in enumerate(lens)],
           [vc[i, :n + snew] for i, n in enumerate(lens)], dt, causal=False)
    with pytest.raises(flashcl.Error) as e:  # a table shorter than the cache
        flashcl.attention_kvcache(q, kc, vc, cache_seqlens=lens, rotary_cos=cos[:cache - 1],
                                  rotary_sin=sin[:cache - 1])
    assert e.value.name == "FCL_ERROR_INVALID_VALUE"


@pytest.mark.parametrize("num_splits", [0, 3])
def test_shared_latent_cache(rng, num_splits):
    # multi-head latent attention: one 576-wide cache, V its first 512 columns,
    # 16 query heads on it, 64-key shuffled pages, an append across a page
    dt, b, hq, d, dv, page, maxp, snew = "fp16", 2, 16, 576, 512, 64, 3, 1
    lens = np.array([64, 0], np.int32)
    pages = b * maxp + 1
    latent = rand(rng, (pages, page, 1, d), dt)
    before = latent.copy()
    knew = rand(rng, (b, snew, 1, d), dt)
    table = rng.permutation(pages)[:b * maxp].reshape(b, maxp).astype(np.int32)
    q = rand(rng, (b, 1, hq, d), dt)
    o = flashcl.attention_kvcache(q, latent, None, knew, cache_seqlens=lens, block_table=table,
                                  head_dim_v=dv, num_splits=num_splits)
    assert o.shape == (b, 1, hq, dv)

    def seq(cache, i):
        return np.concatenate([cache[p] for p in table[i]])[:lens[i] + snew]

    for i in range(b):
        assert np.array_equal(seq(latent, i)[lens[i]:], knew[i])   # appended, all 576 columns
        assert np.array_equal(seq(latent, i)[:lens[i]], seq(before, i)[:lens[i]])
    _check(o, q, [seq(latent, i) for i in range(b)], [seq(latent, i)[..., :dv] for i in range(b)],
           dt, causal=True)


def test_shared_latent_cache_refusals(rng):
    q = rand(rng, (1, 1, 4, 64), "fp32")
    kc = rand(rng, (1, 8, 1, 64), "fp32")
    lens = np.array([3], np.int32)
    with pytest.raises(flashcl.ArgumentError):  # v rows beside a shared cache
        flashcl.attention_kvcache(q, kc, None, kc[:, :1], kc[:, :1, :, :32], cache_seqlens=lens,
                                  head_dim_v=32)
    with pytest.raises(flashcl.ArgumentError):  # head_dim_v with two caches
        flashcl.attention_kvcache(q, kc, kc.copy(), cache_seqlens=lens, head_dim_v=32)
    with pytest.raises(flashcl.Error) as e:      # head_dim_v wider than the cache
        flashcl.attention_kvcache(q, kc, None, cache_seqlens=lens, head_dim_v=65)
    assert e.value.name == "FCL_ERROR_HEAD_DIM_UNSUPPORTED"
    table = np.ones((8, 32), np.float32)
    with pytest.raises(flashcl.Error) as e:      # rotary with a shared cache
        flashcl.attention_kvcache(q, kc, None, cache_seqlens=lens, head_dim_v=32,
                                  rotary_cos=table, rotary_sin=table)
    assert e.value.name == "FCL_ERROR_INVALID_VALUE"
