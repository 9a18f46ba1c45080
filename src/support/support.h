/* support.h - what every source file of the library shares: the status
 * shorthand, host memory (every allocation goes through host_alloc.c, so
 * tests can fail it) and small helpers.  Each folder of src/ has its own
 * header on top of this one (device.h, plan.h, programs.h, calls.h,
 * decode.h); src/internal.h gathers them for the tests and tools. */
#ifndef FCL_SUPPORT_H
#define FCL_SUPPORT_H

#include "flashcl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How many fcl_kernel_kind values exist. */
enum { FCL_KERNEL_KINDS = 4 };

/* Shorthand for "evaluate, and return the status if it is not FCL_OK". */
#define FCL_TRY(expr)                       \
    do {                                    \
        fcl_status fcl_try_st_ = (expr);    \
        if (fcl_try_st_ != FCL_OK)          \
            return fcl_try_st_;             \
    } while (0)

/* ---- dtypes (dtypes.c) ---------------------------------------------------- */

float fcl_effective_scale(const fcl_attention_desc *desc);
/* The columns of V, O, dO and dV: desc->head_dim_v, or head_dim for 0. */
size_t fcl_head_dim_v(const fcl_attention_desc *desc);
/* FCL_DTYPE_FP8_E4M3 or FCL_DTYPE_FP8_E5M2 (forward only, desc.c). */
bool fcl_dtype_is_fp8(fcl_dtype dtype);
/* The out_dtype both descriptor inits set: FP16 for FP8 inputs, else dtype. */
fcl_dtype fcl_default_out_dtype(fcl_dtype dtype);
/* O's storage type: out_dtype for FP8 inputs, else dtype. */
fcl_dtype fcl_output_dtype(const fcl_attention_desc *desc);
/* FCL_ERROR_DTYPE_UNSUPPORTED for an FP8 dtype: calls without FP8 (the
 * backward, the KV-cache call) check it after fcl_validate_desc. */
fcl_status fcl_require_no_fp8(fcl_dtype dtype);

/* ---- host memory (host_alloc.c): every malloc, calloc and realloc ---------- */

void *fcl_host_malloc(size_t bytes);
void *fcl_host_calloc(size_t count, size_t size);
void *fcl_host_realloc(void *p, size_t bytes);

/* ---- small helpers (util.c) ------------------------------------------------ */

char *fcl_strdup(const char *s);
void fcl_copy_string(char *dst, size_t size, const char *src);
/* Appends printf-style text to a fixed buffer, truncating safely. */
void fcl_appendf(char *dst, size_t size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
uint64_t fcl_hash64(uint64_t h, const void *data, size_t n);
/* Adds a * b to *acc; false (and *acc unusable) on overflow of uint64. */
bool fcl_add_product(uint64_t *acc, uint64_t a, uint64_t b);

#endif /* FCL_SUPPORT_H */
