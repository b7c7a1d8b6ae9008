/* tasks/model.c — sz_model: units and their tensor tables, model-owned working tensors, and the
 * storage each ZeRO stage keeps per rank (docs/ARCHITECTURE.md, ZeRO semantics):
 *   stage 0: full params, full grads, full optimizer state (Adam m and v, SGD's momentum)
 *   stage 1: full params, full grads, m and v for the owned slice
 *   stage 2: full params, a gradient shard (+ one unit's gradients in flight), m, v shards
 *   stage 3: a parameter shard (+ gathered units in flight), gradient shard, m, v shards
 * Each unit's parameters are one flat buffer padded to a multiple of the rank count; rank r owns
 * slice r (tasks/storage.c lays the buffers out). Here: the defaults, the ZeRO configuration and
 * the precision it implies, units, finalisation (the ranks' agreement, the budget: tasks/budget.c),
 * the step's entry points around tasks/step.c, losses. Parameters in and out: tasks/params.c; the
 * memory report: tasks/report.c. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_rng.h"
#include "sz_sched.h"
#include "sz_deadline.h"
#include "sz_pool.h"
#include "sz_cuda.h"
#include "sz_kernels.h"
#include "sz_devcheck.h"
#include "sz_gpu_budget.h"

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

void sz_zero_config_defaults(sz_zero_config *z)
{
    memset(z, 0, sizeof *z);
    z->stage = 0;
    z->micro_batches = 1;
    z->bucket_bytes = SZ_DEFAULT_BUCKET_BYTES;
    z->arenas = 1;
    z->loss_scaling = (sz_loss_scaling){.loss_scale = 0.0f, .initial_scale_power = 16, .loss_scale_window = 1000,
                                        .hysteresis = 2, .min_loss_scale = 1.0f}; /* DeepSpeed's fp16 defaults */
}

sz_status sz_model_init(sz_model **out, sz_context *ctx)
{
    if (!out || !ctx)
        return SZ_ERR_INVALID;
    struct sz_model *m = calloc(1, sizeof *m);
    if (!m)
        return SZ_ERR_NOMEM;
    m->core.ctx = ctx;
    m->nd = ctx->world_size;
    m->rank = ctx->rank;
    m->arena_mark = -1;
    sz_fold_switches fold = ctx->env.fold;
    m->core.fold_zeros = fold.zeros; /* 0: every sz_op_zero is its own task (core/fold.c) */
    /* 0: the parameters' gradients zeroed whole by the plan's actions, the activations' zeros still
     * folded (SZ_ZERO_FOLD=0 turns both off) */
    m->fold_grads = fold.grads;
    sz_zero_config_defaults(&m->zero);
    if (sz_precision_resolve(ctx, &m->zero, &m->prec) != SZ_OK) { /* fp32 until sz_model_set_zero */
        free(m);
        return SZ_ERR_RUNTIME;
    }
    m->opt = sz_optimizer_get(m->zero.optimizer);
    m->nopt_states = m->opt->nstates(&m->zero);
    *out = m;
    return SZ_OK;
}

