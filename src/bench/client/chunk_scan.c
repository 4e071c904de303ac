/* The in-place reader of one OpenAI stream event (chunk.h): the few fields the
 * bench needs, read straight from the event's bytes in one pass, with no
 * JSON tree and no allocation -- the per-event fast path of bench_chunk_parse.
 *
 * It must say exactly what the jansson reader (chunk.c) says, so it validates
 * the whole event as jansson 2.14 would (strict JSON, UTF-8, paired
 * surrogates, no duplicate keys, integers within long long, reals without
 * overflow) and declines -- returns false, and jansson decides -- whenever it
 * is not sure: malformed JSON, an error event, an escaped key, nesting deeper
 * than SCAN_DEPTH, more than SCAN_KEYS open keys, a long number, text that
 * needs unescaping past the chunk's text_buf, \u0000 (which jansson reads,
 * with JSON_ALLOW_NUL, into text with a NUL in it). Numbers go through strtoll /
 * strtod as jansson's do (the C locale: nothing in tps calls setlocale).
 * Not here: error messages, SSE framing, counting policy (client.c). */
#include "bench/client/chunk.h"
#include "bench/client/chunk_table.h" /* which delta fields carry what */
#include "base/utf8.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SCAN_DEPTH = 32, SCAN_KEYS = 64, NUM_MAX = 40 };

/* ---- values and the scanner state -------------------------------------------------------------
 */

typedef enum vkind { V_ABSENT, V_NULL, V_BOOL, V_INT, V_REAL, V_STR, V_ARR, V_OBJ } vkind;

/* One member's value as jansson would type it. V_STR: p/len are the raw
 * bytes between the quotes; V_INT/V_REAL: the number's text; V_ARR: len is
 * the element count. */
typedef struct val {
    const char *p;
    size_t len;
    vkind kind;
    bool esc; /* V_STR: has escapes */
} val;

typedef struct scan {
    const char *p, *end;
    int depth;
    int nkeys; /* keys of the objects now open, for duplicate checks */
    const char *key[SCAN_KEYS];
    size_t key_len[SCAN_KEYS];
} scan;

/* Reads the value of member k (klen bytes) of an object; s->p at the value. */
typedef bool (*member_fn)(scan *s, void *ctx, const char *k, size_t klen);

static bool scan_value(scan *s, val *v);

static inline void skip_ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

static inline bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* ---- strings ------------------------------------------------------------------------------- */

static bool hex4(const unsigned char *q, const unsigned char *end, uint32_t *out) {
    if (end - q < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = q[i];
        uint32_t d = h >= '0' && h <= '9'   ? (uint32_t)(h - '0')
                     : h >= 'a' && h <= 'f' ? (uint32_t)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (uint32_t)(h - 'A' + 10)
                                            : 16;
        if (d == 16) return false;
        v = v << 4 | d;
    }
    *out = v;
    return true;
}

/* A \uXXXX escape at q (q[0] == '\\', q[1] == 'u'), with its low half when
 * it is a high surrogate: the code point and the bytes it spans, or 0 when
 * jansson would reject it (a lone or reversed surrogate) or the scanner
 * leaves it to jansson (\u0000). */
static size_t u_escape(const unsigned char *q, const unsigned char *end, uint32_t *cp) {
    uint32_t hi, lo;
    if (!hex4(q + 2, end, &hi) || hi == 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return 0;
    if (hi < 0xD800 || hi > 0xDBFF) {
        *cp = hi;
        return 6;
    }
    if (end - q < 12 || q[6] != '\\' || q[7] != 'u' || !hex4(q + 8, end, &lo) || lo < 0xDC00 ||
        lo > 0xDFFF)
        return 0;
    *cp = ((hi - 0xD800) << 10) + (lo - 0xDC00) + 0x10000;
    return 12;
}

/* s->p at the opening quote. */
static bool scan_string(scan *s, val *v) {
    const unsigned char *q = (const unsigned char *)s->p + 1, *end = (const unsigned char *)s->end;
    bool esc = false;
    while (q < end) {
        unsigned char ch = *q;
        if (ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\') {
            q++;
        } else if (ch == '"') {
            *v = (val){.p = s->p + 1,
                       .len = (size_t)((const char *)q - s->p - 1),
                       .kind = V_STR,
                       .esc = esc};
            s->p = (const char *)q + 1;
            return true;
        } else if (ch == '\\') {
            esc = true;
            if (end - q < 2) return false;
            uint32_t cp;
            switch (q[1]) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                q += 2;
                break;
            case 'u': {
                size_t n = u_escape(q, end, &cp);
                if (!n) return false;
                q += n;
                break;
            }
            default:
                return false;
            }
        } else if (ch >= 0x80) {
            size_t n = utf8_len(q, (size_t)(end - q));
            if (!n) return false;
            q += n;
        } else {
            return false; /* a control character */
        }
    }
    return false;
}

