/* build_bits.h - the build bits (fcl_build.features: plan.h's FCL_BUILD_*)
 * the library gives the kernels of a call, for the tests of its build
 * rules (test_wgmma, test_tensor_cores). */
#ifndef FLASHCL_TESTS_BUILD_BITS_H
#define FLASHCL_TESTS_BUILD_BITS_H

#include "internal.h"

/* bits[0], [1], [2]: those of call d's forward, dQ and dK/dV (its first
 * launch), as the calls and their plan queries ask for them. */
static inline void fa_build_bits(const fcl_context *ctx, const fcl_attention_desc *d,
                                 unsigned bits[3])
{
    const unsigned features = fcl_variants_features(d);
    bits[0] = fcl_forward_build(ctx, d, features, 0).features;
    const fcl_backward_builds bb = fcl_backward_builds_of(ctx, d, features);
    bits[1] = bb.dq.features;
    bits[2] = bb.dkdv[0].features;
}

#endif
