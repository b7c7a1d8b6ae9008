/* tasks/zero.c — one ZeRO step as tasks, rank r of nd (docs/ARCHITECTURE.md: plan -> submit, ZeRO semantics):
 *
 *   forward:  for u in order:    [3: gather u (+ tied units)] fwd(u) [3: release them, except
 *                                for the last unit, whose backward follows]
 *   backward: for u in reverse:  [3: gather] [2-3: allocate grads on first touch] [checkpointing:
 *                                recompute fwd(u)] bwd(u) [3: release]
 *                                [2-3: reduce-scatter u's grads into the shard (every micro-batch), free them]
 *   update:   [0-1: reduce-scatter every unit's grads into its own slice] [0: all-gather them]
 *             squared norms of the owned slices -> all-gathered -> clip factor (and the norm)
 *             AdamW on the owned slice (stage 0: on everything), one task per tensor piece; it
 *             waits for the clip factor only when clipping is on. Without clipping (except stage 0
 *             across ranks) AdamW takes the squared norms in its own pass instead, and the
 *             all-gather of them, for the reported norm, comes after it
 *             [1-2: all-gather the updated parameters]
 *
 * Every reduction sums the ranks' contributions in rank order (codelets/reduce_scatter.c), so at
 * a fixed nd and one micro-batch all stages give bitwise the same losses and parameters. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_sched.h"
#include "sz_deadline.h"

/* ---- the parameters a unit's compute tasks read ---------------------------------------------
 * Stage 3 gathers them just in time; mixed precision converts the bf16 parameters into an fp32
 * working copy. Both are released right after use (invalidated: StarPU frees the buffer). */

static int64_t elem_bytes(const struct sz_model *m) { return m->mixed ? 2 : 4; }

int64_t sz_zero_params_bytes(const struct sz_model *m, const struct sz_unit *u)
{
    return (m->zero.stage == 3 ? u->padded * elem_bytes(m) : 0) + (m->mixed ? u->padded * 4 : 0);
}

static sz_status gather(struct sz_model *m, struct sz_unit *u)
{
    if (u->gathered)
        return SZ_OK;
    u->gathered = 1;
    sz_status st = SZ_OK;
    if (m->zero.stage == 3)
        st = sz_submit_all_gather(m, u, 1, SZ_MEM_GATHERED, u->padded * elem_bytes(m));
    if (st == SZ_OK && m->mixed) {
        st = sz_submit_convert(m, &u->work.all, &u->param.all, 0, SZ_MEM_GATHERED, u->padded * 4, u->gather_name);
        if (st == SZ_OK && m->zero.stage == 3) { /* the bf16 gathered copy is not needed any more */
            st = sz_submit_account(m, &u->param.all, SZ_MEM_GATHERED, -u->padded * 2, u->release_name);
            starpu_data_invalidate_submit(u->param.all.h);
        }
    }
    return st;
}

static sz_status release(struct sz_model *m, struct sz_unit *u)
{
    if (!u->gathered)
        return SZ_OK;
    u->gathered = 0;
    struct sz_flat *f = m->mixed ? &u->work : (m->zero.stage == 3 ? &u->param : NULL);
    if (!f)
        return SZ_OK;
    sz_status st = sz_submit_account(m, &f->all, SZ_MEM_GATHERED, -u->padded * 4, u->release_name);
    starpu_data_invalidate_submit(f->all.h);
    return st;
}

static sz_status with_uses(struct sz_model *m, struct sz_unit *u, sz_status (*fn)(struct sz_model *, struct sz_unit *))
{
    sz_status st = fn(m, u);
    for (int i = 0; i < u->nuses && st == SZ_OK; i++)
        st = fn(m, m->units[u->uses[i]]);
    return st;
}

/* ---- the gradients a unit's backward writes ----------------------------------------------------
 * fp32, stages 0-1: straight into the persistent full gradients (zeroed once per step).
 * Otherwise into a buffer allocated on first touch: stages 2-3 reduce-scatter it into the shard
 * right after the unit's backward (every micro-batch) and free it; mixed precision first converts
 * the fp32 working gradients to bf16 (added into the persistent bf16 gradients at stages 0-1). */

static sz_status grads_touch(struct sz_model *m, struct sz_unit *u)
{
    if (u->grads_live)
        return SZ_OK;
    u->grads_live = 1;
    if (!m->mixed && m->zero.stage < 2)
        return SZ_OK;
    return sz_submit_zero(u, &u->wg->all, u->bwd_name, &m->counters, SZ_MEM_GRADS_IN_FLIGHT, u->padded * 4, m->token);
}

