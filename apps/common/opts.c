/* apps/common/opts.c — strict option values and the writability checks (see opts.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "starzero.h"
#include "opts.h"

static const char *prog = "sz";

void sz_opt_prog(const char *name) { prog = name; }

static int refuse(const char *opt, const char *v, const char *why)
{
    fprintf(stderr, "%s: %s %s: %s\n", prog, opt, v, why);
    return -1;
}

int sz_opt_int(const char *opt, const char *v, long lo, long hi, int *out)
{
    char *end = NULL, why[160];
    errno = 0;
    long x = v && *v && *v != ' ' ? strtol(v, &end, 10) : 0;
    if (!v || !*v || !end || *end || end == v) {
        snprintf(why, sizeof why, "not an integer (allowed: %ld .. %ld)", lo, hi);
        return refuse(opt, v ? v : "", why);
    }
    if (errno == ERANGE || x < lo || x > hi) {
        snprintf(why, sizeof why, "out of range (allowed: %ld .. %ld)", lo, hi);
        return refuse(opt, v, why);
    }
    *out = (int)x;
    return 0;
}

int sz_opt_u64(const char *opt, const char *v, unsigned long long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = v && *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
    if (!v || !end || *end || end == v || errno == ERANGE)
        return refuse(opt, v ? v : "", "not an unsigned integer (allowed: 0 .. 18446744073709551615)");
    *out = x;
    return 0;
}

static void range_text(char *buf, size_t n, double lo, int lo_open, double hi, int hi_open)
{
    if (isinf(hi))
        snprintf(buf, n, "finite, %s %g", lo_open ? ">" : ">=", lo);
    else
        snprintf(buf, n, "finite, %g %s x %s %g", lo, lo_open ? "<" : "<=", hi_open ? "<" : "<=", hi);
}

int sz_opt_check_real(const char *opt, double x, double lo, int lo_open, double hi, int hi_open)
{
    char r[96], why[160], val[64];
    int ok = isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (ok)
        return 0;
    range_text(r, sizeof r, lo, lo_open, hi, hi_open);
    snprintf(why, sizeof why, "out of range (allowed: %s)", r);
    snprintf(val, sizeof val, "%g", x);
    return refuse(opt, val, why);
}

int sz_opt_real(const char *opt, const char *v, double lo, int lo_open, double hi, int hi_open, float *out)
{
    char *end = NULL, r[96], why[160];
    range_text(r, sizeof r, lo, lo_open, hi, hi_open);
    double x = v && *v && *v != ' ' ? strtod(v, &end) : 0;
    if (!v || !*v || !end || *end || end == v) {
        snprintf(why, sizeof why, "not a number (allowed: %s)", r);
        return refuse(opt, v ? v : "", why);
    }
    int ok = isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi) && isfinite((float)x);
    if (!ok) {
        snprintf(why, sizeof why, "out of range (allowed: %s)", r);
        return refuse(opt, v, why);
    }
    *out = (float)x;
    return 0;
}

int sz_opt_optimizer(const char *opt, const char *v, sz_optimizer *out)
{
    if (!v || sz_optimizer_parse(v, out) != SZ_OK)
        return refuse(opt, v ? v : "", "not an optimizer (allowed: adamw, sgd)");
    return 0;
}

int sz_opt_bytes(const char *opt, const char *v, double *out)
{
    double x = 0;
    if (!v || sz_parse_bytes(v, &x) != SZ_OK || !isfinite(x) || x < 0)
        return refuse(opt, v ? v : "", "not a byte size (allowed: finite, >= 0, e.g. 512M, 2G, 1.5GiB)");
    if (x > 0x1p62) /* beyond any machine, and where int64 byte counts would overflow */
        return refuse(opt, v, "more bytes than any machine has (allowed: at most 2^62, about 4.6 EB)");
    *out = x;
    return 0;
}

int sz_check_writable_file(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX], probe[PATH_MAX + 64];
    if (!path || !*path) {
        snprintf(err, errlen, "'' is an empty file name");
        return -1;
    }
    if (strlen(path) >= PATH_MAX - 64) { /* whole, with room for the temporary's suffix */
        snprintf(err, errlen, "the path is %zu bytes long, more than this system's limit (%d) allows", strlen(path),
                 PATH_MAX - 64);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    struct stat st;
    int exists = stat(dir, &st) == 0;
    if (!exists || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: cannot be written: %s %s", path, dir,
                 exists ? "is not a directory" : "does not exist");
        return -1;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* only a regular file is ever replaced */
        snprintf(err, errlen, "%s: cannot be written: it is %s, and only a regular file is ever replaced", path,
                 S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) ? "a character device"
                 : S_ISBLK(st.st_mode) ? "a block device" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file");
        return -1;
    }
    snprintf(probe, sizeof probe, "%s/.sz-probe-%d", dir, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot be written: cannot create files in %s: %s", path, dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    if (access(path, F_OK) == 0 && access(path, W_OK) != 0) {
        snprintf(err, errlen, "%s: cannot be written: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int mkdirs(char *p)
{
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

int sz_check_writable_dir(const char *path, char *err, size_t errlen)
{
    char p[PATH_MAX], probe[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s", path);
    struct stat st;
    if (stat(p, &st) != 0 && mkdirs(p) != 0) {
        snprintf(err, errlen, "%s: cannot create the directory: %s", path, strerror(errno));
        return -1;
    }
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory", path);
        return -1;
    }
    snprintf(probe, sizeof probe, "%s/.sz-probe-%d", path, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create files in it: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

/* Each row: two spellings of one option, sz-train's first. */
static const char *const k_same_option[][2] = {{"--zero-stage", "--stage"}, {"--config", "--model"},
                                               {"--mem-budget", "--budget"}, {"--checkpoint", "--ckpt"}};

void sz_opt_spellings(int argc, char **argv, const char *const *mine)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        for (size_t k = 0; k < sizeof k_same_option / sizeof *k_same_option; k++)
            for (int s = 0; s < 2; s++)
                if (!strcmp(argv[i], k_same_option[k][s]))
                    for (const char *const *m = mine; *m; m++)
                        if (!strcmp(*m, k_same_option[k][!s]))
                            argv[i] = (char *)*m;
}
