/* train/state_io.c — the training-state directory (include/starzero_train.h): sharded files written
 * in parallel, a manifest written last and checksummed, temporary name + fsync + rename,
 * DIR/latest, the directory's owner and lock, --keep by lineage and save order, the layout checks
 * made before any read, and the re-sharding loader. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "starzero_train.h"

#define MANIFEST_CRC "manifest_crc32"
#define LOCK_NAME ".lock"
#define OWNER_NAME "owner.json"
#define TMP_PREFIX ".tmp-step-"

double sz_json_num(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

const char *sz_json_str(const cJSON *obj, const char *key, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static void file_name(char *buf, size_t n, const char *kind, int rank)
{
    snprintf(buf, n, "%s-r%05d.bin", kind, rank);
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* n bytes to an open file (path for the message). */
static int write_fd(int fd, const char *path, const void *buf, size_t n, char *err, size_t errlen)
{
    const char *p = buf;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(fd, p, left > (1u << 30) ? (1u << 30) : left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    return 0;
}

/* Writes all of buf to path, fsync'ed. */
static int write_file(const char *path, const void *buf, size_t n, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    if (write_fd(fd, path, buf, n, err, errlen) != 0) {
        close(fd);
        return -1;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        snprintf(err, errlen, "%s: fsync/close failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Replaces dir/name with text: written to dir/.name.tmp, fsync'ed, renamed, the directory fsync'ed. */
static int write_atomic(const char *dir, const char *name, const char *text, char *err, size_t errlen)
{
    char path[PATH_MAX + 64], tmp[PATH_MAX + 72];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    unlink(tmp);
    if (write_file(tmp, text, strlen(text), err, errlen) != 0)
        return -1;
    if (rename(tmp, path) != 0 || fsync_path(dir) != 0) {
        snprintf(err, errlen, "%s: cannot update: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* crc32 c continued over n more bytes. */
static uLong crc_add(uLong c, const void *buf, size_t n)
{
    const Bytef *p = buf;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return c;
}

static uint32_t crc_of(const void *buf, size_t n) { return (uint32_t)crc_add(crc32(0L, Z_NULL, 0), buf, n); }

/* The manifest's own checksum: crc32 of its compact JSON text without the manifest_crc32 member
 * (the same text however the file is indented). */
static int manifest_crc(const cJSON *man, uint32_t *out)
{
    char *t = cJSON_PrintUnformatted(man);
    if (!t)
        return -1;
    *out = crc_of(t, strlen(t));
    free(t);
    return 0;
}

/* A step directory holds files only. */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(path);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Names in dir starting with prefix, sorted (step-NNNNNNNN sorts by step). */
static int list_prefixed(const char *dir, const char *prefix, char ***out)
{
    DIR *d = opendir(dir);
    *out = NULL;
    if (!d)
        return 0;
    int n = 0, cap = 0;
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                char **nn = realloc(names, (size_t)cap * sizeof *nn);
                if (!nn)
                    break;
                names = nn;
            }
            names[n++] = strdup(e->d_name);
        }
    closedir(d);
    if (n > 0)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out = names;
    return n;
}

static void free_list(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        errno = EINVAL;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (buf && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[st.st_size] = 0;
        *len = (size_t)st.st_size;
    }
    return buf;
}

/* path parsed as JSON, unchecked (NULL when missing or not JSON). */
static cJSON *read_json(const char *path)
{
    size_t len;
    char *text = slurp(path, &len);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

/* Collective: 0 when no rank failed; a failing rank's message stays in its err. */
static int agree(sz_context *ctx, int failed, char *err, size_t errlen)
{
    double f = failed;
    if (sz_context_sum(ctx, &f, 1) != SZ_OK) {
        snprintf(err, errlen, "the ranks could not agree (MPI failed)");
        return -1;
    }
    if (f > 0 && !failed)
        snprintf(err, errlen, "another rank failed (its message says why)");
    return f > 0 ? -1 : 0;
}

/* The last path component of p (trailing slashes ignored) into buf. */
static void base_name(const char *p, char *buf, size_t n)
{
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        len--;
    size_t b = len;
    while (b > 0 && p[b - 1] != '/')
        b--;
    snprintf(buf, n, "%.*s", (int)(len - b), p + b);
}

/* The directory holding p (trailing slashes ignored) into buf: "." for a bare name. */
static void parent_dir(const char *p, char *buf, size_t n)
{
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        len--;
    while (len > 0 && p[len - 1] != '/')
        len--;
    while (len > 1 && p[len - 1] == '/')
        len--;
    if (len == 0)
        snprintf(buf, n, ".");
    else
        snprintf(buf, n, "%.*s", (int)len, p);
}

static int is_tmp_step(const char *path)
{
    char b[NAME_MAX + 1];
    base_name(path, b, sizeof b);
    return !strncmp(b, TMP_PREFIX, strlen(TMP_PREFIX));
}

static const char *kind_of_mode(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

/* ---- the saves a directory holds ----------------------------------------------------------- */

struct saved {
    char name[32];            /* step-NNNNNNNN */
    char run_id[40], lineage[40]; /* "" when the manifest has none (version 1) */
    long long seq;            /* save order in the directory; -1 when unknown */
    int complete;             /* holds a manifest that parses */
};

static int scan_saves(const char *dir, struct saved **out)
{
    char **names;
    int n = list_prefixed(dir, "step-", &names), k = 0;
    struct saved *s = calloc((size_t)n + 1, sizeof *s);
    for (int i = 0; i < n && s; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, names[i]);
        cJSON *m = read_json(path);
        snprintf(s[k].name, sizeof s[k].name, "%.31s", names[i]);
        s[k].complete = m != NULL;
        snprintf(s[k].run_id, sizeof s[k].run_id, "%.39s", sz_json_str(m, "run_id", ""));
        snprintf(s[k].lineage, sizeof s[k].lineage, "%.39s", sz_json_str(m, "lineage", ""));
        s[k].seq = (long long)sz_json_num(m, "save_seq", -1);
        cJSON_Delete(m);
        k++;
    }
    free_list(names, n);
    *out = s;
    return s ? k : 0;
}

static int cmp_seq_desc(const void *a, const void *b)
{
    const struct saved *x = a, *y = b;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : strcmp(y->name, x->name);
}

/* ---- the directory a run writes --------------------------------------------------------------- */

struct sz_state_dir {
    char dir[PATH_MAX];
    int lock_fd;                  /* rank 0: DIR/.lock, flock'ed until close; -1 on the other ranks */
    char run_id[40], lineage[40];
    long long next_seq;           /* the save order of this run's next save */
    char since[32], host[256];
    char (*doomed)[32];           /* --overwrite-state: other runs' steps, removed after the first save */
    int ndoomed;
    int delay_ms;                 /* sz_state_dir_set_save_delay (tests) */
};

static void random_id(char *out, size_t n)
{
    unsigned char b[12];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got < sizeof b) { /* no entropy source: time and pid still make a collision unlikely */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
        for (size_t i = 0; i < sizeof b; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            b[i] = (unsigned char)(x >> 56);
    }
    for (size_t i = 0; i < sizeof b && 2 * i + 2 < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void utc_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int write_owner(const sz_state_dir *d, const char *last_save, char *err, size_t errlen)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "starzero-state-owner");
    cJSON_AddStringToObject(o, "run_id", d->run_id);
    cJSON_AddStringToObject(o, "lineage", d->lineage);
    cJSON_AddStringToObject(o, "host", d->host);
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    cJSON_AddStringToObject(o, "since", d->since);
    cJSON_AddNumberToObject(o, "next_save_seq", (double)d->next_seq);
    if (last_save)
        cJSON_AddStringToObject(o, "last_save", last_save);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    int rc = text ? write_atomic(d->dir, OWNER_NAME, text, err, errlen) : -1;
    free(text);
    return rc;
}

/* Rank 0: takes DIR/.lock (LOCK_EX | LOCK_NB) and writes who holds it into it; a held lock is
 * refused naming the holder as its file says. */
static int take_lock(sz_state_dir *d, char *err, size_t errlen)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, d->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: cannot open the directory's lock %s: %s", d->dir, path,
                 fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char who[512] = "";
        for (int tries = 0; tries < 20 && !who[0]; tries++) { /* the holder writes its line just after locking */
            ssize_t k = pread(fd, who, sizeof who - 1, 0);
            who[k > 0 ? k : 0] = 0;
            who[strcspn(who, "\n")] = 0;
            if (!who[0])
                nanosleep(&(struct timespec){0, 50000000L}, NULL);
        }
        close(fd);
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "%s is in use by another run: %s holds its lock (%s). Two runs writing one "
                     "directory would delete each other's saves: wait for that run to end, or give this one "
                     "another directory", d->dir, who[0] ? who : "a process that has not written its name yet", path);
        else
            snprintf(err, errlen, "%s: cannot lock %s: %s", d->dir, path, strerror(e));
        return -1;
    }
    char line[512];
    int n = snprintf(line, sizeof line, "pid %d on host %s (run %s, since %s)\n", (int)getpid(), d->host,
                     d->run_id, d->since);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) {
        snprintf(err, errlen, "%s: cannot write %s: %s", d->dir, path, strerror(errno));
        close(fd);
        return -1;
    }
    fsync(fd);
    d->lock_fd = fd;
    return 0;
}

static int same_dir(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

/* dir and its missing parents (mkdir -p); 0, or -1 and err. */
static int make_dirs(const char *dir, char *err, size_t errlen)
{
    char p[PATH_MAX];
    if (!dir[0] || strlen(dir) >= sizeof p) {
        snprintf(err, errlen, "'%s': not a usable directory name", dir);
        return -1;
    }
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c)
            continue;
        char was = *c;
        *c = 0;
        struct stat st;
        if (stat(p, &st) != 0 && mkdir(p, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "%s: cannot create: %s", p, strerror(errno));
            return -1;
        }
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: not a directory", p);
            return -1;
        }
        if (!(*c = was))
            return 0;
    }
}

