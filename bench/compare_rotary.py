"""The KV-cache call with rotary position embedding against the same call
without it, from one flashcl-bench-decode run with --rotary (issue 26's
target: at most 5% slower).

Usage: python3 bench/compare_rotary.py DECODE.csv OUT_PREFIX
Writes OUT_PREFIX.md: for each decode shape the time without rotary (the
faster of two alternated medians), with it, and the ratio; then the worst and
median ratio.  OUT_PREFIX.png (ratio against sk, one line per dtype, batch,
rows and cache) when matplotlib is there.  Prints the table too.
"""
import statistics
import sys

from results_csv import headless_pyplot, rows_of

TARGET = 1.05


def main():
    (meta, rows), prefix = rows_of(sys.argv[1]), sys.argv[2]
    plain = {}
    for r in rows:
        if r["kind"] == "decode":
            plain[(r["dtype"], int(r["B"]), int(r["sk"]), int(r["rows"]), int(r["page"]))] = r
    out = [f"device {meta.get('device')}, driver {meta.get('driver')}, commit {meta.get('commit')}, "
           f"{meta.get('date')}; rotary {meta.get('rotary')}; appended rows per call "
           f"{meta.get('appended rows per call', '0')}; medians of {meta.get('reps')}", "",
           "| dtype | B | sk | rows | page | variant | pack | splits | without us | with rotary us "
           "| ratio |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios, series = [], {}
    for r in rows:
        if r["kind"] != "decode-rotary":
            continue
        key = (r["dtype"], int(r["B"]), int(r["sk"]), int(r["rows"]), int(r["page"]))
        base = plain.get(key)
        if base is None:
            continue
        us, base_us = float(r["us"]), float(base["us"])
        ratio = us / base_us
        ratios.append(ratio)
        dt, B, sk, nr, page = key
        out.append(f"| {dt} | {B} | {sk} | {nr} | {page} | {r['variant']} | {r['pack']} "
                   f"| {r['splits']} | {base_us:.1f} | {us:.1f} | {ratio:.3f}"
                   f"{' (over 1.05)' if ratio > TARGET else ''} |")
        series.setdefault((dt, B, nr, page), []).append((sk, ratio))
    if ratios:
        out += ["", f"{len(ratios)} shapes: median ratio {statistics.median(ratios):.3f}, worst "
                    f"{max(ratios):.3f}; {sum(x > TARGET for x in ratios)} over the target "
                    f"{TARGET}."]
    text = "\n".join(out) + "\n"
    open(prefix + ".md", "w").write(text)
    print(text)
    plt = headless_pyplot()
    if plt is None or not series:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (dt, B, nr, page), pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                linestyle="-" if page == 0 else "--",
                label=f"{dt} B={B} rows={nr} {'contiguous' if page == 0 else 'page %d' % page}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("cached keys sk")
    ax.set_ylabel("time with rotary / without")
    ax.set_title("KV-cache call: rotary position embedding's cost")
    ax.axhline(TARGET, color="grey", linewidth=0.5)
    ax.axhline(1.0, color="grey", linewidth=0.5, linestyle=":")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)


if __name__ == "__main__":
    main()
