/* sgd.c — SGD with momentum exactly as torch.optim.SGD (dampening 0), on a flat range of n
 * parameters (e.g. one shard): g = scale * grad + wd * p (L2 weight decay, added to the gradient
 * as PyTorch's SGD does); with momentum, buf = momentum * buf + g (PyTorch's first step sets
 * buf = g: the same value from a zeroed buffer) and d = buf (Nesterov: g + momentum * buf);
 * without (buf NULL), d = g; p -= lr * d. Elementwise, so the result never depends on the thread
 * count; the optional squared gradient norm uses sz_k_sumsq's fixed chunks. Gradients fp32, or bf16
 * / fp16 (mixed precision: the fp32 master updated, its 16-bit copy rounded from it). */
#include <stdlib.h>
#include <string.h>
#include "sz_kernels_impl.h"

/* The update of one element from its (fp32) gradient; buf NULL: no momentum. */
static inline float sz_sgd_1(float p, float g, float *buf, float lr, float mom, float wd, int nesterov,
                             float scale)
{
    g = g * scale + wd * p;
    float d = g;
    if (buf) {
        float b = mom * *buf + g;
        *buf = b;
        d = nesterov ? g + mom * b : b;
    }
    return p - lr * d;
}

/* Elements [lo, hi) with gradients of type DT (a constant where sz_sgd_range inlines it), a 16-bit
 * one widened exactly; param16, when not NULL, gets the result rounded to DT. */
SZ_INLINE void sz_sgd_range_t(float *param, uint16_t *param16, const void *grad, int DT, float *buf, size_t lo,
                              size_t hi, float lr, float mom, float wd, int nesterov, float scale)
{
    for (size_t i = lo; i < hi; i++) {
        float p = sz_sgd_1(param[i], sz_ldx(grad, DT, i), buf ? &buf[i] : NULL, lr, mom, wd, nesterov, scale);
        param[i] = p;
        if (param16)
            sz_stx(param16, DT, i, p);
    }
}

#if SZ_HAVE_F16C_BLOCKS
/* fp16 gradients with momentum (no Nesterov) by F16C, 8 at a time: sz_sgd_1's operations in its
 * order, unfused (this file is built with -ffp-contract=off), each binary operation's operands in
 * the source's order pinned (asm: the compiler may swap an intrinsic's) since of two NaNs x86 keeps
 * the first one's, which is what the portable fp16 loop keeps (as compiled here: HEAD's, checked; the
 * scalar loop's choice moves with how it is inlined, so the tail goes through this code too); the
 * widening and the rounding are bitwise the portable rule. Does all n. */
#define SZ_ASM_OP2(name, insn)                                                                               \
    __attribute__((target("avx2,f16c"))) static inline __m256 name(__m256 first, __m256 second)            \
    {                                                                                                        \
        __m256 r;                                                                                            \
        __asm__(insn " %2, %1, %0" : "=x"(r) : "x"(first), "x"(second));                                     \
        return r;                                                                                            \
    }
SZ_ASM_OP2(sgd_add, "vaddps")
SZ_ASM_OP2(sgd_sub, "vsubps")
SZ_ASM_OP2(sgd_mul, "vmulps")
__attribute__((target("avx2,f16c"), noinline)) static size_t sgd_mom_f16c(float *param, uint16_t *param16,
                                                                         const uint16_t *grad, float *buf, size_t n,
                                                                         float lr, float mom, float wd, float scale)
{
    size_t m = n & ~(size_t)7, r = n - m;
    const __m256 vlr = _mm256_set1_ps(lr), vmom = _mm256_set1_ps(mom), vwd = _mm256_set1_ps(wd),
                 vs = _mm256_set1_ps(scale);
    for (size_t i = 0; i < m; i += 8) {
        __m256 p = _mm256_loadu_ps(param + i);
        __m256 g = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(grad + i)));
        g = sgd_add(sgd_mul(g, vs), sgd_mul(vwd, p));       /* g = g * scale + wd * p */
        __m256 b = sgd_add(sgd_mul(vmom, _mm256_loadu_ps(buf + i)), g); /* b = mom * buf + g */
        _mm256_storeu_ps(buf + i, b);
        p = sgd_sub(p, sgd_mul(vlr, b));                    /* p - lr * b */
        _mm256_storeu_ps(param + i, p);
        if (param16)
            _mm_storeu_si128((__m128i *)(param16 + i), _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (r) { /* the last n % 8 through 8-element copies, by the same code */
        float tp[8] = {0}, tb[8] = {0};
        uint16_t tg[8] = {0}, th[8];
        memcpy(tp, param + m, r * sizeof *tp);
        memcpy(tb, buf + m, r * sizeof *tb);
        memcpy(tg, grad + m, r * sizeof *tg);
        sgd_mom_f16c(tp, th, tg, tb, 8, lr, mom, wd, scale);
        memcpy(param + m, tp, r * sizeof *tp);
        memcpy(buf + m, tb, r * sizeof *tb);
        if (param16)
            memcpy(param16 + m, th, r * sizeof *th);
    }
    return n;
}
#endif

