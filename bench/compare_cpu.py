"""A table and a plot of flashcl-bench-cpu: flashcl on a CPU device beside
standard attention on OpenBLAS (measured in the same run) and, where given,
PyTorch's CPU scaled_dot_product_attention (bench/sdpa_cpu.py, run right
after on the same cores; fp32 rows only).

Usage: python3 bench/compare_cpu.py RESULTS.csv OUT_PREFIX [--torch SDPA.csv]
           [--scaling T1.csv,T2.csv,...]
Writes OUT_PREFIX.md (every row: rates of each, the ratios, flashcl's share
of OpenBLAS's sgemm rate; with --scaling, a table of --quick runs at several
thread counts) and OUT_PREFIX.png (ratios against N, one line per pass,
dtype, head_dim and mask) when matplotlib is there.
"""
import sys

from results_csv import headless_pyplot, rows_of


def arg(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


def key(r):
    return (r["pass"], r["B"], r["H"], r["N"], r["d"], r["causal"])


def main():
    meta, rows = rows_of(sys.argv[1])
    rows = [r for r in rows if r.get("unit")]  # a run cut short ends in a partial line
    prefix = sys.argv[2]
    torch = {}
    if arg("--torch"):
        tmeta, trows = rows_of(arg("--torch"))
        torch = {key(r): float(r["torch"]) for r in trows}
    out = [f"device {meta.get('device')} ({meta.get('platform')}, driver {meta.get('driver')}), "
           f"{meta.get('compute_units')} compute units, commit {meta.get('commit')}, "
           f"{meta.get('date')}; {meta.get('openblas')}; threads: {meta.get('threads')}; "
           f"OpenBLAS sgemm {meta.get('sgemm_gflops')} GFLOP/s in the same run; medians; "
           "fwd/bwd in GFLOP/s, decode in GB/s of K/V read", "",
           "| pass | dtype | B | H | N | d | causal | variant | flashcl | OpenBLAS | PyTorch "
           "| / OpenBLAS | / PyTorch | / sgemm |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ours = float(r["flashcl"])
        t = torch.get(key(r)) if r["dtype"] == "fp32" else None
        share = f"{100 * float(r['share_of_sgemm']):.1f}%" if r["unit"] == "GFLOP/s" else "-"
        out.append(f"| {r['pass']} | {r['dtype']} | {r['B']} | {r['H']} | {r['N']} | {r['d']} "
                   f"| {r['causal']} | {r['variant']} | {ours:.1f} | {float(r['openblas']):.1f} "
                   f"| {f'{t:.1f}' if t else '-'} | {float(r['ratio']):.2f} "
                   f"| {f'{ours / t:.2f}' if t else '-'} | {share} |")
    if arg("--scaling"):
        out += ["", "Thread scaling (--quick runs, fp32 d 128, GFLOP/s; PyTorch from the "
                "cpu_sdpa_tT.csv beside each cpu_tT.csv when there):", "",
                "| threads | pass | N | causal | flashcl | OpenBLAS | PyTorch | / OpenBLAS "
                "| / PyTorch |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for path in arg("--scaling").split(","):
            smeta, srows = rows_of(path)
            srows = [r for r in srows if r.get("unit")]
            threads = smeta.get("threads", "?").split(",")[0].replace("pocl ", "")
            tpath = path.replace("cpu_t", "cpu_sdpa_t")
            try:
                st = {key(r): float(r["torch"]) for r in rows_of(tpath)[1]}
            except OSError:
                st = {}
            for r in srows:
                if r["pass"] == "decode":
                    continue
                ours, t = float(r["flashcl"]), st.get(key(r))
                out.append(f"| {threads} | {r['pass']} | {r['N']} | {r['causal']} | {ours:.1f} "
                           f"| {float(r['openblas']):.1f} | {f'{t:.1f}' if t else '-'} "
                           f"| {float(r['ratio']):.2f} | {f'{ours / t:.2f}' if t else '-'} |")
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(out) + "\n")
    plt = headless_pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2 if torch else 1, figsize=(13 if torch else 7, 4.5),
                             squeeze=False)
    for ax, base in zip(axes[0], ["OpenBLAS", "PyTorch"]):
        series = {}
        for r in rows:
            if r["pass"] == "decode":
                continue
            if base == "OpenBLAS":
                ratio = float(r["ratio"])
            elif r["dtype"] == "fp32" and key(r) in torch:
                ratio = float(r["flashcl"]) / torch[key(r)]
            else:
                continue
            label = f"{r['pass']} {r['dtype']} d{r['d']}{' causal' if r['causal'] == '1' else ''}"
            series.setdefault(label, []).append((int(r["N"]), ratio))
        colors = plt.cm.tab20.colors  # one colour per line: up to 16 lines a panel
        for n, (label, pts) in enumerate(sorted(series.items())):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                    color=colors[n % len(colors)],
                    linestyle="-" if label.startswith("fwd") else "--")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (B*N = 8192, H = 4)")
        ax.set_ylabel(f"flashcl / {base} (same cores, same run)")
        ax.legend(fontsize=6)
    fig.suptitle(meta.get("device", ""))
    fig.savefig(prefix + ".png", dpi=120, bbox_inches="tight")


if __name__ == "__main__":
    main()
