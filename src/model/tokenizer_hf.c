/* Loading a Hugging Face tokenizer (tokenizer_hf.h): the files, the
 * vocabulary (model.vocab and added_tokens, gaps filled as unused
 * tokens), token types, the special ids and add-BOS rule from
 * tokenizer_config.json, the merges, then the shared BPE and the shared
 * finishing steps. Not here: the pipeline kinds (tokenizer_hf_spec.c),
 * encoding (tokenizer.c, tokenizer_bpe.c). */
#include "model/tokenizer_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/free_all.h"
#include "model/tokenizer_hf_internal.h"

/* The most bytes of a tokenizer.json or tokenizer_config.json read. */
#define HF_FILE_MAX (256 << 20)

bool tokenizer_path_is_hf(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) return true;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
        ;
    fclose(f);
    return c == '{';
}

/* ---- files ------------------------------------------------------------------ */

typedef struct hf_files {
    json_t *tok, *cfg; /* tokenizer.json; tokenizer_config.json or NULL */
    char path[1024];   /* the tokenizer.json read, for messages */
} hf_files;

static int read_files(hf_files *h, const char *path, tps_err *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return tps_fail(err, TPS_ENOENT, "--tokenizer %s: no such file or directory", path);
    char dir[1024];
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(h->path, sizeof h->path, "%s/tokenizer.json", path);
    } else {
        snprintf(h->path, sizeof h->path, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    }
    json_error_t je;
    /* the largest real files are ~35 MB (Gemma 3's 262k vocabulary) */
    if (stat(h->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > HF_FILE_MAX)
        return tps_fail(err, TPS_ERANGE, "%s: %lld bytes; a tokenizer.json is at most %d MiB",
                        h->path, (long long)st.st_size, HF_FILE_MAX >> 20);
    h->tok = json_load_file(h->path, 0, &je);
    if (!h->tok)
        return tps_fail(err, TPS_EINVAL, "%s: %s (line %d): a tokenizer.json is needed", h->path,
                        je.text, je.line);
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    /* model_max_length is often 1e30 written as an integer */
    if (stat(cfg, &st) == 0 && st.st_size > HF_FILE_MAX)
        return tps_fail(err, TPS_ERANGE, "%s: %lld bytes; at most %d MiB", cfg,
                        (long long)st.st_size, HF_FILE_MAX >> 20);
    if (stat(cfg, &st) == 0 && !(h->cfg = json_load_file(cfg, JSON_DECODE_INT_AS_REAL, &je)))
        return tps_fail(err, TPS_EINVAL, "%s: %s (line %d)", cfg, je.text, je.line);
    return 0;
}

/* ---- vocabulary ---------------------------------------------------------------- */

/* A token's string and id, as the JSON holds them (borrowed). */
typedef struct hf_tok {
    const char *s;
    size_t n;
} hf_tok;

/* Highest id in model.vocab and added_tokens, + 1; 0 on a malformed entry. */
static uint64_t vocab_size(const json_t *vocab, const json_t *added) {
    uint64_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vocab, k, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= INT32_MAX - 1) return 0;
        if ((uint64_t)id + 1 > n) n = (uint64_t)id + 1;
    }
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX - 1 ||
            !json_is_string(json_object_get(v, "content")))
            return 0;
        if ((uint64_t)json_integer_value(id) + 1 > n) n = (uint64_t)json_integer_value(id) + 1;
    }
    return n;
}

/* The strings by id into t->text / text_off; ids no entry names become
 * "[PAD<id>]", unused. */
