/* The Jinja sandbox against a template written by an attacker (issue 48):
 * every walk into nested values (==, in, sort, unique, loop.changed, dict
 * ==, hash) ends at the depth limit instead of overflowing the stack;
 * filters check their arguments as jinja2 does (truncate's leeway, huge
 * lengths, %c, negative %x); a render's time is bounded by its work (bytes
 * scanned, values compared), not only its steps; a request's 200k-key
 * object becomes a dict in linear time; and a GGUF carrying the crashing
 * template makes `tps serve` answer 400 and keep serving. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jinja/jinja.h"
#include "server/chat/chat_prompt.h"
#include "support/raw_http.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer) || !defined(__OPTIMIZE__)
#define SLOW_BUILD 1 /* ASan or -O0: timing bounds ten times looser */
#else
#define SLOW_BUILD 0
#endif

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Renders src with default limits (and r's variables, when given); the
 * output in *out (malloc'ed, "" on failure), the error in *e. */
static int render_run(jinja_run *r, const char *src, char **out, jinja_error *e) {
    jinja_tpl *t = NULL;
    tps_err cerr = {{0}};
    cr_assert_eq(jinja_compile(&t, src, strlen(src), &cerr), 0, "compile: %s", cerr.msg);
    sbuf b;
    sbuf_init(&b);
    memset(e, 0, sizeof *e);
    int rc = jinja_render(r, t, &b, e);
    *out = strdup(b.p && !rc ? b.p : "");
    sbuf_free(&b);
    jinja_tpl_free(t);
    return rc;
}

static int render(const char *src, char **out, jinja_error *e) {
    jinja_run *r = jinja_run_new(NULL);
    cr_assert_not_null(r);
    int rc = render_run(r, src, out, e);
    jinja_run_free(r);
    return rc;
}

static void expect_output(const char *src, const char *want) {
    char *out;
    jinja_error e;
    cr_expect_eq(render(src, &out, &e), 0, "%s: %s", src, e.msg);
    cr_expect_str_eq(out, want, "%s", src);
    free(out);
}

/* src fails with kind, its message holding says */
static void expect_failure(const char *src, jinja_fail kind, const char *says) {
    char *out;
    jinja_error e;
    cr_expect_neq(render(src, &out, &e), 0, "%s rendered [%.80s]", src, out);
    cr_expect_eq(e.kind, kind, "%s: %d %s", src, e.kind, e.msg);
    cr_expect(strstr(e.msg, says), "%s: [%s] does not say [%s]", src, e.msg, says);
    free(out);
}

/* two lists (and a tuple) nested 200,000 deep: range() stops at 100,000 */
#define DEEP                                                                                       \
    "{% set ns = namespace(a=[], b=[], t=()) %}{% for j in range(2) %}"                            \
    "{% for i in range(100000) %}{% set ns.a = [ns.a] %}{% set ns.b = [ns.b] %}"                   \
    "{% set ns.t = (ns.t,) %}{% endfor %}{% endfor %}"

Test(jinja_hostile, comparing_200000_deep_values_ends_at_the_depth_limit, .timeout = 120) {
    static const char *const ops[] = {
        "{{ ns.a == ns.b }}",
        "{{ ns.a != ns.b }}",
        "{{ ns.a in [ns.b] }}",
        "{{ ns.a is in [ns.b] }}",
        "{{ ns.a < ns.b }}",
        "{{ [ns.a, ns.b]|sort }}",
        "{{ [ns.a, ns.b]|max }}",
        "{% for x in [ns.a, ns.b] %}{{ loop.changed(x) }}{% endfor %}",
        "{{ {'k': ns.a} == {'k': ns.b} }}",
        "{{ [ns.a].index(ns.b) }}",
        "{{ [ns.a].count(ns.b) }}",
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%s%s", DEEP, ops[i]);
        expect_failure(src, JINJA_LIMIT, "values compared nested deeper than 500");
    }
    /* hashing a deep tuple: a dict key, unique's set, a lookup */
    expect_failure(DEEP "{{ [ns.t, ns.t]|unique|list }}", JINJA_LIMIT,
                   "values hashed nested deeper than 500");
    expect_failure(DEEP "{{ {ns.t: 1} }}", JINJA_LIMIT, "values hashed nested deeper than 500");
    expect_failure(DEEP "{{ {'x': 1}.get(ns.t) }}", JINJA_LIMIT,
                   "values hashed nested deeper than 500");
    /* lists are unhashable, as in Python: unique of lists is jinja2's TypeError */
    expect_failure(DEEP "{{ [ns.a, ns.b]|unique|list }}", JINJA_ERROR, "unhashable type: 'list'");
    /* printing was bounded already */
    expect_failure(DEEP "{{ ns.a|tojson }}", JINJA_LIMIT, "values nested deeper than 500");
}

Test(jinja_hostile, truncate_checks_its_arguments_as_jinja2_does) {
    /* a negative leeway read the heap past the string; jinja2 asserts */
    expect_failure("{{ 'abc'|truncate(200000, true, '', -199999) }}", JINJA_ERROR,
                   "expected leeway >= 0, got -199999");
    expect_failure("{{ 'abc'|truncate(2) }}", JINJA_ERROR, "expected length >= 3, got 2");
    /* length + leeway overflowed int64 */
    expect_output("{{ 'abc'|truncate(9223372036854775807) }}", "abc");
    expect_output("{{ 'abcdefghijkl'|truncate(9223372036854775807, true, '', "
                  "9223372036854775807) }}",
                  "abcdefghijkl");
    /* jinja2: s[:length - len(end)].rsplit(' ', 1)[0] keeps a word without spaces */
    expect_output("{{ 'abcdefghij'|truncate(5, false, '...', 0) }}", "ab...");
    expect_output("{{ 'abc def ghij'|truncate(9, false, '...', 0) }}", "abc...");
    expect_output("{{ 'ab cdefghijklmn'|truncate(5, leeway=None) }}", "ab...");
}

Test(jinja_hostile, formatting_and_numbers_match_jinja2_at_the_edges) {
    expect_failure("{{ '%c' % 1114112 }}", JINJA_ERROR, "%c arg not in range(0x110000)");
    expect_failure("{{ '%c' % -1 }}", JINJA_ERROR, "%c arg not in range(0x110000)");
    expect_failure("{{ '%c' % 'ab' }}", JINJA_ERROR, "%c requires int or char");
    expect_output("{{ '%c' % 233 }}", "\xc3\xa9");
    expect_output("{{ '%x' % -255 }}|{{ '%05x' % -255 }}|{{ '%5x' % -255 }}|{{ '%#06x' % -255 }}"
                  "|{{ '%o' % -8 }}|{{ '%X' % -255 }}",
                  "-ff|-00ff|  -ff|-0x0ff|-10|-FF");
    expect_failure("{{ 0 ** -1 }}", JINJA_ERROR, "0.0 cannot be raised to a negative power");
    expect_output("{{ 15|round(-1) }} {{ -25|round(-1) }} {{ 5|round(-30) }}", "20 -20 0");
    expect_output("{{ 2.5|round(400) }} {{ 2.5|round(-400) }}", "2.5 0.0");
    expect_failure("{{ 2.5|round(400, 'floor') }}", JINJA_ERROR, "int too large to convert");
    expect_failure("{{ 2.5|round(-400, 'ceil') }}", JINJA_ERROR, "float division by zero");
    expect_output("{{ '12'|int(base=1) }} {{ '12'|int(base=4294967306) }}", "12 12");
    expect_output("{{ 'x'|indent(-1, true) }}", "x");
    expect_failure("{{ [1] in {'a': 1} }}", JINJA_ERROR, "unhashable type: 'list'");
    expect_output("{{ {1: 'a', 1.0: 'b', True: 'c'} }}", "{1: 'c'}");
    expect_output("{{ {(1, 2): 'x'}[(1.0, 2)] }}", "x");
}

Test(jinja_hostile, one_step_that_scans_8_mb_counts_its_8_mb, .timeout = 60) {
    /* 100,000 steps of `in` over 8 MB: 800 GB scanned before; now the work
     * budget (2^28 units) ends it after about 32 */
    double t0 = now_s();
    expect_failure("{% set s = 'x' * 8000000 %}{% for i in range(100000) %}"
                   "{% if 'y' in s %}{% endif %}{% endfor %}",
                   JINJA_LIMIT, "units of work");
    double dt = now_s() - t0;
    cr_expect_lt(dt, SLOW_BUILD ? 20.0 : 2.0, "the budget took %.2f s", dt);
    /* the other scans a step can repeat: rfind's backward search, len() and
     * indexing of a long string, strip with many characters */
    expect_failure("{% set s = 'a' * 4000000 %}{% for i in range(1000) %}"
                   "{% set x = s.rfind('b') %}{% endfor %}",
                   JINJA_LIMIT, "units of work");
    expect_failure("{% set s = 'a' * 4000000 %}{% for i in range(100000) %}"
                   "{% set x = s|length %}{% endfor %}",
                   JINJA_LIMIT, "units of work");
    expect_failure("{% set s = 'a' * 4000000 %}{% for i in range(100000) %}"
                   "{% set x = s[5] %}{% endfor %}",
                   JINJA_LIMIT, "units of work");
    expect_failure("{% set s = 'a' * 4000000 %}{{ s.strip('b' * 100000 + 'a') }}", JINJA_LIMIT,
                   "units of work");
    /* comparisons: `in` over a 100k list, a thousand times */
    expect_failure("{% set l = range(100000)|list %}{% for i in range(1000) %}"
                   "{% if -1 in l %}{% endif %}{% endfor %}",
                   JINJA_LIMIT, "units of work");
}

Test(jinja_hostile, unique_is_linear_and_a_budget_of_its_own_is_kept, .timeout = 60) {
    /* 100k distinct items: 5e9 comparisons when unique was quadratic */
    double t0 = now_s();
    expect_output("{{ range(100000)|unique|list|length }}", "100000");
    expect_output("{{ (range(50000)|list + range(50000)|list)|unique|list|length }}", "50000");
    double dt = now_s() - t0;
    cr_expect_lt(dt, SLOW_BUILD ? 10.0 : 1.0, "unique took %.2f s", dt);
    /* a smaller budget ends the same unique, naming it */
    jinja_limits lim;
    jinja_limits_default(&lim);
    lim.max_work = 100000;
    jinja_run *r = jinja_run_new(&lim);
    char *out;
    jinja_error e;
    cr_expect_neq(render_run(r, "{{ range(100000)|unique|list|length }}", &out, &e), 0);
    cr_expect(e.kind == JINJA_LIMIT && strstr(e.msg, "more than 100000 units of work"), "%s",
              e.msg);
    free(out);
    jinja_run_free(r);
}

/* chat_template_kwargs with 200k keys: each a variable (jinja_set) and the
 * whole object a dict (jinja_map_set), as the server converts a request */
Test(jinja_hostile, a_200k_key_object_becomes_a_dict_in_linear_time, .timeout = 60) {
    enum { KEYS = 200000 };
    json_t *obj = json_object();
    for (int i = 0; i < KEYS; i++) {
        char k[32];
        snprintf(k, sizeof k, "key_%d", i);
        json_object_set_new(obj, k, json_integer(i));
    }
    jinja_limits lim;
    jinja_limits_default(&lim);
    lim.max_memory = CHAT_RENDER_MAX_MEMORY;
    double t0 = now_s();
    jinja_run *r = jinja_run_new(&lim);
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        jinja_set(r, k, chat_json_value(r, v));
    }
    jinja_set(r, "kw", chat_json_value(r, obj));
    char *out;
    jinja_error e;
    int rc = render_run(r,
                        "{{ kw|length }} {{ kw['key_199999'] }} {{ key_123456 }} "
                        "{{ 'key_5' in kw }} {{ kw.get('nope', -1) }}",
                        &out, &e);
    double dt = now_s() - t0;
    cr_expect_eq(rc, 0, "%s", e.msg);
    cr_expect_str_eq(out, "200000 199999 123456 True -1");
    cr_expect_lt(dt, SLOW_BUILD ? 20.0 : 2.0, "200k keys took %.3f s", dt); /* 28-38 s before */
    printf("200k keys: variables and a dict built and rendered in %.3f s\n", dt);
    free(out);
    jinja_run_free(r);
    json_decref(obj);
}

/* A GGUF whose template compares two 200,000-deep lists: tps serve answered
 * with a SIGSEGV; now a 400 naming the bound, and it keeps serving. The
 * compare runs only for the request's "Hi", so the template passes the
 * probe at load (a sample chat): a template hostile only to some
 * conversations is bounded per render. */
Test(jinja_hostile, a_gguf_with_a_deep_compare_template_gets_400_and_the_server_lives,
     .timeout = 180) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char dir[] = "/tmp/tps-jinja-hostile-XXXXXX", args[1024], path[600], model[600];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/deep.jinja", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{% if messages[-1].content == 'Hi' %}" DEEP "{% if ns.a == ns.b %}same{% endif %}"
          "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}",
          f);
    fclose(f);
    snprintf(args, sizeof args,
             "model make --arch llama --preset tiny --type f32 --chat-template-file '%s' "
             "-o %s/deep.gguf",
             path, dir);
    assert_tps_ok(args);
    server_fixture fx;
    server_config c;
    fixture_defaults(&c, &fx);
    snprintf(model, sizeof model, "%s/deep.gguf", dir);
    c.model_path = model;
    fixture_start(&fx, &c, true);
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}";
    char *resp = NULL;
    for (int i = 0; i < 2; i++) {
        int status = raw_call(fx.port, "POST", i ? "/v1/chat/completions" : "/apply-template", chat,
                              NULL, &resp);
        cr_expect_eq(status, 400, "%s", resp ? resp : "");
        cr_expect(resp && strstr(resp, "nested deeper than 500"), "%s", resp ? resp : "");
        free(resp);
        resp = NULL;
    }
    cr_expect_eq(raw_call(fx.port, "GET", "/health", NULL, NULL, NULL), 200);
    fixture_finish(&fx);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    cr_assert_eq(system(args), 0);
}

