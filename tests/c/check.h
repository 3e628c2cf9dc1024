/* A tiny test harness for the C tests of kvidx: CHECK macros, named tests, a summary line. */
#ifndef KVIDX_TEST_CHECK_H
#define KVIDX_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int checks_failed_in_test;
static int tests_passed;
static int tests_failed;

/* Records a failure (with its location) without stopping the test. */
#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            checks_failed_in_test++;                                               \
        }                                                                          \
    } while (0)

/* Compares two integers (printed as unsigned long long). */
#define CHECK_EQ(actual, expected)                                                   \
    do {                                                                             \
        unsigned long long a_ = (unsigned long long)(actual);                        \
        unsigned long long e_ = (unsigned long long)(expected);                      \
        if (a_ != e_) {                                                              \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s is %llu, expected %s (%llu)\n", \
                    __FILE__, __LINE__, #actual, a_, #expected, e_);                 \
            checks_failed_in_test++;                                                 \
        }                                                                            \
    } while (0)

/* Stops the whole program: for setup steps the rest of a test cannot do without. */
#define REQUIRE(cond)                                                                \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

/* Runs one test function and records whether all its checks held. */
#define RUN(test)                                                      \
    do {                                                               \
        checks_failed_in_test = 0;                                     \
        test();                                                        \
        if (checks_failed_in_test == 0) {                              \
            tests_passed++;                                            \
            printf("ok     %s\n", #test);                              \
        } else {                                                       \
            tests_failed++;                                            \
            printf("FAILED %s (%d checks)\n", #test, checks_failed_in_test); \
        }                                                              \
        fflush(stdout);                                                \
    } while (0)

/* Prints the summary line and returns the process exit code. */
static int finish(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, tests_passed, tests_failed);
    return tests_failed == 0 ? 0 : 1;
}

#endif
