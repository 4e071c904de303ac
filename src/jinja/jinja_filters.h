/* What the two filter files share: the filter ids (the names are in
 * jinja_names.c, the table of functions in jinja_filters_seq.c) and the
 * filters on single values that jinja_filters.c defines. */
#ifndef TPS_JINJA_FILTERS_H
#define TPS_JINJA_FILTERS_H

#include "jinja/jinja_internal.h"

enum jfilter_id {
    JF_TRIM,
    JF_LOWER,
    JF_UPPER,
    JF_TITLE,
    JF_CAPITALIZE,
    JF_REPLACE,
    JF_INDENT,
    JF_CENTER,
    JF_TRUNCATE,
    JF_WORDCOUNT,
    JF_ESCAPE,
    JF_FORCEESCAPE,
    JF_STRING,
    JF_SAFE,
    JF_FORMAT,
    JF_INT,
    JF_FLOAT,
    JF_ABS,
    JF_ROUND,
    JF_DEFAULT,
    JF_TOJSON,
    JF_LENGTH,
    JF_LIST,
    JF_FIRST,
    JF_LAST,
    JF_JOIN,
    JF_REVERSE,
    JF_SORT,
    JF_UNIQUE,
    JF_MIN,
    JF_MAX,
    JF_SUM,
    JF_MAP,
    JF_SELECT,
    JF_REJECT,
    JF_SELECTATTR,
    JF_REJECTATTR,
    JF_DICTSORT,
    JF_ITEMS,
    JF_BATCH,
    JF_GROUPBY,
    JF_ATTR,
    JF_COUNT
};

jinja_val jf_trim(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_lower(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_upper(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_title(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_capitalize(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_replace(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_indent(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_center(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_truncate(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_wordcount(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_escape(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_forceescape(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_string(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_safe(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_format(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_int(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_float(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_abs(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_round(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_default(jctx *c, jinja_val in, const jargs *a);
jinja_val jf_tojson(jctx *c, jinja_val in, const jargs *a);

#endif
