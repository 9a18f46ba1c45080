set -u
export LD_LIBRARY_PATH=$PWD/.carry/lib
mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
AB_WGMMA=1 AB_BACKWARD=1 AB_DIMS=64,128 AB_ROUNDS="1 2" BASE=build-gpu/base BUILD=build-gpu/new bash bench/gpu_session.sh ab-builds > $OUT/ab_session.txt 2>&1
grep -A40 "^| " $OUT/ab_w1.md 2>/dev/null | head -60
T=build-gpu/new/tests
( time timeout 200 $T/test_wgmma ) > $OUT/test_wgmma.log 2>&1; echo "test_wgmma rc=$?"; grep -E "PASSED|FAILED|FAIL" $OUT/test_wgmma.log | head
( time timeout 120 $T/test_fp8 ) > $OUT/test_fp8.log 2>&1; echo "test_fp8 rc=$?"; grep -E "PASSED|FAILED|FAIL" $OUT/test_fp8.log | head
cd $OUT && tar czf logs.tgz *.log ab_session.txt ab.txt && rm -f *.log ab_session.txt
