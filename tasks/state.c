/* tasks/state.c — a unit's persistent state (parameters, fp32 master, the optimizer's states:
 * Adam's m and v, SGD's momentum buffer; tasks/sz_optimizer.h) read by the
 * owned slice and written by element range, so that a training state saved at one N_d and stage
 * loads at any other (see starzero.h, "persistent training state"). Which tensor holds what at
 * each stage is tasks/model.c's layout: full arrays at stage 0 (and the parameters at stages 0-2),
 * the rank's slice otherwise. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"

const char *sz_state_kind_name(sz_state_kind kind)
{
    static const char *names[SZ_STATE_NKINDS] = {"params", "master", "adam_m", "adam_v"};
    return kind >= 0 && kind < SZ_STATE_NKINDS ? names[kind] : "?";
}

const char *sz_model_state_name(const sz_model *m, sz_state_kind kind)
{
    if (m && (kind == SZ_STATE_OPT0 || kind == SZ_STATE_OPT1)) {
        const char *n = m->opt->state_name[kind - SZ_STATE_OPT0];
        return n ? n : "?";
    }
    return sz_state_kind_name(kind);
}

const char *sz_model_optimizer_name(const sz_model *m)
{
    return m ? m->opt->name : "?";
}

static int is_opt_state(sz_state_kind kind)
{
    return kind == SZ_STATE_OPT0 || kind == SZ_STATE_OPT1;
}

int sz_model_state_has(const sz_model *m, sz_state_kind kind)
{
    if (!m || kind < 0 || kind >= SZ_STATE_NKINDS)
        return 0;
    if (is_opt_state(kind))
        return (int)kind - SZ_STATE_OPT0 < m->nopt_states;
    return kind != SZ_STATE_MASTER || m->prec.mixed;
}

static struct sz_unit *unit_at(const sz_model *m, int unit)
{
    return m && m->finalized && unit >= 0 && unit < m->nunits ? m->units[unit] : NULL;
}

sz_status sz_model_state_shard(const sz_model *m, int unit, const char **name, int64_t *numel, int64_t *padded,
                               int64_t *lo, int64_t *n)
{
    struct sz_unit *u = unit_at(m, unit);
    if (!u)
        return SZ_ERR_INVALID;
    if (name)
        *name = u->c.name;
    if (numel)
        *numel = u->numel;
    if (padded)
        *padded = u->padded;
    if (lo)
        *lo = (int64_t)m->rank * u->shard;
    if (n)
        *n = u->shard;
    return SZ_OK;
}

int sz_model_unit_nparams(const sz_model *m, int unit)
{
    struct sz_unit *u = unit_at(m, unit);
    return u ? u->nparams : 0;
}

sz_status sz_model_unit_param_info(const sz_model *m, int unit, int param, const char **name, int64_t *offset,
                                   int64_t *numel)
{
    struct sz_unit *u = unit_at(m, unit);
    if (!u || param < 0 || param >= u->nparams)
        return SZ_ERR_INVALID;
    if (name)
        *name = u->params[param].name;
    if (offset)
        *offset = u->offset[param];
    if (numel)
        *numel = u->params[param].rows * u->params[param].cols;
    return SZ_OK;
}

/* The tensor holding `kind` on this rank and the first flat element it holds. */
static sz_tensor *held(const struct sz_model *m, struct sz_unit *u, sz_state_kind kind, int64_t *lo)
{
    int full = m->zero.stage == 0 || (kind == SZ_STATE_PARAMS && m->zero.stage < 3);
    *lo = full ? 0 : (int64_t)m->rank * u->shard;
    switch (kind) {
    case SZ_STATE_PARAMS: return full ? &u->param.all : &u->pshard;
    case SZ_STATE_MASTER: return m->prec.mixed ? &u->master : NULL;
    case SZ_STATE_OPT0:
    case SZ_STATE_OPT1: return (int)kind - SZ_STATE_OPT0 < m->nopt_states ? &u->opt_state[kind - SZ_STATE_OPT0] : NULL;
    default: return NULL;
    }
}

sz_status sz_model_state_need(const sz_model *m, int unit, sz_state_kind kind, int64_t *lo, int64_t *n)
{
    struct sz_unit *u = unit_at(m, unit);
    if (!u || !lo || !n)
        return SZ_ERR_INVALID;
    sz_tensor *t = held(m, u, kind, lo);
    if (!t)
        return SZ_ERR_INVALID;
    *n = t->numel;
    return SZ_OK;
}

sz_status sz_model_state_shard_read(sz_model *m, int unit, sz_state_kind kind, float *dst)
{
    struct sz_unit *u = unit_at(m, unit);
    int64_t hlo;
    sz_tensor *t = u && dst ? held(m, u, kind, &hlo) : NULL;
    if (!t)
        return SZ_ERR_INVALID;
    if (u->state_unset && is_opt_state(kind)) {
        memset(dst, 0, (size_t)u->shard * sizeof *dst); /* not allocated yet: the first update zeroes it */
        return SZ_OK;
    }
    sz_tensor v = sz_tensor_view(t, (int64_t)m->rank * u->shard - hlo, u->shard, NULL);
    return sz_tensor_read_f32(&v, dst);
}

sz_status sz_model_state_write(sz_model *m, int unit, sz_state_kind kind, int64_t lo, int64_t n, const float *src)
{
    struct sz_unit *u = unit_at(m, unit);
    int64_t hlo;
    sz_tensor *t = u && src && n >= 0 ? held(m, u, kind, &hlo) : NULL;
    if (!t)
        return SZ_ERR_INVALID;
    if (u->state_unset && is_opt_state(kind)) {
        /* --no-arenas: the states are allocated now, zeroed, and the first update must not zero them again */
        float *zero = calloc((size_t)u->opt_state[0].numel, sizeof *zero);
        if (!zero)
            return SZ_ERR_NOMEM;
        sz_status st = SZ_OK;
        for (int k = 0; k < m->nopt_states && st == SZ_OK; k++)
            st = sz_tensor_write_f32(&u->opt_state[k], zero);
        free(zero);
        if (st != SZ_OK)
            return st;
        u->state_unset = 0;
    }
    int64_t from = lo > hlo ? lo : hlo, to = lo + n < hlo + t->numel ? lo + n : hlo + t->numel;
    if (from >= to)
        return SZ_OK;
    sz_tensor v = sz_tensor_view(t, from - hlo, to - from, NULL);
    return sz_tensor_write_f32(&v, src + (from - lo));
}
