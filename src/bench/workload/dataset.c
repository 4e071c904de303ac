/* --dataset files: format detection and the three readers (dataset.h).
 * Every error names the file and line. Not here: tokens, bodies, sending. */
#include "bench/workload/dataset.h"
#include "base/grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *dataset_format_name(dataset_format f) {
    switch (f) {
    case DATASET_SHAREGPT:
        return "sharegpt";
    case DATASET_TRACE:
        return "trace";
    default:
        return "jsonl";
    }
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* ---- lines ------------------------------------------------------------------------ */

/* The next non-blank line of buf at or after *at: its start and length, its
 * number in *line (counted from *line); false at the end. */
static bool next_line(const char *buf, size_t len, size_t *at, size_t *line, const char **p,
                      size_t *l) {
    while (*at < len) {
        const char *s = buf + *at;
        const char *nl = memchr(s, '\n', len - *at);
        size_t n = nl ? (size_t)(nl - s) : len - *at;
        *at += n + 1;
        ++*line;
        size_t k = 0;
        while (k < n && is_space(s[k]))
            k++;
        if (k < n) {
            *p = s;
            *l = n;
            return true;
        }
    }
    return false;
}

dataset_format dataset_detect(const char *buf, size_t len) {
    size_t k = 0;
    while (k < len && is_space(buf[k]))
        k++;
    if (k < len && buf[k] == '[') return DATASET_SHAREGPT;
    size_t at = 0, line = 0, l = 0;
    const char *p = NULL;
    if (!next_line(buf, len, &at, &line, &p, &l)) return DATASET_JSONL;
    json_t *j = json_loadb(p, l, 0, NULL);
    bool trace =
        json_is_object(j) && json_object_get(j, "timestamp") && json_object_get(j, "input_length");
    json_decref(j);
    return trace ? DATASET_TRACE : DATASET_JSONL;
}

/* ---- entries ------------------------------------------------------------------------ */

static void entry_free(dataset_entry *en) {
    json_decref(en->content);
    json_decref(en->reply);
    json_decref(en->turns);
    free(en->hash_ids);
}

void dataset_free(dataset *d) {
    for (size_t i = 0; i < d->n; i++)
        entry_free(&d->entries[i]);
    free(d->entries);
    memset(d, 0, sizeof *d);
}

/* A new zeroed entry at the end of d; NULL when out of memory. */
static dataset_entry *push(dataset *d, size_t *cap) {
    if (TPS_GROW(d->entries, *cap, d->n + 1, 64)) return NULL;
    dataset_entry *en = &d->entries[d->n++];
    memset(en, 0, sizeof *en);
    return en;
}

/* An integer count in [1, DATASET_MAX_TOKENS]; 0 when v is not one. */
static uint32_t count_of(const json_t *v) {
    if (!json_is_integer(v)) return 0;
    json_int_t x = json_integer_value(v);
    return x >= 1 && x <= (json_int_t)DATASET_MAX_TOKENS ? (uint32_t)x : 0;
}

/* ---- JSONL ---------------------------------------------------------------------------- */

static int jsonl_entry(dataset_entry *en, json_t *j, const char *name, size_t line, bool chat,
                       tps_err *e) {
    json_t *prompt = json_object_get(j, "prompt"), *msgs = json_object_get(j, "messages");
    json_t *mt = json_object_get(j, "max_tokens");
    if (!json_is_object(j) || (!json_is_string(prompt) && !json_is_array(msgs)))
        return tps_fail(e, TPS_EINVAL,
                        "%s:%zu: expected an object with \"prompt\" (a string) or \"messages\" "
                        "(an array)",
                        name, line);
    if (json_is_array(msgs) && !json_is_string(prompt) && !chat)
        return tps_fail(e, TPS_EINVAL,
                        "%s:%zu: \"messages\" needs --endpoint chat (completions takes \"prompt\")",
                        name, line);
    if (mt && !(en->max_tokens = count_of(mt)))
        return tps_fail(e, TPS_EINVAL, "%s:%zu: \"max_tokens\" must be an integer from 1 to %u",
                        name, line, DATASET_MAX_TOKENS);
    en->content = json_incref(json_is_string(prompt) ? prompt : msgs);
    return TPS_OK;
}

/* ---- trace (Mooncake) ------------------------------------------------------------------ */

