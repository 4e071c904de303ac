/* Opens a GGUF file and binds it as a Llama model; undoes partial work on
 * any error. */
#include <stdlib.h>
#include <sys/resource.h>

#include "base/clock.h"
#include "model/llama_model.h"

int llama_model_load(llama_model **out, const char *path, tps_err *err) {
    const llama_load_opts defaults = {0};
    return llama_model_load_opts(out, path, &defaults, err);
}

int llama_model_load_opts(llama_model **out, const char *path, const llama_load_opts *opts,
                          tps_err *err) {
    *out = NULL;
    const uint64_t t0 = tps_now_ns();
    llama_model *m = calloc(1, sizeof *m);
    if (!m) return tps_fail(err, TPS_ENOMEM, "model: out of memory");
    int rc = gguf_open(&m->file, path, err);
    if (rc) goto fail;
    if ((rc = llama_config_read(&m->cfg, m->file, err))) goto fail;
    if ((rc = llama_weights_bind(&m->w, &m->cfg, m->file, err))) goto fail;
    /* the load faults the originals in to copy them: each one's pages are
     * given back as soon as it is copied, or they would stay resident
     * beside their copies (the file's size twice at the peak) */
    if (!opts->no_repack && (rc = llama_weights_repack_file(&m->w, &m->cfg, m->file, err))) {
        llama_weights_free(&m->w);
        goto fail;
    }
    m->load_ns = tps_now_ns() - t0;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) m->load_peak_rss = (size_t)ru.ru_maxrss * 1024;
    *out = m;
    return 0;
fail:
    gguf_close(m->file);
    free(m);
    return rc;
}

void llama_model_free(llama_model *m) {
    if (!m) return;
    llama_weights_free(&m->w);
    gguf_close(m->file);
    free(m);
}
