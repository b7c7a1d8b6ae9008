/* tasks/model.c — sz_model: units, their flat parameter/gradient/Adam buffers (partitioned into
 * one child handle per tensor), model-owned working tensors, deterministic initialisation, and
 * the training step as tasks: forward units in order, zero grads, backward units in reverse,
 * squared-norm partials -> clip factor -> AdamW per tensor. One rank, no partitioning yet. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_codelets.h"
#include "sz_rng.h"

void sz_train_config_defaults(sz_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->lr = 3e-4f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.999f;
    cfg->eps = 1e-8f;
    cfg->weight_decay = 0.0f;
    cfg->grad_clip = 0.0f;
    cfg->decay = SZ_DECAY_MATRICES;
}

sz_status sz_model_init(sz_model **out, sz_context *ctx)
{
    if (!out || !ctx)
        return SZ_ERR_INVALID;
    struct sz_model *m = calloc(1, sizeof *m);
    if (!m)
        return SZ_ERR_NOMEM;
    m->ctx = ctx;
    *out = m;
    return SZ_OK;
}

static void *grow(void *arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return arr;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *p = realloc(arr, (size_t)nc * elem);
    if (p)
        *cap = nc;
    return p;
}

sz_status sz_model_add_unit(sz_model *m, const sz_unit_desc *d)
{
    if (!m || !d || !d->name || !d->forward || d->nparams < 0 || (d->nparams && !d->params))
        return SZ_ERR_INVALID;
    if (m->finalized)
        return SZ_ERR_STATE;
    void *p = grow(m->units, &m->cap_units, m->nunits + 1, sizeof *m->units);
    if (!p)
        return SZ_ERR_NOMEM;
    m->units = p;
    struct sz_unit *u = calloc(1, sizeof *u);
    if (!u)
        return SZ_ERR_NOMEM;
    u->model = m;
    u->index = m->nunits;
    snprintf(u->name, sizeof u->name, "%s", d->name);
    snprintf(u->fwd_name, sizeof u->fwd_name, "fwd:%s", d->name);
    snprintf(u->bwd_name, sizeof u->bwd_name, "bwd:%s", d->name);
    snprintf(u->opt_name, sizeof u->opt_name, "adam:%s", d->name);
    u->nparams = d->nparams;
    u->params = calloc((size_t)d->nparams + 1, sizeof *u->params);
    u->offset = calloc((size_t)d->nparams + 1, sizeof *u->offset);
    if (!u->params || !u->offset) {
        free(u->params);
        free(u->offset);
        free(u);
        return SZ_ERR_NOMEM;
    }
    for (int i = 0; i < d->nparams; i++) {
        if (d->params[i].rows < 1 || d->params[i].cols < 1) {
            free(u->params);
            free(u->offset);
            free(u);
            return SZ_ERR_INVALID;
        }
        u->params[i] = d->params[i];
        u->offset[i] = u->numel;
        u->numel += d->params[i].rows * d->params[i].cols;
    }
    u->forward = d->forward;
    u->backward = d->backward;
    u->user = d->user;
    m->units[m->nunits++] = u;
    return SZ_OK;
}

sz_tensor *sz_model_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    if (!m || numel < 1 || numel > UINT32_MAX)
        return NULL;
    void *p = grow(m->tensors, &m->cap_tensors, m->ntensors + 1, sizeof *m->tensors);
    if (!p)
        return NULL;
    m->tensors = p;
    void *home = calloc((size_t)numel, sz_dtype_size(dtype));
    if (!home)
        return NULL;
    sz_tensor *t = sz_tensor_register(home, numel, dtype, name);
    if (!t) {
        free(home);
        return NULL;
    }
    m->tensors[m->ntensors++] = t;
    return t;
}

/* One flat fp32 buffer for a unit: one handle, a view over all of it and one view per tensor. */
static sz_status flat_init(struct sz_unit *u, struct sz_flat *f, const char *what)
{
    int64_t n = u->numel > 0 ? u->numel : 1;
    char name[48];
    snprintf(name, sizeof name, "%s%s", what, u->name);
    f->buf = calloc((size_t)n, sizeof(float));
    f->child = calloc((size_t)u->nparams + 1, sizeof *f->child);
    sz_tensor *all = f->buf ? sz_tensor_register(f->buf, n, SZ_DTYPE_F32, name) : NULL;
    if (!all || !f->child) {
        free(all);
        return SZ_ERR_NOMEM;
    }
    f->all = *all;
    free(all);
    f->all.home = NULL; /* f->buf is freed by flat_free */
    for (int i = 0; i < u->nparams; i++) {
        snprintf(name, sizeof name, "%s%s.%s", what, u->name, u->params[i].name);
        f->child[i] = sz_tensor_view(&f->all, u->offset[i], u->params[i].rows * u->params[i].cols, name);
    }
    return SZ_OK;
}

