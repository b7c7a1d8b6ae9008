/* sumsq.c — the squared L2 norm of n fp32, bf16 or fp16 values (a 16-bit value widened exactly),
 * in double: fixed 64K-element chunks, each summed over 16 fixed lanes, the chunk sums added in
 * chunk order, so the result never depends on the thread count. Used by the sumsq codelet and,
 * fused, by AdamW and SGD (sz_k_update_chunks). */
#include <stdlib.h>
#include "sz_kernels_impl.h"

#define LANES 16 /* independent double partial sums, added in lane order: vectorizes, stays fixed */
#define SZ_UPDATE_PIECE 2048 /* a multiple of LANES */

static inline size_t esize(int dt) { return dt == SZ_K_F32 ? 4 : 2; }

/* Lane k adds the squares of elements k, k + LANES, ... of x[0, n) (n a multiple of LANES, x of
 * type DT, a constant where the dispatch below inlines it) into l[k], each lane in element order. */
SZ_INLINE void lanes_add_t(double *restrict l, const void *x, int DT, int64_t n)
{
    for (int64_t i = 0; i < n; i += LANES)
        for (int k = 0; k < LANES; k++) {
            double v = sz_ldx(x, DT, (size_t)(i + k));
            l[k] += v * v;
        }
}

/* A chunk's sum is these lanes over the whole chunk, in any number of pieces (each a multiple of
 * LANES long), then lanes_end. */
static inline void lanes_add(double *restrict l, const void *x, int dt, int64_t n)
{
    if (dt == SZ_K_BF16)
        lanes_add_t(l, x, SZ_K_BF16, n);
    else if (dt == SZ_K_F16) {
#if SZ_HAVE_F16C_BLOCKS
        /* F16C: blocks (multiples of LANES) widened into fp32, then the fp32 lanes: the same
         * values in the same lanes in the same order, so the same bits */
        if (sz_f16c_ok()) {
            float xb[SZ_F16C_BLOCK];
            for (int64_t b = 0; b < n; b += SZ_F16C_BLOCK) {
                int64_t len = b + SZ_F16C_BLOCK < n ? SZ_F16C_BLOCK : n - b;
                sz_f16_to_f32_f16c(xb, (const uint16_t *)x + b, (size_t)len);
                lanes_add_t(l, xb, SZ_K_F32, len);
            }
            return;
        }
#endif
        lanes_add_t(l, x, SZ_K_F16, n);
    }
    else
        lanes_add_t(l, x, SZ_K_F32, n);
}

/* The lanes added in lane order, then the squares of the n < LANES elements of x past them. */
static inline double lanes_end(const double *l, const void *x, int dt, int64_t n)
{
    double s = 0.0;
    for (int k = 0; k < LANES; k++)
        s += l[k];
    for (int64_t i = 0; i < n; i++) {
        double v = sz_ldx(x, dt, (size_t)i);
        s += v * v;
    }
    return s;
}

double sz_k_sumsq_chunk(const void *x, int dt, int64_t n)
{
    double l[LANES] = {0};
    int64_t m = n - n % LANES;
    lanes_add(l, x, dt, m);
    return lanes_end(l, (const char *)x + m * esize(dt), dt, n - m);
}

double sz_k_sumsq(const void *x, int dt, int64_t n)
{
    int64_t nchunks = (n + SZ_SUMSQ_CHUNK - 1) / SZ_SUMSQ_CHUNK;
    double one, *part = nchunks > 1 ? malloc((size_t)nchunks * sizeof *part) : &one;
    if (!part)
        return -1.0;
    size_t es = esize(dt);
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t len = (c + 1) * SZ_SUMSQ_CHUNK < n ? SZ_SUMSQ_CHUNK : n - c * SZ_SUMSQ_CHUNK;
        part[c] = sz_k_sumsq_chunk((const char *)x + (size_t)c * SZ_SUMSQ_CHUNK * es, dt, len);
    }
    double s = 0.0;
    for (int64_t c = 0; c < nchunks; c++)
        s += part[c];
    if (part != &one)
        free(part);
    return s;
}

int sz_k_update_chunks(size_t n, const void *grad, int gdt, double *sumsq,
                       void (*range)(void *ctx, size_t lo, size_t hi), void *ctx)
{
    int64_t nchunks = ((int64_t)n + SZ_SUMSQ_CHUNK - 1) / SZ_SUMSQ_CHUNK;
    double one, *part = !sumsq ? NULL : nchunks > 1 ? malloc((size_t)nchunks * sizeof *part) : &one;
    if (sumsq && !part)
        return -1;
    size_t es = esize(gdt);
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * SZ_SUMSQ_CHUNK, hi = lo + SZ_SUMSQ_CHUNK < n ? lo + SZ_SUMSQ_CHUNK : n;
        /* the update and the chunk's norm in pieces of SZ_UPDATE_PIECE elements, each piece's squares
         * added right after its update, from L1: the lanes' chains then run beside the next piece's
         * memory traffic instead of after the whole chunk's (the sum is sz_k_sumsq_chunk's: the same
         * lanes, each in element order) */
        double l[LANES] = {0};
        const char *g = (const char *)grad + lo * es;
        size_t m = hi - (hi - lo) % LANES;
        for (size_t a = lo; a < hi; a += SZ_UPDATE_PIECE) {
            size_t b = a + SZ_UPDATE_PIECE < hi ? a + SZ_UPDATE_PIECE : hi;
            range(ctx, a, b);
            if (part)
                lanes_add(l, g + (a - lo) * es, gdt, (int64_t)((b < m ? b : m) - a));
        }
        if (part)
            part[c] = lanes_end(l, g + (m - lo) * es, gdt, (int64_t)(hi - m));
    }
    if (sumsq) {
        double s = 0.0;
        for (int64_t c = 0; c < nchunks; c++)
            s += part[c];
        *sumsq = s;
    }
    if (part != &one)
        free(part);
    return 0;
}
