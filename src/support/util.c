/* util.c - small string and hashing helpers shared by the library. */
#include "support/support.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *fcl_strdup(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = fcl_host_malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void fcl_copy_string(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return;
    if (src == NULL)
        src = "";
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void fcl_appendf(char *dst, size_t size, const char *fmt, ...)
{
    size_t used = 0;
    while (used < size && dst[used] != '\0')
        ++used;
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + used, size - used, fmt, ap);
    va_end(ap);
}

bool fcl_add_product(uint64_t *acc, uint64_t a, uint64_t b)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    const uint64_t p = a * b;
    if (*acc > UINT64_MAX - p)
        return false;
    *acc += p;
    return true;
}

/* FNV-1a, 64 bit: stable across runs and machines, for cache file names. */
uint64_t fcl_hash64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (h == 0)
        h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}
