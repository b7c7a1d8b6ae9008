/* core/counters.c — the byte counters (struct sz_counters, core/sz_core.h) the accounting,
 * zeroing and communication tasks update from worker threads: live bytes per category and their
 * peaks, the live-bytes timeline of a step, communication bytes and time, and samples of StarPU's
 * own allocations on the rank's compute memory node. */
#include "sz_core.h"

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
