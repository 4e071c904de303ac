/* Error reporting shared by every module: functions return 0 or a negative
 * code (TPS_E*) and fill a tps_err with a message a user can act on.
 * Not for control flow inside hot loops; not a logging facility. */
#ifndef TPS_BASE_ERROR_H
#define TPS_BASE_ERROR_H

#include <stdarg.h>
#include <stdio.h>

enum {
    TPS_OK = 0,
    TPS_EINVAL = -1, /* bad argument or malformed input */
    TPS_EIO = -2,    /* the operating system refused (open, read, mmap) */
    TPS_ENOMEM = -3, /* allocation failed */
    TPS_ERANGE = -4, /* a value outside what the format or model allows */
    TPS_ENOENT = -5, /* a key, tensor or file that is not there */
    TPS_EUNSUP = -6, /* valid input this build cannot handle yet */
    TPS_EFULL = -7,  /* a queue or pool is full */
};

typedef struct tps_err {
    char msg[512];
} tps_err;

/* Fills e (may be NULL) and returns code, so callers can `return tps_fail(...)`. */
static inline int tps_fail(tps_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int tps_fail(tps_err *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

#endif
