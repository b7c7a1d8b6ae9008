/* tasks/step.c — one ZeRO step as tasks: the step plan (graph/plan.c; docs/ARCHITECTURE.md: plan -> submit) submitted
 * action by action. The plan says what to gather, convert, allocate, compute, release,
 * reduce-scatter, all-gather and update, in order, with the bytes each action makes live or frees;
 * here one loop walks it and one submit function per action kind turns it into tasks, the byte
 * figures they account coming from the action. Every task of an action carries the action's index
 * in the plan (m->current_action; core/task.c reads m->core.position, set from it) for the `zero`
 * policy. The unit's forward and backward callbacks run for the FWD, RECOMPUTE and BWD actions.
 *
 * Every reduction sums the ranks' contributions in rank order (tasks/reduce_scatter.c), so at
 * a fixed nd and one micro-batch all stages give bitwise the same losses and parameters.
 * Every task that accounts bytes is ordered on the model's communication token, so the engine's
 * live-bytes counters pass through the plan's fold action by action. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_sched.h"
#include "sz_deadline.h"
#include "sz_cuda.h"

/* ---- the plan of this model ------------------------------------------------------------------ */

void sz_zero_plan_units(const struct sz_model *m, sz_plan_unit *pu)
{
    for (int i = 0; i < m->nunits; i++) {
        const struct sz_unit *u = m->units[i];
        pu[i] = (sz_plan_unit){.numel = u->numel, .uses = u->uses, .nuses = u->nuses, .has_backward = 1, /* NULL: derived */
                               .checkpointable = u->checkpointable, .backward_skips_params = u->backward_skips_params,
                               .ckpt_bytes = u->ckpt_bytes, .bf16_params = u->bf16_params,
                               .round_grads = u->round_grads, .round_tied_grads = u->round_tied_grads};
    }
}

void sz_zero_plan_config_of(const sz_zero_config *z, const sz_resolved_precision *p, int opt_states, int fold_grads,
                            int nd, int rank, sz_plan_pass pass, int clip, sz_plan_config *c)
{
    memset(c, 0, sizeof *c);
    c->pass = pass;
    c->stage = z->stage;
    c->nd = nd;
    c->rank = rank;
    c->micro_batches = z->micro_batches;
    c->mixed = p->mixed;
    c->native = p->native;
    c->bf16_direct = p->params_direct;
    c->opt_states = opt_states;
    c->checkpoint = z->checkpoint;
    c->offload = z->offload_checkpoints;
    c->prefetch_bytes = z->prefetch_bytes;
    c->max_live_bytes = z->max_live_bytes;
    c->clip = clip;
    /* the parameters' gradients set by their first writers, on CPUs and CUDA workers alike (the
     * engine's CUDA backward kernels set too: core/fold.c, sz_fold_decide); a first writer that
     * cannot set has the view zeroed just before, so the plan's bytes are the same either way */
    c->fold_grads = fold_grads;
    /* and the bf16 gradients' rounding folded into them (units with round_grads): CPU kernels
     * only, so off wherever there are CUDA workers (the GPU path stays as it was) */
    c->fold_round = c->fold_grads && p->grads_rounded;
    c->offload_optimizer = z->offload_optimizer;
}

void sz_zero_plan_config(const struct sz_model *m, sz_plan_pass pass, int clip, sz_plan_config *c)
{
    sz_zero_plan_config_of(&m->zero, &m->prec, m->opt->nstates(&m->zero), m->fold_grads, m->nd, m->rank, pass, clip, c);
    c->bucket_elems = sz_zero_bucket_elems(m, m->nd);
    c->comm_worker = sz_comm_worker >= 0;
    /* with CUDA workers and the host-copy collectives (CPU tasks) the buffer stays in RAM
     * (tasks/model.c does not place it on the GPU) */
    c->comm_on_host = m->nd > 1 && starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0 && !sz_nccl_active();
    /* what the model holds beside the units' states (registered before sz_model_finalize) */
    c->extra[SZ_MEM_ACTIVATIONS] = m->persistent[SZ_MEM_ACTIVATIONS];
    c->extra[SZ_MEM_HOST] = m->persistent[SZ_MEM_HOST];
    c->extra[SZ_MEM_HOST_BUFFERS] = m->persistent[SZ_MEM_HOST_BUFFERS];
}

