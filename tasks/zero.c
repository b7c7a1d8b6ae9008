/* tasks/zero.c — one ZeRO step as tasks, rank r of nd (DESIGN.md §2 data flow, §3 semantics):
 *
 *   forward:  for u in order:    [3: gather u (+ tied units)] fwd(u) [3: release them]
 *   backward: for u in reverse:  [3: gather] [2-3: allocate grads on first touch] bwd(u) [3: release]
 *                                [2-3: reduce-scatter u's grads into the shard (every micro-batch), free them]
 *   update:   [0-1: reduce-scatter every unit's grads into its own slice] [0: all-gather them]
 *             squared norms of the owned slices -> all-gathered -> clip factor
 *             AdamW on the owned slice (stage 0: on everything), one task per tensor piece
 *             [1-2: all-gather the updated parameters]
 *
 * Every reduction sums the ranks' contributions in rank order (codelets/reduce_scatter.c), so at
 * a fixed nd and one micro-batch all stages give bitwise the same losses and parameters. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"

/* ---- stage 3: parameters of a unit gathered just in time, released right after use ---------- */

static sz_status gather(struct sz_model *m, struct sz_unit *u)
{
    if (m->zero.stage < 3 || u->gathered)
        return SZ_OK;
    u->gathered = 1;
    return sz_submit_all_gather(m, u, 1, SZ_MEM_GATHERED, u->padded * 4);
}

static sz_status release(struct sz_model *m, struct sz_unit *u)
{
    if (m->zero.stage < 3 || !u->gathered)
        return SZ_OK;
    u->gathered = 0;
    sz_status st = sz_submit_account(m, &u->param.all, SZ_MEM_GATHERED, -u->padded * 4, u->comm_name);
    starpu_data_invalidate_submit(u->param.all.h);
    return st;
}

static sz_status with_uses(struct sz_model *m, struct sz_unit *u, sz_status (*fn)(struct sz_model *, struct sz_unit *))
{
    sz_status st = fn(m, u);
    for (int i = 0; i < u->nuses && st == SZ_OK; i++)
        st = fn(m, m->units[u->uses[i]]);
    return st;
}

/* ---- stages 2-3: a unit's gradients exist only between first touch and reduce-scatter ---------- */

static sz_status grads_touch(struct sz_model *m, struct sz_unit *u)
{
    if (u->grads_live)
        return SZ_OK;
    u->grads_live = 1;
    if (m->zero.stage < 2)
        return SZ_OK; /* stages 0-1: zeroed once per step in sz_zero_backward */
    return sz_submit_zero(&u->grad.all, u->bwd_name, &m->counters, SZ_MEM_GRADS_IN_FLIGHT, u->padded * 4, m->token);
}

static sz_status grads_flush(struct sz_model *m, struct sz_unit *u)
{
    if (m->zero.stage < 2 || !u->grads_live)
        return SZ_OK;
    u->grads_live = 0;
    sz_status st = sz_submit_reduce_scatter(m, u, m->micro_batch > 0, u->padded * 4);
    starpu_data_invalidate_submit(u->grad.all.h);
    return st;
}

/* ---- passes ------------------------------------------------------------------------------------ */

sz_status sz_zero_forward(struct sz_model *m)
{
    sz_status st = SZ_OK;
    for (int i = 0; i < m->nunits && st == SZ_OK; i++) {
        struct sz_unit *u = m->units[i];
        if ((st = with_uses(m, u, gather)) != SZ_OK)
            break;
        u->phase = u->fwd_name;
        if ((st = u->forward(u, u->user)) != SZ_OK)
            break;
        st = with_uses(m, u, release);
    }
    return st;
}

sz_status sz_zero_backward(struct sz_model *m)
{
    sz_status st = SZ_OK;
    if (m->zero.stage < 2 && m->micro_batch == 0) /* full gradients accumulate over micro-batches */
        for (int i = 0; i < m->nunits && st == SZ_OK; i++)
            st = sz_submit_zero(&m->units[i]->grad.all, m->units[i]->bwd_name, NULL, 0, 0, NULL);
    for (int i = m->nunits - 1; i >= 0 && st == SZ_OK; i--) {
        struct sz_unit *u = m->units[i];
        if (u->backward) {
            if ((st = with_uses(m, u, gather)) != SZ_OK || (st = with_uses(m, u, grads_touch)) != SZ_OK)
                break;
            u->phase = u->bwd_name;
            if ((st = u->backward(u, u->user)) != SZ_OK || (st = with_uses(m, u, release)) != SZ_OK)
                break;
        }
        /* units only touch their own and earlier units' gradients: ours are complete now */
        st = grads_flush(m, u);
    }
    for (int i = 0; i < m->nunits; i++)
        if (m->zero.stage < 2)
            m->units[i]->grads_live = 0;
    return st;
}

