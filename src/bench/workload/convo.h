/* The conversations of a multi-turn run (tps bench --turns): whose turn
 * may go next, the replies each has received, and each one's session id.
 *
 * A conversation sends turn 0, waits for its reply, thinks for think_ns,
 * then sends turn 1 with the whole history, and so on until `turns` turns;
 * a failed turn ends it (there is no reply to build the next turn on).
 * Among the conversations that may send, the next one is taken round robin
 * from where the last search stopped, so N conversations share C slots
 * fairly. Time comes from the caller (CLOCK_MONOTONIC ns).
 *
 * Single-threaded: the client's loop owns the set. Not here: sending,
 * building bodies (workload_turn_body), metrics. */
#ifndef TPS_BENCH_CONVO_H
#define TPS_BENCH_CONVO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct convo {
    uint32_t turns;    /* this conversation's turns (<= the set's; a dataset's may be fewer) */
    uint32_t next;     /* the turn to send next, from 0; == turns once ended */
    bool in_flight;    /* a turn was sent and is not settled */
    uint64_t ready_ns; /* the next turn may go at or after this */
    uint64_t history_tokens; /* client estimate of the history's tokens (0: unknown) */
    char **replies;          /* (turns,) reply to turn k, owned; points into the set's arrays */
    size_t *reply_lens;      /* (turns,) */
} convo;

typedef struct convo_set {
    convo *c; /* (n,) */
    size_t n;
    uint32_t turns;
    uint64_t think_ns;
    size_t cursor; /* round robin: the next search starts here */
    size_t open;   /* conversations not ended */
    char tag[32];  /* session ids are "<tag>-<conversation>" */
    char **reply_slots;
    size_t *len_slots; /* (n * turns,) each: backing for every convo's arrays */
} convo_set;

/* n >= 1 conversations of turns >= 1 turns; think_s >= 0 seconds between a
 * reply and the next turn; tag (copied, truncated to 31 bytes) starts every
 * session id. All are ready at time 0. */
int convo_set_init(convo_set *s, size_t n, uint32_t turns, double think_s, const char *tag,
                   tps_err *e);
void convo_set_free(convo_set *s);
/* Conversation i has only `turns` turns (at most the set's; 0 ends it at
 * once). Before the run. */
void convo_set_turns(convo_set *s, size_t i, uint32_t turns);

/* The next conversation, round robin, whose next turn may go at now:
 * true with *conv set, false when none may. */
bool convo_next(convo_set *s, uint64_t now, size_t *conv);
/* The earliest time a conversation that is neither in flight nor ended may
 * go; UINT64_MAX when none waits. */
uint64_t convo_next_ready_ns(const convo_set *s);
/* Conversation i's next turn was sent. */
void convo_sent(convo_set *s, size_t i);
/* Conversation i's turn settled at now. ok: reply (len bytes; copied) is its
 * answer and history_tokens grows by turn_tokens (0 makes the estimate
 * unknown); the next turn may go after the think time, or the conversation
 * ends after its last turn. Not ok, or no memory for the reply: it ends. */
void convo_settled(convo_set *s, size_t i, bool ok, const char *reply, size_t len,
                   uint64_t turn_tokens, uint64_t now);
bool convo_all_ended(const convo_set *s);
/* "X-Session-Id: <tag>-<i>" into out. */
void convo_session_header(const convo_set *s, size_t i, char *out, size_t cap);

#endif
