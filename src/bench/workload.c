/* Prepared requests: synthetic prompts sized in model tokens, or a JSONL
 * dataset (workload.h). The only bench file that touches the tokenizer.
 * Not here: sending, timing. */
#include "bench/workload.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"      /* gguf_open for --tokenizer */
#include "model/tokenizer.h" /* tokenizer_load / encode */

const char *bench_endpoint_path(bench_endpoint ep) {
    return ep == BENCH_EP_CHAT ? "/v1/chat/completions" : "/v1/completions";
}

/* ---- token counting: tokenizer, server /tokenize, or none ---------------------- */

typedef struct counter {
    const tokenizer *tok;
    CURL *curl; /* /tokenize */
    struct curl_slist *hdrs;
    char *resp;
    size_t resp_len, resp_cap;
} counter;

static size_t collect(char *p, size_t sz, size_t nm, void *ud) {
    counter *c = ud;
    size_t n = sz * nm;
    if (c->resp_len + n + 1 > c->resp_cap) {
        size_t cap = (c->resp_len + n + 1) * 2;
        char *b = realloc(c->resp, cap);
        if (!b) return 0;
        c->resp = b;
        c->resp_cap = cap;
    }
    memcpy(c->resp + c->resp_len, p, n);
    c->resp_len += n;
    return n;
}

/* Prompt tokens as the server counts them (BOS included); -1 on failure. */
static int64_t count_tokens(counter *c, const char *text) {
    size_t len = strlen(text);
    if (c->tok) {
        int32_t one[1];
        size_t n = 0;
        tps_err e;
        int rc = tokenizer_encode(c->tok, text, len, TOK_ENCODE_ADD_SPECIAL, one, 1, &n, &e);
        return rc == 0 || rc == TPS_ERANGE ? (int64_t)n : -1;
    }
    if (!c->curl) return -1;
    json_t *req = json_pack("{s:s, s:b}", "content", text, "add_special", 1);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) return -1;
    c->resp_len = 0;
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(c->curl);
    free(body);
    long status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK || status != 200) return -1;
    json_t *j = json_loadb(c->resp ? c->resp : "", c->resp_len, 0, NULL);
    json_t *toks = json_object_get(j, "tokens");
    int64_t n = json_is_array(toks) ? (int64_t)json_array_size(toks) : -1;
    json_decref(j);
    return n;
}

static void counter_close(counter *c) {
    if (c->curl) curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->hdrs);
    free(c->resp);
    memset(c, 0, sizeof *c);
}

/* Tries the server's /tokenize once; keeps it only if it answers. */
static bool counter_open_server(counter *c, const char *url, const char *api_key) {
    c->curl = curl_easy_init();
    if (!c->curl) return false;
    c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (api_key) {
        char h[512];
        snprintf(h, sizeof h, "Authorization: Bearer %s", api_key);
        c->hdrs = curl_slist_append(c->hdrs, h);
    }
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->hdrs);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    if (count_tokens(c, "hello") > 0) return true;
    counter_close(c);
    return false;
}

/* ---- request bodies -------------------------------------------------------------- */

/* Takes ownership of prompt_or_messages (a string or an array). */
static int make_body(workload_item *it, json_t *content, uint32_t max_tokens, bool ignore_eos,
                     const workload_opts *o, tps_err *e) {
    json_t *b = json_object();
    if (o->model) json_object_set_new(b, "model", json_string(o->model));
    if (o->endpoint == BENCH_EP_CHAT) {
        if (json_is_string(content)) {
            json_t *m = json_pack("[{s:s, s:o}]", "role", "user", "content", content);
            content = m;
        }
        json_object_set_new(b, "messages", content);
    } else {
        json_object_set_new(b, "prompt", content);
    }
    json_object_set_new(b, "max_tokens", json_integer(max_tokens));
    json_object_set_new(b, "stream", json_true());
    if (o->include_usage)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (ignore_eos) json_object_set_new(b, "ignore_eos", json_true());
    if (o->temperature >= 0) json_object_set_new(b, "temperature", json_real(o->temperature));
    it->body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (!it->body) return tps_fail(e, TPS_ENOMEM, "cannot build a request body");
    it->body_len = strlen(it->body);
    it->max_tokens = max_tokens;
    return TPS_OK;
}

/* ---- synthetic prompts ------------------------------------------------------------- */

static const char *const WORDS[] = {
    "the",   "little", "girl",  "saw",   "a",     "big",   "red",    "ball",  "in",   "park",
    "she",   "was",    "happy", "and",   "ran",   "to",    "her",    "mom",   "one",  "day",
    "boy",   "named",  "Tim",   "found", "shiny", "stone", "under",  "tree",  "they", "played",
    "with",  "dog",    "sun",   "sky",   "blue",  "bird",  "sang",   "song",  "fish", "swam",
    "cat",   "jumped", "over",  "wall",  "cake",  "sweet", "friend", "help",  "box",  "toy",
    "car",   "fast",   "slow",  "rain",  "fell",  "warm",  "cold",   "house", "door", "open",
    "green", "grass",  "small", "kind"};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

