/* Incremental SSE parser (sse_read.h). Bytes are copied once into the line buffer,
 * data fields once more into the event buffer. Not here: JSON, timing. */
#include "bench/client/sse_read.h"

#include "base/grow.h"

#include <stdlib.h>
#include <string.h>

int sse_reader_init(sse_reader *p, size_t max_bytes, tps_err *e) {
    memset(p, 0, sizeof *p);
    p->max_bytes = max_bytes ? max_bytes : (1u << 20);
    p->line_cap = p->data_cap = 1024;
    p->line = malloc(p->line_cap);
    p->data = malloc(p->data_cap);
    if (!p->line || !p->data) {
        sse_reader_free(p);
        return tps_fail(e, TPS_ENOMEM, "cannot allocate SSE buffers");
    }
    return TPS_OK;
}

void sse_reader_free(sse_reader *p) {
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
}

void sse_reader_reset(sse_reader *p) {
    p->line_len = p->data_len = 0;
    p->event[0] = 0;
    p->has_data = p->skip_lf = false;
}

bool sse_reader_pending(const sse_reader *p) {
    return p->line_len > 0 || p->has_data;
}

/* Makes room for `need` bytes plus a NUL in *buf. */
static int reserve(char **buf, size_t *cap, size_t need, size_t max, tps_err *e) {
    if (need + 1 <= *cap) return TPS_OK;
    if (need > max) return tps_fail(e, TPS_ERANGE, "an SSE event is larger than %zu bytes", max);
    if (tps_grow(buf, cap, need + 1, 1, 1024))
        return tps_fail(e, TPS_ENOMEM, "cannot grow an SSE buffer to %zu bytes", need + 1);
    return TPS_OK;
}

/* One complete line (without its end). */
static int process_line(sse_reader *p, sse_read_cb cb, void *ctx, tps_err *e) {
    const char *l = p->line;
    size_t n = p->line_len;
    if (n == 0) { /* blank line: dispatch */
        int rc = 0;
        if (p->has_data) {
            p->data[p->data_len] = 0;
            sse_read_event ev = {.data = p->data, .data_len = p->data_len, .event = p->event};
            p->events++;
            rc = cb(ctx, &ev);
        }
        p->data_len = 0;
        p->has_data = false;
        p->event[0] = 0;
        return rc;
    }
    if (l[0] == ':') {
        p->comments++;
        return 0;
    }
    const char *colon = memchr(l, ':', n);
    size_t flen = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vlen = (size_t)(l + n - v);
    if (vlen && *v == ' ') v++, vlen--;
    if (flen == 4 && !memcmp(l, "data", 4)) {
        size_t need = p->data_len + (p->has_data ? 1 : 0) + vlen;
        int rc = reserve(&p->data, &p->data_cap, need, p->max_bytes, e);
        if (rc) return rc;
        if (p->has_data) p->data[p->data_len++] = '\n';
        memcpy(p->data + p->data_len, v, vlen);
        p->data_len += vlen;
        p->has_data = true;
    } else if (flen == 5 && !memcmp(l, "event", 5)) {
        size_t k = vlen < sizeof p->event - 1 ? vlen : sizeof p->event - 1;
        memcpy(p->event, v, k);
        p->event[k] = 0;
    } /* id, retry and unknown fields: ignored */
    return 0;
}

int sse_reader_feed(sse_reader *p, const char *buf, size_t n, sse_read_cb cb, void *ctx,
                    tps_err *e) {
    size_t i = 0;
    while (i < n) {
        if (p->skip_lf) {
            p->skip_lf = false;
            if (buf[i] == '\n') {
                i++;
                continue;
            }
        }
        /* find the end of this line in the buffer */
        size_t j = i;
        while (j < n && buf[j] != '\n' && buf[j] != '\r')
            j++;
        size_t k = j - i;
        int rc = reserve(&p->line, &p->line_cap, p->line_len + k, p->max_bytes, e);
        if (rc) return rc;
        memcpy(p->line + p->line_len, buf + i, k);
        p->line_len += k;
        if (j == n) break; /* line continues in the next read */
        p->skip_lf = buf[j] == '\r';
        i = j + 1;
        rc = process_line(p, cb, ctx, e);
        p->line_len = 0;
        if (rc) return rc;
    }
    return 0;
}
