"""Side-by-side tables and a plot of flashcl-bench-decode against sdpa_decode.py,
both run in the same command on the same GPU.

Usage: python3 bench/compare_decode.py OURS.csv SDPA.csv OUT_PREFIX
Writes OUT_PREFIX.md: for each decode row flashcl's time, GB/s and share of
the copy bandwidth (its own measurement in the same run), PyTorch FA2's and
cuDNN's times and shares, and speed-up = the faster PyTorch time / ours; then
small-batch prefill with and without split-KV beside PyTorch.  OUT_PREFIX.png
(share of copy bandwidth against sk) when matplotlib is there.
"""
import sys

from results_csv import headless_pyplot, rows_of


def main():
    (meta, ours), (smeta, sdpa), prefix = rows_of(sys.argv[1]), rows_of(sys.argv[2]), sys.argv[3]
    torch_rows = {}
    for r in sdpa:
        key = (r["kind"], r["dtype"], int(r["B"]), int(r["sk"]), int(r["rows"]))
        torch_rows.setdefault(key, {})[r["backend"]] = r
    f1 = lambda x: "-" if x is None else f"{x:.1f}"
    out = [f"device {meta.get('device')}, driver {meta.get('driver')}, commit {meta.get('commit')}, "
           f"{meta.get('date')}; copy bandwidth {meta.get('copy_bandwidth_gbs')} GB/s (flashcl's run), "
           f"{smeta.get('copy_bandwidth_gbs')} GB/s (PyTorch's); medians", "",
           "## Decode (Hq 32, Hkv 8, d 128, causal; page 0 = contiguous cache)", "",
           "| dtype | B | sk | rows | page | variant | pack | splits | flashcl us | GB/s | % copy bw "
           "| FA2 us | FA2 % | cuDNN us | cuDNN % | speed-up vs faster |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    series = {}
    for r in ours:
        if r["kind"] != "decode":
            continue
        B, sk, nr, page = int(r["B"]), int(r["sk"]), int(r["rows"]), int(r["page"])
        t = torch_rows.get(("decode", r["dtype"], B, sk, nr), {})
        fa, cu = t.get("fa2"), t.get("cudnn")
        fa_us = float(fa["us"]) if fa else None
        cu_us = float(cu["us"]) if cu else None
        best = min(x for x in (fa_us, cu_us) if x is not None) if (fa_us or cu_us) else None
        us = float(r["us"])
        out.append(f"| {r['dtype']} | {B} | {sk} | {nr} | {page} | {r['variant']} | {r['pack']} | {r['splits']} "
                   f"| {us:.1f} | {float(r['gbs']):.0f} | {float(r['pct_copy_bw']):.1f} "
                   f"| {f1(fa_us)} | {fa['pct_copy_bw'] if fa else '-'} | {f1(cu_us)} | {cu['pct_copy_bw'] if cu else '-'} "
                   f"| {('%.2f' % (best / us)) if best else '-'} |")
        if page == 0:
            series.setdefault((r["dtype"], B, nr, "flashcl"), []).append((sk, float(r["pct_copy_bw"])))
            if best:
                bestbw = max(float(x["pct_copy_bw"]) for x in (fa, cu) if x)
                series.setdefault((r["dtype"], B, nr, "PyTorch best"), []).append((sk, bestbw))
    out += ["", "## Prefill, B = 1, H = 32, d = 128 (TFLOP/s; 'no split' is the launch before split-KV)", "",
            "| dtype | N | causal | flashcl | splits | flashcl no split | FA2 | cuDNN | flashcl / faster |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    pre = {}
    for r in ours:
        if r["kind"].startswith("prefill"):
            pre.setdefault((r["dtype"], int(r["sk"]), int(r["causal"])), {})[r["kind"]] = r
    for (dt, N, causal), v in sorted(pre.items()):
        t = torch_rows.get(("prefill" + ("-causal" if causal else ""), dt, 1, N, N), {})
        tf = lambda x: float(x["tflops"]) if x else None
        a, b = tf(v.get("prefill")), tf(v.get("prefill-nosplit"))
        fa, cu = tf(t.get("fa2")), tf(t.get("cudnn"))
        best = max(x for x in (fa, cu) if x is not None) if (fa or cu) else None
        out.append(f"| {dt} | {N} | {causal} | {f1(a)} | {v['prefill']['splits'] if 'prefill' in v else '-'} "
                   f"| {f1(b)} | {f1(fa)} | {f1(cu)} | {('%.2f' % (a / best)) if (a and best) else '-'} |")
    open(prefix + ".md", "w").write("\n".join(out) + "\n")
    plt = headless_pyplot()
    if plt is None:
        return
    dts = sorted({k[0] for k in series})
    fig, axes = plt.subplots(1, max(1, len(dts)), figsize=(6 * max(1, len(dts)), 4.5), squeeze=False)
    for ax, dt in zip(axes[0], dts):
        for (d, B, nr, who), pts in sorted(series.items()):
            if d != dt:
                continue
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle="-" if who == "flashcl" else "--", label=f"{who} B={B} rows={nr}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("cached keys sk")
        ax.set_ylabel("% of copy bandwidth")
        ax.set_title(f"decode, {dt}, contiguous cache")
        ax.axhline(80, color="grey", linewidth=0.5)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)


if __name__ == "__main__":
    main()
