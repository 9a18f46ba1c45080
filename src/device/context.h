/* context.h - struct fcl_context: what a context holds (the OpenCL objects,
 * the device's probe and caps, the programs and resolved kernels, scratch,
 * counts).  The files that read or change a context's fields include it. */
#ifndef FCL_CONTEXT_H
#define FCL_CONTEXT_H

#include "programs/programs.h"

/* ---- the context ---------------------------------------------------------- */

struct fcl_context {
    cl_context cl_ctx;
    cl_command_queue queue;
    cl_device_id device;
    fcl_device_info info;         /* of the real device */
    char *extensions;
    fcl_caps caps;                /* of the real device or the emulated profile */
    const fcl_profile *profile;   /* NULL unless emulating */
    int portable_only;            /* no vendor fast paths */
    int pocl_cpu;                 /* a CPU device of PoCL: FCL_POCL_CPU (common.cl) */
    uint32_t loop_limit;          /* loop iterations a work-item may run (llvmpipe), 0: no limit */
    int emulate_tensor_cores;     /* tests: tensor-core pieces on any device */
    int use_wgmma;                /* tests: 1 the forward's wgmma piece where it applies, as
                                     FLASHCL_WGMMA=1 asks (fcl_uses_wgmma); -1 never;
                                     0 as the environment and the default say */
    int use_wgmma_backward;       /* tests: the same for the backward's kernels */
    char *cache_dir;              /* NULL: no disk cache */
    fcl_program_entry *programs;
    size_t num_programs;
    fcl_resolved **resolved;      /* heap entries: pointers stay valid */
    size_t num_resolved;
    char *build_log;
    fcl_memory_stats mem;
    fcl_scratch scratch[FCL_SCRATCH_COUNT];
    cl_mem placeholder;           /* one float, bound for an optional array a call
                                     leaves out ("optional arrays", cl/common.cl) */
    uint64_t map_template[FCL_MAP_TEMPLATE_BYTES / 8]; /* the wgmma forward's tensor map
                                     template (tensor_maps.c) */
    int has_map_template;         /* ... encoded: the forward's bulk tensor copies can run */
    cl_event scratch_busy;        /* completes when the last call using scratch is done */
    uint64_t cache_max_bytes;     /* the disk cache's size bound (disk_cache.c) */
    unsigned cache_loads;         /* programs the disk cache gave, and took: for tests */
    unsigned cache_stores;
    int queue_in_order;           /* commands run in order: a call's launches need no events */
    /* Tuning only (flashcl-tune): a target tile per kernel kind that replaces
     * the table's, and extra build options; set through fcl_debug_*. */
    fcl_tuned_tile tile_override[FCL_KERNEL_KINDS];
    int has_tile_override[FCL_KERNEL_KINDS];
    char extra_build_options[128];
};

/* The dK/dV tile a tuning tool forced, or NULL. */
static inline const fcl_tuned_tile *fcl_dkdv_forced_tile(const fcl_context *ctx)
{
    return ctx->has_tile_override[FCL_KERNEL_BACKWARD_DKDV]
               ? &ctx->tile_override[FCL_KERNEL_BACKWARD_DKDV]
               : NULL;
}

#endif /* FCL_CONTEXT_H */
