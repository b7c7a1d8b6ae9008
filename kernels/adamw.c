/* adamw.c — AdamW step exactly as llm.c gpt2_update: bias-corrected moments and
 * decoupled weight decay, on a flat range of n parameters (e.g. one shard):
 *   p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p). Elementwise. Gradients fp32, or bf16 / fp16
 * (mixed precision: the fp32 master updated, its 16-bit copy rounded from it). */
#include <math.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

/* These loops vectorize only when built with -fno-math-errno (sqrtf's errno
 * check is a branch); the results are the same either way. */

/* The update of one element; g is the (already fp32) gradient, multiplied by the clip scale
 * first (a scale of 1 leaves it bitwise unchanged). */
static inline float sz_adamw_1(float p, float g, float *m, float *v, float lr, float b1,
                               float b2, float eps, float wd, float c1, float c2, float scale)
{
    g *= scale;
    float mi = b1 * *m + (1.0f - b1) * g;
    float vi = b2 * *v + (1.0f - b2) * g * g;
    float m_hat = mi / c1, v_hat = vi / c2;
    *m = mi;
    *v = vi;
    return p - lr * (m_hat / (sqrtf(v_hat) + eps) + wd * p);
}

/* Elements [lo, hi) with gradients of type DT (a constant where the dispatch below inlines it: one
 * loop per type, each vectorized); a 16-bit gradient widened exactly, the copy of the result in
 * param16 rounded to DT when asked. */
SZ_INLINE void sz_adamw_range_t(float *param, uint16_t *param16, const void *grad, int DT, float *m, float *v,
                                size_t lo, size_t hi, float lr, float b1, float b2, float eps, float wd, float c1,
                                float c2, float scale)
{
    if (DT == SZ_K_F32) {
        const float *gf = grad;
#pragma omp simd
        for (size_t i = lo; i < hi; i++)
            param[i] = sz_adamw_1(param[i], gf[i], &m[i], &v[i], lr, b1, b2, eps, wd, c1, c2, scale);
        return;
    }
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float p = sz_adamw_1(param[i], sz_ldx(grad, DT, i), &m[i], &v[i], lr, b1, b2, eps, wd, c1, c2, scale);
        param[i] = p;
        if (param16) sz_stx(param16, DT, i, p);
    }
}

typedef struct {
    float *param, *m, *v;
    uint16_t *param16;
    const void *grad;
    int gdt;
    float lr, b1, b2, eps, wd, c1, c2, scale;
} sz_adamw_args;

static void sz_adamw_chunk(void *ctx, size_t lo, size_t hi)
{
    const sz_adamw_args *a = ctx;
    if (a->gdt == SZ_K_BF16)
        sz_adamw_range_t(a->param, a->param16, a->grad, SZ_K_BF16, a->m, a->v, lo, hi, a->lr, a->b1, a->b2, a->eps,
                         a->wd, a->c1, a->c2, a->scale);
    else if (a->gdt == SZ_K_F16) {
#if SZ_HAVE_F16C_BLOCKS
        /* F16C: a block of gradients widened into fp32, the fp32 loop on it (the same arithmetic,
         * so the same bits), the block's results rounded to fp16 */
        if (sz_f16c_ok()) {
            float gb[SZ_F16C_BLOCK];
            for (size_t b = lo; b < hi; b += SZ_F16C_BLOCK) {
                size_t e = b + SZ_F16C_BLOCK < hi ? b + SZ_F16C_BLOCK : hi;
                sz_f16_to_f32_f16c(gb, (const uint16_t *)a->grad + b, e - b);
                sz_adamw_range_t(a->param + b, NULL, gb, SZ_K_F32, a->m + b, a->v + b, 0, e - b, a->lr, a->b1,
                                 a->b2, a->eps, a->wd, a->c1, a->c2, a->scale);
                if (a->param16) sz_f32_to_f16_f16c(a->param16 + b, a->param + b, e - b);
            }
            return;
        }
#endif
        sz_adamw_range_t(a->param, a->param16, a->grad, SZ_K_F16, a->m, a->v, lo, hi, a->lr, a->b1, a->b2, a->eps,
                         a->wd, a->c1, a->c2, a->scale);
    } else
        sz_adamw_range_t(a->param, NULL, a->grad, SZ_K_F32, a->m, a->v, lo, hi, a->lr, a->b1, a->b2, a->eps, a->wd,
                         a->c1, a->c2, a->scale);
}

/* Fixed chunks (those of sz_k_sumsq), each updated and then, while in cache, its squared norm
 * taken (sz_k_update_chunks): the norm has the same bits whatever the thread count. A NaN scale
 * (a skipped step) writes nothing. */
static int sz_adamw(float *param, uint16_t *param16, const void *grad, int gdt, float *m,
                    float *v, size_t n, int t, float lr, float b1, float b2, float eps, float wd,
                    float scale, double *sumsq)
{
    if (isnan(scale)) {
        if (sumsq) *sumsq = 0.0;
        return 0;
    }
    sz_adamw_args a = {param, m, v, param16, grad, gdt, lr, b1, b2, eps, wd,
                       1.0f - powf(b1, (float)t), 1.0f - powf(b2, (float)t), scale};
    return sz_k_update_chunks(n, grad, gdt, sumsq, sz_adamw_chunk, &a);
}

int sz_k_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                    int t, float lr, float beta1, float beta2, float eps, float wd, float scale,
                    double *sumsq)
{
    return sz_adamw(param, NULL, grad, SZ_K_F32, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq);
}

int sz_k_adamw_step_mixed(float *param, uint16_t *param16, const uint16_t *grad16, sz_k_dtype dt,
                          float *m, float *v, size_t n, int t, float lr, float beta1, float beta2,
                          float eps, float wd, float scale, double *sumsq)
{
    return sz_adamw(param, param16, grad16, dt, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq);
}

int sz_k_adamw_step_bf16(float *param, uint16_t *param_bf16, const uint16_t *grad,
                         float *m, float *v, size_t n, int t, float lr,
                         float beta1, float beta2, float eps, float wd, float scale,
                         double *sumsq)
{
    return sz_k_adamw_step_mixed(param, param_bf16, grad, SZ_K_BF16, m, v, n, t, lr, beta1, beta2, eps, wd, scale,
                                 sumsq);
}
