/* Temporary folders of the bench (tmp_dir.h). */
#include "bench/io/tmp_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tmp_dir_pick(const char **dir, char *tmpl, const char *keep, bool make_keep, tps_err *e) {
    *dir = keep;
    if (!keep) {
        if (!mkdtemp(tmpl)) return tps_fail(e, TPS_EIO, "mkdtemp: %s", strerror(errno));
        *dir = tmpl;
    } else if (make_keep && mkdir(keep, 0755) && errno != EEXIST) {
        return tps_fail(e, TPS_EIO, "cannot create '%s': %s", keep, strerror(errno));
    }
    return TPS_OK;
}

void tmp_dir_remove(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[1024];
    for (int i = 0; i < 100000 && (de = readdir(d)); i++) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}
