/* The few Criterion macros the kernel and model tests use, for the aarch64
 * cross build (make test-arm), where Criterion itself is not installed:
 * Debian's arm64 libcriterion-dev cannot sit beside the amd64 one. Tests
 * register by constructor and run one after another in one process
 * (tests/arm/runner.c); a failed cr_assert ends its test by longjmp, a
 * failed cr_expect marks it and goes on. Not a Criterion: no fork, no
 * timeouts, no parameterised tests, no .init/.fini (Test's extra
 * arguments are ignored). */
#ifndef TPS_ARM_CRITERION_SHIM_H
#define TPS_ARM_CRITERION_SHIM_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*arm_test_fn)(void);
void arm_test_register(const char *suite, const char *name, arm_test_fn fn);
/* where a check failed; fatal checks leave the test (noreturn) */
void arm_test_fail(const char *file, int line, const char *what, int fatal);
_Noreturn void arm_test_skip(void);
/* the message of the last failure, as the test formats it ("" when none) */
void arm_test_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define Test(suite, name, ...)                                                                     \
    static void suite##_##name##_impl(void);                                                       \
    __attribute__((constructor)) static void suite##_##name##_reg(void) {                          \
        arm_test_register(#suite, #name, suite##_##name##_impl);                                   \
    }                                                                                              \
    static void suite##_##name##_impl(void)

#define ARM_CHECK_(cond, fatal, what, ...)                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            arm_test_msg("" __VA_ARGS__);                                                          \
            arm_test_fail(__FILE__, __LINE__, what, fatal);                                        \
        }                                                                                          \
    } while (0)

#define cr_assert(c, ...)           ARM_CHECK_((c), 1, #c, __VA_ARGS__)
#define cr_expect(c, ...)           ARM_CHECK_((c), 0, #c, __VA_ARGS__)
#define cr_assert_eq(a, b, ...)     ARM_CHECK_((a) == (b), 1, #a " == " #b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...)     ARM_CHECK_((a) == (b), 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...)    ARM_CHECK_((a) != (b), 1, #a " != " #b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...)    ARM_CHECK_((a) != (b), 0, #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...)     ARM_CHECK_((a) < (b), 1, #a " < " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...)     ARM_CHECK_((a) < (b), 0, #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...)    ARM_CHECK_((a) <= (b), 1, #a " <= " #b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...)    ARM_CHECK_((a) <= (b), 0, #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...)     ARM_CHECK_((a) > (b), 1, #a " > " #b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...)     ARM_CHECK_((a) > (b), 0, #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...)    ARM_CHECK_((a) >= (b), 1, #a " >= " #b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...)    ARM_CHECK_((a) >= (b), 0, #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...)      ARM_CHECK_((p) == NULL, 1, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...)      ARM_CHECK_((p) == NULL, 0, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...)  ARM_CHECK_((p) != NULL, 1, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...)  ARM_CHECK_((p) != NULL, 0, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) ARM_CHECK_(!strcmp((a), (b)), 1, #a " eq " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) ARM_CHECK_(!strcmp((a), (b)), 0, #a " eq " #b, __VA_ARGS__)
#define cr_assert_float_eq(a, b, e, ...)                                                           \
    ARM_CHECK_(fabs((double)(a) - (double)(b)) <= (double)(e), 1, #a " ~ " #b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, e, ...)                                                           \
    ARM_CHECK_(fabs((double)(a) - (double)(b)) <= (double)(e), 0, #a " ~ " #b, __VA_ARGS__)
#define cr_skip_test(...)                                                                          \
    do {                                                                                           \
        fprintf(stderr, "  skip: " __VA_ARGS__);                                                   \
        fputc('\n', stderr);                                                                       \
        arm_test_skip();                                                                           \
    } while (0)
#define cr_log_info(...)                                                                           \
    do {                                                                                           \
        fprintf(stderr, "  info: " __VA_ARGS__);                                                   \
        fputc('\n', stderr);                                                                       \
    } while (0)
#define cr_log_warn cr_log_info

#endif
