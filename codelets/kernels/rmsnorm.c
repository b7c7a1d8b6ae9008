/* rmsnorm.c — RMSNorm over the last dim C of [N,C] rows (LLaMA's norm, no mean, no bias):
 * out = inp · rstd · w with rstd = 1/sqrt(mean(inp²) + eps); the forward saves rstd [N].
 * Rows are independent (one thread per row, each row summed in a fixed order); the backward's
 * dw sums over rows, so it is split by column blocks, each adding rows 0..N-1 in order: the same
 * bits whatever the thread count. Also the residual add fused with the RMSNorm after it (forward
 * and backward), row by row, with the same bits. */
#include <math.h>
#include "sz_kernels_impl.h"

/* One row: rstd and the scaled output. */
static inline void rms_row_fwd(float *o, float *rstd, const float *x, const float *weight, int C, float eps)
{
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    float s = 1.0f / sqrtf(ss / C + eps);
    for (int i = 0; i < C; i++) o[i] = (x[i] * s) * weight[i];
    *rstd = s;
}

void sz_k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++)
        rms_row_fwd(out + (size_t)n * C, rstd + n, inp + (size_t)n * C, weight, C, eps);
}

/* The residual add and the RMSNorm after it, row by row while the row is in cache: the same bits
 * as sz_k_residual_fwd then sz_k_rmsnorm_fwd on its output. */
void sz_k_residual_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                               const float *weight, int N, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *an = a + (size_t)n * C, *bn = b + (size_t)n * C;
        float *r = res + (size_t)n * C;
#pragma omp simd
        for (int i = 0; i < C; i++) r[i] = an[i] + bn[i];
        rms_row_fwd(out + (size_t)n * C, rstd + n, r, weight, C, eps);
    }
}

/* out_i = x_i s w_i, s = (Σx²/C + eps)^(-1/2), ds/dx_j = -s³ x_j / C:
 * dx_j = s w_j d_j - (s³/C) x_j Σ_i d_i w_i x_i;  dw_i = Σ_n d_i x_i s. One row, added to di. */
static inline void rms_row_bwd(float *di, const float *d, const float *x, const float *weight, float s, int C)
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < C; i++) dot += d[i] * weight[i] * x[i];
    float k = s * s * s * dot / C;
    for (int i = 0; i < C; i++) di[i] += s * weight[i] * d[i] - k * x[i];
}

/* dw: column blocks, each adding rows 0..N-1 in order. */
static void rms_weight_bwd(float *dweight, const float *dout, const float *inp, const float *rstd, int N, int C,
                           int par)
{
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

void sz_k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
    if (dinp) {
#pragma omp parallel for schedule(static) if (par)
        for (int n = 0; n < N; n++)
            rms_row_bwd(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, rstd[n], C);
    }
    if (dweight)
        rms_weight_bwd(dweight, dout, inp, rstd, N, C, par);
}

/* The RMSNorm's backward and the residual add's before it (res = a + b fed the norm), row by row:
 * dres += the norm's input gradient, then da += dres, db += dres; dweight +=. The same bits as
 * sz_k_rmsnorm_bwd into dres then sz_k_residual_bwd(da, db, dres). */
void sz_k_rmsnorm_residual_bwd(float *da, float *db, float *dres, float *dweight, const float *dout,
                               const float *res, const float *weight, const float *rstd, int N, int C)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        float *dr = dres + (size_t)n * C, *dan = da + (size_t)n * C, *dbn = db + (size_t)n * C;
        rms_row_bwd(dr, dout + (size_t)n * C, res + (size_t)n * C, weight, rstd[n], C);
#pragma omp simd
        for (int i = 0; i < C; i++) {
            dan[i] += dr[i];
            dbn[i] += dr[i];
        }
    }
    rms_weight_bwd(dweight, dout, res, rstd, N, C, par);
}