/* The string v (V_STR with escapes) unescaped into buf: its length, or
 * SIZE_MAX when it does not fit. v was validated by scan_string. */
static size_t unescape(const val *v, char *buf, size_t cap) {
    const unsigned char *q = (const unsigned char *)v->p, *end = q + v->len;
    size_t n = 0;
    while (q < end) {
        if (*q != '\\') {
            if (n == cap) return SIZE_MAX;
            buf[n++] = (char)*q++;
            continue;
        }
        char c = 0;
        switch (q[1]) {
        case '"':
            c = '"';
            break;
        case '\\':
            c = '\\';
            break;
        case '/':
            c = '/';
            break;
        case 'b':
            c = '\b';
            break;
        case 'f':
            c = '\f';
            break;
        case 'n':
            c = '\n';
            break;
        case 'r':
            c = '\r';
            break;
        case 't':
            c = '\t';
            break;
        default:
            break;
        }
        if (c) {
            if (n == cap) return SIZE_MAX;
            buf[n++] = c;
            q += 2;
            continue;
        }
        uint32_t cp = 0;
        q += u_escape(q, end, &cp);
        unsigned char u[4];
        size_t k;
        if (cp < 0x80)
            u[0] = (unsigned char)cp, k = 1;
        else if (cp < 0x800)
            u[0] = (unsigned char)(0xC0 | cp >> 6), u[1] = (unsigned char)(0x80 | (cp & 0x3F)),
            k = 2;
        else if (cp < 0x10000)
            u[0] = (unsigned char)(0xE0 | cp >> 12),
            u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)),
            u[2] = (unsigned char)(0x80 | (cp & 0x3F)), k = 3;
        else
            u[0] = (unsigned char)(0xF0 | cp >> 18),
            u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F)),
            u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)),
            u[3] = (unsigned char)(0x80 | (cp & 0x3F)), k = 4;
        if (cap - n < k) return SIZE_MAX;
        memcpy(buf + n, u, k);
        n += k;
    }
    return n;
}

/* ---- numbers and literals ------------------------------------------------------------------ */

/* The number v's text, NUL-terminated in buf[NUM_MAX + 1]. */
static void num_text(const val *v, char *buf) {
    memcpy(buf, v->p, v->len);
    buf[v->len] = 0;
}

/* JSON's number grammar (as jansson lexes it); integers that do not fit a
 * long long and reals that overflow are what jansson rejects. */
static bool scan_number(scan *s, val *v) {
    const char *q = s->p, *end = s->end;
    size_t digits = 0;
    bool real = false, expo = false;
    if (q < end && *q == '-') q++;
    if (q < end && *q == '0') {
        q++, digits = 1;
        if (q < end && is_digit(*q)) return false;
    } else if (q < end && is_digit(*q)) {
        while (q < end && is_digit(*q))
            q++, digits++;
    } else {
        return false;
    }
    if (q < end && *q == '.') {
        q++, real = true;
        if (q >= end || !is_digit(*q)) return false;
        while (q < end && is_digit(*q))
            q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++, real = expo = true;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q)) return false;
        while (q < end && is_digit(*q))
            q++;
    }
    *v = (val){.p = s->p, .len = (size_t)(q - s->p), .kind = real ? V_REAL : V_INT};
    s->p = q;
    if (v->len > NUM_MAX) return false; /* rare: let jansson judge it */
    if ((!real && digits >= 19) || expo) {
        char buf[NUM_MAX + 1];
        num_text(v, buf);
        errno = 0;
        if (!real) {
            (void)strtoll(buf, NULL, 10);
            if (errno == ERANGE) return false;
        } else {
            double d = strtod(buf, NULL);
            if ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE) return false;
        }
    }
    return true;
}

/* The value of number v as jansson holds it (json_number_value). */
static double num_value(const val *v) {
    char buf[NUM_MAX + 1];
    num_text(v, buf);
    return v->kind == V_INT ? (double)strtoll(buf, NULL, 10) : strtod(buf, NULL);
}

