/* kernel_options.c - a plan as OpenCL build options.  The options string is
 * also the program cache key, so everything that changes the code is here. */
#include "programs/programs.h"

#include <stdio.h>

int fcl_kernel_options(const fcl_plan_full *plan, const fcl_build *build, int pocl_cpu, char *buf,
                       size_t size)
{
    /* by fcl_kernel_kind: decode plans build the forward kernel */
    static const char *const kernel_macro[] = {"FCL_KERNEL_FORWARD", "FCL_KERNEL_DKDV",
                                               "FCL_KERNEL_DQ", "FCL_KERNEL_FORWARD"};
    const unsigned features = build->features;
    return snprintf(buf, size,
                    "-cl-std=CL1.2 -D%s=1 -DFCL_DTYPE=%d -DD_PAD=%d -DBR=%d -DBC=%d -DTY=%d -DTX=%d "
                    "-DFCL_FORCE_UNROLL=%d -DFCL_FEATURES=%u -DFCL_TILE_MMA=%d -DFCL_MMA_EMULATE=%d "
                    "-DFCL_DKDV_PART=%d -DFCL_PACK=%d -DFCL_PAGE_SIZE=%d -DFCL_TILE_CPU=%d "
                    "-DFCL_OUT_DTYPE=%d -DFCL_POCL_CPU=%d -DFCL_FUSED_DQ=%d -DFCL_WD=%d -DFCL_RED_V4=%d "
                    "-DFCL_CVT_FP8=%d -DFCL_WGMMA=%d -DFCL_WG_TMA=%d -DFCL_FP8_PRODUCTS=%d "
                    "-DFCL_WHOLE_KEYS=%d%s",
                    kernel_macro[plan->pub.kernel], (int)plan->pub.dtype, plan->d_pad,
                    (int)plan->pub.br, (int)plan->pub.bc, plan->ty, plan->tx, plan->force_unroll,
                    features & FCL_FEAT_MASK, plan->tile_mma, plan->mma_emulated,
                    features & FCL_BUILD_DV_ONLY ? 1 : features & FCL_BUILD_DK_ONLY ? 2 : 0,
                    build->pack, build->page_size, plan->tile_cpu, (int)build->out_dtype, pocl_cpu,
                    !(features & FCL_BUILD_FUSED_DQ)               ? 0
                    : (features & FCL_BUILD_FUSED_DQ_ANY_ORDER) ? 2
                                                                  : 1,
                    plan->wd > 1 ? plan->wd : 1, plan->red_v4, plan->cvt_fp8, plan->wgmma,
                    plan->wg_tma, (features & FCL_BUILD_FP8_PRODUCTS) != 0,
                    features & FCL_BUILD_WHOLE_TILES ? FCL_WHOLE_TILE_KEYS : 0,
                    /* wgmma needs the sm_90a step (ptx_rewrite.c) */
                    plan->wgmma && !plan->mma_emulated ? " " FCL_SM90A_OPTION : "");
}
