/* flashcl-check - is flashcl right on this device?  Runs forward, backward,
 * FP8, attention-sink and KV-cache calls over the storage types, head dims
 * (192/128 for a value head dim unlike the key's) and variants a
 * user would run, on the tile pieces this device picks for them, and checks
 * every output against a float64 reference on the host: the test suite's
 * own runners (tests/test_support.c, tests/kvcache_support.c) with its
 * tolerance rule (tests/test_support.h), random inputs, strided layouts with
 * guard bytes.  One line per check, then a verdict.
 *
 *   flashcl-check [--device P:D] [--quick] [--list]
 *
 * Exit status: 0 when every check passes, 1 when one fails, 2 when it cannot
 * run (bad arguments, no device).  About a minute on a 2-core CPU with PoCL
 * (kernel builds are most of it); --quick runs the fewer checks marked so.
 * The Python package runs this program for flashcl.check(). */
#include "kvcache_support.h"
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum check_kind { CHECK_FORWARD, CHECK_BACKWARD, CHECK_KVCACHE };

/* What a check adds to plain attention. */
enum check_extra {
    EXTRA_NONE,
    EXTRA_VARIANTS, /* window, ALiBi, softcap, dropout, packed sequences, block mask */
    EXTRA_FP8,      /* FP8 inputs with per-head descales; O in out_dtype */
    EXTRA_SINKS,    /* attention sinks (one logit per query head), a sliding window; the
                       forward's keys split in 3; the backward checks dsinks */
    EXTRA_VALUE_DIM, /* V, O, dO and dV VALUE_DIM columns wide (head_dim_v) */
    EXTRA_ROTARY,   /* KV-cache rotary ("rope"): GPT-NeoX pairs on all of head_dim
                       for fp16, GPT-J (interleaved) pairs on half of it otherwise */
    EXTRA_MLA,      /* KV-cache on one shared latent cache (shared_kv), V its first
                       MLA_VALUE_DIM columns; 64-key pages, split-KV 3 */
};

/* head_dim_v of the EXTRA_MLA checks: DeepSeek's latent cache, 576/512. */
#define MLA_VALUE_DIM 512

/* head_dim_v of the EXTRA_VALUE_DIM checks: DeepSeek-V3/R1's prefill, 192/128. */
#define VALUE_DIM 128

typedef struct check_spec {
    enum check_kind kind;
    fcl_dtype dtype, out_dtype; /* out_dtype: O's type for FP8 inputs */
    size_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    int causal;
    enum check_extra extra;
    int quick;                  /* also run by --quick */
    int portable;               /* on the portable piece (fcl_context_options.portable_only);
                                   skipped where the device's own piece is that one */
    const char *what;           /* the rest of the line's description */
} check_spec;

#define FP32 FCL_DTYPE_FP32
#define FP16 FCL_DTYPE_FP16
#define BF16 FCL_DTYPE_BF16

/* Lengths that are no multiple of any tile, GQA, both masks; head dims of
 * the common models (64, 128), an odd one (40) and the largest (256; 576
 * for MLA decoding in the KV-cache call). */
