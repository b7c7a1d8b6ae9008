/* softmax_xent.c — fused softmax + cross-entropy over the real vocabulary V of
 * logits padded to Vp columns (llm.c softmax_forward + crossentropy_forward +
 * crossentropy_softmax_backward). Rows [N] are independent, done in parallel;
 * within a row the max, exp (sz_expf) and sum loops are vectorized. */
#include <math.h>
#include "sz_kernels_impl.h"

void sz_k_softmax_xent_fwd(float *probs, float *losses, const float *logits,
                           const int *targets, int N, int V, int Vp)
{
#pragma omp parallel for schedule(static) if ((size_t)N * Vp >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vp;
        float *p = probs + (size_t)n * Vp;
        float maxval = -10000.0f, sum = 0.0f;
#pragma omp simd reduction(max : maxval)
        for (int i = 0; i < V; i++) maxval = l[i] > maxval ? l[i] : maxval;
#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < V; i++) {
            p[i] = sz_expf(l[i] - maxval);
            sum += p[i];
        }
#pragma omp simd
        for (int i = 0; i < V; i++) p[i] /= sum;
        for (int i = V; i < Vp; i++) p[i] = 0.0f;
        losses[n] = -logf(p[targets[n]]);
    }
}

void sz_k_softmax_xent_bwd(float *dlogits, const float *probs, const int *targets,
                           const float *dloss, int N, int V, int Vp)
{
#pragma omp parallel for schedule(static) if ((size_t)N * Vp >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        float *dl = dlogits + (size_t)n * Vp;
        float g = dloss[n];
        int ix = targets[n];
        for (int i = 0; i < V; i++) dl[i] = (p[i] - (i == ix ? 1.0f : 0.0f)) * g;
        for (int i = V; i < Vp; i++) dl[i] = 0.0f;
    }
}

/* Forward and backward in one pass per row, in place (llm.c's fused classifier): the row's max,
 * exponentials and sum, its loss, then the row overwritten with its gradient, while it is in
 * cache; no probabilities saved. The same bits as sz_k_softmax_xent_fwd into probs then
 * sz_k_softmax_xent_bwd with dloss[n] = g for every row. The row is sz_sxent_fused_row
 * (sz_kernels_impl.h), which the bf16 variant (bf16_act.c) runs on its widened rows. */
void sz_k_softmax_xent_fused(float *logits, float *losses, const int *targets, float g, int N, int V,
                             int Vp)
{
#pragma omp parallel for schedule(static) if ((size_t)N * Vp >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        float *l = logits + (size_t)n * Vp;
        sz_sxent_fused_row(l, l, SZ_K_F32, losses + n, targets[n], g, V, Vp);
    }
}
