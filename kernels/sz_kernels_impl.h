/* sz_kernels_impl.h — private helpers shared by the kernel files (not public API):
 * scalar bf16 rounding, the parallel threshold, and the generic tiled matmul
 * driver used by matmul.c (fp32) and matmul_bf16.c. */
#ifndef SZ_KERNELS_IMPL_H
#define SZ_KERNELS_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif
#include "sz_kernels.h"

/* Below this many elements an elementwise kernel stays on one thread. */
#define SZ_PAR_MIN 16384

/* Inside an OpenMP parallel region, after each thread allocated its scratch p: 1 on every thread
 * when every thread's allocation succeeded, else 0 on every thread (fail, shared, is set by any that
 * failed; a barrier), so that no thread writes its outputs unless all can. */
static inline int sz_par_alloc_ok(const void *p, int *fail)
{
    int any;
    if (!p) {
#pragma omp atomic write
        *fail = 1;
    }
#pragma omp barrier
#pragma omp atomic read
    any = *fail;
    return !any;
}

/* Column block of the row-reduction kernels (dbias, layernorm dweight, encoder):
 * each block is owned by one thread and sums rows in order 0..N-1. */
#define SZ_COL_BLOCK 64

static inline uint32_t sz_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float sz_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* fp32 -> bf16, round to nearest even; NaN is kept a (quiet) NaN. Branch-free
 * so loops over it vectorize. */
static inline uint16_t sz_f32_to_bf16_1(float f)
{
    uint32_t u = sz_f32_bits(f);
    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)(((u & 0x7FFFFFFFu) > 0x7F800000u) ? q : r);
}
static inline float sz_bf16_to_f32_1(uint16_t h) { return sz_bits_f32((uint32_t)h << 16); }

/* expf in plain float arithmetic, so that loops over it vectorize (libm's expf
 * does not without -ffast-math): x = k ln2 + r, |r| <= ln2/2, degree-7 Taylor for
 * e^r, times 2^k. Within 1.2 ulp of exp for normal results (measured); 0 below
 * -87.33654 (where expf would give denormals), inf above 88.72283, NaN stays NaN.
 * Range tests are integer compares on the bits, combined as masks: float compares
 * or branches keep GCC from vectorizing under the default -ftrapping-math.
 * Same bits on every CPU. */
#define SZ_EXP_LO_BITS ((int32_t)0xC2AEAC4F)   /* -87.33654f */
#define SZ_EXP_HI_BITS ((int32_t)0x42B17217)   /*  88.72283f */
static inline float sz_expf(float x)
{
    /* masks (all ones when true), combined bitwise so no branch appears */
    uint32_t ix = sz_f32_bits(x);
    uint32_t mnan = 0u - (uint32_t)((ix & 0x7FFFFFFFu) > 0x7F800000u);
    uint32_t mlo = ~mnan & (0u - (uint32_t)(((int32_t)ix < 0) & ((int32_t)ix > SZ_EXP_LO_BITS)));
    uint32_t mhi = ~mnan & (0u - (uint32_t)((int32_t)ix > SZ_EXP_HI_BITS));
    uint32_t mclamp = mlo | mhi | mnan;
    float xc = sz_bits_f32((ix & ~mclamp) | ((uint32_t)SZ_EXP_LO_BITS & mlo) |
                           ((uint32_t)SZ_EXP_HI_BITS & (mhi | mnan)));
    float kf = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;   /* round(x / ln2) */
    float r = (xc - kf * 0.693145752f) - kf * 1.42860677e-6f;   /* ln2 split hi + lo */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t k = (int32_t)kf, k1 = k / 2;   /* 2^k as 2^k1 * 2^(k-k1): k may be 128 */
    float y = p * sz_bits_f32((uint32_t)(k1 + 127) << 23) * sz_bits_f32((uint32_t)(k - k1 + 127) << 23);
    uint32_t yb = sz_f32_bits(y);
    yb = (yb & ~mclamp) | (0x7F800000u & mhi) | (ix & mnan);   /* 0 where mlo */
    return sz_bits_f32(yb);
}

/* Generic matmul on one destination block, as seen by oneDNN:
 *   d[M,N] (+)= a[M,K] . b[K,N] (+ bias[N])
 * with arbitrary element strides for a and b, d row-major with row stride ldd.
 * The struct is also the primitive-cache key, so it is memset before filling. */
typedef struct {
    int64_t M, N, K;
    int64_t a_sm, a_sk, b_sk, b_sn, ldd;
    int32_t a_dt, b_dt, d_dt, bias_dt;   /* sz_k_dtype; bias_dt -1 = no bias */
    int32_t accumulate;                  /* 1: d += result (oneDNN sum post-op) */
    int32_t nthr;                        /* omp_get_max_threads() when created */
} sz_mm_shape;

/* Runs the whole product, split into fixed tiles of d (independent of the thread
 * count), each tile done by one thread with the full K reduction.
 * Returns 0 (oneDNN), 1 (plain fallback used for some tile), -1 (out of memory,
 * nothing written). */
int sz_mm_tiled(const sz_mm_shape *s, void *d, const void *a, const void *b,
                const void *bias);

/* Per-tile hooks (matmul_gelu.c's fusions): on the thread that computes the tile of d at rows
 * i0..i0+m-1, columns j0..j0+n-1, `before` runs right before its product and `after` right after,
 * while the tile is in cache. Either may be NULL; ctx is theirs. The tiles are the same whatever
 * the thread count, so hooks that touch only their tile keep the results thread-count free. */
