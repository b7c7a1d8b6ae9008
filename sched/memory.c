/* sched/memory.c — what memory a rank can really have (docs/ARCHITECTURE.md, failures: with no budget given, the
 * budget is what the memory node has). For CPU memory: the node's available memory (the kernel's
 * MemAvailable, or less if this process's cgroup allows less), shared among the ranks of the
 * node, plus what this rank already holds (its resident set: the runtime and whatever the model
 * has already touched), less SZ_RUNTIME_ALLOWANCE_BYTES for the runtime itself; the minimum over
 * all ranks, so every rank decides alike. Also the process's resident set, now and at its peak. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include "sz_deadline.h"
#include "sz_runtime.h"
#include "sz_gpu_budget.h"
#if SZ_WITH_CUDA
#include "sz_cuda_kernels.h"
#endif

/* A number from a one-line file (cgroup v2 memory.max says "max" for no limit): -1 if none. */
static int64_t read_number(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[64] = "";
    int64_t v = -1;
    if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9')
        v = strtoll(buf, NULL, 10);
    fclose(f);
    return v;
}

/* A /proc/meminfo field ("MemAvailable:", "MemTotal:") in bytes; -1 if none. */
static int64_t meminfo_bytes(const char *key)
{
    int64_t v = -1;
    size_t n = strlen(key);
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) {
            v = strtoll(line + n, NULL, 10) * 1024;
            break;
        }
    if (f)
        fclose(f);
    return v;
}

/* A container's memory limit (cgroup v2, then v1), and in *used what it holds now; -1 for none. */
static int64_t cgroup_limit(int64_t *used)
{
    int64_t max = read_number("/sys/fs/cgroup/memory.max");
    *used = read_number("/sys/fs/cgroup/memory.current");
    if (max < 0) {
        max = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        *used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    }
    return max > 0 && max < ((int64_t)1 << 60) ? max : -1;
}

int64_t sz_memory_available_bytes(void)
{
    int64_t avail = meminfo_bytes("MemAvailable:"), cur, max = cgroup_limit(&cur);
    if (max > 0 && cur >= 0) { /* what the container still allows */
        int64_t left = max > cur ? max - cur : 0;
        if (avail < 0 || left < avail)
            avail = left;
    }
    return avail;
}

int64_t sz_memory_total_bytes(void)
{
    int64_t total = meminfo_bytes("MemTotal:"), cur, max = cgroup_limit(&cur);
    return max > 0 && (total < 0 || max < total) ? max : total;
}

int64_t sz_memory_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &resident) != 2)
            resident = -1;
        fclose(f);
    }
    return resident < 0 ? -1 : resident * (int64_t)sysconf(_SC_PAGESIZE);
}

int64_t sz_memory_rss_peak_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_maxrss * 1024 : -1;
}

/* The CUDA device of this rank's first CUDA worker; -1 without one. */
static int gpu_device(void)
{
#if SZ_WITH_CUDA
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) >= 1)
        return starpu_worker_get_devid(ids[0]);
#endif
    return -1;
}

int64_t sz_memory_gpu_free_bytes(void)
{
#if SZ_WITH_CUDA
    int dev = gpu_device();
    int64_t free_b = 0, total_b = 0;
    if (dev >= 0 && sz_cuda_mem_info(dev, &free_b, &total_b) == 0)
        return free_b;
#endif
    return -1;
}

int64_t sz_gpu_device_key(int dev)
{
    if (dev < 0)
        return -1;
#if SZ_WITH_CUDA
    char pci[64] = "";
    if (sz_cuda_pci_bus_id(dev, pci, (int)sizeof pci) == 0 && pci[0]) {
        int64_t h = 7; /* (positive: -1 means none) */
        for (const char *c = pci; *c; c++)
            h = (h * 131 + (unsigned char)*c) & INT64_MAX;
        return h;
    }
#endif
    return dev;
}

/* Collective: whether any rank has a CUDA worker, and how many ranks of this rank's node drive
 * this rank's device (this one included; 0 on a rank without one). One all-gather of (device,
 * node) pairs, the device named by its PCI bus id (so ranks that each see only their own GPU as
 * device 0, scripts/gpu-rank.sh, are not counted as sharing it), the node by a hash of its host
 * name. */
sz_status sz_context_gpu_sharers(sz_context *ctx, int *any, int *sharers)
{
    int64_t mine[2] = {sz_gpu_device_key(gpu_device()), 0};
    for (const char *c = ctx->topology.hostname; *c; c++) /* the node, as a number */
        mine[1] = mine[1] * 131 + (unsigned char)*c;
    *any = mine[0] >= 0;
    *sharers = mine[0] >= 0;
    if (ctx->world_size < 2)
        return SZ_OK;
    int64_t *all = malloc((size_t)ctx->world_size * 2 * sizeof *all);
    if (!all)
        return SZ_ERR_NOMEM;
    if (sz_allgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, ctx->host_comm, "memory budget: GPUs") != MPI_SUCCESS) {
        free(all);
        return SZ_ERR_RUNTIME;
    }
    *sharers = 0;
    for (int r = 0; r < ctx->world_size; r++) {
        *any |= all[2 * r] >= 0;
        *sharers += mine[0] >= 0 && all[2 * r] == mine[0] && all[2 * r + 1] == mine[1];
    }
    free(all);
    return SZ_OK;
}

/* What StarPU may allocate on the memory nodes of this rank's CUDA workers, the smallest (its limit
 * there: STARPU_LIMIT_CUDA_MEM, else STARPU_LIMIT_CUDA_<d>_MEM, else 90% of the device); -1 without one. */
