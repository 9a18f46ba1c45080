/* flashcl-stamps - where a tile's time goes in the wgmma forward, per
 * warpgroup, from the GPU's own timer.
 *
 * Builds the forward with -DFCL_WG_STAMPS=LEVEL (cl/tile_nv_wgmma.cl: lane
 * 0 of each warpgroup's first warp records %globaltimer around the
 * products of tiles 0..6 and writes the stamps over its work-group's LSE),
 * runs one fp16 forward call, reads LSE back and prints, over every
 * work-group and tiles 1..6 (tile 0 starts the pipeline), the median and
 * the 10th and 90th percentiles of:
 *   tile       from one tile's issue of its products to the next's
 *   QK wait    from the issue to Q K^T waited for
 *   softmax    from there to the wait for P V (level 2 only)
 *   PV wait    that wait (level 2), or Q K^T waited for to P V waited for
 *              (level 1: the softmax and that wait together)
 *   offset     the second warpgroup's issue after the first's, as a
 *              fraction of the first's tile
 * and with --level 3 (level 2's schedule, seven stamps a tile over tiles
 * 0..2; tiles 1..2 read) also
 *   arrival    the wait at a tile's start for its buffers, once requested
 *   to issue   from their arrival to the products' issue (the guard of the
 *              previous tile's V, the accumulators pinned, the fence)
 *   rescale+P  from P V waited for to the tile's end (the rescale of the
 *              accumulators, P repacked)
 *   loop top   from a tile's end to the next's buffers requested (the
 *              loop's bookkeeping, the fences, the last arrival, the copies)
 *   prologue   from the loop's state set up to tile 0's issue (Q and the
 *              first tiles' arrival)
 *   epilogue   from the loop's end to the kernel's end, in parts:
 *    last V    the wait for the last tile's V
 *    last PV   its P V issued and waited for
 *    sums      the row sums' shuffles, the output's barrier
 *    O on chip the outputs normalised and written to the staging tile
 *    O stores  the barrier and the staged tile's stores issued
 *    end       what is left (the LSE's stores)
 * and, at level 3 on the global timer, the work-groups on the machine: each
 * one's start (slot 0), end (slot 30) and multiprocessor (slot 31) give
 * the call's span (first start to last end) and, summed over the
 * multiprocessors seen, how much of multiprocessors x span went to
 *   busy       at least one work-group resident (of it, the work-groups'
 *              prologues and epilogues as above, the rest their tiles)
 *   gaps       between one work-group's end and the next one's start on
 *              the same multiprocessor (none resident)
 *   head/tail  before a multiprocessor's first work-group and after its
 *              last (the last wave's idle end)
 * with each work-group's length and how many were resident at once.
 * Level 1 leaves the kernel's schedule as the default build's (ptxas puts
 * the wait for P V before the softmax); level 2 adds the stamp before that
 * wait, which holds it after the softmax, as -DFCL_WG_PV_FENCE=1 (--fence)
 * does (NOTES.md, run 46).  A measurement tool for the GPU: on a device
 * without the wgmma piece it says so; with --emulate (PoCL's emulation)
 * the stamps have no timer and read 1, which checks only the plumbing.
 *
 * Usage: flashcl-stamps [--head-dim D] [--seqlen N] [--batch B]
 *                       [--heads H] [--causal] [--level 1|2|3] [--fence]
 *                       [--cycles] [--build-options S] [--emulate]
 * --cycles reads the multiprocessor's cycle counter instead of the global
 * timer (whose steps are 32 ns) and prints cycles.  Stamps cost time of
 * their own: on the H200 (run 47), level 3's three more a tile lengthened
 * the d 128 tile by 0.35 us on the global timer and 0.26 us on the cycle
 * counter, so its intervals each hold some 0.05-0.1 us of stamping.
 * --build-options adds options to the stamped build (an ablation's). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, in bench_util.h */
#include "internal.h"

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 32   /* a warpgroup's stamps (tile_nv_wgmma.cl) */
#define MAX_WG 2   /* warpgroups a work-group */

typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

static int push(samples *s, double x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        double *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return 0;
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = x;
    return 1;
}

/* the q-quantile of sorted samples */
static double quantile(const samples *s, double q)
{
    return s->v[(size_t)(q * (double)(s->n - 1) + 0.5)];
}

static void print_row(const char *name, samples *s, const char *unit)
{
    if (s->n == 0) {
        printf("  %-10s          -\n", name);
        return;
    }
    qsort(s->v, s->n, sizeof *s->v, bench_cmp_double);
    printf("  %-10s %10.3f %10.3f %10.3f  %s  (%zu samples)\n", name, quantile(s, 0.5),
           quantile(s, 0.1), quantile(s, 0.9), unit, s->n);
}

