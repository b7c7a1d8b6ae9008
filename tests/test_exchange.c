/* tests/test_exchange.c — the shared-memory collectives (tasks/exchange.c), called directly
 * under mpiexec (2 and 3 ranks, one node):
 *  - the ranks' device pools are mapped in every rank (sz_devpool_shared);
 *  - all-gather from a separate shard and in place, and reduce-scatter with and without
 *    accumulation, on pool buffers: the exact values (the same bits as MPI's path are checked
 *    end to end in sched_cli.sh);
 *  - a buffer outside its pool on one rank only: every rank declines, so all fall back to MPI
 *    together (a split answer would hang the next collective).
 * Every rank checks; the verdict is all-reduced so the exit code is the same everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "sz_comm.h"
#include "sz_runtime.h"

enum { S = 100003 }; /* elements per rank: not a multiple of the 1 MiB copy chunk */

static int bad;
#define CHECK(cond, what)                                                                 \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            bad++;                                                                        \
            fprintf(stderr, "rank %d: FAIL %s (line %d)\n", me, what, __LINE__);          \
        }                                                                                 \
    } while (0)

/* exact in float (and so are the sums), so no call site can round them differently */
static float value(int rank, int64_t i)
{
    return (float)((rank + 1) * 4096 + i % 1009) * 0.125f;
}

int main(int argc, char **argv)
{
    sz_context *ctx = NULL;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK) {
        fprintf(stderr, "test_exchange: runtime start failed\n");
        return 1;
    }
    int me = sz_context_rank(ctx), n = sz_context_world_size(ctx);
    struct sz_comm a;
    memset(&a, 0, sizeof a);
    a.comm = ctx->task_comm;
    a.nd = n;
    a.rank = me;
    CHECK(n == 1 || sz_devpool_shared(), "the device pools are not shared on one node");

    size_t full_bytes = (size_t)n * S * sizeof(float);
    float *full = sz_devpool_alloc(full_bytes, 0), *shard = sz_devpool_alloc(S * sizeof(float), 0);
    float *outside = malloc(S * sizeof(float));
    CHECK(full && shard && outside, "allocation");
    if (full && shard && outside && n > 1) {
        /* all-gather from a shard */
        for (int64_t i = 0; i < S; i++)
            shard[i] = value(me, i);
        memset(full, 0, full_bytes);
        CHECK(sz_shm_all_gather(&a, sizeof(float), full, shard, S) == 1, "all-gather declined");
        int wrong = 0;
        for (int r = 0; r < n; r++)
            for (int64_t i = 0; i < S; i++)
                wrong += full[(size_t)r * S + i] != value(r, i);
        CHECK(!wrong, "all-gather values");

        /* in place: our block of full already holds our shard */
        memset(full, 0, full_bytes);
        for (int64_t i = 0; i < S; i++)
            full[(size_t)me * S + i] = value(me, i) + 1.0f;
        CHECK(sz_shm_all_gather(&a, sizeof(float), full, NULL, S) == 1, "in-place all-gather declined");
        wrong = 0;
        for (int r = 0; r < n; r++)
            for (int64_t i = 0; i < S; i++)
                wrong += full[(size_t)r * S + i] != value(r, i) + 1.0f;
        CHECK(!wrong, "in-place all-gather values");

        /* reduce-scatter: rank r's full holds value(r, p*S + i) in block p; we sum block `me` */
        for (int p = 0; p < n; p++)
            for (int64_t i = 0; i < S; i++)
                full[(size_t)p * S + i] = value(me, (int64_t)p * S + i);
        for (int acc = 0; acc < 2; acc++) {
            for (int64_t i = 0; i < S; i++)
                shard[i] = 0.5f;
            CHECK(sz_shm_reduce_scatter(&a, 0, full, shard, S, acc) == 1, "reduce-scatter declined");
            wrong = 0;
            for (int64_t i = 0; i < S; i++) {
                float s = acc ? 0.5f + value(0, (int64_t)me * S + i) : value(0, (int64_t)me * S + i);
                for (int r = 1; r < n; r++)
                    s += value(r, (int64_t)me * S + i);
                wrong += shard[i] != s;
            }
            CHECK(!wrong, acc ? "accumulating reduce-scatter sums" : "reduce-scatter sums");
        }

        /* rank 0's shard outside its pool: every rank declines, and nothing is written */
        const float *src = me == 0 ? outside : shard;
        memset(full, 0, full_bytes);
        CHECK(sz_shm_all_gather(&a, sizeof(float), full, src, S) == 0, "a buffer outside rank 0's pool was accepted");
        int touched = 0;
        for (size_t i = 0; i < (size_t)n * S; i++)
            touched += full[i] != 0.0f;
        CHECK(!touched, "a declined all-gather wrote");
    }
    if (full)
        sz_devpool_release(full);
    if (shard)
        sz_devpool_release(shard);
    free(outside);
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, ctx->host_comm);
    if (me == 0)
        printf("test_exchange: %d rank(s), %s\n", n, bad_all ? "FAILED" : "all checks passed");
    sz_context_free(ctx);
    return bad_all ? 1 : 0;
}
