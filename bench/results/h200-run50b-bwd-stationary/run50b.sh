#!/bin/bash
# the backward's stationary tiles by cp.async: base (plain loads) against
# new, two alternated rounds, wgmma backward (d 64/128) and mma.sync (d 128/256)
set -u
mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/.carry/lib
for r in 1 2; do for side in base new; do
  bin=build-wg; [ $side = base ] && bin=build-base
  timeout 100 $bin/bench/flashcl-bench --dtype fp16 --head-dims 64,128 --seqlens 1024,4096,16384 --backward \
    --no-naive --reps 5 --profile --out $OUT/wg_${side}_$r.csv > /dev/null 2>&1
  FLASHCL_WGMMA=0 FLASHCL_WGMMA_BACKWARD=0 timeout 100 $bin/bench/flashcl-bench --dtype fp16 --head-dims 128,256 \
    --seqlens 1024,4096,16384 --backward --no-naive --reps 5 --profile --out $OUT/mma_${side}_$r.csv > /dev/null 2>&1
done; done
for m in wg mma; do
  python3 bench/compare_ab.py $OUT/ab_$m base=$OUT/${m}_base_1.csv,$OUT/${m}_base_2.csv new=$OUT/${m}_new_1.csv,$OUT/${m}_new_2.csv > /dev/null 2>&1
  grep "^| bwd" $OUT/ab_$m.md | cut -d'|' -f2-6,8,10-11
done
cd $OUT && tar czf ab.tgz *.csv *.md *.png && rm -f *.csv *.png
