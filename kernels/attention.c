/* attention.c — causal multi-head self-attention whose memory is linear in T (the FlashAttention
 * scheme on CPU): the forward keeps no B·NH·T·T tensor, only two statistics per query row (the
 * row's softmax max and 1/sum), and the backward recomputes each row's scores and probabilities
 * from q, k and those statistics. Same semantics as llm.c's attention (attention_tt.c): scale
 * 1/sqrt(hs), causal mask t2 <= t, softmax max starting at -10000, probabilities normalised before
 * they weight v.
 *
 * Blocking: one (b, h) pair is one unit of work, done by one thread; its K (and in the backward V)
 * is copied transposed into a per-thread, 64-byte aligned scratch [hs][T16] (T16 = T rounded up to
 * 16), so a score block of keys is FMAs over i = 0..hs-1 in the ISA's vector lanes (SZ_ATT_VL: 16
 * with AVX-512, 8 with AVX2) with no horizontal sums, and the forward scores SZ_ATT_QB query rows
 * against each loaded key block (a lane's sum runs in the same order whatever the vector width).
 * Every score, probability and sum is computed in a fixed order that depends on no thread count,
 * and the forward and the backward compute scores with the one function below (sz_att_scores), so
 * the probabilities the backward recomputes are bitwise those the forward used. Scratch per
 * thread: (hs + SZ_ATT_QB) T16 floats forward, 2 (hs + SZ_ATT_BQ) T16 + 2 T hs floats backward.
 * bf16 operands (the native bf16 path, the _mx entry points) are widened and rounded per (b, h)
 * pair inside that scratch (SZ_ATT_QB hs more floats forward, T hs more for a bf16 dout and T hs more for a
 * bf16 dinp backward), with the bits of the fp32 kernel on whole fp32 copies. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#include "sz_kernels_impl.h"

#define SZ_ATT_QB 4   /* query rows scored together */
#define SZ_ATT_ROW 256 /* head sizes up to this round a bf16 dinp row through a stack row */

/* The vector the kernels hold in registers: one register of the ISA the build targets. A GCC
 * vector wider than the registers is split, and the blocks below then spill most of their
 * accumulators: with 16 floats on AVX2 the kernels ran 6-7x slower than with 8. */
#if defined(__AVX512F__)
#define SZ_ATT_VL 16
#elif defined(__AVX__)
#define SZ_ATT_VL 8
#else
#define SZ_ATT_VL 4
#endif
/* query rows the backward takes together (its dk, dv updates: sz_att_rank_tile) */
#define SZ_ATT_BQ (SZ_ATT_VL == 16 ? 8 : SZ_ATT_QB)
typedef float sz_vf __attribute__((vector_size(SZ_ATT_VL * 4)));
typedef float sz_vfu __attribute__((vector_size(SZ_ATT_VL * 4), aligned(4)));

/* a + s * v in every lane, one rounding (FMA) where the ISA has it. Spelt out: GCC contracts
 * `a += s * v` itself only as its tuning likes (for Zen it keeps accumulator chains as a multiply
 * and an add), which would make the bits depend on -mtune and on how a loop is blocked. */
static inline sz_vf sz_att_fma(sz_vf a, float s, sz_vf v)
{
#if defined(__AVX512F__)
    return (sz_vf)_mm512_fmadd_ps(_mm512_set1_ps(s), (__m512)v, (__m512)a);
#elif defined(__FMA__)
    return (sz_vf)_mm256_fmadd_ps(_mm256_set1_ps(s), (__m256)v, (__m256)a);
#else
    return a + s * v;
#endif
}

/* s[r * lds + j] = scale * sum_{i < hs} q[r][i] * kt[i * ldk + j] for j < n16 (a multiple of 16)
 * and r < nr <= SZ_ATT_QB; the sum runs i = 0, 1, ... in every lane, so a lane's bits depend on
 * neither nr nor how the lanes are grouped (4 rows x 2 key vectors, or 1 row x 8 key vectors, at a
 * time: 8 independent FMA chains). kt and s 64-byte aligned, ldk and lds multiples of 16. One
 * function for the forward and the backward: same bits. */
