/* debug.h - hooks for tests and tuning tools (debug.c): not part of the
 * public API. */
#ifndef FCL_DEBUG_H
#define FCL_DEBUG_H

#include "support/support.h"

/* ---- tuning hooks (debug.c): not part of the public API ------------------- */

/* Forces the target tile of `kind` (rows x cols of the S tile, ty x tx
 * work-items) for later calls, dropping kernels resolved before; rows 0
 * returns `kind` to the tuned table. */
fcl_status fcl_debug_set_tile(fcl_context *ctx, fcl_kernel_kind kind, int rows, int cols, int ty,
                              int tx);
/* The tile forced for `kind` (fcl_debug_set_tile first) splits the
 * tensor-core dK/dV accumulators' columns over `wd` warps (FCL_WD;
 * 1: no split, which above head_dim 128 means two launches). */
fcl_status fcl_debug_set_tile_split(fcl_context *ctx, fcl_kernel_kind kind, int wd);
/* Tests: plan and build the tensor-core pieces on any device, with the
 * warp operations emulated in OpenCL C (cl/warp_emulated.cl), wherever the
 * real ones would be used on an NVIDIA sm_80+ device; 0 turns it off. */
fcl_status fcl_debug_emulate_tensor_cores(fcl_context *ctx, int on);
/* Tests: with `choice` 1 the forward runs on the wgmma piece
 * (cl/tile_nv_wgmma.cl) wherever FLASHCL_WGMMA=1 would put it there
 * (fcl_uses_wgmma: with the tensor cores emulated, on any device); with
 * -1 never (the mma.sync piece where the default would take wgmma, as
 * FLASHCL_WGMMA=0 does, whatever the environment says); 0 leaves it to
 * the environment and the default (head_dim 64 and 128 on a real sm_90
 * device).  FCL_ERROR_INVALID_VALUE for any other choice. */
fcl_status fcl_debug_use_wgmma(fcl_context *ctx, int choice);
/* Tests: the same for both backward kernels (FLASHCL_WGMMA_BACKWARD). */
fcl_status fcl_debug_use_wgmma_backward(fcl_context *ctx, int choice);
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
/* Tests: the rotated Q the last KV-cache call with rotary left in the
 * context's workspace, its first `bytes` bytes (batch, seqlen_q, heads_q,
 * head_dim in the storage type); waits for the queue.  FCL_ERROR_INVALID_VALUE
 * when the workspace holds fewer bytes. */
fcl_status fcl_debug_read_rotated_q(fcl_context *ctx, void *out, size_t bytes);

#endif /* FCL_DEBUG_H */
