/* codelets/account.c — memory accounting as a task: when it runs, `bytes` (possibly negative) of
 * category `category` become live, e.g. a unit's gradients allocated for its backward, or a
 * gathered unit released. It runs in dataflow order with the tasks that touch its tensors, so
 * the counters follow what the engine really holds (its tensors are only there for that order;
 * it reads and writes none of them). Also the counters' update function.
 * Its CUDA implementation is the same host-side counter update run by a CUDA worker: it enqueues
 * nothing on the stream, but lets the task run where its tensors are (a released unit's gathered
 * parameters on the GPU) instead of StarPU copying them to the host for a task that reads none.
 * Each account task also samples StarPU's allocations on the rank's compute memory node
 * (sz_counters_sample: the measured device peak of tasks/devwatch.c). */
#include <time.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

void sz_counters_add(struct sz_counters *c, int category, int64_t bytes)
{
    if (!c || category < 0 || category >= SZ_NCATEGORIES || !bytes)
        return;
    int64_t live = __atomic_add_fetch(&c->live[category], bytes, __ATOMIC_RELAXED);
    int64_t total = __atomic_add_fetch(&c->live_total, bytes, __ATOMIC_RELAXED);
    int64_t p;
    while (live > (p = __atomic_load_n(&c->peak[category], __ATOMIC_RELAXED)) &&
           !__atomic_compare_exchange_n(&c->peak[category], &p, live, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    while (total > (p = __atomic_load_n(&c->peak_total, __ATOMIC_RELAXED)) &&
           !__atomic_compare_exchange_n(&c->peak_total, &p, total, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    int k = __atomic_fetch_add(&c->ntimeline, 1, __ATOMIC_RELAXED);
    if (k < SZ_TIMELINE) {
        c->timeline[k][0] = sz_now_ns() - c->t0_ns;
        c->timeline[k][1] = total;
    }
}

void sz_counters_sample(struct sz_counters *c)
{
    if (!c || !__atomic_load_n(&c->sample_on, __ATOMIC_ACQUIRE))
        return;
    starpu_ssize_t total = starpu_memory_get_total(c->sample_node);
    starpu_ssize_t avail = starpu_memory_get_available(c->sample_node);
    if (total <= 0)
        return; /* no limit known on that node: StarPU keeps no count */
    int64_t used = (int64_t)total - (int64_t)avail, p;
    while (used > (p = __atomic_load_n(&c->node_peak, __ATOMIC_RELAXED)) &&
           !__atomic_compare_exchange_n(&c->node_peak, &p, used, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void sz_counters_comm(struct sz_counters *c, int64_t bytes, int64_t ns)
{
    __atomic_add_fetch(&c->sent, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->received, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->comm_ns, ns, __ATOMIC_RELAXED);
}

int64_t sz_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* Also writes the token: a release is ordered among the communication tasks, so a later gather
 * waits for it and the gathered units in flight stay bounded. */
sz_status sz_submit_account(struct sz_model *m, const sz_tensor *t, int category, int64_t bytes, const char *name)
{
    struct account_args a = {&m->counters, category, bytes};
    sz_task_tensor tt[] = {{t, SZ_READ_WRITE, SZ_DTYPE_ANY, -1, "x", 0},
                           {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_named(m, 0xffff, name, "account", &sz_cl_account, tt, 2, &a, sizeof a);
}
