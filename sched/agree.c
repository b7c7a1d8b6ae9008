/* sched/agree.c — the ranks agree before anything is allocated (docs/ARCHITECTURE.md, failures). Every
 * rank lists the settings that must be equal everywhere (name, value as text); one all-reduce of
 * a 64-bit hash per setting (its minimum and maximum over ranks) finds the first that differs,
 * then the ranks' texts of that one setting are gathered so that every rank prints the same
 * message naming it and each rank's value. A mismatch is SZ_ERR_INVALID on every rank. The
 * collectives wait under the deadline (sched/deadline.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_deadline.h"
#include "sz_runtime.h"

struct sz_settings {
    int n, cap;
    char **name, **value;
};

sz_status sz_settings_init(sz_settings **out)
{
    if (!out)
        return SZ_ERR_INVALID;
    *out = calloc(1, sizeof **out);
    return *out ? SZ_OK : SZ_ERR_NOMEM;
}

void sz_settings_free(sz_settings *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++) {
        free(s->name[i]);
        free(s->value[i]);
    }
    free(s->name);
    free(s->value);
    free(s);
}

int sz_settings_count(const sz_settings *s) { return s ? s->n : 0; }

sz_status sz_settings_add(sz_settings *s, const char *name, const char *fmt, ...)
{
    if (!s || !name || !fmt)
        return SZ_ERR_INVALID;
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 32;
        char **a = realloc(s->name, (size_t)nc * sizeof *a);
        if (a)
            s->name = a;
        char **b = a ? realloc(s->value, (size_t)nc * sizeof *b) : NULL;
        if (!b)
            return SZ_ERR_NOMEM;
        s->value = b;
        s->cap = nc;
    }
    va_list ap;
    va_start(ap, fmt);
    char *v = NULL;
    int len = vasprintf(&v, fmt, ap);
    va_end(ap);
    char *nm = strdup(name);
    if (len < 0 || !nm) {
        free(nm);
        if (len >= 0)
            free(v);
        return SZ_ERR_NOMEM;
    }
    s->name[s->n] = nm;
    s->value[s->n] = v;
    s->n++;
    return SZ_OK;
}

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t setting_hash(const sz_settings *s, int i)
{
    if (i >= s->n)
        return 0; /* a setting this rank does not have */
    uint64_t h = fnv(14695981039346656037ull, s->name[i], strlen(s->name[i]) + 1);
    h = fnv(h, s->value[i], strlen(s->value[i]));
    return h ? h : 1;
}

/* "0-3, 5, 7-8": the ranks r with same[r] */
static size_t rank_list(char *out, size_t len, const int *same, int nd)
{
    size_t n = 0;
    for (int r = 0; r < nd && n + 24 < len; r++) {
        if (!same[r])
            continue;
        int e = r;
        while (e + 1 < nd && same[e + 1])
            e++;
        /* ranks on several nodes: a run never spans two nodes, and names its node */
        const char *h = sz_rank_host(r);
        for (int q = r + 1; h && q <= e; q++)
            if (strcmp(sz_rank_host(q), h)) {
                e = q - 1;
                break;
            }
        n += (size_t)snprintf(out + n, len - n, "%s%d", n ? ", " : "", r);
        if (e > r)
            n += (size_t)snprintf(out + n, len - n, "%s%d", e == r + 1 ? ", " : "-", e);
        if (h)
            n += (size_t)snprintf(out + n, len - n, " (on %s)", h);
        r = e;
    }
    return n;
}

/* The message for the first differing setting, from every rank's "name\037value" text:
 * "<what>: the ranks disagree on <name>: <v1> on rank 0; <v2> on ranks 1-3". */
