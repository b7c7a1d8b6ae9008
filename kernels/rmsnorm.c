/* rmsnorm.c — RMSNorm over the last dim C of [N,C] rows (LLaMA's norm, no mean, no bias):
 * out = inp · rstd · w with rstd = 1/sqrt(mean(inp²) + eps); the forward saves rstd [N].
 * Rows are independent (one thread per row, each row summed in a fixed order); the backward's
 * dw sums over rows, so it is split by column blocks, each adding rows 0..N-1 in order: the same
 * bits whatever the thread count. Also the residual add fused with the RMSNorm after it (forward
 * and backward), row by row, with the same bits. The row math (sz_rms_row_fwd, sz_rms_row_bwd) is in
 * sz_kernels_impl.h, shared with the bf16-operand variants (bf16_act.c). */
#include <math.h>
#include "sz_kernels_impl.h"

void sz_k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++)
        sz_rms_row_fwd(out + (size_t)n * C, rstd + n, inp + (size_t)n * C, weight, C, eps);
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
        sz_rms_row_fwd(out + (size_t)n * C, rstd + n, r, weight, C, eps);
    }
}

/* dw: column blocks, each adding rows 0..N-1 in order (onto 0 under SZ_K_SET_DW); dout fp32 or bf16
 * (widened by block). */
void sz_rms_weight_bwd(float *dweight, const void *dout, sz_k_dtype dout_dt, const float *inp, const float *rstd,
                       int N, int C, int par, int set)
{
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if (par)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        float wide[SZ_COL_BLOCK];
        if (set & SZ_K_SET_DW) /* set: the sums start at 0 (what adding onto zeros gives) */
            memset(dweight + c0, 0, (size_t)w * sizeof *dweight);
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *d = (const float *)dout + (size_t)n * C + c0;
            if (dout_dt == SZ_K_BF16) {
                const uint16_t *h = (const uint16_t *)dout + (size_t)n * C + c0;
                for (int i = 0; i < w; i++) wide[i] = sz_bf16_to_f32_1(h[i]);
                d = wide;
            }
            float s = rstd[n];
            for (int i = 0; i < w; i++) dweight[c0 + i] += (x[i] * s) * d[i];
        }
    }
}

void sz_k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C)
{
    sz_k_rmsnorm_bwd_set(dinp, dweight, dout, inp, weight, rstd, N, C, 0);
}

void sz_k_rmsnorm_bwd_set(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                          const float *rstd, int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN, sd = set & SZ_K_SET_DINP;
    if (dinp) {
#pragma omp parallel for schedule(static) if (par)
        for (int n = 0; n < N; n++)
            sz_rms_row_bwd(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, rstd[n], C, sd);
    }
    if (dweight)
        sz_rms_weight_bwd(dweight, dout, SZ_K_F32, inp, rstd, N, C, par, set);
}

/* The RMSNorm's backward and the residual add's before it (res = a + b fed the norm), row by row:
 * dres += the norm's input gradient, then da += dres, db += dres; dweight +=. The same bits as
 * sz_k_rmsnorm_bwd into dres then sz_k_residual_bwd(da, db, dres). */
void sz_k_rmsnorm_residual_bwd(float *da, float *db, float *dres, float *dweight, const float *dout,
                               const float *res, const float *weight, const float *rstd, int N, int C)
{
    sz_k_rmsnorm_residual_bwd_set(da, db, dres, dweight, dout, res, weight, rstd, N, C, 0);
}

/* set: da and / or db copied from dres instead of added to */
void sz_k_rmsnorm_residual_bwd_set(float *da, float *db, float *dres, float *dweight, const float *dout,
                                   const float *res, const float *weight, const float *rstd, int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        float *dr = dres + (size_t)n * C, *dan = da + (size_t)n * C, *dbn = db + (size_t)n * C;
        sz_rms_row_bwd(dr, dout + (size_t)n * C, res + (size_t)n * C, weight, rstd[n], C, 0);
        sz_k_residual_bwd_row(dan, dbn, dr, (size_t)C, set);
    }
    sz_rms_weight_bwd(dweight, dout, SZ_K_F32, res, rstd, N, C, par, set);
}
