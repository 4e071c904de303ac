/* Prepared requests: synthetic prompts sized in model tokens (optionally
 * after shared prefixes, or as the user messages of multi-turn
 * conversations), or a JSONL dataset (workload.h). The only bench file that
 * touches the tokenizer. Not here: sending, timing. */
#include "bench/workload/workload.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sbuf.h"
#include "bench/io/http_call.h"     /* /tokenize */
#include "bench/workload/dataset.h" /* dataset_parse: the formats of --dataset */
#include "model/gguf.h"             /* gguf_open for --tokenizer */
#include "model/tokenizer.h"        /* tokenizer_load / encode */

const char *bench_endpoint_path(bench_endpoint ep) {
    return ep == BENCH_EP_CHAT ? "/v1/chat/completions" : "/v1/completions";
}

/* ---- token counting: tokenizer, server /tokenize, or none ---------------------- */

typedef struct counter {
    const tokenizer *tok;
    bool server;    /* call is open on a /tokenize that answered */
    http_call call; /* /tokenize */
} counter;

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
    if (!c->server) return -1;
    json_t *req = json_pack("{s:s, s:b}", "content", text, "add_special", 1);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) return -1;
    tps_err e;
    int rc = http_call_do(&c->call, body, &e);
    free(body);
    if (rc || c->call.status != 200) return -1;
    json_t *j = json_loadb(c->call.body.p ? c->call.body.p : "", c->call.body.len, 0, NULL);
    json_t *toks = json_object_get(j, "tokens");
    int64_t n = json_is_array(toks) ? (int64_t)json_array_size(toks) : -1;
    json_decref(j);
    return n;
}

static void counter_close(counter *c) {
    if (c->server) http_call_close(&c->call);
    memset(c, 0, sizeof *c);
}

/* Tries the server's /tokenize once, the way the load client reaches the
 * server (key, --header, --insecure); keeps it only if it answers. */
static bool counter_open_server(counter *c, const char *url, const http_auth *auth) {
    const http_call_opts o = {
        .auth = auth, .timeout_ms = 10000, .connect_timeout_ms = 5000, .json = true};
    tps_err e;
    if (http_call_open(&c->call, url, &o, &e)) return false;
    c->server = true;
    if (count_tokens(c, "hello") > 0) return true;
    counter_close(c);
    return false;
}

/* ---- request bodies -------------------------------------------------------------- */

/* The fields every body of the workload carries besides its content and
 * max_tokens (kept in the workload: multi-turn bodies are built at send
 * time, when the options are gone). */
static json_t *body_common(const workload_opts *o, bool ignore_eos) {
    json_t *b = json_object();
    if (!b) return NULL;
    if (o->model) json_object_set_new(b, "model", json_string(o->model));
    json_object_set_new(b, "stream", json_true());
    if (o->include_usage)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (ignore_eos) json_object_set_new(b, "ignore_eos", json_true());
    if (o->temperature >= 0) json_object_set_new(b, "temperature", json_real(o->temperature));
    if (o->extra_body) {
        json_t *x = json_loads(o->extra_body, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(x)) json_object_update(b, x);
        json_decref(x);
    }
    return b;
}

const char *workload_extra_body_check(const char *s) {
    /* fields the workload writes itself: in --extra-body they would be
     * overridden or break the stream, so they are refused, naming the way */
    static const char *const OWN[][2] = {
        {"prompt", "has \"prompt\": the workload writes it (--input-len, --dataset)"},
        {"messages", "has \"messages\": the workload writes it (--endpoint chat)"},
        {"max_tokens", "has \"max_tokens\": the workload writes it (--output-len)"},
        {"stream", "has \"stream\": the bench always streams"},
        {"stream_options", "has \"stream_options\": the bench sets include_usage itself"},
        {"model", "has \"model\": use --model"},
        {"temperature", "has \"temperature\": use --temperature"},
        {"ignore_eos", "has \"ignore_eos\": use --ignore-eos / --no-ignore-eos"},
    };
    json_error_t je;
    json_t *x = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    const char *why = !x ? "is not JSON" : !json_is_object(x) ? "is not a JSON object" : NULL;
    for (size_t i = 0; !why && i < sizeof OWN / sizeof OWN[0]; i++)
        if (json_object_get(x, OWN[i][0])) why = OWN[i][1];
    json_decref(x);
    return why;
}

