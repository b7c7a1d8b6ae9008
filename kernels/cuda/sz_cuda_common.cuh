/* kernels/cuda/sz_cuda_common.cuh — device helpers shared by the .cu kernels: bf16
 * rounding with the CPU's exact bits, the CPU's polynomial exp, deterministic (fixed-tree) warp and
 * block reductions, launch helpers. Private to kernels/cuda. */
#ifndef SZ_CUDA_COMMON_CUH
#define SZ_CUDA_COMMON_CUH

#include <math.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "sz_cuda_kernels.h"

/* fp32 -> bf16 round to nearest even, NaN kept a quiet NaN: the same bits as sz_f32_to_bf16_1. */
__device__ __forceinline__ uint16_t sz_d_f2h(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float sz_d_h2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* Element i of an fp32 (dt 0) or bf16 (dt 1) array as fp32. */
__device__ __forceinline__ float sz_d_ld(const void *p, int dt, size_t i)
{
    return dt ? sz_d_h2f(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
__device__ __forceinline__ void sz_d_st(void *p, int dt, size_t i, float x)
{
    if (dt)
        ((uint16_t *)p)[i] = sz_d_f2h(x);
    else
        ((float *)p)[i] = x;
}

/* fp16 (IEEE binary16) <-> fp32 with the CPU's bits (sz_k_f16_to_f32_1, sz_k_f32_to_f16_1 of
 * kernels/sz_kernels.h, the same integer math): widening exact, a NaN quieted keeping its sign and
 * payload; rounding to nearest even, 65520 and above (in magnitude) to inf, subnormals rounded to
 * nearest even, a NaN quieted keeping its sign and top 10 payload bits. */
__device__ __forceinline__ float sz_d_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, u;
    if (e == 0u) /* zero or subnormal: m 2^-24, exact (a normal fp32) */
        u = s | __float_as_uint((float)(int32_t)m * 5.9604644775390625e-8f);
    else if (e == 31u) /* inf, or a NaN quieted */
        u = s | 0x7F800000u | (m << 13) | (m ? 0x00400000u : 0u);
    else
        u = s | ((e + 112u) << 23) | (m << 13);
    return __uint_as_float(u);
}
__device__ __forceinline__ uint16_t sz_d_f32_to_f16(float f)
{
    uint32_t u = __float_as_uint(f), a = u & 0x7FFFFFFFu, s = (u >> 16) & 0x8000u;
    if (a >= 0x47800000u) /* 65536 and above, inf, NaN */
        return (uint16_t)(s | 0x7C00u | (a > 0x7F800000u ? 0x200u | ((a >> 13) & 0x3FFu) : 0u));
    if (a < 0x38800000u) { /* below 2^-14: the significand shifted right by k = 126 - e (14 .. 31) */
        uint32_t e = a >> 23, k = 126u - (e > 112u ? 112u : e < 95u ? 95u : e);
        uint32_t sig = (a & 0x007FFFFFu) | 0x00800000u;
        return (uint16_t)(s | ((sig + (1u << (k - 1u)) - 1u + ((sig >> k) & 1u)) >> k));
    }
    /* rebias, drop 13 bits rounding to nearest even; a carry steps the exponent, up to inf */
    return (uint16_t)(s | ((a - (112u << 23) + 0xFFFu + ((a >> 13) & 1u)) >> 13));
}

/* Element i of an fp32, bf16 or fp16 array (SZ_CUDA_F32 / _BF16 / _F16) as fp32, widened exactly;
 * a store rounding once to a 16-bit type. The kernels that meet fp16 storage (conversions, the
 * optimizers, the sum of squares, reduce-scatter's sum) use these; the compute kernels, which
 * take fp32 or bf16 only, keep sz_d_ld / sz_d_st. */
__device__ __forceinline__ float sz_d_ldx(const void *p, int dt, size_t i)
{
    return dt == SZ_CUDA_BF16  ? sz_d_h2f(((const uint16_t *)p)[i])
           : dt == SZ_CUDA_F16 ? sz_d_f16_to_f32(((const uint16_t *)p)[i])
                               : ((const float *)p)[i];
}
__device__ __forceinline__ void sz_d_stx(void *p, int dt, size_t i, float x)
{
    if (dt == SZ_CUDA_BF16)
        ((uint16_t *)p)[i] = sz_d_f2h(x);
    else if (dt == SZ_CUDA_F16)
        ((uint16_t *)p)[i] = sz_d_f32_to_f16(x);
    else
        ((float *)p)[i] = x;
}
static inline size_t sz_cuda_esize(int dt) { return dt == SZ_CUDA_F32 ? 4 : 2; }

/* The CPU's sz_expf (kernels/sz_kernels_impl.h) on the device: same range handling; the
 * polynomial may contract differently into FMAs, so values agree to ~1 ulp. */
__device__ __forceinline__ float sz_d_expf(float x)
{
    if (x != x)
        return x;
    if (x < -87.33654f)
        return 0.0f;
    if (x > 88.72283f)
        return __int_as_float(0x7F800000);
    float kf = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = (x - kf * 0.693145752f) - kf * 1.42860677e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int k = (int)kf, k1 = k / 2;
    return p * __int_as_float((k1 + 127) << 23) * __int_as_float((k - k1 + 127) << 23);
}

/* GELU, tanh form, with kernels/gelu.c's formula (sz_gelu_1, sz_gelu_grad_1 of sz_kernels_impl.h):
 * sqrtf(2/pi) as the CPU computes it (the double quotient rounded to float, then a correctly rounded
 * float square root), tanh through 1/(1+e^(-2u)) with the CPU's exp polynomial. Used by the matmul's
 * fused GELU epilogues (matmul.cu); elementwise.cu has the same expressions. */
#define SZ_D_GELU_S sqrtf((float)(2.0 / 3.14159265358979323846))
__device__ __forceinline__ float sz_d_gelu_g(float x)
{
    float cube = 0.044715f * x * x * x;
    return 1.0f / (1.0f + sz_d_expf(-2.0f * SZ_D_GELU_S * (x + cube)));
}
__device__ __forceinline__ float sz_d_gelu(float x) { return x * sz_d_gelu_g(x); }
__device__ __forceinline__ float sz_d_gelu_grad(float x)
{
    float g = sz_d_gelu_g(x);
    float sech2 = 4.0f * g * (1.0f - g);
    return g + x * 0.5f * sech2 * SZ_D_GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
}

/* Warp reductions by xor butterflies: a fixed tree, every lane gets the result. */
template <typename T> __device__ __forceinline__ T sz_warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
__device__ __forceinline__ float sz_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

/* Block reductions (blockDim.x a multiple of 32, at most 1024): warp trees, then warp 0 over the
 * warps' results; every thread gets the result. `sh` holds 32 values; the call synchronises. */
template <typename T> __device__ T sz_block_sum(T v, T *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = sz_warp_sum(v);
    __syncthreads(); /* sh may still be read by a previous reduction */
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    T r = lane < nw ? sh[lane] : (T)0;
    r = sz_warp_sum(r);
    return r;
}
__device__ __forceinline__ float sz_block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = sz_warp_max(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : -INFINITY;
    return sz_warp_max(r);
}

/* Grid size for n elements at `threads` per block, grid-stride loops beyond 65535*... blocks. */
static inline unsigned sz_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 1048576 ? 1048576 : b);
}
#define SZ_GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* The launch's error (0 = enqueued). */
static inline int sz_launch_rc(void) { return (int)cudaGetLastError(); }

#endif /* SZ_CUDA_COMMON_CUH */
