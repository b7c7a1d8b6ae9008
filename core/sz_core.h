/* core/sz_core.h — the core every operation is built on, and all an operation (codelets/) sees of
 * the engine: tensors, the one task builder, the accumulate-or-set fold (an app's sz_op_zero and a
 * parameter's gradient left to its first writer, folded into the next task that can set the tensor),
 * the byte counters, bf16 scalars, the codelet macros and each codelet's descriptor. It knows no
 * model: the engine (tasks/) embeds a struct sz_core in its model and a struct sz_unit_core at the
 * start of each unit, and the core reads only those. Layers below: sched/ (the policy and the
 * runtime), kernels/, graph/. */
#ifndef SZ_CORE_H
#define SZ_CORE_H

#include <starpu.h>
#include "starzero.h"
#include "starzero_starpu.h"
#include "sz_sched.h"
#include "sz_plan.h"

/* ---- byte counters the communication and accounting tasks update from worker threads --------- */
#define SZ_NCATEGORIES 16   /* >= SZ_MEM_NCATEGORIES (starzero.h) */
struct sz_counters {
    int64_t sent, received;               /* communication bytes this rank sent / received */
    int64_t comm_ns;                      /* time spent inside the collectives */
    int64_t live[SZ_NCATEGORIES];         /* transient bytes alive now, per category */
    int64_t peak[SZ_NCATEGORIES];         /* and their peak */
    int64_t live_total, peak_total;       /* all transient categories together */
    /* timeline of live_total during the current step: (ns since the step began, bytes) */
#define SZ_TIMELINE 4096
    int64_t t0_ns;
    int ntimeline;
    int64_t timeline[SZ_TIMELINE][2];
    /* StarPU's own allocations on one memory node (the GPU's with a CUDA worker, else main RAM),
     * sampled by every account task and after each step (tasks/devwatch.c): their most */
    int sample_on;
    unsigned sample_node;
    int64_t node_peak;
};
/* core/counters.c */
void sz_counters_add(struct sz_counters *c, int category, int64_t bytes);
/* One sample of StarPU's allocations on c->sample_node (no-op unless c->sample_on). */
void sz_counters_sample(struct sz_counters *c);
/* Account one collective that moved `bytes` each way in `ns` nanoseconds. */
void sz_counters_comm(struct sz_counters *c, int64_t bytes, int64_t ns);

