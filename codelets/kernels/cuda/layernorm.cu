/* codelets/kernels/cuda/layernorm.cu — CUDA twins of kernels/layernorm.c (LayerNorm, eps 1e-5,
 * biased variance, mean and rstd saved) and of the LLaMA-style RMSNorm. One warp per row: each
 * lane sums its columns in order, then a fixed butterfly tree. The weight and bias gradients sum
 * over rows: one thread per column adds rows 0..N-1 in order, as the CPU. */
#include <math.h>
#include "sz_cuda_common.cuh"

#define SZ_ROWS_PER_BLOCK 4 /* warps per block, one row each */

__global__ static void layernorm_fwd_k(float *out, float *mean, float *rstd, const float *inp,
                                       const float *w, const float *b, int N, int C)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    const float *x = inp + (size_t)n * C;
    float *o = out + (size_t)n * C;
    float sm = 0.0f;
    for (int i = lane; i < C; i += 32)
        sm += x[i];
    float m = sz_warp_sum(sm) / C;
    float sv = 0.0f;
    for (int i = lane; i < C; i += 32)
        sv += (x[i] - m) * (x[i] - m);
    float v = sz_warp_sum(sv) / C;
    float s = 1.0f / sqrtf(v + 1e-5f);
    for (int i = lane; i < C; i += 32)
        o[i] = (s * (x[i] - m)) * w[i] + b[i];
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = s;
    }
}

__global__ static void layernorm_bwd_dinp_k(float *dinp, const float *dout, const float *inp, const float *w,
                                            const float *mean, const float *rstd, int N, int C)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
    float *di = dinp + (size_t)n * C;
    float m = mean[n], s = rstd[n], a = 0.0f, bsum = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float dn = w[i] * d[i];
        a += dn;
        bsum += dn * ((x[i] - m) * s);
    }
    float dnorm_mean = sz_warp_sum(a) / C, dnorm_norm_mean = sz_warp_sum(bsum) / C;
    for (int i = lane; i < C; i += 32) {
        float norm_i = (x[i] - m) * s;
        float dval = w[i] * d[i] - dnorm_mean - norm_i * dnorm_norm_mean;
        di[i] += dval * s;
    }
}

/* thread c: dbias[c] += sum_n dout[n,c]; dweight[c] += sum_n ((x - mean) * rstd) * dout, rows in
 * order. For RMSNorm (mean NULL, dbias NULL) the normalised value is x * rstd. */
__global__ static void norm_bwd_params_k(float *dweight, float *dbias, const float *dout, const float *inp,
                                         const float *mean, const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float dw = dweight[c], db = dbias ? dbias[c] : 0.0f;
    for (int n = 0; n < N; n++) {
        float d = dout[(size_t)n * C + c], x = inp[(size_t)n * C + c];
        if (mean) {
            db += d;
            dw += ((x - mean[n]) * rstd[n]) * d;
        } else {
            dw += (x * rstd[n]) * d;
        }
    }
    dweight[c] = dw;
    if (dbias)
        dbias[c] = db;
}

__global__ static void rmsnorm_fwd_k(float *out, float *rstd, const float *inp, const float *w, int N, int C,
                                     float eps)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    const float *x = inp + (size_t)n * C;
    float *o = out + (size_t)n * C;
    float ss = 0.0f;
    for (int i = lane; i < C; i += 32)
        ss += x[i] * x[i];
    float r = 1.0f / sqrtf(sz_warp_sum(ss) / C + eps);
    for (int i = lane; i < C; i += 32)
        o[i] = (x[i] * r) * w[i];
    if (lane == 0)
        rstd[n] = r;
}

__global__ static void rmsnorm_bwd_dinp_k(float *dinp, const float *dout, const float *inp, const float *w,
                                          const float *rstd, int N, int C)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
    float *di = dinp + (size_t)n * C;
    float r = rstd[n], a = 0.0f;
    for (int i = lane; i < C; i += 32)
        a += d[i] * w[i] * x[i];
    float k = r * r * r * sz_warp_sum(a) / C;
    for (int i = lane; i < C; i += 32)
        di[i] += r * w[i] * d[i] - k * x[i];
}

static unsigned sz_row_blocks(int N) { return (unsigned)((N + SZ_ROWS_PER_BLOCK - 1) / SZ_ROWS_PER_BLOCK); }

extern "C" int sz_cuda_layernorm_fwd(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp,
                                     const float *weight, const float *bias, int N, int C)
{
    if (N <= 0 || C <= 0)
        return 0;
    layernorm_fwd_k<<<sz_row_blocks(N), 32 * SZ_ROWS_PER_BLOCK, 0, s>>>(out, mean, rstd, inp, weight, bias, N, C);
    return sz_launch_rc();
}

extern "C" int sz_cuda_layernorm_bwd(cudaStream_t s, float *dinp, float *dweight, float *dbias, const float *dout,
                                     const float *inp, const float *weight, const float *mean, const float *rstd,
                                     int N, int C)
{
    if (N <= 0 || C <= 0)
        return 0;
    layernorm_bwd_dinp_k<<<sz_row_blocks(N), 32 * SZ_ROWS_PER_BLOCK, 0, s>>>(dinp, dout, inp, weight, mean, rstd,
                                                                              N, C);
    int rc = sz_launch_rc();
    if (rc)
        return rc;
    norm_bwd_params_k<<<(unsigned)((C + 63) / 64), 64, 0, s>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
    return sz_launch_rc();
}

extern "C" int sz_cuda_rmsnorm_fwd(cudaStream_t s, float *out, float *rstd, const float *inp, const float *weight,
                                   int N, int C, float eps)
{
    if (N <= 0 || C <= 0)
        return 0;
    rmsnorm_fwd_k<<<sz_row_blocks(N), 32 * SZ_ROWS_PER_BLOCK, 0, s>>>(out, rstd, inp, weight, N, C, eps);
    return sz_launch_rc();
}

extern "C" int sz_cuda_rmsnorm_bwd(cudaStream_t s, float *dinp, float *dweight, const float *dout, const float *inp,
                                   const float *weight, const float *rstd, int N, int C)
{
    if (N <= 0 || C <= 0)
        return 0;
    int rc = 0;
    if (dinp) {
        rmsnorm_bwd_dinp_k<<<sz_row_blocks(N), 32 * SZ_ROWS_PER_BLOCK, 0, s>>>(dinp, dout, inp, weight, rstd, N, C);
        if ((rc = sz_launch_rc()))
            return rc;
    }
    if (!dweight)
        return 0;
    norm_bwd_params_k<<<(unsigned)((C + 63) / 64), 64, 0, s>>>(dweight, NULL, dout, inp, NULL, rstd, N, C);
    return sz_launch_rc();
}