static const check_spec checks[] = {
    /* kind  dtype out B Hq Hk Sq Sk d causal extra quick portable what */
    {CHECK_FORWARD, FP32, FP32, 2, 4, 2, 97, 113, 64, 1, EXTRA_NONE, 1, 0, "causal"},
    {CHECK_FORWARD, FP16, FP16, 2, 4, 2, 97, 113, 64, 0, EXTRA_NONE, 1, 0, ""},
    {CHECK_FORWARD, BF16, BF16, 2, 4, 2, 97, 113, 64, 1, EXTRA_NONE, 0, 0, "causal"},
    {CHECK_FORWARD, FP16, FP16, 1, 8, 1, 200, 333, 128, 1, EXTRA_NONE, 0, 0, "causal"},
    {CHECK_FORWARD, FP32, FP32, 2, 2, 2, 75, 90, 40, 0, EXTRA_NONE, 0, 0, "strided BHSD"},
    {CHECK_FORWARD, FP16, FP16, 1, 2, 2, 70, 90, 256, 1, EXTRA_NONE, 0, 0, "causal"},
    {CHECK_FORWARD, FCL_DTYPE_FP8_E4M3, FP16, 2, 4, 2, 100, 70, 64, 0, EXTRA_FP8, 0, 0,
     "descales"},
    {CHECK_FORWARD, FCL_DTYPE_FP8_E5M2, FP32, 2, 4, 2, 100, 70, 64, 1, EXTRA_FP8, 0, 0,
     "descales, causal"},
    {CHECK_BACKWARD, FP32, FP32, 2, 4, 2, 97, 113, 64, 1, EXTRA_NONE, 1, 0, "causal"},
    {CHECK_BACKWARD, FP16, FP16, 2, 4, 2, 97, 113, 64, 0, EXTRA_NONE, 1, 0, ""},
    {CHECK_BACKWARD, BF16, BF16, 2, 4, 2, 97, 113, 64, 1, EXTRA_NONE, 0, 0, "causal"},
    {CHECK_BACKWARD, FP16, FP16, 1, 8, 1, 200, 333, 128, 1, EXTRA_NONE, 0, 0, "causal"},
    {CHECK_BACKWARD, FP16, FP16, 1, 2, 2, 70, 90, 256, 0, EXTRA_NONE, 0, 0, ""},
    {CHECK_FORWARD, FP16, FP16, 3, 4, 2, 70, 90, 64, 0, EXTRA_VARIANTS, 1, 0, "all variants"},
    {CHECK_BACKWARD, FP16, FP16, 3, 4, 2, 70, 90, 64, 0, EXTRA_VARIANTS, 1, 0, "all variants"},
    {CHECK_FORWARD, BF16, BF16, 2, 8, 2, 70, 300, 64, 1, EXTRA_SINKS, 0, 0, "sinks, split 3"},
    {CHECK_BACKWARD, FP16, FP16, 2, 8, 2, 97, 113, 64, 1, EXTRA_SINKS, 1, 0, "sinks, window"},
    {CHECK_FORWARD, FP16, FP16, 2, 4, 2, 97, 113, 64, 1, EXTRA_NONE, 0, 1, "causal"},
    {CHECK_BACKWARD, FP32, FP32, 2, 4, 2, 97, 113, 64, 0, EXTRA_NONE, 0, 1, ""},
    {CHECK_FORWARD, FP16, FP16, 1, 4, 2, 97, 113, 192, 1, EXTRA_VALUE_DIM, 0, 0, "causal, dv 128"},
    {CHECK_BACKWARD, FP16, FP16, 1, 4, 2, 97, 113, 192, 1, EXTRA_VALUE_DIM, 0, 0,
     "causal, dv 128"},
    {CHECK_FORWARD, FP32, FP32, 1, 2, 1, 45, 61, 192, 0, EXTRA_VALUE_DIM, 0, 0, "dv 128"},
    {CHECK_BACKWARD, FP32, FP32, 1, 2, 1, 45, 61, 192, 0, EXTRA_VALUE_DIM, 0, 0, "dv 128"},
    {CHECK_KVCACHE, FP16, FP16, 3, 8, 2, 1, 1, 128, 1, EXTRA_NONE, 1, 0,
     "paged 16"},
    {CHECK_KVCACHE, FP32, FP32, 3, 4, 2, 4, 2, 64, 1, EXTRA_VARIANTS, 0, 0,
     "all variants"},
    {CHECK_KVCACHE, BF16, BF16, 2, 16, 2, 16, 16, 64, 1, EXTRA_NONE, 0, 0,
     "paged 48"},
    {CHECK_KVCACHE, FP16, FP16, 3, 8, 1, 1, 1, 64, 1, EXTRA_SINKS, 0, 0, "paged 16, sinks"},
    {CHECK_KVCACHE, FP16, FP16, 3, 8, 2, 1, 1, 128, 1, EXTRA_ROTARY, 1, 0,
     "rope paged 16"},
    {CHECK_KVCACHE, BF16, BF16, 3, 8, 2, 4, 2, 64, 0, EXTRA_ROTARY, 0, 0,
     "rope GPT-J 32"},
    {CHECK_KVCACHE, FP16, FP16, 3, 16, 1, 1, 1, 576, 1, EXTRA_MLA, 0, 0, "MLA 576/512 shared"},
    {CHECK_KVCACHE, BF16, BF16, 2, 16, 1, 2, 1, 576, 1, EXTRA_MLA, 0, 1, "MLA 576/512 shared"},
};

