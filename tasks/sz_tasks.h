/* tasks/sz_tasks.h — private structures behind sz_tensor, sz_unit and sz_model: which StarPU
 * handles exist for a model under its ZeRO stage (one flat buffer per unit for parameters,
 * gradients, Adam m and v, padded to a multiple of the rank count, plus the shards this rank
 * owns) and the helpers that submit tasks on them. */
#ifndef SZ_TASKS_H
#define SZ_TASKS_H

#include <starpu.h>
#include "starzero.h"
#include "sz_runtime.h"
#include "sz_codelets.h"
#include "sz_plan.h"
#include "starzero_starpu.h"
#include "sz_optimizer.h"
#include "sz_sched.h"

/* A tensor is a view: `numel` elements at element `offset` of the vector handle `h`, which holds
 * `handle_numel` elements. A unit's parameters are views of one flat handle, and so on. */
struct sz_tensor {
    starpu_data_handle_t h;
    int64_t offset, numel, handle_numel;
    sz_dtype dtype;
    char name[48];
    void *home;        /* the buffer this tensor registered and owns (NULL for views) */
    size_t pinned;     /* > 0: home is pinned host memory of this many bytes (model.c's pinned_buffer) */
    int on_host;       /* lives in host memory with CUDA workers too (the host pool; offloaded master
                          and optimizer state): not placed on the GPU */
    int on_gpu;        /* home is a block of the model's GPU arena (freed with the arena) */
};

/* One flat buffer of a unit: a view over all of its handle (registered on a model-owned buffer, or
 * allocated by StarPU on demand: stage 3's gathered parameters, stage 2-3's gradients in flight,
 * mixed precision's working copies) and one view per parameter tensor. */
struct sz_flat {
    sz_tensor all;
    sz_tensor *child;  /* nparams views */
};

