/* The Responses API's store: answers kept in memory so that a later
 * request can continue from one (previous_response_id) or fetch or delete
 * it (GET / DELETE /v1/responses/{id}). Bounded three ways: entries,
 * bytes, and age; the oldest entry goes first when a new one needs room,
 * and every eviction is counted (/metrics). Ids that left recently are
 * remembered with why (evicted, expired, deleted), so a 404 can say which.
 * Thread-safe: workers read it while preparing a request, the HTTP thread
 * writes it when an answer is done.
 *
 * Not here: what a conversation or response holds (api_responses*.c), HTTP,
 * persistence (a restart empties it). */
#ifndef TPS_SERVER_RESPONSE_STORE_H
#define TPS_SERVER_RESPONSE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define RESPONSE_STORE_ID_MAX 96 /* bytes of an id, NUL included */

typedef struct response_store response_store;

/* Limits; 0 entries: the store keeps nothing (store: true is then a 400). */
typedef struct response_store_limits {
    uint32_t max_entries; /* default 1024 */
    size_t max_bytes;     /* conversation + response bytes of all entries; default 64 MiB */
    uint32_t max_age_s;   /* an entry older than this is gone; default 3600; 0: no limit */
} response_store_limits;

typedef struct response_store_stats {
    uint64_t entries, bytes;
    uint64_t evicted_total; /* removed to make room (entries or bytes) */
    uint64_t expired_total; /* removed for age */
    uint64_t stored_total;
} response_store_stats;

void response_store_limits_default(response_store_limits *l);
int response_store_create(response_store **out, const response_store_limits *l, tps_err *err);
void response_store_free(response_store *s);

/* Keeps copies of conversation (a JSON array of chat messages) and
 * response (the response object) under id, replacing an entry of that id.
 * now_ns: a monotonic clock. TPS_ERANGE when the entry alone is over
 * max_bytes (or the store keeps nothing); TPS_ENOMEM. */
int response_store_put(response_store *s, const char *id, const char *conversation, size_t nc,
                       const char *response, size_t nr, uint64_t now_ns, tps_err *err);

typedef enum response_part { RESPONSE_CONVERSATION = 0, RESPONSE_OBJECT = 1 } response_part;

/* A malloc'ed copy (NUL-ended) of one part of id's entry in *out, *n its
 * length; TPS_ENOENT with why the id is not there in err (never stored,
 * evicted for room, expired, deleted). */
int response_store_get(response_store *s, const char *id, response_part part, uint64_t now_ns,
                       char **out, size_t *n, tps_err *err);
/* Removes id's entry: 0, or TPS_ENOENT with why in err. */
int response_store_delete(response_store *s, const char *id, uint64_t now_ns, tps_err *err);
void response_store_get_stats(response_store *s, response_store_stats *st);

#endif
