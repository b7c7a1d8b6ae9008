/* kernels/cuda/softmax_xent.cu — CUDA twin of kernels/softmax_xent.c (fused softmax +
 * cross-entropy over the real vocabulary V of rows padded to Vp; max started at -10000 as the CPU;
 * padded columns get probability 0) and the per-row mean squared error (kernels/mse.c). One block per
 * row; the row's max and sums are fixed block trees. The backward kernels write their gradient.
 * The native bf16 path (as sz_k_softmax_xent_bwd_mx and sz_k_softmax_xent_fused_mx): bf16 dlogits,
 * and the fused forward + backward in place on bf16 logits: fp32 math from the widened row (max,
 * exponentials, sum as the fp32 kernel, the exponentials recomputed from the unchanged logits in the
 * last pass rather than kept: a Vp-float row does not fit in shared memory), fp32 losses, the row
 * overwritten with its gradient rounded once. */
#include <math.h>
#include "sz_cuda_mx.cuh"

#define SZ_SX_THREADS 512

__global__ static void __launch_bounds__(SZ_SX_THREADS)
    softmax_xent_fwd_k(float *probs, float *losses, const float *logits, const int *targets, int V, int Vp)
{
    __shared__ float red[32];
    int n = blockIdx.x;
    const float *l = logits + (size_t)n * Vp;
    float *p = probs + (size_t)n * Vp;
    float mx = -10000.0f;
    for (int i = threadIdx.x; i < V; i += SZ_SX_THREADS)
        mx = fmaxf(mx, l[i]);
    mx = sz_block_max(mx, red);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += SZ_SX_THREADS) {
        float e = sz_d_expf(l[i] - mx);
        p[i] = e;
        sum += e;
    }
    sum = sz_block_sum(sum, red);
    for (int i = threadIdx.x; i < Vp; i += SZ_SX_THREADS) {
        if (i < V)
            p[i] /= sum; /* the thread that wrote it */
        else
            p[i] = 0.0f;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        losses[n] = -logf(p[targets[n]]);
}

__global__ static void softmax_xent_bwd_k(float *dlogits, const float *probs, const int *targets, const float *dloss,
                                          float dloss_all, int N, int V, int Vp)
{
    size_t total = (size_t)N * Vp;
    SZ_GRID_STRIDE(i, total) {
        size_t n = i / Vp;
        int v = (int)(i % Vp);
        float g = dloss ? dloss[n] : dloss_all;
        dlogits[i] = v < V ? (probs[i] - (v == targets[n] ? 1.0f : 0.0f)) * g : 0.0f;
    }
}

/* The bf16 dlogits of softmax_xent_bwd_k: the same fp32 value, rounded once. */
__global__ static void softmax_xent_bwd_bf16_k(uint16_t *dlogits, const float *probs, const int *targets,
                                               const float *dloss, float dloss_all, int N, int V, int Vp)
{
    size_t total = (size_t)N * Vp;
    SZ_GRID_STRIDE(i, total) {
        size_t n = i / Vp;
        int v = (int)(i % Vp);
        float g = dloss ? dloss[n] : dloss_all;
        dlogits[i] = v < V ? sz_d_f2h((probs[i] - (v == targets[n] ? 1.0f : 0.0f)) * g) : (uint16_t)0;
    }
}

/* One block per row of bf16 logits, in place: max and sum of exponentials (softmax_xent_fwd_k's
 * trees), then each thread its own columns: e recomputed (the same bits: the logits are unchanged
 * until this thread overwrites them, and only it reads them), the loss by the thread holding the
 * target column (before it overwrites it), the gradient (e / sum - onehot) * g rounded once. */
__global__ static void __launch_bounds__(SZ_SX_THREADS)
    softmax_xent_fused_bf16_k(uint16_t *logits, float *losses, const int *targets, float g, int V, int Vp)
{
    __shared__ float red[32];
    int n = blockIdx.x, ix = targets[n];
    uint16_t *l = logits + (size_t)n * Vp;
    float mx = -10000.0f;
    for (int i = threadIdx.x; i < V; i += SZ_SX_THREADS)
        mx = fmaxf(mx, sz_d_h2f(l[i]));
    mx = sz_block_max(mx, red);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += SZ_SX_THREADS)
        sum += sz_d_expf(sz_d_h2f(l[i]) - mx);
    sum = sz_block_sum(sum, red);
    for (int i = threadIdx.x; i < Vp; i += SZ_SX_THREADS) {
        if (i >= V) {
            l[i] = 0;
            continue;
        }
        float p = sz_d_expf(sz_d_h2f(l[i]) - mx) / sum;
        if (i == ix)
            losses[n] = -logf(p);
        l[i] = sz_d_f2h((p - (i == ix ? 1.0f : 0.0f)) * g);
    }
}

