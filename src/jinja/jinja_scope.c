/* Variables during a render: frames (a for loop's iteration, a macro call,
 * a with block) chained to the frame they were made in, then the root
 * variables (the caller's and the top-level {% set %}s), then the global
 * functions. A {% set %} binds in the innermost frame, which is why a set
 * inside a loop is gone after it (jinja2's scoping; namespace() is the way
 * out). Not here: evaluation. */
#include "jinja/jinja_internal.h"

#include <string.h>

jframe *jx_frame(jctx *c, jframe *parent) {
    jframe *f = jx_alloc(c, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

jinja_val jx_lookup(jctx *c, int32_t sym) {
    for (const jframe *f = c->frame; f; f = f->parent)
        for (uint32_t i = f->n; i-- > 0;)
            if (f->sym[i] == sym) return f->val[i];
    if (c->root_set[sym]) return c->root[sym];
    int g = c->tpl->sym_global[sym];
    if (g >= 0) return (jinja_val){.type = JINJA_FUNC, .sub = JFN_BUILTIN, .aux = (uint16_t)g};
    jinja_val name = c->tpl->syms[sym];
    return jv_undef(JUNDEF_NAME, name.u.s, name.n, 0);
}

void jx_bind(jctx *c, int32_t sym, jinja_val v) {
    jframe *f = c->frame;
    if (!f) {
        c->root[sym] = v;
        c->root_set[sym] = 1;
        return;
    }
    for (uint32_t i = 0; i < f->n; i++)
        if (f->sym[i] == sym) {
            f->val[i] = v;
            return;
        }
    JX_PAIRS_ROOM(c, f->sym, f->val, f->n, f->cap);
    f->sym[f->n] = sym;
    f->val[f->n++] = v;
}
