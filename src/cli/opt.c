/* The option-table parser behind every subcommand (see opt.h): argv into
 * the rows' storage, and --help from the same rows. It prints only in
 * opt_print_help and opt_main, and never exits. */
#include "cli/opt.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HELP_COL 26 /* where help text starts: "  --name METAVAR" is padded to it */

/* ---- values --------------------------------------------------------------------------- */

/* A finite number, the whole string; for seconds a trailing 's' is allowed. */
static int parse_double(const char *s, bool secs, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s) return -1;
    if (secs && *end == 's') end++;
    if (*end || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* A whole number >= 0: exact up to UINT64_MAX in decimal, or any form
 * strtod reads that is whole (1e3). */
static int parse_whole(const char *s, double *d, uint64_t *u) {
    if (s[0] >= '0' && s[0] <= '9') {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(s, &end, 10);
        if (!*end && !errno) {
            *u = n;
            *d = (double)n;
            return 0;
        }
    }
    double v;
    if (parse_double(s, false, &v) || v != floor(v) || v < 0 || v >= 18446744073709551616.0)
        return -1;
    *d = v;
    *u = (uint64_t)v;
    return 0;
}

/* "512M", "2G", "64KiB", "1000": bytes (binary multiples). */
static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return -1;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT";
        const char *u = strchr(units, *end >= 'a' ? *end - 32 : *end);
        if (!u || !*u) return -1;
        shift = 10 * (unsigned)(u - units + 1);
        end++;
        if (*end == 'i') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return -1;
    }
    if (shift && n > (SIZE_MAX >> shift)) return -1;
    *out = (size_t)(n << shift);
    return 0;
}

static bool is_whole_kind(opt_kind k) {
    return k == OPT_INT || k == OPT_U32 || k == OPT_U64;
}

static bool takes_value(const opt_row *r) {
    return r->kind != OPT_FLAG && r->kind != OPT_FLAG_OFF && r->kind != OPT_SET_INT;
}

/* "in [1, 100000]", "> 0", ">= 0", "in (0, 1]". */
static void range_text(const opt_row *r, char *buf, size_t cap) {
    bool above = r->flags & OPT_ABOVE_MIN;
    if (isinf(r->max))
        snprintf(buf, cap, "%s %.15g", above ? ">" : ">=", r->min);
    else
        snprintf(buf, cap, "in %c%.15g, %.15g]", above ? '(' : '[', r->min, r->max);
}

static bool in_range(const opt_row *r, double d) {
    bool lo_ok = (r->flags & OPT_ABOVE_MIN) ? d > r->min : d >= r->min;
    return lo_ok && d <= r->max;
}

/* The numeric kinds: parse, check the range, store. */
static int apply_number(const opt_row *r, void *dst, const char *flag, const char *v,
                        const char *prog, char *msg, size_t cap) {
    double d = 0;
    uint64_t u = 0;
    bool whole = is_whole_kind(r->kind);
    int bad = whole ? parse_whole(v, &d, &u) : parse_double(v, r->kind == OPT_SECONDS, &d);
    if (bad || !in_range(r, d)) {
        char range[96];
        range_text(r, range, sizeof range);
        bool fraction = whole && bad && !parse_double(v, false, &d) && d != floor(d);
        snprintf(msg, cap, "%s: %s takes %s %s, not '%s'%s", prog, flag,
                 r->kind == OPT_SECONDS ? "seconds" : "a number", range, v,
                 fraction ? " (a whole number)" : "");
        return -1;
    }
    if (r->kind == OPT_INT)
        *(int *)dst = (int)u;
    else if (r->kind == OPT_U32)
        *(uint32_t *)dst = (uint32_t)u;
    else if (r->kind == OPT_U64)
        *(uint64_t *)dst = u;
    else
        *(double *)dst = d;
    return 0;
}

