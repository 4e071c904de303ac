/* Text <-> token ids for the vocabularies Llama-family GGUF files carry:
 * SentencePiece-style ("llama": scores, <0xNN> byte fallback, dummy-prefix
 * space, ▁ for spaces) and byte-level BPE ("gpt2": ranked merges, the
 * pre-tokenizer regexes named by tokenizer.ggml.pre). Ids match llama.cpp's
 * tokenizer exactly (tests/test_tokenizer.c checks its reference outputs).
 * Also token pieces and full-text decode; the streaming detokenizer is in
 * model/tokenizer_stream.h.
 *
 * Not here: chat templates, sampling, Unicode normalisation (Llama vocabs
 * need none), WordPiece / Unigram / RWKV vocabularies, per-token lstrip
 * attributes (llama.cpp sets those only for a few non-Llama models; its
 * rstrip for Phi-3's special tokens is here).
 *
 * A loaded tokenizer is immutable (but for tokenizer_render_as_text, called
 * by its owner before it is shared): every function taking a const
 * tokenizer * may be called from many threads at once (encode uses
 * per-call scratch). */
#ifndef TPS_TOKENIZER_H
#define TPS_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "base/error.h"

typedef struct tokenizer tokenizer;

typedef enum tokenizer_kind {
    TOKENIZER_SPM = 1, /* tokenizer.ggml.model = "llama" */
    TOKENIZER_BPE = 2, /* tokenizer.ggml.model = "gpt2" */
} tokenizer_kind;

/* tokenizer.ggml.token_type values (0 or anything else: undefined). */
enum {
    TOKEN_TYPE_NORMAL = 1,
    TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3,
    TOKEN_TYPE_USER_DEFINED = 4,
    TOKEN_TYPE_UNUSED = 5,
    TOKEN_TYPE_BYTE = 6,
};

/* "no such token" (a GGUF id key of 4294967295, an absent key, a failed lookup). */
#define TOKEN_NONE (-1)

/* tokenizer_encode flags. */
enum {
    /* Add BOS when the vocab's add_bos_token says so (SPM default: yes; Llama 3
     * BPE: yes; GPT-2: no) and EOS when add_eos_token says so. */
    TOK_ENCODE_ADD_SPECIAL = 1u << 0,
    /* Text of control and unknown tokens ("<s>", "<|eot_id|>") in the input
     * becomes their ids. Without it that text is tokenized as plain text.
     * User-defined tokens are always matched, as in llama.cpp. */
    TOK_ENCODE_PARSE_SPECIAL = 1u << 1,
};

/* tokenizer_decode / detok_stream flags. */
enum {
    /* Control and unknown tokens render their text ("</s>") instead of nothing. */
    TOK_DECODE_RENDER_SPECIAL = 1u << 0,
    /* Drop a leading BOS and a trailing EOS that the vocab adds by itself
     * (llama.cpp's remove_special). */
    TOK_DECODE_REMOVE_SPECIAL = 1u << 1,
    /* Plain concatenation of pieces: no removal of the SPM dummy-prefix space
     * from the first piece, no BPE space clean-up (" ," -> ","). This is what
     * llama-server's completion text is. */
    TOK_DECODE_RAW_SPACES = 1u << 2,
};

/* Reads the vocabulary from f's tokenizer.ggml.* keys. Everything needed is
 * copied: f may be closed right after. Errors name the key that is missing
 * or malformed, or the unsupported tokenizer.ggml.model / .pre value. */
int tokenizer_load(tokenizer **out, const gguf_file *f, tps_err *err);
void tokenizer_free(tokenizer *t);

