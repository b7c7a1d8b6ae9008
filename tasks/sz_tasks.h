/* tasks/sz_tasks.h — the engine's private structures behind sz_unit and sz_model: which StarPU
 * handles exist for a model under its ZeRO stage (one flat buffer per unit for parameters,
 * gradients, Adam m and v, padded to a multiple of the rank count, plus the shards this rank
 * owns) and the helpers that submit tasks on them. */
#ifndef SZ_TASKS_H
#define SZ_TASKS_H

#include <stddef.h>
#include <starpu.h>
#include "starzero.h"
#include "sz_runtime.h"
#include "sz_core.h"
#include "sz_codelets.h"
#include "sz_comm.h"
#include "sz_plan.h"
#include "starzero_starpu.h"
#include "sz_optimizer.h"
#include "sz_sched.h"

/* One flat buffer of a unit: a view over all of its handle (registered on a model-owned buffer, or
 * allocated by StarPU on demand: stage 3's gathered parameters, stage 2-3's gradients in flight,
 * mixed precision's working copies) and one view per parameter tensor. */
struct sz_flat {
    sz_tensor all;
    sz_tensor *child;  /* nparams views */
};

struct sz_unit {
    struct sz_unit_core c;       /* first: what the core and the ops see (index, name, phase, rounded) */
    struct sz_model *model;
    int state_unset;             /* optimizer state not allocated yet: zeroed (so allocated) by the first update */
    /* task names as traces show them: fwd:block3, bwd:block3, gather:block3 (stage 3 gather or the
     * mixed-precision working copy), release:block3, rs:block3, ag:block3, adam:block3 */
    char fwd_name[40], bwd_name[40], opt_name[40], gather_name[40], release_name[40], rs_name[40],
        ag_name[40], recompute_name[40], offload_name[40], fetch_name[40];
    int checkpointable;
    int backward_skips_params;   /* see sz_unit_desc */
    int bf16_params;             /* see sz_unit_desc: with m->prec.params_direct it reads param, not work */
    int round_grads;             /* see sz_unit_desc */
    int round_tied_grads;        /* see sz_unit_desc */
    sz_tensor *ckpt, *ckpt_host; /* offloaded checkpoint: device tensor (lazy) and its host pool copy */
    int64_t ckpt_bytes;          /* bytes of its offloadable input checkpoint (sz_model_checkpoint;
                                    0: none), whether or not this configuration offloads it */
    sz_param_spec *params;
    int nparams;
    int64_t *offset;   /* offset of each param in the flat buffer */
    int64_t numel;     /* sum of the params' sizes */
    int64_t padded;    /* numel rounded up to a multiple of nd */
    int64_t shard;     /* padded / nd: the slice every rank owns */
    int *uses;         /* tied units (see sz_unit_desc) */
    int nuses;
    sz_unit_fn forward, backward;
    void *user;
    struct sz_flat param, grad;  /* fp32, or bf16 under mixed precision */
    struct sz_flat work, wgrad;  /* mixed precision: the fp32 working copies compute tasks use */
    struct sz_flat *wp, *wg;     /* what callbacks see: work/wgrad (mixed) or param/grad (fp32) */
    sz_tensor master;  /* mixed precision: fp32 master weights, full (stage 0) or the owned slice */
    sz_tensor pshard;  /* this rank's parameter slice: a view of param (stages 0-2) or its own buffer (3) */
    sz_tensor gshard;  /* this rank's reduced gradient slice: a view of grad (0-1) or its own buffer (2-3) */
    sz_tensor opt_state[SZ_OPT_MAX_STATES]; /* the optimizer's fp32 states (m->opt->nstates of them:
                                    Adam's m, v; SGD's momentum buffer): full (stage 0) or shard */
    sz_tensor sumsq;   /* view: squared norm of this rank's gradient slice (one float of model->sumsq) */
};

