/* libFuzzer harness for the sweep's /metrics reader (sweep_parse_metrics,
 * src/bench/experiment/sweep.c): any text an endpoint answers must give TPS_OK with
 * every counter a number (never NaN: non-finite samples are skipped) or
 * TPS_ENOENT with a message, without reading past the text.
 *
 * Not here: the HTTP GET (sweep_scrape), the series scraper (fuzz_prom_read). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/experiment/sweep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1); /* exact size: ASan sees any read past the end */
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    sweep_counters c;
    tps_err e = {{0}};
    int rc = sweep_parse_metrics(&c, text, &e);
    if (rc != TPS_OK && rc != TPS_ENOENT) abort();
    if (rc == TPS_ENOENT && !e.msg[0]) abort();
    if (rc == TPS_OK) {
        const double v[] = {c.steps,        c.prompt_tokens,   c.generation_tokens,
                            c.preemptions,  c.weight_bytes,    c.kv_bytes,
                            c.step_seconds, c.machine_read_bps};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            if (isnan(v[i])) abort();
    }
    free(text);
    return 0;
}
