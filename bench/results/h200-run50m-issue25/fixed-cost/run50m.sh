#!/bin/bash
# issue 25: where the mma.sync forward's time goes at N 1024 (d 128).
# 1. per-work-group overhead: N swept with the work-group count fixed
#    (tokens 16384, hidden 2048: 2048 work-groups of 128 rows), mma.sync
#    and wgmma; FA2 at the same shapes
# 2. at N 1k/4k/16k, two alternated rounds: O staged at d 128, head groups
set -u
mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/.carry/lib
T=build-wg/bench/flashcl-tune
run() { echo "== $*" >> $OUT/m.txt; timeout 90 stdbuf -oL "$@" 2>&1 | grep -E "target|error|flashcl-tune on" >> $OUT/m.txt; }
for N in 256 512 1024 2048 4096 16384; do
  run env FLASHCL_WGMMA=0 $T --dtype fp16 --head-dims 128 --kernels fwd --tiles 128x64x4 --seqlen $N --reps 20
  run env FLASHCL_WGMMA=1 $T --dtype fp16 --head-dims 128 --kernels fwd --tiles 128x128x8 --seqlen $N --reps 20
done
for r in 1 2; do for N in 1024 4096 16384; do
  for o in "" "-DFCL_MMA_STAGE_O_MAX_D=128" "-DFCL_HEAD_GROUP=8" "-DFCL_HEAD_GROUP=1"; do
    run env FLASHCL_WGMMA=0 $T --dtype fp16 --head-dims 128 --kernels fwd --tiles 128x64x4 --seqlen $N --reps 20 --build-options "$o"
  done
done; done
true
grep -E "==|target" $OUT/m.txt | sed -e 's/build-wg\/bench\/flashcl-tune --dtype fp16 --head-dims 128 --kernels fwd//' | cut -c1-200

