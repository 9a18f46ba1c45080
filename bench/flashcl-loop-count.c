/* flashcl-loop-count - measures, on a device that ends long loops (Mesa's
 * llvmpipe, src/programs/loop_limit.c), how many loop iterations one tile
 * of a kernel really costs a work-item, beside the bound the library
 * plans with.
 *
 * The device's limiter is the counter: with the library's own bound turned
 * off (no split, no refusal), one work-group walks n tiles of its outer
 * loop (keys for the forward, decode and dQ; query rows for dK/dV), and the
 * call is checked against the float64 reference.  The largest n that comes
 * out right gives the iterations a tile: between limit / (n + 1) and
 * limit / n.  One line per configuration:
 *
 *   kind piece d dtype variants | tiles right | measured per tile | bound per tile
 *
 * Usage: flashcl-loop-count KIND HEAD_DIM [DTYPE] [PROFILE|-] [causal|variants|plain] [mma]
 *   KIND forward, decode, dq or dkdv; DTYPE fp32, fp16, bf16; PROFILE an
 *   emulated device profile (flashcl-info --profiles) or - for the device;
 *   mma: the tensor-core piece, emulated.  FLASHCL_DEVICE picks the device.
 */
#include "internal.h"
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct measure {
    fcl_context *ctx;
    fcl_kernel_kind kind;
    size_t head_dim;
    fcl_dtype dtype;
    const fa_variants *var;
    int causal;
    fcl_plan plan;
} measure;

/* The case whose kernel under test walks n tiles in one work-group. */
static fa_case case_of(const measure *m, size_t n)
{
    const fcl_plan *p = &m->plan;
    fa_case c = {1, 1, 1, p->br, n * p->bc, m->head_dim, m->dtype, m->causal, 0.0f,
                 FCL_LAYOUT_BSHD, 0, {0, 0, 0}, 77 + n, m->var};
    if (m->kind == FCL_KERNEL_DECODE)
        c.seqlen_q = 1;
    if (m->kind == FCL_KERNEL_FORWARD) /* fewer rows get the decode plan */
        c.seqlen_q = FCL_DECODE_MAX_ROWS + 1;
    if (m->kind == FCL_KERNEL_BACKWARD_DKDV) { /* one key block, n query-row blocks */
        c.seqlen_q = n * p->br;
        c.seqlen_k = p->bc;
    }
    return c;
}

/* Right, or wrong by rounding only: the fp32 noise of a long sum may pass
 * the tests' tolerance by a little (llvmpipe's exp), while a walk the
 * limiter ended leaves whole tiles out (or the output unwritten). */
static int right_with(const measure *m, size_t n)
{
    fa_case c = case_of(m, n);
    fa_result r;
    const int backward = m->kind == FCL_KERNEL_BACKWARD_DQ || m->kind == FCL_KERNEL_BACKWARD_DKDV;
    const int ok = backward ? fa_check_backward(m->ctx, &c, &r) : fa_check_forward(m->ctx, &c, &r);
    return ok || (r.unwritten == 0 && r.nonfinite == 0 && r.guard_bad == 0 && r.err <= 4 * r.tol);
}

/* The largest n in [0, hi] that computes right (right_with is monotonic:
 * once the limiter ends the loop, every longer walk is wrong too). */
static size_t tiles_right(const measure *m, size_t hi)
{
    size_t lo = 0;
    while (right_with(m, hi)) {
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (right_with(m, mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static fcl_dtype dtype_of(const char *s)
{
    return strcmp(s, "fp16") == 0 ? FCL_DTYPE_FP16 : strcmp(s, "bf16") == 0 ? FCL_DTYPE_BF16
                                                                            : FCL_DTYPE_FP32;
}

static fcl_kernel_kind kind_of(const char *s)
{
    return strcmp(s, "decode") == 0 ? FCL_KERNEL_DECODE
           : strcmp(s, "dq") == 0   ? FCL_KERNEL_BACKWARD_DQ
           : strcmp(s, "dkdv") == 0 ? FCL_KERNEL_BACKWARD_DKDV
                                    : FCL_KERNEL_FORWARD;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s KIND HEAD_DIM [DTYPE] [PROFILE|-] [causal|variants|plain] [mma]\n",
                argv[0]);
        return 2;
    }
    measure m = {NULL, kind_of(argv[1]), (size_t)atoi(argv[2]),
                 dtype_of(argc > 3 ? argv[3] : "fp32"), NULL, 0, {0}};
    const char *profile = argc > 4 && strcmp(argv[4], "-") != 0 ? argv[4] : NULL;
    const char *mods = argc > 5 ? argv[5] : "plain";
    fa_variants v = fa_no_variants();
    if (strcmp(mods, "variants") == 0) { /* every per-score modifier at once */
        v.softcap = 20.0f;
        v.alibi = FCL_ALIBI_PER_HEAD;
        v.dropout_p = 0.1f;
        v.dropout_seed = 5;
        v.window_left = 1 << 20;
        v.window_right = 0;
        m.var = &v;
    }
    m.causal = strcmp(mods, "causal") == 0;
    m.ctx = test_context(profile);
    if (m.ctx == NULL)
        return 1;
    if (argc > 6 && strcmp(argv[6], "mma") == 0)
        fcl_debug_emulate_tensor_cores(m.ctx, 1);
    const uint32_t limit = m.ctx->loop_limit;
    if (limit == 0) {
        fprintf(stderr, "this device has no loop limit\n");
        return 1;
    }
    /* the plan of a long walk (the decode plan at 1 query row) */
    fcl_attention_desc d;
    fcl_attention_desc_init(&d, 1, 1, 1, m.kind == FCL_KERNEL_DECODE ? 1 : 256, 256, m.head_dim,
                            m.dtype, FCL_LAYOUT_BSHD);
    d.softcap = v.softcap; /* the variants' features make the build */
    d.alibi = v.alibi;
    d.dropout_p = v.dropout_p;
    m.ctx->loop_limit = 0; /* plan and run with no split or refusal */
    fcl_status st = fcl_plan_query(m.ctx, &d, m.kind, &m.plan);
    if (st != FCL_OK) {
        fprintf(stderr, "plan: %s\n", fcl_status_string(st));
        return 1;
    }
    const size_t n = tiles_right(&m, 8);
    m.ctx->loop_limit = limit;
    const uint64_t most = fcl_loop_max_outer(m.ctx, &m.plan);
    const size_t streamed = m.kind == FCL_KERNEL_BACKWARD_DKDV ? m.plan.br : m.plan.bc;
    /* the bound's iterations a tile, from the outer length it allows */
    const double bound = most > 0 ? (double)limit * 3 / 4 / (double)(most / streamed) : 0;
    printf("%-7s %-16s d=%-3zu %s %-8s br=%-3zu bc=%-3zu wg=%-3zu | %5zu tiles right | "
           "%.0f..%.0f a tile | bound %.0f (%.2fx)\n",
           argv[1], m.plan.variant, m.head_dim, fcl_dtype_name(m.dtype), mods, m.plan.br,
           m.plan.bc, m.plan.work_group_size, n, (double)limit / (double)(n + 1),
           n > 0 ? (double)limit / (double)n : 0.0, bound,
           n > 0 ? bound / ((double)limit / (double)n) : 0.0);
    fcl_context_destroy(m.ctx);
    return 0;
}
