/* starzero_starpu.h — operations of your own: define an operation as a StarPU codelet (a CPU
 * function, optionally a CUDA one, a perf model) with a typed argument struct, and submit it from
 * inside a unit's forward or backward callback on sz_tensors, exactly as StarZeRO's built-in
 * operations are written (codelets/<op>.c). This header includes StarPU; starzero.h does not.
 *
 * A task's tensors are views (a unit's parameters are views of one flat buffer), so several
 * tensors of one task may live in the same StarPU handle. The library passes each handle once
 * and puts a layout (sz_task_layout) at the start of the task's cl_arg, followed by your
 * argument struct; inside the kernel, sz_task_ptr() gives tensor k's first element.
 *
 *   struct my_args { int N, C; float eps; };
 *   static void my_cpu(void *buffers[], void *cl_arg) {
 *       const struct my_args *a = sz_task_params(cl_arg);
 *       float *out = sz_task_ptr(buffers, cl_arg, 0);
 *       const float *inp = sz_task_ptr(buffers, cl_arg, 1);
 *       ...
 *   }
 *   static struct starpu_perfmodel my_model = {.type = STARPU_HISTORY_BASED, .symbol = "my_op"};
 *   static struct starpu_codelet my_cl = {.cpu_funcs = {my_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
 *                                         .name = "my_op", .model = &my_model};
 *   sz_status my_op(sz_unit *u, sz_tensor *out, sz_tensor *inp, int N, int C) {
 *       struct my_args a = {N, C, 1e-5f};
 *       sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, (int64_t)N * C, "out"},
 *                             {inp, SZ_READ, SZ_DTYPE_F32, (int64_t)N * C, "inp"}};
 *       return sz_task_submit(u, &my_cl, "my_op", t, 2, &a, sizeof a);
 *   }
 *
 * The task is named "<phase>:<unit>:<op>" (e.g. "fwd:block3:my_op", "recompute:block3:my_op",
 * "bwd:block3:my_op"), carries its plan position for the `zero` scheduler, and is ordered by
 * StarPU after the tasks that write its inputs, like every built-in op. A kernel must not block,
 * call MPI, or touch tensors other than its own; it may run on any worker of the kind it has an
 * implementation for (its own thread). */
#ifndef STARZERO_STARPU_H
#define STARZERO_STARPU_H

#include <starpu.h>
#include "starzero.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SZ_TASK_MAX_TENSORS 12

/* How a task uses a tensor. */
typedef enum sz_access {
    SZ_READ = 0,    /* read only */
    SZ_WRITE,       /* every element of the view is overwritten, previous values unread */
    SZ_READ_WRITE,  /* updated in place */
    SZ_ACCUMULATE,  /* added into (+=); the op's documentation says "accumulates" */
    SZ_ACCUMULATE_OR_SET, /* added into (+=), or set (=) when the engine folds a pending sz_op_zero of
                             the tensor into this task, or when the task is the step's first writer of
                             a parameter's gradient (sz_unit_grad, the whole view; the engine zeroes
                             those no such task writes first): the kernel asks sz_task_sets(cl_arg, k) and
                             then writes every element of the view without reading it. Only for an op
                             whose CPU implementation honours it; a task that may run on a CUDA
                             worker is folded into only for the engine's own codelets whose CUDA
                             implementations honour it too (core/fold.c): an op of your own
                             with a CUDA function is folded into where it runs on CPUs only */
} sz_access;

/* For sz_task_tensor.dtype: the op takes any element type (it reads the layout's dtype). */
#define SZ_DTYPE_ANY ((sz_dtype)-1)

/* One tensor argument of a task. */
typedef struct sz_task_tensor {
    const sz_tensor *tensor; /* NULL only when `optional`: the kernel's sz_task_ptr() gives NULL */
    sz_access access;
    sz_dtype dtype;          /* the element type required, or SZ_DTYPE_ANY */
    int64_t numel;           /* elements the op touches (from the view's start); -1: the whole view.
                                A smaller view is refused, naming the op and this tensor */
    const char *role;        /* its name in messages: "out", "inp", "w", ... */
    int optional;            /* 1: tensor may be NULL */
} sz_task_tensor;

/* What the kernel finds at the start of its cl_arg; the op's own argument struct follows at
 * SZ_TASK_PARAMS_OFFSET. */
