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
# the same again under the sanitizers, with injected faults and the fuzzer
cd .. && bash tools/sanitize.sh
