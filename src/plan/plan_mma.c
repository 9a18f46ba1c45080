/* plan_mma.c - tiles for the tensor-core pieces (cl/tile_nv_mma.cl).
 *
 * Each warp owns MB blocks of 16 rows of the kernel's row operand (query
 * rows for the forward and dQ, keys for dK/dV) and walks the other operand
 * in steps of `inner` rows (keys, or query rows for dK/dV).  Everything a
 * warp multiplies lives in its registers, so the shape is bounded by
 * registers (per lane: 2 * MB * inner / 4 per score-like tile, 2 * MB * d / 4
 * per accumulator) and by __local memory for the 16-bit tiles, rows padded
 * by 8 halves:
 *     forward  (rows + 2 * inner) * (d + 8) * 2
 *     dQ       (2 * rows + 4 * inner) * (d + 8) * 2
 *     dK/dV    (2 * rows + 4 * inner) * (d + 8) * 2 + 4 * inner * 4 (LSE, delta)
 *              + 2 * rows * (inner + 8) * 2 with its columns split (P^T, dS^T)
 * (the backward's streamed tiles have two buffers each), and one int per
 * operand that may carry a non-finite value to masked rows (common.cl)
 * with rows = 16 * MB * warps, plus 24 bytes per work-item when the warp
 * operations are emulated.  Shapes by measurement on an H200 (NOTES.md).
 */
#include "plan/plan.h"

#include <string.h>

/* warps; 16-row blocks per warp of the accumulators' rows; the other
 * operand's rows per step; warps the accumulators' columns are split over
 * (FCL_WD: the kernel's rows are then 16 * mb * warps / wd, and its score
 * tiles are shared out as tile_nv_mma.cl says; dK/dV above head_dim 128,
 * the forward and decode above 256 with mb = 1). */
typedef struct mma_shape {
    int warps, mb, inner, wd;
} mma_shape;

/* Defaults per kernel and head_dim: the best of the sweeps in NOTES.md runs
 * 13 and 58 (H200, fp16, N = 4096, B*N = 16384, H*d = 2048), TFLOP/s of the
 * forward, or of the whole backward with the other backward kernel at its
 * previous default:
 *   forward d <= 64:  4 warps x 32 rows, 64 keys    241 (128 keys: 247, 4 x 16: 207, 8 x 16: 150)
 *   forward d <= 128: 4 warps x 32 rows, 64 keys    272 (32 keys: 253, 4 x 16: 236, 8 x 16: 202)
 *   forward d = 256:  8 warps x 16 rows, 64 keys    244 (128 keys: 215, 4 x 16 and 32 keys: 227)
 *                     run 58 (run 13 had 128 keys ahead: 259 against 236)
 *   dQ d <= 64:       4 warps x 32 rows, 64 keys    163 (32 keys: 154, 4 x 16: 150)
 *   dQ d <= 128:      4 warps x 32 rows, 32 keys    196 (4 x 16 and 64 keys: 186, 32 keys: 170)
 *   dK/dV d <= 64:    4 warps x 32 keys, 32 rows    215 (4 x 16 keys and 128 rows: 201, 64 rows:
 *                     188) run 58; run 13 had 128 rows ahead, 170 against 167
 *   dK/dV d = 128:    4 warps x 16 keys, 64 rows    170 (32 rows: 156, 128 rows: 132)
 *   dQ d = 256:       8 warps x 16 rows, 32 keys    171 (4 x 16: 157, 4 x 16 and 64 keys: 147)
 *                     run 58; where it does not fit (the A100), 4 x 16 rows, 32 keys
 *   dK/dV d = 256:    8 warps, 64 keys, 64 rows, columns over 4 warps     150 (two launches
 *                     of 4 warps x 16 keys, 64 rows: 96; WD 2: 145; 32 rows: 135)  run 26 (H100)
 * At 128 keys for d <= 64 the forward was 2% faster (within the noise) but
 * needs 1.5 times the memory: 64 taken.  Two 16-row
 * blocks per warp lost before run 13, while a per-score mask test made the
 * softmax the bottleneck (NOTES.md).
 * The A100 (sm_80, 164 KiB usable) gets the same shapes where they fit its
 * memory (all but the d = 256 dQ, which takes its second shape, and the
 * d = 256 dK/dV, which halves its inner step by the rule below; test_plan
 * checks it): derived, not measured. */
