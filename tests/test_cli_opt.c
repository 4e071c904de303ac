/* The option-table parser (src/cli/opt.h): values into a struct by offset,
 * ranges, errors that name the flag, and --help from the same rows. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/opt.h"

typedef struct t_opts {
    const char *name;
    uint32_t count;
    uint64_t big;
    int level, mode;
    double rate, wait;
    size_t bytes;
    bool on, color, seen_rate;
    const char *hbuf[2], *rbuf[4];
    opt_list hdr, rest;
    int custom;
} t_opts;

static int even_arg(void *dst, const char *v, char *why, size_t cap) {
    int n = atoi(v);
    if (n % 2) return snprintf(why, cap, "expected an even number"), -1;
    *(int *)dst = n;
    return 0;
}

#define T(f) offsetof(t_opts, f)
static const opt_row rows[] = {
    OPT_HEAD("first group"),
    {"--name", "-n", OPT_STR, T(name), .metavar = "NAME", .help = "a name"},
    {"--count", .kind = OPT_U32, .off = T(count), .min = 1, .max = 10, .def = "3",
     .help = "how many"},
    {"--big", .kind = OPT_U64, .off = T(big), .max = 18446744073709551615.0, .help = "big"},
    {"--level", .kind = OPT_SET_INT, .off = T(level), .set = 7, .help = "level seven"},
    {"--mode", .kind = OPT_CHOICE, .off = T(mode),
     .choices = (const opt_choice[]){{"fast", 1}, {"slow", 2}, {NULL, 0}}, .help = "speed"},
    OPT_HEAD("second group"),
    {"--rate", .kind = OPT_NUM, .off = T(rate), .max = INFINITY, .flags = OPT_ABOVE_MIN,
     .seen = OPT_SEEN(t_opts, seen_rate), .help = "per second\nsecond line"},
    {"--wait", .kind = OPT_SECONDS, .off = T(wait), .max = 60, .help = "seconds"},
    {"--bytes", .kind = OPT_SIZE, .off = T(bytes), .help = "size"},
    {"--on", .kind = OPT_FLAG, .off = T(on), .help = "switch on"},
    {"--no-color", .kind = OPT_FLAG_OFF, .off = T(color), .help = "no colour"},
    {"--header", .kind = OPT_LIST, .off = T(hdr), .help = "repeatable"},
    {"--even", .kind = OPT_CUSTOM, .off = T(custom), .parse = even_arg, .help = "even"},
    {.kind = OPT_REST, .off = T(rest)},
    {0},
};
static const opt_cmd cmd = {
    .prog = "tps t", .usage = "usage: tps t\n", .rows = rows, .after = "AFTER TEXT\n"};

static char msg[512];

static int parse(t_opts *o, const char *const *args) {
    char *argv[32] = {"t"};
    int argc = 1;
    while (*args)
        argv[argc++] = (char *)*args++;
    *o = (t_opts){.count = 3, .color = true};
    o->hdr = OPT_LIST_OF(o->hbuf);
    o->rest = OPT_LIST_OF(o->rbuf);
    msg[0] = 0;
    return opt_parse(&cmd, o, argc, argv, msg, sizeof msg);
}

Test(cli_opt, values_land_in_the_struct_in_both_forms) {
    t_opts o;
    cr_assert_eq(parse(&o, (const char *[]){"-n", "x", "--count=4", "--big", "18446744073709551615",
                                            "--level", "--mode", "slow", "--rate", "2.5", "--wait",
                                            "3s", "--bytes", "2M", "--on", "--no-color", "--even=8",
                                            "file", NULL}),
                 0, "%s", msg);
    cr_expect_str_eq(o.name, "x");
    cr_expect_eq(o.count, 4);
    cr_expect_eq(o.big, UINT64_MAX);
    cr_expect_eq(o.level, 7);
    cr_expect_eq(o.mode, 2);
    cr_expect_eq(o.rate, 2.5);
    cr_expect_eq(o.wait, 3);
    cr_expect_eq(o.bytes, (size_t)2 << 20);
    cr_expect(o.on && !o.color && o.seen_rate);
    cr_expect_eq(o.custom, 8);
    cr_expect(o.rest.n == 1 && !strcmp(o.rest.v[0], "file"));
}

Test(cli_opt, defaults_stay_when_not_given) {
    t_opts o;
    cr_assert_eq(parse(&o, (const char *[]){NULL}), 0);
    cr_expect_eq(o.count, 3);
    cr_expect(o.color && !o.seen_rate && !o.name);
}

Test(cli_opt, out_of_range_names_the_flag_the_range_and_the_value) {
    t_opts o;
    cr_expect_eq(parse(&o, (const char *[]){"--count", "11", NULL}), -1);
    cr_expect_str_eq(msg, "tps t: --count takes a number in [1, 10], not '11'");
    cr_expect_eq(parse(&o, (const char *[]){"--count", "0", NULL}), -1);
    cr_expect_eq(parse(&o, (const char *[]){"--count", "2.5", NULL}), -1);
    cr_expect(strstr(msg, "whole") != NULL, "%s", msg);
    cr_expect_eq(parse(&o, (const char *[]){"--rate", "0", NULL}), -1);
    cr_expect_str_eq(msg, "tps t: --rate takes a number > 0, not '0'");
    cr_expect_eq(parse(&o, (const char *[]){"--rate", "nan", NULL}), -1);
    cr_expect_eq(parse(&o, (const char *[]){"--wait", "61", NULL}), -1);
    cr_expect_str_eq(msg, "tps t: --wait takes seconds in [0, 60], not '61'");
    cr_expect_eq(parse(&o, (const char *[]){"--bytes", "2X", NULL}), -1);
    cr_expect(strstr(msg, "--bytes") && strstr(msg, "'2X'"), "%s", msg);
    cr_expect_eq(parse(&o, (const char *[]){"--mode", "medium", NULL}), -1);
    cr_expect_str_eq(msg, "tps t: --mode takes fast or slow, not 'medium'");
    cr_expect_eq(parse(&o, (const char *[]){"--even", "3", NULL}), -1);
    cr_expect_str_eq(msg, "tps t: --even '3': expected an even number");
}

Test(cli_opt, unknown_flag_and_missing_value_are_errors) {
    t_opts o;
    cr_expect_eq(parse(&o, (const char *[]){"--bogus", NULL}), -1);
    cr_expect(strstr(msg, "unknown option '--bogus'") != NULL, "%s", msg);
    cr_expect_eq(parse(&o, (const char *[]){"--count", NULL}), -1);
    cr_expect_str_eq(msg, "tps t: --count needs a value");
    cr_expect_eq(parse(&o, (const char *[]){"--on=1", NULL}), -1);
    cr_expect(strstr(msg, "--on takes no value") != NULL, "%s", msg);
    cr_expect_eq(parse(&o, (const char *[]){"--help", "--bogus", NULL}), OPT_HELP);
    cr_expect_eq(parse(&o, (const char *[]){"-h", NULL}), OPT_HELP);
}

Test(cli_opt, repeatable_options_append_until_full) {
    t_opts o;
    cr_assert_eq(parse(&o, (const char *[]){"--header", "a", "--header=b", NULL}), 0);
    cr_expect(o.hdr.n == 2 && !strcmp(o.hdr.v[0], "a") && !strcmp(o.hdr.v[1], "b"));
    cr_expect_eq(
        parse(&o, (const char *[]){"--header", "a", "--header", "b", "--header", "c", NULL}), -1);
    cr_expect(strstr(msg, "--header") != NULL, "%s", msg);
}

Test(cli_opt, help_has_every_row_under_its_heading) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opt_print_help(f, &cmd);
    fclose(f);
    const char *prev = buf;
    for (const opt_row *r = rows; r->kind != OPT_END; r++) {
        const char *key = r->kind == OPT_HEADING ? r->help : r->name;
        if (!key) continue;
        const char *at = strstr(prev, key);
        cr_expect(at != NULL, "%s missing or out of order:\n%s", key, buf);
        if (at) prev = at;
    }
    cr_expect(strstr(buf, "usage: tps t") == buf);
    cr_expect(strstr(buf, "-n, --name NAME") != NULL, "%s", buf);
    cr_expect(strstr(buf, "(default 3)") != NULL, "%s", buf);
    cr_expect(strstr(buf, "--mode fast|slow") != NULL, "%s", buf);
    cr_expect(strstr(buf, "\n                          second line") != NULL, "%s", buf);
    cr_expect(strstr(buf, "AFTER TEXT") != NULL);
    free(buf);
}

/* ---- tables shared between commands (OPT_ROWS) ------------------------------ */

