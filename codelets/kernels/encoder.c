/* encoder.c — GPT-2 token + position embedding (llm.c encoder_forward/backward).
 * out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]. The backward sums over rows, so it is
 * split by column blocks: each block is owned by one thread and adds the rows in
 * order (b,t) = llm.c's order, whatever the thread count. */
#include "sz_kernels_impl.h"

void sz_k_encoder_fwd(float *out, const int *tok, const float *wte, const float *wpe,
                      int B, int T, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        const float *we = wte + (size_t)tok[bt] * C, *pe = wpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

void sz_k_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *tok,
                      int B, int T, int C)
{
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= SZ_PAR_MIN)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C + c0;
            float *we = dwte + (size_t)tok[bt] * C + c0, *pe = dwpe + (size_t)(bt % T) * C + c0;
            for (int c = 0; c < w; c++) {
                we[c] += d[c];
                pe[c] += d[c];
            }
        }
    }
}
