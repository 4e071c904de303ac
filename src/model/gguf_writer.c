/* GGUF v3 writer: collects metadata and tensor descriptions, then streams a
 * file (or a memory buffer) in one pass. Tensor data is borrowed or produced
 * by a callback at write time, so writing a multi-GB model holds one tensor
 * in memory at most. It validates shapes against block sizes; it does not
 * know what any key means. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "base/file_write.h"
#include "base/grow.h"

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *payload; /* the value exactly as it is serialised after the type tag */
    size_t payload_len;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    size_t nbytes;
    const void *data;
    gguf_fill_fn fill;
    void *fill_ctx;
} wtensor;

struct gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    gguf_progress_fn progress;
    void *progress_ctx;
};

gguf_writer *gguf_writer_create(void) {
    return calloc(1, sizeof(gguf_writer));
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].payload);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

void gguf_writer_set_progress(gguf_writer *w, gguf_progress_fn fn, void *ctx) {
    w->progress = fn;
    w->progress_ctx = ctx;
}

/* Takes ownership of payload (also on failure). */
static int set_kv(gguf_writer *w, const char *key, uint32_t type, uint8_t *payload, size_t len) {
    if (!payload && len) return TPS_ENOMEM;
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].payload);
            w->kv[i].type = type;
            w->kv[i].payload = payload;
            w->kv[i].payload_len = len;
            return 0;
        }
    if (TPS_GROW(w->kv, w->cap_kv, w->n_kv + 1, 32)) {
        free(payload);
        return TPS_ENOMEM;
    }
    char *k = strdup(key);
    if (!k) {
        free(payload);
        return TPS_ENOMEM;
    }
    w->kv[w->n_kv++] = (wkv){.key = k, .type = type, .payload = payload, .payload_len = len};
    return 0;
}

static int set_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v, size_t n) {
    uint8_t *p = malloc(n);
    if (p) memcpy(p, v, n);
    return set_kv(w, key, type, p, n);
}

int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT32, &v, 4);
}
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT32, &v, 4);
}
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT64, &v, 8);
}
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, GGUF_TYPE_FLOAT32, &v, 4);
}
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, GGUF_TYPE_BOOL, &b, 1);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    uint64_t n = strlen(v);
    uint8_t *p = malloc(8 + n);
    if (p) {
        memcpy(p, &n, 8);
        memcpy(p + 8, v, n);
    }
    return set_kv(w, key, GGUF_TYPE_STRING, p, 8 + n);
}

int gguf_writer_set_array(gguf_writer *w, const char *key, uint32_t elem_type, const void *data,
                          uint64_t n) {
    size_t es = gguf_value_type_size(elem_type);
    if (!es) return TPS_EINVAL;
    size_t len = 12 + (size_t)n * es;
    uint8_t *p = malloc(len);
    if (p) {
        memcpy(p, &elem_type, 4);
        memcpy(p + 4, &n, 8);
        if (n) memcpy(p + 12, data, (size_t)n * es);
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, p, len);
}

int gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *strs,
                              const size_t *lens, uint64_t n) {
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++)
        len += 8 + lens[i];
    uint8_t *p = malloc(len);
    if (p) {
        uint32_t et = GGUF_TYPE_STRING;
        memcpy(p, &et, 4);
        memcpy(p + 4, &n, 8);
        size_t at = 12;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t l = lens[i];
            memcpy(p + at, &l, 8);
            memcpy(p + at + 8, strs[i], lens[i]);
            at += 8 + lens[i];
        }
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, p, len);
}

int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    char key[1024];
    if (kv->key.len >= sizeof key) return TPS_ERANGE;
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = 0;
    const gguf_value *v = &kv->val;
    switch (v->type) {
    case GGUF_TYPE_STRING: {
        uint64_t n = v->s.len;
        uint8_t *p = malloc(8 + n);
        if (p) {
            memcpy(p, &n, 8);
            memcpy(p + 8, v->s.ptr, n);
        }
        return set_kv(w, key, GGUF_TYPE_STRING, p, 8 + n);
    }
    case GGUF_TYPE_ARRAY: {
        /* The elements are contiguous in the source file, nested ones too. */
        size_t len = 12 + v->arr.bytes;
        uint8_t *p = malloc(len);
        if (p) {
            memcpy(p, &v->arr.type, 4);
            memcpy(p + 4, &v->arr.n, 8);
            memcpy(p + 12, v->arr.data, v->arr.bytes);
        }
        return set_kv(w, key, GGUF_TYPE_ARRAY, p, len);
    }
    case GGUF_TYPE_FLOAT32: {
        float f = (float)v->f;
        return set_scalar(w, key, v->type, &f, 4);
    }
    case GGUF_TYPE_FLOAT64:
        return set_scalar(w, key, v->type, &v->f, 8);
    case GGUF_TYPE_BOOL:
        return gguf_writer_set_bool(w, key, v->b);
    default: {
        size_t es = gguf_value_type_size(v->type);
        if (!es) return TPS_EINVAL;
        /* Little-endian: the low bytes of the widened value are the value. */
        uint64_t raw = (v->type == GGUF_TYPE_INT8 || v->type == GGUF_TYPE_INT16 ||
                        v->type == GGUF_TYPE_INT32 || v->type == GGUF_TYPE_INT64)
                           ? (uint64_t)v->i
                           : v->u;
        return set_scalar(w, key, v->type, &raw, es);
    }
    }
}

