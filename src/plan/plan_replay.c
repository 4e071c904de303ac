/* Reading an engine trace back for a replay (plan_replay.h). */
#include "plan/plan_replay.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"

static uint64_t ns_of_us(json_t *v) {
    double us = json_number_value(v);
    return us > 0 ? (uint64_t)llround(us * 1000.0) : 0;
}

static uint64_t ns_of_ms(json_t *v) {
    double ms = json_number_value(v);
    return ms > 0 ? (uint64_t)llround(ms * 1e6) : 0;
}

static int add_step(plan_replay *r, json_t *ev) {
    json_t *a = json_object_get(ev, "args");
    plan_replay_step *st = &r->steps[r->n_steps++];
    st->t0 = ns_of_us(json_object_get(ev, "ts"));
    st->fwd_ns = ns_of_us(json_object_get(ev, "dur"));
    st->post_ns = ns_of_ms(json_object_get(a, "after_ms"));
    st->taken = (uint32_t)json_integer_value(json_object_get(a, "taken"));
    st->prefill_rows = (uint32_t)json_integer_value(json_object_get(a, "prefill_tokens"));
    st->decode_rows = (uint32_t)json_integer_value(json_object_get(a, "decode_tokens"));
    st->cached_rows = (uint32_t)json_integer_value(json_object_get(a, "cached_tokens"));
    return 0;
}

/* A request's "queued" span: its id and the time it reached the queue. */
static int add_arrival(plan_replay *r, json_t *ev) {
    json_int_t id = json_integer_value(json_object_get(json_object_get(ev, "args"), "id"));
    if (id < 1 || (size_t)id > r->n_arrivals) return -1;
    r->arrivals[id - 1] = ns_of_us(json_object_get(ev, "ts"));
    return 0;
}

/* A request's "decode" span: its end is when it finished. */
static int add_finish(plan_replay *r, json_t *ev) {
    json_int_t id = json_integer_value(json_object_get(json_object_get(ev, "args"), "id"));
    if (id < 1 || (size_t)id > r->n_arrivals) return -1;
    r->finishes[id - 1] =
        ns_of_us(json_object_get(ev, "ts")) + ns_of_us(json_object_get(ev, "dur"));
    return 0;
}

static void read_prime(plan_replay *r, json_t *root) {
    json_t *p = json_object_get(json_object_get(root, "otherData"), "prime");
    r->prime_t1_ns = json_number_value(json_object_get(p, "t1_ns"));
    r->prime_tn_ns = json_number_value(json_object_get(p, "tn_ns"));
    r->prime_n = (uint32_t)json_integer_value(json_object_get(p, "n"));
    r->itl_target_ms = json_number_value(json_object_get(p, "itl_target_ms"));
}

static int from_json(plan_replay *r, json_t *root, const char *trace_path, tps_err *e);

int plan_replay_read(plan_replay *r, const char *trace_path, tps_err *e) {
    memset(r, 0, sizeof *r);
    json_error_t je;
    json_t *root = json_load_file(trace_path, 0, &je);
    if (!root) return tps_fail(e, TPS_EINVAL, "replay: %s:%d: %s", trace_path, je.line, je.text);
    int rc = from_json(r, root, trace_path, e);
    json_decref(root);
    return rc;
}

int plan_replay_parse(plan_replay *r, const char *buf, size_t len, const char *name, tps_err *e) {
    memset(r, 0, sizeof *r);
    json_error_t je;
    json_t *root = json_loadb(buf, len, 0, &je);
    if (!root) return tps_fail(e, TPS_EINVAL, "replay: %s:%d: %s", name, je.line, je.text);
    int rc = from_json(r, root, name, e);
    json_decref(root);
    return rc;
}

static int from_json(plan_replay *r, json_t *root, const char *trace_path, tps_err *e) {
    json_t *evs = json_object_get(root, "traceEvents");
    size_t n = json_array_size(evs), nq = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(evs, i), "name"));
        nq += name && !strcmp(name, "queued");
    }
    r->steps = calloc(n ? n : 1, sizeof *r->steps);
    r->arrivals = calloc(nq ? nq : 1, sizeof *r->arrivals);
    r->finishes = calloc(nq ? nq : 1, sizeof *r->finishes);
    r->n_arrivals = nq;
    int rc = r->steps && r->arrivals && r->finishes ? 0 : tps_fail(e, TPS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *ev = json_array_get(evs, i);
        const char *name = json_string_value(json_object_get(ev, "name"));
        if (name && !strcmp(name, "step"))
            rc = add_step(r, ev);
        else if (name && ((!strcmp(name, "queued") && add_arrival(r, ev)) ||
                          (!strcmp(name, "decode") && add_finish(r, ev))))
            rc = tps_fail(e, TPS_EINVAL,
                          "replay: %s: request ids are not 1..%zu (a request was cancelled "
                          "before it ran?)",
                          trace_path, nq);
    }
    if (!rc) read_prime(r, root);
    if (rc) plan_replay_free(r);
    return rc;
}

void plan_replay_free(plan_replay *r) {
    TPS_FREE_ALL(r->steps, r->arrivals, r->finishes);
    memset(r, 0, sizeof *r);
}