static int trace_entry(dataset_entry *en, json_t *j, const char *name, size_t line, double prev_ms,
                       tps_err *e) {
    if (!json_is_object(j))
        return tps_fail(e, TPS_EINVAL,
                        "%s:%zu: expected a trace object {\"timestamp\", \"input_length\", "
                        "\"output_length\", \"hash_ids\"}",
                        name, line);
    json_t *ts = json_object_get(j, "timestamp"), *h = json_object_get(j, "hash_ids");
    if (!json_is_number(ts) || !isfinite(json_number_value(ts)) || json_number_value(ts) < 0)
        return tps_fail(e, TPS_EINVAL, "%s:%zu: \"timestamp\" must be a number of ms >= 0", name,
                        line);
    en->timestamp_ms = json_number_value(ts);
    if (en->timestamp_ms < prev_ms)
        return tps_fail(e, TPS_EINVAL,
                        "%s:%zu: \"timestamp\" %.17g is before the previous line's %.17g: a trace "
                        "must be in time order",
                        name, line, en->timestamp_ms, prev_ms);
    if (!(en->input_len = count_of(json_object_get(j, "input_length"))))
        return tps_fail(e, TPS_EINVAL, "%s:%zu: \"input_length\" must be an integer from 1 to %u",
                        name, line, DATASET_MAX_TOKENS);
    if (!(en->max_tokens = count_of(json_object_get(j, "output_length"))))
        return tps_fail(e, TPS_EINVAL, "%s:%zu: \"output_length\" must be an integer from 1 to %u",
                        name, line, DATASET_MAX_TOKENS);
    if (!h) return TPS_OK;
    if (!json_is_array(h))
        return tps_fail(e, TPS_EINVAL, "%s:%zu: \"hash_ids\" must be an array of integers", name,
                        line);
    size_t n = json_array_size(h);
    if (n == 0) return TPS_OK;
    if (!(en->hash_ids = malloc(n * sizeof *en->hash_ids)))
        return tps_fail(e, TPS_ENOMEM, "%s:%zu: out of memory", name, line);
    for (size_t k = 0; k < n; k++) {
        json_t *v = json_array_get(h, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return tps_fail(e, TPS_EINVAL, "%s:%zu: \"hash_ids\"[%zu] must be an integer >= 0",
                            name, line, k);
        en->hash_ids[k] = (uint64_t)json_integer_value(v);
    }
    en->n_hash_ids = n;
    return TPS_OK;
}

/* JSONL and traces: one object per non-blank line. */
static int parse_lines(dataset *d, const char *buf, size_t len, const char *name, bool chat,
                       tps_err *e) {
    size_t cap = 0, at = 0, line = 0, l = 0;
    const char *p = NULL;
    double prev_ms = 0;
    while (next_line(buf, len, &at, &line, &p, &l)) {
        json_error_t je;
        json_t *j = json_loadb(p, l, 0, &je);
        if (!j)
            return tps_fail(e, TPS_EINVAL, "%s:%zu: column %d: %s", name, line, je.column, je.text);
        dataset_entry *en = push(d, &cap);
        int rc = TPS_OK;
        if (!en)
            rc = tps_fail(e, TPS_ENOMEM, "%s:%zu: out of memory", name, line);
        else if (d->format == DATASET_TRACE)
            rc = trace_entry(en, j, name, line, prev_ms, e);
        else
            rc = jsonl_entry(en, j, name, line, chat, e);
        json_decref(j);
        if (rc) return rc;
        en->line = line;
        prev_ms = en->timestamp_ms;
    }
    return TPS_OK;
}

/* ---- ShareGPT ------------------------------------------------------------------------ */

static bool role_is(const char *from, const char *a, const char *b) {
    return !strcmp(from, a) || !strcmp(from, b);
}

/* Entry k (a parsed element at line `line`): its first human turn and the
 * reply right after it, or neither (*usable false); and every later human
 * turn directly followed by its reply, while they alternate (en->turns). */
static int sharegpt_entry(dataset_entry *en, json_t *j, const char *name, size_t line, size_t k,
                          bool *usable, tps_err *e) {
    json_t *conv = json_object_get(j, "conversations");
    if (!json_is_object(j) || !json_is_array(conv))
        return tps_fail(e, TPS_EINVAL,
                        "%s:%zu: entry %zu: expected an object with \"conversations\" (an array)",
                        name, line, k);
    size_t n = json_array_size(conv);
    for (size_t t = 0; t < n; t++) {
        json_t *turn = json_array_get(conv, t);
        json_t *from = json_object_get(turn, "from"), *value = json_object_get(turn, "value");
        if (!json_is_string(from) || !json_is_string(value))
            return tps_fail(e, TPS_EINVAL,
                            "%s:%zu: entry %zu: conversations[%zu] must be an object with "
                            "\"from\" and \"value\" strings",
                            name, line, k, t);
    }
    *usable = false;
    for (size_t t = 0; t + 1 < n; t++) {
        json_t *turn = json_array_get(conv, t);
        if (!role_is(json_string_value(json_object_get(turn, "from")), "human", "user")) continue;
        json_t *next = json_array_get(conv, t + 1);
        if (!role_is(json_string_value(json_object_get(next, "from")), "gpt", "assistant")) break;
        en->content = json_incref(json_object_get(turn, "value"));
        en->reply = json_incref(json_object_get(next, "value"));
        *usable = true;
        if (!(en->turns = json_array()))
            return tps_fail(e, TPS_ENOMEM, "%s:%zu: out of memory", name, line);
        for (size_t u = t; u + 1 < n; u += 2) {
            json_t *h = json_array_get(conv, u), *g = json_array_get(conv, u + 1);
            if (!role_is(json_string_value(json_object_get(h, "from")), "human", "user") ||
                !role_is(json_string_value(json_object_get(g, "from")), "gpt", "assistant"))
                break;
            if (json_array_append(en->turns, json_object_get(h, "value")) ||
                json_array_append(en->turns, json_object_get(g, "value")))
                return tps_fail(e, TPS_ENOMEM, "%s:%zu: out of memory", name, line);
        }
        break;
    }
    return TPS_OK;
}

/* Lines before buf + off, counted from 1. */
static size_t line_at(const char *buf, size_t off) {
    size_t line = 1;
    for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + off - p))); p++)
        line++;
    return line;
}

