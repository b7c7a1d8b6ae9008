/* kernels/cuda/optimizer.cu — CUDA twins of kernels/adamw.c and kernels/sgd.c (AdamW and SGD
 * with momentum: fp32, and mixed: bf16 or fp16 gradients onto the fp32 master, the 16-bit
 * parameters rounded from it to nearest even, an fp16 one overflowing to inf) and of
 * kernels/sumsq.c. The bias corrections are computed on the host with powf exactly as the CPU. The
 * clip factor is read from device memory (the clip_scale task writes it there); a NaN factor is
 * fp16's skipped step (tasks/clip_scale.c: an overflow on some rank): as on the CPU nothing is
 * written and a fused norm is 0. With a norm output, each block updates one chunk of
 * SZ_SUMSQ_CHUNK elements and, in the same pass, sums that chunk's squared gradients in double by
 * a fixed tree; a second kernel adds the chunk sums in chunk order (as sz_cuda_sumsq, so the fused
 * norm equals the separate one bitwise). */
#include <math.h>
#include "sz_cuda_common.cuh"

#define SZ_CHUNK 65536 /* SZ_SUMSQ_CHUNK of kernels/sz_kernels.h */
#define SZ_OPT_THREADS 256

struct sz_adam_args {
    float lr, b1, b2, eps, wd, c1, c2;
};

__device__ __forceinline__ float sz_adamw_1(float p, float g, float *m, float *v, const sz_adam_args &a, float scale)
{
    g *= scale;
    float mi = a.b1 * *m + (1.0f - a.b1) * g;
    float vi = a.b2 * *v + (1.0f - a.b2) * g * g;
    float m_hat = mi / a.c1, v_hat = vi / a.c2;
    *m = mi;
    *v = vi;
    return p - a.lr * (m_hat / (sqrtf(v_hat) + a.eps) + a.wd * p);
}

/* One block per chunk; part[c] = the chunk's sum of squared (unscaled) gradients if part (0 on a
 * skipped step: a NaN scale, which every thread of every block reads alike). */
__global__ static void __launch_bounds__(SZ_OPT_THREADS)
    adamw_k(float *param, uint16_t *param16, const void *grad, int gdt, float *m, float *v, size_t n,
            sz_adam_args a, const float *scale, double *part)
{
    __shared__ double red[32];
    size_t lo = (size_t)blockIdx.x * SZ_CHUNK, hi = lo + SZ_CHUNK < n ? lo + SZ_CHUNK : n;
    float sc = scale ? *scale : 1.0f;
    if (isnan(sc)) {
        if (part && threadIdx.x == 0)
            part[blockIdx.x] = 0.0;
        return;
    }
    double ss = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += SZ_OPT_THREADS) {
        float g = sz_d_ldx(grad, gdt, i);
        float p = sz_adamw_1(param[i], g, &m[i], &v[i], a, sc);
        param[i] = p;
        if (param16)
            sz_d_stx(param16, gdt, i, p);
        ss += (double)g * (double)g;
    }
    if (part) {
        ss = sz_block_sum(ss, red);
        if (threadIdx.x == 0)
            part[blockIdx.x] = ss;
    }
}

/* Plain chunk sums of squares (the sumsq kernel). */
__global__ static void __launch_bounds__(SZ_OPT_THREADS) sumsq_k(const void *x, int dt, size_t n, double *part)
{
    __shared__ double red[32];
    size_t lo = (size_t)blockIdx.x * SZ_CHUNK, hi = lo + SZ_CHUNK < n ? lo + SZ_CHUNK : n;
    double ss = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += SZ_OPT_THREADS) {
        double g = sz_d_ldx(x, dt, i);
        ss += g * g;
    }
    ss = sz_block_sum(ss, red);
    if (threadIdx.x == 0)
        part[blockIdx.x] = ss;
}

/* One thread: the chunk sums in chunk order, written (acc 0) or added (acc 1) as a float; 0 when
 * skip is a NaN scale (SGD's norm on a skipped step, as the CPU's). */
__global__ static void sumsq_final_k(float *out, const double *part, size_t nchunks, int acc, const float *skip)
{
    double s = 0.0;
    if (!(skip && isnan(*skip)))
        for (size_t c = 0; c < nchunks; c++)
            s += part[c];
    *out = acc ? *out + (float)s : (float)s;
}

static size_t sz_nchunks(size_t n) { return (n + SZ_CHUNK - 1) / SZ_CHUNK; }

/* Enqueue the per-chunk kernel (through launch(part)) and, with out, the final sum (0 where skip
 * is not NULL and a NaN). */
template <typename L>
static int sz_chunked(cudaStream_t s, size_t n, float *out, int acc, L launch, const float *skip = NULL)
{
    double *part = NULL;
    int rc;
    if (out && (rc = (int)cudaMallocAsync((void **)&part, sz_nchunks(n) * sizeof(double), s)))
        return rc;
    launch(part);
    rc = sz_launch_rc();
    if (out) {
        if (!rc) {
            sumsq_final_k<<<1, 1, 0, s>>>(out, part, sz_nchunks(n), acc, skip);
            rc = sz_launch_rc();
        }
        int rf = (int)cudaFreeAsync(part, s);
        rc = rc ? rc : rf;
    }
    return rc;
}

