/* `tps generate`: one prompt through the engine, offline (no HTTP). Streams
 * the text to stdout and reports the engine's own prefill and decode speed,
 * each over a named window; with --depth, decode speed and bytes per token
 * at several context depths instead (the seed's KV-cache factor, and what a
 * hybrid stack's fixed-size state does to it). Parsing and printing only. */
#include <stddef.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "kernels/machine.h"
#include "cli/opt.h"
#include "engine/core/engine.h"
#include "engine/core/engine_setup.h" /* engine_state_bytes: a hybrid's state a token reads */
#include "engine/cost/step_cost.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"

/* --depth: context depths, increasing. */
#define GEN_MAX_DEPTHS 16
#define GEN_MAX_ROUNDS 16
typedef struct gen_depths {
    uint32_t v[GEN_MAX_DEPTHS];
    size_t n;
} gen_depths;

/* "1024,8k,32k" (k: x1024) into a gen_depths, each above the one before. */
static int depths_arg(void *dst, const char *value, char *why, size_t cap) {
    gen_depths *d = dst;
    d->n = 0;
    const char *p = value;
    while (*p) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || *p == '-') break;
        if (*end == 'k' || *end == 'K') v *= 1024, end++;
        if (v < 1 || v > 1u << 24 || d->n == GEN_MAX_DEPTHS || (d->n && v <= d->v[d->n - 1])) break;
        d->v[d->n++] = (uint32_t)v;
        p = end;
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            break;
    }
    if (*p || !d->n) {
        snprintf(why, cap,
                 "expected up to %d increasing depths in 1..16M tokens, comma-separated "
                 "(k: x1024), e.g. 1k,8k,32k",
                 GEN_MAX_DEPTHS);
        return -1;
    }
    return 0;
}

typedef struct gen_opts {
    const char *model, *prompt;
    gen_depths depths;
    uint32_t rounds; /* --depth's passes over the depths */
    uint32_t n, batch;
    int top_k, threads;
    double temp, top_p, min_p;
    uint64_t seed;
    bool json, ignore_eos, no_repack;
    uint32_t kv_type;
} gen_opts;

#define G(field) offsetof(gen_opts, field)

static const opt_row gen_rows[] = {
    {"--model", "-m", OPT_STR, G(model), .metavar = "FILE", .help = "GGUF model"},
    {"--prompt", "-p", OPT_STR, G(prompt), .metavar = "TEXT",
     .help = "prompt (UTF-8; special-token text like <s> is parsed)"},
    {"--n-predict", "-n", OPT_U32, G(n), .min = 1, .max = 1e9, .def = "64",
     .help = "tokens to generate"},
    {"--temp", .kind = OPT_NUM, .off = G(temp), .max = 100, .metavar = "T",
     .help = "temperature (default 0: greedy, reproducible)"},
    {"--top-k", .kind = OPT_INT, .off = G(top_k), .max = 1e9, .metavar = "K",
     .help = "keep the K most likely tokens (default 0: off)"},
    {"--top-p", .kind = OPT_NUM, .off = G(top_p), .max = 1, .metavar = "P",
     .help = "nucleus sampling (default 1: off)"},
    {"--min-p", .kind = OPT_NUM, .off = G(min_p), .max = 1, .metavar = "P",
     .help = "min-p sampling (default 0: off)"},
    {"--seed", .kind = OPT_U64, .off = G(seed), .max = 1.8e19, .metavar = "S", .def = "1",
     .help = "sampling seed"},
    {"--ignore-eos", .kind = OPT_FLAG, .off = G(ignore_eos),
     .help = "keep generating past end-of-sequence tokens"},
    {"--threads", .kind = OPT_INT, .off = G(threads), .min = 1, .max = 1024,
     .help = "kernel threads (default: all cores)"},
    {"--batch", .kind = OPT_U32, .off = G(batch), .min = 1, .max = 65536, .def = "512",
     .help = "prompt rows per step"},
    {"--kv-type", .kind = OPT_CHOICE, .off = G(kv_type),
     .choices =
         (const opt_choice[]){
             {"f16", GGML_TYPE_F16}, {"f32", GGML_TYPE_F32}, {"q8_0", GGML_TYPE_Q8_0}, {NULL, 0}},
     .def = "f16", .help = "KV cache element type"},
    {"--no-repack", .kind = OPT_FLAG, .off = G(no_repack),
     .help = "keep quantized weights in the file's layout (no 8-row copy)"},
    {"--json", .kind = OPT_FLAG, .off = G(json),
     .help = "print one JSON object instead of the text and figures"},
    {"--depth", .kind = OPT_CUSTOM, .off = G(depths), .parse = depths_arg, .metavar = "D,D,...",
     .help = "decode at each context depth instead: a prompt of D tokens\n"
             "(the -p prompt's repeated; -p optional), then -n tokens;\n"
             "prints decode tok/s and bytes read per token against D"},
    {"--rounds", .kind = OPT_U32, .off = G(rounds), .min = 1, .max = GEN_MAX_ROUNDS, .def = "1",
     .help = "--depth: passes over the depths, in turn (later ones\n"
             "prefill little: the prefix cache holds the prompts);\n"
             "each depth's decode tok/s is the median of its passes"},
    {0},
};

