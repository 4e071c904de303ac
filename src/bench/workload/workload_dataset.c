/* Datasets as workloads (workload_internal.h): a request per JSONL or
 * ShareGPT entry, ShareGPT conversations for --turns, a trace's requests
 * (workload_trace.c); reading the file. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/dataset.h"
#include "base/file_read.h"
#include "bench/workload/workload_internal.h"

/* ShareGPT's max_tokens: the reply's tokens by the loaded tokenizer, else
 * its words; at least 1. */
static uint32_t reply_tokens(const workload *w, const json_t *reply) {
    const char *t = json_string_value(reply);
    size_t len = json_string_length(reply);
    int64_t n = workload_count_tokens(w, t, len);
    if (n < 0) { /* no tokenizer: words */
        n = 0;
        bool in_word = false;
        for (size_t k = 0; k < len; k++) {
            bool space = t[k] == ' ' || t[k] == '\n' || t[k] == '\t' || t[k] == '\r';
            if (!space && !in_word) n++;
            in_word = !space;
        }
    }
    if (n > (int64_t)DATASET_MAX_TOKENS) n = DATASET_MAX_TOKENS;
    return n < 1 ? 1 : (uint32_t)n;
}

/* --turns over a ShareGPT dataset: its first o->n_items / o->turns
 * conversations in file order, each of its first min(turns, its human
 * turns) human messages a turn's user message, and the dataset's reply to
 * it that turn's max_tokens (or --output-len). Turns past a conversation's
 * end have no text. Fails when the file has fewer usable conversations than
 * asked; on error w is as it was. */
static int sharegpt_conversations(workload *w, const dataset *d, const char *name,
                                  const workload_opts *o, tps_err *e) {
    if (w->n)
        return tps_fail(e, TPS_EINVAL, "%s: conversations (--turns) cannot follow other requests",
                        name);
    size_t convs = o->n_items / o->turns ? o->n_items / o->turns : 1;
    if (convs > d->n)
        return tps_fail(e, TPS_EINVAL,
                        "%s has %zu usable ShareGPT conversations (a human turn followed by a "
                        "reply), fewer than the %zu asked for (--conversations, default the "
                        "concurrency); give --conversations %zu or fewer",
                        name, d->n, convs, d->n);
    const size_t n = convs * o->turns;
    workload_item *its = calloc(n, sizeof *its);
    if (!its) return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu conversation turns", n);
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0xda7a5e7ull);
    int rc = TPS_OK;
    for (size_t c = 0; c < convs && rc == TPS_OK; c++) {
        const json_t *pairs = d->entries[c].turns;
        size_t nt = json_array_size(pairs) / 2;
        if (nt > o->turns) nt = o->turns;
        for (size_t t = 0; t < nt && rc == TPS_OK; t++) {
            workload_item *it = &its[c * o->turns + t];
            const json_t *h = json_array_get(pairs, 2 * t), *g = json_array_get(pairs, 2 * t + 1);
            it->text_len = json_string_length(h);
            it->max_tokens =
                o->has_output_len ? load_dist_sample(&o->output_len, &r) : reply_tokens(w, g);
            if (!(it->text = malloc(it->text_len + 1))) {
                rc = tps_fail(e, TPS_ENOMEM, "out of memory");
                break;
            }
            memcpy(it->text, json_string_value(h), it->text_len);
            it->text[it->text_len] = 0;
        }
    }
    for (size_t k = 0; k < n; k++) {
        its[k].prefix = WL_NO_PREFIX;
        its[k].send_at_s = -1;
        if (rc) free(its[k].text);
    }
    if (rc) {
        free(its);
        return rc;
    }
    free(w->items);
    w->items = its;
    w->n = n;
    w->turns = o->turns;
    w->conversations = convs;
    w->input_source = "dataset";
    return TPS_OK;
}

/* The dataset's format and how many entries it skipped, for the summary. */
static void note_dataset(workload *w, const dataset *d, const char *name) {
    w->format = dataset_format_name(d->format);
    w->skipped = d->skipped;
    if (d->skipped)
        snprintf(w->note, sizeof w->note,
                 "%s: %zu of %zu ShareGPT entries skipped (no human turn followed by a reply)",
                 name, d->skipped, d->skipped + d->n);
}

