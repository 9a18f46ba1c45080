"""Scaling table and plot of flashcl-bench-mpi runs on 1, 2, 4 ... ranks.

Usage: python3 bench/compare_mpi.py OUT_PREFIX RUN.csv [RUN.csv ...]
Writes OUT_PREFIX.md: for each N and rank count the forward, backward and
total times (the slowest rank's median), the speed-ups over one rank at the
same N (forward, backward, forward + backward), the parallel efficiency (of
the total), and each pass's time
per ring step split into compute, exposed communication and the time outside
the ring steps (the slowest rank's shares), for each form timed (host
arrays, or the cl_mem calls: `--form` of flashcl-bench-mpi); OUT_PREFIX.png
(speed-up against ranks, one line per N) when matplotlib is there.
"""
import sys

from results_csv import rows_of, write_table


def split(r, kind, ranks):
    """A pass's step time in ms and its shares: compute / wait / stage."""
    step_ms = 1000 * float(r[f"{kind}_s"]) / ranks
    if ranks == 1:
        return f"{step_ms:.0f} | (plain call)"
    wait = float(r[f"{kind}_wait_share"])
    stage = float(r.get(f"{kind}_stage_share") or "nan")
    if stage != stage:  # a file from before the stage column
        return f"{step_ms:.0f} | - / {100 * wait:.1f}% / -"
    text = f"{step_ms:.0f} | {100 * (1 - wait - stage):.1f}% / {100 * wait:.1f}% / {100 * stage:.1f}%"
    device = float(r.get(f"{kind}_device_share") or "nan")
    if device == device:  # the device's own timeline of the compute share
        gap = float(r[f"{kind}_gap_share"])
        host = 1 - wait - stage - device - gap  # in no step and waiting on no message
        text += f" (device {100 * device:.1f}% / gaps {100 * gap:.1f}% / host {100 * host:.1f}%)"
    home = float(r.get(f"{kind}_home_share") or "nan")
    if home == home:  # the backward's last hop, of its wait
        text += f"; last hop {100 * home:.1f}%"
    copy = float(r.get(f"{kind}_copy_gbs") or "nan")
    if copy == copy:  # the rate of the ranks' own copies
        text += f"; copies {copy:.1f} GB/s"
    return text


def main():
    prefix, paths = sys.argv[1], sys.argv[2:]
    rows, meta = {}, {}
    for p in paths:
        m, rs = rows_of(p)
        meta = meta or m
        for r in rs:
            form = r.get("form") or "host"
            threads = int(r.get("copy_threads") or 0)
            if threads > 0:  # the ranks' own copies (FLASHCL_MPI_COPY_THREADS)
                form += f", {threads}-thread copies"
                piece = int(r.get("upload_piece") or 0)
                if piece > 0:  # uploads streamed as read (FLASHCL_MPI_UPLOAD_PIECE)
                    form += f", uploads in {piece / 2**20:g} MiB pieces"
            key = (form, int(r["N"]), int(r["ranks"]))
            rows.setdefault(key, r)  # the first file wins
    out = [f"device {meta.get('device')}, driver {meta.get('driver')}, commit {meta.get('commit')}, "
           f"{meta.get('date')}; B 1, causal, one rank per device; medians, slowest rank", "",
           "A step's time (the call's time over its ranks, which are its steps) splits into the "
           "steps' compute, exposed communication (waiting on messages after the device finished "
           "the step: `wait`) and the time outside the ring steps (checks, copies to and from the "
           "host, the own shard's load, the final write: `stage`); where the run recorded the "
           "device's own timeline, the compute share is split again into the steps' device work "
           "(from a step's K/V shard on the device to its last kernel's end) and the device's "
           "time between steps (waiting for the next shard's upload, the sums' adds), and what "
           "is left is `host`: time in no step on the device and waiting on no message (before "
           "the first step, after the last; flashcl-bench-mpi --trace places it); the "
           "backward's `last hop` is the part of its wait spent sending the finished dK/dV sums "
           "home after the last step, and `copies` the rate of the ranks' own copies (where they "
           "moved the messages); one rank is the plain call.", "",
           "| form | N | ranks | fwd s | bwd s | fwd+bwd s | speed-up fwd / bwd / total | efficiency "
           "| fwd step ms | fwd compute / wait / stage | bwd step ms | bwd compute / wait / stage |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    series = {}
    for (form, n, ranks) in sorted(rows):
        r = rows[(form, n, ranks)]
        total = float(r["fwd_s"]) + float(r["bwd_s"])
        base = rows.get((form.split(",")[0], n, 1))  # one rank: the plain call, no copies
        speedup = (float(base["fwd_s"]) + float(base["bwd_s"])) / total if base else None
        passes = (f"{float(base['fwd_s']) / float(r['fwd_s']):.2f} / "
                  f"{float(base['bwd_s']) / float(r['bwd_s']):.2f} / " if base else "")
        out.append(f"| {form} | {n} | {ranks} | {float(r['fwd_s']):.3f} | {float(r['bwd_s']):.3f} | {total:.3f} | "
                   + (f"{passes}{speedup:.2f}x | {100 * speedup / ranks:.0f}% | " if speedup else "- | - | ")
                   + f"{split(r, 'fwd', ranks)} | {split(r, 'bwd', ranks)} |")
        if speedup:
            series.setdefault((form, n), []).append((ranks, speedup))
    plt = write_table(prefix, out)
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    top = max((r for pts in series.values() for r, _ in pts), default=1)
    ax.plot([1, top], [1, top], "k:", label="linear")
    for (form, n), pts in sorted(series.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"N = {n} ({form})")
    ax.set_xlabel("ranks (devices)")
    ax.set_ylabel("speed-up over one device (fwd + bwd)")
    ax.set_title(f"ring attention, {meta.get('device')}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=120)


if __name__ == "__main__":
    main()
