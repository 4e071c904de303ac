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

static void feed(stop_matcher *m, sink *k, const char *piece) {
    stop_emit e;
    stop_feed(m, piece, strlen(piece), &e);
    take(k, &e);
}

static void init_stops(stop_matcher *m, const char *const *s, size_t n) {
    tps_err err = {{0}};
    cr_assert_eq(stop_init(m, s, n, NULL, 0, 0, NULL, &err), 0, "%s", err.msg);
}

Test(stop, stop_string_split_across_three_pieces_is_caught_and_not_emitted) {
    static stop_matcher m;
    const char *stops[] = {"</answer>"};
    init_stops(&m, stops, 1);
    sink k = {0};
    feed(&m, &k, "forty-two</an");
    cr_assert_str_eq(k.buf, "forty-two", "the possible start is held back");
    cr_assert_eq(stop_held(&m), 4);
    feed(&m, &k, "sw");
    cr_assert_str_eq(k.buf, "forty-two");
    feed(&m, &k, "er> and more");
    cr_assert(k.matched);
    cr_assert_str_eq(k.buf, "forty-two", "no stop text, nothing after it");
    feed(&m, &k, "ignored");
    stop_emit e;
    stop_flush(&m, &e);
    take(&k, &e);
    cr_assert_str_eq(k.buf, "forty-two", "nothing after a match");
}

Test(stop, text_before_a_stop_string_in_the_same_piece_is_emitted) {
    static stop_matcher m;
    const char *stops[] = {"\n\n", "STOP"};
    init_stops(&m, stops, 2);
    sink k = {0};
    stop_emit e;
    stop_feed(&m, "Hello STOP world", 16, &e);
    cr_assert(e.matched);
    cr_assert_eq(e.which, 1);
    take(&k, &e);
    cr_assert_str_eq(k.buf, "Hello ");
}

Test(stop, partial_match_that_fails_is_released) {
    static stop_matcher m;
    const char *stops[] = {"<|end|>"};
    init_stops(&m, stops, 1);
    sink k = {0};
    feed(&m, &k, "a <");
    cr_assert_str_eq(k.buf, "a ");
    feed(&m, &k, "|en");
    cr_assert_str_eq(k.buf, "a ");
    feed(&m, &k, "try");
    cr_assert_str_eq(k.buf, "a <|entry", "the held bytes come out once they cannot match");
    cr_assert_eq(stop_held(&m), 0);
    cr_assert(!k.matched);
    /* A failed partial that contains the start of a new match keeps only that. */
    feed(&m, &k, " <|e<|");
    cr_assert_str_eq(k.buf, "a <|entry <|e");
    cr_assert_eq(stop_held(&m), 2);
}

Test(stop, flush_at_end_releases_the_held_bytes) {
    static stop_matcher m;
    const char *stops[] = {"###"};
    init_stops(&m, stops, 1);
    sink k = {0};
    feed(&m, &k, "done ##");
    cr_assert_str_eq(k.buf, "done ");
    stop_emit e;
    stop_flush(&m, &e);
    cr_assert(!e.matched);
    take(&k, &e);
    cr_assert_str_eq(k.buf, "done ##");
    cr_assert_eq(stop_held(&m), 0);
}

Test(stop, earliest_full_match_wins_and_shorter_string_inside_a_longer) {
    static stop_matcher m;
    const char *stops[] = {"abcd", "bc"};
    init_stops(&m, stops, 2);
    sink k = {0};
    feed(&m, &k, "xa");
    feed(&m, &k, "bc");
    cr_assert(k.matched);
    cr_assert_str_eq(k.buf, "xa");
}

Test(stop, byte_by_byte_feeding_equals_whole_text) {
    static stop_matcher m;
    const char *stops[] = {"aab", "abab", "zz"};
    const char *text = "aaaabaaababz";
    /* Whole text first: the earliest full match is "aab" at offset 2. */
    init_stops(&m, stops, 3);
    sink whole = {0};
    feed(&m, &whole, text);
    cr_assert(whole.matched);
    cr_assert_str_eq(whole.buf, "aa");
    init_stops(&m, stops, 3);
    sink k = {0};
    for (size_t i = 0; text[i]; i++) {
        char one[2] = {text[i], 0};
        feed(&m, &k, one);
    }
    cr_assert(k.matched);
    cr_assert_str_eq(k.buf, "aa");
}

Test(stop, no_stop_strings_release_everything_at_once) {
    static stop_matcher m;
    init_stops(&m, NULL, 0);
    sink k = {0};
    feed(&m, &k, "all of it");
    cr_assert_str_eq(k.buf, "all of it");
    cr_assert_eq(stop_held(&m), 0);
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
