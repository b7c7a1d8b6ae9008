/* graph/gpu_budget.c — the per-GPU default budget: split the free memory of a GPU among the ranks
 * that share it, check an explicit budget against it, and say both (graph/sz_gpu_budget.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "sz_gpu_budget.h"

#define MIB ((int64_t)1 << 20)

/* GB to 0.01, rounded down (a budget or a free figure never reads as more than it is) or up (a need) */
static double gb_down(int64_t b) { return floor((double)b / 1e7) / 100.0; }
static double gb_up(int64_t b) { return ceil((double)b / 1e7) / 100.0; }

int64_t sz_gpu_starpu_default_limit(int64_t total_bytes)
{
    if (total_bytes <= 0)
        return 0;
    return (int64_t)((double)(total_bytes / MIB) * 0.9) * MIB;
}

static int64_t room(const sz_gpu_budget_info *b) /* what the device gives all its ranks together */
{
    int64_t r = b->free_bytes;
    if (b->device_cap_bytes > 0 && b->device_cap_bytes < r)
        r = b->device_cap_bytes;
    return r;
}

void sz_gpu_budget_split(sz_gpu_budget_info *b)
{
    if (!b)
        return;
    if (b->sharers < 1)
        b->sharers = 1;
    b->device_cap_bytes = sz_gpu_starpu_default_limit(b->total_bytes);
    if (b->free_bytes < 0) {
        b->share_bytes = -1;
        return;
    }
    b->share_bytes = room(b) / b->sharers;
    if (b->process_limit_bytes > 0 && b->process_limit_bytes < b->share_bytes)
        b->share_bytes = b->process_limit_bytes;
}

char *sz_gpu_budget_describe(const sz_gpu_budget_info *b, int64_t given, char *msg, size_t len)
{
    if (!msg || !len)
        return msg;
    msg[0] = '\0';
    if (!b || b->device < 0) {
        snprintf(msg, len, "budget per rank: no GPU on this rank");
        return msg;
    }
    int k = b->sharers > 0 ? b->sharers : 1;
    char why[256] = "";
    if (given <= 0 && b->share_bytes >= 0) {
        if (b->process_limit_bytes > 0 && b->share_bytes == b->process_limit_bytes &&
            b->process_limit_bytes < room(b) / k)
            snprintf(why, sizeof why, " (the STARPU_LIMIT_CUDA_MEM set: %.2f GB per process)", gb_down(b->process_limit_bytes));
        else if (b->device_cap_bytes > 0 && b->device_cap_bytes < b->free_bytes)
            snprintf(why, sizeof why, " (at most StarPU's 90%% of the device's %.2f GB, %.2f GB, split %d way%s)",
                     gb_down(b->total_bytes), gb_down(b->device_cap_bytes), k, k > 1 ? "s" : "");
    }
    snprintf(msg, len, "budget per rank: %.2f GB%s of %.2f GB free on GPU %d shared by %d rank%s%s",
             gb_down(given > 0 ? given : b->share_bytes), given > 0 ? " (--mem-budget)" : "", gb_down(b->free_bytes),
             b->device, k, k > 1 ? "s" : "", why);
    return msg;
}

int sz_gpu_budget_check_given(const sz_gpu_budget_info *b, int64_t budget, int rank, char *msg, size_t len)
{
    if (msg && len)
        msg[0] = '\0';
    if (!b || b->device < 0 || b->free_bytes < 0 || budget <= 0)
        return 0;
    int k = b->sharers > 0 ? b->sharers : 1;
    int64_t r = room(b), per = r / k;
    if (budget <= per)
        return 0;
    if (msg)
        snprintf(msg, len,
                 "memory budget: --mem-budget %.2f GB is each GPU rank's, and rank %d's CUDA device %d is driven by "
                 "%d rank%s of this job on this node: %d x %.2f GB = %.2f GB, more than the %.2f GB the device "
                 "gives them (%.2f GB free at start%s). What to do: a --mem-budget of at most %.2f GB (that / %d), "
                 "or leave it out (each rank then gets that share), or fewer ranks per GPU (one rank per GPU: as "
                 "many ranks per node as GPUs, scripts/gpu-rank.sh)",
                 gb_down(budget), rank, b->device, k, k > 1 ? "s" : "", k, gb_down(budget),
                 gb_up((int64_t)k * budget), gb_down(r), gb_down(b->free_bytes),
                 b->device_cap_bytes > 0 && b->device_cap_bytes < b->free_bytes ? ", at most StarPU's 90% of the device"
                                                                                 : "",
                 gb_down(per), k);
    return 1;
}

/* ---- several GPUs per rank: one budget per device (each CUDA memory node its own limit) ---- */

void sz_gpu_budget_count_sharers(const int64_t *all, int nranks, int per, const int64_t *mine, int n, int *sharers)
{
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int r = 0; all && mine[i] >= 0 && r < nranks; r++) {
            int has = 0;
            for (int j = 0; j < per; j++)
                has |= all[(size_t)r * per + j] == mine[i];
            k += has;
        }
        sharers[i] = k > 0 ? k : 1;
    }
}

int sz_gpu_budget_tightest(const sz_gpu_budget_info *b, int n)
{
    int best = -1;
    for (int i = 0; b && i < n; i++)
        if (b[i].device >= 0 && b[i].share_bytes >= 0 && (best < 0 || b[i].share_bytes < b[best].share_bytes))
            best = i;
    return best;
}

char *sz_gpu_budgets_describe(const sz_gpu_budget_info *b, int n, int64_t given, char *msg, size_t len)
{
    if (!msg || !len)
        return msg;
    if (!b || n <= 1)
        return sz_gpu_budget_describe(n == 1 ? b : NULL, given, msg, len);
    const char *pre = "budget per rank: ";
    size_t o = (size_t)snprintf(msg, len, "budget per rank, each of its %d GPUs its own: ", n);
    for (int i = 0; i < n && o < len; i++) {
        char one[512];
        sz_gpu_budget_describe(&b[i], given, one, sizeof one);
        const char *t = strncmp(one, pre, strlen(pre)) ? one : one + strlen(pre);
        o += (size_t)snprintf(msg + o, len - o, "%s%s", i ? "; " : "", t);
    }
    int t = sz_gpu_budget_tightest(b, n);
    if (given <= 0 && t >= 0 && o < len)
        snprintf(msg + o, len - o, " (the plan's device peak must fit each: GPU %d's %.2f GB is the smallest)",
                 b[t].device, gb_down(b[t].share_bytes));
    return msg;
}

int sz_gpu_budgets_check_given(const sz_gpu_budget_info *b, int n, int64_t budget, int rank, char *msg, size_t len)
{
    if (msg && len)
        msg[0] = '\0';
    for (int i = 0; b && i < n; i++)
        if (sz_gpu_budget_check_given(&b[i], budget, rank, msg, len))
            return 1;
    return 0;
}

int sz_gpu_budgets_check_peak(const sz_gpu_budget_info *b, int n, int64_t peak, char *msg, size_t len)
{
    int over = 0;
    size_t o = 0;
    if (msg && len)
        msg[0] = '\0';
    for (int i = 0; b && i < n; i++) {
        if (b[i].device < 0 || b[i].share_bytes < 0 || peak <= b[i].share_bytes)
            continue;
        if (msg && o < len)
            o += (size_t)snprintf(msg + o, len - o, "%sGPU %d (%.2f GB)", over ? ", " : "", b[i].device,
                                  gb_down(b[i].share_bytes));
        over++;
    }
    return over;
}
