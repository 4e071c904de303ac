/* A small OpenAI-API client for the server tests (libcurl on 127.0.0.1):
 * POST a JSON body, and read a response whole or streamed into one shape -
 * each choice's content, reasoning_content, token ids, finish_reason, and
 * the usage and timings objects - so a test compares a streamed answer with
 * a whole one field by field. Not a general client: bodies are trusted to
 * be the server's. */
#ifndef TPS_TEST_OAI_CLIENT_H
#define TPS_TEST_OAI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OAI_ANSWER_MAX_CHOICES 16
#define OAI_ANSWER_MAX_IDS     512

typedef struct oai_choice_out {
    char *content;   /* malloc'ed; "" when none */
    char *reasoning; /* malloc'ed; NULL when the field never came */
    char finish[32];
    int32_t ids[OAI_ANSWER_MAX_IDS]; /* streamed token_ids, in order */
    size_t n_ids;
} oai_choice_out;

typedef struct oai_answer {
    long status;
    char *body; /* the raw body, malloc'ed */
    size_t n_choices;
    oai_choice_out choice[OAI_ANSWER_MAX_CHOICES];
    json_t *usage;   /* owned; NULL when absent */
    json_t *timings; /* owned; the body's, or the stream's usage chunk's or last finish chunk's */
    json_t *error;   /* owned; the error object of a 4xx/5xx or a stream's error event */
} oai_answer;

/* POSTs body to path; fills *a (stream or whole, told from the body).
 * Returns the HTTP status. */
long oai_post(int port, const char *path, const char *body, oai_answer *a);
/* POSTs to /v1/chat/completions the object head (its opening up to a comma)
 * + fields + "stream" (true with the usage chunk, or false), and asserts
 * the status is 200. */
void oai_chat_ok(int port, const char *head, const char *fields, bool stream, oai_answer *a);
void oai_answer_free(oai_answer *a);
/* The error's param / code, "" when absent. */
const char *oai_error_param(const oai_answer *a);
const char *oai_error_code(const oai_answer *a);

#endif