__attribute__((noinline)) static void sz_att_scores(float *s, size_t lds, const float *const *q, int nr,
                                                    const float *kt, size_t ldk, int n16, int hs,
                                                    float scale)
{
    int j0 = 0;
    if (nr == 1) {
        const float *q0 = q[0];
        for (; j0 + 8 * SZ_ATT_VL <= n16; j0 += 8 * SZ_ATT_VL) {
            sz_vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
            const float *k = kt + j0;
            for (int i = 0; i < hs; i++, k += ldk) {
                float qi = q0[i];
                a0 = sz_att_fma(a0, qi, *(const sz_vf *)k);
                a1 = sz_att_fma(a1, qi, *(const sz_vf *)(k + SZ_ATT_VL));
                a2 = sz_att_fma(a2, qi, *(const sz_vf *)(k + 2 * SZ_ATT_VL));
                a3 = sz_att_fma(a3, qi, *(const sz_vf *)(k + 3 * SZ_ATT_VL));
                a4 = sz_att_fma(a4, qi, *(const sz_vf *)(k + 4 * SZ_ATT_VL));
                a5 = sz_att_fma(a5, qi, *(const sz_vf *)(k + 5 * SZ_ATT_VL));
                a6 = sz_att_fma(a6, qi, *(const sz_vf *)(k + 6 * SZ_ATT_VL));
                a7 = sz_att_fma(a7, qi, *(const sz_vf *)(k + 7 * SZ_ATT_VL));
            }
            float *o = s + j0;
            *(sz_vf *)o = a0 * scale; *(sz_vf *)(o + SZ_ATT_VL) = a1 * scale;
            *(sz_vf *)(o + 2 * SZ_ATT_VL) = a2 * scale; *(sz_vf *)(o + 3 * SZ_ATT_VL) = a3 * scale;
            *(sz_vf *)(o + 4 * SZ_ATT_VL) = a4 * scale; *(sz_vf *)(o + 5 * SZ_ATT_VL) = a5 * scale;
            *(sz_vf *)(o + 6 * SZ_ATT_VL) = a6 * scale; *(sz_vf *)(o + 7 * SZ_ATT_VL) = a7 * scale;
        }
        for (; j0 + 2 * SZ_ATT_VL <= n16; j0 += 2 * SZ_ATT_VL) {
            sz_vf a0 = {0}, a1 = {0};
            const float *k = kt + j0;
            for (int i = 0; i < hs; i++, k += ldk) {
                a0 = sz_att_fma(a0, q0[i], *(const sz_vf *)k);
                a1 = sz_att_fma(a1, q0[i], *(const sz_vf *)(k + SZ_ATT_VL));
            }
            *(sz_vf *)(s + j0) = a0 * scale;
            *(sz_vf *)(s + j0 + SZ_ATT_VL) = a1 * scale;
        }
    }
    const float *q0 = q[0], *q1 = q[nr > 1 ? 1 : 0], *q2 = q[nr > 2 ? 2 : 0], *q3 = q[nr > 3 ? 3 : 0];
    for (; j0 + 2 * SZ_ATT_VL <= n16; j0 += 2 * SZ_ATT_VL) {
        sz_vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        const float *k = kt + j0;
        for (int i = 0; i < hs; i++, k += ldk) {
            sz_vf kv = *(const sz_vf *)k, kw = *(const sz_vf *)(k + SZ_ATT_VL);
            a0 = sz_att_fma(a0, q0[i], kv); b0 = sz_att_fma(b0, q0[i], kw);
            a1 = sz_att_fma(a1, q1[i], kv); b1 = sz_att_fma(b1, q1[i], kw);
            a2 = sz_att_fma(a2, q2[i], kv); b2 = sz_att_fma(b2, q2[i], kw);
            a3 = sz_att_fma(a3, q3[i], kv); b3 = sz_att_fma(b3, q3[i], kw);
        }
        *(sz_vf *)(s + j0) = a0 * scale; *(sz_vf *)(s + j0 + SZ_ATT_VL) = b0 * scale;
        if (nr > 1) { *(sz_vf *)(s + lds + j0) = a1 * scale; *(sz_vf *)(s + lds + j0 + SZ_ATT_VL) = b1 * scale; }
        if (nr > 2) { *(sz_vf *)(s + 2 * lds + j0) = a2 * scale; *(sz_vf *)(s + 2 * lds + j0 + SZ_ATT_VL) = b2 * scale; }
        if (nr > 3) { *(sz_vf *)(s + 3 * lds + j0) = a3 * scale; *(sz_vf *)(s + 3 * lds + j0 + SZ_ATT_VL) = b3 * scale; }
    }
    for (; j0 < n16; j0 += SZ_ATT_VL) {
        sz_vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        const float *k = kt + j0;
        for (int i = 0; i < hs; i++, k += ldk) {
            sz_vf kv = *(const sz_vf *)k;
            a0 = sz_att_fma(a0, q0[i], kv);
            a1 = sz_att_fma(a1, q1[i], kv);
            a2 = sz_att_fma(a2, q2[i], kv);
            a3 = sz_att_fma(a3, q3[i], kv);
        }
        *(sz_vf *)(s + j0) = a0 * scale;
        if (nr > 1) *(sz_vf *)(s + lds + j0) = a1 * scale;
        if (nr > 2) *(sz_vf *)(s + 2 * lds + j0) = a2 * scale;
        if (nr > 3) *(sz_vf *)(s + 3 * lds + j0) = a3 * scale;
    }
}

