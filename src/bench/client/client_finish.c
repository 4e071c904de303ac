/* Ending requests (client_internal.h): why a request failed, its token
 * counts from the best source it had, its record settled; the requests past
 * --timeout or silent past --idle-timeout. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "bench/client/client_internal.h"
#include "bench/workload/convo.h"

static bench_errkind map_curl(CURLcode cc) {
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
        return BENCH_ERR_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return BENCH_ERR_TIMEOUT;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
        return BENCH_ERR_RESET;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
        return BENCH_ERR_MALFORMED;
    default:
        return BENCH_ERR_OTHER;
    }
}

/* The error message of a non-200 body: error.message if JSON, else the text. */
static void http_error_msg(conn *c, int status) {
    json_t *j = c->body_len ? json_loadb(c->body, c->body_len, 0, NULL) : NULL;
    json_t *er = json_object_get(j, "error");
    const char *m = json_is_object(er)   ? json_string_value(json_object_get(er, "message"))
                    : json_is_string(er) ? json_string_value(er)
                                         : NULL;
    snprintf(c->msg, sizeof c->msg, "HTTP %d: %.200s", status, m ? m : c->body_len ? c->body : "");
    json_decref(j);
}

static bench_dialect r_dialect(const conn *c) {
    return c->run->dialect;
}

/* A non-streamed 200 body: one JSON response. */
static void finish_json_body(conn *c, bench_record *rec) {
    bench_chunk ch;
    tps_err e;
    if (bench_chunk_parse(&ch, r_dialect(c), c->body ? c->body : "", c->body_len, "", &e) != 0) {
        client_set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
        return;
    }
    if (ch.error) client_set_err(c, BENCH_ERR_STREAM_ERROR, "server error: ", ch.error_msg);
    client_take_usage(c, rec, &ch);
    client_keep_text(c, &ch);
    c->done = true;
    bench_chunk_release(&ch);
}

/* The request's error kind: the first of a forced end (timeout, stall), a
 * parse error, the transfer's, the HTTP status's, the JSON body's, a stream
 * without [DONE]; c->msg says what happened. */
static bench_errkind settle_error(conn *c, bench_record *rec, CURLcode cc, bench_errkind forced) {
    if (!c->checked) {
        long status = 0;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        rec->http_status = (int)status;
    }
    bench_errkind k = forced != BENCH_OK ? forced : c->err;
    if (forced != BENCH_OK && c->err == BENCH_OK) c->err = forced;
    if (k == BENCH_OK && cc != CURLE_OK) {
        k = map_curl(cc);
        if (rec->http_status && rec->http_status != 200 && k == BENCH_ERR_RESET) k = BENCH_OK;
        if (k != BENCH_OK)
            snprintf(c->msg, sizeof c->msg, "%.100s%s%.140s", curl_easy_strerror(cc),
                     c->curl_err[0] ? ": " : "", c->curl_err);
    }
    if (k == BENCH_OK && rec->http_status != 200) {
        const int st = rec->http_status;
        k = st >= 300 && st < 400   ? BENCH_ERR_HTTP_3XX
            : st >= 400 && st < 500 ? BENCH_ERR_HTTP_4XX
            : st >= 500 && st < 600 ? BENCH_ERR_HTTP_5XX
                                    : BENCH_ERR_HTTP_OTHER;
        http_error_msg(c, rec->http_status);
    }
    if (k == BENCH_OK && !c->is_sse) {
        finish_json_body(c, rec);
        k = c->err;
    }
    if (k == BENCH_OK && !c->done) {
        static const char *const END[BENCH_DIALECT_COUNT] = {
            [BENCH_DIALECT_OPENAI] = "[DONE]",
            [BENCH_DIALECT_RESPONSES] = "response.completed",
            [BENCH_DIALECT_MESSAGES] = "message_stop",
            [BENCH_DIALECT_EMBEDDINGS] = "a body",
        };
        k = BENCH_ERR_TRUNCATED;
        snprintf(c->msg, sizeof c->msg, "the stream ended without %s%s", END[c->run->dialect],
                 sse_reader_pending(&c->sse) ? " (in the middle of an event)" : "");
    }
    return k;
}

