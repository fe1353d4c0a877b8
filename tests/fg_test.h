/* fg_test.h - the checks the C test drivers share.
 *   CHECK(cond, fmt, ...)  where cond is false: "FAIL file:line: cond: "
 *                          and the message on stderr, one more failure
 *                          counted; the test goes on;
 *   MUST(st)               a setup step that must return FG_OK for the test
 *                          to mean anything: else its error message, exit 1.
 * A driver may define, before it includes this file, FG_TEST_PREFIX (the
 * start of its messages, e.g. "fg-rt-test: "; none by default) and
 * FG_TEST_FAILURES (its failure counter; by default `failures`, which it
 * defines). The tests' CMakeLists.txt puts this folder on the include path. */
#ifndef FG_TEST_H
#define FG_TEST_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FG_TEST_PREFIX
#define FG_TEST_PREFIX ""
#endif
#ifndef FG_TEST_FAILURES
#define FG_TEST_FAILURES failures
#endif

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, FG_TEST_PREFIX "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fprintf(stderr, "\n");                                                              \
            FG_TEST_FAILURES++;                                                                 \
        }                                                                                       \
    } while (0)

#define MUST(st)                                                                                \
    do {                                                                                        \
        if ((st) != FG_OK) {                                                                    \
            fprintf(stderr, FG_TEST_PREFIX "FAIL %s:%d: %s\n", __FILE__, __LINE__, fg_err_msg()); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#endif
