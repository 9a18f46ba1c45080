/* forward.c - validate, plan, bind and launch the forward kernel. */
#include "internal.h"

#include <stddef.h>

typedef struct forward_call {
    const fcl_attention_desc *desc;
    const fcl_variants *var;
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
    fcl_arg_int(&a, c->var->lse_rows);
    fcl_arg_int(&a, c->lse != NULL);
    fcl_arg_int(&a, (int)d->seqlen_q);
    fcl_arg_int(&a, (int)d->seqlen_k);
    fcl_arg_int(&a, (int)d->head_dim);
    fcl_arg_int(&a, (int)d->heads_q);
    fcl_arg_int(&a, (int)(d->heads_q / d->heads_kv));
    fcl_arg_int(&a, (int)num_bh);
    fcl_arg_float(&a, fcl_effective_scale(d));
    fcl_arg_int(&a, c->var->window_left);
    fcl_arg_int(&a, c->var->window_right);
    fcl_arg_variants(&a, c->var);
    *groups = num_qb * num_bh;
    return a.err;
}

fcl_status fcl_attention_forward_ex(fcl_context *ctx, const fcl_attention_desc *desc,
                                    const fcl_attention_aux *aux, cl_mem q, cl_mem k, cl_mem v,
                                    cl_mem o, cl_mem lse, cl_uint num_wait,
                                    const cl_event *wait_list, cl_event *event)
{
    if (ctx == NULL || desc == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        (num_wait > 0 && wait_list == NULL))
        return FCL_ERROR_NULL_ARGUMENT;
    FCL_TRY(fcl_validate_desc(desc));
    const cl_mem mem[FCL_FORWARD_TENSORS] = {q, k, v, o, lse};
    fcl_tensor_ref t[FCL_FORWARD_TENSORS];
    fcl_forward_tensors(desc, mem, t);
    FCL_TRY(fcl_validate_tensors(ctx, t, lse != NULL ? 5 : 4));
    fcl_variants var;
    FCL_TRY(fcl_variants_prepare(ctx, desc, aux, num_wait, wait_list, &var));

    const unsigned build = var.features | (fcl_uses_tensor_cores(ctx, desc, FCL_KERNEL_FORWARD) ? FCL_BUILD_TILE_MMA : 0);
    fcl_resolved *r = NULL;
    FCL_TRY(fcl_resolve(ctx, FCL_KERNEL_FORWARD, desc->head_dim, desc->dtype, build, &r));
    forward_call call = {desc, &var, q, k, v, o, lse};
    return fcl_launch(ctx, r, set_forward_args, &call, num_wait, wait_list, event);
}

fcl_status fcl_attention_forward(fcl_context *ctx, const fcl_attention_desc *desc, cl_mem q,
                                 cl_mem k, cl_mem v, cl_mem o, cl_mem lse, cl_uint num_wait,
                                 const cl_event *wait_list, cl_event *event)
{
    return fcl_attention_forward_ex(ctx, desc, NULL, q, k, v, o, lse, num_wait, wait_list, event);
}