/* Rank 0's part of sz_state_dir_open (lock taken first: nothing below races with another writer). */
static int open_rank0(sz_state_dir *d, const char *rstep, const cJSON *rm, int overwrite, FILE *notes, char *err,
                      size_t errlen)
{
    char path[PATH_MAX + 64];
    if (make_dirs(d->dir, err, errlen) != 0)
        return -1;
    const char *outputs[] = {"latest", OWNER_NAME};
    for (int i = 0; i < 2; i++) { /* what a save replaces must be a regular file */
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", d->dir, outputs[i]);
        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            snprintf(err, errlen, "%s: it is %s, and only a regular file is ever replaced", path,
                     kind_of_mode(st.st_mode));
            return -1;
        }
    }
    const char *rid = rm ? sz_json_str(rm, "run_id", NULL) : NULL;
    if (rid)
        snprintf(d->run_id, sizeof d->run_id, "%.39s", rid);
    else
        random_id(d->run_id, sizeof d->run_id);
    if (take_lock(d, err, errlen) != 0)
        return -1;
    char **tmps; /* leftovers of interrupted saves: their writer is gone (the lock was free) */
    int nt = list_prefixed(d->dir, TMP_PREFIX, &tmps);
    for (int i = 0; i < nt; i++) {
        snprintf(path, sizeof path, "%s/%s", d->dir, tmps[i]);
        remove_tree(path);
    }
    free_list(tmps, nt);

    struct saved *s;
    int n = scan_saves(d->dir, &s);
    char rparent[PATH_MAX], rname[NAME_MAX + 1] = "";
    int in_dir = 0;
    if (rstep) {
        parent_dir(rstep, rparent, sizeof rparent);
        base_name(rstep, rname, sizeof rname);
        in_dir = same_dir(rparent, d->dir);
    }
    int legacy_adopt = rm && !rid && in_dir; /* a version-1 state resumed in its own directory */
    int others = 0, first = -1, last = -1, legacy = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].complete)
            continue;
        int mine = s[i].run_id[0] ? !strcmp(s[i].run_id, d->run_id) : legacy_adopt;
        legacy += !s[i].run_id[0] && mine;
        if (!mine) {
            others++;
            first = first < 0 ? i : first;
            last = i;
        }
    }
    if (others > 0 && !overwrite) {
        snprintf(err, errlen, "%s holds %d saved state(s) of another run (%s%s%s; %s .. %s): a %s would mix its "
                 "saves with them. --resume %s continues that run; give this run a new directory, or pass "
                 "--overwrite-state to replace them (removed after this run's first save)", d->dir, others,
                 s[first].run_id[0] ? "run " : "saved before run ids", s[first].run_id,
                 others > 1 && strcmp(s[first].run_id, s[last].run_id) ? " and others" : "", s[first].name,
                 s[last].name, rm ? "resumed run of another id" : "new run", d->dir);
        free(s);
        return -1;
    }
    if (others > 0) {
        d->doomed = calloc((size_t)others, sizeof *d->doomed);
        for (int i = 0; i < n && d->doomed; i++)
            if (s[i].complete && (s[i].run_id[0] ? strcmp(s[i].run_id, d->run_id) != 0 : !legacy_adopt))
                snprintf(d->doomed[d->ndoomed++], sizeof d->doomed[0], "%s", s[i].name);
        if (notes)
            fprintf(notes, "note: --overwrite-state: %s holds %d state(s) of another run (%s .. %s); they are "
                    "removed after this run's first save\n", d->dir, others, s[first].name, s[last].name);
    }
    if (legacy && notes)
        fprintf(notes, "note: %s holds %d state(s) saved before run ids (manifest version 1): this run continues "
                "them; --keep counts only the saves from now on\n", d->dir, legacy);

    /* the lineage: a resume of its lineage's newest save continues it; of an older one starts another */
    const char *rl = rm ? sz_json_str(rm, "lineage", NULL) : NULL;
    long long rseq = rm ? (long long)sz_json_num(rm, "save_seq", -1) : -1;
    int newer = 0;
    char newer_names[256] = "";
    for (int i = 0; i < n && rl && in_dir; i++)
        if (s[i].complete && !strcmp(s[i].lineage, rl) && s[i].seq > rseq) {
            size_t used = strlen(newer_names);
            if (newer < 4 && used + 40 < sizeof newer_names)
                snprintf(newer_names + used, sizeof newer_names - used, "%s%s", newer ? ", " : "", s[i].name);
            newer++;
        }
    if (rl && !newer)
        snprintf(d->lineage, sizeof d->lineage, "%.39s", rl);
    else
        random_id(d->lineage, sizeof d->lineage);
    if (newer && notes)
        fprintf(notes, "note: resuming %s, older than the newest save of its lineage (%s%s): this run starts a new "
                "lineage; --keep counts only its saves, and the newer ones stay until a save of the same step "
                "replaces them or you remove them\n", rname, newer_names, newer > 4 ? ", ..." : "");
    long long maxseq = 0;
    for (int i = 0; i < n; i++)
        maxseq = s[i].seq > maxseq ? s[i].seq : maxseq;
    snprintf(path, sizeof path, "%s/" OWNER_NAME, d->dir);
    cJSON *own = read_json(path);
    double owner_next = sz_json_num(own, "next_save_seq", 0);
    cJSON_Delete(own);
    d->next_seq = maxseq + 1 > (long long)owner_next ? maxseq + 1 : (long long)owner_next;
    free(s);
    return write_owner(d, NULL, err, errlen);
}

