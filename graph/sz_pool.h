/* graph/sz_pool.h — offsets in a device memory pool: temporaries first-fit from the bottom, the
 * M_D arena from the top; fragmentation of the free space (see pool.c). */
#ifndef SZ_POOL_H
#define SZ_POOL_H
#include <stdint.h>
#include "starzero.h" /* sz_pool_stats */

typedef struct sz_pool sz_pool;

/* A pool of `capacity` bytes (rounded down to `align`, a power of two); NULL on bad input. */
sz_pool *sz_pool_create(int64_t capacity, int64_t align);
void sz_pool_destroy(sz_pool *p);
/* A temporary block: the lowest free gap that fits. Offset, or -1 (counted as a failure). */
int64_t sz_pool_alloc(sz_pool *p, int64_t bytes);
/* A long-lived block, just below the arena's previous one (the arena is contiguous). */
int64_t sz_pool_alloc_arena(sz_pool *p, int64_t bytes);
/* The arena's current bottom, and giving back everything allocated in it since that mark. */
int64_t sz_pool_arena_mark(const sz_pool *p);
void sz_pool_arena_reset(sz_pool *p, int64_t mark);
/* Frees the temporary block at `off`; -1 if there is none there. */
int sz_pool_free(sz_pool *p, int64_t off);
void sz_pool_get_stats(const sz_pool *p, sz_pool_stats *out);
#endif
