/* Reading tool calls out of a model's answer by a syntax row
 * (tools_internal.h): the whole answer once it is done, or as far as it
 * has come while it streams. One reader serves every row: markers match
 * with any blanks where they have blanks, a name is a run of name
 * characters, arguments are a JSON object (written as the model wrote
 * it), a call object {name, arguments}, or parameters whose values are
 * typed by the tool's schema (a string stays raw text, anything else is
 * JSON). Read while it streams, every call's arguments text is a prefix
 * of the text it has once the call is whole: nothing is reported that a
 * later byte could change (a value's trailing blanks, a tail that may
 * become a closing marker, half a UTF-8 character wait).
 *
 * gpt-oss's harmony is read by its own function (its calls are messages,
 * not marked text). Not here: rendering (tools.c), grammars
 * (constrain/tool_grammar.c, by tools.c), events (tools_stream.c). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

#include "server/tools/tools_internal.h"

enum { M_NO = 0, M_YES, M_MORE }; /* no match; match; the text ended inside */

typedef struct rd {
    const char *s;
    size_t n, i;
    bool partial;
    const tool_set *ts;
    const tool_syntax *row;
    tool_syntax bare; /* row without its section markers (scan_row), when row points here */
    tool_scan *out;
} rd;

static void skip_blank(const rd *r, size_t *i) {
    while (*i < r->n && tools_blank(r->s[*i]))
        (*i)++;
}

/* Marker m at r->i (blanks before it skipped; a blank run in m matches
 * any blank run, none included); on a match r->i moves past it. */
static int match(rd *r, const char *m) {
    if (!m || !*m) return M_YES;
    size_t i = r->i;
    skip_blank(r, &i);
    for (const char *p = m; *p;) {
        if (tools_blank(*p)) {
            while (tools_blank(*p))
                p++;
            skip_blank(r, &i);
            continue;
        }
        if (i == r->n) return M_MORE;
        if (r->s[i] != *p) return M_NO;
        i++, p++;
    }
    r->i = i;
    return M_YES;
}

/* The first blank-free chunk of marker m: where to search for it. */
static size_t chunk_of(const char *m, const char **start) {
    while (tools_blank(*m))
        m++;
    *start = m;
    size_t k = 0;
    while (m[k] && !tools_blank(m[k]))
        k++;
    return k;
}

/* Bytes at the end of s[0..n) that may grow into text t[0..tl). */
static size_t prefix_tail(const char *s, size_t n, const char *t, size_t tl) {
    for (size_t k = tl ? tl - 1 : 0; k > 0; k--)
        if (n >= k && !memcmp(s + n - k, t, k)) return k;
    return 0;
}

/* Where marker m first matches in the text from r->i: its offset, or n
 * (and *tail: bytes at the end that may still become it). */
static size_t find_marker(rd *r, const char *m, size_t *tail) {
    const char *c;
    size_t cl = chunk_of(m, &c);
    *tail = 0;
    if (!cl) return r->n;
    for (size_t i = r->i; i < r->n;) {
        const char *p = memmem(r->s + i, r->n - i, c, cl);
        if (!p) break;
        rd t = *r;
        t.i = (size_t)(p - r->s);
        if (match(&t, m) != M_NO) return (size_t)(p - r->s);
        i = (size_t)(p - r->s) + 1;
    }
    *tail = prefix_tail(r->s + r->i, r->n - r->i, c, cl);
    return r->n;
}

/* ---------------------------------------------------------------------------
 * JSON values
 * ------------------------------------------------------------------------- */

/* Length of the JSON value at s[0..n) (an object, array, string or
 * scalar); 0 when the text ends inside it. A scalar ends at a byte that
 * cannot continue it. */
