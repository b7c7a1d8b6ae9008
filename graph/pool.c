/* graph/pool.c — the offset arithmetic of a device memory pool (pure C, no memory of its own): a
 * range [0, capacity) where temporaries are placed first-fit from the bottom and an arena (M_D)
 * grows down from the top, never freed piece by piece. Tracks the fragmentation of the free space
 * inside the footprint (the bottom's high-water mark plus the arena: the memory a device of that
 * size would need) at the pool's peak: its free bytes and its largest free block. Not thread-safe:
 * callers lock. */
#include <stdlib.h>
#include <string.h>
#include "sz_pool.h"

struct sz_pool {
    int64_t capacity, align, top; /* the arena is [top, capacity) */
    int64_t n, cap;               /* live bottom blocks, sorted by offset */
    int64_t *off, *len;
    int64_t used;                 /* bottom blocks + arena */
    int64_t hw;                   /* the bottom's high-water mark */
    sz_pool_stats st;
};

sz_pool *sz_pool_create(int64_t capacity, int64_t align)
{
    if (capacity <= 0 || align <= 0 || (align & (align - 1)))
        return NULL;
    sz_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->capacity = p->top = capacity / align * align;
    p->align = align;
    p->st.capacity = p->capacity;
    return p;
}

void sz_pool_destroy(sz_pool *p)
{
    if (!p)
        return;
    free(p->off);
    free(p->len);
    free(p);
}

static int64_t round_up(const sz_pool *p, int64_t bytes) { return (bytes + p->align - 1) / p->align * p->align; }

/* The end of the highest temporary block (0 when there is none). */
static int64_t bottom_end(const sz_pool *p) { return p->n ? p->off[p->n - 1] + p->len[p->n - 1] : 0; }

/* The largest free gap below `limit`. */
static int64_t largest_gap(const sz_pool *p, int64_t limit)
{
    int64_t best = 0, at = 0;
    for (int64_t i = 0; i <= p->n; i++) {
        int64_t end = i < p->n ? p->off[i] : limit;
        if (end - at > best)
            best = end - at;
        if (i < p->n)
            at = p->off[i] + p->len[i];
    }
    return best;
}

/* After every change: the peak and the shape of the free space at the peak. */
static void note(sz_pool *p)
{
    if (bottom_end(p) > p->hw)
        p->hw = bottom_end(p);
    int64_t arena = p->capacity - p->top, largest = largest_gap(p, p->hw), free_in = p->hw + arena - p->used;
    if (p->hw + arena > p->st.footprint)
        p->st.footprint = p->hw + arena;
    if (free_in - largest > p->st.worst_unusable) { /* free bytes no single request could use whole */
        p->st.worst_unusable = free_in - largest;
        p->st.worst_free = free_in;
        p->st.worst_largest_free = largest;
    }
    if (p->used >= p->st.peak_used) {
        p->st.peak_used = p->used;
        p->st.arena_at_peak = arena;
        p->st.free_at_peak = free_in;
        p->st.largest_free_at_peak = largest;
    }
}

int64_t sz_pool_alloc(sz_pool *p, int64_t bytes)
{
    if (!p || bytes <= 0)
        return -1;
    int64_t need = round_up(p, bytes), at = 0, i = 0;
    for (; i <= p->n; i++) { /* first fit */
        int64_t end = i < p->n ? p->off[i] : p->top;
        if (end - at >= need)
            break;
        if (i < p->n)
            at = p->off[i] + p->len[i];
    }
    if (i > p->n) {
        p->st.failures++;
        return -1;
    }
    int64_t free_below = p->hw - (p->used - (p->capacity - p->top));
    if (at + need > p->hw && free_below >= need) /* there was room, but not in one piece */
        p->st.frag_growth += at + need - p->hw;
    if (p->n == p->cap) {
        int64_t c = p->cap ? 2 * p->cap : 64;
        int64_t *o = realloc(p->off, (size_t)c * sizeof *o);
        if (o)
            p->off = o;
        int64_t *l = o ? realloc(p->len, (size_t)c * sizeof *l) : NULL;
        if (!o || !l) {
            p->st.failures++;
            return -1;
        }
        p->len = l;
        p->cap = c;
    }
    memmove(p->off + i + 1, p->off + i, (size_t)(p->n - i) * sizeof *p->off);
    memmove(p->len + i + 1, p->len + i, (size_t)(p->n - i) * sizeof *p->len);
    p->off[i] = at;
    p->len[i] = need;
    p->n++;
    p->used += need;
    note(p);
    return at;
}

int64_t sz_pool_alloc_arena(sz_pool *p, int64_t bytes)
{
    if (!p || bytes <= 0)
        return -1;
    int64_t need = round_up(p, bytes);
    if (p->top - bottom_end(p) < need) {
        p->st.failures++;
        return -1;
    }
    p->top -= need;
    p->used += need;
    note(p);
    return p->top;
}

int64_t sz_pool_arena_mark(const sz_pool *p) { return p ? p->top : 0; }

void sz_pool_arena_reset(sz_pool *p, int64_t mark)
{
    if (!p || mark <= p->top || mark > p->capacity)
        return;
    p->used -= mark - p->top;
    p->top = mark;
    note(p);
}

int sz_pool_free(sz_pool *p, int64_t off)
{
    if (!p)
        return -1;
    int64_t lo = 0, hi = p->n - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        if (p->off[mid] == off) {
            p->used -= p->len[mid];
            memmove(p->off + mid, p->off + mid + 1, (size_t)(p->n - mid - 1) * sizeof *p->off);
            memmove(p->len + mid, p->len + mid + 1, (size_t)(p->n - mid - 1) * sizeof *p->len);
            p->n--;
            note(p);
            return 0;
        }
        if (p->off[mid] < off)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

void sz_pool_get_stats(const sz_pool *p, sz_pool_stats *out)
{
    if (!p || !out)
        return;
    *out = p->st;
    out->used = p->used;
}
