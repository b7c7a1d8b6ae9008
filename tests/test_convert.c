/* test_convert.c — CUnit suite for sz_k_convert (kernels/bf16.c), the mixed-precision copy
 * behind working copies and gradient rounding: every pair of fp32, bf16 and fp16 and every mode
 * (set, add, onto zeros) against a scalar reference (bf16: an independent one; fp16: the scalar
 * rules sz_k_f32_to_f16_1 / sz_k_f16_to_f32_1, themselves checked against F16C on every input by
 * test_f16.c), on special values (ties, denormals of both signs, ±0, NaN payloads, ±inf, the
 * largest float, fp16's overflow, subnormal and tie boundaries), random bit patterns and a stride
 * through all 2^32 fp32 patterns, at lengths that leave vector tails and around the parallel and
 * non-temporal thresholds, and the same bits for 1, 2 and 3 threads. */
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
    /* fp16's: 65504 (largest), just below 65520, 65520 (the first to overflow), 65536, -65520; 2^-14
     * (smallest normal) and just below; 2^-24 (smallest subnormal), 2^-25 (a tie to 0) and above;
     * ties of 1 + 2^-11 and 1 + 3 2^-11; a subnormal tie between 1 and 2 units (1.5 2^-24) */
    0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x47800000u, 0xC77FF000u, 0x38800000u, 0x387FFFFFu,
    0x33800000u, 0x33000000u, 0x33000001u, 0x3F801000u, 0x3F803000u, 0x33C00000u, 0xB3C00000u,
};
#define NSPECIAL ((int)(sizeof special / sizeof special[0]))
/* fp16 specials: ±0, the smallest and largest subnormals, the smallest normal, the largest finite,
 * ±inf, quiet and signalling NaNs of both signs, 1 and its neighbour */
static const uint16_t special16[] = {
    0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x03FFu, 0x83FFu, 0x0400u, 0x7BFFu, 0xFBFFu,
    0x7C00u, 0xFC00u, 0x7E00u, 0xFE01u, 0x7D00u, 0xFC01u, 0x3C00u, 0x3C01u,
};
#define NSPECIAL16 ((int)(sizeof special16 / sizeof special16[0]))

/* fp32 inputs: the specials, then in turn random patterns, random values near 1 (no NaN) and
 * random values across fp16's range (2^-27 .. 2^17, either sign) */
static void fill_f32(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = i < (size_t)NSPECIAL ? flt(special[i])
               : i % 3 == 0         ? flt(next())
               : i % 3 == 1         ? (float)(next() >> 8) / 16777216.0f - 0.5f
                                    : flt((next() & 0x807FFFFFu) | (100u + next() % 45u) << 23);
}
static void fill_bf16(uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = i < (size_t)NSPECIAL ? (uint16_t)(special[i] >> 16) : (uint16_t)next();
}
static void fill_f16(uint16_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = i < (size_t)NSPECIAL16 ? special16[i] : (uint16_t)next();
}

static size_t esize(sz_k_dtype t) { return t == SZ_K_F32 ? 4 : 2; }
static const char *tname(sz_k_dtype t) { return t == SZ_K_F32 ? "f32" : t == SZ_K_BF16 ? "bf16" : "f16"; }
/* element i of a buffer of type t, widened by the reference rules */
static float ref_ld(const void *p, sz_k_dtype t, size_t i)
{
    return t == SZ_K_F32 ? ((const float *)p)[i]
           : t == SZ_K_BF16 ? ref_h2f(((const uint16_t *)p)[i]) : sz_k_f16_to_f32_1(((const uint16_t *)p)[i]);
}
/* the bits of element i of a buffer of type t */
static uint32_t ref_bits(const void *p, sz_k_dtype t, size_t i)
{
    return t == SZ_K_F32 ? bits(((const float *)p)[i]) : ((const uint16_t *)p)[i];
}

/* one type pair and mode at length n and thread count nt, against the reference; 1 if equal. The
 * buffers start off elements past malloc's alignment, so the non-temporal path's unaligned head runs. */