typedef struct sz_task_layout {
    int ntensors;
    int buffer[SZ_TASK_MAX_TENSORS];     /* tensor k -> index in buffers[]; -1: absent */
    int64_t offset[SZ_TASK_MAX_TENSORS]; /* elements from the start of that buffer */
    int64_t numel[SZ_TASK_MAX_TENSORS];  /* elements of the view */
    int dtype[SZ_TASK_MAX_TENSORS];      /* sz_dtype of the view */
    unsigned char set[SZ_TASK_MAX_TENSORS]; /* SZ_ACCUMULATE_OR_SET tensor k is to be set, not added to */
    void *fail;                          /* where sz_task_fail() records an error (the model's) */
    char name[64];                       /* the task's name, for messages */
    int64_t params_size;
} sz_task_layout;

#define SZ_TASK_PARAMS_OFFSET ((sizeof(sz_task_layout) + 15) & ~(size_t)15)

/* Submits one task of codelet `cl` (nbuffers = STARPU_VARIABLE_NBUFFERS) on `tensors` from
 * inside a unit's callback; `params` (params_size bytes, may be 0) is copied. Checks every
 * tensor's presence, element type and size; on a mismatch it logs "<op> (<task name>): tensor
 * '<role>' (<tensor name>) ..." and returns SZ_ERR_INVALID without submitting anything. */
sz_status sz_task_submit(sz_unit *u, struct starpu_codelet *cl, const char *op, const sz_task_tensor *tensors,
                         int ntensors, const void *params, size_t params_size);

/* ---- an operation with its backward: models written as their forward -------------------------
 * A unit whose sz_unit_desc.backward is NULL gets its backward from its forward: the engine runs
 * the forward once while sz_model_finalize (recording each op, submitting nothing), then walks the
 * recorded ops in reverse, calling each one's backward function. It allocates the activations'
 * gradients itself (one buffer per gradient, shared by the units' gradients of the same activation
 * under sz_model_activation; element type from the ops' grad_type, fp32 otherwise), zeroes each
 * before its first writer (folded into that writer: SZ_ACCUMULATE_OR_SET) and hands the
 * parameters' gradients over as sz_unit_grad does, so a backward function only adds into what
 * sz_record_grad gives it. Ops submitted with plain sz_task_submit in such a forward have no
 * backward: a gradient that would have to flow through one is refused at sz_model_finalize, naming
 * the op and the tensor. A backward function may read its op's inputs and SZ_GRAD_NONE tensors
 * (statistics): a later op of the same unit overwriting one is refused at sz_model_finalize.
 *
 *   static sz_status my_op_grad(sz_unit *u, const sz_op_record *r) {
 *       const struct my_args *a = sz_record_params(r);
 *       return my_op_bwd(u, sz_record_grad(u, r, 1), sz_record_grad(u, r, 0), sz_record_tensor(r, 1), a->N);
 *   }                                      // d inp (added into)  d out (read)   the forward's inp
 *   ... in my_op: return sz_task_submit_diff(u, &my_cl, "my_op", t, 2, &a, sizeof a, NULL, my_op_grad);
 */
typedef struct sz_op_record sz_op_record;
typedef sz_status (*sz_backward_fn)(sz_unit *u, const sz_op_record *r);

/* How tensor k of a differentiable op takes part in the backward. */
typedef enum sz_grad_role {
    SZ_GRAD_AUTO = 0,  /* from its access: a float SZ_READ is an input, a float SZ_WRITE an output,
                          anything else (ids, in-place updates) none */
    SZ_GRAD_NONE,      /* no gradient flows through it (statistics, indices, masks) */
    SZ_GRAD_INPUT,     /* its gradient is added into by the backward (sz_record_grad: +=) */
    SZ_GRAD_OUTPUT,    /* its gradient is read by the backward (sz_record_grad: NULL when none flows) */
    SZ_GRAD_INPUT_SET, /* an input whose gradient the backward OVERWRITES (a loss's softmax_xent_bwd):
                          allowed only where no later op of the forward also reads the input */
    SZ_GRAD_IN_PLACE,  /* an SZ_READ_WRITE input the forward overwrites with its own gradient (the
                          fused softmax-cross-entropy): its gradient is the tensor itself */
    SZ_GRAD_INTERNAL,  /* an output whose gradient the backward computes itself from its other outputs'
                          before using it (a fused activation's input: matmul_gelu's pre-GELU out);
                          sz_record_grad gives a buffer, zeroed first */
} sz_grad_role;
#define SZ_GRAD_TYPE_F32 (-1)
typedef struct sz_grad_spec {
    sz_grad_role role;
    int type;          /* the gradient's element type: 0 whatever the other ops need (fp32 if none
                          says), SZ_GRAD_TYPE_F32 fp32, k + 1 tensor k's (bf16 if it is bf16, else
                          fp32: what the op's backward reads beside it) */
} sz_grad_spec;