static const opt_cmd gen_cmd = {
    .prog = "tps generate",
    .usage = "usage: tps generate -m MODEL.gguf -p PROMPT [options]\n"
             "\n"
             "Runs one prompt through the engine (no server) and streams the text to stdout.\n"
             "Then prints to stderr, each over its own window:\n"
             "  prefill: prompt tokens computed (not taken from the prefix cache, which a\n"
             "           single run starts empty) / time from the first forward step of\n"
             "           the prompt to its first logits (the step that samples the first\n"
             "           token)\n"
             "  decode:  tokens generated after the first / time from the first generated\n"
             "           token to the last (batch size 1: bound by memory bandwidth)\n"
             "  the prefill's multiply-adds per second (every prompt row through the\n"
             "  layers, the last row's LM head, each row's attention) and its fraction of\n"
             "  the roofline: the longer of its multiply-adds at the machine's int8 peak\n"
             "  and its bytes at its read bandwidth, over its time (tps machine's rates;\n"
             "  the int8 peak is the widest dot instruction's, which a weight type may\n"
             "  not reach: Q8_0 without VNNI needs a sign step per product pair);\n"
             "  and the decode window's GB/s: every weight once per token, and the K and\n"
             "  V of each token's context (prompt and tokens before it; a sliding-window\n"
             "  layer its window), over the window's time, beside the machine's measured\n"
             "  read bandwidth (tps machine). A share above 100%, or one read against\n"
             "  limits measured while the machine was busy, comes with a note saying why.\n"
             "  A decode window that reads a model too big for the last-level cache faster\n"
             "  than the cached read bandwidth shows that figure was no limit: the window's\n"
             "  GB/s replaces it, here and in tps machine's cache (which names the window).\n"
             "  --json: prefill_gmacs, prefill_roofline_fraction, decode_gbps,\n"
             "  weight_bytes_per_token, kv_bytes_per_token (mean), decode_kv_bytes, and\n"
             "  prefill_roofline_note, decode_bandwidth_note, machine_limits_busy,\n"
             "  machine_read_gbs_raised_from and machine_read_raised_note when so.\n"
             "\n"
             "With --depth D,D,...: one request per depth, each prompt D tokens (the prompt's\n"
             "tokens repeated, so each extends the one before and its prefill starts from the\n"
             "prefix cache), each generating -n tokens past end-of-sequence. A table to stdout,\n"
             "one row a depth: decode tok/s over its decode window, and the bytes a decoded\n"
             "token reads: every weight (a MoE: its experts), the K and V of its context in\n"
             "the attention layers only, and a linear-attention layer's fixed-size state\n"
             "(read once and written back each token; counted once); their sum, and that over\n"
             "the window's time in GB/s. --json: one tps.generate.depth document (tps report\n"
             "--factor depth:LABEL=FILE reads it beside another model's).\n"
             "\n",
    .rows = gen_rows,
};

/* 0 to go on, or the exit code (-1 mapped by the caller). */
static int parse_args(int argc, char **argv, gen_opts *o) {
    *o = (gen_opts){
        .n = 64, .top_p = 1, .seed = 1, .batch = 512, .kv_type = GGML_TYPE_F16, .rounds = 1};
    int rc = opt_main(&gen_cmd, o, argc, argv);
    if (rc >= 0) return rc == 0 ? 1 : -1;
    if (o->depths.n && !o->prompt) o->prompt = "The quick brown fox jumps over the lazy dog. ";
    if (!o->model || !o->prompt) {
        fprintf(stderr, "tps generate: -m MODEL and -p PROMPT are required (an empty prompt "
                        "is -p '')\n");
        return -1;
    }
    return 0;
}

/* What one run produced: token ids, text, and the engine's timings. */
typedef struct gen_out {
    int32_t *ids; /* borrowed, room for n_predict */
    size_t n;
    char *text; /* grown here; owned by the caller */
    size_t len, cap;
    engine_timings tm;
    engine_finish fin;
    uint64_t t_last; /* the last token's time */
} gen_out;

