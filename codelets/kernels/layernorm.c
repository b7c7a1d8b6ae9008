/* layernorm.c — LayerNorm over the last dim C of [N,C] rows (llm.c layernorm_*),
 * eps 1e-5, biased variance; the forward saves mean and rstd [N]. The bias (and its
 * gradient) may be NULL: a layernorm without bias.
 * Backward: dinp row by row (rows in parallel); dweight/dbias sum over rows, so
 * they are split by column blocks, each adding rows 0..N-1 in order. */
#include <math.h>
#include "sz_kernels_impl.h"

void sz_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int C)
{
    const float eps = 1e-5f;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float m = 0.0f, v = 0.0f;
#pragma omp simd reduction(+ : m)
        for (int i = 0; i < C; i++) m += x[i];
        m = m / C;
#pragma omp simd reduction(+ : v)
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        v = v / C;
        float s = 1.0f / sqrtf(v + eps);
        if (bias)
            for (int i = 0; i < C; i++) o[i] = (s * (x[i] - m)) * weight[i] + bias[i];
        else
            for (int i = 0; i < C; i++) o[i] = (s * (x[i] - m)) * weight[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

void sz_k_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
        for (int i = 0; i < C; i++) {
            float dnorm_i = weight[i] * d[i];
            dnorm_mean += dnorm_i;
            dnorm_norm_mean += dnorm_i * ((x[i] - m) * s);
        }
        dnorm_mean = dnorm_mean / C;
        dnorm_norm_mean = dnorm_norm_mean / C;
        for (int i = 0; i < C; i++) {
            float norm_i = (x[i] - m) * s;
            float dval = weight[i] * d[i] - dnorm_mean - norm_i * dnorm_norm_mean;
            di[i] += dval * s;
        }
    }
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if (par)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
            float m = mean[n], s = rstd[n];
            if (dbias)
                for (int i = 0; i < w; i++)
                    dbias[c0 + i] += d[i];
            for (int i = 0; i < w; i++)
                dweight[c0 + i] += ((x[i] - m) * s) * d[i];
        }
    }
}
