/* sgd.c — SGD with momentum exactly as torch.optim.SGD (dampening 0), on a flat range of n
 * parameters (e.g. one shard): g = scale * grad + wd * p (L2 weight decay, added to the gradient
 * as PyTorch's SGD does); with momentum, buf = momentum * buf + g (PyTorch's first step sets
 * buf = g: the same value from a zeroed buffer) and d = buf (Nesterov: g + momentum * buf);
 * without (buf NULL), d = g; p -= lr * d. Elementwise, so the result never depends on the thread
 * count; the optional squared gradient norm uses sz_k_sumsq's fixed chunks. */
#include <stdlib.h>
#include "sz_kernels_impl.h"

/* The update of one element from its (fp32) gradient; buf NULL: no momentum. */
static inline float sz_sgd_1(float p, float g, float *buf, float lr, float mom, float wd, int nesterov,
                             float scale)
{
    g = g * scale + wd * p;
    float d = g;
    if (buf) {
        float b = mom * *buf + g;
        *buf = b;
        d = nesterov ? g + mom * b : b;
    }
    return p - lr * d;
}

/* Elements [lo, hi). The cases are separate loops with the branches outside, so each vectorizes
 * (the same operations in the same order as sz_sgd_1: the same bits). */
static void sz_sgd_range(float *param, uint16_t *param_bf16, const void *grad, int bf16, float *buf, size_t lo,
                         size_t hi, float lr, float mom, float wd, int nesterov, float scale)
{
    const float *gf = grad;
    const uint16_t *gh = grad;
    if (!bf16 && buf && !nesterov) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++) {
            float g = gf[i] * scale + wd * param[i];
            float b = mom * buf[i] + g;
            buf[i] = b;
            param[i] = param[i] - lr * b;
        }
        return;
    }
    if (!bf16 && !buf) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++)
            param[i] = param[i] - lr * (gf[i] * scale + wd * param[i]);
        return;
    }
    for (size_t i = lo; i < hi; i++) {
        float g = bf16 ? sz_bf16_to_f32_1(gh[i]) : gf[i];
        float p = sz_sgd_1(param[i], g, buf ? &buf[i] : NULL, lr, mom, wd, nesterov, scale);
        param[i] = p;
        if (param_bf16)
            param_bf16[i] = sz_f32_to_bf16_1(p);
    }
}

typedef struct {
    float *param, *buf;
    uint16_t *param_bf16;
    const void *grad;
    int bf16, nesterov;
    float lr, mom, wd, scale;
} sz_sgd_args;

static void sz_sgd_chunk(void *ctx, size_t lo, size_t hi)
{
    const sz_sgd_args *a = ctx;
    sz_sgd_range(a->param, a->param_bf16, a->grad, a->bf16, a->buf, lo, hi, a->lr, a->mom, a->wd, a->nesterov,
                 a->scale);
}

int sz_k_sgd_step(float *param, uint16_t *param_bf16, const void *grad, int bf16, float *buf, size_t n, float lr,
                  float momentum, float wd, int nesterov, float scale, double *sumsq)
{
    sz_sgd_args a = {param, buf, param_bf16, grad, bf16, nesterov, lr, momentum, wd, scale};
    return sz_k_update_chunks(n, grad, bf16, sumsq, sz_sgd_chunk, &a);
}
