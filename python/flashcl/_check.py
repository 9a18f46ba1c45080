"""flashcl.check(): is flashcl right on this device?

It runs the program flashcl-check (tools/flashcl-check.c), the one
implementation of the check: forward, backward, FP8 and KV-cache calls on the
device's own tile pieces against a float64 reference on the host, one line
per check and a verdict.  The program is built with the library (CMake) and
installed beside it (cmake --install, the Debian package, and this package
when pip bundles the build)."""
import os
import shutil
import subprocess
import sys

from ._context import _device_indices
from ._lib import library_path

_HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = "flashcl-check"


class CheckResult:
    """What flashcl-check said: `passed` (also the truth value), `returncode`
    (0 passed, 1 a check failed, 2 it could not run), `lines` (its output)."""

    def __init__(self, returncode, lines):
        self.returncode = returncode
        self.lines = lines
        self.passed = returncode == 0

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return "CheckResult(passed=%r, %d lines)" % (self.passed, len(self.lines))


def _candidates():
    """Where flashcl-check is looked for, in order: $FLASHCL_CHECK; beside
    this package (bundled by setup.py); the build folder of the library in
    use (build/tools/, when it is the source tree's build/); the source
    tree's build/ when imported from python/; the PATH."""
    env = os.environ.get("FLASHCL_CHECK")
    if env:
        return [env]
    build = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build")
    found = [os.path.join(_HERE, PROGRAM),
             os.path.join(os.path.dirname(os.path.abspath(library_path)), "tools", PROGRAM),
             os.path.join(build, "tools", PROGRAM)]
    on_path = shutil.which(PROGRAM)
    return found + ([on_path] if on_path else [])


def program():
    """The path of the flashcl-check program that check() runs."""
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("flashcl: %s not found; tried %s. Build it with the library "
                            "(CMake target flashcl-check) or set FLASHCL_CHECK to its path."
                            % (PROGRAM, ", ".join(tried)))


def check(device=None, *, quick=False, out=sys.stdout):
    """Checks flashcl on one device against a float64 reference.

    device: None (FLASHCL_DEVICE, else the first GPU, else the first
    device), "P:D", (P, D) or an entry of flashcl.devices().  quick: fewer
    checks.  out: where each line goes as it comes (None: nowhere).
    Returns a CheckResult, true when every check passed."""
    platform, index = _device_indices(device)
    args = [program()] + (["--device", "%d:%d" % (platform, index)] if platform >= 0 else [])
    args += ["--quick"] if quick else []
    lines = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if out is not None:
                out.write(line)
                out.flush()
    return CheckResult(proc.returncode, lines)
