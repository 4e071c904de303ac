/* libFuzzer harness for the bench's JSONL dataset reader: any bytes must
 * give requests or a "FILE:LINE: ..." error, for both endpoints, and every
 * request body must be JSON. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    for (int ep = 0; ep < 2; ep++) {
        workload w = {0};
        workload_opts o = {.endpoint = (bench_endpoint)ep,
                           .seed = 1,
                           .ignore_eos = -1,
                           .include_usage = true,
                           .temperature = -1,
                           .model = "m"};
        tps_err e;
        int rc = workload_parse_dataset(&w, buf, size, "fuzz.jsonl", &o, &e);
        if (rc == 0) {
            for (size_t i = 0; i < w.n; i++) {
                json_t *j = json_loadb(w.items[i].body, w.items[i].body_len, 0, NULL);
                if (!j || w.items[i].max_tokens == 0) abort();
                json_decref(j);
            }
        } else if (rc == TPS_EINVAL && strncmp(e.msg, "fuzz.jsonl", 10) != 0) {
            abort(); /* every error names the file */
        }
        workload_free(&w);
    }
    free(buf);
    return 0;
}