sz_status sz_state_dir_open(sz_state_dir **out, sz_context *ctx, const char *dir, const char *resumed_stepdir,
                      const cJSON *resumed_manifest, int overwrite, FILE *notes, char *err, size_t errlen)
{
    *out = NULL;
    err[0] = 0;
    sz_state_dir *d = calloc(1, sizeof *d);
    int failed = 0;
    if (!d) {
        snprintf(err, errlen, "out of memory");
        failed = 1;
    } else {
        d->lock_fd = -1;
        snprintf(d->dir, sizeof d->dir, "%s", dir);
        utc_now(d->since, sizeof d->since);
        if (gethostname(d->host, sizeof d->host) != 0)
            snprintf(d->host, sizeof d->host, "?");
        d->host[sizeof d->host - 1] = 0;
        if (sz_context_rank(ctx) == 0 &&
            open_rank0(d, resumed_stepdir, resumed_manifest, overwrite, notes, err, errlen) != 0)
            failed = 1;
    }
    if (agree(ctx, failed, err, errlen) != 0) {
        sz_state_dir_close(d);
        return SZ_ERR_IO;
    }
    *out = d;
    return SZ_OK;
}

void sz_state_dir_set_save_delay(sz_state_dir *d, int ms)
{
    if (d)
        d->delay_ms = ms > 0 ? ms : 0;
}

void sz_state_dir_close(sz_state_dir *d)
{
    if (!d)
        return;
    if (d->lock_fd >= 0)
        close(d->lock_fd); /* releases the flock; the file stays, naming the last holder */
    free(d->doomed);
    free(d);
}

/* ---- saving ------------------------------------------------------------------------------------- */

static cJSON *units_json(const sz_model *m)
{
    cJSON *units = cJSON_CreateArray();
    for (int u = 0; u < sz_model_nunits(m); u++) {
        const char *name;
        int64_t numel, padded, lo, n;
        sz_model_state_shard(m, u, &name, &numel, &padded, &lo, &n);
        cJSON *o = cJSON_CreateObject(), *ps = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddNumberToObject(o, "numel", (double)numel);
        cJSON_AddNumberToObject(o, "padded", (double)padded);
        cJSON_AddNumberToObject(o, "shard", (double)n);
        for (int p = 0; p < sz_model_unit_nparams(m, u); p++) {
            const char *pn;
            int64_t off, pnumel;
            sz_model_unit_param_info(m, u, p, &pn, &off, &pnumel);
            cJSON *po = cJSON_CreateObject();
            cJSON_AddStringToObject(po, "name", pn);
            cJSON_AddNumberToObject(po, "offset", (double)off);
            cJSON_AddNumberToObject(po, "numel", (double)pnumel);
            cJSON_AddItemToArray(ps, po);
        }
        cJSON_AddItemToObject(o, "params", ps);
        cJSON_AddItemToArray(units, o);
    }
    return units;
}

/* Rank 0, after a save became visible: --keep over this lineage's saves in save order (never the
 * one just written), and --overwrite-state's other-run states once this run has its first save. */
static void prune(sz_state_dir *d, const char *just, int keep, FILE *notes)
{
    char path[PATH_MAX + 64];
    struct saved *s;
    int n = scan_saves(d->dir, &s);
    for (int k = 0; k < d->ndoomed; k++)
        for (int i = 0; i < n; i++) /* still another run's (a save of ours may have replaced it) */
            if (!strcmp(s[i].name, d->doomed[k]) && strcmp(s[i].name, just) && strcmp(s[i].run_id, d->run_id)) {
                snprintf(path, sizeof path, "%s/%s", d->dir, s[i].name);
                remove_tree(path);
                s[i].complete = 0;
            }
    if (d->ndoomed && notes)
        fprintf(notes, "note: --overwrite-state: the other run's %d state(s) removed after this run's first save\n",
                d->ndoomed);
    d->ndoomed = 0;
    if (keep > 0) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (s[i].complete && s[i].seq >= 0 && !strcmp(s[i].lineage, d->lineage) && strcmp(s[i].name, just))
                s[m++] = s[i];
        qsort(s, (size_t)m, sizeof *s, cmp_seq_desc);
        for (int i = keep - 1; i < m; i++) { /* the one just written is the newest and counts as one */
            snprintf(path, sizeof path, "%s/%s", d->dir, s[i].name);
            remove_tree(path);
        }
    }
    free(s);
}

