/* kernels/cuda/elementwise.cu — CUDA twins of the elementwise kernels: GELU (tanh form,
 * kernels/gelu.c's formula through 1/(1+e^(-2u)) with the CPU's exp polynomial), residual
 * (kernels/residual.c), SiLU (kernels/silu.c), the elementwise product (kernels/mul.c) and SwiGLU
 * (kernels/swiglu.c: silu(gate) * up fused, with the device's expf where the CPU calls libm's, so
 * the two agree to rounding, not bitwise). Backward kernels add.
 *
 * The native bf16 path's variants (the _mx entry points, as the CPU's sz_k_*_mx kernels of
 * kernels/bf16_act.c): the inputs the formulas read (x, a, b: a matmul's fp32 outputs) stay fp32;
 * out, dout and the gradients may be bf16 (run-time dtypes, uniform per launch), widened exactly
 * and rounded once on store; a bf16 gradient that accumulates becomes round(f32(g) + contribution).
 * GELU's backward rounds the product gelu'(x) * dout before adding it (__fmul_rn: never contracted
 * into an FMA), as the CPU's bf16 GELU does. `set` (GELU's dinp, residual's da and db: a folded
 * sz_op_zero) writes the contribution without reading the gradient. All-fp32 calls without set go
 * to the fp32 kernels above (their bits unchanged). */
#include <math.h>
#include "sz_cuda_mx.cuh"

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

/* SwiGLU's per-element math, kernels/swiglu.c's expressions (swiglu_1, swiglu_bwd_1) in the same
 * order; expf is CUDA's (max 2 ulp), libm's on the CPU. One copy for the fp32 and the typed kernels. */
static __device__ __forceinline__ float swiglu_1(float g, float u) { return g / (1.0f + expf(-g)) * u; }
static __device__ __forceinline__ void swiglu_bwd_1(float *dg, float *du, float d, float g, float u)
{
    float s = 1.0f / (1.0f + expf(-g));
    *dg += d * u * (s * (1.0f + g * (1.0f - s)));
    *du += d * (g * s);
}

__global__ static void swiglu_fwd_k(float *out, const float *gate, const float *up, size_t n)
{
    SZ_GRID_STRIDE(i, n) out[i] = swiglu_1(gate[i], up[i]);
}

__global__ static void swiglu_bwd_k(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                    size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float dg = dgate[i], du = dup[i];
        swiglu_bwd_1(&dg, &du, dout[i], gate[i], up[i]);
        dgate[i] = dg;
        dup[i] = du;
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

/* ---- the native bf16 path's variants ---- */

__global__ static void gelu_fwd_mx_k(void *out, int out_dt, const float *inp, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float g = 1.0f / (1.0f + sz_d_expf(-2.0f * SZ_GELU_S * (x + cube)));
        sz_d_st(out, out_dt, i, x * g);
    }
}

__global__ static void gelu_bwd_mx_k(void *dinp, int dinp_dt, const float *inp, const void *dout, int dout_dt, size_t n,
                                     int set)
{
    SZ_GRID_STRIDE(i, n) {
        float v = __fmul_rn(gelu_local_grad(inp[i]), sz_d_ld(dout, dout_dt, i));
        sz_mx_acc_dt(dinp, dinp_dt, i, v, set);
    }
}

__global__ static void silu_fwd_mx_k(void *out, int out_dt, const float *inp, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float x = inp[i];
        sz_d_st(out, out_dt, i, x / (1.0f + sz_d_expf(-x)));
    }
}

/* The fp32 kernel's expression on the widened values (g + d * local, contracted or not as nvcc
 * contracts silu_bwd_k's), the sum rounded once to a bf16 dinp. */
__global__ static void silu_bwd_mx_k(void *dinp, int dinp_dt, const float *inp, const void *dout, int dout_dt, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float x = inp[i];
        float sg = 1.0f / (1.0f + sz_d_expf(-x));
        float g = sz_d_ld(dinp, dinp_dt, i);
        g += sz_d_ld(dout, dout_dt, i) * (sg * (1.0f + x * (1.0f - sg)));
        sz_d_st(dinp, dinp_dt, i, g);
    }
}

__global__ static void mul_fwd_mx_k(void *out, int out_dt, const float *a, const float *b, size_t n)
{
    SZ_GRID_STRIDE(i, n) sz_d_st(out, out_dt, i, a[i] * b[i]);
}

__global__ static void mul_bwd_mx_k(void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt,
                                    const float *a, const float *b, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float d = sz_d_ld(dout, dout_dt, i);
        if (da) {
            float g = sz_d_ld(da, da_dt, i);
            g += d * b[i];
            sz_d_st(da, da_dt, i, g);
        }
        if (db) {
            float g = sz_d_ld(db, db_dt, i);
            g += d * a[i];
            sz_d_st(db, db_dt, i, g);
        }
    }
}

__global__ static void swiglu_fwd_mx_k(void *out, int out_dt, const float *gate, const float *up, size_t n)
{
    SZ_GRID_STRIDE(i, n) sz_d_st(out, out_dt, i, swiglu_1(gate[i], up[i]));
}

/* The fp32 kernel's arithmetic on the widened values, each bf16 gradient rounded once on store. */
__global__ static void swiglu_bwd_mx_k(void *dgate, int dgate_dt, void *dup, int dup_dt, const void *dout,
                                       int dout_dt, const float *gate, const float *up, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float dg = sz_d_ld(dgate, dgate_dt, i), du = sz_d_ld(dup, dup_dt, i);
        swiglu_bwd_1(&dg, &du, sz_d_ld(dout, dout_dt, i), gate[i], up[i]);
        sz_d_st(dgate, dgate_dt, i, dg);
        sz_d_st(dup, dup_dt, i, du);
    }
}

