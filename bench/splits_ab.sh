#!/usr/bin/env bash
# The split rule side by side (NOTES.md run 30): automatic chunk counts
# against the counts the previous rule chose (the device's resident slots
# rounded up), on the shapes where the two differ.  Expects the GPU
# session's environment (gpu_session.sh registers the driver).
set -u
B=${BUILD:-build}
OUT=${OUT:-/tmp/flashcl-out}
run() { # name, then flashcl-bench-decode arguments
  local name=$1; shift
  timeout 150 "$B/bench/flashcl-bench-decode" --dtypes fp16 --rows 1 --pages 0 --prefill-seqlens "" \
    --reps 10 --inner 5 --copy-mib 1024 "$@" --out "$OUT/ab_$name.csv" 2>&1 | tee -a "$OUT/splits_ab.txt"
}
# Hq 32 / Hkv 8, d 128: B 8 (old 17 chunks), B 32 (old 5)
for b in 8:17 32:5; do
  run "d128_b${b%%:*}_auto" --batches "${b%%:*}" --seqlens 8192,32768,131072
  run "d128_b${b%%:*}_old" --batches "${b%%:*}" --seqlens 8192,32768,131072 --splits "${b##*:}"
done
# MLA, 16 heads, d 576 / dv 512, one shared cache, 64-key pages: B 16 (old 9), B 64 (old 3)
for b in 16:9 64:3; do
  run "mla_b${b%%:*}_auto" --batches "${b%%:*}" --seqlens 16384,65536 --pages 64 --heads-q 16 \
    --heads-kv 1 --head-dim 576 --head-dim-v 512 --shared-kv
  run "mla_b${b%%:*}_old" --batches "${b%%:*}" --seqlens 16384,65536 --pages 64 --heads-q 16 \
    --heads-kv 1 --head-dim 576 --head-dim-v 512 --shared-kv --splits "${b##*:}"
done