/* One work-group of the call on the global timer (level 3): its first
 * stamp, its last, its multiprocessor, and its prologue and epilogue (us,
 * the first warpgroup's). */
typedef struct wg_span {
    uint64_t start, end;
    unsigned sm;
    double pro, epi;
} wg_span;

static int by_sm_then_start(const void *a, const void *b)
{
    const wg_span *x = a, *y = b;
    if (x->sm != y->sm)
        return x->sm < y->sm ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The work-groups on the machine (the header's list), in us and as shares
 * of multiprocessors x span. */
static void print_machine(wg_span *w, size_t n)
{
    if (n == 0)
        return;
    uint64_t first = w[0].start, last = w[0].end;
    double sum_len = 0.0, sum_fixed = 0.0;
    samples len = {0}, gap = {0};
    for (size_t i = 0; i < n; ++i) {
        first = w[i].start < first ? w[i].start : first;
        last = w[i].end > last ? w[i].end : last;
        sum_len += (double)(w[i].end - w[i].start) / 1e3;
        sum_fixed += w[i].pro + w[i].epi;
        push(&len, (double)(w[i].end - w[i].start) / 1e3);
    }
    qsort(w, n, sizeof *w, by_sm_then_start);
    double busy = 0.0, gaps = 0.0, head = 0.0, tail = 0.0;
    size_t sms = 0;
    for (size_t i = 0; i < n;) {
        /* one multiprocessor's work-groups, by start: the union of their spans */
        size_t j = i;
        uint64_t lo = w[i].start, hi = w[i].end;
        head += (double)(w[i].start - first) / 1e3;
        for (++j; j < n && w[j].sm == w[i].sm; ++j) {
            if (w[j].start > hi) {
                busy += (double)(hi - lo) / 1e3;
                gaps += (double)(w[j].start - hi) / 1e3;
                push(&gap, (double)(w[j].start - hi) / 1e3);
                lo = w[j].start;
            }
            hi = w[j].end > hi ? w[j].end : hi;
        }
        busy += (double)(hi - lo) / 1e3;
        tail += (double)(last - hi) / 1e3;
        ++sms;
        i = j;
    }
    const double span = (double)(last - first) / 1e3, all = span * (double)sms;
    printf("  the work-groups on the machine: %zu on %zu multiprocessors, span %.1f us\n", n, sms,
           span);
    printf("    busy %.3f (prologues and epilogues %.3f, tiles %.3f), gaps %.3f, head %.3f, "
           "tail %.3f of multiprocessors x span\n",
           busy / all, busy / all * sum_fixed / sum_len, busy / all * (1.0 - sum_fixed / sum_len),
           gaps / all, head / all, tail / all);
    printf("    %.2f work-groups resident at once while busy\n", sum_len / busy);
    print_row("wg length", &len, "us");
    print_row("wg gap", &gap, "us");
    free(len.v), free(gap.v);
}

int main(int argc, char **argv)
{
    size_t d = 128, N = 4096, B = 4, H = 16;
    int causal = 0, level = 1, fence = 0, emulate = 0, cycles = 0;
    const char *extra = "";
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--head-dim")) d = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--seqlen")) N = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--batch")) B = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--heads")) H = strtoull(v, NULL, 10), ++i;
        else if (!strcmp(a, "--level")) level = atoi(v), ++i;
        else if (!strcmp(a, "--causal")) causal = 1;
        else if (!strcmp(a, "--fence")) fence = 1;
        else if (!strcmp(a, "--cycles")) cycles = 1;
        else if (!strcmp(a, "--build-options")) extra = v, ++i;
        else if (!strcmp(a, "--emulate")) emulate = 1;
        else {
            fprintf(stderr, "usage: flashcl-stamps [--head-dim D] [--seqlen N] [--batch B] "
                            "[--heads H] [--causal] [--level 1|2|3] [--fence] [--cycles] "
                            "[--build-options S] [--emulate]\n");
            return 2;
        }
    }
    if (level < 1 || level > 3 || d == 0 || N == 0 || B == 0 || H == 0) {
        fprintf(stderr, "flashcl-stamps: --level is 1, 2 or 3; sizes are positive\n");
        return 2;
    }
    fcl_context *ctx = NULL;
    BENCH_CHECK(fcl_context_create(NULL, &ctx));
    char options[512];
    snprintf(options, sizeof options, "-DFCL_WG_STAMPS=%d%s%s %s", level,
             fence ? " -DFCL_WG_PV_FENCE=1" : "", cycles ? " -DFCL_WG_STAMP_CYCLES=1" : "", extra);
    if (fcl_debug_set_build_options(ctx, options) != FCL_OK ||
        (emulate && (fcl_debug_emulate_tensor_cores(ctx, 1) != FCL_OK ||
                     fcl_debug_use_wgmma(ctx, 1) != FCL_OK))) {
        fprintf(stderr, "flashcl-stamps: the context refused a debug setting\n");
        fcl_context_destroy(ctx);
        return 1;
    }
    fcl_attention_desc desc;
    fcl_attention_desc_init(&desc, B, H, H, N, N, d, FCL_DTYPE_FP16, FCL_LAYOUT_BHSD);
    desc.causal = causal;
    fcl_plan plan;
    fcl_status st = fcl_plan_query(ctx, &desc, FCL_KERNEL_FORWARD, &plan);
    if (st != FCL_OK || strstr(plan.variant, "wgmma") == NULL || plan.br > 128) {
        printf("flashcl-stamps: no wgmma forward of at most 128 rows here (%s)\n",
               st == FCL_OK ? plan.variant : fcl_status_string(st));
        fcl_context_destroy(ctx);
        return st == FCL_OK ? 0 : 1;
    }
    const size_t n = B * H * N * d, rows = B * H * N;
    cl_mem q = bench_random_half(ctx, n, 1), k = bench_random_half(ctx, n, 2),
           v = bench_random_half(ctx, n, 3), o = bench_buffer(ctx, NULL, n * 2),
           lse = bench_buffer(ctx, NULL, rows * 4);
    float *host = malloc(rows * sizeof *host);
    /* twice: the first call builds the kernel */
    for (int r = 0; r < 2 && st == FCL_OK; ++r) {
        st = fcl_attention_forward(ctx, &desc, q, k, v, o, lse, 0, NULL, NULL);
        if (st == FCL_OK)
            st = clFinish(fcl_context_cl_queue(ctx));
    }
    if (st == FCL_OK && host)
        st = clEnqueueReadBuffer(fcl_context_cl_queue(ctx), lse, CL_TRUE, 0, rows * 4, host, 0,
                                 NULL, NULL);
    if (st != FCL_OK || !host) {
        fprintf(stderr, "flashcl-stamps: %s\n", host ? fcl_status_string(st) : "out of memory");
        free(host);
        clReleaseMemObject(q), clReleaseMemObject(k), clReleaseMemObject(v);
        clReleaseMemObject(o), clReleaseMemObject(lse);
        fcl_context_destroy(ctx);
        return 1;
    }
    const size_t br = plan.br, blocks_per_seq = (N + br - 1) / br;
    const int wgs = br >= 128 ? 2 : 1;
    /* the slots of tile t's stamp k: 1 + each * t + k (tile_nv_wgmma.cl) */
    const int each = level >= 3 ? 7 : 4, tiles = level >= 3 ? 3 : 7;
    const double unit_div = cycles ? 1.0 : 1e3; /* to cycles or us */
    const char *unit = cycles ? "cyc" : "us";
    samples tile = {0}, qk = {0}, smx = {0}, pv = {0}, off = {0};
    samples arrival = {0}, to_issue = {0}, rescale = {0}, top = {0}, pro = {0}, epi = {0};
    samples epart[6] = {{0}}; /* the epilogue's parts: slots 22 -> 23 -> ... 27 -> 30 */
    static const int epi_slot[7] = {22, 23, 24, 25, 26, 27, 30};
    static const char *const epi_name[6] = {" last V", " last PV", " sums", " O on chip",
                                            " O stores", " end"};
    size_t groups = 0, untimed = 0, bad = 0;
    wg_span *spans = malloc(B * H * blocks_per_seq * sizeof *spans);
    size_t nspans = 0;
    for (size_t bh = 0; bh < B * H; ++bh)
        for (size_t blk = 0; blk < blocks_per_seq; ++blk) {
            const size_t row0 = bh * N + blk * br, nrows = N - blk * br < br ? N - blk * br : br;
            if (nrows < 64 * (size_t)wgs)
                continue; /* a partial block: not all stamps written */
            uint64_t s[MAX_WG][SLOTS];
            for (int g = 0; g < wgs; ++g)
                for (int i = 0; i < SLOTS; ++i) {
                    uint32_t lo, hi;
                    memcpy(&lo, &host[row0 + 64 * (size_t)g + 2 * (size_t)i], 4);
                    memcpy(&hi, &host[row0 + 64 * (size_t)g + 2 * (size_t)i + 1], 4);
                    s[g][i] = (uint64_t)hi << 32 | lo;
                }
            ++groups;
            if (s[0][0] <= 1) { /* no timer (the emulation) */
                ++untimed;
                continue;
            }
#define US(a, b) ((double)((b) - (a)) / unit_div)
            if (level >= 3 && !cycles && spans && s[0][1] > s[0][0] && s[0][30] > s[0][22] &&
                s[0][22] > s[0][1]) {
                wg_span w = {s[0][0], s[0][30], (unsigned)s[0][31], US(s[0][0], s[0][1]),
                             US(s[0][22], s[0][30])};
                for (int g = 1; g < wgs; ++g) {
                    w.start = s[g][0] && s[g][0] < w.start ? s[g][0] : w.start;
                    w.end = s[g][30] > w.end ? s[g][30] : w.end;
                }
                spans[nspans++] = w;
            }
            for (int g = 0; g < wgs; ++g) {
                if (level >= 3 && s[g][1] > s[g][0] && s[g][30] > s[g][22] && s[g][22] > 0) {
                    push(&pro, US(s[g][0], s[g][1]));
                    push(&epi, US(s[g][22], s[g][30]));
                    for (int e = 0; e < 6; ++e)
                        if (s[g][epi_slot[e + 1]] >= s[g][epi_slot[e]] && s[g][epi_slot[e]] > 0)
                            push(&epart[e], US(s[g][epi_slot[e]], s[g][epi_slot[e + 1]]));
                }
                for (int t = 1; t < tiles; ++t) {
                    const uint64_t *p = &s[g][1 + each * t], *nx = p + each; /* tile t + 1 */
                    const int more = t + 1 < tiles && nx[0] > 0;
                    if (p[0] == 0 || p[1] == 0 || p[3] == 0)
                        continue; /* the block has fewer tiles */
                    if (p[1] < p[0] || p[3] < p[1] || (level >= 2 && (p[2] < p[1] || p[3] < p[2])) ||
                        (level >= 3 && (p[4] < p[3] || p[6] < p[5] || p[0] < p[6]))) {
                        ++bad;
                        continue;
                    }
                    push(&qk, US(p[0], p[1]));
                    if (level >= 2) {
                        push(&smx, US(p[1], p[2]));
                        push(&pv, US(p[2], p[3]));
                    } else
                        push(&pv, US(p[1], p[3]));
                    if (level >= 3) {
                        push(&arrival, US(p[5], p[6]));
                        push(&to_issue, US(p[6], p[0]));
                        push(&rescale, US(p[3], p[4]));
                        if (more && nx[5] > p[4])
                            push(&top, US(p[4], nx[5]));
                    }
                    if (more && nx[0] > p[0])
                        push(&tile, US(p[0], nx[0]));
                    if (g == 1 && more && s[0][1 + each * (t + 1)] > s[0][1 + each * t])
                        push(&off, ((double)s[1][1 + each * t] - (double)s[0][1 + each * t]) /
                                       (double)(s[0][1 + each * (t + 1)] - s[0][1 + each * t]));
                }
            }
#undef US
        }
    printf("flashcl-stamps on %s (%s): fp16 d %zu, N %zu, B %zu, H %zu, %scausal, plan %zu x %zu "
           "(%s), level %d%s%s%s%s\n",
           ctx->info.name, ctx->info.driver_version, d, N, B, H, causal ? "" : "non-", plan.br,
           plan.bc, plan.variant, level, fence ? ", P V's wait fenced after the softmax" : "",
           cycles ? ", in the multiprocessor's cycles" : "", *extra ? ", built with " : "", extra);
    printf("  %zu work-groups read, %zu without a timer, %zu tiles out of order\n", groups, untimed,
           bad);
    printf("  %-10s %10s %10s %10s\n", "", "median", "p10", "p90");
    print_row("tile", &tile, unit);
    print_row("QK wait", &qk, unit);
    print_row("softmax", &smx, unit);
    print_row(level >= 2 ? "PV wait" : "softmax+PV", &pv, unit);
    if (level >= 3) {
        print_row("rescale+P", &rescale, unit);
        print_row("loop top", &top, unit);
        print_row("arrival", &arrival, unit);
        print_row("to issue", &to_issue, unit);
        print_row("prologue", &pro, unit);
        print_row("epilogue", &epi, unit);
        for (int e = 0; e < 6; ++e)
            print_row(epi_name[e], &epart[e], unit);
    }
    print_row("offset", &off, "of a tile");
    if (level >= 3 && !cycles)
        print_machine(spans, nspans);
    free(spans);
    free(tile.v), free(qk.v), free(smx.v), free(pv.v), free(off.v), free(host);
    free(arrival.v), free(to_issue.v), free(rescale.v), free(top.v), free(pro.v), free(epi.v);
    for (int e = 0; e < 6; ++e)
        free(epart[e].v);
    clReleaseMemObject(q), clReleaseMemObject(k), clReleaseMemObject(v);
    clReleaseMemObject(o), clReleaseMemObject(lse);
    fcl_context_destroy(ctx);
    return bad == 0 ? 0 : 1;
}
