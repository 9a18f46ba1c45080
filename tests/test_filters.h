/* test_filters.h - which of a cmocka program's tests run, from the
 * environment: FCL_TEST_FILTER only those whose names match it,
 * FCL_TEST_SKIP not those (cmocka's patterns: * and ?).  Include after
 * cmocka.h and call before the groups run.  (Not in test_support.c: some
 * programs linking that run without cmocka.) */
#ifndef FCL_TEST_FILTERS_H
#define FCL_TEST_FILTERS_H

#include <stdlib.h>

static inline void fa_test_filters(void)
{
    const char *filter = getenv("FCL_TEST_FILTER"), *skip = getenv("FCL_TEST_SKIP");
    if (filter != NULL)
        cmocka_set_test_filter(filter);
    if (skip != NULL)
        cmocka_set_skip_filter(skip);
}

#endif
