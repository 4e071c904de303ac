/* Compiled grammars (constraint.h) by content, and the memory every
 * constrained request may take together.
 *
 * Clients send the same schema again and again (an agent's tools, a
 * structured-output format), so a compiled grammar is kept after its
 * request ends and handed to the next request whose GBNF text is the same
 * bytes (XGrammar, which vLLM uses, keys its compiled-grammar cache the
 * same way, by the grammar's input string, LRU within a byte limit). A hit
 * costs a hash and a compare, and no compile.
 *
 * The budget: the bytes of every compiled grammar alive (cached, or held by
 * a request whatever its state) plus what requests reserved for their
 * constraints (constraint_cursor_bytes per choice) stay under budget_bytes.
 * A request that would pass it first evicts cached grammars nobody uses,
 * least recently used first; if that is not enough it is refused
 * (TPS_EFULL: a queue of constrained requests cannot take the machine's
 * memory), and a grammar larger than the whole budget is refused as such
 * (TPS_ERANGE). A compile runs outside the lock, so the budget is checked
 * when it is done: at most the compiles in progress (each within its own
 * limit) run over it, briefly.
 *
 * Thread-safe: any thread may acquire and release. Callers outside the
 * module come in through constrain_compile (constrain.h), the one compile
 * path, with or without a cache. Not here: compiling
 * (constraint_prog.c), what the bytes are charged to in HTTP terms (the
 * server maps the codes to 400 and 503). */
#ifndef TPS_CONSTRAIN_GRAMMAR_CACHE_H
#define TPS_CONSTRAIN_GRAMMAR_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/constraint.h"
#include "base/error.h"

typedef struct grammar_cache_config {
    uint32_t max_entries;     /* compiled grammars kept for reuse; 0: none kept */
    size_t budget_bytes;      /* live compiled grammars + reservations; 0: no limit */
    const char *budget_label; /* names the budget in refusals, e.g. "(--constraint-mem)" */
    constraint_limits limits; /* each compile's time and size */
} grammar_cache_config;

typedef struct grammar_cache_stats {
    uint64_t hits, misses;  /* acquires served from the cache / that compiled */
    uint64_t compile_fails; /* compiles refused (malformed, too ambiguous, over a limit) */
    uint64_t refused;       /* acquires refused for the budget */
    uint64_t evictions;     /* cached grammars dropped (for room, or the entry count) */
    uint32_t entries;       /* cached now */
    size_t bytes;           /* live compiled grammars + reservations now */
    size_t budget_bytes;
} grammar_cache_stats;

typedef struct grammar_cache grammar_cache;

int grammar_cache_create(grammar_cache **out, const grammar_cache_config *c, tps_err *err);
/* Once every grammar it handed out has been released. */
void grammar_cache_free(grammar_cache *gc);

/* The compiled form of gbnf[0..len): the cached one, else compiled now
 * within the limits and cached; then reserve more bytes are reserved for
 * the caller. *out holds a reference and *hit says whether it was cached.
 * Errors: the compile's (TPS_EINVAL malformed or too ambiguous, TPS_ERANGE
 * over a per-request limit), TPS_ERANGE when it alone is larger than the
 * budget, TPS_EFULL when the budget has no room now; nothing is held then. */
int grammar_cache_acquire(grammar_cache *gc, const char *gbnf, size_t len, size_t reserve,
                          constraint_prog **out, bool *hit, tps_err *err);
/* A cached one only, never compiling: 1 (a reference in *out, reserve
 * reserved), 0 (not cached: nothing held), or TPS_EFULL as above. */
int grammar_cache_lookup(grammar_cache *gc, const char *gbnf, size_t len, size_t reserve,
                         constraint_prog **out, tps_err *err);
/* Gives back what an acquire or a lookup returned: its reference and its
 * reservation. */
void grammar_cache_release(grammar_cache *gc, constraint_prog *p, size_t reserve);

void grammar_cache_get_stats(grammar_cache *gc, grammar_cache_stats *out);

#endif