/* common + content + max_tokens as compact JSON in *out (malloc'ed). Takes
 * ownership of content: a prompt string, a messages array, or (chat) a
 * string that becomes the one user message. */
static int dump_body(json_t *common, json_t *content, bench_endpoint ep, uint32_t max_tokens,
                     char **out, size_t *len, tps_err *e) {
    json_t *b = content ? json_copy(common) : NULL; /* shallow: shares the values */
    if (b && ep == BENCH_EP_CHAT && json_is_string(content)) {
        content = json_pack("[{s:s, s:o}]", "role", "user", "content", content);
    }
    if (b && content) {
        json_object_set_new(b, ep == BENCH_EP_CHAT ? "messages" : "prompt", content);
        content = NULL;
        json_object_set_new(b, "max_tokens", json_integer(max_tokens));
        *out = json_dumps(b, JSON_COMPACT);
    } else {
        *out = NULL;
    }
    json_decref(content);
    json_decref(b);
    if (!*out) return tps_fail(e, TPS_ENOMEM, "cannot build a request body");
    *len = strlen(*out);
    return TPS_OK;
}

static int make_body(workload *w, workload_item *it, json_t *content, uint32_t max_tokens,
                     tps_err *e) {
    it->max_tokens = max_tokens;
    return dump_body(w->common, content, w->endpoint, max_tokens, &it->body, &it->body_len, e);
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

/* Appends to s (base/sbuf): TPS_ENOMEM once any append has failed. */
static int sb_addn(sbuf *s, const char *t, size_t n) {
    sbuf_add(s, t, n);
    return sbuf_failed(s) ? TPS_ENOMEM : TPS_OK;
}

static int sb_add(sbuf *s, const char *t) {
    return sb_addn(s, t, strlen(t));
}

/* Word boundaries to take words off again: a ring of the last MARKS_KEPT
 * ends, enough for the trim below, whatever the prompt's length. */
#define MARKS_KEPT 64

typedef struct marks {
    size_t at[MARKS_KEPT];
    size_t n; /* pushed, of which the last min(n, MARKS_KEPT) are kept */
    size_t popped;
} marks;

static void marks_push(marks *m, size_t len) {
    m->at[m->n++ % MARKS_KEPT] = len;
}

static bool marks_pop(marks *m, size_t *len) {
    if (m->n == 0 || m->popped == MARKS_KEPT) return false;
    *len = m->at[--m->n % MARKS_KEPT];
    m->popped++;
    return true;
}

/* Text of `target` tokens (as close as counting allows) after s's first
 * `keep` bytes (a shared prefix and its space, or nothing): "<number> "
 * then random words, adjusted by re-counting the whole text. Returns the
 * count reached (or target when nothing can count); -1 when counting
 * failed. Never removes any of the kept bytes. */
static int64_t synth_prompt(sbuf *s, size_t keep, size_t number, uint32_t target, counter *c,
                            tps_rng *r) {
    sbuf_truncate(s, keep);
    char head[32];
    snprintf(head, sizeof head, "%zu", number);
    if (sb_add(s, head)) return -1;
    marks mk = {0};
    const bool can_count = c->tok || c->server;
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
            marks_push(&mk, s->len);
            if (sb_add(s, " ") || sb_add(s, WORDS[load_rng_below(r, N_WORDS)])) return -1;
        }
        have = can_count ? count_tokens(c, s->p) : have + add;
        if (have < 0) return -1;
    }
    /* overshot: drop trailing words while that keeps us >= target, then pad */
    size_t at;
    for (int k = 0; k < MARKS_KEPT && have > (int64_t)target && marks_pop(&mk, &at); k++) {
        sbuf_truncate(s, at);
        have = count_tokens(c, s->p);
        if (have < 0) return -1;
        /* under again: try single-letter fillers, which are often one token */
        static const char *const FILL[] = {" a", " I", ".", ","};
        for (int f = 0; f < 4 && have < (int64_t)target; f++) {
            size_t keep_len = s->len;
            if (sb_add(s, FILL[f])) return -1;
            int64_t h2 = count_tokens(c, s->p);
            if (h2 < 0) return -1;
            if (h2 > (int64_t)target)
                sbuf_truncate(s, keep_len);
            else
                have = h2, f = -1;
        }
    }
    return have;
}

