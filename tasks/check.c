/* tasks/check.c — the check mode (sz_zero_config.check, SZ_CHECK=1): the first step checks the
 * model's backward, derived or written by hand. (1) Every activation gradient — a tensor of the
 * model (sz_model_tensor, _activation, the derived backward's gradients) that no unit's forward
 * touches — is filled with NaN before the step's first backward; after each unit's backward, each
 * such tensor its ops touched must hold no NaN and its parameters' gradients must be finite: a
 * missing sz_op_zero before an op that adds, or an op writing part of a gradient, fails the step
 * naming the unit and the tensor (the task failure slot: the model call that waits for the task
 * returns SZ_ERR_INVALID). (2) In fp32 with one micro-batch, sampled parameters' gradients, reduced
 * over the ranks by the update, are compared with central finite differences of the mean loss over
 * every rank's batch (sz_model_eval), taken before the step's forward: a loss gradient scaled by
 * other than sz_unit_loss_scale (1/N instead of 1/(N·M·N_d)) shows as the ratio N_d·M. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"

struct check_args {
    char unit[32], what[48];
    int grad; /* 1: a parameter's gradient (must be finite); 0: an activation gradient (no NaN left) */
};

static void poison_cpu(void *b[], void *arg)
{
    const sz_task_layout *l = sz_task_layout_of(arg);
    memset(sz_task_ptr(b, arg, 0), 0xff, (size_t)l->numel[0] * sz_dtype_size((sz_dtype)l->dtype[0])); /* NaN */
}

static int bad(const void *p, int dtype, int64_t i, int nan_only)
{
    if (dtype == SZ_DTYPE_F32) {
        float v = ((const float *)p)[i];
        return nan_only ? isnan(v) : !isfinite(v);
    }
    uint16_t h = ((const uint16_t *)p)[i]; /* bf16 or f16: every exponent bit set */
    uint16_t e = dtype == SZ_DTYPE_BF16 ? 0x7f80 : 0x7c00, mant = dtype == SZ_DTYPE_BF16 ? 0x7f : 0x3ff;
    return (h & e) == e && (!nan_only || (h & mant));
}

static void scan_cpu(void *b[], void *arg)
{
    const struct check_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    const void *p = sz_task_ptr(b, arg, 0);
    int64_t n = l->numel[0], nbad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (bad(p, l->dtype[0], i, !a->grad) && nbad++ == 0)
            first = i;
    if (!nbad)
        return;
    if (a->grad)
        sz_task_fail(arg, "check mode: unit %s: the gradient of '%s' holds %lld non-finite values (the first at "
                     "element %lld) after its backward: an activation gradient its ops read was not written first, or "
                     "the loss overflowed", a->unit, a->what, (long long)nbad, (long long)first);
    else
        sz_task_fail(arg, "check mode: unit %s's backward left %lld of the %lld elements of '%s' unwritten (the first "
                     "at %lld; it was filled with NaN before): an op added into it before anything wrote it (a "
                     "missing sz_op_zero) or wrote only part of it", a->unit, (long long)nbad, (long long)n, a->what,
                     (long long)first);
}

SZ_PERFMODEL(poison_model, "sz_check_poison");
SZ_PERFMODEL(scan_model, "sz_check_scan");
static SZ_CODELET(sz_cl_check_poison, poison_cpu, "check_poison", poison_model);
static SZ_CODELET(sz_cl_check_scan, scan_cpu, "check_scan", scan_model);

static int is_float(const sz_tensor *t) { return t->dtype != SZ_DTYPE_I32; }

/* Whether t is an activation gradient: the model's, and no unit's forward touches it. */
static int candidate(const struct sz_model *m, const sz_tensor *t)
{
    int mine = 0;
    for (int i = 0; i < m->nscratch && !mine; i++)
        mine = m->scratch[i] == t;
    if (!mine || t == m->loss || !is_float(t))
        return 0;
    for (int i = 0; i < m->core.tape.n; i++)
        for (int k = 0; k < m->core.tape.r[i].n; k++)
            if (m->core.tape.r[i].t[k].tensor == t)
                return 0;
    return 1;
}

