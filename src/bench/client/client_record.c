/* A request's record, the names of the ways it can fail, and the dialect
 * each endpoint answers in (bench.h). */
#include <stdlib.h>
#include <string.h>

#include "bench/client/bench.h"

static const char *const ERR_NAMES[BENCH_ERR_COUNT] = {
    [BENCH_OK] = "ok",
    [BENCH_ERR_CONNECT] = "connect",
    [BENCH_ERR_HTTP_4XX] = "http_4xx",
    [BENCH_ERR_HTTP_5XX] = "http_5xx",
    [BENCH_ERR_NO_RESPONSE] = "no_response",
    [BENCH_ERR_STALL] = "stall",
    [BENCH_ERR_TIMEOUT] = "timeout",
    [BENCH_ERR_RESET] = "reset",
    [BENCH_ERR_MALFORMED] = "malformed",
    [BENCH_ERR_STREAM_ERROR] = "stream_error",
    [BENCH_ERR_TRUNCATED] = "truncated",
    [BENCH_ERR_CANCELLED] = "cancelled",
    [BENCH_ERR_OTHER] = "other",
    [BENCH_ERR_HTTP_3XX] = "http_3xx",
    [BENCH_ERR_HTTP_OTHER] = "http_other",
    [BENCH_ERR_NO_TOKENS] = "no_tokens",
};

const char *bench_err_name(bench_errkind k) {
    return (unsigned)k < BENCH_ERR_COUNT ? ERR_NAMES[k] : "?";
}

bench_errkind bench_err_from_name(const char *s) {
    for (int k = 0; k < BENCH_ERR_COUNT; k++)
        if (!strcmp(s, ERR_NAMES[k])) return (bench_errkind)k;
    return BENCH_ERR_COUNT;
}

void bench_record_free(bench_record *r) {
    timeline_free(&r->tl);
    free(r->err_msg);
    r->err_msg = NULL;
}

bench_dialect bench_endpoint_dialect(bench_endpoint ep) {
    switch (ep) {
    case BENCH_EP_RESPONSES:
        return BENCH_DIALECT_RESPONSES;
    case BENCH_EP_MESSAGES:
        return BENCH_DIALECT_MESSAGES;
    case BENCH_EP_EMBEDDINGS:
        return BENCH_DIALECT_EMBEDDINGS;
    default:
        return BENCH_DIALECT_OPENAI;
    }
}