int64_t sz_zero_bucket_elems(const struct sz_model *m, int nd)
{
    int64_t maxpad = 1;
    for (int i = 0; i < m->nunits; i++) {
        int64_t p = sz_zero_padded(m->units[i]->numel, nd);
        maxpad = p > maxpad ? p : maxpad;
    }
    return sz_plan_bucket_elems(m->zero.bucket_bytes, nd, maxpad);
}

sz_status sz_zero_plan_build(const struct sz_model *m, const sz_plan_config *c, sz_plan *out)
{
    sz_plan_unit *pu = calloc((size_t)m->nunits + 1, sizeof *pu);
    if (!pu)
        return SZ_ERR_NOMEM;
    sz_zero_plan_units(m, pu);
    sz_status st = sz_plan_build(pu, m->nunits, c, out);
    free(pu);
    return st;
}

/* The model's plan for a pass (the step's is rebuilt when the clipping changes). */
static sz_status plan_of(struct sz_model *m, sz_plan_pass pass, int clip, const sz_plan **out)
{
    sz_plan *p = pass == SZ_PASS_STEP ? &m->step_plan : &m->eval_plan;
    if (!p->a || (pass == SZ_PASS_STEP && p->cfg.clip != clip)) {
        sz_plan_config c;
        sz_zero_plan_config(m, pass, clip, &c);
        sz_plan_free(p);
        sz_status st = sz_zero_plan_build(m, &c, p);
        if (st != SZ_OK)
            return st;
        for (int i = 0; pass == SZ_PASS_STEP && i < m->nunits; i++) { /* what the callbacks write */
            struct sz_unit *u = m->units[i];
            u->c.rounded = p->rounded[i];
            u->wg = m->prec.mixed && !u->c.rounded ? &u->wgrad : &u->grad;
        }
    }
    *out = p;
    return SZ_OK;
}

/* ---- one submit function per action kind -------------------------------------------------------- */

struct step_args {
    const sz_train_config *cfg;
    int t;
};

/* Whether the step takes the gradients' global norm before the update (the NORM and CLIP actions):
 * to clip them, or under fp16 to divide the loss scale out and find an overflow first. */
static int step_clips(const struct sz_model *m, const sz_train_config *cfg)
{
    return cfg->grad_clip > 0 || m->prec.loss_scaling;
}

/* The action's bytes and their category (-1 and 0 when it accounts none). */
static int64_t bytes_of(const sz_action *a, int *cat)
{
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
        if (a->delta[c]) {
            *cat = c;
            return a->delta[c];
        }
    *cat = -1;
    return 0;
}

static const sz_tensor *buffer(struct sz_unit *u, sz_plan_buf b)
{
    switch (b) {
    case SZ_BUF_PARAM: return &u->param.all;
    case SZ_BUF_WORK: return &u->work.all;
    case SZ_BUF_GRAD: return &u->grad.all;
    case SZ_BUF_WGRAD: return &u->wg->all;
    case SZ_BUF_CKPT: return u->ckpt;
    default: return NULL;
    }
}

/* Frees the buffer (StarPU allocated it on demand): after every task on it. */
static void invalidate(struct sz_model *m, const sz_tensor *t)
{
    if (m->depcheck)
        sz_depcheck_access(&m->core, t->h, 1);
    starpu_data_invalidate_submit(t->h);
}

typedef sz_status (*submit_fn)(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s);

static sz_status do_gather(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    return sz_submit_all_gather(m, u, 1, cat, b);
}

static sz_status do_convert(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    return sz_submit_convert(m, &u->work.all, &u->param.all, 0, cat, b, u->gather_name);
}

/* Invalidation frees the buffer (StarPU allocated it on demand). */
static sz_status do_release(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    const sz_tensor *t = buffer(u, a->buf);
    if (!t)
        return SZ_ERR_STATE;
    sz_status st = sz_submit_account(m, t, cat, b, u->release_name);
    invalidate(m, t);
    return st;
}

/* The zeroing that allocates a checkpoint is ordered on the token like every accounting task. */
static sz_status do_ckpt_alloc(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    if (!u->ckpt)
        return SZ_ERR_STATE;
    return sz_submit_zero(u, u->ckpt, u->fetch_name, &m->counters, cat, b, m->token);
}

