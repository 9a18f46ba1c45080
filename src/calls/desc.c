/* desc.c - describing a problem: layouts and the descriptor's defaults
 * (the dtypes: support/dtypes.c). */
#include "calls/calls.h"

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
    desc->head_dim_v = head_dim;
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
