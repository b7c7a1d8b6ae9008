/* sched/baseline.c — the communication yardstick: plain MPI collectives moving the same bytes as a
 * ZeRO step (a reduce-scatter and an all-gather per unit), buffers allocated once and reused, so
 * the engine's task-based transport can be compared with what MPI itself achieves here; and a small
 * rank-ordered sum for apps that gather figures across ranks. */
#include <stdlib.h>
#include <string.h>
#include "sz_runtime.h"
#include "sz_deadline.h"

sz_status sz_context_mpi_baseline(sz_context *ctx, const int64_t *elems, int n, int reps, double *bytes_per_s)
{
    if (!ctx || !elems || n < 1 || reps < 1 || !bytes_per_s)
        return SZ_ERR_INVALID;
    int nd = ctx->world_size;
    *bytes_per_s = 0;
    if (nd < 2)
        return SZ_OK;
    int64_t maxe = 0;
    for (int i = 0; i < n; i++)
        maxe = elems[i] > maxe ? elems[i] : maxe;
    float *full = malloc((size_t)maxe * sizeof *full), *shard = malloc((size_t)(maxe / nd + 1) * sizeof *shard);
    if (!full || !shard) {
        free(full);
        free(shard);
        return SZ_ERR_NOMEM;
    }
    memset(full, 0, (size_t)maxe * sizeof *full); /* touched once, reused by every call */
    memset(shard, 0, (size_t)(maxe / nd + 1) * sizeof *shard);
    double bytes = 0, t0 = MPI_Wtime();
    sz_status st = SZ_OK;
    for (int r = 0; r < reps && st == SZ_OK; r++)
        for (int i = 0; i < n; i++) {
            int s = (int)(elems[i] / nd);
            if (MPI_Reduce_scatter_block(full, shard, s, MPI_FLOAT, MPI_SUM, ctx->host_comm) != MPI_SUCCESS ||
                MPI_Allgather(shard, s, MPI_FLOAT, full, s, MPI_FLOAT, ctx->host_comm) != MPI_SUCCESS) {
                st = SZ_ERR_RUNTIME;
                break;
            }
            bytes += 2.0 * (nd - 1) * s * 4;
        }
    double t = MPI_Wtime() - t0;
    *bytes_per_s = t > 0 ? bytes / t : 0;
    free(full);
    free(shard);
    return st;
}

sz_status sz_context_sum(sz_context *ctx, double *values, int n)
{
    if (!ctx || !values || n < 1)
        return SZ_ERR_INVALID;
    int nd = ctx->world_size;
    double *all = malloc((size_t)n * (size_t)nd * sizeof *all);
    if (!all)
        return SZ_ERR_NOMEM;
    sz_status st = sz_allgather(values, n, MPI_DOUBLE, all, n, MPI_DOUBLE, ctx->host_comm, "sum") == MPI_SUCCESS
                       ? SZ_OK : SZ_ERR_RUNTIME;
    for (int i = 0; i < n && st == SZ_OK; i++) {
        double s = 0;
        for (int r = 0; r < nd; r++)
            s += all[r * n + i];
        values[i] = s;
    }
    free(all);
    return st;
}
