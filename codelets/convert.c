/* codelets/convert.c — mixed precision: copy a view converting between fp32 and bf16 (each view's
 * type is in the task arguments): bf16 parameters -> the fp32 working copy the compute tasks read;
 * fp32 working gradients -> bf16 gradients, overwriting or (acc = 1) accumulating dst += src with
 * one rounding per element. */
#include "sz_codelets.h"

/* One loop per pair of types, so each vectorizes (element-wise getters would not). */
static void convert_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int64_t n = a.numel[0];
    int acc = a.acc;
    if (a.bf16[0] && a.bf16[1]) {
        uint16_t *dst = sz_th(b, &a, 0);
        const uint16_t *src = sz_th(b, &a, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = acc ? sz_f2h(sz_h2f(dst[i]) + sz_h2f(src[i])) : src[i];
    } else if (a.bf16[0]) {
        uint16_t *dst = sz_th(b, &a, 0);
        const float *src = sz_tf(b, &a, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = sz_f2h(acc ? sz_h2f(dst[i]) + src[i] : src[i]);
    } else if (a.bf16[1]) {
        float *dst = sz_tf(b, &a, 0);
        const uint16_t *src = sz_th(b, &a, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = acc ? dst[i] + sz_h2f(src[i]) : sz_h2f(src[i]);
    } else {
        float *dst = sz_tf(b, &a, 0);
        const float *src = sz_tf(b, &a, 1);
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++)
            dst[i] = acc ? dst[i] + src[i] : src[i];
    }
    if (a.stats && a.bytes) /* a working copy allocated by this write */
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(convert_model, "sz_convert");
SZ_CODELET(sz_cl_convert, convert_cpu, "convert", convert_model);
