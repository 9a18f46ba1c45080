"""Table and plot of multi-head latent attention decoding (d 576, dv 512,
one latent cache shared by Hq query heads): flashcl on the shared cache,
flashcl on two caches holding the same K and V (K 576 wide, V a 512-wide
copy: what the call cost before the shared cache), and PyTorch doing the
same arithmetic with matmuls, each beside the copy bandwidth of its run.

Usage: python3 bench/compare_mla.py SHARED.csv TWO.csv TORCH.csv OUT_PREFIX
  SHARED.csv  flashcl-bench-decode --shared-kv --head-dim 576 --head-dim-v 512 --out
              (several files, one per --heads-q, separated by commas)
  TWO.csv     the same without --shared-kv (two caches; commas likewise)
  TORCH.csv   sdpa_mla.py --csv, same machine, same session
Writes OUT_PREFIX.md (per shape: microseconds, GB/s of the bytes moved, %
of the copy bandwidth, TFLOP/s, the shared call against two caches, and
PyTorch's time over ours) and OUT_PREFIX.png (GB/s against sk) when
matplotlib is there.  Bytes moved: the cache once, Q and O (the two-cache
rows also count V's copy).
"""
import os
import sys

from results_csv import rows_of, write_table


def read(paths):
    """(meta of the first, {(dtype, B, Hq, sk, rows): row}) of comma-separated results files."""
    meta, out = None, {}
    for path in paths.split(","):
        if not os.path.exists(path):  # a run that failed: its columns are '-'
            print(f"{path}: missing")
            continue
        m, rows = rows_of(path)
        meta = meta or m
        out.update({(r["dtype"], int(r["B"]), int(r["Hq"]), int(r["sk"]), int(r["rows"])): r
                    for r in rows if r["kind"] in ("mla", "decode")})
    return meta or {}, out


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    meta, shared = read(sys.argv[1])
    _, two = read(sys.argv[2])
    tmeta, torch_rows = read(sys.argv[3])
    prefix = sys.argv[4]
    lines = [f"MLA decoding, d 576 / dv 512, one latent cache ({meta.get('device', '?')}, "
             f"driver {meta.get('driver', '?')}, commit {meta.get('commit', '?')}; copy bandwidth "
             f"{meta.get('copy_bandwidth_gbs', '?')} GB/s ours, {tmeta.get('copy_bandwidth_gbs', '?')} "
             "GB/s PyTorch's run)", "",
             "| dtype | B | Hq | sk | rows | page | flashcl shared us | GB/s | % copy | TFLOP/s | piece "
             "| two caches us | two / shared | torch us | GB/s | % copy | torch / flashcl |",
             "| --- " * 17 + "|"]
    for key in sorted(shared):
        r = shared[key]
        t, p = two.get(key), torch_rows.get(key)
        us = float(r["us"])
        cells = [key[0], str(key[1]), str(key[2]), str(key[3]), str(key[4]), r["page"], f"{us:.1f}",
                 r["gbs"], r["pct_copy_bw"], r["tflops"], r["variant"],
                 t["us"] if t else "-", f"{float(t['us']) / us:.2f}" if t else "-",
                 p["us"] if p else "-", p["gbs"] if p else "-", p["pct_copy_bw"] if p else "-",
                 f"{float(p['us']) / us:.2f}" if p else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "two / shared > 1: the shared cache's one load per key tile saves that factor; "
              "torch / flashcl > 1: flashcl is faster by that factor."]
    plt = write_table(prefix, lines)
    if plt is None:
        return
    heads = sorted({k[2] for k in shared})
    fig, axes = plt.subplots(1, len(heads), figsize=(5.5 * len(heads), 4), squeeze=False)
    for ax, h in zip(axes[0], heads):
        for name, rows, style in (("flashcl shared", shared, "-"), ("flashcl two caches", two, ":"),
                                  ("torch matmul", torch_rows, "--")):
            for b in sorted({k[1] for k in shared}):
                pts = sorted((k[3], float(v["gbs"])) for k, v in rows.items() if k[1] == b and k[2] == h)
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", label=f"{name}, B={b}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("cached tokens per sequence")
        ax.set_ylabel("GB/s (cache once + Q + O)")
        ax.set_title(f"Hq = {h}")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=120)


if __name__ == "__main__":
    main()
