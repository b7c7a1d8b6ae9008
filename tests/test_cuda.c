/* tests/test_cuda.c — the CUDA path: the `scale` codelet forced onto a CUDA worker gives the same
 * values as on the CPU; a GPU rank's default budget is its GPU's free memory at start (cudaMemGetInfo), at
 * most StarPU's 90% of the device, split among the ranks sharing it (one here), and StarPU's limit there
 * is set from it.
 * Exits 77 (skipped) where the build has no CUDA or no GPU is present. */
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>
#include "starzero.h"
#include "sz_tasks.h"
#include "starzero_starpu.h"

int main(int argc, char **argv)
{
#if !defined(SZ_HAVE_CUDA) || !defined(STARPU_USE_CUDA)
    (void)argc;
    (void)argv;
    printf("skipped: built without CUDA\n");
    return 77;
#else
    sz_context *ctx = NULL;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK)
        return 1;
    if (starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) < 1) {
        printf("skipped: no CUDA device\n");
        sz_context_free(ctx);
        return 77;
    }
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 1000);
    sz_tensor *t = sz_tensor_register(x, N, SZ_DTYPE_F32, "x"); /* owns x from here on */
    int bad = !t || sz_submit_scale(t, 0.5f, "scale:cuda", STARPU_CUDA) != SZ_OK;
    starpu_task_wait_for_all();
    if (t)
        starpu_data_acquire(sz_tensor_handle(t), STARPU_R);
    for (int i = 0; i < N; i++)
        bad += x[i] != (float)(i % 1000) * 0.5f;
    printf("cuda scale: %s\n", bad ? "FAILED" : "ok");
    /* with no --mem-budget a GPU rank's budget is its GPU's free memory at start (one rank here, so
     * split 1 way), at most StarPU's 90% of the device; STARPU_LIMIT_CUDA_MEM (unset here) is then
     * set from it, in whole MiB, and the budget is that limit (graph/gpu_budget.c, sched/runtime.c) */
    int64_t gfree = sz_memory_gpu_free_bytes(), budget = -1;
    sz_gpu_info gi;
    sz_gpu_budget_info gb;
    int mem_bad = gfree <= 0 || sz_context_gpu_info(ctx, &gi) != SZ_OK || sz_context_gpu_budget(ctx, &gb) != SZ_OK;
    int64_t expect = mem_bad ? -1 : gb.share_bytes;
    if (!mem_bad && gi.starpu_limit_bytes > 0 && gi.starpu_limit_bytes < expect)
        expect = gi.starpu_limit_bytes;
    mem_bad = mem_bad || gb.sharers != 1 || gb.free_bytes < gfree || gb.free_bytes > gfree + ((int64_t)1 << 30) ||
              (gb.limit_from_share && gi.starpu_limit_bytes != gb.share_bytes >> 20 << 20) ||
              sz_context_memory_budget(ctx, &budget) != SZ_OK || budget != expect;
    char text[512];
    printf("gpu free memory %lld bytes now, %s; StarPU's limit %lld, machine budget %lld bytes: %s\n",
           (long long)gfree, sz_gpu_budget_describe(&gb, 0, text, sizeof text),
           mem_bad ? -1LL : (long long)gi.starpu_limit_bytes, (long long)budget, mem_bad ? "FAILED" : "ok");
    bad += mem_bad;
    if (t) {
        starpu_data_release(sz_tensor_handle(t));
        sz_tensor_unregister(t);
    } else {
        free(x);
    }
    sz_context_free(ctx);
    return bad ? 1 : 0;
#endif
}
