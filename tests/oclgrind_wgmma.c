/* oclgrind_wgmma - the wgmma piece (cl/tile_nv_wgmma.cl, the default on
 * sm_90) under Oclgrind, on its emulated warpgroup operations
 * (cl/warpgroup_emulated.cl), apart from oclgrind_cases because its
 * smallest tiles (64 x 64) need more __local memory than Oclgrind's
 * default 32 KiB: the ctest wrapper gives this program 1 MiB
 * (tests/CMakeLists.txt).  Cases, each checked against the reference too:
 * the forward of FP8 storage (K and V widened to fp16 by a launch of their
 * own and brought in by the emulated tensor memory accelerator; and, not
 * in the "fp8" run below, with FLASHCL_WGMMA_TMA=0, their bytes staged and
 * decoded on chip) and of bf16 (K and V by the accelerator), and the
 * backward's two separate kernels, all with a 64 x 64 tile of one warpgroup, causal edge
 * tiles and two tiles along each sequence; and FP8 products
 * (FLASHCL_FP8_PRODUCTS=1, cl/tile_nv_wgmma_fp8.cl) with a 64 x 128 tile
 * at head_dim 128.  With the argument "fp8", the
 * FP8 forward alone: the uninitialised-value check's run, since the
 * backward took that check 8 minutes, and the bf16 forward run after the
 * FP8 one has its tensor maps' fields reported uninitialised there (not
 * alone, not after another bf16 forward, not with FLASHCL_WGMMA_TMA=0;
 * not yet explained, NOTES.md).  Not here: the fused dQ forms
 * (FLASHCL_BACKWARD_DQ), whose key-block order between work-groups (a
 * spin on a global counter, and the add's compare-and-swap loop) Oclgrind
 * reports as races on the mma.sync piece and on this one alike: it does
 * not model ordering between work-groups through atomics.  Exit status 0
 * only if every case passed; the wrapper also fails on any report. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "internal.h"
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const int fp8_only = argc > 1 && strcmp(argv[1], "fp8") == 0;
    fcl_context *ctx = test_context(NULL);
    if (ctx == NULL || fcl_debug_use_wgmma(ctx, 1) != FCL_OK ||
        fcl_debug_use_wgmma_backward(ctx, 1) != FCL_OK ||
        fcl_debug_emulate_tensor_cores(ctx, 1) != FCL_OK)
        return 1;
    static const fcl_kernel_kind kinds[3] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DKDV,
                                             FCL_KERNEL_BACKWARD_DQ};
    for (int k = 0; k < 3; ++k)
        if (fcl_debug_set_tile(ctx, kinds[k], 64, 64, 4, 32) != FCL_OK)
            return 1;
    fa_variants v = fa_no_variants();
    v.out_dtype = FCL_DTYPE_FP32;
    v.descales = 1;
    v.p_fp16 = 1; /* P rounded to fp16 for P V (test_support.h) */
    /* B Hq Hk Sq Sk d dtype causal scale layout padded scales seed */
    const fa_case fp8 = {1, 1, 1, 100, 90, 64, FCL_DTYPE_FP8_E4M3, 1, 0, FCL_LAYOUT_BSHD, 0,
                         {0, 0, 0}, 4, &v};
    const fa_case bf16 = {1, 1, 1, 100, 90, 64, FCL_DTYPE_BF16, 1, 0, FCL_LAYOUT_BSHD, 0,
                          {0, 0, 0}, 5, NULL};
    int failures = 0;
    fa_result r;
    failures += !fa_check_forward(ctx, &fp8, &r);
    if (!fp8_only) {
        if (setenv("FLASHCL_WGMMA_TMA", "0", 1) != 0)
            return 1;
        failures += !fa_check_forward(ctx, &fp8, &r);
        if (unsetenv("FLASHCL_WGMMA_TMA") != 0)
            return 1;
        failures += !fa_check_forward(ctx, &bf16, &r);
        failures += !fa_check_backward(ctx, &bf16, &r);
        /* FP8 products (FLASHCL_FP8_PRODUCTS=1): head_dim 128 and tiles of
         * 128 keys, two of them, causal edge tiles; held to its bound.  One
         * Q block of 40 rows: with 70 rows (two blocks) this program took
         * 257 s under the race check here, 136 s with 40 */
        fa_variants vp = v;
        vp.p_fp16 = 0;
        vp.fp8_products = 1;
        const fa_case p8 = {1, 1, 1, 40, 150, 128, FCL_DTYPE_FP8_E4M3, 1, 0, FCL_LAYOUT_BSHD, 0,
                            {0, 0, 0}, 6, &vp};
        if (setenv("FLASHCL_FP8_PRODUCTS", "1", 1) != 0 ||
            fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 64, 128, 4, 32) != FCL_OK)
            return 1;
        failures += !fa_check_forward(ctx, &p8, &r);
        if (unsetenv("FLASHCL_FP8_PRODUCTS") != 0 ||
            fcl_debug_set_tile(ctx, FCL_KERNEL_FORWARD, 64, 64, 4, 32) != FCL_OK)
            return 1;
    }
    /* the cases ran on the piece: its plans say so */
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, 100, 90, 64, FCL_DTYPE_FP8_E4M3, FCL_LAYOUT_BSHD);
    for (int k = 0; k < (fp8_only ? 1 : 3); ++k) {
        fcl_plan plan;
        d.dtype = k == 0 ? FCL_DTYPE_FP8_E4M3 : FCL_DTYPE_BF16;
        if (fcl_plan_query(ctx, &d, kinds[k], &plan) != FCL_OK ||
            strcmp(plan.variant, "emulated-wgmma") != 0) {
            fprintf(stderr, "kernel %d did not plan on the emulated wgmma piece\n", k);
            ++failures;
        }
    }
    fcl_context_destroy(ctx);
    printf("oclgrind wgmma cases: %d failure(s)\n", failures);
    return failures != 0;
}