sz_status sz_model_set_zero(sz_model *m, const sz_zero_config *z)
{
    if (!m || !z)
        return SZ_ERR_INVALID;
    if (m->finalized) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "sz_model_set_zero after sz_model_finalize: the ZeRO configuration "
                       "is fixed once the model is finalized");
        return SZ_ERR_STATE;
    }
    if (m->tensor_call) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "sz_model_set_zero after %s: tensors were already placed under the "
                       "previous configuration (checkpointing's shared activations, offloaded checkpoints, the "
                       "arena); call sz_model_set_zero first", m->tensor_call);
        return SZ_ERR_STATE;
    }
    if (z->stage < 0 || z->stage > 3 || z->micro_batches < 1) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "ZeRO stage %d / %d micro-batches: the stage must be 0..3 and "
                       "micro-batches >= 1", z->stage, z->micro_batches);
        return SZ_ERR_INVALID;
    }
    if (z->mem_budget < 0 || z->prefetch_bytes < 0 || z->max_live_bytes < 0 || z->host_bytes < 0) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "ZeRO config: a negative byte limit");
        return SZ_ERR_INVALID;
    }
    if (z->offload_checkpoints && !z->checkpoint) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "offloading checkpoints needs activation checkpointing: "
                       "enable checkpoint too");
        return SZ_ERR_INVALID;
    }
    if (!sz_optimizer_get(z->optimizer) || sz_optimizer_states(z->optimizer, z->momentum) < 0) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "ZeRO config: unknown optimizer %d or SGD momentum %g outside [0, 1)",
                       (int)z->optimizer, (double)z->momentum);
        return SZ_ERR_INVALID;
    }
    sz_resolved_precision prec;
    sz_status pst = sz_precision_resolve(m->core.ctx, z, &prec); /* tasks/precision.c */
    if (pst != SZ_OK)
        return pst;
    m->zero = *z;
    m->zero.bf16_compute = prec.compute;
    m->check = z->check || m->core.ctx->env.check;
    m->prec = prec;
    const sz_loss_scaling *ls = &z->loss_scaling;
    m->scaler = (sz_loss_scaler){.scale = !prec.loss_scaling ? 1.0f
                                          : ls->loss_scale > 0.0f ? ls->loss_scale
                                                                  : ldexpf(1.0f, ls->initial_scale_power),
                                 .hysteresis_left = ls->hysteresis};
    m->opt = sz_optimizer_get(z->optimizer);
    m->nopt_states = m->opt->nstates(z);
    m->persistent[SZ_MEM_HOST_BUFFERS] = z->host_bytes; /* the app's; counted as held from here on */
    return SZ_OK;
}


/* "native" only when some unit really reads bf16 (a model whose units take no bf16 parameters
 * computes emulated whatever the rule said). */
const char *sz_model_bf16_path(const sz_model *m)
{
    if (!m || !m->prec.mixed)
        return "fp32";
    if (m->prec.loss_scaling)
        return "fp16"; /* fp32 compute on fp32 working copies of the fp16 parameters */
    for (int i = 0; m->prec.native && i < m->nunits; i++)
        if (m->units[i]->bf16_params)
            return "native";
    return "emulated";
}

static void unit_free(struct sz_unit *u)
{
    if (!u)
        return;
    free(u->params);
    free(u->offset);
    free(u->uses);
    free(u);
}

sz_status sz_model_add_unit(sz_model *m, const sz_unit_desc *d)
{
    if (!m || !d || !d->name || !d->forward || d->nparams < 0 || (d->nparams && !d->params) || d->nuses < 0 ||
        (d->nuses && !d->uses))
        return SZ_ERR_INVALID;
    if (m->finalized) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "sz_model_add_unit(\"%s\") after sz_model_finalize: add every unit "
                       "before finalizing", d->name);
        return SZ_ERR_STATE;
    }
    for (int i = 0; i < d->nuses; i++)
        if (d->uses[i] < 0 || d->uses[i] >= m->nunits)
            return SZ_ERR_INVALID; /* only earlier units can be shared */
    void *p = sz_grow(m->units, &m->cap_units, m->nunits + 1, sizeof *m->units);
    if (!p)
        return SZ_ERR_NOMEM;
    m->units = p;
    struct sz_unit *u = calloc(1, sizeof *u);
    if (!u)
        return SZ_ERR_NOMEM;
    u->model = m;
    u->c.core = &m->core;
    u->c.index = m->nunits;
    snprintf(u->c.name, sizeof u->c.name, "%s", d->name);
    snprintf(u->fwd_name, sizeof u->fwd_name, "fwd:%s", d->name);
    snprintf(u->bwd_name, sizeof u->bwd_name, "bwd:%s", d->name);
    snprintf(u->opt_name, sizeof u->opt_name, "adam:%s", d->name);
    snprintf(u->gather_name, sizeof u->gather_name, "gather:%s", d->name);
    snprintf(u->release_name, sizeof u->release_name, "release:%s", d->name);
    snprintf(u->rs_name, sizeof u->rs_name, "rs:%s", d->name);
    snprintf(u->ag_name, sizeof u->ag_name, "ag:%s", d->name);
    snprintf(u->recompute_name, sizeof u->recompute_name, "recompute:%s", d->name);
    snprintf(u->offload_name, sizeof u->offload_name, "offload:%s", d->name);
    snprintf(u->fetch_name, sizeof u->fetch_name, "fetch:%s", d->name);
    u->checkpointable = d->checkpointable;
    u->backward_skips_params = d->backward_skips_params;
    u->bf16_params = d->bf16_params;
    u->round_grads = d->round_grads;
    u->round_tied_grads = d->round_tied_grads;
    u->nparams = d->nparams;
    u->params = calloc((size_t)d->nparams + 1, sizeof *u->params);
    u->offset = calloc((size_t)d->nparams + 1, sizeof *u->offset);
    u->uses = calloc((size_t)d->nuses + 1, sizeof *u->uses);
    if (!u->params || !u->offset || !u->uses) {
        unit_free(u);
        return SZ_ERR_NOMEM;
    }
    for (int i = 0; i < d->nparams; i++) {
        if (d->params[i].rows < 1 || d->params[i].cols < 1) {
            unit_free(u);
            return SZ_ERR_INVALID;
        }
        u->params[i] = d->params[i];
        u->offset[i] = u->numel;
        u->numel += d->params[i].rows * d->params[i].cols;
    }
    memcpy(u->uses, d->uses, (size_t)d->nuses * sizeof *u->uses);
    u->nuses = d->nuses;
    u->forward = d->forward;
    u->backward = d->backward;
    u->user = d->user;
    m->units[m->nunits++] = u;
    return sz_model_check_states(m); /* a model no step could hold is refused now, not after its tensors */
}

