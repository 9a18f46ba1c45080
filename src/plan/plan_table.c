/* plan_table.c - the tile each kind of device starts from.
 *
 * Like CLBlast's database: entries from general to specific, the most specific
 * match wins.  A tile here is a target, not a promise: the planner (plan.c)
 * still fits it to the device's local memory, work-group and register limits.
 * Entries for a real device must cite the measurement that chose them
 * (bench/results/, NOTES.md); the generic entries are reasoned defaults.
 */
#include "plan/plan.h"

#include <stddef.h>

typedef struct table_entry {
    const char *name;
    uint32_t vendor_id;       /* 0: any vendor */
    int device_class;         /* 1: GPU, 2: CPU, 0: any */
    int min_nv_cc;            /* NVIDIA compute capability at least, 0: any */
    int kind;                 /* fcl_kernel_kind, -1: any */
    int max_head_dim;         /* entry applies up to this head_dim */
    int rows, cols, ty, tx;   /* S tile (rows x cols) and thread grid */
    fcl_piece piece;          /* the tile piece the entry is for */
} table_entry;

static const table_entry table[] = {
    /* GPUs: 256 work-items in 16 x 16, a 4 x 4 register tile each; 64 x 64
     * score tiles keep the K/V reuse of a 64-row Q block.  The generic
     * entries reach head_dim 576, the KV-cache call's largest (MLA's latent
     * cache), where the planner shrinks the tile to the local memory. */
    {"default gpu", 0, 1, 0, -1, 576, 64, 64, 16, 16, FCL_PIECE_PORTABLE},
    /* CPUs (PoCL): work-items of a group run as loops on one core, so small
     * groups with small tiles keep the working set in L1/L2. */
    {"default cpu", 0, 2, 0, -1, 576, 32, 32, 8, 8, FCL_PIECE_PORTABLE},
    /* The CPU piece (one work-item a group, rows as SIMD lanes): 32 rows
     * (two vectors of 16: 16 accumulators) by 64 keys, for every kernel.
     * flashcl-tune on a 2-core AVX-512 Xeon, PoCL 3.1, fp32, N 1024,
     * B*N 8192, H*d 512 (NOTES.md, run 19), GFLOP/s at d 64 / 128:
     * forward 32x64 190 / 210, 32x32 190 / 210, 32x128 190 / 180,
     * 16x64 140 / 160; backward (dQ varied) 32x64 160 / 150, 16x64 140 / 150;
     * (dK/dV varied, keys x queries) 32x64 150 / 150, 16x64 130 / 130.
     * 32 rows match or beat 16 (by up to 35%); 32 to 256 keys are within the
     * noise.  The same sweep on a 16-core AVX-512 Xeon, PoCL 5.0 (NOTES.md,
     * run 21; TFLOP/s at d 64 / 128): forward 32x64 1.09 / 1.15, 32x256
     * 0.99 / 1.23, 16x64 0.79 / 0.78; dQ 32x64 0.86 / 0.93, 16x64 0.76 /
     * 0.77; dK/dV 32x64 0.86 / 0.91, 16x64 0.69 / 0.87: again 32 rows, keys
     * within 10%.  More rows are not possible: 64 would need 32 accumulators,
     * more than AVX-512's registers, and dropout keeps a bit per row in a
     * uint. */
    {"cpu piece", 0, 2, 0, -1, 576, 32, 64, 1, 1, FCL_PIECE_CPU},

    /* NVIDIA Hopper (sm_90), measured with flashcl-tune on an H200, fp32,
     * N = 4096, B*N = 16384, H*d = 2048 (NOTES.md, 2026-11-21, runs 2-3).
     * Forward: 128x32 on 16x8 work-items, 27.3 TFLOP/s at d = 64 (table
     * default 64x64/16x16: 21.8); 128x64 on 16x8, 23.1 at d = 128 (16.3). */
    {"nvidia sm_90 forward d<=64", FCL_VENDOR_ID_NVIDIA, 1, 90, FCL_KERNEL_FORWARD, 64, 128, 32, 16, 8, FCL_PIECE_PORTABLE},
    {"nvidia sm_90 forward", FCL_VENDOR_ID_NVIDIA, 1, 90, FCL_KERNEL_FORWARD, 256, 128, 64, 16, 8, FCL_PIECE_PORTABLE},
    /* Backward, dQ kernel: 128x32 on 16x8, 19.4 TFLOP/s for the whole
     * backward at d = 64 (19.3 with the default), 16.4 at d = 128 (14.2). */
    {"nvidia sm_90 dq", FCL_VENDOR_ID_NVIDIA, 1, 90, FCL_KERNEL_BACKWARD_DQ, 256, 128, 32, 16, 8, FCL_PIECE_PORTABLE},
    /* Backward, dK/dV kernel (rows are keys): 64 keys x 32 queries on 8x8,
     * 19.7 at d = 64; 128 keys x 32 queries on 32x8, 15.7 at d = 128 (14.2). */
    {"nvidia sm_90 dkdv d<=64", FCL_VENDOR_ID_NVIDIA, 1, 90, FCL_KERNEL_BACKWARD_DKDV, 64, 64, 32, 8, 8, FCL_PIECE_PORTABLE},
    {"nvidia sm_90 dkdv", FCL_VENDOR_ID_NVIDIA, 1, 90, FCL_KERNEL_BACKWARD_DKDV, 256, 128, 32, 32, 8, FCL_PIECE_PORTABLE},
};

/* More specific entries win; among equals, the one with the smallest
 * max_head_dim that still covers the problem. */
static int specificity(const table_entry *e)
{
    return ((e->vendor_id != 0) * 8 + (e->min_nv_cc != 0) * 4 + (e->kind >= 0) * 2) * 1024 +
           (1023 - e->max_head_dim);
}

bool fcl_tuned_lookup(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                      fcl_piece piece, fcl_tuned_tile *out)
{
    const table_entry *best = NULL;
    int device_class = caps->is_gpu ? 1 : (caps->is_cpu ? 2 : 1);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        const table_entry *e = &table[i];
        if (e->piece != piece)
            continue;
        if (e->vendor_id != 0 && e->vendor_id != caps->vendor_id)
            continue;
        if (e->device_class != 0 && e->device_class != device_class)
            continue;
        if (e->min_nv_cc != 0 && caps->nv_compute_capability < e->min_nv_cc)
            continue;
        if (e->kind >= 0 && e->kind != (int)kind)
            continue;
        if ((size_t)e->max_head_dim < head_dim)
            continue;
        if (best == NULL || specificity(e) > specificity(best))
            best = e;
    }
    if (best == NULL)
        return false;
    out->rows = best->rows;
    out->cols = best->cols;
    out->ty = best->ty;
    out->tx = best->tx;
    out->entry = best->name;
    return true;
}
