/* encoder.c — GPT-2 token + position embedding (llm.c encoder_forward/backward).
 * out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]. The backward sums over rows, so it is
 * split by column blocks: each block is owned by one thread and adds the rows in
 * order (b,t) = llm.c's order, whatever the thread count. The rounding variant (mixed precision's
 * rounding folded into a tied wte's writers) sums the same way into fp32 rows and rounds them. */
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

/* The backward's sums: wte's row r(tok) += dout, wpe's row t += dout, where r is the token itself or
 * (slot given) its slot among the distinct tokens. */
static void encoder_sums(float *dwte, const int32_t *slot, float *dwpe, const float *dout, const int *tok, int B,
                         int T, int C)
{
    int nb = (C + SZ_COL_BLOCK - 1) / SZ_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= SZ_PAR_MIN)
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * SZ_COL_BLOCK, w = C - c0 < SZ_COL_BLOCK ? C - c0 : SZ_COL_BLOCK;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C + c0;
            float *we = dwte + (size_t)(slot ? slot[tok[bt]] : tok[bt]) * C + c0,
                  *pe = dwpe + (size_t)(bt % T) * C + c0;
            for (int c = 0; c < w; c++) {
                we[c] += d[c];
                pe[c] += d[c];
            }
        }
    }
}

void sz_k_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *tok,
                      int B, int T, int C)
{
    encoder_sums(dwte, NULL, dwpe, dout, tok, B, T, C);
}

/* ---- a tied wte's gradient rounded by its writers (codelets/encoder.c, sz_op_encoder_bwd_tied) ---- */

int64_t sz_k_token_slots(int32_t *slot, int64_t V, const int *tok, int64_t n)
{
    for (int64_t v = 0; v < V; v++) slot[v] = -1;
    for (int64_t i = 0; i < n; i++) slot[tok[i]] = 0;
    int64_t k = 0;
    for (int64_t v = 0; v < V; v++)
        if (slot[v] == 0) slot[v] = (int32_t)k++;
        else slot[v] = -1;
    return k;
}

void sz_k_encoder_bwd_round(uint16_t *dwte, uint16_t *dwpe, float *rows, float *pe32, const int32_t *slot, int64_t V,
                            const float *dout, const int *tok, int B, int T, int C, int wte_mode, int wpe_mode)
{
    memset(pe32, 0, (size_t)T * C * sizeof *pe32);
    /* into the fp32 rows the output layer left (its values as first writer), wpe's from zero */
    encoder_sums(rows, slot, pe32, dout, tok, B, T, C);
    sz_k_convert(dwpe, SZ_K_BF16, pe32, SZ_K_F32, (size_t)T * C, wpe_mode);
    for (int64_t v = 0; v < V; v++)
        if (slot[v] >= 0)
            sz_k_convert(dwte + v * C, SZ_K_BF16, rows + (size_t)slot[v] * C, SZ_K_F32, (size_t)C, wte_mode);
}
