/* `tps generate`: one prompt through the engine, offline (no HTTP). Streams
 * the text to stdout and reports the engine's own prefill and decode speed,
 * each over a named window. Parsing and printing only. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"

static void usage(FILE *out) {
    fprintf(out, "usage: tps generate -m MODEL.gguf -p PROMPT [options]\n"
                 "\n"
                 "Runs one prompt through the engine (no server) and streams the text to stdout.\n"
                 "Then prints to stderr, each over its own window:\n"
                 "  prefill: prompt tokens computed (not taken from the prefix cache, which a\n"
                 "           single run starts empty) / time from the first forward step of\n"
                 "           the prompt to its first logits (the step that samples the first\n"
                 "           token)\n"
                 "  decode:  tokens generated after the first / time from the first generated\n"
                 "           token to the last (batch size 1: bound by memory bandwidth)\n"
                 "\n"
                 "  -m, --model FILE     GGUF model\n"
                 "  -p, --prompt TEXT    prompt (UTF-8; special-token text like <s> is parsed)\n"
                 "  -n, --n-predict N    tokens to generate (default 64, at least 1)\n"
                 "  --temp T             temperature (default 0: greedy, reproducible)\n"
                 "  --top-k K            keep the K most likely tokens (default 0: off)\n"
                 "  --top-p P            nucleus sampling (default 1: off)\n"
                 "  --min-p P            min-p sampling (default 0: off)\n"
                 "  --seed S             sampling seed (default 1)\n"
                 "  --ignore-eos         keep generating past end-of-sequence tokens\n"
                 "  --threads N          kernel threads (default: all cores)\n"
                 "  --batch N            prompt rows per step (default 512)\n"
                 "  --kv-type f16|f32|q8_0  KV cache element type (default f16)\n"
                 "  --no-repack          keep Q8_0/Q4_0 weights in the file's layout (no copy)\n"
                 "  --json               print one JSON object instead of the text and figures\n");
}

/* Byte offset of the first invalid UTF-8 sequence, or -1 when valid. */
static long utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return (long)i;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return (long)i;
        uint32_t cp = len == 1   ? c
                      : len == 2 ? ((c & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu))
                      : len == 3
                          ? ((c & 0x0Fu) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu))
                          : ((c & 0x07u) << 18 | (s[i + 1] & 0x3Fu) << 12 |
                             (s[i + 2] & 0x3Fu) << 6 | (s[i + 3] & 0x3Fu));
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return (long)i;
        i += len;
    }
    return -1;
}

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || end == v || !(d >= lo && d <= hi)) {
        fprintf(stderr, "tps generate: %s takes a number in [%g, %g], not '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = d;
    return 0;
}

typedef struct gen_opts {
    const char *model, *prompt;
    double n, temp, top_k, top_p, min_p, seed, threads, batch;
    bool json, ignore_eos, no_repack;
    uint32_t kv_type;
} gen_opts;

static int parse_args(int argc, char **argv, gen_opts *o) {
    *o = (gen_opts){.n = 64, .top_p = 1, .seed = 1, .batch = 512, .kv_type = GGML_TYPE_F16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = true;
            continue;
        }
        if (!strcmp(a, "--no-repack")) {
            o->no_repack = true;
            continue;
        }
        struct {
            const char *s, *l;
            double *dst;
            double lo, hi;
        } nums[] = {
            {"-n", "--n-predict", &o->n, 1, 1e9},      {NULL, "--temp", &o->temp, 0, 100},
            {NULL, "--top-k", &o->top_k, 0, 1e9},      {NULL, "--top-p", &o->top_p, 0, 1},
            {NULL, "--min-p", &o->min_p, 0, 1},        {NULL, "--seed", &o->seed, 0, 1.8e19},
            {NULL, "--threads", &o->threads, 1, 1024}, {NULL, "--batch", &o->batch, 1, 65536}};
        bool matched = false;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++)
            if ((nums[k].s && !strcmp(a, nums[k].s)) || !strcmp(a, nums[k].l)) {
                if (!v) {
                    fprintf(stderr, "tps generate: %s needs a value\n", a);
                    return -1;
                }
                if (parse_num(a, v, nums[k].lo, nums[k].hi, nums[k].dst)) return -1;
                matched = true;
                i++;
            }
        if (matched) continue;
        if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-p") ||
            !strcmp(a, "--prompt") || !strcmp(a, "--kv-type")) {
            if (!v) {
                fprintf(stderr, "tps generate: %s needs a value\n", a);
                return -1;
            }
            i++;
            if (a[1] == 'm' || !strcmp(a, "--model"))
                o->model = v;
            else if (a[1] == 'p' || !strcmp(a, "--prompt"))
                o->prompt = v;
            else if (!strcmp(v, "f16"))
                o->kv_type = GGML_TYPE_F16;
            else if (!strcmp(v, "f32"))
                o->kv_type = GGML_TYPE_F32;
            else if (!strcmp(v, "q8_0"))
                o->kv_type = GGML_TYPE_Q8_0;
            else {
                fprintf(stderr, "tps generate: --kv-type is f16, f32 or q8_0, not '%s'\n", v);
                return -1;
            }
            continue;
        }
        fprintf(stderr, "tps generate: unknown option '%s'\n", a);
        usage(stderr);
        return -1;
    }
    if (!o->model || !o->prompt) {
        fprintf(stderr, "tps generate: -m MODEL and -p PROMPT are required (an empty prompt "
                        "is -p '')\n");
        return -1;
    }
    return 0;
}

