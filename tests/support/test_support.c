/* Implementation of tests/support/test_support.h. */
#include "support/test_support.h"

#include "base/file_read.h"
#include "base/grow.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/llama_model.h"

char *shared_path(const char *rel) {
    size_t n = strlen(TPS_SHARED_DIR) + strlen(rel) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", TPS_SHARED_DIR, rel);
    return p;
}

bool shared_has(const char *rel) {
    char *p = shared_path(rel);
    struct stat st;
    bool ok = stat(p, &st) == 0;
    free(p);
    return ok;
}

char *read_file_all(const char *path, size_t *len) {
    char *buf;
    return tps_read_file(path, SIZE_MAX - 2, &buf, len) ? NULL : buf;
}

int run_tps(const char *args, bool merge_stderr, char **out) {
    size_t n = strlen(TPS_BIN) + strlen(args) + 32;
    char *cmd = malloc(n);
    snprintf(cmd, n, "'%s' %s%s", TPS_BIN, args, merge_stderr ? " 2>&1" : " 2>/dev/null");
    FILE *fp = popen(cmd, "r");
    free(cmd);
    if (!fp) return -1;
    size_t cap = 0, len = 0, k;
    char *buf = NULL;
    while (!TPS_GROW(buf, cap, len + 2, 4096) && (k = fread(buf + len, 1, cap - len - 1, fp)) > 0)
        len += k;
    if (!buf) {
        pclose(fp);
        return -1;
    }
    buf[len] = 0;
    int st = pclose(fp);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void expect_tps(const char *args, int status, const char *says) {
    char *out = NULL;
    int rc = run_tps(args, true, &out);
    cr_expect_eq(rc, status, "tps %s: exit %d, want %d: %s", args, rc, status, out ? out : "");
    if (says)
        cr_expect(out && strstr(out, says), "tps %s: no \"%s\" in: %s", args, says, out ? out : "");
    free(out);
}

void assert_tps_ok(const char *args) {
    char *out = NULL;
    int rc = run_tps(args, true, &out);
    cr_assert_eq(rc, 0, "tps %s: exit %d: %s", args, rc, out ? out : "");
    free(out);
}

model_shape model_shape_of(const llama_model *m) {
    model_shape sh = {.n_layers = m->cfg.n_layers,
                      .kv_dim = (double)m->cfg.n_kv_heads * m->cfg.head_dim,
                      .head = (double)m->w.output.rows * m->w.output.cols};
    for (uint32_t l = 0; l < m->cfg.n_layers; l++) {
        const llama_layer *L = &m->w.layers[l];
        const llama_mat *mats[] = {&L->wq,     &L->wk,   &L->wv,    &L->wo,
                                   &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
            sh.body += (double)mats[i]->rows * mats[i]->cols;
        sh.per_pos += 2.0 * L->wq.rows;
    }
    return sh;
}

model_shape model_shape_shared(const char *rel) {
    char *path = shared_path(rel);
    llama_model *m = NULL;
    tps_err err = {0};
    model_shape sh = {0};
    if (llama_model_load(&m, path, &err) == 0) {
        sh = model_shape_of(m);
        llama_model_free(m);
    }
    free(path);
    return sh;
}

char *test_temp_file(const char *text) {
    char *path = strdup("/tmp/tps-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

int test_run_capture(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

int test_validate_output(const char *python, const char *kind, const char *spec, const char *out,
                         char *why, size_t cap) {
    char *sp = test_temp_file(spec), *op = test_temp_file(out);
    size_t n =
        strlen(python) + strlen(TPS_SOURCE_DIR) + strlen(kind) + strlen(sp) + strlen(op) + 64;
    char *cmd = malloc(n);
    cr_assert_not_null(cmd);
    snprintf(cmd, n, "'%s' %s/tests/tools/validate_output.py %s %s %s 2>&1", python, TPS_SOURCE_DIR,
             kind, sp, op);
    int st = test_run_capture(cmd, why, cap);
    free(cmd);
    unlink(sp);
    unlink(op);
    free(sp);
    free(op);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *corpus_output(const char *template_file, const char *conversation) {
    json_error_t je;
    json_t *c = json_load_file(TPS_SOURCE_DIR "/tests/data/templates/corpus.json", 0, &je);
    cr_assert_not_null(c, "corpus.json: %s", je.text);
    size_t i;
    json_t *r;
    char *out = NULL;
    json_array_foreach(json_object_get(c, "renders"), i, r) {
        const char *o = json_string_value(json_object_get(r, "output"));
        if (o && !strcmp(json_string_value(json_object_get(r, "template")), template_file) &&
            !strcmp(json_string_value(json_object_get(r, "conversation")), conversation))
            out = strdup(o);
    }
    json_decref(c);
    cr_assert_not_null(out, "corpus.json has no output for %s / %s", template_file, conversation);
    return out;
}