static int fill_texts(tokenizer *t, const hf_tok *toks, tps_err *err) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        total += toks[i].s ? toks[i].n : 24;
    if (total > UINT32_MAX)
        return tps_fail(err, TPS_ERANGE, "tokenizer.json: token strings exceed 4 GiB");
    t->text = malloc(total ? total : 1);
    t->text_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->text_off);
    t->score = calloc(t->n_vocab, sizeof *t->score);
    t->type = malloc(t->n_vocab);
    t->attr = malloc(t->n_vocab);
    if (!t->text || !t->text_off || !t->score || !t->type || !t->attr)
        return tps_fail(err, TPS_ENOMEM, "tokenizer.json: out of memory for the vocabulary");
    uint32_t off = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        t->text_off[i] = off;
        bool have = toks[i].s != NULL;
        if (have) {
            memcpy(t->text + off, toks[i].s, toks[i].n);
            off += (uint32_t)toks[i].n;
        } else {
            off += (uint32_t)snprintf(t->text + off, 24, "[PAD%u]", i);
        }
        t->type[i] = have ? TOKEN_TYPE_NORMAL : TOKEN_TYPE_UNUSED;
        t->attr[i] = have ? TOK_ATTR_NORMAL : TOK_ATTR_UNUSED;
    }
    t->text_off[t->n_vocab] = off;
    return 0;
}

static void set_type(tokenizer *t, uint32_t id, int type, uint8_t attr) {
    t->type[id] = (uint8_t)type;
    t->attr[id] = attr;
}

/* Vocabulary, then types: added special -> control, added -> user-defined,
 * <0xNN> -> byte (byte-fallback models). */
static int load_vocab(tokenizer *t, const json_t *root, bool byte_fallback, tps_err *err) {
    const json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    const json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab))
        return tps_fail(err, TPS_EINVAL, "tokenizer.json: model.vocab is not an object");
    uint64_t n = vocab_size(vocab, added);
    if (!n)
        return tps_fail(err, TPS_EINVAL,
                        "tokenizer.json: model.vocab or added_tokens holds an entry that is not "
                        "a token and an id");
    /* ids are dense in real files (gpt-oss pads 1070): a far id is a broken file */
    size_t entries = json_object_size(vocab) + json_array_size(added);
    if (n > entries + 65536)
        return tps_fail(err, TPS_EINVAL,
                        "tokenizer.json: token id %llu is far past the %zu tokens the file names",
                        (unsigned long long)n - 1, entries);
    t->n_vocab = (uint32_t)n;
    hf_tok *toks = calloc(n, sizeof *toks);
    if (!toks) return tps_fail(err, TPS_ENOMEM, "tokenizer.json: out of memory");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vocab, k, v) {
        toks[json_integer_value(v)] = (hf_tok){k, strlen(k)};
    }
    size_t i;
    json_array_foreach(added, i, v) {
        json_t *c = json_object_get(v, "content");
        toks[json_integer_value(json_object_get(v, "id"))] =
            (hf_tok){json_string_value(c), json_string_length(c)};
    }
    int rc = fill_texts(t, toks, err);
    free(toks);
    if (rc) return rc;
    for (uint32_t id = 0; byte_fallback && id < t->n_vocab; id++) {
        const char *s = t->text + t->text_off[id];
        if (t->text_off[id + 1] - t->text_off[id] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>')
            set_type(t, id, TOKEN_TYPE_BYTE, TOK_ATTR_BYTE);
    }
    json_array_foreach(added, i, v) {
        bool special = json_is_true(json_object_get(v, "special"));
        set_type(t, (uint32_t)json_integer_value(json_object_get(v, "id")),
                 special ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_USER_DEFINED,
                 special ? TOK_ATTR_CONTROL : TOK_ATTR_USER_DEFINED);
    }
    return 0;
}

/* ---- special ids ----------------------------------------------------------------- */

/* A config token: "text" or {"content": "text"}; its id or TOKEN_NONE. */
static int32_t config_token(const tokenizer *t, const json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    const char *s = json_string_value(v);
    return s ? tok_lookup(t, s, json_string_length(v)) : TOKEN_NONE;
}

