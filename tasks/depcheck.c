/* tasks/depcheck.c — a check mode for the step plan's waits (graph/sz_plan.h): while a step is
 * submitted, every data access of every task (and every invalidation) is recorded against the
 * plan action that submitted it, with the handle's last writer and its readers since, as StarPU's
 * sequential consistency orders them. At the step's end the observed dependencies between actions
 * are compared with the plan's waits (sz_plan_check_deps): the waits must cover every observed one
 * and every wait between the engine's own accesses must be observed. The ordering token and the
 * reduce-scatter's scratch buffer order tasks without carrying data between them: left out.
 * Off unless a test turns it on (sz_model_depcheck) or SZ_CHECK_WAITS=1 is set when the model is
 * finalized; then a step whose dependencies leave the plan fails its sz_model_update with
 * SZ_ERR_STATE and the first violation logged. It costs a search per access. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"

struct dc_handle {
    starpu_data_handle_t h;
    int gen, writer;          /* writer: action of this step (-1: before the step, or outside actions) */
    int *readers;
    int nreaders, cap;
};

struct sz_depcheck {
    int gen;                  /* steps begun */
    int active, invalid;      /* inside a step; the plan changed under it (not checked) */
    int action;               /* the action submitting now (-1: none of the step plan's) */
    int n, clip;              /* the step plan's size and clipping when the step began */
    unsigned char *dep;       /* n * n: dep[k * n + j], action k depends on action j */
    struct dc_handle *hs;
    int nh, caph;
    int steps, violations, ndeps;
    char msg[512];
};

sz_status sz_model_depcheck(struct sz_model *m, int on)
{
    if (!m)
        return SZ_ERR_INVALID;
    struct sz_depcheck *d = m->depcheck;
    if (!on) {
        if (d) {
            for (int i = 0; i < d->nh; i++)
                free(d->hs[i].readers);
            free(d->hs);
            free(d->dep);
            free(d);
        }
        m->depcheck = NULL;
        m->core.on_access = NULL;
        return SZ_OK;
    }
    if (d)
        return SZ_OK;
    d = calloc(1, sizeof *d);
    if (!d)
        return SZ_ERR_NOMEM;
    d->action = -1;
    m->depcheck = d;
    m->core.on_access = sz_depcheck_access;
    return SZ_OK;
}

int sz_model_depcheck_result(const struct sz_model *m, int *steps, int *ndeps, char *msg, size_t len)
{
    const struct sz_depcheck *d = m ? m->depcheck : NULL;
    if (!d)
        return -1;
    if (steps)
        *steps = d->steps;
    if (ndeps)
        *ndeps = d->ndeps;
    if (msg && len)
        snprintf(msg, len, "%s", d->msg);
    return d->violations;
}

const unsigned char *sz_model_depcheck_deps(const struct sz_model *m, int *n)
{
    const struct sz_depcheck *d = m ? m->depcheck : NULL;
    if (!d || !d->dep || d->invalid)
        return NULL;
    *n = d->n;
    return d->dep;
}

static struct dc_handle *find(struct sz_depcheck *d, starpu_data_handle_t h)
{
    for (int i = 0; i < d->nh; i++)
        if (d->hs[i].h == h)
            return &d->hs[i];
    if (d->nh == d->caph) {
        int cap = d->caph ? 2 * d->caph : 256;
        struct dc_handle *x = realloc(d->hs, (size_t)cap * sizeof *x);
        if (!x)
            return NULL;
        d->hs = x;
        d->caph = cap;
    }
    struct dc_handle *x = &d->hs[d->nh++];
    memset(x, 0, sizeof *x);
    x->h = h;
    x->gen = d->gen;
    x->writer = -1;
    return x;
}

void sz_depcheck_access(struct sz_core *c, starpu_data_handle_t h, int write)
{
    struct sz_model *m = (struct sz_model *)c; /* the core is the model's first member */
    struct sz_depcheck *d = m ? m->depcheck : NULL;
    if (!d || (m->token && h == m->token->h) || (m->comm_buf && h == m->comm_buf->h))
        return;
    struct dc_handle *x = find(d, h);
    if (!x) {
        d->invalid = 1;
        return;
    }
    if (x->gen != d->gen) { /* what happened before this step is not the plan's */
        x->gen = d->gen;
        x->writer = -1;
        x->nreaders = 0;
    }
    int k = d->active && !d->invalid ? d->action : -1;
    if (k < 0) {
        if (write)
            x->writer = -1, x->nreaders = 0;
        return;
    }
    if (x->writer >= 0 && x->writer != k)
        d->dep[(size_t)k * (size_t)d->n + (size_t)x->writer] = 1;
    if (write) {
        for (int r = 0; r < x->nreaders; r++)
            if (x->readers[r] != k)
                d->dep[(size_t)k * (size_t)d->n + (size_t)x->readers[r]] = 1;
        x->writer = k;
        x->nreaders = 0;
        return;
    }
    if (x->nreaders && x->readers[x->nreaders - 1] == k)
        return;
    if (x->nreaders == x->cap) {
        int cap = x->cap ? 2 * x->cap : 8;
        int *r = realloc(x->readers, (size_t)cap * sizeof *r);
        if (!r) {
            d->invalid = 1;
            return;
        }
        x->readers = r;
        x->cap = cap;
    }
    x->readers[x->nreaders++] = k;
}

void sz_depcheck_run_begin(struct sz_model *m, const sz_plan *p, int from)
{
    struct sz_depcheck *d = m->depcheck;
    if (!d)
        return;
    if (p != &m->step_plan) { /* an evaluation pass: outside the step */
        d->action = -1;
        return;
    }
    if (from == 0) {
        d->gen++;
        d->active = 1;
        d->invalid = 0;
        d->n = p->n;
        d->clip = p->cfg.clip;
        free(d->dep);
        d->dep = calloc((size_t)p->n * (size_t)p->n + 1, 1);
        if (!d->dep)
            d->invalid = 1;
    } else if (!d->active || p->n != d->n || p->cfg.clip != d->clip) {
        d->invalid = 1; /* the plan was rebuilt within the step (the clipping changed) */
    }
}

void sz_depcheck_action(struct sz_model *m, const sz_plan *p, int k)
{
    struct sz_depcheck *d = m->depcheck;
    if (d)
        d->action = p == &m->step_plan ? k : -1;
}

int sz_depcheck_run_end(struct sz_model *m, const sz_plan *p, int to)
{
    struct sz_depcheck *d = m->depcheck;
    if (!d)
        return 0;
    d->action = -1;
    if (p != &m->step_plan || to != p->n || !d->active)
        return 0;
    d->active = 0;
    if (d->invalid)
        return 0;
    char msg[512];
    int bad = sz_plan_check_deps(p, d->dep, msg, sizeof msg);
    d->steps++;
    d->ndeps = 0;
    for (size_t i = 0; i < (size_t)d->n * (size_t)d->n; i++)
        d->ndeps += d->dep[i];
    if (bad && !d->violations)
        snprintf(d->msg, sizeof d->msg, "%s", msg);
    d->violations += bad;
    if (bad)
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "step %d: the tasks' data dependencies leave the plan's waits (%d "
                       "violations): %s", m->steps_done + 1, bad, msg);
    return bad;
}
