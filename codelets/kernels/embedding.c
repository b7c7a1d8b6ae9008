/* embedding.c — a token embedding without a position table: out[n,:] = wte[tok[n],:] for N rows,
 * vocabulary V. Both directions first check every token (in row order) and touch nothing when one
 * is outside [0, V): they return that row. The backward sums rows with the same token, so it is
 * split by column blocks, each owned by one thread and adding the rows in order 0..N-1: no races
 * between rows with the same token, the same bits whatever the thread count. */
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