/* Collective: every rank builds the same model (units, their tensors in order, the ZeRO config,
 * the model tensors' bytes) — else every rank refuses, naming the first difference. */
static sz_status agree_model(struct sz_model *m)
{
    sz_settings *s = NULL;
    sz_status st = sz_settings_init(&s);
    if (st != SZ_OK)
        return st;
    const sz_zero_config *z = &m->zero;
    sz_settings_add(s, "the ZeRO stage", "%d", z->stage);
    sz_settings_add(s, "micro-batches", "%d", z->micro_batches);
    sz_settings_add(s, "the precision", "%s", sz_precision_name(z->precision));
    if (m->prec.loss_scaling) {
        const sz_loss_scaling *ls = &z->loss_scaling;
        sz_settings_add(s, "fp16 loss scaling", "loss_scale %.9g, initial_scale_power %d, loss_scale_window %d, "
                        "hysteresis %d, min_loss_scale %.9g", (double)ls->loss_scale, ls->initial_scale_power,
                        ls->loss_scale_window, ls->hysteresis, (double)ls->min_loss_scale);
    }
    sz_settings_add(s, "the bf16 compute path (--bf16-compute; auto: the CPU rule)", "%s", sz_model_bf16_path(m));
    sz_settings_add(s, "the memory budget", "%lld bytes", (long long)z->mem_budget);
    sz_settings_add(s, "prefetch bytes", "%lld", (long long)z->prefetch_bytes);
    sz_settings_add(s, "max live bytes", "%lld", (long long)z->max_live_bytes);
    sz_settings_add(s, "bucket bytes", "%lld", (long long)z->bucket_bytes);
    sz_settings_add(s, "activation checkpointing", "%s", z->checkpoint ? "on" : "off");
    sz_settings_add(s, "offloaded checkpoints", "%s", z->offload_checkpoints ? "on" : "off");
    sz_settings_add(s, "arenas (M_D)", "%s", z->arenas ? "on" : "off");
    sz_settings_add(s, "the optimizer", "%s", m->opt->name);
    sz_settings_add(s, "SGD momentum", "%.9g", z->optimizer == SZ_OPTIMIZER_SGD ? (double)z->momentum : 0.0);
    if (z->bf16_work_copies) /* (only then, as below) */
        sz_settings_add(s, "bf16 working copies", "forced");
    if (z->offload_optimizer) /* (only then: a CPU-only run's digest stays as it was) */
        sz_settings_add(s, "the offloaded optimizer's CUDA workers", "%s", sz_model_have_cuda() ? "present" : "none");
    if (m->check) /* (only then, as above): its first step adds collectives (the finite differences) */
        sz_settings_add(s, "the check mode (sz_zero_config.check, SZ_CHECK)", "on");
    sz_settings_add(s, "the number of units", "%d", m->nunits);
    for (int i = 0; i < m->nunits; i++) {
        const struct sz_unit *u = m->units[i];
        char name[96];
        snprintf(name, sizeof name, "unit %d", i);
        sz_settings_add(s, name, "%s: %d tensors, %lld elements%s%s%s%s%s", u->c.name, u->nparams, (long long)u->numel,
                        u->checkpointable ? ", checkpointable" : "", u->backward ? "" : ", derived backward",
                        u->backward_skips_params ? ", backward reads no parameter" : "",
                        u->bf16_params ? ", takes bf16 parameters" : "",
                        u->nuses ? ", uses earlier units" : "");
        for (int k = 0; k < u->nparams; k++) {
            const sz_param_spec *p = &u->params[k];
            snprintf(name, sizeof name, "unit %d (%s) tensor %d", i, u->c.name, k);
            sz_settings_add(s, name, "%s %lld x %lld, decay %d, init %d (std %.9g)", p->name ? p->name : "?",
                            (long long)p->rows, (long long)p->cols, p->decay, (int)p->init, p->init_std);
        }
        for (int k = 0; k < u->nuses; k++) {
            snprintf(name, sizeof name, "unit %d (%s) use %d", i, u->c.name, k);
            sz_settings_add(s, name, "unit %d", u->uses[k]);
        }
    }
    sz_settings_add(s, "the model tensors (activations, inputs; they follow the batch shape)", "%lld bytes",
                    (long long)(m->persistent[SZ_MEM_ACTIVATIONS] + m->persistent[SZ_MEM_HOST]));
    st = sz_context_agree(m->core.ctx, s, "sz_model_finalize", NULL, 0);
    sz_settings_free(s);
    return st;
}

