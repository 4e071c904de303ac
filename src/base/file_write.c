/* Writing an output file safely (file_write.h): a temporary file renamed
 * over a regular file, in place for anything else, every step checked. */
#include "base/file_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether path is to be replaced by a rename: a regular file (not a link
 * to one), or nothing yet. Anything else is written in place. */
static bool replace_by_rename(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT;
    return S_ISREG(st.st_mode);
}

/* A new temporary file beside path (path.tmp.PID.K), its mode what fopen
 * would give (0666 less the umask); -1 when none can be made. */
static int open_tmp(const char *path, char **tmp_out) {
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) return -1;
    for (unsigned k = 0; k < 16; k++) {
        snprintf(tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(), k);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp_out = tmp;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    free(tmp);
    return -1;
}

int file_out_open(file_out *o, const char *path, tps_err *err) {
    memset(o, 0, sizeof *o);
    if (!(o->path = strdup(path))) return tps_fail(err, TPS_ENOMEM, "out of memory");
    int fd = -1;
    if (replace_by_rename(path)) fd = open_tmp(path, &o->tmp);
    /* in place: not a regular file, or no temporary file can be made
     * beside it (a directory we may not write) */
    if (fd < 0) fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        if (fd >= 0) close(fd);
        file_out_abort(o);
        return tps_fail(err, TPS_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    return 0;
}

/* The reason the stream failed: the flush's errno, or EIO when an earlier
 * write failed and the flush did not say why. */
static int flush_error(FILE *f) {
    errno = 0;
    int rc = fflush(f);
    int e = errno;
    if (rc == 0 && !ferror(f)) return 0;
    return e ? e : EIO;
}

int file_out_close(file_out *o, tps_err *err) {
    if (!o->f) {
        file_out_abort(o);
        return tps_fail(err, TPS_EIO, "cannot write: the file is not open");
    }
    int e = flush_error(o->f);
    if (!e && o->tmp && fsync(fileno(o->f)) != 0 && errno != EINVAL) e = errno;
    if (fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
    o->f = NULL;
    if (!e && o->tmp && rename(o->tmp, o->path) != 0) e = errno;
    if (e) {
        char path[1024];
        snprintf(path, sizeof path, "%s", o->path);
        file_out_abort(o);
        return tps_fail(err, TPS_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    return 0;
}

void file_out_abort(file_out *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp); /* ours alone: never the destination */
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}

int file_write_all(const char *path, const void *data, size_t n, tps_err *err) {
    file_out o;
    int rc = file_out_open(&o, path, err);
    if (rc) return rc;
    /* a write past stdio's buffer goes straight to the file: its errno is
     * the reason (the close would only see the stream's error flag) */
    if (n && fwrite(data, 1, n, o.f) != n) {
        int e = errno ? errno : EIO;
        file_out_abort(&o);
        return tps_fail(err, TPS_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    return file_out_close(&o, err);
}
