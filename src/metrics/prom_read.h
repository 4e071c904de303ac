/* A reader of the Prometheus text exposition format 0.0.4 (what /metrics
 * of tps serve, vLLM, llama.cpp and SGLang answer): `# TYPE` lines name a
 * family's type, and each sample line `name{label="value",...} value
 * [timestamp]` is handed to a callback with its family's type.
 *
 * Strict where a wrong reading would mislead (a malformed sample line is
 * an error naming its line), lenient where the format allows (`# HELP` and
 * other comments skipped, blank lines, CRLF, a trailing timestamp ignored,
 * no final newline). A sample belongs to the last `# TYPE` family when its
 * name is the family's or the family's plus _total, _bucket, _sum, _count
 * or _created; else it is untyped. Label text is handed on as written
 * (escapes kept), validated but not decoded.
 *
 * It lives in metrics/ so that both the server's tests and the bench
 * (which scrapes any server's /metrics) can use it; the writer is
 * server/prom_write.h. Not here: HTTP, what the metrics mean. */
#ifndef TPS_METRICS_PROM_READ_H
#define TPS_METRICS_PROM_READ_H

#include <stddef.h>

#include "base/error.h"

typedef enum prom_type {
    PROM_UNTYPED = 0,
    PROM_COUNTER,
    PROM_GAUGE,
    PROM_HISTOGRAM,
    PROM_SUMMARY,
} prom_type;

/* One sample; the strings point into the parsed buffer (not NUL-ended). */
typedef struct prom_sample_view {
    const char *name;
    size_t name_len;
    const char *labels; /* between the braces, without them; len 0 when none */
    size_t labels_len;
    double value;
    prom_type type; /* of its family, by the rule above */
} prom_sample_view;

/* Called for each sample in order; a non-zero return stops the parse and
 * is returned. */
typedef int (*prom_sample_fn)(void *arg, const prom_sample_view *s);

/* Parses buf[0..len). TPS_EINVAL with "line N: ..." on a malformed line. */
int prom_text_parse(const char *buf, size_t len, prom_sample_fn fn, void *arg, tps_err *e);

#endif
