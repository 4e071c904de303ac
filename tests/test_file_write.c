/* Output files are written safely (issue 48, base/file_write.h): a regular
 * file is replaced whole, anything else (/dev/full, a fifo, a symbolic
 * link) written in place and never renamed over nor unlinked, and every
 * failed write is an error naming the path and the reason; the
 * calibration file goes through it, and its parser refuses implausible
 * numbers. Files live in a fresh directory under /tmp. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file_read.h"
#include "base/file_write.h"
#include "base/ggml_type.h"
#include "engine/cost/step_fit.h"

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/tps-file-write-XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static void path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

/* The names in dir other than . and .. */
static int entries(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(file_write, a_failing_write_names_the_path_and_the_reason) {
    tps_err e = {{0}};
    int rc = file_write_all("/dev/full", "x", 1, &e);
    cr_assert_eq(rc, TPS_EIO);
    cr_assert(strstr(e.msg, "/dev/full") && strstr(e.msg, "No space left"), "%s", e.msg);
    struct stat st;
    cr_assert_eq(stat("/dev/full", &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "/dev/full is no longer a device");
    /* a directory that does not exist */
    rc = file_write_all("/nonexistent-tps-dir/x.csv", "x", 1, &e);
    cr_assert_eq(rc, TPS_EIO);
    cr_assert(strstr(e.msg, "/nonexistent-tps-dir/x.csv"), "%s", e.msg);
}

Test(file_write, a_regular_file_is_replaced_whole_and_no_temporary_file_stays) {
    make_dir();
    char p[128];
    path_in(p, sizeof p, "out.json");
    tps_err e = {{0}};
    cr_assert_eq(file_write_all(p, "first", 5, &e), 0, "%s", e.msg);
    cr_assert_eq(file_write_all(p, "second", 6, &e), 0, "%s", e.msg);
    char *got = NULL;
    cr_assert_eq(tps_read_file(p, 1 << 10, &got, NULL), 0);
    cr_assert_str_eq(got, "second");
    free(got);
    /* abandoned: the old file stays, the temporary one goes */
    file_out o;
    cr_assert_eq(file_out_open(&o, p, &e), 0);
    fputs("partial", o.f);
    file_out_abort(&o);
    cr_assert_eq(tps_read_file(p, 1 << 10, &got, NULL), 0);
    cr_assert_str_eq(got, "second");
    free(got);
    cr_assert_eq(entries(), 1, "a temporary file was left behind");
    remove_dir();
}

typedef struct fifo_reader {
    const char *path;
    char got[64];
} fifo_reader;

static void *read_fifo(void *arg) {
    fifo_reader *r = arg;
    int fd = open(r->path, O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, r->got, sizeof r->got - 1);
        if (n > 0) r->got[n] = 0;
        close(fd);
    }
    return NULL;
}

Test(file_write, a_fifo_and_a_symbolic_link_are_written_in_place, .timeout = 30) {
    make_dir();
    char fifo[128], link[128], target[128];
    path_in(fifo, sizeof fifo, "fifo");
    path_in(link, sizeof link, "link.csv");
    path_in(target, sizeof target, "target.csv");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    fifo_reader r = {.path = fifo};
    pthread_t th;
    pthread_create(&th, NULL, read_fifo, &r);
    tps_err e = {{0}};
    cr_assert_eq(file_write_all(fifo, "through", 7, &e), 0, "%s", e.msg);
    pthread_join(th, NULL);
    cr_assert_str_eq(r.got, "through");
    struct stat st;
    cr_assert_eq(lstat(fifo, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the fifo was replaced");
    /* a link: its target written, the link kept */
    cr_assert_eq(file_write_all(target, "old", 3, &e), 0);
    cr_assert_eq(symlink(target, link), 0);
    cr_assert_eq(file_write_all(link, "new", 3, &e), 0, "%s", e.msg);
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link was replaced by a file");
    char *got = NULL;
    cr_assert_eq(tps_read_file(target, 1 << 10, &got, NULL), 0);
    cr_assert_str_eq(got, "new");
    free(got);
    cr_assert_eq(entries(), 3);
    remove_dir();
}

/* ---------------------------------------------------------------------------
 * The calibration file
 * ------------------------------------------------------------------------- */

static void sample_calib(step_calib *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "calibrate");
    snprintf(c->model.arch, sizeof c->model.arch, "llama");
    c->model.dim = 64;
    c->model.n_layers = 5;
    c->model.n_heads = 8;
    c->model.n_kv_heads = 4;
    c->model.head_dim = 8;
    c->model.ffn_dim = 172;
    c->model.n_vocab = 512;
    c->model.weight_bytes = 1000000;
    c->threads = 2;
    c->machine.threads = 2;
    c->machine.read_gbs = 10;
    c->machine.int8_gops = 100;
    c->machine.int8_bits = 8;
    c->machine.fp32_gflops = 50;
    snprintf(c->machine.cpu, sizeof c->machine.cpu, "test");
    c->n_kv = 1;
    c->kv_type[0] = GGML_TYPE_F16;
    step_fit_init(&c->fit[0]);
    c->fit[0].solved = true;
    c->fit[0].n = 100;
    c->fit[0].max_rows = 64;
    for (int k = 0; k < STEP_FIT_NF; k++)
        c->fit[0].coef[0][k] = k ? 1000 : 200000;
    c->has_steal = true;
    c->steal = 0.02;
}

/* The sample written out, line `from` replaced by `to`, parsed. */
static int parse_edited(const char *from, const char *to, tps_err *e) {
    char p[128];
    path_in(p, sizeof p, "c.txt");
    step_calib c;
    sample_calib(&c);
    cr_assert_eq(step_calib_write(&c, p, e), 0, "%s", e->msg);
    char *text = NULL;
    size_t n = 0;
    cr_assert_eq(tps_read_file(p, 1 << 16, &text, &n), 0);
    char *at = strstr(text, from);
    cr_assert(at, "no '%s' in %s", from, text);
    char edited[1 << 14];
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    free(text);
    return step_calib_parse(&c, edited, strlen(edited), "c.txt", e);
}

Test(file_write, the_calibration_parser_refuses_implausible_numbers) {
    make_dir();
    tps_err e = {{0}};
    cr_assert_eq(parse_edited("threads 2\n", "threads 2\n", &e), 0, "%s", e.msg);
    static const struct {
        const char *from, *to, *says;
    } bad[] = {
        {"threads 2\n", "threads -2147483648\n", "threads -2147483648"},
        {"steal 0.0200", "steal 1", "steal 1"},
        {"fwd 200000", "fwd 1e300", "1e+300"},
        {"fwd 200000", "fwd -5e200", "-5e+200"},
        {"limits 2 10.000", "limits 2 1e300", "limits"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_edited(bad[i].from, bad[i].to, &e);
        cr_assert_neq(rc, 0, "'%s' was accepted", bad[i].to);
        cr_assert(strstr(e.msg, bad[i].says), "'%s': %s", bad[i].to, e.msg);
    }
    /* written to /dev/full: an error naming it, the device left alone */
    step_calib c;
    sample_calib(&c);
    cr_assert_eq(step_calib_write(&c, "/dev/full", &e), TPS_EIO);
    cr_assert(strstr(e.msg, "/dev/full"), "%s", e.msg);
    remove_dir();
}
