/* adamw.c — AdamW step exactly as llm.c gpt2_update: bias-corrected moments and
 * decoupled weight decay, on a flat range of n parameters (e.g. one shard):
 *   p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p). Elementwise. */
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

/* Elements [lo, hi): fp32 or bf16 gradients; the bf16 copy of the result when asked. */
static void sz_adamw_range(float *param, uint16_t *param_bf16, const void *grad, int bf16, float *m,
                           float *v, size_t lo, size_t hi, float lr, float b1, float b2, float eps,
                           float wd, float c1, float c2, float scale)
{
    const float *gf = grad;
    const uint16_t *gh = grad;
    if (!bf16) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++)
            param[i] = sz_adamw_1(param[i], gf[i], &m[i], &v[i], lr, b1, b2, eps, wd, c1, c2, scale);
        return;
    }
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float p = sz_adamw_1(param[i], sz_bf16_to_f32_1(gh[i]), &m[i], &v[i], lr, b1, b2, eps, wd, c1,
                             c2, scale);
        param[i] = p;
        if (param_bf16) param_bf16[i] = sz_f32_to_bf16_1(p);
    }
}

typedef struct {
    float *param, *m, *v;
    uint16_t *param_bf16;
    const void *grad;
    int bf16;
    float lr, b1, b2, eps, wd, c1, c2, scale;
} sz_adamw_args;

static void sz_adamw_chunk(void *ctx, size_t lo, size_t hi)
{
    const sz_adamw_args *a = ctx;
    sz_adamw_range(a->param, a->param_bf16, a->grad, a->bf16, a->m, a->v, lo, hi, a->lr, a->b1, a->b2, a->eps,
                   a->wd, a->c1, a->c2, a->scale);
}

/* Fixed chunks (those of sz_k_sumsq), each updated and then, while in cache, its squared norm
 * taken (sz_k_update_chunks): the norm has the same bits whatever the thread count. */
static int sz_adamw(float *param, uint16_t *param_bf16, const void *grad, int bf16, float *m,
                    float *v, size_t n, int t, float lr, float b1, float b2, float eps, float wd,
                    float scale, double *sumsq)
{
    sz_adamw_args a = {param, m, v, param_bf16, grad, bf16, lr, b1, b2, eps, wd,
                       1.0f - powf(b1, (float)t), 1.0f - powf(b2, (float)t), scale};
    return sz_k_update_chunks(n, grad, bf16, sumsq, sz_adamw_chunk, &a);
}

int sz_k_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                    int t, float lr, float beta1, float beta2, float eps, float wd, float scale,
                    double *sumsq)
{
    return sz_adamw(param, NULL, grad, 0, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq);
}

int sz_k_adamw_step_bf16(float *param, uint16_t *param_bf16, const uint16_t *grad,
                         float *m, float *v, size_t n, int t, float lr,
                         float beta1, float beta2, float eps, float wd, float scale,
                         double *sumsq)
{
    return sz_adamw(param, param_bf16, grad, 1, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq);
}