static int sb_add(strbuf *s, const char *t) {
    size_t n = strlen(t);
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2 + 64;
        char *b = realloc(s->p, cap);
        if (!b) return TPS_ENOMEM;
        s->p = b;
        s->cap = cap;
    }
    memcpy(s->p + s->len, t, n + 1);
    s->len += n;
    return TPS_OK;
}

/* A prompt of `target` tokens (as close as counting allows) for request i:
 * "<i> " then random words, adjusted by re-counting. Returns the count
 * reached (or target when nothing can count). */
static int64_t synth_prompt(strbuf *s, size_t i, uint32_t target, counter *c, load_rng *r) {
    s->len = 0;
    char head[32];
    snprintf(head, sizeof head, "%zu", i);
    if (sb_add(s, head)) return -1;
    size_t marks[4096]; /* lengths after each added word, to remove words again */
    size_t n_marks = 0;
    const bool can_count = c->tok || c->curl;
    int64_t have = can_count ? count_tokens(c, s->p) : 1;
    if (have < 0) return -1;
    /* grow by words, re-counting after each batch; batches shrink as the
     * measured tokens-per-word ratio says we are close */
    const int64_t base = have;
    size_t words = 0;
    for (int iter = 0; iter < 100000 && have < (int64_t)target; iter++) {
        int64_t gap = (int64_t)target - have;
        double ratio = words ? (double)(have - base) / (double)words : 4.0;
        if (ratio < 0.5) ratio = 0.5;
        int64_t add = can_count ? (int64_t)((double)gap / ratio * 0.9) : gap;
        if (add < 1) add = 1;
        words += (size_t)add;
        for (int64_t k = 0; k < add; k++) {
            if (n_marks < sizeof marks / sizeof marks[0]) marks[n_marks++] = s->len;
            if (sb_add(s, " ") || sb_add(s, WORDS[load_rng_below(r, N_WORDS)])) return -1;
        }
        have = can_count ? count_tokens(c, s->p) : have + add;
        if (have < 0) return -1;
    }
    /* overshot: drop trailing words while that keeps us >= target, then pad */
    for (int k = 0; k < 64 && have > (int64_t)target && n_marks > 0; k++) {
        s->p[s->len = marks[--n_marks]] = 0;
        have = count_tokens(c, s->p);
        if (have < 0) return -1;
        /* under again: try single-letter fillers, which are often one token */
        static const char *const FILL[] = {" a", " I", ".", ","};
        for (int f = 0; f < 4 && have < (int64_t)target; f++) {
            size_t keep = s->len;
            if (sb_add(s, FILL[f])) return -1;
            int64_t h2 = count_tokens(c, s->p);
            if (h2 < 0) return -1;
            if (h2 > (int64_t)target)
                s->p[s->len = keep] = 0;
            else
                have = h2, f = -1;
        }
    }
    return have;
}

static int build_synthetic(workload *w, const workload_opts *o, tps_err *e) {
    counter c = {0};
    int rc = TPS_OK;
    if (w->tok) {
        c.tok = w->tok;
        w->input_source = "tokenizer";
    } else if (o->tokenize_url && counter_open_server(&c, o->tokenize_url, o->api_key)) {
        w->input_source = "server /tokenize";
    } else {
        w->input_source = "approximate (words)";
    }
    size_t n = o->n_items ? o->n_items : 1;
    w->items = calloc(n, sizeof *w->items);
    if (!w->items) {
        counter_close(&c);
        return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu requests", n);
    }
    load_rng r;
    load_rng_seed(&r, o->seed ^ 0x5eedf00dull);
    strbuf s = {0};
    w->exact_inputs = c.tok || c.curl;
    for (size_t i = 0; i < n; i++) {
        uint32_t in = load_dist_sample(&o->input_len, &r);
        uint32_t out = load_dist_sample(&o->output_len, &r);
        int64_t got = synth_prompt(&s, i, in, &c, &r);
        if (got < 0) {
            rc = tps_fail(e, TPS_EIO, "could not count the tokens of a synthetic prompt (%s)",
                          w->input_source);
            break;
        }
        if (got != in) w->exact_inputs = false;
        workload_item *it = &w->items[i];
        it->input_target = in;
        it->input_tokens = c.tok || c.curl ? (uint32_t)got : 0;
        rc = make_body(it, json_string(s.p), out, o->ignore_eos != 0, o, e);
        if (rc) break;
        w->n = i + 1;
    }
    free(s.p);
    counter_close(&c);
    return rc;
}

/* ---- dataset ----------------------------------------------------------------------- */