static sz_status grads_flush(struct sz_model *m, struct sz_unit *u)
{
    if ((!m->mixed && m->zero.stage < 2) || !u->grads_live)
        return SZ_OK;
    u->grads_live = 0;
    sz_status st = SZ_OK;
    int64_t release = u->padded * 4;
    if (m->mixed) {
        int keep = m->zero.stage >= 2; /* a bf16 copy lives on until its reduce-scatter */
        st = sz_submit_convert(m, &u->grad.all, &u->wgrad.all, !keep, SZ_MEM_GRADS_IN_FLIGHT,
                               (keep ? u->padded * 2 : 0) - u->padded * 4, u->bwd_name);
        starpu_data_invalidate_submit(u->wgrad.all.h);
        release = u->padded * 2;
    }
    if (st == SZ_OK && m->zero.stage >= 2) {
        st = sz_submit_reduce_scatter(m, u, m->micro_batch > 0, release);
        starpu_data_invalidate_submit(u->grad.all.h);
    }
    return st;
}

/* ---- P_a+cpu: offloaded activation checkpoints ---------------------------------------------
 * A checkpointable unit's input lives on the device pool from its producer's forward to its own
 * forward, then moves to the host pool (a copy task) and is freed; it comes back before the unit's
 * recompute (fetched one unit ahead) and is freed after the unit's backward. The checkpoint the
 * recompute writes again (the next unit's input) is allocated for it and freed right after. */
static int64_t ckpt_bytes(const struct sz_unit *v) { return v->ckpt->numel * (int64_t)sz_dtype_size(v->ckpt->dtype); }

static sz_status ckpt_alloc(struct sz_model *m, struct sz_unit *v)
{
    if (!v || !v->ckpt || v->ckpt_on_device)
        return SZ_OK;
    v->ckpt_on_device = 1;
    return sz_submit_zero(v, v->ckpt, v->fetch_name, &m->counters, SZ_MEM_CHECKPOINTS, ckpt_bytes(v), NULL);
}

static sz_status ckpt_offload(struct sz_model *m, struct sz_unit *v)
{
    if (!v->ckpt || !v->ckpt_on_device)
        return SZ_OK;
    v->ckpt_on_device = 0;
    sz_status st = sz_submit_convert(m, v->ckpt_host, v->ckpt, 0, SZ_MEM_CHECKPOINTS, -ckpt_bytes(v), v->offload_name);
    starpu_data_invalidate_submit(v->ckpt->h);
    return st;
}

static sz_status ckpt_fetch(struct sz_model *m, struct sz_unit *v)
{
    if (!v || !v->ckpt || v->ckpt_on_device)
        return SZ_OK;
    v->ckpt_on_device = 1;
    return sz_submit_convert(m, v->ckpt, v->ckpt_host, 0, SZ_MEM_CHECKPOINTS, ckpt_bytes(v), v->fetch_name);
}

static sz_status ckpt_drop(struct sz_model *m, struct sz_unit *v)
{
    if (!v || !v->ckpt || !v->ckpt_on_device)
        return SZ_OK;
    v->ckpt_on_device = 0;
    sz_status st = sz_submit_account(m, v->ckpt, SZ_MEM_CHECKPOINTS, -ckpt_bytes(v), v->release_name);
    starpu_data_invalidate_submit(v->ckpt->h);
    return st;
}

/* Whether the unit's backward needs its parameters (and its tied units') gathered: not for a
 * backward that reads none, unless the unit's forward is recomputed before it. */
int sz_zero_backward_gathers(const struct sz_model *m, const struct sz_unit *u)
{
    return u->backward && !(u->backward_skips_params && !(m->zero.checkpoint && u->checkpointable));
}

/* ---- the prefetch window ----------------------------------------------------------------------
 * Stage 3: after gathering the unit about to compute, gather the next units in the pass's order
 * while they fit in prefetch_bytes (and the gathered bytes alive stay within max_live_bytes), so
 * their gathers can run while this unit computes. Releases stay right after each unit's use. */
static sz_status prefetch(struct sz_model *m, int from, int step)
{
    if (m->zero.stage < 3 || m->zero.prefetch_bytes <= 0)
        return SZ_OK;
    int64_t live = 0, ahead = 0;
    for (int i = 0; i < m->nunits; i++)
        if (m->units[i]->gathered)
            live += sz_zero_params_bytes(m, m->units[i]);
    for (int i = from; i >= 0 && i < m->nunits; i += step) {
        struct sz_unit *u = m->units[i];
        if (step < 0 && !sz_zero_backward_gathers(m, u))
            continue;
        /* the unit and the units it uses (the head: the tied embedding); those gathered by an
         * earlier call count too: the window is bytes ahead, not new bytes */
        int64_t b = 0, add = 0;
        for (int k = -1; k < u->nuses; k++) {
            struct sz_unit *v = k < 0 ? u : m->units[u->uses[k]];
            b += sz_zero_params_bytes(m, v);
            add += v->gathered ? 0 : sz_zero_params_bytes(m, v);
        }
        if (ahead + b > m->zero.prefetch_bytes || (m->zero.max_live_bytes > 0 && live + add > m->zero.max_live_bytes))
            break;
        sz_status st = with_uses(m, u, gather);
        if (st != SZ_OK)
            return st;
        ahead += b;
        live += add;
    }
    return SZ_OK;
}

