"""A table and a plot of flashcl-bench-cpu: flashcl's forward on a CPU
device beside standard attention on OpenBLAS, measured in the same run.

Usage: python3 bench/compare_cpu.py RESULTS.csv OUT_PREFIX
Writes OUT_PREFIX.md (every row: GFLOP/s of both, their ratio, flashcl's
share of OpenBLAS's sgemm rate) and OUT_PREFIX.png (ratio against N, one
line per dtype, head_dim and mask) when matplotlib is there.
"""
import sys

from results_csv import rows_of


def main():
    meta, rows = rows_of(sys.argv[1])
    prefix = sys.argv[2]
    out = [f"device {meta.get('device')} ({meta.get('platform')}, driver {meta.get('driver')}), "
           f"commit {meta.get('commit')}, {meta.get('date')}; {meta.get('openblas')}; "
           f"OpenBLAS sgemm {meta.get('sgemm_gflops')} GFLOP/s in the same run; medians", "",
           "| dtype | B | H | N | d | causal | variant | flashcl GFLOP/s | OpenBLAS GFLOP/s "
           "| flashcl / OpenBLAS | flashcl / sgemm |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['dtype']} | {r['B']} | {r['H']} | {r['N']} | {r['d']} | {r['causal']} "
                   f"| {r['variant']} | {float(r['flashcl_gflops']):.1f} "
                   f"| {float(r['openblas_gflops']):.1f} | {float(r['ratio']):.2f} "
                   f"| {100 * float(r['share_of_sgemm']):.1f}% |")
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(out) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no plot")
        return
    series = {}
    for r in rows:
        key = f"{r['dtype']} d{r['d']}{' causal' if r['causal'] == '1' else ''}"
        series.setdefault(key, []).append((int(r["N"]), float(r["ratio"])))
    for key, pts in sorted(series.items()):
        pts.sort()
        plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=key)
    plt.axhline(1.0, color="grey", linewidth=0.8)
    plt.xscale("log", base=2)
    plt.xlabel("N (B*N = 8192, H = 4)")
    plt.ylabel("flashcl / OpenBLAS standard attention")
    plt.title(meta.get("device", ""))
    plt.legend(fontsize=7)
    plt.savefig(prefix + ".png", dpi=120, bbox_inches="tight")


if __name__ == "__main__":
    main()
