/* bf16.c — fp32 <-> bf16 conversion of whole buffers (round to nearest even,
 * NaN kept NaN). Plain bit math that the compiler vectorizes; identical results
 * on every CPU, so no AVX512_BF16 special case is needed for correctness. */
#include "sz_kernels_impl.h"

void sz_k_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) dst[i] = sz_f32_to_bf16_1(src[i]);
}

void sz_k_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) dst[i] = sz_bf16_to_f32_1(src[i]);
}
