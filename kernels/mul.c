/* mul.c — the elementwise product out = a · b and its backward (da += dout · b, db += dout · a;
 * either may be NULL). Elementwise, so the same bits whatever the thread count. */
#include "sz_kernels_impl.h"

void sz_k_mul_fwd(float *out, const float *a, const float *b, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void sz_k_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n)
{
    if (da) {
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
        for (size_t i = 0; i < n; i++) da[i] += dout[i] * b[i];
    }
    if (db) {
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
        for (size_t i = 0; i < n; i++) db[i] += dout[i] * a[i];
    }
}
