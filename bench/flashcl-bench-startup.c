/* flashcl-bench-startup - what a new process pays before its first result:
 * the first forward (and forward + backward) call of a fresh context, with
 * an empty kernel cache folder ("cold": every program built from source)
 * and with the folder a previous context filled ("warm": programs loaded
 * from disk), beside the same call once everything is built ("hot").
 * Context creation is timed apart, with an empty folder and with the
 * filled one (on GPUs the on-chip memory probe's answer is kept there).
 *
 * For an honest cold number the driver's own caches must be off: PoCL's
 * (POCL_KERNEL_CACHE=0) and NVIDIA's (CUDA_CACHE_DISABLE=1); this program
 * sets both before OpenCL starts unless --driver-caches is given.
 * Each figure is the median of --reps fresh contexts (each cold one with a
 * new empty folder).  --no-disk-cache keeps flashcl's folder out, to see
 * what the driver's cache alone gives (with --driver-caches).
 */
#define _XOPEN_SOURCE 700 /* setenv, mkdtemp, nftw */

#include "bench_util.h"
#include "build_info.h"
#include <flashcl.h>

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        fcl_status e_ = (expr);                                                              \
        if (e_ != FCL_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, fcl_status_string(e_));       \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

typedef struct shape {
    const char *name;
    fcl_dtype dtype;
    size_t head_dim;
    int backward;
} shape;

static const shape shapes[] = {
    {"forward fp32 d64", FCL_DTYPE_FP32, 64, 0},
    {"forward fp16 d128", FCL_DTYPE_FP16, 128, 0},
    {"forward+backward fp16 d128", FCL_DTYPE_FP16, 128, 1},
};
enum { B = 1, H = 4, N = 256 };

typedef struct buffers {
    void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse;
} buffers;

static void *random_array(size_t n, fcl_dtype dt, unsigned seed)
{
    const size_t es = dt == FCL_DTYPE_FP32 ? 4 : 2;
    unsigned char *p = malloc(n * es);
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1103515245u + 12345u;
        const float x = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
        if (es == 4) {
            memcpy(p + 4 * i, &x, 4);
        } else { /* bits of a small float: fp16 1.0 + mantissa, or bf16 */
            const uint16_t h = (uint16_t)(0x3c00u | ((seed >> 3) & 0x3ffu));
            memcpy(p + 2 * i, &h, 2);
        }
    }
    return p;
}

/* Seconds of the first call (forward, or forward and backward) on ctx. */
static double one_call(fcl_context *ctx, const shape *s, const buffers *b)
{
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, B, H, H, N, N, s->head_dim, s->dtype, FCL_LAYOUT_BSHD);
    d.causal = 1;
    const double t0 = bench_now_s();
    CHECK(fcl_attention_forward_host(ctx, &d, b->q, b->k, b->v, b->o, b->lse));
    if (s->backward)
        CHECK(fcl_attention_backward_host(ctx, &d, b->q, b->k, b->v, b->o, b->lse, b->dout, b->dq,
                                          b->dk, b->dv));
    return bench_now_s() - t0;
}

static int use_disk_cache = 1;

static fcl_context *context_in(const char *dir, double *create_s)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.cache_dir = dir;
    o.disk_cache = use_disk_cache;
    fcl_context *ctx = NULL;
    const double t0 = bench_now_s();
    CHECK(fcl_context_create(&o, &ctx));
    *create_s = bench_now_s() - t0;
    return ctx;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    int reps = 3, driver_caches = 0;
    const char *out_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out_path = argv[++i];
        else if (!strcmp(argv[i], "--driver-caches"))
            driver_caches = 1;
        else if (!strcmp(argv[i], "--no-disk-cache"))
            use_disk_cache = 0;
        else {
            fprintf(stderr, "usage: flashcl-bench-startup [--reps 3] [--driver-caches] "
                            "[--no-disk-cache] [--out f.csv]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 32)
        reps = 3;
    if (!driver_caches) {
        setenv("POCL_KERNEL_CACHE", "0", 1);
        setenv("CUDA_CACHE_DISABLE", "1", 1);
    }
    fcl_device_info info;
    {
        double t = 0;
        char probe_dir[] = "/tmp/flashcl-startup-XXXXXX";
        if (mkdtemp(probe_dir) == NULL)
            return 1;
        fcl_context *ctx = context_in(probe_dir, &t);
        CHECK(fcl_context_device_info(ctx, &info));
        fcl_context_destroy(ctx);
        nftw(probe_dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    }
    char date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("device: %s (%s, driver %s)\nflashcl commit %s, %s; B %d, H %d, N %d, causal; median of "
           "%d fresh contexts; driver caches %s; flashcl's disk cache %s\n\n",
           info.name, info.platform_name, info.driver_version, FCL_GIT_COMMIT, date, B, H, N, reps,
           driver_caches ? "on" : "off", use_disk_cache ? "on" : "off");
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out)
        fprintf(out, "# device: %s\n# platform: %s\n# driver: %s\n# date: %s\n# commit: %s\n"
                     "# driver caches: %s\n# flashcl disk cache: %s\nshape,create_cold_s,create_warm_s,cold_s,warm_s,hot_s,cold_over_warm\n",
                info.name, info.platform_name, info.driver_version, date, FCL_GIT_COMMIT,
                driver_caches ? "on" : "off", use_disk_cache ? "on" : "off");
    printf("%-28s %12s %12s %10s %10s %10s %8s\n", "first call", "create cold", "create warm",
           "cold s", "warm s", "hot s", "cold/warm");
    fflush(stdout);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
        const shape *s = &shapes[si];
        const size_t n = (size_t)B * N * H * s->head_dim;
        const size_t es = s->dtype == FCL_DTYPE_FP32 ? 4 : 2;
        buffers b = {random_array(n, s->dtype, 1), random_array(n, s->dtype, 2),
                     random_array(n, s->dtype, 3), malloc(n * es), random_array(n, s->dtype, 4),
                     malloc(n * es), malloc(n * es), malloc(n * es),
                     malloc((size_t)B * H * N * sizeof(float))};
        double create[32], create_warm[32], cold[32], warm[32], hot[32];
        for (int r = 0; r < reps; ++r) {
            char dir[] = "/tmp/flashcl-startup-XXXXXX";
            if (mkdtemp(dir) == NULL)
                return 1;
            fcl_context *ctx = context_in(dir, &create[r]);
            cold[r] = one_call(ctx, s, &b);
            fcl_context_destroy(ctx);
            ctx = context_in(dir, &create_warm[r]);
            warm[r] = one_call(ctx, s, &b);
            hot[r] = one_call(ctx, s, &b);
            fcl_context_destroy(ctx);
            nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
        }
        const double mc = bench_median(create, reps), mcw = bench_median(create_warm, reps),
                     m0 = bench_median(cold, reps),
                     m1 = bench_median(warm, reps), m2 = bench_median(hot, reps);
        printf("%-28s %12.3f %12.3f %10.3f %10.3f %10.4f %8.1f\n", s->name, mc, mcw, m0, m1, m2,
               m0 / m1);
        if (out)
            fprintf(out, "%s,%.4f,%.4f,%.4f,%.4f,%.5f,%.2f\n", s->name, mc, mcw, m0, m1, m2,
                    m0 / m1);
        fflush(stdout);
        if (out)
            fflush(out);
        free(b.q), free(b.k), free(b.v), free(b.o), free(b.dout), free(b.dq), free(b.dk),
            free(b.dv), free(b.lse);
    }
    if (out)
        fclose(out);
    return 0;
}