/* ---- passes ------------------------------------------------------------------------------------ */

sz_status sz_zero_forward(struct sz_model *m, int then_backward)
{
    sz_status st = SZ_OK;
    for (int i = 0; i < m->nunits && st == SZ_OK; i++) {
        struct sz_unit *u = m->units[i];
        if ((st = with_uses(m, u, gather)) != SZ_OK || (st = prefetch(m, i + 1, 1)) != SZ_OK)
            break;
        struct sz_unit *next = i + 1 < m->nunits ? m->units[i + 1] : NULL;
        if ((st = ckpt_alloc(m, next)) != SZ_OK) /* this forward writes the next unit's checkpoint */
            break;
        u->phase = u->fwd_name;
        if ((st = u->forward(u, u->user)) != SZ_OK)
            break;
        /* the last unit's backward comes next and needs the same parameters: keep them */
        int keep = then_backward && i == m->nunits - 1 && u->backward;
        if (!keep && (st = with_uses(m, u, release)) != SZ_OK)
            break;
        st = ckpt_offload(m, u); /* our input waits on the host pool until our recompute */
    }
    return st;
}

sz_status sz_zero_backward(struct sz_model *m)
{
    sz_status st = SZ_OK;
    if (m->zero.stage < 2 && m->micro_batch == 0) /* full gradients accumulate over micro-batches */
        for (int i = 0; i < m->nunits && st == SZ_OK; i++)
            st = sz_submit_zero(m->units[i], &m->units[i]->grad.all, m->units[i]->bwd_name, NULL, 0, 0, NULL);
    for (int i = m->nunits - 1; i >= 0 && st == SZ_OK; i--) {
        struct sz_unit *u = m->units[i];
        if (u->backward) {
            if ((sz_zero_backward_gathers(m, u) && (st = with_uses(m, u, gather)) != SZ_OK) ||
                (st = prefetch(m, i - 1, -1)) != SZ_OK || (st = with_uses(m, u, grads_touch)) != SZ_OK)
                break;
            struct sz_unit *next = i + 1 < m->nunits ? m->units[i + 1] : NULL;
            int recompute = m->zero.checkpoint && u->checkpointable;
            if (recompute) { /* the forward's activations, again */
                if ((st = ckpt_fetch(m, u)) != SZ_OK || (st = ckpt_fetch(m, i > 0 ? m->units[i - 1] : NULL)) != SZ_OK ||
                    (st = ckpt_alloc(m, next)) != SZ_OK)
                    break;
                u->phase = u->recompute_name;
                if ((st = u->forward(u, u->user)) != SZ_OK)
                    break;
            }
            u->phase = u->bwd_name;
            if ((st = u->backward(u, u->user)) != SZ_OK || (st = with_uses(m, u, release)) != SZ_OK)
                break;
            /* with a communication worker, the next unit's gradients before our reduce-scatter:
             * both take the token, and its backward must not wait for our communication (one
             * unit's gradients more in flight; the plan counts them) */
            if (sz_comm_worker >= 0 && i > 0 && m->units[i - 1]->backward &&
                (st = with_uses(m, m->units[i - 1], grads_touch)) != SZ_OK)
                break;
            if (recompute && ((st = ckpt_drop(m, next)) != SZ_OK || (st = ckpt_drop(m, u)) != SZ_OK))
                break;
        }
        /* units only touch their own and earlier units' gradients: ours are complete now */
        st = grads_flush(m, u);
    }
    for (int i = 0; i < m->nunits; i++)
        if (!m->mixed && m->zero.stage < 2)
            m->units[i]->grads_live = 0;
    return st;
}

/* AdamW on the piece of each tensor that lies in [lo, lo + n) of the unit's flat buffer. The
 * parameter, gradient (and mixed precision's master) views start at flat element lo. With norm,
 * the tasks also leave the range's squared gradient norm there (0 for a range of padding only). */
