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

int sz_k_sgd_step(float *param, uint16_t *param_bf16, const void *grad, int bf16, float *buf, size_t n, float lr,
                  float momentum, float wd, int nesterov, float scale, double *sumsq)
{
    int64_t nchunks = ((int64_t)n + SZ_SUMSQ_CHUNK - 1) / SZ_SUMSQ_CHUNK;
    double one, *part = !sumsq ? NULL : nchunks > 1 ? malloc((size_t)nchunks * sizeof *part) : &one;
    if (sumsq && !part)
        return -1;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * SZ_SUMSQ_CHUNK, hi = lo + SZ_SUMSQ_CHUNK < n ? lo + SZ_SUMSQ_CHUNK : n;
        sz_sgd_range(param, param_bf16, grad, bf16, buf, lo, hi, lr, momentum, wd, nesterov, scale);
        if (part)
            part[c] = sz_k_sumsq_chunk((const char *)grad + lo * (bf16 ? 2 : 4), bf16, (int64_t)(hi - lo));
    }
    if (sumsq) {
        double s = 0.0;
        for (int64_t c = 0; c < nchunks; c++)
            s += part[c];
        *sumsq = nchunks ? s : 0.0;
    }
    if (part != &one)
        free(part);
    return 0;
}
