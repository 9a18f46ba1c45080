/* flashcl-tune - measures candidate tiles for the tuned table (plan_table.c).
 *
 * For each head_dim, forces each candidate target tile on one kernel at a time
 * (the others keep their table entry), times forward or whole backward passes
 * at one shape, and prints TFLOP/s with the plan actually launched and, on
 * NVIDIA, the compiler's register/spill report (-cl-nv-verbose).  A tool for
 * choosing table entries, not a benchmark: results go into NOTES.md. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "internal.h"

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

typedef struct tile {
    int rows, cols, ty, tx;
    int wd; /* tensor-core dK/dV: warps over head_dim (0: none) */
} tile;

/* S-tile rows x cols and the work-item grid; for dK/dV rows are keys. */
static const tile forward_tiles[] = {
    {64, 64, 16, 16, 0},  {64, 64, 16, 8, 0},  {128, 64, 16, 16, 0}, {128, 64, 16, 8, 0}, {64, 64, 8, 8, 0},
    {128, 128, 16, 16, 0}, {64, 128, 8, 16, 0}, {128, 32, 16, 8, 0},  {128, 64, 32, 8, 0}, {128, 128, 16, 8, 0},
    {64, 32, 8, 8, 0},    {32, 64, 8, 8, 0},   {128, 64, 32, 16, 0},
};
static const tile dq_tiles[] = {
    {64, 64, 16, 16, 0}, {64, 64, 16, 8, 0}, {128, 64, 16, 16, 0}, {128, 32, 16, 8, 0}, {64, 32, 16, 8, 0},
    {64, 32, 8, 8, 0},   {128, 64, 16, 8, 0}, {64, 64, 8, 16, 0},  {64, 32, 16, 16, 0},
};
static const tile dkdv_tiles[] = {
    {64, 64, 16, 16, 0}, {64, 64, 16, 8, 0}, {128, 64, 16, 16, 0}, {128, 32, 16, 8, 0}, {64, 32, 16, 8, 0},
    {64, 32, 8, 8, 0},   {128, 64, 16, 8, 0}, {64, 64, 8, 16, 0},  {128, 32, 32, 8, 0},
};

/* The tensor-core pieces (fp16/bf16 on NVIDIA sm_80+): rows x cols of the S
 * tile as above, ty = warps (tx is always 32); each warp owns rows / ty query
 * rows (cols / ty keys for dK/dV), so 64x64 on 4 warps is one 16-row block
 * per warp and 128x64 on 4 warps two. */
static const tile mma_forward_tiles[] = {
    {64, 64, 4, 32, 0},  {128, 64, 8, 32, 0}, {128, 64, 4, 32, 0}, {64, 128, 4, 32, 0}, {128, 128, 8, 32, 0},
    {128, 32, 4, 32, 0}, {256, 64, 8, 32, 0}, {128, 128, 4, 32, 0}, {64, 32, 4, 32, 0},
};
static const tile mma_dq_tiles[] = {
    {64, 64, 4, 32, 0},  {128, 64, 8, 32, 0}, {128, 64, 4, 32, 0}, {64, 128, 4, 32, 0},
    {128, 32, 4, 32, 0}, {64, 32, 4, 32, 0},  {128, 128, 8, 32, 0},
};
static const tile mma_dkdv_tiles[] = {
    {64, 64, 4, 32, 0},  {32, 64, 4, 32, 0},  {64, 128, 8, 32, 0}, {32, 128, 8, 32, 0},
    {32, 128, 4, 32, 0}, {64, 128, 4, 32, 0}, {128, 64, 4, 32, 0}, {16, 64, 4, 32, 0},
};

typedef struct problem {
    fcl_attention_desc desc;
    cl_mem q, k, v, o, lse, dout, dq, dk, dv;
} problem;

/* Random values in [-0.5, 0.5) stored as `dt` (fp32 for the LSE); FP8:
 * random bytes of magnitude below 2 (never a NaN or an infinity). */
static cl_mem filled(fcl_context *ctx, size_t count, fcl_dtype dt, unsigned seed)
{
    cl_int err;
    const size_t bytes = count * fcl_dtype_size(dt);
    void *h = malloc(bytes);
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < count; ++i) {
        s = s * 1664525u + 1013904223u;
        float f = (float)(s >> 8) / 16777216.0f - 0.5f;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (fcl_dtype_size(dt) == 1)
            ((uint8_t *)h)[i] = (uint8_t)((s >> 8) & 0xBFu); /* exponent field below its top half */
        else if (dt == FCL_DTYPE_FP32)
            ((float *)h)[i] = f;
        else if (dt == FCL_DTYPE_BF16)
            ((uint16_t *)h)[i] = (uint16_t)(bits >> 16);
        else /* |f| in [2^-14, 0.5): a normal fp16, truncated */
            ((uint16_t *)h)[i] = (uint16_t)(((bits >> 16) & 0x8000u) |
                                            (fabsf(f) < 6.2e-5f ? 0u : (((bits >> 23) & 0xFFu) - 112u) << 10 |
                                                                       ((bits >> 13) & 0x3FFu)));
    }
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              bytes, h, &err);
    free(h);
    return err == CL_SUCCESS ? m : NULL;
}