/* --turns: the dataset's conversations become the whole workload. */
static int dataset_conversations(workload *w, const dataset *d, const char *name,
                                 const workload_opts *o, tps_err *e) {
    if (d->format != DATASET_SHAREGPT)
        return tps_fail(e, TPS_EINVAL,
                        "--turns with a %s dataset: only a ShareGPT file (a JSON array of "
                        "{\"conversations\": [...]}) holds whole conversations; drop --turns "
                        "or give a ShareGPT file",
                        dataset_format_name(d->format));
    int rc = sharegpt_conversations(w, d, name, o, e);
    if (rc == TPS_OK) note_dataset(w, d, name);
    return rc;
}

/* Room for n more items after w's first n0, zeroed, with no prefix and no
 * send time. */
static int add_item_slots(workload *w, size_t n0, size_t n, tps_err *e) {
    workload_item *ni = realloc(w->items, (n0 + n) * sizeof *ni);
    if (!ni) return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu dataset requests", n);
    w->items = ni;
    memset(w->items + n0, 0, n * sizeof *ni);
    for (size_t k = 0; k < n; k++) {
        w->items[n0 + k].prefix = WL_NO_PREFIX;
        w->items[n0 + k].send_at_s = -1;
    }
    return TPS_OK;
}

/* A request per entry of an untimed dataset, into the slots from n0 on; its
 * max_tokens: the entry's own (JSONL), else --output-len, else the length of
 * the ShareGPT reply, else 128. */
static int dataset_items(workload *w, const dataset *d, size_t n0, const workload_opts *o,
                         tps_err *e) {
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0xda7a5e7ull);
    w->input_source = "dataset";
    int rc = TPS_OK;
    for (size_t k = 0; k < d->n && rc == TPS_OK; k++) {
        const dataset_entry *en = &d->entries[k];
        uint32_t out = en->max_tokens; /* JSONL's own, else 0 */
        if (!out && o->has_output_len)
            out = load_dist_sample(&o->output_len, &r);
        else if (!out)
            out = d->format == DATASET_SHAREGPT ? reply_tokens(w, en->reply) : 128;
        rc = wl_make_body(w, &w->items[n0 + k], json_incref(en->content), out, e);
        if (rc == TPS_OK) w->n++;
    }
    return rc;
}

int workload_parse_dataset(workload *w, const char *buf, size_t len, const char *name,
                           const workload_opts *o, tps_err *e) {
    const size_t n0 = w->n;
    if (!(o->trace_speed >= 0) || !isfinite(o->trace_speed))
        return tps_fail(e, TPS_EINVAL, "--trace-speed must be a finite number > 0");
    w->endpoint = o->endpoint;
    if (!w->common && !(w->common = wl_body_common(o, o->ignore_eos == 1)))
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    dataset d;
    int rc = dataset_parse(&d, buf, len, name, bench_endpoint_chatlike(o->endpoint), e);
    if (rc) return rc;
    if (o->trace_speed > 0 && d.format != DATASET_TRACE) {
        rc = tps_fail(e, TPS_EINVAL,
                      "%s: a %s dataset has no send times for --trace-speed to scale; drop "
                      "--trace-speed",
                      name, dataset_format_name(d.format));
    } else if (o->turns) {
        rc = dataset_conversations(w, &d, name, o, e);
    } else if ((rc = add_item_slots(w, n0, d.n, e)) == TPS_OK) {
        note_dataset(w, &d, name);
        rc = d.format == DATASET_TRACE ? wl_trace_items(w, &d, n0, o, e)
                                       : dataset_items(w, &d, n0, o, e);
        if (rc) {
            for (size_t q = n0; q < w->n; q++)
                free(w->items[q].body);
            w->n = n0;
        }
    }
    dataset_free(&d);
    return rc;
}

int wl_build_dataset(workload *w, const workload_opts *o, tps_err *e) {
    char *buf;
    size_t len;
    int rc = tps_read_file(o->dataset, SIZE_MAX - 2, &buf, &len);
    if (rc == TPS_ENOENT) return tps_fail(e, TPS_EIO, "cannot open dataset '%s'", o->dataset);
    if (rc) return tps_fail(e, rc, "cannot read dataset '%s'", o->dataset);
    rc = workload_parse_dataset(w, buf, len, o->dataset, o, e);
    free(buf);
    return rc;
}
