"""A table and a plot of flashcl-bench-fp8: the RMSE of O against float64
attention for fp16, e4m3 and e5m2 storage (FlashAttention-3's error
statement).

Usage: python3 bench/compare_fp8.py RESULTS.csv OUT_PREFIX
Writes OUT_PREFIX.md (every row, and each FP8 RMSE as a multiple of fp16's
at the same shape) and OUT_PREFIX.png (RMSE per storage and output type, one
group of bars per shape, log scale) when matplotlib is there
(tools/deps.sh bench).
"""
import sys

from results_csv import headless_pyplot, rows_of


def main():
    meta, rows = rows_of(sys.argv[1])
    prefix = sys.argv[2]
    shape = lambda r: (r["B"], r["H"], r["N"], r["d"])
    fp16 = {shape(r): float(r["rmse"]) for r in rows if r["storage"] == "fp16"}
    lines = [f"# FP8 storage error ({meta.get('device', '?')})", "",
             f"{meta.get('date', '')}, commit {meta.get('commit', '')}; "
             f"inputs {meta.get('inputs', '')}",
             "", "| storage | O | B | H | N | d | RMSE | relative RMSE | / fp16 storage |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = float(r["rmse"]) / fp16[shape(r)] if shape(r) in fp16 else float("nan")
        lines.append(f"| {r['storage']} | {r['out']} | {r['B']} | {r['H']} | {r['N']} | {r['d']} "
                     f"| {float(r['rmse']):.3e} | {float(r['rel_rmse']):.3e} | {ratio:.1f}x |")
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    plt = headless_pyplot()
    if plt is None:
        return
    shapes = sorted({shape(r) for r in rows}, key=lambda s: (int(s[3]), int(s[2])))
    kinds = []
    for r in rows:
        k = (r["storage"], r["out"])
        if k not in kinds:
            kinds.append(k)
    fig, ax = plt.subplots(figsize=(8, 5))
    width = 0.8 / len(kinds)
    for i, k in enumerate(kinds):
        ys = [next((float(r["rmse"]) for r in rows if shape(r) == s and (r["storage"], r["out"]) == k),
                   float("nan")) for s in shapes]
        ax.bar([j + i * width for j in range(len(shapes))], ys, width,
               label=f"{k[0]} storage, O {k[1]}")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))])
    ax.set_xticklabels([f"B={s[0]} H={s[1]}\nN={s[2]} d={s[3]}" for s in shapes])
    ax.set_yscale("log")
    ax.set_ylabel("RMSE of O against float64")
    ax.set_title("FP8 vs fp16 storage, inputs with 0.1% outliers (per-head descales)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)


if __name__ == "__main__":
    main()