static int add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                      const uint64_t *ne, const void *data, gguf_fill_fn fill, void *ctx) {
    size_t nbytes = ggml_tensor_nbytes(type, n_dims, ne);
    if (!nbytes) return TPS_EINVAL;
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return TPS_EINVAL;
    if (TPS_GROW(w->t, w->cap_t, w->n_t + 1, 64)) return TPS_ENOMEM;
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return TPS_ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    t->data = data;
    t->fill = fill;
    t->fill_ctx = ctx;
    w->n_t++;
    return 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *ne, const void *data) {
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

int gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne, gguf_fill_fn fill, void *ctx) {
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, ctx);
}

static size_t pad_to(size_t x, size_t a) {
    return (a - x % a) % a;
}

static int put(FILE *fp, const void *p, size_t n, tps_err *err) {
    if (n && fwrite(p, 1, n, fp) != n)
        return tps_fail(err, TPS_EIO, "gguf: write failed: %s", strerror(errno));
    return 0;
}

static int put_zeros(FILE *fp, size_t n, tps_err *err) {
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        int rc = put(fp, zeros, k, err);
        if (rc) return rc;
        n -= k;
    }
    return 0;
}

static int write_stream(gguf_writer *w, FILE *fp, tps_err *err) {
    size_t alignment = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, "general.alignment") && w->kv[i].type == GGUF_TYPE_UINT32) {
            uint32_t a;
            memcpy(&a, w->kv[i].payload, 4);
            if (a == 0 || (a & (a - 1)))
                return tps_fail(err, TPS_EINVAL, "gguf: general.alignment must be a power of two");
            alignment = a;
        }
    uint32_t magic = GGUF_MAGIC, version = 3;
    uint64_t n_t = w->n_t, n_kv = w->n_kv;
    size_t pos = 0;
    int rc;
#define PUT(p, n)                                                                                  \
    do {                                                                                           \
        if ((rc = put(fp, (p), (n), err))) return rc;                                              \
        pos += (n);                                                                                \
    } while (0)
    PUT(&magic, 4);
    PUT(&version, 4);
    PUT(&n_t, 8);
    PUT(&n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        uint64_t kl = strlen(w->kv[i].key);
        PUT(&kl, 8);
        PUT(w->kv[i].key, kl);
        PUT(&w->kv[i].type, 4);
        PUT(w->kv[i].payload, w->kv[i].payload_len);
    }
    uint64_t offset = 0, total = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t nl = strlen(t->name);
        PUT(&nl, 8);
        PUT(t->name, nl);
        PUT(&t->n_dims, 4);
        PUT(t->ne, 8 * (size_t)t->n_dims);
        PUT(&t->type, 4);
        PUT(&offset, 8);
        offset += t->nbytes + pad_to(t->nbytes, alignment);
        total += t->nbytes;
    }
    size_t pad = pad_to(pos, alignment);
    if ((rc = put_zeros(fp, pad, err))) return rc;
    uint64_t done = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (t->fill) {
            void *buf = malloc(t->nbytes);
            if (!buf)
                return tps_fail(err, TPS_ENOMEM, "gguf: out of memory for tensor '%s' (%zu bytes)",
                                t->name, t->nbytes);
            rc = t->fill(t->fill_ctx, buf, t->nbytes, err);
            if (!rc) rc = put(fp, buf, t->nbytes, err);
            free(buf);
            if (rc) return rc;
        } else if ((rc = put(fp, t->data, t->nbytes, err))) {
            return rc;
        }
        if ((rc = put_zeros(fp, pad_to(t->nbytes, alignment), err))) return rc;
        done += t->nbytes;
        if (w->progress) w->progress(w->progress_ctx, done, total);
    }
#undef PUT
    return 0;
}

/* Through file_out (base/file_write.h): a failed write removes only the
 * temporary file, never the path (issue 48: a device node there was
 * deleted); a device or fifo is written in place. */
int gguf_writer_write_file(gguf_writer *w, const char *path, tps_err *err) {
    file_out out;
    int rc = file_out_open(&out, path, err);
    if (rc) return rc;
    tps_err we = {{0}};
    rc = write_stream(w, out.f, &we);
    if (rc) {
        file_out_abort(&out);
        return tps_fail(err, rc, "cannot write '%s': %s", path, we.msg);
    }
    return file_out_close(&out, err);
}

int gguf_writer_write_mem(gguf_writer *w, uint8_t **buf, size_t *size, tps_err *err) {
    char *p = NULL;
    size_t n = 0;
    FILE *fp = open_memstream(&p, &n);
    if (!fp) return tps_fail(err, TPS_ENOMEM, "gguf: out of memory");
    int rc = write_stream(w, fp, err);
    fclose(fp);
    if (rc) {
        free(p);
        return rc;
    }
    *buf = (uint8_t *)p;
    *size = n;
    return 0;
}