/* dst[i * T16 + t] = src[t * ld + i] for t < T, i < hs; columns T..T16-1 zero. */
static void sz_att_transpose(float *dst, const float *src, size_t ld, int T, int T16, int hs)
{
    for (int i = 0; i < hs; i++) {
        float *d = dst + (size_t)i * T16;
        for (int t = 0; t < T; t++) d[t] = src[(size_t)t * ld + i];
        for (int t = T; t < T16; t++) d[t] = 0.0f;
    }
}

/* acc[i] += sum_{j < n} w[j] * rows[j * ld + i] for i < hs, in order j = 0, 1, ... in every lane,
 * with 4 vectors of lanes held in registers over the whole j loop (an accumulator kept in memory
 * would chain every step through a store and a load). rows need no alignment. */
static void sz_att_axpy_rows(float *acc, const float *w, const float *rows, size_t ld, int n, int hs)
{
    int i0 = 0;
    for (; i0 + 4 * SZ_ATT_VL <= hs; i0 += 4 * SZ_ATT_VL) {
        sz_vf a0 = *(sz_vfu *)(acc + i0), a1 = *(sz_vfu *)(acc + i0 + SZ_ATT_VL);
        sz_vf a2 = *(sz_vfu *)(acc + i0 + 2 * SZ_ATT_VL), a3 = *(sz_vfu *)(acc + i0 + 3 * SZ_ATT_VL);
        const float *r = rows + i0;
        for (int j = 0; j < n; j++, r += ld) {
            float wj = w[j];
            a0 = sz_att_fma(a0, wj, *(const sz_vfu *)r);
            a1 = sz_att_fma(a1, wj, *(const sz_vfu *)(r + SZ_ATT_VL));
            a2 = sz_att_fma(a2, wj, *(const sz_vfu *)(r + 2 * SZ_ATT_VL));
            a3 = sz_att_fma(a3, wj, *(const sz_vfu *)(r + 3 * SZ_ATT_VL));
        }
        *(sz_vfu *)(acc + i0) = a0; *(sz_vfu *)(acc + i0 + SZ_ATT_VL) = a1;
        *(sz_vfu *)(acc + i0 + 2 * SZ_ATT_VL) = a2; *(sz_vfu *)(acc + i0 + 3 * SZ_ATT_VL) = a3;
    }
    for (; i0 + SZ_ATT_VL <= hs; i0 += SZ_ATT_VL) {
        sz_vf a0 = *(sz_vfu *)(acc + i0);
        const float *r = rows + i0;
        for (int j = 0; j < n; j++, r += ld) a0 = sz_att_fma(a0, w[j], *(const sz_vfu *)r);
        *(sz_vfu *)(acc + i0) = a0;
    }
    for (; i0 < hs; i0++) {
        float a = acc[i0];
        for (int j = 0; j < n; j++) a += w[j] * rows[(size_t)j * ld + i0];
        acc[i0] = a;
    }
}

/* sz_att_axpy_rows for the nr <= SZ_ATT_QB query rows of a tile: acc[r][i] += sum_{j <= t0 + r}
 * w[r * ldw + j] * rows[j * ld + i]. Keys 0..t0, which every row of the tile sees, go four rows at a
 * time with each loaded row of `rows` serving all four (4 rows x 4 vectors of lanes in registers
 * with AVX-512, 4 x 2 below, where 16 registers hold no more); then row r's keys t0 + 1 .. t0 + r
 * and the columns past the blocked ones one row at a time. Each row's sum still runs j = 0, 1, ...
 * in every lane (a sum carried through memory between the pieces is exact), so the bits are those
 * of sz_att_axpy_rows over j <= t0 + r. */
