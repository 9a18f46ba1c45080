#!/bin/sh
# wgmma_ptx_check.sh - the wgmma piece through the sm_90a step, offline.
#
# Builds the forward program's OpenCL C (as the library embeds it) with the
# build options of its wgmma plans, and the backward program's with dK/dV's
# (dkdv-NAME; dkdv-fused-NAME with the fused dQ) and dQ's (dq-NAME), for the
# nvidia-h100 profile, through clang's NVPTX target
# and libclc instead of NVIDIA's OpenCL compiler, rewrites the
# PTX as the library does (src/programs/ptx_rewrite.c, through
# tools/flashcl-sm90a) and asks ptxas for sm_90a to accept it.  clang 15
# knows no sm_90, so it emits sm_80 PTX of version 7.5, which is relabelled
# sm_90 / 8.3 first (8.3: tensormap.replace; NVIDIA's compiler labels its
# output sm_90 / 9.0): what counts in the end is that compiler on the GPU
# (bench/gpu_session.sh).  Its register counts are clang's, not the
# driver's (the forward's 64 x 64 tile: 203 here, 106 in the driver's PTX,
# NOTES.md run 73): for those, bring the driver's PTX back from the GPU
# (gpu_session.sh's driver-ptx step) and read it with
# tools/cache_ptx_report.py.  What this check says is whether the rewrite
# and ptxas accept the PTX.  Each plan is checked with K and V by the tensor
# memory accelerator (as on an H100 whose driver encodes tensor maps) and,
# as NAME-cpasync, by cp.async (the backward: cp.async mode only; FP8
# storage's forward in both, its K and V widened to fp16 first on the
# accelerator's path).
#
# Where NVIDIA's disassembler is found (NVDISASM, or nvdisasm on the path;
# the toolkit here lacks it, PyPI's nvidia-cuda-nvdisasm wheel has it), each
# forward plan also says where ptxas put the wait for the previous tile's
# P V: after the softmax's exponentials, as the source orders it, or before
# them (ptxas moves a wgmma wait up to the wgmma instruction before it
# unless data holds it back; NOTES.md, run 46).
#
# EXTRA_OPTIONS adds build options to every plan's (a measurement build's
# switches: -DFCL_WG_PV_FENCE=1, -DFCL_WG_STAMPS=1, tile_nv_wgmma.cl).
#
# Usage: tools/wgmma_ptx_check.sh [BUILD_DIR] [OUT_DIR]
#   (defaults: build, and a temporary folder); prints, per plan, the
#   instructions rewritten and ptxas's registers, spills and warnings;
#   exits non-zero at the first failure.
set -eu
build=${1:-build}
out=${2:-$(mktemp -d)}
tool=$build/tools/flashcl-sm90a
clang=${CLANG:-clang-15}
ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
nvdisasm=${NVDISASM:-$(command -v nvdisasm || true)}
libclc=${LIBCLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}

