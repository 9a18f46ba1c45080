#!/usr/bin/env python3
"""What the Python binding adds to a small call: the same forward timed from
C (build/bench/flashcl-bench-call) and through flashcl's Python package, in
one run, alternating rounds so both see the same machine.

    python3 bench/python_overhead.py [--build build] [--rounds 5] [--reps 2000]
        [--out bench/results/pocl-python-overhead]

Rows (fp32, batch 1, 1 head, seqlen 16, head_dim 32 unless given):
  host   C: fcl_attention_forward_host;  Python: flashcl.attention(NumPy arrays)
  clmem  C: fcl_attention_forward + clFinish on its buffers;
         Python: flashcl.attention(PyOpenCL arrays) + queue.finish()
  clmem out=  the same with the caller's output array (out=): no PyOpenCL
         allocation in the call
  plus "ctypes only": the host call through ctypes with a prepared
  descriptor, and "binding alone": flashcl.attention with the C entry point
  swapped for a no-op C function, to measure the Python work alone (the
  device call's noise, tens of us here, hides it in the differences).
Each number is the median of --reps calls (after a warm-up), then the median
over rounds.  Writes OUT.md (table and metadata), OUT.csv and OUT.png."""
import argparse
import ctypes
import datetime
import os
import statistics
import subprocess
import sys
import timeit

import numpy as np

from results_csv import headless_pyplot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def median_us(fn, reps, warmup=50):
    timeit.repeat(fn, number=1, repeat=warmup)
    return 1e6 * statistics.median(timeit.repeat(fn, number=1, repeat=reps))


