/* swiglu.c — SwiGLU, LLaMA's MLP gate, fused: out = silu(gate) · up (silu(x) = x / (1 + e^(-x)),
 * with libm's expf, the formula the LLaMA model used as its own op) and its backward:
 * dgate += dout · up · s (1 + g (1 - s)), dup += dout · g s, s = σ(g). Elementwise with a fixed
 * static split, so the same bits whatever the thread count. The _mx variants (the native bf16
 * path's) take out / dgate / dup / dout as fp32 or bf16 each (gate and up, a matmul's fp32 outputs,
 * stay fp32): the fp32 formula on the widened values, each bf16 result rounded once (a bf16
 * gradient that accumulates becomes round(f32(g) + contribution)), so their bits are the fp32
 * kernel's on the widened inputs, rounded. Its CUDA twin is in cuda/elementwise.cu. */
#include <math.h>
#include "sz_kernels_impl.h"

/* The per-element math, one copy for every variant. */
static inline float swiglu_1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

static inline void swiglu_bwd_1(float *dg, float *du, float d, float g, float u)
{
    float s = 1.0f / (1.0f + expf(-g));
    *dg += d * u * (s * (1.0f + g * (1.0f - s)));
    *du += d * (g * s);
}

void sz_k_swiglu_fwd(float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = swiglu_1(gate[i], up[i]);
}

void sz_k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) swiglu_bwd_1(&dgate[i], &dup[i], dout[i], gate[i], up[i]);
}

static inline float ld(const void *p, sz_k_dtype dt, size_t i)
{
    return dt == SZ_K_BF16 ? sz_bf16_to_f32_1(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static inline void st(void *p, sz_k_dtype dt, size_t i, float v)
{
    if (dt == SZ_K_BF16)
        ((uint16_t *)p)[i] = sz_f32_to_bf16_1(v);
    else
        ((float *)p)[i] = v;
}

void sz_k_swiglu_fwd_mx(void *out, sz_k_dtype out_dt, const float *gate, const float *up, size_t n)
{
    if (out_dt != SZ_K_BF16) {
        sz_k_swiglu_fwd(out, gate, up, n);
        return;
    }
    uint16_t *o = out;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) o[i] = sz_f32_to_bf16_1(swiglu_1(gate[i], up[i]));
}

void sz_k_swiglu_bwd_mx(void *dgate, sz_k_dtype dgate_dt, void *dup, sz_k_dtype dup_dt, const void *dout,
                        sz_k_dtype dout_dt, const float *gate, const float *up, size_t n)
{
    if (dgate_dt != SZ_K_BF16 && dup_dt != SZ_K_BF16 && dout_dt != SZ_K_BF16) {
        sz_k_swiglu_bwd(dgate, dup, dout, gate, up, n);
        return;
    }
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float dg = ld(dgate, dgate_dt, i), du = ld(dup, dup_dt, i);
        swiglu_bwd_1(&dg, &du, ld(dout, dout_dt, i), gate[i], up[i]);
        st(dgate, dgate_dt, i, dg);
        st(dup, dup_dt, i, du);
    }
}
