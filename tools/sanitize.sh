#!/usr/bin/env bash
# sanitize.sh - the library and its tests built again (build-asan/) with
# AddressSanitizer, UndefinedBehaviorSanitizer (-fno-sanitize-recover=all:
# any undefined behaviour fails) and LeakSanitizer, and the tests that cover
# the host code run under them; test_threads under ThreadSanitizer
# (build-tsan/); then the fuzzer's bounded run (clang, build-fuzz/).
# tools/test.sh calls it; it expects tools/deps.sh test.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFLASHCL_BUILD_TESTS=ON \
      -DFLASHCL_BUILD_BENCH=OFF -DFLASHCL_BUILD_TOOLS=OFF -DFLASHCL_FAULT_TESTS=ON \
      -DCMAKE_C_FLAGS="-Werror -O1 -fno-omit-frame-pointer $san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
cmake --build build-asan -j "$(nproc)"
# The sanitized programs run on PoCL: the ICD loader is shown PoCL's ICD
# file alone, so Mesa's (rusticl, Clover) are not loaded.  Their exit-time
# leaks sit behind Rust frames the fast unwinder cannot walk, and the slow
# one (fast_unwind_on_malloc=0) made test_faults, whose ~570 runs each build
# kernels in PoCL's in-process compiler, run past its time limit.
icd=$root/build-asan/icd
mkdir -p "$icd"
for f in /etc/OpenCL/vendors/pocl*.icd; do [ -e "$f" ] && cp "$f" "$icd/"; done
export OCL_ICD_VENDORS=$icd
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1
# use_tls=0: LeakSanitizer's tracer crashed (signal 11) walking a dynamic-TLS
# entry with a bogus range ("DTLS 7 at 0x749-0x80000184b") after test_errors
# had passed all its tests; without TLS as roots it can only report more
# leaks (a pointer kept only in TLS), never fewer.
export LSAN_OPTIONS=suppressions=$root/tools/lsan.supp:print_suppressions=0:use_tls=0
# The programs whose time goes to host code, test_sinks (its refused host
# calls must not read their poisoned arrays), and test_faults (every OpenCL
# call and host allocation of a context, a forward, a backward and a
# KV-cache decode failed in turn).  The others (test_backward, test_variants,
# test_kvcache, test_tensor_cores) spend minutes in PoCL's kernels, which
# the sanitizers do not see, on host paths that these and the fuzzer take.
(cd build-asan && ctest --output-on-failure -j "$(nproc)" --timeout 900 \
   -R '^(test_errors|test_api|test_plan|test_profiles|test_cache|test_forward|test_sinks|test_faults)$')

# ThreadSanitizer (build-tsan/): four contexts in four threads, forward and
# backward 20 times each (test_threads).  PoCL is not instrumented; TSan sees
# the library's memory and every pthread call, PoCL's included.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DFLASHCL_BUILD_TESTS=ON \
      -DFLASHCL_BUILD_BENCH=OFF -DFLASHCL_BUILD_TOOLS=OFF \
      -DCMAKE_C_FLAGS="-Werror -O1 -fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
      >/dev/null
cmake --build build-tsan -j "$(nproc)" --target test_threads
TSAN_OPTIONS=halt_on_error=1 FLASHCL_CACHE_DIR=off build-tsan/tests/test_threads

# The fuzzer (tests/fuzz/fuzz_attention.c): clang with libFuzzer and the
# same sanitizers, a minute from the seed corpus in tests/fuzz/corpus (new
# inputs go to build-fuzz/inputs; a failing one to build-fuzz/).
fuzz="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
      -DFLASHCL_BUILD_TESTS=OFF -DFLASHCL_BUILD_BENCH=OFF -DFLASHCL_BUILD_TOOLS=OFF \
      -DFLASHCL_BUILD_FUZZ=ON -DCMAKE_C_FLAGS="-Werror -O1 -fno-omit-frame-pointer $fuzz" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_attention
mkdir -p build-fuzz/inputs
if ! FLASHCL_CACHE_DIR=off build-fuzz/tests/fuzz/fuzz_attention -max_total_time=60 -timeout=120 \
       -print_final_stats=1 -artifact_prefix=build-fuzz/ build-fuzz/inputs tests/fuzz/corpus \
       > build-fuzz/fuzz.log 2>&1; then
  tail -n 60 build-fuzz/fuzz.log
  echo "fuzz_attention failed: the input is in build-fuzz/ (crash-*, timeout-*, ...)" >&2
  exit 1
fi
grep -E "^(Done|stat::)" build-fuzz/fuzz.log
