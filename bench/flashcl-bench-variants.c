/* flashcl-bench-variants - what each attention variant costs, next to plain
 * attention, in one run on one device.
 *
 * Shapes as flashcl-bench (batch * seqlen = --tokens, heads * head_dim =
 * --hidden, contiguous (B, S, H, d)).  For every N: plain, causal, sliding
 * windows, ALiBi, softcap, dropout, packed variable-length sequences (the
 * same number of tokens in sequences of N/4 .. N), and block-sparse masks of
 * 64 x 64 blocks at several densities.  Each row gives the median time of the
 * forward and the backward and its cost against plain attention at the same
 * N (negative: faster, e.g. skipped tiles).  Dense FLOPs are counted for the
 * TFLOP/s column, so skipped work shows as speed.  Writes a CSV to --out. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "flashcl.h"

#include "bench_util.h"
#include "build_info.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct variant {
    const char *name;
    int causal;
    long window_left, window_right;
    float softcap;
    int alibi;
    float dropout;
    int varlen;
    double density;        /* block-sparse when > 0 */
} variant;

static const variant variants[] = {
    {"plain", 0, -1, -1, 0, 0, 0, 0, 0},
    {"causal", 1, -1, -1, 0, 0, 0, 0, 0},
    {"window 256 causal", 1, 256, -1, 0, 0, 0, 0, 0},
    {"window 256/256", 0, 256, 256, 0, 0, 0, 0, 0},
    {"alibi", 0, -1, -1, 0, 1, 0, 0, 0},
    {"softcap 30", 0, -1, -1, 30, 0, 0, 0, 0},
    {"dropout 0.1", 0, -1, -1, 0, 0, 0.1f, 0, 0},
    {"varlen N/4..N", 0, -1, -1, 0, 0, 0, 1, 0},
    {"block-sparse 1.0", 0, -1, -1, 0, 0, 0, 0, 1.0},
    {"block-sparse 0.5", 0, -1, -1, 0, 0, 0, 0, 0.5},
    {"block-sparse 0.25", 0, -1, -1, 0, 0, 0, 0, 0.25},
    {"block-sparse 0.1", 0, -1, -1, 0, 0, 0, 0, 0.1},
    {"all: window+alibi+dropout+varlen", 1, 256, -1, 0, 1, 0.1f, 1, 0},
};

