/* mse.c — mean-squared-error loss per row: losses[r] = Σ_c (pred[r,c] - target[r,c])² / C, each
 * row summed in double in column order; the backward WRITES dpred = 2 (pred - target) / C · scale
 * (scale: d(the mean loss)/d(one row's loss)). Rows are independent: the same bits whatever the
 * thread count. */
#include "sz_kernels_impl.h"

void sz_k_mse_fwd(float *losses, const float *pred, const float *target, int N, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *p = pred + (size_t)n * C, *t = target + (size_t)n * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) {
            double e = (double)p[c] - (double)t[c];
            s += e * e;
        }
        losses[n] = (float)(s / C);
    }
}

void sz_k_mse_bwd(float *dpred, const float *pred, const float *target, float scale, int N, int C)
{
    float k = 2.0f * scale / (float)C;
    size_t n = (size_t)N * C;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) dpred[i] = k * (pred[i] - target[i]);
}
