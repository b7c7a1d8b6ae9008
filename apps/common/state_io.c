/* apps/common/state_io.c — the training-state directory (see state_io.h): sharded files written
 * in parallel, a manifest written last, temporary name + fsync + rename, DIR/latest, --keep,
 * and the re-sharding loader. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "state_io.h"

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
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

int sz_state_save(sz_model *m, sz_context *ctx, const char *dir, int step, cJSON *app, int keep, int delay_ms,
                  char *where, size_t wlen, char *err, size_t errlen)
{
    int rank = sz_context_rank(ctx), nd = sz_context_world_size(ctx), nu = sz_model_nunits(m), failed = 0;
    char tmp[PATH_MAX], final[PATH_MAX], path[PATH_MAX + 64], name[64];
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%08d", dir, step);
    snprintf(final, sizeof final, "%s/step-%08d", dir, step);
    err[0] = 0;
    if (rank == 0) { /* leftovers of an interrupted save go first */
        char **names;
        int n = list_prefixed(dir, ".tmp-step-", &names);
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            remove_tree(path);
        }
        free_list(names, n);
        if (mkdir(tmp, 0755) != 0) {
            snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
            failed = 1;
        }
    }
    if (agree(ctx, failed, err, errlen) != 0) {
        cJSON_Delete(app);
        return -1;
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
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
        return -1;
    }
    /* rank 0: the manifest last, then the rename that makes the step visible, then latest */
    if (rank == 0) {
        if (delay_ms > 0) {
            printf("saving %s: shards written, pausing %d ms before the manifest (pid %d)\n", final, delay_ms, (int)getpid());
            fflush(stdout);
            nanosleep(&(struct timespec){delay_ms / 1000, (delay_ms % 1000) * 1000000L}, NULL);
        }
        cJSON *man = app && cJSON_IsObject(app) ? app : cJSON_CreateObject();
        if (man != app)
            cJSON_Delete(app);
        cJSON_AddStringToObject(man, "format", SZ_STATE_FORMAT);
        cJSON_AddNumberToObject(man, "version", SZ_STATE_VERSION);
        cJSON_AddNumberToObject(man, "step", step);
        cJSON_AddNumberToObject(man, "nd", nd);
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
        char *text = cJSON_Print(man);
        cJSON_Delete(man);
        snprintf(path, sizeof path, "%s/manifest.json", tmp);
        if (!text || write_file(path, text, strlen(text), err, errlen) != 0)
            failed = 1;
        free(text);
        if (!failed) {
            remove_tree(final); /* a state saved again at the same step replaces the old one */
            if (fsync_path(tmp) != 0 || rename(tmp, final) != 0 || fsync_path(dir) != 0) {
                snprintf(err, errlen, "%s: cannot move the complete state into place: %s", final, strerror(errno));
                failed = 1;
            }
        }
        if (!failed) {
            char latest[PATH_MAX + 16], ltmp[PATH_MAX + 16], line[32];
            snprintf(latest, sizeof latest, "%s/latest", dir);
            snprintf(ltmp, sizeof ltmp, "%s/.latest.tmp", dir);
            snprintf(line, sizeof line, "step-%08d\n", step);
            if (write_file(ltmp, line, strlen(line), err, errlen) != 0 || rename(ltmp, latest) != 0 ||
                fsync_path(dir) != 0) {
                snprintf(err, errlen, "%s: cannot update: %s", latest, strerror(errno));
                failed = 1;
            }
        }
        if (!failed && keep > 0) { /* the newest `keep` stay */
            char **names;
            int n = list_prefixed(dir, "step-", &names);
            for (int i = 0; i + keep < n; i++) {
                snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                remove_tree(path);
            }
            free_list(names, n);
        }
    }
    free(info);
    if (agree(ctx, failed, err, errlen) != 0)
        return -1;
    snprintf(where, wlen, "%s", final);
    return 0;
}

int sz_state_find(const char *dir, char *stepdir, size_t len, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    struct stat st;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (stat(path, &st) == 0) {
        snprintf(stepdir, len, "%s", dir);
        return 0;
    }
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    char line[64] = "";
    if (f) {
        if (fgets(line, sizeof line, f))
            line[strcspn(line, "\r\n")] = 0;
        fclose(f);
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, line);
        if (line[0] && !strchr(line, '/') && stat(path, &st) == 0) {
            snprintf(stepdir, len, "%s/%s", dir, line);
            return 0;
        }
    }
    char **names;
    int n = list_prefixed(dir, "step-", &names);
    for (int i = n - 1; i >= 0; i--) { /* newest complete one */
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, names[i]);
        if (stat(path, &st) == 0) {
            snprintf(stepdir, len, "%s/%s", dir, names[i]);
            free_list(names, n);
            return 0;
        }
    }
    free_list(names, n);
    snprintf(err, errlen, "%s: no complete training state in it (no manifest.json, no step-* directory with one)",
             dir);
    return -1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
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

int sz_state_manifest(const char *stepdir, cJSON **out, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    size_t len = 0;
    char *text = slurp(path, &len);
    if (!text) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    cJSON *man = cJSON_Parse(text);
    free(text);
    if (!man) {
        snprintf(err, errlen, "%s: not valid JSON", path);
        return -1;
    }
    const char *fmt = sz_json_str(man, "format", "");
    int version = (int)sz_json_num(man, "version", -1);
    if (strcmp(fmt, SZ_STATE_FORMAT) || version != SZ_STATE_VERSION) {
        snprintf(err, errlen, "%s: format '%s' version %d, expected '%s' version %d", path, fmt, version,
                 SZ_STATE_FORMAT, SZ_STATE_VERSION);
        cJSON_Delete(man);
        return -1;
    }
    *out = man;
    return 0;
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

/* Reads the whole shard file of (kind, rank), checking its size and crc32 against the manifest. */
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
    *nfloats = len / sizeof(float);
    return (float *)buf;
}

int sz_state_verify(const char *stepdir, const cJSON *man, FILE *out, char *err, size_t errlen)
{
    const cJSON *f;
    int bad = 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(man, "files"))
    {
        size_t n;
        char e[700];
        float *p = read_shard(stepdir, man, sz_json_str(f, "kind", ""), (int)sz_json_num(f, "rank", -1), &n, e,
                              sizeof e);
        if (out)
            fprintf(out, "  %-20s %12.0f bytes  crc32 %10.0f  %s\n", sz_json_str(f, "name", "?"),
                    sz_json_num(f, "bytes", 0), sz_json_num(f, "crc32", 0), p ? "ok" : e);
        if (!p && !bad) {
            snprintf(err, errlen, "%s", e);
            bad = 1;
        }
        free(p);
    }
    return bad ? -1 : 0;
}

/* Saved layout: the shard size of every unit and each unit's offset in a shard file. */
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

int sz_state_read_units(const char *stepdir, const cJSON *man, const char *kind, float **out, char *err,
                        size_t errlen)
{
    int64_t *shard, *at;
    int nu, nd = (int)sz_json_num(man, "nd", 0);
    if (saved_layout(man, &shard, &at, &nu) != 0 || nd < 1) {
        snprintf(err, errlen, "%s: the manifest has no units or no N_d", stepdir);
        return -1;
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
    return rc;
}

int sz_state_load(sz_model *m, sz_context *ctx, const char *stepdir, const cJSON *man, char *err, size_t errlen)
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
        }
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
    return agree(ctx, failed, err, errlen);
}