sz_status sz_state_save(sz_state_dir *d, sz_model *m, sz_context *ctx, int step, cJSON *app, int keep,
                        char *where, size_t wlen, char *err, size_t errlen)
{
    int rank = sz_context_rank(ctx), nd = sz_context_world_size(ctx), nu = sz_model_nunits(m), failed = 0;
    char tmp[PATH_MAX + 64], final[PATH_MAX + 64], path[PATH_MAX + 160], name[64], stepname[32];
    snprintf(stepname, sizeof stepname, "step-%08d", step);
    snprintf(tmp, sizeof tmp, "%s/" TMP_PREFIX "%08d", d->dir, step);
    snprintf(final, sizeof final, "%s/%s", d->dir, stepname);
    err[0] = 0;
    if (rank == 0) { /* this run holds the lock: a temporary of this name is a leftover of its own */
        remove_tree(tmp);
        if (mkdir(tmp, 0755) != 0) {
            snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
            failed = 1;
        }
    }
    if (agree(ctx, failed, err, errlen) != 0) {
        cJSON_Delete(app);
        return SZ_ERR_IO;
    }
    /* every rank its shard of every state, in parallel, one unit's shard at a time (host memory:
     * the largest unit's shard, not the rank's whole state); bytes and crc32 gathered on all ranks */
    int64_t maxn = 0;
    for (int u = 0; u < nu; u++) {
        int64_t n;
        sz_model_state_shard(m, u, NULL, NULL, NULL, NULL, &n);
        maxn = n > maxn ? n : maxn;
    }
    double *info = calloc((size_t)nd * SZ_STATE_NKINDS * 2, sizeof *info);
    float *buf = malloc((size_t)(maxn > 0 ? maxn : 1) * sizeof *buf);
    if (!info || !buf) {
        snprintf(err, errlen, "out of memory for a unit's state shard (%lld floats)", (long long)maxn);
        failed = 1;
    }
    for (int k = 0; k < SZ_STATE_NKINDS && !failed; k++) {
        if (!sz_model_state_has(m, (sz_state_kind)k))
            continue;
        file_name(name, sizeof name, sz_model_state_name(m, (sz_state_kind)k), rank);
        snprintf(path, sizeof path, "%s/%s", tmp, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
            failed = 1;
            break;
        }
        int64_t at = 0;
        uLong c = crc32(0L, Z_NULL, 0);
        for (int u = 0; u < nu && !failed; u++) {
            int64_t n;
            sz_model_state_shard(m, u, NULL, NULL, NULL, NULL, &n);
            if (sz_model_state_shard_read(m, u, (sz_state_kind)k, buf) != SZ_OK) {
                snprintf(err, errlen, "reading %s of unit %d failed", sz_model_state_name(m, (sz_state_kind)k), u);
                failed = 1;
            } else if (write_fd(fd, path, buf, (size_t)n * sizeof *buf, err, errlen) != 0) {
                failed = 1;
            } else {
                c = crc_add(c, buf, (size_t)n * sizeof *buf);
                at += n;
            }
        }
        if ((fsync(fd) != 0 || close(fd) != 0) && !failed) {
            snprintf(err, errlen, "%s: fsync/close failed: %s", path, strerror(errno));
            failed = 1;
        }
        info[((size_t)rank * SZ_STATE_NKINDS + k) * 2] = (double)at * sizeof *buf;
        info[((size_t)rank * SZ_STATE_NKINDS + k) * 2 + 1] = failed ? 0 : (uint32_t)c;
    }
    free(buf);
    double flag = failed;
    if (sz_context_sum(ctx, &flag, 1) != SZ_OK || flag > 0 ||
        sz_context_sum(ctx, info, nd * SZ_STATE_NKINDS * 2) != SZ_OK) {
        if (!failed)
            snprintf(err, errlen, "another rank failed writing its shard (its message says why)");
        free(info);
        cJSON_Delete(app);
        return SZ_ERR_IO;
    }
    /* rank 0: the manifest last, then the rename that makes the step visible, then latest */
    if (rank == 0) {
        int delay_ms = d->delay_ms;
        if (delay_ms > 0) {
            printf("saving %s: shards written, pausing %d ms before the manifest (pid %d)\n", final, delay_ms, (int)getpid());
            fflush(stdout);
            nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
        }
        cJSON *man = app && cJSON_IsObject(app) ? app : cJSON_CreateObject();
        if (man != app)
            cJSON_Delete(app);
        const char *ours[] = {"format", "version", "step", "nd", "run_id", "lineage", "save_seq", "units", "files",
                              MANIFEST_CRC};
        for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++) /* these are the state's, not the app's */
            cJSON_DeleteItemFromObjectCaseSensitive(man, ours[i]);
        cJSON_AddStringToObject(man, "format", SZ_STATE_FORMAT);
        cJSON_AddNumberToObject(man, "version", SZ_STATE_VERSION);
        cJSON_AddNumberToObject(man, "step", step);
        cJSON_AddNumberToObject(man, "nd", nd);
        cJSON_AddStringToObject(man, "run_id", d->run_id);
        cJSON_AddStringToObject(man, "lineage", d->lineage);
        cJSON_AddNumberToObject(man, "save_seq", (double)d->next_seq);
        cJSON_AddItemToObject(man, "units", units_json(m));
        /* which optimizer's state this is (what a resume must match), beside the app's settings */
        cJSON *op = cJSON_GetObjectItemCaseSensitive(man, "optimizer");
        if (!cJSON_IsObject(op)) {
            cJSON_DeleteItemFromObjectCaseSensitive(man, "optimizer");
            op = cJSON_AddObjectToObject(man, "optimizer");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(op, "name");
        cJSON_DeleteItemFromObjectCaseSensitive(op, "states");
        cJSON_AddStringToObject(op, "name", sz_model_optimizer_name(m));
        cJSON *sn = cJSON_AddArrayToObject(op, "states");
        for (int k = SZ_STATE_OPT0; k <= SZ_STATE_OPT1; k++)
            if (sz_model_state_has(m, (sz_state_kind)k))
                cJSON_AddItemToArray(sn, cJSON_CreateString(sz_model_state_name(m, (sz_state_kind)k)));
        cJSON *files = cJSON_CreateArray();
        for (int r = 0; r < nd; r++)
            for (int k = 0; k < SZ_STATE_NKINDS; k++) {
                if (!sz_model_state_has(m, (sz_state_kind)k))
                    continue;
                cJSON *f = cJSON_CreateObject();
                file_name(name, sizeof name, sz_model_state_name(m, (sz_state_kind)k), r);
                cJSON_AddStringToObject(f, "name", name);
                cJSON_AddStringToObject(f, "kind", sz_model_state_name(m, (sz_state_kind)k));
                cJSON_AddNumberToObject(f, "rank", r);
                cJSON_AddNumberToObject(f, "bytes", info[((size_t)r * SZ_STATE_NKINDS + k) * 2]);
                cJSON_AddNumberToObject(f, "crc32", info[((size_t)r * SZ_STATE_NKINDS + k) * 2 + 1]);
                cJSON_AddItemToArray(files, f);
            }
        cJSON_AddItemToObject(man, "files", files);
        uint32_t mc = 0;
        if (manifest_crc(man, &mc) == 0) /* last: the checksum of everything above */
            cJSON_AddNumberToObject(man, MANIFEST_CRC, mc);
        char *text = cJSON_Print(man);
        cJSON_Delete(man);
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        if (!text || write_file(path, text, strlen(text), err, errlen) != 0)
            failed = 1;
        free(text);
        struct stat st;
        if (!failed && fsync_path(tmp) != 0) {
            snprintf(err, errlen, "%s: fsync failed: %s", tmp, strerror(errno));
            failed = 1;
        } else if (!failed && lstat(final, &st) == 0) {
            /* a save of the same step replaces the old one: swapped in one step (latest never names a
             * missing directory), then the old one, now under the temporary name, removed */
            snprintf(path, sizeof path, "%s/manifest.json", final);
            cJSON *old = read_json(path);
            const char *orun = sz_json_str(old, "run_id", ""), *olin = sz_json_str(old, "lineage", "");
            if (strcmp(olin, d->lineage))
                fprintf(stderr, "note: %s replaces the %s's save of the same step\n", final,
                        strcmp(orun, d->run_id) ? "other run" : "abandoned lineage");
            cJSON_Delete(old);
            if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
                remove_tree(tmp);
            } else { /* a file system without the exchange: remove, then rename */
                remove_tree(final);
                if (rename(tmp, final) != 0) {
                    snprintf(err, errlen, "%s: cannot move the complete state into place: %s", final, strerror(errno));
                    failed = 1;
                }
            }
        } else if (!failed && rename(tmp, final) != 0) {
            snprintf(err, errlen, "%s: cannot move the complete state into place: %s", final, strerror(errno));
            failed = 1;
        }
        if (!failed && fsync_path(d->dir) != 0) {
            snprintf(err, errlen, "%s: fsync failed: %s", d->dir, strerror(errno));
            failed = 1;
        }
        if (!failed) { /* latest names a step only once it is complete and in place */
            char line[40];
            snprintf(line, sizeof line, "%s\n", stepname);
            failed = write_atomic(d->dir, "latest", line, err, errlen) != 0;
        }
        if (!failed) {
            d->next_seq++;
            prune(d, stepname, keep, stderr);
            failed = write_owner(d, stepname, err, errlen) != 0;
        }
    }
    free(info);
    if (agree(ctx, failed, err, errlen) != 0)
        return SZ_ERR_IO;
    snprintf(where, wlen, "%s", final);
    return SZ_OK;
}