#if SZ_ATT_VL == 16
#define SZ_ATT_AXV 4
#else
#define SZ_ATT_AXV 2
#endif
static void sz_att_axpy_tile(float *const *acc, const float *w, size_t ldw, const float *rows, size_t ld, int t0,
                             int nr, int hs)
{
    int i0 = 0, n = t0 + 1;
    if (nr == SZ_ATT_QB)
        for (; i0 + SZ_ATT_AXV * SZ_ATT_VL <= hs; i0 += SZ_ATT_AXV * SZ_ATT_VL) {
            sz_vf a[SZ_ATT_QB][SZ_ATT_AXV];
            for (int r = 0; r < SZ_ATT_QB; r++)
                for (int v = 0; v < SZ_ATT_AXV; v++) a[r][v] = *(sz_vfu *)(acc[r] + i0 + v * SZ_ATT_VL);
            const float *x = rows + i0;
            for (int j = 0; j < n; j++, x += ld) {
                sz_vf xv[SZ_ATT_AXV];
                for (int v = 0; v < SZ_ATT_AXV; v++) xv[v] = *(const sz_vfu *)(x + v * SZ_ATT_VL);
                for (int r = 0; r < SZ_ATT_QB; r++) {
                    float wr = w[r * ldw + j];
                    for (int v = 0; v < SZ_ATT_AXV; v++) a[r][v] = sz_att_fma(a[r][v], wr, xv[v]);
                }
            }
            for (int r = 0; r < SZ_ATT_QB; r++)
                for (int v = 0; v < SZ_ATT_AXV; v++) *(sz_vfu *)(acc[r] + i0 + v * SZ_ATT_VL) = a[r][v];
        }
    for (int r = 0; r < nr; r++) {
        if (i0)
            sz_att_axpy_rows(acc[r], w + r * ldw + n, rows + (size_t)n * ld, ld, r, i0);
        if (i0 < hs)
            sz_att_axpy_rows(acc[r] + i0, w + r * ldw, rows + i0, ld, t0 + r + 1, hs - i0);
    }
}

static float *sz_att_alloc(size_t nfloats)
{
    return aligned_alloc(64, (nfloats * sizeof(float) + 63) / 64 * 64);
}

/* out fp32 or bf16 (out_dt): a bf16 row is computed in fp32 in a per-thread row of hs floats and
 * rounded once, so its bits are those of the fp32 output rounded. */
static int sz_att_fwd(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH, T16 = (T + 15) & ~15, fail = 0;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel if ((size_t)B * T * T * NH >= SZ_PAR_MIN) shared(fail)
    {
        float *kt = sz_att_alloc(((size_t)hs + SZ_ATT_QB) * T16 + (size_t)SZ_ATT_QB * hs);
        float *S = kt ? kt + (size_t)hs * T16 : NULL;
        float *orow = S ? S + (size_t)SZ_ATT_QB * T16 : NULL;
        if (sz_par_alloc_ok(kt, &fail)) { /* no thread writes unless every thread has its scratch */
#pragma omp for collapse(2) schedule(static)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++) {
                    const float *base = inp + (size_t)b * T * C3 + h * hs;   /* q of row 0 */
                    sz_att_transpose(kt, base + C, C3, T, T16, hs);
                    for (int t0 = 0; t0 < T; t0 += SZ_ATT_QB) {
                        int nr = T - t0 < SZ_ATT_QB ? T - t0 : SZ_ATT_QB;
                        const float *q[SZ_ATT_QB];
                        for (int r = 0; r < nr; r++) q[r] = base + (size_t)(t0 + r) * C3;
                        sz_att_scores(S, T16, q, nr, kt, T16, (t0 + nr + 15) & ~15, hs, scale);
                        for (int r = 0; r < nr; r++) {
                            int t = t0 + r;
                            float *p = S + (size_t)r * T16, maxval = -10000.0f, expsum = 0.0f;
                            for (int j = 0; j <= t; j++) maxval = p[j] > maxval ? p[j] : maxval;
#pragma omp simd reduction(+ : expsum)
                            for (int j = 0; j <= t; j++) {
                                float e = sz_expf(p[j] - maxval);
                                expsum += e;
                                p[j] = e;
                            }
                            float inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;
                            for (int j = 0; j <= t; j++) p[j] *= inv;
                            float *st = stats + (((size_t)b * NH + h) * T + t) * 2;
                            st[0] = maxval;
                            st[1] = inv;
                        }
                        float *o[SZ_ATT_QB]; /* p . v, the tile's rows together */
                        for (int r = 0; r < nr; r++) {
                            o[r] = out_dt == SZ_K_BF16 ? orow + (size_t)r * hs
                                                       : (float *)out + ((size_t)b * T + t0 + r) * C + h * hs;
                            for (int i = 0; i < hs; i++) o[r][i] = 0.0f;
                        }
                        sz_att_axpy_tile(o, S, T16, base + 2 * C, C3, t0, nr, hs);
                        if (out_dt == SZ_K_BF16)
                            for (int r = 0; r < nr; r++)
                                sz_f32_to_bf16_row((uint16_t *)out + ((size_t)b * T + t0 + r) * C + h * hs, o[r],
                                                   (size_t)hs);
                    }
                }
        }
        free(kt);
    }
    return fail ? -1 : 0;
}

