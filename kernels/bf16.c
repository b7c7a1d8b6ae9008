/* bf16.c — fp32 <-> bf16 and fp32 <-> fp16 conversion of whole buffers (round to nearest even, NaN
 * kept NaN), and the mixed-precision copy kernel (sz_k_convert: working copies, gradient rounding,
 * with optional accumulation) between any of fp32, bf16 and fp16. Plain bit math that the compiler
 * vectorizes (AVX-512 with -march=native on this kind of machine), split in contiguous ranges over
 * the OpenMP threads; identical results on every CPU. vcvtneps2bf16 (AVX512-BF16) was tried for
 * fp32 -> bf16, with the integer rule for the denormal lanes it flushes: no measurable difference
 * (these loops run at the memory's speed: docs/BENCHMARKS.md, "The emulated bf16 path's overhead"),
 * so the one portable rule stays. fp16 (with fp32 or fp16 on the other side) takes F16C
 * (vcvtph2ps, vcvtps2ph round-to-nearest; 8 lanes, function-level target, chosen at run time where
 * the CPU has F16C and AVX2), which is bitwise the portable rule (sz_k_f32_to_f16_1,
 * sz_k_f16_to_f32_1: tests/test_f16.c checks every input) and 2-9x faster than its bit math; the
 * portable loops do the tails, the bf16 <-> fp16 pairs and any other CPU. Large destinations that are
 * only written take non-temporal stores (below: same values, less traffic). */
#include <omp.h>
#include "sz_kernels_impl.h"

static inline size_t esize(int dt) { return dt == SZ_K_F32 ? 4 : 2; }

/* ---- one range, portable (the compiler vectorizes these loops) -------------------------------
 * DDT, SDT: the destination's and the source's types, constants where the dispatch (convert_range)
 * inlines them, so each pair gets its own straight loops. The source is widened exactly (sz_ldx), a
 * 16-bit destination rounded once (sz_stx); SET between equal types copies the bits. */
SZ_INLINE void range_port(void *d, int DDT, const void *s, int SDT, size_t n, int mode)
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

/* ---- fp16 by F16C, where the CPU has it --------------------------------------------------------
 * The same arithmetic as range_port: vcvtph2ps is sz_k_f16_to_f32_1 and vcvtps2ph with
 * round-to-nearest (the immediate; MXCSR's rounding mode is not used) is sz_k_f32_to_f16_1, bit for
 * bit on every input (tests/test_f16.c); ADD is round(f32(dst) + src), one fp32 add (operand order:
 * add_first), ONTO_ZEROS round(0.0f + src) (-0 becomes +0), plain adds (nothing to contract).
 * f16c_range does whole groups of 8 and returns how many it did; range_port does the rest. Only
 * where fp16 meets fp32 or fp16 (f16 -> f16 SET is memcpy; bf16 <-> fp16 stays portable). */
#ifdef SZ_HAVE_F16C_BLOCKS /* x86 with GCC: sz_f16c_ok and <immintrin.h> (sz_kernels_impl.h) */
#define SZ_F16C_RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* first + second with vaddps's operand order pinned (asm: the compiler may swap an intrinsic's): of
 * two NaNs, x86 keeps the first one's. The portable loops keep (as compiled here, scalar tails and
 * vector bodies alike) the destination's for fp16 += fp32 and the source's for fp32 += fp16 and
 * fp16 += fp16; the calls below follow that, so even NaN + NaN gives the portable bits. */
__attribute__((target("avx2,f16c"))) static inline __m256 add_first(__m256 first, __m256 second)
{
    __m256 r;
    __asm__("vaddps %2, %1, %0" : "=x"(r) : "x"(first), "x"(second));
    return r;
}
__attribute__((target("avx2,f16c"), noinline)) static size_t f16c_range(void *d, int DDT, const void *s, int SDT,
                                                                       size_t n, int mode)
{
    size_t m = n & ~(size_t)7, i;
    uint16_t *dh = (uint16_t *)d;
    float *df = (float *)d;
    const uint16_t *sh = (const uint16_t *)s;
    const float *sf = (const float *)s;
    const __m256 z = _mm256_setzero_ps();
#define SZ_LDH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define SZ_STH(p, v) _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph((v), SZ_F16C_RN))
    if (DDT == SZ_K_F16 && SDT == SZ_K_F32) {
        if (mode == SZ_K_CONVERT_ADD)
            for (i = 0; i < m; i += 8) SZ_STH(dh + i, add_first(SZ_LDH(dh + i), _mm256_loadu_ps(sf + i)));
        else if (mode == SZ_K_CONVERT_ONTO_ZEROS)
            for (i = 0; i < m; i += 8) SZ_STH(dh + i, _mm256_add_ps(z, _mm256_loadu_ps(sf + i)));
        else
            for (i = 0; i < m; i += 8) SZ_STH(dh + i, _mm256_loadu_ps(sf + i));
    } else if (DDT == SZ_K_F32 && SDT == SZ_K_F16) {
        if (mode == SZ_K_CONVERT_ADD)
            for (i = 0; i < m; i += 8) _mm256_storeu_ps(df + i, add_first(SZ_LDH(sh + i), _mm256_loadu_ps(df + i)));
        else if (mode == SZ_K_CONVERT_ONTO_ZEROS)
            for (i = 0; i < m; i += 8) _mm256_storeu_ps(df + i, _mm256_add_ps(z, SZ_LDH(sh + i)));
        else
            for (i = 0; i < m; i += 8) _mm256_storeu_ps(df + i, SZ_LDH(sh + i));
    } else if (DDT == SZ_K_F16 && SDT == SZ_K_F16 && mode != SZ_K_CONVERT_SET) {
        if (mode == SZ_K_CONVERT_ADD)
            for (i = 0; i < m; i += 8) SZ_STH(dh + i, add_first(SZ_LDH(sh + i), SZ_LDH(dh + i)));
        else
            for (i = 0; i < m; i += 8) SZ_STH(dh + i, _mm256_add_ps(z, SZ_LDH(sh + i)));
    } else {
        m = 0;
    }
#undef SZ_LDH
#undef SZ_STH
    return m;
}
#endif

/* One range: F16C for the fp16 pairs it covers where the CPU has it, range_port for the rest. */
SZ_INLINE void range_t(void *d, int DDT, const void *s, int SDT, size_t n, int mode)
{
#ifdef SZ_HAVE_F16C_BLOCKS
    if ((DDT == SZ_K_F16 || SDT == SZ_K_F16) && DDT != SZ_K_BF16 && SDT != SZ_K_BF16 &&
        !(DDT == SDT && mode == SZ_K_CONVERT_SET) && n >= 8 && sz_f16c_ok()) {
        size_t k = f16c_range(d, DDT, s, SDT, n, mode);
        d = (char *)d + k * esize(DDT);
        s = (const char *)s + k * esize(SDT);
        n -= k;
    }
#endif
    range_port(d, DDT, s, SDT, n, mode);
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