static sz_status do_ckpt_offload(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    if (!u->ckpt)
        return SZ_ERR_STATE;
    sz_status st = sz_submit_convert(m, u->ckpt_host, u->ckpt, 0, cat, b, u->offload_name);
    invalidate(m, u->ckpt);
    return st;
}

static sz_status do_ckpt_fetch(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    if (!u->ckpt)
        return SZ_ERR_STATE;
    return sz_submit_convert(m, u->ckpt, u->ckpt_host, 0, cat, b, u->fetch_name);
}

/* A callback's sz_op_zero calls not folded into one of its ops run now, before its action ends. */
static sz_status after_callback(struct sz_model *m, sz_status st)
{
    sz_status fl = sz_zero_flush(&m->core);
    return st != SZ_OK ? st : fl;
}

static sz_status do_fwd(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)m, (void)a, (void)s;
    u->c.phase = u->fwd_name;
    return after_callback(m, u->forward(u, u->user));
}

static sz_status do_recompute(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)m, (void)a, (void)s;
    u->c.phase = u->recompute_name;
    return after_callback(m, u->forward(u, u->user));
}

/* The gradients its ops did not write whole first (left to them by ZERO_GRADS / GRAD_ALLOC) are
 * zeroed before the action ends. */
static sz_status do_bwd(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)m, (void)a, (void)s;
    u->c.phase = u->bwd_name;
    sz_status ck = m->check_pass ? sz_check_bwd_begin(m, u) : SZ_OK;
    if (ck != SZ_OK)
        return ck;
    sz_status st = after_callback(m, u->backward ? u->backward(u, u->user) : sz_autograd_backward(m, u)),
              fl = sz_grads_flush(&m->core);
    if (m->check_pass && (ck = sz_check_bwd_end(m, u)) != SZ_OK && st == SZ_OK)
        st = ck;
    return st != SZ_OK ? st : fl;
}

/* Every parameter's view of u's gradient buffer `all` left to its first writer (core/fold.c). */
static sz_status defer_grads(struct sz_model *m, struct sz_unit *u, const sz_tensor *all, int onto_zeros)
{
    sz_status st = SZ_OK;
    for (int k = 0; k < u->nparams && st == SZ_OK; k++)
        st = sz_grads_defer(&m->core, u, all, u->offset[k], u->params[k].rows * u->params[k].cols,
                            onto_zeros, u->bwd_name);
    return st;
}

/* SZ_GRADS_FIRST_WRITERS: only the padding is zeroed (the optimizer and the collectives read it);
 * each parameter's gradient is left to the first task on it (core/fold.c). */
static sz_status do_zero_grads(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    if (!(a->flag & SZ_GRADS_FIRST_WRITERS))
        return sz_submit_zero(u, &u->grad.all, u->bwd_name, NULL, 0, 0, NULL);
    /* SZ_GRADS_ROUNDED: the bf16 gradients, the writers round onto zeros (bf16(0 + g)) */
    sz_status st = defer_grads(m, u, &u->grad.all, (a->flag & SZ_GRADS_ROUNDED) != 0);
    if (st == SZ_OK && u->padded > u->numel) {
        sz_tensor pad = sz_tensor_view(&u->grad.all, u->numel, u->padded - u->numel, NULL);
        st = sz_submit_zero(u, &pad, u->bwd_name, NULL, 0, 0, NULL);
    }
    return st;
}

/* With the token, the zeroing that allocates a unit's gradients is ordered after the earlier
 * reduce-scatters, bounding the gradients in flight. SZ_GRADS_FIRST_WRITERS: the task still writes
 * the whole buffer (it allocates it) but zeroes only the padding. */
static sz_status do_grad_alloc(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    int fold = (a->flag & SZ_GRADS_FIRST_WRITERS) != 0;
    /* SZ_GRADS_ROUNDED: the bf16 copy (SZ_BUF_GRAD) the writers round into, each setting bf16(g) */
    const sz_tensor *t = a->buf == SZ_BUF_GRAD ? &u->grad.all : &u->wg->all;
    sz_status st = sz_submit_zero_from(u, t, fold ? u->numel : 0, u->bwd_name, &m->counters, cat, b, m->token);
    return st == SZ_OK && fold ? defer_grads(m, u, t, 0) : st;
}

