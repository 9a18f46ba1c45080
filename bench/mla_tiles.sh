#!/usr/bin/env bash
# MLA decoding's tensor-core tile side by side (NOTES.md run 32): forced
# decode tiles ROWS,COLS,WARPS,32,WD per head count (MLA_TILES_16,
# MLA_TILES_128: ';'-separated, '-' for the planner's), d 576 / dv 512, one
# shared cache, 64-key shuffled pages, fp16, one query row.  Expects the GPU
# session's environment (gpu_session.sh registers the driver).
set -u
B=${BUILD:-build}
OUT=${OUT:-/tmp/flashcl-out}
for h in 16 128; do
  var=MLA_TILES_$h
  IFS=';' read -ra tiles <<< "${!var:--}"
  for t in "${tiles[@]}"; do
    timeout 120 "$B/bench/flashcl-bench-decode" --dtypes fp16 --batches "${MLA_BATCHES:-16,64}" \
      --seqlens "${MLA_SEQLENS:-16384,65536}" --rows 1 --pages 64 --heads-q $h --heads-kv 1 \
      --head-dim 576 --head-dim-v 512 --shared-kv --prefill-seqlens "" --reps 10 --inner 3 \
      --copy-mib 1024 $([ "$t" != - ] && echo --decode-tile "$t") \
      --out "$OUT/mla_tile_${h}_${t//,/x}.csv" 2>&1 | sed "s/^mla /mla $t /" | tee -a "$OUT/mla_tiles.txt"
  done
done