sz_status sz_model_finalize(sz_model *m)
{
    if (!m)
        return SZ_ERR_INVALID;
    if (m->finalized)
        return SZ_ERR_STATE;
    if (m->nunits == 0)
        return SZ_ERR_INVALID;
    sz_status ast = agree_model(m); /* every rank the same model, or none goes on */
    if (ast != SZ_OK)
        return ast;
    if (m->zero.offload_optimizer && !sz_model_have_cuda()) { /* every rank alike (agreed above) */
        sz_context_log(m->core.ctx, SZ_LOG_ERROR,
                       "--offload-optimizer (ZeRO-Offload) moves the optimizer from the GPU to the CPU, but this rank "
                       "has no CUDA worker (no GPU visible, STARPU_NCUDA=0, or a StarPU or StarZeRO built without "
                       "CUDA): on a CPU-only rank the optimizer already runs on the CPU, so there is nothing to "
                       "offload. Drop --offload-optimizer, or run on a GPU machine");
        return SZ_ERR_INVALID;
    }
    /* SZ_CHECK_WAITS=1: check every step's tasks against the plan's waits (tasks/depcheck.c) */
    if (m->core.ctx->env.check_waits && (ast = sz_model_depcheck(m, 1)) != SZ_OK)
        return ast;
    if ((ast = sz_model_check_node_budget(m)) != SZ_OK) /* collective */
        return ast;
    int64_t budget = m->zero.mem_budget;
    if (budget <= 0) { /* none given: this rank's share of what the machine has (collective) */
        if (sz_context_memory_budget(m->core.ctx, &budget) != SZ_OK)
            return SZ_ERR_RUNTIME;
        m->budget_from_machine = budget > 0;
    } else if ((ast = sz_context_check_gpu_budget(m->core.ctx, budget)) != SZ_OK) { /* collective: k x budget per GPU */
        return ast;
    }
    m->budget = budget;
    m->core.gpu_compute = sz_model_have_cuda() && m->core.ctx->env.gpu_placement;
    sz_status wst = sz_devwatch_start(m); /* collective: every rank, before any may refuse below */
    if (wst != SZ_OK)
        return wst;
    sz_status dst = sz_autograd_prepare(m); /* the derived backward's gradients, counted below */
    if (dst != SZ_OK)
        return dst;
    sz_status bst = sz_model_check_budget(m, budget); /* before allocating anything big */
    if (bst != SZ_OK)
        return bst;
    sz_status gst = sz_model_gpu_arena_start(m);
    if (gst != SZ_OK)
        return gst;
    for (int i = 0; i < m->nunits; i++) {
        sz_status st = sz_model_unit_storage(m, m->units[i]);
        if (st != SZ_OK)
            return st;
    }
    m->sumsq = sz_model_owned_buffer(m, "grad_sumsq", SZ_DTYPE_F32, m->nunits, -1);
    m->clip = sz_model_owned_buffer(m, "clip", SZ_DTYPE_F32, 2, -1);
    m->one = sz_model_owned_buffer(m, "one", SZ_DTYPE_F32, 1, -1);
    if (m->one && sz_tensor_write_f32(m->one, &(float){1.0f}) != SZ_OK)
        m->one = NULL;
    m->token = sz_model_owned_buffer(m, "comm_token", SZ_DTYPE_F32, 1, -1);
    if (m->check && !(m->check_token = sz_model_owned_buffer(m, "check_token", SZ_DTYPE_F32, 1, -1)))
        return SZ_ERR_NOMEM;
    m->bucket = sz_zero_bucket_elems(m, m->nd);
    m->comm_buf = m->nd > 1 ? sz_model_owned_buffer(m, "comm_buffer", SZ_DTYPE_F32, m->nd * m->bucket, SZ_MEM_COMM)
                            : m->token;
    if (!m->sumsq || !m->clip || !m->one || !m->token || !m->comm_buf)
        return SZ_ERR_NOMEM;
    for (int i = 0; i < m->nunits; i++)
        m->units[i]->sumsq = sz_tensor_view(m->sumsq, i, 1, NULL);
    m->finalized = 1;
    return SZ_OK;
}

