/* bench_util.h - timing helpers the benchmark programs share. */
#ifndef FCL_BENCH_UTIL_H
#define FCL_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef FLASHCL_H /* for programs on flashcl's calls */
#include <stdio.h>

/* A failed call ends the benchmark with where and why. */
#define BENCH_CHECK(expr)                                                                 \
    do {                                                                            \
        fcl_status s_ = (expr);                                                     \
        if (s_ != FCL_OK) {                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,           \
                    fcl_status_string(s_));                                         \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

/* A buffer of `bytes` in ctx with host's bytes (or none: NULL). */
static inline cl_mem bench_buffer(fcl_context *ctx, const void *host, size_t bytes)
{
    cl_int err;
    cl_mem m = clCreateBuffer(fcl_context_cl_context(ctx),
                              CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                              (void *)host, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer(%zu bytes): %s\n", bytes, fcl_status_string(err));
        exit(1);
    }
    return m;
}

/* n fp16 values in (-1, 1), never zero, from `seed`. */
static inline cl_mem bench_random_half(fcl_context *ctx, size_t n, unsigned seed)
{
    uint16_t *h = malloc(n * 2);
    uint32_t s = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; ++i) {
        s = s * 1664525u + 1013904223u;
        /* fp16 in [-1, 1): sign, exponent 13..14 (0.5 .. 2 is too wide), mantissa */
        h[i] = (uint16_t)(((s >> 31) << 15) | ((13u + ((s >> 20) & 1u)) << 10) | ((s >> 8) & 0x3FFu));
    }
    cl_mem m = bench_buffer(ctx, h, n * 2);
    free(h);
    return m;
}
#endif

#endif
