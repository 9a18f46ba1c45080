/* flashcl-sm90a.c - the offline check of the wgmma piece's PTX
 * (tools/wgmma_ptx_check.sh): the pieces of the library's own sm_90a path,
 * one at a time, so that a compiler other than NVIDIA's (clang's NVPTX
 * target) can stand in for it on a machine without a GPU.
 *   flashcl-sm90a source                 the forward program's OpenCL C, as
 *                                        the library builds it
 *   flashcl-sm90a source-backward        the backward program's
 *   flashcl-sm90a options D fp16|bf16|e4m3|e5m2 [ROWS COLS]
 *                                        the build options of the wgmma plan
 *                                        for head_dim D on the nvidia-h100
 *                                        profile (the default tile, or the
 *                                        forced ROWS x COLS one), K and V by
 *                                        the tensor memory accelerator (FP8:
 *                                        by the warps' decoding loads); with
 *                                        "short" or "long" in place of ROWS
 *                                        COLS, the tile a call's lengths ask
 *                                        for (few or many keys; dK/dV: few
 *                                        query rows with "short")
 *   flashcl-sm90a options-cpasync ...    the same, K and V by cp.async
 *   flashcl-sm90a options-dkdv D fp16|bf16 [ROWS COLS]
 *                                        dK/dV's wgmma plan (ROWS query rows
 *                                        by COLS keys when forced)
 *   flashcl-sm90a options-dkdv-fused ... dK/dV's with the fused dQ
 *                                        (FLASHCL_BACKWARD_DQ=ordered)
 *   flashcl-sm90a options-dkdv-tma ...   dK/dV's with Q and dO by the
 *                                        accelerator (the default;
 *                                        options-dkdv: cp.async, as with
 *                                        FLASHCL_WGMMA_BACKWARD_TMA=0)
 *   flashcl-sm90a options-dkdv-gqa ...   ... under GQA (a pair of maps for
 *                                        each query head of a K/V head)
 *   flashcl-sm90a options-dkdv-fused-tma ...
 *                                        the fused dQ's with Q and dO by the
 *                                        accelerator
 *   flashcl-sm90a options-dq ...         dQ's (ROWS query rows by COLS keys),
 *                                        K and V by cp.async
 *   flashcl-sm90a options-dq-tma ...     ... by the accelerator (the default)
 *   flashcl-sm90a rewrite < in > out     the PTX rewrite (ptx_rewrite.c);
 *                                        the count of instructions written
 *                                        goes to stderr
 * Exits 1 with a message on any failure. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_source(fcl_program_id id)
{
    const char *srcs[16];
    const size_t n = fcl_program_sources(id, srcs, 16);
    for (size_t i = 0; i < n && i < 16; ++i)
        fputs(srcs[i], stdout);
    return 0;
}

static int print_options(int argc, char **argv)
{
    /* short / long: the tile a call's lengths ask for (plan.h's
     * FCL_BUILD_WG_SHORT, FCL_BUILD_WG_LONG), where the call would take it */
    const int by_length = argc == 5 ? strcmp(argv[4], "short") == 0   ? FCL_BUILD_WG_SHORT
                                      : strcmp(argv[4], "long") == 0 ? FCL_BUILD_WG_LONG
                                                                     : -1
                                    : 0;
    if ((argc != 4 && argc != 5 && argc != 6) || by_length < 0)
        return fprintf(stderr, "options[-cpasync|-fp8-products|-dkdv|-dkdv-fused[-tma]|-dkdv-tma|"
                               "-dkdv-gqa|-dq|-dq-tma] D fp16|bf16|e4m3|e5m2 "
                               "[ROWS COLS | short | long]\n"),
               1;
    /* "options": K and V by the tensor memory accelerator, as on an H100
     * where libcuda is found; "options-cpasync": by cp.async;
     * "options-dkdv": the backward's dK/dV, "options-dkdv-fused" with the
     * fused dQ (FLASHCL_BACKWARD_DQ=ordered), "options-dkdv-tma" with Q and
     * dO by the accelerator (the default; "options-dkdv" is
     * FLASHCL_WGMMA_BACKWARD_TMA=0's), "options-dkdv-gqa" so under GQA
     * (FCL_BUILD_WG_TMA_HEADS), "options-dkdv-fused-tma" the fused dQ's
     * so; "options-dq": its dQ, "options-dq-tma"
     * with K and V by the accelerator (the default);
     * "options-fp8-products": the forward of E4M3 at head_dim 128 with FP8
     * products (FLASHCL_FP8_PRODUCTS=1) */
    const int products = strcmp(argv[1], "options-fp8-products") == 0;
    const int gqa = strcmp(argv[1], "options-dkdv-gqa") == 0;
    const int fused_tma = strcmp(argv[1], "options-dkdv-fused-tma") == 0;
    const int dkdv_tma = strcmp(argv[1], "options-dkdv-tma") == 0 || gqa || fused_tma;
    const int dq_tma = strcmp(argv[1], "options-dq-tma") == 0;
    const int tma = strcmp(argv[1], "options") == 0 || products || dkdv_tma || dq_tma;
    const int fused = strcmp(argv[1], "options-dkdv-fused") == 0 || fused_tma;
    const fcl_kernel_kind kind = strcmp(argv[1], "options-dkdv") == 0 || fused || dkdv_tma
                                     ? FCL_KERNEL_BACKWARD_DKDV
                                 : strcmp(argv[1], "options-dq") == 0 || dq_tma
                                     ? FCL_KERNEL_BACKWARD_DQ
                                     : FCL_KERNEL_FORWARD;
    const size_t d = (size_t)atoi(argv[2]);
    /* e4m3 / e5m2: FP8 storage (the forward: "options" reads K and V
     * widened to fp16 by the call's first launch, "options-cpasync" decodes
     * their bytes on chip) */
    const fcl_dtype dtype = strcmp(argv[3], "bf16") == 0   ? FCL_DTYPE_BF16
                            : strcmp(argv[3], "e4m3") == 0 ? FCL_DTYPE_FP8_E4M3
                            : strcmp(argv[3], "e5m2") == 0 ? FCL_DTYPE_FP8_E5M2
                                                           : FCL_DTYPE_FP16;
    if (dtype == FCL_DTYPE_FP16 && strcmp(argv[3], "fp16") != 0)
        return fprintf(stderr, "unknown storage type %s\n", argv[3]), 1;
    const int fp8 = fcl_dtype_is_fp8(dtype);
    const fcl_profile *h100 = fcl_profile_find("nvidia-h100");
    fcl_tuned_tile forced = {0, 0, 0, 32, "forced", 0};
    if (argc == 6) {
        forced.rows = atoi(argv[4]);
        forced.cols = atoi(argv[5]);
        forced.ty = (kind == FCL_KERNEL_BACKWARD_DKDV ? forced.cols : forced.rows) / 16;
    }
    fcl_plan_full plan;
    const unsigned build = (unsigned)by_length | (tma ? FCL_BUILD_WG_TMA : 0) |
                           (fused ? FCL_BUILD_FUSED_DQ : 0) |
                           (products ? FCL_BUILD_FP8_PRODUCTS : 0) |
                           (gqa ? FCL_BUILD_WG_TMA_HEADS : 0);
    const fcl_status st = fcl_plan_make_wgmma(&h100->caps, kind, d, dtype, NULL,
                                              argc == 6 ? &forced : NULL, 0, build, &plan);
    if (st != FCL_OK)
        return fprintf(stderr, "no wgmma plan: %s\n", fcl_status_string(st)), 1;
    /* the plan's accelerator bit (fcl_wgmma_tma_allowed) */
    fcl_build b = fcl_build_of(kind, d, dtype,
                               FCL_BUILD_TILE_MMA | FCL_BUILD_WGMMA |
                                   (build & ~(unsigned)FCL_BUILD_WG_TMA) |
                                   (plan.wg_tma ? FCL_BUILD_WG_TMA : 0));
    b.out_dtype = fp8 ? FCL_DTYPE_FP16 : dtype;
    char opts[1024];
    if (fcl_kernel_options(&plan, &b, 0, opts, sizeof opts) >= (int)sizeof opts)
        return fprintf(stderr, "options too long\n"), 1;
    printf("%s\n", opts);
    return 0;
}

