/* The Jinja engine's pieces (src/jinja): 170-odd small templates, each
 * exercising one part of the language (whitespace control, scoping,
 * operators, filters, tests, methods, Python's printing of values),
 * rendered as jinja2 renders them with transformers' environment
 * (tests/data/templates/cases.json, made by
 * tests/data/tools/render_corpus.py); then what jinja2 cannot show: the
 * sandbox's limits on steps, depth, output and memory, compile errors that
 * name the line and the construct, and the variables a template reads. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"
#include "server/chat/chat_prompt.h"

static int render(const char *src, const json_t *vars, const jinja_limits *lim, sbuf *out,
                  jinja_error *e, tps_err *cerr) {
    jinja_tpl *t = NULL;
    int rc = jinja_compile(&t, src, strlen(src), cerr);
    if (rc) return rc;
    jinja_run *r = jinja_run_new(lim);
    cr_assert_not_null(r);
    struct tm tm = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12, .tm_isdst = -1};
    jinja_set_time(r, mktime(&tm));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vars, k, v) {
        jinja_set(r, k, chat_json_value(r, v));
    }
    rc = jinja_render(r, t, out, e);
    jinja_run_free(r);
    jinja_tpl_free(t);
    return rc;
}

Test(jinja, every_case_renders_as_jinja2_does) {
    json_error_t jerr;
    json_t *doc = json_load_file(TPS_SOURCE_DIR "/tests/data/templates/cases.json", 0, &jerr);
    cr_assert_not_null(doc, "cases.json: %s", jerr.text);
    json_t *vars = json_object_get(doc, "vars");
    size_t i, ok = 0;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *src = json_string_value(json_object_get(c, "template"));
        json_t *want = json_object_get(c, "output");
        sbuf out;
        sbuf_init(&out);
        jinja_error e = {0};
        tps_err cerr = {{0}};
        int rc = render(src, vars, NULL, &out, &e, &cerr);
        const char *got = out.p ? out.p : "";
        if (want) {
            cr_expect_eq(rc, 0, "case %zu failed: %s%s\n%s", i, cerr.msg, e.msg, src);
            cr_expect(!rc && !strcmp(got, json_string_value(want)),
                      "case %zu:\n%s\ngot:  [%s]\nwant: [%s]", i, src, got,
                      json_string_value(want));
            ok += !rc && !strcmp(got, json_string_value(want));
        } else {
            const char *msg = json_string_value(json_object_get(c, "error"));
            cr_expect_neq(rc, 0, "case %zu rendered [%s]; jinja2 raised %s\n%s", i, got, msg, src);
            if (json_is_true(json_object_get(c, "raised")))
                cr_expect_str_eq(e.msg, msg, "case %zu", i);
            ok += rc != 0;
        }
        sbuf_free(&out);
    }
    printf("jinja cases: %zu of %zu as jinja2\n", ok,
           json_array_size(json_object_get(doc, "cases")));
    json_decref(doc);
}

static jinja_fail fails_with(const char *src, const jinja_limits *lim, char *msg, size_t cap) {
    sbuf out;
    sbuf_init(&out);
    jinja_error e = {0};
    tps_err cerr = {{0}};
    json_t *vars = json_object();
    int rc = render(src, vars, lim, &out, &e, &cerr);
    json_decref(vars);
    cr_assert_eq(cerr.msg[0], 0, "compile: %s", cerr.msg);
    cr_assert_eq(out.len, 0, "a failed render appends nothing");
    sbuf_free(&out);
    if (msg) snprintf(msg, cap, "%s", e.msg);
    return rc ? e.kind : JINJA_OK;
}

Test(jinja, hostile_templates_end_at_a_limit) {
    jinja_limits lim;
    jinja_limits_default(&lim);
    char msg[512];
    /* 10^10 iterations: ended by the step limit, not by time */
    cr_assert_eq(fails_with("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                            "{% endfor %}",
                            &lim, msg, sizeof msg),
                 JINJA_LIMIT);
    cr_assert(strstr(msg, "steps"), "%s", msg);
    /* unbounded recursion */
    cr_assert_eq(
        fails_with("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &lim, msg, sizeof msg),
        JINJA_LIMIT);
    /* output: 2^23 bytes doubled into the output */
    jinja_limits small = lim;
    small.max_output = 1 << 20;
    cr_assert_eq(fails_with("{% for i in range(100) %}{{ 'x' * 100000 }}{% endfor %}", &small, msg,
                            sizeof msg),
                 JINJA_LIMIT);
    cr_assert(strstr(msg, "rendered text"), "%s", msg);
    /* memory: a string of 10^9 bytes */
    cr_assert_eq(fails_with("{{ 'a' * 1000000000 }}", &lim, msg, sizeof msg), JINJA_LIMIT);
    cr_assert_eq(fails_with("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                            &lim, msg, sizeof msg),
                 JINJA_LIMIT);
    /* the sandbox: no mutation of lists, no private attributes */
    cr_assert_eq(fails_with("{% set l = [] %}{{ l.append(1) }}", &lim, msg, sizeof msg),
                 JINJA_ERROR);
    cr_assert(strstr(msg, "unsafe"), "%s", msg);
    cr_assert_eq(fails_with("{{ ''.__class__.__mro__ }}", &lim, msg, sizeof msg), JINJA_ERROR);
    cr_assert_eq(fails_with("{{ raise_exception('no: ' ~ 1) }}", &lim, msg, sizeof msg),
                 JINJA_RAISED);
    cr_assert_str_eq(msg, "no: 1");
    /* without a message, or an empty one, the failure still says what
     * failed (fuzz_template found the empty message) */
    cr_assert_eq(fails_with("{{ raise_exception()|list }}", &lim, msg, sizeof msg), JINJA_RAISED);
    cr_assert(strstr(msg, "missing 1 required positional argument"), "%s", msg);
    cr_assert_eq(fails_with("{{ raise_exception('') }}", &lim, msg, sizeof msg), JINJA_RAISED);
    cr_assert(strstr(msg, "empty message"), "%s", msg);
}

static int compile_error(const char *src, char *msg, size_t cap) {
    jinja_tpl *t = NULL;
    tps_err err = {{0}};
    int rc = jinja_compile(&t, src, strlen(src), &err);
    jinja_tpl_free(t);
    snprintf(msg, cap, "%s", err.msg);
    return rc;
}

Test(jinja, compile_errors_name_the_line_and_the_construct) {
    char msg[512];
    cr_assert_eq(compile_error("a\nb\n{% for x in y %}\n{{ x }", msg, sizeof msg), TPS_EINVAL);
    cr_assert(strstr(msg, "line 4"), "%s", msg);
    cr_assert_eq(compile_error("{% include 'other.jinja' %}", msg, sizeof msg), TPS_EUNSUP);
    cr_assert(strstr(msg, "include") && strstr(msg, "line 1"), "%s", msg);
    cr_assert_eq(compile_error("x\n{{ s|wordwrap }}", msg, sizeof msg), TPS_EUNSUP);
    cr_assert(strstr(msg, "wordwrap") && strstr(msg, "line 2"), "%s", msg);
    cr_assert_eq(compile_error("{{ s|no_such_filter }}", msg, sizeof msg), TPS_EINVAL);
    cr_assert(strstr(msg, "No filter named 'no_such_filter'"), "%s", msg);
    /* as jinja2: inside an if block it is an error only when reached */
    cr_assert_eq(compile_error("{% if false %}{{ s|no_such_filter }}{% endif %}", msg, sizeof msg),
                 0);
    cr_assert_eq(compile_error("{% endfor %}", msg, sizeof msg), TPS_EINVAL);
    cr_assert_eq(compile_error("{% break %}", msg, sizeof msg), TPS_EINVAL);
    cr_assert_eq(compile_error("{% for x in y recursive %}{% endfor %}", msg, sizeof msg),
                 TPS_EUNSUP);
    /* nesting is bounded: no stack overflow from 10000 parentheses */
    static char deep[20010];
    memset(deep, '(', 10000);
    memcpy(deep, "{{ ", 3);
    cr_assert_eq(compile_error(deep, msg, sizeof msg), TPS_EINVAL);
    /* and from 100000 nested blocks */
    size_t cap = 100000 * 10 + 1, o = 0;
    char *blocks = malloc(cap);
    for (int i = 0; i < 100000; i++)
        o += (size_t)snprintf(blocks + o, cap - o, "{%% if 1 %%}");
    cr_assert_eq(compile_error(blocks, msg, sizeof msg), TPS_EINVAL);
    cr_assert(strstr(msg, "nested deeper"), "%s", msg);
    /* 100000 or, 100000 filters: a deep tree from a flat text */
    o = 0;
    o += (size_t)snprintf(blocks + o, cap - o, "{{ 1");
    for (int i = 0; i < 100000; i++)
        o += (size_t)snprintf(blocks + o, cap - o, " or 1");
    snprintf(blocks + o, cap - o, " }}");
    cr_assert_eq(compile_error(blocks, msg, sizeof msg), TPS_EINVAL);
    cr_assert(strstr(msg, "nests deeper"), "%s", msg);
    free(blocks);
    /* many elifs are not a nesting */
    static char elifs[64 * 1024];
    o = (size_t)snprintf(elifs, sizeof elifs, "{%% if x == 0 %%}0");
    for (int i = 1; i < 1500; i++)
        o += (size_t)snprintf(elifs + o, sizeof elifs - o, "{%% elif x == %d %%}%d", i, i);
    snprintf(elifs + o, sizeof elifs - o, "{%% endif %%}");
    cr_assert_eq(compile_error(elifs, msg, sizeof msg), 0, "%s", msg);
}

Test(jinja, a_template_says_which_variables_it_reads) {
    jinja_tpl *t = NULL;
    tps_err err = {{0}};
    const char *src =
        "{% if tools %}{{ tools|tojson }}{% endif %}{% set x = 1 %}{{ messages[0].role }}";
    cr_assert_eq(jinja_compile(&t, src, strlen(src), &err), 0, "%s", err.msg);
    cr_assert(jinja_tpl_reads(t, "tools"));
    cr_assert(jinja_tpl_reads(t, "messages"));
    cr_assert_not(jinja_tpl_reads(t, "role")); /* an attribute, not a variable */
    cr_assert_not(jinja_tpl_reads(t, "enable_thinking"));
    jinja_tpl_free(t);
}

/* transformers' {% generation %} blocks (assistant masks) render their body. */
Test(jinja, generation_blocks_render_their_body) {
    sbuf out;
    sbuf_init(&out);
    jinja_error e;
    tps_err cerr = {{0}};
    json_t *vars = json_object();
    cr_assert_eq(
        render("a{% generation %}b{{ 1 }}{% endgeneration %}c", vars, NULL, &out, &e, &cerr), 0,
        "%s%s", cerr.msg, e.msg);
    cr_assert_str_eq(out.p, "ab1c");
    json_decref(vars);
    sbuf_free(&out);
}