/* AdamW on the piece of each tensor that lies in [lo, lo + n) of the unit's flat buffer. The
 * parameter, gradient and state views start at element p0, g0, s0 for flat element lo. */
static sz_status adam_range(struct sz_model *m, struct sz_unit *u, const sz_train_config *cfg, int t, int64_t lo,
                            int64_t n, const sz_tensor *p, int64_t p0, const sz_tensor *g, int64_t g0)
{
    for (int k = 0; k < u->nparams; k++) {
        int64_t a = u->offset[k], b = a + u->params[k].rows * u->params[k].cols;
        int64_t from = a > lo ? a : lo, to = b < lo + n ? b : lo + n;
        if (from >= to)
            continue;
        float wd = (cfg->decay == SZ_DECAY_ALL || u->params[k].decay) ? cfg->weight_decay : 0.0f;
        int64_t off = from - lo, len = to - from;
        sz_tensor pv = sz_tensor_view(p, p0 + off, len, NULL), gv = sz_tensor_view(g, g0 + off, len, NULL);
        sz_tensor mv = sz_tensor_view(&u->adam_m, off, len, NULL), vv = sz_tensor_view(&u->adam_v, off, len, NULL);
        sz_tensor scale = sz_tensor_view(m->clip, 0, 1, NULL);
        sz_status st = sz_submit_adamw(&pv, &gv, &mv, &vv, &scale, cfg, wd, t, u->opt_name);
        if (st != SZ_OK)
            return st;
    }
    return SZ_OK;
}

sz_status sz_zero_update(struct sz_model *m, const sz_train_config *cfg, int t)
{
    sz_status st = SZ_OK;
    int s = m->zero.stage;
    for (int i = 0; i < m->nunits && st == SZ_OK; i++) {
        struct sz_unit *u = m->units[i];
        if (s < 2)
            st = sz_submit_reduce_scatter(m, u, 0, 0);
        if (st == SZ_OK && s == 0)
            st = sz_submit_all_gather(m, u, 0, -1, 0); /* the all-reduce's second half */
        if (st == SZ_OK)
            st = sz_submit_sumsq(&u->sumsq, &u->gshard, u->opt_name);
    }
    if (st == SZ_OK)
        st = sz_submit_clip(m, cfg->grad_clip);
    for (int i = 0; i < m->nunits && st == SZ_OK; i++) {
        struct sz_unit *u = m->units[i];
        if (s == 0) /* every rank updates everything, identically */
            st = adam_range(m, u, cfg, t, 0, u->padded, &u->param.all, 0, &u->grad.all, 0);
        else
            st = adam_range(m, u, cfg, t, (int64_t)m->rank * u->shard, u->shard, &u->pshard, 0, &u->gshard, 0);
        if (st == SZ_OK && (s == 1 || s == 2))
            st = sz_submit_all_gather(m, u, 0, -1, 0);
    }
    return st;
}

/* ---- host-side assembly of full values from the owners' slices ---------------------------------- */

sz_status sz_zero_assemble(struct sz_model *m, struct sz_unit *u, int which, float *full)
{
    sz_tensor *slice = which ? &u->gshard : &u->pshard;
    if (which == 0 && m->zero.stage < 3)
        return sz_tensor_read(&u->param.all, full);
    if (m->nd == 1)
        return sz_tensor_read(slice, full);
    float *mine = malloc((size_t)u->shard * sizeof *mine);
    if (!mine)
        return SZ_ERR_NOMEM;
    sz_status st = sz_tensor_read(slice, mine);
    if (st == SZ_OK && MPI_Allgather(mine, (int)u->shard, MPI_FLOAT, full, (int)u->shard, MPI_FLOAT,
                                     m->ctx->host_comm) != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    free(mine);
    return st;
}
