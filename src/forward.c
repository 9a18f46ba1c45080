/* forward.c - validate, plan, bind and launch the forward kernel. */
#include "internal.h"

#include <stddef.h>

typedef struct forward_call {
    const fcl_attention_desc *desc;
    cl_mem q, k, v, o, lse;
} forward_call;

static fcl_status set_forward_args(const fcl_resolved *r, cl_kernel kernel, const void *user,
                                   size_t *groups)
{
    const forward_call *c = user;
    const fcl_attention_desc *d = c->desc;
    const size_t num_bh = d->batch * d->heads_q;
    const size_t num_qb = (d->seqlen_q + r->plan.pub.br - 1) / r->plan.pub.br;
    fcl_args a = {kernel, 0, CL_SUCCESS};
    fcl_arg_mem(&a, c->q);
    fcl_arg_mem(&a, c->k);
    fcl_arg_mem(&a, c->v);
    fcl_arg_mem(&a, c->o);
    fcl_arg_mem(&a, c->lse);
    fcl_arg_layout(&a, &d->q);
    fcl_arg_layout(&a, &d->k);
    fcl_arg_layout(&a, &d->v);
    fcl_arg_layout(&a, &d->o);
    fcl_arg_long(&a, (int64_t)d->lse_offset);
    fcl_arg_int(&a, c->lse != NULL);
    fcl_arg_int(&a, (int)d->seqlen_q);
    fcl_arg_int(&a, (int)d->seqlen_k);
    fcl_arg_int(&a, (int)d->head_dim);
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_int(&a, (int)(d->heads_q / d->heads_kv));
    fcl_arg_int(&a, (int)num_bh);
    fcl_arg_float(&a, fcl_effective_scale(d));
    fcl_arg_int(&a, -1);                 /* window left: unbounded */
    fcl_arg_int(&a, d->causal ? 0 : -1); /* window right: the diagonal when causal */
    *groups = num_qb * num_bh;
    return a.err;
}

fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *desc, cl_mem q,
                                 cl_mem k, cl_mem v, cl_mem o, cl_mem lse, cl_uint num_wait,
                                 const cl_event *wait_list, cl_event *event)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        (num_wait > 0 && wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_validate_desc(desc));
    const size_t es = fcl_dtype_size(desc->dtype);
    const fcl_attention_desc *d = desc;
    fcl_tensor_ref t[5] = {
        fcl_tensor_ref_make("q", q, d->q, d->batch, d->heads_q, d->seqlen_q, d->head_dim, es, 0),
        fcl_tensor_ref_make("k", k, d->k, d->batch, d->heads_kv, d->seqlen_k, d->head_dim, es, 0),
        fcl_tensor_ref_make("v", v, d->v, d->batch, d->heads_kv, d->seqlen_k, d->head_dim, es, 0),
        fcl_tensor_ref_make("o", o, d->o, d->batch, d->heads_q, d->seqlen_q, d->head_dim, es, 1),
        fcl_lse_ref(d, lse, 1),
    };
    FCL_TRY(fcl_validate_tensors(ctx, t, lse != NULL ? 5 : 4));

    fcl_resolved *r = NULL;
    FCL_TRY(fcl_resolve(ctx, FCL_KERNEL_FORWARD, d->head_dim, d->dtype, &r));
    forward_call call = {desc, q, k, v, o, lse};
    return fcl_launch(ctx, r, set_forward_args, &call, num_wait, wait_list, event);
}