def c_round(build, args):
    out = subprocess.run([os.path.join(build, "bench", "flashcl-bench-call")] + args,
                         check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--seqlen", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "pocl-python-overhead"))
    a = ap.parse_args()
    os.environ.setdefault("FLASHCL_LIBRARY", os.path.join(a.build, "libflashcl.so"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import flashcl
    from flashcl import _lib
    try:
        import pyopencl as cl
        import pyopencl.array as cla
    except ImportError:
        cl = None
        print("pyopencl missing: the clmem rows are left out")

    shape = (1, a.seqlen, a.heads, a.head_dim)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    ctx = flashcl.Context()
    info = ctx.info()
    if cl is not None:
        device = [d for p in cl.get_platforms() for d in p.get_devices()
                  if d.name == info["name"]]
        queue = cl.CommandQueue(cl.Context(device[:1]))
        wrapped = flashcl.Context.from_pyopencl(queue)
        qd, kd, vd = (cla.to_device(queue, x) for x in (q, k, v))
        od = cla.empty_like(qd)

    desc = _lib.AttentionDesc()
    _lib.fcl_attention_desc_init(ctypes.byref(desc), 1, a.heads, a.heads, a.seqlen, a.seqlen,
                                 a.head_dim, _lib.DTYPE_FP32, _lib.LAYOUT_BSHD)
    o_raw = np.empty_like(q)
    ptrs = [x.ctypes.data for x in (q, k, v, o_raw)]

    def raw():
        _lib.fcl_attention_forward_host_ex(ctx.handle, ctypes.byref(desc), None, *ptrs, None)

    def on_device():
        flashcl.attention(qd, kd, vd, context=wrapped)
        queue.finish()

    def on_device_out():
        flashcl.attention(qd, kd, vd, context=wrapped, out=od)
        queue.finish()

    cargs = ["--heads", str(a.heads), "--seqlen", str(a.seqlen), "--head-dim",
             str(a.head_dim), "--reps", str(a.reps)]
    rows = {"host": {"C": [], "Python": [], "ctypes only": []}}
    if cl is not None:
        rows["clmem"] = {"C": [], "Python": []}
        rows["clmem out="] = {"C": [], "Python": []}
    for r in range(a.rounds):
        c = c_round(a.build, cargs)
        rows["host"]["C"].append(c["host"])
        if cl is not None:
            rows["clmem"]["C"].append(c["clmem"])
            rows["clmem out="]["C"].append(c["clmem"])
        rows["host"]["Python"].append(median_us(lambda: flashcl.attention(q, k, v, context=ctx),
                                                a.reps))
        rows["host"]["ctypes only"].append(median_us(raw, a.reps))
        if cl is not None:
            rows["clmem"]["Python"].append(median_us(on_device, a.reps))
            rows["clmem out="]["Python"].append(median_us(on_device_out, a.reps))
        print("round %d: %s" % (r + 1, {f: {w: "%.1f" % v[-1] for w, v in d.items()}
                                         for f, d in rows.items()}))
    med = {f: {w: statistics.median(v) for w, v in d.items()} for f, d in rows.items()}

    # The binding's own cost, free of the device's noise: the C entry point
    # swapped for fcl_dtype_size, a C function that ignores the extra
    # arguments and returns 0 (FCL_OK) for them; timed through flashcl.attention
    # and as a bare ctypes call.
    real = _lib.fcl_attention_forward_host_ex
    noop = ctypes.cast(_lib.lib.fcl_dtype_size, type(real))
    noop.argtypes, noop.restype = real.argtypes, real.restype
    assert noop(ctx.handle, ctypes.byref(desc), None, *ptrs, None) == 0
    _lib.fcl_attention_forward_host_ex = noop
    n, runs = 100, 1000   # short runs, the best one: the least disturbed by other processes
    bare = min(timeit.repeat(lambda: noop(ctx.handle, ctypes.byref(desc), None, *ptrs, None),
                             number=n, repeat=runs)) / n * 1e6
    full = min(timeit.repeat(lambda: flashcl.attention(q, k, v, context=ctx), number=n,
                             repeat=runs)) / n * 1e6
    _lib.fcl_attention_forward_host_ex = real
    noop_line = ("binding alone (host call, C work replaced by a no-op; best of %d runs of "
                 "%d calls): flashcl.attention %.2f us, the bare ctypes call %.2f us, so "
                 "%.2f us of Python around the call" % (runs, n, full, bare, full - bare))
    print(noop_line)

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    meta = {"device": info["name"], "driver": info["driver_version"],
            "platform": info["platform_name"],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit, "python": sys.version.split()[0], "numpy": np.__version__,
            "pyopencl": cl.VERSION_TEXT if cl is not None else "absent",
            "shape": "fp32 forward, batch 1, heads %d, seqlen %d, head_dim %d"
                     % (a.heads, a.seqlen, a.head_dim),
            "method": "median of %d calls per round, median of %d alternating rounds"
                      % (a.reps, a.rounds)}
    table = ["| call | C (us) | Python (us) | Python - C (us) | Python / C | ctypes only (us) |",
             "| --- | --- | --- | --- | --- | --- |"]
    csv = ["form,c_us,python_us,extra_us,ratio,ctypes_only_us"]
    for f, d in med.items():
        only = d.get("ctypes only")
        table.append("| %s | %.1f | %.1f | %.1f | %.2f | %s |" % (
            f, d["C"], d["Python"], d["Python"] - d["C"], d["Python"] / d["C"],
            "%.1f" % only if only else "-"))
        csv.append("%s,%.2f,%.2f,%.2f,%.3f,%s" % (f, d["C"], d["Python"], d["Python"] - d["C"],
                                                 d["Python"] / d["C"],
                                                 "%.2f" % only if only else ""))
    print("\n".join(table))
    with open(a.out + ".md", "w") as out:
        out.write("# The Python binding's overhead on a small call\n\n")
        out.write("".join("- %s: %s\n" % kv for kv in meta.items()))
        out.write("\n" + "\n".join(table) + "\n\n" + noop_line + "\n\nPer round (us): %s\n"
                  % {f: {w: [round(x, 1) for x in v] for w, v in d.items()}
                     for f, d in rows.items()})
    with open(a.out + ".csv", "w") as out:
        out.write("".join("# %s: %s\n" % kv for kv in meta.items()) + "\n".join(csv) + "\n")
    plt = headless_pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        forms = list(med)
        x = np.arange(len(forms))
        ax.bar(x - 0.2, [med[f]["C"] for f in forms], 0.4, label="from C")
        ax.bar(x + 0.2, [med[f]["Python"] for f in forms], 0.4, label="through Python")
        ax.set_xticks(x, ["%s (+%.1f us)" % (f, med[f]["Python"] - med[f]["C"]) for f in forms])
        ax.set_ylabel("median time per call (us)")
        ax.set_title("%s\n%s" % (meta["device"], meta["shape"]), fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.out + ".png", dpi=100)


if __name__ == "__main__":
    main()