/* ---- shared prefixes ---------------------------------------------------------------- */

int workload_prefix_dist_parse(const char *s, double *zipf, tps_err *e) {
    if (!strcmp(s, "round-robin")) {
        *zipf = 0;
        return TPS_OK;
    }
    if (!strncmp(s, "zipf:", 5)) {
        char *end;
        double v = strtod(s + 5, &end);
        if (end != s + 5 && !*end && isfinite(v) && v > 0 && v <= 100) {
            *zipf = v;
            return TPS_OK;
        }
    }
    return tps_fail(e, TPS_EINVAL,
                    "--prefix-dist '%s': expected round-robin or zipf:S with 0 < S <= 100 "
                    "(zipf:1 is classic Zipf: prefix k is used 1/k as often as the first)",
                    s);
}

/* Which shared prefix the j-th prompt (or conversation) starts with. */
typedef struct prefix_picker {
    size_t k;
    double *cdf; /* (k,) cumulative Zipf weights; NULL: round robin */
    tps_rng r;
} prefix_picker;

static int picker_init(prefix_picker *p, size_t k, double zipf, uint64_t seed, tps_err *e) {
    memset(p, 0, sizeof *p);
    p->k = k;
    tps_rng_seed(&p->r, seed ^ 0x9f1e5eedull);
    if (zipf <= 0) return TPS_OK;
    p->cdf = malloc(k * sizeof *p->cdf);
    if (!p->cdf) return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu prefix weights", k);
    double sum = 0;
    for (size_t i = 0; i < k; i++)
        p->cdf[i] = sum += pow((double)(i + 1), -zipf);
    return TPS_OK;
}

static uint32_t picker_next(prefix_picker *p, size_t j) {
    if (!p->cdf) return (uint32_t)(j % p->k);
    double u = tps_rng_uniform_open(&p->r) * p->cdf[p->k - 1];
    size_t lo = 0, hi = p->k - 1; /* the first i with cdf[i] >= u */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint32_t)lo;
}

/* What sizing prompts needs of one shared prefix. */
typedef struct prefix_info {
    uint32_t tokens;       /* the prefix's count (BOS included) */
    size_t anchor;         /* byte where its last words, the anchor, begin */
    uint32_t anchor_count; /* the anchor's count on its own */
    int32_t *ids;          /* with the tokenizer: the prefix's ids, owned */
    size_t n_ids;
} prefix_info;

static void free_prefix_info(prefix_info *pi, size_t k) {
    for (size_t i = 0; pi && i < k; i++)
        free(pi[i].ids);
    free(pi);
}

/* The start of text's last few words: tokenizers work locally, so the own
 * part's tokens behind these words are its tokens behind the whole prefix. */
static size_t anchor_start(const char *text) {
    size_t n = strlen(text), words = 0;
    while (n > 0 && words < 4)
        if (text[--n] == ' ') words++;
    return words < 4 ? 0 : n + 1;
}

/* Prefix k's count, anchor and (with the tokenizer) ids. */
static int prefix_describe(prefix_info *pi, const char *text, int64_t count, counter *c,
                           tps_err *e) {
    pi->tokens = (uint32_t)count;
    pi->anchor = anchor_start(text);
    int64_t a = c->tok || c->server ? count_tokens(c, text + pi->anchor) : 1;
    if (a < 0) return tps_fail(e, TPS_EIO, "could not count the tokens of a shared prefix");
    pi->anchor_count = (uint32_t)a;
    if (!c->tok) return TPS_OK;
    return tokenizer_encode_alloc(c->tok, text, strlen(text), TOK_ENCODE_ADD_SPECIAL, &pi->ids,
                                  &pi->n_ids, e);
}

/* n_prefixes texts of prefix_len tokens: "<k> words ...", so different
 * prefixes part at their first words. */