int workload_parse_dataset(workload *w, const char *buf, size_t len, const char *name,
                           const workload_opts *o, tps_err *e) {
    size_t cap = 0, n0 = w->n;
    load_rng r;
    load_rng_seed(&r, o->seed ^ 0xda7a5e7ull);
    size_t line = 0;
    for (size_t i = 0; i < len;) {
        const char *p = buf + i;
        const char *nl = memchr(p, '\n', len - i);
        size_t l = nl ? (size_t)(nl - p) : len - i;
        i += l + 1;
        line++;
        size_t k = 0;
        while (k < l && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
            k++;
        if (k == l) continue; /* blank line */
        json_error_t je;
        json_t *j = json_loadb(p, l, 0, &je);
        int rc = TPS_OK;
        if (!j) {
            rc = tps_fail(e, TPS_EINVAL, "%s:%zu: column %d: %s", name, line, je.column, je.text);
            goto fail;
        }
        json_t *prompt = json_object_get(j, "prompt"), *msgs = json_object_get(j, "messages");
        json_t *mt = json_object_get(j, "max_tokens");
        if (!json_is_object(j) || (!json_is_string(prompt) && !json_is_array(msgs))) {
            json_decref(j);
            rc = tps_fail(e, TPS_EINVAL,
                          "%s:%zu: expected an object with \"prompt\" (a string) or \"messages\" "
                          "(an array)",
                          name, line);
            goto fail;
        }
        if (json_is_array(msgs) && !json_is_string(prompt) && o->endpoint != BENCH_EP_CHAT) {
            json_decref(j);
            rc = tps_fail(
                e, TPS_EINVAL,
                "%s:%zu: \"messages\" needs --endpoint chat (completions takes \"prompt\")", name,
                line);
            goto fail;
        }
        if (mt && (!json_is_integer(mt) || json_integer_value(mt) < 1 ||
                   json_integer_value(mt) > 100000000)) {
            json_decref(j);
            rc = tps_fail(e, TPS_EINVAL, "%s:%zu: \"max_tokens\" must be an integer >= 1", name,
                          line);
            goto fail;
        }
        uint32_t out = mt ? (uint32_t)json_integer_value(mt)
                          : (o->has_output_len ? load_dist_sample(&o->output_len, &r) : 128);
        if (w->n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            workload_item *ni = realloc(w->items, nc * sizeof *ni);
            if (!ni) {
                json_decref(j);
                rc = tps_fail(e, TPS_ENOMEM, "cannot allocate %zu dataset requests", nc);
                goto fail;
            }
            w->items = ni;
            cap = nc;
        }
        workload_item *it = &w->items[w->n];
        memset(it, 0, sizeof *it);
        json_t *content = json_is_string(prompt) ? prompt : msgs;
        json_incref(content);
        rc = make_body(it, content, out, o->ignore_eos == 1, o, e);
        json_decref(j);
        if (rc) goto fail;
        w->n++;
        continue;
    fail:
        for (size_t q = n0; q < w->n; q++)
            free(w->items[q].body);
        w->n = n0;
        return rc;
    }
    if (w->n == 0) return tps_fail(e, TPS_EINVAL, "%s: no requests in the dataset", name);
    w->input_source = "dataset";
    return TPS_OK;
}

static int build_dataset(workload *w, const workload_opts *o, tps_err *e) {
    FILE *fp = fopen(o->dataset, "rb");
    if (!fp) return tps_fail(e, TPS_EIO, "cannot open dataset '%s'", o->dataset);
    size_t cap = 1 << 16, len = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += k;
        if (len == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(fp);
    if (!buf) return tps_fail(e, TPS_ENOMEM, "cannot read dataset '%s'", o->dataset);
    int rc = workload_parse_dataset(w, buf, len, o->dataset, o, e);
    free(buf);
    return rc;
}

/* ---- create / free ----------------------------------------------------------------- */

int workload_build(workload *w, const workload_opts *o, tps_err *e) {
    memset(w, 0, sizeof *w);
    int rc;
    if (o->tokenizer_path) {
        gguf_file *f = NULL;
        if ((rc = gguf_open(&f, o->tokenizer_path, e))) return rc;
        rc = tokenizer_load(&w->tok, f, e);
        gguf_close(f);
        if (rc) return rc;
    }
    rc = o->dataset ? build_dataset(w, o, e) : build_synthetic(w, o, e);
    if (rc) workload_free(w);
    return rc;
}

void workload_free(workload *w) {
    for (size_t i = 0; i < w->n; i++)
        free(w->items[i].body);
    free(w->items);
    tokenizer_free(w->tok);
    memset(w, 0, sizeof *w);
}

int64_t workload_count_tokens(const workload *w, const char *text, size_t len) {
    if (!w || !w->tok) return -1;
    int32_t one[1];
    size_t n = 0;
    tps_err e;
    int rc = tokenizer_encode(w->tok, text, len, 0, one, 1, &n, &e);
    return rc == 0 || rc == TPS_ERANGE ? (int64_t)n : -1;
}
