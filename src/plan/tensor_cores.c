/* tensor_cores.c - when a call runs on the tensor-core pieces, and when
 * the forward (or the backward) runs on the wgmma piece. */
#include "device/context.h"
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

/* The pieces load rows 8 elements at a time (16 bytes, 8 for FP8): every
 * row they read must start on a multiple of 8 elements (cl_mem buffers
 * themselves are aligned). */
static bool rows_aligned(const fcl_layout *l)
{
    return l->offset % 8 == 0 && l->stride_batch % 8 == 0 && l->stride_head % 8 == 0 &&
           l->stride_seq % 8 == 0;
}

/* Whether the pieces' smallest tiles of `kind` fit the device's local
 * memory: every NVIDIA GPU with tensor cores has room for them (99 KiB or
 * more), a device made smaller for tests (fcl_debug_limit_local_mem) may
 * not, and then runs the portable piece.  Decode plans are smaller than
 * the forward's, which stands in for them. */
static bool tiles_fit(const fcl_context *ctx, fcl_kernel_kind kind, size_t head_dim,
                      fcl_dtype dtype)
{
    fcl_plan_full p;
    const fcl_kernel_kind k = kind == FCL_KERNEL_DECODE ? FCL_KERNEL_FORWARD : kind;
    return fcl_plan_make_mma(&ctx->caps, k, head_dim, dtype, false, NULL, NULL,
                             ctx->emulate_tensor_cores, &p) == FCL_OK;
}

bool fcl_uses_tensor_cores(const fcl_context *ctx, const fcl_attention_desc *d,
                           fcl_kernel_kind kind)
{
    const bool backward = kind != FCL_KERNEL_FORWARD;
    /* The real device decides: an emulated profile plans the portable path.
     * The test mode stands in for the device. */
    const fcl_device_info *in = &ctx->info;
    const bool device = ctx->emulate_tensor_cores ||
                        (ctx->profile == NULL && in->vendor_id == FCL_VENDOR_ID_NVIDIA &&
                         in->nv_compute_capability >= 80);
    /* FP8 (forward only) is decoded to fp16 as its tiles are loaded: exact
     * for both formats, so the fp16 products serve it unchanged */
    const bool dtype_ok = d->dtype == FCL_DTYPE_FP16 || d->dtype == FCL_DTYPE_BF16 ||
                          (!backward && fcl_dtype_is_fp8(d->dtype));
    /* V's tile is held at head_dim's width, loaded 8 columns at a time up
     * to head_dim_v */
    return !ctx->portable_only && device && dtype_ok && d->head_dim % 16 == 0 &&
           fcl_head_dim_v(d) % 16 == 0 &&
           d->head_dim <= (size_t)fcl_mma_max_head_dim(kind) && rows_aligned(&d->q) &&
           rows_aligned(&d->k) && rows_aligned(&d->v) && (!backward || rows_aligned(&d->dout)) &&
           tiles_fit(ctx, kind, d->head_dim, d->dtype);
}

/* Whether a tensor map can describe the rows of l as the wgmma forward
 * reads them: a row stride of at least 16 bytes (the alignment, already
 * asked of every tensor-core load) and below 2^40 bytes. */
static bool map_rows_ok(const fcl_layout *l)
{
    return l->stride_seq >= 8 && l->stride_seq < ((size_t)1 << 39);
}

/* Whether the context can make tensor maps: its template from the driver,
 * or the emulation's own maps */
static bool maps_available(const fcl_context *ctx)
{
    return ctx->emulate_tensor_cores || ctx->has_map_template;
}

bool fcl_wgmma_tma_allowed(fcl_kernel_kind kind)
{
    return kind == FCL_KERNEL_FORWARD || kind == FCL_KERNEL_BACKWARD_DKDV ||
           kind == FCL_KERNEL_BACKWARD_DQ;
}

/* Whether FLASHCL_WGMMA_BACKWARD_TMA is `value` (read at each call) */
static bool backward_tma_env_is(const char *value)
{
    const char *env = getenv("FLASHCL_WGMMA_BACKWARD_TMA");
    return env != NULL && strcmp(env, value) == 0;
}

bool fcl_uses_wgmma_backward_tma(const fcl_context *ctx, const fcl_attention_desc *d,
                                 fcl_kernel_kind kind)
{
    if (backward_tma_env_is("0") || !maps_available(ctx))
        return false;
    if (kind == FCL_KERNEL_BACKWARD_DQ)
        return map_rows_ok(&d->k) && map_rows_ok(&d->v);
    return map_rows_ok(&d->q) && map_rows_ok(&d->dout);
}

