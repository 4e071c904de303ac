/* Constrained decoding: a GBNF grammar (grammar.h) applied to a sequence's
 * logits as a mask, so that the bytes the sequence emits always stay a
 * prefix of a string in the grammar's language.
 *
 * Three objects:
 *   vocab_trie  - the vocabulary's token pieces (the bytes each token
 *                 stands for) in a byte trie, laid out in preorder with each
 *                 node's subtree end, so a walk skips a rejected prefix and
 *                 everything below it at once: a prefix shared by many
 *                 tokens is checked once. Built once per tokenizer, then
 *                 read-only (shared by every sequence and thread).
 *   constraint_prog - a compiled grammar: the parsed rules, each rule's
 *                 alternatives, and the start state's parse stacks.
 *                 Immutable once compiled and refcounted, so every choice
 *                 of a request, and every request that sends the same
 *                 grammar (grammar_cache.h), shares one. Compiling is the
 *                 costly part and runs within a time and a size budget.
 *   constraint  - one sequence's recognizer (its cursor over a prog). Its state is a set of parse
 *                 stacks (llama.cpp's pushdown representation: each stack a
 *                 list of grammar positions, a terminal on top; a rule that
 *                 ends in a reference is a tail call and does not grow the
 *                 stack), interned: equal states have one id. Transitions
 *                 (state, code point) -> state are memoised, and the mask of
 *                 a state is cached, so a state that recurs (inside a JSON
 *                 string, between array items) costs one lookup.
 *
 * The mask allows a token when its bytes, appended to the output so far,
 * keep the output a prefix of the language (a token that ends inside a
 * UTF-8 character is allowed when some continuation of that character
 * fits). End ids (end-of-generation and stop ids) are allowed only when
 * the output so far is a whole sentence of the language; tokens with no
 * bytes (control tokens) never are. The mask depends only on the
 * sequence's own state, never on its batch neighbours.
 *
 * Threads: a prog may be used from any thread; a constraint belongs to one
 * sequence and is used by one thread at a time.
 *
 * Not here: JSON schemas or regexes (json_schema.h and regex_gbnf.h write
 * those as GBNF), sampling (engine/sample/sampler.h), when to stop (the engine
 * asks constraint_finished), caching progs by content (grammar_cache.h),
 * the one compile path callers take (constrain.h). */
#ifndef TPS_CONSTRAIN_CONSTRAINT_H
#define TPS_CONSTRAIN_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/grammar.h"
#include "model/tokenizer.h"
#include "base/error.h"

#define CONSTRAINT_MAX_STACKS  4096 /* parse stacks in one state: beyond, the grammar is refused */
#define CONSTRAINT_MAX_END_IDS 16   /* end-of-generation and stop ids */
#define CONSTRAINT_MASK_CACHE  64   /* masks kept per sequence */
/* A sequence's memo caches (stacks, states, transitions) are dropped and
 * rebuilt from its current state when they pass this: one sequence's
 * recognizer never holds much more, however long it decodes. */
#define CONSTRAINT_CACHE_MAX_BYTES (32u << 20)

typedef struct vocab_trie vocab_trie;

/* The trie of tok's pieces for ids 0..n_vocab-1 (n_vocab may exceed the
 * tokenizer's vocabulary: those ids have no bytes). Tokens whose piece is
 * empty (control, unused) are left out. */
int vocab_trie_build(vocab_trie **out, const tokenizer *tok, uint32_t n_vocab, tps_err *err);
void vocab_trie_free(vocab_trie *t);
uint32_t vocab_trie_nodes(const vocab_trie *t);

typedef struct constraint_prog constraint_prog;

/* What compiling one grammar may cost: time (the parse and the start
 * state's expansion) and the compiled size (constraint_prog_bytes). A
 * compile over either stops early with TPS_ERANGE and a message with the
 * numbers; label (may be NULL) names the limit in it ("(--grammar-max-ms)"). */
typedef struct constraint_limits {
    uint64_t max_ns;  /* 0: no time limit */
    size_t max_bytes; /* 0: no size limit (GRAMMAR_MAX_ELEMS still bounds it) */
    const char *time_label, *bytes_label;
} constraint_limits;

/* Compiles the GBNF text gbnf[0..len) (errors as grammar_parse's, TPS_EINVAL
 * also when the start state is too ambiguous, TPS_ERANGE over a limit;
 * lim may be NULL: none). *out holds one reference. Any thread. */
int constraint_prog_compile(constraint_prog **out, const char *gbnf, size_t len,
                            const constraint_limits *lim, tps_err *err);
/* Another reference (returns p); thread-safe. */
constraint_prog *constraint_prog_ref(constraint_prog *p);
/* Drops a reference; the last one frees p. Thread-safe; NULL is ignored. */
void constraint_prog_unref(constraint_prog *p);
/* Whether anyone but the caller's one reference holds p (a racy snapshot:
 * exact while the caller alone can hand out references to it). */
bool constraint_prog_shared(const constraint_prog *p);
/* The compiled grammar's bytes (shared by every constraint over it). */
size_t constraint_prog_bytes(const constraint_prog *p);
/* When p is freed, its bytes are subtracted from *account (the grammar
 * cache's count of live compiled grammars); set once, before p is shared. */
void constraint_prog_set_account(constraint_prog *p, _Atomic size_t *account);

/* Bytes one constraint over a vocabulary of n_vocab ids takes before its
 * caches grow (the masks and the walk's levels): what a request reserves
 * per choice. Its caches add at most CONSTRAINT_CACHE_MAX_BYTES. */
size_t constraint_cursor_bytes(uint32_t n_vocab);

typedef struct constraint constraint;

/* A recognizer over prog (it takes its own reference) and the trie's
 * vocabulary, at the start of the output. end_ids (n_end <=
 * CONSTRAINT_MAX_END_IDS) are the ids that end the sequence. vt is
 * borrowed and must outlive the constraint. Cheap next to compiling. */
int constraint_create_prog(constraint **out, constraint_prog *prog, const vocab_trie *vt,
                           const int32_t *end_ids, size_t n_end, tps_err *err);
/* Compiles gbnf[0..len) without limits and makes one recognizer over it
 * (constraint_prog_compile + constraint_create_prog). */
int constraint_create(constraint **out, const char *gbnf, size_t len, const vocab_trie *vt,
                      const int32_t *end_ids, size_t n_end, tps_err *err);
void constraint_free(constraint *c);

/* Sets logits[id] (n_vocab,) to -inf for every token the grammar does not
 * allow next. Returns how many tokens are allowed; 0 is a dead end (the
 * grammar wants bytes no token spells). */
size_t constraint_apply(constraint *c, float *logits);
/* The allowed tokens as a bitset (n_vocab bits, bit i of byte i/8), borrowed
 * until the next call on c; *n_allowed gets their count. NULL when out of
 * memory (then nothing is allowed). */
const uint8_t *constraint_mask(constraint *c, size_t *n_allowed);

/* Appends token tok's bytes to the output. TPS_EINVAL when the grammar does
 * not allow it (the state is then unchanged); an end id is always accepted
 * and changes nothing. */
int constraint_accept(constraint *c, int32_t tok);

/* The output so far is a whole sentence of the language. */
bool constraint_complete(const constraint *c);
/* Complete, and no byte can follow: the sequence is done. */
bool constraint_finished(const constraint *c);

/* Memory the recognizer's caches hold now, in bytes (tests, tuning). */
size_t constraint_cache_bytes(const constraint *c);

#endif
