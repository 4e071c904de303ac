/* The endpoints a workload can be sent to (workload.h): their paths, names
 * and what their bodies hold, one row each. A leaf of the workload room:
 * every builder asks it, it asks none of them. */
#include <stdbool.h>

#include "bench/workload/workload.h"

static const struct endpoint_row {
    const char *name, *path;
    bool chatlike;  /* the body holds a conversation ("messages", "input" items) */
    bool generates; /* the response streams generated tokens */
} ROWS[] = {
    [BENCH_EP_COMPLETIONS] = {"completions", "/v1/completions", false, true},
    [BENCH_EP_CHAT] = {"chat", "/v1/chat/completions", true, true},
    [BENCH_EP_RESPONSES] = {"responses", "/v1/responses", true, true},
    [BENCH_EP_MESSAGES] = {"messages", "/v1/messages", true, true},
    [BENCH_EP_EMBEDDINGS] = {"embeddings", "/v1/embeddings", false, false},
};

/* ep's row; completions' for a value out of range */
static const struct endpoint_row *row(bench_endpoint ep) {
    return &ROWS[(unsigned)ep < sizeof ROWS / sizeof ROWS[0] ? ep : BENCH_EP_COMPLETIONS];
}

const char *bench_endpoint_path(bench_endpoint ep) {
    return row(ep)->path;
}

const char *bench_endpoint_name(bench_endpoint ep) {
    return row(ep)->name;
}

bool bench_endpoint_chatlike(bench_endpoint ep) {
    return row(ep)->chatlike;
}

bool bench_endpoint_generates(bench_endpoint ep) {
    return row(ep)->generates;
}