/* ---- one check ------------------------------------------------------------------ */

/* The tile piece ctx runs a check's main kernel on ("?" if it has no plan). */
static const char *piece(fcl_context *ctx, const check_spec *s, char *buf, size_t n)
{
    fcl_plan plan;
    fcl_status st;
    if (s->kind == CHECK_KVCACHE) {
        fcl_kvcache_desc kd;
        fcl_kvcache_desc_init(&kd, s->batch, s->heads_q, s->heads_kv, s->head_dim, s->seqlen_q,
                              s->seqlen_k, s->dtype);
        if (s->extra == EXTRA_MLA) {
            kd.head_dim_v = MLA_VALUE_DIM;
            kd.shared_kv = 1;
        }
        fcl_kvcache_desc_set_contiguous(&kd, 256);
        st = fcl_kvcache_plan_query(ctx, &kd, &plan);
    } else {
        fcl_attention_desc d;
        fcl_attention_desc_init(&d, s->batch, s->heads_q, s->heads_kv, s->seqlen_q, s->seqlen_k,
                                s->head_dim, s->dtype, FCL_LAYOUT_BSHD);
        if (s->extra == EXTRA_FP8)
            d.out_dtype = s->out_dtype;
        if (s->extra == EXTRA_VALUE_DIM) /* the piece depends on it (tensor cores: % 16) */
            d.head_dim_v = VALUE_DIM;
        st = fcl_plan_query(ctx, &d, s->kind == CHECK_FORWARD ? FCL_KERNEL_FORWARD
                                                              : FCL_KERNEL_BACKWARD_DQ, &plan);
    }
    snprintf(buf, n, "%s", st == FCL_OK ? plan.variant : "?");
    return buf;
}

/* Cache lengths of the KV checks' sequences: empty, partial and full pages. */
static const int kv_lens[3] = {37, 0, 90};

static int run_kvcache(fcl_context *ctx, const check_spec *s, uint64_t seed)
{
    const int variants = s->extra == EXTRA_VARIANTS;
    const size_t page = s->dtype == FP16 ? 16 : s->dtype == BF16 ? 48 : 0;
    kv_case c = {s->batch, s->heads_q, s->heads_kv, s->head_dim, s->seqlen_q, s->seqlen_k,
                 s->dtype, page, 144, kv_lens, s->causal, variants ? 20 : -1,
                 variants ? 5.0f : 0.0f, variants, 0, seed};
    if (s->extra == EXTRA_MLA) { /* pages of 64 (DeepSeek's), lengths past one */
        c.page_size = 64;
        c.capacity = 192;
        c.num_splits = 3;
        return kv_run_shared(ctx, &c, MLA_VALUE_DIM, 0);
    }
    if (s->extra == EXTRA_ROTARY) {
        const kv_rotary rot = {s->dtype == FP16 ? s->head_dim : s->head_dim / 2, s->dtype != FP16};
        return kv_run_rotary(ctx, &c, &rot);
    }
    return s->extra == EXTRA_SINKS ? kv_run_sinks(ctx, &c) : kv_run(ctx, &c);
}

