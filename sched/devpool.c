/* sched/devpool.c — the device pool of a CPU-only rank: one reserved region (the rank's share of
 * RAM, mapped without committing; pages commit when touched) that StarPU's allocations on main RAM
 * (through starpu_malloc_set_hooks: gathered units, gradients in flight, working copies, fetched
 * checkpoints) and the model's long-lived tensors share, placed by graph/pool.c. This makes the
 * device's fragmentation measurable, and lets M_D keep the long-lived tensors in one contiguous
 * arena. A request no free block can hold is served by posix_memalign outside the pool and
 * counted. Not used when CUDA workers exist (main RAM is then the host, and StarPU pins it). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <starpu.h>
#include "sz_pool.h"
#include "sz_runtime.h"

static struct {
    pthread_mutex_t lock;
    char *base;
    size_t bytes;
    sz_pool *pool;
} devpool = { .lock = PTHREAD_MUTEX_INITIALIZER };

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

sz_status sz_devpool_start(struct sz_context *ctx, size_t bytes)
{
    if (starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0 || bytes == 0)
        return SZ_OK;
    const char *env = getenv("SZ_DEVICE_POOL");
    if (env && !strcmp(env, "0"))
        return SZ_OK;
    void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    sz_pool *pool = base != MAP_FAILED ? sz_pool_create((int64_t)bytes, 64) : NULL;
    if (!pool) {
        if (base != MAP_FAILED)
            munmap(base, bytes);
        sz_context_log(ctx, SZ_LOG_WARN, "device pool: could not reserve %zu bytes; StarPU allocates as usual", bytes);
        return SZ_OK;
    }
    pthread_mutex_lock(&devpool.lock);
    devpool.base = base;
    devpool.bytes = bytes;
    devpool.pool = pool;
    pthread_mutex_unlock(&devpool.lock);
    starpu_malloc_set_hooks(hook_malloc, hook_free);
    return SZ_OK;
}

/* After starpu_shutdown: StarPU has freed everything it allocated through the hooks. */
void sz_devpool_stop(void)
{
    starpu_malloc_set_hooks(NULL, NULL);
    pthread_mutex_lock(&devpool.lock);
    if (devpool.pool) {
        sz_pool_destroy(devpool.pool);
        munmap(devpool.base, devpool.bytes);
    }
    devpool.pool = NULL;
    devpool.base = NULL;
    devpool.bytes = 0;
    pthread_mutex_unlock(&devpool.lock);
}
