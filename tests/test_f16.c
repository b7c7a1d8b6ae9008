/* test_f16.c — CUnit suite for IEEE fp16 (binary16) storage beside bf16 (kernels/sz_kernels.h):
 *  - the scalar rules sz_k_f16_to_f32_1 and sz_k_f32_to_f16_1 against F16C (vcvtph2ps, vcvtps2ph
 *    rounding to nearest) on every one of the 65536 fp16 values and every one of the 2^32 fp32 bit
 *    patterns (where the CPU has F16C), and against an independent reference in double arithmetic
 *    on all fp16 values and on a stride of fp32 patterns plus the patterns around every rounding
 *    boundary (ties, overflow, the subnormals);
 *  - the whole-buffer helpers sz_k_f32_to_f16 / sz_k_f16_to_f32 (sz_k_convert's other cases:
 *    test_convert.c);
 *  - AdamW on fp16 gradients bitwise sz_k_adamw_step on the widened gradients, the fp16 copy the
 *    master rounded; the bf16 path likewise (its bits unchanged); SGD with fp16 gradients likewise;
 *  - sz_k_sumsq of fp16 values: the fp32 sum of the widened values, the same bits at 1, 2 and 4
 *    threads, and the optimizers' fused norm equal to it;
 *  - a NaN scale (a skipped step) leaves every buffer of every optimizer untouched. */
#include <CUnit/Basic.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"
#include "sz_test.h"
#include "sz_test_data.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float flt(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- independent references, in double arithmetic ---- */

static float soft_h2f(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 0x3FF;
    uint32_t s = (uint32_t)(h & 0x8000u) << 16;
    if (e == 31) /* inf, or the documented quiet NaN (sign and payload kept) */
        return flt(s | 0x7F800000u | (uint32_t)m << 13 | (m ? 0x00400000u : 0u));
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (float)(s ? -v : v);
}

static uint16_t soft_f2h(float f)
{
    uint32_t u = bits(f);
    uint16_t s = (uint16_t)((u >> 16) & 0x8000u);
    if (isnan(f)) return (uint16_t)(s | 0x7E00u | ((u >> 13) & 0x3FFu));
    double a = fabs((double)f);
    if (a >= 65520.0) return (uint16_t)(s | 0x7C00u);
    if (a < ldexp(1, -14)) return (uint16_t)(s | (uint16_t)nearbyint(ldexp(a, 24))); /* 1024: 2^-14 */
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    double q = nearbyint(ldexp(a, 11 - e)); /* 1024 .. 2048 (a carry into the next binade) */
    return (uint16_t)(s | (((e + 14) << 10) + (int)q - 1024));
}

/* bitwise equal, or both NaN of the same sign */
static int same16(uint16_t a, uint16_t b)
{
    return a == b || ((a & 0x7FFFu) > 0x7C00u && (b & 0x7FFFu) > 0x7C00u && (a & 0x8000u) == (b & 0x8000u));
}
static int same32(float a, float b)
{
    return bits(a) == bits(b) || (isnan(a) && isnan(b) && signbit(a) == signbit(b));
}

/* ---- the scalar rules against F16C: the differences, -1 when the CPU has no F16C ---- */

#if HAVE_X86
__attribute__((target("avx,f16c"))) static long hw_h2f_diff(long *exact)
{
    long bad = 0;
    *exact = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = sz_k_f16_to_f32_1((uint16_t)h), b = _cvtsh_ss((unsigned short)h);
        bad += !same32(a, b);
        *exact += bits(a) == bits(b);
    }
    return bad;
}

/* all 2^32 fp32 patterns in blocks of 4096, 8 at a time through vcvtps2ph */
__attribute__((target("avx,f16c"))) static long hw_f2h_diff(long *exact)
{
    long bad = 0, ex = 0;
#pragma omp parallel for schedule(dynamic, 256) reduction(+ : bad, ex)
    for (int64_t blk = 0; blk < (1ll << 20); blk++) {
        float x[4096] __attribute__((aligned(32)));
        uint16_t hw[4096] __attribute__((aligned(32))), sw[4096];
        for (uint32_t k = 0; k < 4096; k++) x[k] = flt((uint32_t)(blk << 12) | k);
        for (int k = 0; k < 4096; k += 8)
            _mm_store_si128((__m128i *)(hw + k), _mm256_cvtps_ph(_mm256_load_ps(x + k), _MM_FROUND_TO_NEAREST_INT));
        for (int k = 0; k < 4096; k++) sw[k] = sz_k_f32_to_f16_1(x[k]);
        for (int k = 0; k < 4096; k++) {
            bad += !same16(sw[k], hw[k]);
            ex += sw[k] == hw[k];
        }
    }
    *exact = ex;
    return bad;
}
#endif

