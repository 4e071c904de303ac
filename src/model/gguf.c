/* GGUF reader: validates a whole file up front, then serves borrowed views.
 *
 * Every read goes through a cursor that checks the remaining length first, and
 * every product of counts and sizes uses overflow-checked arithmetic, so a
 * truncated or hostile file yields an error naming the field and its byte
 * offset. It does not interpret any key (model/llama_config does that) and
 * never copies tensor data. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "base/compiler.h"

/* Nested arrays deeper than this are rejected: no real file nests at all,
 * and recursion must stay bounded on hostile input. */
#define GGUF_MAX_ARRAY_DEPTH 8

typedef struct cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
    tps_err *err;
} cursor;

const char *gguf_value_type_name(uint32_t type) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        [GGUF_TYPE_UINT8] = "u8",    [GGUF_TYPE_INT8] = "i8",    [GGUF_TYPE_UINT16] = "u16",
        [GGUF_TYPE_INT16] = "i16",   [GGUF_TYPE_UINT32] = "u32", [GGUF_TYPE_INT32] = "i32",
        [GGUF_TYPE_FLOAT32] = "f32", [GGUF_TYPE_BOOL] = "bool",  [GGUF_TYPE_STRING] = "string",
        [GGUF_TYPE_ARRAY] = "array", [GGUF_TYPE_UINT64] = "u64", [GGUF_TYPE_INT64] = "i64",
        [GGUF_TYPE_FLOAT64] = "f64",
    };
    return type < GGUF_TYPE_COUNT ? names[type] : "unknown";
}

