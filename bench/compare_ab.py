"""Side by side: flashcl-bench run under two or more settings, in rounds
alternated in one call (A B A B ...), so every setting sees the same
machine.  Per shape: each setting's TFLOP/s (median over its rounds; the
device span where the files have one, flashcl-bench --profile, else the
wall clock), its piece, and each later setting's ratio to the first, round
by round (round r of a setting against round r of the first).

Usage: python3 bench/compare_ab.py OUT_PREFIX LABEL=A1.csv,A2.csv LABEL=B1.csv,B2.csv ...
  The first setting is the baseline; files of one setting are its rounds,
  in order.  Shapes: (pass, dtype, d, causal, N) rows found in every file
  of every setting (the dtype column too, so e4m3 against fp16 compares
  the same shapes in two storage types).
Writes OUT_PREFIX.md (the table and where each setting's files came from)
and OUT_PREFIX.png (TFLOP/s against N, a line per setting, a panel per
(pass, d, causal)) when matplotlib is there.  Standard library only for the
table.
"""
import statistics
import sys

from results_csv import rows_of, write_table


def read_round(path):
    """meta, {(pass, d, causal, N): (TFLOP/s, dtype, piece)} of one file."""
    meta, rows = rows_of(path)
    out = {}
    for r in rows:
        dev = float(r.get("ours_device_tflops") or "nan")
        tf = dev if dev == dev else float(r["ours_tflops"])
        key = (r["pass"], int(r["d"]), int(r["causal"]), int(r["N"]))
        out[key] = (tf, r["dtype"], r["variant"])
    return meta, out


def main(argv):
    if len(argv) < 4 or any("=" not in a for a in argv[2:]):
        print(__doc__)
        return 2
    prefix = argv[1]
    settings = []  # (label, [rounds: {key: (tf, dtype, piece)}], [meta])
    for arg in argv[2:]:
        label, _, files = arg.partition("=")
        rounds, metas = [], []
        for path in files.split(","):
            meta, rows = read_round(path)
            rounds.append(rows)
            metas.append((path, meta))
        settings.append((label, rounds, metas))
    keys = None
    for _, rounds, _ in settings:
        for rows in rounds:
            keys = set(rows) if keys is None else keys & set(rows)
    keys = sorted(keys or [])
    if not keys:
        print("no shape is in every file")
        return 1
    base_label, base_rounds, _ = settings[0]
    head = ["pass", "d", "causal", "N"]
    for label, _, _ in settings:
        head += [label + " TFLOP/s", label + " piece"]
    for label, _, _ in settings[1:]:
        head += ["%s / %s (median)" % (label, base_label), "%s / %s (each round)" % (label, base_label)]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    medians = {}
    for key in keys:
        cells = [key[0], str(key[1]), str(key[2]), str(key[3])]
        for label, rounds, _ in settings:
            tf = statistics.median(rows[key][0] for rows in rounds)
            medians[(label, key)] = tf
            pieces = sorted({"%s %s" % (rows[key][1], rows[key][2]) for rows in rounds})
            cells += ["%.4g" % tf, ", ".join(pieces)]
        for label, rounds, _ in settings[1:]:
            ratios = [rows[key][0] / base[key][0]
                      for rows, base in zip(rounds, base_rounds) if base[key][0] > 0]
            cells += ["%.2f" % statistics.median(ratios) if ratios else "-",
                      ", ".join("%.2f" % x for x in ratios)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for label, _, metas in settings:
        for path, meta in metas:
            lines.append("- %s: %s (device %s, driver %s, commit %s, %s)" % (
                label, path, meta.get("device", "?"), meta.get("driver", "?"),
                meta.get("commit", "?"), meta.get("date", "?")))
    plt = write_table(prefix, lines)
    if plt is None:
        return 0
    panels = sorted({(k[0], k[1], k[2]) for k in keys})
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.5), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        ns = sorted(k[3] for k in keys if k[:3] == panel)
        for label, _, _ in settings:
            ax.plot(ns, [medians[(label, panel + (n,))] for n in ns], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_title("%s d %d causal %d" % panel)
        ax.set_xlabel("N")
        ax.set_ylabel("TFLOP/s")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