static mma_shape default_shape(fcl_kernel_kind kind, int d, bool fused_dq)
{
    /* dK/dV computing dQ too (FLASHCL_BACKWARD_DQ, an option): 8 warps,
     * 128 keys, the accumulators' columns over 2 warps, which share dS^T
     * through local memory for the dQ product as well; whole backward on
     * the H100 (run 28, fp16, N 4096), ordered / any-order: d 128 171 / 209
     * TFLOP/s against 99 / 117 with the shape below (the separate kernels:
     * 197); d 64 156 / 191 against 125 / 161 (separate: 193). */
    if (kind == FCL_KERNEL_BACKWARD_DKDV && fused_dq && d <= 128)
        return d <= 64 ? (mma_shape){8, 2, 128, 2} : (mma_shape){8, 2, 64, 2};
    /* Above 256 (MLA's 576, decoding or the KV call's many rows): 64 rows
     * by 32 keys, each 16-row block's keys and V's columns over 2 warps
     * (144 accumulators a lane at 576), the best decode tile of run 32. */
    if ((kind == FCL_KERNEL_FORWARD || kind == FCL_KERNEL_DECODE) && d > 256)
        return (mma_shape){8, 1, 32, 2};
    switch (kind) {
    case FCL_KERNEL_FORWARD:
        return d <= 128 ? (mma_shape){4, 2, 64, 1} : (mma_shape){8, 1, 64, 1};
    case FCL_KERNEL_DECODE:
        return (mma_shape){1, 1, 32, 1};
    case FCL_KERNEL_BACKWARD_DQ:
        return d <= 64    ? (mma_shape){4, 2, 64, 1}
               : d <= 128 ? (mma_shape){4, 2, 32, 1}
                          : (mma_shape){8, 1, 32, 1};
    case FCL_KERNEL_BACKWARD_DKDV:
        return d <= 64    ? (mma_shape){4, 2, 32, 1}
               : d <= 128 ? (mma_shape){4, 1, 64, 1}
                          : (mma_shape){8, 2, 64, 4};
    }
    return (mma_shape){4, 1, 64, 1};
}

/* The shape to try before shrinking where the default does not fit: the
 * d = 256 dQ's 128 rows need 198 KiB, so a smaller device (the A100's 164
 * KiB) keeps its earlier 64 rows whole rather than halving the keys to 16
 * and then the warps.  Otherwise the default itself. */
static mma_shape second_shape(fcl_kernel_kind kind, int d, mma_shape first)
{
    if (kind == FCL_KERNEL_BACKWARD_DQ && d > 128)
        return (mma_shape){4, 1, 32, 1};
    return first;
}

/* Rows the kernel owns: query rows, or keys for dK/dV. */
static int shape_rows(mma_shape s) { return 16 * s.mb * s.warps / s.wd; }

/* Whether the warps tile a split kernel evenly (tile_nv_mma.cl's FCL_WD
 * checks, in the same words).  The forward's split: warps = row blocks x
 * wd, each warp a 16-row block, the keys and head_dim's columns in wd
 * parts of multiples of 16. */
static bool shape_valid(fcl_kernel_kind kind, int d, mma_shape s)
{
    if (s.wd == 1)
        return kind == FCL_KERNEL_BACKWARD_DKDV || kind == FCL_KERNEL_BACKWARD_DQ || d <= 256;
    if (kind == FCL_KERNEL_FORWARD || kind == FCL_KERNEL_DECODE)
        return s.mb == 1 && s.warps % s.wd == 0 && s.inner % (16 * s.wd) == 0 &&
               d % (16 * s.wd) == 0;
    if (kind != FCL_KERNEL_BACKWARD_DKDV || (16 * s.mb * s.warps) % s.wd != 0)
        return false;
    const int kb = shape_rows(s) / 16;
    if (kb < 1 || s.warps % kb != 0)
        return false;
    const int qparts = s.warps / kb;
    return s.inner % (16 * qparts) == 0 && (kb * s.wd) % s.warps == 0 && (d / s.wd) % 16 == 0 &&
           d % s.wd == 0;
}

static uint64_t shape_bytes(fcl_kernel_kind kind, int d, mma_shape s, int emulated)
{
    const uint64_t rows = (uint64_t)shape_rows(s), inner = (uint64_t)s.inner;
    const uint64_t row_bytes = (uint64_t)(d + 8) * 2;
    uint64_t bytes = 0;
    switch (kind) {
    case FCL_KERNEL_FORWARD:
    case FCL_KERNEL_DECODE:
        /* Q, and K and V (or two K buffers of a shared cache) */
        bytes = (rows + 2 * inner) * row_bytes + 4;
        if (s.wd > 1) /* P as 16-bit rows of inner + 8, a float a row and part */
            bytes += rows * (inner + 8) * 2 + (uint64_t)s.wd * rows * 4;
        break;
    case FCL_KERNEL_BACKWARD_DQ:
        bytes = (2 * rows + 4 * inner) * row_bytes + 4;
        break;
    case FCL_KERNEL_BACKWARD_DKDV:
        bytes = (2 * rows + 4 * inner) * row_bytes + 4 * inner * 4 + 2 * 4;
        if (s.wd > 1) /* P^T and dS^T as 16-bit rows of inner + 8 */
            bytes += 2 * rows * (inner + 8) * 2;
        break;
    }
    if (emulated)
        bytes += (uint64_t)(32 * s.warps) * 6 * 4;
    return bytes;
}

