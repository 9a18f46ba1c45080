/* plan_query.c - fcl_plan_query: the plan a forward or backward call would
 * launch, after the same descriptor checks as the call (the checks that need
 * no buffer: a query and its call return the same status for any
 * descriptor). */
#include "calls/calls.h"

fcl_status fcl_plan_query(fcl_context *ctx, const fcl_attention_desc *desc, fcl_kernel_kind kernel,
                          fcl_plan *plan)
{
    if (ctx == NULL || desc == NULL || plan == NULL)
        return FCL_ERROR_NULL_ARGUMENT;
    if ((int)kernel < 0 || (int)kernel >= FCL_KERNEL_KINDS)
        return FCL_ERROR_INVALID_VALUE;
    const bool forward = kernel == FCL_KERNEL_FORWARD || kernel == FCL_KERNEL_DECODE;
    FCL_TRY(forward ? fcl_check_forward_desc(desc) : fcl_check_backward_desc(desc));
    const unsigned features = fcl_variants_features(desc);
    if (forward) {
        /* the variants in kernel form, without their buffers: only the
         * features and the stated lengths matter to the plan */
        fcl_variants var = {.features = features,
                            .longest_q = desc->seqlen_q,
                            .longest_k = desc->seqlen_k};
        const fcl_forward_job job = {.desc = desc, .var = &var};
        return fcl_forward_plan_of(ctx, &job, plan);
    }
    const fcl_backward_builds bb = fcl_backward_builds_of(ctx, desc, features);
    fcl_resolved *r = NULL;
    const bool dq = kernel == FCL_KERNEL_BACKWARD_DQ;
    FCL_TRY(fcl_resolve(ctx, dq ? &bb.dq : &bb.dkdv[0], &r));
    /* as the call (loop_limit.c) */
    FCL_TRY(fcl_loop_check(ctx, &r->plan.pub, fcl_backward_loop_outer(desc, kernel)));
    *plan = r->plan.pub;
    plan->pack = 1;
    plan->num_splits = 1;
    plan->split_keys = 0;
    return FCL_OK;
}