typedef struct sz_mm_epi {
    void (*before)(const struct sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n);
    void (*after)(const struct sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n);
    void *ctx;
} sz_mm_epi;
/* sz_mm_tiled with the hooks (epi NULL: none), and the bf16-operand dispatcher of matmul_bf16.c
 * (native oneDNN bf16 tiles, else the exact widening to fp32) with them: there the hooks see d's
 * tiles holding their final values (a bf16 d rounded, as without hooks). */
int sz_mm_tiled_epi(const sz_mm_shape *s, void *d, const void *a, const void *b,
                    const void *bias, const sz_mm_epi *epi);
int sz_mm_bf16_epi(const sz_mm_shape *s, void *d, const uint16_t *a, const uint16_t *b,
                   const uint16_t *bias, const sz_mm_epi *epi);
/* The linear layer's products as the kernels run them (one definition, so fused and plain calls
 * share the tiles' primitives and bits), inputs of in_dt:
 * forward out[N,OC] = inp[N,C] . weight[OC,C]^T (+ bias when has_bias), out of out_dt;
 * backward dinp[N,C] += dout[N,OC] . weight, dinp of dinp_dt. */
void sz_mm_shape_fwd(sz_mm_shape *s, int N, int C, int OC, int in_dt, int out_dt, int has_bias);
void sz_mm_shape_dinp(sz_mm_shape *s, int N, int C, int OC, int in_dt, int dinp_dt);
/* The weight (b) and bias of s made w_dt: SZ_K_BF16 on an fp32 shape is the bf16-weight product
 * (fp32 activations and result; the tiles widen their weight panels, matmul.c's sz_mm_widen_b). */
void sz_mm_shape_weights(sz_mm_shape *s, int w_dt);
/* 1 if oneDNN has an implementation for the tiles of s (e.g. bf16 needs AVX-512). */
int sz_mm_supported(const sz_mm_shape *s);
/* Host bytes of sz_mm_tiled(s) with nthr threads: the largest tile scratchpad per thread + packed tiles. */
size_t sz_k_matmul_shape_host_bytes(const sz_mm_shape *s, int nthr);
/* Host bytes the kernels' working memory takes (+) or gives back (-): the measured high-water. */
void sz_mm_count(int64_t delta);
/* The same split: *scratch the scratchpads the threads keep, *pack the packed tiles of one call. */
void sz_mm_shape_host_split(const sz_mm_shape *s, int nthr, size_t *scratch, size_t *pack);
/* The plain fallback (any dtypes), exposed for the tests. */
void sz_mm_plain(const sz_mm_shape *s, void *d, const void *a, const void *b,
                 const void *bias);
/* dbias[o] (+)= sum_n dout[n,o], rows in order; dout fp32 or bf16, dbias likewise. */
void sz_mm_colsum(void *dbias, int dbias_dt, const void *dout, int dout_dt, int N, int OC);

/* ---- row math shared by the fp32 kernels and their bf16-operand variants (bf16_act.c), so each
 * formula has one copy and both give the same bits ---- */

/* GELU, tanh approximation (gelu.c): x g and the local gradient, g = 1 / (1 + e^(-2u)). */
#define SZ_PI 3.14159265358979323846
#define SZ_GELU_SCALE sqrtf((float)(2.0 / SZ_PI))
static inline float sz_gelu_g(float x, float s)
{
    float cube = 0.044715f * x * x * x;
    return 1.0f / (1.0f + sz_expf(-2.0f * s * (x + cube)));
}
static inline float sz_gelu_1(float x, float s) { return x * sz_gelu_g(x, s); }
static inline float sz_gelu_grad_1(float x, float s)
{
    float g = sz_gelu_g(x, s);
    float sech2 = 4.0f * g * (1.0f - g);
    return g + x * 0.5f * sech2 * s * (1.0f + 3.0f * 0.044715f * x * x);
}

/* SiLU (silu.c): x σ(x), σ(x) = 1/(1 + e^(-x)), and its derivative σ(x) (1 + x (1 - σ(x))). */
static inline float sz_silu_1(float x) { return x / (1.0f + sz_expf(-x)); }
static inline float sz_silu_grad_1(float x)
{
    float s = 1.0f / (1.0f + sz_expf(-x));
    return s * (1.0f + x * (1.0f - s));
}

/* Always inlined: the row functions must inline into each caller with its constant types (an
 * out-of-line copy taking the types at run time vectorizes differently: other bits). */
#define SZ_INLINE static inline __attribute__((always_inline))

/* Element i of a buffer of type dt (sz_k_dtype) as fp32 (a bf16 or fp16 widened exactly); a store
 * rounding once to a 16-bit destination; an accumulation p[i] += v in p's type (bf16, fp16:
 * round(f32(p[i]) + v)).
 * The row functions below take the types as arguments: called with constant types (as every caller
 * does, each branch of a dispatch naming its types), they inline to one straight loop per pair of
 * types, which vectorizes, with the very arithmetic of the fp32 loop (the same contractions), so a
 * bf16 operand changes only the loads and stores. */