static int build_prefixes(workload *w, prefix_info *pi, counter *c, const workload_opts *o,
                          tps_err *e) {
    w->prefixes = calloc(o->n_prefixes, sizeof *w->prefixes);
    if (!w->prefixes) return tps_fail(e, TPS_ENOMEM, "cannot allocate %u prefixes", o->n_prefixes);
    w->n_prefixes = o->n_prefixes;
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0x5a4ed0ull);
    sbuf s;
    sbuf_init(&s);
    int rc = TPS_OK;
    for (size_t k = 0; k < w->n_prefixes && rc == TPS_OK; k++) {
        int64_t got = synth_prompt(&s, 0, k, o->prefix_len, c, &r);
        if (got < 0)
            rc = tps_fail(e, TPS_EIO, "could not count the tokens of shared prefix %zu (%s)", k,
                          w->input_source);
        else if (!(w->prefixes[k] = strdup(s.p)))
            rc = tps_fail(e, TPS_ENOMEM, "cannot keep shared prefix %zu", k);
        else
            rc = prefix_describe(&pi[k], s.p, c->tok || c->server ? got : o->prefix_len, c, e);
    }
    free(s.p);
    return rc;
}

/* Tokens of a whole prompt that starts with prefix pi; -1 when counting
 * failed. With the tokenizer, *starts_ok says whether the prompt's ids begin
 * with exactly the prefix's ids (else a prefix cache could not serve all of
 * the prefix); other counters cannot tell and say yes. */
static int64_t count_prompt(counter *c, const char *text, const prefix_info *pi, bool *starts_ok) {
    *starts_ok = true;
    if (!c->tok) return count_tokens(c, text);
    int32_t *ids = NULL;
    size_t n = 0;
    tps_err e;
    if (tokenizer_encode_alloc(c->tok, text, strlen(text), TOK_ENCODE_ADD_SPECIAL, &ids, &n, &e))
        return -1;
    *starts_ok = n >= pi->n_ids && !memcmp(ids, pi->ids, pi->n_ids * sizeof *ids);
    free(ids);
    return (int64_t)n;
}

/* ---- synthetic workloads ----------------------------------------------------------- */

static void open_counter(workload *w, counter *c, const workload_opts *o) {
    if (w->tok) {
        c->tok = w->tok;
        w->input_source = "tokenizer";
    } else if (o->tokenize_url && counter_open_server(c, o->tokenize_url, &o->auth)) {
        w->input_source = "server /tokenize";
    } else {
        w->input_source = "approximate (words)";
    }
}

/* A single-turn prompt after shared prefix pfx into s: prefix + " " + an
 * own part of `in` tokens starting with the number i. The own part is sized
 * behind the prefix's anchor (a few re-counts of a short text), then the
 * whole prompt is counted once; if that disagrees, it is sized again
 * behind the whole prefix. *got: the whole prompt's count; *keep: where
 * the own part begins. */
static int prefixed_prompt(workload *w, sbuf *s, size_t *keep, int64_t *got, size_t i, uint32_t pfx,
                           uint32_t in, const prefix_info *pi, counter *c, tps_rng *r, tps_err *e) {
    const char *pre = w->prefixes[pfx], *anchor = pre + pi->anchor;
    const int64_t target = (int64_t)pi->tokens + in;
    sbuf_reset(s);
    if (sb_add(s, anchor) || sb_add(s, " ")) return tps_fail(e, TPS_ENOMEM, "out of memory");
    if (synth_prompt(s, s->len, i, pi->anchor_count + in, c, r) < 0) goto uncounted;
    char *own = strdup(s->p + strlen(anchor) + 1);
    sbuf_reset(s);
    int rc = !own || sb_add(s, pre) || sb_add(s, " ");
    *keep = s->len;
    rc = rc || sb_add(s, own);
    free(own);
    if (rc) return tps_fail(e, TPS_ENOMEM, "out of memory");
    bool starts_ok = true;
    *got = c->tok || c->server ? count_prompt(c, s->p, pi, &starts_ok) : target;
    if (*got >= 0 && *got != target) { /* the anchor misled: size it in place */
        if (synth_prompt(s, *keep, i, (uint32_t)target, c, r) < 0) goto uncounted;
        *got = count_prompt(c, s->p, pi, &starts_ok);
    }
    if (*got < 0) goto uncounted;
    if (!starts_ok)
        return tps_fail(e, TPS_EUNSUP,
                        "request %zu: this tokenizer merges the shared prefix's last token with "
                        "the text after it, so a prefix cache could not serve the whole prefix; "
                        "try another --prefix-len or --seed",
                        i);
    return TPS_OK;
uncounted:
    return tps_fail(e, TPS_EIO, "could not count the tokens of a synthetic prompt (%s)",
                    w->input_source);
}

