/* sched/sz_sched.h — the `zero` scheduling policy (sched/policy.c) as the runtime and tasks see it. */
#ifndef SZ_SCHED_H
#define SZ_SCHED_H
#include <stdint.h>
#include <time.h>
#include <starpu.h>

/* What kind of work a task is: the task builder (core/task.c) stamps its codelet's class
 * (core/sz_core.h, the codelet's descriptor) into the task, and the policy reads only that. */
typedef enum sz_task_class {
    SZ_TASK_COMPUTE = 0,  /* an op (an app's own included) */
    SZ_TASK_MATMUL,       /* the products (matmul, the fused matmul + GELU pair) */
    SZ_TASK_OPTIMIZER,    /* the optimizer updates (AdamW, SGD; fp32 and mixed) */
    SZ_TASK_CONVERT,      /* fp32 <-> bf16 copies (working copies, gradient rounding, checkpoints) */
    SZ_TASK_ZERO,         /* zeroing */
    SZ_TASK_COMM,         /* a collective (reduce-scatter, all-gather) */
    SZ_TASK_COMM_HOST,    /* a collective whose exchange is host MPI even beside CUDA workers (the
                             clip factor's norms): under the split it belongs to the communication worker */
} sz_task_class;

extern struct starpu_sched_policy sz_zero_policy;
/* StarPU's predefined policy `name` (dmdas, prio, lws, eager, ...) with the task intervals recorded
 * for sz_sched_overlap, its decisions unchanged; NULL if StarPU has no policy of that name. */
struct starpu_sched_policy *sz_sched_measured_policy(const char *name);
/* The CPU worker that takes only communication tasks under the zero policy (the others then take
 * none); -1: every worker takes everything. Set by the runtime after starpu_init. */
extern int sz_comm_worker;
/* 1 for the communication tasks (gather, reduce-scatter, all-gather, clip factor). */
int sz_task_is_comm(const struct starpu_task *t);
static inline int sz_class_is_comm(sz_task_class c) { return c == SZ_TASK_COMM || c == SZ_TASK_COMM_HOST; }
/* Seconds some kinds of compute task ran, summed over tasks: the classes SZ_TASK_MATMUL,
 * _OPTIMIZER, _CONVERT and _ZERO. */
typedef struct sz_sched_task_times {
    double matmul_s, optimizer_s, convert_s, zero_s;
    int ncl; /* and every codelet's, in the order each first ran (communication included) */
    struct {
        const char *name;
        double s;
        int tasks;
    } cl[64];
} sz_sched_task_times;
/* Since the last call: the fraction of communication time hidden behind compute, the busy
 * seconds of each, and (times may be NULL) the seconds some kinds of task ran.
 * -1 when the policy in effect records nothing (neither `zero` nor a sz_sched_measured_policy). */
int sz_sched_overlap(double *fraction, double *comm_s, double *compute_s, sz_sched_task_times *times);
/* task->sched_data for a task of class cls at `position` of the plan (its action's index << 16,
 * plus its rank among that action's tasks), of unit `unit`: the class in bits 60..63, the position
 * in bits 16..59 (actions below 2^28), the unit in bits 0..15. */
static inline void *sz_sched_data(uint64_t position, int unit, sz_task_class cls)
{
    return (void *)(uintptr_t)((uint64_t)cls << 60 | (position & 0xfffffffffffull) << 16 | ((uint64_t)unit & 0xffff));
}
static inline uint64_t sz_sched_position(const struct starpu_task *t)
{
    return ((uint64_t)(uintptr_t)t->sched_data >> 16) & 0xfffffffffffull;
}
static inline sz_task_class sz_task_class_of(const struct starpu_task *t)
{
    return (sz_task_class)((uint64_t)(uintptr_t)t->sched_data >> 60);
}
/* Monotonic nanoseconds. */
static inline int64_t sz_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#endif
