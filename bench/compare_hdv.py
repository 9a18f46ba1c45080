"""Table and plot of a value head dim unlike the key's (DeepSeek's prefill,
d_qk 192 / d_v 128): flashcl beside its own d = 192 call and PyTorch SDPA.

Usage: python3 bench/compare_hdv.py OURS_DV.csv OURS_D.csv SDPA.csv OUT_PREFIX
  OURS_DV.csv  flashcl-bench --head-dim-v DV --out (V, O, dO, dV DV wide)
  OURS_D.csv   flashcl-bench --out, the same shapes with V as wide as K
  SDPA.csv     sdpa_backends.py --head-dim-v DV --csv, same machine, same run
Writes OUT_PREFIX.md (one row per pass, mask and N: milliseconds and TFLOP/s
of each, which SDPA backends ran, and two ratios: flashcl's DV call against
its d call, beside the ratio of their FLOPs, and flashcl against the fastest
SDPA backend that ran) and OUT_PREFIX.png (TFLOP/s against N) when
matplotlib is there.  FLOPs as flashcl-bench counts them (forward
2BHN^2(d + dv), backward 2BHN^2(3d + 2dv), halved when causal).
"""
import sys

from results_csv import headless_pyplot, rows_of

BACKENDS = ("fa2", "cudnn", "memeff")


def read_ours(path):
    """(head_dim_v or None, {(pass, causal, N): (ms, tflops, path, d, B, H)})."""
    meta, rows = rows_of(path)
    out = {}
    for r in rows:
        key = (r["pass"], int(r["causal"]), int(r["N"]))
        out[key] = (float(r["ours_ms"]), float(r["ours_tflops"]), r["variant"], int(r["d"]),
                    int(r["B"]), int(r["H"]))
    dv = meta.get("head_dim_v")
    return (int(dv) if dv else None), out


def read_sdpa(path):
    """{(pass, causal, N): {backend: (ms, tflops)}} of the rows with a dv column."""
    _, rows = rows_of(path)
    out = {}
    for r in rows:
        for p in ("fwd", "bwd"):
            key = (p, int(r["causal"]), int(r["N"]))
            out.setdefault(key, {})[r["backend"]] = (float(r[p + "_ms"]), float(r[p + "_tflops"]))
    return out


def flop_ratio(p, d, dv):
    """FLOPs of the dv call over those of the d call (flashcl-bench's count)."""
    return (d + dv) / (2.0 * d) if p == "fwd" else (3.0 * d + 2 * dv) / (5.0 * d)


def table(dv, ours, same, sdpa):
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"flashcl d_qk/d_v = d/{dv} beside its d/d call and PyTorch SDPA (ms; TFLOP/s "
             "in brackets; '-': the backend refused the shape)", "",
             "| pass | causal | N | B | H | flashcl d/dv | path | flashcl d/d | dv/d time "
             "(FLOPs) | " + " | ".join("SDPA " + b for b in BACKENDS) + " | SDPA best / flashcl |",
             "| --- " * (10 + len(BACKENDS)) + "|"]
    for key in sorted(ours, key=lambda k: (k[0] != "fwd", k[1], k[2])):
        ms, tf, path, d, b, h = ours[key]
        p, causal, n = key
        other = same.get(key)
        ratio = "-" if other is None else f"{ms / other[0]:.2f} ({flop_ratio(p, d, dv):.2f})"
        ran = sdpa.get(key, {})
        cells = [f"{fmt(ran[x][0])} ({ran[x][1]:.0f})" if x in ran else "-" for x in BACKENDS]
        best = min((v[0] for v in ran.values()), default=None)
        vs = "-" if best is None else f"{best / ms:.2f}x"
        lines.append(f"| {p} | {causal} | {n} | {b} | {h} | {fmt(ms)} ({tf:.1f}) | {path} | "
                     f"{'-' if other is None else fmt(other[0])} | {ratio} | "
                     + " | ".join(cells) + f" | {vs} |")
    lines += ["", "SDPA best / flashcl > 1: flashcl is faster by that factor."]
    return lines


def plot(prefix, dv, ours, same, sdpa):
    plt = headless_pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, p in zip(axes, ("fwd", "bwd")):
        for causal, style in ((0, "-"), (1, "--")):
            series = {f"flashcl d/{dv}": ours, "flashcl d/d": same}
            for b in BACKENDS:
                series["SDPA " + b] = {k: (v[b][0], v[b][1]) for k, v in sdpa.items() if b in v}
            for name, rows in series.items():
                pts = sorted((k[2], v[1]) for k, v in rows.items() if k[:2] == (p, causal))
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", label=f"{name}, causal {causal}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (B * N fixed)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(p)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=120)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    dv, ours = read_ours(sys.argv[1])
    _, same = read_ours(sys.argv[2])
    sdpa, prefix = read_sdpa(sys.argv[3]), sys.argv[4]
    if dv is None:
        sys.exit(f"{sys.argv[1]}: no '# head_dim_v' line (flashcl-bench --head-dim-v)")
    lines = table(dv, ours, same, sdpa)
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(prefix, dv, ours, same, sdpa)


if __name__ == "__main__":
    main()
