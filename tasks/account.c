/* tasks/account.c — memory accounting as a task: when it runs, `bytes` (possibly negative) of
 * category `category` become live, e.g. a unit's gradients allocated for its backward, or a
 * gathered unit released. It runs in dataflow order with the tasks that touch its tensors, so
 * the counters follow what the engine really holds (its tensors are only there for that order;
 * it reads and writes none of them). The counters' functions are core/counters.c.
 * Its CUDA implementation is the same host-side counter update run by a CUDA worker: it enqueues
 * nothing on the stream, but lets the task run where its tensors are (a released unit's gathered
 * parameters on the GPU) instead of StarPU copying them to the host for a task that reads none.
 * Each account task also samples StarPU's allocations on the rank's compute memory node
 * (sz_counters_sample: the measured device peak of tasks/devwatch.c). */
#include "sz_tasks.h"
#include "sz_cuda.h"

struct account_args {
    struct sz_counters *stats;
    int category;
    int64_t bytes;
};

static void account_cpu(void *b[], void *arg)
{
    (void)b;
    const struct account_args *a = sz_task_params(arg);
    sz_counters_add(a->stats, a->category, a->bytes);
    sz_counters_sample(a->stats); /* a release: StarPU's allocations are near a local peak */
}

#if SZ_WITH_CUDA
static void account_cuda(void *b[], void *arg) { account_cpu(b, arg); }
#endif

SZ_PERFMODEL(account_model, "sz_account");
SZ_CODELET_CUDA(sz_cl_account, account_cpu, account_cuda, "account", account_model);
SZ_DESCRIBE(sz_cl_account, SZ_TASK_COMPUTE, 0,
            "live-bytes accounting in dataflow order (CUDA: host counters, nothing on the stream)");

/* Also writes the token: a release is ordered among the communication tasks, so a later gather
 * waits for it and the gathered units in flight stay bounded. */
sz_status sz_submit_account(struct sz_model *m, const sz_tensor *t, int category, int64_t bytes, const char *name)
{
    struct account_args a = {&m->counters, category, bytes};
    sz_task_tensor tt[] = {{t, SZ_READ_WRITE, SZ_DTYPE_ANY, -1, "x", 0},
                           {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_named(&m->core, 0xffff, name, "account", &sz_cl_account, tt, 2, &a, sizeof a);
}