static size_t json_span(const char *s, size_t n) {
    if (!n) return 0;
    if (s[0] != '{' && s[0] != '[' && s[0] != '"') {
        size_t k = 0;
        while (k < n &&
               (s[k] == '-' || s[k] == '+' || s[k] == '.' || (s[k] >= '0' && s[k] <= '9') ||
                (s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z')))
            k++;
        return k < n ? k : 0;
    }
    int depth = 0;
    bool str = false, esc = false;
    for (size_t k = 0; k < n; k++) {
        char c = s[k];
        if (str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"') {
                str = false;
                if (depth == 0) return k + 1;
            }
        } else if (c == '"')
            str = true;
        else if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return k + 1;
    }
    return 0;
}

static bool json_ok(const char *s, size_t n, bool object) {
    if (memchr(s, 0, n)) return false; /* jansson stops at a raw NUL; the text is C's from here */
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    bool ok = v && (!object || json_is_object(v));
    json_decref(v);
    return ok;
}

/* ---------------------------------------------------------------------------
 * One call
 * ------------------------------------------------------------------------- */

static tool_scan_call *named_call(rd *r, size_t off, size_t len) {
    tool_scan_call *c = &r->out->calls[r->out->n++];
    *c = (tool_scan_call){.name_off = off, .name_len = len, .named = true};
    c->args_off = r->out->args.len;
    return c;
}

/* A name at r->i, ended by the marker close: M_YES with *off, *len. */
static int read_name(rd *r, const char *close, size_t *off, size_t *len) {
    skip_blank(r, &r->i);
    size_t i = r->i;
    while (i < r->n && tools_name_char(r->s[i]))
        i++;
    if (i == r->n) return M_MORE;
    if (i == r->i) return M_NO;
    *off = r->i, *len = i - r->i;
    r->i = i;
    return match(r, close);
}

/* A JSON object of arguments at r->i, as written. */
static int read_object(rd *r, tool_scan_call *c) {
    skip_blank(r, &r->i);
    if (r->i == r->n) return M_MORE;
    if (r->s[r->i] != '{') return M_NO;
    const char *v = r->s + r->i;
    size_t left = r->n - r->i, len = json_span(v, left);
    if (!len) {
        sbuf_add(&r->out->args, v, left - utf8_incomplete_tail((const unsigned char *)v, left));
        return M_MORE;
    }
    if (!json_ok(v, len, true)) return M_NO;
    sbuf_add(&r->out->args, v, len);
    r->i += len;
    return M_YES;
}

/* A parameter's value at r->i, up to the row's p_close (or, where p_close
 * is empty, the value's own end); *vo, *vl: the value, *quoted: it was in
 * q_open/q_close. M_MORE with what is surely value so far. */
static int read_value(rd *r, size_t *vo, size_t *vl, bool *quoted) {
    const tool_syntax *w = r->row;
    *quoted = false;
    skip_blank(r, &r->i);
    rd t = *r;
    if (w->q_open && match(&t, w->q_open) == M_YES) {
        *quoted = true;
        r->i = t.i;
    }
    const char *end = *quoted ? w->q_close : w->p_close;
    *vo = r->i;
    if (!*quoted && !*end) { /* a JSON value or a bare word */
        size_t len = json_span(r->s + r->i, r->n - r->i);
        *vl = len;
        r->i += len;
        return len ? M_YES : M_MORE;
    }
    const char *c;
    size_t cl = chunk_of(end, &c);
    const char *p = memmem(r->s + r->i, r->n - r->i, c, cl);
    size_t stop = p ? (size_t)(p - r->s) : r->n;
    if (!p) stop -= prefix_tail(r->s + r->i, r->n - r->i, c, cl);
    *vl = stop - r->i;
    if (!*quoted)
        while (*vl && tools_blank(r->s[*vo + *vl - 1]))
            (*vl)--;
    if (!p) {
        *vl -= utf8_incomplete_tail((const unsigned char *)r->s + *vo, *vl);
        return M_MORE;
    }
    r->i = stop;
    return match(r, end);
}

/* One parameter's key and value, written as "key": value into the args. */
static int read_param(rd *r, tool_scan_call *c, bool first) {
    const tool_syntax *w = r->row;
    skip_blank(r, &r->i);
    size_t ko = r->i, i = r->i;
    while (i < r->n && (tools_name_char(r->s[i]) || (r->s[i] & 0x80)))
        i++;
    if (i == r->n) return M_MORE;
    size_t kl = i - ko;
    if (!kl) return M_NO;
    r->i = i;
    int m = match(r, w->p_mid), json_attr = 0;
    if (m == M_NO && w->p_mid_json) m = match(r, w->p_mid_json), json_attr = 1;
    if (m != M_YES) return m;
    size_t vo, vl;
    bool quoted;
    int v = read_value(r, &vo, &vl, &quoted);
    if (v == M_NO) return M_NO;
    int kind = tools_set_param_kind(r->ts, r->s + c->name_off, c->name_len, r->s + ko, kl);
    if (kind < 0 && v == M_YES) kind = !json_ok(r->s + vo, vl, false);
    if (kind < 0 && json_attr) kind = 0;
    if (quoted) kind = 1;
    sbuf *a = &r->out->args;
    sbuf_adds(a, first ? "" : ", ");
    sbuf_json_str(a, r->s + ko, kl);
    sbuf_adds(a, ": ");
    if (kind == 1) {
        sbuf_json_str(a, r->s + vo, vl);
        if (v == M_MORE) sbuf_truncate(a, a->len - 1); /* the string is still open */
    } else if (v == M_YES) {
        if (!json_ok(r->s + vo, vl, false)) return M_NO;
        sbuf_add(a, r->s + vo, vl);
    }
    return v;
}

static int read_params(rd *r, tool_scan_call *c) {
    const tool_syntax *w = r->row;
    sbuf_adds(&r->out->args, "{");
    for (bool first = true;; first = false) {
        size_t save = r->i;
        int m = first ? M_YES : match(r, w->p_sep);
        if (m == M_YES) m = match(r, w->p_open);
        if (m == M_YES && !*w->p_open) { /* a bare key: there must be one */
            size_t i = r->i;
            skip_blank(r, &i);
            m = i == r->n ? M_MORE : tools_name_char(r->s[i]) ? M_YES : M_NO;
        }
        if (m == M_MORE) return M_MORE;
        if (m == M_NO) {
            r->i = save;
            break;
        }
        if ((m = read_param(r, c, first)) != M_YES) return m;
    }
    sbuf_adds(&r->out->args, "}");
    return M_YES;
}

/* A call object's arguments, whole at v[0..len): an object as written,
 * or a string holding one (re-encoded). */
static int write_args(rd *r, const char *v, size_t len) {
    if (v[0] == '{') {
        if (!json_ok(v, len, true)) return M_NO;
        sbuf_add(&r->out->args, v, len);
        return M_YES;
    }
    json_t *s = json_loadb(v, len, JSON_DECODE_ANY, NULL);
    json_t *o = json_is_string(s) ? json_loads(json_string_value(s), 0, NULL) : NULL;
    char *d = json_is_object(o) ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(s);
    json_decref(o);
    if (d) sbuf_adds(&r->out->args, d);
    free(d);
    return d ? M_YES : M_NO;
}

/* {name_key: N, args_key: {...}, ...}: the call is reported once its
 * name is read; arguments after the name stream, before it wait. */
static int read_call_object(rd *r) {
    const tool_syntax *w = r->row;
    skip_blank(r, &r->i);
    if (r->i == r->n) return M_MORE;
    if (r->s[r->i] != '{') return M_NO;
    r->i++;
    tool_scan_call *c = NULL;
    size_t def_o = 0, def_l = 0;
    bool args_done = false;
    for (;;) {
        skip_blank(r, &r->i);
        if (r->i == r->n) return M_MORE;
        if (r->s[r->i] == '}') break;
        size_t ko = r->i, kl = json_span(r->s + r->i, r->n - r->i);
        if (r->s[r->i] != '"') return M_NO;
        if (!kl) return M_MORE;
        r->i += kl;
        skip_blank(r, &r->i);
        if (r->i == r->n) return M_MORE;
        if (r->s[r->i++] != ':') return M_NO;
        skip_blank(r, &r->i);
        if (r->i == r->n) return M_MORE;
        bool is_name = kl == strlen(w->name_key) + 2 && !memcmp(r->s + ko + 1, w->name_key, kl - 2);
        bool is_args = kl == strlen(w->args_key) + 2 && !memcmp(r->s + ko + 1, w->args_key, kl - 2);
        size_t vo = r->i, vl = json_span(r->s + r->i, r->n - r->i);
        int m = M_YES;
        if (is_args && !args_done && c && r->s[r->i] == '{') {
            m = read_object(r, c);
        } else if (!vl) {
            return M_MORE;
        } else if (is_name && !c) {
            if (r->s[vo] != '"' || vl < 3) return M_NO;
            for (size_t k = 1; k + 1 < vl; k++)
                if (!tools_name_char(r->s[vo + k])) return M_NO;
            c = named_call(r, vo + 1, vl - 2);
        } else if (is_args && !args_done && c) {
            m = write_args(r, r->s + vo, vl);
        } else if (is_args && !args_done) {
            def_o = vo, def_l = vl;
        }
        if (m != M_YES) return m;
        args_done |= is_args;
        if (r->i == vo) r->i += vl;
        skip_blank(r, &r->i);
        if (r->i == r->n) return M_MORE;
        if (r->s[r->i] == ',') r->i++;
    }
    r->i++;
    if (!c) return M_NO;
    if (def_l) return write_args(r, r->s + def_o, def_l);
    if (!args_done) sbuf_adds(&r->out->args, "{}");
    return M_YES;
}

/* One call at r->i: M_YES whole; M_MORE the text ended in it (a call
 * named so far is reported, open); M_NO it is not one. */
static int read_call(rd *r, size_t k) {
    const tool_syntax *w = r->row;
    size_t n0 = r->out->n;
    int m = match(r, w->call_open);
    if (m == M_YES && w->id_close) {
        size_t io, il;
        m = read_name(r, w->id_close, &io, &il);
    }
    tool_scan_call *c = NULL;
    if (m == M_YES && w->args == TOOL_ARGS_CALL) {
        m = read_call_object(r);
        c = r->out->n > n0 ? &r->out->calls[n0] : NULL;
    } else if (m == M_YES) {
        size_t no = 0, nl = 0;
        m = read_name(r, w->name_close, &no, &nl);
        if (m == M_YES) {
            c = named_call(r, no, nl);
            if (w->indexed)
                while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
                    r->i++;
            if (w->indexed && r->i == r->n) m = M_MORE;
            if (m == M_YES) m = match(r, w->args_open);
            if (m == M_YES) m = w->args == TOOL_ARGS_OBJECT ? read_object(r, c) : read_params(r, c);
        }
    }
    if (m == M_YES) {
        m = match(r, w->call_close);
        if (m == M_MORE && !r->partial) m = M_YES; /* the answer ended before its close */
    }
    if (c) {
        c->args_len = r->out->args.len - c->args_off;
        c->complete = m == M_YES;
    }
    (void)k;
    return m;
}

/* The calls from r->i (where a section or call marker begins). */
static int read_calls(rd *r) {
    const tool_syntax *w = r->row;
    int m = match(r, w->sec_open);
    for (size_t k = 0; m == M_YES && r->out->n < TOOLS_MAX_CALLS; k++) {
        size_t save = r->i;
        if (k && w->one_call) break;
        if (k && w->sec_close && *w->sec_close) {
            rd t = *r;
            if (match(&t, w->sec_close) == M_YES) break;
        }
        if (k && (m = match(r, w->call_sep)) != M_YES) break;
        m = read_call(r, k);
        if (m == M_NO && k) { /* no separator, or no more calls */
            r->i = save;
            rd t = *r;
            m = read_call(&t, k);
            if (m == M_YES) *r = t;
        }
    }
    return m;
}

/* Where the calls begin: the first section or call marker, or (at_start)
 * the answer's first non-blank byte when it opens a JSON object. */
static size_t calls_start(rd *r, size_t *tail) {
    const tool_syntax *w = r->row;
    *tail = 0;
    if (w->at_start) {
        size_t i = 0;
        skip_blank(r, &i);
        if (i == r->n) {
            *tail = r->n;
            return r->n;
        }
        return r->s[i] == '{' ? 0 : r->n;
    }
    size_t t1 = 0, t2 = 0, a = r->n, b = r->n;
    if (w->sec_open && *w->sec_open) a = find_marker(r, w->sec_open, &t1);
    if (w->call_open && *w->call_open) b = find_marker(r, w->call_open, &t2);
    *tail = t1 > t2 ? t1 : t2;
    return a < b ? a : b;
}

static int scan_row(tool_format f, rd *r) {
    size_t tail, at = calls_start(r, &tail);
    tool_scan *o = r->out;
    o->content = at == r->n ? r->n - (r->partial ? tail : 0) : at;
    o->begun = at < r->n;
    if (!o->begun) return M_NO;
    r->i = at;
    const tool_syntax *w = tools_row(f);
    rd t = *r;
    if (w->sec_open && *w->sec_open && match(&t, w->sec_open) == M_NO) {
        r->bare = *w; /* a call marker before any section: calls without one */
        r->bare.sec_open = r->bare.sec_close = "";
        r->row = &r->bare;
    }
    return read_calls(r);
}

/* ---------------------------------------------------------------------------
 * gpt-oss: every message to functions.N, as harmony.h hands them on (or
 * in the raw text: reasoning_format "none"). A call's header begins at
 * the <|start|> or <|channel|> before its recipient, with no <|message|>
 * between, or at the recipient's blank.
 * ------------------------------------------------------------------------- */

static bool starts(const char *p, const char *end, const char *lit) {
    size_t l = strlen(lit);
    return (size_t)(end - p) >= l && !memcmp(p, lit, l);
}

static size_t harmony_head(const char *text, const char *to) {
    for (const char *q = text; q < to; q++)
        if ((starts(q, to, "<|start|>") || starts(q, to, "<|channel|>")) &&
            !tools_find(q, (size_t)(to - q), HARMONY_MESSAGE))
            return (size_t)(q - text);
    return (size_t)((to > text && to[-1] == ' ' ? to - 1 : to) - text);
}

static void scan_harmony(rd *r) {
    const char *text = r->s, *end = text + r->n;
    static const char *const heads[] = {"<|start|>", "<|channel|>", (" " HARMONY_TO_FN),
                                        HARMONY_TO_FN};
    tool_scan *o = r->out;
    for (size_t m = 0; m < 4; m++) { /* content stops before any header */
        r->i = 0;
        size_t tail, at = find_marker(r, heads[m], &tail);
        if (m >= 2 && at < r->n && at > 0 && text[at - 1] == ' ')
            at--; /* the blank before a recipient is the header's, as harmony_head says */
        if (at < r->n && at <= o->content) o->content = at, o->begun = true;
        if (!o->begun && r->partial && r->n - tail < o->content) o->content = r->n - tail;
    }
    size_t content = r->n;
    for (const char *to = tools_find(text, r->n, HARMONY_TO_FN); to && o->n < TOOLS_MAX_CALLS;) {
        const char *name = to + strlen(HARMONY_TO_FN), *q = name;
        while (q < end && tools_name_char(*q) && *q != '.')
            q++;
        /* the header is whole at its <|message|> (harmony.h holds it till then) */
        const char *msg = tools_find(name, (size_t)(end - name), HARMONY_MESSAGE);
        if (!msg || q == name) break;
        rd a = *r;
        a.i = (size_t)(msg - text) + strlen(HARMONY_MESSAGE);
        tool_scan_call *c = named_call(r, (size_t)(name - text), (size_t)(q - name));
        /* while streaming, the body so far is the call's arguments so far */
        int m = read_object(&a, c);
        if (m == M_NO || (m == M_MORE && !r->partial)) {
            o->n--;
            sbuf_truncate(&o->args, c->args_off);
            break;
        }
        c->args_len = o->args.len - c->args_off;
        c->complete = m == M_YES;
        if (o->n == 1) content = harmony_head(text, to);
        if (!c->complete) break;
        to = tools_find(msg, (size_t)(end - msg), HARMONY_TO_FN);
    }
    if (!r->partial) o->content = o->n ? content : r->n;
}

/* ---------------------------------------------------------------------------
 * Reading an answer
 * ------------------------------------------------------------------------- */

static void scan_reset(tool_scan *out, size_t n) {
    out->n = 0;
    out->content = n;
    out->begun = false;
    sbuf_reset(&out->args);
}

void tools_scan(tool_format f, const tool_set *ts, const char *text, size_t n, bool partial,
                tool_scan *out) {
    scan_reset(out, n);
    rd r = {.s = text ? text : "",
            .n = text ? n : 0,
            .partial = partial,
            .ts = ts,
            .row = tools_row(f),
            .out = out};
    if (f == TOOL_FMT_HARMONY) {
        scan_harmony(&r);
        return;
    }
    int m = scan_row(f, &r);
    tool_format also = tools_row(f)->also;
    size_t done = 0;
    for (size_t k = 0; k < out->n; k++)
        done += out->calls[k].complete;
    if (also && !done && (m == M_NO || !partial) && !(partial && out->n)) {
        size_t content = out->content;
        bool begun = out->begun;
        scan_reset(out, n);
        r = (rd){
            .s = r.s, .n = r.n, .partial = partial, .ts = ts, .row = tools_row(also), .out = out};
        scan_row(also, &r);
        if (!out->n && !out->begun) out->content = content, out->begun = begun;
    } else if (also && partial && !done) {
        /* the answer's end falls back to the other form when this one
         * completes no call: no content past where that form's calls begin */
        rd a = {.s = r.s, .n = r.n, .partial = true, .ts = ts, .row = tools_row(also), .out = out};
        size_t tail, at = calls_start(&a, &tail);
        size_t stop = at < r.n ? at : r.n - tail;
        if (stop < out->content) out->content = stop;
        out->begun = out->begun || at < r.n;
    }
    if (partial) return;
    while (out->n && !out->calls[out->n - 1].complete) /* only whole calls count */
        out->n--;
    if (!out->n) out->content = n;
}

size_t tools_parse(tool_format f, const char *text, size_t n, tool_call *calls, size_t cap,
                   size_t *content_len) {
    tool_scan *s = calloc(1, sizeof *s);
    *content_len = n;
    if (!s) return 0;
    tools_scan(f, NULL, text, n, false, s);
    size_t k = 0;
    for (; k < s->n && k < cap; k++) {
        const tool_scan_call *c = &s->calls[k];
        calls[k].name = strndup(text + c->name_off, c->name_len);
        calls[k].arguments = strndup(s->args.p + c->args_off, c->args_len);
        if (!calls[k].name || !calls[k].arguments) {
            tools_calls_free(calls, k + 1);
            break;
        }
    }
    *content_len = k ? s->content : n;
    sbuf_free(&s->args);
    free(s);
    return k;
}

size_t tools_stream_safe(tool_format f, const char *text, size_t n, bool *hold) {
    tool_scan *s = calloc(1, sizeof *s);
    *hold = false;
    if (!s) return 0;
    tools_scan(f, NULL, text, n, true, s);
    size_t safe = s->content;
    *hold = s->begun;
    sbuf_free(&s->args);
    free(s);
    return safe;
}