/* The end of the JSON value starting at buf[i] (not space): the index of
 * the ',' or ']' at depth 0 after it, or len when there is none. Strings
 * are skipped with their escapes; the value itself is checked by jansson. */
static size_t value_end(const char *buf, size_t len, size_t i) {
    int depth = 0;
    bool str = false;
    for (; i < len; i++) {
        char c = buf[i];
        if (str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                str = false;
        } else if (c == '"') {
            str = true;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (depth == 0) return i;
            depth--;
        } else if (c == ',' && depth == 0) {
            return i;
        }
    }
    return len;
}

/* A JSON array of entries, each parsed on its own so that errors can name
 * its line and index. */
static int parse_sharegpt(dataset *d, const char *buf, size_t len, const char *name, tps_err *e) {
    size_t cap = 0, i = 0;
    while (i < len && is_space(buf[i]))
        i++;
    i++; /* '[' (dataset_detect) */
    for (size_t k = 0;; k++) {
        while (i < len && is_space(buf[i]))
            i++;
        if (i >= len)
            return tps_fail(e, TPS_EINVAL, "%s:%zu: entry %zu: the array is not closed with ']'",
                            name, line_at(buf, len), k);
        if (buf[i] == ']' && k == 0) {
            i++;
            break;
        }
        size_t end = value_end(buf, len, i), line = line_at(buf, i);
        if (end >= len)
            return tps_fail(e, TPS_EINVAL, "%s:%zu: entry %zu: the array is not closed with ']'",
                            name, line, k);
        json_error_t je;
        json_t *j = json_loadb(buf + i, end - i, 0, &je);
        if (!j)
            return tps_fail(e, TPS_EINVAL, "%s:%zu: entry %zu: %s", name,
                            je.line > 0 ? line + (size_t)je.line - 1 : line, k, je.text);
        dataset_entry *en = push(d, &cap);
        bool usable = false;
        int rc = en ? sharegpt_entry(en, j, name, line, k, &usable, e)
                    : tps_fail(e, TPS_ENOMEM, "%s:%zu: out of memory", name, line);
        json_decref(j);
        if (rc) return rc;
        en->line = line;
        if (!usable) {
            entry_free(en);
            d->n--;
            d->skipped++;
        }
        i = end + 1;
        if (buf[end] == ']') break;
    }
    while (i < len && is_space(buf[i]))
        i++;
    if (i < len)
        return tps_fail(e, TPS_EINVAL, "%s:%zu: unexpected text after the array's ']'", name,
                        line_at(buf, i));
    return TPS_OK;
}

/* ---- entry point ------------------------------------------------------------------------ */

int dataset_parse(dataset *d, const char *buf, size_t len, const char *name, bool chat,
                  tps_err *e) {
    memset(d, 0, sizeof *d);
    d->format = dataset_detect(buf, len);
    int rc = d->format == DATASET_SHAREGPT ? parse_sharegpt(d, buf, len, name, e)
                                           : parse_lines(d, buf, len, name, chat, e);
    if (rc == TPS_OK && d->n == 0) {
        if (d->skipped)
            rc = tps_fail(e, TPS_EINVAL,
                          "%s: none of the %zu ShareGPT entries has a human turn followed by a "
                          "reply",
                          name, d->skipped);
        else
            rc = tps_fail(e, TPS_EINVAL, "%s: no requests in the dataset", name);
    }
    if (rc) dataset_free(d);
    return rc;
}
