/* tasks/devwatch.c — the measured device peak against the per-GPU budget, at run time (issue 15,
 * item 5). The plan's device peak is checked before anything is allocated (tasks/model.c); this
 * checks what the GPU really holds after every optimizer step, from two sources:
 *   StarPU's accounting of the GPU's memory node (starpu_memory_get_total - _available: every
 *   device copy it allocated, its cache of freed buffers, its 32 MiB suballocation chunks, and the
 *   GPU arena, which is declared to it), sampled by every account task (the releases, near each
 *   local peak) and after the step (StarPU keeps freed device buffers cached and counted until it
 *   needs the room, so the figure after a step is at least the step's high-water mark unless it
 *   reclaimed);
 *   cudaMemGetInfo (every process on the device) after the step, against what it was when the
 *   budget was taken.
 * graph/devcheck.c decides and words the verdict. When a rank's GPU is over, every rank learns it
 * in the same step (one all-reduce on the host communicator, under the deadline), so all stop
 * together with SZ_ERR_BUDGET and nothing waits. With no CUDA worker on any rank nothing is
 * collective; StarPU's main-RAM allocations are still sampled (the report's host-node analogue),
 * and SZ_DEVWATCH_BUDGET=<bytes> (set alike on every rank) turns the same check on for them on a
 * CPU-only rank: StarPU's main-RAM allocations against that figure, stopping every rank as a GPU
 * over its budget would (tests/devwatch_cli.sh makes it happen on CPUs). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_deadline.h"
#include "sz_devcheck.h"
#include "sz_cuda.h"

/* cudaMemGetInfo of dev: total - free, and total; -1 where unknown (no CUDA, or it failed). */
static int64_t cuda_used(int dev, int64_t *total)
{
    *total = -1;
#if SZ_WITH_CUDA
    int64_t f = 0, t = 0;
    if (dev >= 0 && sz_cuda_mem_info(dev, &f, &t) == 0) {
        *total = t;
        return t - f;
    }
#else
    (void)dev;
#endif
    return -1;
}

sz_status sz_devwatch_start(struct sz_model *m)
{
    struct sz_devwatch *w = &m->watch;
    memset(w, 0, sizeof *w);
    w->dev = -1;
    w->cuda_total = w->cuda_start_used = w->cuda_used_peak = -1;
    int ids[STARPU_NMAXWORKERS];
    w->gpu = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) >= 1;
    w->node = w->gpu ? starpu_worker_get_memory_node((unsigned)ids[0]) : STARPU_MAIN_RAM;
    if (w->gpu) {
        w->dev = starpu_worker_get_devid(ids[0]);
        w->cuda_start_used = cuda_used(w->dev, &w->cuda_total); /* before the others go on (below) */
    }
    int any = 0;
    sz_status st = sz_context_gpu_sharers(m->core.ctx, &any, &w->sharers);
    if (st != SZ_OK)
        return st;
    w->host_budget = w->gpu ? 0 : m->core.ctx->env.devwatch_budget;
    w->on = any || m->core.ctx->env.devwatch_budget > 0;
    m->counters.sample_node = w->node;
    m->counters.node_peak = 0;
    __atomic_store_n(&m->counters.sample_on, 1, __ATOMIC_RELEASE);
    return SZ_OK;
}

sz_status sz_devwatch_step(struct sz_model *m)
{
    struct sz_devwatch *w = &m->watch;
    sz_counters_sample(&m->counters); /* after the step too */
    if (!w->on)
        return SZ_OK;
    char msg[1400] = "";
    int bad = 0;
    if (!w->gpu && w->host_budget > 0) { /* the host-node analogue (SZ_DEVWATCH_BUDGET) */
        sz_device_sample s = {.rank = m->rank, .host = 1, .device = -1, .node = (int)w->node, .step = m->steps_done,
                              .sharers = 1, .budget = w->host_budget, .predicted = m->predicted_peak,
                              .starpu_peak = __atomic_load_n(&m->counters.node_peak, __ATOMIC_RELAXED),
                              .cuda_start_used = -1, .cuda_used = -1};
        bad = sz_device_budget_check(&s, msg, sizeof msg);
    }
    if (w->gpu) {
        int64_t total, used = cuda_used(w->dev, &total);
        if (used > w->cuda_used_peak)
            w->cuda_used_peak = used;
        sz_memory_report r;
        if (sz_model_memory_report(m, &r) == SZ_OK) {
            sz_device_sample s = {
                .rank = m->rank, .device = w->dev, .node = (int)w->node, .step = m->steps_done,
                .sharers = w->sharers, .budget = m->budget, .predicted = m->predicted_peak,
                .engine_peak = r.device_peak_bytes, .starpu_peak = r.starpu_node_peak_bytes,
                .starpu_limit = (int64_t)starpu_memory_get_total(w->node), .cuda_start_used = w->cuda_start_used,
                .cuda_used = w->cuda_used_peak, .allowance = SZ_GPU_RUNTIME_ALLOWANCE_BYTES};
            bad = sz_device_budget_check(&s, msg, sizeof msg);
        }
    }
    int first = bad ? m->rank : INT_MAX;
    if (m->nd > 1 && sz_allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, m->core.ctx->host_comm,
                                  "device memory check") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    if (first == INT_MAX)
        return SZ_OK;
    if (bad)
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "%s", msg);
    else
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "device memory over the budget on rank %d after step %d (its message "
                       "gives the figures and what to do): rank %d stops with it", first, m->steps_done, m->rank);
    return SZ_ERR_BUDGET;
}

void sz_devwatch_report(const struct sz_model *m, sz_memory_report *r)
{
    const struct sz_devwatch *w = &m->watch;
    int on = __atomic_load_n(&m->counters.sample_on, __ATOMIC_ACQUIRE);
    r->starpu_node_peak_bytes = on ? __atomic_load_n(&m->counters.node_peak, __ATOMIC_RELAXED) : -1;
    r->gpu_device = on && w->gpu ? w->dev : -1;
    r->gpu_cuda_used_bytes = r->gpu_device >= 0 ? w->cuda_used_peak : -1;
    r->gpu_cuda_used_at_start_bytes = r->gpu_device >= 0 ? w->cuda_start_used : -1;
    r->gpu_arena_bytes = m->gpu.base ? m->gpu.bytes : 0;
    r->gpu_sharers = r->gpu_device >= 0 ? w->sharers : 0;
}