/* The post_processor's template starts with a special token: its id. */
static int32_t template_bos(const tokenizer *t, const json_t *pp) {
    if (!pp || json_is_null(pp)) return TOKEN_NONE;
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (type && !strcmp(type, "Sequence")) {
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(pp, "processors"), i, x) {
            int32_t id = template_bos(t, x);
            if (id != TOKEN_NONE) return id;
        }
        return TOKEN_NONE;
    }
    if (!type || strcmp(type, "TemplateProcessing")) return TOKEN_NONE;
    const json_t *first = json_array_get(json_object_get(pp, "single"), 0);
    const json_t *sp = json_object_get(json_object_get(first, "SpecialToken"), "id");
    return sp ? config_token(t, sp) : TOKEN_NONE;
}

static int read_special(tokenizer *t, const json_t *root, const json_t *cfg, tps_err *err) {
    t->bos = config_token(t, json_object_get(cfg, "bos_token"));
    t->eos = config_token(t, json_object_get(cfg, "eos_token"));
    t->pad = config_token(t, json_object_get(cfg, "pad_token"));
    t->unk = config_token(t, json_object_get(json_object_get(root, "model"), "unk_token"));
    if (t->unk == TOKEN_NONE) t->unk = config_token(t, json_object_get(cfg, "unk_token"));
    t->eot = t->eom = TOKEN_NONE;
    if (t->unk != TOKEN_NONE) set_type(t, (uint32_t)t->unk, TOKEN_TYPE_UNKNOWN, TOK_ATTR_UNKNOWN);
    int32_t tmpl = template_bos(t, json_object_get(root, "post_processor"));
    json_t *add_bos = json_object_get(cfg, "add_bos_token");
    if (json_is_boolean(add_bos)) {
        t->add_bos = json_is_true(add_bos);
        if (t->bos == TOKEN_NONE) t->bos = tmpl;
    } else {
        t->add_bos = tmpl != TOKEN_NONE;
        if (t->add_bos) t->bos = tmpl;
    }
    t->add_eos = json_is_true(json_object_get(cfg, "add_eos_token"));
    t->clean_spaces = json_is_true(json_object_get(cfg, "clean_up_tokenization_spaces"));
    return tok_check_added(t,
                           "tokenizer_config.json: add_bos_token is true but bos_token names no "
                           "token of the vocabulary",
                           "tokenizer_config.json: add_eos_token is true but eos_token names no "
                           "token of the vocabulary",
                           err);
}

/* ---- model ------------------------------------------------------------------------- */

static int check_model(const json_t *model, tps_err *err) {
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model))
        return tps_fail(err, TPS_EINVAL, "tokenizer.json: no \"model\" object");
    if (!type || strcmp(type, "BPE"))
        return tps_fail(err, TPS_EUNSUP,
                        "tokenizer.json: model type '%s' is not supported (supported: BPE, as "
                        "Llama 3, Qwen3, Mistral, Gemma 3, DeepSeek V3 and gpt-oss use)",
                        type ? type : "(none)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *a = json_string_value(json_object_get(model, affixes[i]));
        if (a && a[0])
            return tps_fail(err, TPS_EUNSUP, "tokenizer.json: a BPE model with %s '%s'", affixes[i],
                            a);
    }
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0)
        return tps_fail(err, TPS_EUNSUP, "tokenizer.json: a BPE model with dropout");
    return 0;
}

