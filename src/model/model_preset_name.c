/* Preset names and their thin variants: `name`-thin is the preset `name`'s
 * layers, heads and routing at the width and vocabulary of its own
 * model_presets row, so the shape tables of model_make_gemma4.c,
 * model_make_hybrid.c and model_make_mla.c keep one row for both. Nothing
 * here writes a file. */
#include <string.h>

#include "model/model_make.h"

static const char THIN[] = "-thin";

int model_preset_thin(const model_preset *p) {
    const size_t n = strlen(p->name), t = sizeof THIN - 1;
    return n > t && !strcmp(p->name + n - t, THIN);
}

int model_preset_is(const model_preset *p, const char *name) {
    const size_t n = strlen(name);
    return !strncmp(p->name, name, n) && (!p->name[n] || !strcmp(p->name + n, THIN));
}
