/* internal.h - what the library's source files share and users never see. */
#ifndef FCL_INTERNAL_H
#define FCL_INTERNAL_H

#include "flashcl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How many fcl_kernel_kind values exist. */
enum { FCL_KERNEL_KINDS = 4 };

/* Shorthand for "evaluate, and return the status if it is not FCL_OK". */
#define FCL_TRY(expr)                       \
    do {                                    \
        fcl_status fcl_try_st_ = (expr);    \
        if (fcl_try_st_ != FCL_OK)          \
            return fcl_try_st_;             \
    } while (0)

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

/* ---- the tuned table (plan_table.c) --------------------------------------- */

typedef struct fcl_tuned_tile {
    int rows, cols, ty, tx;
    const char *entry;           /* which entry matched, for the plan's report */
} fcl_tuned_tile;

/* Which tile piece a table entry is for: the portable one (cl/tile_portable.cl)
 * or the CPU one (cl/tile_cpu.cl, one work-item a group).  The tensor-core
 * piece sizes its tiles in plan_mma.c. */
typedef enum fcl_piece { FCL_PIECE_PORTABLE, FCL_PIECE_CPU } fcl_piece;

bool fcl_tuned_lookup(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                      fcl_piece piece, fcl_tuned_tile *out);

/* ---- plans (plan.c: pure C, no OpenCL) ------------------------------------ */

/* The plan plus the thread layout the kernel is compiled with.  The S tile
 * of a kernel has rows = ty * rm and cols = tx * rn: (Br, Bc) for the forward
 * and dQ kernels, (Bc, Br) for dK/dV, which walks keys by rows. */
typedef struct fcl_plan_full {
    fcl_plan pub;
    int ty, tx, rm, rn;
    int d_pad;
    int force_unroll;             /* GPUs: unroll register-array loops */
    int tile_mma;                 /* the tensor-core piece (tile_nv_mma.cl) */
    int mma_emulated;             /* ... on emulated warp operations (tests) */
    int tile_cpu;                 /* the CPU piece (tile_cpu.cl): tile rows per vector, else 0 */
} fcl_plan_full;

/* Limits a plan must respect beyond the caps: lowered after a build or
 * launch shows the device cannot take a plan (resource fallback). */
typedef struct fcl_plan_limits {
    uint64_t local_bytes;
    size_t work_group_size;
} fcl_plan_limits;

/* `target` NULL: look the target tile up in the tuned table. */
fcl_status fcl_plan_make(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                         fcl_dtype dtype, const fcl_plan_limits *limits,
                         const fcl_tuned_tile *target, fcl_plan_full *out);
/* The fields of a plan every planner fills alike: the problem, the on-chip
 * memory (reported, and `usable_bytes`, what the tiles were sized for) and
 * the paper's rule with M counted in tile elements of `tile_elem_bytes`. */
void fcl_plan_describe(fcl_plan *pub, const fcl_caps *caps, fcl_kernel_kind kind,
                       fcl_dtype dtype, size_t head_dim, size_t head_dim_padded,
                       uint64_t usable_bytes, unsigned tile_elem_bytes);
/* The caps' local memory and work-group size, lowered by `limits`. */
void fcl_plan_effective_limits(const fcl_caps *caps, const fcl_plan_limits *limits,
                               uint64_t *local_bytes, size_t *work_group_size);
/* A kernel on the tensor-core pieces (plan_mma.c, cl/tile_nv_mma.cl).
 * `target` (forced by a tuning tool): rows x cols of the S tile as for
 * fcl_plan_make, ty = warps.  `emulated`: the warp operations of
 * cl/warp_emulated.cl (tests on any device). */
/* The largest head_dim the tensor-core kernels take: 256 for each (dK/dV
 * above 128 as two launches, see fcl_mma_dkdv_split). */
int fcl_mma_max_head_dim(void);
/* Whether the tensor-core dK/dV of this head_dim runs as two launches, dV
 * and then dK (FCL_BUILD_DV_ONLY / FCL_BUILD_DK_ONLY): one d-wide
 * accumulator per lane each, as the other kernels have. */
bool fcl_mma_dkdv_split(size_t head_dim);
fcl_status fcl_plan_make_mma(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                             fcl_dtype dtype, const fcl_plan_limits *limits,
                             const fcl_tuned_tile *target, int emulated, fcl_plan_full *out);
