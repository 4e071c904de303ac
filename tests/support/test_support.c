/* Implementation of tests/support/test_support.h. */
#include "support/test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

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
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf) {
        buf[n] = 0;
        if (len) *len = (size_t)n;
    }
    return buf;
}

int run_tps(const char *args, bool merge_stderr, char **out) {
    size_t n = strlen(TPS_BIN) + strlen(args) + 32;
    char *cmd = malloc(n);
    snprintf(cmd, n, "'%s' %s%s", TPS_BIN, args, merge_stderr ? " 2>&1" : " 2>/dev/null");
    FILE *fp = popen(cmd, "r");
    free(cmd);
    if (!fp) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
        len += k;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    int st = pclose(fp);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
