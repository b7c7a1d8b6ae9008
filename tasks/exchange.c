/* tasks/exchange.c — collectives between ranks of one node through shared memory. Every rank's
 * device pool is mapped in every rank (sched/devpool.c), so a collective on pool buffers needs
 * only their offsets: one small MPI_Allgather (which is also where the ranks meet), the copies or
 * sums read straight from the peers' pools, then an MPI_Barrier, after which the peers may
 * overwrite or free what was read (both wait under the deadline, sched/deadline.c). Each byte
 * crosses memory once, at memcpy speed; through MPI on this node the same collectives ran at a
 * fraction of that (docs/BENCHMARKS.md, the transport on one node).
 * The sums are the MPI path's, in rank order: the same bits. Without shared pools (MPI's
 * collectives) these return 0 at once and exchange nothing. */
#include <stdlib.h>
#include <string.h>
#include "sz_comm.h"
#include "sz_deadline.h"
#include "sz_runtime.h"

/* Every rank's offset of its buffer in its pool; 0 when some rank's is not in it. Where the pools
 * are not shared (SZ_COLLECTIVES=mpi, ranks on several nodes, no device pool: the same on every
 * rank, agreed when the pools were mapped, sched/devpool.c) nothing is exchanged: the caller goes
 * through MPI at once. Where they are, the offsets cannot be known in advance (the temporaries are
 * placed by the allocator as the step runs), so they travel with every collective. */
static int offsets(const struct sz_comm *a, const void *p, size_t len, int64_t *all)
{
    if (!sz_devpool_shared())
        return 0;
    int64_t off = sz_shared_offset(p, len);
    int rc = sz_allgather(&off, 1, MPI_INT64_T, all, 1, MPI_INT64_T, a->comm, "all-gather of pool offsets");
    STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "collective: MPI_Allgather of offsets failed (%d)", rc);
    for (int p = 0; p < a->nd; p++)
        if (all[p] < 0)
            return 0;
    return 1;
}

static void done(const struct sz_comm *a)
{
    int rc = sz_barrier(a->comm, "barrier after reading the peers");
    STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "collective: MPI_Barrier failed (%d)", rc);
}

int sz_shm_all_gather(const struct sz_comm *a, size_t es, void *full, const void *shard, int64_t S)
{
    size_t block = (size_t)S * es;
    const char *mine = shard ? shard : (char *)full + (size_t)a->rank * block;
    int64_t *off = malloc(sizeof *off * (size_t)a->nd);
    STARPU_ASSERT_MSG(off, "all-gather: out of memory");
    int ok = offsets(a, mine, block, off);
    if (ok) {
        /* 1 MiB pieces over the worker's OpenMP threads; our own block from the shard */
        const int64_t chunk = 1 << 20, per = (int64_t)((block + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < per * a->nd; k++) {
            int p = (int)(k / per);
            size_t o = (size_t)(k % per) * chunk, len = block - o < (size_t)chunk ? block - o : (size_t)chunk;
            const char *src = p == a->rank ? mine : (const char *)sz_shared_peer(p, off[p]);
            char *dst = (char *)full + (size_t)p * block;
            if (dst != src) /* an in-place gather leaves our own block as it is */
                memcpy(dst + o, src + o, len);
        }
        done(a);
    }
    free(off);
    return ok;
}

int sz_shm_reduce_scatter_piece(const struct sz_comm *a, int kdt, const void *full, void *shard, int64_t S,
                                int64_t o, int64_t len, int acc)
{
    int64_t *off = malloc(sizeof *off * (size_t)a->nd);
    const void **src = malloc(sizeof *src * (size_t)a->nd);
    STARPU_ASSERT_MSG(off && src, "reduce-scatter: out of memory");
    size_t es = kdt ? 2 : 4;
    int ok = offsets(a, full, (size_t)a->nd * (size_t)S * es, off);
    if (ok) {
        for (int p = 0; p < a->nd; p++) /* rank p's gradients for our shard's piece [o, o + len) */
            src[p] = (const char *)sz_shared_peer(p, off[p]) + ((size_t)a->rank * (size_t)S + (size_t)o) * es;
        sz_reduce_pieces(a, kdt, shard, src, o, len, acc);
        done(a);
    }
    free(src);
    free(off);
    return ok;
}

int sz_shm_reduce_scatter(const struct sz_comm *a, int kdt, const void *full, void *shard, int64_t S, int acc)
{
    return sz_shm_reduce_scatter_piece(a, kdt, full, shard, S, 0, S, acc);
}