struct sz_model {
    struct sz_core core;         /* first: what the core sees (the task builder, the fold) */
    sz_zero_config zero;
    int nd, rank;
    sz_resolved_precision prec;  /* the precision, resolved once (tasks/precision.c): storage types,
                                    compute path, direct parameters, rounding folded */
    sz_loss_scaler scaler;       /* fp16's loss scale and skipped steps (tasks/model.c) */
    const sz_optimizer_impl *opt;/* zero.optimizer's implementation (tasks/optimizer.c) */
    int nopt_states;             /* opt->nstates(&zero) */
    int64_t arena_mark;          /* the device pool's arena before our first tensor (-1: none) */
    struct sz_unit **units;
    int nunits, cap_units;
    sz_tensor **tensors;         /* owned: registered tensors (activations, shards, state) */
    sz_tensor **shared_acts;     /* checkpointing: the activations checkpointable units share */
    int nshared, cap_shared;
    /* the activation bytes under other checkpointing settings (the budget advice): always held,
     * checkpointable units' own (each unit's, without checkpointing), and one per name (shared,
     * with it); act_names holds those names */
    int64_t act_fixed, act_per_unit, act_shared;
    struct sz_act_name { char name[48]; } *act_names;
    int nact_names, cap_act_names;
    struct sz_act_of { const sz_tensor *t; char name[48]; } *acts_of; /* checkpointable units' activations
                                    (sz_model_activation) and their names: their gradients are shared */
    int nacts_of, cap_acts_of;
    char no_backward[512];       /* why it cannot be (refused when a step needs it); "" when it can */
    struct sz_grad_of { const sz_tensor *t; sz_tensor *g; } *grads_of; /* gradients a unit with its own
                                    backward shares with derived ones (sz_model_grad_of) */
    int ngrads_of, cap_grads_of;
    const sz_tensor **scratch;   /* every sz_model_tensor / _activation and derived gradient (tasks/check.c) */
    int nscratch, cap_scratch;
    int check;                   /* check mode: sz_zero_config.check or SZ_CHECK (tasks/check.c) */
    int check_pass, check_poisoned, checked; /* the pass being checked; its gradients poisoned; done */
#define SZ_CHECK_SAMPLES 32
    struct sz_check_fd { int unit, param; int64_t elem; double fd; } check_fd[SZ_CHECK_SAMPLES];
    int check_nfd;
    sz_tensor *check_token;      /* orders the check mode's scans */
    const sz_tensor **check_written; /* the activation gradients written whole since the NaN fill */
    int nwritten, cap_written;
    int ntensors, cap_tensors;
    sz_tensor *loss;
    int finalized;
    const char *tensor_call;     /* the first sz_model_tensor/activation/checkpoint call (NULL: none yet);
                                    sz_model_set_zero after it is refused (its choices were used) */
    int micro_batch;             /* forward/backward passes since the last update */
    int steps_done;              /* optimizer steps taken (for the deadline's messages) */
    sz_tensor *sumsq;            /* nunits floats: squared norms of this rank's gradient slices */
    sz_tensor *clip;             /* 2 floats: clip factor, global norm */
    sz_tensor *one;              /* 1.0f: the factor when clipping is off */
    sz_tensor *comm_buf;         /* the reduce-scatter buffer: send and receive halves of nd * bucket */
    int64_t bucket;              /* elements per rank and round of a reduce-scatter */
    sz_tensor *token;            /* one float every communication task writes: one order on all ranks */
    float last_grad_norm;
    int64_t current_action;      /* index in the plan of the action being submitted (tasks/step.c) */
    int placed;                  /* with CUDA workers: the model states were prefetched to the GPU */
    int pin_warned;              /* a home could not be pinned and went to pageable memory: said once */
    struct sz_gpu_arena {        /* SZ_GPU_ARENA=1 (opt-in, never run): M_D on the GPU memory node */
        void *base;              /* one cudaMalloc region holding the model states */
        struct sz_pool *pool;    /* graph/pool.c's offsets in it (the arena part) */
        int64_t bytes;
        int dev;                 /* CUDA device id */
        unsigned node;           /* its StarPU memory node */
    } gpu;
    struct sz_devwatch {         /* the run-time device-memory check (tasks/devwatch.c) */
        int on;                  /* some rank has a CUDA worker: every rank takes part in the check */
        int gpu;                 /* this rank has one */
        int dev, sharers;        /* its device; the ranks of this node driving it */
        unsigned node;           /* its StarPU memory node (main RAM without one) */
        int64_t host_budget;     /* a CPU-only rank: SZ_DEVWATCH_BUDGET (0: no check of main RAM) */
        int64_t cuda_total, cuda_start_used, cuda_used_peak; /* cudaMemGetInfo: total, used at start,
                                                                the most used after a step (-1: unknown) */
    } watch;
    sz_plan step_plan, eval_plan;/* the plans tasks/step.c submits (built on first use) */
    struct sz_depcheck *depcheck;/* NULL, or the plan-waits check mode (tasks/depcheck.c) */
    int64_t predicted_peak;      /* bytes per rank the plan predicts (sz_model_finalize) */
    int64_t budget;              /* the budget checked: zero.mem_budget, or the machine's (0: none) */
    int budget_from_machine;
    double overlap, comm_busy_s, compute_busy_s; /* the last step's, from the zero policy (-1: n/a) */
    sz_sched_task_times task_times;              /* the last step's, the same way (0 under another policy) */
    int ntimeline;                               /* the last step's live-bytes timeline, downsampled */
    double timeline_ms[64];
    int64_t timeline_bytes[64];
    int64_t persistent[SZ_MEM_NCATEGORIES];
    struct sz_counters counters; /* updated by tasks: transient memory, communication bytes */
    int64_t step_sent, step_received, step_ns;
    int fold_grads;              /* the parameters' gradients left to first writers: fold_zeros, and
                                    not SZ_GRAD_FOLD=0 */
};

