/* embedding.c — a token embedding without a position table: out[n,:] = wte[tok[n],:] for N rows,
 * vocabulary V. Both directions first check every token (in row order) and touch nothing when one
 * is outside [0, V): they return that row. The backward sums rows with the same token, so it is
 * split by column blocks, each owned by one thread and adding the rows in order 0..N-1: no races
 * between rows with the same token, the same bits whatever the thread count. The rounding variant
 * (mixed precision's gradient rounding folded into the writer) sums each token's rows in the same
 * order into a column block of fp32 and rounds it straight into the bf16 gradient. */
#include "sz_kernels_impl.h"

int64_t sz_k_embedding_check(const int *tok, int64_t N, int V)
{
    for (int64_t n = 0; n < N; n++)
        if (tok[n] < 0 || tok[n] >= V)
            return n;
    return -1;
}

int64_t sz_k_embedding_fwd(float *out, const int *tok, const float *wte, int N, int C, int V)
{
    int64_t bad = sz_k_embedding_check(tok, N, V);
    if (bad >= 0)
        return bad;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *we = wte + (size_t)tok[n] * C;
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = we[c];
    }
    return -1;
}

int64_t sz_k_embedding_bwd(float *dwte, const float *dout, const int *tok, int N, int C, int V)
{
    int64_t bad = sz_k_embedding_check(tok, N, V);
    if (bad >= 0)
        return bad;
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * C + c0;
            float *we = dwte + (size_t)tok[n] * C + c0;
            for (int c = 0; c < w; c++) we[c] += d[c];
        }
    }
    return -1;
}

/* ---- the gradient rounded by its writer (codelets/embedding.c, the bf16 dwte of a rounding unit) ---- */

size_t sz_k_embedding_bwd_round_ints(int N, int V) { return (size_t)V + 1 + (size_t)N; }

/* idx[0..V]: after the fill, idx[v] ends token v's rows in order[] (idx[v - 1], or 0, begins them);
 * order[0..N): the rows grouped by token, each token's in row order (a stable counting sort). */
static void rows_by_token(int32_t *idx, int32_t *order, const int *tok, int N, int V)
{
    memset(idx, 0, ((size_t)V + 1) * sizeof *idx);
    for (int n = 0; n < N; n++) idx[tok[n] + 1]++;
    for (int v = 0; v < V; v++) idx[v + 1] += idx[v];
    for (int n = 0; n < N; n++) order[idx[tok[n]]++] = n;
}

int64_t sz_k_embedding_bwd_round(uint16_t *dwte, const float *dout, const int *tok, int N, int C, int V, int mode,
                                 int32_t *idx)
{
    int64_t bad = sz_k_embedding_check(tok, N, V);
    if (bad >= 0)
        return bad;
    int32_t *order = idx + (size_t)V + 1;
    rows_by_token(idx, order, tok, N, V);
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
    /* each (row, column block) on its own: the block's sums from +0 over the token's rows in row
     * order (sz_k_embedding_bwd's adds onto a zeroed gradient), rounded with sz_k_convert's rule;
     * a row no token has rounds zeros, as the convert of the untouched fp32 row does */
#pragma omp parallel for collapse(2) schedule(dynamic, 64) if ((size_t)V * C >= SZ_PAR_MIN)
    for (int v = 0; v < V; v++)
        for (int blk = 0; blk < nb; blk++) {
            int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
            float acc[SZ_COL_BLOCK];
            for (int c = 0; c < w; c++) acc[c] = 0.0f;
            for (int32_t k = v > 0 ? idx[v - 1] : 0; k < idx[v]; k++) {
                const float *d = dout + (size_t)order[k] * C + c0;
                for (int c = 0; c < w; c++) acc[c] += d[c];
            }
            sz_k_convert(dwte + (size_t)v * C + c0, SZ_K_BF16, acc, SZ_K_F32, (size_t)w, mode);
        }
    return -1;
}
