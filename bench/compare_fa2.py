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
OURS.csv and SDPA.csv may each be rounds, comma-separated (OURS_1.csv,OURS_2.csv,...),
taken alternately in one call, as many of each: then every number is the
median over the rounds, each ratio the median of the rounds' own ratios (round
i's flashcl over round i's backend), and each round's ratios to FA2 and cuDNN
are shown beside them.
Writes OUT_PREFIX.md (one row per shape: TFLOP/s of each, flashcl / FA2 and
flashcl as a share of the tensor-core ceiling) and OUT_PREFIX.png (TFLOP/s
against N, one line per backend) when matplotlib is there.  Standard library
only for the table.
"""
import csv, statistics, sys

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


def median(values):
    """The median of the values that were measured (None and NaN left out), or None."""
    vals = [v for v in values if v is not None and v == v]
    return statistics.median(vals) if vals else None


def merge_rounds(ours_rounds, sdpa_rounds):
    """The rounds of both files (as many of each) as one table of each: {key: (TFLOP/s, path,
    standard, wall)} with each number the median over the rounds, and
    {(d, causal, N): {backend: (forward, backward)}} likewise; and the ratios
    {(pass, d, causal, N): {backend: [round i's flashcl / round i's backend]}}."""
    ours, sdpa, ratios = {}, {}, {}
    for key in ours_rounds[0]:
        per = [r[key] for r in ours_rounds if key in r]
        ours[key] = (median(row[0] for row in per), per[0][1], median(row[2] for row in per),
                     median(row[3] for row in per))
        p, d, c, n = key
        idx = 0 if p == "fwd" else 1
        for r, s in zip(ours_rounds, sdpa_rounds):  # round i with round i
            for name, val in s.get((d, c, n), {}).items():
                if key in r and val[idx]:
                    ratios.setdefault(key, {}).setdefault(name, []).append(r[key][0] / val[idx])
    for key in sdpa_rounds[0]:
        names = sdpa_rounds[0][key]
        sdpa[key] = {name: tuple(median(r.get(key, {}).get(name, (None, None))[i]
                                        for r in sdpa_rounds) for i in (0, 1))
                     for name in names}
    return ours, sdpa, ratios


def main():
    ours_paths, sdpa_paths, prefix = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3]
    if len(ours_paths) != len(sdpa_paths):
        sys.exit("compare_fa2.py: as many rounds of OURS as of SDPA, please")
    read = [read_ours(p) for p in ours_paths]
    dtype = read[0][1]
    ours, sdpa, ratios = merge_rounds([r[0] for r in read],
                                      [read_sdpa(p, dtype) for p in sdpa_paths])
    rounds = len(ours_paths)
    portable = read_ours(sys.argv[4])[0] if len(sys.argv) > 4 else {}
    spans = any(w != tf for tf, _, _, w in ours.values())
    lines = [f"storage {dtype}; TFLOP/s; tensor-core ceiling {MMA_CEILING_TFLOPS:.0f} (mma.sync alone)"
             + ("; flashcl: the device's span of each call (OpenCL profiling, as CUDA events time "
                "PyTorch), its wall clock from enqueue to clFinish beside it" if spans else ""), "",
             "| pass | d | causal | N | flashcl | flashcl (wall) | path | portable | standard | FA2 | cuDNN "
             "| mem-efficient | flashcl / FA2 | flashcl / cuDNN | % of ceiling |"
             + (" flashcl / FA2 (each round) | flashcl / cuDNN (each round) |" if rounds > 1 else ""),
             "| --- " * (17 if rounds > 1 else 15) + "|"]
    if rounds > 1:
        lines[0] += (f"; {rounds} rounds alternated in one call: each number the median over them, "
                     "each ratio the median of the rounds' own ratios")
    series = {}
    fmt = lambda x: "-" if x is None or x != x else f"{x:.1f}"
    for (p, d, c, n), (tf, variant, naive, wall) in sorted(ours.items()):
        backends = sdpa.get((d, c, n), {})
        idx = 0 if p == "fwd" else 1
        fa2 = backends.get("fa2", (None, None))[idx]
        cud = backends.get("cudnn", (None, None))[idx]
        mem = backends.get("memeff", (None, None))[idx]
        port = portable.get((p, d, c, n), (None, "", None))[0]
        per_round = ratios.get((p, d, c, n), {})
        r_fa2, r_cud = median(per_round.get("fa2", [])), median(per_round.get("cudnn", []))
        ratio = "-" if r_fa2 is None else f"{r_fa2:.2f}"
        ratio_cudnn = "-" if r_cud is None else f"{r_cud:.2f}"
        each = " | ".join(", ".join(f"{x:.2f}" for x in per_round.get(name, [])) or "-"
                          for name in ("fa2", "cudnn"))
        lines.append(f"| {p} | {d} | {c} | {n} | {tf:.1f} | {wall:.1f} | {variant} | {fmt(port)} | "
                     f"{fmt(naive)} | {fmt(fa2)} | {fmt(cud)} | {fmt(mem)} | {ratio} | {ratio_cudnn} | "
                     f"{100 * tf / MMA_CEILING_TFLOPS:.0f} |" + (f" {each} |" if rounds > 1 else ""))
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