/* Polls the engine until the request is done; streams text to stdout when asked. */
static void gen_collect(engine *e, bool stream, gen_out *g, tps_err *err) {
    engine_event ev[16];
    bool done = false, oom = false;
    g->fin = ENGINE_FINISH_ERROR;
    while (!done) {
        engine_wait(e, 1000);
        size_t k = engine_poll(e, ev, 16);
        for (size_t i = 0; i < k; i++) {
            if (ev[i].kind == ENGINE_EV_TOKEN) {
                g->ids[g->n++] = ev[i].token;
                g->t_last = ev[i].t_ns;
            }
            if (ev[i].text_len) {
                if (stream) {
                    fwrite(ev[i].text, 1, ev[i].text_len, stdout);
                    fflush(stdout);
                }
                if (TPS_GROW(g->text, g->cap, g->len + ev[i].text_len + 1, 4096)) {
                    oom = true;
                } else {
                    memcpy(g->text + g->len, ev[i].text, ev[i].text_len);
                    g->len += ev[i].text_len;
                }
            }
            if (ev[i].kind == ENGINE_EV_DONE) {
                done = true;
                g->tm = ev[i].timings;
                g->fin = ev[i].finish;
                if (g->fin == ENGINE_FINISH_ERROR)
                    snprintf(err->msg, sizeof err->msg, "%s", ev[i].error);
            }
        }
    }
    if (oom || TPS_GROW(g->text, g->cap, g->len + 1, 4096)) {
        g->fin = ENGINE_FINISH_ERROR;
        snprintf(err->msg, sizeof err->msg, "out of memory holding the generated text");
        return;
    }
    g->text[g->len] = 0;
}

/* What the figures are counted from: the model's shape and the engine's
 * settings in force. */
typedef struct gen_model {
    const llama_model *m;
    const llama_config *cfg;
    uint32_t kv_type;
    uint64_t bytes_per_token; /* weights read per one-row step (a MoE: its k experts a layer) */
    uint32_t chunk;           /* prompt rows per step */
} gen_model;

/* Each window's figures. */
typedef struct gen_figures {
    double prefill_s, decode_s, prefill_tps, decode_tps;
    double prefill_gmacs;    /* the prompt's multiply-adds per second, 1e9 */
    double prefill_fraction; /* of the roofline (tps machine); 0: unknown */
    double kv_bytes;         /* K and V the decode window's steps read */
    double gbps;             /* weights and KV read over the decode window */
    double read_gbs;         /* this machine's read bandwidth (tps machine); 0: unknown */
    size_t n_computed;       /* prompt tokens the prefix cache did not hold */
    const char *prefill_flag, *decode_flag; /* roofline_flag's words, or NULL */
    bool limits_busy;                       /* the limits were measured while busy */
    double raised_from;   /* the cached read bandwidth this window replaced (GB/s); 0: none */
    char raised_why[640]; /* what it was and why it went, in words; "" when not raised */
} gen_figures;

static void gen_print_json(const gen_out *g, const gen_figures *f, const int32_t *ids, size_t n_ids,
                           uint64_t bytes_per_token, const llama_model *m) {
    const size_t n_dec = g->n ? g->n - 1 : 0;
    json_t *j = json_object(), *pa = json_array(), *ta = json_array();
    for (size_t i = 0; i < n_ids; i++)
        json_array_append_new(pa, json_integer(ids[i]));
    for (size_t i = 0; i < g->n; i++)
        json_array_append_new(ta, json_integer(g->ids[i]));
    json_object_set_new(j, "prompt_tokens", pa);
    json_object_set_new(j, "tokens", ta);
    json_object_set_new(j, "text", json_stringn(g->text, g->len));
    json_object_set_new(j, "finish_reason", json_string(engine_finish_name(g->fin)));
    json_object_set_new(j, "n_prompt", json_integer((json_int_t)n_ids));
    json_object_set_new(j, "cached_tokens", json_integer((json_int_t)g->tm.cached_tokens));
    json_object_set_new(j, "n_generated", json_integer((json_int_t)g->n));
    json_object_set_new(j, "prefill_ms", json_real(f->prefill_s * 1e3));
    json_object_set_new(j, "prefill_tps", json_real(f->prefill_tps));
    json_object_set_new(j, "prefill_gmacs", json_real(f->prefill_gmacs));
    if (f->prefill_fraction > 0)
        json_object_set_new(j, "prefill_roofline_fraction", json_real(f->prefill_fraction));
    json_object_set_new(j, "decode_tokens", json_integer(g->n ? (json_int_t)g->n - 1 : 0));
    json_object_set_new(j, "decode_ms", json_real(f->decode_s * 1e3));
    json_object_set_new(j, "decode_tps", json_real(f->decode_tps));
    json_object_set_new(j, "decode_gbps", json_real(f->gbps));
    if (f->read_gbs > 0) {
        json_object_set_new(j, "machine_read_gbs", json_real(f->read_gbs));
        json_object_set_new(j, "decode_bandwidth_fraction", json_real(f->gbps / f->read_gbs));
    }
    /* a share that needs a word carries it (metrics/roofline.h) */
    if (f->prefill_flag)
        json_object_set_new(j, "prefill_roofline_note", json_string(f->prefill_flag));
    if (f->decode_flag)
        json_object_set_new(j, "decode_bandwidth_note", json_string(f->decode_flag));
    if (f->limits_busy) json_object_set_new(j, "machine_limits_busy", json_true());
    if (f->raised_from > 0) {
        json_object_set_new(j, "machine_read_gbs_raised_from", json_real(f->raised_from));
        json_object_set_new(j, "machine_read_raised_note", json_string(f->raised_why));
    }
    json_object_set_new(j, "weight_bytes_per_token", json_integer((json_int_t)bytes_per_token));
    json_object_set_new(j, "params_total", json_integer((json_int_t)m->w.params_total));
    json_object_set_new(j, "params_active", json_integer((json_int_t)m->w.params_active));
    json_object_set_new(j, "weight_bytes_total", json_integer((json_int_t)m->w.bytes_total));
    json_object_set_new(j, "load_ms", json_real((double)m->load_ns / 1e6));
    json_object_set_new(j, "load_peak_rss", json_integer((json_int_t)m->load_peak_rss));
    json_object_set_new(j, "decode_kv_bytes", json_real(f->kv_bytes));
    json_object_set_new(j, "kv_bytes_per_token",
                        json_real(n_dec ? f->kv_bytes / (double)n_dec : 0));
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    printf("%s\n", s);
    free(s);
    json_decref(j);
}