static int sz_adamw_any(cudaStream_t s, float *param, uint16_t *p16, const void *grad, int gdt, float *m, float *v,
                        size_t n, int t, float lr, float b1, float b2, float eps, float wd, const float *scale,
                        float *sumsq, int acc)
{
    if (!n) {
        if (sumsq)
            return sz_cuda_zero(s, sumsq, acc ? 0 : sizeof(float));
        return 0;
    }
    sz_adam_args a = {lr, b1, b2, eps, wd, 1.0f - powf(b1, (float)t), 1.0f - powf(b2, (float)t)};
    unsigned blocks = (unsigned)sz_nchunks(n);
    return sz_chunked(s, n, sumsq, acc, [&](double *part) {
        adamw_k<<<blocks, SZ_OPT_THREADS, 0, s>>>(param, p16, grad, gdt, m, v, n, a, scale, part);
    });
}

extern "C" int sz_cuda_adamw(cudaStream_t s, float *param, const float *grad, float *m, float *v, size_t n, int t,
                             float lr, float beta1, float beta2, float eps, float wd, const float *scale,
                             float *sumsq, int acc)
{
    return sz_adamw_any(s, param, NULL, grad, SZ_CUDA_F32, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq, acc);
}

extern "C" int sz_cuda_adamw_mixed(cudaStream_t s, float *master, uint16_t *param16, const uint16_t *grad, int dt,
                                   float *m, float *v, size_t n, int t, float lr, float beta1, float beta2,
                                   float eps, float wd, const float *scale, float *sumsq, int acc)
{
    if (dt != SZ_CUDA_BF16 && dt != SZ_CUDA_F16)
        return (int)cudaErrorInvalidValue;
    return sz_adamw_any(s, master, param16, grad, dt, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq, acc);
}

extern "C" int sz_cuda_sumsq(cudaStream_t s, float *out, const void *x, int dt, int64_t n, int acc)
{
    if (n <= 0)
        return sz_cuda_zero(s, out, acc ? 0 : sizeof(float));
    unsigned blocks = (unsigned)sz_nchunks((size_t)n);
    return sz_chunked(s, (size_t)n, out, acc,
                      [&](double *part) { sumsq_k<<<blocks, SZ_OPT_THREADS, 0, s>>>(x, dt, (size_t)n, part); });
}

/* SGD: grad fp32, bf16 or fp16 (gdt); buf NULL without momentum; p16 (mixed) the copy rounded to
 * gdt. A NaN scale (a skipped step) writes nothing. */
__global__ static void sgd_k(float *p, uint16_t *p16, const void *grad, int gdt, float *buf, size_t n, float lr,
                             float mom, float wd, int nesterov, const float *scale)
{
    float sc = scale ? *scale : 1.0f;
    if (isnan(sc))
        return;
    SZ_GRID_STRIDE(i, n) {
        float g = sz_d_ldx(grad, gdt, i) * sc + wd * p[i];
        float d = g;
        if (buf) {
            float b = mom * buf[i] + g;
            buf[i] = b;
            d = nesterov ? g + mom * b : b;
        }
        float q = p[i] - lr * d;
        p[i] = q;
        if (p16)
            sz_d_stx(p16, gdt, i, q);
    }
}

extern "C" int sz_cuda_sgd_any(cudaStream_t s, float *param, uint16_t *param16, const void *grad, int gdt,
                               float *buf, size_t n, float lr, float momentum, float wd, int nesterov,
                               const float *scale, float *sumsq, int acc)
{
    if (!n)
        return sumsq ? sz_cuda_zero(s, sumsq, acc ? 0 : sizeof(float)) : 0;
    sgd_k<<<sz_blocks(n, 256), 256, 0, s>>>(param, param16, grad, gdt, buf, n, lr, momentum, wd, nesterov, scale);
    int rc = sz_launch_rc();
    if (rc || !sumsq)
        return rc;
    /* the gradient is only read: its norm is the separate sum's, 0 on a skipped step */
    unsigned blocks = (unsigned)sz_nchunks(n);
    return sz_chunked(
        s, n, sumsq, acc, [&](double *part) { sumsq_k<<<blocks, SZ_OPT_THREADS, 0, s>>>(grad, gdt, n, part); }, scale);
}

extern "C" int sz_cuda_sgd(cudaStream_t s, float *param, const float *grad, float *buf, size_t n, float lr,
                           float momentum, float wd, int nesterov, const float *scale)
{
    return sz_cuda_sgd_any(s, param, NULL, grad, SZ_CUDA_F32, buf, n, lr, momentum, wd, nesterov, scale, NULL, 0);
}
