/* layernorm.c — LayerNorm over the last dim C of [N,C] rows (llm.c layernorm_*),
 * eps 1e-5, biased variance; the forward saves mean and rstd [N]. The bias (and its
 * gradient) may be NULL: a layernorm without bias.
 * Backward: dinp row by row (rows in parallel); dweight/dbias sum over rows, so
 * they are split by column blocks, each adding rows 0..N-1 in order. Also the residual add fused
 * with the layernorm after it (forward and backward), row by row, with the same bits. */
#include <math.h>
#include "sz_kernels_impl.h"

/* The row math is sz_ln_row_fwd / sz_ln_row_bwd (sz_kernels_impl.h), shared with bf16_act.c. */

void sz_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++)
        sz_ln_row_fwd(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C);
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
        sz_ln_row_fwd(out + (size_t)n * C, mean + n, rstd + n, r, weight, bias, C);
    }
}

/* One column block [c0, c0 + w) of dweight, dbias, adding rows 0..N-1 in order; dout of type dout_dt
 * (a bf16 one widened exactly as it is read, so the sums are those of the fp32 dout). */
SZ_INLINE void ln_params_block(float *dweight, float *dbias, const void *dout, int dout_dt, const float *inp,
                                   const float *mean, const float *rstd, int N, int C, int c0, int w, int set)
{
    if (dbias && (set & SZ_K_SET_DB)) /* set: the sums start at 0 (what adding onto zeros gives) */
        memset(dbias + c0, 0, (size_t)w * sizeof *dbias);
    if (dweight && (set & SZ_K_SET_DW))
        memset(dweight + c0, 0, (size_t)w * sizeof *dweight);
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C + c0;
        size_t o = (size_t)n * C + c0;
        float m = mean[n], s = rstd[n];
        if (dbias)
            for (int i = 0; i < w; i++)
                dbias[c0 + i] += sz_ldx(dout, dout_dt, o + i);
        for (int i = 0; i < w; i++)
            dweight[c0 + i] += ((x[i] - m) * s) * sz_ldx(dout, dout_dt, o + i);
    }
}

/* dweight, dbias: column blocks, each adding rows 0..N-1 in order (onto 0 under SZ_K_SET_DW / _DB). */
void sz_ln_params_bwd(float *dweight, float *dbias, const void *dout, sz_k_dtype dout_dt, const float *inp,
                      const float *mean, const float *rstd, int N, int C, int par, int set)
{
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if (par)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        if (dout_dt == SZ_K_BF16)
            ln_params_block(dweight, dbias, dout, SZ_K_BF16, inp, mean, rstd, N, C, c0, w, set);
        else
            ln_params_block(dweight, dbias, dout, SZ_K_F32, inp, mean, rstd, N, C, c0, w, set);
    }
}

void sz_k_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C)
{
    sz_k_layernorm_bwd_set(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, 0);
}

void sz_k_layernorm_bwd_set(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN, sd = set & SZ_K_SET_DINP;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++)
        sz_ln_row_bwd(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C, weight, mean[n], rstd[n], C,
                      sd);
    sz_ln_params_bwd(dweight, dbias, dout, SZ_K_F32, inp, mean, rstd, N, C, par, set);
}

/* The layernorm's backward and the residual add's before it (res = a + b fed the layernorm), row
 * by row: dres += the layernorm's input gradient, then da += dres and db += dres. The same bits as
 * sz_k_layernorm_bwd into dres then sz_k_residual_bwd(da, db, dres). */
void sz_k_layernorm_residual_bwd(float *da, float *db, float *dres, float *dweight, float *dbias,
                                 const float *dout, const float *res, const float *weight,
                                 const float *mean, const float *rstd, int N, int C)
{
    sz_k_layernorm_residual_bwd_set(da, db, dres, dweight, dbias, dout, res, weight, mean, rstd, N, C, 0);
}

/* set: da and / or db copied from dres instead of added to (sz_k_residual_bwd_set's row loops) */
void sz_k_layernorm_residual_bwd_set(float *da, float *db, float *dres, float *dweight, float *dbias,
                                     const float *dout, const float *res, const float *weight,
                                     const float *mean, const float *rstd, int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        float *dr = dres + (size_t)n * C, *dan = da + (size_t)n * C, *dbn = db + (size_t)n * C;
        sz_ln_row_bwd(dr, dout + (size_t)n * C, res + (size_t)n * C, weight, mean[n], rstd[n], C, 0);
        sz_k_residual_bwd_row(dan, dbn, dr, (size_t)C, set);
    }
    sz_ln_params_bwd(dweight, dbias, dout, SZ_K_F32, res, mean, rstd, N, C, par, set);
}