/* The content of single-turn item i: the prompt text s (prefix + " " +
 * own part when it has a prefix); for chat with a prefix, the prefix as
 * the system message and the own part (from byte `own`) as the user's. */
static json_t *single_content(const workload *w, const char *s, size_t own, uint32_t pfx) {
    if (w->endpoint != BENCH_EP_CHAT || pfx == WL_NO_PREFIX) return json_string(s);
    return json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", w->prefixes[pfx],
                     "role", "user", "content", s + own);
}

/* Item i: its prefix, its text sized in tokens, then its body (single
 * turn) or its user message (multi-turn). */
static int build_item(workload *w, size_t i, sbuf *s, const prefix_info *pi, prefix_picker *pick,
                      counter *c, tps_rng *r, const workload_opts *o, tps_err *e) {
    workload_item *it = &w->items[i];
    uint32_t in = load_dist_sample(&o->input_len, r);
    uint32_t out = load_dist_sample(&o->output_len, r);
    it->prefix = WL_NO_PREFIX;
    if (w->prefixes && w->turns)
        it->prefix = i % w->turns ? w->items[i - 1].prefix : picker_next(pick, i / w->turns);
    else if (w->prefixes)
        it->prefix = picker_next(pick, i);
    /* single turn: the own part follows its prefix in one text */
    const bool prefixed = it->prefix != WL_NO_PREFIX && !w->turns;
    size_t keep = 0;
    const uint32_t target = prefixed ? pi[it->prefix].tokens + in : in;
    int64_t got = 0;
    if (prefixed) {
        int rc = prefixed_prompt(w, s, &keep, &got, i, it->prefix, in, &pi[it->prefix], c, r, e);
        if (rc) return rc;
    } else if ((got = synth_prompt(s, 0, i, in, c, r)) < 0) {
        return tps_fail(e, TPS_EIO, "could not count the tokens of a synthetic prompt (%s)",
                        w->input_source);
    }
    if (got != target) w->exact_inputs = false;
    it->input_target = target;
    it->input_tokens = c->tok || c->server ? (uint32_t)got : 0;
    if (w->turns) {
        /* the first turn also sends the conversation's prefix: the client's estimate of
         * a turn's prompt (client.c) adds up the items and replies so far */
        if (it->prefix != WL_NO_PREFIX && i % w->turns == 0 && it->input_tokens)
            it->input_tokens += pi[it->prefix].tokens;
        it->max_tokens = out;
        it->text_len = s->len;
        if (!(it->text = strdup(s->p))) return tps_fail(e, TPS_ENOMEM, "out of memory");
        return TPS_OK;
    }
    return make_body(w, it, single_content(w, s->p, keep, it->prefix), out, e);
}

static int build_synthetic(workload *w, const workload_opts *o, tps_err *e) {
    size_t n = o->n_items ? o->n_items : 1;
    if (o->turns && n % o->turns)
        return tps_fail(e, TPS_EINVAL, "%zu prompts are not whole conversations of %u turns", n,
                        o->turns);
    if (o->prefix_len && !o->n_prefixes)
        return tps_fail(e, TPS_EINVAL, "a shared prefix length needs at least one prefix");
    w->turns = o->turns;
    w->conversations = o->turns ? n / o->turns : 0;
    counter c = {0};
    open_counter(w, &c, o);
    w->exact_inputs = c.tok || c.server;
    int rc = TPS_OK;
    prefix_info *pi = NULL;
    prefix_picker pick = {0};
    sbuf s;
    sbuf_init(&s);
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0x5eedf00dull);
    if (!(w->items = calloc(n, sizeof *w->items))) {
        rc = tps_fail(e, TPS_ENOMEM, "cannot allocate %zu requests", n);
        goto done;
    }
    if (o->prefix_len) {
        if (!(pi = calloc(o->n_prefixes, sizeof *pi))) {
            rc = tps_fail(e, TPS_ENOMEM, "out of memory");
            goto done;
        }
        rc = build_prefixes(w, pi, &c, o, e);
        if (!rc) rc = picker_init(&pick, o->n_prefixes, o->prefix_zipf, o->seed, e);
        if (rc) goto done;
    }
    for (size_t i = 0; i < n && rc == TPS_OK; i++) {
        rc = build_item(w, i, &s, pi, &pick, &c, &r, o, e);
        if (rc == TPS_OK) w->n = i + 1;
    }
