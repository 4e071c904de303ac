/* Embeddings requests (workload_internal.h): the workload's prompts,
 * built one per item as for any endpoint, grouped into batches of
 * --batch-size texts per request, their token counts summed. Not here:
 * making the prompts (workload_synth.c, workload_dataset.c). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"

/* Item it's text: the body's "input" (a string for a prompt; for a
 * conversation, its messages' contents joined). New reference or NULL. */
static json_t *item_text(const workload_item *it) {
    json_t *b = json_loadb(it->body, it->body_len, 0, NULL);
    json_t *in = json_object_get(b, "input"), *out = NULL;
    if (json_is_string(in)) {
        out = json_incref(in);
    } else if (json_is_array(in)) {
        json_t *m;
        size_t i;
        char *acc = NULL;
        size_t n = 0;
        json_array_foreach(in, i, m) {
            const char *t = json_string_value(json_object_get(m, "content"));
            size_t k = t ? strlen(t) : 0;
            char *g = k ? realloc(acc, n + k + 2) : acc;
            if (!k || !g) continue;
            acc = g;
            if (n) acc[n++] = '\n';
            memcpy(acc + n, t, k);
            n += k;
        }
        out = acc ? json_stringn(acc, n) : NULL;
        free(acc);
    }
    json_decref(b);
    return out;
}

int wl_batch_inputs(workload *w, uint32_t batch, tps_err *e) {
    if (batch == 0) batch = 1;
    if (w->turns) return tps_fail(e, TPS_EINVAL, "--turns: embeddings requests have no turns");
    if (w->timed) return tps_fail(e, TPS_EINVAL, "a trace cannot be sent to --endpoint embeddings");
    size_t groups = w->n / batch;
    if (!groups) groups = 1;
    for (size_t g = 0; g < groups; g++) {
        json_t *texts = json_array();
        workload_item merged = {.prefix = WL_NO_PREFIX, .send_at_s = -1};
        bool exact = true;
        for (size_t k = g * batch; k < (g + 1) * batch && k < w->n; k++) {
            json_t *t = item_text(&w->items[k]);
            if (!t) {
                json_decref(texts);
                return tps_fail(e, TPS_EINVAL, "prompt %zu has no text to embed", k);
            }
            json_array_append_new(texts, t);
            merged.input_tokens += w->items[k].input_tokens;
            merged.input_target += w->items[k].input_target;
            exact &= w->items[k].input_tokens != 0;
        }
        if (!exact) merged.input_tokens = 0; /* a count of some is no count of the batch */
        int rc = wl_dump_body(w->common, texts, BENCH_EP_EMBEDDINGS, 0, &merged.body,
                              &merged.body_len, e);
        if (rc) return rc;
        for (size_t k = g * batch; k < (g + 1) * batch && k < w->n; k++) {
            free(w->items[k].body);
            free(w->items[k].text);
            w->items[k].body = w->items[k].text = NULL;
        }
        w->items[g] = merged;
    }
    for (size_t k = groups; k < w->n; k++) { /* a short last group's leftovers */
        free(w->items[k].body);
        free(w->items[k].text);
    }
    w->n = groups;
    return TPS_OK;
}