static int check(sz_k_dtype ddt, sz_k_dtype sdt, int mode, size_t n, int nt, size_t off)
{
    size_t ds = esize(ddt), ss = esize(sdt);
    char *sb = malloc((n + off) * ss), *db = malloc((n + off) * ds), *wb = malloc((n + off) * ds);
    if (!sb || !db || !wb) return 0;
    void *src = sb + off * ss, *dst = db + off * ds, *want = wb + off * ds;
    if (sdt == SZ_K_F32) fill_f32(src, n); else if (sdt == SZ_K_BF16) fill_bf16(src, n); else fill_f16(src, n);
    /* the destination's old values: the same kinds of values ... */
    if (ddt == SZ_K_F32) fill_f32(dst, n); else if (ddt == SZ_K_BF16) fill_bf16(dst, n); else fill_f16(dst, n);
    /* ... shifted by one against the source's, and never NaN (which NaN of two an addition keeps
     * depends on the operand order the compiler picks; NaN sources are covered) */
    if (ddt != SZ_K_F32) {
        uint16_t *d = dst, inf = ddt == SZ_K_BF16 ? 0x7F80u : 0x7C00u, one = ddt == SZ_K_BF16 ? 0x3F80u : 0x3C00u;
        for (size_t i = n; i-- > 1;) d[i] = (d[i - 1] & 0x7FFFu) > inf ? one : d[i - 1];
        d[0] = 0x8000u;
    } else {
        float *d = dst;
        for (size_t i = n; i-- > 1;) d[i] = isnan(d[i - 1]) ? 1.0f : d[i - 1];
        d[0] = -0.0f;
    }
    for (size_t i = 0; i < n; i++) {
        float s = ref_ld(src, sdt, i), d = ref_ld(dst, ddt, i);
        float r = mode == SZ_K_CONVERT_ADD ? add(d, s) : mode == SZ_K_CONVERT_ONTO_ZEROS ? add(0.0f, s) : s;
        if (mode == SZ_K_CONVERT_SET && ddt == sdt) /* a plain copy keeps the bits (signalling NaNs too) */
            memcpy((char *)want + i * ds, (const char *)src + i * ss, ds);
        else if (ddt == SZ_K_BF16)
            ((uint16_t *)want)[i] = ref_f2h(r);
        else if (ddt == SZ_K_F16)
            ((uint16_t *)want)[i] = sz_k_f32_to_f16_1(r);
        else
            memcpy((float *)want + i, &r, 4); /* r as computed (a NaN copied through memory as it is) */
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(nt);
    sz_k_convert(dst, ddt, src, sdt, n, mode);
    omp_set_num_threads(saved);
    int ok = !memcmp(dst, want, n * ds);
    if (!ok)
        for (size_t i = 0; i < n; i++) {
            uint32_t g = ref_bits(dst, ddt, i), w = ref_bits(want, ddt, i);
            if (g != w) {
                printf("\n  dst %s <- src %s mode %d n %zu threads %d: element %zu got 0x%x, want 0x%x\n",
                       tname(ddt), tname(sdt), mode, n, nt, i, g, w);
                break;
            }
        }
    free(sb); free(db); free(wb);
    return ok;
}

static void test_pairs(void)
{
    const size_t lens[] = {1, 15, 16, 17, NSPECIAL, 1000, 16383, 16384, 16384 + 37, 100003};
    for (int dd = 0; dd < 3; dd++)
        for (int sd = 0; sd < 3; sd++)
            for (int mode = 0; mode < 3; mode++)
                for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
                    for (int nt = 1; nt <= 3; nt++)
                        CU_ASSERT(check((sz_k_dtype)dd, (sz_k_dtype)sd, mode, lens[k], nt, 0));
}

/* Around the non-temporal stores' threshold (a thread's destination range of 4 MiB, kernels/bf16.c):
 * just below and above it for each destination size at 1 thread (and split over 2), the buffers
 * unaligned, every pair and mode. */
static void test_large(void)
{
    const size_t lens[] = {(1u << 20) - 64, (1u << 20) + 33, (2u << 20) - 64, (2u << 20) + 37};
    for (int dd = 0; dd < 3; dd++)
        for (int sd = 0; sd < 3; sd++)
            for (int mode = 0; mode < 3; mode++)
                for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                    if ((dd == SZ_K_F32) != (k < 2)) continue; /* fp32 destinations: 1 Mi elements; else 2 Mi */
                    for (int nt = 1; nt <= 2; nt++)
                        CU_ASSERT(check((sz_k_dtype)dd, (sz_k_dtype)sd, mode, lens[k], nt, 3));
                }
}

/* fp32 -> bf16 and fp32 -> fp16, set and onto zeros, through every 61st fp32 bit pattern
 * (denormals, NaNs, all kinds): the kernel's vectorized loops give the scalar rules' bits */
static void test_all_patterns(void)
{
    enum { CH = 1 << 20 };
    float *x = malloc(CH * sizeof *x);
    uint16_t *h = malloc(CH * sizeof *h);
    CU_ASSERT_FATAL(x && h);
    long bad = 0, bad16 = 0;
    for (int mode = 0; mode < 3; mode += 2)
        for (uint64_t base = 0; base < (1ull << 32); base += 61ull * CH) {
            size_t n = 0;
            for (uint64_t u = base; n < CH && u < (1ull << 32); u += 61) x[n++] = flt((uint32_t)u);
            sz_k_convert(h, SZ_K_BF16, x, SZ_K_F32, n, mode);
            for (size_t i = 0; i < n; i++)
                bad += h[i] != ref_f2h(mode ? add(0.0f, x[i]) : x[i]);
            sz_k_convert(h, SZ_K_F16, x, SZ_K_F32, n, mode);
            for (size_t i = 0; i < n; i++)
                bad16 += h[i] != sz_k_f32_to_f16_1(mode ? add(0.0f, x[i]) : x[i]);
        }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(bad16, 0);
    if (bad || bad16) printf("\n  %ld (bf16), %ld (fp16) patterns rounded differently from the reference\n", bad, bad16);
    free(x); free(h);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("convert", NULL, NULL);
    if (!s || !CU_add_test(s, "type pairs and modes against the reference", test_pairs) ||
        !CU_add_test(s, "around the non-temporal threshold, unaligned", test_large) ||
        !CU_add_test(s, "fp32 -> bf16, fp16 over a stride of all fp32 patterns", test_all_patterns)) {
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned f = CU_get_number_of_failures();
    CU_cleanup_registry();
    return f ? 1 : 0;
}