static sz_status do_grad_convert(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    sz_status st = sz_submit_convert(m, &u->grad.all, &u->wgrad.all, a->flag, cat, b, u->bwd_name);
    invalidate(m, &u->wgrad.all);
    return st;
}

/* One bucket round: the action's range [lo, lo + n) lies in our shard; every rank sends the same
 * piece of each rank's shard. The last round frees the full-size gradients when the action says
 * so (stages 2-3). */
static sz_status do_reduce_scatter(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)s;
    int cat;
    int64_t b = bytes_of(a, &cat);
    sz_status st = sz_submit_reduce_scatter(m, u, a->lo - (int64_t)m->rank * u->shard, a->n, a->flag, -b);
    if (b)
        invalidate(m, &u->grad.all);
    return st;
}

static sz_status do_all_gather(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)a, (void)s;
    return sz_submit_all_gather(m, u, 0, -1, 0);
}

static sz_status do_norm(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)m, (void)a, (void)s;
    return sz_submit_sumsq(u, &u->sumsq, &u->gshard, u->opt_name);
}

static sz_status do_clip(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    (void)u;
    /* under fp16 the factor also divides the loss scale out, and marks an overflow (tasks/clip_scale.c) */
    return sz_submit_clip(m, a->flag ? s->cfg->grad_clip : 0.0f, m->prec.loss_scaling ? m->scaler.scale : 0.0f);
}

/* The optimizer (m->opt, tasks/sz_optimizer.h) on the piece of each tensor that lies in [lo, lo + n)
 * of the unit's flat buffer. The parameter, gradient (and mixed precision's master) views start at
 * flat element lo. With norm, the tasks also leave the range's squared gradient norm there (0 for a
 * range of padding only). */
static sz_status opt_range(struct sz_model *m, struct sz_unit *u, const sz_train_config *cfg, int t, int64_t lo,
                           int64_t n, const sz_tensor *p, const sz_tensor *g, const sz_tensor *norm)
{
    int acc = 0;
    for (int k = 0; k < u->nparams; k++) {
        int64_t a = u->offset[k], b = a + u->params[k].rows * u->params[k].cols;
        int64_t from = a > lo ? a : lo, to = b < lo + n ? b : lo + n;
        if (from >= to)
            continue;
        float wd = (cfg->decay == SZ_DECAY_ALL || u->params[k].decay) ? cfg->weight_decay : 0.0f;
        int64_t off = from - lo, len = to - from;
        sz_tensor pv = sz_tensor_view(p, off, len, NULL), gv = sz_tensor_view(g, off, len, NULL);
        sz_tensor sv[SZ_OPT_MAX_STATES];
        sz_opt_range r = {.p = &pv, .g = &gv, .norm = norm, .acc = acc, .wd = wd};
        for (int s = 0; s < m->nopt_states; s++) {
            sv[s] = sz_tensor_view(&u->opt_state[s], off, len, NULL);
            r.state[s] = &sv[s];
        }
        /* without clipping (or fp16's loss scale) the factor is a constant 1: the update of a shard
         * then waits only for its own reduced gradients, not for every unit's norm */
        sz_tensor scale = sz_tensor_view(step_clips(m, cfg) ? m->clip : m->one, 0, 1, NULL);
        sz_tensor master = m->prec.mixed ? sz_tensor_view(&u->master, off, len, NULL) : pv;
        r.scale = &scale;
        r.master = m->prec.mixed ? &master : NULL;
        sz_status st = m->opt->step(u, &r, &m->zero, cfg, t, u->opt_name);
        if (st != SZ_OK)
            return st;
        acc = 1;
    }
    return norm && !acc ? sz_submit_zero(u, norm, u->opt_name, NULL, 0, 0, NULL) : SZ_OK;
}

static sz_status do_optimizer(struct sz_model *m, struct sz_unit *u, const sz_action *a, const struct step_args *s)
{
    sz_status st;
    if (u->state_unset) { /* --no-arenas: the optimizer state appears now */
        for (int k = 0; k < m->nopt_states; k++)
            if ((st = sz_submit_zero(u, &u->opt_state[k], u->opt_name, NULL, 0, 0, NULL)) != SZ_OK)
                return st;
        u->state_unset = 0;
    }
    const sz_tensor *norm = a->flag ? &u->sumsq : NULL;
    if (m->zero.stage == 0) /* every rank updates everything, identically */
        return opt_range(m, u, s->cfg, s->t, a->lo, a->n, &u->param.all, &u->grad.all, norm);
    return opt_range(m, u, s->cfg, s->t, a->lo, a->n, &u->pshard, &u->gshard, norm);
}