done:
    free(s.p);
    free(pick.cdf);
    free_prefix_info(pi, o->n_prefixes);
    counter_close(&c);
    return rc;
}

/* ---- multi-turn bodies at send time -------------------------------------------------- */

/* {"role": role, "content": text}; NULL when text is not UTF-8. */
static json_t *message(const char *role, const char *text, size_t len) {
    json_t *s = json_stringn(text, len);
    return s ? json_pack("{s:s, s:o}", "role", role, "content", s) : NULL;
}

static json_t *turn_messages(const workload_item *its, const char *prefix, uint32_t turn,
                             const char *const *replies, const size_t *reply_lens) {
    json_t *a = json_array();
    bool ok = a != NULL;
    if (ok && prefix) ok = json_array_append_new(a, message("system", prefix, strlen(prefix))) == 0;
    for (uint32_t k = 0; ok && k <= turn; k++) {
        ok = json_array_append_new(a, message("user", its[k].text, its[k].text_len)) == 0;
        if (ok && k < turn)
            ok = json_array_append_new(a, message("assistant", replies[k], reply_lens[k])) == 0;
    }
    if (ok) return a;
    json_decref(a);
    return NULL;
}

/* Completions: the text the model has seen so far, each reply right after
 * the prompt it continued, so every turn's prompt starts with the last one's
 * prompt and reply (what a prefix cache can serve). */
static json_t *turn_text(const workload_item *its, const char *prefix, uint32_t turn,
                         const char *const *replies, const size_t *reply_lens) {
    sbuf s;
    sbuf_init(&s);
    int rc = prefix ? sb_add(&s, prefix) : TPS_OK;
    for (uint32_t k = 0; rc == TPS_OK && k <= turn; k++) {
        if (s.len) rc = sb_add(&s, " ");
        if (!rc) rc = sb_addn(&s, its[k].text, its[k].text_len);
        if (!rc && k < turn) rc = sb_addn(&s, replies[k], reply_lens[k]);
    }
    json_t *j = rc == TPS_OK ? json_stringn(s.p, s.len) : NULL;
    free(s.p);
    return j;
}

int workload_turn_body(const workload *w, size_t conv, uint32_t turn, const char *const *replies,
                       const size_t *reply_lens, char **body, size_t *body_len, tps_err *e) {
    if (!w->turns || conv >= w->conversations || turn >= w->turns)
        return tps_fail(e, TPS_EINVAL, "no turn %u of conversation %zu in this workload", turn,
                        conv);
    const workload_item *its = &w->items[conv * w->turns];
    if (!its[turn].text)
        return tps_fail(e, TPS_EINVAL, "conversation %zu has %u turns, not %u", conv,
                        workload_conv_turns(w, conv), turn + 1);
    const char *prefix = its[0].prefix != WL_NO_PREFIX ? w->prefixes[its[0].prefix] : NULL;
    json_t *content = w->endpoint == BENCH_EP_CHAT
                          ? turn_messages(its, prefix, turn, replies, reply_lens)
                          : turn_text(its, prefix, turn, replies, reply_lens);
    if (!content)
        return tps_fail(e, TPS_EINVAL,
                        "cannot build turn %u of conversation %zu: a reply is not valid UTF-8 "
                        "(or out of memory)",
                        turn + 1, conv);
    return dump_body(w->common, content, w->endpoint, its[turn].max_tokens, body, body_len, e);
}