/* tasks/depcheck.c: the check that a real step's tasks depend only on data written (or read) by
 * the actions the plan says each action waits for. sz_model_depcheck turns it on (1) or off (0);
 * the result counts the steps checked, the dependencies observed in the last one and returns the
 * violations (-1: off), msg telling the first; _deps: the last checked step's observed matrix
 * (n * n, NULL when none). The hooks: every task's data access and invalidation, and tasks/step.c's
 * loop over the plan. */
sz_status sz_model_depcheck(struct sz_model *m, int on);
int sz_model_depcheck_result(const struct sz_model *m, int *steps, int *ndeps, char *msg, size_t len);
const unsigned char *sz_model_depcheck_deps(const struct sz_model *m, int *n);
void sz_depcheck_access(struct sz_core *c, starpu_data_handle_t h, int write); /* m->core.on_access */
void sz_depcheck_run_begin(struct sz_model *m, const sz_plan *p, int from);
void sz_depcheck_action(struct sz_model *m, const sz_plan *p, int k);
int sz_depcheck_run_end(struct sz_model *m, const sz_plan *p, int to); /* violations found */

/* tasks/devwatch.c: the measured device peak against the budget. start: collective, in
 * sz_model_finalize once the budget is known (before anything is allocated on the GPU): which
 * ranks have GPUs, who shares them, the device's memory in use then; sampling begins. step:
 * collective when any rank has a GPU, after each optimizer step: samples, checks
 * (graph/sz_devcheck.h) and, when a rank's GPU is over, every rank returns SZ_ERR_BUDGET (that
 * rank logs the figures and what to do). report: fills the measured fields of a memory report. */
sz_status sz_devwatch_start(struct sz_model *m);
sz_status sz_devwatch_step(struct sz_model *m);
void sz_devwatch_report(const struct sz_model *m, sz_memory_report *r);


/* The first failure a kernel reported since the last call (sz_core_take_failure). */
static inline sz_status sz_model_take_failure(struct sz_model *m) { return m ? sz_core_take_failure(&m->core) : SZ_OK; }


/* tasks/storage.c and tasks/model.c, shared between them: whether this process has CUDA workers;
 * whether the collectives run on the GPU (NCCL at nd > 1); the GPU arena's start and end
 * (SZ_GPU_ARENA=1); a buffer the model owns, of memory category cat (pinned where StarPU copies it
 * every step); a unit's flat buffers for the model's stage (at finalisation). */
int sz_model_have_cuda(void);
int sz_model_comm_on_gpu(const struct sz_model *m);
sz_status sz_model_gpu_arena_start(struct sz_model *m);
void sz_model_gpu_arena_stop(struct sz_model *m);
sz_tensor *sz_model_owned_buffer(struct sz_model *m, const char *name, sz_dtype dtype, int64_t numel, int cat);
sz_status sz_model_unit_storage(struct sz_model *m, struct sz_unit *u);

/* tasks/storage.c: a gradient buffer of the derived backward, held like an sz_model_tensor. */
sz_tensor *sz_model_grad_buffer(struct sz_model *m, const char *name, sz_dtype dtype, int64_t numel);

/* tasks/autograd.c: the derived backward. _prepare (sz_model_finalize, before the budget check):
 * records every unit's forward once, decides and allocates the activations' gradients, refuses a
 * gradient that would flow through an op without a backward; nothing when every unit has its own
 * backward. _backward: unit u's backward from its records (tasks/step.c's BWD action). */
