/* tests/test_mpi_smoke.c — multi-rank smoke test (run with 2 and 4 ranks under mpiexec):
 * every rank owns one tagged StarPU-MPI vector; a task on rank r reads the vector of rank r+1
 * (StarPU-MPI moves it) and writes r's result; each rank checks the values it received, and
 * all ranks agree on the verdict through an all-reduce. Exit 0 only if every rank is right. */
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include "starzero.h"
#include "sz_runtime.h"

enum { N = 4096 };

static void copy_add_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    float *dst = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *src = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    for (unsigned i = 0; i < STARPU_VECTOR_GET_NX(buffers[0]); i++)
        dst[i] = src[i] + 1.0f;
}

static struct starpu_codelet copy_add = {
    .cpu_funcs = {copy_add_cpu}, .nbuffers = 2, .modes = {STARPU_W, STARPU_R}, .name = "copy_add"};

int main(int argc, char **argv)
{
    sz_context *ctx = NULL;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK) {
        fprintf(stderr, "mpi_smoke: runtime start failed\n");
        return 1;
    }
    int me = sz_context_rank(ctx), np = sz_context_world_size(ctx);
    float *mine = malloc(N * sizeof *mine), *result = malloc(N * sizeof *result);
    for (int i = 0; i < N; i++)
        mine[i] = (float)(me * 1000 + i % 997);

    starpu_data_handle_t *v = calloc((size_t)np, sizeof *v), *res = calloc((size_t)np, sizeof *res);
    for (int r = 0; r < np; r++) {
        /* Owners register their buffer; everyone else a placeholder StarPU allocates on demand. */
        starpu_vector_data_register(&v[r], r == me ? STARPU_MAIN_RAM : -1, r == me ? (uintptr_t)mine : 0, N,
                                    sizeof(float));
        starpu_vector_data_register(&res[r], r == me ? STARPU_MAIN_RAM : -1, r == me ? (uintptr_t)result : 0, N,
                                    sizeof(float));
        starpu_mpi_data_register_comm(v[r], (int64_t)1000 + r, r, ctx->comm);
        starpu_mpi_data_register_comm(res[r], (int64_t)(1LL << 40) + r, r, ctx->comm); /* 64-bit tags */
    }
    for (int r = 0; r < np; r++)
        starpu_mpi_task_insert(ctx->comm, &copy_add, STARPU_W, res[r], STARPU_R, v[(r + 1) % np],
                               STARPU_NAME, "smoke:copy_add", 0);
    starpu_task_wait_for_all();
    for (int r = 0; r < np; r++) {
        starpu_data_unregister(v[r]);
        starpu_data_unregister(res[r]);
    }
    int peer = (me + 1) % np, bad = 0;
    for (int i = 0; i < N; i++)
        bad += result[i] != (float)(peer * 1000 + i % 997) + 1.0f;
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, ctx->host_comm);
    printf("rank %d/%d: received rank %d's handle: %s\n", me, np, peer, bad ? "WRONG VALUES" : "ok");
    if (me == 0)
        printf("mpi_smoke: %d rank(s), %s\n", np, bad_all ? "FAILED" : "all values correct");
    free(v);
    free(res);
    free(mine);
    free(result);
    sz_context_free(ctx);
    return bad_all ? 1 : 0;
}