/* A non-negative integer, or -1 when v is absent, null, negative or not an
 * integer (chunk.c's count_field). */
static int64_t count_value(const val *v) {
    if (v->kind != V_INT) return -1;
    char buf[NUM_MAX + 1];
    num_text(v, buf);
    long long n = strtoll(buf, NULL, 10);
    return n >= 0 ? (int64_t)n : -1;
}

static bool literal(scan *s, const char *word, size_t n, vkind k, val *v) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n)) return false;
    *v = (val){.p = s->p, .len = n, .kind = k};
    s->p += n;
    return true;
}

/* ---- containers ---------------------------------------------------------------------------- */

/* s->p at a container's opening byte: steps in (false past SCAN_DEPTH);
 * *empty when `close` follows at once (then consumed, the depth back). */
static bool enter(scan *s, char close, bool *empty) {
    if (++s->depth > SCAN_DEPTH) return false;
    s->p++;
    skip_ws(s);
    *empty = s->p < s->end && *s->p == close;
    if (*empty) {
        s->p++;
        s->depth--;
    }
    return true;
}

/* After an element: 1 when `close` ends the container (consumed, the
 * depth back), 0 at the next element (past the ','), -1 when malformed. */
static int after_item(scan *s, char close) {
    skip_ws(s);
    if (s->p >= s->end) return -1;
    if (*s->p == close) {
        s->p++;
        s->depth--;
        return 1;
    }
    if (*s->p != ',') return -1;
    s->p++;
    skip_ws(s);
    return 0;
}

/* s->p at '{'. Each member's value goes to f, which must consume it. */
static bool scan_object(scan *s, member_fn f, void *ctx) {
    const int base = s->nkeys;
    bool empty;
    if (!enter(s, '}', &empty)) return false;
    if (empty) return true;
    for (int next = 0; !next;) {
        val k;
        if (s->p >= s->end || *s->p != '"' || !scan_string(s, &k) || k.esc) return false;
        for (int i = base; i < s->nkeys; i++)
            if (s->key_len[i] == k.len && !memcmp(s->key[i], k.p, k.len))
                return false; /* JSON_REJECT_DUPLICATES */
        if (s->nkeys == SCAN_KEYS) return false;
        s->key[s->nkeys] = k.p;
        s->key_len[s->nkeys++] = k.len;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return false;
        s->p++;
        skip_ws(s);
        if (s->p >= s->end || !f(s, ctx, k.p, k.len)) return false;
        if ((next = after_item(s, '}')) < 0) return false;
    }
    s->nkeys = base;
    return true;
}

static bool skip_member(scan *s, void *ctx, const char *k, size_t klen) {
    val v;
    return scan_value(s, &v);
}

/* s->p at '['. v->len counts the elements; when first is given and the
 * first element is an object, first reads it (first_obj: whether it was). */
static bool scan_array(scan *s, val *v, member_fn first, void *ctx, bool *first_obj) {
    const char *start = s->p;
    bool empty;
    if (!enter(s, ']', &empty)) return false;
    *v = (val){.p = start, .kind = V_ARR};
    if (empty) return true;
    for (int next = 0; !next;) {
        if (s->p >= s->end) return false;
        if (v->len == 0 && first && *s->p == '{') {
            *first_obj = true;
            if (!scan_object(s, first, ctx)) return false;
        } else {
            val e;
            if (!scan_value(s, &e)) return false;
        }
        v->len++;
        if ((next = after_item(s, ']')) < 0) return false;
    }
    return true;
}

/* s->p at the value's first byte. */
static bool scan_value(scan *s, val *v) {
    if (s->p >= s->end) return false;
    switch (*s->p) {
    case '"':
        return scan_string(s, v);
    case '{':
        *v = (val){.p = s->p, .kind = V_OBJ};
        return scan_object(s, skip_member, NULL);
    case '[':
        return scan_array(s, v, NULL, NULL, NULL);
    case 't':
        return literal(s, "true", 4, V_BOOL, v);
    case 'f':
        return literal(s, "false", 5, V_BOOL, v);
    case 'n':
        return literal(s, "null", 4, V_NULL, v);
    default:
        return scan_number(s, v);
    }
}