/* What the server's usage said that cannot be, in rec->implausible (the
 * first found); an implausible figure is then not used: the prompt falls
 * back to the client's count, a cached share above the prompt is dropped. */
#define PLAUSIBLE_PROMPT_MAX (1ull << 27) /* no model reads 134M prompt tokens */
static void check_plausible(bench_record *rec, const conn *c) {
    char *w = rec->implausible;
    const size_t cap = sizeof rec->implausible;
    const uint64_t p = rec->usage_prompt, sent = rec->input_client;
    if (p > PLAUSIBLE_PROMPT_MAX || (sent && p > 64 * (uint64_t)sent + 65536)) {
        snprintf(w, cap, "usage.prompt_tokens %llu for a prompt the client sized at %llu tokens",
                 (unsigned long long)p, (unsigned long long)sent);
        rec->usage_prompt = 0;
    }
    if (rec->has_cached && rec->usage_prompt && rec->cached_tokens > rec->usage_prompt) {
        if (!*w)
            snprintf(w, cap, "cached_tokens %llu above prompt_tokens %llu",
                     (unsigned long long)rec->cached_tokens, (unsigned long long)rec->usage_prompt);
        rec->has_cached = false;
    }
    if (!*w && rec->has_usage && rec->max_tokens && rec->usage_completion > rec->max_tokens + 8ull)
        snprintf(w, cap, "completion_tokens %llu for max_tokens %u",
                 (unsigned long long)rec->usage_completion, rec->max_tokens);
    if (!*w && c->has_reasoning_usage && rec->has_usage &&
        c->reasoning_usage > rec->usage_completion)
        snprintf(w, cap, "reasoning_tokens %llu above completion_tokens %llu",
                 (unsigned long long)c->reasoning_usage, (unsigned long long)rec->usage_completion);
}

/* The request's output and prompt token counts, from the best source it has. */
static void count_tokens(run_state *r, conn *c, bench_record *rec, bool ok) {
    /* One token per event, empty-text ones included, when usage says
     * exactly that: llama.cpp's server streams a token whose bytes are not
     * yet UTF-8 as an event with empty text, and those arrivals are its ITL. */
    tps_err e;
    if (rec->has_usage && ok && !c->saw_ids && c->n_held &&
        rec->usage_completion == rec->stream_tokens + c->n_held &&
        timeline_insert_tokens(&rec->tl, c->held, c->n_held, &e) == TPS_OK) {
        rec->stream_tokens += c->n_held;
        rec->held_tokens = c->n_held;
        r->out_tokens += c->n_held;
    }
    /* the count: usage > ids in the stream > re-tokenized text > events */
    if (rec->has_usage && ok) {
        timeline_set_output_tokens(&rec->tl, rec->usage_completion, TL_COUNT_USAGE, &e);
    } else if (c->saw_ids) {
        timeline_set_count_source(&rec->tl, TL_COUNT_STREAM_IDS);
    } else {
        /* text cut at BENCH_TEXT_KEEP_MAX would undercount: events then */
        int64_t n =
            c->text_len && !rec->text_cut ? workload_count_tokens(r->wl, c->text, c->text_len) : -1;
        if (n >= 0 && ok)
            timeline_set_output_tokens(&rec->tl, (uint64_t)n, TL_COUNT_RETOKENIZED, &e);
        else
            timeline_set_count_source(&rec->tl, TL_COUNT_EVENTS);
    }
    if (ok) check_plausible(rec, c);
    uint64_t prompt = rec->usage_prompt ? rec->usage_prompt
                      : rec->has_timings && rec->timings.prompt_tokens > 0
                          ? (uint64_t)rec->timings.prompt_tokens
                          : rec->input_client;
    timeline_set_prompt_tokens(&rec->tl, prompt);
    /* thinking: the server's count, else the stream's thinking events */
    rec->reasoning_from_usage = c->has_reasoning_usage && ok;
    rec->reasoning_tokens = rec->reasoning_from_usage ? c->reasoning_usage : c->reasoning_stream;
    if (!c->reasoning_stream && c->is_sse) /* no thinking: the answer began with the first token */
        timeline_mark_answer(&rec->tl, timeline_first_token_ns(&rec->tl));
}

