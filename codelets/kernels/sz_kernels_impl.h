/* sz_kernels_impl.h — private helpers shared by the kernel files (not public API):
 * scalar bf16 rounding, the parallel threshold, and the generic tiled matmul
 * driver used by matmul.c (fp32) and matmul_bf16.c. */
#ifndef SZ_KERNELS_IMPL_H
#define SZ_KERNELS_IMPL_H

#include <stdint.h>
#include <string.h>
#include "sz_kernels.h"

/* Below this many elements an elementwise kernel stays on one thread. */
#define SZ_PAR_MIN 16384

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

#endif /* SZ_KERNELS_IMPL_H */