static int64_t gpu_starpu_limit(void)
{
#if SZ_WITH_CUDA
    int ids[STARPU_NMAXWORKERS], n = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
    int64_t lim = -1;
    for (int i = 0; i < n; i++) { /* every CUDA worker's memory node: the smallest bounds the plan */
        int64_t l = (int64_t)starpu_memory_get_total(starpu_worker_get_memory_node((unsigned)ids[i]));
        if (l > 0 && (lim < 0 || l < lim))
            lim = l;
    }
    return lim;
#endif
    return -1;
}

sz_status sz_context_gpu_budget(const sz_context *ctx, sz_gpu_budget_info *out)
{
    if (!ctx || !out)
        return SZ_ERR_INVALID;
    *out = ctx->gpu_budget;
    return out->device >= 0 ? SZ_OK : SZ_ERR_UNSUPPORTED;
}

int sz_context_gpu_budgets(const sz_context *ctx, sz_gpu_budget_info *out, int max)
{
    if (!ctx)
        return 0;
    int n = ctx->ngpu_budgets > 0 ? ctx->ngpu_budgets : ctx->gpu_budget.device >= 0;
    for (int i = 0; out && i < n && i < max; i++)
        out[i] = ctx->ngpu_budgets > 0 ? ctx->gpu_budgets[i] : ctx->gpu_budget;
    return n;
}

/* Collective: with CUDA workers on any rank, each GPU rank's default budget: its decision at start
 * (sched/runtime.c) when its CUDA worker drives the device decided for; else (StarPU chose the
 * device: SZ_NCUDA_DEFAULT=0) decided now, once, the same way: the device's free memory, at most
 * StarPU's 90% of it, split among the ranks of the node driving it (graph/gpu_budget.c). At most
 * what StarPU may allocate there (a plan above StarPU's own limit would have StarPU wait at it
 * mid-step). -1 on ranks without one; SZ_OK or an MPI failure. */
static sz_status gpu_share(sz_context *ctx, int64_t *share)
{
    int any = 0, sharing = 0;
    *share = -1;
    sz_status st = sz_context_gpu_sharers(ctx, &any, &sharing);
    if (st != SZ_OK || !any)
        return st; /* no rank has a GPU: nothing changes */
    int dev = gpu_device();
    if (dev < 0)
        return SZ_OK;
    if (ctx->gpu_budget.device < 0) { /* not decided at start (the decision at start keeps the
                                         * device with the smallest share: not always the first) */
        sz_gpu_budget_info b = {.device = dev, .sharers = sharing, .free_bytes = -1};
        b.free_bytes = sz_memory_gpu_free_bytes();
#if SZ_WITH_CUDA
        int64_t f, t;
        if (sz_cuda_mem_info(dev, &f, &t) == 0)
            b.total_bytes = t;
#endif
        const char *env = getenv("STARPU_LIMIT_CUDA_MEM");
        b.process_limit_bytes = env && *env ? (int64_t)atoll(env) << 20 : 0;
        sz_gpu_budget_split(&b);
        ctx->gpu_budget = b;
    }
    *share = ctx->gpu_budget.share_bytes;
    int64_t lim = gpu_starpu_limit();
    if (*share >= 0 && lim > 0 && lim < *share)
        *share = lim;
    return SZ_OK;
}

sz_status sz_context_check_gpu_budget(sz_context *ctx, int64_t budget)
{
    char msg[1024] = "";
    int dev = gpu_device();
    /* each device of this rank against it (the budget applies to each GPU) */
    int over = dev >= 0 && (ctx->ngpu_budgets > 0
                                ? sz_gpu_budgets_check_given(ctx->gpu_budgets, ctx->ngpu_budgets, budget, ctx->rank,
                                                             msg, sizeof msg)
                                : ctx->gpu_budget.device == dev &&
                                      sz_gpu_budget_check_given(&ctx->gpu_budget, budget, ctx->rank, msg, sizeof msg));
    int first = over ? ctx->rank : INT_MAX;
    if (ctx->world_size > 1 && sz_allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, ctx->host_comm,
                                            "memory budget against the GPUs") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    if (first == INT_MAX)
        return SZ_OK;
    if (over)
        sz_context_log(ctx, SZ_LOG_ERROR, "%s", msg);
    else
        sz_context_log(ctx, SZ_LOG_ERROR, "memory budget: --mem-budget does not fit rank %d's GPU (its message gives "
                       "the figures and what to do): rank %d stops with it", first, ctx->rank);
    return SZ_ERR_BUDGET;
}

sz_status sz_context_memory_budget(sz_context *ctx, int64_t *bytes)
{
    if (!ctx || !bytes)
        return SZ_ERR_INVALID;
    int64_t gpu;
    sz_status gst = gpu_share(ctx, &gpu);
    if (gst != SZ_OK)
        return gst;
    int64_t avail = sz_memory_available_bytes(), rss = sz_memory_rss_bytes();
    int64_t share = avail < 0 ? -1 : avail / (ctx->topology.local_size > 0 ? ctx->topology.local_size : 1) +
                                     (rss > 0 ? rss : 0) - SZ_RUNTIME_ALLOWANCE_BYTES;
    if (avail >= 0 && share < 1)
        share = 1; /* nothing left: every plan is refused */
    if (share < 0)
        share = INT64_MAX; /* unknown (no /proc): no limit from here, marked below */
    if (gpu >= 0)
        share = gpu > 0 ? gpu : 1; /* a GPU rank: its device's memory is what the budget bounds */
    if (ctx->world_size > 1 && sz_allreduce(MPI_IN_PLACE, &share, 1, MPI_INT64_T, MPI_MIN, ctx->host_comm,
                                            "memory budget minimum") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    *bytes = share == INT64_MAX ? 0 : share;
    return SZ_OK;
}