static int have_f16c(void)
{
#if HAVE_X86
    return __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static void test_h2f_all(void)
{
    long bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = sz_k_f16_to_f32_1((uint16_t)h), r = soft_h2f((uint16_t)h);
        if (bits(a) != bits(r) && bad++ < 4) printf("\n  fp16 0x%04x -> 0x%08x, want 0x%08x", h, bits(a), bits(r));
    }
    CU_ASSERT_EQUAL(bad, 0);
    if (!have_f16c()) {
        printf("\n  no F16C on this CPU: the hardware comparison skipped\n");
        return;
    }
#if HAVE_X86
    long exact, hw = hw_h2f_diff(&exact);
    printf("\n  F16C vcvtph2ps: 65536 values, %ld bitwise equal, %ld different\n", exact, hw);
    CU_ASSERT_EQUAL(hw, 0);
#endif
}

static void test_f2h_all(void)
{
    if (!have_f16c()) {
        printf("\n  no F16C on this CPU: the exhaustive comparison skipped (test_f2h_boundaries still runs)\n");
        return;
    }
#if HAVE_X86
    long exact, hw = hw_f2h_diff(&exact);
    printf("\n  F16C vcvtps2ph: 2^32 patterns, %ld bitwise equal, %ld different\n", exact, hw);
    CU_ASSERT_EQUAL(hw, 0);
#endif
}

/* The independent reference on every 127th fp32 pattern, and on the 5 patterns around each fp16
 * value and around the midpoint above it (a tie), of both signs: the rounding boundaries, the
 * largest finite value and the overflow to inf (the midpoint above 65504 is 65520), the subnormals
 * and the underflow to 0 (the midpoint above 0 is 2^-25). */
static void test_f2h_boundaries(void)
{
    long bad = 0, n = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 127, n++) {
        float f = flt((uint32_t)u);
        if (!same16(sz_k_f32_to_f16_1(f), soft_f2h(f)) && bad++ < 4)
            printf("\n  0x%08x -> 0x%04x, want 0x%04x", (uint32_t)u, sz_k_f32_to_f16_1(f), soft_f2h(f));
    }
    for (uint32_t h = 0; h < 0x7C00u; h++) {
        int e = (int)(h >> 10);
        double v = sz_k_f16_to_f32_1((uint16_t)h), half_ulp = ldexp(1, (e ? e : 1) - 26);
        uint32_t at[2] = {bits((float)v), bits((float)(v + half_ulp))};
        for (int w = 0; w < 2; w++)
            for (int d = -2; d <= 2; d++)
                for (int sg = 0; sg < 2; sg++) {
                    uint32_t p = (at[w] + (uint32_t)d) ^ (uint32_t)sg << 31;
                    float f = flt(p);
                    n++;
                    if (!same16(sz_k_f32_to_f16_1(f), soft_f2h(f)) && bad++ < 4)
                        printf("\n  0x%08x -> 0x%04x, want 0x%04x", p, sz_k_f32_to_f16_1(f), soft_f2h(f));
                }
    }
    printf("\n  %ld patterns against the reference, %ld different\n", n, bad);
    CU_ASSERT_EQUAL(bad, 0);
    /* the documented edges, by value */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(65504.0f), 0x7BFFu);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(65519.99f), 0x7BFFu);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(65520.0f), 0x7C00u);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(-65520.0f), 0xFC00u);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(1e10f), 0x7C00u);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(ldexpf(1, -24)), 0x0001u);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(ldexpf(1, -25)), 0x0000u);          /* a tie: to even, 0 */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(ldexpf(3, -25)), 0x0002u);          /* 1.5 units, a tie: to 2 */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(ldexpf(5, -25)), 0x0002u);          /* 2.5 units, a tie: to 2 */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(ldexpf(3, -26)), 0x0001u);          /* 0.75 units: to 1 */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(-ldexpf(1, -26)), 0x8000u);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(1.0f + ldexpf(1, -11)), 0x3C00u);   /* a tie: to even */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(1.0f + ldexpf(3, -11)), 0x3C02u);
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(flt(0xFFC00001u)), 0xFE00u);          /* a NaN: quiet, sign kept */
    CU_ASSERT_EQUAL(sz_k_f32_to_f16_1(flt(0x7F800001u)) & 0x7E00u, 0x7E00u); /* signalling: quieted */
    CU_ASSERT(isnan(sz_k_f16_to_f32_1(0x7C01u)) && isnan(sz_k_f16_to_f32_1(0xFE00u)) && signbit(sz_k_f16_to_f32_1(0xFE00u)));
    CU_ASSERT_EQUAL(sz_k_f16_to_f32_1(0x0001u), ldexpf(1, -24));
    CU_ASSERT_EQUAL(sz_k_f16_to_f32_1(0x7BFFu), 65504.0f);
    CU_ASSERT_EQUAL(sz_k_f16_to_f32_1(0xFC00u), -INFINITY);
}