SZ_INLINE float sz_ldx(const void *p, int dt, size_t i)
{
    return dt == SZ_K_BF16  ? sz_bf16_to_f32_1(((const uint16_t *)p)[i])
           : dt == SZ_K_F16 ? sz_k_f16_to_f32_1(((const uint16_t *)p)[i])
                            : ((const float *)p)[i];
}
SZ_INLINE void sz_stx(void *p, int dt, size_t i, float v)
{
    if (dt == SZ_K_BF16) ((uint16_t *)p)[i] = sz_f32_to_bf16_1(v);
    else if (dt == SZ_K_F16) ((uint16_t *)p)[i] = sz_k_f32_to_f16_1(v);
    else ((float *)p)[i] = v;
}
SZ_INLINE void sz_accx(void *p, int dt, size_t i, float v)
{
    if (dt == SZ_K_F32) ((float *)p)[i] += v;
    else sz_stx(p, dt, i, sz_ldx(p, dt, i) + v);
}

/* Serial conversions of one row (a thread's piece inside a parallel kernel: no OpenMP region of
 * their own), the scalar rule's bits; the compiler vectorizes the widening. The rounding, where the
 * build targets AVX512-BF16 (-march=native on such a CPU: then the binary needs the CPU it was built
 * for anyway, so no run-time check can add anything), uses vcvtneps2bf16, which rounds to nearest
 * even and quiets a NaN exactly as sz_f32_to_bf16_1 does (checked on all 2^32 inputs, Zen 4) but
 * flushes denormal inputs to zero: vectors holding a denormal take the integer rule for those
 * lanes. Elsewhere the rule's loop, which the compiler vectorizes. (Rows in cache are bound by the
 * rounding's instructions, so the one instruction pays here; bf16.c's whole-buffer loops run at the
 * memory's speed and keep the rule.) */
static inline void sz_bf16_to_f32_row(float *d, const uint16_t *s, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] = sz_bf16_to_f32_1(s[i]);
}
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512F__) && \
    defined(__AVX512DQ__)
#define SZ_BF16_HW_ROUND 1
/* 16 floats rounded: vcvtneps2bf16, and the rule's integer form on the lanes vfpclassps finds
 * denormal (never NaN), (u + 0x7FFF + lsb) >> 16. */
static inline __m256i sz_bf16_round16(__m512 x)
{
    __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
    __mmask16 den = _mm512_fpclass_ps_mask(x, 0x20);
    if (__builtin_expect(den != 0, 0)) {
        __m512i u = _mm512_castps_si512(x);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
        h = _mm256_mask_mov_epi16(h, den, _mm512_cvtepi32_epi16(r));
    }
    return h;
}
static inline void sz_f32_to_bf16_row(uint16_t *d, const float *s, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) { /* 32 at a time: one vcvtne2ps2bf16, one test for denormals */
        __m512 a = _mm512_loadu_ps(s + i), b = _mm512_loadu_ps(s + i + 16);
        __mmask16 da = _mm512_fpclass_ps_mask(a, 0x20), db = _mm512_fpclass_ps_mask(b, 0x20);
        if (__builtin_expect(_kortestz_mask16_u8(da, db), 1)) {
            _mm512_storeu_si512((void *)(d + i), (__m512i)_mm512_cvtne2ps_pbh(b, a));
        } else {
            _mm256_storeu_si256((__m256i *)(d + i), sz_bf16_round16(a));
            _mm256_storeu_si256((__m256i *)(d + i + 16), sz_bf16_round16(b));
        }
    }
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(d + i), sz_bf16_round16(_mm512_loadu_ps(s + i)));
    for (size_t k = 0, rest = n - i; k < rest; k++) d[i + k] = sz_f32_to_bf16_1(s[i + k]);
}
#else
#define SZ_BF16_HW_ROUND 0
static inline void sz_f32_to_bf16_row(uint16_t *d, const float *s, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] = sz_f32_to_bf16_1(s[i]);
}
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#define SZ_ROW16 1
/* Row sums over C % 16 == 0 elements are written out 16 lanes wide where the build has AVX-512
 * (the layernorm's and the RMSNorm's, shared by their fp32 kernels and the native bf16 path's
 * pipelined rows, bf16_act.c): lane k adds elements k, k + 16, ... in order, and sz_lane_sum ends the sum as
 * 0 + lane 0 + ... + lane 15. That is how GCC compiles their `omp simd reduction` loops at 16 lanes
 * (so the bits are those the loops had on a Zen 4 build), and fixing it in the source keeps the fp32
 * kernels and the bf16 path equal whatever width a compiler or its tuning would pick. */
SZ_INLINE __m512 sz_ld16(const void *p, int dt, int i) /* 16 elements of type dt at i, as fp32 */
{
    if (dt == SZ_K_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))), 16));
    return _mm512_loadu_ps((const float *)p + i);
}
SZ_INLINE float sz_lane_sum(__m512 v)
{
    float l[16] __attribute__((aligned(64)));
    _mm512_store_ps(l, v);
    float t = 0.0f;
    for (int k = 0; k < 16; k++) t += l[k];
    return t;
}
/* sz_expf and sz_gelu_1 on 16 lanes, written with AVX-512 masks: the operations GCC emits for their
 * vectorized loops (the same constants, products, contractions and integer steps), in fewer
 * instructions (compares into mask registers instead of all-ones lanes), so the same bits for every
 * input (checked on all 2^32 floats against sz_k_gelu_fwd, and on a sample by tests/test_bf16_act.c).
 * The native bf16 path's GELU forward uses it (bf16_act.c, matmul_gelu.c's epilogue). */