uint32_t workload_conv_turns(const workload *w, size_t conv) {
    if (!w->turns || conv >= w->conversations) return 0;
    const workload_item *its = &w->items[conv * w->turns];
    uint32_t t = 0;
    while (t < w->turns && its[t].text)
        t++;
    return t;
}

/* ---- dataset ----------------------------------------------------------------------- */

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

/* A trace's block texts: one per hash_id, DATASET_BLOCK_TOKENS tokens
 * (without BOS), made on first use and kept for every request naming it.
 * Open addressing, linear probing, at most half full. */
typedef struct block_cache {
    uint64_t *ids;
    char **texts; /* (cap,), owned; NULL: free slot */
    size_t cap, n;
} block_cache;

static void block_cache_free(block_cache *bc) {
    for (size_t k = 0; k < bc->cap; k++)
        free(bc->texts[k]);
    free(bc->ids);
    free(bc->texts);
    memset(bc, 0, sizeof *bc);
}

static size_t block_slot(const block_cache *bc, uint64_t id) {
    size_t k = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & (bc->cap - 1);
    while (bc->texts[k] && bc->ids[k] != id)
        k = (k + 1) & (bc->cap - 1);
    return k;
}

static int block_cache_grow(block_cache *bc) {
    block_cache nb = {.cap = bc->cap ? bc->cap * 2 : 64};
    nb.ids = calloc(nb.cap, sizeof *nb.ids);
    nb.texts = calloc(nb.cap, sizeof *nb.texts);
    if (!nb.ids || !nb.texts) {
        free(nb.ids);
        free(nb.texts);
        return TPS_ENOMEM;
    }
    for (size_t k = 0; k < bc->cap; k++) {
        if (!bc->texts[k]) continue;
        size_t s = block_slot(&nb, bc->ids[k]);
        nb.ids[s] = bc->ids[k];
        nb.texts[s] = bc->texts[k];
    }
    nb.n = bc->n;
    free(bc->ids);
    free(bc->texts);
    *bc = nb;
    return TPS_OK;
}

/* The text of block `id` (borrowed from the cache): "<id>" then random words
 * drawn from a generator seeded by the id, so it depends on nothing else. */
static const char *block_text(block_cache *bc, uint64_t id, int64_t bos, counter *c,
                              uint64_t seed) {
    if ((bc->n + 1) * 2 > bc->cap && block_cache_grow(bc)) return NULL;
    size_t k = block_slot(bc, id);
    if (bc->texts[k]) return bc->texts[k];
    tps_rng r;
    tps_rng_seed(&r, seed ^ (id * 0xb10c5eedull + 0x51ull));
    sbuf s;
    sbuf_init(&s);
    if (synth_prompt(&s, 0, (size_t)id, DATASET_BLOCK_TOKENS + (uint32_t)bos, c, &r) < 0) {
        free(s.p);
        return NULL;
    }
    bc->ids[k] = id;
    bc->texts[k] = s.p;
    bc->n++;
    return s.p;
}

/* Item it from trace entry en (request number i): its shared blocks (as many
 * whole blocks of hash_ids as fit before a short own part), a space, then
 * its own part "<i> words...", sized so the whole prompt has input_length
 * tokens (BOS included, as the server counts). */
static int trace_item(workload *w, workload_item *it, const dataset_entry *en, size_t i,
                      block_cache *bc, int64_t bos, sbuf *s, counter *c, tps_rng *r,
                      const workload_opts *o, tps_err *e) {
    enum { OWN_MIN = 8 }; /* tokens left for the own part at least */
    size_t blocks = 0;
    while (blocks < en->n_hash_ids &&
           (uint64_t)bos + (uint64_t)(blocks + 1) * DATASET_BLOCK_TOKENS + OWN_MIN <= en->input_len)
        blocks++;
    sbuf_reset(s);
    for (size_t b = 0; b < blocks; b++) {
        const char *t = block_text(bc, en->hash_ids[b], bos, c, o->seed);
        if (!t) return tps_fail(e, TPS_EIO, "request %zu: could not build block %zu", i, b);
        if (sb_add(s, t) || sb_add(s, " ")) return tps_fail(e, TPS_ENOMEM, "out of memory");
    }
    int64_t got = synth_prompt(s, s->len, i, en->input_len, c, r);
    if (got < 0)
        return tps_fail(e, TPS_EIO, "could not count the tokens of a trace prompt (%s)",
                        w->input_source);
    if (got != en->input_len) w->exact_inputs = false;
    it->input_target = en->input_len;
    it->input_tokens = c->tok || c->server ? (uint32_t)got : 0;
    return make_body(w, it, json_string(s->p), en->max_tokens, e);
}