/* The whole-buffer helpers: the scalar rules on every element, through the parallel path too. */
static void test_buffers(void)
{
    const size_t n = 3 * 16384 + 5;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint16_t *h = malloc(n * sizeof *h);
    CU_ASSERT_FATAL(x && y && h);
    for (size_t i = 0; i < n; i++) x[i] = flt((uint32_t)(i * 2654435761u));
    sz_k_f32_to_f16(h, x, n);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= h[i] == sz_k_f32_to_f16_1(x[i]);
    CU_ASSERT(ok);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(i * 40503u);
    sz_k_f16_to_f32(y, h, n);
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= bits(y[i]) == bits(sz_k_f16_to_f32_1(h[i]));
    CU_ASSERT(ok);
    free(x), free(y), free(h);
}

/* ---- the optimizers ---- */

/* n fp16 or bf16 gradients of magnitudes 2^-26 .. 2^4 (fp16 subnormals included), some zero */
static uint16_t *grads16(size_t n, sz_k_dtype dt)
{
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float g = i % 11 == 0 ? 0.0f : ldexpf(frand(), (int)(i % 31) - 26);
        h[i] = dt == SZ_K_F16 ? sz_k_f32_to_f16_1(g) : sz_f32_to_bf16_1(g);
    }
    return h;
}
static float *widen(const uint16_t *h, sz_k_dtype dt, size_t n)
{
    float *g = malloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) g[i] = sz_ldx(h, dt, i);
    return g;
}

/* AdamW, two steps (the clip scale at the second), mixed fp16 and bf16 against sz_k_adamw_step on
 * the widened gradients: master, m, v and the fused norm bitwise, the 16-bit copy the master
 * rounded; sz_k_adamw_step_bf16 bitwise sz_k_adamw_step_mixed with SZ_K_BF16. */