/* K and V bytes the decode window reads: the step that yields token k
 * (k = 2 .. n) computes token k - 1's row, which attends to the prompt and
 * the k - 1 tokens generated before it. */
static double decode_kv_bytes(const llama_config *c, uint32_t kv_type, size_t n_prompt, size_t n) {
    double bytes = 0;
    for (size_t k = 2; k <= n; k++)
        bytes += engine_kv_bytes_attended(c, kv_type, n_prompt + k - 1);
    return bytes;
}

/* Weight bytes a step of n rows reads: every dense matrix, and for a
 * mixture of experts the experts its rows choose, expected E (1 - (1 -
 * k/E)^n) distinct a layer when routing is even (exact for one row). */
static double step_weight_bytes(const gen_model *gm, size_t n) {
    const llama_config *c = gm->cfg;
    const llama_weights *w = &gm->m->w;
    if (!c->n_expert) return (double)gm->bytes_per_token;
    const double E = c->n_expert, k = c->n_expert_used;
    const double touched = n == 1 ? k : E * (1.0 - pow(1.0 - k / E, (double)n));
    return (double)w->bytes_dense + (double)(w->bytes_per_token - w->bytes_dense) / k * touched;
}

/* The prompt's work as the engine counts it: each computed row through the
 * layers, the last row's LM head, every row's attention over its context,
 * and per step the weights once and the chunk's last row's K and V. */
static roofline_work prefill_work(const gen_model *gm, size_t n_cached, size_t n_prompt,
                                  double seconds) {
    const engine_macs mc = engine_macs_of(gm->cfg);
    roofline_work w = {.seconds = seconds};
    if (n_cached >= n_prompt) return w;
    const size_t n = n_prompt - n_cached;
    w.macs = (double)n * mc.body + mc.head +
             mc.per_attended * step_cost_chunk_attended((uint32_t)n_cached, (uint32_t)n);
    for (size_t p = n_cached; p < n_prompt; p += gm->chunk) {
        const size_t end = p + gm->chunk < n_prompt ? p + gm->chunk : n_prompt;
        w.weight_bytes += step_weight_bytes(gm, end - p);
        w.kv_bytes += engine_kv_bytes_attended(gm->cfg, gm->kv_type, end);
    }
    return w;
}

/* A decode window that read a model too big for the last-level cache
 * faster than the cached read bandwidth shows that figure was no limit:
 * the window's replaces it, in ml and in the cache (machine_limits_saw),
 * and f says what it was. */
static void gen_raise_limit(const gen_opts *o, gen_figures *f, machine_limits *ml,
                            double bytes_per_step) {
    const double was = ml->read_gbs;
    char was_from[200], window[240];
    snprintf(was_from, sizeof was_from, "%s", ml->read_from[0] ? ml->read_from : "tps machine");
    snprintf(window, sizeof window, "decode window of tps generate -m %s", o->model);
    const size_t llc = machine_llc_bytes();
    tps_err err = {{0}};
    const int rc = machine_limits_saw(ml, f->gbps, bytes_per_step, llc, window, &err);
    if (rc == 0) return;
    f->raised_from = was;
    snprintf(f->raised_why, sizeof f->raised_why,
             "the cached %.1f GB/s (%s) was below what this window read from a model too big "
             "for the %.0f MiB last-level cache, so it was no limit: this window's figure is "
             "the limit now%s",
             was, was_from, (double)(llc ? llc : ROOFLINE_DRAM_UNKNOWN_LLC) / 1048576.0,
             rc > 0 ? " (cached)" : " (not cached: the cache could not be written)");
}

/* Each window's figures, read against ml (raised by the decode window
 * when it read faster: gen_raise_limit). */
