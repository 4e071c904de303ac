/* Option tables for the subcommands: one row per option (name, kind, range,
 * default, help) that parses argv into the caller's config structs and
 * prints --help from the same rows.
 *
 * Contract:
 *   - A table is a static array of opt_row ended by a zeroed row ({0}). Rows
 *     name their storage by offset into one struct of the command's (base),
 *     so a table is data: offsetof(bench_cli, cfg.rate).
 *   - opt_parse() never exits and never prints: it returns 0, OPT_HELP, or -1
 *     with a whole message in msg ("tps bench: --rate takes a number > 0, not
 *     '0'"). opt_main() is the usual wrapper that prints and gives the exit
 *     code. A later occurrence of an option overrides an earlier one (sweep
 *     relies on this), except OPT_LIST rows, which append.
 *   - Accepted forms: --name VALUE, --name=VALUE, and the alias (-m VALUE).
 *     -h and --help ask for help. "-" alone and anything not starting with
 *     '-' is a positional argument.
 * Not here: cross-option checks (each command's own function), subcommand
 * dispatch, reading environment variables. */
#ifndef TPS_CLI_OPT_H
#define TPS_CLI_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

typedef enum opt_kind {
    OPT_END = 0,  /* ends a table */
    OPT_HEADING,  /* not an option: help is printed as a section heading or paragraph */
    OPT_FLAG,     /* bool *dst = true; takes no value */
    OPT_FLAG_OFF, /* bool *dst = false; takes no value (--no-...) */
    OPT_SET_INT,  /* int *dst = set; takes no value */
    OPT_STR,      /* const char **dst = the value (borrowed from argv) */
    OPT_LIST,     /* opt_list *dst: append the value; repeatable */
    OPT_INT,      /* int *dst, whole number in [min, max] */
    OPT_U32,      /* uint32_t *dst, whole number in [min, max] */
    OPT_U64,      /* uint64_t *dst, whole number in [min, max] */
    OPT_NUM,      /* double *dst in [min, max] (or > min with OPT_ABOVE_MIN) */
    OPT_SECONDS,  /* as OPT_NUM; the value may end in 's' */
    OPT_SIZE,     /* size_t *dst: bytes, with K/M/G/T (binary) suffixes, KiB/MB also */
    OPT_CHOICE,   /* int-sized *dst (int, uint32_t or an enum) = the matching choice's value */
    OPT_CUSTOM,   /* parse(dst, value, why, cap) */
    OPT_REST,     /* not an option: opt_list *dst takes the positional arguments
                     (and with OPT_UNKNOWN_TOO, unknown options); without this row a
                     positional argument is an error */
    OPT_ROWS,     /* not an option: the rows of another table (sub), whose offsets
                     (off, seen) count from this row's off: tables shared between
                     commands, e.g. serve's engine rows over an engine_params that
                     tps plan keeps inside its own struct */
} opt_kind;

enum {
    OPT_ABOVE_MIN = 1,   /* the range excludes min: "> 0" */
    OPT_UNKNOWN_TOO = 2, /* OPT_REST: unknown options go there too (sweep hands them on) */
};

typedef struct opt_choice {
    const char *name;
    int value;
} opt_choice;

/* A fixed-capacity list of borrowed strings (repeatable options, positionals). */
typedef struct opt_list {
    const char **v;
    size_t n, cap;
} opt_list;
#define OPT_LIST_OF(array) ((opt_list){(array), 0, sizeof(array) / sizeof((array)[0])})

/* A custom value: 0, or -1 with what was expected written to why
 * ("expected A:B seconds"); the parser names the flag and the value. */
typedef int (*opt_parse_fn)(void *dst, const char *value, char *why, size_t cap);
/* An opt_parse_fn's answer from a library parser that reports in a tps_err:
 * rc its return (0: parsed), e's message into why when it failed. */
int opt_err_why(int rc, const tps_err *e, char *why, size_t cap);

typedef struct opt_row {
    const char *name;  /* "--url", or a short-only "-v" */
    const char *alias; /* "-m", or NULL */
    opt_kind kind;
    size_t off;                /* dst = (char *)base + off: storage for the kind (see opt_kind) */
    double min, max;           /* numeric kinds: the range */
    unsigned flags;            /* OPT_ABOVE_MIN */
    int set;                   /* OPT_SET_INT: the value stored */
    const opt_choice *choices; /* OPT_CHOICE: ended by {NULL} */
    opt_parse_fn parse;        /* OPT_CUSTOM; for OPT_STR/OPT_LIST an optional check (dst NULL) */
    size_t seen;         /* OPT_SEEN(type, field): a bool set when the option is given; 0: none */
    const char *metavar; /* help: "URL"; default from the kind */
    const char *def;     /* help: appended as " (default DEF)"; NULL: none shown */
    const char *help;    /* help text; '\n' starts an indented continuation line */
    const struct opt_row *sub; /* OPT_ROWS: the shared table */
} opt_row;

#define OPT_HEAD(text)                                                                             \
    { .kind = OPT_HEADING, .help = (text) }
#define OPT_SEEN(type, field) (offsetof(type, field) + 1)
/* The rows of table `t` over the struct at offset `at` of this command's. */
#define OPT_ROWS_AT(t, at)                                                                         \
    { .kind = OPT_ROWS, .sub = (t), .off = (at) }

typedef struct opt_cmd {
    const char *prog;  /* "tps bench": starts every message */
    const char *usage; /* printed before the table (usage lines, description) */
    const opt_row *rows;
    const char *after;           /* printed after the table, or NULL */
    void (*epilogue)(FILE *out); /* printed last, or NULL (bench's glossary) */
} opt_cmd;

#define OPT_HELP 1

/* Parses argv[1..argc-1] into the rows' storage in base (defaults are what
 * base holds before). Returns 0, OPT_HELP when -h/--help was given (nothing
 * after it is parsed), or -1 with msg filled. */
int opt_parse(const opt_cmd *c, void *base, int argc, char **argv, char *msg, size_t cap);

/* The --help text: usage, every row grouped under its headings, after,
 * epilogue. */
void opt_print_help(FILE *out, const opt_cmd *c);

/* opt_parse, then: help printed on stdout -> 0; message on stderr -> 2;
 * parsed -> -1 (go on). Usage: int rc = opt_main(&c, argc, argv);
 * if (rc >= 0) return rc; */
int opt_main(const opt_cmd *c, void *base, int argc, char **argv);

/* Appends to a list; -1 when it is full. */
int opt_list_add(opt_list *l, const char *s);

#endif