/* An object member read by f when it is an object, else typed as any value. */
static bool member_obj(scan *s, val *v, member_fn f, void *ctx) {
    if (*s->p != '{') return scan_value(s, v);
    *v = (val){.p = s->p, .kind = V_OBJ};
    return scan_object(s, f, ctx);
}

/* ---- the fields of an event ------------------------------------------------------------------ */

#define KEY_IS(lit) (klen == sizeof lit - 1 && !memcmp(k, lit, sizeof lit - 1))

typedef struct ids_vals {
    val token_ids, tokens;
} ids_vals;

typedef struct msg_vals { /* choices[0].delta or .message */
    val content, reasoning_content, reasoning, refusal, role;
    val call_args;      /* tool_calls[0].function.arguments */
    val fn_args;        /* function_call.arguments (the legacy shape) */
    const char *unread; /* the first (by name) member with text and no row */
    size_t unread_len;
    ids_vals ids;
} msg_vals;

typedef struct choice_vals { /* choices[0] */
    val text, finish, delta, message;
    msg_vals d, m;
    ids_vals ids;
} choice_vals;

static const char *const TIMING_KEYS[] = {
    "queue_ms",      "prefill_ms", "prompt_ms",         "decode_ms",   "predicted_ms", "ttft_ms",
    "prompt_tokens", "prompt_n",   "completion_tokens", "predicted_n", "preemptions",  "cache_n"};
enum { N_TIMING_KEYS = sizeof TIMING_KEYS / sizeof TIMING_KEYS[0] };

typedef struct root_vals {
    val error, choices, usage, timings;
    ids_vals ids;
    bool first_obj; /* choices[0] is an object */
    choice_vals ch;
    val prompt_tokens, completion_tokens, details, cached; /* usage */
    val cdetails, reasoning_tokens;                        /* usage.completion_tokens_details */
    val tm[N_TIMING_KEYS];                                 /* timings, by TIMING_KEYS */
} root_vals;

static bool ids_member(scan *s, ids_vals *x, const char *k, size_t klen, bool *taken) {
    *taken = true;
    if (KEY_IS("token_ids")) return scan_value(s, &x->token_ids);
    if (KEY_IS("tokens")) return scan_value(s, &x->tokens);
    *taken = false;
    return true;
}

static bool call_fn_member(scan *s, void *ctx, const char *k, size_t klen) {
    val *args = ctx;
    if (KEY_IS("arguments")) return scan_value(s, args);
    return skip_member(s, NULL, k, klen);
}

static bool call_member(scan *s, void *ctx, const char *k, size_t klen) { /* tool_calls[0] */
    msg_vals *m = ctx;
    val v;
    if (KEY_IS("function")) return member_obj(s, &v, call_fn_member, &m->call_args);
    return skip_member(s, NULL, k, klen);
}

static bool msg_member(scan *s, void *ctx, const char *k, size_t klen) {
    msg_vals *m = ctx;
    bool taken;
    val v;
    if (KEY_IS("tool_calls")) {
        bool first_obj = false;
        if (*s->p != '[') return scan_value(s, &v);
        return scan_array(s, &v, call_member, m, &first_obj);
    }
    if (KEY_IS("function_call")) return member_obj(s, &v, call_fn_member, &m->fn_args);
    if (KEY_IS("content")) return scan_value(s, &m->content);
    if (KEY_IS("reasoning_content")) return scan_value(s, &m->reasoning_content);
    if (KEY_IS("reasoning")) return scan_value(s, &m->reasoning);
    if (KEY_IS("refusal")) return scan_value(s, &m->refusal);
    if (KEY_IS("role")) return scan_value(s, &m->role);
    if (!ids_member(s, &m->ids, k, klen, &taken)) return false;
    if (taken) return true;
    if (!scan_value(s, &v)) return false;
    int part = chunk_openai_field(k, klen);
    if (part < 0 && v.kind == V_STR && v.len &&
        (!m->unread || chunk_unread_before(k, klen, m->unread, m->unread_len))) {
        m->unread = k;
        m->unread_len = klen;
    }
    return true;
}

static bool choice_member(scan *s, void *ctx, const char *k, size_t klen) {
    choice_vals *c = ctx;
    bool taken;
    if (KEY_IS("text")) return scan_value(s, &c->text);
    if (KEY_IS("finish_reason")) return scan_value(s, &c->finish);
    if (KEY_IS("delta")) return member_obj(s, &c->delta, msg_member, &c->d);
    if (KEY_IS("message")) return member_obj(s, &c->message, msg_member, &c->m);
    if (!ids_member(s, &c->ids, k, klen, &taken)) return false;
    return taken || skip_member(s, NULL, k, klen);
}