int cli_generate(int argc, char **argv) {
    gen_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;
    size_t plen = strlen(o.prompt);
    long bad = utf8_invalid_at((const unsigned char *)o.prompt, plen);
    if (bad >= 0) {
        fprintf(stderr, "tps generate: the prompt is not valid UTF-8 (byte %ld)\n", bad);
        return 2;
    }
    tps_err err = {0};
    llama_model *m = NULL;
    tokenizer *tok = NULL;
    engine *e = NULL;
    int32_t *ids = NULL, *out_ids = NULL;
    char *text = NULL;
    int status = 1;
    llama_load_opts lo = {.no_repack = o.no_repack};
    if (llama_model_load_opts(&m, o.model, &lo, &err) || tokenizer_load(&tok, m->file, &err))
        goto done;
    size_t n_ids;
    if (tokenizer_encode_alloc(tok, o.prompt, plen,
                               TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &ids, &n_ids,
                               &err))
        goto done;
    if (n_ids == 0) {
        snprintf(err.msg, sizeof err.msg,
                 "the prompt encodes to no tokens and this vocabulary adds no BOS");
        goto done;
    }
    engine_params ep;
    engine_params_default(&ep);
    ep.model = m;
    ep.tok = tok;
    ep.n_threads = (int)o.threads;
    ep.max_seqs = 1;
    ep.max_batch_tokens = (uint32_t)o.batch;
    ep.kv_tokens = m->cfg.ctx_len;
    ep.kv_type = o.kv_type;
    if (engine_create(&e, &ep, &err)) goto done;
    engine_request rq = {.prompt = ids, .n_prompt = n_ids, .max_tokens = (uint32_t)o.n};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = (float)o.temp;
    rq.sampling.top_k = (int32_t)o.top_k;
    rq.sampling.top_p = (float)o.top_p;
    rq.sampling.min_p = (float)o.min_p;
    rq.sampling.seed = (uint64_t)o.seed;
    rq.sampling.ignore_eos = o.ignore_eos;
    uint64_t id;
    if (engine_submit(e, &rq, &id, &err)) goto done;
    out_ids = malloc(sizeof(int32_t) * (size_t)o.n);
    size_t n_out = 0, text_len = 0, text_cap = 4096;
    text = malloc(text_cap);
    engine_event ev[16];
    bool done = false;
    engine_timings tm = {0};
    engine_finish fin = ENGINE_FINISH_ERROR;
    uint64_t t_last = 0;
    while (!done) {
        engine_wait(e, 1000);
        size_t k = engine_poll(e, ev, 16);
        for (size_t i = 0; i < k; i++) {
            if (ev[i].kind == ENGINE_EV_TOKEN) {
                out_ids[n_out++] = ev[i].token;
                t_last = ev[i].t_ns;
            }
            if (ev[i].text_len) {
                if (!o.json) {
                    fwrite(ev[i].text, 1, ev[i].text_len, stdout);
                    fflush(stdout);
                }
                while (text_len + ev[i].text_len + 1 > text_cap)
                    text = realloc(text, text_cap *= 2);
                memcpy(text + text_len, ev[i].text, ev[i].text_len);
                text_len += ev[i].text_len;
            }
            if (ev[i].kind == ENGINE_EV_DONE) {
                done = true;
                tm = ev[i].timings;
                fin = ev[i].finish;
                if (fin == ENGINE_FINISH_ERROR)
                    snprintf(err.msg, sizeof err.msg, "%s", ev[i].error);
            }
        }
    }
    text[text_len] = 0;
    if (fin == ENGINE_FINISH_ERROR) goto done;
    double prefill_s =
        tm.t_first_token ? (double)(tm.t_first_token - tm.t_first_scheduled) / 1e9 : 0;
    double decode_s = n_out > 1 ? (double)(t_last - tm.t_first_token) / 1e9 : 0;
    /* prefill computes the tokens the prefix cache did not hold */
    const size_t n_computed = n_ids - tm.cached_tokens;
    double prefill_tps = prefill_s > 0 ? (double)n_computed / prefill_s : 0;
    double decode_tps = decode_s > 0 ? (double)(n_out - 1) / decode_s : 0;
    double gbps = decode_tps * (double)m->w.bytes_per_token / 1e9;
    if (o.json) {
        json_t *j = json_object(), *pa = json_array(), *ta = json_array();
        for (size_t i = 0; i < n_ids; i++)
            json_array_append_new(pa, json_integer(ids[i]));
        for (size_t i = 0; i < n_out; i++)
            json_array_append_new(ta, json_integer(out_ids[i]));
        json_object_set_new(j, "prompt_tokens", pa);
        json_object_set_new(j, "tokens", ta);
        json_object_set_new(j, "text", json_stringn(text, text_len));
        json_object_set_new(j, "finish_reason", json_string(engine_finish_name(fin)));
        json_object_set_new(j, "n_prompt", json_integer((json_int_t)n_ids));
        json_object_set_new(j, "cached_tokens", json_integer((json_int_t)tm.cached_tokens));
        json_object_set_new(j, "n_generated", json_integer((json_int_t)n_out));
        json_object_set_new(j, "prefill_ms", json_real(prefill_s * 1e3));
        json_object_set_new(j, "prefill_tps", json_real(prefill_tps));
        json_object_set_new(j, "decode_tokens", json_integer(n_out ? (json_int_t)n_out - 1 : 0));
        json_object_set_new(j, "decode_ms", json_real(decode_s * 1e3));
        json_object_set_new(j, "decode_tps", json_real(decode_tps));
        json_object_set_new(j, "decode_gbps", json_real(gbps));
        json_object_set_new(j, "weight_bytes_per_token",
                            json_integer((json_int_t)m->w.bytes_per_token));
        char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        printf("\n");
        fprintf(stderr,
                "\nprompt:  %zu tokens (%u from the prefix cache)\n"
                "prefill: %zu tokens in %.2f ms = %.1f tokens/s   [window: first forward step of "
                "the prompt -> first logits]\n"
                "decode:  %zu tokens in %.2f ms = %.1f tokens/s   [window: first generated token "
                "-> last; %zu generated in all, finish: %s]\n"
                "         %.2f GB/s of weights read (%.1f MiB per token)\n",
                n_ids, tm.cached_tokens, n_computed, prefill_s * 1e3, prefill_tps,
                n_out ? n_out - 1 : 0, decode_s * 1e3, decode_tps, n_out, engine_finish_name(fin),
                gbps, (double)m->w.bytes_per_token / 1048576.0);
    }
    status = 0;
done:
    if (status) fprintf(stderr, "tps generate: %s\n", err.msg);
    engine_destroy(e);
    tokenizer_free(tok);
    llama_model_free(m);
    free(ids);
    free(out_ids);
    free(text);
    return status;
}
