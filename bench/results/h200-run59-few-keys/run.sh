set -u
export LD_LIBRARY_PATH=$PWD/.carry/lib
mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for n in 1024 1025; do build-gpu/new/tools/flashcl-info --head-dim 64 --dtype fp16 --seqlen $n 2>&1 | grep -A1 "^ *forward" | head -2; done
AB_WGMMA=1 AB_DIMS=64,128 AB_ROUNDS="1 2" BASE=build-gpu/base BUILD=build-gpu/new bash bench/gpu_session.sh ab-builds > $OUT/ab_session.txt 2>&1
grep -A14 "^| pass" $OUT/ab_w1.md
( time timeout 170 build-gpu/new/tests/test_wgmma ) > $OUT/test_wgmma.log 2>&1; echo "test_wgmma rc=$?"; grep -E "PASSED|FAILED|FAIL|ERROR|LINE" $OUT/test_wgmma.log | head -20
for c in "" "--causal"; do for n in 512 2048; do
  timeout 40 build-gpu/new/bench/flashcl-tune --seqlen $n $c --head-dims 64 --kernels fwd --dtype fp16 --tiles 128x128x8,64x64x4 2>&1 | grep -v "^\[" >> $OUT/tune.txt
done; done; cat $OUT/tune.txt
ISSUE27_DTYPES=fp16 BUILD=build-gpu/new timeout 200 bash bench/gpu_session.sh issue27 > $OUT/issue27_session.txt 2>&1; grep -B2 -A30 "^| pass" $OUT/issue27-fp16.md | head -40
cd $OUT && tar czf logs.tgz *.log *.txt ab_w1_*.csv && mkdir -p /tmp/keep && mv gpu.txt ab_w1.md logs.tgz ours_fp16.csv sdpa_fp16.csv issue27-fp16.md issue27-fp16.png /tmp/keep/ 2>/dev/null; rm -rf $OUT/*; mv /tmp/keep/* $OUT/
ls $OUT
