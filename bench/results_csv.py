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


def write_table(prefix, lines):
    """Writes the table's lines to PREFIX.md and prints them; returns
    headless_pyplot() for the plot that goes beside it (None: no plot)."""
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return headless_pyplot()


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
