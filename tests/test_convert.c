/* test_convert.c — CUnit suite for sz_k_convert (kernels/bf16.c), the mixed-precision copy
 * behind working copies and gradient rounding: every type pair and mode (set, add, onto zeros)
 * against an independent scalar reference, on special values (ties, denormals of both signs, ±0,
 * NaN payloads, ±inf, the largest float), random bit patterns and a stride through all 2^32 fp32
 * patterns, at lengths that leave vector tails, and the same bits for 1, 2 and 3 threads. */
#include <CUnit/Basic.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_kernels.h"

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float flt(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* independent RNE: look at the dropped half; NaN: quiet, payload's top kept */
static uint16_t ref_f2h(float f)
{
    uint32_t u = bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    uint32_t hi = u >> 16, lo = u & 0xFFFFu;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) hi++;
    return (uint16_t)hi;
}
static float ref_h2f(uint16_t h) { return flt((uint32_t)h << 16); }

/* volatile: the reference's additions happen as written (0 + x kept) */
static float add(float a, float b) { volatile float r = a + b; return r; }

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static const uint32_t special[] = {
    0x3F800000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x3F808001u, 0x7F7FFFFFu, 0x7F7F8000u,
    0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFC12345u, 0x7FBFFFFFu, 0x00000000u,
    0x80000000u, 0x00000001u, 0x80000001u, 0x00008000u, 0x00018000u, 0x80008000u, 0x007FFFFFu,
    0x807FFFFFu, 0x007F8000u, 0x007F7FFFu, 0x00800000u, 0x80800000u, 0x0000FFFFu, 0x8000FFFFu,
};
#define NSPECIAL ((int)(sizeof special / sizeof special[0]))

/* fp32 inputs: the specials, then random patterns, then random values near 1 (no NaN) */
static void fill_f32(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = i < (size_t)NSPECIAL ? flt(special[i]) : (i & 1) ? flt(next()) : (float)(next() >> 8) / 16777216.0f - 0.5f;
}
static void fill_bf16(uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = i < (size_t)NSPECIAL ? (uint16_t)(special[i] >> 16) : (uint16_t)next();
}

/* one type pair and mode at length n and thread count nt, against the reference; 1 if equal */
static int check(sz_k_dtype ddt, sz_k_dtype sdt, int mode, size_t n, int nt)
{
    size_t ds = ddt == SZ_K_BF16 ? 2 : 4, ss = sdt == SZ_K_BF16 ? 2 : 4;
    void *src = malloc(n * ss + 4), *dst = malloc(n * ds + 4), *want = malloc(n * ds + 4);
    if (!src || !dst || !want) return 0;
    if (sdt == SZ_K_BF16) fill_bf16(src, n); else fill_f32(src, n);
    /* the destination's old values: the same kinds of values ... */
    if (ddt == SZ_K_BF16) fill_bf16(dst, n); else fill_f32(dst, n);
    /* ... shifted by one against the source's, and never NaN (which NaN of two an addition keeps
     * depends on the operand order the compiler picks; NaN sources are covered) */
    if (ddt == SZ_K_BF16) {
        uint16_t *d = dst;
        for (size_t i = n; i-- > 1;) d[i] = (d[i - 1] & 0x7FFFu) > 0x7F80u ? 0x3F80u : d[i - 1];
        d[0] = 0x8000u;
    } else {
        float *d = dst;
        for (size_t i = n; i-- > 1;) d[i] = isnan(d[i - 1]) ? 1.0f : d[i - 1];
        d[0] = -0.0f;
    }
    for (size_t i = 0; i < n; i++) {
        float s = sdt == SZ_K_BF16 ? ref_h2f(((uint16_t *)src)[i]) : ((float *)src)[i];
        float d = ddt == SZ_K_BF16 ? ref_h2f(((uint16_t *)dst)[i]) : ((float *)dst)[i];
        float r = mode == SZ_K_CONVERT_ADD ? add(d, s) : mode == SZ_K_CONVERT_ONTO_ZEROS ? add(0.0f, s) : s;
        if (ddt == SZ_K_BF16) {
            /* a plain bf16 -> bf16 copy keeps the bits (signalling NaNs too) */
            ((uint16_t *)want)[i] = mode == SZ_K_CONVERT_SET && sdt == SZ_K_BF16 ? ((uint16_t *)src)[i] : ref_f2h(r);
        } else {
            ((float *)want)[i] = r;
            if (mode == SZ_K_CONVERT_SET) memcpy((float *)want + i, sdt == SZ_K_BF16 ? (void *)&s : (float *)src + i, 4);
        }
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(nt);
    sz_k_convert(dst, ddt, src, sdt, n, mode);
    omp_set_num_threads(saved);
    int ok = !memcmp(dst, want, n * ds);
    if (!ok)
        for (size_t i = 0; i < n; i++) {
            uint32_t g = ddt == SZ_K_BF16 ? ((uint16_t *)dst)[i] : bits(((float *)dst)[i]);
            uint32_t w = ddt == SZ_K_BF16 ? ((uint16_t *)want)[i] : bits(((float *)want)[i]);
            if (g != w) {
                printf("\n  dst %s <- src %s mode %d n %zu threads %d: element %zu got 0x%x, want 0x%x\n",
                       ddt == SZ_K_BF16 ? "bf16" : "f32", sdt == SZ_K_BF16 ? "bf16" : "f32", mode, n, nt, i, g, w);
                break;
            }
        }
    free(src); free(dst); free(want);
    return ok;
}

static void test_pairs(void)
{
    const size_t lens[] = {1, 15, 16, 17, NSPECIAL, 1000, 16384 + 37, 100003};
    for (int dd = 0; dd < 2; dd++)
        for (int sd = 0; sd < 2; sd++)
            for (int mode = 0; mode < 3; mode++)
                for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
                    for (int nt = 1; nt <= 3; nt++)
                        CU_ASSERT(check((sz_k_dtype)dd, (sz_k_dtype)sd, mode, lens[k], nt));
}

/* fp32 -> bf16, set and onto zeros, through every 61st fp32 bit pattern (denormals, NaNs, all kinds) */
static void test_all_patterns(void)
{
    enum { CH = 1 << 20 };
    float *x = malloc(CH * sizeof *x);
    uint16_t *h = malloc(CH * sizeof *h);
    CU_ASSERT_FATAL(x && h);
    long bad = 0;
    for (int mode = 0; mode < 3; mode += 2)
        for (uint64_t base = 0; base < (1ull << 32); base += 61ull * CH) {
            size_t n = 0;
            for (uint64_t u = base; n < CH && u < (1ull << 32); u += 61) x[n++] = flt((uint32_t)u);
            sz_k_convert(h, SZ_K_BF16, x, SZ_K_F32, n, mode);
            for (size_t i = 0; i < n; i++)
                bad += h[i] != ref_f2h(mode ? add(0.0f, x[i]) : x[i]);
        }
    CU_ASSERT_EQUAL(bad, 0);
    if (bad) printf("\n  %ld patterns rounded differently from the reference\n", bad);
    free(x); free(h);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("convert", NULL, NULL);
    if (!s || !CU_add_test(s, "type pairs and modes against the reference", test_pairs) ||
        !CU_add_test(s, "fp32 -> bf16 over a stride of all fp32 patterns", test_all_patterns)) {
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned f = CU_get_number_of_failures();
    CU_cleanup_registry();
    return f ? 1 : 0;
}