sz_status sz_autograd_prepare(struct sz_model *m);
sz_status sz_autograd_backward(struct sz_model *m, struct sz_unit *u);

/* tasks/check.c: the check mode. _bwd_begin / _bwd_end around each unit's BWD action of the checked
 * pass (the NaN fill before the first, the scans after each); _fd_before (before the checked pass's
 * forward: the finite differences, collective) and _fd_after (after its update: the comparison,
 * SZ_ERR_INVALID with a message on a mismatch; the same on every rank). */
sz_status sz_check_bwd_begin(struct sz_model *m, struct sz_unit *u);
sz_status sz_check_bwd_end(struct sz_model *m, struct sz_unit *u);
sz_status sz_check_fd_before(struct sz_model *m);
sz_status sz_check_fd_after(struct sz_model *m);

/* tasks/budget.c: sets m->predicted_peak from the plan's fold; with budget > 0 (bytes per rank)
 * and a peak over it, logs what fits (by the same fold) and returns SZ_ERR_BUDGET. */
sz_status sz_model_check_budget(struct sz_model *m, int64_t budget);
/* sz_model_add_unit: the model states of the units so far at their least (stage 3 at this N_d: the
 * ZeRO formula plus the largest unit gathered) against the node's whole memory: SZ_ERR_BUDGET
 * (logged, with the N_d the formula says would do) before any tensor is allocated. A budget given
 * is checked at finalize, with the plan's advice. */
sz_status sz_model_check_states(const struct sz_model *m);
/* Collective (sz_model_finalize): SZ_ERR_BUDGET where a budget was given that exceeds a node's
 * memory per rank (MemTotal or its cgroup's limit over the ranks on the node), naming both. */
sz_status sz_model_check_node_budget(const struct sz_model *m);

/* tasks/step.c: the ZeRO step driver, submitting the plan (graph/sz_plan.h) */
/* The plan configuration of this model (its ZeRO config, ranks, communication worker, and the
 * bytes it holds beside the units), for pass and clipping. */
void sz_zero_plan_config(const struct sz_model *m, sz_plan_pass pass, int clip, sz_plan_config *c);
/* Its part that follows from the configuration alone (tasks/plan_shape.c plans without a model):
 * everything but the bucket, the communication worker, where the buffer lives and the extras. */
void sz_zero_plan_config_of(const sz_zero_config *z, const sz_resolved_precision *p, int opt_states, int fold_grads,
                            int nd, int rank, sz_plan_pass pass, int clip, sz_plan_config *c);
/* The plan's view of this model's units (pu: nunits entries). */
void sz_zero_plan_units(const struct sz_model *m, sz_plan_unit *pu);
/* The plan of this model's units under c (what predictions for other configurations use too). */
sz_status sz_zero_plan_build(const struct sz_model *m, const sz_plan_config *c, sz_plan *out);
/* Elements per rank and round of a reduce-scatter for this model at nd ranks. */
int64_t sz_zero_bucket_elems(const struct sz_model *m, int nd);
/* Micro-batch m->micro_batch's forward and backward; the update; one evaluation forward pass. */
sz_status sz_zero_forward_backward(struct sz_model *m);
sz_status sz_zero_update(struct sz_model *m, const sz_train_config *cfg, int t);
sz_status sz_zero_eval(struct sz_model *m);
/* Host-side, collective: the full padded flat values of unit u assembled from every rank's
 * slice `which` (0: parameters, 1: gradients) into full (u->padded floats). */
sz_status sz_zero_assemble(struct sz_model *m, struct sz_unit *u, int which, float *full);
/* Collective: flat elements [lo, lo + n) of unit u's fp32 parameters (the master under mixed
 * precision) on rank root only (dst: n floats there, unused elsewhere); each rank reads only its
 * part, so host memory stays n floats on root and at most n on the others. */
sz_status sz_zero_assemble_range(struct sz_model *m, struct sz_unit *u, int root, int64_t lo, int64_t n, float *dst);


_Static_assert(offsetof(struct sz_unit, c) == 0, "an sz_unit * is a struct sz_unit_core *");
_Static_assert(offsetof(struct sz_model, core) == 0, "a struct sz_model * is a struct sz_core *");

#endif