/* Runs check s on ctx: 1 if it passes; err/tol for the line (negative when
 * the runner gives none: the KV-cache runner, or a call that failed). */
static int run_check(fcl_context *ctx, const check_spec *s, uint64_t seed, double *err, double *tol)
{
    *err = *tol = -1.0;
    if (s->kind == CHECK_KVCACHE)
        return run_kvcache(ctx, s, seed);
    static const int lq[3] = {70, 0, 33}, lk[3] = {90, 12, 33};
    fa_variants v = fa_no_variants();
    if (s->extra == EXTRA_VARIANTS) {
        v.window_left = 24;
        v.window_right = 8;
        v.alibi = FCL_ALIBI_PER_BATCH_HEAD;
        v.softcap = 20.0f;
        v.dropout_p = 0.2f;
        v.dropout_seed = seed;
        v.seqlens_q = lq;
        v.seqlens_k = lk;
        v.block_m = v.block_n = 16;
        v.block_density = 0.7;
    } else if (s->extra == EXTRA_FP8) {
        char buf[32];
        v.out_dtype = s->out_dtype;
        v.descales = 1;
        v.p_fp16 = strstr(piece(ctx, s, buf, sizeof buf), "mma") != NULL;
    } else if (s->extra == EXTRA_SINKS) {
        v.sinks = 1;
        v.window_left = 40;
        v.num_splits = s->kind == CHECK_FORWARD ? 3 : 0;
    } else if (s->extra == EXTRA_VALUE_DIM) {
        v.head_dim_v = VALUE_DIM;
    }
    fa_case c = {s->batch, s->heads_q, s->heads_kv, s->seqlen_q, s->seqlen_k, s->head_dim,
                 s->dtype, s->causal, 0.0f, FCL_LAYOUT_BSHD, 0, {0, 0, 0}, seed,
                 s->extra == EXTRA_NONE ? NULL : &v};
    if (strstr(s->what, "BHSD") != NULL) {
        c.layout = FCL_LAYOUT_BHSD;
        c.padded = 1;
    }
    fa_result r;
    const int ok = s->kind == CHECK_FORWARD ? fa_check_forward(ctx, &c, &r)
                                            : fa_check_backward(ctx, &c, &r);
    if (r.worst != NULL) { /* NULL: the call failed, nothing was compared */
        *err = r.err;
        *tol = r.tol;
    }
    return ok;
}

/* ---- the program ---------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *kind_name(enum check_kind k)
{
    return k == CHECK_FORWARD ? "forward" : k == CHECK_BACKWARD ? "backward" : "kvcache";
}

/* "fp16" or, for FP8 inputs, "fp8_e4m3->fp16". */
static const char *type_name(const check_spec *s, char *buf, size_t n)
{
    if (s->extra == EXTRA_FP8)
        snprintf(buf, n, "%s->%s", fcl_dtype_name(s->dtype), fcl_dtype_name(s->out_dtype));
    else
        snprintf(buf, n, "%s", fcl_dtype_name(s->dtype));
    return buf;
}

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--device P:D] [--quick] [--list]\n"
            "Checks flashcl's forward, backward, FP8 and KV-cache calls on one OpenCL device\n"
            "(default: FLASHCL_DEVICE, else the first GPU, else the first device) against a\n"
            "float64 reference; exit status 0 when every check passes, 1 when one fails.\n"
            "--quick runs fewer checks; --list prints them without running.\n",
            argv0);
    return 2;
}

/* A context on the chosen device (-1, -1: the default), on its own pieces or
 * the portable one; NULL after saying why. */
static fcl_context *open_context(int platform, int device, int portable_only)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.platform_index = platform;
    o.device_index = device;
    o.portable_only = portable_only;
    fcl_context *ctx = NULL;
    const fcl_status st = fcl_context_create(&o, &ctx);
    if (st != FCL_OK) {
        if (platform >= 0)
            fprintf(stderr, "flashcl-check: device %d:%d: %s\n", platform, device,
                    fcl_status_string(st));
        else
            fprintf(stderr, "flashcl-check: the default device: %s\n", fcl_status_string(st));
        return NULL;
    }
    return ctx;
}