static void test_adamw(void)
{
    const size_t lens[] = {37, 3 * SZ_SUMSQ_CHUNK + 999};
    for (int dtc = 0; dtc < 2; dtc++)
        for (size_t k = 0; k < 2; k++) {
            sz_k_dtype dt = dtc ? SZ_K_BF16 : SZ_K_F16;
            size_t n = lens[k];
            float *p = rnd(n, 1), *m = rnd(n, 0.01f), *v = rnd(n, 0.01f);
            for (size_t i = 0; i < n; i++) v[i] *= v[i];
            float *rp = dup_f(p, n), *rm = dup_f(m, n), *rv = dup_f(v, n);
            float *bp = dup_f(p, n), *bm = dup_f(m, n), *bv = dup_f(v, n);
            uint16_t *p16 = malloc(n * sizeof *p16), *b16 = malloc(n * sizeof *b16);
            int ok = 1;
            for (int t = 1; t <= 2; t++) {
                uint16_t *g16 = grads16(n, dt);
                float *g = widen(g16, dt, n), scale = t == 1 ? 1.0f : 0.6f;
                double s = -1, rs = -2, bs = -3;
                CU_ASSERT(sz_k_adamw_step_mixed(p, p16, g16, dt, m, v, n, t, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, scale,
                                                &s) == 0);
                CU_ASSERT(sz_k_adamw_step(rp, g, rm, rv, n, t, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, scale, &rs) == 0);
                ok &= !memcmp(p, rp, n * 4) && !memcmp(m, rm, n * 4) && !memcmp(v, rv, n * 4) && s == rs;
                ok &= s == sz_k_sumsq(g16, dt, (int64_t)n);
                for (size_t i = 0; i < n; i++) ok &= p16[i] == (dt == SZ_K_F16 ? sz_k_f32_to_f16_1(p[i]) : sz_f32_to_bf16_1(p[i]));
                if (dt == SZ_K_BF16) {
                    CU_ASSERT(sz_k_adamw_step_bf16(bp, b16, g16, bm, bv, n, t, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, scale,
                                                   &bs) == 0);
                    ok &= !memcmp(bp, p, n * 4) && !memcmp(bm, m, n * 4) && !memcmp(bv, v, n * 4) &&
                          !memcmp(b16, p16, n * 2) && bs == s;
                }
                free(g16), free(g);
            }
            if (!ok) printf("\n  adamw %s n %zu differs from the fp32 kernel on the widened gradients\n",
                            dt == SZ_K_F16 ? "fp16" : "bf16", n);
            CU_ASSERT(ok);
            free(p), free(m), free(v), free(rp), free(rm), free(rv), free(bp), free(bm), free(bv), free(p16), free(b16);
        }
}

/* SGD with fp16 gradients (gdt 2): bitwise gdt 0 on the widened gradients, with momentum, Nesterov
 * and without; param16 the master rounded to fp16; the fused norm sz_k_sumsq's. */
static void test_sgd(void)
{
    const size_t n = 2 * SZ_SUMSQ_CHUNK + 77;
    for (int cfg = 0; cfg < 3; cfg++) {
        int mom = cfg != 1, nest = cfg == 2;
        float *p = rnd(n, 1), *b = rnd(n, 0.1f), *rp = dup_f(p, n), *rb = dup_f(b, n);
        uint16_t *p16 = malloc(n * sizeof *p16), *g16 = grads16(n, SZ_K_F16);
        float *g = widen(g16, SZ_K_F16, n);
        double s = -1, rs = -2;
        CU_ASSERT(sz_k_sgd_step(p, p16, g16, SZ_K_F16, mom ? b : NULL, n, 0.05f, mom ? 0.9f : 0.0f, 0.01f, nest, 0.75f,
                                &s) == 0);
        CU_ASSERT(sz_k_sgd_step(rp, NULL, g, SZ_K_F32, mom ? rb : NULL, n, 0.05f, mom ? 0.9f : 0.0f, 0.01f, nest, 0.75f,
                                &rs) == 0);
        int ok = !memcmp(p, rp, n * 4) && !memcmp(b, rb, n * 4) && s == rs && s == sz_k_sumsq(g16, 2, (int64_t)n);
        for (size_t i = 0; i < n; i++) ok &= p16[i] == sz_k_f32_to_f16_1(p[i]);
        if (!ok) printf("\n  sgd fp16 (config %d) differs from fp32 on the widened gradients\n", cfg);
        CU_ASSERT(ok);
        free(p), free(b), free(rp), free(rb), free(p16), free(g16), free(g);
    }
}

/* sz_k_sumsq and sz_k_sumsq_chunk of fp16 values: bitwise the fp32 sums of the widened values (the
 * same lanes and order), the same bits at 1, 2 and 4 threads, close to a double sum; inf stays inf. */
static void test_sumsq(void)
{
    const size_t n = 5 * SZ_SUMSQ_CHUNK + 123;
    uint16_t *h = grads16(n, SZ_K_F16);
    float *g = widen(h, SZ_K_F16, n);
    double want = sz_k_sumsq(g, 0, (int64_t)n), ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)g[i] * g[i];
    int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 4; nt *= 2) {
        omp_set_num_threads(nt);
        double s = sz_k_sumsq(h, 2, (int64_t)n);
        if (s != want) printf("\n  %d threads: %.17g, want %.17g\n", nt, s, want);
        CU_ASSERT(s == want);
    }
    omp_set_num_threads(saved);
    CU_ASSERT(fabs(want - ref) <= 1e-12 * ref);
    CU_ASSERT(sz_k_sumsq_chunk(h, 2, 1000) == sz_k_sumsq_chunk(g, 0, 1000));
    h[7] = 0x7C00u;
    CU_ASSERT(isinf(sz_k_sumsq(h, SZ_K_F16, (int64_t)n)));
    free(h), free(g);
}