static const submit_fn k_submit[SZ_ACT_NKINDS] = {
    [SZ_ACT_GATHER] = do_gather,           [SZ_ACT_CONVERT] = do_convert,
    [SZ_ACT_RELEASE] = do_release,         [SZ_ACT_CKPT_ALLOC] = do_ckpt_alloc,
    [SZ_ACT_FWD] = do_fwd,                 [SZ_ACT_CKPT_OFFLOAD] = do_ckpt_offload,
    [SZ_ACT_CKPT_FETCH] = do_ckpt_fetch,   [SZ_ACT_RECOMPUTE] = do_recompute,
    [SZ_ACT_ZERO_GRADS] = do_zero_grads,   [SZ_ACT_GRAD_ALLOC] = do_grad_alloc,
    [SZ_ACT_BWD] = do_bwd,                 [SZ_ACT_GRAD_CONVERT] = do_grad_convert,
    [SZ_ACT_REDUCE_SCATTER] = do_reduce_scatter, [SZ_ACT_ALL_GATHER] = do_all_gather,
    [SZ_ACT_NORM] = do_norm,               [SZ_ACT_CLIP] = do_clip,
    [SZ_ACT_OPTIMIZER] = do_optimizer,
};

/* ---- the loop --------------------------------------------------------------------------------- */

/* Actions [from, to) of plan p. A task's plan position is its action's index (the high bits; the
 * low 16 count the action's own tasks in submission order, core/task.c incrementing m->core.position). */
static sz_status run(struct sz_model *m, const sz_plan *p, int from, int to, const struct step_args *s)
{
    sz_depcheck_run_begin(m, p, from);
    for (int k = from; k < to; k++) {
        const sz_action *a = &p->a[k];
        if (a->kind < 0 || a->kind >= SZ_ACT_NKINDS || !k_submit[a->kind] || a->unit >= m->nunits)
            return SZ_ERR_STATE;
        m->current_action = k;
        m->core.position = (uint64_t)k << 16;
        /* ZeRO-Offload: the plan puts the optimizer on the host; its tasks run on CPU workers */
        m->core.force_where = a->node == SZ_NODE_HOST && a->kind == SZ_ACT_OPTIMIZER ? STARPU_CPU : 0;
        sz_depcheck_action(m, p, k);
        struct sz_unit *u = a->unit >= 0 ? m->units[a->unit] : m->units[0];
        sz_status st = k_submit[a->kind](m, u, a, s);
        m->core.force_where = 0;
        if (st != SZ_OK) {
            m->core.ngpending = 0;
            sz_depcheck_action(m, p, -1);
            return st;
        }
    }
    /* the plan puts a BWD after every ZERO_GRADS / GRAD_ALLOC that leaves gradients to first writers */
    if (m->core.ngpending > 0) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "the plan left %d parameter gradients unwritten at the end of its run "
                       "(no BWD action after their zeroing): a bug", m->core.ngpending);
        m->core.ngpending = 0;
        return SZ_ERR_STATE;
    }
    return sz_depcheck_run_end(m, p, to) ? SZ_ERR_STATE : SZ_OK;
}

sz_status sz_zero_forward_backward(struct sz_model *m)
{
    const sz_plan *p;
    sz_status st = plan_of(m, SZ_PASS_STEP, m->step_plan.a ? m->step_plan.cfg.clip : 0, &p);
    if (st != SZ_OK)
        return st;
    struct step_args s = {0};
    return run(m, p, p->mb_begin[m->micro_batch], p->mb_begin[m->micro_batch + 1], &s);
}

sz_status sz_zero_eval(struct sz_model *m)
{
    const sz_plan *p;
    sz_status st = plan_of(m, SZ_PASS_EVAL, 0, &p);
    struct step_args s = {0};
    return st != SZ_OK ? st : run(m, p, 0, p->n, &s);
}