static gen_figures gen_figures_of(const gen_opts *o, const gen_out *g, size_t n_ids,
                                  const gen_model *gm, machine_limits *ml) {
    const engine_timings *tm = &g->tm;
    gen_figures f = {0};
    f.prefill_s = tm->t_first_token ? (double)(tm->t_first_token - tm->t_first_scheduled) / 1e9 : 0;
    f.decode_s = g->n > 1 ? (double)(g->t_last - tm->t_first_token) / 1e9 : 0;
    f.n_computed = n_ids - tm->cached_tokens;
    f.prefill_tps = f.prefill_s > 0 ? (double)f.n_computed / f.prefill_s : 0;
    f.decode_tps = f.decode_s > 0 ? (double)(g->n - 1) / f.decode_s : 0;
    f.kv_bytes = decode_kv_bytes(gm->cfg, gm->kv_type, n_ids, g->n);
    const double n_dec = g->n > 1 ? (double)(g->n - 1) : 0;
    f.gbps =
        f.decode_s > 0 ? (n_dec * (double)gm->bytes_per_token + f.kv_bytes) / f.decode_s / 1e9 : 0;
    if (n_dec > 0 && ml->read_gbs > 0 && f.gbps > ml->read_gbs)
        gen_raise_limit(o, &f, ml, (double)gm->bytes_per_token + f.kv_bytes / n_dec);
    const roofline_work pw = prefill_work(gm, tm->cached_tokens, n_ids, f.prefill_s);
    f.prefill_gmacs = f.prefill_s > 0 ? pw.macs / f.prefill_s / 1e9 : 0;
    f.prefill_fraction = roofline_fraction(&pw, ml);
    f.read_gbs = ml->read_gbs;
    f.prefill_flag = f.prefill_fraction > 0 ? roofline_flag(f.prefill_fraction, ml, false) : NULL;
    f.decode_flag = f.read_gbs > 0 ? roofline_flag(f.gbps / f.read_gbs, ml, true) : NULL;
    f.limits_busy = ml->busy;
    return f;
}

static void gen_print(const gen_opts *o, const gen_out *g, const int32_t *ids, size_t n_ids,
                      const gen_model *gm, machine_limits *ml) {
    const uint64_t bytes_per_token = gm->bytes_per_token;
    const engine_timings *tm = &g->tm;
    const gen_figures f = gen_figures_of(o, g, n_ids, gm, ml);
    const double read_gbs = f.read_gbs;
    if (o->json) {
        gen_print_json(g, &f, ids, n_ids, bytes_per_token, gm->m);
        return;
    }
    printf("\n");
    fprintf(stderr,
            "\nprompt:  %zu tokens (%u from the prefix cache)\n"
            "prefill: %zu tokens in %.2f ms = %.1f tokens/s   [window: first forward step of "
            "the prompt -> first logits]\n"
            "         %.1f G multiply-adds/s\n",
            n_ids, tm->cached_tokens, f.n_computed, f.prefill_s * 1e3, f.prefill_tps,
            f.prefill_gmacs);
    if (f.prefill_fraction > 0)
        fprintf(stderr,
                "         = %.0f%% of the roofline (tps machine: %.0f G int8 multiply-adds/s, "
                "%.1f GB/s): the longer of the prompt's multiply-adds and bytes at those rates, "
                "over its time\n",
                100.0 * f.prefill_fraction, ml->int8_gops, read_gbs);
    if (f.prefill_flag) fprintf(stderr, "         note: %s\n", f.prefill_flag);
    const llama_weights *w = &gm->m->w;
    if (gm->cfg->n_expert)
        fprintf(stderr,
                "model:   a mixture of experts, %u a layer and %u a token: %.3f B parameters, "
                "%.3f B active; a token reads %.1f of the weights' %.1f MiB\n",
                gm->cfg->n_expert, gm->cfg->n_expert_used, (double)w->params_total / 1e9,
                (double)w->params_active / 1e9, (double)bytes_per_token / 1048576.0,
                (double)w->bytes_total / 1048576.0);
    fprintf(stderr,
            "decode:  %zu tokens in %.2f ms = %.1f tokens/s   [window: first generated token "
            "-> last; %zu generated in all, finish: %s]\n"
            "         %.2f GB/s read (%.1f MiB of weights%s and %.1f MiB of KV cache per "
            "token)\n",
            g->n ? g->n - 1 : 0, f.decode_s * 1e3, f.decode_tps, g->n, engine_finish_name(g->fin),
            f.gbps, (double)bytes_per_token / 1048576.0,
            gm->cfg->n_expert ? ", the active ones" : "",
            g->n > 1 ? f.kv_bytes / (double)(g->n - 1) / 1048576.0 : 0);
    if (read_gbs > 0)
        fprintf(stderr,
                "         = %.0f%% of the %.1f GB/s this machine reads (tps machine): a decoded "
                "token reads every weight and its context's K and V once, so this is its "
                "roofline\n",
                100.0 * f.gbps / read_gbs, read_gbs);
    if (f.decode_flag && f.decode_flag != f.prefill_flag)
        fprintf(stderr, "         note: %s\n", f.decode_flag);
    if (f.raised_why[0]) fprintf(stderr, "         note: %s\n", f.raised_why);
}

/* The figures, read against this machine's limits (cached, or measured
 * once now) and counted at the engine's settings in force. */
