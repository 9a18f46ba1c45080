#!/usr/bin/env bash
# demo.sh - the main job on the default OpenCL device (a GPU if there is one,
# else PoCL on the CPU): install what is missing, build, show every device's
# on-chip memory and the tiling chosen, then run attention forward and
# backward on a real-sized input and check it against float64.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFLASHCL_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
./build/tools/flashcl-info --head-dim 64 --dtype fp16 --seqlen 1024 --causal
./build/tools/flashcl-demo "$@"
