/* GGUF reader (over mmap or a borrowed buffer) and writer (v3).
 *
 * The reader validates the whole header, metadata and tensor-info region at
 * open time with overflow-safe arithmetic against the file size, so every
 * pointer it hands out afterwards lies inside the map. All strings and tensor
 * data are borrowed from the map: valid until gguf_close, never NUL-terminated.
 * It knows nothing about Llama: model/llama_* reads the keys it needs. */
#ifndef TPS_GGUF_H
#define TPS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/ggml_type.h" /* tensor element types: ids, block sizes */

#define GGUF_MAGIC             0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS          4

typedef enum gguf_value_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_value_type;

/* A length-delimited string borrowed from the map. */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

bool gguf_str_eq(gguf_str s, const char *cstr);

typedef struct gguf_value {
    uint32_t type; /* gguf_value_type */
    union {
        uint64_t u; /* UINT8/16/32/64 */
        int64_t i;  /* INT8/16/32/64 */
        double f;   /* FLOAT32/64 */
        bool b;
        gguf_str s;
        struct {
            uint32_t type;       /* element type */
            uint64_t n;          /* element count */
            const uint8_t *data; /* first element's bytes (raw little-endian) */
            size_t bytes;        /* bytes of all elements */
        } arr;
    };
} gguf_value;

typedef struct gguf_kv {
    gguf_str key;
    gguf_value val;
    size_t offset; /* byte offset of the key in the file: for messages */
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* elements per dim, ne[0] fastest; unused dims are 1 */
    uint32_t type;              /* ggml_type */
    uint64_t offset;            /* relative to the data section */
    const void *data;           /* borrowed, inside the map */
    size_t nbytes;
    uint64_t n_elements;
    size_t info_offset; /* byte offset of its tensor info (name) in the file: for messages */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *map; /* whole file */
    size_t size;
    bool owns_map; /* mmapped by gguf_open (vs borrowed by gguf_open_memory) */
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    size_t alignment;
    size_t data_offset;        /* start of the tensor data section */
    size_t tensor_info_offset; /* start of the tensor info table: for messages */
} gguf_file;

/* Gives back the pages of the file mapping that lie wholly inside
 * [p, p + n): the process stops holding them (RSS falls), and a later read
 * faults them in again from the file, so nothing is lost. For data that
 * has been copied elsewhere (repacked weights). Does nothing for a file
 * opened from memory. Returns the bytes given back. */
size_t gguf_release_pages(const gguf_file *f, const void *p, size_t n);

/* Maps path read-only and validates it. On error *out is NULL and err says
 * which field at which byte offset is wrong. */
int gguf_open(gguf_file **out, const char *path, tps_err *err);
/* Same over a caller-owned buffer that must outlive the result. */
int gguf_open_memory(gguf_file **out, const void *buf, size_t size, tps_err *err);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters. Integers accept any integer type whose value fits (the spec
 * lets writers use u32, i32 or u64 for counts); floats accept f32/f64.
 * Return 0, TPS_ENOENT when absent, TPS_EINVAL on a type that does not fit. */
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f64(const gguf_file *f, const char *key, double *out);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Array value whose elements are elem_type (GGUF_TYPE_COUNT: any type). */
int gguf_get_array(const gguf_file *f, const char *key, uint32_t elem_type, gguf_value *out);

/* Element access on an array value. Numeric accessors convert like the
 * getters; strings come out borrowed. gguf_array_strings fills out[0..n) in
 * one pass (O(total bytes)). gguf_array_elem walks to element i (any type,
 * nested arrays included). */
int gguf_array_i64(const gguf_value *arr, uint64_t i, int64_t *out);
int gguf_array_f64(const gguf_value *arr, uint64_t i, double *out);
int gguf_array_strings(const gguf_value *arr, gguf_str *out);
int gguf_array_elem(const gguf_value *arr, uint64_t i, gguf_value *out);

const char *gguf_value_type_name(uint32_t type);
/* Bytes of one value of a fixed-size type; 0 for strings and arrays. */
size_t gguf_value_type_size(uint32_t type);

/* ---- writer ----------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

/* Produces nbytes of a tensor's data into dst when the file is written, so a
 * multi-GB model never sits in memory whole. Returns 0 or a TPS_E* code. */
typedef int (*gguf_fill_fn)(void *ctx, void *dst, size_t nbytes, tps_err *err);

gguf_writer *gguf_writer_create(void);
void gguf_writer_free(gguf_writer *w);

/* Keys are copied. Setting a key twice replaces the value. */
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Numeric array of elem_type; data holds n raw elements (copied). */
int gguf_writer_set_array(gguf_writer *w, const char *key, uint32_t elem_type, const void *data,
                          uint64_t n);
/* String array: strs[i] of lens[i] bytes (copied). */
int gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *strs,
                              const size_t *lens, uint64_t n);
/* Copies a key/value read from another file, any type (nested arrays too). */
int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);

/* Tensor with data borrowed until the write (data) or produced then (fill). */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *ne, const void *data);
int gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne, gguf_fill_fn fill, void *ctx);

/* Bytes a tensor of this type and shape takes; 0 if the shape does not
 * split into whole blocks or overflows. */
size_t ggml_tensor_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *ne);

/* Optional progress callback: called after each tensor is written. */
typedef void (*gguf_progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);
void gguf_writer_set_progress(gguf_writer *w, gguf_progress_fn fn, void *ctx);

int gguf_writer_write_file(gguf_writer *w, const char *path, tps_err *err);
/* Writes to a malloc'ed buffer the caller frees. */
int gguf_writer_write_mem(gguf_writer *w, uint8_t **buf, size_t *size, tps_err *err);

#endif
