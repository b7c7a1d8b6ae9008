/* kernels/cuda/sz_cuda_mx.cuh — typed loads and stores for the native bf16 path's CUDA
 * kernels (attention.cu, elementwise.cu, rope.cu, softmax_xent.cu): an operand is float (fp32) or
 * uint16_t (bf16, widened exactly; a store rounds once to nearest even with sz_d_f2h, the CPU's
 * sz_f32_to_bf16_1 bits), chosen by the pointer type in templated kernels or by a run-time dtype
 * (SZ_CUDA_F32 / SZ_CUDA_BF16) in the elementwise ones. A destination that accumulates becomes
 * round(f32(dst) + contribution) as the CPU's _mx kernels (sz_accx); a "set" one (a folded
 * sz_op_zero, sz_task_sets) takes the contribution alone, without reading dst (so -0.0 stays -0.0,
 * as the CPU's _set kernels). Private to kernels/cuda. */
#ifndef SZ_CUDA_MX_CUH
#define SZ_CUDA_MX_CUH

#include "sz_cuda_common.cuh"

/* The SZ_K_SET_* bits of sz_kernels.h (not included here: it is the CPU kernels' header). */
#define SZ_MX_SET_A 1
#define SZ_MX_SET_B 2

__device__ __forceinline__ float sz_mx_get(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float sz_mx_get(const uint16_t *p, size_t i) { return sz_d_h2f(p[i]); }
__device__ __forceinline__ void sz_mx_put(float *p, size_t i, float x) { p[i] = x; }
__device__ __forceinline__ void sz_mx_put(uint16_t *p, size_t i, float x) { p[i] = sz_d_f2h(x); }
/* p[i] (+)= x in p's type: set: p[i] = x (p unread); else p[i] = p[i] + x, rounded once for bf16. */
template <typename T> __device__ __forceinline__ void sz_mx_acc(T *p, size_t i, float x, int set)
{
    sz_mx_put(p, i, set ? x : sz_mx_get(p, i) + x);
}

/* The same with the type a run-time dtype (0 fp32, 1 bf16): uniform across a launch, so the branch
 * costs nothing measurable next to the memory traffic. */
__device__ __forceinline__ void sz_mx_acc_dt(void *p, int dt, size_t i, float x, int set)
{
    if (dt)
        sz_mx_acc((uint16_t *)p, i, x, set);
    else
        sz_mx_acc((float *)p, i, x, set);
}

#endif /* SZ_CUDA_MX_CUH */
