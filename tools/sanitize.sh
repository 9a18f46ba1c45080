#!/usr/bin/env bash
# sanitize.sh - the library and its tests built again (build-asan/) with
# AddressSanitizer, UndefinedBehaviorSanitizer (-fno-sanitize-recover=all:
# any undefined behaviour fails) and LeakSanitizer, and the tests that cover
# the host code run under them.  tools/test.sh calls it; it expects
# tools/deps.sh test.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFLASHCL_BUILD_TESTS=ON \
      -DFLASHCL_BUILD_BENCH=OFF -DFLASHCL_BUILD_TOOLS=OFF -DFLASHCL_FAULT_TESTS=ON \
      -DCMAKE_C_FLAGS="-Werror -O1 -fno-omit-frame-pointer $san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
cmake --build build-asan -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1
export LSAN_OPTIONS=suppressions=$root/tools/lsan.supp
# The programs whose time goes to host code, and test_faults (every OpenCL
# call and host allocation of a context, a forward, a backward and a
# KV-cache decode failed in turn).  The others (test_backward, test_variants,
# test_kvcache, test_tensor_cores) spend minutes in PoCL's kernels, which
# the sanitizers do not see, on host paths that these take.
(cd build-asan && ctest --output-on-failure -j "$(nproc)" --timeout 900 \
   -R '^(test_errors|test_api|test_plan|test_profiles|test_cache|test_forward|test_faults)$')