# The forward's loop in the SASS of cubin $1: how many exponentials
# (MUFU.EX2) lie between the first wait for all but one group (Q K^T's) and
# the next wait for every group (P V's), of how many in the kernel.
pv_wait_order() {
    "$nvdisasm" -c "$1" | awk '
        /\.text\.fcl_forward:/ { f = 1 }
        !f { next }
        /MUFU.EX2/ { total++; if (open) between++ }
        /WARPGROUP.DEPBAR.LE gsb0, 0x1/ && !seen { open = 1; seen = 1 }
        /WARPGROUP.DEPBAR.LE gsb0, 0x0/ && open { open = 0 }
        END { printf "P V waited for after %d of the loop'"'"'s exponentials (%d in the kernel)", between + 0, total + 0 }'
}
mkdir -p "$out"
"$tool" source > "$out/forward.cl"
"$tool" source-backward > "$out/backward.cl"

# options, options-cpasync, options-dkdv[-fused] or options-dq, head_dim, storage, and an
# optional forced tile (rows, cols), or short / long: the tile a call's lengths ask for
check() {
    mode=$1
    shift
    name="d$1-$2${3:+-$3${4:+x$4}}"
    src=forward
    kernel=fcl_forward
    case $mode in
    options-cpasync) name="$name-cpasync" ;;
    options-fp8-products) name="$name-products" ;;
    options-dkdv) name="dkdv-$name" src=backward kernel=fcl_backward_dkdv ;;
    options-dkdv-fused) name="dkdv-fused-$name" src=backward kernel=fcl_backward_dkdv ;;
    options-dkdv-fused-tma) name="dkdv-fused-tma-$name" src=backward kernel=fcl_backward_dkdv ;;
    options-whole) name="$name-whole" ;;
    options-dkdv-whole) name="dkdv-whole-$name" src=backward kernel=fcl_backward_dkdv ;;
    options-dq-whole) name="dq-whole-$name" src=backward kernel=fcl_backward_dq ;;
    options-dkdv-tma) name="dkdv-tma-$name" src=backward kernel=fcl_backward_dkdv ;;
    options-dkdv-gqa) name="dkdv-gqa-$name" src=backward kernel=fcl_backward_dkdv ;;
    options-dq) name="dq-$name" src=backward kernel=fcl_backward_dq ;;
    options-dq-tma) name="dq-tma-$name" src=backward kernel=fcl_backward_dq ;;
    esac
    opts=$("$tool" "$mode" "$@")
    # asm: NVIDIA's compiler takes the keyword in OpenCL C, clang its
    # GNU spelling
    "$clang" -x cl $opts ${EXTRA_OPTIONS:-} -Dasm=__asm__ -target nvptx64-unknown-nvidiacl \
        -Xclang -finclude-default-header -O2 -march=sm_80 \
        -Xclang -mlink-builtin-bitcode -Xclang "$libclc" \
        -S "$out/$src.cl" -o "$out/$name.sm80.ptx"
    sed -e 's/^\.version .*/.version 8.3/' -e 's/^\.target sm_80/.target sm_90/' \
        "$out/$name.sm80.ptx" > "$out/$name.sm90.ptx"
    "$tool" rewrite < "$out/$name.sm90.ptx" > "$out/$name.sm90a.ptx" 2> "$out/$name.rewrite.log"
    if grep -q '@sm90a@' "$out/$name.sm90a.ptx"; then
        echo "$name: a marker was left in the PTX" >&2
        exit 1
    fi
    "$ptxas" -arch=sm_90a -v "$out/$name.sm90a.ptx" -o "$out/$name.cubin" > "$out/$name.ptxas.log" 2>&1 || {
        cat "$out/$name.ptxas.log" >&2
        exit 1
    }
    wgmma=$(grep -c 'wgmma.mma_async' "$out/$name.sm90a.ptx" || true)
    regs=$(sed -n "/Function properties for $kernel\$/,/Used/p" "$out/$name.ptxas.log" |
           tr '\n' ' ' | sed 's/.*stack frame, //; s/ptxas info *: //')
    warn=$(grep -ci 'warning' "$out/$name.ptxas.log" || true)
    # ptxas's notes on the pipeline (tile_nv_wgmma.cl): C7519, a
    # warpgroup.arrive put before a wgmma whose registers were written
    # since the fence; C7517, a wait put before a read of registers a
    # running wgmma writes; C7513, the wgmmas serialised
    arrive=$(grep -c 'C7519' "$out/$name.ptxas.log" || true)
    wait=$(grep -c 'C7517' "$out/$name.ptxas.log" || true)
    serial=$(grep -c 'C7513' "$out/$name.ptxas.log" || true)
    echo "$name: $(cat "$out/$name.rewrite.log"), $wgmma wgmma.mma_async; ptxas sm_90a OK:" \
         "$kernel $regs; $warn warning(s); injected: $arrive arrive(s), $wait wait(s);" \
         "serialised: $serial"
    grep -i 'warning' "$out/$name.ptxas.log" || true
    if [ -n "$nvdisasm" ] && [ "$kernel" = fcl_forward ]; then
        echo "  $name: $(pv_wait_order "$out/$name.cubin")"
    fi
}

for mode in options options-cpasync; do
    check $mode 64 fp16
    check $mode 64 bf16
    check $mode 128 fp16
    check $mode 128 bf16
    check $mode 128 fp16 64 64
    check $mode 64 bf16 128 192
    # the tiles by length (plan.h): few keys, many keys
    check $mode 64 fp16 short
    check $mode 64 fp16 long
done
# FP8 storage's forward: on the accelerator K and V widened to fp16 by the
# call's first launch (fcl_forward_widen, in the same program); on cp.async
# their bytes staged and decoded to fp16 on chip
check options 64 e4m3
check options 128 e5m2
check options-cpasync 64 e4m3
check options-cpasync 128 e5m2
check options-cpasync 128 e4m3
# FP8 products (FLASHCL_FP8_PRODUCTS=1): E4M3 wgmma from byte tiles
check options-fp8-products 128 e4m3
check options-dkdv 64 fp16
check options-dkdv 128 fp16
check options-dkdv 128 bf16
check options-dkdv 64 fp16 64 64
check options-dkdv 128 fp16 128 128
check options-dkdv 128 fp16 short
# Q and dO by the accelerator (the default; options-dkdv is
# FLASHCL_WGMMA_BACKWARD_TMA=0's cp.async)
check options-dkdv-tma 64 fp16
check options-dkdv-tma 128 fp16
check options-dkdv-tma 128 bf16 short
# ... under GQA: a pair of maps for each query head of a K/V head
check options-dkdv-gqa 64 fp16
check options-dkdv-gqa 128 fp16
check options-dkdv-gqa 128 bf16 short
check options-dkdv-fused 64 fp16
check options-dkdv-fused 128 bf16
check options-dkdv-fused 128 fp16 64 64
check options-dkdv-fused 64 fp16 128 64
# ... with Q and dO by the accelerator
check options-dkdv-fused-tma 64 fp16
check options-dkdv-fused-tma 128 bf16
check options-dq 64 fp16
check options-dq 128 fp16
check options-dq 128 bf16
check options-dq 64 fp16 128 64
check options-dq 128 fp16 128 128
# K and V by the accelerator (the default)
check options-dq-tma 64 fp16
check options-dq-tma 128 fp16
check options-dq-tma 128 bf16 128 128
# a call with no edge tile (FCL_BUILD_WHOLE_TILES): the edge tests compiled away
check options-whole 64 fp16 short
check options-whole 128 fp16
check options-dkdv-whole 64 fp16
check options-dkdv-whole 128 bf16
check options-dq-whole 64 fp16 long
check options-dq-whole 128 fp16
echo "all accepted; PTX and logs in $out"
