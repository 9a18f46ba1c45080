set -u
export LD_LIBRARY_PATH=$PWD/.carry/lib
mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
ISSUE27_DTYPES=fp16 BUILD=build-gpu/new timeout 230 bash bench/gpu_session.sh issue27 > $OUT/issue27_session.txt 2>&1; grep -B2 -A30 "^| pass" $OUT/issue27-fp16.md | head -40
( time timeout 130 build-gpu/new/tests/test_wgmma backward ) > $OUT/test_wgmma.log 2>&1; echo "test_wgmma rc=$?"; grep -E "PASSED|FAILED|FAIL|ERROR|LINE|OK" $OUT/test_wgmma.log | head -20
( time timeout 150 build-gpu/new/tests/test_backward ) > $OUT/test_backward.log 2>&1; echo "test_backward rc=$?"; grep -E "PASSED|FAILED|FAIL|ERROR|LINE|OK" $OUT/test_backward.log | head -20
cd $OUT && tar czf logs.tgz *.log *.txt && mkdir -p /tmp/keep && mv gpu.txt logs.tgz ours_fp16.csv sdpa_fp16.csv issue27-fp16.md issue27-fp16.png /tmp/keep/ 2>/dev/null; rm -rf $OUT/*; mv /tmp/keep/* $OUT/
ls $OUT