/* Median seconds of `reps` calls (after one warm-up), or -1 on error. */
static double time_pass(fcl_context *ctx, problem *p, int backward, int reps)
{
    double t[32];
    for (int r = -1; r < reps; ++r) {
        clFinish(fcl_context_cl_queue(ctx));
        double t0 = bench_now_s();
        fcl_status st = backward ? fcl_attention_backward(ctx, &p->desc, p->q, p->k, p->v, p->o,
                                                          p->lse, p->dout, p->dq, p->dk, p->dv, 0,
                                                          NULL, NULL)
                                 : fcl_attention_forward(ctx, &p->desc, p->q, p->k, p->v, p->o,
                                                         p->lse, 0, NULL, NULL);
        if (st == FCL_OK)
            st = clFinish(fcl_context_cl_queue(ctx));
        if (st != FCL_OK) {
            printf("    error: %s\n", fcl_status_string(st));
            return -1;
        }
        if (r >= 0)
            t[r] = bench_now_s() - t0;
    }
    return bench_median(t, reps);
}

/* Prints the lines of the build log that report registers and spills. */
static void print_resources(fcl_context *ctx, const fcl_attention_desc *desc, fcl_kernel_kind kind)
{
    static char log[1 << 16];
    log[0] = '\0';
    if (fcl_debug_kernel_log(ctx, desc, kind, log, sizeof log) != FCL_OK)
        return;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, "registers") || strstr(line, "spill"))
            printf("      %s\n", line);
}

static void sweep(fcl_context *ctx, problem *p, fcl_kernel_kind kind, const tile *tiles,
                  size_t n, int reps, int verbose)
{
    const fcl_attention_desc *d = &p->desc;
    const double fl = 4.0 * d->batch * d->heads_q * (double)d->seqlen_q * d->seqlen_k *
                      d->head_dim * (d->causal ? 0.5 : 1.0) *
                      (kind == FCL_KERNEL_FORWARD ? 1.0 : 2.5);
    const char *name = kind == FCL_KERNEL_FORWARD ? "forward" : kind == FCL_KERNEL_BACKWARD_DQ
                                                                    ? "backward, varying dQ"
                                                                    : "backward, varying dK/dV";
    printf("  %s (head_dim %zu, N %zu, B %zu, H %zu, causal %d)\n", name, d->head_dim,
           d->seqlen_q, d->batch, d->heads_q, d->causal);
    for (size_t i = 0; i < n; ++i) {
        const tile *t = &tiles[i];
        if (fcl_debug_set_tile(ctx, kind, t->rows, t->cols, t->ty, t->tx) != FCL_OK ||
            (t->wd > 0 && fcl_debug_set_tile_split(ctx, kind, t->wd) != FCL_OK))
            continue;
        fcl_plan plan;
        fcl_status st = fcl_plan_query(ctx, d, kind, &plan);
        if (st != FCL_OK) {
            printf("    target %3dx%-3d %2dx%-2d w%d: %s\n", t->rows, t->cols, t->ty, t->tx,
                   t->wd, fcl_status_string(st));
            continue;
        }
        double s = time_pass(ctx, p, kind != FCL_KERNEL_FORWARD, reps);
        printf("    target %3dx%-3d %2dx%-2d w%d -> Br %3zu Bc %3zu wg %4zu local %6.1f KiB: %7.3f ms "
               "%6.2f TFLOP/s\n",
               t->rows, t->cols, t->ty, t->tx, t->wd, plan.br, plan.bc, plan.work_group_size,
               plan.local_bytes / 1024.0, s * 1e3, s > 0 ? fl / s / 1e12 : 0.0);
        if (verbose)
            print_resources(ctx, d, kind);
        fflush(stdout);
    }
    fcl_debug_set_tile(ctx, kind, 0, 0, 0, 0); /* back to the table for the next sweep */
}

/* "128x64x4,64x64x4": rows x cols x ty (tx 32, the tensor-core pieces' warp)
 * or rows x cols x ty x tx, then optionally wN (dK/dV's columns over N
 * warps: "64x64x8w4"), at most `max` tiles; returns how many. */
