/* sgd.c — SGD with momentum exactly as torch.optim.SGD (dampening 0), on a flat range of n
 * parameters (e.g. one shard): g = scale * grad + wd * p (L2 weight decay, added to the gradient
 * as PyTorch's SGD does); with momentum, buf = momentum * buf + g (PyTorch's first step sets
 * buf = g: the same value from a zeroed buffer) and d = buf (Nesterov: g + momentum * buf);
 * without (buf NULL), d = g; p -= lr * d. Elementwise, so the result never depends on the thread
 * count; the optional squared gradient norm uses sz_k_sumsq's fixed chunks. Gradients fp32, or bf16
 * / fp16 (mixed precision: the fp32 master updated, its 16-bit copy rounded from it). */
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

/* Elements [lo, hi) with gradients of type DT (a constant where sz_sgd_range inlines it), a 16-bit
 * one widened exactly; param16, when not NULL, gets the result rounded to DT. */
SZ_INLINE void sz_sgd_range_t(float *param, uint16_t *param16, const void *grad, int DT, float *buf, size_t lo,
                              size_t hi, float lr, float mom, float wd, int nesterov, float scale)
{
    for (size_t i = lo; i < hi; i++) {
        float p = sz_sgd_1(param[i], sz_ldx(grad, DT, i), buf ? &buf[i] : NULL, lr, mom, wd, nesterov, scale);
        param[i] = p;
        if (param16)
            sz_stx(param16, DT, i, p);
    }
}

/* grad of type gdt. The fp32 cases without Nesterov are separate loops with the branches outside, so
 * each vectorizes (the same operations in the same order as sz_sgd_1: the same bits); param16 is
 * not used with fp32 gradients. */
static void sz_sgd_range(float *param, uint16_t *param16, const void *grad, int gdt, float *buf, size_t lo,
                         size_t hi, float lr, float mom, float wd, int nesterov, float scale)
{
    const float *gf = grad;
    if (gdt == SZ_K_BF16) {
        sz_sgd_range_t(param, param16, grad, SZ_K_BF16, buf, lo, hi, lr, mom, wd, nesterov, scale);
        return;
    }
    if (gdt == SZ_K_F16) {
        sz_sgd_range_t(param, param16, grad, SZ_K_F16, buf, lo, hi, lr, mom, wd, nesterov, scale);
        return;
    }
    if (buf && !nesterov) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++) {
            float g = gf[i] * scale + wd * param[i];
            float b = mom * buf[i] + g;
            buf[i] = b;
            param[i] = param[i] - lr * b;
        }
        return;
    }
    if (!buf) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++)
            param[i] = param[i] - lr * (gf[i] * scale + wd * param[i]);
        return;
    }
    sz_sgd_range_t(param, NULL, grad, SZ_K_F32, buf, lo, hi, lr, mom, wd, nesterov, scale); /* Nesterov */
}

typedef struct {
    float *param, *buf;
    uint16_t *param16;
    const void *grad;
    int gdt, nesterov;
    float lr, mom, wd, scale;
} sz_sgd_args;

static void sz_sgd_chunk(void *ctx, size_t lo, size_t hi)
{
    const sz_sgd_args *a = ctx;
    sz_sgd_range(a->param, a->param16, a->grad, a->gdt, a->buf, lo, hi, a->lr, a->mom, a->wd, a->nesterov,
                 a->scale);
}

/* A NaN scale (a skipped step) writes nothing. */
int sz_k_sgd_step(float *param, uint16_t *param16, const void *grad, int gdt, float *buf, size_t n, float lr,
                  float momentum, float wd, int nesterov, float scale, double *sumsq)
{
    if (isnan(scale)) {
        if (sumsq) *sumsq = 0.0;
        return 0;
    }
    sz_sgd_args a = {param, buf, param16, grad, gdt, nesterov, lr, momentum, wd, scale};
    return sz_k_update_chunks(n, grad, gdt, sumsq, sz_sgd_chunk, &a);
}
