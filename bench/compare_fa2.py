"""Side-by-side table and plot of flashcl against PyTorch's attention backends.

Usage: python3 bench/compare_fa2.py OURS.csv SDPA.csv OUT_PREFIX [PORTABLE.csv]
  OURS.csv      flashcl-bench --out (one dtype; forward and/or backward rows;
                its standard-attention column, when measured, is shown too;
                with --profile, each call's device span is our number, as
                CUDA events are PyTorch's, and the call's wall clock, from
                enqueue to clFinish, is shown beside it)
  SDPA.csv      sdpa_backends.py --csv (rows of OURS' dtype are used) or the
                shared sdpa_anchor.py --csv (fp16 only), same machine, same run
  PORTABLE.csv  optional: flashcl-bench --portable-only --out
Writes OUT_PREFIX.md (one row per shape: TFLOP/s of each, flashcl / FA2 and
flashcl as a share of the tensor-core ceiling) and OUT_PREFIX.png (TFLOP/s
against N, one line per backend) when matplotlib is there.  Standard library
only for the table.
"""
import csv, sys

from results_csv import write_table


# mma.sync m16n8k16 fp16 -> fp32 alone, measured through OpenCL on the H100
# (shared device notes; the H200 has the same SMs and clocks).
MMA_CEILING_TFLOPS = 636.0


def read_ours(path):
    """{(pass, d, causal, N): (TFLOP/s, path, standard's TFLOP/s, wall-clock
    TFLOP/s)}, and the dtype: TFLOP/s from the device span where the file
    has one (flashcl-bench --profile), else from the wall clock."""
    rows, dtype = {}, None
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            key = (r["pass"], int(r["d"]), int(r["causal"]), int(r["N"]))
            naive = float(r.get("naive_tflops") or "nan")
            wall = float(r["ours_tflops"])
            dev = float(r.get("ours_device_tflops") or "nan")
            rows[key] = (dev if dev == dev else wall, r.get("variant", ""), naive, wall)
            dtype = r.get("dtype", dtype)
    return rows, dtype


def read_sdpa(path, dtype):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r.get("dtype", "fp16") != dtype:
                continue
            key = (int(r["d"]), int(r["causal"]), int(r["N"]))
            rows.setdefault(key, {})[r["backend"]] = (float(r["fwd_tflops"]), float(r["bwd_tflops"]))
    return rows


def main():
    (ours, dtype), prefix = read_ours(sys.argv[1]), sys.argv[3]
    sdpa = read_sdpa(sys.argv[2], dtype)
    portable = read_ours(sys.argv[4])[0] if len(sys.argv) > 4 else {}
    spans = any(w != tf for tf, _, _, w in ours.values())
    lines = [f"storage {dtype}; TFLOP/s; tensor-core ceiling {MMA_CEILING_TFLOPS:.0f} (mma.sync alone)"
             + ("; flashcl: the device's span of each call (OpenCL profiling, as CUDA events time "
                "PyTorch), its wall clock from enqueue to clFinish beside it" if spans else ""), "",
             "| pass | d | causal | N | flashcl | flashcl (wall) | path | portable | standard | FA2 | cuDNN "
             "| mem-efficient | flashcl / FA2 | flashcl / cuDNN | % of ceiling |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    series = {}
    fmt = lambda x: "-" if x is None or x != x else f"{x:.1f}"
    for (p, d, c, n), (tf, variant, naive, wall) in sorted(ours.items()):
        backends = sdpa.get((d, c, n), {})
        idx = 0 if p == "fwd" else 1
        fa2 = backends.get("fa2", (None, None))[idx]
        cud = backends.get("cudnn", (None, None))[idx]
        mem = backends.get("memeff", (None, None))[idx]
        port = portable.get((p, d, c, n), (None, "", None))[0]
        ratio = "-" if not fa2 else f"{tf / fa2:.2f}"
        ratio_cudnn = "-" if not cud else f"{tf / cud:.2f}"
        lines.append(f"| {p} | {d} | {c} | {n} | {tf:.1f} | {wall:.1f} | {variant} | {fmt(port)} | "
                     f"{fmt(naive)} | {fmt(fa2)} | {fmt(cud)} | {fmt(mem)} | {ratio} | {ratio_cudnn} | "
                     f"{100 * tf / MMA_CEILING_TFLOPS:.0f} |")
        for name, val in (("flashcl", tf), ("portable", port), ("standard", naive), ("FA2", fa2),
                          ("cuDNN", cud), ("mem-efficient", mem)):
            if val is not None and val == val:
                series.setdefault((p, d, c), {}).setdefault(name, []).append((n, val))
    plt = write_table(prefix, lines)
    if plt is None:
        return
    panels = sorted(series)
    cols = 4
    rows_n = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(4 * cols, 3.4 * rows_n), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, key in zip(axes.flat, panels):
        for name, pts in sorted(series[key].items()):
            pts.sort()
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{dtype} {key[0]} d={key[1]} causal={key[2]}", fontsize=9)
        ax.set_xlabel("N")
        ax.set_ylabel("TFLOP/s")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=90)


if __name__ == "__main__":
    main()
