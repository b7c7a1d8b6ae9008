/* tests/sz_test_ranks.h — what the test programs run under mpiexec (test_zero, test_llama,
 * test_mse_ranks) share: their context `ctx`, CHECK (a failed condition is counted and printed
 * with the rank, file and line, and the program goes on), and the verdict summed over the ranks,
 * so that every rank exits with the same code. */
#ifndef SZ_TEST_RANKS_H
#define SZ_TEST_RANKS_H
#include <stdio.h>
#include "starzero.h"

static sz_context *ctx;
static int failures;

#define CHECK(cond, ...)                                                                              \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            failures++;                                                                               \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", sz_context_rank(ctx), __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                                             \
            fprintf(stderr, "\n");                                                                    \
        }                                                                                             \
    } while (0)

/* The failures of all ranks together (a collective: every rank calls it). */
static inline int sz_test_all_failures(void)
{
    double f = failures;
    sz_context_sum(ctx, &f, 1);
    return (int)f;
}

/* The end of a test program: "NAME (N_d n[MODE]): passed" (or FAILED) on rank 0, the context freed;
 * the exit code, the same on every rank. */
static inline int sz_test_finish(const char *name, const char *mode)
{
    int all = sz_test_all_failures();
    if (sz_context_rank(ctx) == 0)
        printf("%s (N_d %d%s): %s\n", name, sz_context_world_size(ctx), mode, all ? "FAILED" : "passed");
    sz_context_free(ctx);
    return all ? 1 : 0;
}
#endif
