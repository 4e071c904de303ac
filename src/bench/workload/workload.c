/* A workload built and freed (workload.h): its kind and the rules on its
 * options alone, the tokenizer loaded, the common body fields set, then the
 * synthetic or the dataset builder; the endpoint
 * paths; a dataset's format from its first bytes. Where each workload shape
 * lives: workload_internal.h. Not here: sending, timing. */
#include "bench/workload/workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/dataset.h" /* dataset_detect: --dataset's format */
#include "bench/workload/workload_internal.h"
#include "model/tokenizer.h" /* tokenizer_free */

/* ---- the kind and its rules ------------------------------------------------------- */

workload_kind workload_kind_of(const workload_opts *o) {
    if (o->dataset) return o->turns ? WL_KIND_DATASET_TURNS : WL_KIND_DATASET;
    if (o->turns) return WL_KIND_TURNS;
    return o->prefix_len ? WL_KIND_PREFIX : WL_KIND_SYNTHETIC;
}

const char *workload_kind_name(workload_kind k) {
    static const char *const NAMES[] = {
        [WL_KIND_SYNTHETIC] = "synthetic",
        [WL_KIND_PREFIX] = "shared-prefix",
        [WL_KIND_TURNS] = "multi-turn",
        [WL_KIND_DATASET] = "dataset",
        [WL_KIND_DATASET_TURNS] = "dataset-conversations",
    };
    return (unsigned)k < sizeof NAMES / sizeof NAMES[0] ? NAMES[k] : "?";
}

bool workload_kind_turns(workload_kind k) {
    return k == WL_KIND_TURNS || k == WL_KIND_DATASET_TURNS;
}

int workload_opts_check(const workload_opts *o, tps_err *e) {
    if (o->dataset && o->prefix_len)
        return tps_fail(e, TPS_EINVAL,
                        "--prefix-len with --dataset: shared prefixes are a synthetic workload; "
                        "drop one");
    return TPS_OK;
}

/* ---- create / free ----------------------------------------------------------------- */

int workload_build(workload *w, const workload_opts *o, tps_err *e) {
    memset(w, 0, sizeof *w);
    int rc = workload_opts_check(o, e);
    if (rc) return rc;
    if (o->tokenizer_path && (rc = wl_load_tokenizer(w, o->tokenizer_path, e))) return rc;
    w->endpoint = o->endpoint;
    /* synthetic prompts ask for all max_tokens by default; datasets keep EOS,
     * and so do the Responses and Messages APIs, which have no such field
     * (--ignore-eos sends it to a server known to take it) */
    const bool oai = o->endpoint == BENCH_EP_CHAT || o->endpoint == BENCH_EP_COMPLETIONS;
    w->common = wl_body_common(o, o->dataset || !oai ? o->ignore_eos == 1 : o->ignore_eos != 0);
    if (!w->common)
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    else
        rc = o->dataset ? wl_build_dataset(w, o, e) : wl_build_synthetic(w, o, e);
    if (!rc && o->endpoint == BENCH_EP_EMBEDDINGS) rc = wl_batch_inputs(w, o->batch_size, e);
    if (rc) workload_free(w);
    return rc;
}

void workload_free(workload *w) {
    for (size_t i = 0; i < w->n; i++) {
        free(w->items[i].body);
        free(w->items[i].text);
    }
    free(w->items);
    for (size_t k = 0; k < w->n_prefixes; k++)
        free(w->prefixes[k]);
    free(w->prefixes);
    json_decref(w->common);
    wl_chat_free(w->chat);
    tokenizer_free(w->tok);
    memset(w, 0, sizeof *w);
}

const char *workload_dataset_format(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    enum { HEAD = 1 << 16 }; /* enough for a trace's first line */
    char *buf = malloc(HEAD);
    size_t len = buf ? fread(buf, 1, HEAD, fp) : 0;
    fclose(fp);
    const char *f = buf ? dataset_format_name(dataset_detect(buf, len)) : NULL;
    free(buf);
    return f;
}