/* Whether check s runs: --quick keeps the marked ones; a portable-piece check
 * only where the device's own piece for it is another one. */
static int selected(const check_spec *s, int quick, fcl_context *own)
{
    char pc[32];
    if (quick && !s->quick)
        return 0;
    return !s->portable || own == NULL || strncmp(piece(own, s, pc, sizeof pc), "portable", 8) != 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes, also into a pipe */
    int quick = 0, list = 0, platform = -1, device = -1;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--list") == 0)
            list = 1;
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
                 sscanf(argv[i + 1], "%d:%d", &platform, &device) == 2 && platform >= 0 &&
                 device >= 0)
            ++i;
        else
            return usage(argv[0]);
    }
    fcl_context *own = NULL, *portable = NULL;
    if (!list) {
        own = open_context(platform, device, 0);
        if (own == NULL)
            return 2;
        fcl_device_info info;
        fcl_context_device_info(own, &info);
        printf("flashcl %s on %s (%s; %s)\n", fcl_version_string(), info.name,
               info.platform_name, info.driver_version);
    }
    const size_t count = sizeof checks / sizeof checks[0];
    size_t total = 0, n = 0, failed = 0;
    for (size_t i = 0; i < count; ++i)
        total += (size_t)selected(&checks[i], quick, own);
    const double start = now_s();
    for (size_t i = 0; i < count; ++i) {
        const check_spec *s = &checks[i];
        if (!selected(s, quick, own))
            continue;
        if (s->portable && portable == NULL && !list &&
            (portable = open_context(platform, device, 1)) == NULL) {
            fcl_context_destroy(own);
            return 2;
        }
        fcl_context *ctx = s->portable ? portable : own;
        char type[32], pc[32], shape[96];
        snprintf(shape, sizeof shape,
                 s->kind == CHECK_KVCACHE ? "B %zu, H %zu/%zu, %zu rows + %zu new, d %zu%s%s"
                                          : "B %zu, H %zu/%zu, %zu x %zu, d %zu%s%s",
                 s->batch, s->heads_q, s->heads_kv, s->seqlen_q, s->seqlen_k, s->head_dim,
                 *s->what ? ", " : "", s->what);
        if (list) {
            printf("[%2zu/%zu] %-8s %-12s %s%s\n", ++n, total, kind_name(s->kind),
                   type_name(s, type, sizeof type), shape,
                   s->portable ? " (portable piece, where not the device's own)" : "");
            continue;
        }
        const double t0 = now_s();
        double err, tol;
        const int ok = run_check(ctx, s, 1000 + i, &err, &tol); /* prints what fails */
        failed += !ok;
        printf("[%2zu/%zu] %-8s %-12s %-46s %-17s", ++n, total, kind_name(s->kind),
               type_name(s, type, sizeof type), shape, piece(ctx, s, pc, sizeof pc));
        if (err >= 0.0)
            printf(" err %.2e tol %.2e", err, tol);
        else
            printf(" %-25s", ok ? "" : "(what failed: above)");
        printf(" %5.1f s  %s\n", now_s() - t0, ok ? "ok" : "FAIL");
    }
    fcl_context_destroy(own);
    fcl_context_destroy(portable);
    if (list)
        return 0;
    if (failed == 0)
        printf("PASS: all %zu checks agree with the float64 reference (%.1f s)\n", n,
               now_s() - start);
    else
        printf("FAIL: %zu of %zu checks failed, a call refused or a result off the float64 "
               "reference (%.1f s): do not trust flashcl's results on this device\n",
               failed, n, now_s() - start);
    return failed == 0 ? 0 : 1;
}
