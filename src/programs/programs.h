/* programs.h - plans become built, cached, launched kernels: what a kernel
 * is built for (fcl_build), the programs (sources, builds, the caches in
 * memory and on disk, the sm_90a step), resolving a build to a checked
 * kernel with resource fallback, arguments and launches, and devices that
 * end long loops. */
#ifndef FCL_PROGRAMS_H
#define FCL_PROGRAMS_H

#include "plan/plan.h"

typedef struct fcl_program_entry {
    char *key;                    /* program name + build options */
    cl_program program;
} fcl_program_entry;



/* The other kernels of a resolved plan's program, each launched beside
 * its main kernel. */
typedef enum fcl_helper {
    FCL_HELPER_COMBINE,           /* split-KV merge (combine.cl) */
    FCL_HELPER_KVCACHE_APPEND,    /* KV-cache append (kvcache.cl) */
    FCL_HELPER_DELTA,             /* backward's rowsum(dO * O) (flash_bwd.cl) */
    FCL_HELPER_DQ_STORE,          /* dQ from the fused dK/dV kernel's sums (flash_bwd.cl) */
    FCL_HELPER_SINK_GRAD,         /* backward's gradient of attention sinks (flash_bwd.cl) */
    FCL_HELPER_WIDEN,             /* the FP8 wgmma forward's K and V to fp16 (flash_fwd.cl) */
    FCL_HELPER_PREPARE8,          /* FP8 products: Q, K, V^T as the kernel's tiles (flash_fwd.cl) */
    FCL_HELPER_COUNT
} fcl_helper;

typedef struct fcl_resolved {
    fcl_build build;
    fcl_plan_full plan;
    cl_kernel kernel;             /* owned; one per resolved plan */
    cl_kernel helpers[FCL_HELPER_COUNT]; /* owned; made on first use */
    fcl_plan_limits limits;       /* the limits this plan was made under */
    char fallback[192];           /* what the resource fallback did, if anything */
} fcl_resolved;

/* ---- programs and kernels (program_cache.c, kernel_sources.c) -------------- */

typedef enum fcl_program_id {
    FCL_PROGRAM_FORWARD,
    FCL_PROGRAM_BACKWARD,
    FCL_PROGRAM_UTIL              /* Philox and dropout-mask kernels */
} fcl_program_id;

/* The embedded .cl sources of one program, in order (generated file). */
size_t fcl_program_sources(fcl_program_id id, const char **sources, size_t capacity);

fcl_status fcl_get_program(fcl_context *ctx, fcl_program_id id, const char *options,
                           cl_program *out);
void fcl_set_build_log(fcl_context *ctx, const char *log);
/* Builds prog for the context's device; on failure keeps its log and
 * releases it (FCL_ERROR_BUILD_FAILED, or OpenCL's error). */
fcl_status fcl_build_or_release(fcl_context *ctx, cl_program prog, const char *options);
/* Keeps prog's build log as the context's (best effort). */
void fcl_keep_build_log(fcl_context *ctx, cl_program prog);
/* A built program's binary (one device): *bin (malloc'd) and *len. */
fcl_status fcl_program_binary(cl_program prog, unsigned char **bin, size_t *len);

/* ---- sm_90a programs (ptx_rewrite.c) --------------------------------------- */

/* A program whose build options hold FCL_SM90A_OPTION is built from source,
 * then its PTX retargeted to sm_90a with each FCL_SM90A_MARKER comment line
 * of its inline asm turned into the instruction that follows the marker. */
#define FCL_SM90A_OPTION "-DFCL_SM90A=1"
#define FCL_SM90A_MARKER "// @sm90a@"
int fcl_wants_sm90a(const char *options);
/* FCL_OK on an NVIDIA sm_90 device (the real one, whatever the profile);
 * else FCL_ERROR_BUILD_FAILED with a build log that says why. */
fcl_status fcl_sm90a_device_check(const fcl_context *ctx);
/* The text step, pure: checks that `ptx` (len bytes, up to a first NUL) has
 * exactly one .target directive, naming sm_90 or sm_90a, and no marker
 * without an instruction; then writes the rewritten text to *out (malloc'd,
 * NUL-terminated, *out_len bytes without the NUL) and the number of markers
 * replaced to *rewritten.  Blank lines, indentation and every other byte are
 * kept.  FCL_ERROR_BUILD_FAILED with the reason in `why` when the text does
 * not pass; nothing is allocated then. */
fcl_status fcl_ptx_to_sm90a(const char *ptx, size_t len, char **out, size_t *out_len,
                            size_t *rewritten, char *why, size_t why_size);
/* The binary step: from_source's PTX rewritten, built as a binary program
 * with `options`.  The caller keeps from_source. */
fcl_status fcl_build_sm90a(fcl_context *ctx, cl_program from_source, const char *options,
                           cl_program *out);

/* Options (-D defines) for a plan and its build; returns bytes needed like
 * snprintf. */
