/* tests/test_cuda.c — the CUDA path: the `scale` codelet forced onto a CUDA worker gives the same
 * values as on the CPU. Exits 77 (skipped) where the build has no CUDA or no GPU is present. */
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>
#include "starzero.h"
#include "sz_codelets.h"

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
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)x, N, sizeof(float));
    struct sz_targs a = {.nt = 1, .map = {0}, .off = {0}, .numel = {N}, .f = {0.5f}};
    int ret = starpu_task_insert(&sz_cl_scale, STARPU_RW, h, STARPU_VALUE, &a, sizeof a,
                                 STARPU_EXECUTE_WHERE, STARPU_CUDA, STARPU_NAME, "scale:cuda", 0);
    starpu_task_wait_for_all();
    starpu_data_unregister(h);
    int bad = ret != 0;
    for (int i = 0; i < N; i++)
        bad += x[i] != (float)(i % 1000) * 0.5f;
    printf("cuda scale: %s\n", bad ? "FAILED" : "ok");
    free(x);
    sz_context_free(ctx);
    return bad ? 1 : 0;
#endif
}