static const char *kernel_words(fcl_kernel_kind kind)
{
    switch (kind) {
    case FCL_KERNEL_FORWARD:
        return "forward: warps own query rows, keys per step";
    case FCL_KERNEL_BACKWARD_DQ:
        return "dQ: warps own query rows, keys per step";
    case FCL_KERNEL_BACKWARD_DKDV:
        return "dK/dV: warps own keys, query rows per step";
    case FCL_KERNEL_DECODE:
        return "decode: warps own (packed) query rows, keys per step";
    }
    return "";
}

/* Registers per lane for one 16-row block: an accumulator is d / 2 floats,
 * 128 at d = 256.  dK/dV holds two, so above d = 128 it splits their columns
 * over warps, or (a forced shape without that) computes one per launch (the
 * dK launch recomputes S^T: five products instead of four).  The forward
 * splits above 256. */
int fcl_mma_max_head_dim(fcl_kernel_kind kind)
{
    return kind == FCL_KERNEL_FORWARD || kind == FCL_KERNEL_DECODE ? 576 : 256;
}

/* The next smaller shape to try: fewer rows per step, then fewer row
 * blocks per warp, then fewer warps (never fewer than a split's column
 * groups); false when none is left.  A split forward keeps 16 keys a warp
 * at least, and before dropping row blocks gives each fewer warps (2 at
 * least: its accumulators' columns must still fit).  The caller skips the
 * shapes a split cannot tile (shape_valid). */
static bool shrink(fcl_kernel_kind kind, mma_shape *s)
{
    if (s->wd > 1 && kind != FCL_KERNEL_BACKWARD_DKDV) {
        if (s->inner > 16 * s->wd)
            s->inner /= 2;
        else if (s->wd > 2)
            s->wd /= 2, s->warps /= 2; /* the same rows, fewer warps to each */
        else if (s->warps > s->wd)
            s->warps /= 2;
        else
            return false;
        return true;
    }
    if (s->inner > 16)
        s->inner /= 2;
    else if (s->mb > 1)
        s->mb /= 2;
    else if (s->warps > s->wd)
        s->warps /= 2;
    else
        return false;
    return true;
}

/* Whether s is a shape the kernel can run within `local_limit` and `wg_limit`. */
static bool shape_fits(fcl_kernel_kind kind, int d, int emulated, uint64_t local_limit,
                       size_t wg_limit, mma_shape s)
{
    return shape_valid(kind, d, s) && shape_bytes(kind, d, s, emulated) <= local_limit &&
           (size_t)(32 * s.warps) <= wg_limit;
}

/* *s, shrunk until it fits `local_limit` and `wg_limit`; false if nothing
 * smaller does. */
static bool fit_shape(fcl_kernel_kind kind, int d, int emulated, uint64_t local_limit,
                      size_t wg_limit, mma_shape *s)
{
    while (!shape_fits(kind, d, emulated, local_limit, wg_limit, *s)) {
        if (!shrink(kind, s))
            return false;
    }
    return true;
}

/* The dK/dV default above head_dim 128 on a device too small for its split
 * shape (a smaller split would not cover its head_dim in 16-column steps):
 * one output per launch. */
static const mma_shape two_launch_dkdv = {4, 1, 64, 1};

bool fcl_mma_dkdv_split(const fcl_caps *caps, int emulated, const fcl_tuned_tile *forced,
                        size_t head_dim)
{
    if (head_dim <= 128 || head_dim > (size_t)fcl_mma_max_head_dim(FCL_KERNEL_BACKWARD_DKDV))
        return false;
    if (forced != NULL)
        return forced->wd <= 1;
    const int d = (int)head_dim;
    mma_shape s = default_shape(FCL_KERNEL_BACKWARD_DKDV, d, false);
    return s.wd <= 1 || !fit_shape(FCL_KERNEL_BACKWARD_DKDV, d, emulated,
                                   caps->local_mem_usable, caps->max_work_group_size, &s);
}