/* grad of type gdt. The fp32 cases without Nesterov are separate loops with the branches outside, so
 * each vectorizes (the same operations in the same order as sz_sgd_1: the same bits); param16 is
 * not used with fp32 gradients. */
static void sz_sgd_range(float *param, uint16_t *param16, const void *grad, int gdt, float *buf, size_t lo,
                         size_t hi, float lr, float mom, float wd, int nesterov, float scale)
{
    const float *gf = grad;
    if (gdt == SZ_K_BF16) {
        sz_sgd_range_t(param, param16, grad, SZ_K_BF16, buf, lo, hi, lr, mom, wd, nesterov, scale);
        return;
    }
    if (gdt == SZ_K_F16) {
#if SZ_HAVE_F16C_BLOCKS
        /* F16C. Momentum without Nesterov: sgd_mom_f16c (the separate fp32 momentum loop keeps the
         * other NaN of two where mom * buf and g both are NaN: a payload, not a value, but the
         * portable fp16 path's bits are kept). Otherwise a block of gradients widened into fp32, the
         * fp32 loops on it (the same arithmetic, so the same bits; checked against the portable fp16
         * path with NaN inputs too), the block's results rounded to fp16. */
        if (buf && !nesterov && sz_f16c_ok()) {
            sgd_mom_f16c(param + lo, param16 ? param16 + lo : NULL, (const uint16_t *)grad + lo, buf + lo, hi - lo,
                         lr, mom, wd, scale);
            return;
        }
        if (sz_f16c_ok()) {
            float gb[SZ_F16C_BLOCK];
            for (size_t b = lo; b < hi; b += SZ_F16C_BLOCK) {
                size_t e = b + SZ_F16C_BLOCK < hi ? b + SZ_F16C_BLOCK : hi;
                sz_f16_to_f32_f16c(gb, (const uint16_t *)grad + b, e - b);
                if (buf)
                    sz_sgd_range_t(param + b, NULL, gb, SZ_K_F32, buf + b, 0, e - b, lr, mom, wd, nesterov, scale);
                else
                    sz_sgd_range(param + b, NULL, gb, SZ_K_F32, NULL, 0, e - b, lr, mom, wd, nesterov, scale);
                if (param16) sz_f32_to_f16_f16c(param16 + b, param + b, e - b);
            }
            return;
        }
#endif
        sz_sgd_range_t(param, param16, grad, SZ_K_F16, buf, lo, hi, lr, mom, wd, nesterov, scale);
        return;
    }
    if (buf && !nesterov) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++) {
            float g = gf[i] * scale + wd * param[i];
            float b = mom * buf[i] + g;
            buf[i] = b;
            param[i] = param[i] - lr * b;
        }
        return;
    }
    if (!buf) {
#pragma omp simd
        for (size_t i = lo; i < hi; i++)
            param[i] = param[i] - lr * (gf[i] * scale + wd * param[i]);
        return;
    }
    sz_sgd_range_t(param, NULL, grad, SZ_K_F32, buf, lo, hi, lr, mom, wd, nesterov, scale); /* Nesterov */
}

typedef struct {
    float *param, *buf;
    uint16_t *param16;
    const void *grad;
    int gdt, nesterov;
    float lr, mom, wd, scale;
} sz_sgd_args;

static void sz_sgd_chunk(void *ctx, size_t lo, size_t hi)
{
    const sz_sgd_args *a = ctx;
    sz_sgd_range(a->param, a->param16, a->grad, a->gdt, a->buf, lo, hi, a->lr, a->mom, a->wd, a->nesterov,
                 a->scale);
}

/* A NaN scale (a skipped step) writes nothing. */
int sz_k_sgd_step(float *param, uint16_t *param16, const void *grad, int gdt, float *buf, size_t n, float lr,
                  float momentum, float wd, int nesterov, float scale, double *sumsq)
{
    if (isnan(scale)) {
        if (sumsq) *sumsq = 0.0;
        return 0;
    }
    sz_sgd_args a = {param, buf, param16, grad, gdt, nesterov, lr, momentum, wd, scale};
    return sz_k_update_chunks(n, grad, gdt, sumsq, sz_sgd_chunk, &a);
}
