/* tests/test_cuda.c — the CUDA path: the `scale` codelet forced onto a CUDA worker gives the same
 * values as on the CPU; a GPU rank's default budget is its GPU's free memory (cudaMemGetInfo), at
 * most StarPU's limit on that node.
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
    /* with no --mem-budget a GPU rank's budget is its GPU's free memory at start (one rank here),
     * at most StarPU's limit on it (90% of the device unless STARPU_LIMIT_CUDA_MEM says otherwise) */
    int64_t gfree = sz_memory_gpu_free_bytes(), budget = -1, expect = gfree;
    sz_gpu_info gi;
    int mem_bad = gfree <= 0 || sz_context_gpu_info(ctx, &gi) != SZ_OK;
    if (!mem_bad && gi.starpu_limit_bytes > 0 && gi.starpu_limit_bytes < expect)
        expect = gi.starpu_limit_bytes;
    mem_bad = mem_bad || sz_context_memory_budget(ctx, &budget) != SZ_OK || budget <= 0 ||
              budget > expect + ((int64_t)64 << 20) || budget < expect - ((int64_t)256 << 20);
    printf("gpu free memory %lld bytes, StarPU's limit %lld, machine budget %lld bytes: %s\n", (long long)gfree,
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
