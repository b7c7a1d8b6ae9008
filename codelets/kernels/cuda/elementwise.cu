/* codelets/kernels/cuda/elementwise.cu — CUDA twins of the elementwise kernels: GELU (tanh form,
 * kernels/gelu.c's formula through 1/(1+e^(-2u)) with the CPU's exp polynomial), residual
 * (kernels/residual.c), SiLU (kernels/silu.c) and the elementwise product (kernels/mul.c).
 * Backward kernels add. */
#include <math.h>
#include "sz_cuda_common.cuh"

/* sqrtf(2/pi) as the CPU computes it: the double quotient rounded to float, then a correctly
 * rounded float square root (device sqrtf is IEEE by default). */
#define SZ_GELU_S sqrtf((float)(2.0 / 3.14159265358979323846))

__global__ static void gelu_fwd_k(float *out, const float *inp, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float g = 1.0f / (1.0f + sz_d_expf(-2.0f * SZ_GELU_S * (x + cube)));
        out[i] = x * g;
    }
}

/* GELU's derivative at x (llm.c's tanh form), the one expression both backward kernels use. */
__device__ static inline float gelu_local_grad(float x)
{
    float cube = 0.044715f * x * x * x;
    float g = 1.0f / (1.0f + sz_d_expf(-2.0f * SZ_GELU_S * (x + cube)));
    float sech2 = 4.0f * g * (1.0f - g);
    return g + x * 0.5f * sech2 * SZ_GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ static void gelu_bwd_k(float *dinp, const float *inp, const float *dout, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float local_grad = gelu_local_grad(inp[i]);
        dinp[i] += local_grad * dout[i];
    }
}

__global__ static void gelu_bwd_inplace_k(float *d, const float *inp, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float local_grad = gelu_local_grad(inp[i]);
        float acc = 0.0f; /* gelu_bwd_k's dinp, zeroed */
        acc += local_grad * d[i];
        d[i] = acc;
    }
}

__global__ static void silu_fwd_k(float *out, const float *inp, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float x = inp[i];
        out[i] = x / (1.0f + sz_d_expf(-x));
    }
}

__global__ static void silu_bwd_k(float *dinp, const float *inp, const float *dout, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float x = inp[i];
        float sg = 1.0f / (1.0f + sz_d_expf(-x));
        dinp[i] += dout[i] * (sg * (1.0f + x * (1.0f - sg)));
    }
}

__global__ static void mul_fwd_k(float *out, const float *a, const float *b, size_t n)
{
    SZ_GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

__global__ static void mul_bwd_k(float *da, float *db, const float *dout, const float *a, const float *b, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float d = dout[i];
        if (da)
            da[i] += d * b[i];
        if (db)
            db[i] += d * a[i];
    }
}

__global__ static void residual_fwd_k(float *out, const float *a, const float *b, size_t n)
{
    SZ_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ static void residual_bwd_k(float *da, float *db, const float *dout, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float d = dout[i];
        da[i] += d;
        db[i] += d;
    }
}

#define SZ_EW_LAUNCH(kernel, n, ...)                                       \
    do {                                                                   \
        if (!(n))                                                          \
            return 0;                                                      \
        kernel<<<sz_blocks((n), 256), 256, 0, s>>>(__VA_ARGS__);           \
        return sz_launch_rc();                                             \
    } while (0)

extern "C" int sz_cuda_gelu_fwd(cudaStream_t s, float *out, const float *inp, size_t n)
{
    SZ_EW_LAUNCH(gelu_fwd_k, n, out, inp, n);
}
extern "C" int sz_cuda_gelu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n)
{
    SZ_EW_LAUNCH(gelu_bwd_k, n, dinp, inp, dout, n);
}
extern "C" int sz_cuda_gelu_bwd_inplace(cudaStream_t s, float *d, const float *inp, size_t n)
{
    SZ_EW_LAUNCH(gelu_bwd_inplace_k, n, d, inp, n);
}
extern "C" int sz_cuda_silu_fwd(cudaStream_t s, float *out, const float *inp, size_t n)
{
    SZ_EW_LAUNCH(silu_fwd_k, n, out, inp, n);
}
extern "C" int sz_cuda_silu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n)
{
    SZ_EW_LAUNCH(silu_bwd_k, n, dinp, inp, dout, n);
}
extern "C" int sz_cuda_mul_fwd(cudaStream_t s, float *out, const float *a, const float *b, size_t n)
{
    SZ_EW_LAUNCH(mul_fwd_k, n, out, a, b, n);
}
extern "C" int sz_cuda_mul_bwd(cudaStream_t s, float *da, float *db, const float *dout, const float *a,
                               const float *b, size_t n)
{
    SZ_EW_LAUNCH(mul_bwd_k, n, da, db, dout, a, b, n);
}
extern "C" int sz_cuda_residual_fwd(cudaStream_t s, float *out, const float *a, const float *b, size_t n)
{
    SZ_EW_LAUNCH(residual_fwd_k, n, out, a, b, n);
}
extern "C" int sz_cuda_residual_bwd(cudaStream_t s, float *da, float *db, const float *dout, size_t n)
{
    SZ_EW_LAUNCH(residual_bwd_k, n, da, db, dout, n);
}
