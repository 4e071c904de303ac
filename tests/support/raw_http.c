/* Raw HTTP test client (raw_http.h). */
#include "support/raw_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t raw_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int raw_listen(int flags, int backlog, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, backlog) ||
        getsockname(fd, (struct sockaddr *)&a, &al)) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int raw_connect(int port, int from) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (from > 0) {
        struct sockaddr_in me = {.sin_family = AF_INET};
        me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)from);
        if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0) {
            close(fd);
            return -1;
        }
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool raw_send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

size_t raw_read_until_close(int fd, char *out, size_t cap, int timeout_ms, bool *closed) {
    size_t len = 0;
    uint64_t end = raw_now_ms() + (uint64_t)timeout_ms;
    *closed = false;
    while (len + 1 < cap) {
        uint64_t t = raw_now_ms();
        if (t >= end) break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)(end - t)) <= 0) break;
        ssize_t k = recv(fd, out + len, cap - 1 - len, 0);
        if (k <= 0) {
            *closed = true;
            break;
        }
        len += (size_t)k;
    }
    out[len] = 0;
    return len;
}

int raw_status_of(const char *resp) {
    if (strncmp(resp, "HTTP/1.1 ", 9) && strncmp(resp, "HTTP/1.0 ", 9)) return -1;
    return atoi(resp + 9);
}

int raw_exchange(int port, int from, const char *bytes, size_t len, int timeout_ms, char *out,
                 size_t cap, bool *closed) {
    bool c = false;
    out[0] = 0;
    int fd = raw_connect(port, from);
    if (fd < 0) return -2;
    if (raw_send_all(fd, bytes, len)) raw_read_until_close(fd, out, cap, timeout_ms, &c);
    close(fd);
    if (closed) *closed = c;
    return raw_status_of(out);
}

char *raw_request(const char *method, const char *path, const char *body, const char *extra) {
    size_t bl = body ? strlen(body) : 0;
    size_t n = bl + strlen(path) + (extra ? strlen(extra) : 0) + 256;
    char *r = malloc(n);
    snprintf(r, n,
             "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             method, path, extra ? extra : "", bl, body ? body : "");
    return r;
}

double raw_metric(int port, const char *name) {
    static const char req[] =
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    const size_t cap = 1 << 20;
    char *page = malloc(cap);
    double v = -1;
    if (raw_exchange(port, 0, req, sizeof req - 1, 30000, page, cap, NULL) == 200) {
        size_t nl = strlen(name);
        for (const char *p = strstr(page, name); p; p = strstr(p + 1, name)) {
            const char *line = p;
            while (line > page && line[-1] != '\n')
                line--;
            if (line[0] != '#' && p[nl] == ' ') {
                v = strtod(p + nl + 1, NULL);
                break;
            }
        }
    }
    free(page);
    return v;
}

int raw_call(int port, const char *method, const char *path, const char *body, const char *extra,
             char **out) {
    char *req = raw_request(method, path, body, extra);
    const size_t cap = 1 << 20;
    char *buf = malloc(cap);
    int st = raw_exchange(port, 0, req, strlen(req), 30000, buf, cap, NULL);
    free(req);
    if (out)
        *out = buf;
    else
        free(buf);
    return st < 0 ? -1 : st;
}