/* ---- finding and checking a saved state ------------------------------------------------------ */

/* A complete step: a directory holding manifest.json. */
static int complete_step(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

sz_status sz_state_find(const char *dir, char *stepdir, size_t len, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    struct stat st;
    if (is_tmp_step(dir)) {
        snprintf(err, errlen, "%s: the temporary directory of an unfinished save (its writer stopped before "
                 "completing it): not a training state; give the directory holding it, or one of its step-* "
                 "directories", dir);
        return SZ_ERR_IO;
    }
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (stat(path, &st) == 0) {
        snprintf(stepdir, len, "%s", dir);
        return SZ_OK;
    }
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    char line[64] = "";
    if (f) {
        if (fgets(line, sizeof line, f))
            line[strcspn(line, "\r\n")] = 0;
        fclose(f);
        if (line[0] && !strchr(line, '/') && strncmp(line, "step-", 5) == 0 && complete_step(dir, line)) {
            snprintf(stepdir, len, "%s/%s", dir, line);
            return SZ_OK;
        }
        snprintf(err, errlen, "%s: latest names '%s', which is not a complete state (no %s/%s/manifest.json): "
                 "the directory was changed by hand; give the step directory to use (%s/step-NNNNNNNN)", dir, line,
                 dir, line, dir);
        return SZ_ERR_IO;
    }
    struct saved *s; /* no latest: the newest save (by save order; by step for version-1 states) */
    int n = scan_saves(dir, &s), best = -1;
    for (int i = 0; i < n; i++)
        if (s[i].complete && (best < 0 || s[i].seq > s[best].seq || (s[i].seq == s[best].seq && strcmp(s[i].name, s[best].name) > 0)))
            best = i;
    if (best >= 0)
        snprintf(stepdir, len, "%s/%s", dir, s[best].name);
    free(s);
    if (best >= 0)
        return SZ_OK;
    snprintf(err, errlen, "%s: no complete training state in it (no manifest.json, no step-* directory with one)",
             dir);
    return SZ_ERR_IO;
}

/* An integer field of a manifest in [lo, hi]; the message names it by `field`. */
static int man_int(const char *mpath, const cJSON *obj, const char *key, const char *field, double lo, double hi,
                   int64_t *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) {
        snprintf(err, errlen, "%s: %s is %s: the manifest is damaged or was edited; nothing was read", mpath, field,
                 v ? "not a number" : "missing");
        return -1;
    }
    double x = v->valuedouble;
    if (!(x >= lo && x <= hi) || x != floor(x)) {
        snprintf(err, errlen, "%s: %s is %.17g, not an integer in %.0f .. %.0f: the manifest is damaged or was "
                 "edited; nothing was read", mpath, field, x, lo, hi);
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

static int valid_kind(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > 31)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
            return 0;
    return 1;
}

/* The layout a manifest describes, checked for consistency with itself and its directory's name,
 * before any shard is read (see sz_state_manifest). */
static int check_layout(const char *stepdir, const char *mpath, const cJSON *man, char *err, size_t errlen)
{
    const double big = 9007199254740992.0; /* 2^53: every integer a double holds exactly */
    int64_t nd, step;
    if (man_int(mpath, man, "nd", "nd", 1, 1 << 24, &nd, err, errlen) != 0 ||
        man_int(mpath, man, "step", "step", 0, INT_MAX, &step, err, errlen) != 0)
        return -1;
    char b[NAME_MAX + 1];
    int named;
    base_name(stepdir, b, sizeof b);
    if (strlen(b) == 13 && sscanf(b, "step-%8d", &named) == 1 && named != step) {
        snprintf(err, errlen, "%s: step is %lld, but its directory is %s: the manifest is damaged or was edited; "
                 "nothing was read", mpath, (long long)step, b);
        return -1;
    }
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(man, "units");
    int nu = cJSON_GetArraySize(units);
    if (!cJSON_IsArray(units) || nu < 1) {
        snprintf(err, errlen, "%s: units is missing or empty: the manifest is damaged; nothing was read", mpath);
        return -1;
    }
    int64_t total = 0; /* floats in each rank's file of each kind */
    char field[96];
    for (int u = 0; u < nu; u++) {
        const cJSON *su = cJSON_GetArrayItem(units, u), *p;
        int64_t numel, padded, shard;
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(su, "name"))) {
            snprintf(err, errlen, "%s: units[%d].name is missing: the manifest is damaged; nothing was read", mpath, u);
            return -1;
        }
        snprintf(field, sizeof field, "units[%d].numel", u);
        if (man_int(mpath, su, "numel", field, 0, big, &numel, err, errlen) != 0)
            return -1;
        snprintf(field, sizeof field, "units[%d].padded", u);
        if (man_int(mpath, su, "padded", field, 0, big, &padded, err, errlen) != 0)
            return -1;
        snprintf(field, sizeof field, "units[%d].shard", u);
        if (man_int(mpath, su, "shard", field, 0, big, &shard, err, errlen) != 0)
            return -1;
        int64_t want = sz_zero_padded(numel, (int)nd);
        if (padded != want) {
            snprintf(err, errlen, "%s: units[%d].padded is %lld, but its %lld elements padded to a multiple of N_d %lld "
                     "are %lld: the manifest is damaged or was edited; nothing was read", mpath, u, (long long)padded,
                     (long long)numel, (long long)nd, (long long)want);
            return -1;
        }
        if (shard * nd != padded) {
            snprintf(err, errlen, "%s: units[%d].shard is %lld, but padded %lld / N_d %lld is %lld: the manifest is "
                     "damaged or was edited; nothing was read", mpath, u, (long long)shard, (long long)padded,
                     (long long)nd, (long long)(padded / nd));
            return -1;
        }
        int64_t at = 0;
        int j = 0;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(su, "params"))
        {
            int64_t off, pn;
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "name"))) {
                snprintf(err, errlen, "%s: units[%d].params[%d].name is missing: the manifest is damaged; nothing was "
                         "read", mpath, u, j);
                return -1;
            }
            snprintf(field, sizeof field, "units[%d].params[%d].offset", u, j);
            if (man_int(mpath, p, "offset", field, 0, (double)numel, &off, err, errlen) != 0)
                return -1;
            snprintf(field, sizeof field, "units[%d].params[%d].numel", u, j);
            if (man_int(mpath, p, "numel", field, 1, (double)numel, &pn, err, errlen) != 0)
                return -1;
            if (off != at) {
                snprintf(err, errlen, "%s: units[%d].params[%d].offset is %lld, but the tensors before it end at %lld "
                         "(a unit's tensors lie one after another from 0): the manifest is damaged or was edited; "
                         "nothing was read", mpath, u, j, (long long)off, (long long)at);
                return -1;
            }
            at += pn;
            j++;
        }
        if (at != numel) {
            snprintf(err, errlen, "%s: units[%d]'s tensors hold %lld elements, its numel says %lld: the manifest is "
                     "damaged or was edited; nothing was read", mpath, u, (long long)at, (long long)numel);
            return -1;
        }
        total += shard;
    }
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(man, "files"), *f;
    int nf = 0, nkinds = 0;
    char kinds[8][32];
    cJSON_ArrayForEach(f, files)
    {
        const char *kind = sz_json_str(f, "kind", ""), *fname = sz_json_str(f, "name", "");
        int64_t r, bytes, crc;
        char want[64];
        if (!valid_kind(kind)) {
            snprintf(err, errlen, "%s: files[%d].kind '%s' is not a state's name: the manifest is damaged or was "
                     "edited; nothing was read", mpath, nf, kind);
            return -1;
        }
        snprintf(field, sizeof field, "files[%d].rank", nf);
        if (man_int(mpath, f, "rank", field, 0, (double)nd - 1, &r, err, errlen) != 0)
            return -1;
        file_name(want, sizeof want, kind, (int)r);
        if (strcmp(fname, want)) {
            snprintf(err, errlen, "%s: files[%d].name is '%s', expected '%s' for %s of rank %lld: the manifest is "
                     "damaged or was edited; nothing was read", mpath, nf, fname, want, kind, (long long)r);
            return -1;
        }
        snprintf(field, sizeof field, "files[%d].bytes", nf);
        if (man_int(mpath, f, "bytes", field, 0, big, &bytes, err, errlen) != 0)
            return -1;
        if (bytes != total * (int64_t)sizeof(float)) {
            snprintf(err, errlen, "%s: files[%d].bytes is %lld, but its units' shards are %lld floats (%lld bytes): "
                     "the manifest is damaged or was edited; nothing was read", mpath, nf, (long long)bytes,
                     (long long)total, (long long)total * 4);
            return -1;
        }
        snprintf(field, sizeof field, "files[%d].crc32", nf);
        if (man_int(mpath, f, "crc32", field, 0, 4294967295.0, &crc, err, errlen) != 0)
            return -1;
        int seen = 0, twice = 0;
        const cJSON *g;
        cJSON_ArrayForEach(g, files) /* one file per (kind, rank) */
            if (g != f && !strcmp(sz_json_str(g, "kind", ""), kind) && sz_json_num(g, "rank", -1) == (double)r)
                twice = 1;
        if (twice) {
            snprintf(err, errlen, "%s: files lists %s of rank %lld twice: the manifest is damaged or was edited; "
                     "nothing was read", mpath, kind, (long long)r);
            return -1;
        }
        for (int k = 0; k < nkinds; k++)
            seen |= !strcmp(kinds[k], kind);
        if (!seen && nkinds < 8)
            snprintf(kinds[nkinds++], sizeof kinds[0], "%s", kind);
        else if (!seen) {
            snprintf(err, errlen, "%s: files names more than 8 kinds of state: the manifest is damaged; nothing was "
                     "read", mpath);
            return -1;
        }
        nf++;
    }
    if (nkinds < 1 || nf != nkinds * nd) {
        snprintf(err, errlen, "%s: files lists %d file(s) of %d kind(s), but N_d %lld ranks each write one of every "
                 "kind: the manifest is damaged or was edited; nothing was read", mpath, nf, nkinds, (long long)nd);
        return -1;
    }
    return 0;
}

