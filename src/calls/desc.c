/* desc.c - describing a problem: dtypes, layouts, the descriptor's defaults. */
#include "internal.h"

#include <math.h>
#include <string.h>

unsigned fcl_version_number(void) { return FCL_VERSION_NUMBER; }

#define FCL_STR2_(x) #x
#define FCL_STR_(x) FCL_STR2_(x)
const char *fcl_version_string(void)
{
    return FCL_STR_(FCL_VERSION_MAJOR) "." FCL_STR_(FCL_VERSION_MINOR) "." FCL_STR_(
        FCL_VERSION_PATCH);
}

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

fcl_layout fcl_layout_contiguous(fcl_layout_kind kind, size_t heads, size_t seqlen,
                                 size_t head_dim)
{
    fcl_layout l;
    l.offset = 0;
    if (kind == FCL_LAYOUT_BHSD) {
        l.stride_seq = head_dim;
        l.stride_head = seqlen * head_dim;
        l.stride_batch = heads * seqlen * head_dim;
    } else {
        l.stride_head = head_dim;
        l.stride_seq = heads * head_dim;
        l.stride_batch = seqlen * heads * head_dim;
    }
    return l;
}

void fcl_attention_desc_init(fcl_attention_desc *desc, size_t batch, size_t heads_q,
                             size_t heads_kv, size_t seqlen_q, size_t seqlen_k, size_t head_dim,
                             fcl_dtype dtype, fcl_layout_kind layout)
{
    if (desc == NULL)
        return;
    memset(desc, 0, sizeof *desc);
    desc->batch = batch;
    desc->heads_q = heads_q;
    desc->heads_kv = heads_kv;
    desc->seqlen_q = seqlen_q;
    desc->seqlen_k = seqlen_k;
    desc->head_dim = head_dim;
    desc->dtype = dtype;
    desc->softmax_scale = 0.0f;
    desc->causal = 0;
    desc->q = desc->o = desc->dout = desc->dq =
        fcl_layout_contiguous(layout, heads_q, seqlen_q, head_dim);
    desc->k = desc->v = desc->dk = desc->dv =
        fcl_layout_contiguous(layout, heads_kv, seqlen_k, head_dim);
    desc->lse_offset = 0;
    desc->window_left = -1;
    desc->window_right = -1;
    desc->alibi = FCL_ALIBI_NONE;
    desc->out_dtype = fcl_default_out_dtype(dtype);
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

float fcl_effective_scale(const fcl_attention_desc *desc)
{
    if (desc->softmax_scale != 0.0f)
        return desc->softmax_scale;
    return (float)(1.0 / sqrt((double)desc->head_dim));
}
