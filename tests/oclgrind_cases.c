/* oclgrind_cases - small forward and backward cases (plain, and with every
 * attention variant) meant to run under
 * Oclgrind (`oclgrind --data-races --uninitialized ...`), which then reports
 * data races, out-of-bounds accesses and reads of uninitialised memory in
 * the kernels.  The tile plans of the device and of a few emulated profiles
 * are exercised, and the tensor-core pieces on their emulated warp
 * operations (cl/warp_emulated.cl: there a missing barrier around the K/V
 * pipeline is a race), and the KV-cache call with paged keys, packed heads
 * and split-KV, with rotary (the rotated Q in the workspace); the CPU piece (cl/tile_cpu.cl) through the cpu-avx2 profile,
 * plain, with every variant and in the KV-cache call (pages smaller than its
 * key tile); FP8 storage with descales on the device's plan, the CPU piece
 * and the emulated tensor cores (tiles decoded as they are loaded); NaN and
 * infinities next to masked scores, which every kernel's exact path handles
 * (its extra barriers checked too); attention sinks in the forward (split
 * and not, their merge), the backward's sink gradient (its reduction's
 * barriers) and the KV-cache call; one shared K/V cache (MLA) on the
 * device's plan and on the emulated tensor cores' split of a 16-row block
 * over 4 warps.  The results are also checked against
 * the reference.  Exit
 * status 0 only if every case passed; the ctest wrapper additionally fails
 * on any Oclgrind report (tests/run_oclgrind.cmake). */
#include "internal.h"
#include "kvcache_support.h"
#include "nonfinite_support.h"
#include "test_support.h"

#include <math.h>
#include <stdio.h>

