/* Implementation of tests/support/oai_refusal.h. */
#include "support/oai_refusal.h"

#include <criterion/criterion.h>
#include <string.h>

int test_oai_parse(oai_request *r, oai_kind k, const char *body, oai_error *e) {
    return oai_parse(r, k, body, strlen(body), e);
}

void oai_parse_ok(oai_request *r, oai_kind k, const char *body) {
    oai_error e;
    cr_assert_eq(test_oai_parse(r, k, body, &e), 0, "%s", e.message);
}

static void expect_refused(oai_kind k, const char *body, const char *param, const char *code,
                           const char *msg_has) {
    oai_request r;
    oai_error e;
    cr_assert_neq(test_oai_parse(&r, k, body, &e), 0, "accepted: %s", body);
    cr_assert_eq(e.status, 400, "%s", body);
    cr_assert_str_eq(e.param, param, "param for %s (%s)", body, e.message);
    if (code) cr_assert_str_eq(e.code, code, "code for %s", body);
    if (msg_has) cr_assert(strstr(e.message, msg_has), "'%s' lacks '%s'", e.message, msg_has);
}

void oai_expect_refused_code(oai_kind k, const char *body, const char *param, const char *code) {
    expect_refused(k, body, param, code, NULL);
}

void oai_expect_refused_msg(oai_kind k, const char *body, const char *param, const char *msg_has) {
    expect_refused(k, body, param, NULL, msg_has);
}