/* One thread per row, the row summed in double in column order: the CPU's bits. */
__global__ static void mse_fwd_k(float *losses, const float *pred, const float *target, int N, int C)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N)
        return;
    const float *p = pred + (size_t)n * C, *t = target + (size_t)n * C;
    double s = 0.0;
    for (int c = 0; c < C; c++) {
        double e = (double)p[c] - (double)t[c];
        s += e * e;
    }
    losses[n] = (float)(s / C);
}

__global__ static void mse_bwd_k(float *dpred, const float *pred, const float *target, float k, size_t total)
{
    SZ_GRID_STRIDE(i, total) dpred[i] = k * (pred[i] - target[i]);
}

extern "C" int sz_cuda_softmax_xent_fwd(cudaStream_t s, float *probs, float *losses, const float *logits,
                                        const int *targets, int N, int V, int Vp)
{
    if (N <= 0)
        return 0;
    if (V <= 0 || V > Vp)
        return (int)cudaErrorInvalidValue;
    softmax_xent_fwd_k<<<(unsigned)N, SZ_SX_THREADS, 0, s>>>(probs, losses, logits, targets, V, Vp);
    return sz_launch_rc();
}

extern "C" int sz_cuda_softmax_xent_bwd(cudaStream_t s, float *dlogits, const float *probs, const int *targets,
                                        const float *dloss, float dloss_all, int N, int V, int Vp)
{
    size_t total = (size_t)(N > 0 ? N : 0) * (size_t)(Vp > 0 ? Vp : 0);
    if (!total)
        return 0;
    softmax_xent_bwd_k<<<sz_blocks(total, 256), 256, 0, s>>>(dlogits, probs, targets, dloss, dloss_all, N, V, Vp);
    return sz_launch_rc();
}

extern "C" int sz_cuda_mse_fwd(cudaStream_t s, float *losses, const float *pred, const float *target, int N, int C)
{
    if (N <= 0 || C <= 0)
        return 0;
    mse_fwd_k<<<(unsigned)((N + 127) / 128), 128, 0, s>>>(losses, pred, target, N, C);
    return sz_launch_rc();
}

extern "C" int sz_cuda_mse_bwd(cudaStream_t s, float *dpred, const float *pred, const float *target, float scale,
                               int N, int C)
{
    size_t total = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
    if (!total)
        return 0;
    float k = 2.0f * scale / (float)C; /* as the CPU, on the host */
    mse_bwd_k<<<sz_blocks(total, 256), 256, 0, s>>>(dpred, pred, target, k, total);
    return sz_launch_rc();
}

extern "C" int sz_cuda_softmax_xent_bwd_mx(cudaStream_t s, void *dlogits, int dt, const float *probs, const int *targets,
                                           const float *dloss, float dloss_all, int N, int V, int Vp)
{
    if (dt != SZ_CUDA_BF16)
        return sz_cuda_softmax_xent_bwd(s, (float *)dlogits, probs, targets, dloss, dloss_all, N, V, Vp);
    size_t total = (size_t)(N > 0 ? N : 0) * (size_t)(Vp > 0 ? Vp : 0);
    if (!total)
        return 0;
    softmax_xent_bwd_bf16_k<<<sz_blocks(total, 256), 256, 0, s>>>((uint16_t *)dlogits, probs, targets, dloss,
                                                                    dloss_all, N, V, Vp);
    return sz_launch_rc();
}

extern "C" int sz_cuda_softmax_xent_fused_bf16(cudaStream_t s, uint16_t *logits, float *losses, const int *targets,
                                               float g, int N, int V, int Vp)
{
    if (N <= 0)
        return 0;
    if (V <= 0 || V > Vp)
        return (int)cudaErrorInvalidValue;
    softmax_xent_fused_bf16_k<<<(unsigned)N, SZ_SX_THREADS, 0, s>>>(logits, losses, targets, g, V, Vp);
    return sz_launch_rc();
}