static void flat_free(struct sz_flat *f)
{
    if (f->all.h)
        starpu_data_unregister(f->all.h);
    free(f->child);
    free(f->buf);
}

sz_status sz_model_finalize(sz_model *m)
{
    if (!m)
        return SZ_ERR_INVALID;
    if (m->finalized)
        return SZ_ERR_STATE;
    if (m->nunits == 0)
        return SZ_ERR_INVALID;
    m->sumsq = sz_model_tensor(m, "grad_sumsq", SZ_DTYPE_F32, m->nunits);
    m->clip_scale = sz_model_tensor(m, "clip_scale", SZ_DTYPE_F32, 1);
    if (!m->sumsq || !m->clip_scale)
        return SZ_ERR_NOMEM;
    for (int i = 0; i < m->nunits; i++) {
        struct sz_unit *u = m->units[i];
        sz_status st;
        if ((st = flat_init(u, &u->param, "")) != SZ_OK || (st = flat_init(u, &u->grad, "grad:")) != SZ_OK ||
            (st = flat_init(u, &u->adam_m, "adam_m:")) != SZ_OK || (st = flat_init(u, &u->adam_v, "adam_v:")) != SZ_OK)
            return st;
        u->sumsq = sz_tensor_view(m->sumsq, i, 1, NULL);
    }
    m->finalized = 1;
    return SZ_OK;
}

void sz_model_free(sz_model *m)
{
    if (!m)
        return;
    starpu_task_wait_for_all();
    for (int i = 0; i < m->nunits; i++) {
        struct sz_unit *u = m->units[i];
        if (m->finalized) {
            flat_free(&u->param);
            flat_free(&u->grad);
            flat_free(&u->adam_m);
            flat_free(&u->adam_v);
        }
        free(u->params);
        free(u->offset);
        free(u);
    }
    for (int i = 0; i < m->ntensors; i++)
        sz_tensor_unregister(m->tensors[i]);
    free(m->tensors);
    free(m->units);
    free(m);
}

int sz_model_nunits(const sz_model *m) { return m ? m->nunits : 0; }

int64_t sz_model_nparams(const sz_model *m)
{
    int64_t n = 0;
    for (int i = 0; m && i < m->nunits; i++)
        n += m->units[i]->numel;
    return n;
}

static sz_tensor *child_of(sz_model *m, int unit, int param, int grad)
{
    if (!m || !m->finalized || unit < 0 || unit >= m->nunits || param < 0 || param >= m->units[unit]->nparams)
        return NULL;
    return grad ? &m->units[unit]->grad.child[param] : &m->units[unit]->param.child[param];
}

sz_tensor *sz_model_param(sz_model *m, int unit, int i) { return child_of(m, unit, i, 0); }
sz_tensor *sz_model_grad(sz_model *m, int unit, int i) { return child_of(m, unit, i, 1); }

sz_status sz_model_param_read(sz_model *m, int unit, int param, float *dst)
{
    sz_tensor *t = child_of(m, unit, param, 0);
    return t ? sz_tensor_read(t, dst) : SZ_ERR_INVALID;
}

sz_status sz_model_param_write(sz_model *m, int unit, int param, const float *src)
{
    sz_tensor *t = child_of(m, unit, param, 0);
    return t ? sz_tensor_write(t, src) : SZ_ERR_INVALID;
}

sz_status sz_model_grad_read(sz_model *m, int unit, int param, float *dst)
{
    sz_tensor *t = child_of(m, unit, param, 1);
    return t ? sz_tensor_read(t, dst) : SZ_ERR_INVALID;
}

sz_status sz_model_init_params(sz_model *m, uint64_t seed)
{
    if (!m || !m->finalized)
        return SZ_ERR_STATE;
    for (int ui = 0; ui < m->nunits; ui++) {
        struct sz_unit *u = m->units[ui];
        for (int i = 0; i < u->nparams; i++) {
            const sz_param_spec *p = &u->params[i];
            int64_t n = p->rows * p->cols;
            float *tmp = malloc((size_t)n * sizeof *tmp);
            if (!tmp)
                return SZ_ERR_NOMEM;
            if (p->init == SZ_INIT_NORMAL) {
                sz_rng r;
                sz_rng_seed(&r, seed, (uint64_t)ui, (uint64_t)i);
                sz_rng_normal(&r, tmp, n, p->init_std);
            } else {
                for (int64_t k = 0; k < n; k++)
                    tmp[k] = p->init == SZ_INIT_ONE ? 1.0f : 0.0f;
            }
            sz_status st = sz_tensor_write(&u->param.child[i], tmp);
            free(tmp);
            if (st != SZ_OK)
                return st;
        }
    }
    return SZ_OK;
}