static int rewrite(void)
{
    size_t cap = 1 << 20, len = 0;
    char *ptx = malloc(cap);
    for (size_t got; ptx != NULL && (got = fread(ptx + len, 1, cap - len, stdin)) > 0;) {
        len += got;
        if (len == cap) {
            char *grown = realloc(ptx, cap *= 2);
            if (grown == NULL)
                free(ptx);
            ptx = grown;
        }
    }
    if (ptx == NULL)
        return fprintf(stderr, "out of memory\n"), 1;
    char *out = NULL, why[256];
    size_t out_len = 0, count = 0;
    const fcl_status st = fcl_ptx_to_sm90a(ptx, len, &out, &out_len, &count, why, sizeof why);
    free(ptx);
    if (st != FCL_OK)
        return fprintf(stderr, "%s\n", why), 1;
    fwrite(out, 1, out_len, stdout);
    free(out);
    fprintf(stderr, "%zu sm_90a instructions written\n", count);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "source") == 0)
        return print_source(FCL_PROGRAM_FORWARD);
    if (argc >= 2 && strcmp(argv[1], "source-backward") == 0)
        return print_source(FCL_PROGRAM_BACKWARD);
    if (argc >= 2 && (strcmp(argv[1], "options") == 0 || strcmp(argv[1], "options-cpasync") == 0 ||
                      strcmp(argv[1], "options-dkdv") == 0 ||
                      strcmp(argv[1], "options-fp8-products") == 0 ||
                      strcmp(argv[1], "options-dkdv-fused") == 0 ||
                      strcmp(argv[1], "options-dkdv-fused-tma") == 0 ||
                      strcmp(argv[1], "options-dkdv-tma") == 0 ||
                      strcmp(argv[1], "options-dkdv-gqa") == 0 ||
                      strcmp(argv[1], "options-dq") == 0 ||
                      strcmp(argv[1], "options-dq-tma") == 0))
        return print_options(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "rewrite") == 0)
        return rewrite();
    fprintf(stderr, "usage: flashcl-sm90a source[-backward] | "
                    "options[-cpasync|-fp8-products|-dkdv|-dkdv-fused[-tma]|-dkdv-tma|"
                    "-dkdv-gqa|-dq|-dq-tma] D "
                    "fp16|bf16|e4m3|e5m2 "
                    "[ROWS COLS | short | long] | "
                    "rewrite\n");
    return 1;
}