void sz_model_free(sz_model *m)
{
    if (!m)
        return;
    starpu_task_wait_for_all();
    for (int i = 0; i < m->nunits; i++) {
        free(m->units[i]->param.child);
        free(m->units[i]->grad.child);
        free(m->units[i]->work.child);
        free(m->units[i]->wgrad.child);
        unit_free(m->units[i]);
    }
    for (int i = 0; i < m->ntensors; i++)
        sz_tensor_unregister(m->tensors[i]);
    sz_devpool_arena_reset(m->arena_mark); /* models are freed last-made first */
    sz_model_gpu_arena_stop(m);
    sz_plan_free(&m->step_plan);
    sz_plan_free(&m->eval_plan);
    sz_model_depcheck(m, 0);
    free(m->core.gpending);
    free(m->tensors);
    free(m->shared_acts);
    free(m->act_names);
    free(m->acts_of);
    free(m->grads_of);
    free(m->scratch);
    free(m->check_written);
    free(m->core.touched);
    sz_tape_free(&m->core.tape);
    free(m->units);
    free(m);
}

sz_status sz_model_set_loss(sz_model *m, sz_tensor *losses)
{
    if (!m || !losses || losses->dtype != SZ_DTYPE_F32)
        return SZ_ERR_INVALID;
    m->loss = losses;
    return SZ_OK;
}

/* unit accessors for callbacks */
sz_tensor *sz_unit_param(sz_unit *u, int i) { return u && i >= 0 && i < u->nparams ? &u->wp->child[i] : NULL; }
sz_tensor *sz_unit_grad(sz_unit *u, int i) { return u && i >= 0 && i < u->nparams ? &u->wg->child[i] : NULL; }
int sz_unit_index(const sz_unit *u) { return u ? u->c.index : -1; }
const char *sz_unit_name(const sz_unit *u) { return u ? u->c.name : ""; }
sz_model *sz_unit_model(sz_unit *u) { return u ? u->model : NULL; }

/* 1/(N·M·N_d): the gradient of the mean loss over every row, micro-batch and rank (the engine
 * sums gradients over micro-batches and ranks). */
static float loss_scale(const struct sz_model *m)
{
    if (!m || !m->loss || m->loss->numel < 1)
        return 0.0f;
    float mean = 1.0f / ((float)m->loss->numel * (float)m->zero.micro_batches * (float)m->nd);
    return m->prec.loss_scaling ? mean * m->scaler.scale : mean;
}

/* DeepSpeed's DynamicLossScaler.update_scale after one step (overflow: the gradients' global norm
 * was not finite, so the step was skipped on every rank): an overflow halves the scale once the
 * hysteresis is used up (never below min_loss_scale), else spends one unit of it; a clean step
 * doubles the scale after loss_scale_window of them since the last overflow or change (the
 * hysteresis then back to its full value). A fixed scale only counts the skipped steps. */
static void scaler_step(struct sz_model *m, int overflow)
{
    sz_loss_scaler *s = &m->scaler;
    const sz_loss_scaling *ls = &m->zero.loss_scaling;
    s->last_skipped = overflow;
    s->skipped += overflow;
    if (ls->loss_scale > 0.0f)
        return;
    if (overflow) {
        if (s->hysteresis_left <= 1)
            s->scale = fmaxf(s->scale / 2.0f, ls->min_loss_scale);
        else
            s->hysteresis_left--;
        s->good_steps = 0;
    } else if (++s->good_steps == ls->loss_scale_window) {
        s->scale *= 2.0f;
        s->hysteresis_left = ls->hysteresis;
        s->good_steps = 0;
    }
}