static void gen_report(const gen_opts *o, const gen_out *g, const int32_t *ids, size_t n_ids,
                       const llama_model *m, const engine *e) {
    machine_limits ml = {0};
    tps_err merr = {{0}};
    int nth = o->threads ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (machine_limits_get(&ml, nth, &merr))
        fprintf(stderr, "tps generate: no machine limits: %s\n", merr.msg);
    const engine_params *p = engine_get_params(e);
    if (!o->json)
        fprintf(stderr, "load:    %.2f s, peak RSS %.1f MiB = %.0f%% of the file's %.1f MiB\n",
                (double)m->load_ns / 1e9, (double)m->load_peak_rss / 1048576.0,
                100.0 * (double)m->load_peak_rss / (double)m->file->size,
                (double)m->file->size / 1048576.0);
    const gen_model gm = {.m = m,
                          .cfg = &m->cfg,
                          .kv_type = p->kv_type,
                          .bytes_per_token = m->w.bytes_per_token,
                          .chunk = p->prefill_chunk < p->max_batch_tokens ? p->prefill_chunk
                                                                          : p->max_batch_tokens};
    gen_print(o, g, ids, n_ids, &gm, &ml);
}

/* ---- --depth: decode against context depth --------------------------------------------------- */

/* What a decoded token reads at one depth, and how fast it decoded. */
typedef struct gen_depth_row {
    uint32_t depth, cached; /* prompt tokens; those the prefix cache held (first pass) */
    size_t n;               /* tokens generated */
    double prefill_s, decode_s, decode_tps; /* the first pass's; decode_tps: the median */
    double tps_round[GEN_MAX_ROUNDS];       /* each pass's decode tok/s */
    double kv_bytes;    /* mean K and V a decoded token read (attention layers only) */
    double bytes, gbps; /* weights + KV + state a token; that over the decode window */
} gen_depth_row;

/* The model's per-token constants the rows are counted from. */
typedef struct gen_depth_model {
    double weight_bytes;  /* a one-row step's weights (a MoE: its k experts a layer) */
    double state_bytes;   /* every linear layer's state, one sequence: read and written back */
    double kv_per_pos;    /* K and V of one position over the attention layers */
    uint32_t n_recurrent; /* linear-attention layers; the rest attend */
} gen_depth_model;

static gen_depth_model gen_depth_model_of(const llama_model *m, uint32_t kv_type) {
    gen_depth_model dm = {.weight_bytes = (double)m->w.bytes_per_token,
                          .state_bytes = (double)engine_state_bytes(&m->cfg),
                          .kv_per_pos = engine_kv_bytes_attended(&m->cfg, kv_type, 1)};
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        dm.n_recurrent += (uint32_t)llama_config_is_recurrent(&m->cfg, l);
    return dm;
}

static const char *gen_kv_name(uint32_t kv_type) {
    return kv_type == GGML_TYPE_Q8_0 ? "q8_0" : kv_type == GGML_TYPE_F32 ? "f32" : "f16";
}

/* prompt (d,): head (the prompt with its special tokens), then body (the
 * prompt without them) repeated, cut at d: each depth's prompt extends the
 * one before. */
static void gen_depth_prompt(int32_t *prompt, uint32_t d, const int32_t *head, size_t nh,
                             const int32_t *body, size_t nb) {
    for (uint32_t i = 0; i < d; i++)
        prompt[i] = i < nh ? head[i] : body[(i - nh) % nb];
}

static void gen_depth_print(const gen_opts *o, const llama_model *m, const gen_depth_model *dm,
                            const gen_depth_row *r, size_t n, const engine_params *p) {
    const char *kv = gen_kv_name(p->kv_type);
    printf("%s: %s, %u layers", o->model, m->cfg.arch, m->cfg.n_layers);
    if (dm->n_recurrent)
        printf(" (%u linear attention with a %.2f MB state, %u full attention)", dm->n_recurrent,
               dm->state_bytes / 1e6, m->cfg.n_layers - dm->n_recurrent);
    printf("; %d threads, %s KV, %zu tokens generated a depth", p->n_threads, kv, r[0].n);
    if (o->rounds > 1) printf(" in each of %u passes (decode t/s: their median)", o->rounds);
    printf("\n");
    printf("%8s %9s %10s %10s %10s %9s %9s %9s %8s\n", "depth", "cached", "prefill s", "decode t/s",
           "weights MB", "KV MB", "state MB", "MB/token", "GB/s");
    for (size_t i = 0; i < n; i++)
        printf("%8u %9u %10.2f %10.2f %10.2f %9.2f %9.2f %9.2f %8.2f\n", r[i].depth, r[i].cached,
               r[i].prefill_s, r[i].decode_tps, dm->weight_bytes / 1e6, r[i].kv_bytes / 1e6,
               dm->state_bytes / 1e6, r[i].bytes / 1e6, r[i].gbps);
    if (n > 1)
        printf("from depth %u to %u: decode %.2fx, bytes a token %.2fx\n", r[0].depth,
               r[n - 1].depth, r[n - 1].decode_tps / r[0].decode_tps, r[n - 1].bytes / r[0].bytes);
}

