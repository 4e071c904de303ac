/* The endpoints a workload can be sent to (workload.h): their paths, names
 * and what their bodies hold. A leaf of the workload room: every builder
 * asks it, it asks none of them. */
#include <stdbool.h>

#include "bench/workload/workload.h"

const char *bench_endpoint_path(bench_endpoint ep) {
    static const char *const PATH[] = {
        [BENCH_EP_COMPLETIONS] = "/v1/completions", [BENCH_EP_CHAT] = "/v1/chat/completions",
        [BENCH_EP_RESPONSES] = "/v1/responses",     [BENCH_EP_MESSAGES] = "/v1/messages",
        [BENCH_EP_EMBEDDINGS] = "/v1/embeddings",
    };
    return (unsigned)ep <= BENCH_EP_EMBEDDINGS ? PATH[ep] : "/v1/completions";
}

const char *bench_endpoint_name(bench_endpoint ep) {
    static const char *const NAME[] = {
        [BENCH_EP_COMPLETIONS] = "completions", [BENCH_EP_CHAT] = "chat",
        [BENCH_EP_RESPONSES] = "responses",     [BENCH_EP_MESSAGES] = "messages",
        [BENCH_EP_EMBEDDINGS] = "embeddings",
    };
    return (unsigned)ep <= BENCH_EP_EMBEDDINGS ? NAME[ep] : "?";
}

bool bench_endpoint_chatlike(bench_endpoint ep) {
    return ep == BENCH_EP_CHAT || ep == BENCH_EP_RESPONSES || ep == BENCH_EP_MESSAGES;
}

bool bench_endpoint_generates(bench_endpoint ep) {
    return ep != BENCH_EP_EMBEDDINGS;
}
