/* tasks/sz_optimizer.h — the optimizer interface behind sz_model_update (sz_zero_config.optimizer).
 * An optimizer says how many fp32 state floats it keeps per parameter element (what graph/'s
 * plan and the ZeRO formulas count: sz_plan_config.opt_states), the names of those states (what
 * tasks/state.c and saved training states call them), and submits its StarPU task(s) on one
 * tensor's piece of a unit's owned range. Everything else is the engine's: the model allocates
 * the states (u->opt_state[0..nstates-1], each full at stage 0 or the owned shard) and zeroes
 * them before the first step, tasks/step.c walks the plan's OPTIMIZER actions and cuts them into
 * per-tensor views, tasks/state.c reads and writes them by unit for --save-state / --resume.
 * Implementations: tasks/optimizer.c (AdamW: codelets/adamw.c, adamw_mixed.c; SGD:
 * codelets/sgd.c). Adding one: its codelet(s), an entry in tasks/optimizer.c's table, its value
 * in include/starzero.h's sz_optimizer. */
#ifndef SZ_OPTIMIZER_H
#define SZ_OPTIMIZER_H

#include "starzero.h"

#define SZ_OPT_MAX_STATES 2

struct sz_unit;

/* One optimizer task's operands: views of the same element range. */
typedef struct sz_opt_range {
    const sz_tensor *p;       /* parameters (bf16 under mixed precision), updated */
    const sz_tensor *g;       /* reduced gradients, same dtype as p */
    const sz_tensor *master;  /* mixed precision: the fp32 master, updated (NULL at fp32) */
    const sz_tensor *state[SZ_OPT_MAX_STATES]; /* the optimizer's fp32 states (nstates of them) */
    const sz_tensor *scale;   /* one float: the clip factor the gradients are multiplied by */
    const sz_tensor *norm;    /* one float or NULL: the gradients' squared norm taken in the same pass */
    int acc;                  /* norm: 0 written, 1 added to */
    float wd;                 /* the weight decay of this tensor (0 where sz_decay excludes it) */
} sz_opt_range;

typedef struct sz_optimizer_impl {
    sz_optimizer kind;
    const char *name;                              /* "adamw", "sgd" (as sz_optimizer_name) */
    const char *state_name[SZ_OPT_MAX_STATES];     /* "adam_m", "adam_v"; "momentum" */
    int (*nstates)(const sz_zero_config *z);       /* fp32 state floats per element */
    /* Submits the update of r's range at step t >= 1 (tasks named `name`). */
    sz_status (*step)(struct sz_unit *u, const sz_opt_range *r, const sz_zero_config *z,
                      const sz_train_config *cfg, int t, const char *name);
} sz_optimizer_impl;

/* The implementation of kind (NULL for an unknown one). */
const sz_optimizer_impl *sz_optimizer_get(sz_optimizer kind);

#endif
