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
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
