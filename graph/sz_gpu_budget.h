/* graph/sz_gpu_budget.h — the per-GPU default budget's arithmetic and wording (issue 15, item 5).
 * Pure C: the figures measured at start go in (the device's free and total memory, how many ranks
 * of this job on this node drive it, StarPU's limit for this process), the per-rank share and the
 * sentences a user reads come out, so they are unit-tested without a GPU (tests/test_gpu_budget.c).
 * sched/runtime.c measures and decides once per context (before StarPU starts, so StarPU's own limit
 * STARPU_LIMIT_CUDA_MEM can be set from the share); sched/memory.c and tasks/model.c use it. */
#ifndef SZ_GPU_BUDGET_H
#define SZ_GPU_BUDGET_H

#include <stddef.h>
#include <stdint.h>
#include "starzero.h" /* sz_gpu_budget_info */

/* StarPU 1.3's own limit on a CUDA memory node when STARPU_LIMIT_CUDA_MEM is not set: 90% of the
 * device (src/drivers/cuda/driver_cuda.c, FREE_MARGIN), computed as StarPU does, in whole MiB:
 * (total / MiB) x 0.9, truncated, x MiB. 0 for an unknown total. */
int64_t sz_gpu_starpu_default_limit(int64_t total_bytes);

/* Fills b->device_cap_bytes (StarPU's 90% of the device) and b->share_bytes from b->free_bytes,
 * b->total_bytes, b->sharers and b->process_limit_bytes:
 *   share = min(free, device cap) / k, and at most process_limit_bytes when that is > 0
 * (a STARPU_LIMIT_CUDA_MEM the user set: StarPU's limit per process). k < 1 counts as 1; an unknown
 * free (< 0) gives share -1 (no default from the GPU). */
void sz_gpu_budget_split(sz_gpu_budget_info *b);

/* "budget per rank: X of Y free on GPU d shared by k ranks" (and why it is less than Y / k, when
 * StarPU's limits made it so); with given > 0 the budget is that --mem-budget instead. Figures in GB
 * (10^9 bytes) rounded down. Returns msg. */
char *sz_gpu_budget_describe(const sz_gpu_budget_info *b, int64_t given, char *msg, size_t len);

/* An explicit --mem-budget against the GPU it runs on: 0 when k x budget fits in what the device had
 * free at start (at most StarPU's 90% of it), i.e. budget <= min(free, device cap) / k; 1 when it
 * does not, with msg (if not NULL) naming the rank, the device, k, the figures and what to do. 0 when
 * there is no GPU (device < 0) or the free memory is unknown. */
int sz_gpu_budget_check_given(const sz_gpu_budget_info *b, int64_t budget, int rank, char *msg, size_t len);

/* ---- several CUDA workers per rank on different GPUs: each device its own budget (its free memory
 * at start, StarPU's 90% of it, STARPU_LIMIT_CUDA_MEM or STARPU_LIMIT_CUDA_<d>_MEM, over the ranks
 * of the node driving that device), each CUDA memory node its own limit. The plan predicts one
 * device peak per rank, which any of its GPUs may have to hold (StarPU places a task on any of
 * them), so it is checked against each. ---- */
#define SZ_GPU_BUDGET_MAX_DEVICES 16
/* The node's ranks' device keys, `per` per rank (all[r * per + j], -1 unused), and this rank's n:
 * sharers[i] = how many ranks list mine[i] (>= 1). */
void sz_gpu_budget_count_sharers(const int64_t *all, int nranks, int per, const int64_t *mine, int n, int *sharers);
/* The index of the device with the smallest known share (-1: none). */
int sz_gpu_budget_tightest(const sz_gpu_budget_info *b, int n);
/* sz_gpu_budgets_describe: starzero.h. An explicit budget against each device (the first over
 * gives msg; 1 when one is). */
int sz_gpu_budgets_check_given(const sz_gpu_budget_info *b, int n, int64_t budget, int rank, char *msg, size_t len);
/* The plan's device peak against each device's share: how many it exceeds, msg listing them
 * ("GPU 0 (50.00 GB), GPU 2 (...)"). */
int sz_gpu_budgets_check_peak(const sz_gpu_budget_info *b, int n, int64_t peak, char *msg, size_t len);

#endif