static void describe(char *msg, size_t len, const char *what, const char *texts, const int *offs, int nd)
{
    int same_name = 1;
    const char *n0 = texts + offs[0];
    size_t l0 = strcspn(n0, "\037");
    for (int r = 1; r < nd; r++) {
        const char *t = texts + offs[r];
        if (strcspn(t, "\037") != l0 || strncmp(t, n0, l0))
            same_name = 0;
    }
    size_t n = same_name ? (size_t)snprintf(msg, len, "%s: the ranks disagree on %.*s:", what, (int)l0, n0)
                         : (size_t)snprintf(msg, len, "%s: the ranks' lists of settings differ:", what);
    int *done = calloc((size_t)nd, sizeof *done), *same = calloc((size_t)nd, sizeof *same);
    for (int r = 0; done && same && r < nd && n + 64 < len; r++) {
        if (done[r])
            continue;
        const char *t = texts + offs[r], *v = strchr(t, '\037');
        int count = 0;
        for (int q = 0; q < nd; q++) {
            same[q] = !done[q] && !strcmp(texts + offs[q], t);
            done[q] |= same[q];
            count += same[q];
        }
        n += (size_t)snprintf(msg + n, len - n, "%s ", r ? ";" : "");
        if (!same_name)
            n += (size_t)snprintf(msg + n, len - n, "%.*s = ", (int)strcspn(t, "\037"), t);
        n += (size_t)snprintf(msg + n, len - n, "%s on rank%s ", v ? v + 1 : "(not set)", count > 1 ? "s" : "");
        if (n < len)
            n += rank_list(msg + n, len - n, same, nd);
    }
    free(done);
    free(same);
}

sz_status sz_context_agree(sz_context *ctx, const sz_settings *s, const char *what, char *msg, size_t msglen)
{
    if (!ctx || !s)
        return SZ_ERR_INVALID;
    if (msg && msglen)
        msg[0] = 0;
    if (!what)
        what = "settings";
    int nd = ctx->world_size;
    if (nd == 1)
        return SZ_OK;
    MPI_Comm comm = ctx->host_comm;
    /* how many settings (min and max over ranks), then each one's hash */
    int64_t cnt[2] = {s->n, -(int64_t)s->n};
    if (sz_allreduce(MPI_IN_PLACE, cnt, 2, MPI_INT64_T, MPI_MIN, comm, "agreement: setting count") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    int nmax = (int)-cnt[1];
    uint64_t *h = malloc(sizeof *h * 2 * (size_t)(nmax ? nmax : 1));
    if (!h)
        return SZ_ERR_NOMEM; /* (the others then wait for us until the deadline) */
    for (int i = 0; i < nmax; i++) {
        h[2 * i] = setting_hash(s, i);
        h[2 * i + 1] = ~h[2 * i];
    }
    int rc = nmax ? sz_allreduce(MPI_IN_PLACE, h, 2 * nmax, MPI_UINT64_T, MPI_MIN, comm, "agreement: setting hashes")
                  : MPI_SUCCESS;
    int first = -1;
    for (int i = 0; rc == MPI_SUCCESS && i < nmax && first < 0; i++)
        if (h[2 * i] != ~h[2 * i + 1]) /* min != max */
            first = i;
    free(h);
    if (rc != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    if (first < 0)
        return SZ_OK;
    /* everyone's text of that setting */
    char *mine = NULL;
    int len = first < s->n ? asprintf(&mine, "%s\037%s", s->name[first], s->value[first])
                           : asprintf(&mine, "(setting #%d)\037(not set: this rank has %d settings)", first + 1, s->n);
    if (len < 0)
        return SZ_ERR_NOMEM;
    len++; /* with its NUL */
    int *lens = malloc(sizeof *lens * (size_t)nd), *offs = malloc(sizeof *offs * (size_t)nd);
    char *texts = NULL;
    sz_status st = lens && offs ? SZ_OK : SZ_ERR_NOMEM;
    if (st == SZ_OK && sz_allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, comm, "agreement: text lengths") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    if (st == SZ_OK) {
        int total = 0;
        for (int r = 0; r < nd; r++)
            offs[r] = total, total += lens[r];
        if (!(texts = malloc((size_t)total)))
            st = SZ_ERR_NOMEM;
    }
    if (st == SZ_OK && sz_allgatherv(mine, len, MPI_CHAR, texts, lens, offs, MPI_CHAR, comm, "agreement: texts") !=
                           MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    if (st == SZ_OK) {
        char buf[2048];
        describe(buf, sizeof buf, what, texts, offs, nd);
        sz_context_log(ctx, SZ_LOG_ERROR, "%s", buf);
        if (msg && msglen)
            snprintf(msg, msglen, "%s", buf);
        st = SZ_ERR_INVALID;
    }
    free(mine);
    free(lens);
    free(offs);
    free(texts);
    return st;
}
