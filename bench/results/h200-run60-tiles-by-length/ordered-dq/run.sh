set -u
export LD_LIBRARY_PATH=$PWD/.carry/lib
mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
b() { echo "== $1 $2" >> $OUT/fdq.txt; FLASHCL_BACKWARD_DQ=$2 timeout 60 build-gpu/$1/bench/flashcl-bench --dtype fp16 --head-dims 128 --seqlens 4096,16384 --backward --no-naive --reps 5 --profile --out $OUT/fdq_$1_$2.csv 2>&1 | grep -v '^\[' >> $OUT/fdq.txt; }
b base separate; b base ordered; b new ordered
grep -E "==|bwd|backward" $OUT/fdq.txt | head -40
( time timeout 100 build-gpu/new/tests/test_wgmma backward ) > $OUT/test_wgmma.log 2>&1; echo "test_wgmma rc=$?"; grep -E "PASSED|FAILED|ERROR|LINE|OK" $OUT/test_wgmma.log | head -12
