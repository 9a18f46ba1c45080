/* fp8_codec.c - see fp8_codec.h.  Decoding reads the three fields and
 * scales with ldexp (the kernels move the fields into a float's instead);
 * encoding searches the ordered positive codes. */
#include "fp8_codec.h"

#include <math.h>

static int mantissa_bits(fcl_dtype dtype) { return dtype == FCL_DTYPE_FP8_E4M3 ? 3 : 2; }
static int exponent_bias(fcl_dtype dtype) { return dtype == FCL_DTYPE_FP8_E4M3 ? 7 : 15; }

/* The largest finite positive code: 0 1111 110 and 0 11110 11. */
static uint8_t max_code(fcl_dtype dtype) { return dtype == FCL_DTYPE_FP8_E4M3 ? 0x7E : 0x7B; }

double fp8_decode(uint8_t x, fcl_dtype dtype)
{
    const int mb = mantissa_bits(dtype), bias = exponent_bias(dtype);
    const int e = (x & 0x7F) >> mb, m = x & ((1 << mb) - 1);
    const double sign = (x & 0x80) ? -1.0 : 1.0;
    if (dtype == FCL_DTYPE_FP8_E4M3 && (x & 0x7F) == 0x7F)
        return NAN;
    if (dtype == FCL_DTYPE_FP8_E5M2 && e == 31)
        return m == 0 ? sign * INFINITY : NAN;
    if (e == 0)
        return sign * ldexp((double)m, 1 - bias - mb);
    return sign * ldexp((double)((1 << mb) + m), e - bias - mb);
}

double fp8_max(fcl_dtype dtype) { return fp8_decode(max_code(dtype), dtype); }

uint8_t fp8_encode(double x, fcl_dtype dtype)
{
    if (isnan(x))
        return 0x7F;
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    const double a = fabs(x);
    if (isinf(a) && dtype == FCL_DTYPE_FP8_E5M2)
        return sign | 0x7C;
    const uint8_t top = max_code(dtype);
    if (a >= fp8_max(dtype))
        return sign | top;
    /* positive codes 0 .. top increase with their value: the last one not
     * above a, then the nearer of it and the next */
    int lo = 0, hi = top;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (fp8_decode((uint8_t)mid, dtype) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    const double below = fp8_decode((uint8_t)lo, dtype), above = fp8_decode((uint8_t)(lo + 1), dtype);
    int code = lo;
    if (a - below > above - a || (a - below == above - a && (lo & 1)))
        code = lo + 1;
    return sign | (uint8_t)code;
}
