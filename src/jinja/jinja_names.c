/* The names the language knows: filters (their ids, aliases such as e and
 * d, and jinja2's filters this engine lacks, a compile error naming them),
 * tests, and the global functions. Names only: the functions are in
 * jinja_filters*.c, jinja_tests.c and jinja_methods.c. */
#include "jinja/jinja_filters.h"

#include "base/name_table.h"

static const tps_name_id FILTER_NAMES[] = {
    {"trim", JF_TRIM},
    {"lower", JF_LOWER},
    {"upper", JF_UPPER},
    {"title", JF_TITLE},
    {"capitalize", JF_CAPITALIZE},
    {"replace", JF_REPLACE},
    {"indent", JF_INDENT},
    {"center", JF_CENTER},
    {"truncate", JF_TRUNCATE},
    {"wordcount", JF_WORDCOUNT},
    {"escape", JF_ESCAPE},
    {"e", JF_ESCAPE},
    {"forceescape", JF_FORCEESCAPE},
    {"string", JF_STRING},
    {"safe", JF_SAFE},
    {"format", JF_FORMAT},
    {"int", JF_INT},
    {"float", JF_FLOAT},
    {"abs", JF_ABS},
    {"round", JF_ROUND},
    {"default", JF_DEFAULT},
    {"d", JF_DEFAULT},
    {"tojson", JF_TOJSON},
    {"length", JF_LENGTH},
    {"count", JF_LENGTH},
    {"list", JF_LIST},
    {"first", JF_FIRST},
    {"last", JF_LAST},
    {"join", JF_JOIN},
    {"reverse", JF_REVERSE},
    {"sort", JF_SORT},
    {"unique", JF_UNIQUE},
    {"min", JF_MIN},
    {"max", JF_MAX},
    {"sum", JF_SUM},
    {"map", JF_MAP},
    {"select", JF_SELECT},
    {"reject", JF_REJECT},
    {"selectattr", JF_SELECTATTR},
    {"rejectattr", JF_REJECTATTR},
    {"dictsort", JF_DICTSORT},
    {"items", JF_ITEMS},
    {"batch", JF_BATCH},
    {"groupby", JF_GROUPBY},
    {"attr", JF_ATTR},
};

int jinja_filter_find(const char *name, size_t n) {
    int id = TPS_NAME_FIND(FILTER_NAMES, name, n, -1);
    if (id >= 0) return id;
    static const char *const jinja2_only[] = {"filesizeformat", "pprint",    "random", "slice",
                                              "striptags",      "urlencode", "urlize", "wordwrap",
                                              "xmlattr",        NULL};
    for (size_t i = 0; jinja2_only[i]; i++)
        if (tps_name_is(jinja2_only[i], name, n)) return -2;
    return -1;
}

static const tps_name_id TESTS[] = {
    {"defined", T_DEFINED},
    {"undefined", T_UNDEFINED},
    {"none", T_NONE},
    {"boolean", T_BOOLEAN},
    {"false", T_FALSE},
    {"true", T_TRUE},
    {"integer", T_INTEGER},
    {"float", T_FLOAT},
    {"number", T_NUMBER},
    {"string", T_STRING},
    {"mapping", T_MAPPING},
    {"iterable", T_ITERABLE},
    {"sequence", T_SEQUENCE},
    {"callable", T_CALLABLE},
    {"eq", T_EQ},
    {"equalto", T_EQ},
    {"==", T_EQ},
    {"ne", T_NE},
    {"!=", T_NE},
    {"lt", T_LT},
    {"lessthan", T_LT},
    {"<", T_LT},
    {"le", T_LE},
    {"<=", T_LE},
    {"gt", T_GT},
    {"greaterthan", T_GT},
    {">", T_GT},
    {"ge", T_GE},
    {">=", T_GE},
    {"in", T_IN},
    {"odd", T_ODD},
    {"even", T_EVEN},
    {"divisibleby", T_DIVISIBLEBY},
    {"sameas", T_SAMEAS},
    {"lower", T_LOWER},
    {"upper", T_UPPER},
    {"escaped", T_ESCAPED},
    {"filter", T_FILTER},
    {"test", T_TEST},
};

int jinja_test_find(const char *name, size_t n) {
    return TPS_NAME_FIND(TESTS, name, n, -1);
}

int jinja_global_find(const char *name, size_t n) {
    static const char *const names[G_COUNT] = {"range", "namespace", "dict", "raise_exception",
                                               "strftime_now"};
    for (int i = 0; i < G_COUNT; i++)
        if (tps_name_is(names[i], name, n)) return i;
    return G_NONE;
}