/* U vectors at a time (U <= SZ_GELU_U), each step applied to all U before the next: one vector's
 * chain of dependent steps (~85 cycles of latency) is longer than the out-of-order window covers, so
 * independent vectors side by side keep the units busy. */
#define SZ_GELU_U 4
#define SZ_U_(stmt) for (int u_ = 0; u_ < U; u_++) { stmt; }
SZ_INLINE void sz_expf16u(__m512 *x, int U)
{
    const __m512i lo = _mm512_set1_epi32(SZ_EXP_LO_BITS), hi = _mm512_set1_epi32(SZ_EXP_HI_BITS);
    __m512i ix[SZ_GELU_U], k[SZ_GELU_U], k1[SZ_GELU_U];
    __mmask16 mnan[SZ_GELU_U], mlo[SZ_GELU_U], mhi[SZ_GELU_U];
    __m512 kf[SZ_GELU_U], r[SZ_GELU_U], p[SZ_GELU_U];
    SZ_U_(ix[u_] = _mm512_castps_si512(x[u_]))
    SZ_U_(mnan[u_] = _mm512_cmpgt_epu32_mask(_mm512_and_si512(ix[u_], _mm512_set1_epi32(0x7FFFFFFF)),
                                             _mm512_set1_epi32(0x7F800000)))
    SZ_U_(mlo[u_] = _mm512_mask_cmpgt_epi32_mask(_mm512_cmplt_epi32_mask(ix[u_], _mm512_setzero_si512()) & ~mnan[u_],
                                                 ix[u_], lo))
    SZ_U_(mhi[u_] = _mm512_cmpgt_epi32_mask(ix[u_], hi) & ~mnan[u_])
    SZ_U_(kf[u_] = _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_mask_mov_epi32(ix[u_], mlo[u_], lo), mhi[u_] | mnan[u_], hi)))
    SZ_U_(r[u_] = kf[u_]) /* xc */
    SZ_U_(kf[u_] = _mm512_sub_ps(_mm512_fmadd_ps(r[u_], _mm512_set1_ps(1.44269504f), _mm512_set1_ps(12582912.0f)),
                                 _mm512_set1_ps(12582912.0f)))
    SZ_U_(r[u_] = _mm512_fnmadd_ps(kf[u_], _mm512_set1_ps(0.693145752f), r[u_]))
    SZ_U_(r[u_] = _mm512_fnmadd_ps(kf[u_], _mm512_set1_ps(1.42860677e-6f), r[u_]))
    SZ_U_(p[u_] = _mm512_fmadd_ps(r[u_], _mm512_set1_ps(1.0f / 5040.0f), _mm512_set1_ps(1.0f / 720.0f)))
    SZ_U_(p[u_] = _mm512_fmadd_ps(p[u_], r[u_], _mm512_set1_ps(1.0f / 120.0f)))
    SZ_U_(p[u_] = _mm512_fmadd_ps(p[u_], r[u_], _mm512_set1_ps(1.0f / 24.0f)))
    SZ_U_(p[u_] = _mm512_fmadd_ps(p[u_], r[u_], _mm512_set1_ps(1.0f / 6.0f)))
    SZ_U_(p[u_] = _mm512_fmadd_ps(p[u_], r[u_], _mm512_set1_ps(0.5f)))
    SZ_U_(p[u_] = _mm512_fmadd_ps(p[u_], r[u_], _mm512_set1_ps(1.0f)))
    SZ_U_(p[u_] = _mm512_fmadd_ps(p[u_], r[u_], _mm512_set1_ps(1.0f)))
    SZ_U_(k[u_] = _mm512_cvttps_epi32(kf[u_]))
    SZ_U_(k1[u_] = _mm512_srai_epi32(_mm512_add_epi32(k[u_], _mm512_srli_epi32(k[u_], 31)), 1)) /* k / 2, toward 0 */
    SZ_U_(p[u_] = _mm512_mul_ps(p[u_], _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1[u_], _mm512_set1_epi32(127)), 23))))
    SZ_U_(p[u_] = _mm512_mul_ps(p[u_], _mm512_castsi512_ps(_mm512_slli_epi32(
                                           _mm512_add_epi32(_mm512_sub_epi32(k[u_], k1[u_]), _mm512_set1_epi32(127)), 23))))
    SZ_U_(k[u_] = _mm512_mask_mov_epi32(_mm512_castps_si512(p[u_]), mlo[u_], _mm512_setzero_si512()))
    SZ_U_(k[u_] = _mm512_mask_mov_epi32(k[u_], mhi[u_], _mm512_set1_epi32(0x7F800000)))
    SZ_U_(x[u_] = _mm512_castsi512_ps(_mm512_mask_mov_epi32(k[u_], mnan[u_], ix[u_])))
}
/* g[0..U) = 1 / (1 + e^(-2u)) of x[0..U) (sz_gelu_g) */
SZ_INLINE void sz_gelu_g16u(const __m512 *x, __m512 *g, int U)
{
    const float c = -2.0f * SZ_GELU_SCALE;
    SZ_U_(g[u_] = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x[u_]), x[u_]))
    SZ_U_(g[u_] = _mm512_mul_ps(_mm512_fmadd_ps(g[u_], x[u_], x[u_]), _mm512_set1_ps(c)))
    sz_expf16u(g, U);
    SZ_U_(g[u_] = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), g[u_])))
}
/* x[0..U) replaced by gelu(x) */
SZ_INLINE void sz_gelu16u(__m512 *x, int U)
{
    __m512 g[SZ_GELU_U];
    sz_gelu_g16u(x, g, U);
    SZ_U_(x[u_] = _mm512_mul_ps(x[u_], g[u_]))
}
/* x[0..U) replaced by GELU's local gradient (sz_gelu_grad_1) */
SZ_INLINE void sz_gelu_grad16u(__m512 *x, int U)
{
    const float s = SZ_GELU_SCALE, c3 = 3.0f * 0.044715f;
    __m512 g[SZ_GELU_U], t[SZ_GELU_U];
    sz_gelu_g16u(x, g, U);
    SZ_U_(t[u_] = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(4.0f), g[u_]), _mm512_sub_ps(_mm512_set1_ps(1.0f), g[u_])))
    SZ_U_(t[u_] = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(x[u_], _mm512_set1_ps(0.5f)), t[u_]), _mm512_set1_ps(s)))
    SZ_U_(x[u_] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(c3), x[u_]), x[u_], _mm512_set1_ps(1.0f)))
    SZ_U_(x[u_] = _mm512_fmadd_ps(t[u_], x[u_], g[u_]))
}
#undef SZ_U_
SZ_INLINE __m512 sz_gelu16(__m512 x)
{
    sz_gelu16u(&x, 1);
    return x;
}
#else
#define SZ_ROW16 0
#endif