/* A NaN scale: every optimizer returns 0, writes no buffer (each compared bitwise with its copy),
 * sets *sumsq to 0; with sumsq NULL likewise. */
static void test_nan_skip(void)
{
    const size_t n = 2 * SZ_SUMSQ_CHUNK + 5;
    float *p = rnd(n, 1), *m = rnd(n, 1), *v = rnd(n, 1), *b = rnd(n, 1), *g = rnd(n, 1);
    uint16_t *p16 = grads16(n, SZ_K_F16), *g16 = grads16(n, SZ_K_F16), *gb = grads16(n, SZ_K_BF16);
    float *cp = dup_f(p, n), *cm = dup_f(m, n), *cv = dup_f(v, n), *cb = dup_f(b, n);
    uint16_t *c16 = malloc(n * 2);
    memcpy(c16, p16, n * 2);
    const float nans[2] = {NAN, -NAN};
    int ok = 1;
    for (int k = 0; k < 2; k++)
        for (int with = 0; with < 2; with++) {
            float sc = nans[k];
            double s = 123.0, *ps = with ? &s : NULL;
            int rc = 0;
            rc |= sz_k_adamw_step(p, g, m, v, n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, sc, ps);
            ok &= !with || s == 0.0;
            s = 123.0;
            rc |= sz_k_adamw_step_mixed(p, p16, g16, SZ_K_F16, m, v, n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, sc, ps);
            ok &= !with || s == 0.0;
            s = 123.0;
            rc |= sz_k_adamw_step_mixed(p, p16, gb, SZ_K_BF16, m, v, n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, sc, ps);
            ok &= !with || s == 0.0;
            s = 123.0;
            rc |= sz_k_adamw_step_bf16(p, p16, gb, m, v, n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, sc, ps);
            ok &= !with || s == 0.0;
            for (int gdt = 0; gdt < 3; gdt++)
                for (int nest = 0; nest < 2; nest++) {
                    const void *gr = gdt == 0 ? (const void *)g : gdt == 1 ? (const void *)gb : (const void *)g16;
                    s = 123.0;
                    rc |= sz_k_sgd_step(p, gdt ? p16 : NULL, gr, gdt, b, n, 0.1f, 0.9f, 0.01f, nest, sc, ps);
                    ok &= !with || s == 0.0;
                    s = 123.0;
                    rc |= sz_k_sgd_step(p, gdt ? p16 : NULL, gr, gdt, NULL, n, 0.1f, 0.0f, 0.01f, 0, sc, ps);
                    ok &= !with || s == 0.0;
                }
            CU_ASSERT_EQUAL(rc, 0);
        }
    ok &= !memcmp(p, cp, n * 4) && !memcmp(m, cm, n * 4) && !memcmp(v, cv, n * 4) && !memcmp(b, cb, n * 4) &&
          !memcmp(p16, c16, n * 2);
    CU_ASSERT(ok);
    /* a scale that is not NaN (inf included) updates as before */
    CU_ASSERT(sz_k_sgd_step(p, NULL, g, 0, NULL, n, 0.1f, 0.0f, 0.0f, 0, 1.0f, NULL) == 0);
    CU_ASSERT(memcmp(p, cp, n * 4) != 0);
    free(p), free(m), free(v), free(b), free(g), free(p16), free(g16), free(gb), free(cp), free(cm), free(cv), free(cb),
        free(c16);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    SZ_SUITE("f16", {"fp16 -> fp32: all 65536 values (reference, F16C)", test_h2f_all},
             {"fp32 -> fp16: all 2^32 patterns against F16C", test_f2h_all},
             {"fp32 -> fp16: boundaries and a stride against the reference", test_f2h_boundaries},
             {"whole-buffer helpers", test_buffers}, {"AdamW mixed fp16 and bf16", test_adamw},
             {"SGD with fp16 gradients", test_sgd}, {"sumsq of fp16, 1/2/4 threads", test_sumsq},
             {"a NaN scale skips the step", test_nan_skip});
    return sz_test_run();
}