/* The loop's counters, for the progress line another thread prints. */
void client_publish_progress(run_state *r) {
    atomic_store_explicit(&r->prog->completed, r->completed, memory_order_relaxed);
    atomic_store_explicit(&r->prog->failed, r->failed, memory_order_relaxed);
    atomic_store_explicit(&r->prog->out_tokens, r->out_tokens, memory_order_relaxed);
    atomic_store_explicit(&r->prog->in_flight, r->n_conns - r->n_free, memory_order_relaxed);
}

/* Settles the request on conn c: its error kind, end time and token count. */
void client_finish(run_state *r, conn *c, CURLcode cc, bench_errkind forced, uint64_t now) {
    bench_record *rec = &r->recs[c->rec];
    curl_multi_remove_handle(r->multi, c->easy);
    bench_errkind k = settle_error(c, rec, cc, forced);
    rec->err = k;
    if (k != BENCH_OK) rec->err_msg = strdup(c->msg[0] ? c->msg : bench_err_name(k));
    uint64_t end = c->t_last_byte ? c->t_last_byte : now;
    timeline_finish(&rec->tl, end, k == BENCH_OK);
    count_tokens(r, c, rec, k == BENCH_OK);
    if (k == BENCH_OK && bench_endpoint_generates(r->cfg->endpoint) && !rec->tl.output_tokens) {
        k = rec->err = BENCH_ERR_NO_TOKENS; /* a [DONE] alone is no answer */
        rec->err_msg = strdup("the response ended cleanly without an output token");
        timeline_finish(&rec->tl, end, false);
    }
    if (r->multi_turn) {
        const workload_item *it = &r->wl->items[rec->item];
        uint64_t turn_tokens = it->input_tokens ? it->input_tokens + rec->tl.output_tokens : 0;
        convo_settled(&r->convos, rec->conversation, k == BENCH_OK, c->reply, c->reply_len,
                      turn_tokens, now);
    }
    if (k == BENCH_OK)
        r->completed++;
    else if (k != BENCH_ERR_CANCELLED)
        r->failed++;
    if (r->cfg->verbose && k != BENCH_OK)
        fprintf(stderr, "tps bench: request %llu: %s: %s\n", (unsigned long long)rec->seq,
                bench_err_name(k), rec->err_msg);
    c->busy = false;
    r->free_list[r->n_free++] = (size_t)(c - r->conns);
    client_publish_progress(r);
}

/* Requests over --timeout or silent for --idle-timeout. */
void client_check_timeouts(run_state *r, uint64_t now) {
    const uint64_t tmo = (uint64_t)(r->cfg->timeout_s * 1e9);
    const uint64_t idle = (uint64_t)(r->cfg->idle_timeout_s * 1e9);
    for (size_t i = 0; i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        if (!c->busy) continue;
        uint64_t sent = r->recs[c->rec].tl.t_sent;
        uint64_t last = c->t_last_byte ? c->t_last_byte : sent;
        if (tmo && now - sent > tmo) {
            snprintf(c->msg, sizeof c->msg, "no complete response within --timeout %.3g s",
                     r->cfg->timeout_s);
            client_finish(r, c, CURLE_OK, BENCH_ERR_TIMEOUT, now);
        } else if (idle && now - last > idle) {
            bool none = !c->t_first_byte;
            snprintf(c->msg, sizeof c->msg, "%s for --idle-timeout %.3g s",
                     none ? "no response byte" : "the stream went silent", r->cfg->idle_timeout_s);
            client_finish(r, c, CURLE_OK, none ? BENCH_ERR_NO_RESPONSE : BENCH_ERR_STALL, now);
        }
    }
}
