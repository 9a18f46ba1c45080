#!/usr/bin/env bash
# test.sh - the test suite: install what is missing, build with warnings as
# errors, run every test (PoCL, every emulated device profile, Oclgrind).
# FLASHCL_DEVICE=P:D runs the device tests on another device.
set -euo pipefail
cd "$(dirname "$0")/.."
# each block's wall time, for NOTES.md's table of CI's time
mark=$SECONDS
took() { echo "flashcl: $1 took $((SECONDS - mark)) s"; mark=$SECONDS; }
bash tools/deps.sh test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFLASHCL_BUILD_TESTS=ON \
      -DCMAKE_C_FLAGS="-Werror" >/dev/null
cmake --build build -j "$(nproc)"
took "configure and build"
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1500
took "the tests on the default device"
# Every device test again on the other implementations here, each block with
# ctest -j2 in the order of the costs the PoCL run above recorded (longest
# first).  A block runs every test that takes a device but those named in its
# `out` list, each there for a reason NOTES.md ("Where CI's time goes") gives
# with its measured cost; the Oclgrind checks (Oclgrind is its own device),
# the packaging tests (test_package, test_python_install: what is
# installed, not how a device computes) and the GPU timestamp tool's
# plumbing (test_stamps_emulated) run on the default device only.
not_device='test_oclgrind_races|test_oclgrind_uninitialized|test_oclgrind_wgmma_races|test_oclgrind_wgmma_uninitialized|test_package|test_python_install|test_stamps_emulated'
other_device_tests() { # <label> <out: regex of names> <env...>
  local label=$1 out=$2
  shift 2
  echo "flashcl: the device tests on $label (out here: ${out//|/, })"
  env "$@" ctest --output-on-failure -j "$(nproc)" --timeout 1500 -E "^($not_device|$out)\$"
  took "the device tests on $label"
}
# Mesa's rusticl (its llvmpipe CPU device), found by name.  Its kernel
# builds are slow; Mesa's shader cache (~/.cache/mesa_shader_cache) shares
# them between the programs of a run.  Calls whose loops llvmpipe would end
# early are refused there, each as its plan query says; the tests check that
# and print each refusal.  Out, for CI's time (CPU seconds cold, NOTES.md):
# test_profiles (every emulated GPU profile's large tiles compiled by
# llvmpipe: 356), test_nonfinite (about 200), test_python (about 150; the
# same calls as the C tests, through the package), test_mpi_np2, _np3 and
# _np3_copy (the ring over 2 and 3 ranks; np1 runs).
rusticl=$(RUSTICL_ENABLE=llvmpipe clinfo -l 2>/dev/null |
          awk '/^Platform #[0-9]+: rusticl/ { sub(/#/, "", $2); sub(/:/, "", $2); print $2 ":0"; exit }')
if [ -n "$rusticl" ]; then
  other_device_tests "rusticl (FLASHCL_DEVICE=$rusticl)" \
    'test_profiles|test_nonfinite|test_python|test_mpi_np2|test_mpi_np3|test_mpi_np3_copy' \
    RUSTICL_ENABLE=llvmpipe FLASHCL_DEVICE="$rusticl"
fi
# Intel's OpenCL CPU runtime (PyPI; tools/deps.sh installs it into
# build/intel-ocl).  Only these runs see it: OCL_ICD_VENDORS names its ICD
# folder alone, so it is platform 0 there and the runs above are unchanged.
# Its own TBB is loaded first: Debian's (python3-torch loads it in
# test_python) lacks a symbol the runtime needs, and the platform would
# vanish.  Its kernel builds are the slowest here and it keeps none on disk.
# Out, by cost (CPU seconds cold, NOTES.md): test_plan (over 237),
# test_forward, test_backward, test_variants, test_tensor_cores (177),
# test_fp8 (119), test_profiles, test_nonfinite (172), test_mpi_np2,
# _np3 and _np3_copy (36 and more).  flashcl_check covers the forward, backward and
# KV-cache calls and every piece there.  Without a network it cannot be
# installed: the block is skipped, and the last line of this script says so.
skipped=()
if bash ../tools/deps.sh intel intel-ocl; then
  other_device_tests "Intel's OpenCL CPU runtime (FLASHCL_DEVICE=0:0)" \
    'test_plan|test_forward|test_backward|test_variants|test_tensor_cores|test_fp8|test_profiles|test_nonfinite|test_mpi_np2|test_mpi_np3|test_mpi_np3_copy' \
    OCL_ICD_VENDORS="$PWD/intel-ocl/icd" FLASHCL_DEVICE=0:0 LD_PRELOAD="$PWD/intel-ocl/venv/lib/libtbb.so.12"
else
  skipped+=("the device tests on Intel's OpenCL CPU runtime (not installed: see above)")
fi
# the same again under the sanitizers, with injected faults and the fuzzer
cd .. && bash tools/sanitize.sh
took "the sanitizers, faults and fuzzer"
for s in "${skipped[@]}"; do echo "flashcl: SKIPPED $s"; done