static int apply_choice(const opt_row *r, void *dst, const char *flag, const char *v,
                        const char *prog, char *msg, size_t cap) {
    for (const opt_choice *ch = r->choices; ch->name; ch++)
        if (!strcmp(ch->name, v)) {
            memcpy(dst, &ch->value, sizeof(int)); /* int-sized by contract */
            return 0;
        }
    size_t n = (size_t)snprintf(msg, cap, "%s: %s takes ", prog, flag);
    for (const opt_choice *ch = r->choices; ch->name && n < cap; ch++)
        n += (size_t)snprintf(msg + n, cap - n, "%s%s", ch->name,
                              !ch[1].name   ? ""
                              : !ch[2].name ? " or "
                                            : ", ");
    if (n < cap) snprintf(msg + n, cap - n, ", not '%s'", v);
    return -1;
}

/* Custom values, and the optional check of strings and list items. */
static int apply_custom(const opt_row *r, void *dst, const char *flag, const char *v,
                        const char *prog, char *msg, size_t cap) {
    char why[256] = "not a valid value";
    if (!r->parse(dst, v, why, sizeof why)) return 0;
    snprintf(msg, cap, "%s: %s '%s': %s", prog, flag, v, why);
    return -1;
}

static int apply(const opt_row *r, void *base, const char *flag, const char *v, const char *prog,
                 char *msg, size_t cap) {
    void *dst = (char *)base + r->off;
    switch (r->kind) {
    case OPT_FLAG:
    case OPT_FLAG_OFF:
        *(bool *)dst = r->kind == OPT_FLAG;
        return 0;
    case OPT_SET_INT:
        *(int *)dst = r->set;
        return 0;
    case OPT_STR:
        if (r->parse && apply_custom(r, NULL, flag, v, prog, msg, cap)) return -1;
        *(const char **)dst = v;
        return 0;
    case OPT_LIST:
        if (r->parse && apply_custom(r, NULL, flag, v, prog, msg, cap)) return -1;
        if (!opt_list_add(dst, v)) return 0;
        snprintf(msg, cap, "%s: %s is given more than %zu times", prog, flag,
                 ((opt_list *)dst)->cap);
        return -1;
    case OPT_SIZE:
        if (!parse_size(v, dst)) return 0;
        snprintf(msg, cap, "%s: %s takes bytes (1000, 64K, 512M, 2G), not '%s'", prog, flag, v);
        return -1;
    case OPT_CHOICE:
        return apply_choice(r, dst, flag, v, prog, msg, cap);
    case OPT_CUSTOM:
        return apply_custom(r, dst, flag, v, prog, msg, cap);
    default:
        return apply_number(r, dst, flag, v, prog, msg, cap);
    }
}

/* ---- argv ----------------------------------------------------------------------------- */

int opt_list_add(opt_list *l, const char *s) {
    if (l->n >= l->cap) return -1;
    l->v[l->n++] = s;
    return 0;
}

/* The row named name (or aliased), looking into shared tables; *base is
 * moved to the struct the row's offsets count from. */
static const opt_row *find_row(const opt_row *rows, const char *name, char **base) {
    for (const opt_row *r = rows; r->kind != OPT_END; r++) {
        if (r->kind == OPT_ROWS) {
            char *sub = *base + r->off;
            const opt_row *f = find_row(r->sub, name, &sub);
            if (f) {
                *base = sub;
                return f;
            }
        } else if (r->name && (!strcmp(r->name, name) || (r->alias && !strcmp(r->alias, name)))) {
            return r;
        }
    }
    return NULL;
}

/* A positional argument, or an unknown option, into the OPT_REST row's list. */
static int add_rest(const opt_cmd *c, void *base, const char *a, bool unknown, char *msg,
                    size_t cap) {
    const opt_row *r = c->rows;
    while (r->kind != OPT_END && r->kind != OPT_REST)
        r++;
    if (unknown && (r->kind != OPT_REST || !(r->flags & OPT_UNKNOWN_TOO))) {
        snprintf(msg, cap, "%s: unknown option '%s' (see %s --help)", c->prog, a, c->prog);
        return -1;
    }
    if (r->kind != OPT_REST) {
        snprintf(msg, cap, "%s: unexpected argument '%s' (see %s --help)", c->prog, a, c->prog);
        return -1;
    }
    opt_list *l = (opt_list *)((char *)base + r->off);
    if (!opt_list_add(l, a)) return 0;
    snprintf(msg, cap, "%s: too many arguments (at most %zu)", c->prog, l->cap);
    return -1;
}

