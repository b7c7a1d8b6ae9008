/* sched/devpool.c — the device pool of a CPU-only rank: one reserved region (the rank's share of
 * RAM, mapped without committing; pages commit when touched) that StarPU's allocations on main RAM
 * (through starpu_malloc_set_hooks: gathered units, gradients in flight, working copies, fetched
 * checkpoints) and the model's long-lived tensors share, placed by graph/pool.c. This makes the
 * device's fragmentation measurable, and lets M_D keep the long-lived tensors in one contiguous
 * arena. A request no free block can hold is served by posix_memalign outside the pool and
 * counted. Not used when CUDA workers exist (main RAM is then the host, and StarPU pins it).
 * When every rank is on this node, the region is shared memory (memfd) and every rank maps the
 * others' read-only: a collective on pool buffers then reads its peers' data in place
 * (tasks/exchange.c) instead of sending it through MPI. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <starpu.h>
#include "sz_pool.h"
#include "sz_runtime.h"
#include "sz_deadline.h"

static struct {
    pthread_mutex_t lock;
    char *base;
    size_t bytes;
    sz_pool *pool;
    int fd;             /* the memfd behind base until the peers have mapped it; -1 otherwise */
    int shmem;          /* base is a shared (memfd) mapping */
    int nranks;         /* > 0: peer[p] maps rank p's pool (peer[rank] == base) */
    char **peer;
    size_t *peer_bytes;
} devpool = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static int inside(const void *p)
{
    return devpool.base && (const char *)p >= devpool.base && (const char *)p < devpool.base + devpool.bytes;
}

void *sz_devpool_alloc(size_t bytes, int arena)
{
    void *p = NULL;
    pthread_mutex_lock(&devpool.lock);
    if (devpool.pool) {
        int64_t off = arena ? sz_pool_alloc_arena(devpool.pool, (int64_t)bytes)
                            : sz_pool_alloc(devpool.pool, (int64_t)bytes);
        p = off >= 0 ? devpool.base + off : NULL;
    }
    pthread_mutex_unlock(&devpool.lock);
    return p;
}

/* Zero a block without committing memory: whole pages are handed back to the kernel (they read
 * as zeros and commit again only when written), so a model's tensors cost nothing until its budget
 * check has passed and its first step touches them. The ragged ends, and memory outside the pool,
 * are cleared by memset. */
void sz_devpool_zero(void *p, size_t bytes)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, b = a + bytes;
    uintptr_t lo = (a + pg - 1) & ~(pg - 1), hi = b & ~(pg - 1);
    if (!inside(p) || hi <= lo || madvise((void *)lo, hi - lo, devpool.shmem ? MADV_REMOVE : MADV_DONTNEED) != 0) {
        memset(p, 0, bytes);
        return;
    }
    memset(p, 0, lo - a);
    memset((void *)hi, 0, b - hi);
}

int sz_devpool_release(void *p)
{
    if (!p || !inside(p))
        return 0;
    pthread_mutex_lock(&devpool.lock);
    sz_pool_free(devpool.pool, (int64_t)((char *)p - devpool.base)); /* arena blocks: no-op */
    pthread_mutex_unlock(&devpool.lock);
    return 1;
}

int64_t sz_devpool_arena_mark(void)
{
    pthread_mutex_lock(&devpool.lock);
    int64_t m = devpool.pool ? sz_pool_arena_mark(devpool.pool) : -1;
    pthread_mutex_unlock(&devpool.lock);
    return m;
}

void sz_devpool_arena_reset(int64_t mark)
{
    pthread_mutex_lock(&devpool.lock);
    if (devpool.pool && mark >= 0)
        sz_pool_arena_reset(devpool.pool, mark);
    pthread_mutex_unlock(&devpool.lock);
}

int sz_devpool_stats(sz_pool_stats *out)
{
    pthread_mutex_lock(&devpool.lock);
    int on = devpool.pool != NULL;
    if (on && out)
        sz_pool_get_stats(devpool.pool, out);
    pthread_mutex_unlock(&devpool.lock);
    return on;
}

static int hook_malloc(unsigned node, void **a, size_t dim, int flags)
{
    (void)flags;
    void *p = node == STARPU_MAIN_RAM && dim ? sz_devpool_alloc(dim, 0) : NULL;
    if (!p && posix_memalign(&p, 64, dim ? dim : 1) != 0)
        p = NULL;
    *a = p;
    return p ? 0 : -ENOMEM;
}

static int hook_free(unsigned node, void *a, size_t dim, int flags)
{
    (void)node, (void)dim, (void)flags;
    if (!sz_devpool_release(a))
        free(a);
    return 0;
}

/* The region: shared memory (a memfd) when it may be shared with the other ranks, else private. */
static void *reserve(size_t bytes, int shared)
{
    devpool.fd = shared ? memfd_create("starzero-pool", MFD_CLOEXEC) : -1;
    if (devpool.fd >= 0 && ftruncate(devpool.fd, (off_t)bytes) != 0) {
        close(devpool.fd);
        devpool.fd = -1;
    }
    devpool.shmem = devpool.fd >= 0;
    if (devpool.fd >= 0)
        return mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, devpool.fd, 0);
    return mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

