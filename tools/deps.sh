#!/usr/bin/env bash
# deps.sh - installs the Debian packages flashcl needs, only those missing.
#   tools/deps.sh build   compiler, CMake, OpenCL headers and ICD loader, PoCL
#   tools/deps.sh test    the above plus cmocka, Oclgrind, Open MPI and pkg-config (the
#                         package test builds a consumer with it), Mesa's rusticl
#                         (a second OpenCL implementation), and the Python
#                         packages python/tests and its install test use
#   tools/deps.sh bench   the build packages plus matplotlib (the benchmarks' plots)
#   tools/deps.sh intel DIR
#                         Intel's OpenCL CPU runtime (PyPI), nothing system-wide: a venv
#                         in DIR/venv and DIR/icd/intel-cpu.icd, for a run that sets
#                         OCL_ICD_VENDORS=DIR/icd (that run sees Intel's platform alone).
#                         Exit status 3, with the reason, when it cannot be installed
#                         (no network): the caller skips its runs and says so.
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail

# Intel's CPU runtime, pinned; intel-opencl-rt does not declare intel-cmplr-lib-rt,
# which holds the libraries it links (libimf, libsvml; NOTES.md, "Intel").
intel_runtime() {
  local dir=$1 pins=(intel-opencl-rt==2026.2.0 intel-cmplr-lib-rt==2026.2.0)
  local lib=$dir/venv/lib/libintelocl.so
  if [ ! -f "$lib" ]; then
    echo "flashcl: installing Intel's OpenCL CPU runtime (${pins[*]}) into $dir/venv"
    rm -rf "$dir/venv"
    # a venv, not pip --target: --target drops the wheel's lib/ (the runtime itself)
    if ! python3 -m venv "$dir/venv" ||
       ! "$dir/venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >"$dir/pip.log" 2>&1 ||
       [ ! -f "$lib" ]; then
      echo "flashcl: Intel's OpenCL CPU runtime could not be installed: $(tail -n 1 "$dir/pip.log" 2>/dev/null)" >&2
      return 3
    fi
  fi
  # the wheel's own ICD file names a conda placeholder path: one of ours, by absolute path
  mkdir -p "$dir/icd"
  echo "$(cd "$dir" && pwd)/venv/lib/libintelocl.so" >"$dir/icd/intel-cpu.icd"
}
if [ "${1:-build}" = "intel" ]; then
  [ -n "${2:-}" ] || { echo "usage: tools/deps.sh intel DIR" >&2; exit 2; }
  mkdir -p "$2"
  intel_runtime "$2" || exit 3
  exit 0
fi

# libopenblas-dev: the CPU benchmark's baseline (bench/flashcl-bench-cpu), never linked
# into the library
want=(build-essential cmake ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libopenblas-dev)
if [ "${1:-build}" = "test" ]; then
  want+=(libcmocka-dev oclgrind pkg-config openmpi-bin libopenmpi-dev)
  # Mesa's rusticl: the device tests run again on its llvmpipe CPU device
  want+=(mesa-opencl-icd)
  # tools/sanitize.sh: the fuzzer is built with clang and its libFuzzer
  want+=(clang libclang-rt-dev)
  # the Python package's tests (python/tests) and its install test (pip, venv);
  # python3-torch (about 150 MB, 80 s) so the autograd Function is tested
  want+=(python3-numpy python3-pyopencl python3-pytest python3-pip python3-venv python3-torch)
fi
if [ "${1:-build}" = "bench" ]; then
  want+=(python3-matplotlib)
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "flashcl: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "flashcl: missing packages (${missing[*]}) and no root rights to install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