int opt_parse(const opt_cmd *c, void *base, int argc, char **argv, char *msg, size_t cap) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return OPT_HELP;
        if (a[0] != '-' || !a[1]) {
            if (add_rest(c, base, a, false, msg, cap)) return -1;
            continue;
        }
        char name[128];
        const char *v = NULL, *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        if (eq) v = eq + 1;
        char *rbase = (char *)base;
        const opt_row *r = find_row(c->rows, name, &rbase);
        if (!r) {
            if (add_rest(c, base, a, true, msg, cap)) return -1;
            continue;
        }
        if (takes_value(r) && !v) {
            if (i + 1 >= argc) {
                snprintf(msg, cap, "%s: %s needs a value", c->prog, name);
                return -1;
            }
            v = argv[++i];
        } else if (!takes_value(r) && v) {
            snprintf(msg, cap, "%s: %s takes no value", c->prog, name);
            return -1;
        }
        if (apply(r, rbase, name, v, c->prog, msg, cap)) return -1;
        if (r->seen) *(bool *)(rbase + r->seen - 1) = true;
    }
    return 0;
}

int opt_main(const opt_cmd *c, void *base, int argc, char **argv) {
    char msg[512];
    int rc = opt_parse(c, base, argc, argv, msg, sizeof msg);
    if (rc == OPT_HELP) {
        opt_print_help(stdout, c);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "%s\n", msg);
        return 2;
    }
    return -1;
}

/* ---- help ----------------------------------------------------------------------------- */

static const char *default_metavar(opt_kind k) {
    switch (k) {
    case OPT_INT:
    case OPT_U32:
    case OPT_U64:
        return "N";
    case OPT_NUM:
        return "X";
    case OPT_SECONDS:
        return "S";
    case OPT_SIZE:
        return "BYTES";
    default:
        return "VALUE";
    }
}

/* "  -m, --model FILE", with the choices as the metavar when none is given. */
static int row_left(const opt_row *r, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "  %s%s%s", r->alias ? r->alias : "", r->alias ? ", " : "", r->name);
    if (!takes_value(r)) return n;
    if (r->metavar || r->kind != OPT_CHOICE)
        return n + snprintf(buf + n, cap - (size_t)n, " %s",
                            r->metavar ? r->metavar : default_metavar(r->kind));
    for (const opt_choice *ch = r->choices; ch->name && (size_t)n < cap; ch++)
        n += snprintf(buf + n, cap - (size_t)n, "%c%s", ch == r->choices ? ' ' : '|', ch->name);
    return n;
}

static void print_row(FILE *out, const opt_row *r) {
    char left[160];
    int n = row_left(r, left, sizeof left);
    fputs(left, out);
    fprintf(out, "%*s", n < HELP_COL ? HELP_COL - n : 2, "");
    for (const char *h = r->help ? r->help : ""; *h; h++) {
        fputc(*h, out);
        if (*h == '\n') fprintf(out, "%*s", HELP_COL, "");
    }
    if (r->def) fprintf(out, " (default %s)", r->def);
    fputc('\n', out);
}

static void print_rows(FILE *out, const opt_row *rows) {
    for (const opt_row *r = rows; r->kind != OPT_END; r++) {
        if (r->kind == OPT_ROWS)
            print_rows(out, r->sub);
        else if (r->kind == OPT_HEADING)
            fprintf(out, "%s\n", r->help);
        else if (r->name)
            print_row(out, r);
    }
}

void opt_print_help(FILE *out, const opt_cmd *c) {
    if (c->usage) fputs(c->usage, out);
    print_rows(out, c->rows);
    if (c->after) fputs(c->after, out);
    if (c->epilogue) c->epilogue(out);
}

int opt_err_why(int rc, const tps_err *e, char *why, size_t cap) {
    if (!rc) return 0;
    snprintf(why, cap, "%s", e->msg);
    return -1;
}
