#!/usr/bin/env bash
# deps.sh - installs the Debian packages flashcl needs, only those missing.
#   tools/deps.sh build   compiler, CMake, OpenCL headers and ICD loader, PoCL
#   tools/deps.sh test    the above plus cmocka, Oclgrind, Open MPI and pkg-config (the
#                         package test builds a consumer with it), Mesa's rusticl
#                         (a second OpenCL implementation), and the Python
#                         packages python/tests and its install test use
#   tools/deps.sh bench   the build packages plus matplotlib (the benchmarks' plots)
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail

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