/* model.merges ("a b" strings or ["a", "b"] pairs) into the BPE. */
static int build_bpe(tokenizer *t, const json_t *model, const tok_bpe_spec *spec, tps_err *err) {
    const json_t *merges = json_object_get(model, "merges");
    size_t n = json_array_size(merges), total = 0, i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        if (json_is_array(m))
            total += json_string_length(json_array_get(m, 0)) +
                     json_string_length(json_array_get(m, 1)) + 1;
    }
    gguf_str *strs = malloc((n ? n : 1) * sizeof *strs);
    char *joined = malloc(total ? total : 1);
    int rc = strs && joined ? 0 : tps_fail(err, TPS_ENOMEM, "tokenizer.json: out of memory");
    size_t off = 0;
    json_array_foreach(merges, i, m) {
        if (rc) break;
        if (json_is_string(m)) {
            strs[i] = (gguf_str){json_string_value(m), json_string_length(m)};
            continue;
        }
        const json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
        if (!json_is_string(a) || !json_is_string(b)) {
            rc = tps_fail(err, TPS_EINVAL, "tokenizer.json: model.merges[%zu] is not a pair", i);
            break;
        }
        size_t la = json_string_length(a), lb = json_string_length(b);
        strs[i] = (gguf_str){joined + off, la + 1 + lb};
        memcpy(joined + off, json_string_value(a), la);
        joined[off + la] = ' ';
        memcpy(joined + off + la + 1, json_string_value(b), lb);
        off += la + 1 + lb;
    }
    if (!rc) rc = tok_bpe_create_spec(&t->bpe, t, spec, strs, n, err);
    free(joined);
    free(strs);
    return rc;
}

/* config's chat_template: a string, or the "default" of a named list. */
static int chat_template_of(const json_t *cfg, char **out, tps_err *err) {
    const json_t *ct = json_object_get(cfg, "chat_template");
    const char *s = json_string_value(ct);
    size_t i;
    json_t *x;
    json_array_foreach(ct, i, x) {
        const char *name = json_string_value(json_object_get(x, "name"));
        if (name && !strcmp(name, "default")) s = json_string_value(json_object_get(x, "template"));
    }
    *out = NULL;
    if (s && !(*out = strdup(s))) return tps_fail(err, TPS_ENOMEM, "out of memory");
    return 0;
}

/* Messages say "tokenizer.json: ..." below: the file's path instead. */
static void name_file(tps_err *err, const char *path) {
    static const char lead[] = "tokenizer.json: ";
    if (strncmp(err->msg, lead, sizeof lead - 1)) return;
    char m[sizeof err->msg];
    snprintf(m, sizeof m, "%.200s: %.300s", path, err->msg + sizeof lead - 1);
    memcpy(err->msg, m, sizeof m);
}

int tokenizer_load_hf(tokenizer **out, const char *path, char **chat_template, tps_err *err) {
    *out = NULL;
    if (chat_template) *chat_template = NULL;
    hf_files f = {0};
    hf_spec h;
    tokenizer *t = NULL;
    int rc = read_files(&f, path, err);
    const json_t *model = json_object_get(f.tok, "model");
    if (!rc) rc = check_model(model, err);
    if (!rc) rc = hf_read_spec(&h, f.tok, err);
    if (!rc && !(t = calloc(1, sizeof *t))) rc = tps_fail(err, TPS_ENOMEM, "out of memory");
    if (rc) goto done;
    /* byte-level BPE is llama.cpp's "gpt2"; BPE over ▁ pieces with byte
     * fallback decodes as SentencePiece does */
    t->kind = h.spec.byte_level ? TOKENIZER_BPE : TOKENIZER_SPM;
    t->add_space_prefix = h.prepend_space || h.strip_space;
    if ((rc = load_vocab(t, f.tok, h.spec.byte_fallback, err))) goto done;
    if ((rc = tok_build_hash(t, err))) goto done;
    if ((rc = read_special(t, f.tok, f.cfg, err))) goto done;
    if (!h.spec.byte_level) tok_spm_byte_ids(t);
    if ((rc = build_bpe(t, model, &h.spec, err))) goto done;
    if ((rc = tok_finish(t, err))) goto done;
    if (chat_template) rc = chat_template_of(f.cfg, chat_template, err);
done:
    if (rc && rc != TPS_ENOMEM && err) name_file(err, f.path[0] ? f.path : path);
    json_decref(f.cfg);
    json_decref(f.tok);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}
