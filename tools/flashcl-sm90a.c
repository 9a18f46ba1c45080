/* flashcl-sm90a.c - the offline check of the wgmma piece's PTX
 * (tools/wgmma_ptx_check.sh): the pieces of the library's own sm_90a path,
 * one at a time, so that a compiler other than NVIDIA's (clang's NVPTX
 * target) can stand in for it on a machine without a GPU.
 *   flashcl-sm90a source                 the forward program's OpenCL C, as
 *                                        the library builds it
 *   flashcl-sm90a source-backward        the backward program's
 *   flashcl-sm90a MODE D fp16|bf16|e4m3|e5m2 [ROWS COLS | short | long]
 *                                        the build options of the wgmma plan
 *                                        of MODE (option_modes below: the
 *                                        kernel, its copies, its build bits)
 *                                        for head_dim D on the nvidia-h100
 *                                        profile: the default tile, the
 *                                        forced ROWS x COLS one (dK/dV: query
 *                                        rows by keys), or with "short" or
 *                                        "long" the tile a call's lengths
 *                                        ask for (few or many keys; dK/dV:
 *                                        few query rows with "short")
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

/* The option modes: the kernel, whether its streamed tiles come by the
 * tensor memory accelerator, and the build bits.  "options": the forward,
 * K and V by the accelerator, as on an H100 where libcuda is found;
 * "options-cpasync": by cp.async; "options-fp8-products": E4M3 at head_dim
 * 128 with FP8 products (FLASHCL_FP8_PRODUCTS=1); "options-dkdv": dK/dV,
 * Q and dO by cp.async (FLASHCL_WGMMA_BACKWARD_TMA=0's), "-tma" by the
 * accelerator (the default), "-gqa" so under GQA (FCL_BUILD_WG_TMA_HEADS),
 * "-fused" with the fused dQ (FLASHCL_BACKWARD_DQ=ordered), "-fused-tma"
 * so by the accelerator; "options-dq": dQ, K and V by cp.async, "-tma" by
 * the accelerator (the default); "-whole": a call with no edge tile
 * (FCL_BUILD_WHOLE_TILES). */
typedef struct option_mode {
    const char *name;
    fcl_kernel_kind kind;
    int tma;
    unsigned build;
} option_mode;
static const option_mode option_modes[] = {
    {"options", FCL_KERNEL_FORWARD, 1, 0},
    {"options-cpasync", FCL_KERNEL_FORWARD, 0, 0},
    {"options-fp8-products", FCL_KERNEL_FORWARD, 1, FCL_BUILD_FP8_PRODUCTS},
    {"options-whole", FCL_KERNEL_FORWARD, 1, FCL_BUILD_WHOLE_TILES},
    {"options-dkdv", FCL_KERNEL_BACKWARD_DKDV, 0, 0},
    {"options-dkdv-tma", FCL_KERNEL_BACKWARD_DKDV, 1, 0},
    {"options-dkdv-gqa", FCL_KERNEL_BACKWARD_DKDV, 1, FCL_BUILD_WG_TMA_HEADS},
    {"options-dkdv-fused", FCL_KERNEL_BACKWARD_DKDV, 0, FCL_BUILD_FUSED_DQ},
    {"options-dkdv-fused-tma", FCL_KERNEL_BACKWARD_DKDV, 1, FCL_BUILD_FUSED_DQ},
    {"options-dkdv-whole", FCL_KERNEL_BACKWARD_DKDV, 1, FCL_BUILD_WHOLE_TILES},
    {"options-dq", FCL_KERNEL_BACKWARD_DQ, 0, 0},
    {"options-dq-tma", FCL_KERNEL_BACKWARD_DQ, 1, 0},
    {"options-dq-whole", FCL_KERNEL_BACKWARD_DQ, 1, FCL_BUILD_WHOLE_TILES},
};
#define OPTION_MODES (sizeof option_modes / sizeof option_modes[0])

static const option_mode *find_mode(const char *name)
{
    for (size_t i = 0; i < OPTION_MODES; ++i)
        if (strcmp(option_modes[i].name, name) == 0)
            return &option_modes[i];
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: flashcl-sm90a source[-backward] | rewrite | MODE D "
                    "fp16|bf16|e4m3|e5m2 [ROWS COLS | short | long], MODE one of:");
    for (size_t i = 0; i < OPTION_MODES; ++i)
        fprintf(stderr, " %s", option_modes[i].name);
    fputc('\n', stderr);
    return 1;
}

static int print_options(const option_mode *mode, int argc, char **argv)
{
    /* short / long: the tile a call's lengths ask for (plan.h's
     * FCL_BUILD_WG_SHORT, FCL_BUILD_WG_LONG), where the call would take it */
    const int by_length = argc == 5 ? strcmp(argv[4], "short") == 0   ? FCL_BUILD_WG_SHORT
                                      : strcmp(argv[4], "long") == 0 ? FCL_BUILD_WG_LONG
                                                                     : -1
                                    : 0;
    if ((argc != 4 && argc != 5 && argc != 6) || by_length < 0)
        return usage();
    const fcl_kernel_kind kind = mode->kind;
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
    const unsigned build =
        (unsigned)by_length | (mode->tma ? FCL_BUILD_WG_TMA : 0) | mode->build;
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
    const option_mode *mode = argc >= 2 ? find_mode(argv[1]) : NULL;
    if (mode != NULL)
        return print_options(mode, argc, argv);
    if (argc >= 2 && strcmp(argv[1], "rewrite") == 0)
        return rewrite();
    return usage();
}
