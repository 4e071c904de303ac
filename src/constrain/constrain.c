/* The one compile path of constrained decoding (constrain.h): through the
 * grammar cache when there is one, else a compile of its own.
 *
 * Not here: the cache (grammar_cache.c), compiling (constraint_prog.c). */
#include "constrain/constrain.h"

int constrain_compile(grammar_cache *gc, const char *gbnf, size_t len, size_t reserve,
                      constraint_prog **out, bool *hit, tps_err *err) {
    *out = NULL;
    *hit = false;
    if (gc) return grammar_cache_acquire(gc, gbnf, len, reserve, out, hit, err);
    return constraint_prog_compile(out, gbnf, len, NULL, err);
}

void constrain_release(grammar_cache *gc, constraint_prog *p, size_t reserve) {
    if (!p) return;
    if (gc)
        grammar_cache_release(gc, p, reserve);
    else
        constraint_prog_unref(p);
}
