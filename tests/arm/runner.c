/* The test runner of the aarch64 cross build (criterion/criterion.h here
 * is its shim): runs every registered test in order, or those whose
 * "suite::name" contains argv[1], and exits 1 when any failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "criterion/criterion.h"

#define MAX_TESTS 256

typedef struct arm_test {
    const char *suite, *name;
    arm_test_fn fn;
} arm_test;

/* Registration happens in constructors before main: the one place a
 * table outlives a call (a test program, not the library). */
static arm_test tests[MAX_TESTS];
static int n_tests, failed_checks;
static jmp_buf leave;
static char msg[1024];

void arm_test_register(const char *suite, const char *name, arm_test_fn fn) {
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "runner: more than %d tests; raise MAX_TESTS\n", MAX_TESTS);
        exit(2);
    }
    tests[n_tests++] = (arm_test){suite, name, fn};
}

void arm_test_msg(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
}

void arm_test_fail(const char *file, int line, const char *what, int fatal) {
    fprintf(stderr, "  %s:%d: failed: %s%s%s\n", file, line, what, *msg ? ": " : "", msg);
    failed_checks++;
    if (fatal) longjmp(leave, 1);
}

_Noreturn void arm_test_skip(void) {
    longjmp(leave, 2);
}

/* 0 when the test returned, 1 when a cr_assert ended it, 2 skipped; its
 * own frame, so main's locals are not live across the longjmp. */
static int run_one(arm_test_fn fn) {
    const int how = setjmp(leave);
    if (how == 0) fn();
    return how;
}

int main(int argc, char **argv) {
    int failed = 0, ran = 0, skipped = 0;
    for (int i = 0; i < n_tests; i++) {
        char full[256];
        snprintf(full, sizeof full, "%s::%s", tests[i].suite, tests[i].name);
        if (argc > 1 && !strstr(full, argv[1])) continue;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        const int before = failed_checks;
        const int how = run_one(tests[i].fn);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        const int bad = failed_checks > before;
        ran++;
        skipped += how == 2;
        failed += bad;
        fprintf(stderr, "[%s] %s (%.2f s)\n", bad ? "FAIL" : how == 2 ? "SKIP" : "PASS", full, s);
    }
    fprintf(stderr, "%s: %d tests, %d failed, %d skipped\n", argv[0], ran, failed, skipped);
    return failed ? 1 : 0;
}
