#!/usr/bin/env bash
# One session on the GPU machine (see NOTES.md): register NVIDIA's OpenCL
# driver, show the devices and plans, run the test suite on the GPU (the
# default device picks the first GPU), then the benchmark.  Everything lands
# in $OUT.  Usage: bash bench/gpu_session.sh [steps...]  (default: info tests bench)
# Expects a build folder made on a compatible x86-64 machine (BUILD, default
# build) and cmocka's shared library in .carry/lib (no packages can be
# installed there); step mpi also Open MPI in .carry/mpi (bench/carry_mpi.sh).
set -u
OUT=${OUT:-/tmp/flashcl-out}
B=${BUILD:-build}
mkdir -p "$OUT" /etc/OpenCL/vendors
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the machine's CPU device (PoCL) as P:D, from flashcl-info's listing
cpu_device() {
  "$B/tools/flashcl-info" --no-probe 2>/dev/null | awk '/^Device/ && /pthread|cpu|CPU/ {print $2; exit}'
}
# the e4m3 forward under a switch ($1, 0 then 1) and fp16 beside, at
# head dims $4, N 1k-16k, causal off and on, alternated $5 rounds (device
# spans, which take in each call's first launch): $OUT/$2_{0,1}_R.csv and
# $OUT/$3_R.csv, the tables in $OUT/$2.txt
fp8_rounds() {
  local r m
  for r in $(seq 1 "$5"); do
    for m in 0 1; do
      echo "== e4m3, $1=$m round $r" | tee -a "$OUT/$2.txt"
      env "$1=$m" timeout 200 "$B/bench/flashcl-bench" --dtype e4m3 --head-dims "$4" \
        --seqlens 1024,4096,16384 --causal 0,1 --no-naive --reps 5 --profile \
        --out "$OUT/$2_${m}_$r.csv" 2>&1 | grep -v '^\[' | tee -a "$OUT/$2.txt"
    done
    echo "== fp16 (wgmma) round $r" | tee -a "$OUT/$2.txt"
    timeout 200 "$B/bench/flashcl-bench" --dtype fp16 --head-dims "$4" --seqlens 1024,4096,16384 \
      --causal 0,1 --no-naive --reps 5 --profile --out "$OUT/$3_$r.csv" 2>&1 \
      | grep -v '^\[' | tee -a "$OUT/$2.txt"
  done
}
rounds_of() { ls "$OUT"/$1_*.csv 2>/dev/null | sort | paste -sd, -; }
# issue 25's and 27's side by side: ISSUE_ROUNDS rounds (3) of flashcl-bench's
# forward and backward (dtype $2, head dims $3, N 1k-16k, causal off and on,
# device spans, limit $4 s, under the environment $6...) alternated with
# sdpa_backends.py's, into $OUT/$1_{ours,sdpa}_$2_R.csv; compare_fa2.py's
# table of medians over the rounds in $OUT/$5-$2.md
side_by_side_rounds() {
  local tag=$1 dt=$2 dims=$3 limit=$4 table=$5 r
  shift 5
  for r in $(seq 1 "${ISSUE_ROUNDS:-3}"); do
    env "$@" timeout "$limit" "$B/bench/flashcl-bench" --dtype "$dt" --head-dims "$dims" \
      --seqlens 1024,4096,16384 --causal 0,1 --backward --no-naive --reps 5 --profile \
      --out "$OUT/${tag}_ours_${dt}_$r.csv" 2>&1 | grep -v '^\[' >> "$OUT/${tag}_ours_$dt.txt"
    timeout 250 python3 bench/sdpa_backends.py --dtypes "$dt" --head-dims "$dims" \
      --csv "$OUT/${tag}_sdpa_${dt}_$r.csv" >> "$OUT/${tag}_sdpa_$dt.txt" 2>&1
  done
  python3 bench/compare_fa2.py "$(rounds_of "${tag}_ours_$dt")" "$(rounds_of "${tag}_sdpa_$dt")" \
    "$OUT/$table-$dt" 2>&1 | tail -40
}
steps=${*:-info tests bench}
# issue 4's side-by-side benchmark as one step
steps=${steps//final-all/final-fp16 final-bf16 final-sdpa}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
for step in $steps; do
  case $step in
    info)
      for d in 64 128; do
        timeout 120 "$B/tools/flashcl-info" --head-dim $d --dtype fp32 2>&1 | tee -a "$OUT/info.txt"
      done
      timeout 60 "$B/tools/flashcl-info" --head-dim 128 --json > "$OUT/info.json" 2>&1 ;;
    tests-forward)
      ( time timeout 120 "$B/tests/test_forward" ) > "$OUT/tests.log" 2>&1
      echo "test_forward: rc=$?" ;;
    fast-fp16)
      timeout 200 "$B/bench/flashcl-bench" --dtype fp16 --head-dims 64,128,256 --seqlens 1024,4096,16384 \
        --no-naive --reps 5 --out "$OUT/fast_fp16.csv" 2>&1 | grep -v '^\[' | tee "$OUT/fast_fp16.txt" ;;
    tune-mma)
      for d in ${TUNE_DIMS:-64 128}; do
        timeout 280 "$B/bench/flashcl-tune" --dtype fp16 --head-dims $d --verbose-build --reps 5 \
          --kernels "${TUNE_KERNELS:-fwd,dq,dkdv}" 2>&1 \
          | tee -a "$OUT/tune_mma_fp16.txt"
      done ;;
    tune-exp)
      # experiments: the same tiles under several build options (EXP_OPTS,
      # separated by ';', '-' for none), e.g. an ablation flag of NOTES.md,
      # of TUNE_DTYPE (fp16; e4m3 with FLASHCL_FP8_PRODUCTS=1 times FP8
      # products), at each of TUNE_SEQLENS (or flashcl-tune's default),
      # the options alternated EXP_ROUNDS times
      IFS=';' read -ra opts <<< "${EXP_OPTS:--}"
      for r in $(seq 1 "${EXP_ROUNDS:-1}"); do
        for n in ${TUNE_SEQLENS:-${TUNE_SEQLEN:-default}}; do
          seq_arg=()
          [ "$n" != default ] && seq_arg=(--seqlen "$n")
          for o in "${opts[@]}"; do
            [ "$o" = - ] && o=""
            echo "== round $r, N $n, options '$o'" >> "$OUT/tune_exp.txt"
            timeout 200 "$B/bench/flashcl-tune" --dtype "${TUNE_DTYPE:-fp16}" \
              --head-dims "${TUNE_DIMS:-64,128}" --reps 5 --kernels "${TUNE_KERNELS:-fwd}" \
              ${EXP_TILES:+--tiles "$EXP_TILES"} "${seq_arg[@]}" \
              --build-options "$o" 2>&1 | tee -a "$OUT/tune_exp.txt"
          done
        done
      done ;;
    issue25)
      # issue 25's side-by-side: the mma.sync pieces (FLASHCL_WGMMA=0,
      # FLASHCL_WGMMA_BACKWARD=0) against PyTorch's backends (FA2, cuDNN) in
      # the same call, ISSUE25_DTYPES (fp16), ISSUE25_DIMS (64,128,256), N 1k-16k,
      # causal off and on, forward and backward, ISSUE_ROUNDS rounds (3) of
      # both alternated; bench/compare_fa2.py's tables (medians over the
      # rounds) with % of the mma.sync ceiling
      for dt in ${ISSUE25_DTYPES:-fp16}; do
        side_by_side_rounds i25 "$dt" "${ISSUE25_DIMS:-64,128,256}" 300 issue25 \
          FLASHCL_WGMMA=0 FLASHCL_WGMMA_BACKWARD=0
      done ;;
    issue27)
      # issue 27's side-by-side: the default pieces on sm_90 (the wgmma
      # forward and backward) against PyTorch's backends in the same call,
      # fp16 and bf16 (ISSUE27_DTYPES), d 64 and 128, N 1k-16k, causal off
      # and on, forward and backward, ISSUE_ROUNDS rounds (3) of both
      # alternated; flashcl's device spans against CUDA events;
      # bench/compare_fa2.py's tables, medians over the rounds (FP8: the
      # fp8-products step)
      for dt in ${ISSUE27_DTYPES:-fp16 bf16}; do
        side_by_side_rounds i27 "$dt" 64,128 250 issue27
      done ;;
    power)
      # sustained power and clock (NOTES.md, runs 49 and 53): nvidia-smi
      # sampled every 100 ms beside 1000 calls of the forward at d 128, N
      # 16384, of each of POWER_LOOPS (fp16, e4m3 widened as e4m3, e4m3
      # products as p8), alternated twice; bench/smi_summary.py's table
      nvidia-smi --query-gpu=timestamp,power.draw,power.limit,clocks.sm,clocks_event_reasons.sw_power_cap \
        --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
      smi=$!
      for l in ${POWER_LOOPS:-p8 fp16 p8 fp16}; do
        dt=${l/p8/e4m3}
        echo "== $l start $(date +%H:%M:%S.%N)" >> "$OUT/power_marks.txt"
        FLASHCL_FP8_PRODUCTS=$([ "$l" = p8 ] && echo 1 || echo 0) timeout 100 \
          "$B/bench/flashcl-bench" --dtype "$dt" --head-dims 128 --seqlens 16384 --causal 0 \
          --no-naive --reps 1000 --profile 2>&1 | grep -E 'span|fwd' >> "$OUT/power_marks.txt"
        echo "== $l end $(date +%H:%M:%S.%N)" >> "$OUT/power_marks.txt"
      done
      kill "$smi"
      python3 bench/smi_summary.py "$OUT/smi.csv" "$OUT/power_marks.txt" | tee "$OUT/power.md" ;;
    stamps)
      # the wgmma forward's per-warpgroup timestamps (bench/flashcl-stamps,
      # NOTES.md run 46): the default schedule (level 1), the stamp that
      # holds P V's wait after the softmax (level 2), and the fence that
      # does (FCL_WG_PV_FENCE), at each of STAMP_DIMS
      for d in ${STAMP_DIMS:-128 64}; do
        for a in "--level 1" "--level 2" "--level 1 --fence"; do
          # shellcheck disable=SC2086
          timeout 120 "$B/bench/flashcl-stamps" --head-dim "$d" $a ${STAMP_ARGS:-} 2>&1 \
            | tee -a "$OUT/stamps.txt"
        done
      done ;;
    stamps-machine)
      # the wgmma forward's work-groups on the machine (flashcl-stamps
      # --level 3 on the global timer: each work-group's prologue, tiles and
      # epilogue, and the gaps, head and tail of each multiprocessor) at
      # issue 27's shapes (B N = 16384, H d = 2048), fp16, STAMP_DIMS (128
      # 64) x N 1k / 4k / 16k non-causal and 1k / 4k causal
      for d in ${STAMP_DIMS:-128 64}; do
        for nc in 1024:0 4096:0 16384:0 1024:1 4096:1; do
          n=${nc%:*}
          # shellcheck disable=SC2046
          timeout 120 "$B/bench/flashcl-stamps" --level 3 --head-dim "$d" --seqlen "$n" \
            --batch $((16384 / n)) --heads $((2048 / d)) $([ "${nc#*:}" = 1 ] && echo --causal) \
            2>&1 | tee -a "$OUT/stamps_machine.txt"
        done
      done ;;
    tests|tests-fast|tests-tc|tests-cpu)
      # tests-cpu: the same programs on the machine's CPU device (PoCL).
      # TEST_JOBS (default 1) runs that many test programs at once: on the
      # GPU their time is mostly NVIDIA's compiler building each program
      # cold, one CPU core a process, and the machine has 16 (the programs
      # share the GPU and the disk cache, whose entries are renamed into
      # place whole); each test keeps its own log and limit
      dev=""
      [ "$step" = tests-cpu ] && \
        dev=$(cpu_device)
      all="test_forward test_backward test_variants test_sinks test_tensor_cores test_kvcache test_mla test_profiles test_plan test_api test_errors test_cache test_fp8 test_threads test_nonfinite test_ptx_rewrite test_wgmma"
      [ "$step" = tests-fast ] && all="test_forward test_variants test_plan test_api test_errors"
      [ "$step" = tests-tc ] && all="test_tensor_cores test_backward test_forward"
      [ -n "${TESTS:-}" ] && all=$TESTS
      run_test() { # <test>: its log, then its lines of the summary, in $OUT
        ( time FLASHCL_DEVICE=${dev:-${FLASHCL_DEVICE:-}} timeout "${TEST_TIMEOUT:-300}" "$B/tests/$1" ) > "$OUT/$1.log" 2>&1
        { echo "$1${dev:+ on $dev}: rc=$?"; grep -E "PASSED|FAILED|FAIL |^real" "$OUT/$1.log" | head -20
        } > "$OUT/$1.summary"
      }
      for t in $all; do
        while [ "$(jobs -rp | wc -l)" -ge "${TEST_JOBS:-1}" ]; do wait -n; done
        run_test "$t" &
      done
      wait
      for t in $all; do cat "$OUT/$t.summary"; done
      cat "$OUT"/test_*.log > "$OUT/${step}.log"; rm -f "$OUT"/test_*.log "$OUT"/test_*.summary ;;
    driver-ptx)
      # the programs flashcl-bench builds at PTX_DIMS (64,128), PTX_SEQLENS (1k and 4k),
      # causal off and on (the backward's too with PTX_BACKWARD=1;
      # FLASHCL_WGMMA and the rest from the environment), kept in a disk
      # cache of their own, brought back as driver_ptx${PTX_TAG}.tgz for
      # tools/cache_ptx_report.py: the driver's own PTX
      d=driver_ptx${PTX_TAG:-}
      rm -rf "${OUT:?}/$d"
      FLASHCL_CACHE_DIR=$OUT/$d timeout 200 "$B/bench/flashcl-bench" --dtype "${PTX_DTYPE:-fp16}" \
        --head-dims "${PTX_DIMS:-64,128}" --seqlens "${PTX_SEQLENS:-1024,4096}" --causal 0,1 --no-naive --reps 1 \
        ${PTX_BACKWARD:+--backward} > "$OUT/$d.txt" 2>&1
      echo "driver-ptx: rc=$?, $(ls "$OUT/$d" | grep -c '\.bin$') programs"
      tar czf "$OUT/$d.tgz" -C "$OUT" "$d" && rm -rf "${OUT:?}/$d" ;;
    check)
      # flashcl-check, the users' own check of their device, on the GPU
      ( time timeout "${TEST_TIMEOUT:-300}" "$B/tools/flashcl-check" ) > "$OUT/check.log" 2>&1
      echo "flashcl-check: rc=$?" | tee -a "$OUT/check.log"; tail -25 "$OUT/check.log" ;;
    fast)
      for dt in fp16 bf16; do
        timeout 280 "$B/bench/flashcl-bench" --dtype $dt --head-dims 64,128,256 --seqlens 1024,4096,16384 \
          --backward --no-naive --reps 5 --out "$OUT/fast_$dt.csv" 2>&1 | grep -v '^\[' | tee "$OUT/fast_$dt.txt"
      done ;;
    portable)
      timeout 300 "$B/bench/flashcl-bench" --dtype fp16 --head-dims 64,128,256 --seqlens 1024,4096,16384 \
        --no-naive --portable-only --reps 5 --out "$OUT/portable_fp16.csv" 2>&1 \
        | grep -v '^\[' | tee "$OUT/portable_fp16.txt" ;;
    anchor)
      PYTHONUNBUFFERED=1 timeout 300 python3 .carry/sdpa_anchor.py --csv "$OUT/sdpa_anchor.csv" \
        2>&1 | tee "$OUT/sdpa_anchor.txt" ;;
    variants)
      timeout 300 "$B/bench/flashcl-bench-variants" --reps 5 --out "$OUT/bench_variants.csv" \
        2>&1 | tee "$OUT/bench_variants.txt"
      PYTHONUNBUFFERED=1 timeout 240 python3 bench/sdpa_variants.py --csv "$OUT/sdpa_variants.csv" \
        2>&1 | tee "$OUT/sdpa_variants.txt" ;;
    tune)
      timeout 300 "$B/bench/flashcl-tune" --verbose-build --reps 5 2>&1 | tee "$OUT/tune_fp32.txt" ;;
    nonfinite-cost)
      # the edge tiles' non-finite check (common.cl) on the tensor cores: this
      # build against BASE_BUILD, a build of the commit before it, alternated
      for r in 1 2; do
        for b in "${BASE_BUILD:?BASE_BUILD: a build without the check}" "$B"; do
          echo "== $b round $r" | tee -a "$OUT/nonfinite_cost.txt"
          timeout 140 "$b/bench/flashcl-bench" --dtype fp16 --head-dims 64,128 --seqlens 1024,4096,16384 \
            --backward --no-naive --reps 10 --out "$OUT/nonfinite_cost_${r}_$(basename "$b").csv" 2>&1 \
            | grep -v '^\[' | tee -a "$OUT/nonfinite_cost.txt"
        done
      done ;;
    fused-dq)
      # dQ in the dK/dV kernel (flash_bwd.cl, FCL_FUSED_DQ): the dQ kernel
      # (separate, the default), the fused kernel in key order (ordered) and
      # in any order (atomics), each of FUSED_FORMS, alternated FUSED_ROUNDS
      # times in one run; a form ending in +tma runs with
      # FLASHCL_WGMMA_BACKWARD_TMA=1 (the fused dK/dV's Q and dO by the
      # accelerator)
      forms=${FUSED_FORMS:-separate ordered any-order}
      for r in ${FUSED_ROUNDS:-1 2}; do
        for m in $forms; do
          echo "== FLASHCL_BACKWARD_DQ=$m round $r" | tee -a "$OUT/fused_dq.txt"
          tma=""
          [ "${m%+tma}" != "$m" ] && tma=1
          FLASHCL_BACKWARD_DQ=${m%+tma} FLASHCL_WGMMA_BACKWARD_TMA=$tma timeout 200 \
            "$B/bench/flashcl-bench" --dtype "${FUSED_DTYPE:-fp16}" \
            --head-dims "${FUSED_DIMS:-64,128}" --seqlens 1024,4096,16384 --backward --no-naive --reps 5 \
            --profile --out "$OUT/fused_${m}_$r.csv" 2>&1 | grep -v '^\[' | tee -a "$OUT/fused_dq.txt"
        done
      done
      sides=()
      for m in $forms; do sides+=("$m=$(rounds_of "fused_$m")"); done
      python3 bench/compare_ab.py "$OUT/fused-dq" "${sides[@]}" 2>&1 | tee -a "$OUT/fused_dq.txt" ;;
    bwd-tma)
      # the backward's streamed tiles by the tensor memory accelerator
      # (dK/dV's Q and dO, dQ's K and V; tile_nv_wgmma.cl, the default):
      # test_wgmma's backward on the real instructions, then the backward
      # with FLASHCL_WGMMA_BACKWARD_TMA=0 (cp.async) and =1 (unset: the
      # default), alternated TMA_ROUNDS times (fp16, d 64 and 128, N
      # 1k-16k, causal off and on, device spans)
      ( time timeout 200 "$B/tests/test_wgmma" backward ) > "$OUT/test_wgmma_backward.log" 2>&1
      echo "test_wgmma backward: rc=$?"; grep -E "PASSED|FAILED|ERROR|real" \
        "$OUT/test_wgmma_backward.log" | head -12
      for r in ${TMA_ROUNDS:-1 2}; do
        for m in 0 1; do
          echo "== FLASHCL_WGMMA_BACKWARD_TMA=$m round $r" >> "$OUT/bwd_tma.txt"
          FLASHCL_WGMMA_BACKWARD_TMA=$m timeout 150 "$B/bench/flashcl-bench" --dtype fp16 \
            --head-dims 64,128 --seqlens 1024,4096,16384 --backward --no-naive --reps 5 \
            --profile --out "$OUT/bwd_tma_${m}_$r.csv" 2>&1 | grep -v '^\[' >> "$OUT/bwd_tma.txt"
        done
      done
      python3 bench/compare_ab.py "$OUT/bwd-tma" "cp.async=$(rounds_of bwd_tma_0)" \
        "accelerator=$(rounds_of bwd_tma_1)" 2>&1 | tee -a "$OUT/bwd_tma.txt" ;;
    gqa-tma)
      # dK/dV's Q and dO by the tensor memory accelerator under GQA (a pair
      # of maps a query head; FLASHCL_WGMMA_BACKWARD_TMA=1 asks, unset
      # keeps cp.async there): test_wgmma's backward on the real
      # instructions, then the backward unset and =1 alternated TMA_ROUNDS
      # times (fp16, GQA_QPERKV query heads a K/V head, d 64 and 128, N
      # 1k-16k, causal off and on, device spans); dQ takes the accelerator
      # in both; GQA_TESTS=0 leaves the test out
      if [ "${GQA_TESTS:-1}" = 1 ]; then
        ( time timeout 200 "$B/tests/test_wgmma" backward ) > "$OUT/test_wgmma_backward.log" 2>&1
        echo "test_wgmma backward: rc=$?"; grep -E "PASSED|FAILED|ERROR|real" \
          "$OUT/test_wgmma_backward.log" | head -12
      fi
      for g in ${GQA_QPERKV:-4}; do
        for r in ${TMA_ROUNDS:-1 2}; do
          for m in unset 1; do
            echo "== q_per_kv $g, FLASHCL_WGMMA_BACKWARD_TMA=$m round $r" >> "$OUT/gqa_tma.txt"
            ( [ $m = 1 ] && export FLASHCL_WGMMA_BACKWARD_TMA=1
              timeout 150 "$B/bench/flashcl-bench" --dtype fp16 --q-per-kv "$g" \
              --head-dims 64,128 --seqlens 1024,4096,16384 --backward --no-naive --reps 5 \
              --profile --out "$OUT/gqa${g}_tma_${m}_$r.csv" ) 2>&1 | grep -v '^\[' \
              >> "$OUT/gqa_tma.txt"
          done
        done
        python3 bench/compare_ab.py "$OUT/gqa${g}-tma" "cp.async=$(rounds_of gqa${g}_tma_unset)" \
          "accelerator=$(rounds_of gqa${g}_tma_1)" 2>&1 | tee -a "$OUT/gqa_tma.txt"
      done ;;
    ab-builds)
      # this build against BASE's (another tree's build: its flashcl-bench),
      # alternated over AB_ROUNDS, for each value in AB_WGMMA of both
      # FLASHCL_WGMMA and FLASHCL_WGMMA_BACKWARD (1: the wgmma pieces, 0:
      # mma.sync): the forward (and the backward
      # with AB_BACKWARD=1) of AB_DTYPE at AB_DIMS, N 1k-16k (AB_SEQLENS; AB_CAUSAL: the
      # causal values, default flashcl-bench's; AB_QPERKV: query heads a K/V
      # head, default 1), device spans
      for w in ${AB_WGMMA:-1 0}; do
        for r in ${AB_ROUNDS:-1 2}; do
          for side in base new; do
            bin=$B
            [ "$side" = base ] && bin=$BASE
            echo "== $side, FLASHCL_WGMMA=$w, round $r" >> "$OUT/ab.txt"
            FLASHCL_WGMMA=$w FLASHCL_WGMMA_BACKWARD=$w timeout 200 "$bin/bench/flashcl-bench" \
              --dtype "${AB_DTYPE:-fp16}" --head-dims "${AB_DIMS:-64,128}" \
              --seqlens "${AB_SEQLENS:-1024,4096,16384}" --no-naive --reps 5 --profile \
              ${AB_BACKWARD:+--backward} ${AB_CAUSAL:+--causal "$AB_CAUSAL"} \
              ${AB_QPERKV:+--q-per-kv "$AB_QPERKV"} \
              --out "$OUT/ab_w${w}_${side}_$r.csv" 2>&1 \
              | grep -v '^\[' >> "$OUT/ab.txt"
          done
        done
        python3 bench/compare_ab.py "$OUT/ab_w$w" \
          "base=$(ls "$OUT"/ab_w"${w}"_base_*.csv | sort | paste -sd, -)" \
          "new=$(ls "$OUT"/ab_w"${w}"_new_*.csv | sort | paste -sd, -)" 2>&1 | tee -a "$OUT/ab.txt"
      done ;;
    wgmma)
      # issue 27, step 1: the forward's wgmma piece (FLASHCL_WGMMA=1, sm_90
      # only): its plans, test_wgmma on the real instructions against
      # float64, then flashcl-bench's forward with it (variant nvidia-wgmma)
      # and without (nvidia-mma-sync), alternated twice
      FLASHCL_WGMMA=1 timeout 120 "$B/tools/flashcl-info" --head-dim 128 --dtype fp16 2>&1 \
        | tee "$OUT/wgmma_info.txt"
      ( time timeout 300 "$B/tests/test_wgmma" ) > "$OUT/test_wgmma.log" 2>&1
      echo "test_wgmma: rc=$?"; grep -E "PASSED|FAILED|FAIL " "$OUT/test_wgmma.log" | head -20
      for r in 1 2; do
        for m in 0 1; do
          echo "== FLASHCL_WGMMA=$m round $r" | tee -a "$OUT/wgmma.txt"
          FLASHCL_WGMMA=$m timeout 200 "$B/bench/flashcl-bench" --dtype "${WGMMA_DTYPE:-fp16}" \
            --head-dims 64,128 --seqlens 1024,4096,16384 --causal 0,1 --no-naive --reps 5 \
            --out "$OUT/wgmma_${m}_$r.csv" 2>&1 | grep -v '^\[' | tee -a "$OUT/wgmma.txt"
        done
      done ;;
    wgmma-bwd)
      # issue 27, the backward on the wgmma piece (FLASHCL_WGMMA_BACKWARD=1,
      # sm_90 only): its plans, test_wgmma (the forward and both backward
      # kernels on the real instructions), test_backward through it (both
      # left out with WGMMA_BWD_TESTS=0), then flashcl-bench's backward with
      # it and without (mma.sync), alternated WGMMA_ROUNDS times, PyTorch's
      # backends beside (backward columns of sdpa_backends.py)
      FLASHCL_WGMMA_BACKWARD=1 timeout 120 "$B/tools/flashcl-info" --head-dim 128 --dtype fp16 2>&1 \
        | tee "$OUT/wgmma_bwd_info.txt"
      if [ "${WGMMA_BWD_TESTS:-1}" = 1 ]; then
        ( time timeout 300 "$B/tests/test_wgmma" ) > "$OUT/test_wgmma.log" 2>&1
        echo "test_wgmma: rc=$?"; grep -E "PASSED|FAILED|FAIL " "$OUT/test_wgmma.log" | head -20
        ( time FLASHCL_WGMMA_BACKWARD=1 timeout 300 "$B/tests/test_backward" ) > "$OUT/test_backward.log" 2>&1
        echo "test_backward (on wgmma): rc=$?"; grep -E "PASSED|FAILED|FAIL " "$OUT/test_backward.log" | head
      fi
      rounds=${WGMMA_ROUNDS:-2}
      for r in $(seq 1 "$rounds"); do
        for m in 0 1; do
          echo "== FLASHCL_WGMMA_BACKWARD=$m round $r" | tee -a "$OUT/wgmma_bwd.txt"
          FLASHCL_WGMMA_BACKWARD=$m timeout 200 "$B/bench/flashcl-bench" --dtype "${WGMMA_DTYPE:-fp16}" \
            --head-dims 64,128 --seqlens 1024,4096,16384 --causal 0,1 --backward --no-naive --reps 5 \
            --profile --out "$OUT/wgmma_bwd_${m}_$r.csv" 2>&1 | grep -v '^\[' | tee -a "$OUT/wgmma_bwd.txt"
        done
      done
      PYTHONUNBUFFERED=1 timeout 300 python3 bench/sdpa_backends.py --dtypes "${WGMMA_DTYPE:-fp16}" \
        --head-dims 64,128 --csv "$OUT/wgmma_bwd_sdpa.csv" 2>&1 | tee -a "$OUT/wgmma_bwd.txt"
      # tables and plots: the last round of each beside PyTorch's backends
      for m in 0 1; do
        python3 bench/compare_fa2.py "$OUT/wgmma_bwd_${m}_$rounds.csv" "$OUT/wgmma_bwd_sdpa.csv" \
          "$OUT/wgmma-bwd-$m" 2>&1 | tail -3
      done ;;
    wgmma-fp8)
      # issue 27: FP8 storage's forward on the wgmma piece (its default on
      # sm_90): test_wgmma and test_fp8 through it on the real instructions,
      # then the forward of e4m3 with K and V widened to fp16 first and
      # brought in by the accelerator (the default where libcuda encodes a
      # tensor map) and with their bytes staged and decoded on chip
      # (FLASHCL_WGMMA_TMA=0), alternated WGMMA_ROUNDS times, and fp16
      # beside (device spans, which take in the widening's launch)
      timeout 120 "$B/tools/flashcl-info" --head-dim 128 --dtype e4m3 2>&1 \
        | tee "$OUT/wgmma_fp8_info.txt"
      for t in test_wgmma test_fp8; do
        ( time timeout 300 "$B/tests/$t" ) > "$OUT/$t.log" 2>&1
        echo "$t: rc=$?"; grep -E "PASSED|FAILED|FAIL " "$OUT/$t.log" | head -20
      done
      fp8_rounds FLASHCL_WGMMA_TMA wgmma_fp8 wgmma_fp16 64,128 "${WGMMA_ROUNDS:-2}"
      python3 bench/compare_ab.py "$OUT/wgmma-fp8" "e4m3-staged=$(rounds_of wgmma_fp8_0)" \
        "e4m3-widened=$(rounds_of wgmma_fp8_1)" "fp16=$(rounds_of wgmma_fp16)" 2>&1 \
        | tee -a "$OUT/wgmma_fp8.txt" ;;
    fp8-products)
      # issue 27: FP8 products (FLASHCL_FP8_PRODUCTS=1, tile_nv_wgmma_fp8.cl):
      # test_wgmma through the real instructions (its test_fp8_products
      # prints each case's error beside its bound; FP8_TESTS=0 skips it),
      # then the e4m3 forward
      # at head_dim 128 with K and V widened to fp16 (the default), with
      # FP8 products, and fp16, alternated FP8_ROUNDS times (device spans,
      # which take in each call's first launch)
      FLASHCL_FP8_PRODUCTS=1 timeout 120 "$B/tools/flashcl-info" --head-dim 128 --dtype e4m3 \
        2>&1 | tee "$OUT/fp8_products_info.txt"
      if [ "${FP8_TESTS:-1}" != 0 ]; then
        ( time timeout 300 "$B/tests/test_wgmma" ) > "$OUT/test_wgmma.log" 2>&1
        echo "test_wgmma: rc=$?"; grep -E "PASSED|FAILED|FAIL |fp8 products" "$OUT/test_wgmma.log" | head -30
      fi
      fp8_rounds FLASHCL_FP8_PRODUCTS fp8_products fp8_fp16 128 "${FP8_ROUNDS:-2}"
      python3 bench/compare_ab.py "$OUT/fp8-products" "fp16=$(rounds_of fp8_fp16)" \
        "e4m3-widened=$(rounds_of fp8_products_0)" "e4m3-products=$(rounds_of fp8_products_1)" \
        2>&1 | tee -a "$OUT/fp8_products.txt" ;;
    wgmma-bwd-tiles)
      # the backward's wgmma tiles beside its defaults (flashcl-tune, whole
      # backward, N 4096; tiles as query rows x keys x warps, for both
      # kernels), with NVIDIA's compiler's registers and spills
      for d in ${TUNE_DIMS:-64 128}; do
        FLASHCL_WGMMA_BACKWARD=1 timeout 150 "$B/bench/flashcl-tune" --dtype fp16 --head-dims $d --reps 5 --verbose-build \
          --kernels dkdv --tiles "${DKDV_TILES:-64x128x8,128x128x8,128x64x4,64x64x4}" 2>&1 \
          | tee -a "$OUT/wgmma_bwd_tiles.txt"
        FLASHCL_WGMMA_BACKWARD=1 timeout 150 "$B/bench/flashcl-tune" --dtype fp16 --head-dims $d --reps 5 --verbose-build \
          --kernels dq --tiles "${DQ_TILES:-128x64x8,128x128x8,64x128x4,64x64x4}" 2>&1 \
          | tee -a "$OUT/wgmma_bwd_tiles.txt"
      done ;;
    bench-probe)
      timeout 200 "$B/bench/flashcl-bench" --dtype fp32 --backward --reps 3 --seqlens 4096,16384 \
        --head-dims 64 --causal 0 2>&1 | tee "$OUT/bench_probe.txt" ;;
    bench)
      timeout 420 "$B/bench/flashcl-bench" --dtype fp32 --backward --reps 5 \
        --out "$OUT/bench_fp32.csv" 2>&1 | tee "$OUT/bench_fp32.txt" ;;
    bench-half)
      timeout 150 "$B/bench/flashcl-bench" --dtype fp16 --backward --reps 5 --seqlens 1024,4096 \
        --no-naive --out "$OUT/bench_fp16.csv" 2>&1 | tee "$OUT/bench_fp16.txt" ;;
    final-fp16|final-bf16)
      # issue 4's benchmark, one dtype: this path (tensor cores where they
      # apply, else portable), standard attention, then the portable path
      dt=${step#final-}
      timeout 290 "$B/bench/flashcl-bench" --dtype $dt --head-dims 64,128,256 --seqlens 1024,4096,16384 \
        --backward --reps 5 --out "$OUT/final_$dt.csv" 2>&1 | grep -v '^\[' | tee "$OUT/final_$dt.txt"
      timeout 150 "$B/bench/flashcl-bench" --dtype $dt --head-dims 64,128,256 --seqlens 1024,4096,16384 \
        --backward --no-naive --portable-only --reps 5 --out "$OUT/final_portable_$dt.csv" 2>&1 \
        | grep -v '^\[' | tee "$OUT/final_portable_$dt.txt" ;;
    final-sdpa)
      PYTHONUNBUFFERED=1 timeout 400 python3 bench/sdpa_backends.py --csv "$OUT/final_sdpa.csv" \
        2>&1 | tee "$OUT/final_sdpa.txt" ;;
    hdv)
      # issue 26's value head dim: DeepSeek's prefill, d_qk 192 / d_v 128, fp16, forward and
      # backward, N 1024..16384 (B * N = 16384, H = 2048 / 192 = 10, causal and not), beside
      # flashcl's d = 192 call (V 192 wide) and PyTorch SDPA on q, k 192 and v 128 wide
      hdv_args=(--dtype fp16 --head-dims 192 --seqlens 1024,4096,16384 --backward --no-naive --reps 5)
      timeout 100 "$B/bench/flashcl-bench" "${hdv_args[@]}" --head-dim-v 128 --out "$OUT/hdv_192_128.csv" \
        2>&1 | grep -v '^\[' | tee "$OUT/hdv.txt"
      timeout 100 "$B/bench/flashcl-bench" "${hdv_args[@]}" --out "$OUT/hdv_192_192.csv" \
        2>&1 | grep -v '^\[' | tee -a "$OUT/hdv.txt"
      PYTHONUNBUFFERED=1 timeout 60 python3 bench/sdpa_backends.py --dtypes fp16 --head-dims 192 \
        --head-dim-v 128 --csv "$OUT/hdv_sdpa.csv" 2>&1 | tee -a "$OUT/hdv.txt"
      python3 bench/compare_hdv.py "$OUT/hdv_192_128.csv" "$OUT/hdv_192_192.csv" "$OUT/hdv_sdpa.csv" \
        "$OUT/hdv-192-128" ;;
    mla)
      # multi-head latent attention decoding (issue 26): d 576 / dv 512, one
      # latent cache (64-key pages, shuffled), 16 and 128 query heads, one
      # query row, fp16; the shared cache, then the same K and V as two
      # caches (what one load per key tile saves), then PyTorch's matmuls
      rm -f "$OUT/mla.txt"
      for h in 16 128; do
        for form in shared two; do
          timeout 120 "$B/bench/flashcl-bench-decode" --dtypes "${MLA_DTYPES:-fp16}" \
            --batches "${MLA_BATCHES:-1,16,64}" --seqlens "${MLA_SEQLENS:-4096,16384,65536}" --rows 1 \
            --pages 64 --heads-q $h --heads-kv 1 --head-dim 576 --head-dim-v 512 \
            $([ $form = shared ] && echo --shared-kv) --prefill-seqlens "" --reps "${MLA_REPS:-10}" \
            --inner 3 --copy-mib "${MLA_COPY_MIB:-1024}" --out "$OUT/mla_${form}_$h.csv" 2>&1 \
            | tee -a "$OUT/mla.txt"
        done
      done
      PYTHONUNBUFFERED=1 timeout 150 python3 bench/sdpa_mla.py --dtypes "${MLA_DTYPES:-fp16}" \
        --batches "${MLA_BATCHES:-1,16,64}" --seqlens "${MLA_SEQLENS:-4096,16384,65536}" \
        --csv "$OUT/mla_torch.csv" 2>&1 | tee -a "$OUT/mla.txt"
      python3 bench/compare_mla.py "$OUT/mla_shared_16.csv,$OUT/mla_shared_128.csv" \
        "$OUT/mla_two_16.csv,$OUT/mla_two_128.csv" "$OUT/mla_torch.csv" "$OUT/mla-decode" ;;
    decode-tiles)
      # decode tiles side by side on a few shapes (DECODE_TILES: ';'-separated
      # ROWS,COLS,WARPS,32 of the tensor-core decode plan, '-' for the default)
      IFS=';' read -ra tiles <<< "${DECODE_TILES:--}"
      for t in "${tiles[@]}"; do
        echo "== decode tile $t"
        timeout 200 "$B/bench/flashcl-bench-decode" --dtypes fp16 --batches 1,32 --seqlens 8192,131072 \
          --pages 0,16 --prefill-seqlens "" --reps 10 --inner 10 --max-cache-mib 20000 \
          $([ "$t" != - ] && echo --decode-tile "$t") 2>&1 | tail -n +5
      done 2>&1 | tee "$OUT/decode_tiles.txt" ;;
    decode)
      # issue 10's benchmark: flashcl, then PyTorch's backends, then the table and plot
      timeout 400 "$B/bench/flashcl-bench-decode" --reps 20 --inner 10 --out "$OUT/decode.csv" 2>&1 \
        | tee "$OUT/decode.txt"
      PYTHONUNBUFFERED=1 timeout 300 python3 bench/sdpa_decode.py --csv "$OUT/decode_sdpa.csv" 2>&1 \
        | tee "$OUT/decode_sdpa.txt"
      python3 bench/compare_decode.py "$OUT/decode.csv" "$OUT/decode_sdpa.csv" "$OUT/decode-vs-pytorch" ;;
    decode-pages)
      # the page table's cost apart from the pages' order: 16-key pages
      # shuffled (as in 'decode') and in order, beside a contiguous cache
      for order in "" --sequential-pages; do
        timeout 200 "$B/bench/flashcl-bench-decode" --dtypes fp16 --batches 1,8,32 --seqlens 32768 \
          --rows 1 --pages 0,16 --prefill-seqlens "" --reps 20 --inner 10 $order \
          --out "$OUT/decode_pages${order:+_sequential}.csv" 2>&1 | tee -a "$OUT/decode_pages.txt"
      done ;;
    decode-rotary)
      # issue 26: the KV-cache call with rotary position embedding (half-split
      # on all 128 columns, then interleaved on 64) against the same call
      # without, one appended row per call as in a decode step; the decode
      # shapes of 'decode' (Hq 32, Hkv 8, d 128), contiguous and 64-key pages
      rm -f "$OUT/decode_rotary.txt"
      for tag in 128 64i; do   # rotary_dim, 'i': interleaved pairs
        opts="--rotary ${tag%i}"; [ "$tag" != "${tag%i}" ] && opts="$opts --rotary-interleaved"
        timeout 280 "$B/bench/flashcl-bench-decode" --dtypes fp16,bf16 --batches 1,16,64 \
          --seqlens 4096,16384,65536 --rows 1,4 --pages 0,64 --append 1 $opts \
          --prefill-seqlens "" --reps 20 --inner 10 --out "$OUT/decode_rotary_$tag.csv" 2>&1 \
          | tee -a "$OUT/decode_rotary.txt"
        python3 bench/compare_rotary.py "$OUT/decode_rotary_$tag.csv" "$OUT/decode-rotary-$tag"
      done ;;
    ring-calls)
      # the plain call at the sizes of the ring's calls (issue 28: a ring step's
      # backward ran at 69-99% of a quarter of the plain call, NOTES.md run 55):
      # causal fp16 d 128, H 8, B 1, forward and backward, RING_SEQLENS (64k,
      # 128k, 256k) on one GPU, then RING_ALL_N (128k) on every GPU at once, one
      # process each, to tell a rate lost to the GPUs running together (power,
      # clocks) from one lost to shorter calls
      for n in ${RING_SEQLENS:-65536 131072 262144}; do
        timeout 150 "$B/bench/flashcl-bench" --dtype fp16 --head-dims 128 --seqlens "$n" \
          --tokens "$n" --hidden 1024 --causal 0,1 --backward --no-naive --reps 3 2>&1 \
          | grep -v '^\[' | tee -a "$OUT/ring_calls_one.txt"
      done
      n=${RING_ALL_N:-131072}
      for dev in $("$B/tools/flashcl-info" --no-probe 2>/dev/null | awk '/^Device/ && !/pthread|cpu|CPU/ {print $2}'); do
        FLASHCL_DEVICE=$dev timeout 150 "$B/bench/flashcl-bench" --dtype fp16 --head-dims 128 \
          --seqlens "$n" --tokens "$n" --hidden 1024 --causal 0,1 --backward --no-naive --reps 3 \
          > "$OUT/ring_calls_all_${dev/:/_}.txt" 2>&1 &
      done
      wait
      for f in "$OUT"/ring_calls_all_*.txt; do echo "== $f"; grep -v '^\[' "$f"; done ;;
    mpi)
      # ring attention (flashcl_mpi) on 1, 2 and 4 GPUs of one host (kind nvidia-h200-x4),
      # causal fp16 d 128, B 1, H 8: Open MPI's run-time carried in .carry/mpi (made here
      # by bench/carry_mpi.sh, no packages there), one rank per GPU by local rank.
      # MPI_SINGLE_COPY: Open MPI's shared-memory single copy (none, or cma: the
      # receiver reads the sender's pages, one copy instead of two); MPI_COPY_THREADS:
      # FLASHCL_MPI_COPY_THREADS, flashcl_mpi's own copies within the host by that many
      # threads (0: MPI's transport; empty: the library's default, 8); MPI_WARMUP:
      # flashcl-bench-mpi's --warmup (each: a warm-up call before every N, so
      # the handle's buffers grown for a new N are not timed); MPI_TRACE=1: rank 0's
      # host timeline of the last forward and backward at each N (--trace);
      # MPI_PIECE_AB="0 67108864": each run of more than one rank once per value of
      # FLASHCL_MPI_UPLOAD_PIECE (0: uploads after the messages; else a copied message's
      # upload in pieces of that many bytes as it is read), side by side
      C=$PWD/.carry/mpi
      if [ ! -x "$C/usr/bin/mpirun.openmpi" ]; then echo "no $C: run bash bench/carry_mpi.sh first"; continue; fi
      mpi_env=(env OPAL_PREFIX="$C/usr" PATH="$C/usr/bin:$PATH" NCCL_NVLS_ENABLE=0
        LD_LIBRARY_PATH="$C/usr/lib/x86_64-linux-gnu/openmpi/lib:$C/usr/lib/x86_64-linux-gnu:$C/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
        PMIX_MCA_mca_base_component_path="$C/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
        OMPI_MCA_btl_vader_single_copy_mechanism="${MPI_SINGLE_COPY:-none}"
        OMPI_MCA_btl_base_warn_component_unused=0 PMIX_MCA_pcompress_base_silence_warning=1
        FLASHCL_MPI_COPY_THREADS="${MPI_COPY_THREADS:-}")
      gpus=$(nvidia-smi -L | wc -l)
      # each mpirun's time limit: 590 s, or what is left before MPI_DEADLINE (a
      # date in seconds since the epoch: the end of the device call's limit)
      mpi_left() {
        local l=$(( ${MPI_DEADLINE:-$(( $(date +%s) + 590 ))} - $(date +%s) ))
        echo $(( l > 590 ? 590 : l ))
      }
      # first the tests, on 2 and 4 GPUs (tensor cores, real devices; MPI_TESTS: the rank
      # counts, "" for none)
      for np in ${MPI_TESTS-2 4}; do
        [ "$np" -gt "$gpus" ] && continue
        t=$(mpi_left); [ "$t" -gt "${MPI_TEST_TIMEOUT:-400}" ] && t=${MPI_TEST_TIMEOUT:-400}
        [ "$t" -lt 20 ] && { echo "test_mpi -np $np: no time left"; continue; }
        "${mpi_env[@]}" timeout "$t" mpirun.openmpi -np "$np" --bind-to none "$B/tests/test_mpi" \
          > "$OUT/test_mpi_np$np.log" 2>&1
        echo "test_mpi -np $np: rc=$?"; grep -E "test_mpi:|FAIL" "$OUT/test_mpi_np$np.log" | head -20
      done
      # MPI_PROBE=BYTES: the copies' bandwidths alone (flashcl-bench-mpi --probe-comm)
      for np in ${MPI_PROBE:+2 4}; do
        [ "$np" -gt "$gpus" ] && continue
        "${mpi_env[@]}" timeout 120 mpirun.openmpi -np "$np" --bind-to none "$B/bench/flashcl-bench-mpi" \
          --probe-comm "$MPI_PROBE" 2>&1 | grep '^comm probe' | tee -a "$OUT/probe.txt"
      done
      # MPI_SAMPLE=SECONDS: every that many seconds, each GPU's load, memory,
      # power and clock and each rank's state (running, sleeping and where) into
      # $OUT/sample.txt, so that a run cut short by its limit says whether
      # the devices or the hosts were busy
      sampler=""
      if [ -n "${MPI_SAMPLE:-}" ]; then
        ( while :; do
            date +%T
            nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw,clocks.sm \
              --format=csv,noheader
            ps -o pid,stat,pcpu,nlwp,wchan:24,comm -C flashcl-bench-mpi,test_mpi 2>/dev/null
            sleep "$MPI_SAMPLE"
          done ) > "$OUT/sample.txt" 2>&1 &
        sampler=$!
      fi
      files=""
      # (the 4M run measures once, after 128k has built the kernels)
      # MPI_RUNS: the runs as "ranks seqlens reps" separated by ';' (a shorter
      # list fits a loan with little device time left)
      IFS=';' read -ra runs <<< "${MPI_RUNS-1 131072,524288,1048576 3;2 131072,524288,1048576 3;4 131072,524288,1048576 3;4 131072,4194304 1}"
      # MPI_COPY_AB="0 8": each run of more than one rank once per value of
      # FLASHCL_MPI_COPY_THREADS (0: MPI's transport), side by side
      for run in "${runs[@]}"; do
        read -r np seqlens reps <<< "$run"
        [ "$np" -gt "$gpus" ] && continue
        for ct in ${MPI_COPY_AB:-${MPI_COPY_THREADS:-8}}; do
         for pc in ${MPI_PIECE_AB:-${MPI_UPLOAD_PIECE:-0}}; do
          ab=${MPI_COPY_AB:-$ct} pab=${MPI_PIECE_AB:-$pc}
          [ "$np" -eq 1 ] && { [ "$ct" != "${ab%% *}" ] || [ "$pc" != "${pab%% *}" ]; } \
            && continue # one rank: no messages
          f="$OUT/mpi_np${np}_$(echo "$seqlens" | tr , _)${MPI_COPY_AB:+_c$ct}${MPI_PIECE_AB:+_p$pc}.csv"
          t=$(mpi_left)
          [ "$t" -lt 20 ] && { echo "mpi run '$run' (copies $ct, pieces $pc): no time left"; continue; }
          "${mpi_env[@]}" FLASHCL_MPI_COPY_THREADS="$ct" FLASHCL_MPI_UPLOAD_PIECE="$pc" \
            timeout "$t" mpirun.openmpi -np "$np" \
            --bind-to none "$B/bench/flashcl-bench-mpi" --seqlens "$seqlens" --reps "$reps" \
            --form "${MPI_FORM:-both}" --warmup "${MPI_WARMUP:-first}" --out "$f" \
            ${MPI_TRACE:+--trace 1} 2>&1 \
            | tee -a "$OUT/mpi.txt"
          files="$files $f"
         done
        done
      done
      [ -n "$sampler" ] && kill "$sampler"
      # shellcheck disable=SC2086  # the files are words
      python3 bench/compare_mpi.py "$OUT/mpi-scaling" $files ;;
    startup)
      # a new process's first call: kernels built cold, loaded from the disk cache, built
      timeout 500 "$B/bench/flashcl-bench-startup" --reps "${STARTUP_REPS:-3}" --out "$OUT/startup.csv" 2>&1 \
        | tee "$OUT/startup.txt" ;;
    cpu)
      # the machine's CPU through PoCL: flashcl beside OpenBLAS (libopenblas.so.0 and its
      # Fortran run-time carried in .carry/lib) and PyTorch's CPU SDPA, same shapes
      dev=$(cpu_device)
      echo "CPU device: ${dev:-none}" | tee "$OUT/cpu.txt"
      nproc | tee -a "$OUT/cpu.txt"
      FLASHCL_DEVICE=$dev timeout 430 "$B/bench/flashcl-bench-cpu" --reps 3 --out "$OUT/cpu.csv" 2>&1 \
        | tee -a "$OUT/cpu.txt"
      timeout 150 python3 bench/sdpa_cpu.py --csv "$OUT/cpu_sdpa.csv" 2>&1 | tee -a "$OUT/cpu.txt"
      python3 bench/compare_cpu.py "$OUT/cpu.csv" "$OUT/cpu-vs-openblas-pytorch" \
        --torch "$OUT/cpu_sdpa.csv" ;;
    cpu-scaling)
      # the same cores on 1, 2, 4, 8, 16 threads: PoCL (both its variables, for PoCL 3 and
      # 4+), OpenBLAS and PyTorch
      dev=$(cpu_device)
      files=""
      threads=${THREADS:-1 2 4 8 16}
      for t in $threads; do
        POCL_MAX_PTHREAD_COUNT=$t POCL_CPU_MAX_CU_NUM=$t OPENBLAS_NUM_THREADS=$t FLASHCL_DEVICE=$dev \
          timeout $((40 + 120 / t)) "$B/bench/flashcl-bench-cpu" --quick --no-decode --reps "${SCALING_REPS:-2}" \
          --out "$OUT/cpu_t$t.csv" 2>&1 | tee -a "$OUT/cpu_scaling.txt"
        timeout 40 python3 bench/sdpa_cpu.py --threads "$t" --head-dims 128 --seqlens 1024,4096 \
          --decode-seqlens "" --csv "$OUT/cpu_sdpa_t$t.csv" 2>&1 | tee -a "$OUT/cpu_scaling.txt"
        files="$files${files:+,}$OUT/cpu_t$t.csv"
      done
      python3 bench/compare_cpu.py "$OUT/cpu_t${threads##* }.csv" "$OUT/cpu-scaling" --scaling "$files" ;;
    tune-cpu)
      # the CPU piece's tiles on the machine's CPU device (plan_table.c's "cpu piece" entry):
      # one work-item a group, the shape of NOTES.md's run 19 sweep
      dev=$(cpu_device)
      FLASHCL_DEVICE=$dev timeout 300 "$B/bench/flashcl-tune" --seqlen 1024 --tokens 8192 --hidden 512 \
        --reps 5 --head-dims 64,128 --kernels fwd,dq,dkdv \
        --tiles "${CPU_TILES:-32x64x1x1,32x32x1x1,32x128x1x1,32x256x1x1,16x64x1x1,16x128x1x1}" \
        2>&1 | tee "$OUT/tune_cpu.txt" ;;
    sinks)
      # attention sinks (issue 26): their tests on the GPU, then their cost against the
      # same call without, fp16, d 64/128, N 1k..16k, causal off/on (target <= 5%)
      ( time timeout 300 "$B/tests/test_sinks" ) > "$OUT/test_sinks.log" 2>&1
      echo "test_sinks: rc=$?"; grep -E "PASSED|FAILED|FAIL " "$OUT/test_sinks.log" | head -20
      timeout 400 "$B/bench/flashcl-bench-sinks" --head-dims 64,128 --seqlens 1024,4096,16384 \
        --reps 10 --out "$OUT/sinks-cost.csv" 2>&1 | tee "$OUT/sinks-cost.txt"
      python3 bench/compare_sinks.py "$OUT/sinks-cost.csv" "$OUT/sinks-cost" ;;
    fp8)
      # FP8 storage on the real mma.sync piece: its tests, and its error beside fp16's
      ( time timeout 300 "$B/tests/test_fp8" ) > "$OUT/test_fp8.log" 2>&1
      echo "test_fp8: rc=$?"; grep -E "PASSED|FAILED|FAIL " "$OUT/test_fp8.log" | head -20
      timeout 300 "$B/bench/flashcl-bench-fp8" --out "$OUT/fp8-error.csv" 2>&1 | tee "$OUT/fp8-error.txt"
      python3 bench/compare_fp8.py "$OUT/fp8-error.csv" "$OUT/fp8-error" ;;
    python)
      # the Python package's tests through the GPU (the default device picks it; set
      # FLASHCL_DEVICE to choose), PyTorch 2.11 there: test_torch's gradients are then
      # checked against torch.nn.functional.scaled_dot_product_attention in float64.
      # pytest is pure Python: carry Debian's when the machine has none, e.g.
      #   mkdir -p .carry/python && cp -r /usr/lib/python3/dist-packages/{pytest,_pytest,pluggy,iniconfig,py,packaging} .carry/python
      # (without pyopencl there its tests report themselves skipped)
      export PYTHONPATH=$PWD/.carry/python${PYTHONPATH:+:$PYTHONPATH}
      FLASHCL_LIBRARY=$PWD/$B/libflashcl.so FLASHCL_STRUCT_LAYOUT=$PWD/$B/tests/struct_layout \
        FLASHCL_TEST_CUDA=1 timeout 500 python3 -m pytest -q -rs -p no:cacheprovider python/tests \
        2>&1 | tee "$OUT/python.txt"
      timeout 90 python3 bench/python_overhead.py --build "$B" --out "$OUT/h200-python-overhead" \
        2>&1 | tee -a "$OUT/python.txt" ;;
    large)
      # sizes past 32-bit indices (tests/large_check.c), sampled rows against float64:
      # issue 14's 32 heads of 524288 tokens, d 128, fp16 (2^31 elements per tensor,
      # 4 GiB), then 33 heads (2^31 + 2^26 elements: offsets past INT_MAX), then
      # 2^31 + 8192 query rows in all (the LSE and delta indices) on 16 keys.
      # All of them inside one 10-minute command: each run gets what is left of
      # LARGE_BUDGET seconds; the program prints each phase's time as it ends.
      L="$B/tests/flashcl-large-check"
      end=$((SECONDS + ${LARGE_BUDGET:-570}))
      for args in "--heads 32 --seqlen 524288 --head-dim 128 --backward --rows 16" \
                  "--heads 33 --seqlen 524288 --head-dim 128 --causal --backward --rows 16" \
                  "--heads 8192 --seqlen 262145 --seqlen-k 16 --head-dim 1 --backward --rows 32"; do
        left=$((end - SECONDS))
        if [ "$left" -le 0 ]; then
          echo "== no time left for flashcl-large-check $args" | tee -a "$OUT/large.txt"; continue
        fi
        echo "== flashcl-large-check $args (${left} s left)" | tee -a "$OUT/large.txt"
        ( time timeout "$left" "$L" $args ) 2>&1 | tee -a "$OUT/large.txt"
      done ;;
    *) echo "unknown step $step" ;;
  esac
done