#if SZ_BF16_HW_ROUND
/* GELU's backward on n elements, serially, AVX-512: c = gelu'(x) * dout (dout of type d_dt; the
 * product alone, rounded before any addition: _mm512_mul_round_ps, which the compiler never fuses),
 * then dinp (type i_dt) = c (set 1), 0.0f + c (set 2: what adding onto a zeroed dinp gives, dinp
 * not read; -0 becomes +0) or dinp + c (set 0), a bf16 dinp rounded once in registers. Bitwise
 * sz_gelu_grad_1(x) * dout and the additions of bf16_act.c's loops (gelu_contrib). dinp may be dout
 * (in place) with set 1 or 2. */
SZ_INLINE void sz_gelu_bwd16_put(void *dinp, int i_dt, int set, size_t i, __m512 c, __mmask16 m)
{
    if (set == 2) {
        c = _mm512_add_ps(_mm512_setzero_ps(), c);
        set = 1;
    }
    if (i_dt == SZ_K_BF16) {
        uint16_t *h = (uint16_t *)dinp + i;
        if (!set) c = _mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h)), 16)), c);
        _mm256_mask_storeu_epi16(h, m, sz_bf16_round16(c));
    } else {
        float *f = (float *)dinp + i;
        _mm512_mask_storeu_ps(f, m, set ? c : _mm512_add_ps(_mm512_maskz_loadu_ps(m, f), c));
    }
}
SZ_INLINE __m512 sz_ld16m(const void *p, int dt, size_t i, __mmask16 m) /* sz_ld16, lanes outside m zero */
{
    if (dt == SZ_K_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i)), 16));
    return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}
SZ_INLINE void sz_gelu_bwd_row16(void *dinp, int i_dt, const float *x, const void *d, int d_dt, size_t n, int set)
{
    size_t i = 0;
    for (; i + 16 * SZ_GELU_U <= n; i += 16 * SZ_GELU_U) {
        __m512 v[SZ_GELU_U];
        for (int u = 0; u < SZ_GELU_U; u++) v[u] = _mm512_loadu_ps(x + i + 16 * u);
        sz_gelu_grad16u(v, SZ_GELU_U);
        for (int u = 0; u < SZ_GELU_U; u++)
            sz_gelu_bwd16_put(dinp, i_dt, set, i + 16 * u,
                              _mm512_mul_round_ps(v[u], sz_ld16m(d, d_dt, i + 16 * u, 0xFFFF), _MM_FROUND_CUR_DIRECTION),
                              0xFFFF);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        sz_gelu_grad16u(&v, 1);
        sz_gelu_bwd16_put(dinp, i_dt, set, i, _mm512_mul_round_ps(v, sz_ld16m(d, d_dt, i, m), _MM_FROUND_CUR_DIRECTION), m);
    }
}
#endif

#if SZ_BF16_HW_ROUND
/* o[0..n) = bf16(gelu(x[0..n))), serially: sz_gelu16 rounded in registers (sz_bf16_round16), the
 * tail through masked loads and stores; bitwise sz_f32_to_bf16_1(sz_gelu_1(x)). */
SZ_INLINE void sz_gelu_row_bf16(uint16_t *o, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 * SZ_GELU_U <= n; i += 16 * SZ_GELU_U) {
        __m512 v[SZ_GELU_U];
        for (int u = 0; u < SZ_GELU_U; u++) v[u] = _mm512_loadu_ps(x + i + 16 * u);
        sz_gelu16u(v, SZ_GELU_U);
        for (int u = 0; u < SZ_GELU_U; u++) _mm256_storeu_si256((__m256i *)(o + i + 16 * u), sz_bf16_round16(v[u]));
    }
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(o + i), sz_bf16_round16(sz_gelu16(_mm512_loadu_ps(x + i))));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(o + i, m, sz_bf16_round16(sz_gelu16(_mm512_maskz_loadu_ps(m, x + i))));
    }
}
#endif

