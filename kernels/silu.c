/* silu.c — SiLU (swish): out = x · σ(x), σ(x) = 1/(1 + e^(-x)), with the vectorizable sz_expf
 * (SwiGLU = silu(gate) · up, with mul.c). Elementwise, so the same bits whatever the thread
 * count; the backward accumulates. */
#include "sz_kernels_impl.h"

void sz_k_silu_fwd(float *out, const float *inp, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = sz_silu_1(inp[i]);
}

/* d silu/dx = σ(x) (1 + x (1 - σ(x))) (sz_silu_grad_1, sz_kernels_impl.h: shared with bf16_act.c) */
void sz_k_silu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * sz_silu_grad_1(inp[i]);
}