/* The trace's items: prompts from shared blocks, send times from the
 * timestamps. */
static int trace_items(workload *w, const dataset *d, size_t n0, const workload_opts *o,
                       tps_err *e) {
    const double speed = o->trace_speed > 0 ? o->trace_speed : 1;
    counter c = {0};
    open_counter(w, &c, o);
    w->exact_inputs = c.tok || c.server;
    int64_t bos = c.tok || c.server ? count_tokens(&c, "") : 0;
    if (bos < 0) bos = 0;
    block_cache bc = {0};
    sbuf s;
    sbuf_init(&s);
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0x7ace5eedull);
    int rc = TPS_OK;
    for (size_t k = 0; k < d->n && rc == TPS_OK; k++) {
        workload_item *it = &w->items[n0 + k];
        rc = trace_item(w, it, &d->entries[k], n0 + k, &bc, bos, &s, &c, &r, o, e);
        it->send_at_s = (d->entries[k].timestamp_ms - d->entries[0].timestamp_ms) / 1e3 / speed;
        if (rc == TPS_OK) w->n++;
    }
    free(s.p);
    block_cache_free(&bc);
    counter_close(&c);
    if (rc == TPS_OK) w->timed = true;
    return rc;
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
        rc = make_body(w, &w->items[n0 + k], json_incref(en->content), out, e);
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
    if (!w->common && !(w->common = body_common(o, o->ignore_eos == 1)))
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    dataset d;
    int rc = dataset_parse(&d, buf, len, name, o->endpoint == BENCH_EP_CHAT, e);
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
        rc = d.format == DATASET_TRACE ? trace_items(w, &d, n0, o, e)
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
    if (o->dataset && o->prefix_len)
        return tps_fail(e, TPS_EINVAL,
                        "--prefix-len with --dataset: shared prefixes are a synthetic workload; "
                        "the dataset's prompts are sent as they are");
    int rc;
    if (o->tokenizer_path) {
        gguf_file *f = NULL;
        if ((rc = gguf_open(&f, o->tokenizer_path, e))) return rc;
        rc = tokenizer_load(&w->tok, f, e);
        gguf_close(f);
        if (rc) return rc;
    }
    w->endpoint = o->endpoint;
    /* synthetic prompts ask for all max_tokens by default; datasets keep EOS */
    w->common = body_common(o, o->dataset ? o->ignore_eos == 1 : o->ignore_eos != 0);
    if (!w->common)
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    else
        rc = o->dataset ? build_dataset(w, o, e) : build_synthetic(w, o, e);
    if (rc) workload_free(w);
    return rc;
}

void workload_free(workload *w) {
    for (size_t i = 0; i < w->n; i++) {
        free(w->items[i].body);
        free(w->items[i].text);
    }
    free(w->items);
    for (size_t k = 0; k < w->n_prefixes; k++)
        free(w->prefixes[k]);
    free(w->prefixes);
    json_decref(w->common);
    tokenizer_free(w->tok);
    memset(w, 0, sizeof *w);
}

const char *workload_dataset_format(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    enum { HEAD = 1 << 16 }; /* enough for a trace's first line */
    char *buf = malloc(HEAD);
    size_t len = buf ? fread(buf, 1, HEAD, fp) : 0;
    fclose(fp);
    const char *f = buf ? dataset_format_name(dataset_detect(buf, len)) : NULL;
    free(buf);
    return f;
}

int64_t workload_count_tokens(const workload *w, const char *text, size_t len) {
    if (!w || !w->tok) return -1;
    int32_t one[1];
    size_t n = 0;
    tps_err e;
    int rc = tokenizer_encode(w->tok, text, len, 0, one, 1, &n, &e);
    return rc == 0 || rc == TPS_ERANGE ? (int64_t)n : -1;
}
