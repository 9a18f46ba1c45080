/* device.h - the device: what the planner sees of it (caps, or an emulated
 * profile's), probing and selection, device memory and the scratch a
 * context keeps. */
#ifndef FCL_DEVICE_H
#define FCL_DEVICE_H

#include "support/support.h"

/* ---- device capabilities (real or emulated): all the planner sees -------- */

typedef struct fcl_caps {
    uint32_t vendor_id;
    int is_gpu;
    int is_cpu;
    uint64_t local_mem_reported;
    uint64_t local_mem_usable;
    size_t max_work_group_size;
    uint32_t simd_width;          /* 0 if unknown */
    int nv_compute_capability;    /* 0 if not NVIDIA */
    uint32_t compute_units;
    uint32_t native_float_width;  /* floats per SIMD register (CPUs), 0 if unknown */
    uint64_t cache_bytes;         /* CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, 0 if unknown */
} fcl_caps;

/* ---- emulated device profiles (profiles.c) -------------------------------- */

typedef struct fcl_profile {
    const char *name;
    const char *description;
    fcl_caps caps;
} fcl_profile;

const fcl_profile *fcl_profile_find(const char *name);

/* ---- device probing (device_probe.c, local_mem_probe.c) ------------------- */

fcl_status fcl_probe_device(cl_device_id device, fcl_device_info *info, char **extensions);
fcl_caps fcl_caps_from_info(const fcl_device_info *info);
/* Finds the largest compile-time __local array a work-group can use. */
fcl_status fcl_probe_local_mem(cl_device_id device, uint64_t reported, uint64_t *usable);

/* ---- tensor maps (tensor_maps.c) ------------------------------------------ */

/* A tensor map's bytes */
#define FCL_MAP_TEMPLATE_BYTES 128
/* Encodes ctx->map_template (has_map_template 1) on a real sm_90 device
 * where NVIDIA's driver library does, else sets has_map_template 0. */
void fcl_tensor_maps_setup(fcl_context *ctx);
/* fcl_tensor_maps_buffer: with the workspaces, below */

/* ---- device selection (device_select.c) ----------------------------------- */

fcl_status fcl_select_device(int platform_index, int device_index, cl_device_id *device);

/* ---- device memory (memory.c) --------------------------------------------- */

cl_mem fcl_buffer_create(fcl_context *ctx, cl_mem_flags flags, size_t bytes, void *host,
                         fcl_status *status);
/* `bytes`: the size it was created with (NULL is a no-op). */
void fcl_buffer_release(fcl_context *ctx, cl_mem mem, size_t bytes);

/* Device scratch the context keeps between calls (workspace.c). */
typedef enum fcl_scratch_slot {
    FCL_SCRATCH_PART_O,           /* split-KV partial outputs, fp32 */
    FCL_SCRATCH_PART_LSE,         /* split-KV partial LSE, fp32 */
    FCL_SCRATCH_ROTARY_Q,         /* KV-cache rotary: the rotated Q, storage type */
    FCL_SCRATCH_TENSOR_MAPS,      /* the wgmma forward's and dK/dV's tensor maps, two a group */
    FCL_SCRATCH_TENSOR_MAPS_DQ,   /* the wgmma dQ's (it may run beside dK/dV) */
    FCL_SCRATCH_WIDE_K,           /* the FP8 wgmma forward's K widened to fp16 (forward.c) */
    FCL_SCRATCH_WIDE_V,           /* ... and V (FP8 products: K's and V^T's tiles, bytes) */
    FCL_SCRATCH_DELTA,            /* the backward's rowsum(dO * O), fp32 (backward.c) */
    FCL_SCRATCH_DQ_ACC,           /* the fused dQ's fp32 sums (FLASHCL_BACKWARD_DQ) */
    FCL_SCRATCH_DQ_SEM,           /* ... its counters per Q block and failure flag */
    FCL_SCRATCH_COUNT
} fcl_scratch_slot;

/* The workspace in `slot` (FCL_SCRATCH_TENSOR_MAPS or _DQ) of a launch of
 * a wgmma kernel with bulk tensor copies (tensor_maps.c): the template
 * (where the context has one) and 2 x 128 bytes for each of `groups` pairs
 * of maps (a work-group's, or under GQA dK/dV's one a query head). */
fcl_status fcl_tensor_maps_buffer(fcl_context *ctx, fcl_scratch_slot slot, size_t groups,
                                  cl_mem *out);

typedef struct fcl_scratch {
    cl_mem mem;
    size_t bytes;
} fcl_scratch;

/* ---- scratch buffers (workspace.c) ---------------------------------------- */

/* A wait list that may have had the scratch's event added. */
typedef struct fcl_wait {
    cl_uint count;
    const cl_event *list;
    cl_event *owned;              /* free() after use */
} fcl_wait;

/* The scratch buffer of `slot`, at least `bytes` large. */
fcl_status fcl_scratch_get(fcl_context *ctx, fcl_scratch_slot slot, size_t bytes, cl_mem *out);
/* The caller's wait list plus the end of the last call that used scratch. */
fcl_status fcl_scratch_wait_list(fcl_context *ctx, cl_uint num_wait, const cl_event *wait_list,
                                 fcl_wait *w);
/* Scratch is in use until `done` completes. */
void fcl_scratch_used_until(fcl_context *ctx, cl_event done);
void fcl_scratch_release(fcl_context *ctx);

#endif /* FCL_DEVICE_H */
