/* graph/devcheck.c — the verdict of the run-time device-memory check (graph/sz_devcheck.h): the
 * measured figures of one GPU after a step against its budget, and the message that says what went
 * over, by how much, and what to do. Figures in MB (10^6 bytes), a measured one rounded up and the
 * budget down, as the plan's refusal prints them, so "over" never reads as equal. */
#include <math.h>
#include <stdio.h>
#include "sz_devcheck.h"

static double up(int64_t b) { return ceil((double)b / 1e5) / 10.0; }
static double down(int64_t b) { return floor((double)b / 1e5) / 10.0; }

int sz_device_budget_check(const sz_device_sample *s, char *msg, size_t len)
{
    if (msg && len)
        msg[0] = '\0';
    if (!s || s->budget <= 0)
        return 0;
    int sharers = s->sharers > 0 ? s->sharers : 1;
    if (s->host && s->starpu_peak >= 0 && s->starpu_peak > s->budget) {
        if (msg)
            snprintf(msg, len,
                     "device memory over the budget: rank %d, main RAM (StarPU memory node %d), step %d: StarPU's "
                     "allocations there (its temporaries and their cache) reached %.1f MB, over the %.1f MB "
                     "SZ_DEVWATCH_BUDGET gives the run-time check on a CPU-only rank (the plan predicted %.1f MB "
                     "for the whole rank). What to do: unset SZ_DEVWATCH_BUDGET or raise it to at least %.1f MB",
                     s->rank, s->node, s->step, up(s->starpu_peak), down(s->budget), up(s->predicted),
                     up(s->starpu_peak));
        return 1;
    }
    if (s->host)
        return 0;
    if (s->starpu_peak >= 0 && s->starpu_peak > s->budget) {
        if (msg)
            snprintf(msg, len,
                     "device memory over the budget: rank %d, CUDA device %d (StarPU memory node %d), step %d: "
                     "StarPU's allocations there reached %.1f MB, over the per-GPU budget of %.1f MB (the plan "
                     "predicted %.1f MB of the engine's tensors on the device and the engine counted %.1f MB at "
                     "its peak; the other %.1f MB are StarPU's own: freed device buffers it keeps cached, its "
                     "32 MiB chunks for requests up to 4 MiB, the GPU arena's alignment). StarPU may allocate up "
                     "to %.1f MB there (STARPU_LIMIT_CUDA_MEM, else 90%% of the device). What to do: give a "
                     "--mem-budget of at least %.1f MB, or a setting that needs less (a higher --zero-stage, "
                     "--offload-optimizer, activation checkpointing, a smaller --batch: sz-estimate --plan "
                     "shows each); or set STARPU_LIMIT_CUDA_MEM to the budget in MiB (%lld) so that StarPU "
                     "gives its cached buffers back before it goes over",
                     s->rank, s->device, s->node, s->step, up(s->starpu_peak), down(s->budget), up(s->predicted),
                     up(s->engine_peak),
                     up(s->starpu_peak - s->engine_peak > 0 ? s->starpu_peak - s->engine_peak : 0),
                     down(s->starpu_limit), up(s->starpu_peak), (long long)(s->budget >> 20));
        return 1;
    }
    if (s->cuda_start_used >= 0 && s->cuda_used >= 0) {
        int64_t grown = s->cuda_used - s->cuda_start_used;
        int64_t allowed = (int64_t)sharers * (s->budget + s->allowance);
        if (grown > allowed) {
            if (msg)
                snprintf(msg, len,
                         "device memory over the budget: rank %d, CUDA device %d, step %d: the device has %.1f MB "
                         "in use (cudaMemGetInfo, every process on it), %.1f MB more than when the budget was "
                         "taken; the %d rank(s) of this node driving it may add %d x (%.1f MB budget + %.1f MB for "
                         "the CUDA runtime: kernel modules, cuBLAS workspaces, NCCL buffers) = %.1f MB. This "
                         "rank's StarPU allocations there: %.1f MB (within its budget), so the rest is outside "
                         "the plan: another process on the GPU (nvidia-smi lists them) or the CUDA runtime. What "
                         "to do: free the GPU of other processes, run fewer ranks per GPU, or leave room with a "
                         "smaller --mem-budget",
                         s->rank, s->device, s->step, up(s->cuda_used), up(grown), sharers, sharers,
                         down(s->budget), down(s->allowance), down(allowed),
                         up(s->starpu_peak > 0 ? s->starpu_peak : 0));
            return 1;
        }
    }
    return 0;
}
