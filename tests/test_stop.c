/* Tests for engine/stop: stop tokens and the streaming stop-string matcher
 * (what a server releases of a stream and what it holds back). The sampling
 * chain is tests/test_sampler.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample/stop.h"

/* ---------------------------------------------------------------------------
 * Stop strings and tokens
 * ------------------------------------------------------------------------- */

/* Accumulates everything released, as a server would emit it. */
typedef struct sink {
    char buf[4096];
    size_t len;
    bool matched;
} sink;

static void take(sink *k, const stop_emit *e) {
    memcpy(k->buf + k->len, e->head, e->head_len);
    k->len += e->head_len;
    memcpy(k->buf + k->len, e->tail, e->tail_len);
    k->len += e->tail_len;
    k->buf[k->len] = 0;
    k->matched = k->matched || e->matched;
}

/* A matcher and everything it has released. */
typedef struct stream {
    stop_matcher m;
    sink k;
} stream;

/* Starts s on the NULL-terminated stop strings (NULL: none), nothing
 * released yet. */
static void start(stream *s, const char *const *stops) {
    size_t n = 0;
    while (stops && stops[n])
        n++;
    tps_err err = {{0}};
    cr_assert_eq(stop_init(&s->m, stops, n, NULL, 0, 0, NULL, &err), 0, "%s", err.msg);
    memset(&s->k, 0, sizeof s->k);
}

static void feed(stream *s, const char *piece) {
    stop_emit e;
    stop_feed(&s->m, piece, strlen(piece), &e);
    take(&s->k, &e);
}

Test(stop, stop_string_split_across_three_pieces_is_caught_and_not_emitted) {
    static stream s;
    start(&s, (const char *const[]){"</answer>", NULL});
    feed(&s, "forty-two</an");
    cr_assert_str_eq(s.k.buf, "forty-two", "the possible start is held back");
    cr_assert_eq(stop_held(&s.m), 4);
    feed(&s, "sw");
    cr_assert_str_eq(s.k.buf, "forty-two");
    feed(&s, "er> and more");
    cr_assert(s.k.matched);
    cr_assert_str_eq(s.k.buf, "forty-two", "no stop text, nothing after it");
    feed(&s, "ignored");
    stop_emit e;
    stop_flush(&s.m, &e);
    take(&s.k, &e);
    cr_assert_str_eq(s.k.buf, "forty-two", "nothing after a match");
}

Test(stop, text_before_a_stop_string_in_the_same_piece_is_emitted) {
    static stream s;
    start(&s, (const char *const[]){"\n\n", "STOP", NULL});
    stop_emit e;
    stop_feed(&s.m, "Hello STOP world", 16, &e);
    cr_assert(e.matched);
    cr_assert_eq(e.which, 1);
    take(&s.k, &e);
    cr_assert_str_eq(s.k.buf, "Hello ");
}

Test(stop, partial_match_that_fails_is_released) {
    static stream s;
    start(&s, (const char *const[]){"<|end|>", NULL});
    feed(&s, "a <");
    cr_assert_str_eq(s.k.buf, "a ");
    feed(&s, "|en");
    cr_assert_str_eq(s.k.buf, "a ");
    feed(&s, "try");
    cr_assert_str_eq(s.k.buf, "a <|entry", "the held bytes come out once they cannot match");
    cr_assert_eq(stop_held(&s.m), 0);
    cr_assert(!s.k.matched);
    /* A failed partial that contains the start of a new match keeps only that. */
    feed(&s, " <|e<|");
    cr_assert_str_eq(s.k.buf, "a <|entry <|e");
    cr_assert_eq(stop_held(&s.m), 2);
}

Test(stop, flush_at_end_releases_the_held_bytes) {
    static stream s;
    start(&s, (const char *const[]){"###", NULL});
    feed(&s, "done ##");
    cr_assert_str_eq(s.k.buf, "done ");
    stop_emit e;
    stop_flush(&s.m, &e);
    cr_assert(!e.matched);
    take(&s.k, &e);
    cr_assert_str_eq(s.k.buf, "done ##");
    cr_assert_eq(stop_held(&s.m), 0);
}

Test(stop, earliest_full_match_wins_and_shorter_string_inside_a_longer) {
    static stream s;
    start(&s, (const char *const[]){"abcd", "bc", NULL});
    feed(&s, "xa");
    feed(&s, "bc");
    cr_assert(s.k.matched);
    cr_assert_str_eq(s.k.buf, "xa");
}

Test(stop, byte_by_byte_feeding_equals_whole_text) {
    static stream whole, s;
    const char *const stops[] = {"aab", "abab", "zz", NULL};
    const char *text = "aaaabaaababz";
    /* Whole text first: the earliest full match is "aab" at offset 2. */
    start(&whole, stops);
    feed(&whole, text);
    cr_assert(whole.k.matched);
    cr_assert_str_eq(whole.k.buf, "aa");
    start(&s, stops);
    for (size_t i = 0; text[i]; i++) {
        char one[2] = {text[i], 0};
        feed(&s, one);
    }
    cr_assert(s.k.matched);
    cr_assert_str_eq(s.k.buf, "aa");
}

Test(stop, no_stop_strings_release_everything_at_once) {
    static stream s;
    start(&s, NULL);
    feed(&s, "all of it");
    cr_assert_str_eq(s.k.buf, "all of it");
    cr_assert_eq(stop_held(&s.m), 0);
}

Test(stop, stop_token_ids_are_a_set) {
    static stop_matcher m;
    const int32_t ids[] = {2, 128009};
    tps_err err;
    cr_assert_eq(stop_init(&m, NULL, 0, ids, 2, 128256, NULL, &err), 0);
    cr_assert(stop_is_token(&m, 2));
    cr_assert(stop_is_token(&m, 128009));
    cr_assert(!stop_is_token(&m, 3));
}

Test(stop, validation_errors_name_the_field) {
    static stop_matcher m;
    tps_err err;
    const char *field;
    char longs[STOP_MAX_LEN + 2];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = 0;
    const char *too_long[] = {"ok", longs};
    cr_assert_eq(stop_init(&m, too_long, 2, NULL, 0, 0, &field, &err), TPS_EINVAL);
    cr_assert_str_eq(field, "stop");
    cr_assert(strstr(err.msg, "stop[1]"), "%s", err.msg);
    const char *empty[] = {""};
    cr_assert_eq(stop_init(&m, empty, 1, NULL, 0, 0, &field, &err), TPS_EINVAL);
    cr_assert(strstr(err.msg, "stop[0] is empty"), "%s", err.msg);
    const char *many[STOP_MAX_STRINGS + 1];
    for (int i = 0; i <= STOP_MAX_STRINGS; i++)
        many[i] = "s";
    cr_assert_eq(stop_init(&m, many, STOP_MAX_STRINGS + 1, NULL, 0, 0, &field, &err), TPS_EINVAL);
    cr_assert_str_eq(field, "stop");
    const int32_t bad_ids[] = {5, 40000};
    cr_assert_eq(stop_init(&m, NULL, 0, bad_ids, 2, 32000, &field, &err), TPS_EINVAL);
    cr_assert_str_eq(field, "stop_token_ids");
    cr_assert(strstr(err.msg, "stop_token_ids[1]"), "%s", err.msg);
    /* Exactly the limits are fine. */
    longs[STOP_MAX_LEN] = 0;
    const char *at_limit[] = {longs};
    cr_assert_eq(stop_init(&m, at_limit, 1, NULL, 0, 0, &field, &err), 0);
}
