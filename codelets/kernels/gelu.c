/* gelu.c — GELU, tanh approximation, llm.c's gelu_forward/backward formula:
 * out = 0.5 x (1 + tanh(u)), u = s (x + 0.044715 x^3), s = sqrtf(2/pi) in float.
 * Computed through the identity 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)) =: g (and
 * sech^2 u = 4 g (1 - g)) with the vectorizable sz_expf: ~10x faster than
 * tanhf/coshf, same values to ~1e-7. Elementwise; the backward accumulates. */
#include <math.h>
#include "sz_kernels_impl.h"

#define SZ_PI 3.14159265358979323846
#define SZ_GELU_SCALE sqrtf((float)(2.0 / SZ_PI))

void sz_k_gelu_fwd(float *out, const float *inp, size_t n)
{
    const float s = SZ_GELU_SCALE;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float g = 1.0f / (1.0f + sz_expf(-2.0f * s * (x + cube)));
        out[i] = x * g;
    }
}

void sz_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    const float s = SZ_GELU_SCALE;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float g = 1.0f / (1.0f + sz_expf(-2.0f * s * (x + cube)));
        float sech2 = 4.0f * g * (1.0f - g);
        float local_grad = g + x * 0.5f * sech2 * s * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local_grad * dout[i];
    }
}
