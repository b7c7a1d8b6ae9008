/* residual.c — residual connection: out = a + b; backward da += dout, db += dout.
 * Elementwise over n floats (any shape); out may alias a or b. */
#include "sz_kernels_impl.h"

void sz_k_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void sz_k_residual_bwd(float *da, float *db, const float *dout, size_t n)
{
    sz_k_residual_bwd_set(da, db, dout, n, 0);
}

/* set: da and / or db copied from dout instead of added to */
void sz_k_residual_bwd_set(float *da, float *db, const float *dout, size_t n, int set)
{
    int sa = set & SZ_K_SET_A, sb = set & SZ_K_SET_B;
    if (sa && sb) {
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            da[i] = dout[i];
            db[i] = dout[i];
        }
    } else if (sa || sb) { /* one set (s), the other added to (g) */
        float *s = sa ? da : db, *g = sa ? db : da;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            s[i] = dout[i];
            g[i] += dout[i];
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            da[i] += dout[i];
            db[i] += dout[i];
        }
    }
}