uint64_t fcl_plan_local_bytes(fcl_kernel_kind kind, int rows, int cols, int d_pad, int tx);

/* Decode plans (FCL_KERNEL_DECODE) are forward plans for at most this many
 * (packed) query rows per block. */
#define FCL_DECODE_MAX_ROWS 64
struct fcl_build;
/* The target tile of a decode plan: the table's (or 16-row warps on tensor
 * cores), with no more rows than build->rows rounded up to a power of two. */
fcl_status fcl_decode_target(const fcl_caps *caps, const struct fcl_build *build,
                             fcl_piece piece, fcl_tuned_tile *out);

/* The CPU piece (plan_cpu.c, cl/tile_cpu.cl; every kernel has its CPU
 * code): its rows per vector on this device (the SIMD width in floats, 8 or
 * 16), or 0 where it does not run (not a CPU, or another SIMD width). */
int fcl_cpu_piece_width(const fcl_caps *caps);
/* `target` NULL: the table's CPU-piece entry.  A forced target must have
 * ty = tx = 1 (one work-item a group). */
fcl_status fcl_plan_make_cpu(const fcl_caps *caps, fcl_kernel_kind kind, size_t head_dim,
                             fcl_dtype dtype, const fcl_plan_limits *limits,
                             const fcl_tuned_tile *target, fcl_plan_full *out);

/* ---- the context ---------------------------------------------------------- */

typedef struct fcl_program_entry {
    char *key;                    /* program name + build options */
    cl_program program;
} fcl_program_entry;

/* What a kernel is built for: the resolved-kernel cache's key. */
typedef struct fcl_build {
    fcl_kernel_kind kind;
    size_t head_dim;
    fcl_dtype dtype;              /* of Q, K, V (FCL_DTYPE) */
    fcl_dtype out_dtype;          /* of O (FCL_OUT_DTYPE): dtype but for FP8 forwards */
    unsigned features;            /* FCL_FEAT_* and FCL_BUILD_* bits compiled in */
    int pack;                     /* FCL_PACK: query heads packed per row block (forward), else 1 */
    int page_size;                /* FCL_PAGE_SIZE: keys per K/V page, 0 for strided K/V */
    int rows;                     /* decode plans: (packed) rows to plan for; 0 otherwise */
} fcl_build;

/* A plain build of `kind`: no packing, no pages. */
fcl_build fcl_build_of(fcl_kernel_kind kind, size_t head_dim, fcl_dtype dtype, unsigned features);

/* The other kernels of a resolved plan's program, each launched beside
 * its main kernel. */
