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
/* The plain fallback (any dtypes), exposed for the tests. */
void sz_mm_plain(const sz_mm_shape *s, void *d, const void *a, const void *b,
                 const void *bias);
/* dbias[o] (+)= sum_n dout[n,o], rows in order; dout fp32 or bf16, dbias likewise. */
void sz_mm_colsum(void *dbias, int dbias_dt, const void *dout, int dout_dt, int N, int OC);

#endif /* SZ_KERNELS_IMPL_H */