static bool details_member(scan *s, void *ctx, const char *k, size_t klen) {
    root_vals *r = ctx;
    if (KEY_IS("cached_tokens")) return scan_value(s, &r->cached);
    return skip_member(s, NULL, k, klen);
}

static bool cdetails_member(scan *s, void *ctx, const char *k, size_t klen) {
    root_vals *r = ctx;
    if (KEY_IS("reasoning_tokens")) return scan_value(s, &r->reasoning_tokens);
    return skip_member(s, NULL, k, klen);
}

static bool usage_member(scan *s, void *ctx, const char *k, size_t klen) {
    root_vals *r = ctx;
    if (KEY_IS("completion_tokens_details")) return member_obj(s, &r->cdetails, cdetails_member, r);
    if (KEY_IS("prompt_tokens")) return scan_value(s, &r->prompt_tokens);
    if (KEY_IS("completion_tokens")) return scan_value(s, &r->completion_tokens);
    if (KEY_IS("prompt_tokens_details")) return member_obj(s, &r->details, details_member, r);
    return skip_member(s, NULL, k, klen);
}

static bool timings_member(scan *s, void *ctx, const char *k, size_t klen) {
    root_vals *r = ctx;
    for (int i = 0; i < N_TIMING_KEYS; i++)
        if (strlen(TIMING_KEYS[i]) == klen && !memcmp(TIMING_KEYS[i], k, klen))
            return scan_value(s, &r->tm[i]);
    return skip_member(s, NULL, k, klen);
}

static bool root_member(scan *s, void *ctx, const char *k, size_t klen) {
    root_vals *r = ctx;
    bool taken;
    if (KEY_IS("choices")) {
        if (*s->p != '[') return scan_value(s, &r->choices);
        return scan_array(s, &r->choices, choice_member, &r->ch, &r->first_obj);
    }
    if (KEY_IS("usage")) return member_obj(s, &r->usage, usage_member, r);
    if (KEY_IS("timings")) return member_obj(s, &r->timings, timings_member, r);
    if (KEY_IS("error")) return scan_value(s, &r->error);
    if (!ids_member(s, &r->ids, k, klen, &taken)) return false;
    return taken || skip_member(s, NULL, k, klen);
}

/* ---- the chunk, as chunk.c builds it ------------------------------------------------------------
 */

static bool take_ids(bench_chunk *c, const ids_vals *x) {
    const val *v = x->token_ids.kind == V_ARR ? &x->token_ids : &x->tokens;
    if (v->kind != V_ARR) return false;
    c->tokens = (uint32_t)v->len;
    c->from_ids = true;
    return true;
}

/* false: the text needs more unescaping room than text_buf has. */
static bool take_text(bench_chunk *c, const val *v, bool reasoning) {
    if (v->kind != V_STR || v->len == 0 || c->text) return true;
    if (v->esc) {
        size_t n = unescape(v, c->text_buf, sizeof c->text_buf - 1);
        if (n == SIZE_MAX) return false;
        c->text_buf[n] = 0;
        c->text = c->text_buf;
        c->text_len = n;
    } else {
        c->text = v->p;
        c->text_len = v->len;
    }
    c->reasoning = reasoning;
    return true;
}

static double tm_or(const root_vals *r, int i, double dflt) {
    const val *v = &r->tm[i];
    return v->kind == V_INT || v->kind == V_REAL ? num_value(v) : dflt;
}

static void take_timings(bench_chunk *c, const root_vals *r) {
    bench_timings *x = &c->timings;
    x->queue_ms = tm_or(r, 0, -1);
    x->prefill_ms = tm_or(r, 1, tm_or(r, 2, -1));
    x->decode_ms = tm_or(r, 3, tm_or(r, 4, -1));
    x->ttft_ms = tm_or(r, 5, -1);
    x->prompt_tokens = (int64_t)tm_or(r, 6, tm_or(r, 7, -1));
    x->completion_tokens = (int64_t)tm_or(r, 8, tm_or(r, 9, -1));
    x->preemptions = (int64_t)tm_or(r, 10, -1);
    c->has_timings = true;
    int64_t n = count_value(&r->tm[11]);
    if (n >= 0 && !c->cached_from_usage) {
        c->has_cached = true;
        c->cached_tokens = (uint64_t)n;
    }
}

