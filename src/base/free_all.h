/* Freeing the many heap arrays an object owns in one call: the destructors
 * of the prefix cache, the KV cache, the tokenizer and their kin each own
 * five to fifteen arrays, and spelled free() once a line for every one.
 *
 *     TPS_FREE_ALL(t->nodes, t->ids, t->blob, t);
 *
 * frees them left to right (NULL is fine, as for free()); list the object
 * itself last. Not here: objects with a destructor of their own (call it
 * first), const pointers, anything that must be freed in a set order
 * between other calls. */
#ifndef TPS_BASE_FREE_ALL_H
#define TPS_BASE_FREE_ALL_H

#include <stddef.h>

/* free(ptrs[i]) for i in 0..n, in order. */
void tps_free_all(void *const *ptrs, size_t n);

#define TPS_FREE_ALL(...)                                                                          \
    tps_free_all((void *const[]){__VA_ARGS__},                                                     \
                 sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

#endif