sz_status sz_model_loss_scaler(const sz_model *m, sz_loss_scaler *out)
{
    if (!m || !out)
        return SZ_ERR_INVALID;
    *out = m->scaler;
    return SZ_OK;
}

sz_status sz_model_set_loss_scaler(sz_model *m, const sz_loss_scaler *s)
{
    if (!m || !s || !(s->scale > 0.0f) || !isfinite(s->scale) || s->good_steps < 0 || s->hysteresis_left < 0 ||
        s->skipped < 0)
        return SZ_ERR_INVALID;
    m->scaler = *s;
    return SZ_OK;
}
float sz_unit_loss_scale(const sz_unit *u) { return u ? loss_scale(u->model) : 0.0f; }

/* ---- losses and the step entry points ----------------------------------------------------- */

/* The mean over all ranks of the loss tensor's mean (ranks added in rank order). */
static sz_status global_mean_loss(sz_model *m, float *loss)
{
    if (!m->loss)
        return SZ_ERR_STATE;
    int64_t n = m->loss->numel;
    float *l = malloc((size_t)n * sizeof *l);
    double *all = malloc((size_t)m->nd * sizeof *all);
    if (!l || !all) {
        free(l);
        free(all);
        return SZ_ERR_NOMEM;
    }
    sz_status st = sz_tensor_read(m->loss, l);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += l[i];
    s /= (double)n;
    if (m->nd > 1 &&
        sz_allgather(&s, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, m->core.ctx->host_comm, "loss all-gather") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    if (m->nd > 1) {
        s = 0.0;
        for (int r = 0; r < m->nd; r++)
            s += all[r];
        s /= m->nd;
    }
    if (loss)
        *loss = (float)s;
    free(l);
    free(all);
    return st;
}

sz_status sz_model_eval(sz_model *m, float *loss)
{
    if (!m || !m->finalized)
        return SZ_ERR_STATE;
    sz_status st = sz_zero_eval(m);
    if (st == SZ_OK)
        st = global_mean_loss(m, loss);
    /* every forward task has run, also those the loss does not depend on: a kernel's failure is
     * this call's (a forward_backward's backward tasks may still run: theirs can be the next call's) */
    starpu_task_wait_for_all();
    sz_status fail = sz_model_take_failure(m);
    return st != SZ_OK ? st : fail;
}

/* With CUDA workers, before the first step: every tensor the model registered on a buffer of its
 * own and that does not live in host memory (parameters or their shard, gradient shards, the master
 * and optimizer state unless offloaded, activations, the communication buffer when NCCL uses it
 * on the GPU) is prefetched to the GPU's memory node, so the model states live there from the
 * start (StarPU keeps the valid copy on the GPU as the CUDA tasks write it; the home buffer in RAM
 * stays registered). With the host-copy collectives the communication buffer is only ever used by
 * CPU tasks: a device copy would hold device memory for nothing, and the plan counts it on the
 * host (comm_on_host). */
static void place_on_gpu(struct sz_model *m)
{
    m->placed = 1;
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) < 1)
        return;
    unsigned node = starpu_worker_get_memory_node((unsigned)ids[0]);
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i]->home && !m->tensors[i]->on_host && !m->tensors[i]->on_gpu &&
            !(m->tensors[i] == m->comm_buf && m->nd > 1 && !sz_model_comm_on_gpu(m))) /* host collectives: stays in RAM */
            starpu_data_prefetch_on_node(m->tensors[i]->h, node, 1);
}