fcl_status fcl_plan_make_mma(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                             fcl_dtype dtype, bool fused_dq, const fcl_plan_limits *limits,
                             const fcl_tuned_tile *target, int emulated, fcl_plan_full *out)
{
    if (head_dim < 16 || head_dim > (size_t)fcl_mma_max_head_dim(kind) || head_dim % 16 != 0 ||
        dtype == FCL_DTYPE_FP32)
        return FCL_ERROR_NO_PLAN;
    memset(out, 0, sizeof *out);
    const int d = (int)head_dim;
    const bool dkdv = kind == FCL_KERNEL_BACKWARD_DKDV;
    mma_shape s = default_shape(kind, d, fused_dq);
    if (target != NULL) {
        /* rows x cols of the S tile: (BR, BC), or (BC, BR) for dK/dV */
        const int own = dkdv ? target->cols : target->rows;
        s.warps = target->ty;
        s.inner = dkdv ? target->rows : target->cols;
        s.wd = target->wd > 1 && kind != FCL_KERNEL_BACKWARD_DQ ? target->wd : 1;
        s.mb = s.warps > 0 ? own * s.wd / (16 * s.warps) : 0;
        if (s.warps < 1 || s.mb < 1 || own != shape_rows(s) || s.inner < 16 ||
            s.inner % 16 != 0 || !shape_valid(kind, d, s))
            return FCL_ERROR_INVALID_VALUE;
    }
    uint64_t local_limit;
    size_t wg_limit;
    fcl_plan_effective_limits(caps, limits, &local_limit, &wg_limit);
    if (target == NULL && !shape_fits(kind, d, emulated, local_limit, wg_limit, s))
        s = second_shape(kind, d, s);
    if (!fit_shape(kind, d, emulated, local_limit, wg_limit, &s)) {
        /* a split dK/dV that does not fit: one output per launch, as
         * fcl_mma_dkdv_split says of the same device (or, under limits a
         * build lowered, both outputs in the one launch planned) */
        s = two_launch_dkdv;
        if (!dkdv || target != NULL || !fit_shape(kind, d, emulated, local_limit, wg_limit, &s))
            return FCL_ERROR_NO_PLAN;
    }
    const int rows = shape_rows(s);
    fcl_plan *pub = &out->pub;
    out->ty = s.warps;
    out->tx = 32;
    out->rm = 2 * s.mb;
    out->rn = s.inner / 4;
    out->d_pad = d;
    out->force_unroll = !emulated; /* emulated: CPUs, see FCL_FORCE_UNROLL */
    out->tile_mma = 1;
    out->mma_emulated = emulated;
    out->wd = s.wd;
    /* red.global.v4.f32 (sm_90, PTX 8.1): the fused dQ's adds, run 28 */
    out->red_v4 = !emulated && caps->nv_compute_capability >= 90;
    /* cvt.rn.f16x2.e4m3x2 (sm_89, PTX 7.8): FP8 tiles' decode */
    out->cvt_fp8 = !emulated && caps->nv_compute_capability >= 89;
    /* 16-bit tiles on chip */
    fcl_plan_describe(pub, caps, kind, dtype, head_dim, head_dim, caps->local_mem_usable, 2);
    pub->br = (size_t)(dkdv ? s.inner : rows);
    pub->bc = (size_t)(dkdv ? rows : s.inner);
    pub->work_group_size = (size_t)(32 * s.warps);
    pub->threads_row = (size_t)s.warps;
    pub->threads_col = 32;
    pub->local_bytes = shape_bytes(kind, d, s, emulated);
    fcl_copy_string(pub->variant, sizeof pub->variant,
                    emulated ? "emulated-mma-sync" : "nvidia-mma-sync");
    fcl_copy_string(pub->source, sizeof pub->source,
                    target ? target->entry : "tensor-core default");
    char shared_rows[64] = "";
    if (s.wd > 1 && !dkdv) /* the forward's split: warps share rows */
        fcl_appendf(shared_rows, sizeof shared_rows, " (%d warps a block: keys, O's columns split)",
                    s.wd);
    /* sized to fit fcl_plan's reason (383 characters) in the longest form:
     * dK/dV's columns split, emulated (test_plan's test_reasons_whole) */
    fcl_appendf(pub->reason, sizeof pub->reason,
                "tensor cores: mma.sync m16n8k16 (%s inputs, fp32 sums); %s: %d warps x %d "
                "rows each%s, %d per step; 16-bit tiles; every product of a warp stays in its "
                "registers (the paper's rule ignores registers)%s",
                fcl_dtype_name(dtype), kernel_words(kind), s.warps, 16 * s.mb,
                shared_rows, s.inner,
                emulated ? "; warp operations emulated (a test mode)" : "");
    if (s.wd > 1 && dkdv)
        fcl_appendf(pub->reason, sizeof pub->reason,
                    "; dK and dV columns split over %d warps each (P^T, dS^T shared through "
                    "local memory)",
                    s.wd);
    else if (dkdv && head_dim > 128)
        fcl_appendf(pub->reason, sizeof pub->reason, "; head_dim > 128: %s",
                    fcl_mma_dkdv_split(caps, emulated, target, head_dim)
                        ? "dV and dK in two launches"
                        : "dV and dK in one launch, two head_dim-wide accumulators a lane (the "
                          "split shape outgrew limits a build lowered)");
    return FCL_OK;
}
