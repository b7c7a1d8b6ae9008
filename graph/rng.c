/* graph/rng.c — deterministic random streams for parameter initialisation (see sz_rng.h). */
#include <math.h>
#include "sz_rng.h"

uint64_t sz_rng_next(sz_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sz_rng_seed(sz_rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
    r->s = seed;
    r->s = sz_rng_next(r) ^ (a * 0xd1b54a32d192ed03ULL);
    r->s = sz_rng_next(r) ^ (b * 0x8cb92ba72f3d8dd7ULL);
}

float sz_rng_uniform(sz_rng *r) { return (float)((sz_rng_next(r) >> 40) * (1.0 / 16777216.0)); }

void sz_rng_normal(sz_rng *r, float *out, int64_t n, float std)
{
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = ((sz_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
        double u2 = (sz_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
        double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
        out[i] = (float)(std * rad * cos(th));
        if (i + 1 < n)
            out[i + 1] = (float)(std * rad * sin(th));
    }
}