bool fcl_wgmma_backward_tma_asked(void) { return backward_tma_env_is("1"); }

bool fcl_uses_fp8_products(const fcl_attention_desc *d, unsigned features)
{
    const char *env = getenv("FLASHCL_FP8_PRODUCTS");
    const unsigned need = FCL_BUILD_WGMMA | FCL_BUILD_WG_TMA;
    return env != NULL && strcmp(env, "1") == 0 && (features & need) == need &&
           d->dtype == FCL_DTYPE_FP8_E4M3 && d->head_dim == 128 &&
           !(features & (FCL_FEAT_VARLEN | FCL_FEAT_DROPOUT));
}

bool fcl_uses_wgmma_tma(const fcl_context *ctx, const fcl_attention_desc *d)
{
    const char *env = getenv("FLASHCL_WGMMA_TMA");
    const bool off = env != NULL && strcmp(env, "0") == 0;
    /* FP8's maps describe the widened copies in the workspace, not the
     * caller's rows */
    const bool rows_ok = fcl_dtype_is_fp8(d->dtype) || (map_rows_ok(&d->k) && map_rows_ok(&d->v));
    return !off && maps_available(ctx) && rows_ok;
}

/* Whether the wgmma piece is asked for (1), turned off (0) or left to the
 * default (-1): the tests' hook first (`hook` 1 asks, also on a device the
 * piece is emulated on; -1 turns it off), then the environment variable
 * `name`, read at each call ("1" asks, "0" turns it off; any other value
 * counts as unset). */
static int wgmma_asked(int hook, const char *name)
{
    if (hook != 0)
        return hook > 0;
    const char *env = getenv(name);
    if (env != NULL && strcmp(env, "1") == 0)
        return 1;
    return env != NULL && strcmp(env, "0") == 0 ? 0 : -1;
}

fcl_dq_form fcl_backward_dq_form(void)
{
    const char *env = getenv("FLASHCL_BACKWARD_DQ");
    if (env != NULL && strcmp(env, "ordered") == 0)
        return FCL_DQ_ORDERED;
    if (env != NULL && strcmp(env, "any-order") == 0)
        return FCL_DQ_ANY_ORDER;
    return FCL_DQ_SEPARATE;
}

bool fcl_uses_wgmma(const fcl_context *ctx, const fcl_attention_desc *d, fcl_kernel_kind kind,
                    unsigned features)
{
    const fcl_device_info *in = &ctx->info;
    const bool sm90 = ctx->profile == NULL && in->vendor_id == FCL_VENDOR_ID_NVIDIA &&
                      in->nv_compute_capability == 90;
    const bool device = ctx->emulate_tensor_cores || sm90;
    bool wanted;
    if (kind == FCL_KERNEL_FORWARD) {
        /* The default, on a real sm_90 device: there the piece measured
         * 1.6-1.8x the mma.sync piece on an H100 at head_dim 128,
         * 1.08-1.45x at 64 (NOTES.md, run 39), and FP8 storage's forward
         * 1.42-2.82x on an H200 (run 41). */
        const int asked = wgmma_asked(ctx->use_wgmma, "FLASHCL_WGMMA");
        wanted = asked == 1 || (asked < 0 && sm90);
    } else if (kind == FCL_KERNEL_BACKWARD_DKDV || kind == FCL_KERNEL_BACKWARD_DQ) {
        /* The default on a real sm_90 device too: there both kernels
         * measured 1.0-1.4x the mma.sync pieces on an H100 (NOTES.md, run
         * 40). */
        const int asked = wgmma_asked(ctx->use_wgmma_backward, "FLASHCL_WGMMA_BACKWARD");
        wanted = asked == 1 || (asked < 0 && sm90);
    } else {
        return false;
    }
    /* FP8 storage: the forward only (the backward takes none), its K and V
     * widened to fp16 before the forward where the accelerator brings them
     * in (forward.c), else decoded to fp16 on chip (tile_nv_wgmma.cl) */
    const bool dtype_ok = d->dtype == FCL_DTYPE_FP16 || d->dtype == FCL_DTYPE_BF16 ||
                          (kind == FCL_KERNEL_FORWARD && fcl_dtype_is_fp8(d->dtype));
    return wanted && device && (features & FCL_BUILD_TILE_MMA) &&
           !(features & FCL_FEAT_KVCACHE) && dtype_ok &&
           (d->head_dim == 64 || d->head_dim == 128);
}
