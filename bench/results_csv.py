"""The benchmarks' results files ('# key: value' lines, then CSV), and the
headless pyplot the scripts draw their plots with."""
import csv


def rows_of(path):
    """(meta dict, list of row dicts) of a results file."""
    meta, lines = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                k, _, v = line[1:].partition(":")
                meta[k.strip()] = v.strip()
            else:
                lines.append(line)
    return meta, list(csv.DictReader(lines))


def headless_pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed), or None,
    said on stdout, where matplotlib is missing: the tables are written
    either way."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no plot")
        return None
    return plt