/* The tps.generate.depth document (report_depth.h reads it). */
static void gen_depth_json(const gen_opts *o, const llama_model *m, const gen_depth_model *dm,
                           const gen_depth_row *r, size_t n, const engine_params *p) {
    json_t *j = json_object(), *a = json_array();
    json_object_set_new(j, "format", json_string("tps.generate.depth"));
    json_object_set_new(j, "version", json_integer(1));
    json_object_set_new(j, "model", json_string(o->model));
    json_object_set_new(j, "arch", json_string(m->cfg.arch));
    json_object_set_new(j, "layers", json_integer(m->cfg.n_layers));
    json_object_set_new(j, "recurrent_layers", json_integer(dm->n_recurrent));
    json_object_set_new(j, "threads", json_integer(p->n_threads));
    json_object_set_new(j, "rounds", json_integer(o->rounds));
    json_object_set_new(j, "kv_type", json_string(gen_kv_name(p->kv_type)));
    json_object_set_new(j, "weight_bytes_per_token", json_real(dm->weight_bytes));
    json_object_set_new(j, "state_bytes_per_token", json_real(dm->state_bytes));
    json_object_set_new(j, "kv_bytes_per_position", json_real(dm->kv_per_pos));
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_object();
        json_object_set_new(x, "depth", json_integer(r[i].depth));
        json_object_set_new(x, "cached_tokens", json_integer(r[i].cached));
        json_object_set_new(x, "prefill_ms", json_real(r[i].prefill_s * 1e3));
        json_object_set_new(x, "n_generated", json_integer((json_int_t)r[i].n));
        json_object_set_new(x, "decode_ms", json_real(r[i].decode_s * 1e3));
        json_object_set_new(x, "decode_tps", json_real(r[i].decode_tps));
        json_t *ra = json_array();
        for (uint32_t k = 0; k < o->rounds; k++)
            json_array_append_new(ra, json_real(r[i].tps_round[k]));
        json_object_set_new(x, "decode_tps_rounds", ra);
        json_object_set_new(x, "kv_bytes_per_token", json_real(r[i].kv_bytes));
        json_object_set_new(x, "bytes_per_token", json_real(r[i].bytes));
        json_object_set_new(x, "decode_gbps", json_real(r[i].gbps));
        json_array_append_new(a, x);
    }
    json_object_set_new(j, "points", a);
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    printf("%s\n", s);
    free(s);
    json_decref(j);
}

/* The row of the request at depth d, finished (g). */
static gen_depth_row gen_depth_row_of(const gen_out *g, uint32_t d, const llama_config *c,
                                      uint32_t kv_type, const gen_depth_model *dm) {
    const engine_timings *tm = &g->tm;
    gen_depth_row r = {.depth = d, .cached = tm->cached_tokens, .n = g->n};
    r.prefill_s = tm->t_first_token ? (double)(tm->t_first_token - tm->t_first_scheduled) / 1e9 : 0;
    r.decode_s = g->n > 1 ? (double)(g->t_last - tm->t_first_token) / 1e9 : 0;
    const double n_dec = g->n > 1 ? (double)(g->n - 1) : 0;
    r.decode_tps = r.decode_s > 0 ? n_dec / r.decode_s : 0;
    r.kv_bytes = n_dec > 0 ? decode_kv_bytes(c, kv_type, d, g->n) / n_dec : 0;
    r.bytes = dm->weight_bytes + r.kv_bytes + dm->state_bytes;
    r.gbps = r.decode_s > 0 ? r.bytes * n_dec / r.decode_s / 1e9 : 0;
    return r;
}

/* One greedy request of the prompt (d,), -n tokens past end-of-sequence,
 * run to its end into g; 0, or 1 with err filled. */
static int gen_depth_one(engine *e, const gen_opts *o, const int32_t *prompt, uint32_t d,
                         gen_out *g, tps_err *err) {
    engine_request rq = {.prompt = prompt, .n_prompt = d, .max_tokens = o->n};
    sampler_params_default(&rq.sampling);
    rq.sampling.seed = o->seed;
    rq.sampling.ignore_eos = true;
    uint64_t id;
    if (engine_submit(e, &rq, &id, err)) return 1;
    gen_collect(e, false, g, err);
    free(g->text);
    g->text = NULL;
    return g->fin == ENGINE_FINISH_ERROR;
}

/* The median of v (n <= GEN_MAX_ROUNDS): the middle one, or the mean of the
 * middle two. */