sz_status sz_state_manifest(const char *stepdir, cJSON **out, char *note, size_t notelen, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    if (note && notelen)
        note[0] = 0;
    if (is_tmp_step(stepdir)) {
        snprintf(err, errlen, "%s: the temporary directory of an unfinished save: not a training state", stepdir);
        return SZ_ERR_FORMAT;
    }
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    size_t len = 0;
    char *text = slurp(path, &len);
    if (!text) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return SZ_ERR_IO;
    }
    cJSON *man = cJSON_Parse(text);
    free(text);
    if (!man || !cJSON_IsObject(man)) {
        snprintf(err, errlen, "%s: not valid JSON (damaged, or cut short)", path);
        cJSON_Delete(man);
        return SZ_ERR_FORMAT;
    }
    const char *fmt = sz_json_str(man, "format", "");
    int version = (int)sz_json_num(man, "version", -1);
    if (strcmp(fmt, SZ_STATE_FORMAT) || version < 1 || version > SZ_STATE_VERSION) {
        snprintf(err, errlen, "%s: format '%s' version %d, expected '%s' version 1 .. %d", path, fmt, version,
                 SZ_STATE_FORMAT, SZ_STATE_VERSION);
        cJSON_Delete(man);
        return SZ_ERR_FORMAT;
    }
    cJSON *crc = cJSON_DetachItemFromObjectCaseSensitive(man, MANIFEST_CRC);
    uint32_t got = 0;
    if (version >= 2 && !cJSON_IsNumber(crc)) {
        snprintf(err, errlen, "%s: version %d manifest without its %s: damaged or edited; nothing was read", path,
                 version, MANIFEST_CRC);
        cJSON_Delete(crc);
        cJSON_Delete(man);
        return SZ_ERR_FORMAT;
    }
    if (cJSON_IsNumber(crc) && (manifest_crc(man, &got) != 0 || (double)got != crc->valuedouble)) {
        snprintf(err, errlen, "%s: checksum crc32 %u of the manifest, it says %.0f: the manifest was damaged or "
                 "changed after it was written; nothing was read", path, got, crc->valuedouble);
        cJSON_Delete(crc);
        cJSON_Delete(man);
        return SZ_ERR_FORMAT;
    }
    if (crc)
        cJSON_AddItemToObject(man, MANIFEST_CRC, crc);
    else if (note && notelen)
        snprintf(note, notelen, "note: %s was written by an older StarZeRO (manifest version %d: no checksum of its "
                 "own, no run id): its layout is checked, its files by their checksums", path, version);
    if (check_layout(stepdir, path, man, err, errlen) != 0) {
        cJSON_Delete(man);
        return SZ_ERR_FORMAT;
    }
    *out = man;
    return SZ_OK;
}

