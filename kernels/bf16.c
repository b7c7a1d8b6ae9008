/* bf16.c — fp32 <-> bf16 conversion of whole buffers (round to nearest even, NaN kept NaN), and
 * the mixed-precision copy kernel (sz_k_convert: working copies, gradient rounding, with optional
 * accumulation). Plain bit math that the compiler vectorizes (AVX-512 with -march=native on this
 * kind of machine), split in contiguous ranges over the OpenMP threads; identical results on every
 * CPU. vcvtneps2bf16 (AVX512-BF16) was tried for fp32 -> bf16, with the integer rule for the
 * denormal lanes it flushes: no measurable difference (these loops run at the memory's speed:
 * docs/BENCHMARKS.md, "The emulated bf16 path's overhead"), so the one portable rule stays. Large
 * destinations that are only written take non-temporal stores (below: same values, less traffic). */
#include <omp.h>
#include "sz_kernels_impl.h"

/* ---- one range, portable (the compiler vectorizes these loops) ------------------------------- */

static void f2h_range(uint16_t *d, const float *s, size_t n, int mode)
{
    if (mode == SZ_K_CONVERT_ADD) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(d[i]) + s[i]);
    } else if (mode == SZ_K_CONVERT_ONTO_ZEROS) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = sz_f32_to_bf16_1(0.0f + s[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = sz_f32_to_bf16_1(s[i]);
    }
}

static void h2f_range(float *d, const uint16_t *s, size_t n, int mode)
{
    if (mode == SZ_K_CONVERT_ADD) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] += sz_bf16_to_f32_1(s[i]);
    } else if (mode == SZ_K_CONVERT_ONTO_ZEROS) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = 0.0f + sz_bf16_to_f32_1(s[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = sz_bf16_to_f32_1(s[i]);
    }
}

static void h2h_range(uint16_t *d, const uint16_t *s, size_t n, int mode)
{
    if (mode == SZ_K_CONVERT_ADD) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(d[i]) + sz_bf16_to_f32_1(s[i]));
    } else if (mode == SZ_K_CONVERT_ONTO_ZEROS) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = sz_f32_to_bf16_1(0.0f + sz_bf16_to_f32_1(s[i]));
    } else {
        memcpy(d, s, n * sizeof *d);
    }
}

static void f2f_range(float *d, const float *s, size_t n, int mode)
{
    if (mode == SZ_K_CONVERT_ADD) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] += s[i];
    } else if (mode == SZ_K_CONVERT_ONTO_ZEROS) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = 0.0f + s[i];
    } else {
        memcpy(d, s, n * sizeof *d);
    }
}

/* ---- large ranges written whole: the same element loops, stored with non-temporal stores ----
 * A destination of SZ_NT_MIN_BYTES or more that is only written (not SZ_K_CONVERT_ADD) goes
 * around the caches: no read of its lines before the write (a third of the traffic of a
 * fp32 -> bf16 copy), and it would not stay in cache anyway. The values are the element loops'
 * (computed by them into a 64-byte block, then stored), so the bits are the same. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define SZ_NT_MIN_BYTES ((size_t)4 << 20)
static void f2h_range_nt(uint16_t *d, const float *s, size_t n, int mode)
{
    size_t i = ((64 - ((uintptr_t)d & 63)) & 63) / sizeof *d;
    if (i > n) i = n;
    f2h_range(d, s, i, mode); /* up to the first 64-byte boundary */
    for (; i + 32 <= n; i += 32) {
        uint16_t t[32] __attribute__((aligned(64)));
        f2h_range(t, s + i, 32, mode);
        _mm512_stream_si512((void *)(d + i), _mm512_load_si512((const void *)t));
    }
    f2h_range(d + i, s + i, n - i, mode);
    _mm_sfence();
}
static void h2f_range_nt(float *d, const uint16_t *s, size_t n, int mode)
{
    size_t i = ((64 - ((uintptr_t)d & 63)) & 63) / sizeof *d;
    if (i > n) i = n;
    h2f_range(d, s, i, mode);
    for (; i + 16 <= n; i += 16) {
        float t[16] __attribute__((aligned(64)));
        h2f_range(t, s + i, 16, mode);
        _mm512_stream_si512((void *)(d + i), _mm512_load_si512((const void *)t));
    }
    h2f_range(d + i, s + i, n - i, mode);
    _mm_sfence();
}
#endif

static void convert_range(void *dst, sz_k_dtype ddt, const void *src, sz_k_dtype sdt, size_t lo, size_t n, int mode)
{
#if defined(__AVX512F__)
    int nt = mode != SZ_K_CONVERT_ADD && n * (ddt == SZ_K_BF16 ? 2 : 4) >= SZ_NT_MIN_BYTES;
#else
    int nt = 0;
#endif
    (void)nt;
    if (ddt == SZ_K_BF16 && sdt == SZ_K_F32) {
#if defined(__AVX512F__)
        if (nt) {
            f2h_range_nt((uint16_t *)dst + lo, (const float *)src + lo, n, mode);
            return;
        }
#endif
        f2h_range((uint16_t *)dst + lo, (const float *)src + lo, n, mode);
    } else if (ddt == SZ_K_F32 && sdt == SZ_K_BF16) {
#if defined(__AVX512F__)
        if (nt) {
            h2f_range_nt((float *)dst + lo, (const uint16_t *)src + lo, n, mode);
            return;
        }
#endif
        h2f_range((float *)dst + lo, (const uint16_t *)src + lo, n, mode);
    } else if (ddt == SZ_K_BF16) {
        h2h_range((uint16_t *)dst + lo, (const uint16_t *)src + lo, n, mode);
    } else {
        f2f_range((float *)dst + lo, (const float *)src + lo, n, mode);
    }
}

/* Contiguous ranges, a multiple of 64 elements each (whole cache lines of either type). */
void sz_k_convert(void *dst, sz_k_dtype ddt, const void *src, sz_k_dtype sdt, size_t n, int mode)
{
    if (n < SZ_PAR_MIN) {
        convert_range(dst, ddt, src, sdt, 0, n, mode);
        return;
    }
#pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t per = (n + nt - 1) / nt;
        per = (per + 63) / 64 * 64;
        size_t lo = t * per, hi = lo + per < n ? lo + per : n;
        if (lo < hi)
            convert_range(dst, ddt, src, sdt, lo, hi - lo, mode);
    }
}

void sz_k_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    sz_k_convert(dst, SZ_K_BF16, src, SZ_K_F32, n, SZ_K_CONVERT_SET);
}

void sz_k_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    sz_k_convert(dst, SZ_K_F32, src, SZ_K_BF16, n, SZ_K_CONVERT_SET);
}
