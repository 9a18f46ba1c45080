#!/usr/bin/env python3
"""smi_summary.py - power and clock while each marked loop ran.

Usage: smi_summary.py SMI_CSV MARKS_TXT

SMI_CSV is nvidia-smi's --format=csv sampling of timestamp, power.draw,
power.limit, clocks.sm and clocks_event_reasons.sw_power_cap (in that
order); MARKS_TXT has lines "== NAME start HH:MM:SS.ns" and "== NAME end
HH:MM:SS.ns" around each loop (bench/gpu_session.sh, step power).  For
each loop, over its last two thirds (the first third holds the program's
build and the clock's ramp): the samples, the median power and SM clock,
the lowest clock, and how many samples had the software power cap active.
"""
import csv
import datetime
import sys


def clock_time(text):
    text = text.strip()
    if " " in text:  # nvidia-smi's "YYYY/MM/DD HH:MM:SS.mmm"
        text = text.split(" ")[1]
    return datetime.datetime.strptime(text[:15], "%H:%M:%S.%f")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    samples = []
    with open(sys.argv[1]) as f:
        for row in list(csv.reader(f))[1:]:
            try:
                samples.append((clock_time(row[0]), float(row[1].split()[0]),
                                float(row[3].split()[0]), row[4].strip() == "Active"))
            except (IndexError, ValueError):
                continue  # a partial line at the sampler's end
    marks = [line.split() for line in open(sys.argv[2]) if line.startswith("== ")]
    print("| loop | samples | power W (median) | SM MHz (median) | SM MHz (lowest) | power cap active |")
    print("| --- | --- | --- | --- | --- | --- |")
    for start, end in zip(marks[0::2], marks[1::2]):
        a, b = clock_time(start[3]), clock_time(end[3])
        lo = a + (b - a) / 3
        sel = [s for s in samples if lo <= s[0] <= b]
        if not sel:
            print(f"| {start[1]} | 0 | | | | |")
            continue
        power = sorted(s[1] for s in sel)
        clock = sorted(s[2] for s in sel)
        cap = sum(1 for s in sel if s[3])
        print(f"| {start[1]} | {len(sel)} | {power[len(power) // 2]:.0f} | "
              f"{clock[len(clock) // 2]:.0f} | {clock[0]:.0f} | {cap} of {len(sel)} |")


if __name__ == "__main__":
    main()