/* ---- bf16 <-> fp32 of one element, round to nearest even (as kernels/) ------------------------ */
static inline float sz_h2f(uint16_t h)
{
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
static inline uint16_t sz_f2h(float f)
{
    union { float f; uint32_t u; } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((v.u >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

/* ---- codelets and their descriptors -------------------------------------------------------------
 * One history-based perf model per codelet, named after it; a CPU-only codelet over variable
 * buffers (core/sz_cuda.h: SZ_CODELET_CUDA for one with a CUDA implementation too). */
#define SZ_PERFMODEL(var, sym) static struct starpu_perfmodel var = {.type = STARPU_HISTORY_BASED, .symbol = sym}
#define SZ_CODELET(var, fn, nm, pm) \
    struct starpu_codelet var = {.cpu_funcs = {fn}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = nm, .model = &pm}

/* What a codelet of the library says about itself, beside its codelet in its own file
 * (SZ_DESCRIBE): its class (stamped into each task: sched/ reads that, never a codelet address),
 * what it supports, and one line on its tensors (sz-info --codelets). An app's own codelet has no
 * descriptor: a compute task that supports nothing beyond its CPU and CUDA functions. */
enum {
    SZ_CL_CUDA_SETS = 1u << 0,  /* its CUDA implementation honours the set (=) of every tensor it declares
                                   SZ_ACCUMULATE_OR_SET, as every CPU kernel does (tests/test_cuda_kernels.c
                                   starts each set output as NaN on the device) */
    SZ_CL_NATIVE = 1u << 1,     /* the native bf16 path hands it bf16 tensors (apps/gpt2, apps/llama) */
    SZ_CL_CUDA_BF16 = 1u << 2,  /* and its CUDA implementation takes them (its bf16 twin exists, with its
                                   case in tests/test_cuda_kernels.c): the GPU bf16 rule needs this of every
                                   SZ_CL_NATIVE codelet (codelets/native_cuda.c) */
    SZ_CL_CUDA_F16 = 1u << 3,   /* its CPU function meets fp16 mixed precision (fp16 tensors, the loss
                                   scale, a skipped step) and its CUDA implementation does the same, with
                                   its case in tests/test_cuda_kernels.c */
};
typedef struct sz_op_desc {
    const struct starpu_codelet *cl;
    sz_task_class cls;
    unsigned supports;          /* SZ_CL_* */
    const char *doc;
} sz_op_desc;
/* Describes codelet `var` (defined in the same file). The descriptors of every codelet linked in
 * form one list (an ELF section the linker gathers: nothing to register by hand). */
#define SZ_DESCRIBE(var, cls_, supports_, doc_)                                                     \
    static const sz_op_desc var##_desc = {&var, cls_, supports_, doc_};                            \
    static const sz_op_desc *const var##_desc_entry __attribute__((used, section("sz_op_descs"))) = \
        &var##_desc
/* core/descs.c: cl's descriptor (NULL: an app's own codelet); every descriptor (n of them), in
 * codelet-name order. */
const sz_op_desc *sz_op_desc_of(const struct starpu_codelet *cl);
const sz_op_desc *const *sz_op_descs(int *n);

/* ---- tensors ---------------------------------------------------------------------------------
 * A tensor is a view: `numel` elements at element `offset` of the vector handle `h`, which holds
 * `handle_numel` elements. A unit's parameters are views of one flat handle, and so on. */
struct sz_tensor {
    starpu_data_handle_t h;
    int64_t offset, numel, handle_numel;
    sz_dtype dtype;
    char name[48];
    void *home;        /* the buffer this tensor registered and owns (NULL for views) */
    size_t pinned;     /* > 0: home is pinned host memory of this many bytes (tasks/model.c's pinned_buffer) */
    int on_host;       /* lives in host memory with CUDA workers too (the host pool; offloaded master
                          and optimizer state): not placed on the GPU */
    int on_gpu;        /* home is a block of the model's GPU arena (freed with the arena) */
};
/* core/tensor.c */
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

/* Element types an op takes either way (the native bf16 path, include/starzero.h): the tensor's own
 * type when it is bf16, else f32 (so anything else is refused as not f32), and its kernel type. */
static inline sz_dtype sz_fb(const sz_tensor *t) { return t && t->dtype == SZ_DTYPE_BF16 ? SZ_DTYPE_BF16 : SZ_DTYPE_F32; }
static inline int sz_kdt(const sz_tensor *t) { return sz_fb(t) == SZ_DTYPE_BF16 ? 1 : 0; }
/* The kernels' type (kernels/sz_kernels.h, sz_k_dtype) of a float storage type: 0 fp32, 1 bf16, 2 fp16. */
static inline int sz_kdt_of(int dtype) { return dtype == SZ_DTYPE_BF16 ? 1 : dtype == SZ_DTYPE_F16 ? 2 : 0; }

/* ---- what the core keeps of a model and of a unit ------------------------------------------- */

/* The first unusable input a kernel met this step (sz_task_fail, include/starzero_starpu.h). */
struct sz_task_failure {
    int claimed, failed;
    sz_status status; /* SZ_ERR_INVALID (sz_task_fail) or SZ_ERR_NOMEM (sz_task_fail_nomem) */
    char msg[320];
};

/* ---- the forward a derived backward is made from (core/tape.c; tasks/autograd.c reads it) -------
 * While the engine records (struct sz_core's recording), every task a unit's forward submits is
 * checked and kept here instead of submitted; sz_task_submit_diff's with its backward function.
 * The engine then fills in what only the whole model knows: each tensor's gradient buffer, whether
 * this op is its first writer (zeroed first), which parameter a tensor is. */
struct sz_op_record {
    char op[32];
    sz_unit *unit;               /* the unit whose forward submitted it */
    sz_backward_fn backward;     /* NULL: an op without a backward (plain sz_task_submit) */
    int n;
    sz_task_tensor t[SZ_TASK_MAX_TENSORS];
    sz_grad_spec g[SZ_TASK_MAX_TENSORS];     /* roles resolved (never SZ_GRAD_AUTO) */
    int param_unit[SZ_TASK_MAX_TENSORS];     /* >= 0: tensor k is parameter param_index[k] of that unit */
    int param_index[SZ_TASK_MAX_TENSORS];
    sz_tensor *grad[SZ_TASK_MAX_TENSORS];    /* an activation's gradient (engine-owned), or NULL */
    unsigned char zero_first[SZ_TASK_MAX_TENSORS]; /* this op is grad[k]'s first writer: zeroed before */
    int64_t zeroed_gen[SZ_TASK_MAX_TENSORS]; /* the backward pass that zeroed it last */
    int active;                  /* a gradient reaches one of its outputs: its backward runs */
    /* set by the op's wrapper while recording (sz_tape_last): */
    int fusable_pos;             /* > 0: its output at this position may be differentiated by its consumer
                                    together with this op's (matmul_gelu's GELU output) */
    int absorbs_pos;             /* > 0: its input at this position may be such an output (matmul_fwd) */
    int64_t tied_numel;          /* > 0: it reads a weight other units may share, and its backward rounds
                                    their rows with this much fp32 scratch (the token embedding) */
    /* set by the engine (tasks/autograd.c): */
    const struct sz_op_record *fused_from; /* its input absorbs_pos's producer, differentiated here */
    const struct sz_op_record *fused_into; /* the consumer that differentiates its fusable output */
    sz_tensor *tied;             /* the shared rows' scratch (a tied weight whose gradients are rounded) */
    const struct sz_op_record *tied_with;  /* the owner's record that reads the same weight (tied_numel) */
    void *params;
    size_t params_size;
};
struct sz_tape {
    struct sz_op_record *r;
    int n, cap;
};
/* Inside a backward function (sz_unit *u, const sz_op_record *r): tensor k's gradient, tensor k. */
#define SZ_RG(k) sz_record_grad(u, r, (k))
#define SZ_RT(k) sz_record_tensor(r, (k))
struct sz_core;
/* core/tape.c: the record of a task being submitted while recording (grads NULL: roles from the
 * accesses); sz_tape_free. */
sz_status sz_tape_add(struct sz_core *c, sz_unit *u, const char *op, const sz_task_tensor *tt, int n,
                      const void *params, size_t params_size, const sz_grad_spec *grads, sz_backward_fn backward);
void sz_tape_free(struct sz_tape *t);
/* While recording: the record of the task just submitted through u (for its wrapper to mark); else
 * NULL. */
struct sz_op_record *sz_tape_last(sz_unit *u);

/* A model as the core sees it: the first member of the engine's struct sz_model. */
struct sz_core {
    struct sz_context *ctx;
    struct sz_task_failure failure;
    uint64_t position;           /* plan position of the next task submitted (sched/sz_sched.h):
                                    current_action << 16, plus the tasks the action submitted so far */
    uint32_t force_where;        /* nonzero: where the tasks submitted now must run (STARPU_CPU for the
                                    optimizer under offload_optimizer), set by tasks/step.c per action */
    int gpu_compute;             /* every task whose codelet has a CUDA implementation and is not
                                    communication runs on a CUDA worker, whatever the policy */
    /* the dependency check (tasks/depcheck.c): told of every handle a task accesses (NULL: off) */
    void (*on_access)(struct sz_core *c, starpu_data_handle_t h, int write);
    /* sz_op_zero calls of the callback being submitted, not submitted yet (core/fold.c): each folded
     * into the next task on its tensor that can set it, else submitted right before that task or
     * when the callback returns (sz_zero_flush) */
    int fold_zeros;              /* 0 under SZ_ZERO_FOLD=0 */
    int npending;
    struct sz_pending_zero { sz_unit *u; sz_tensor *t; } pending[16];
    /* The parameters' gradients left to their first writers (graph/sz_plan.h: SZ_GRADS_FIRST_WRITERS):
     * views [lo, lo + n) of a unit's gradient buffer `all`, not written since that action; each is
     * set by the next task that writes it whole (an SZ_ACCUMULATE_OR_SET tensor, on CPUs), zeroed
     * right before any other task on it (a task named `name`), or zeroed at the end of the BWD
     * action (sz_grads_flush). */
    struct sz_pending_grad {
        sz_unit *u;
        const sz_tensor *all;
        int64_t lo, n;
        int onto_zeros;
        const char *name;
    } *gpending;
    int ngpending, cap_gpending;
    int64_t zeros_folded, zeros_run; /* sz_op_zero calls since sz_model_init: folded into an op / submitted */
    int64_t grads_set, grads_zeroed; /* views set by their first writer / zeroed by a task of their own */
    int64_t zero_tasks, zero_bytes;  /* every zeroing task submitted since sz_model_init, and its bytes */
    /* the derived backward (tasks/autograd.c): while recording, tasks are recorded, not submitted */
    int recording;
    struct sz_tape tape;
    int64_t bwd_gen;                 /* derived backward passes so far (sz_record_grad zeroes once per pass) */
    /* the check mode (tasks/check.c): while tracing, every tensor a task touches is listed */
    int tracing;
    struct sz_touch {
        const sz_tensor *t;
        int sets;                    /* the task writes it whole before reading it (W, or a folded zero) */
        char task[64];
    } *touched;
    int ntouched, cap_touched;
};

/* A unit as the core sees it: the first member of the engine's struct sz_unit (tasks/sz_tasks.h),
 * so an sz_unit * is one of these. */
struct sz_unit_core {
    struct sz_core *core;
    int index;
    char name[32];      /* "block3": task names are "<phase>:<op>" */
    const char *phase;  /* task name prefix of the ops being submitted ("fwd:block3"; NULL: name) */
    int rounded;        /* the step plan folds its gradients' rounding into their writers
                           (sz_plan.rounded): the ops round into its bf16 gradients */
};
static inline struct sz_unit_core *sz_unit_core_of(const sz_unit *u) { return (struct sz_unit_core *)(void *)u; }
static inline struct sz_core *sz_core_of(const sz_unit *u) { return u ? sz_unit_core_of(u)->core : NULL; }
/* 1 when u's backward hands its ops the bf16 gradients to round into. */
static inline int sz_unit_rounds(const sz_unit *u) { return u && sz_unit_core_of(u)->rounded; }

/* ---- the task builder (core/task.c), behind sz_task_submit (include/starzero_starpu.h) --------
 * `name` is the task's full name, `op` the operation's (for messages); c may be NULL (then unit
 * is 0xffff). The _where form restricts the workers (STARPU_CPU, STARPU_CUDA; 0: any). */
sz_status sz_task_submit_named(struct sz_core *c, int unit, const char *name, const char *op,
                               struct starpu_codelet *cl, const struct sz_task_tensor *tensors, int ntensors,
                               const void *params, size_t params_size);
sz_status sz_task_submit_where(struct sz_core *c, int unit, const char *name, const char *op,
                               struct starpu_codelet *cl, const struct sz_task_tensor *tensors, int ntensors,
                               const void *params, size_t params_size, uint32_t where);
/* A task of unit u under its own full name (the step's tasks: "adam:block3", ...). */
sz_status sz_task_submit_as(sz_unit *u, const char *name, const char *op, struct starpu_codelet *cl,
                            const struct sz_task_tensor *tensors, int ntensors, const void *params,
                            size_t params_size);
/* sz_task_submit on CPU workers only (STARPU_EXECUTE_WHERE STARPU_CPU, also under CUDA workers):
 * for operand mixes a codelet's CUDA implementation does not take (codelets/matmul.c). */
sz_status sz_task_submit_cpu(sz_unit *u, struct starpu_codelet *cl, const char *op,
                             const struct sz_task_tensor *tensors, int ntensors, const void *params,
                             size_t params_size);
/* arr grown to hold `need` elements of elem bytes (doubling *cap); NULL: out of memory, arr and
 * *cap untouched. */
void *sz_grow(void *arr, int *cap, int need, size_t elem);
/* sz_task_submit_diff on CPU workers only (as sz_task_submit_cpu). */
sz_status sz_task_submit_diff_cpu(sz_unit *u, struct starpu_codelet *cl, const char *op,
                                  const sz_task_tensor *tensors, int ntensors, const void *params, size_t params_size,
                                  const sz_grad_spec *grads, sz_backward_fn backward);
/* An op's wrapper refusing its arguments (a shape, not a tensor: sz_task_submit names those): logs
 * "<op> (<task name>): <message>" and returns SZ_ERR_INVALID. u may be NULL. The same as the
 * public sz_task_refuse (include/starzero_starpu.h). */
sz_status sz_op_invalid(sz_unit *u, const char *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* SZ_ERR_INVALID (bad input: sz_task_fail) or SZ_ERR_NOMEM (sz_task_fail_nomem), logging the
 * message, when a kernel reported a failure since the last call; then it waits for every task
 * submitted so far (their failures are the same call's) and clears. */
sz_status sz_core_take_failure(struct sz_core *c);

/* ---- the accumulate-or-set fold (core/fold.c) ----------------------------------------------- */
extern struct starpu_codelet sz_cl_zero; /* x (W) = 0 */
/* The zeroing task: elements [from, numel) of t (written whole: W); with acct, `bytes` of
 * `category` become live when it runs; with `token` (the model's communication token) it is
 * ordered after the earlier reduce-scatters. */
sz_status sz_submit_zero(sz_unit *u, const sz_tensor *t, const char *name, struct sz_counters *acct, int category,
                         int64_t bytes, const sz_tensor *token);
sz_status sz_submit_zero_from(sz_unit *u, const sz_tensor *t, int64_t from, const char *name,
                              struct sz_counters *acct, int category, int64_t bytes, const sz_tensor *token);
/* The pending zeros of c. _resolve, for the task being built on tensors tt[0..n) (codelet cl,
 * workers `where`): each tensor of a pending zero either takes it (set[k] = 1: an
 * SZ_ACCUMULATE_OR_SET tensor covering its whole handle, the task's only tensor on that handle,
 * where every implementation the task may run on sets: sz_fold_decide) or has it submitted first.
 * _flush submits every pending zero (the end of a callback); both return the first failure. */
sz_status sz_zero_resolve(struct sz_core *c, struct starpu_codelet *cl, const struct sz_task_tensor *tt, int n,
                          uint32_t where, unsigned char *set);
sz_status sz_zero_flush(struct sz_core *c);
/* The gradients left to their first writers. _defer adds view [lo, lo + n) of u's buffer `all`
 * (zeroed, if it comes to that, by a task named `name`); _resolve, for the task being built: a
 * pending view that only tensor k of the task touches, exactly and as an SZ_ACCUMULATE_OR_SET
 * tensor (sz_fold_decide as above), is set there (set[k] = 1, or 2 when onto_zeros); every other
 * pending view the task touches is zeroed by a task submitted first; _flush zeroes every pending
 * view (contiguous ones by one task). */
sz_status sz_grads_defer(struct sz_core *c, sz_unit *u, const sz_tensor *all, int64_t lo, int64_t n,
                         int onto_zeros, const char *name);
sz_status sz_grads_resolve(struct sz_core *c, struct starpu_codelet *cl, const struct sz_task_tensor *tt, int n,
                           uint32_t where, unsigned char *set);
sz_status sz_grads_flush(struct sz_core *c);
/* Whether a task may set (rather than add into) its SZ_ACCUMULATE_OR_SET tensors, decided when it
 * is submitted (the worker is not known yet): 1 when it can run only on CPUs (its codelet has no
 * CUDA function, `where` is STARPU_CPU, or there are no CUDA workers), else cuda_sets — whether the
 * codelet's CUDA implementation sets too (its descriptor's SZ_CL_CUDA_SETS). Pure: tests call it
 * on made-up cases. */
int sz_fold_decide(int has_cuda_impl, int cuda_sets, uint32_t where, int ncuda_workers);
/* n fp32 values of scratch for an op rounding into a bf16 gradient (NULL after sz_task_fail when
 * out of memory). A test hook, read at each call so a test can set it between steps while no task
 * runs: SZ_TEST_FAIL_ROUND_SCRATCH=1 makes every such allocation fail as if memory had run out
 * (tests/test_llama.c). */
float *sz_round_scratch(const void *cl_arg, size_t n);
/* The GRAD_CONVERT rule (graph/sz_plan.h sz_convert_mode) an op that rounds its fp32 result into
 * the bf16 gradient k (a unit with sz_unit_rounds) applies: set by the first writer, SET (stages
 * 2-3: a fresh copy) or ONTO_ZEROS (stages 0-1: the first micro-batch, set[k] == 2 from a deferral
 * with onto_zeros); otherwise ADD (a later micro-batch adds into the bf16 gradients). */
static inline int sz_task_round_mode(const void *cl_arg, int k)
{
    const sz_task_layout *l = sz_task_layout_of(cl_arg);
    return l->set[k] == 2 ? SZ_CONVERT_ONTO_ZEROS : l->set[k] ? SZ_CONVERT_SET : SZ_CONVERT_ADD;
}

#endif
