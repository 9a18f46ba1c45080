/* flashcl-bench-sinks - what attention sinks cost: the forward and the
 * backward (dQ, dK, dV and dsinks) with one sink logit per query head, next
 * to the same call without, in one run on one device (issue 26's target:
 * at most 5% more, forward and backward).
 *
 * fp16, contiguous (B, N, H, d), batch * N = --tokens, H * d = --hidden; for
 * each head dim, N and causal setting the two calls alternate repetition by
 * repetition (so clock drift falls on both) and each gets the median of
 * --reps timed runs after one untimed one.  Prints a table and writes a CSV
 * (--out) for bench/compare_sinks.py. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "flashcl.h"

#include "bench_util.h"
#include "build_info.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A list "a,b,c" of sizes into v (at most 8); returns how many. */
static size_t parse_list(const char *s, size_t *v)
{
    size_t n = 0;
    while (*s && n < 8) {
        char *end;
        v[n++] = strtoull(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* The buffers of one shape: inputs, outputs, the sinks and their gradient. */
typedef struct shape_buffers {
    cl_mem q, k, v, o, lse, dout, dq, dk, dv, sinks, dsinks;
} shape_buffers;

/* One call (pass 0 forward, 1 backward), with or without sinks, timed to
 * its end. */
static double timed_call(fcl_context *ctx, fcl_attention_desc *desc, const shape_buffers *b,
                         int pass, int sinks)
{
    fcl_attention_aux aux = {0};
    desc->sinks = sinks;
    if (sinks) {
        aux.sinks = b->sinks;
        aux.dsinks = b->dsinks;
    }
    cl_command_queue q = fcl_context_cl_queue(ctx);
    BENCH_CHECK(clFinish(q));
    const double t0 = bench_now_s();
    if (pass == 0)
        BENCH_CHECK(fcl_attention_forward_ex(ctx, desc, &aux, b->q, b->k, b->v, b->o, b->lse, 0, NULL,
                                       NULL));
    else
        BENCH_CHECK(fcl_attention_backward_ex(ctx, desc, &aux, b->q, b->k, b->v, b->o, b->lse, b->dout,
                                        b->dq, b->dk, b->dv, 0, NULL, NULL));
    BENCH_CHECK(clFinish(q));
    return bench_now_s() - t0;
}

int main(int argc, char **argv)
{
    size_t tokens = 16384, hidden = 2048, dims[8] = {64, 128}, nd = 2;
    size_t seqlens[8] = {1024, 4096, 16384}, nsl = 3;
    int reps = 10;
    const char *out_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens")) tokens = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--hidden")) hidden = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--head-dims")) nd = parse_list(argv[i + 1], dims);
        else if (!strcmp(argv[i], "--seqlens")) nsl = parse_list(argv[i + 1], seqlens);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out")) out_path = argv[i + 1];
        else {
            fprintf(stderr, "usage: flashcl-bench-sinks [--tokens T] [--hidden H] "
                            "[--head-dims 64,128]\n"
                            "       [--seqlens 1024,4096,16384] [--reps R] [--out file.csv]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 100) reps = 10;
    fcl_context *ctx = NULL;
    BENCH_CHECK(fcl_context_create(NULL, &ctx));
    fcl_device_info info;
    BENCH_CHECK(fcl_context_device_info(ctx, &info));
    char date[64];
    time_t tt = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tt));
    printf("device: %s (%s, driver %s)\nflashcl %s, commit %s, %s; fp16, tokens %zu, hidden %zu, "
           "median of %d, calls alternated\n\n",
           info.name, info.platform_name, info.driver_version, fcl_version_string(), FCL_GIT_COMMIT,
           date, tokens, hidden, reps);
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out)
        fprintf(out, "# device: %s\n# driver: %s\n# date: %s\n# commit: %s\n# setup: fp16, tokens %zu, "
                     "hidden %zu, median of %d, calls alternated\n"
                     "d,N,B,H,causal,fwd_ms,fwd_sinks_ms,fwd_cost_pct,bwd_ms,bwd_sinks_ms,"
                     "bwd_cost_pct\n",
                info.name, info.driver_version, date, FCL_GIT_COMMIT, tokens, hidden, reps);
    printf("%4s %6s %3s %3s %6s | %9s %9s %7s | %9s %9s %7s\n", "d", "N", "B", "H", "causal",
           "fwd ms", "+sinks", "cost", "bwd ms", "+sinks", "cost");
    double *t[2] = {malloc((size_t)reps * sizeof(double)), malloc((size_t)reps * sizeof(double))};
    for (size_t di = 0; di < nd; ++di)
        for (size_t si = 0; si < nsl; ++si) {
            const size_t d = dims[di], N = seqlens[si], H = hidden / d;
            const size_t B = tokens / N ? tokens / N : 1, n = B * N * H * d;
            shape_buffers b = {bench_random_half(ctx, n, 1), bench_random_half(ctx, n, 2),
                               bench_random_half(ctx, n, 3), bench_random_half(ctx, n, 4),
                               bench_buffer(ctx, NULL, B * H * N * sizeof(float)),
                               bench_random_half(ctx, n, 5), bench_random_half(ctx, n, 6),
                               bench_random_half(ctx, n, 7), bench_random_half(ctx, n, 8), NULL, NULL};
            float *sinks = malloc(H * sizeof *sinks);
            for (size_t h = 0; h < H; ++h) /* about a row's log-sum-exp */
                sinks[h] = logf((float)N) + 0.5f * (float)(h % 3);
            b.sinks = bench_buffer(ctx, sinks, H * sizeof *sinks);
            b.dsinks = bench_buffer(ctx, NULL, H * sizeof *sinks);
            for (int causal = 0; causal < 2; ++causal) {
                fcl_attention_desc desc;
                fcl_attention_desc_init(&desc, B, H, H, N, N, d, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
                desc.causal = causal;
                double ms[2][2]; /* [pass][sinks] */
                for (int pass = 0; pass < 2; ++pass) {
                    for (int r = -1; r < reps; ++r)
                        for (int s = 0; s < 2; ++s) {
                            const double x = timed_call(ctx, &desc, &b, pass, s);
                            if (r >= 0)
                                t[s][r] = x;
                        }
                    for (int s = 0; s < 2; ++s)
                        ms[pass][s] = bench_median(t[s], reps) * 1e3;
                }
                const double fc = 100.0 * (ms[0][1] / ms[0][0] - 1);
                const double bc = 100.0 * (ms[1][1] / ms[1][0] - 1);
                printf("%4zu %6zu %3zu %3zu %6d | %9.3f %9.3f %+6.1f%% | %9.3f %9.3f %+6.1f%%\n", d, N,
                       B, H, causal, ms[0][0], ms[0][1], fc, ms[1][0], ms[1][1], bc);
                fflush(stdout);
                if (out)
                    fprintf(out, "%zu,%zu,%zu,%zu,%d,%.4f,%.4f,%.2f,%.4f,%.4f,%.2f\n", d, N, B, H,
                            causal, ms[0][0], ms[0][1], fc, ms[1][0], ms[1][1], bc);
            }
            cl_mem all[] = {b.q, b.k, b.v, b.o, b.lse, b.dout, b.dq, b.dk, b.dv, b.sinks, b.dsinks};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
                clReleaseMemObject(all[i]);
            free(sinks);
        }
    free(t[0]);
    free(t[1]);
    if (out)
        fclose(out);
    fcl_context_destroy(ctx);
    return 0;
}
