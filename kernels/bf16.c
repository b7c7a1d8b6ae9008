/* bf16.c — fp32 <-> bf16 and fp32 <-> fp16 conversion of whole buffers (round to nearest even, NaN
 * kept NaN), and the mixed-precision copy kernel (sz_k_convert: working copies, gradient rounding,
 * with optional accumulation) between any of fp32, bf16 and fp16. Plain bit math that the compiler
 * vectorizes (AVX-512 with -march=native on this kind of machine), split in contiguous ranges over
 * the OpenMP threads; identical results on every CPU. vcvtneps2bf16 (AVX512-BF16) was tried for
 * fp32 -> bf16, with the integer rule for the denormal lanes it flushes: no measurable difference
 * (these loops run at the memory's speed: docs/BENCHMARKS.md, "The emulated bf16 path's overhead"),
 * so the one portable rule stays; fp16 likewise uses the portable rule (sz_k_f32_to_f16_1,
 * sz_k_f16_to_f32_1), not F16C. Large destinations that are only written take non-temporal stores
 * (below: same values, less traffic). */
#include <omp.h>
#include "sz_kernels_impl.h"

static inline size_t esize(int dt) { return dt == SZ_K_F32 ? 4 : 2; }

/* ---- one range, portable (the compiler vectorizes these loops) -------------------------------
 * DDT, SDT: the destination's and the source's types, constants where the dispatch (convert_range)
 * inlines them, so each pair gets its own straight loops. The source is widened exactly (sz_ldx), a
 * 16-bit destination rounded once (sz_stx); SET between equal types copies the bits. */
SZ_INLINE void range_t(void *d, int DDT, const void *s, int SDT, size_t n, int mode)
{
    if (mode == SZ_K_CONVERT_ADD) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) sz_accx(d, DDT, i, sz_ldx(s, SDT, i));
    } else if (mode == SZ_K_CONVERT_ONTO_ZEROS) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) sz_stx(d, DDT, i, 0.0f + sz_ldx(s, SDT, i));
    } else if (DDT == SDT) {
        memcpy(d, s, n * esize(DDT));
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) sz_stx(d, DDT, i, sz_ldx(s, SDT, i));
    }
}

/* ---- large ranges written whole: the same element loops, stored with non-temporal stores ----
 * A destination of SZ_NT_MIN_BYTES or more that is only written (not SZ_K_CONVERT_ADD) and not a
 * plain copy (memcpy decides that itself) goes around the caches: no read of its lines before the
 * write (a third of the traffic of a fp32 -> bf16 copy), and it would not stay in cache anyway. The
 * values are the element loops' (computed by them into a block in L1, then stored), so the bits are
 * the same. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define SZ_NT_MIN_BYTES ((size_t)4 << 20)
#define SZ_NT_BLOCK 1024 /* bytes computed into L1 before they are streamed out */
SZ_INLINE void range_nt(void *d, int DDT, const void *s, int SDT, size_t n, int mode)
{
    size_t ds = esize(DDT), ss = esize(SDT), blk = SZ_NT_BLOCK / ds;
    size_t i = ((64 - ((uintptr_t)d & 63)) & 63) / ds;
    if (i > n) i = n;
    range_t(d, DDT, s, SDT, i, mode); /* up to the first 64-byte boundary */
    for (; i + blk <= n; i += blk) {
        union { float f[SZ_NT_BLOCK / 4]; uint16_t h[SZ_NT_BLOCK / 2]; } t __attribute__((aligned(64)));
        range_t(&t, DDT, (const char *)s + i * ss, SDT, blk, mode);
        for (size_t b = 0; b < SZ_NT_BLOCK; b += 64)
            _mm512_stream_si512((void *)((char *)d + i * ds + b), _mm512_load_si512((const void *)((char *)&t + b)));
    }
    range_t((char *)d + i * ds, DDT, (const char *)s + i * ss, SDT, n - i, mode);
    _mm_sfence();
}
#endif

SZ_INLINE void range_pair(void *d, int DDT, const void *s, int SDT, size_t n, int mode)
{
#if defined(__AVX512F__)
    if (mode != SZ_K_CONVERT_ADD && !(mode == SZ_K_CONVERT_SET && DDT == SDT) && n * esize(DDT) >= SZ_NT_MIN_BYTES) {
        range_nt(d, DDT, s, SDT, n, mode);
        return;
    }
#endif
    range_t(d, DDT, s, SDT, n, mode);
}

SZ_INLINE void range_to(void *d, int DDT, const void *s, sz_k_dtype sdt, size_t n, int mode)
{
    if (sdt == SZ_K_BF16) range_pair(d, DDT, s, SZ_K_BF16, n, mode);
    else if (sdt == SZ_K_F16) range_pair(d, DDT, s, SZ_K_F16, n, mode);
    else range_pair(d, DDT, s, SZ_K_F32, n, mode);
}

static void convert_range(void *dst, sz_k_dtype ddt, const void *src, sz_k_dtype sdt, size_t lo, size_t n, int mode)
{
    void *d = (char *)dst + lo * esize(ddt);
    const void *s = (const char *)src + lo * esize(sdt);
    if (ddt == SZ_K_BF16) range_to(d, SZ_K_BF16, s, sdt, n, mode);
    else if (ddt == SZ_K_F16) range_to(d, SZ_K_F16, s, sdt, n, mode);
    else range_to(d, SZ_K_F32, s, sdt, n, mode);
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

void sz_k_f32_to_f16(uint16_t *dst, const float *src, size_t n)
{
    sz_k_convert(dst, SZ_K_F16, src, SZ_K_F32, n, SZ_K_CONVERT_SET);
}

void sz_k_f16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    sz_k_convert(dst, SZ_K_F32, src, SZ_K_F16, n, SZ_K_CONVERT_SET);
}