static size_t parse_tiles(const char *s, tile *out, size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        tile t = {0, 0, 0, 32, 0};
        int used = 0;
        if (sscanf(s, "%dx%dx%d%n", &t.rows, &t.cols, &t.ty, &used) < 3)
            break;
        s += used;
        if (*s == 'x' && sscanf(s, "x%d%n", &t.tx, &used) == 1)
            s += used;
        if (*s == 'w' && sscanf(s, "w%d%n", &t.wd, &used) == 1)
            s += used;
        out[n++] = t;
        if (*s == ',')
            ++s;
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t N = 4096, tokens = 16384, hidden = 2048;
    int reps = 5, causal = 0, verbose = 0;
    const char *dims = "64,128", *kinds = "fwd,dq,dkdv", *tiles = NULL, *options = "";
    fcl_dtype dt = FCL_DTYPE_FP32;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--seqlen")) N = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--tokens")) tokens = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--hidden")) hidden = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--reps")) reps = atoi(v), ++i;
        else if (!strcmp(a, "--head-dims")) dims = v, ++i;
        else if (!strcmp(a, "--kernels")) kinds = v, ++i;
        else if (!strcmp(a, "--causal")) causal = 1;
        else if (!strcmp(a, "--verbose-build")) verbose = 1;
        else if (!strcmp(a, "--tiles")) tiles = v, ++i;
        else if (!strcmp(a, "--build-options")) options = v, ++i;
        else if (!strcmp(a, "--dtype")) {
            dt = !strcmp(v, "fp16")   ? FCL_DTYPE_FP16
                 : !strcmp(v, "bf16") ? FCL_DTYPE_BF16
                 : !strcmp(v, "e4m3") ? FCL_DTYPE_FP8_E4M3 /* the forward only */
                 : !strcmp(v, "e5m2") ? FCL_DTYPE_FP8_E5M2
                                      : FCL_DTYPE_FP32;
            ++i;
        } else {
            fprintf(stderr, "usage: flashcl-tune [--seqlen N] [--tokens T] [--hidden H] [--reps R]\n"
                            "  [--head-dims 64,128] [--kernels fwd,dq,dkdv] [--causal] [--dtype T]\n"
                            "  [--verbose-build] [--tiles RxCxTY[xTX],...] [--build-options S]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 32) reps = 5;
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(NULL, &ctx);
    if (st != FCL_OK) {
        fprintf(stderr, "flashcl-tune: %s\n", fcl_status_string(st));
        return 1;
    }
    char build[128];
    snprintf(build, sizeof build, "%s%s",
             verbose && ctx->info.vendor_id == FCL_VENDOR_ID_NVIDIA ? "-cl-nv-verbose " : "", options);
    if (build[0] != '\0' && fcl_debug_set_build_options(ctx, build) != FCL_OK) {
        fprintf(stderr, "flashcl-tune: build options too long\n");
        return 2;
    }
    tile given[16];
    const size_t ngiven = tiles ? parse_tiles(tiles, given, 16) : 0;
    printf("flashcl-tune on %s (%s), %s%s%s\n", ctx->info.name, ctx->info.driver_version,
           fcl_dtype_name(dt), options[0] ? ", build options " : "", options);
    for (const char *s = dims; *s;) {
        char *end = NULL;
        size_t d = strtoull(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        problem p;
        memset(&p, 0, sizeof p);
        size_t B = tokens / N ? tokens / N : 1, H = hidden / d ? hidden / d : 1;
        fcl_attention_desc_init(&p.desc, B, H, H, N, N, d, dt, FCL_LAYOUT_BHSD);
        p.desc.causal = causal;
        const size_t n = B * H * N * d;
        p.q = filled(ctx, n, dt, 1), p.k = filled(ctx, n, dt, 2), p.v = filled(ctx, n, dt, 3);
        p.dout = filled(ctx, n, dt, 4), p.o = filled(ctx, n, p.desc.out_dtype, 5);
        p.dq = filled(ctx, n, dt, 6), p.dk = filled(ctx, n, dt, 7), p.dv = filled(ctx, n, dt, 8);
        p.lse = filled(ctx, B * H * N, FCL_DTYPE_FP32, 9);
        time_pass(ctx, &p, 0, 1); /* real O and LSE for the backward */
        fcl_plan shown;
        const int mma = fcl_plan_query(ctx, &p.desc, FCL_KERNEL_FORWARD, &shown) == FCL_OK &&
                        strstr(shown.variant, "mma") != NULL;
/* the tiles given on the command line, else the list for the kind and path */
#define SWEEP(kind, list)                                                                     \
    (ngiven ? sweep(ctx, &p, kind, given, ngiven, reps, verbose)                              \
            : sweep(ctx, &p, kind, list, sizeof list / sizeof list[0], reps, verbose))
        if (strstr(kinds, "fwd"))
            mma ? SWEEP(FCL_KERNEL_FORWARD, mma_forward_tiles)
                : SWEEP(FCL_KERNEL_FORWARD, forward_tiles);
        if (strstr(kinds, "dq"))
            mma ? SWEEP(FCL_KERNEL_BACKWARD_DQ, mma_dq_tiles)
                : SWEEP(FCL_KERNEL_BACKWARD_DQ, dq_tiles);
        if (strstr(kinds, "dkdv"))
            mma ? SWEEP(FCL_KERNEL_BACKWARD_DKDV, mma_dkdv_tiles)
                : SWEEP(FCL_KERNEL_BACKWARD_DKDV, dkdv_tiles);
#undef SWEEP
        cl_mem all[] = {p.q, p.k, p.v, p.o, p.lse, p.dout, p.dq, p.dk, p.dv};
        for (size_t i = 0; i < 9; ++i)
            if (all[i]) clReleaseMemObject(all[i]);
    }
    fcl_context_destroy(ctx);
    return 0;
}
