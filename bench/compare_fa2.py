"""Side-by-side table and plot of flashcl against PyTorch's attention backends.

Usage: python3 bench/compare_fa2.py OURS.csv SDPA.csv OUT_PREFIX [PORTABLE.csv]
  OURS.csv      flashcl-bench --out (any dtype; forward and/or backward rows)
  SDPA.csv      shared/anchors/sdpa_anchor.py --csv (same machine, same run)
  PORTABLE.csv  optional: flashcl-bench --portable-only --out
Writes OUT_PREFIX.md (one row per shape: TFLOP/s of each, and flashcl / FA2)
and OUT_PREFIX.png (TFLOP/s against N, one line per backend) when matplotlib
is there.  Standard library only for the table.
"""
import csv, sys


def read_ours(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            key = (r["pass"], int(r["d"]), int(r["causal"]), int(r["N"]))
            rows[key] = (float(r["ours_tflops"]), r.get("variant", ""))
    return rows


def read_sdpa(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (int(r["d"]), int(r["causal"]), int(r["N"]))
            rows.setdefault(key, {})[r["backend"]] = (float(r["fwd_tflops"]), float(r["bwd_tflops"]))
    return rows


def main():
    ours, sdpa, prefix = read_ours(sys.argv[1]), read_sdpa(sys.argv[2]), sys.argv[3]
    portable = read_ours(sys.argv[4]) if len(sys.argv) > 4 else {}
    lines = ["| pass | d | causal | N | flashcl | path | portable | FA2 | cuDNN | mem-efficient | flashcl / FA2 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    series = {}
    for (p, d, c, n), (tf, variant) in sorted(ours.items()):
        backends = sdpa.get((d, c, n), {})
        idx = 0 if p == "fwd" else 1
        fa2 = backends.get("fa2", (None, None))[idx]
        cud = backends.get("cudnn", (None, None))[idx]
        mem = backends.get("memeff", (None, None))[idx]
        port = portable.get((p, d, c, n), (None, ""))[0]
        fmt = lambda x: "-" if x is None else f"{x:.1f}"
        ratio = "-" if not fa2 else f"{tf / fa2:.2f}"
        lines.append(f"| {p} | {d} | {c} | {n} | {tf:.1f} | {variant} | {fmt(port)} | {fmt(fa2)} | "
                     f"{fmt(cud)} | {fmt(mem)} | {ratio} |")
        for name, val in (("flashcl", tf), ("portable", port), ("FA2", fa2), ("cuDNN", cud),
                          ("mem-efficient", mem)):
            if val is not None:
                series.setdefault((p, d, c), {}).setdefault(name, []).append((n, val))
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no plot")
        return
    panels = sorted(series)
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
    for ax, key in zip(axes[0], panels):
        for name, pts in sorted(series[key].items()):
            pts.sort()
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{key[0]} d={key[1]} causal={key[2]}")
        ax.set_xlabel("N")
        ax.set_ylabel("TFLOP/s")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=90)


if __name__ == "__main__":
    main()
