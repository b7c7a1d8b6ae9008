/* tests/test_pool.c — the device pool's offset arithmetic (graph/pool.c): first fit, coalescing
 * on free, the arena growing down from the top, the arena reset, and the fragmentation figures
 * (free bytes and largest free block inside the footprint, growth caused by fragmentation).
 * Pure C, no runtime. */
#include "sz_test.h"
#include "sz_pool.h"

static void test_first_fit_and_free(void)
{
    sz_pool *p = sz_pool_create(1024, 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 1), 0);     /* rounded up to the alignment */
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 1), 64);
    sz_pool_destroy(p);
    p = sz_pool_create(1000, 1);
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 100), 0);
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 100), 100);
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 100), 200);
    CU_ASSERT_EQUAL(sz_pool_free(p, 100), 0);
    CU_ASSERT_EQUAL(sz_pool_free(p, 100), -1);   /* nothing there any more */
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 50), 100);  /* the first gap that fits */
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 60), 300);  /* the 50 left at 150 are too small */
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 2000), -1);
    sz_pool_stats st;
    sz_pool_get_stats(p, &st);
    CU_ASSERT_EQUAL(st.used, 310);
    CU_ASSERT_EQUAL(st.failures, 1);
    CU_ASSERT_EQUAL(st.frag_growth, 0);          /* 50 free in the hole < 60 asked: no fragmentation cost */
    sz_pool_destroy(p);
    CU_ASSERT_PTR_NULL(sz_pool_create(1000, 10)); /* alignment must be a power of two */
}

static void test_arena(void)
{
    sz_pool *p = sz_pool_create(1000, 1);
    int64_t mark = sz_pool_arena_mark(p);
    CU_ASSERT_EQUAL(sz_pool_alloc_arena(p, 100), 900);
    CU_ASSERT_EQUAL(sz_pool_alloc_arena(p, 200), 700); /* contiguous, just below */
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 700), 0);
    CU_ASSERT_EQUAL(sz_pool_alloc(p, 10), -1);         /* full */
    CU_ASSERT_EQUAL(sz_pool_alloc_arena(p, 10), -1);   /* the arena cannot run into the bottom */
    sz_pool_stats st;
    sz_pool_get_stats(p, &st);
    CU_ASSERT_EQUAL(st.footprint, 1000);
    CU_ASSERT_EQUAL(st.arena_at_peak, 300);
    sz_pool_arena_reset(p, mark);
    sz_pool_get_stats(p, &st);
    CU_ASSERT_EQUAL(st.used, 700);
    CU_ASSERT_EQUAL(sz_pool_alloc_arena(p, 300), 700);  /* the space is back */
    sz_pool_destroy(p);
}

/* Long-lived blocks placed among temporaries leave holes; the same blocks in the arena do not. */
static void test_fragmentation(void)
{
    for (int arena = 0; arena <= 1; arena++) {
        sz_pool *p = sz_pool_create(10000, 1);
        int64_t t[4], keep[4];
        for (int i = 0; i < 4; i++) { /* temporary, long-lived, temporary, long-lived, ... */
            t[i] = sz_pool_alloc(p, 100);
            keep[i] = arena ? sz_pool_alloc_arena(p, 10) : sz_pool_alloc(p, 10);
            CU_ASSERT(t[i] >= 0 && keep[i] >= 0);
        }
        for (int i = 0; i < 4; i++)
            sz_pool_free(p, t[i]);
        CU_ASSERT(sz_pool_alloc(p, 300) >= 0); /* one big temporary after the small ones went */
        sz_pool_stats st;
        sz_pool_get_stats(p, &st);
        CU_ASSERT_EQUAL(st.peak_used, 440);
        if (arena) {
            CU_ASSERT_EQUAL(st.frag_growth, 0);    /* the 400 freed bytes were one block */
            CU_ASSERT_EQUAL(st.footprint, 440);
        } else {
            CU_ASSERT_EQUAL(st.frag_growth, 300);  /* 400 free in four holes of 100: grew anyway */
            CU_ASSERT_EQUAL(st.footprint, 740);
            CU_ASSERT_EQUAL(st.worst_free, 400);
            CU_ASSERT_EQUAL(st.worst_largest_free, 100);
        }
        sz_pool_destroy(p);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("pool", {"first fit and free", test_first_fit_and_free}, {"arena", test_arena},
             {"fragmentation with and without the arena", test_fragmentation});
    return sz_test_run();
}