typedef enum fcl_helper {
    FCL_HELPER_COMBINE,           /* split-KV merge (combine.cl) */
    FCL_HELPER_KVCACHE_APPEND,    /* KV-cache append (kvcache.cl) */
    FCL_HELPER_DELTA,             /* backward's rowsum(dO * O) (flash_bwd.cl) */
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

/* Device scratch the context keeps between calls (workspace.c). */
typedef enum fcl_scratch_slot {
    FCL_SCRATCH_PART_O,           /* split-KV partial outputs, fp32 */
    FCL_SCRATCH_PART_LSE,         /* split-KV partial LSE, fp32 */
    FCL_SCRATCH_COUNT
} fcl_scratch_slot;

typedef struct fcl_scratch {
    cl_mem mem;
    size_t bytes;
} fcl_scratch;

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
    char *cache_dir;              /* NULL: no disk cache */
    fcl_program_entry *programs;
    size_t num_programs;
    fcl_resolved **resolved;      /* heap entries: pointers stay valid */
    size_t num_resolved;
    char *build_log;
    fcl_memory_stats mem;
    fcl_scratch scratch[FCL_SCRATCH_COUNT];
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

/* ---- tuning hooks (debug.c): not part of the public API ------------------- */

/* Forces the target tile of `kind` (rows x cols of the S tile, ty x tx
 * work-items) for later calls, dropping kernels resolved before; rows 0
 * returns `kind` to the tuned table. */
fcl_status fcl_debug_set_tile(fcl_context *ctx, fcl_kernel_kind kind, int rows, int cols, int ty,
                              int tx);
/* Tests: plan and build the tensor-core pieces on any device, with the
 * warp operations emulated in OpenCL C (cl/warp_emulated.cl), wherever the
 * real ones would be used on an NVIDIA sm_80+ device; 0 turns it off. */
fcl_status fcl_debug_emulate_tensor_cores(fcl_context *ctx, int on);
/* Tests: plans and checks later kernels as if the device had at most
 * `bytes` of local memory (reported and usable; a 16..64 KiB device on any
 * real one); 0 gives back the device's (or profile's) own. */
fcl_status fcl_debug_limit_local_mem(fcl_context *ctx, uint64_t bytes);
/* Appends options to every later build (e.g. -cl-nv-verbose). */
fcl_status fcl_debug_set_build_options(fcl_context *ctx, const char *options);
/* The build log of the program behind the kernel `kind` of a call of
 * `desc` (without variants). */
fcl_status fcl_debug_kernel_log(fcl_context *ctx, const fcl_attention_desc *desc,
                                fcl_kernel_kind kind, char *log, size_t size);

/* ---- device probing (device_probe.c, local_mem_probe.c) ------------------- */

fcl_status fcl_probe_device(cl_device_id device, fcl_device_info *info, char **extensions);
fcl_caps fcl_caps_from_info(const fcl_device_info *info);
/* Finds the largest compile-time __local array a work-group can use. */
fcl_status fcl_probe_local_mem(cl_device_id device, uint64_t reported, uint64_t *usable);

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

/* ---- device selection (device_select.c) ----------------------------------- */

fcl_status fcl_select_device(int platform_index, int device_index, cl_device_id *device);

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

/* ---- validation (validate.c) ---------------------------------------------- */

typedef struct fcl_tensor_ref {
    cl_mem mem;                   /* the cl_mem calls' buffer, else NULL */
    const void *host;             /* the host-pointer calls' array, else NULL */
    fcl_layout layout;
    size_t batch, heads, seqlen, head_dim;
    size_t elem_size;
    int is_output;
} fcl_tensor_ref;

fcl_tensor_ref fcl_tensor_ref_make(cl_mem mem, fcl_layout layout, size_t batch,
                                   size_t heads, size_t seqlen, size_t head_dim,
                                   size_t elem_size, int is_output);
/* The tensors of a forward call (q, k, v, o, lse) and of a backward call
 * (q, k, v, o, lse, dout, dq, dk, dv), shaped as desc says (packed
 * sequences as one batch entry of total rows); lse_is_output for the forward. */
enum { FCL_FORWARD_TENSORS = 5, FCL_BACKWARD_TENSORS = 9 };
void fcl_forward_tensors(const fcl_attention_desc *d, const cl_mem mem[FCL_FORWARD_TENSORS],
                         fcl_tensor_ref t[FCL_FORWARD_TENSORS]);
void fcl_backward_tensors(const fcl_attention_desc *d, const cl_mem mem[FCL_BACKWARD_TENSORS],
                          fcl_tensor_ref t[FCL_BACKWARD_TENSORS]);
fcl_status fcl_validate_desc(const fcl_attention_desc *desc);
/* Everything the forward / backward calls (and their plan queries) check
 * on the descriptor alone, in the calls' order: fcl_validate_desc, for the
 * backward no FP8 dtype, then the variants' settings.  Every call makes
 * these checks before it looks at a buffer or array. */
fcl_status fcl_check_forward_desc(const fcl_attention_desc *desc);
fcl_status fcl_check_backward_desc(const fcl_attention_desc *desc);
/* Bytes from the buffer start to one past the tensor's last element. */
fcl_status fcl_tensor_extent_bytes(const fcl_tensor_ref *t, uint64_t *bytes);
fcl_status fcl_validate_tensors(const fcl_context *ctx, const fcl_tensor_ref *tensors, size_t n);
/* A byte array a call reads (cu_seqlens, a block mask, slopes, cache
 * lengths, a page table), as a tensor of `bytes` one-byte elements. */
fcl_tensor_ref fcl_aux_ref(cl_mem mem, uint64_t bytes);
/* The bytes a tensor touches (footprint.c): rows of `row` bytes at `first`
 * plus up to three nested levels of count[k] copies stride[k] bytes apart. */
typedef struct fcl_footprint {
    uint64_t first;               /* byte address of the first row (in a buffer, or the host's) */
    uint64_t row;
    int levels;
    uint64_t count[3], stride[3]; /* by increasing stride */
} fcl_footprint;
/* t's footprint when its element 0 is at byte `first_byte` (strides must
 * nest: fcl_validate_tensors checks that first). */
fcl_footprint fcl_footprint_of(const fcl_tensor_ref *t, uint64_t first_byte);
/* `bytes` contiguous bytes. */
fcl_footprint fcl_footprint_bytes(uint64_t first_byte, uint64_t bytes);
/* Whether two footprints of one address space share a byte.  Exact, unless
 * they interleave with different strides in more than about a million places:
 * then the test gives up and answers true. */
bool fcl_footprints_meet(const fcl_footprint *a, const fcl_footprint *b);
/* Copies f's bytes from src to dst, both pointing at f's first byte. */
void fcl_footprint_copy(const fcl_footprint *f, unsigned char *dst, const unsigned char *src);
/* No output tensor shares bytes with an aux array (FCL_ERROR_BUFFER_ALIASING):
 * the kernels read those while they write, and check what they read (a
 * page index, a sequence's bounds) before they use it again. */
fcl_status fcl_validate_apart(const fcl_context *ctx, const fcl_tensor_ref *tensors, size_t n,
                              const fcl_tensor_ref *aux, size_t num_aux);
float fcl_effective_scale(const fcl_attention_desc *desc);
/* FCL_DTYPE_FP8_E4M3 or FCL_DTYPE_FP8_E5M2 (forward only, desc.c). */
bool fcl_dtype_is_fp8(fcl_dtype dtype);
/* The out_dtype both descriptor inits set: FP16 for FP8 inputs, else dtype. */
fcl_dtype fcl_default_out_dtype(fcl_dtype dtype);
/* O's storage type: out_dtype for FP8 inputs, else dtype. */
fcl_dtype fcl_output_dtype(const fcl_attention_desc *desc);
/* FCL_ERROR_DTYPE_UNSUPPORTED for an FP8 dtype: calls without FP8 (the
 * backward, the KV-cache call) check it after fcl_validate_desc. */
fcl_status fcl_require_no_fp8(fcl_dtype dtype);

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

/* ---- attention variants (variants.c) -------------------------------------- */

/* Must match cl/common.cl.  FCL_BUILD_TILE_MMA is not a variant: it marks
 * kernels built with the tensor-core piece, in the same build-key word. */
enum {
    FCL_FEAT_SOFTCAP = 1,
    FCL_FEAT_ALIBI = 2,
    FCL_FEAT_DROPOUT = 4,
    FCL_FEAT_VARLEN = 8,
    FCL_FEAT_BLOCKMASK = 16,
    FCL_FEAT_KVCACHE = 32,
    FCL_FEAT_MASK = 0xFF,
    FCL_BUILD_TILE_MMA = 0x100,
    /* dK/dV above head_dim 128 on tensor cores: one output per launch */
    FCL_BUILD_DV_ONLY = 0x200,
    FCL_BUILD_DK_ONLY = 0x400
};

/* Whether kernel `kind` of a call of `desc` runs on the tensor-core pieces
 * (tensor_cores.c). */
bool fcl_uses_tensor_cores(const fcl_context *ctx, const fcl_attention_desc *desc,
                           fcl_kernel_kind kind);

/* A call's variants in kernel form; the trailing kernel arguments. */
typedef struct fcl_variants {
    unsigned features;            /* FCL_FEAT_* bits: part of the kernel build */
    int window_left, window_right;
    int lse_rows;                 /* seqlen_q, or total_q for packed sequences */
    float softcap;
    cl_mem alibi;
    int64_t alibi_stride_batch;
    uint32_t seed_lo, seed_hi, dropout_offset, dropout_threshold;
    float keep_scale;
    cl_mem cu_q, cu_k;
    cl_mem block_mask;
    int64_t block_mask_stride_batch, block_mask_stride_head;
    int block_m, block_n, block_nbn;
    cl_mem descale_q, descale_k, descale_v; /* FP8: per-head descales, NULL = 1.0 */
    /* the longest query and key sequences, which size the launches:
     * seqlen_q and seqlen_k, or for packed sequences the longest ones
     * cu_seqlens hold (a generous stated maximum costs no empty groups) */
    size_t longest_q, longest_k;
    fcl_tensor_ref aux[7];        /* the aux buffers read (slopes, cu_seqlens, block
                                     mask, FP8 descales), for fcl_validate_apart */
    size_t num_aux;
} fcl_variants;

/* The variants' settings alone (windows, softcap, the ALiBi mode, dropout_p,
 * the varlen flag, block sizes): FCL_ERROR_INVALID_VALUE, or
 * FCL_ERROR_INVALID_SHAPE for a block mask past INT64_MAX bytes. */
fcl_status fcl_variants_check_settings(const fcl_attention_desc *desc);
/* The FCL_FEAT_* bits a call of desc compiles in. */
unsigned fcl_variants_features(const fcl_attention_desc *desc);
/* cu_seqlens values: 0 first, never decreasing, no sequence longer than
 * max_len, the last within total (FCL_ERROR_INVALID_CU_SEQLENS); gives the
 * longest sequence. */
fcl_status fcl_check_cu_seqlens_values(const int32_t *cu, size_t batch, size_t max_len,
                                       size_t total, size_t *longest);
/* Checks desc's variants (fcl_variants_check_settings first) and aux's
 * buffers (reading cu_seqlens back after the wait list). */
fcl_status fcl_variants_prepare(fcl_context *ctx, const fcl_attention_desc *desc,
                                const fcl_attention_aux *aux, cl_uint num_wait,
                                const cl_event *wait, fcl_variants *v);
void fcl_arg_variants(fcl_args *a, const fcl_variants *v);
/* Bytes of desc's block mask (block_m, block_n > 0): FCL_ERROR_INVALID_SHAPE
 * past INT64_MAX. */
fcl_status fcl_block_mask_bytes(const fcl_attention_desc *d, uint64_t *bytes);
/* An aux buffer: not NULL, of the context, at least `bytes` large. */
fcl_status fcl_check_aux_buffer(const fcl_context *ctx, cl_mem mem, uint64_t bytes);

/* ---- device memory (memory.c) --------------------------------------------- */

cl_mem fcl_buffer_create(fcl_context *ctx, cl_mem_flags flags, size_t bytes, void *host,
                         fcl_status *status);
/* `bytes`: the size it was created with (NULL is a no-op). */
void fcl_buffer_release(fcl_context *ctx, cl_mem mem, size_t bytes);

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

/* ---- the forward's launches (forward.c) ------------------------------------ */

/* One forward launch: a forward call, or the attention of a KV-cache call
 * (then desc->seqlen_k is the keys a sequence's cache can hold, and the
 * cache fields are set). */
typedef struct fcl_forward_job {
    const fcl_attention_desc *desc;
    const fcl_variants *var;
    cl_mem q, k, v, o, lse;
    int page_size;                /* keys per page; 0: strided K/V */
    cl_mem cache_lens;            /* int32[batch]: KV-cache calls (FCL_FEAT_KVCACHE) */
    cl_mem page_table;            /* int32: paged caches */
    int64_t page_table_stride;
    int seqlen_new;
    int num_pages;                /* paged caches: pages, for the forward's check */
} fcl_forward_job;

/* The most split-KV chunks, forced or automatic (cl/combine.cl's
 * FCL_COMBINE_MAX_SPLITS holds a weight for each). */
#define FCL_MAX_SPLITS 1024

/* Split-KV: num_splits chunks of split_keys keys (0 when not split). */
typedef struct fcl_split {
    int num_splits;
    int split_keys;
} fcl_split;

/* The kernel build of a forward of `d`: a decode plan with GQA packing for
 * few query rows, the forward's otherwise; tensor cores where they apply. */
fcl_build fcl_forward_build(const fcl_context *ctx, const fcl_attention_desc *d,
                            unsigned features, int page_size);
/* The key chunks for `groups` work-groups of plan p over `keys` keys;
 * forced > 0 gives exactly that many. */
fcl_split fcl_forward_splits(const fcl_context *ctx, const fcl_plan *p, size_t groups, size_t keys,
                             int forced);
fcl_status fcl_forward_resolve(fcl_context *ctx, const fcl_forward_job *job, fcl_resolved **out);
/* The public plan of a job: the resolved plan with its packing and chunks. */
fcl_status fcl_forward_plan_of(fcl_context *ctx, const fcl_forward_job *job, fcl_plan *plan);
/* FCL_OK when the device can run the job with r's plan as it would be
 * launched (its key chunks within a loop limit, see loop_limit.c). */
fcl_status fcl_forward_check_launch(fcl_context *ctx, const fcl_forward_job *job,
                                    const fcl_resolved *r);
/* Launches the job (and the merge of its chunks) after `wait`; `event`, if
 * not NULL, receives the completion of the last kernel. */
fcl_status fcl_forward_enqueue(fcl_context *ctx, const fcl_forward_job *job, fcl_resolved *r,
                               const fcl_wait *wait, cl_event *event);

/* ---- the backward's kernels (backward.c) ----------------------------------- */

/* The kernel builds of a backward of `desc` with `features`: each on tensor
 * cores where it can be; there, above head_dim 128, dK/dV is two launches
 * (dV, then dK: dkdv[1] the second). */
typedef struct fcl_backward_builds {
    fcl_build dq;
    fcl_build dkdv[2];
    int dkdv_launches;            /* 1 or 2 */
} fcl_backward_builds;
fcl_backward_builds fcl_backward_builds_of(const fcl_context *ctx, const fcl_attention_desc *desc,
                                           unsigned features);

/* ---- host-pointer calls (host_calls.c) ------------------------------------- */

/* One tensor of a host-pointer call: the byte range [offset, end of its last
 * element) of the caller's array, and the buffer it travels in. */
typedef struct fcl_host_tensor {
    const void *src;              /* host bytes at the tensor's first element */
    void *dst;                    /* where outputs go back; NULL for inputs */
    size_t bytes;
    cl_mem mem;
    fcl_footprint fp;             /* outputs: the bytes written back, from src/dst */
} fcl_host_tensor;

/* Creates a buffer for each h[i] with a source (src and bytes set), copying
 * its bytes in; fcl_host_release releases them (also after a failure). */
fcl_status fcl_host_upload(fcl_context *ctx, fcl_host_tensor *h, size_t n);
void fcl_host_release(fcl_context *ctx, fcl_host_tensor *h, size_t n);
/* Reads the outputs (dst set) of h[0..n) back through one host staging
 * copy: the caller's arrays change only once every read has succeeded, and
 * only in the outputs' footprints (the bytes of their elements), so
 * another tensor between an output's rows (V between K's pages) is never
 * written. */
fcl_status fcl_host_read_outputs(fcl_context *ctx, const fcl_host_tensor *h, size_t n);
/* Describes tensor `t` of host array `base` and re-bases its layout to 0. */
fcl_status fcl_host_range(const fcl_tensor_ref *t, const void *base, fcl_layout *rebased,
                          fcl_host_tensor *h);

/* ---- the KV-cache call (kvcache.c, kvcache_host.c) ------------------------- */

enum { FCL_KVCACHE_TENSORS = 7 };
/* Keys one sequence's cache can hold. */
size_t fcl_kvcache_capacity(const fcl_kvcache_desc *d);
/* Everything the KV-cache call (both forms) and its plan query check on the
 * descriptor alone, before any buffer or array. */
fcl_status fcl_kvcache_check_desc(const fcl_kvcache_desc *d);
fcl_attention_desc fcl_kvcache_as_forward(const fcl_kvcache_desc *d);
/* The call's tensors (q, o, k_cache, v_cache[, k_new, v_new][, lse]), *n of them. */
void fcl_kvcache_tensors(const fcl_kvcache_desc *d, const fcl_kvcache_buffers *b,
                         fcl_tensor_ref t[FCL_KVCACHE_TENSORS], size_t *n);
/* int32 entries the page table must hold. */
uint64_t fcl_kvcache_page_table_entries(const fcl_kvcache_desc *d);
/* The forward job of a KV-cache call (b may be NULL for planning). */
fcl_status fcl_kvcache_job(fcl_context *ctx, const fcl_kvcache_desc *desc,
                           const fcl_kvcache_buffers *b, const fcl_attention_desc *fwd,
                           fcl_variants *var, fcl_forward_job *job);

/* ---- host memory (host_alloc.c): every malloc, calloc and realloc ---------- */

void *fcl_host_malloc(size_t bytes);
void *fcl_host_calloc(size_t count, size_t size);
void *fcl_host_realloc(void *p, size_t bytes);

/* ---- small helpers (util.c) ------------------------------------------------ */

char *fcl_strdup(const char *s);
void fcl_copy_string(char *dst, size_t size, const char *src);
/* Appends printf-style text to a fixed buffer, truncating safely. */
void fcl_appendf(char *dst, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
uint64_t fcl_hash64(uint64_t h, const void *data, size_t n);
/* Adds a * b to *acc; false (and *acc unusable) on overflow of uint64. */
bool fcl_add_product(uint64_t *acc, uint64_t a, uint64_t b);

#endif /* FCL_INTERNAL_H */
