"""A table and a plot of flashcl-bench-sinks: the cost of attention sinks
against the same call without, forward and backward (issue 26's target:
at most 5%).

Usage: python3 bench/compare_sinks.py RESULTS.csv OUT_PREFIX
Writes OUT_PREFIX.md (every row, and the worst cost of each direction
against the target) and OUT_PREFIX.png (the cost in % per shape, forward and
backward, causal or not) when matplotlib is there (tools/deps.sh bench).
"""
import sys

from results_csv import rows_of, write_table

TARGET_PCT = 5.0


def main():
    meta, rows = rows_of(sys.argv[1])
    prefix = sys.argv[2]
    lines = [f"# Attention sinks: cost against the same call without ({meta.get('device', '?')})",
             "", f"{meta.get('date', '')}, commit {meta.get('commit', '')}; "
             f"{meta.get('setup', '')}", "",
             "| d | N | B | H | causal | fwd ms | fwd + sinks ms | fwd cost | bwd ms "
             "| bwd + sinks ms | bwd cost |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['d']} | {r['N']} | {r['B']} | {r['H']} | {r['causal']} "
                     f"| {float(r['fwd_ms']):.3f} | {float(r['fwd_sinks_ms']):.3f} "
                     f"| {float(r['fwd_cost_pct']):+.1f}% | {float(r['bwd_ms']):.3f} "
                     f"| {float(r['bwd_sinks_ms']):.3f} | {float(r['bwd_cost_pct']):+.1f}% |")
    for way in ("fwd", "bwd"):
        worst = max(rows, key=lambda r: float(r[way + "_cost_pct"]))
        cost = float(worst[way + "_cost_pct"])
        lines.append(f"\nWorst {way} cost: {cost:+.1f}% (d {worst['d']}, N {worst['N']}, causal "
                     f"{worst['causal']}): {'within' if cost <= TARGET_PCT else 'MISSES'} the "
                     f"{TARGET_PCT:.0f}% target.")
    plt = write_table(prefix, lines)
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, way in zip(axes, ("fwd", "bwd")):
        for causal in ("0", "1"):
            for d in sorted({r["d"] for r in rows}, key=int):
                sel = [r for r in rows if r["causal"] == causal and r["d"] == d]
                ax.plot([int(r["N"]) for r in sel], [float(r[way + "_cost_pct"]) for r in sel],
                        marker="o", label=f"d {d}{', causal' if causal == '1' else ''}")
        ax.axhline(TARGET_PCT, color="red", linestyle="--", linewidth=1, label="target")
        ax.axhline(0, color="gray", linewidth=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N")
        ax.set_title("forward" if way == "fwd" else "backward (with dsinks)")
    axes[0].set_ylabel("time with sinks / without - 1 (%)")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"Attention sinks, fp16, {meta.get('device', '?')}")
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)


if __name__ == "__main__":
    main()
