/* flashcl-bench-call - the time of one small attention call made from C, as
 * the baseline for a binding's overhead (bench/python_overhead.py runs it
 * beside the same calls made through the Python package).
 *
 * Two forms of the same forward (fp32, batch 1, --heads, --seqlen, --head-dim,
 * on the default device or FLASHCL_DEVICE):
 *   host   fcl_attention_forward_host: copy in, run, copy out, wait;
 *   clmem  fcl_attention_forward on the caller's cl_mem buffers, then
 *          clFinish (what a PyOpenCL array's call and .finish() cost).
 * Prints one line per form: "form median_us", the median of --reps calls
 * after --warmup calls. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "bench_util.h"
#include <flashcl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, fcl_status st)
{
    fprintf(stderr, "flashcl-bench-call: %s: %s\n", what, fcl_status_string(st));
    return 1;
}

int main(int argc, char **argv)
{
    size_t heads = 1, seqlen = 16, head_dim = 32;
    int reps = 2000, warmup = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        const long v = strtol(argv[i + 1], NULL, 10);
        if (v <= 0) {
            fprintf(stderr, "flashcl-bench-call: %s needs a positive number\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--heads")) heads = (size_t)v;
        else if (!strcmp(argv[i], "--seqlen")) seqlen = (size_t)v;
        else if (!strcmp(argv[i], "--head-dim")) head_dim = (size_t)v;
        else if (!strcmp(argv[i], "--reps")) reps = (int)v;
        else if (!strcmp(argv[i], "--warmup")) warmup = (int)v;
        else {
            fprintf(stderr, "usage: flashcl-bench-call [--heads H] [--seqlen N] "
                            "[--head-dim D] [--reps R] [--warmup W]\n");
            return 2;
        }
    }
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(NULL, &ctx);
    if (st != FCL_OK)
        return fail("context", st);
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, heads, heads, seqlen, seqlen, head_dim, FCL_DTYPE_FP32,
                            FCL_LAYOUT_BSHD);
    const size_t n = heads * seqlen * head_dim;
    float *host = malloc(4 * n * sizeof *host);
    double *t = malloc((size_t)reps * sizeof *t);
    if (host == NULL || t == NULL)
        return fail("memory", FCL_ERROR_OUT_OF_HOST_MEMORY);
    for (size_t i = 0; i < 4 * n; ++i)
        host[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    float *q = host, *k = host + n, *v = host + 2 * n, *o = host + 3 * n;

    for (int i = 0; i < warmup + reps && st == FCL_OK; ++i) {
        const double t0 = bench_now_s();
        st = fcl_attention_forward_host(ctx, &d, q, k, v, o, NULL);
        if (i >= warmup)
            t[i - warmup] = bench_now_s() - t0;
    }
    if (st != FCL_OK)
        return fail("host call", st);
    printf("host %.2f\n", 1e6 * bench_median(t, reps));

    cl_int err = CL_SUCCESS;
    cl_mem mem[4];
    for (int b = 0; b < 4; ++b) {
        mem[b] = clCreateBuffer(fcl_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                n * sizeof(float), host + (size_t)b * n, &err);
        if (err != CL_SUCCESS)
            return fail("buffer", err);
    }
    cl_command_queue queue = fcl_context_cl_queue(ctx);
    for (int i = 0; i < warmup + reps && st == FCL_OK; ++i) {
        const double t0 = bench_now_s();
        st = fcl_attention_forward(ctx, &d, mem[0], mem[1], mem[2], mem[3], NULL, 0, NULL, NULL);
        if (st == FCL_OK)
            st = clFinish(queue);
        if (i >= warmup)
            t[i - warmup] = bench_now_s() - t0;
    }
    if (st != FCL_OK)
        return fail("cl_mem call", st);
    printf("clmem %.2f\n", 1e6 * bench_median(t, reps));
    for (int b = 0; b < 4; ++b)
        clReleaseMemObject(mem[b]);
    free(t);
    free(host);
    fcl_context_destroy(ctx);
    return 0;
}
