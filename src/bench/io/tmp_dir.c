/* Temporary folders of the bench (tmp_dir.h). */
#include "bench/io/tmp_dir.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
