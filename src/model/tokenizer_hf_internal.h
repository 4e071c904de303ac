/* Private to tokenizer_hf*.c: what tokenizer_hf_spec.c reads of a
 * tokenizer.json's pipeline for tokenizer_hf.c. */
#ifndef TPS_TOKENIZER_HF_INTERNAL_H
#define TPS_TOKENIZER_HF_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "model/tokenizer_internal.h"

typedef struct hf_spec {
    tok_bpe_spec spec;               /* regexes borrowed from the JSON or literal[] */
    char literal[TOK_MAX_REGEX][64]; /* Split {"String": s} as \Q s \E */
    int n_literal;
    bool prepend_space; /* a Prepend "▁" normalizer: SentencePiece's dummy prefix */
    bool strip_space;   /* a Strip decoder: decode drops the first leading space */
} hf_spec;

/* root's normalizer, pre_tokenizer, decoder and model flags into *h;
 * TPS_EUNSUP naming any kind that is not supported. h borrows from root. */
int hf_read_spec(hf_spec *h, const json_t *root, tps_err *err);

#endif