int main(void)
{
    const char *profiles[] = {NULL, "small-32k", "amd-cdna", "nvidia-h100", "cpu-avx2"};
    /* the device's own plan runs the first two cases, each profile one */
    const fa_case cases[] = {
        /* B Hq Hk Sq Sk d dtype causal scale layout padded scales seed */
        {1, 2, 1, 19, 33, 16, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 1, {0, 0, 0}, 1, NULL},
        {2, 1, 1, 33, 9, 24, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BHSD, 0, {0, 0, 0}, 2, NULL},
        {1, 1, 1, 17, 17, 8, FCL_DTYPE_BF16, 0, 0.5f, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 3, NULL},
        /* head_dim 20: a register block of 8 columns and 4 left over */
        {1, 2, 1, 21, 35, 20, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 1, {0, 0, 0}, 10, NULL},
    };
    int failures = 0;
    for (size_t p = 0; p < sizeof profiles / sizeof profiles[0]; ++p) {
        fcl_context *ctx = test_context(profiles[p]);
        if (ctx == NULL)
            return 1;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
            fa_result r;
            if ((p == 0 && i == 2) || (p > 0 && i != p - 1))
                continue;
            failures += !fa_check_forward(ctx, &cases[i], &r);
            failures += !fa_check_backward(ctx, &cases[i], &r);
        }
        fcl_context_destroy(ctx);
    }
    /* every variant at once, on the device's own plan */
    const int lq[2] = {13, 0}, lk[2] = {19, 4};
    fa_variants v = fa_no_variants();
    v.window_left = 6;
    v.alibi = FCL_ALIBI_PER_BATCH_HEAD;
    v.softcap = 10.0f;
    v.dropout_p = 0.2f;
    v.dropout_seed = 3;
    v.seqlens_q = lq;
    v.seqlens_k = lk;
    v.block_m = 4;
    v.block_n = 8;
    v.block_density = 0.7;
    const fa_case all = {2, 2, 1, 13, 19, 8, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 1,
                         {0, 0, 0}, 4, &v};
    fa_result r;
    for (int p = 0; p < 2; ++p) { /* the device's plan and the CPU piece's */
        fcl_context *ctx = test_context(p == 0 ? NULL : "cpu-avx2");
        if (ctx == NULL)
            return 1;
        failures += !fa_check_forward(ctx, &all, &r);
        failures += !fa_check_backward(ctx, &all, &r);
        fcl_context_destroy(ctx);
    }
    fcl_context *ctx;

    /* the tensor-core pieces, emulated, on tiles of 2 warps x 16 rows and 32
     * keys or rows per step, so the K/V pipeline crosses tiles; with the
     * variants that skip or mask inside tiles */
    fa_variants tv = fa_no_variants();
    tv.window_left = 20;
    tv.dropout_p = 0.2f;
    tv.dropout_seed = 9;
    tv.block_m = 16;
    tv.block_n = 16;
    tv.block_density = 0.7;
    const fa_case tc[2] = {
        {1, 2, 1, 21, 70, 16, FCL_DTYPE_FP16, 1, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 5, NULL},
        {1, 1, 1, 40, 45, 16, FCL_DTYPE_BF16, 0, 0, FCL_LAYOUT_BHSD, 0, {0, 0, 0}, 6, &tv},
    };
    ctx = test_context(NULL);
    if (ctx == NULL || fcl_debug_emulate_tensor_cores(ctx, 1) != FCL_OK ||
        fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 32, 32, 2, 32) != FCL_OK ||
        fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DQ, 32, 32, 2, 32) != FCL_OK ||
        fcl_debug_set_tile(ctx, FCL_KERNEL_BACKWARD_DKDV, 32, 32, 2, 32) != FCL_OK)
        return 1;
    for (int i = 0; i < 2; ++i) {
        failures += !fa_check_forward(ctx, &tc[i], &r);
        failures += !fa_check_backward(ctx, &tc[i], &r);
    }
    fcl_context_destroy(ctx);

    /* the KV-cache call: the append kernel, the forward's own check, paged keys (tiles
     * across pages), packed heads, split-KV with an empty chunk and the
     * merge; on the portable piece and on the emulated tensor cores */
    static const int lens[2] = {21, 0};
    /* B Hq Hk d sq new dtype page cap lens causal window softcap alibi splits seed */
    const kv_case kv[2] = {
        {2, 4, 2, 16, 2, 1, FCL_DTYPE_FP32, 8, 48, lens, 1, -1, 0, 0, 3, 7},
        {2, 4, 1, 16, 1, 2, FCL_DTYPE_FP16, 8, 48, lens, 1, 9, 0, 1, 2, 8},
    };
    for (int i = 0; i < 3; ++i) { /* portable, emulated tensor cores, CPU piece */
        ctx = test_context(i == 2 ? "cpu-avx2" : NULL);
        if (ctx == NULL || fcl_debug_emulate_tensor_cores(ctx, i == 1) != FCL_OK)
            return 1;
        failures += !kv_run(ctx, &kv[i == 1]);
        fcl_context_destroy(ctx);
    }
    /* K and V pages interleaved in one allocation, appends across pages
     * (issue 23's layout: the append and the forward on footprints that
     * interleave) */
    static const int lens_il[2] = {3, 6};
    const kv_case il = {2, 2, 1, 16, 1, 2, FCL_DTYPE_FP32, 4, 12, lens_il, 1, -1, 0, 0, 0, 9};
    ctx = test_context(NULL);
    if (ctx == NULL)
        return 1;
    failures += !kv_run_interleaved(ctx, &il);
    /* rotary: K rows rotated as they are appended across pages, Q into the
     * workspace (a row before position 0 too), both pair forms, part of
     * head_dim */
    static const int lens_rot[2] = {2, 0};
    const kv_case rot_case = {2, 2, 1, 16, 2, 3, FCL_DTYPE_FP16, 4, 12, lens_rot, 0, -1, 0, 0, 0, 10};
    for (int interleaved = 0; interleaved <= 1; ++interleaved) {
        const kv_rotary rot = {10, interleaved};
        failures += !kv_run_rotary(ctx, &rot_case, &rot);
    }
    fcl_context_destroy(ctx);
    /* FP8 forwards: E5M2 into fp32 on the device's plan, E4M3 into bf16 on
     * the CPU piece, E4M3 into fp16 on the emulated tensor cores */
    fa_variants f8[3];
    for (int i = 0; i < 3; ++i) {
        f8[i] = fa_no_variants();
        f8[i].descales = 1;
        f8[i].out_dtype = i == 0 ? FCL_DTYPE_FP32 : i == 1 ? FCL_DTYPE_BF16 : FCL_DTYPE_FP16;
        f8[i].p_fp16 = i == 2;
    }
    const fa_case fp8[3] = {
        {1, 2, 1, 19, 33, 24, FCL_DTYPE_FP8_E5M2, 1, 0, FCL_LAYOUT_BSHD, 1, {0, 0, 0}, 11, &f8[0]},
        {1, 2, 1, 21, 35, 20, FCL_DTYPE_FP8_E4M3, 1, 0, FCL_LAYOUT_BSHD, 1, {0, 0, 0}, 12, &f8[1]},
        {1, 2, 1, 21, 40, 16, FCL_DTYPE_FP8_E4M3, 0, 0, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 13, &f8[2]},
    };
    for (int i = 0; i < 3; ++i) {
        ctx = test_context(i == 1 ? "cpu-avx2" : NULL);
        if (ctx == NULL || fcl_debug_emulate_tensor_cores(ctx, i == 2) != FCL_OK)
            return 1;
        failures += !fa_check_forward(ctx, &fp8[i], &r);
        fcl_context_destroy(ctx);
    }
    /* non-finite inputs next to masked scores (nonfinite_support.h): every
     * kernel's exact path and its barriers, on the device's plan, the
     * emulated tensor cores (2 warps x 16 rows) and the CPU piece */
    const nf_case nf = {1, 1, 40, 40, 16, FCL_DTYPE_FP16, 1, -1, -1, 0, 0, 1,
                        {{NF_V, 0, 25, 0, INFINITY}, {NF_K, 0, 30, 1, NAN},
                         {NF_Q, 0, 10, 2, INFINITY}, {NF_DO, 0, 12, 3, -INFINITY}},
                        14};
    for (int i = 0; i < 3; ++i) {
        ctx = test_context(i == 2 ? "cpu-avx2" : NULL);
        if (ctx == NULL || fcl_debug_emulate_tensor_cores(ctx, i == 1) != FCL_OK)
            return 1;
        for (int k = 0; k < 3 && i == 1; ++k)
            if (fcl_debug_set_tile(ctx, (fcl_kernel_kind)k, 32, 32, 2, 32) != FCL_OK)
                return 1;
        failures += !nf_check(ctx, &nf);
        fcl_context_destroy(ctx);
    }
    /* attention sinks: forward and backward (dsinks) with a window on the
     * device's plan, the forward split (the merge joins them), the KV call */
    fa_variants sv = fa_no_variants();
    sv.sinks = 1;
    sv.window_left = 7;
    const fa_case sc = {2, 2, 1, 13, 19, 8, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0,
                        {0, 0, 0}, 15, &sv};
    fa_variants sv_split = sv;
    sv_split.num_splits = 2;
    const fa_case sc_split = {1, 4, 2, 2, 40, 8, FCL_DTYPE_FP16, 0, 0, FCL_LAYOUT_BSHD, 0,
                              {0, 0, 0}, 16, &sv_split};
    ctx = test_context(NULL);
    if (ctx == NULL)
        return 1;
    failures += !fa_check_forward(ctx, &sc, &r);
    failures += !fa_check_backward(ctx, &sc, &r);
    failures += !fa_check_forward(ctx, &sc_split, &r);
    failures += !kv_run_sinks(ctx, &kv[0]);
    fcl_context_destroy(ctx);
    /* one shared K/V cache (MLA's form, V = K's first head_dim_v columns:
     * 16 packed heads, sinks, pages) on the device's plan and
     * on the emulated tensor cores, there with the split that head_dims
     * above 256 get (forced at 64: 4 warps a 16-row block, row maxima and
     * sums and P through __local, K's two buffers): their bounds and
     * initialisation.  The emulated warp operations hold work-group
     * barriers of their own, which hide a missing one between warps; the
     * GPU runs of test_mla check that ordering on real warps. */
    static const int lens_mla[1] = {100}; /* a whole tile of 64 keys, then an edge tile */
    const kv_case mla = {1, 16, 1, 64, 1, 1, FCL_DTYPE_FP16, 16, 112, lens_mla, 1, -1, 0, 0, 1, 17};
    for (int i = 0; i < 2; ++i) {
        ctx = test_context(NULL);
        if (ctx == NULL || fcl_debug_emulate_tensor_cores(ctx, i == 1) != FCL_OK)
            return 1;
        if (i == 1 && (fcl_debug_set_tile(ctx, FCL_KERNEL_DECODE, 16, 64, 4, 32) != FCL_OK ||
                       fcl_debug_set_tile_split(ctx, FCL_KERNEL_DECODE, 4) != FCL_OK))
            return 1;
        failures += !kv_run_shared(ctx, &mla, 48, 1);
        fcl_context_destroy(ctx);
    }
    printf("oclgrind cases: %d failure(s)\n", failures);
    return failures != 0;
}