static sz_status submit(struct sz_unit *u, struct starpu_codelet *cl, const sz_tensor *t, const char *what, int grad)
{
    struct check_args a = {.grad = grad};
    snprintf(a.unit, sizeof a.unit, "%s", u->c.name);
    snprintf(a.what, sizeof a.what, "%s", what);
    /* the scans run in the order submitted (the token): the first unwritten gradient is the one named */
    sz_task_tensor tt[] = {{t, cl == &sz_cl_check_poison ? SZ_WRITE : SZ_READ, SZ_DTYPE_ANY, -1, "x", 0},
                           {u->model->check_token, SZ_READ_WRITE, SZ_DTYPE_F32, 1, "token", 0}};
    char name[64];
    snprintf(name, sizeof name, "%s:%s", cl == &sz_cl_check_poison ? "check_poison" : "check", u->c.name);
    struct sz_core *c = &u->model->core;
    void (*seen)(struct sz_core *, starpu_data_handle_t, int) = c->on_access; /* not the plan's: not shown */
    c->on_access = NULL; /* to the plan-waits check (SZ_CHECK_WAITS), which may run beside this one */
    sz_status st = sz_task_submit_where(c, u->c.index, name, cl->name, cl, tt, 2, &a, sizeof a, STARPU_CPU);
    c->on_access = seen;
    return st;
}

sz_status sz_check_bwd_begin(struct sz_model *m, struct sz_unit *u)
{
    sz_status st = SZ_OK;
    if (!m->check_poisoned) { /* before the pass's first backward */
        m->check_poisoned = 1;
        m->nwritten = 0;
        for (int i = 0; i < m->nscratch && st == SZ_OK; i++)
            if (candidate(m, m->scratch[i]))
                st = submit(u, &sz_cl_check_poison, m->scratch[i], "", 0);
    }
    m->core.ntouched = 0;
    m->core.tracing = 1;
    return st;
}

static int written(const struct sz_model *m, const sz_tensor *t)
{
    for (int i = 0; i < m->nwritten; i++)
        if (m->check_written[i] == t)
            return 1;
    return 0;
}

sz_status sz_check_bwd_end(struct sz_model *m, struct sz_unit *u)
{
    struct sz_core *c = &m->core;
    c->tracing = 0;
    sz_status st = SZ_OK;
    /* in submission order: a task that reads or adds into a gradient nothing of this pass wrote whole
     * first is the mistake itself (its scan below would only show where the NaN went) */
    for (int i = 0; i < c->ntouched; i++) {
        const struct sz_touch *e = &c->touched[i];
        if (written(m, e->t) || !candidate(m, e->t))
            continue;
        if (!e->sets) {
            sz_context_log(m->core.ctx, SZ_LOG_ERROR, "check mode: %s reads or adds into '%s' before anything in "
                           "this backward wrote it whole: a missing sz_op_zero before it (or an op that writes only "
                           "part of it)", e->task, e->t->name);
            return SZ_ERR_INVALID;
        }
        void *p = sz_grow(m->check_written, &m->cap_written, m->nwritten + 1, sizeof *m->check_written);
        if (!p)
            return SZ_ERR_NOMEM;
        m->check_written = p;
        m->check_written[m->nwritten++] = e->t;
    }
    for (int i = 0; i < c->ntouched && st == SZ_OK; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = c->touched[j].t == c->touched[i].t;
        if (!seen && candidate(m, c->touched[i].t))
            st = submit(u, &sz_cl_check_scan, c->touched[i].t, c->touched[i].t->name, 0);
    }
    for (int i = 0; i < u->nparams && st == SZ_OK && !m->prec.loss_scaling; i++)
        st = submit(u, &sz_cl_check_scan, &u->wg->child[i], u->params[i].name ? u->params[i].name : "?", 1);
    return st;
}

/* ---- finite differences ----------------------------------------------------------------------- */
#define CHECK_H 5e-3

static int64_t sample_elem(const struct sz_unit *u, int p, int s)
{
    int64_t n = u->params[p].rows * u->params[p].cols;
    return s == 0 ? n * 2 / 5 : n / 2;
}