bool gguf_str_eq(gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

static int need(cursor *c, uint64_t n, const char *what) {
    if (n > c->size - c->pos)
        return tps_fail(c->err, TPS_EINVAL,
                        "gguf: truncated file: %s at byte offset %zu needs %llu bytes, "
                        "only %zu remain",
                        what, c->pos, (unsigned long long)n, c->size - c->pos);
    return 0;
}

/* The next n bytes into v (little-endian, as the host). Inlined, so that
 * read_u32/read_u64 copy a constant size as they did when spelled out. */
ALWAYS_INLINE int read_bytes(cursor *c, void *v, size_t n, const char *what) {
    int rc = need(c, n, what);
    if (rc) return rc;
    memcpy(v, c->base + c->pos, n);
    c->pos += n;
    return 0;
}

static int read_u32(cursor *c, uint32_t *v, const char *what) {
    return read_bytes(c, v, 4, what);
}

static int read_u64(cursor *c, uint64_t *v, const char *what) {
    return read_bytes(c, v, 8, what);
}

static int read_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    size_t at = c->pos;
    int rc = read_u64(c, &len, what);
    if (rc) return rc;
    if (len > c->size - c->pos)
        return tps_fail(c->err, TPS_EINVAL,
                        "gguf: %s at byte offset %zu has length %llu, past the end of the "
                        "file (%zu bytes remain)",
                        what, at, (unsigned long long)len, c->size - c->pos);
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

static int read_value(cursor *c, uint32_t type, gguf_value *out, int depth, const char *what);

/* Reads the array body (element type, count, elements) after its type tag. */
static int read_array(cursor *c, gguf_value *out, int depth, const char *what) {
    size_t at = c->pos;
    uint32_t et;
    uint64_t n;
    int rc = read_u32(c, &et, what);
    if (!rc) rc = read_u64(c, &n, what);
    if (rc) return rc;
    if (et >= GGUF_TYPE_COUNT)
        return tps_fail(c->err, TPS_EINVAL,
                        "gguf: %s at byte offset %zu: unknown array element type %u", what, at, et);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return tps_fail(c->err, TPS_EINVAL,
                        "gguf: %s at byte offset %zu: arrays nested deeper than %d", what, at,
                        GGUF_MAX_ARRAY_DEPTH);
    out->type = GGUF_TYPE_ARRAY;
    out->arr.type = et;
    out->arr.n = n;
    out->arr.data = c->base + c->pos;
    size_t fixed = gguf_value_type_size(et);
    if (fixed) {
        uint64_t bytes;
        if (__builtin_mul_overflow(n, (uint64_t)fixed, &bytes) || bytes > c->size - c->pos)
            return tps_fail(c->err, TPS_EINVAL,
                            "gguf: %s at byte offset %zu: array of %llu %s elements does not "
                            "fit in the %zu bytes that remain",
                            what, at, (unsigned long long)n, gguf_value_type_name(et),
                            c->size - c->pos);
        c->pos += bytes;
    } else {
        /* Each string or array element takes at least 8 bytes: reject a
         * count that cannot fit before walking it. */
        if (n > (c->size - c->pos) / 8)
            return tps_fail(c->err, TPS_EINVAL,
                            "gguf: %s at byte offset %zu: array of %llu %s elements does not "
                            "fit in the %zu bytes that remain",
                            what, at, (unsigned long long)n, gguf_value_type_name(et),
                            c->size - c->pos);
        for (uint64_t i = 0; i < n; i++) {
            gguf_value elem;
            rc = read_value(c, et, &elem, depth + 1, what);
            if (rc) return rc;
        }
    }
    out->arr.bytes = (size_t)(c->base + c->pos - out->arr.data);
    return 0;
}

/* A fixed-size value from raw, its size bytes read into a zeroed uint64
 * (little-endian host): unsigned as read, signed sign-extended from its top
 * bit, floats widened to double. */
static void decode_fixed(gguf_value *out, uint64_t raw, size_t size) {
    const uint64_t sign = 1ull << (8 * size - 1);
    switch (out->type) {
    case GGUF_TYPE_BOOL:
        out->b = raw != 0;
        break;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
        out->i = (int64_t)((raw ^ sign) - sign);
        break;
    case GGUF_TYPE_FLOAT32: {
        float v;
        memcpy(&v, &raw, 4);
        out->f = v;
        break;
    }
    case GGUF_TYPE_FLOAT64:
        memcpy(&out->f, &raw, 8);
        break;
    default: /* UINT8/16/32/64 */
        out->u = raw;
        break;
    }
}

static int read_value(cursor *c, uint32_t type, gguf_value *out, int depth, const char *what) {
    memset(out, 0, sizeof *out);
    out->type = type;
    size_t fixed = gguf_value_type_size(type);
    if (fixed) {
        uint64_t raw = 0;
        int rc = read_bytes(c, &raw, fixed, what);
        if (!rc) decode_fixed(out, raw, fixed);
        return rc;
    }
    if (type == GGUF_TYPE_STRING) return read_str(c, &out->s, what);
    if (type == GGUF_TYPE_ARRAY) return read_array(c, out, depth, what);
    return tps_fail(c->err, TPS_EINVAL, "gguf: %s at byte offset %zu: unknown value type %u", what,
                    c->pos, type);
}

static bool str_eq(gguf_str a, gguf_str b) {
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* Magic, version and the two counts; allocates the key/value and tensor
 * tables once the counts are known to fit in the file. */
static int read_header(cursor *c, gguf_file *f, tps_err *err) {
    uint32_t magic;
    int rc = read_u32(c, &magic, "magic");
    if (rc) return rc;
    if (magic != GGUF_MAGIC)
        return tps_fail(err, TPS_EINVAL,
                        "gguf: not a GGUF file: magic at byte offset 0 is 0x%08x, expected "
                        "\"GGUF\"",
                        magic);
    if ((rc = read_u32(c, &f->version, "version"))) return rc;
    if (f->version == 1)
        return tps_fail(err, TPS_EUNSUP,
                        "gguf: version 1 files are not supported (re-convert with a current "
                        "llama.cpp); versions 2 and 3 are");
    if (f->version != 2 && f->version != 3)
        return tps_fail(
            err, TPS_EUNSUP, "gguf: version %u at byte offset 4 is not supported (2 and 3 are%s)",
            f->version, (f->version & 0xffff) == 0 ? "; this looks like a big-endian file" : "");
    if ((rc = read_u64(c, &f->n_tensors, "tensor count"))) return rc;
    if ((rc = read_u64(c, &f->n_kv, "metadata count"))) return rc;

    /* A key/value takes at least 8 (key length) + 4 (type) + 1 bytes, a
     * tensor info at least 8 + 4 + 8 + 4 + 8: counts beyond what the file
     * could hold are rejected before any allocation. */
    if (f->n_kv > (c->size - c->pos) / 13)
        return tps_fail(err, TPS_EINVAL,
                        "gguf: metadata count %llu at byte offset 16 cannot fit in a %zu-byte "
                        "file",
                        (unsigned long long)f->n_kv, f->size);
    if (f->n_tensors > (c->size - c->pos) / 32)
        return tps_fail(err, TPS_EINVAL,
                        "gguf: tensor count %llu at byte offset 8 cannot fit in a %zu-byte file",
                        (unsigned long long)f->n_tensors, f->size);
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return tps_fail(err, TPS_ENOMEM, "gguf: out of memory");
    return 0;
}

/* The metadata section: every key unique, every value of a known type. */
static int read_metadata(cursor *c, gguf_file *f, tps_err *err) {
    int rc;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        kv->offset = c->pos;
        if ((rc = read_str(c, &kv->key, "metadata key"))) return rc;
        for (uint64_t j = 0; j < i; j++)
            if (str_eq(f->kv[j].key, kv->key))
                return tps_fail(
                    err, TPS_EINVAL, "gguf: duplicate metadata key '%.*s' at byte offset %zu",
                    (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, kv->offset);
        uint32_t type;
        if ((rc = read_u32(c, &type, "metadata value type"))) return rc;
        if (type >= GGUF_TYPE_COUNT)
            return tps_fail(err, TPS_EINVAL,
                            "gguf: metadata key '%.*s' at byte offset %zu has unknown value "
                            "type %u",
                            (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, kv->offset,
                            type);
        if ((rc = read_value(c, type, &kv->val, 0, "metadata value"))) return rc;
    }
    return 0;
}

/* general.alignment, if present, must be a u32 power of two. */
static int read_alignment(gguf_file *f, tps_err *err) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find(f, "general.alignment");
    if (al) {
        if (al->val.type != GGUF_TYPE_UINT32 || al->val.u == 0 ||
            (al->val.u & (al->val.u - 1)) != 0)
            return tps_fail(err, TPS_EINVAL,
                            "gguf: general.alignment at byte offset %zu must be a u32 power of "
                            "two",
                            al->offset);
        f->alignment = (size_t)al->val.u;
    }
    return 0;
}

/* Element count and byte size of tensor t (whose info starts at byte `at`),
 * overflow-checked, with whole blocks per row and an aligned data offset. */
static int size_tensor(const gguf_file *f, gguf_tensor *t, size_t at, tps_err *err) {
    int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
    const ggml_type_info *ti = ggml_type_get(t->type);
    if (!ti)
        return tps_fail(err, TPS_EUNSUP,
                        "gguf: tensor '%.*s' at byte offset %zu has unknown type id %u", nl,
                        t->name.ptr, at, t->type);
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (__builtin_mul_overflow(n, t->ne[d], &n))
            return tps_fail(err, TPS_EINVAL,
                            "gguf: tensor '%.*s' at byte offset %zu: element count "
                            "overflows",
                            nl, t->name.ptr, at);
    t->n_elements = n;
    if (t->ne[0] % ti->block_size != 0)
        return tps_fail(err, TPS_EINVAL,
                        "gguf: tensor '%.*s' at byte offset %zu: row of %llu elements is "
                        "not a whole number of %s blocks (%zu)",
                        nl, t->name.ptr, at, (unsigned long long)t->ne[0], ti->name,
                        ti->block_size);
    uint64_t bytes;
    if (__builtin_mul_overflow(n / ti->block_size, (uint64_t)ti->type_size, &bytes))
        return tps_fail(err, TPS_EINVAL, "gguf: tensor '%.*s' at byte offset %zu: size overflows",
                        nl, t->name.ptr, at);
    t->nbytes = (size_t)bytes;
    if (t->offset % f->alignment != 0)
        return tps_fail(err, TPS_EINVAL,
                        "gguf: tensor '%.*s' at byte offset %zu: data offset %llu is not a "
                        "multiple of the alignment %zu",
                        nl, t->name.ptr, at, (unsigned long long)t->offset, f->alignment);
    return 0;
}

/* The info of tensor i: name (unique), dimensions, type, data offset. */
static int read_tensor_info(cursor *c, gguf_file *f, uint64_t i, tps_err *err) {
    gguf_tensor *t = &f->tensors[i];
    size_t at = c->pos;
    t->info_offset = at;
    int rc;
    if ((rc = read_str(c, &t->name, "tensor name"))) return rc;
    int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
    if ((rc = read_u32(c, &t->n_dims, "tensor dimension count"))) return rc;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return tps_fail(err, TPS_EINVAL,
                        "gguf: tensor '%.*s' at byte offset %zu has %u dimensions (1 to %d "
                        "allowed)",
                        nl, t->name.ptr, at, t->n_dims, GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if ((rc = read_u64(c, &t->ne[d], "tensor dimension"))) return rc;
    if ((rc = read_u32(c, &t->type, "tensor type"))) return rc;
    if ((rc = read_u64(c, &t->offset, "tensor data offset"))) return rc;
    for (uint64_t j = 0; j < i; j++)
        if (str_eq(f->tensors[j].name, t->name))
            return tps_fail(err, TPS_EINVAL,
                            "gguf: duplicate tensor name '%.*s' at byte offset %zu", nl,
                            t->name.ptr, at);
    return size_tensor(f, t, at, err);
}

/* The alignment a tensor's data needs: the kernels read it in place, a
 * float weight as floats, a block's fp16 scale as a u16. The default
 * general.alignment (32) gives it; a file that sets a smaller one may not
 * (a fuzzed file with alignment 1 put F32 data at an odd address). */
static size_t element_align(const ggml_type_info *ti) {
    return ti->block_size == 1 ? ti->type_size : 2;
}

/* The aligned data section after the infos at byte `end_of_infos`; every
 * tensor's data must lie inside the file, at an address its type can be
 * read from. */
static int locate_tensor_data(gguf_file *f, size_t end_of_infos, tps_err *err) {
    size_t data = end_of_infos + (f->alignment - end_of_infos % f->alignment) % f->alignment;
    if (data > f->size) {
        if (f->n_tensors > 0)
            return tps_fail(err, TPS_EINVAL,
                            "gguf: truncated file: tensor data section at byte offset %zu "
                            "starts past the end (%zu bytes)",
                            data, f->size);
        data = f->size;
    }
    f->data_offset = data;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t end;
        if (__builtin_add_overflow((uint64_t)data, t->offset, &end) ||
            __builtin_add_overflow(end, (uint64_t)t->nbytes, &end) || end > f->size)
            return tps_fail(err, TPS_EINVAL,
                            "gguf: truncated file: tensor '%.*s' data [%llu, +%zu) lies past "
                            "the end of the %zu-byte file",
                            (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr,
                            (unsigned long long)(data + t->offset), t->nbytes, f->size);
        const size_t need = element_align(ggml_type_get(t->type));
        if ((data + t->offset) % need != 0)
            return tps_fail(err, TPS_EINVAL,
                            "gguf: tensor '%.*s' data at byte offset %llu is not a multiple of "
                            "the %zu bytes its elements are read in (general.alignment %zu)",
                            (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr,
                            (unsigned long long)(data + t->offset), need, f->alignment);
        t->data = f->map + data + t->offset;
    }
    return 0;
}

static int parse(gguf_file *f, tps_err *err) {
    cursor c = {.base = f->map, .size = f->size, .pos = 0, .err = err};
    int rc;
    if ((rc = read_header(&c, f, err))) return rc;
    if ((rc = read_metadata(&c, f, err))) return rc;
    if ((rc = read_alignment(f, err))) return rc;
    f->tensor_info_offset = c.pos;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((rc = read_tensor_info(&c, f, i, err))) return rc;
    return locate_tensor_data(f, c.pos, err);
}

static int finish_open(gguf_file *f, gguf_file **out, tps_err *err) {
    int rc = parse(f, err);
    if (rc) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int gguf_open_memory(gguf_file **out, const void *buf, size_t size, tps_err *err) {
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) return tps_fail(err, TPS_ENOMEM, "gguf: out of memory");
    f->map = buf;
    f->size = size;
    return finish_open(f, out, err);
}

int gguf_open(gguf_file **out, const char *path, tps_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tps_fail(err, TPS_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tps_fail(err, TPS_EIO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return tps_fail(err, TPS_EINVAL, "gguf: '%s' is empty", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return tps_fail(err, TPS_EIO, "cannot map '%s': %s", path, strerror(errno));
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(map, (size_t)st.st_size);
        return tps_fail(err, TPS_ENOMEM, "gguf: out of memory");
    }
    f->map = map;
    f->size = (size_t)st.st_size;
    f->owns_map = true;
    return finish_open(f, out, err);
}

size_t gguf_release_pages(const gguf_file *f, const void *p, size_t n) {
    const uintptr_t lo = (uintptr_t)f->map, hi = lo + f->size;
    uintptr_t a = (uintptr_t)p, b = a + n;
    if (!f->owns_map || a < lo || b > hi || b < a) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    a = (a + page - 1) / page * page;
    b = b / page * page;
    if (b <= a || madvise((void *)a, b - a, MADV_DONTNEED) != 0) return 0;
    return b - a;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    free(f->tensors);
    free(f->kv);
    if (f->owns_map) munmap((void *)f->map, f->size);
    free(f);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static bool is_unsigned(uint32_t t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 ||
           t == GGUF_TYPE_UINT64;
}

static bool is_signed(uint32_t t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64;
}

static int value_u64(const gguf_value *v, uint64_t *out) {
    if (is_unsigned(v->type))
        *out = v->u;
    else if (is_signed(v->type) && v->i >= 0)
        *out = (uint64_t)v->i;
    else
        return TPS_EINVAL;
    return 0;
}

static int value_i64(const gguf_value *v, int64_t *out) {
    if (is_signed(v->type))
        *out = v->i;
    else if (is_unsigned(v->type) && v->u <= INT64_MAX)
        *out = (int64_t)v->u;
    else
        return TPS_EINVAL;
    return 0;
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out) {
    const gguf_kv *kv = gguf_find(f, key);
    return kv ? value_u64(&kv->val, out) : TPS_ENOENT;
}

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find(f, key);
    return kv ? value_i64(&kv->val, out) : TPS_ENOENT;
}

int gguf_get_f64(const gguf_file *f, const char *key, double *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return TPS_ENOENT;
    if (kv->val.type != GGUF_TYPE_FLOAT32 && kv->val.type != GGUF_TYPE_FLOAT64) return TPS_EINVAL;
    *out = kv->val.f;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return TPS_ENOENT;
    if (kv->val.type != GGUF_TYPE_BOOL) return TPS_EINVAL;
    *out = kv->val.b;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return TPS_ENOENT;
    if (kv->val.type != GGUF_TYPE_STRING) return TPS_EINVAL;
    *out = kv->val.s;
    return 0;
}

int gguf_get_array(const gguf_file *f, const char *key, uint32_t elem_type, gguf_value *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return TPS_ENOENT;
    if (kv->val.type != GGUF_TYPE_ARRAY) return TPS_EINVAL;
    if (elem_type != GGUF_TYPE_COUNT && kv->val.arr.type != elem_type) return TPS_EINVAL;
    *out = kv->val;
    return 0;
}

/* Arrays were validated at open, so walking them here cannot leave bounds;
 * the cursor still checks, for values built by hand. */
int gguf_array_elem(const gguf_value *arr, uint64_t i, gguf_value *out) {
    if (arr->type != GGUF_TYPE_ARRAY || i >= arr->arr.n) return TPS_ERANGE;
    cursor c = {.base = arr->arr.data, .size = arr->arr.bytes, .pos = 0, .err = NULL};
    size_t fixed = gguf_value_type_size(arr->arr.type);
    if (fixed)
        c.pos = (size_t)(i * fixed);
    else
        for (uint64_t k = 0; k < i; k++) {
            gguf_value skip;
            int rc = read_value(&c, arr->arr.type, &skip, 1, "array element");
            if (rc) return rc;
        }
    return read_value(&c, arr->arr.type, out, 1, "array element");
}

int gguf_array_i64(const gguf_value *arr, uint64_t i, int64_t *out) {
    gguf_value v;
    int rc = gguf_array_elem(arr, i, &v);
    return rc ? rc : value_i64(&v, out);
}

int gguf_array_f64(const gguf_value *arr, uint64_t i, double *out) {
    gguf_value v;
    int rc = gguf_array_elem(arr, i, &v);
    if (rc) return rc;
    if (v.type == GGUF_TYPE_FLOAT32 || v.type == GGUF_TYPE_FLOAT64)
        *out = v.f;
    else if (is_signed(v.type))
        *out = (double)v.i;
    else if (is_unsigned(v.type))
        *out = (double)v.u;
    else
        return TPS_EINVAL;
    return 0;
}

int gguf_array_strings(const gguf_value *arr, gguf_str *out) {
    if (arr->type != GGUF_TYPE_ARRAY || arr->arr.type != GGUF_TYPE_STRING) return TPS_EINVAL;
    cursor c = {.base = arr->arr.data, .size = arr->arr.bytes, .pos = 0, .err = NULL};
    for (uint64_t i = 0; i < arr->arr.n; i++) {
        int rc = read_str(&c, &out[i], "array string");
        if (rc) return rc;
    }
    return 0;
}
