/*
 * The checks of the C tests (api_test.c, misuse_test.c, compat_test.c):
 * each counts into `checks` and `failures`, which the including file
 * defines (plain or _Atomic ints), and reports a failure on stderr with
 * its place, and for a code the cm_strerror() text.
 */
#ifndef CM_TEST_EXPECT_H
#define CM_TEST_EXPECT_H

#include <stdio.h>

#include "cm.h"

#define EXPECT(cond)                                                         \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            failures++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                    \
    } while (0)

#define EXPECT_EQ(a, b)                                                          \
    do {                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                      \
        checks++;                                                                \
        if (a_ != b_) {                                                          \
            failures++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s == %lld, want %lld (%s)\n", __FILE__, \
                    __LINE__, #a, a_, b_, a_ < 0 ? cm_strerror((int)a_) : "");  \
        }                                                                        \
    } while (0)

#define EXPECT_OK(a)                                                               \
    do {                                                                           \
        long long a_ = (long long)(a);                                             \
        checks++;                                                                  \
        if (a_ < 0) {                                                              \
            failures++;                                                            \
            fprintf(stderr, "FAIL %s:%d: %s = %lld (%s)\n", __FILE__, __LINE__, #a, \
                    a_, cm_strerror((int)a_));                                     \
        }                                                                          \
    } while (0)

#endif /* CM_TEST_EXPECT_H */