/* LayerNorm (layernorm.c), one row's mean *mean and rstd *rstd (s). */
SZ_INLINE void sz_ln_row_stats(const float *x, int C, float *mean, float *rstd)
{
    const float eps = 1e-5f;
    float m = 0.0f, v = 0.0f;
#if SZ_ROW16
    if (C % 16 == 0) {
        __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
        for (int i = 0; i < C; i += 16) a = _mm512_add_ps(a, _mm512_loadu_ps(x + i));
        m = sz_lane_sum(a) / C;
        __m512 vm = _mm512_set1_ps(m);
        for (int i = 0; i < C; i += 16) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
            b = _mm512_fmadd_ps(d, d, b);
        }
        v = sz_lane_sum(b) / C;
        *mean = m;
        *rstd = 1.0f / sqrtf(v + eps);
        return;
    }
#endif
#pragma omp simd reduction(+ : m)
    for (int i = 0; i < C; i++) m += x[i];
    m = m / C;
#pragma omp simd reduction(+ : v)
    for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
    v = v / C;
    *mean = m;
    *rstd = 1.0f / sqrtf(v + eps);
}

/* LayerNorm (layernorm.c), one row: mean, rstd and the normalised, scaled and shifted output o (type
 * o_dt) from fp32 x, with weight and bias of type p_dt (bias may be NULL). */
SZ_INLINE void sz_ln_row_fwd_x(void *o, int o_dt, float *mean, float *rstd, const float *x, const void *weight,
                                   const void *bias, int p_dt, int C)
{
    float m, s;
    sz_ln_row_stats(x, C, &m, &s);
    if (bias)
        for (int i = 0; i < C; i++)
            sz_stx(o, o_dt, i, (s * (x[i] - m)) * sz_ldx(weight, p_dt, i) + sz_ldx(bias, p_dt, i));
    else
        for (int i = 0; i < C; i++) sz_stx(o, o_dt, i, (s * (x[i] - m)) * sz_ldx(weight, p_dt, i));
    *mean = m;
    *rstd = s;
}
SZ_INLINE void sz_ln_row_fwd(float *o, float *mean, float *rstd, const float *x, const float *weight,
                                 const float *bias, int C)
{
    sz_ln_row_fwd_x(o, SZ_K_F32, mean, rstd, x, weight, bias, SZ_K_F32, C);
}

/* LayerNorm, one row's input gradient, added to di (set: written to di). Its sums run over fp32
 * rows: a bf16 dout or weight is widened into a row first (bf16_act.c), since loads of another type
 * would let the compiler vectorize, and so add up, these sums in another order. */
SZ_INLINE void sz_ln_row_bwd(float *di, const float *d, const float *x, const float *weight, float m, float s,
                                 int C, int set)
{
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#if SZ_ROW16
    if (C % 16 == 0) { /* the two sums and the gradient 16 lanes wide (above), GCC's contractions */
        __m512 vm = _mm512_set1_ps(m), vs = _mm512_set1_ps(s), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
        for (int i = 0; i < C; i += 16) {
            __m512 dn = _mm512_mul_ps(_mm512_loadu_ps(weight + i), _mm512_loadu_ps(d + i));
            a1 = _mm512_add_ps(a1, dn);
            a2 = _mm512_fmadd_ps(dn, _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vs), a2);
        }
        __m512 dm = _mm512_set1_ps(sz_lane_sum(a1) / C), dnm = _mm512_set1_ps(sz_lane_sum(a2) / C);
        for (int i = 0; i < C; i += 16) {
            __m512 nr = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vs);
            __m512 dval = _mm512_fnmadd_ps(nr, dnm, _mm512_fmsub_ps(_mm512_loadu_ps(weight + i), _mm512_loadu_ps(d + i), dm));
            _mm512_storeu_ps(di + i, set ? _mm512_mul_ps(dval, vs) : _mm512_fmadd_ps(dval, vs, _mm512_loadu_ps(di + i)));
        }
        return;
    }
#endif
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
    for (int i = 0; i < C; i++) {
        float dnorm_i = weight[i] * d[i];
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * ((x[i] - m) * s);
    }
    dnorm_mean = dnorm_mean / C;
    dnorm_norm_mean = dnorm_norm_mean / C;
    if (set)
        for (int i = 0; i < C; i++) {
            float norm_i = (x[i] - m) * s;
            float dval = weight[i] * d[i] - dnorm_mean - norm_i * dnorm_norm_mean;
            di[i] = dval * s;
        }
    else
        for (int i = 0; i < C; i++) {
            float norm_i = (x[i] - m) * s;
            float dval = weight[i] * d[i] - dnorm_mean - norm_i * dnorm_norm_mean;
            di[i] += dval * s;
        }
}

/* The residual add's backward on n elements, serially: da += dr, db += dr, or (set: SZ_K_SET_A,
 * SZ_K_SET_B) da = dr, db = dr (layernorm.c's fused backward, row by row). */
