#!/usr/bin/env bash
# test.sh - the test suite: install what is missing, build with warnings as
# errors, run every test (PoCL, every emulated device profile, Oclgrind).
# FLASHCL_DEVICE=P:D runs the device tests on another device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFLASHCL_BUILD_TESTS=ON \
      -DCMAKE_C_FLAGS="-Werror" >/dev/null
cmake --build build -j "$(nproc)"
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 1500
# The device tests again on Mesa's rusticl (its llvmpipe CPU device), found
# by name; its kernel builds are slow, so the programs that check kernels
# on one device (not Oclgrind or packaging), and of those the ones that
# pass there in CI's time (NOTES.md, "rusticl", says what each costs: the
# first six 2 min 23 s together on 2 cores, ctest -j2; test_api,
# test_tensor_cores, test_cache, test_threads and test_kvcache 12, 26, 6, 6
# and 89 s of CPU more with Mesa's shader cache cold, and why test_profiles
# stays out).  Calls whose loops
# llvmpipe would end early are refused there, each as its plan query says;
# the tests check that and print each refusal.
rusticl=$(RUSTICL_ENABLE=llvmpipe clinfo -l 2>/dev/null |
          awk '/^Platform #[0-9]+: rusticl/ { sub(/#/, "", $2); sub(/:/, "", $2); print $2 ":0"; exit }')
if [ -n "$rusticl" ]; then
  echo "flashcl: the device tests on rusticl (FLASHCL_DEVICE=$rusticl)"
  RUSTICL_ENABLE=llvmpipe FLASHCL_DEVICE=$rusticl ctest --output-on-failure -j "$(nproc)" \
    --timeout 1500 -R '^(test_plan|test_errors|test_api|test_forward|test_fp8|test_backward|test_variants|test_tensor_cores|test_cache|test_threads|test_kvcache)$'
  # the user's check (flashcl-check) on the same device
  RUSTICL_ENABLE=llvmpipe FLASHCL_CACHE_DIR=off ./tools/flashcl-check --quick --device "$rusticl"
fi
# The device tests again on Intel's OpenCL CPU runtime (PyPI; tools/deps.sh
# installs it into build/intel-ocl).  Only these runs see it: OCL_ICD_VENDORS
# names its ICD folder alone, so it is platform 0 there and the runs above
# are unchanged.  Its kernel builds are slower than PoCL's, so the user's
# check (flashcl-check, every piece and call kind) and the programs it does
# not cover; NOTES.md ("Intel's CPU runtime in CI") says what each costs and
# why the others stay out.  Without a network it cannot be installed: the
# block is skipped, and the last line of this script says so.
skipped=()
intel_tests='test_errors|test_kvcache|flashcl_check'
if bash ../tools/deps.sh intel intel-ocl; then
  echo "flashcl: the device tests on Intel's OpenCL CPU runtime (FLASHCL_DEVICE=0:0)"
  OCL_ICD_VENDORS=$PWD/intel-ocl/icd FLASHCL_DEVICE=0:0 ctest --output-on-failure -j "$(nproc)" \
    --timeout 1500 -R "^($intel_tests)\$"
else
  skipped+=("the device tests on Intel's OpenCL CPU runtime (not installed: see above)")
fi
# the same again under the sanitizers, with injected faults and the fuzzer
cd .. && bash tools/sanitize.sh
for s in "${skipped[@]}"; do echo "flashcl: SKIPPED $s"; done
