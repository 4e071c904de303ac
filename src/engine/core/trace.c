/* Chrome trace JSON writer for engine steps and request lifecycles. Writes
 * plain text with fprintf: the format is fixed and flat, no JSON library
 * needed. Timestamps are microseconds since the engine started. The file
 * is written safely (base/file_write.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_write.h"
#include "base/grow.h"
#include "engine/core/trace.h"

void trace_init(trace *t, uint64_t t_origin) {
    memset(t, 0, sizeof *t);
    t->t_origin = t_origin;
}

void trace_free(trace *t) {
    free(t->steps);
    free(t->reqs);
    memset(t, 0, sizeof *t);
}

void trace_step_add(trace *t, const trace_step *s) {
    if (t->n_steps >= TRACE_MAX_RECORDS || TPS_GROW(t->steps, t->cap_steps, t->n_steps + 1, 1024)) {
        t->dropped++;
        return;
    }
    t->steps[t->n_steps++] = *s;
}

void trace_req_add(trace *t, uint64_t id, uint32_t choice, const engine_timings *tm,
                   engine_finish finish) {
    if (t->n_reqs >= TRACE_MAX_RECORDS || TPS_GROW(t->reqs, t->cap_reqs, t->n_reqs + 1, 1024)) {
        t->dropped++;
        return;
    }
    t->reqs[t->n_reqs++] = (trace_req){.id = id, .choice = choice, .tm = *tm, .finish = finish};
}

static double us(const trace *t, uint64_t ns) {
    return ns > t->t_origin ? (double)(ns - t->t_origin) / 1000.0 : 0.0;
}

/* A span of a request's track; args: its id (for a replay of the trace). */
static void span(FILE *fp, const trace *t, const char *name, uint64_t tid, uint64_t id, uint64_t a,
                 uint64_t b, int *first) {
    if (!a || !b || b < a) return;
    fprintf(fp,
            "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f,"
            "\"args\":{\"id\":%llu}}",
            *first ? "" : ",\n", name, (unsigned long long)tid, us(t, a), (double)(b - a) / 1000.0,
            (unsigned long long)id);
    *first = 0;
}

/* Through file_out (base/file_write.h): a regular file replaced whole,
 * /dev/stdout or a fifo written in place, every write checked and a
 * failure naming the path and the reason. */
int trace_write(const trace *t, const char *path, tps_err *err) {
    file_out out;
    tps_err oe = {{0}};
    if (file_out_open(&out, path, &oe)) return tps_fail(err, TPS_EIO, "trace: %s", oe.msg);
    FILE *fp = out.f;
    int first = 1;
    fprintf(fp,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_records\":%llu,"
            "\"prime\":{\"t1_ns\":%.0f,\"tn_ns\":%.0f,\"n\":%u,\"itl_target_ms\":%.9g}},"
            "\"traceEvents\":[\n",
            (unsigned long long)t->dropped, t->prime.t1_ns, t->prime.tn_ns, t->prime.n,
            t->prime.itl_target_ms);
    fprintf(fp, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
                "\"args\":{\"name\":\"engine steps\"}}");
    first = 0;
    for (size_t i = 0; i < t->n_steps; i++) {
        const trace_step *s = &t->steps[i];
        fprintf(fp,
                ",\n{\"name\":\"step\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"prefill_tokens\":%u,\"decode_tokens\":%u,\"running\":%u,"
                "\"waiting\":%u,\"kv_blocks\":%u,\"preemptions\":%u,\"cached_tokens\":%u,"
                "\"predicted_ms\":%.3f,\"actual_ms\":%.3f,\"weight_bytes\":%llu,"
                "\"experts\":%u,\"after_ms\":%.6f,\"taken\":%u}}",
                us(t, s->t0), (double)(s->t1 - s->t0) / 1000.0, s->prefill_tokens, s->decode_tokens,
                s->running, s->waiting, s->kv_blocks, s->preemptions, s->cached_tokens,
                (double)s->predicted_ns / 1e6, (double)(s->t1 - s->t0) / 1e6,
                (unsigned long long)s->weight_bytes, s->experts,
                s->t2 > s->t1 ? (double)(s->t2 - s->t1) / 1e6 : 0.0, s->taken);
    }
    for (size_t i = 0; i < t->n_reqs; i++) {
        const trace_req *r = &t->reqs[i];
        uint64_t tid = 1000 + i; /* one track per choice */
        fprintf(fp,
                ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%llu,"
                "\"args\":{\"name\":\"request %llu choice %u (%s, %u+%u tokens, %u cached, %u "
                "preemptions)\"}}",
                (unsigned long long)tid, (unsigned long long)r->id, r->choice,
                engine_finish_name(r->finish), r->tm.prompt_tokens, r->tm.generated_tokens,
                r->tm.cached_tokens, r->tm.preemptions);
        /* a request cancelled before it ran waited until the cancel */
        span(fp, t, "queued", tid, r->id, r->tm.t_queued,
             r->tm.t_first_scheduled ? r->tm.t_first_scheduled : r->tm.t_finished, &first);
        span(fp, t, "prefill", tid, r->id, r->tm.t_first_scheduled,
             r->tm.t_first_token ? r->tm.t_first_token : r->tm.t_finished, &first);
        span(fp, t, "decode", tid, r->id, r->tm.t_first_token, r->tm.t_finished, &first);
    }
    fprintf(fp, "\n]}\n");
    if (file_out_close(&out, &oe)) return tps_fail(err, TPS_EIO, "trace: %s", oe.msg);
    return 0;
}