static inline void sz_k_residual_bwd_row(float *da, float *db, const float *dr, size_t n, int set)
{
    int sa = set & SZ_K_SET_A, sb = set & SZ_K_SET_B;
    if (sa && sb) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            da[i] = dr[i];
            db[i] = dr[i];
        }
    } else if (sa || sb) {
        float *s = sa ? da : db, *g = sa ? db : da;
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            s[i] = dr[i];
            g[i] += dr[i];
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            da[i] += dr[i];
            db[i] += dr[i];
        }
    }
}

/* Softmax-cross-entropy forward and backward on one row (softmax_xent.c's fused kernel), in three
 * parts that the fp32 kernel runs on its row as one and the bf16 variant (bf16_act.c) runs on its
 * widened row: the max of l[0..V) (sz_sxent_max: a max is exact in any order, so the bf16 variant
 * takes it while it widens), then l[0..V) replaced by its exponentials and their sum returned
 * (sz_sxent_expsum: a sum, so it runs over the fp32 row l, with the fp32 kernel's vectorization and
 * order), then the gradient of elements [0, n) of a piece, out[i] = (l[i] / sum - [i == ix]) g
 * (sz_sxent_grad: elementwise, no contraction possible, so any piece gives the same bits; ix
 * relative to the piece, out may be l). The loss is -logf(l[ix] / sum) between the last two. */
SZ_INLINE float sz_sxent_max(const float *l, int V)
{
    float maxval = -10000.0f;
#pragma omp simd reduction(max : maxval)
    for (int i = 0; i < V; i++) maxval = l[i] > maxval ? l[i] : maxval;
    return maxval;
}
SZ_INLINE float sz_sxent_expsum(float *l, float maxval, int V)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < V; i++) {
        l[i] = sz_expf(l[i] - maxval);
        sum += l[i];
    }
    return sum;
}
SZ_INLINE void sz_sxent_grad(const float *l, void *out, int out_dt, int n, int ix, float sum, float g)
{
#pragma omp simd
    for (int i = 0; i < n; i++) sz_stx(out, out_dt, i, (l[i] / sum - (i == ix ? 1.0f : 0.0f)) * g);
}
SZ_INLINE void sz_sxent_fused_row(float *l, void *out, int out_dt, float *loss, int ix, float g, int V, int Vp)
{
    float maxval = sz_sxent_max(l, V);
    float sum = sz_sxent_expsum(l, maxval, V);
    *loss = -logf(l[ix] / sum);
    sz_sxent_grad(l, out, out_dt, V, ix, sum, g);
    for (int i = V; i < Vp; i++) sz_stx(out, out_dt, i, 0.0f);
}

/* LayerNorm dweight, dbias (dbias may be NULL) from dout (fp32 or bf16, widened by column block):
 * column blocks, each adding rows 0..N-1 in order (onto 0 where set has SZ_K_SET_DW / SZ_K_SET_DB); in
 * parallel when par (layernorm.c). */
void sz_ln_params_bwd(float *dweight, float *dbias, const void *dout, sz_k_dtype dout_dt, const float *inp,
                      const float *mean, const float *rstd, int N, int C, int par, int set);

/* RMSNorm (rmsnorm.c), one row: rstd and the scaled output. */
static inline void sz_rms_row_fwd(float *o, float *rstd, const float *x, const float *weight, int C, float eps)
{
#if SZ_ROW16
    if (C % 16 == 0) { /* the sum 16 lanes wide (sz_lane_sum), the output as GCC compiles the loop below */
        __m512 a = _mm512_setzero_ps();
        for (int i = 0; i < C; i += 16) {
            __m512 xv = _mm512_loadu_ps(x + i);
            a = _mm512_fmadd_ps(xv, xv, a);
        }
        float s = 1.0f / sqrtf(sz_lane_sum(a) / C + eps);
        __m512 vs = _mm512_set1_ps(s);
        for (int i = 0; i < C; i += 16)
            _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(weight + i)));
        *rstd = s;
        return;
    }
#endif
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    float s = 1.0f / sqrtf(ss / C + eps);
    for (int i = 0; i < C; i++) o[i] = (x[i] * s) * weight[i];
    *rstd = s;
}

/* RMSNorm, one row's input gradient, added to di. out_i = x_i s w_i, s = (Σx²/C + eps)^(-1/2),
 * ds/dx_j = -s³ x_j / C: dx_j = s w_j d_j - (s³/C) x_j Σ_i d_i w_i x_i. */
static inline void sz_rms_row_bwd(float *di, const float *d, const float *x, const float *weight, float s, int C,
                                  int set)
{
#if SZ_ROW16
    if (C % 16 == 0) { /* the sum 16 lanes wide (sz_lane_sum), the gradient with GCC's contraction */
        __m512 a = _mm512_setzero_ps();
        for (int i = 0; i < C; i += 16)
            a = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(d + i), _mm512_loadu_ps(weight + i)), _mm512_loadu_ps(x + i), a);
        float dot = sz_lane_sum(a);
        float k = s * s * s * dot / C;
        __m512 vs = _mm512_set1_ps(s), vk = _mm512_set1_ps(k);
        for (int i = 0; i < C; i += 16) {
            __m512 v = _mm512_fmsub_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(weight + i)), _mm512_loadu_ps(d + i),
                                       _mm512_mul_ps(vk, _mm512_loadu_ps(x + i)));
            _mm512_storeu_ps(di + i, set ? v : _mm512_add_ps(_mm512_loadu_ps(di + i), v));
        }
        return;
    }