static double gen_median(const double *in, size_t n) {
    double v[GEN_MAX_ROUNDS];
    memcpy(v, in, n * sizeof *v);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            const double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One request per depth through one engine (the prefix cache carries each
 * prompt into the next); 0, or 1 with err filled. */
static int gen_depth_run(const gen_opts *o, const llama_model *m, const tokenizer *tok,
                         const int32_t *head, size_t nh, tps_err *err) {
    const uint32_t dmax = o->depths.v[o->depths.n - 1];
    int32_t *body = NULL, *prompt = NULL, *ids = NULL;
    size_t nb = 0;
    engine *e = NULL;
    int rc = 1;
    gen_depth_row rows[GEN_MAX_DEPTHS] = {0};
    if ((uint64_t)dmax + o->n > m->cfg.ctx_len) {
        snprintf(err->msg, sizeof err->msg,
                 "depth %u and %u tokens to generate need %llu positions; the model's context is "
                 "%u",
                 dmax, o->n, (unsigned long long)dmax + o->n, m->cfg.ctx_len);
        return 1;
    }
    if (tokenizer_encode_alloc(tok, o->prompt, strlen(o->prompt), TOK_ENCODE_PARSE_SPECIAL, &body,
                               &nb, err))
        return 1;
    prompt = malloc(sizeof *prompt * dmax);
    ids = malloc(sizeof *ids * o->n);
    if (!nb || !prompt || !ids) {
        snprintf(err->msg, sizeof err->msg,
                 nb ? "out of memory for a %u-token prompt" : "--depth: the prompt has no tokens",
                 dmax);
        goto done;
    }
    engine_params ep;
    engine_params_default(&ep);
    ep.model = m;
    ep.tok = tok;
    ep.n_threads = o->threads;
    ep.max_seqs = 1;
    ep.max_batch_tokens = o->batch;
    ep.kv_tokens = dmax + o->n + 64; /* the deepest prompt, its tokens, a partial block */
    ep.kv_type = o->kv_type;
    if (engine_create(&e, &ep, err)) goto done;
    engine_params p = *engine_get_params(e);
    if (!p.n_threads) p.n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const gen_depth_model dm = gen_depth_model_of(m, p.kv_type);
    for (uint32_t k = 0; k < o->rounds; k++)
        for (size_t i = 0; i < o->depths.n; i++) {
            const uint32_t d = o->depths.v[i];
            gen_depth_prompt(prompt, d, head, nh < d ? nh : d, body, nb);
            gen_out g = {.ids = ids};
            if (gen_depth_one(e, o, prompt, d, &g, err)) goto done;
            const gen_depth_row r = gen_depth_row_of(&g, d, &m->cfg, p.kv_type, &dm);
            if (k == 0) rows[i] = r;
            rows[i].tps_round[k] = r.decode_tps;
            if (!o->json)
                fprintf(stderr,
                        "pass %u, depth %u: prefill %.1f s (%u tokens from the prefix cache), "
                        "decode %.2f tokens/s\n",
                        k + 1, d, r.prefill_s, r.cached, r.decode_tps);
        }
    for (size_t i = 0; i < o->depths.n; i++) {
        gen_depth_row *r = &rows[i];
        r->decode_tps = gen_median(r->tps_round, o->rounds);
        r->gbps = r->bytes * r->decode_tps / 1e9;
    }
    if (o->json)
        gen_depth_json(o, m, &dm, rows, o->depths.n, &p);
    else
        gen_depth_print(o, m, &dm, rows, o->depths.n, &p);
    rc = 0;
done:
    engine_destroy(e);
    free(body);
    free(prompt);
    free(ids);
    return rc;
}

int cli_generate(int argc, char **argv) {
    gen_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;
    size_t plen = strlen(o.prompt);
    const size_t bad = utf8_valid_prefix((const unsigned char *)o.prompt, plen);
    if (bad < plen) {
        fprintf(stderr, "tps generate: the prompt is not valid UTF-8 (byte %zu)\n", bad);
        return 2;
    }
    tps_err err = {0};
    llama_model *m = NULL;
    tokenizer *tok = NULL;
    engine *e = NULL;
    int32_t *ids = NULL, *out_ids = NULL;
    char *text = NULL;
    int status = 1;
    gen_out out = {0};
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
    if (o.depths.n) {
        status = gen_depth_run(&o, m, tok, ids, n_ids, &err);
        goto done;
    }
    engine_params ep;
    engine_params_default(&ep);
    ep.model = m;
    ep.tok = tok;
    ep.n_threads = o.threads;
    ep.max_seqs = 1;
    ep.max_batch_tokens = o.batch;
    ep.kv_tokens = m->cfg.ctx_len;
    ep.kv_type = o.kv_type;
    if (engine_create(&e, &ep, &err)) goto done;
    engine_request rq = {.prompt = ids, .n_prompt = n_ids, .max_tokens = o.n};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = (float)o.temp;
    rq.sampling.top_k = (int32_t)o.top_k;
    rq.sampling.top_p = (float)o.top_p;
    rq.sampling.min_p = (float)o.min_p;
    rq.sampling.seed = o.seed;
    rq.sampling.ignore_eos = o.ignore_eos;
    uint64_t id;
    if (engine_submit(e, &rq, &id, &err)) goto done;
    out.ids = out_ids = malloc(sizeof(int32_t) * (size_t)o.n);
    if (!out_ids) {
        snprintf(err.msg, sizeof err.msg, "out of memory for %lld token ids", (long long)o.n);
        goto done;
    }
    gen_collect(e, !o.json, &out, &err);
    text = out.text;
    if (out.fin == ENGINE_FINISH_ERROR) goto done;
    gen_report(&o, &out, ids, n_ids, m, e);
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
