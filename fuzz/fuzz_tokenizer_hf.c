/* libFuzzer harness for the Hugging Face tokenizer.json loader
 * (model/tokenizer_hf.h): any bytes, written to a file as `tps bench
 * --tokenizer FILE` would read one, must load or fail with a message that
 * names the file; a file that loads must encode and decode a fixed text
 * without reading out of bounds, and decode back to text. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/tokenizer.h"
#include "model/tokenizer_hf.h"

static const char TEXT[] =
    "Hello, world! 123 <|im_start|>user\n  caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("tokenizer.json", 0);
    if (fd < 0) return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tokenizer *t = NULL;
    char *tmpl = NULL;
    tps_err e;
    if (tokenizer_load_hf(&t, path, &tmpl, &e) == TPS_OK) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode_alloc(t, TEXT, sizeof TEXT - 1,
                                   TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &ids, &n,
                                   &e) == TPS_OK) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || (uint32_t)ids[i] >= tokenizer_n_vocab(t)) abort();
            char *back = NULL;
            size_t len = 0;
            if (tokenizer_decode_alloc(t, ids, n, TOK_DECODE_RENDER_SPECIAL, &back, &len, &e) ==
                    TPS_OK &&
                strlen(back) > len)
                abort(); /* the decoded length is what was written */
            free(back);
            free(ids);
        }
        free(tmpl);
        tokenizer_free(t);
    } else if (!e.msg[0]) {
        abort(); /* every failure says why */
    }
    close(fd);
    return 0;
}
