/* test_threads.c - contexts in threads do not interfere: four threads, each
 * with its own context, run forward + backward 20 times on the same inputs
 * (host-pointer calls), and every result is bitwise the result of the same
 * calls made by one thread alone beforehand.  The header promises no global
 * mutable state; a shared cache, counter or scratch buffer would show up as
 * a differing byte, a failed call or (under ThreadSanitizer) a race. */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 4, ROUNDS = 20 };
enum { B = 1, HQ = 4, HK = 2, S = 48, D = 32 };
enum { NQ = B * S * HQ * D, NK = B * S * HK * D, NLSE = B * HQ * S };

/* One forward + backward's outputs. */
typedef struct outputs {
    uint16_t o[NQ], dq[NQ], dk[NK], dv[NK];
    float lse[NLSE];
} outputs;

static fcl_attention_desc g_desc;
static uint16_t g_q[NQ], g_k[NK], g_v[NK], g_dout[NQ];
static outputs g_expected;

static fcl_status run_once(fcl_context *ctx, outputs *out)
{
    fcl_status st = fcl_attention_forward_host(ctx, &g_desc, g_q, g_k, g_v, out->o, out->lse);
    if (st == FCL_OK)
        st = fcl_attention_backward_host(ctx, &g_desc, g_q, g_k, g_v, out->o, out->lse, g_dout,
                                         out->dq, out->dk, out->dv);
    return st;
}

typedef struct worker {
    pthread_t thread;
    int index;
    int mismatches;
    fcl_status status;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    fcl_context_options opts;
    fcl_context_options_init(&opts);
    opts.disk_cache = 0;
    fcl_context *ctx = NULL;
    w->status = fcl_context_create(&opts, &ctx);
    outputs *out = malloc(sizeof *out);
    for (int r = 0; r < ROUNDS && w->status == FCL_OK && out != NULL; ++r) {
        memset(out, 0xA5, sizeof *out);
        w->status = run_once(ctx, out);
        w->mismatches += w->status == FCL_OK && memcmp(out, &g_expected, sizeof *out) != 0;
    }
    if (out == NULL)
        w->status = FCL_ERROR_OUT_OF_HOST_MEMORY;
    free(out);
    fcl_context_destroy(ctx);
    return NULL;
}

int main(void)
{
    fcl_attention_desc_init(&g_desc, B, HQ, HK, S, S, D, FCL_DTYPE_FP16, FCL_LAYOUT_BSHD);
    g_desc.causal = 1;
    rng r = {4242};
    uint16_t *in[4] = {g_q, g_k, g_v, g_dout};
    const size_t n[4] = {NQ, NK, NK, NQ};
    for (int t = 0; t < 4; ++t)
        for (size_t i = 0; i < n[t]; ++i)
            in[t][i] = float_to_half_bits((float)rng_normal(&r));

    /* the single-threaded result, checked against the float64 reference by
     * test_backward's cases; here it is the yardstick */
    fcl_context *ctx = test_context(NULL);
    if (ctx == NULL)
        return 1;
    const fcl_status st = run_once(ctx, &g_expected);
    fcl_context_destroy(ctx);
    if (st != FCL_OK) {
        printf("single-threaded run: %s\n", fcl_status_string(st));
        return 1;
    }

    worker w[THREADS];
    for (int i = 0; i < THREADS; ++i) {
        w[i] = (worker){.index = i};
        if (pthread_create(&w[i].thread, NULL, work, &w[i]) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
    }
    int ok = 1;
    for (int i = 0; i < THREADS; ++i) {
        pthread_join(w[i].thread, NULL);
        if (w[i].status != FCL_OK || w[i].mismatches != 0) {
            printf("thread %d: %s, %d of %d rounds differ from the single-threaded run\n", i,
                   fcl_status_string(w[i].status), w[i].mismatches, ROUNDS);
            ok = 0;
        }
    }
    printf("%d threads x %d rounds of forward + backward: %s\n", THREADS, ROUNDS,
           ok ? "bitwise equal to one thread" : "FAIL");
    return ok ? 0 : 1;
}