/* A GGUF whose template loops 10^10 times at its top renders no chat
 * within the bounds: tps serve refuses it at load, quickly, naming the
 * bound, instead of starting and failing every request. (range(100000000)
 * alone is jinja2's sandbox error "Range too big", the template's own
 * failure: that loads, and each render is a 400.) */
Test(jinja_hostile, a_gguf_whose_template_exceeds_a_bound_on_a_plain_chat_is_refused_at_load,
     .timeout = 180) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char dir[] = "/tmp/tps-jinja-hostile-XXXXXX", args[1200], path[600];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/loop.jinja", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}"
          "{% for m in messages %}{{ m.content }}{% endfor %}",
          f);
    fclose(f);
    snprintf(args, sizeof args,
             "model make --arch llama --preset tiny --type f32 --chat-template-file '%s' "
             "-o %s/loop.gguf",
             path, dir);
    assert_tps_ok(args);
    snprintf(args, sizeof args, "timeout 60 '%s' serve -m %s/loop.gguf --port 0 2>&1", TPS_BIN,
             dir);
    double t0 = now_s();
    char out[4096];
    int st = test_run_capture(args, out, sizeof out);
    double dt = now_s() - t0;
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 124,
              "tps serve: status %d: %s", st, out);
    cr_expect(strstr(out, "exceeds a bound") && strstr(out, "the template took more than"), "%s",
              out);
    cr_expect_lt(dt, SLOW_BUILD ? 60.0 : 10.0, "refused after %.1f s", dt);
    printf("a template looping 1e10 times: tps serve refused it in %.2f s\n", dt);
    /* the same bound for tps model info, which says what tps serve would serve */
    snprintf(args, sizeof args, "model info %s/loop.gguf --json", dir);
    expect_tps(args, 0, "exceeds a bound");
    snprintf(args, sizeof args, "rm -rf %s", dir);
    cr_assert_eq(system(args), 0);
}