static sz_status adam_range(struct sz_model *m, struct sz_unit *u, const sz_train_config *cfg, int t, int64_t lo,
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
        sz_tensor mv = sz_tensor_view(&u->adam_m, off, len, NULL), vv = sz_tensor_view(&u->adam_v, off, len, NULL);
        /* without clipping the factor is a constant 1: the update of a shard then waits only for
         * its own reduced gradients, not for every unit's norm */
        sz_tensor scale = sz_tensor_view(cfg->grad_clip > 0 ? m->clip : m->one, 0, 1, NULL);
        sz_tensor master = m->mixed ? sz_tensor_view(&u->master, off, len, NULL) : pv;
        sz_status st = m->mixed ? sz_submit_adamw_mixed(u, &master, &pv, &gv, &mv, &vv, &scale, norm, acc, cfg, wd, t,
                                                        u->opt_name)
                                : sz_submit_adamw(u, &pv, &gv, &mv, &vv, &scale, norm, acc, cfg, wd, t, u->opt_name);
        if (st != SZ_OK)
            return st;
        acc = 1;
    }
    return norm && !acc ? sz_submit_zero(u, norm, u->opt_name, NULL, 0, 0, NULL) : SZ_OK;
}

sz_status sz_zero_update(struct sz_model *m, const sz_train_config *cfg, int t)
{
    sz_status st = SZ_OK;
    int s = m->zero.stage;
    /* Without clipping nothing waits for the norm: where each rank updates exactly its own shard,
     * AdamW takes the shard's norm in its own pass over the gradients (one read of them less). Its
     * tasks then chain through the norms' buffer, so they go in the order the gradients become
     * final in: last unit first when backward left them final (stages 2-3, or one rank), unit
     * order when the reduce-scatters below do (stages 0-1 across ranks). */
    int fused = cfg->grad_clip <= 0 && (s > 0 || m->nd == 1);
    int last_first = fused && (s >= 2 || m->nd == 1);
    for (int i = 0; i < m->nunits && st == SZ_OK; i++) {
        struct sz_unit *u = m->units[i];
        /* stages 0-1 on one rank: the shard is the whole gradient, already reduced */
        if (s < 2 && m->nd > 1)
            st = sz_submit_reduce_scatter(m, u, 0, 0);
        if (st == SZ_OK && s == 0 && m->nd > 1)
            st = sz_submit_all_gather(m, u, 0, -1, 0); /* the all-reduce's second half */
        if (st == SZ_OK && !fused)
            st = sz_submit_sumsq(u, &u->sumsq, &u->gshard, u->opt_name);
    }
    if (st == SZ_OK && !fused)
        st = sz_submit_clip(m, cfg->grad_clip);
    for (int j = 0; j < m->nunits && st == SZ_OK; j++) {
        struct sz_unit *u = m->units[last_first ? m->nunits - 1 - j : j];
        if (u->state_unset) { /* --no-arenas: the optimizer state appears now */
            if ((st = sz_submit_zero(u, &u->adam_m, u->opt_name, NULL, 0, 0, NULL)) != SZ_OK ||
                (st = sz_submit_zero(u, &u->adam_v, u->opt_name, NULL, 0, 0, NULL)) != SZ_OK)
                break;
            u->state_unset = 0;
        }
        const sz_tensor *norm = fused ? &u->sumsq : NULL;
        if (s == 0) /* every rank updates everything, identically */
            st = adam_range(m, u, cfg, t, 0, u->padded, &u->param.all, &u->grad.all, norm);
        else
            st = adam_range(m, u, cfg, t, (int64_t)m->rank * u->shard, u->shard, &u->pshard, &u->gshard, norm);
        if (st == SZ_OK && (s == 1 || s == 2))
            st = sz_submit_all_gather(m, u, 0, -1, 0);
    }
    if (st == SZ_OK && fused) /* the norm, for the report (its factor is 1) */
        st = sz_submit_clip(m, 0.0f);
    return st;
}

/* ---- host-side assembly of full values from the owners' slices ---------------------------------- */

sz_status sz_zero_assemble(struct sz_model *m, struct sz_unit *u, int which, float *full)
{
    /* parameters are the fp32 master under mixed precision */
    sz_tensor *slice = which ? &u->gshard : (m->mixed ? &u->master : &u->pshard);
    if (which == 0 && m->zero.stage == 0 && m->mixed)
        return sz_tensor_read(&u->master, full);
    if (which == 0 && m->zero.stage < 3 && !m->mixed)
        return sz_tensor_read(&u->param.all, full);
    if (m->nd == 1)
        return sz_tensor_read_f32(slice, full);
    float *mine = malloc((size_t)u->shard * sizeof *mine);
    if (!mine)
        return SZ_ERR_NOMEM;
    sz_status st = sz_tensor_read_f32(slice, mine);
    if (st == SZ_OK && sz_allgather(mine, (int)u->shard, MPI_FLOAT, full, (int)u->shard, MPI_FLOAT,
                                    m->ctx->host_comm, "assembly all-gather") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    free(mine);
    return st;
}
