#!/bin/sh
# gpu_ab_prep.sh REF [TEST...] - lays out an A/B of git ref REF (a branch
# holding a kernel change) against this tree for bench/gpu_session.sh's
# ab-builds step: REF's flashcl-bench and the named test programs, built in
# a worktree under /tmp, in build-gpu/new; this tree's flashcl-bench in
# build-gpu/base; cmocka's library in .carry/lib.  Then one command on the
# GPU machine (run's carry: .carry/lib and build-gpu), for example
#   OUT=$OUT/t BUILD=build-gpu/new TESTS="test_tensor_cores test_wgmma" \
#     TEST_JOBS=2 TEST_TIMEOUT=280 bash bench/gpu_session.sh tests &&
#   OUT=$OUT/ab BUILD=build-gpu/new BASE=build-gpu/base AB_WGMMA="0 1" \
#     AB_BACKWARD=1 AB_CAUSAL=0,1 bash bench/gpu_session.sh ab-builds
# (both flashcl-bench builds link the library statically: each carries its
# own kernels).
set -eu
ref=$1
shift
wt=/tmp/flashcl-ab-$(printf '%s' "$ref" | tr '/' '-')
git worktree prune
[ -d "$wt" ] || git worktree add --force "$wt" "$ref"
cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=Release -DFLASHCL_BUILD_TESTS=ON > /dev/null
cmake --build "$wt/build" -j2 --target flashcl-bench "$@"
cmake --build build -j2 --target flashcl-bench
rm -rf build-gpu/new build-gpu/base
mkdir -p build-gpu/new/bench build-gpu/new/tests build-gpu/base/bench .carry/lib
cp "$wt/build/bench/flashcl-bench" build-gpu/new/bench/
for t in "$@"; do cp "$wt/build/tests/$t" build-gpu/new/tests/; done
cp build/bench/flashcl-bench build-gpu/base/bench/
cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 .carry/lib/
du -sh build-gpu
