/* The OpenAI request parser (server/openai.h) driven the way the unit tests
 * drive it: a NUL-terminated body parsed, and a body that must be refused
 * checked for a 400 naming the field at fault. Asserts (Criterion). Not
 * here: an HTTP client (oai_client.h). */
#ifndef TPS_TEST_OAI_REFUSAL_H
#define TPS_TEST_OAI_REFUSAL_H

#include "server/api/openai.h"

/* oai_parse over strlen(body) bytes. */
int test_oai_parse(oai_request *r, oai_kind k, const char *body, oai_error *e);
/* body parses into *r (the caller frees it), or the test fails with the
 * parser's message. */
void oai_parse_ok(oai_request *r, oai_kind k, const char *body);
/* body is refused with a 400 whose param is param and whose code is code
 * (NULL: any code). */
void oai_expect_refused_code(oai_kind k, const char *body, const char *param, const char *code);
/* The same with a message that contains msg_has (NULL: any message). */
void oai_expect_refused_msg(oai_kind k, const char *body, const char *param, const char *msg_has);

#endif