int sz_k_attention_fwd(float *out, float *stats, const float *inp, int B, int T, int C, int NH)
{
    return sz_att_fwd(out, SZ_K_F32, stats, inp, B, T, C, NH);
}

int sz_k_attention_fwd_mx_impl(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C,
                               int NH, sz_k_att_impl impl)
{
    if (impl == SZ_K_ATT_AMX || (impl == SZ_K_ATT_AUTO && out_dt == SZ_K_BF16 && sz_k_attention_amx_ok()))
        return sz_k_attention_amx_fwd(out, out_dt, stats, inp, B, T, C, NH);
    return sz_att_fwd(out, out_dt, stats, inp, B, T, C, NH);
}

int sz_k_attention_fwd_mx(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C,
                          int NH)
{
    return sz_k_attention_fwd_mx_impl(out, out_dt, stats, inp, B, T, C, NH, SZ_K_ATT_AUTO);
}

/* Per (b, h), query rows t = 0..T-1 in order: recompute the scores and p = exp(s - max) * inv
 * (bitwise the forward's), datt = dout . v, dpre = p * (datt - sum(p * datt)) (the softmax
 * Jacobian in O(T)); dq += dpre * scale . k straight into dinp, and dk, dv collect in a per-thread
 * [T][hs] scratch in t order, added to dinp once the pair is done. Every sum runs in t (or j)
 * order; rows go SZ_ATT_BQ at a time (scores and dq SZ_ATT_QB rows a call; dk, dv held in registers
 * across the whole tile). */
/* For keys j in [j0, j1): dk[j] += g[r][j] q[r] and dv[j] += p[r][j] d[r] for r = 0..nr-1 in that
 * order (g[r] = g + r * lds, likewise p; nr <= SZ_ATT_BQ), which are bitwise the updates one row at
 * a time: a row tile only keeps dk[j], dv[j] in registers between its rows. More rows a tile, fewer
 * passes of dk, dv ([T][hs] each, in L2) through the registers. */