sz_status sz_state_reseal(const char *stepdir, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    cJSON *man = read_json(path);
    if (!man || strcmp(sz_json_str(man, "format", ""), SZ_STATE_FORMAT)) {
        snprintf(err, errlen, "%s: not a training state's manifest (missing, not JSON, or another format)", path);
        cJSON_Delete(man);
        return SZ_ERR_IO;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(man, MANIFEST_CRC);
    uint32_t c = 0;
    int rc = manifest_crc(man, &c);
    cJSON_AddNumberToObject(man, MANIFEST_CRC, c);
    char *text = rc == 0 ? cJSON_Print(man) : NULL;
    cJSON_Delete(man);
    rc = text ? write_atomic(stepdir, "manifest.json", text, err, errlen) : -1;
    if (!text)
        snprintf(err, errlen, "%s: out of memory", path);
    free(text);
    return rc ? SZ_ERR_IO : SZ_OK;
}

/* The manifest's file entry for (kind, rank), or NULL. */
static const cJSON *file_entry(const cJSON *man, const char *kind, int rank)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(man, "files"))
        if (!strcmp(sz_json_str(f, "kind", ""), kind) && (int)sz_json_num(f, "rank", -1) == rank)
            return f;
    return NULL;
}

/* Which tensor element i of rank `rank`'s shard file is (the layout was checked): "tensor fcw of
 * unit block1, element 17" or "the padding of unit block1". */
static void locate(const cJSON *man, int rank, size_t i, char *buf, size_t n)
{
    const cJSON *su;
    int64_t at = 0;
    cJSON_ArrayForEach(su, cJSON_GetObjectItemCaseSensitive(man, "units"))
    {
        int64_t shard = (int64_t)sz_json_num(su, "shard", 0);
        if ((int64_t)i < at + shard) {
            int64_t e = (int64_t)rank * shard + ((int64_t)i - at);
            const cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(su, "params"))
            {
                int64_t off = (int64_t)sz_json_num(p, "offset", 0), pn = (int64_t)sz_json_num(p, "numel", 0);
                if (e >= off && e < off + pn) {
                    snprintf(buf, n, "tensor %s of unit %s, element %lld", sz_json_str(p, "name", "?"),
                             sz_json_str(su, "name", "?"), (long long)(e - off));
                    return;
                }
            }
            snprintf(buf, n, "the padding of unit %s (element %lld)", sz_json_str(su, "name", "?"), (long long)e);
            return;
        }
        at += shard;
    }
    snprintf(buf, n, "element %zu of the file", i);
}

/* Reads the whole shard file of (kind, rank), checking its size and crc32 against the manifest and
 * that every value is finite. */
static float *read_shard(const char *stepdir, const cJSON *man, const char *kind, int rank, size_t *nfloats,
                         char *err, size_t errlen)
{
    const cJSON *f = file_entry(man, kind, rank);
    if (!f) {
        snprintf(err, errlen, "%s: the manifest lists no %s file for rank %d%s", stepdir, kind, rank,
                 !strcmp(kind, "master") ? " (the state was saved at fp32: resume it at --precision fp32)" : "");
        return NULL;
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", stepdir, sz_json_str(f, "name", ""));
    size_t len = 0;
    char *buf = slurp(path, &len);
    if (!buf) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    double want = sz_json_num(f, "bytes", -1), crc = sz_json_num(f, "crc32", -1);
    if ((double)len != want) {
        snprintf(err, errlen, "%s: %zu bytes, the manifest says %.0f", path, len, want);
        free(buf);
        return NULL;
    }
    uint32_t got = crc_of(buf, len);
    if ((double)got != crc) {
        snprintf(err, errlen, "%s: checksum crc32 %u, the manifest says %.0f: the file is damaged", path, got, crc);
        free(buf);
        return NULL;
    }
    const float *p = (const float *)buf;
    size_t n = len / sizeof(float);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) {
            char where[256];
            locate(man, rank, i, where, sizeof where);
            snprintf(err, errlen, "%s: %s of %s holds %s: a state with non-finite values is refused (saved by a "
                     "run that diverged, e.g. under --allow-nonfinite)", path, kind, where,
                     isnan(p[i]) ? "NaN" : p[i] > 0 ? "inf" : "-inf");
            free(buf);
            return NULL;
        }
    *nfloats = n;
    return (float *)buf;
}

sz_status sz_state_verify(const char *stepdir, const cJSON *man, FILE *out, char *err, size_t errlen)
{
    const cJSON *f;
    int bad = 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(man, "files"))
    {
        size_t n;
        char e[1024];
        float *p = read_shard(stepdir, man, sz_json_str(f, "kind", ""), (int)sz_json_num(f, "rank", -1), &n, e,
                              sizeof e);
        if (out)
            fprintf(out, "  %-20s %12.0f bytes  crc32 %10.0f  %s\n", sz_json_str(f, "name", "?"),
                    sz_json_num(f, "bytes", 0), sz_json_num(f, "crc32", 0), p ? "ok, finite" : e);
        if (!p && !bad) {
            snprintf(err, errlen, "%s", e);
            bad = 1;
        }
        free(p);
    }
    return bad ? SZ_ERR_FORMAT : SZ_OK;
}

/* Saved layout (checked by sz_state_manifest): the shard size of every unit and each unit's offset
 * in a shard file. */
static int saved_layout(const cJSON *man, int64_t **shard, int64_t **at, int *nunits)
{
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(man, "units");
    int n = cJSON_GetArraySize(units);
    *shard = calloc((size_t)n + 1, sizeof **shard);
    *at = calloc((size_t)n + 1, sizeof **at);
    if (!*shard || !*at)
        return -1;
    int64_t off = 0;
    for (int u = 0; u < n; u++) {
        (*shard)[u] = (int64_t)sz_json_num(cJSON_GetArrayItem(units, u), "shard", 0);
        (*at)[u] = off;
        off += (*shard)[u];
    }
    *nunits = n;
    return 0;
}

sz_status sz_state_read_units(const char *stepdir, const cJSON *man, const char *kind, float **out, char *err,
                        size_t errlen)
{
    int64_t *shard, *at;
    int nu, nd = (int)sz_json_num(man, "nd", 0);
    if (saved_layout(man, &shard, &at, &nu) != 0 || nd < 1) {
        snprintf(err, errlen, "%s: the manifest has no units or no N_d", stepdir);
        free(shard);
        free(at);
        return SZ_ERR_FORMAT;
    }
    int rc = 0;
    for (int r = 0; r < nd && rc == 0; r++) { /* each shard file once */
        size_t n;
        float *p = read_shard(stepdir, man, kind, r, &n, err, errlen);
        if (!p || (nu > 0 && (int64_t)n < at[nu - 1] + shard[nu - 1])) {
            if (p)
                snprintf(err, errlen, "%s: rank %d's %s file is shorter than its units", stepdir, r, kind);
            rc = -1;
        }
        for (int u = 0; u < nu && rc == 0; u++)
            memcpy(out[u] + (size_t)r * shard[u], p + at[u], (size_t)shard[u] * sizeof(float));
        free(p);
    }
    free(shard);
    free(at);
    return rc ? SZ_ERR_FORMAT : SZ_OK;
}

