/* dtypes.c - the storage types: sizes and names (public), FP8 and the
 * output type of a descriptor, and the effective softmax scale. */
#include "support/support.h"

#include <math.h>

size_t fcl_dtype_size(fcl_dtype dtype)
{
    switch (dtype) {
    case FCL_DTYPE_FP32:
        return 4;
    case FCL_DTYPE_FP16:
    case FCL_DTYPE_BF16:
        return 2;
    case FCL_DTYPE_FP8_E4M3:
    case FCL_DTYPE_FP8_E5M2:
        return 1;
    }
    return 0;
}

const char *fcl_dtype_name(fcl_dtype dtype)
{
    switch (dtype) {
    case FCL_DTYPE_FP32:
        return "fp32";
    case FCL_DTYPE_FP16:
        return "fp16";
    case FCL_DTYPE_BF16:
        return "bf16";
    case FCL_DTYPE_FP8_E4M3:
        return "e4m3";
    case FCL_DTYPE_FP8_E5M2:
        return "e5m2";
    }
    return "unknown";
}

bool fcl_dtype_is_fp8(fcl_dtype dtype)
{
    return dtype == FCL_DTYPE_FP8_E4M3 || dtype == FCL_DTYPE_FP8_E5M2;
}

fcl_status fcl_require_no_fp8(fcl_dtype dtype)
{
    return fcl_dtype_is_fp8(dtype) ? FCL_ERROR_DTYPE_UNSUPPORTED : FCL_OK;
}

fcl_dtype fcl_default_out_dtype(fcl_dtype dtype)
{
    return fcl_dtype_is_fp8(dtype) ? FCL_DTYPE_FP16 : dtype;
}

fcl_dtype fcl_output_dtype(const fcl_attention_desc *desc)
{
    return fcl_dtype_is_fp8(desc->dtype) ? desc->out_dtype : desc->dtype;
}

size_t fcl_head_dim_v(const fcl_attention_desc *desc)
{
    return desc->head_dim_v != 0 ? desc->head_dim_v : desc->head_dim;
}

float fcl_effective_scale(const fcl_attention_desc *desc)
{
    if (desc->softmax_scale != 0.0f)
        return desc->softmax_scale;
    return (float)(1.0 / sqrt((double)desc->head_dim));
}