int fcl_kernel_options(const fcl_plan_full *plan, const fcl_build *build, int pocl_cpu, char *buf,
                       size_t size);

/* Plans, builds and checks the kernel of `build`, with resource fallback;
 * the result is cached in the context. */
fcl_status fcl_resolve(fcl_context *ctx, const fcl_build *build, fcl_resolved **out);
/* A helper kernel of r's program, made once and kept by r: the caller
 * neither retains nor releases it. */
fcl_status fcl_resolved_kernel(fcl_resolved *r, fcl_helper helper, cl_kernel *out);
/* Releases every resolved kernel (context destruction, tuning hooks). */
void fcl_forget_resolved(fcl_context *ctx);
/* Call after a launch failed with `cl_err`: lowers the limits of `r` and
 * re-resolves it in place.  Returns FCL_OK if a smaller plan is ready. */
fcl_status fcl_resolve_after_launch_failure(fcl_context *ctx, fcl_resolved *r, cl_int cl_err);

/* Appends "; fallback: " and `fallback` to the plan's reason (a string of
 * `size` bytes) whole: where both do not fit, the reason's last words give
 * way to " ..." first. */
void fcl_reason_add_fallback(char *reason, size_t size, const char *fallback);

/* ---- kernel arguments and launches (launch.c) ------------------------------ */

typedef struct fcl_args {
    cl_kernel kernel;
    cl_uint index;
    cl_int err;                   /* the first failure, CL_SUCCESS if none */
} fcl_args;

void fcl_arg_mem(fcl_args *a, cl_mem m);
void fcl_arg_int(fcl_args *a, int v);
void fcl_arg_uint(fcl_args *a, uint32_t v);
void fcl_arg_long(fcl_args *a, int64_t v);
void fcl_arg_float(fcl_args *a, float v);
/* offset, stride_batch, stride_head, stride_seq as four longs */
void fcl_arg_layout(fcl_args *a, const fcl_layout *l);

/* Enqueues r's kernel over `groups` work-groups.  A launch refused for
 * resources re-plans smaller and calls `set_args` again before retrying. */
typedef fcl_status (*fcl_set_args_fn)(const fcl_resolved *r, cl_kernel k, const void *user,
                                      size_t *groups);
fcl_status fcl_launch(fcl_context *ctx, fcl_resolved *r, fcl_set_args_fn set_args,
                      const void *user, cl_uint num_wait, const cl_event *wait_list,
                      cl_event *event);

/* ---- compiled programs on disk (disk_cache.c) ------------------------------ */

/* Chooses the context's cache folder from the options and the environment. */
fcl_status fcl_disk_cache_setup(fcl_context *ctx, const fcl_context_options *opts);
/* The built program of (id, options) from disk, or NULL (none, or unusable). */
cl_program fcl_disk_cache_load(fcl_context *ctx, fcl_program_id id, const char *options);
/* Keeps a built program on disk (best effort), then applies the size bound. */
void fcl_disk_cache_store(fcl_context *ctx, fcl_program_id id, const char *options,
                          cl_program prog);
/* The device's probed usable local memory, kept in the cache folder. */
bool fcl_disk_cache_load_probe(const fcl_context *ctx, uint64_t *usable);
void fcl_disk_cache_store_probe(fcl_context *ctx, uint64_t usable);
/* For tests: programs loaded from and stored to disk by this context. */
void fcl_debug_disk_cache_counts(const fcl_context *ctx, unsigned *loads, unsigned *stores);

/* ---- devices that end long loops (loop_limit.c) ----------------------------- */

/* Sets ctx->loop_limit: the iterations after which the device ends a
 * kernel's loops (Mesa's llvmpipe), measured by a probe; 0 where none. */
fcl_status fcl_probe_loop_limit(fcl_context *ctx);
/* The most keys (query rows for dK/dV) one work-group of plan p may walk
 * on this device: UINT64_MAX when there is no limit, 0 when even one tile
 * is too long. */
uint64_t fcl_loop_max_outer(const fcl_context *ctx, const fcl_plan *p);
/* FCL_ERROR_DEVICE_LOOP_LIMIT if a work-group of plan p walking `outer`
 * keys (query rows for dK/dV) would outrun the device's loop limit. */
fcl_status fcl_loop_check(const fcl_context *ctx, const fcl_plan *p, size_t outer);
/* FCL_ERROR_DEVICE_LOOP_LIMIT if the KV-cache call's loops beside the key
 * tiles would: the page check (every work-group of the forward, plan p,
 * and the append's) and the append step's rows (kvcache.cl: `append_parts`
 * work-groups of `append_wg` work-items a sequence). */
fcl_status fcl_loop_check_kvcache(const fcl_context *ctx, const fcl_kvcache_desc *d,
                                  const fcl_plan *p, size_t append_wg, size_t append_parts);

#endif /* FCL_PROGRAMS_H */
