/* libFuzzer harness for the bench's dataset reader, all three formats
 * (JSONL, ShareGPT, Mooncake trace; the format is detected from the
 * input): any bytes must give requests or a "FILE:LINE: ..." error, for
 * both endpoints; every request body must be JSON, and a trace's send times
 * must be finite, from 0 and in order. Traces asking for more than
 * FUZZ_TRACE_TOKENS prompt tokens in all are only parsed (building their
 * prompts is linear in their length and proves nothing more). */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/dataset.h"
#include "bench/workload/workload.h"

#define FUZZ_TRACE_TOKENS 200000u

/* Parses only; true when the input is small enough to build into a workload. */
static bool small_enough(const char *buf, size_t size) {
    dataset d;
    tps_err e;
    if (dataset_parse(&d, buf, size, "fuzz.jsonl", true, &e)) {
        if (strncmp(e.msg, "fuzz.jsonl", 10) != 0) abort(); /* every error names the file */
        return true; /* the workload must fail the same way */
    }
    uint64_t tokens = 0;
    for (size_t i = 0; i < d.n; i++)
        tokens += d.entries[i].input_len;
    dataset_free(&d);
    return tokens <= FUZZ_TRACE_TOKENS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    if (!small_enough(buf, size)) {
        free(buf);
        return 0;
    }
    for (int ep = 0; ep < 2; ep++) {
        workload w = {0};
        workload_opts o = {.endpoint = (bench_endpoint)ep,
                           .seed = 1,
                           .ignore_eos = -1,
                           .include_usage = true,
                           .temperature = -1,
                           .trace_speed = ep ? 2.5 : 0,
                           .model = "m"};
        tps_err e;
        int rc = workload_parse_dataset(&w, buf, size, "fuzz.jsonl", &o, &e);
        if (rc == 0) {
            double prev = 0;
            for (size_t i = 0; i < w.n; i++) {
                json_t *j = json_loadb(w.items[i].body, w.items[i].body_len, 0, NULL);
                if (!j || w.items[i].max_tokens == 0) abort();
                json_decref(j);
                double at = w.items[i].send_at_s;
                if (w.timed && (!isfinite(at) || at < prev || (i == 0 && at != 0))) abort();
                if (!w.timed && at != -1) abort();
                prev = at;
            }
        } else if (rc == TPS_EINVAL && strncmp(e.msg, "fuzz.jsonl", 10) != 0) {
            abort(); /* every error names the file */
        }
        workload_free(&w);
    }
    free(buf);
    return 0;
}