/* sz_task_submit for an op with a backward: `grads` (ntensors entries, or NULL: every role
 * SZ_GRAD_AUTO, every type 0) says how each tensor takes part, `backward` is called for the unit's
 * derived backward with this op's record. Outside a derived unit's forward it is sz_task_submit. */
sz_status sz_task_submit_diff(sz_unit *u, struct starpu_codelet *cl, const char *op, const sz_task_tensor *tensors,
                              int ntensors, const void *params, size_t params_size, const sz_grad_spec *grads,
                              sz_backward_fn backward);
/* Inside a backward function: the forward's tensor k (a parameter: the unit's current view of it,
 * as sz_unit_param gives it in the backward), its argument struct, and tensor k's gradient —
 * for an input, the buffer to add into (zeroed first where this op is its first writer; a
 * parameter's: sz_unit_grad's); for an output, the gradient to read; NULL where none flows or
 * the tensor has none (SZ_GRAD_NONE, an absent optional tensor). */
sz_tensor *sz_record_tensor(const sz_op_record *r, int k);
const void *sz_record_params(const sz_op_record *r);
sz_tensor *sz_record_grad(sz_unit *u, const sz_op_record *r, int k);

/* The StarPU handle behind a tensor (views share their base's handle), its element offset in it. */
starpu_data_handle_t sz_tensor_handle(const sz_tensor *t);
int64_t sz_tensor_offset(const sz_tensor *t);

/* Inside a kernel: the layout, the op's argument struct, tensor k's first element (NULL when
 * absent) and its element count. */
static inline const sz_task_layout *sz_task_layout_of(const void *cl_arg) { return (const sz_task_layout *)cl_arg; }
static inline const void *sz_task_params(const void *cl_arg) { return (const char *)cl_arg + SZ_TASK_PARAMS_OFFSET; }
static inline void *sz_task_ptr(void *buffers[], const void *cl_arg, int k)
{
    const sz_task_layout *l = sz_task_layout_of(cl_arg);
    if (k < 0 || k >= l->ntensors || l->buffer[k] < 0)
        return NULL;
    size_t es = l->dtype[k] == SZ_DTYPE_BF16 || l->dtype[k] == SZ_DTYPE_F16 ? 2 : 4; /* sz_dtype_size */
    return (char *)STARPU_VECTOR_GET_PTR(buffers[l->buffer[k]]) + (size_t)l->offset[k] * es;
}
/* Inside a kernel: 1 when tensor k (declared SZ_ACCUMULATE_OR_SET) must be set (=) rather than
 * added to: the engine folded the sz_op_zero that preceded the task into it. */
static inline int sz_task_sets(const void *cl_arg, int k)
{
    const sz_task_layout *l = sz_task_layout_of(cl_arg);
    return k >= 0 && k < l->ntensors && l->set[k];
}
static inline int64_t sz_task_numel(const void *cl_arg, int k)
{
    const sz_task_layout *l = sz_task_layout_of(cl_arg);
    return k >= 0 && k < l->ntensors && l->buffer[k] >= 0 ? l->numel[k] : 0;
}

/* Inside an op's wrapper (before submitting): refuse the call for a reason of its own (a shape
 * the op cannot take, e.g. C not a multiple of NH). Logs "<op> (<task name>): <message>" through
 * the model's context and returns SZ_ERR_INVALID. */
sz_status sz_task_refuse(sz_unit *u, const char *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Inside a kernel: 1 (after sz_task_fail "<role> <value> at row <i> is outside the vocabulary
 * [0, <limit>)") when some ids[i], i < n, lies outside [0, limit); 0 when all are inside or ids
 * is NULL. For token ids and targets before they index a table. */
int sz_task_check_ids(const void *cl_arg, const char *role, const int32_t *ids, int64_t n, int64_t limit);

/* Inside a kernel: the input is unusable (e.g. a token outside the vocabulary). Records the first
 * such message of the step (prefixed with the task's name); the kernel then returns without
 * crashing (leaving its outputs as it can), and the model call that waits for the task returns
 * SZ_ERR_INVALID and logs the message: sz_model_eval (it waits for every forward task), the
 * sz_model_forward_backward whose loss depends on the task, else the next sz_model_forward_backward /
 * sz_model_eval / sz_model_update (an update waits for everything). That call first waits for every
 * task submitted so far, so the same bad input met again by later tasks is reported once. */
void sz_task_fail(const void *cl_arg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for an allocation the kernel needed and did not get (scratch, a host copy): the call
 * returns SZ_ERR_NOMEM instead, so the application can tell "out of memory" from bad input. */
void sz_task_fail_nomem(const void *cl_arg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif /* STARZERO_STARPU_H */