#endif
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < C; i++) dot += d[i] * weight[i] * x[i];
    float k = s * s * s * dot / C;
    if (set) /* written, not added to (the first writer) */
        for (int i = 0; i < C; i++) di[i] = s * weight[i] * d[i] - k * x[i];
    else
        for (int i = 0; i < C; i++) di[i] += s * weight[i] * d[i] - k * x[i];
}

/* RMSNorm dweight (dw_i = Σ_n d_i x_i s) from dout (fp32 or bf16, widened by column block): column
 * blocks, each adding rows 0..N-1 in order (onto 0 where set has SZ_K_SET_DW); in parallel when par
 * (rmsnorm.c). */
void sz_rms_weight_bwd(float *dweight, const void *dout, sz_k_dtype dout_dt, const float *inp, const float *rstd,
                       int N, int C, int par, int set);

/* RoPE (rope.c): the cos/sin table [T, hs/2] (cos, sin pairs, computed in double; NULL when out of
 * memory; the caller frees it), and one row [3C] of qkv at the position whose table row is cs. */
float *sz_rope_table(int T, int hs, float theta);
static inline void sz_rope_row_fwd(float *o, const float *x, const float *cs, int C, int NH)
{
    int hs = C / NH, h2 = hs / 2;
    for (int part = 0; part < 2; part++) /* q, k */
        for (int h = 0; h < NH; h++) {
            const float *xh = x + part * C + h * hs;
            float *oh = o + part * C + h * hs;
            for (int i = 0; i < h2; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1], x0 = xh[2 * i], x1 = xh[2 * i + 1];
                oh[2 * i] = x0 * c - x1 * s;
                oh[2 * i + 1] = x0 * s + x1 * c;
            }
        }
    for (int j = 2 * C; j < 3 * C; j++) o[j] = x[j];
}
/* The rotation's transpose, added to di: dx0 = c d0 + s d1, dx1 = -s d0 + c d1; v's gradient passes. */
static inline void sz_rope_row_bwd(float *di, const float *d, const float *cs, int C, int NH, int set)
{
    int hs = C / NH, h2 = hs / 2;
    for (int part = 0; part < 2; part++)
        for (int h = 0; h < NH; h++) {
            const float *dh = d + part * C + h * hs;
            float *gh = di + part * C + h * hs;
            if (set) /* written, not added to (the first writer) */
                for (int i = 0; i < h2; i++) {
                    float c = cs[2 * i], s = cs[2 * i + 1], d0 = dh[2 * i], d1 = dh[2 * i + 1];
                    gh[2 * i] = d0 * c + d1 * s;
                    gh[2 * i + 1] = d1 * c - d0 * s;
                }
            else
                for (int i = 0; i < h2; i++) {
                    float c = cs[2 * i], s = cs[2 * i + 1], d0 = dh[2 * i], d1 = dh[2 * i + 1];
                    gh[2 * i] += d0 * c + d1 * s;
                    gh[2 * i + 1] += d1 * c - d0 * s;
                }
        }
    if (set)
        memcpy(di + 2 * C, d + 2 * C, (size_t)C * sizeof *di);
    else
        for (int j = 2 * C; j < 3 * C; j++) di[j] += d[j];
}

/* The optimizers' step loop (adamw.c, sgd.c; sumsq.c): range(ctx, lo, hi) on the fixed chunks of
 * sz_k_sumsq, in parallel, in pieces of 2048 elements (range must be elementwise), each piece's
 * squares added (the chunk's sz_k_sumsq_chunk lanes) right after its update, from L1 (grad of
 * sz_k_dtype gdt: fp32, bf16 or fp16); *sumsq (when not NULL) = the chunk norms added in chunk
 * order, so the same bits whatever the thread count. -1, nothing done, when out of memory. */
int sz_k_update_chunks(size_t n, const void *grad, int gdt, double *sumsq,
                       void (*range)(void *ctx, size_t lo, size_t hi), void *ctx);

/* fp16 <-> fp32 of a block by F16C (vcvtph2ps; vcvtps2ph round-to-nearest by the immediate), bitwise
 * sz_k_f16_to_f32_1 / sz_k_f32_to_f16_1 on every input (tests/test_f16.c, as in bf16.c); the
 * optimizer and sumsq kernels widen a block of fp16 gradients into fp32, run their fp32 loops on it
 * (the same arithmetic by construction) and round the result's block once. Chosen at run time
 * (sz_f16c_ok: the CPU has F16C and AVX2); SZ_F16C_BLOCK elements at a time (a multiple of 16). */
#define SZ_F16C_BLOCK 2048
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define SZ_HAVE_F16C_BLOCKS 1
#include <immintrin.h>
static inline int sz_f16c_ok(void)
{
    static int ok = -1; /* -1: not asked yet; every thread that asks first gets the same answer */
    int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
        __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
    }
    return v;
}
__attribute__((target("avx2,f16c"), noinline, unused)) static void sz_f16_to_f32_f16c(float *d, const uint16_t *s,
                                                                                      size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = sz_k_f16_to_f32_1(s[i]);
}
__attribute__((target("avx2,f16c"), noinline, unused)) static void sz_f32_to_f16_f16c(uint16_t *d, const float *s,
                                                                                      size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) d[i] = sz_k_f32_to_f16_1(s[i]);
}
#endif

#endif /* SZ_KERNELS_IMPL_H */
