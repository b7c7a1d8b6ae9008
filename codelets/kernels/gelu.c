/* gelu.c — GELU, tanh approximation, exactly llm.c's gelu_forward/backward:
 * out = 0.5 x (1 + tanh(s (x + 0.044715 x^3))), s = sqrtf(2/pi) in float.
 * Elementwise over n floats; the backward accumulates into dinp. */
#include <math.h>
#include "sz_kernels_impl.h"

#define SZ_PI 3.14159265358979323846
#define SZ_GELU_SCALE sqrtf((float)(2.0 / SZ_PI))

void sz_k_gelu_fwd(float *out, const float *inp, size_t n)
{
    const float s = SZ_GELU_SCALE;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(s * (x + cube)));
    }
}

void sz_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    const float s = SZ_GELU_SCALE;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = s * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float cosh_out = coshf(tanh_arg);
        float sech_out = 1.0f / (cosh_out * cosh_out);
        float local_grad = 0.5f * (1.0f + tanh_out) +
                           x * 0.5f * sech_out * s * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += local_grad * dout[i];
    }
}