sz_status sz_zero_update(struct sz_model *m, const sz_train_config *cfg, int t)
{
    const sz_plan *p;
    sz_status st = plan_of(m, SZ_PASS_STEP, step_clips(m, cfg), &p);
    /* a skipped fp16 step does not count as one of the optimizer's (bias correction), as in DeepSpeed */
    struct step_args s = {cfg, m->prec.loss_scaling && t > m->scaler.skipped ? t - (int)m->scaler.skipped : t};
    return st != SZ_OK ? st : run(m, p, p->mb_begin[p->cfg.micro_batches], p->n, &s);
}

/* ---- host-side assembly of full values from the owners' slices ---------------------------------- */

sz_status sz_zero_assemble(struct sz_model *m, struct sz_unit *u, int which, float *full)
{
    /* parameters are the fp32 master under mixed precision */
    sz_tensor *slice = which ? &u->gshard : (m->prec.mixed ? &u->master : &u->pshard);
    if (which == 0 && m->zero.stage == 0 && m->prec.mixed)
        return sz_tensor_read(&u->master, full);
    if (which == 0 && m->zero.stage < 3 && !m->prec.mixed)
        return sz_tensor_read(&u->param.all, full);
    if (m->nd == 1)
        return sz_tensor_read_f32(slice, full);
    float *mine = malloc((size_t)u->shard * sizeof *mine);
    if (!mine)
        return SZ_ERR_NOMEM;
    sz_status st = sz_tensor_read_f32(slice, mine);
    if (st == SZ_OK && sz_allgather(mine, (int)u->shard, MPI_FLOAT, full, (int)u->shard, MPI_FLOAT,
                                    m->core.ctx->host_comm, "assembly all-gather") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    free(mine);
    return st;
}

sz_status sz_zero_assemble_range(struct sz_model *m, struct sz_unit *u, int root, int64_t lo, int64_t n, float *dst)
{
    int here = root == m->rank;
    if (n <= 0)
        return SZ_OK;
    sz_tensor piece;
    if (m->zero.stage == 0 && m->prec.mixed) { /* held whole here: read where it is */
        piece = sz_tensor_view(&u->master, lo, n, NULL);
        return here ? sz_tensor_read(&piece, dst) : SZ_OK;
    }
    if (m->zero.stage < 3 && !m->prec.mixed) {
        piece = sz_tensor_view(&u->param.all, lo, n, NULL);
        return here ? sz_tensor_read(&piece, dst) : SZ_OK;
    }
    sz_tensor *slice = m->prec.mixed ? &u->master : &u->pshard; /* the fp32 values, sharded */
    if (m->nd == 1) {
        piece = sz_tensor_view(slice, lo, n, NULL);
        return sz_tensor_read_f32(&piece, dst);
    }
    /* each rank sends the part of [lo, lo + n) it owns, in rank order: the range's elements in order */
    int *counts = malloc(2 * (size_t)m->nd * sizeof *counts), *displs = counts ? counts + m->nd : NULL;
    if (!counts)
        return SZ_ERR_NOMEM;
    for (int r = 0; r < m->nd; r++) {
        int64_t a = (int64_t)r * u->shard, b = a + u->shard;
        a = a > lo ? a : lo;
        b = b < lo + n ? b : lo + n;
        counts[r] = (int)(b > a ? b - a : 0);
        displs[r] = (int)(b > a ? a - lo : 0);
    }
    int64_t a = (int64_t)m->rank * u->shard;
    a = a > lo ? a : lo;
    float *mine = counts[m->rank] ? malloc((size_t)counts[m->rank] * sizeof *mine) : NULL;
    sz_status st = counts[m->rank] && !mine ? SZ_ERR_NOMEM : SZ_OK;
    if (st == SZ_OK && counts[m->rank]) {
        piece = sz_tensor_view(slice, a - (int64_t)m->rank * u->shard, counts[m->rank], NULL);
        st = sz_tensor_read_f32(&piece, mine);
    }
    /* a rank that failed still takes part, so that no rank waits for it */
    if (sz_gatherv(mine, mine ? counts[m->rank] : 0, MPI_FLOAT, dst, counts, displs, MPI_FLOAT, root,
                   m->core.ctx->host_comm, "assembly gather") != MPI_SUCCESS && st == SZ_OK)
        st = SZ_ERR_RUNTIME;
    free(mine);
    free(counts);
    return st;
}