int main(int argc, char **argv)
{
    size_t tokens = 16384, hidden = 2048, d = 64, seqlens[8] = {1024, 4096, 16384}, nsl = 3;
    int reps = 5;
    const char *out_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens")) tokens = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--hidden")) hidden = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--head-dim")) d = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--seqlens")) {
            nsl = 0;
            for (char *s = argv[i + 1]; *s && nsl < 8;) {
                char *end;
                seqlens[nsl++] = strtoull(s, &end, 10);
                s = *end == ',' ? end + 1 : end;
            }
        } else {
            fprintf(stderr, "usage: flashcl-bench-variants [--tokens T] [--hidden H] [--head-dim d]\n"
                            "       [--seqlens 1024,4096] [--reps R] [--out file.csv]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 50) reps = 5;
    fcl_context *ctx = NULL;
    BENCH_CHECK(fcl_context_create(NULL, &ctx));
    fcl_device_info info;
    BENCH_CHECK(fcl_context_device_info(ctx, &info));
    cl_command_queue q = fcl_context_cl_queue(ctx);
    char date[64];
    time_t tt = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
    printf("device: %s (%s, driver %s)\nflashcl %s, commit %s, %s; fp16, head_dim %zu, tokens %zu, "
           "hidden %zu, median of %d\n\n",
           info.name, info.platform_name, info.driver_version, fcl_version_string(), FCL_GIT_COMMIT,
           date, d, tokens, hidden, reps);
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out)
        fprintf(out, "# device: %s\n# driver: %s\n# date: %s\n# commit: %s\n# fp16, head_dim %zu, "
                     "tokens %zu, hidden %zu, median of %d\n"
                     "variant,N,B,H,fwd_ms,fwd_dense_tflops,fwd_cost_pct,bwd_ms,bwd_dense_tflops,"
                     "bwd_cost_pct\n",
                info.name, info.driver_version, date, FCL_GIT_COMMIT, d, tokens, hidden, reps);
    printf("%-34s %6s | %9s %8s %7s | %9s %8s %7s\n", "variant", "N", "fwd ms", "TFLOP/s", "cost",
           "bwd ms", "TFLOP/s", "cost");

    const size_t H = hidden / d;
    for (size_t si = 0; si < nsl; ++si) {
        const size_t N = seqlens[si], B = tokens / N ? tokens / N : 1;
        const size_t n = B * N * H * d;
        cl_mem qb = bench_random_half(ctx, n, 1), kb = bench_random_half(ctx, n, 2), vb = bench_random_half(ctx, n, 3);
        cl_mem dob = bench_random_half(ctx, n, 4), ob = bench_random_half(ctx, n, 5);
        cl_mem dqb = bench_random_half(ctx, n, 6), dkb = bench_random_half(ctx, n, 7), dvb = bench_random_half(ctx, n, 8);
        cl_mem lseb = bench_random_half(ctx, 2 * B * H * N, 9);
        /* ALiBi slopes, packed lengths N/4..N with the same tokens, block masks */
        float *slopes = malloc(H * sizeof *slopes);
        for (size_t h = 0; h < H; ++h) slopes[h] = powf(2.0f, -8.0f * (float)(h + 1) / (float)H);
        int *cu = malloc((4 * B + 2) * sizeof *cu);
        size_t nseq = 0;
        cu[0] = 0;
        for (uint32_t s = 12345; (size_t)cu[nseq] < B * N && nseq < 4 * B;) {
            s = s * 1664525u + 1013904223u;
            size_t len = N / 4 + (s >> 8) % (3 * N / 4 + 1);
            if (cu[nseq] + len > B * N) len = B * N - (size_t)cu[nseq];
            cu[nseq + 1] = cu[nseq] + (int)len;
            ++nseq;
        }
        const size_t nb = (N + 63) / 64;
        unsigned char *mask = malloc(nb * nb);
        double *times = malloc((size_t)reps * sizeof *times);
        double plain[2] = {0, 0};
        for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; ++vi) {
            const variant *va = &variants[vi];
            fcl_attention_desc desc;
            fcl_attention_desc_init(&desc, B, H, H, N, N, d, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
            desc.causal = va->causal;
            desc.window_left = va->window_left;
            desc.window_right = va->window_right;
            desc.softcap = va->softcap;
            desc.dropout_p = va->dropout;
            desc.dropout_seed = 1234;
            fcl_attention_aux aux = {0};
            if (va->alibi) {
                desc.alibi = FCL_ALIBI_PER_HEAD;
                aux.alibi_slopes = bench_buffer(ctx, slopes, H * sizeof *slopes);
            }
            if (va->varlen) {
                desc.varlen = 1;
                desc.batch = nseq;
                desc.total_q = desc.total_k = B * N;
                desc.q.stride_batch = desc.k.stride_batch = desc.v.stride_batch = 0;
                desc.o.stride_batch = desc.dout.stride_batch = desc.dq.stride_batch = 0;
                desc.dk.stride_batch = desc.dv.stride_batch = 0;
                aux.cu_seqlens_q = bench_buffer(ctx, cu, (nseq + 1) * sizeof *cu);
                aux.cu_seqlens_k = bench_buffer(ctx, cu, (nseq + 1) * sizeof *cu);
            }
            if (va->density > 0) {
                uint32_t s = 777;
                for (size_t i = 0; i < nb * nb; ++i) {
                    s = s * 1664525u + 1013904223u;
                    mask[i] = (double)(s >> 8) / 16777216.0 < va->density;
                }
                desc.block_m = desc.block_n = 64;
                aux.block_mask = bench_buffer(ctx, mask, nb * nb);
            }
            const double dense = 4.0 * B * H * (double)N * N * d;
            double ms[2];
            for (int pass = 0; pass < 2; ++pass) {
                for (int r = -1; r < reps; ++r) {
                    clFinish(q);
                    double t0 = bench_now_s();
                    if (pass == 0)
                        BENCH_CHECK(fcl_attention_forward_ex(ctx, &desc, &aux, qb, kb, vb, ob, lseb, 0, NULL, NULL));
                    else
                        BENCH_CHECK(fcl_attention_backward_ex(ctx, &desc, &aux, qb, kb, vb, ob, lseb, dob, dqb,
                                                        dkb, dvb, 0, NULL, NULL));
                    BENCH_CHECK(clFinish(q));
                    if (r >= 0) times[r] = bench_now_s() - t0;
                }
                ms[pass] = bench_median(times, reps) * 1e3;
                if (vi == 0) plain[pass] = ms[pass];
            }
            const double ft = dense / (ms[0] * 1e-3) / 1e12, bt = 2.5 * dense / (ms[1] * 1e-3) / 1e12;
            const double fc = 100.0 * (ms[0] / plain[0] - 1), bc = 100.0 * (ms[1] / plain[1] - 1);
            printf("%-34s %6zu | %9.3f %8.2f %+6.1f%% | %9.3f %8.2f %+6.1f%%\n", va->name, N, ms[0],
                   ft, fc, ms[1], bt, bc);
            fflush(stdout);
            if (out)
                fprintf(out, "%s,%zu,%zu,%zu,%.4f,%.3f,%.1f,%.4f,%.3f,%.1f\n", va->name, N,
                        va->varlen ? nseq : B, H, ms[0], ft, fc, ms[1], bt, bc);
            cl_mem a[4] = {aux.alibi_slopes, aux.cu_seqlens_q, aux.cu_seqlens_k, aux.block_mask};
            for (int i = 0; i < 4; ++i)
                if (a[i]) clReleaseMemObject(a[i]);
        }
        printf("\n");
        cl_mem all[] = {qb, kb, vb, dob, ob, dqb, dkb, dvb, lseb};
        for (size_t i = 0; i < 9; ++i) clReleaseMemObject(all[i]);
        free(slopes), free(cu), free(mask), free(times);
    }
    if (out) fclose(out);
    fcl_context_destroy(ctx);
    return 0;
}