struct sz_unit {
    struct sz_model *model;
    int index;
    int state_unset;             /* optimizer state not allocated yet: zeroed (so allocated) by the first update */
    /* task names as traces show them: fwd:block3, bwd:block3, gather:block3 (stage 3 gather or the
     * mixed-precision working copy), release:block3, rs:block3, ag:block3, adam:block3 */
    char name[32], fwd_name[40], bwd_name[40], opt_name[40], gather_name[40], release_name[40], rs_name[40],
        ag_name[40], recompute_name[40], offload_name[40], fetch_name[40];
    int checkpointable;
    int backward_skips_params;   /* see sz_unit_desc */
    int bf16_params;             /* see sz_unit_desc: with m->bf16_direct it reads param, not work */
    int round_grads;             /* see sz_unit_desc */
    int round_tied_grads;        /* see sz_unit_desc */
    int rounded;                 /* the step plan folds its gradients' rounding into their writers
                                    (sz_plan.rounded): wg is grad (bf16), the ops round into it */
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
    const char *phase; /* task name of the ops being submitted: fwd_name or bwd_name */
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

/* The first unusable input a kernel met this step (sz_task_fail, include/starzero_starpu.h). */
struct sz_task_failure {
    int claimed, failed;
    sz_status status; /* SZ_ERR_INVALID (sz_task_fail) or SZ_ERR_NOMEM (sz_task_fail_nomem) */
    char msg[320];
};

struct sz_model {
    struct sz_context *ctx;
    sz_zero_config zero;
    int nd, rank;
    int mixed;                   /* zero.precision == SZ_PRECISION_BF16 */
    int native;                  /* mixed, and the native bf16 compute path (zero.bf16_compute) */
    int bf16_direct;             /* units with bf16_params read param, not work, under mixed precision
                                    (sz_model_set_zero's rule; graph/sz_plan.h, sz_plan_config) */
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
    uint64_t position;           /* plan position of the next task submitted (task->sched_data):
                                    current_action << 16, plus the tasks the action submitted so far */
    int64_t current_action;      /* index in the plan of the action being submitted (tasks/zero.c) */
    uint32_t force_where;        /* nonzero: where the tasks submitted now must run (STARPU_CPU for the
                                    optimizer under offload_optimizer), set by tasks/zero.c per action */
    int placed;                  /* with CUDA workers: the model states were prefetched to the GPU */
    int pin_warned;              /* a home could not be pinned and went to pageable memory: said once */
    int gpu_compute;             /* CUDA workers, and SZ_GPU_PLACEMENT is not 0: every task whose codelet
                                    has a CUDA implementation and is not a collective runs on a CUDA
                                    worker, whatever the policy (tasks/task.c) */
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
    sz_plan step_plan, eval_plan;/* the plans tasks/zero.c submits (built on first use) */
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
    struct sz_task_failure failure;
    /* sz_op_zero calls of the callback being submitted, not submitted yet (codelets/zero.c): each
     * folded into the next task on its tensor that can set it, else submitted right before that task
     * or when the callback returns (sz_zero_flush) */
    int fold_zeros;              /* 0 under SZ_ZERO_FOLD=0 */
    int fold_grads;              /* the parameters' gradients left to first writers: fold_zeros, and
                                    not SZ_GRAD_FOLD=0 */
    int fold_round;              /* mixed precision's gradient rounding folded into the writers of
                                    units with round_grads (sz_plan_config.fold_round): fold_grads, and
                                    not SZ_GRAD_ROUND_FOLD=0 */
    int round_ok;                /* fold_round and no CUDA workers (sz_model_set_zero) */
    int npending;
    struct sz_pending_zero { struct sz_unit *u; sz_tensor *t; } pending[16];
    int64_t zeros_folded, zeros_run; /* counts since sz_model_init: folded into an op / submitted */
    /* The parameters' gradients left to their first writers (graph/sz_plan.h: SZ_GRADS_FIRST_WRITERS):
     * views [lo, lo + n) of a unit's gradient buffer `all`, not written since that action; each is
     * set by the next task that writes it whole (an SZ_ACCUMULATE_OR_SET tensor, on CPUs), zeroed
     * right before any other task on it, or zeroed at the end of the BWD action (sz_grads_flush). */
    struct sz_pending_grad { struct sz_unit *u; const sz_tensor *all; int64_t lo, n; int onto_zeros; } *gpending;
    int ngpending, cap_gpending;
    int64_t grads_set, grads_zeroed; /* counts since sz_model_init: views set by their first writer /
                                        zeroed by a task of their own */
    int64_t zero_tasks, zero_bytes;  /* every zeroing task submitted since sz_model_init, and its bytes */
};

/* tasks/depcheck.c: the check that a real step's tasks depend only on data written (or read) by
 * the actions the plan says each action waits for. sz_model_depcheck turns it on (1) or off (0);
 * the result counts the steps checked, the dependencies observed in the last one and returns the
 * violations (-1: off), msg telling the first; _deps: the last checked step's observed matrix
 * (n * n, NULL when none). The hooks: every task's data access and invalidation, and tasks/zero.c's
 * loop over the plan. */
sz_status sz_model_depcheck(struct sz_model *m, int on);
int sz_model_depcheck_result(const struct sz_model *m, int *steps, int *ndeps, char *msg, size_t len);
const unsigned char *sz_model_depcheck_deps(const struct sz_model *m, int *n);
void sz_depcheck_access(struct sz_model *m, starpu_data_handle_t h, int write);
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

/* The step's own tasks, each submitted by its codelet's file (codelets/<op>.c). */
sz_status sz_submit_zero(struct sz_unit *u, const sz_tensor *t, const char *name, struct sz_counters *acct, int category, int64_t bytes,
                         const sz_tensor *token);
/* The same task (written whole: W) zeroing only elements [from, numel) of t. */
sz_status sz_submit_zero_from(struct sz_unit *u, const sz_tensor *t, int64_t from, const char *name,
                              struct sz_counters *acct, int category, int64_t bytes, const sz_tensor *token);
sz_status sz_submit_sumsq(struct sz_unit *u, const sz_tensor *out, const sz_tensor *x, const char *name);
sz_status sz_submit_clip(struct sz_model *m, float clip);
/* AdamW on a view; norm (one float, or NULL): the gradient's squared norm taken in the same pass,
 * written there (acc 0) or added to it (acc 1). */
sz_status sz_submit_adamw(struct sz_unit *u, const sz_tensor *p, const sz_tensor *g, const sz_tensor *m, const sz_tensor *v,
                          const sz_tensor *scale, const sz_tensor *norm, int acc, const sz_train_config *cfg, float wd,
                          int t, const char *name);
/* One bucket round: elements [o, o + len) of every rank's piece of the unit's gradients. */
sz_status sz_submit_reduce_scatter(struct sz_model *m, struct sz_unit *u, int64_t o, int64_t len, int acc,
                                   int64_t release_bytes);
sz_status sz_submit_all_gather(struct sz_model *m, struct sz_unit *u, int from_shard, int category, int64_t bytes);
sz_status sz_submit_account(struct sz_model *m, const sz_tensor *t, int category, int64_t bytes, const char *name);
sz_status sz_submit_convert(struct sz_model *m, const sz_tensor *dst, const sz_tensor *src, int mode, int category,
                            int64_t bytes, const char *name);
sz_status sz_submit_adamw_mixed(struct sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g, const sz_tensor *m,
                                const sz_tensor *v, const sz_tensor *scale, const sz_tensor *norm, int acc,
                                const sz_train_config *cfg, float wd, int t, const char *name);
/* codelets/sgd.c: SGD with momentum (PyTorch's) on a view; buf NULL without momentum; master
 * (fp32) with bf16 p and g under mixed precision, else NULL. norm as AdamW's. */
sz_status sz_submit_sgd(struct sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g,
                        const sz_tensor *buf, const sz_tensor *scale, const sz_tensor *norm, int acc, float lr,
                        float momentum, float wd, const char *name);

/* codelets/scale.c: x *= alpha (tests of the runtime and of CUDA); where: 0 any worker, else
 * STARPU_CPU / STARPU_CUDA. */
sz_status sz_submit_scale(const sz_tensor *x, float alpha, const char *name, uint32_t where);

/* codelets/zero.c: the pending zeros of m (see struct sz_model). _resolve, for the task being built
 * on tensors tt[0..n) (codelet cl, workers `where`): each tensor of a pending zero either takes it
 * (set[k] = 1: an SZ_ACCUMULATE_OR_SET tensor covering its whole handle, the task's only tensor on
 * that handle, where every implementation the task may run on sets: sz_fold_decide) or has it
 * submitted first. _flush submits every pending zero (the end of a
 * callback); both return the first failure. */
struct sz_task_tensor;
sz_status sz_zero_resolve(struct sz_model *m, struct starpu_codelet *cl, const struct sz_task_tensor *tt, int n,
                          uint32_t where, unsigned char *set);
sz_status sz_zero_flush(struct sz_model *m);
/* codelets/zero.c: the gradients left to their first writers (see struct sz_model's gpending).
 * _defer adds every parameter view of u's buffer `all`; _resolve, for the task being built: a
 * pending view that only tensor k of the task touches, exactly and as an SZ_ACCUMULATE_OR_SET
 * tensor (sz_fold_decide as above), is set there (set[k] = 1); every other pending view the task touches is zeroed
 * by a task submitted first; _flush zeroes every pending view (contiguous ones by one task). */
sz_status sz_grads_defer(struct sz_model *m, struct sz_unit *u, const sz_tensor *all, int onto_zeros);
/* The GRAD_CONVERT rule (graph/sz_plan.h sz_convert_mode) an op that rounds its fp32 result into
 * the bf16 gradient k (a unit with sz_unit.rounded) applies: set by the first writer, SET (stages
 * 2-3: a fresh copy) or ONTO_ZEROS (stages 0-1: the first micro-batch, set[k] == 2 from a deferral
 * with onto_zeros); otherwise ADD (a later micro-batch adds into the bf16 gradients). */
static inline int sz_task_round_mode(const void *cl_arg, int k)
{
    const sz_task_layout *l = sz_task_layout_of(cl_arg);
    return l->set[k] == 2 ? SZ_CONVERT_ONTO_ZEROS : l->set[k] ? SZ_CONVERT_SET : SZ_CONVERT_ADD;
}
/* 1 when u's backward hands its ops the bf16 gradients to round into (sz_unit.rounded). */
static inline int sz_unit_rounds(const struct sz_unit *u) { return u && u->rounded; }
sz_status sz_grads_resolve(struct sz_model *m, struct starpu_codelet *cl, const struct sz_task_tensor *tt, int n,
                           uint32_t where, unsigned char *set);
sz_status sz_grads_flush(struct sz_model *m);
/* codelets/zero.c: whether a task may set (rather than add into) its SZ_ACCUMULATE_OR_SET tensors,
 * decided when it is submitted (the worker is not known yet): 1 when it can run only on CPUs (its
 * codelet has no CUDA function, `where` is STARPU_CPU, or there are no CUDA workers), else
 * cuda_sets — whether the codelet's CUDA implementation sets too (sz_codelet_cuda_sets: the
 * engine's backward codelets listed in codelets/zero.c). Pure: tests call it on made-up cases. */
int sz_fold_decide(int has_cuda_impl, int cuda_sets, uint32_t where, int ncuda_workers);
int sz_codelet_cuda_sets(const struct starpu_codelet *cl);

/* tasks/task.c: the task builder behind sz_task_submit (include/starzero_starpu.h) for the library's
 * own tasks: `name` is the task's full name, `op` the operation's (for messages); m may be NULL
 * (then unit is 0xffff). The _where form restricts the workers (STARPU_CPU, STARPU_CUDA; 0: any). */
struct sz_task_tensor;
sz_status sz_task_submit_named(struct sz_model *m, int unit, const char *name, const char *op,
                               struct starpu_codelet *cl, const struct sz_task_tensor *tensors, int ntensors,
                               const void *params, size_t params_size);
sz_status sz_task_submit_where(struct sz_model *m, int unit, const char *name, const char *op,
                               struct starpu_codelet *cl, const struct sz_task_tensor *tensors, int ntensors,
                               const void *params, size_t params_size, uint32_t where);
/* sz_task_submit on CPU workers only (STARPU_EXECUTE_WHERE STARPU_CPU, also under CUDA workers):
 * for operand mixes a codelet's CUDA implementation does not take (codelets/matmul.c). */
struct sz_unit;
sz_status sz_task_submit_cpu(struct sz_unit *u, struct starpu_codelet *cl, const char *op,
                             const struct sz_task_tensor *tensors, int ntensors, const void *params,
                             size_t params_size);
/* An op's wrapper refusing its arguments (a shape, not a tensor: sz_task_submit names those): logs
 * "<op> (<task name>): <message>" and returns SZ_ERR_INVALID. u may be NULL. The same as the
 * public sz_task_refuse (include/starzero_starpu.h). */
sz_status sz_op_invalid(struct sz_unit *u, const char *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* SZ_ERR_INVALID (bad input: sz_task_fail) or SZ_ERR_NOMEM (sz_task_fail_nomem), logging the message, when a
 * kernel reported a failure since the last call;
 * then it waits for every task submitted so far (their failures are the same call's) and clears. */
sz_status sz_model_take_failure(struct sz_model *m);

/* tasks/tensor.c */
sz_tensor *sz_tensor_register(void *home, int64_t numel, sz_dtype dtype, const char *name);
/* A handle StarPU allocates itself when first written (home node -1); freed by invalidation. */
sz_tensor *sz_tensor_register_lazy(int64_t numel, sz_dtype dtype, const char *name);
/* Registered with its home on memory node `node` (a GPU's: home is device memory the caller owns). */
sz_tensor *sz_tensor_register_on(unsigned node, void *home, int64_t numel, sz_dtype dtype, const char *name);
/* Read a fp32 or bf16 view as fp32 values (blocking). */
sz_status sz_tensor_read_f32(sz_tensor *t, float *dst);
/* Write fp32 values into a fp32 or bf16 view (rounded to nearest even for bf16; blocking). */
sz_status sz_tensor_write_f32(sz_tensor *t, const float *src);
/* A view of `numel` elements at `offset` of base's handle. */
sz_tensor sz_tensor_view(const sz_tensor *base, int64_t offset, int64_t numel, const char *name);
void sz_tensor_unregister(sz_tensor *t);
/* Frees a pinned home (tasks/model.c pinned_buffer) of that many bytes. */
void sz_tensor_free_pinned(void *home, size_t bytes);

/* tasks/model.c: sets m->predicted_peak from the plan's fold; with budget > 0 (bytes per rank)
 * and a peak over it, logs what fits (by the same fold) and returns SZ_ERR_BUDGET. */
sz_status sz_model_check_budget(struct sz_model *m, int64_t budget);

/* tasks/zero.c: the ZeRO step driver, submitting the plan (graph/sz_plan.h) */
/* The plan configuration of this model (its ZeRO config, ranks, communication worker, and the
 * bytes it holds beside the units), for pass and clipping. */
void sz_zero_plan_config(const struct sz_model *m, sz_plan_pass pass, int clip, sz_plan_config *c);
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

/* Element types an op takes either way (the native bf16 path, include/starzero.h): the tensor's own
 * type when it is bf16, else f32 (so anything else is refused as not f32), and its kernel type. */
static inline sz_dtype sz_fb(const sz_tensor *t) { return t && t->dtype == SZ_DTYPE_BF16 ? SZ_DTYPE_BF16 : SZ_DTYPE_F32; }
static inline int sz_kdt(const sz_tensor *t) { return sz_fb(t) == SZ_DTYPE_BF16 ? 1 : 0; }

#endif