sz_status sz_model_forward_backward(sz_model *m, float *loss)
{
    if (!m)
        return SZ_ERR_INVALID;
    if (!m->finalized || !m->loss)
        return SZ_ERR_STATE;
    if (m->micro_batch >= m->zero.micro_batches) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "forward_backward called %d times without sz_model_update "
                       "(micro_batches = %d)", m->micro_batch + 1, m->zero.micro_batches);
        return SZ_ERR_STATE;
    }
    if (!m->placed && sz_model_have_cuda())
        place_on_gpu(m);
    if (m->micro_batch == 0) {
        sz_deadline_set_step(m->steps_done + 1);
        double f, c, k;
        sz_sched_overlap(&f, &c, &k, NULL); /* start the step's intervals afresh */
        m->counters.t0_ns = sz_now_ns();
        __atomic_store_n(&m->counters.ntimeline, 0, __ATOMIC_RELAXED);
        m->step_sent = __atomic_load_n(&m->counters.sent, __ATOMIC_RELAXED);
        m->step_received = __atomic_load_n(&m->counters.received, __ATOMIC_RELAXED);
        m->step_ns = __atomic_load_n(&m->counters.comm_ns, __ATOMIC_RELAXED);
    }
    sz_status st = SZ_OK;
    if (m->check && !m->checked && m->micro_batch == 0) { /* the check mode's step (tasks/check.c) */
        m->check_pass = 1;
        m->check_poisoned = 0;
        st = sz_check_fd_before(m);
    }
    if (st == SZ_OK)
        st = sz_zero_forward_backward(m);
    m->check_pass = 0;
    if (st == SZ_OK)
        m->micro_batch++;
    if (st == SZ_OK)
        st = global_mean_loss(m, loss);
    sz_status fail = sz_model_take_failure(m);
    return st != SZ_OK ? st : fail;
}

sz_status sz_model_update(sz_model *m, const sz_train_config *cfg, int t)
{
    if (!m || !cfg || t < 1)
        return SZ_ERR_INVALID;
    if (m->micro_batch != m->zero.micro_batches) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "update after %d of %d micro-batches", m->micro_batch,
                       m->zero.micro_batches);
        return SZ_ERR_STATE;
    }
    sz_status st = sz_zero_update(m, cfg, t);
    m->micro_batch = 0;
    if (st == SZ_OK && m->check && !m->checked) {
        m->checked = 1;
        starpu_task_wait_for_all();
        if ((st = sz_model_take_failure(m)) == SZ_OK) /* the scans' verdict first, then the differences */
            st = sz_check_fd_after(m);
    }
    if (st != SZ_OK)
        return st;
    float clip[2];
    st = sz_tensor_read(m->clip, clip);
    m->last_grad_norm = clip[1];
    if (st == SZ_OK && m->prec.loss_scaling) /* the same norm on every rank: every rank skips alike */
        scaler_step(m, isnan(clip[0]));
    starpu_task_wait_for_all();
    if (st == SZ_OK)
        st = sz_model_take_failure(m);
    m->step_sent = __atomic_load_n(&m->counters.sent, __ATOMIC_RELAXED) - m->step_sent;
    m->step_received = __atomic_load_n(&m->counters.received, __ATOMIC_RELAXED) - m->step_received;
    m->step_ns = __atomic_load_n(&m->counters.comm_ns, __ATOMIC_RELAXED) - m->step_ns;
    m->steps_done++;
    sz_deadline_step_done((sz_now_ns() - m->counters.t0_ns) * 1e-9); /* later deadlines: >= 5x this */
    if (sz_sched_overlap(&m->overlap, &m->comm_busy_s, &m->compute_busy_s, &m->task_times) != 0)
        m->overlap = -1;
    sz_status dst = sz_devwatch_step(m); /* collective with GPUs: every rank, whatever st says */
    if (st == SZ_OK)
        st = dst;
    /* keep 64 samples of the step's live-bytes timeline, each the maximum of its stretch */
    int n = m->counters.ntimeline < SZ_TIMELINE ? m->counters.ntimeline : SZ_TIMELINE;
    m->ntimeline = n < 64 ? n : 64;
    for (int i = 0; i < m->ntimeline; i++) {
        int a = (int)((int64_t)i * n / m->ntimeline), b = (int)((int64_t)(i + 1) * n / m->ntimeline);
        int64_t best = -1, at = 0;
        for (int k = a; k < b; k++)
            if (m->counters.timeline[k][1] > best) {
                best = m->counters.timeline[k][1];
                at = m->counters.timeline[k][0];
            }
        m->timeline_ms[i] = at * 1e-6;
        m->timeline_bytes[i] = best;
    }
    return st;
}

sz_status sz_model_train_step(sz_model *m, const sz_train_config *cfg, int t, float *loss)
{
    sz_status st = sz_model_forward_backward(m, loss);
    return st != SZ_OK ? st : sz_model_update(m, cfg, t);
}

float sz_model_last_grad_norm(const sz_model *m) { return m ? m->last_grad_norm : 0.0f; }