static void sz_att_rank_tile(float *dk, float *dv, const float *g, const float *p, size_t lds,
                             const float *const *q, const float *const *d, int nr, int j0, int j1, int hs)
{
    int i0 = 0;
#if SZ_ATT_VL == 16
    if (nr == 8) { /* AVX-512: 8 rows' q and d vectors and dk, dv in 18 of the 32 registers */
        for (; i0 + SZ_ATT_VL <= hs; i0 += SZ_ATT_VL) {
            sz_vf qv[8], dw[8];
            for (int r = 0; r < 8; r++) {
                qv[r] = *(const sz_vfu *)(q[r] + i0);
                dw[r] = *(const sz_vfu *)(d[r] + i0);
            }
            for (int j = j0; j < j1; j++) {
                sz_vf k = *(sz_vfu *)(dk + (size_t)j * hs + i0), v = *(sz_vfu *)(dv + (size_t)j * hs + i0);
                for (int r = 0; r < 8; r++) {
                    k = sz_att_fma(k, g[r * lds + j], qv[r]);
                    v = sz_att_fma(v, p[r * lds + j], dw[r]);
                }
                *(sz_vfu *)(dk + (size_t)j * hs + i0) = k;
                *(sz_vfu *)(dv + (size_t)j * hs + i0) = v;
            }
        }
    } else
#endif
    if (nr > 4) { /* rows 0-3 for every key, then the rest: each dk[j], dv[j] still takes rows in order */
        sz_att_rank_tile(dk, dv, g, p, lds, q, d, 4, j0, j1, hs);
        sz_att_rank_tile(dk, dv, g + 4 * lds, p + 4 * lds, lds, q + 4, d + 4, nr - 4, j0, j1, hs);
        return;
    }
    if (nr == 4)
        for (; i0 + SZ_ATT_VL <= hs; i0 += SZ_ATT_VL) {
            sz_vf q0 = *(const sz_vfu *)(q[0] + i0), q1 = *(const sz_vfu *)(q[1] + i0);
            sz_vf q2 = *(const sz_vfu *)(q[2] + i0), q3 = *(const sz_vfu *)(q[3] + i0);
            sz_vf d0 = *(const sz_vfu *)(d[0] + i0), d1 = *(const sz_vfu *)(d[1] + i0);
            sz_vf d2 = *(const sz_vfu *)(d[2] + i0), d3 = *(const sz_vfu *)(d[3] + i0);
            for (int j = j0; j < j1; j++) {
                sz_vf k = *(sz_vfu *)(dk + (size_t)j * hs + i0), v = *(sz_vfu *)(dv + (size_t)j * hs + i0);
                k = sz_att_fma(k, g[j], q0); v = sz_att_fma(v, p[j], d0);
                k = sz_att_fma(k, g[lds + j], q1); v = sz_att_fma(v, p[lds + j], d1);
                k = sz_att_fma(k, g[2 * lds + j], q2); v = sz_att_fma(v, p[2 * lds + j], d2);
                k = sz_att_fma(k, g[3 * lds + j], q3); v = sz_att_fma(v, p[3 * lds + j], d3);
                *(sz_vfu *)(dk + (size_t)j * hs + i0) = k;
                *(sz_vfu *)(dv + (size_t)j * hs + i0) = v;
            }
        }
    for (int j = j0; j < j1; j++) {
        float *dkj = dk + (size_t)j * hs, *dvj = dv + (size_t)j * hs;
        for (int r = 0; r < nr; r++) {
            float gj = g[r * lds + j], pj = p[r * lds + j];
            const float *qr = q[r], *dr = d[r];
            for (int i = i0; i < hs; i++) {
                dkj[i] += gj * qr[i];
                dvj[i] += pj * dr[i];
            }
        }
    }
}

/* dout and dinp fp32 or bf16. A bf16 dout is widened one (b, h) pair at a time into a per-thread
 * [T][hs] scratch (exact); into a bf16 dinp, dq collects in a per-thread [T][hs] scratch from zero
 * and the pair's dq, dk, dv are added to dinp once, rounded: bitwise the fp32 kernel on a zeroed
 * fp32 copy, added to dinp and rounded (0.0f + dk, as the copy's k, v slots hold). */