tokenizer_kind tokenizer_type(const tokenizer *t);
uint32_t tokenizer_n_vocab(const tokenizer *t);
/* Special ids, TOKEN_NONE when the vocab has none. */
int32_t tokenizer_bos(const tokenizer *t);
int32_t tokenizer_eos(const tokenizer *t);
int32_t tokenizer_unk(const tokenizer *t);
int32_t tokenizer_pad(const tokenizer *t);
/* What TOK_ENCODE_ADD_SPECIAL adds. */
bool tokenizer_adds_bos(const tokenizer *t);
bool tokenizer_adds_eos(const tokenizer *t);
/* End of generation: EOS, EOT, EOM and tokens llama.cpp recognises by text
 * (<|eot_id|>, <|im_end|>, <|endoftext|>, <end_of_turn>, ...). */
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
/* Makes a control token a user-defined one: its text is output like any
 * text (a chat format's markers the server must read: "[TOOL_CALLS]",
 * "<|tool_call_begin|>"), and a grammar may produce it; prompts match it
 * as before. Only before the tokenizer is shared (no other thread may use
 * it meanwhile). Out-of-range ids are ignored. */
void tokenizer_render_as_text(tokenizer *t, int32_t id);
/* TOKEN_TYPE_* as stored in the file; 0 for undefined or out-of-range ids. */
int tokenizer_token_type(const tokenizer *t, int32_t id);
/* True for control tokens (as stored, or marked so because they end generation). */
bool tokenizer_is_control(const tokenizer *t, int32_t id);
/* The token's vocabulary string ("▁Hello", "Ġworld", "<0x0A>"); borrowed
 * from t, not NUL-terminated. NULL (and *len 0) for out-of-range ids. */
const char *tokenizer_token_text(const tokenizer *t, int32_t id, size_t *len);
/* Exact vocabulary lookup of a token string; TOKEN_NONE if absent. */
int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len);

/* Tokenizes text[0..len) (any bytes; see below) into out[0..cap).
 * On success returns 0 with *n_out ids written. When cap is too small,
 * returns TPS_ERANGE with *n_out = the number of ids needed (nothing useful
 * in out): call again with a larger buffer.
 * Invalid UTF-8 never fails: SPM feeds invalid bytes to byte fallback; BPE
 * pre-tokenizes with PCRE2_MATCH_INVALID_UTF, so invalid bytes become pieces
 * of their own and byte-level BPE encodes them (llama.cpp would substitute
 * U+FFFD instead; decode gives back the original bytes here). */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, unsigned flags, int32_t *out,
                     size_t cap, size_t *n_out, tps_err *err);
/* Same into a malloc'ed array the caller frees (*out is NULL when *n_out is 0). */
int tokenizer_encode_alloc(const tokenizer *t, const char *text, size_t len, unsigned flags,
                           int32_t **out, size_t *n_out, tps_err *err);

/* The bytes one token stands for, borrowed from t (valid until
 * tokenizer_free, not NUL-terminated): SPM ▁ -> ' ', <0xNN> -> that byte;
 * BPE byte-level chars -> bytes. Control and unknown tokens give "" unless
 * render_special; unused/undefined tokens always give "". A piece may be part
 * of a UTF-8 character (byte tokens). NULL and *len 0 for out-of-range ids. */
const char *tokenizer_piece(const tokenizer *t, int32_t id, bool render_special, size_t *len);

/* Full-text decode as llama.cpp's llama_detokenize does it (flags above):
 * by default the first piece loses one leading space when the vocab adds a
 * dummy prefix (SPM), unless TOK_DECODE_REMOVE_SPECIAL removed a leading BOS
 * (then nothing is stripped, as in llama.cpp); BPE vocabs get llama.cpp's
 * space clean-up. Bytes are returned as they are (no UTF-8 repair).
 * Writes *n_out bytes and a terminating NUL into out[0..cap). When cap is too
 * small (needs *n_out + 1), returns TPS_ERANGE with *n_out = bytes needed
 * without the NUL. Out-of-range ids are TPS_ERANGE with a message. */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char *out,
                     size_t cap, size_t *n_out, tps_err *err);
/* Same into a malloc'ed NUL-terminated string the caller frees. */
int tokenizer_decode_alloc(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                           char **out, size_t *n_out, tps_err *err);

#endif
