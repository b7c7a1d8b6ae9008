/* kernels/cuda/optimizer.cu — CUDA twins of kernels/adamw.c (AdamW fp32, and mixed:
 * bf16 gradients onto the fp32 master, bf16 parameters rounded from it) and SGD with momentum.
 * The bias corrections are computed on the host with powf exactly as the CPU. The clip factor is
 * read from device memory (the clip_scale task writes it there). With a norm output, each block
 * updates one chunk of SZ_SUMSQ_CHUNK elements and, in the same pass, sums that chunk's squared
 * gradients in double by a fixed tree; a second kernel adds the chunk sums in chunk order (as
 * sz_cuda_sumsq, so the fused norm equals the separate one bitwise). */
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

/* One block per chunk; part[c] = the chunk's sum of squared (unscaled) gradients if part. */
__global__ static void __launch_bounds__(SZ_OPT_THREADS)
    adamw_k(float *param, uint16_t *param_bf16, const void *grad, int gdt, float *m, float *v, size_t n,
            sz_adam_args a, const float *scale, double *part)
{
    __shared__ double red[32];
    size_t lo = (size_t)blockIdx.x * SZ_CHUNK, hi = lo + SZ_CHUNK < n ? lo + SZ_CHUNK : n;
    float sc = scale ? *scale : 1.0f;
    double ss = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += SZ_OPT_THREADS) {
        float g = sz_d_ld(grad, gdt, i);
        float p = sz_adamw_1(param[i], g, &m[i], &v[i], a, sc);
        param[i] = p;
        if (param_bf16)
            param_bf16[i] = sz_d_f2h(p);
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
        double g = sz_d_ld(x, dt, i);
        ss += g * g;
    }
    ss = sz_block_sum(ss, red);
    if (threadIdx.x == 0)
        part[blockIdx.x] = ss;
}

/* One thread: the chunk sums in chunk order, written (acc 0) or added (acc 1) as a float. */
__global__ static void sumsq_final_k(float *out, const double *part, size_t nchunks, int acc)
{
    double s = 0.0;
    for (size_t c = 0; c < nchunks; c++)
        s += part[c];
    *out = acc ? *out + (float)s : (float)s;
}

static size_t sz_nchunks(size_t n) { return (n + SZ_CHUNK - 1) / SZ_CHUNK; }

/* Enqueue the per-chunk kernel (through launch(part)) and, with out, the final sum. */
template <typename L> static int sz_chunked(cudaStream_t s, size_t n, float *out, int acc, L launch)
{
    double *part = NULL;
    int rc;
    if (out && (rc = (int)cudaMallocAsync((void **)&part, sz_nchunks(n) * sizeof(double), s)))
        return rc;
    launch(part);
    rc = sz_launch_rc();
    if (out) {
        if (!rc) {
            sumsq_final_k<<<1, 1, 0, s>>>(out, part, sz_nchunks(n), acc);
            rc = sz_launch_rc();
        }
        int rf = (int)cudaFreeAsync(part, s);
        rc = rc ? rc : rf;
    }
    return rc;
}

static int sz_adamw_any(cudaStream_t s, float *param, uint16_t *pbf16, const void *grad, int gdt, float *m, float *v,
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
        adamw_k<<<blocks, SZ_OPT_THREADS, 0, s>>>(param, pbf16, grad, gdt, m, v, n, a, scale, part);
    });
}

extern "C" int sz_cuda_adamw(cudaStream_t s, float *param, const float *grad, float *m, float *v, size_t n, int t,
                             float lr, float beta1, float beta2, float eps, float wd, const float *scale,
                             float *sumsq, int acc)
{
    return sz_adamw_any(s, param, NULL, grad, SZ_CUDA_F32, m, v, n, t, lr, beta1, beta2, eps, wd, scale, sumsq, acc);
}

extern "C" int sz_cuda_adamw_mixed(cudaStream_t s, float *master, uint16_t *param_bf16, const uint16_t *grad,
                                   float *m, float *v, size_t n, int t, float lr, float beta1, float beta2,
                                   float eps, float wd, const float *scale, float *sumsq, int acc)
{
    return sz_adamw_any(s, master, param_bf16, grad, SZ_CUDA_BF16, m, v, n, t, lr, beta1, beta2, eps, wd, scale,
                        sumsq, acc);
}

extern "C" int sz_cuda_sumsq(cudaStream_t s, float *out, const void *x, int dt, int64_t n, int acc)
{
    if (n <= 0)
        return sz_cuda_zero(s, out, acc ? 0 : sizeof(float));
    unsigned blocks = (unsigned)sz_nchunks((size_t)n);
    return sz_chunked(s, (size_t)n, out, acc,
                      [&](double *part) { sumsq_k<<<blocks, SZ_OPT_THREADS, 0, s>>>(x, dt, (size_t)n, part); });
}

/* SGD: grad fp32 or bf16 (gdt); buf NULL without momentum; param_bf16 (mixed) the rounded copy. */
__global__ static void sgd_k(float *p, uint16_t *p_bf16, const void *grad, int gdt, float *buf, size_t n, float lr,
                             float mom, float wd, int nesterov, const float *scale)
{
    float sc = scale ? *scale : 1.0f;
    SZ_GRID_STRIDE(i, n) {
        float g = sz_d_ld(grad, gdt, i) * sc + wd * p[i];
        float d = g;
        if (buf) {
            float b = mom * buf[i] + g;
            buf[i] = b;
            d = nesterov ? g + mom * b : b;
        }
        float q = p[i] - lr * d;
        p[i] = q;
        if (p_bf16)
            p_bf16[i] = sz_d_f2h(q);
    }
}

extern "C" int sz_cuda_sgd_any(cudaStream_t s, float *param, uint16_t *param_bf16, const void *grad, int gdt,
                               float *buf, size_t n, float lr, float momentum, float wd, int nesterov,
                               const float *scale)
{
    if (!n)
        return 0;
    sgd_k<<<sz_blocks(n, 256), 256, 0, s>>>(param, param_bf16, grad, gdt, buf, n, lr, momentum, wd, nesterov, scale);
    return sz_launch_rc();
}

extern "C" int sz_cuda_sgd(cudaStream_t s, float *param, const float *grad, float *buf, size_t n, float lr,
                           float momentum, float wd, int nesterov, const float *scale)
{
    return sz_cuda_sgd_any(s, param, NULL, grad, SZ_CUDA_F32, buf, n, lr, momentum, wd, nesterov, scale);
}
