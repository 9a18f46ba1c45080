"""Reading the benchmarks' results files: '# key: value' lines, then CSV."""
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
