/* rmsnorm.c — RMSNorm over the last dim C of [N,C] rows (LLaMA's norm, no mean, no bias):
 * out = inp · rstd · w with rstd = 1/sqrt(mean(inp²) + eps); the forward saves rstd [N].
 * Rows are independent (one thread per row, each row summed in a fixed order); the backward's
 * dw sums over rows, so it is split by column blocks, each adding rows 0..N-1 in order: the same
 * bits whatever the thread count. */
#include <math.h>
#include "sz_kernels_impl.h"

void sz_k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++) ss += x[i] * x[i];
        float s = 1.0f / sqrtf(ss / C + eps);
        for (int i = 0; i < C; i++) o[i] = (x[i] * s) * weight[i];
        rstd[n] = s;
    }
}

/* out_i = x_i s w_i, s = (Σx²/C + eps)^(-1/2), ds/dx_j = -s³ x_j / C:
 * dx_j = s w_j d_j - (s³/C) x_j Σ_i d_i w_i x_i;  dw_i = Σ_n d_i x_i s. */
void sz_k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
    if (dinp) {
#pragma omp parallel for schedule(static) if (par)
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
            float *di = dinp + (size_t)n * C;
            float s = rstd[n], dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int i = 0; i < C; i++) dot += d[i] * weight[i] * x[i];
            float k = s * s * s * dot / C;
            for (int i = 0; i < C; i++) di[i] += s * weight[i] * d[i] - k * x[i];
        }
    }
    if (!dweight)
        return;
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if (par)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
            float s = rstd[n];
            for (int i = 0; i < w; i++) dweight[c0 + i] += (x[i] * s) * d[i];
        }
    }
}
