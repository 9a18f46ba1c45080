/* host_alloc.c - every host allocation the library makes goes through these
 * three functions, so that one place can make them fail: the fault-injection
 * test (tests/test_faults.c) links the static library with
 * -Wl,--wrap=fcl_host_malloc,... and fails the n-th one.  They live in a file
 * of their own because the linker redirects only calls from other object
 * files; the library itself pays one plain call and keeps no state. */
#include "support/support.h"

#include <stdlib.h>

void *fcl_host_malloc(size_t bytes) { return malloc(bytes); }

void *fcl_host_calloc(size_t count, size_t size) { return calloc(count, size); }

void *fcl_host_realloc(void *p, size_t bytes) { return realloc(p, bytes); }