__global__ static void residual_bwd_mx_k(void *da, int da_dt, void *db, int db_dt, const float *dout, size_t n,
                                         int set_a, int set_b)
{
    SZ_GRID_STRIDE(i, n) {
        float d = dout[i];
        sz_mx_acc_dt(da, da_dt, i, d, set_a);
        sz_mx_acc_dt(db, db_dt, i, d, set_b);
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
extern "C" int sz_cuda_swiglu_fwd(cudaStream_t s, float *out, const float *gate, const float *up, size_t n)
{
    SZ_EW_LAUNCH(swiglu_fwd_k, n, out, gate, up, n);
}
extern "C" int sz_cuda_swiglu_bwd(cudaStream_t s, float *dgate, float *dup, const float *dout, const float *gate,
                                  const float *up, size_t n)
{
    SZ_EW_LAUNCH(swiglu_bwd_k, n, dgate, dup, dout, gate, up, n);
}
extern "C" int sz_cuda_residual_fwd(cudaStream_t s, float *out, const float *a, const float *b, size_t n)
{
    SZ_EW_LAUNCH(residual_fwd_k, n, out, a, b, n);
}
extern "C" int sz_cuda_residual_bwd(cudaStream_t s, float *da, float *db, const float *dout, size_t n)
{
    SZ_EW_LAUNCH(residual_bwd_k, n, da, db, dout, n);
}

extern "C" int sz_cuda_gelu_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *inp, size_t n)
{
    if (out_dt != SZ_CUDA_BF16)
        return sz_cuda_gelu_fwd(s, (float *)out, inp, n);
    SZ_EW_LAUNCH(gelu_fwd_mx_k, n, out, out_dt, inp, n);
}
extern "C" int sz_cuda_gelu_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const float *inp, const void *dout,
                                   int dout_dt, size_t n, int set)
{
    int sd = (set & SZ_MX_SET_A) ? 1 : 0;
    if (dinp_dt != SZ_CUDA_BF16 && dout_dt != SZ_CUDA_BF16 && !sd)
        return sz_cuda_gelu_bwd(s, (float *)dinp, inp, (const float *)dout, n);
    SZ_EW_LAUNCH(gelu_bwd_mx_k, n, dinp, dinp_dt, inp, dout, dout_dt, n, sd);
}
extern "C" int sz_cuda_silu_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *inp, size_t n)
{
    if (out_dt != SZ_CUDA_BF16)
        return sz_cuda_silu_fwd(s, (float *)out, inp, n);
    SZ_EW_LAUNCH(silu_fwd_mx_k, n, out, out_dt, inp, n);
}
extern "C" int sz_cuda_silu_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const float *inp, const void *dout,
                                   int dout_dt, size_t n)
{
    if (dinp_dt != SZ_CUDA_BF16 && dout_dt != SZ_CUDA_BF16)
        return sz_cuda_silu_bwd(s, (float *)dinp, inp, (const float *)dout, n);
    SZ_EW_LAUNCH(silu_bwd_mx_k, n, dinp, dinp_dt, inp, dout, dout_dt, n);
}
extern "C" int sz_cuda_mul_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *a, const float *b, size_t n)
{
    if (out_dt != SZ_CUDA_BF16)
        return sz_cuda_mul_fwd(s, (float *)out, a, b, n);
    SZ_EW_LAUNCH(mul_fwd_mx_k, n, out, out_dt, a, b, n);
}
extern "C" int sz_cuda_mul_bwd_mx(cudaStream_t s, void *da, int da_dt, void *db, int db_dt, const void *dout,
                                  int dout_dt, const float *a, const float *b, size_t n)
{
    if (da_dt != SZ_CUDA_BF16 && db_dt != SZ_CUDA_BF16 && dout_dt != SZ_CUDA_BF16)
        return sz_cuda_mul_bwd(s, (float *)da, (float *)db, (const float *)dout, a, b, n);
    SZ_EW_LAUNCH(mul_bwd_mx_k, n, da, da_dt, db, db_dt, dout, dout_dt, a, b, n);
}
extern "C" int sz_cuda_residual_bwd_mx(cudaStream_t s, void *da, int da_dt, void *db, int db_dt, const float *dout,
                                       size_t n, int set)
{
    int sa = (set & SZ_MX_SET_A) ? 1 : 0, sb = (set & SZ_MX_SET_B) ? 1 : 0;
    if (da_dt != SZ_CUDA_BF16 && db_dt != SZ_CUDA_BF16 && !sa && !sb)
        return sz_cuda_residual_bwd(s, (float *)da, (float *)db, dout, n);
    SZ_EW_LAUNCH(residual_bwd_mx_k, n, da, da_dt, db, db_dt, dout, n, sa, sb);
}
extern "C" int sz_cuda_swiglu_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *gate, const float *up,
                                     size_t n)
{
    if (out_dt != SZ_CUDA_BF16)
        return sz_cuda_swiglu_fwd(s, (float *)out, gate, up, n);
    SZ_EW_LAUNCH(swiglu_fwd_mx_k, n, out, out_dt, gate, up, n);
}
extern "C" int sz_cuda_swiglu_bwd_mx(cudaStream_t s, void *dgate, int dgate_dt, void *dup, int dup_dt,
                                     const void *dout, int dout_dt, const float *gate, const float *up, size_t n)
{
    if (dgate_dt != SZ_CUDA_BF16 && dup_dt != SZ_CUDA_BF16 && dout_dt != SZ_CUDA_BF16)
        return sz_cuda_swiglu_bwd(s, (float *)dgate, (float *)dup, (const float *)dout, gate, up, n);
    SZ_EW_LAUNCH(swiglu_bwd_mx_k, n, dgate, dgate_dt, dup, dup_dt, dout, dout_dt, gate, up, n);
}
