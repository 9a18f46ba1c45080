/* fp8_codec.h - FP8 E4M3 (OCP E4M3FN) and E5M2 on the host, written apart
 * from the kernels' decoder (cl/common.cl): the tests' references decode the
 * same bytes with this one, and test_fp8.c checks it against known values.
 * The formats are as flashcl.h's fcl_dtype states them. */
#ifndef FCL_TEST_FP8_CODEC_H
#define FCL_TEST_FP8_CODEC_H

#include "flashcl.h"

#include <stdint.h>

/* The value byte x stands for (NaN, or +-infinity for E5M2). */
double fp8_decode(uint8_t x, fcl_dtype dtype);

/* The byte nearest to x (ties to the even code), saturating: a finite x
 * beyond the largest finite value (448 or 57344) gives that value with x's
 * sign, as FlashAttention-3's scaled quantisation does; +-infinity gives
 * infinity in E5M2 and the largest finite value in E4M3 (which has none);
 * NaN gives 0x7F. */
uint8_t fp8_encode(double x, fcl_dtype dtype);

/* The largest finite value: 448 (E4M3) or 57344 (E5M2). */
double fp8_max(fcl_dtype dtype);

#endif
