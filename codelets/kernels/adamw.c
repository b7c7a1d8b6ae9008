/* adamw.c — AdamW step exactly as llm.c gpt2_update: bias-corrected moments and
 * decoupled weight decay, on a flat range of n parameters (e.g. one shard):
 *   p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p). Elementwise. */
#include <math.h>
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

void sz_k_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                     int t, float lr, float beta1, float beta2, float eps, float wd, float scale)
{
    float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        param[i] = sz_adamw_1(param[i], grad[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, c1, c2, scale);
}

void sz_k_adamw_step_bf16(float *param, uint16_t *param_bf16, const uint16_t *grad,
                          float *m, float *v, size_t n, int t, float lr,
                          float beta1, float beta2, float eps, float wd, float scale)
{
    float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float p = sz_adamw_1(param[i], sz_bf16_to_f32_1(grad[i]), &m[i], &v[i], lr, beta1,
                             beta2, eps, wd, c1, c2, scale);
        param[i] = p;
        if (param_bf16) param_bf16[i] = sz_f32_to_bf16_1(p);
    }
}
