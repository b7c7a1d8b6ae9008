/* graph/sz_rng.h — a small deterministic random stream (splitmix64 + Box-Muller) for parameter
 * initialisation: each tensor gets its own stream from (seed, unit, param), so values never
 * depend on layout, rank count or thread count. */
#ifndef SZ_RNG_H
#define SZ_RNG_H
#include <stdint.h>

typedef struct sz_rng { uint64_t s; } sz_rng;

void sz_rng_seed(sz_rng *r, uint64_t seed, uint64_t stream_a, uint64_t stream_b);
uint64_t sz_rng_next(sz_rng *r);
float sz_rng_uniform(sz_rng *r);                 /* [0, 1) */
void sz_rng_normal(sz_rng *r, float *out, int64_t n, float std);
#endif