/* The model's tensors of unit u against the manifest's (names, offsets, sizes). */
static int check_unit_params(const sz_model *m, int u, const cJSON *su, const char *stepdir, char *err,
                             size_t errlen)
{
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(su, "params");
    int np = sz_model_unit_nparams(m, u);
    if (cJSON_GetArraySize(ps) != np) {
        snprintf(err, errlen, "%s: unit %d (%s) has %d tensors in the state, %d in the model", stepdir, u,
                 sz_json_str(su, "name", "?"), cJSON_GetArraySize(ps), np);
        return -1;
    }
    for (int j = 0; j < np; j++) {
        const cJSON *p = cJSON_GetArrayItem(ps, j);
        const char *name;
        int64_t off, numel;
        sz_model_unit_param_info(m, u, j, &name, &off, &numel);
        if (strcmp(sz_json_str(p, "name", ""), name) || (int64_t)sz_json_num(p, "offset", -1) != off ||
            (int64_t)sz_json_num(p, "numel", -1) != numel) {
            snprintf(err, errlen, "%s: units[%d].params[%d] is '%s' at offset %.0f of %.0f elements in the state, "
                     "'%s' at %lld of %lld in the model (unit %s)", stepdir, u, j, sz_json_str(p, "name", "?"),
                     sz_json_num(p, "offset", -1), sz_json_num(p, "numel", -1), name, (long long)off,
                     (long long)numel, sz_json_str(su, "name", "?"));
            return -1;
        }
    }
    return 0;
}

sz_status sz_state_load(sz_model *m, sz_context *ctx, const char *stepdir, const cJSON *man, char *err, size_t errlen)
{
    int64_t *shard = NULL, *at = NULL;
    int nu = 0, nd = (int)sz_json_num(man, "nd", 0), failed = 0;
    err[0] = 0;
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(man, "units");
    if (saved_layout(man, &shard, &at, &nu) != 0 || nd < 1) {
        snprintf(err, errlen, "%s: the manifest has no units or no N_d", stepdir);
        failed = 1;
    } else if (nu != sz_model_nunits(m)) {
        snprintf(err, errlen, "%s: the state has %d units, the model %d: another architecture or depth", stepdir, nu,
                 sz_model_nunits(m));
        failed = 1;
    }
    /* the optimizer: a state saved by another one does not carry over (states without the field
     * were saved by AdamW, the only optimizer then) */
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(man, "optimizer");
    const char *saved_opt = sz_json_str(op, "name", "adamw");
    if (!failed && strcasecmp(saved_opt, sz_model_optimizer_name(m))) {
        snprintf(err, errlen, "%s: the state was saved by optimizer %s, this run trains with %s (field optimizer.name): "
                 "one optimizer's state cannot continue another's; resume with --optimizer %s", stepdir, saved_opt,
                 sz_model_optimizer_name(m), saved_opt);
        failed = 1;
    }
    for (int k = SZ_STATE_OPT0; k <= SZ_STATE_OPT1 && !failed; k++)
        if (sz_model_state_has(m, (sz_state_kind)k) && !file_entry(man, sz_model_state_name(m, (sz_state_kind)k), 0)) {
            snprintf(err, errlen, "%s: the state has no %s (saved by %s without it%s); this run needs it", stepdir,
                     sz_model_state_name(m, (sz_state_kind)k), saved_opt,
                     !strcmp(saved_opt, "sgd") ? ": SGD at momentum 0 keeps none, resume with --momentum 0" : "");
            failed = 1;
        }
    const cJSON *sn;
    cJSON_ArrayForEach(sn, cJSON_GetObjectItemCaseSensitive(op, "states"))
    {
        int kept = 0;
        for (int k = SZ_STATE_OPT0; k <= SZ_STATE_OPT1; k++)
            kept |= cJSON_IsString(sn) && sz_model_state_has(m, (sz_state_kind)k) &&
                    !strcmp(sn->valuestring, sz_model_state_name(m, (sz_state_kind)k));
        if (!failed && !kept) {
            snprintf(err, errlen, "%s: the state holds %s, which this run keeps none of and would drop%s", stepdir,
                     cJSON_IsString(sn) ? sn->valuestring : "?",
                     !strcmp(saved_opt, "sgd") ? " (SGD at momentum 0): resume with the momentum it was saved with" : "");
            failed = 1;
        }
    }
    for (int u = 0; u < nu && !failed; u++) {
        const cJSON *su = cJSON_GetArrayItem(units, u);
        const char *name;
        int64_t numel;
        sz_model_state_shard(m, u, &name, &numel, NULL, NULL, NULL);
        if (strcmp(sz_json_str(su, "name", ""), name) || (int64_t)sz_json_num(su, "numel", -1) != numel) {
            snprintf(err, errlen, "%s: unit %d is '%s' of %.0f elements in the state, '%s' of %lld in the model",
                     stepdir, u, sz_json_str(su, "name", "?"), sz_json_num(su, "numel", -1), name, (long long)numel);
            failed = 1;
        } else if (check_unit_params(m, u, su, stepdir, err, errlen) != 0)
            failed = 1;
    }
    for (int k = 0; k < SZ_STATE_NKINDS && !failed; k++) {
        if (!sz_model_state_has(m, (sz_state_kind)k))
            continue;
        const char *kind = sz_model_state_name(m, (sz_state_kind)k);
        for (int r = 0; r < nd && !failed; r++) {
            /* does any unit's holding on this rank overlap saved rank r's slice? */
            int wanted = 0;
            for (int u = 0; u < nu && !wanted; u++) {
                int64_t lo, n;
                sz_model_state_need(m, u, (sz_state_kind)k, &lo, &n);
                wanted = lo < (r + 1) * shard[u] && r * shard[u] < lo + n;
            }
            if (!wanted)
                continue;
            size_t nf;
            float *p = read_shard(stepdir, man, kind, r, &nf, err, errlen);
            if (!p) {
                failed = 1;
                break;
            }
            for (int u = 0; u < nu && !failed; u++) {
                int64_t numel;
                sz_model_state_shard(m, u, NULL, &numel, NULL, NULL, NULL);
                int64_t lo = r * shard[u], hi = lo + shard[u];
                hi = hi < numel ? hi : numel; /* padding stays as the model has it (zero) */
                if (lo >= hi)
                    continue;
                if ((int64_t)nf < at[u] + (hi - lo) ||
                    sz_model_state_write(m, u, (sz_state_kind)k, lo, hi - lo, p + at[u]) != SZ_OK) {
                    snprintf(err, errlen, "%s: loading %s of unit %d from rank %d's shard failed", stepdir, kind, u, r);
                    failed = 1;
                }
            }
            free(p);
        }
    }
    free(shard);
    free(at);
    return agree(ctx, failed, err, errlen) ? SZ_ERR_FORMAT : SZ_OK;
}