static void unmap_peers(void)
{
    for (int p = 0; p < devpool.nranks; p++)
        if (devpool.peer[p] && devpool.peer[p] != devpool.base)
            munmap(devpool.peer[p], devpool.peer_bytes[p]);
    free(devpool.peer);
    free(devpool.peer_bytes);
    devpool.peer = NULL;
    devpool.peer_bytes = NULL;
    devpool.nranks = 0;
}

/* Collective over all ranks: map every other rank's pool read-only (through /proc/PID/fd), and
 * keep the maps only if every rank mapped every pool. */
static void share(struct sz_context *ctx, int want)
{
    int n = ctx->world_size;
    int64_t me[3] = {getpid(), want ? devpool.fd : -1, (int64_t)devpool.bytes}, *all = malloc(3 * sizeof *all * (size_t)n);
    devpool.peer = calloc((size_t)n, sizeof *devpool.peer);
    devpool.peer_bytes = calloc((size_t)n, sizeof *devpool.peer_bytes);
    STARPU_ASSERT_MSG(all && devpool.peer && devpool.peer_bytes, "device pool: out of memory");
    int ok = sz_allgather(me, 3, MPI_INT64_T, all, 3, MPI_INT64_T, ctx->comm, "device pool: pids") == MPI_SUCCESS;
    devpool.nranks = n;
    for (int p = 0; ok && p < n; p++) {
        if (all[3 * p + 1] < 0) {
            ok = 0;
        } else if (p == ctx->rank) {
            devpool.peer[p] = devpool.base;
        } else {
            char path[64];
            snprintf(path, sizeof path, "/proc/%lld/fd/%lld", (long long)all[3 * p], (long long)all[3 * p + 1]);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            void *m = fd >= 0 ? mmap(NULL, (size_t)all[3 * p + 2], PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0) : MAP_FAILED;
            if (fd >= 0)
                close(fd);
            if (m == MAP_FAILED) {
                sz_context_log(ctx, SZ_LOG_INFO, "device pool: cannot map rank %d's (%s: %s); collectives go through MPI",
                               p, path, strerror(errno));
                ok = 0;
            } else {
                devpool.peer[p] = m;
                devpool.peer_bytes[p] = (size_t)all[3 * p + 2];
            }
        }
    }
    free(all);
    sz_allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, ctx->comm, "device pool: mapped");
    if (!ok)
        unmap_peers();
}

sz_status sz_devpool_start(struct sz_context *ctx, size_t bytes)
{
    int on = starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) == 0 && bytes > 0 && ctx->env.device_pool;
    /* all ranks on this node, and the user did not ask for MPI's collectives */
    int shared = ctx->world_size > 1 && ctx->topology.local_size == ctx->world_size && !ctx->env.collectives_mpi;
    void *base = on ? reserve(bytes, shared) : MAP_FAILED;
    sz_pool *pool = base != MAP_FAILED ? sz_pool_create((int64_t)bytes, 64) : NULL;
    if (on && !pool) {
        if (base != MAP_FAILED)
            munmap(base, bytes);
        sz_context_log(ctx, SZ_LOG_WARN, "device pool: could not reserve %zu bytes; StarPU allocates as usual", bytes);
    }
    if (pool) {
        pthread_mutex_lock(&devpool.lock);
        devpool.base = base;
        devpool.bytes = bytes;
        devpool.pool = pool;
        pthread_mutex_unlock(&devpool.lock);
        starpu_malloc_set_hooks(hook_malloc, hook_free);
    }
    if (ctx->world_size > 1) /* every rank takes part, whatever it has */
        share(ctx, shared && pool);
    if (devpool.fd >= 0) /* the mappings keep the memory */
        close(devpool.fd);
    devpool.fd = -1;
    return SZ_OK;
}

int sz_devpool_shared(void)
{
    return devpool.nranks > 0;
}

int64_t sz_shared_offset(const void *p, size_t len)
{
    if (!devpool.nranks || !inside(p) || (const char *)p + len > devpool.base + devpool.bytes)
        return -1;
    return (const char *)p - devpool.base;
}

const void *sz_shared_peer(int rank, int64_t off)
{
    return devpool.peer[rank] + off;
}

/* After starpu_shutdown: StarPU has freed everything it allocated through the hooks. */
void sz_devpool_stop(void)
{
    starpu_malloc_set_hooks(NULL, NULL);
    pthread_mutex_lock(&devpool.lock);
    unmap_peers();
    if (devpool.pool) {
        sz_pool_destroy(devpool.pool);
        munmap(devpool.base, devpool.bytes);
    }
    devpool.pool = NULL;
    devpool.base = NULL;
    devpool.bytes = 0;
    pthread_mutex_unlock(&devpool.lock);
}