typedef struct inner {
    uint32_t seqs;
    bool flag, seen_seqs;
} inner;

typedef struct outer {
    const char *model;
    inner a, b; /* two structs the one shared table fills, at their offsets */
} outer;

static const opt_row inner_rows[] = {
    {"--seqs", .kind = OPT_U32, .off = offsetof(inner, seqs), .min = 1, .max = 64,
     .seen = OPT_SEEN(inner, seen_seqs), .help = "shared sequences"},
    {"--flag", .kind = OPT_FLAG, .off = offsetof(inner, flag), .help = "shared flag"},
    {0},
};

static const opt_row outer_rows[] = {
    {"--model", .kind = OPT_STR, .off = offsetof(outer, model), .help = "own row"},
    OPT_HEAD("shared"),
    OPT_ROWS_AT(inner_rows, offsetof(outer, b)),
    {0},
};

Test(cli_opt, a_shared_table_fills_the_struct_at_its_offset_and_prints_in_help) {
    static const opt_cmd c = {.prog = "t", .rows = outer_rows};
    outer o = {0};
    char *argv[] = {"t", "--seqs", "9", "--model", "m.gguf", "--flag"};
    char why[256] = "";
    cr_assert_eq(opt_parse(&c, &o, 6, argv, why, sizeof why), 0, "%s", why);
    cr_expect_eq(o.b.seqs, 9);
    cr_expect(o.b.flag && o.b.seen_seqs, "the seen flag counts from the table's struct too");
    cr_expect_eq(o.a.seqs, 0, "only the struct the table was placed on");
    cr_expect_str_eq(o.model, "m.gguf");
    char *bad[] = {"t", "--seqs", "65"};
    cr_expect_eq(opt_parse(&c, &o, 3, bad, why, sizeof why), -1);
    cr_expect(strstr(why, "--seqs") && strstr(why, "65"), "%s", why);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opt_print_help(f, &c);
    fclose(f);
    cr_expect(strstr(buf, "shared\n  --seqs N") && strstr(buf, "--flag"), "%s", buf);
    free(buf);
}
