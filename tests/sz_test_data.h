/* tests/sz_test_data.h — random test data the kernel suites share: a fixed xorshift stream (each
 * test program starts from the same seed, so its values never change) and copies in float and
 * double for the references. */
#ifndef SZ_TEST_DATA_H
#define SZ_TEST_DATA_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sz_t_rng = 88172645463325252ull;

static inline float frand(void) /* uniform in [-1, 1) */
{
    sz_t_rng ^= sz_t_rng << 13; sz_t_rng ^= sz_t_rng >> 7; sz_t_rng ^= sz_t_rng << 17;
    return (float)((sz_t_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static inline float *rnd(size_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
    return x;
}
static inline double *dup_d(const float *x, size_t n)
{
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static inline float *dup_f(const float *x, size_t n)
{
    float *d = malloc(n * sizeof *d);
    memcpy(d, x, n * sizeof *d);
    return d;
}
#endif