sz_status sz_check_fd_before(struct sz_model *m)
{
    m->check_nfd = 0;
    if (m->zero.micro_batches != 1 || m->prec.mixed) {
        if (m->rank == 0)
            sz_context_log(m->core.ctx, SZ_LOG_WARN, "check mode: finite differences need fp32 and one micro-batch: "
                           "checking the gradients' writes only");
        return SZ_OK;
    }
    int stride = m->nunits > 16 ? (m->nunits + 15) / 16 : 1;
    for (int ui = 0; ui < m->nunits; ui += stride)
        for (int s = 0; s < 2 && m->check_nfd < SZ_CHECK_SAMPLES; s++) {
            struct sz_unit *u = m->units[ui];
            if (!u->nparams)
                continue;
            int p = s == 0 ? 0 : u->nparams - 1;
            int64_t e = sample_elem(u, p, s);
            float v = 0, loss[2];
            double vd;
            sz_status st = sz_model_param_read_range(m, ui, p, e, 1, 0, &v);
            vd = m->rank == 0 ? v : 0.0;
            if (st == SZ_OK)
                st = sz_context_sum(m->core.ctx, &vd, 1); /* the root's value, on every rank */
            for (int k = 0; k < 2 && st == SZ_OK; k++) {
                float x = (float)(vd + (k ? -CHECK_H : CHECK_H));
                st = sz_model_param_write_range(m, ui, p, e, 1, &x);
                if (st == SZ_OK)
                    st = sz_model_eval(m, &loss[k]);
            }
            float orig = (float)vd;
            if (st == SZ_OK)
                st = sz_model_param_write_range(m, ui, p, e, 1, &orig);
            if (st != SZ_OK)
                return st;
            m->check_fd[m->check_nfd] = (struct sz_check_fd){ui, p, e, ((double)loss[0] - loss[1]) / (2 * CHECK_H)};
            m->check_nfd++;
        }
    return SZ_OK;
}

sz_status sz_check_fd_after(struct sz_model *m)
{
    int n = m->check_nfd;
    m->check_nfd = 0;
    double worst = 0, gf = 0, ff = 0, fmax = 0;
    for (int i = 0; i < n; i++)
        fmax = fmax > fabs(m->check_fd[i].fd) ? fmax : fabs(m->check_fd[i].fd);
    int bad_i = -1;
    double bad_g = 0;
    for (int i = 0; i < n; i++) {
        struct sz_check_fd *c = &m->check_fd[i];
        struct sz_unit *u = m->units[c->unit];
        float *g = malloc((size_t)(u->params[c->param].rows * u->params[c->param].cols) * sizeof *g);
        sz_status st = g ? sz_model_grad_read(m, c->unit, c->param, g) : SZ_ERR_NOMEM;
        double gv = g && st == SZ_OK ? g[c->elem] : 0;
        free(g);
        if (st != SZ_OK)
            return st;
        /* fp32 losses: a difference quotient is good to about 1e-5 / h of the loss */
        double err = fabs(gv - c->fd), tol = 0.1 * fabs(c->fd) + 0.02 * fmax + 1e-3;
        gf += gv * c->fd;
        ff += c->fd * c->fd;
        if (err / tol > worst) {
            worst = err / tol;
            if (err > tol) {
                bad_i = i;
                bad_g = gv;
            }
        }
    }
    double ratio = ff > 0 ? gf / ff : 1.0;
    if (bad_i < 0) {
        if (m->rank == 0 && n)
            sz_context_log(m->core.ctx, SZ_LOG_WARN, "check mode: passed: every unit's backward wrote its gradients "
                           "whole, and %d sampled gradients agree with central finite differences of the loss "
                           "(gradient / difference = %.4f)", n, ratio);
        else if (m->rank == 0)
            sz_context_log(m->core.ctx, SZ_LOG_WARN, "check mode: passed: every unit's backward wrote its gradients "
                           "whole");
        return SZ_OK;
    }
    struct sz_check_fd *c = &m->check_fd[bad_i];
    struct sz_unit *u = m->units[c->unit];
    sz_context_log(m->core.ctx, SZ_LOG_ERROR, "check mode: unit %s: the gradient of '%s' at element %lld is %.6g, the "
                   "loss's central finite difference %.6g (all samples: gradient / difference = %.3f). A loss whose "
                   "backward scales by other than sz_unit_loss_scale (1 / (rows x micro-batches x ranks)) shows as "
                   "that ratio; otherwise a backward of this unit computes the wrong values",
                   u->c.name, u->params[c->param].name ? u->params[c->param].name : "?", (long long)c->elem, bad_g,
                   c->fd, ratio);
    return SZ_ERR_INVALID;
}
