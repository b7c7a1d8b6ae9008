/* layernorm.c — LayerNorm over the last dim C of [N,C] rows (llm.c layernorm_*),
 * eps 1e-5, biased variance; the forward saves mean and rstd [N]. The bias (and its
 * gradient) may be NULL: a layernorm without bias.
 * Backward: dinp row by row (rows in parallel); dweight/dbias sum over rows, so
 * they are split by column blocks, each adding rows 0..N-1 in order. Also the residual add fused
 * with the layernorm after it (forward and backward), row by row, with the same bits. */
#include <math.h>
#include "sz_kernels_impl.h"

/* One row: mean, rstd and the normalised, scaled and shifted output. */
static inline void ln_row_fwd(float *o, float *mean, float *rstd, const float *x, const float *weight,
                              const float *bias, int C)
{
    const float eps = 1e-5f;
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
    *mean = m;
    *rstd = s;
}

void sz_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++)
        ln_row_fwd(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
}

/* The residual add and the layernorm after it, row by row while the row is in cache: the same
 * bits as sz_k_residual_fwd then sz_k_layernorm_fwd on its output. */
void sz_k_residual_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                                 const float *b, const float *weight, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *an = a + (size_t)n * C, *bn = b + (size_t)n * C;
        float *r = res + (size_t)n * C;
#pragma omp simd
        for (int i = 0; i < C; i++) r[i] = an[i] + bn[i];
        ln_row_fwd(out + (size_t)n * C, mean + n, rstd + n, r, weight, bias, C);
    }
}

/* One row's input gradient, added to di. */
static inline void ln_row_bwd(float *di, const float *d, const float *x, const float *weight, float m, float s,
                              int C)
{
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

/* dweight, dbias: column blocks, each adding rows 0..N-1 in order. */
static void ln_params_bwd(float *dweight, float *dbias, const float *dout, const float *inp, const float *mean,
                          const float *rstd, int N, int C, int par)
{
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

void sz_k_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++)
        ln_row_bwd(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, mean[n], rstd[n], C);
    ln_params_bwd(dweight, dbias, dout, inp, mean, rstd, N, C, par);
}

/* The layernorm's backward and the residual add's before it (res = a + b fed the layernorm), row
 * by row: dres += the layernorm's input gradient, then da += dres and db += dres. The same bits as
 * sz_k_layernorm_bwd into dres then sz_k_residual_bwd(da, db, dres). */
void sz_k_layernorm_residual_bwd(float *da, float *db, float *dres, float *dweight, float *dbias,
                                 const float *dout, const float *res, const float *weight,
                                 const float *mean, const float *rstd, int N, int C)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        float *dr = dres + (size_t)n * C, *dan = da + (size_t)n * C, *dbn = db + (size_t)n * C;
        ln_row_bwd(dr, dout + (size_t)n * C, res + (size_t)n * C, weight, mean[n], rstd[n], C);
#pragma omp simd
        for (int i = 0; i < C; i++) {
            dan[i] += dr[i];
            dbn[i] += dr[i];
        }
    }
    ln_params_bwd(dweight, dbias, dout, res, mean, rstd, N, C, par);
}
