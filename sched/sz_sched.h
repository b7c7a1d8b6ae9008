/* sched/sz_sched.h — the `zero` scheduling policy (sched/policy.c) as the runtime and tasks see it. */
#ifndef SZ_SCHED_H
#define SZ_SCHED_H
#include <starpu.h>

extern struct starpu_sched_policy sz_zero_policy;
/* The CPU worker that takes only communication tasks under the zero policy (the others then take
 * none); -1: every worker takes everything. Set by the runtime after starpu_init. */
extern int sz_comm_worker;
/* 1 for the communication codelets (gather, reduce-scatter, all-gather, clip factor). */
int sz_task_is_comm(const struct starpu_task *t);
int sz_codelet_is_comm(const struct starpu_codelet *cl);
/* Seconds some kinds of compute task ran, summed over tasks: matmuls (sz_cl_matmul_fwd/bwd), the
 * optimizer updates (sz_task_is_optimizer), fp32 <-> bf16 conversions (sz_cl_convert: working
 * copies, gradient rounding, checkpoint copies) and zeroing (sz_cl_zero). */
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
 * -1 when the policy in effect is not `zero` (which records the intervals). */
int sz_sched_overlap(double *fraction, double *comm_s, double *compute_s, sz_sched_task_times *times);
/* 1 for the optimizer-update codelets (AdamW and SGD, fp32 and mixed). */
int sz_task_is_optimizer(const struct starpu_task *t);
/* task->sched_data for a task at `position` of the plan (its action's index << 16, plus its rank
 * among that action's tasks), of unit `unit`. */
static inline void *sz_sched_data(uint64_t position, int unit)
{
    return (void *)(uintptr_t)(position << 16 | ((uint64_t)unit & 0xffff));
}
#endif