static int sz_att_bwd(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, const float *inp,
                      const float *stats, int B, int T, int C, int NH, int set)
{
    /* set: dinp is written, not added to: each pair zeroes its own q slots (where dq accumulates)
     * and stores dk, dv (and a bf16 dinp's rounded dq) */
    int wide_d = dout_dt == SZ_K_BF16, wide_i = dinp_dt == SZ_K_BF16;
    int C3 = 3 * C, hs = C / NH, T16 = (T + 15) & ~15, fail = 0;
    float scale = 1.0f / sqrtf((float)hs);
    size_t th = (size_t)T * hs, tile = (size_t)hs * T16;
#pragma omp parallel if ((size_t)B * T * T * NH >= SZ_PAR_MIN) shared(fail)
    {
        float *kt = sz_att_alloc(2 * tile + 2 * (size_t)SZ_ATT_BQ * T16 + (2 + wide_d + wide_i) * th);
        if (sz_par_alloc_ok(kt, &fail)) { /* no thread writes unless every thread has its scratch */
            float *vt = kt + tile, *S = vt + tile, *DA = S + (size_t)SZ_ATT_BQ * T16;
            float *dk = DA + (size_t)SZ_ATT_BQ * T16, *dv = dk + th, *dw = dv + th, *dq = dw + (wide_d ? th : 0);
            const uint16_t *dout16 = dout;
            uint16_t *dinp16 = dinp;
#pragma omp for collapse(2) schedule(static)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++) {
                    const float *base = inp + (size_t)b * T * C3 + h * hs;
                    size_t dofs = (size_t)b * T * C3 + h * hs;
                    float *dbase = wide_i ? NULL : (float *)dinp + dofs;
                    sz_att_transpose(kt, base + C, C3, T, T16, hs);
                    sz_att_transpose(vt, base + 2 * C, C3, T, T16, hs);
                    memset(dk, 0, 2 * th * sizeof(float));
                    if (wide_i) memset(dq, 0, th * sizeof(float));
                    if (set && !wide_i)
                        for (int t = 0; t < T; t++) memset(dbase + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
                    if (wide_d)
                        for (int t = 0; t < T; t++)
                            for (int i = 0; i < hs; i++)
                                dw[(size_t)t * hs + i] = sz_bf16_to_f32_1(dout16[((size_t)b * T + t) * C + h * hs + i]);
                    for (int t0 = 0; t0 < T; t0 += SZ_ATT_BQ) {
                        int nr = T - t0 < SZ_ATT_BQ ? T - t0 : SZ_ATT_BQ, n16 = (t0 + nr + 15) & ~15;
                        const float *q[SZ_ATT_BQ], *d[SZ_ATT_BQ];
                        for (int r = 0; r < nr; r++) {
                            q[r] = base + (size_t)(t0 + r) * C3;
                            d[r] = wide_d ? dw + (size_t)(t0 + r) * hs
                                          : (const float *)dout + ((size_t)b * T + t0 + r) * C + h * hs;
                        }
                        for (int r = 0; r < nr; r += SZ_ATT_QB) { /* scores SZ_ATT_QB rows a call */
                            int m = nr - r < SZ_ATT_QB ? nr - r : SZ_ATT_QB;
                            sz_att_scores(S + (size_t)r * T16, T16, q + r, m, kt, T16, n16, hs, scale);
                            sz_att_scores(DA + (size_t)r * T16, T16, d + r, m, vt, T16, n16, hs, 1.0f);
                        }
                        float *dqr[SZ_ATT_BQ];
                        for (int r = 0; r < nr; r++) {
                            int t = t0 + r;
                            const float *st = stats + (((size_t)b * NH + h) * T + t) * 2;
                            float *Sr = S + (size_t)r * T16, *Dr = DA + (size_t)r * T16;
                            float mx = st[0], inv = st[1], s = 0.0f;
#pragma omp simd
                            for (int j = 0; j <= t; j++) Sr[j] = sz_expf(Sr[j] - mx) * inv;
#pragma omp simd reduction(+ : s)
                            for (int j = 0; j <= t; j++) s += Sr[j] * Dr[j];
#pragma omp simd
                            for (int j = 0; j <= t; j++) Dr[j] = Sr[j] * (Dr[j] - s) * scale;
                            dqr[r] = wide_i ? dq + (size_t)t * hs : dbase + (size_t)t * C3;
                        }
                        for (int r = 0; r < nr; r += SZ_ATT_QB) /* dq */
                            sz_att_axpy_tile(dqr + r, DA + (size_t)r * T16, T16, base + C, C3, t0 + r,
                                             nr - r < SZ_ATT_QB ? nr - r : SZ_ATT_QB, hs);
                        /* keys j <= t0 take every row of the tile; key t0 + r0 only rows r >= r0 */
                        sz_att_rank_tile(dk, dv, DA, S, T16, q, d, nr, 0, t0 + 1, hs);
                        for (int r0 = 1; r0 < nr; r0++)
                            sz_att_rank_tile(dk, dv, DA + (size_t)r0 * T16, S + (size_t)r0 * T16, T16, q + r0,
                                             d + r0, nr - r0, t0 + r0, t0 + r0 + 1, hs);
                    }
                    if (!wide_i && set)
                        for (int t = 0; t < T; t++) {
                            float *dkr = dbase + (size_t)t * C3 + C, *dvr = dkr + C;
                            memcpy(dkr, dk + (size_t)t * hs, (size_t)hs * sizeof(float));
                            memcpy(dvr, dv + (size_t)t * hs, (size_t)hs * sizeof(float));
                        }
                    else if (!wide_i)
                        for (int t = 0; t < T; t++) {
                            float *dkr = dbase + (size_t)t * C3 + C, *dvr = dkr + C;
                            for (int i = 0; i < hs; i++) {
                                dkr[i] += dk[(size_t)t * hs + i];
                                dvr[i] += dv[(size_t)t * hs + i];
                            }
                        }
                    else if (set)
                        for (int t = 0; t < T; t++) {
                            uint16_t *hq = dinp16 + dofs + (size_t)t * C3, *hk = hq + C, *hv = hk + C;
                            const float *q_ = dq + (size_t)t * hs, *k_ = dk + (size_t)t * hs, *v_ = dv + (size_t)t * hs;
                            sz_f32_to_bf16_row(hq, q_, (size_t)hs);
                            sz_f32_to_bf16_row(hk, k_, (size_t)hs);
                            sz_f32_to_bf16_row(hv, v_, (size_t)hs);
                        }
                    else
                        for (int t = 0; t < T; t++) {
                            uint16_t *hq = dinp16 + dofs + (size_t)t * C3, *hk = hq + C, *hv = hk + C;
                            const float *q_ = dq + (size_t)t * hs, *k_ = dk + (size_t)t * hs, *v_ = dv + (size_t)t * hs;
                            if (hs <= SZ_ATT_ROW) { /* the sums in a row, rounded as a row (sz_f32_to_bf16_row) */
                                float sq[SZ_ATT_ROW], sk[SZ_ATT_ROW], sv[SZ_ATT_ROW];
                                for (int i = 0; i < hs; i++) {
                                    sq[i] = sz_bf16_to_f32_1(hq[i]) + q_[i];
                                    sk[i] = sz_bf16_to_f32_1(hk[i]) + (0.0f + k_[i]);
                                    sv[i] = sz_bf16_to_f32_1(hv[i]) + (0.0f + v_[i]);
                                }
                                sz_f32_to_bf16_row(hq, sq, (size_t)hs);
                                sz_f32_to_bf16_row(hk, sk, (size_t)hs);
                                sz_f32_to_bf16_row(hv, sv, (size_t)hs);
                            } else
                                for (int i = 0; i < hs; i++) {
                                    hq[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(hq[i]) + q_[i]);
                                    hk[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(hk[i]) + (0.0f + k_[i]));
                                    hv[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(hv[i]) + (0.0f + v_[i]));
                                }
                        }
                }
        }
        free(kt);
    }
    return fail ? -1 : 0;
}

