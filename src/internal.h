/* internal.h - every internal header of the library, for the tests, tools
 * and benchmarks that reach past the public API.  The library's own files
 * include only their folder's header (and the ones below it). */
#ifndef FCL_INTERNAL_H
#define FCL_INTERNAL_H

#include "calls/calls.h"
#include "decode/decode.h"
#include "device/context.h"
#include "device/device.h"
#include "plan/plan.h"
#include "programs/programs.h"
#include "debug/debug.h"
#include "support/support.h"

#endif /* FCL_INTERNAL_H */
