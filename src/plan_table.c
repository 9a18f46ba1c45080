/* plan_table.c - the tile each kind of device starts from.
 *
 * Like CLBlast's database: entries from general to specific, the most specific
 * match wins.  A tile here is a target, not a promise: the planner (plan.c)
 * still fits it to the device's local memory, work-group and register limits.
 * Entries for a real device must cite the measurement that chose them
 * (bench/results/, NOTES.md); the generic entries are reasoned defaults.
 */
#include "internal.h"

#include <stddef.h>

typedef struct table_entry {
    const char *name;
    uint32_t vendor_id;       /* 0: any vendor */
    int device_class;         /* 1: GPU, 2: CPU, 0: any */
    int min_nv_cc;            /* NVIDIA compute capability at least, 0: any */
    int kind;                 /* fcl_kernel_kind, -1: any */
    int max_head_dim;         /* entry applies up to this head_dim */
    int rows, cols, ty, tx;   /* S tile (rows x cols) and thread grid */
} table_entry;

static const table_entry table[] = {
    /* GPUs: 256 work-items in 16 x 16, a 4 x 4 register tile each; 64 x 64
     * score tiles keep the K/V reuse of a 64-row Q block. */
    {"default gpu", 0, 1, 0, -1, 256, 64, 64, 16, 16},
    /* CPUs (PoCL): work-items of a group run as loops on one core, so small
     * groups with small tiles keep the working set in L1/L2. */
    {"default cpu", 0, 2, 0, -1, 256, 32, 32, 8, 8},
};

static int specificity(const table_entry *e)
{
    return (e->vendor_id != 0) * 8 + (e->min_nv_cc != 0) * 4 + (e->kind >= 0) * 2 +
           (e->max_head_dim < 256);
}

bool fcl_tuned_lookup(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                      fcl_tuned_tile *out)
{
    const table_entry *best = NULL;
    int device_class = caps->is_gpu ? 1 : (caps->is_cpu ? 2 : 1);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        const table_entry *e = &table[i];
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