int sz_k_attention_bwd(float *dinp, const float *dout, const float *inp, const float *stats,
                       int B, int T, int C, int NH)
{
    return sz_att_bwd(dinp, SZ_K_F32, dout, SZ_K_F32, inp, stats, B, T, C, NH, 0);
}

int sz_k_attention_bwd_set(float *dinp, const float *dout, const float *inp, const float *stats,
                           int B, int T, int C, int NH, int set)
{
    return sz_att_bwd(dinp, SZ_K_F32, dout, SZ_K_F32, inp, stats, B, T, C, NH, set & SZ_K_SET_DINP);
}

int sz_k_attention_bwd_mx_impl(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt,
                               const float *inp, const float *stats, int B, int T, int C, int NH, int set,
                               sz_k_att_impl impl)
{
    if (impl == SZ_K_ATT_AMX || (impl == SZ_K_ATT_AUTO && dinp_dt == SZ_K_BF16 && sz_k_attention_amx_ok()))
        return sz_k_attention_amx_bwd(dinp, dinp_dt, dout, dout_dt, inp, stats, B, T, C, NH, set);
    return sz_att_bwd(dinp, dinp_dt, dout, dout_dt, inp, stats, B, T, C, NH, set & SZ_K_SET_DINP);
}

int sz_k_attention_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, const float *inp,
                          const float *stats, int B, int T, int C, int NH)
{
    return sz_k_attention_bwd_mx_impl(dinp, dinp_dt, dout, dout_dt, inp, stats, B, T, C, NH, 0, SZ_K_ATT_AUTO);
}

int sz_k_attention_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt,
                              const float *inp, const float *stats, int B, int T, int C, int NH, int set)
{
    return sz_k_attention_bwd_mx_impl(dinp, dinp_dt, dout, dout_dt, inp, stats, B, T, C, NH, set, SZ_K_ATT_AUTO);
}
