#!/usr/bin/env python3
"""cache_ptx_report.py - what ptxas makes of the PTX NVIDIA's driver built.

flashcl keeps each program it builds on a GPU in its disk cache
(src/programs/disk_cache.c): on NVIDIA the entry's binary is the PTX the
driver's OpenCL compiler wrote (after the library's sm_90a rewrite, where
the plan takes it).  Clang's offline PTX (tools/wgmma_ptx_check.sh) is
another compiler's: for the same forward it read 203 registers where the
driver's PTX reads 106 (NOTES.md, run 73).  This tool reads a cache folder
brought back from the GPU machine (FLASHCL_CACHE_DIR pointed into $OUT on a
run there: bench/gpu_session.sh's `driver-ptx` step), writes each entry's PTX
beside it (NAME.ptx) and prints, per entry and kernel, the tile options of
its build and ptxas's registers and spill bytes for the entry's target
(sm_90a, sm_80, ...).  With --sass and nvdisasm (NVDISASM, or on the path;
PyPI's nvidia-cuda-nvdisasm has it) also each kernel's spill instructions
(STL, LDL) in the SASS.

Usage: tools/cache_ptx_report.py CACHE_DIR [--sass] [--ptxas PATH]
Exit status 1 when an entry cannot be read or ptxas refuses one.
"""
import argparse
import glob
import os
import re
import shutil
import struct
import subprocess
import sys

# an entry: "FCLK" | format (u32) | key length (u32) | binary length (u64) |
# checksum (u64) | key | binary (disk_cache.c)
HEADER = struct.Struct("<4sIIQQ")
# the build options worth a column: the program's kernel (kernel_options.c's
# macros), the tile and what selects the piece
OPTIONS = ("FCL_KERNEL_FORWARD", "FCL_KERNEL_DKDV", "FCL_KERNEL_DQ", "FCL_DKDV_PART",
           "FCL_DTYPE", "D_PAD", "BR", "BC", "FCL_WGMMA", "FCL_WG_TMA", "FCL_WHOLE_KEYS",
           "FCL_FEATURES")


def read_entry(path):
    """The entry's key (text) and binary, or raises ValueError."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER.size:
        raise ValueError("shorter than the header")
    magic, _fmt, key_len, bin_len, _sum = HEADER.unpack_from(data)
    if magic != b"FCLK" or HEADER.size + key_len + bin_len > len(data):
        raise ValueError("not a whole flashcl cache entry")
    key = data[HEADER.size:HEADER.size + key_len].decode("utf-8", "replace")
    binary = data[HEADER.size + key_len:HEADER.size + key_len + bin_len]
    return key, binary.rstrip(b"\0")


def tile_of(key):
    """The build options of OPTIONS found in the key, as NAME=VALUE."""
    found = []
    for name in OPTIONS:
        m = re.search(r"-D%s=(\S+)" % name, key)
        if m:
            found.append("%s=%s" % (name.replace("FCL_", ""), m.group(1)))
    return " ".join(found)


def ptxas_report(ptxas, ptx_path, target, cubin):
    """{kernel: (registers, spill stores, spill loads)} and ptxas's output.

    Offline ptxas refuses more than 48 KiB of static shared memory, which the
    driver's own compilation accepts (the mma.sync pieces declare their
    tiles statically): that error alone still reports every kernel, with no
    cubin written."""
    run = subprocess.run([ptxas, "-arch=" + target, "-v", "-o", cubin, ptx_path],
                         capture_output=True, text=True)
    out = run.stdout + run.stderr
    errors = [e for e in re.findall(r"ptxas error\s*: (.*)", out)
              if "uses too much shared data" not in e]
    if run.returncode != 0 and (errors or "Compiling entry function" not in out):
        return None, out
    kernels, current = {}, None
    for line in out.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
            kernels[current] = [0, 0, 0]
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            kernels[current][1:] = [int(m.group(1)), int(m.group(2))]
        m = re.search(r"Used (\d+) registers", line)
        if m:
            kernels[current][0] = int(m.group(1))
    return kernels, out


def sass_spills(nvdisasm, cubin):
    """{kernel: (STL, LDL)}: each kernel's spill instructions in the cubin's
    SASS (nvdisasm puts each kernel in a section .text.NAME), or None."""
    run = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True)
    if run.returncode != 0:
        return None
    counts = {}
    sections = re.findall(r"^\.text\.(\w+):\n(.*?)(?=^\s*//-+ \.text\.|\Z)", run.stdout,
                          re.M | re.S)
    for kernel, body in sections:
        counts[kernel] = (len(re.findall(r"\bSTL\b", body)), len(re.findall(r"\bLDL\b", body)))
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache_dir")
    ap.add_argument("--sass", action="store_true", help="count STL/LDL with nvdisasm")
    ap.add_argument("--ptxas", default=os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas"))
    args = ap.parse_args()
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if args.sass and not nvdisasm:
        print("--sass: no nvdisasm (set NVDISASM)", file=sys.stderr)
        return 1
    entries = sorted(glob.glob(os.path.join(args.cache_dir, "flashcl-*.bin")))
    if not entries:
        print("no cache entries in %s" % args.cache_dir, file=sys.stderr)
        return 1
    failed = 0
    print("| entry | build | kernel | registers | spill stores / loads (bytes)%s |"
          % (" | STL / LDL" if args.sass else ""))
    print("| --- | --- | --- | --- | ---%s |" % (" | ---" if args.sass else ""))
    for path in entries:
        name = os.path.basename(path)[:-4]
        try:
            key, binary = read_entry(path)
        except (OSError, ValueError) as e:
            print("%s: %s" % (path, e), file=sys.stderr)
            failed = 1
            continue
        m = re.search(rb"^\.target\s+(sm_\w+)", binary, re.M)
        if not m:
            print("%s: not PTX (another vendor's binary?)" % path, file=sys.stderr)
            continue
        ptx = path[:-4] + ".ptx"
        with open(ptx, "wb") as f:
            f.write(binary)
        cubin = path[:-4] + ".cubin"
        if os.path.exists(cubin):
            os.remove(cubin)  # a refused program writes none: no earlier run's SASS
        kernels, out = ptxas_report(args.ptxas, ptx, m.group(1).decode(), cubin)
        if kernels is None:
            print("%s: ptxas refused it:\n%s" % (path, out), file=sys.stderr)
            failed = 1
            continue
        sass = sass_spills(nvdisasm, cubin) if args.sass and os.path.exists(cubin) else None
        for kernel, (regs, st, ld) in sorted(kernels.items()):
            extra = ""
            if args.sass:
                extra = " | %s" % ("%d / %d" % sass[kernel] if sass and kernel in sass else "?")
            print("| %s | %s | %s | %d | %d / %d%s |" % (name, tile_of(key), kernel, regs, st, ld,
                                                          extra))
    return failed


if __name__ == "__main__":
    sys.exit(main())