bool bench_chunk_scan(bench_chunk *c, const char *data, size_t len, const char *event) {
    memset(c, 0, offsetof(bench_chunk, text_buf));
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        c->done = true;
        return true;
    }
    if (event && !strcmp(event, "error")) return false; /* rare: jansson reads errors */
    scan s = {.p = data, .end = data + len};
    root_vals r = {0};
    skip_ws(&s);
    if (s.p >= s.end || *s.p != '{' || !scan_object(&s, root_member, &r)) return false;
    skip_ws(&s);
    if (s.p != s.end) return false;
    if (r.error.kind != V_ABSENT && r.error.kind != V_NULL) return false;

    bool ids = take_ids(c, &r.ids);
    if (r.first_obj) {
        const choice_vals *ch = &r.ch;
        if (!take_text(c, &ch->text, false)) return false;
        const msg_vals *m = ch->delta.kind == V_OBJ     ? &ch->d
                            : ch->message.kind == V_OBJ ? &ch->m
                                                        : NULL;
        if (m) {
            /* the table's order (chunk_table.c): the first text wins */
            if (!take_text(c, &m->content, false) || !take_text(c, &m->reasoning_content, true) ||
                !take_text(c, &m->reasoning, true) || !take_text(c, &m->refusal, false) ||
                !take_text(c, &m->call_args, false) || !take_text(c, &m->fn_args, false))
                return false;
            if (!ids) ids = take_ids(c, &m->ids);
            if (m->unread)
                snprintf(c->unread, sizeof c->unread, "%s.%.*s", m == &ch->d ? "delta" : "message",
                         (int)m->unread_len, m->unread);
        }
        if (!ids) ids = take_ids(c, &ch->ids);
        c->finished = ch->finish.kind != V_ABSENT && ch->finish.kind != V_NULL;
        bool empty = ch->text.kind == V_STR && ch->text.len == 0;
        if (m && m->role.kind == V_ABSENT) empty |= m->content.kind == V_STR && m->content.len == 0;
        c->empty_text = empty && !ids && !c->text && !c->finished;
    }
    if (!ids && c->text) c->tokens = 1;

    if (r.usage.kind == V_OBJ) {
        int64_t ct = count_value(&r.completion_tokens), pt = count_value(&r.prompt_tokens);
        int64_t rt = r.cdetails.kind == V_OBJ ? count_value(&r.reasoning_tokens) : -1;
        int64_t n = r.details.kind == V_OBJ ? count_value(&r.cached) : -1;
        chunk_take_usage(c, ct, ct >= 0 ? pt : -1, rt, n);
    }
    if (r.timings.kind == V_OBJ) take_timings(c, &r);
    return true;
}

/* ---- comparing two readings --------------------------------------------------------------------
 */

bool bench_chunk_same(const bench_chunk *a, const bench_chunk *b, const char **field) {
#define SAME(f)                                                                                    \
    if (memcmp(&a->f, &b->f, sizeof a->f)) {                                                       \
        *field = #f;                                                                               \
        return false;                                                                              \
    }
    SAME(done)
    SAME(error)
    if (a->error && strcmp(a->error_msg, b->error_msg)) {
        *field = "error_msg";
        return false;
    }
    SAME(tokens)
    SAME(from_ids)
    SAME(text_len)
    if (!a->text != !b->text || (a->text && memcmp(a->text, b->text, a->text_len))) {
        *field = "text";
        return false;
    }
    SAME(reasoning)
    SAME(finished)
    SAME(empty_text)
    SAME(has_usage)
    SAME(has_prompt)
    SAME(prompt_tokens)
    SAME(has_reasoning_count)
    SAME(reasoning_tokens)
    if (strcmp(a->unread, b->unread)) {
        *field = "unread";
        return false;
    }
    SAME(completion_tokens)
    SAME(has_cached)
    SAME(cached_from_usage)
    SAME(cached_tokens)
    SAME(has_timings)
    SAME(timings.queue_ms)
    SAME(timings.prefill_ms)
    SAME(timings.decode_ms)
    SAME(timings.ttft_ms)
    SAME(timings.prompt_tokens)
    SAME(timings.completion_tokens)
    SAME(timings.preemptions)
#undef SAME
    *field = NULL;
    return true;
}
