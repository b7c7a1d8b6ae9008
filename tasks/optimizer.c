/* tasks/optimizer.c — the optimizers behind tasks/sz_optimizer.h: AdamW (codelets/adamw.c, fp32;
 * codelets/adamw_mixed.c, mixed precision) and SGD with momentum (codelets/sgd.c), each its
 * state count, state names and the submission of one range's update; and the public names
 * (sz_optimizer_name, sz_optimizer_parse, sz_optimizer_states, sz_mem_category_label). */
#include <math.h>
#include <stdio.h>
#include <strings.h>
#include "sz_tasks.h"

static const char *const k_names[SZ_OPTIMIZER_NKINDS] = {"adamw", "sgd"};

const char *sz_optimizer_name(sz_optimizer o)
{
    return (int)o >= 0 && o < SZ_OPTIMIZER_NKINDS ? k_names[o] : NULL;
}

sz_status sz_optimizer_parse(const char *name, sz_optimizer *out)
{
    for (int i = 0; name && out && i < SZ_OPTIMIZER_NKINDS; i++)
        if (!strcasecmp(name, k_names[i])) {
            *out = (sz_optimizer)i;
            return SZ_OK;
        }
    return SZ_ERR_INVALID;
}

int sz_optimizer_states(sz_optimizer o, float momentum)
{
    switch (o) {
    case SZ_OPTIMIZER_ADAMW: return 2;
    case SZ_OPTIMIZER_SGD: return isfinite(momentum) && momentum >= 0.0f && momentum < 1.0f ? momentum != 0.0f : -1;
    default: return -1;
    }
}

/* ---- AdamW: m, v; bias-corrected, decoupled weight decay (llm.c) ----------------------------- */
static int adamw_nstates(const sz_zero_config *z)
{
    (void)z;
    return 2;
}

static sz_status adamw_step(struct sz_unit *u, const sz_opt_range *r, const sz_zero_config *z,
                            const sz_train_config *cfg, int t, const char *name)
{
    (void)z;
    if (r->master)
        return sz_submit_adamw_mixed(u, r->master, r->p, r->g, r->state[0], r->state[1], r->scale, r->norm, r->acc,
                                     cfg, r->wd, t, name);
    return sz_submit_adamw(u, r->p, r->g, r->state[0], r->state[1], r->scale, r->norm, r->acc, cfg, r->wd, t, name);
}

/* ---- SGD: the momentum buffer when momentum != 0; L2 weight decay (torch.optim.SGD) ----------- */
static int sgd_nstates(const sz_zero_config *z)
{
    return z->momentum != 0.0f;
}

static sz_status sgd_step(struct sz_unit *u, const sz_opt_range *r, const sz_zero_config *z,
                          const sz_train_config *cfg, int t, const char *name)
{
    (void)t;
    return sz_submit_sgd(u, r->master, r->p, r->g, z->momentum != 0.0f ? r->state[0] : NULL, r->scale, r->norm,
                         r->acc, cfg->lr, z->momentum, r->wd, name);
}

static const sz_optimizer_impl k_impl[SZ_OPTIMIZER_NKINDS] = {
    {SZ_OPTIMIZER_ADAMW, "adamw", {"adam_m", "adam_v"}, adamw_nstates, adamw_step},
    {SZ_OPTIMIZER_SGD, "sgd", {"momentum", NULL}, sgd_nstates, sgd_step},
};

const sz_optimizer_impl *sz_optimizer_get(sz_optimizer kind)
{
    return (int)kind >= 0 && kind < SZ_OPTIMIZER_NKINDS ? &k_impl[kind] : NULL;
}

const char *sz_mem_category_label(sz_mem_category c, sz_optimizer o, char *buf, size_t n)
{
    const sz_optimizer_impl *op = sz_optimizer_get(o);
    if (!buf || n == 0)
        return buf;
    if (!op || (c != SZ_MEM_OPT_STATE0 && c != SZ_MEM_OPT_STATE1)) {
        snprintf(buf, n, "%s", sz_mem_category_name(c));
        return buf;
    }
    int k = c - SZ_MEM_OPT_STATE0;
    if (op->state_name[k])
        snprintf(buf, n, "%s state %s", op->name, op->state_name[k]);
    else
        snprintf(buf, n, "%s: no state %d", op->name, k + 1);
    return buf;
}