sz_status sz_model_set_loss(sz_model *m, sz_tensor *losses)
{
    if (!m || !losses || losses->dtype != SZ_DTYPE_F32)
        return SZ_ERR_INVALID;
    m->loss = losses;
    return SZ_OK;
}

/* unit accessors for callbacks */
sz_tensor *sz_unit_param(sz_unit *u, int i) { return u && i >= 0 && i < u->nparams ? &u->param.child[i] : NULL; }
sz_tensor *sz_unit_grad(sz_unit *u, int i) { return u && i >= 0 && i < u->nparams ? &u->grad.child[i] : NULL; }
int sz_unit_index(const sz_unit *u) { return u ? u->index : -1; }
const char *sz_unit_name(const sz_unit *u) { return u ? u->name : ""; }
sz_model *sz_unit_model(sz_unit *u) { return u ? u->model : NULL; }

/* ---- the step ------------------------------------------------------------------------------ */

static sz_status run_forward(sz_model *m)
{
    for (int i = 0; i < m->nunits; i++) {
        struct sz_unit *u = m->units[i];
        u->phase = u->fwd_name;
        sz_status st = u->forward(u, u->user);
        if (st != SZ_OK)
            return st;
    }
    return SZ_OK;
}

static sz_status mean_loss(sz_model *m, float *loss)
{
    if (!m->loss)
        return SZ_ERR_STATE;
    int64_t n = m->loss->numel;
    float *l = malloc((size_t)n * sizeof *l);
    if (!l)
        return SZ_ERR_NOMEM;
    sz_status st = sz_tensor_read(m->loss, l);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += l[i];
    free(l);
    if (loss)
        *loss = (float)(s / (double)n);
    return st;
}

sz_status sz_model_eval(sz_model *m, float *loss)
{
    if (!m || !m->finalized)
        return SZ_ERR_STATE;
    sz_status st = run_forward(m);
    return st != SZ_OK ? st : mean_loss(m, loss);
}

sz_status sz_model_train_step(sz_model *m, const sz_train_config *cfg, int t, float *loss)
{
    if (!m || !cfg || t < 1)
        return SZ_ERR_INVALID;
    if (!m->finalized || !m->loss)
        return SZ_ERR_STATE;
    sz_status st = run_forward(m);
    if (st != SZ_OK)
        return st;
    /* All gradients start at zero before any backward: a unit's gradient may be accumulated by
     * another unit (tied weights) before its own backward runs. */
    for (int i = m->nunits - 1; i >= 0; i--) {
        struct sz_unit *u = m->units[i];
        for (int k = 0; k < u->nparams; k++)
            if ((st = sz_submit_zero(&u->grad.child[k], u->bwd_name)) != SZ_OK)
                return st;
    }
    for (int i = m->nunits - 1; i >= 0; i--) {
        struct sz_unit *u = m->units[i];
        if (!u->backward)
            continue;
        u->phase = u->bwd_name;
        if ((st = u->backward(u, u->user)) != SZ_OK)
            return st;
    }
    for (int i = m->nunits - 1; i >= 0; i--) {
        struct sz_unit *u = m->units[i];
        sz_tensor used = sz_tensor_view(&u->grad.all, 0, u->numel, NULL);
        if ((st = sz_submit_sumsq(&u->sumsq, &used, u->bwd_name)) != SZ_OK)
            return st;
    }
    if ((st = sz_submit_clip_scale(m->clip_scale, m->sumsq, cfg->grad_clip)) != SZ_OK)
        return st;
    for (int i = 0; i < m->nunits; i++) {
        struct sz_unit *u = m->units[i];
        if (!u->backward)
            continue;
        for (int k = 0; k < u->nparams; k++) {
            float wd = (cfg->decay == SZ_DECAY_ALL || u->params[k].decay) ? cfg->weight_decay : 0.0f;
            st = sz_submit_adamw(&u->param.child[k], &u->grad.child[k], &u->adam_m.child[k], &u->adam_v.child[k],
                                 m->clip_scale, cfg, wd, t, u->opt_name);
            if (st != SZ_OK)
                return st;
        }
    }
    st = mean_loss(m, loss);
    float *sums = malloc((size_t)m->nunits * sizeof *sums);
    if (!sums)
        return SZ_ERR_NOMEM;
    if (st == SZ_OK)
        st = sz_tensor_read(m->sumsq, sums);
    double s = 0.0;
    for (int i = 0; i < m->nunits; i++)
        s += sums[i];
    free(sums);
    m->last_grad_norm = (float)sqrt(s);
    starpu_task_wait_for_all();
    return st;
}

float sz_model_last_grad_norm(const sz_model *m) { return m ? m->last_grad_norm : 0.0f; }
