/* The fuzz harnesses as regression tests: every input in fuzz/corpus/<name>/
 * (the seeds) and fuzz/regressions/<name>/ (inputs a fuzzer once crashed
 * on) is replayed through the harness itself, compiled here with the normal
 * compiler and, in the ASan build, with the sanitizers. So a crash found by
 * `make fuzz` stays fixed without clang or libFuzzer: drop the input into
 * fuzz/regressions/<name>/ and this test replays it. A harness reports a
 * failed check by abort(), which Criterion shows as a crash of that test.
 *
 * Not here: fuzzing itself (scripts/fuzz.sh). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

/* Each harness defines LLVMFuzzerTestOneInput (and some an initializer):
 * renamed per harness so all of them live in one test program. */
#define LLVMFuzzerTestOneInput fuzz_gguf_one
#include "../fuzz/fuzz_gguf.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_dataset_one
#include "../fuzz/fuzz_dataset.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_sse_read_one
#include "../fuzz/fuzz_sse_read.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_openai_request_one
#include "../fuzz/fuzz_openai_request.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_chat_template_one
#include "../fuzz/fuzz_chat_template.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_template_one
#include "../fuzz/fuzz_template.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_http_frame_one
#include "../fuzz/fuzz_http_frame.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_prom_write_one
#define LLVMFuzzerInitialize   fuzz_prom_write_init
#include "../fuzz/fuzz_prom_write.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_tokenizer_one
#define LLVMFuzzerInitialize   fuzz_tokenizer_init
#include "../fuzz/fuzz_tokenizer.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_tokenizer_hf_one
#include "../fuzz/fuzz_tokenizer_hf.c"
#undef LLVMFuzzerTestOneInput

typedef int (*one_fn)(const uint8_t *, size_t);

/* Replays every file of fuzz/<sub>/<name>/; returns how many. */
static size_t replay_dir(const char *sub, const char *name, one_fn one) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fuzz/%s/%s", TPS_SOURCE_DIR, sub, name);
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *data = read_file_all(path, &len);
        if (!data) continue;
        cr_log_info("%s/%s/%s", sub, name, e->d_name);
        one((const uint8_t *)data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *name, one_fn one) {
    size_t seeds = replay_dir("corpus", name, one);
    size_t regs = replay_dir("regressions", name, one);
    cr_assert_gt(seeds, 0, "fuzz/corpus/%s has no seeds", name);
    cr_log_info("%s: %zu seeds, %zu regression inputs replayed", name, seeds, regs);
}

Test(fuzz_replay, gguf) {
    replay("fuzz_gguf", fuzz_gguf_one);
}

Test(fuzz_replay, dataset) {
    replay("fuzz_dataset", fuzz_dataset_one);
}

Test(fuzz_replay, sse) {
    replay("fuzz_sse_read", fuzz_sse_read_one);
}

Test(fuzz_replay, openai_request) {
    replay("fuzz_openai_request", fuzz_openai_request_one);
}

Test(fuzz_replay, chat_template) {
    replay("fuzz_chat_template", fuzz_chat_template_one);
}

Test(fuzz_replay, template) {
    replay("fuzz_template", fuzz_template_one);
}

Test(fuzz_replay, http_frame) {
    replay("fuzz_http_frame", fuzz_http_frame_one);
}

Test(fuzz_replay, prom) {
    fuzz_prom_write_init(NULL, NULL);
    replay("fuzz_prom_write", fuzz_prom_write_one);
}

Test(fuzz_replay, tokenizer) {
    REQUIRE_SHARED("models/vocab/ggml-vocab-llama-spm.gguf");
    REQUIRE_SHARED("models/vocab/ggml-vocab-gpt-2.gguf");
    setenv("TPS_SHARED_DIR", TPS_SHARED_DIR, 1);
    fuzz_tokenizer_init(NULL, NULL);
    replay("fuzz_tokenizer", fuzz_tokenizer_one);
}

/* fuzz_tokenizer_hf's regression: a special added token of empty content
 * (splitting a text on it never advanced, until memory ran out). */
Test(fuzz_replay, tokenizer_hf) {
    replay("fuzz_tokenizer_hf", fuzz_tokenizer_hf_one);
}

/* ---------------------------------------------------------------------------
 * Named regressions: what the fuzzers found, as behaviour
 * ------------------------------------------------------------------------- */

/* fuzz_openai_request (fuzz/regressions/fuzz_openai_request/
 * chat_content_empty_parts_array): "content": [] joined no parts, and the
 * message's content became NULL + 0 (undefined behaviour; clang's UBSan
 * stops on it, gcc's does not, hence this test). */
Test(fuzz_regression, chat_content_as_an_empty_parts_array_is_empty_text) {
    static const char body[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":[]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]}";
    oai_request r;
    oai_error e;
    cr_assert_eq(oai_parse(&r, OAI_CHAT, body, sizeof body - 1, &e), 0, "%s", e.message);
    cr_assert_eq(r.n_msgs, 2);
    cr_assert_not_null(r.msgs[0].content);
    cr_assert_eq(r.msgs[0].content_len, 0);
    cr_assert_eq(r.msgs[1].content_len, 1);
    cr_assert_eq(r.msgs[1].content[0], 'a');
    oai_request_free(&r);
    static const char only[] = "{\"messages\":[{\"role\":\"user\",\"content\":[]}]}";
    cr_assert_eq(oai_parse(&r, OAI_CHAT, only, sizeof only - 1, &e), 0, "%s", e.message);
    cr_assert_not_null(r.msgs[0].content, "content [] gave a NULL content");
    cr_assert_eq(r.msgs[0].content_len, 0);
    oai_request_free(&r);
}
