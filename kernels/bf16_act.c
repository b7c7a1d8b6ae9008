/* bf16_act.c — the non-matmul kernels of both bf16 compute paths (include/starzero.h,
 * sz_bf16_compute; the emulated one passes fp32 activations with bf16 parameters read directly):
 * the same math as the fp32 kernels, computed in fp32, with some operands bf16
 * (the activations a matmul reads and their gradients on the native path, and the parameters on
 * both). A bf16 input is widened exactly; a bf16 output is rounded to nearest even once, from the
 * fp32 value the fp32 kernel would produce; a bf16 destination that accumulates becomes
 * round_bf16(f32(dst) + fp32 contribution), like the bf16 matmul's. Each kernel's order of
 * operations is fixed by the shapes alone (rows or elements split statically, row reductions by
 * column blocks summing rows 0..N-1), so the bits do not depend on the thread count. The codelets
 * call these only when some operand is bf16; all-fp32 calls go to the fp32 kernels. GPT-2's ops
 * (layernorm, GELU, residual, softmax-xent, encoder, their fusions) and the LLaMA-style model's
 * (RMSNorm and its fusion with the residual, RoPE's backward, the embedding; SiLU and the product). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

/* Where the fp32 kernel only reads and writes an operand element by element, a bf16 one is widened
 * as it is loaded and rounded as it is stored, inside the fp32 loop (sz_ldx, sz_stx, sz_accx on
 * constant types, sz_kernels_impl.h). Where the fp32 kernel sums over a row (the layernorm's
 * backward, the softmax), the bf16 operand's row is first widened into a per-thread fp32 row (in
 * L1, no OpenMP region of its own) and the fp32 row function runs on it: loads of another type
 * would let the compiler vectorize, and so add up, those sums in another order. Scratch rows of
 * up to SZ_ROW_STACK floats live on the thread's stack, larger ones are allocated once per call
 * and thread (the softmax's Vp floats). Same thread partition as the fp32 kernels, except the
 * layernorms' AVX-512 paths (C % 16 == 0: ln_fwd_rows16, ln_bwd_rows16), which run the fp32
 * row functions' 16-lane sums (sz_kernels_impl.h), widen and round in registers, and pipeline each
 * thread's block of rows (rows are independent: any partition gives the same bits). */
#define SZ_ROW_STACK 4096
#define BF SZ_K_BF16
#define F32 SZ_K_F32

/* ---- layernorm (layernorm.c's row math: sz_ln_row_fwd_x, sz_ln_row_bwd, sz_ln_params_bwd) ---- */

/* One row of the forward, types fixed by the caller's branch: res NULL: layernorm(a); else
 * res = a + b (fp32) and layernorm(res) (sz_k_residual_layernorm_fwd's row). */
SZ_INLINE void ln_fwd_row(float *res, void *out, int out_dt, float *mean, float *rstd, const float *a,
                              const float *b, const void *weight, const void *bias, int p_dt, int C)
{
    if (res) {
#pragma omp simd
        for (int i = 0; i < C; i++) res[i] = a[i] + b[i];
        a = res;
    }
    sz_ln_row_fwd_x(out, out_dt, mean, rstd, a, weight, bias, p_dt, C);
}

#if SZ_BF16_HW_ROUND
/* The output of sz_ln_row_fwd_x into a bf16 o from fp32 weight and bias (bias may be NULL), each
 * vector of 16 rounded in registers: the same expression in GCC's vector types, which the compiler
 * contracts as it does the fp32 loop's (one FMA), so the fp32 values are the fp32 kernel's. */
typedef float sz_lnv __attribute__((vector_size(64)));
typedef float sz_lnvu __attribute__((vector_size(64), aligned(4)));
SZ_INLINE void ln_out_bf16(uint16_t *o, const float *x, const float *weight, const float *bias, float m, float s,
                           int C)
{
    int i = 0;
    if (bias) {
        for (; i + 16 <= C; i += 16) {
            sz_lnv t = s * (*(const sz_lnvu *)(x + i) - m);
            sz_lnv v = t * *(const sz_lnvu *)(weight + i) + *(const sz_lnvu *)(bias + i);
            _mm256_storeu_si256((__m256i *)(o + i), sz_bf16_round16((__m512)v));
        }
        for (; i < C; i++) o[i] = sz_f32_to_bf16_1((s * (x[i] - m)) * weight[i] + bias[i]);
    } else {
        for (; i + 16 <= C; i += 16) {
            sz_lnv t = s * (*(const sz_lnvu *)(x + i) - m);
            sz_lnv v = t * *(const sz_lnvu *)(weight + i);
            _mm256_storeu_si256((__m256i *)(o + i), sz_bf16_round16((__m512)v));
        }
        for (; i < C; i++) o[i] = sz_f32_to_bf16_1((s * (x[i] - m)) * weight[i]);
    }
}
#endif

#if SZ_BF16_HW_ROUND
/* The layernorm forward into a bf16 out for C % 16 == 0, software-pipelined over a thread's rows:
 * each pass over i = 0..C-1 takes row k's sum (A; the fused residual's res = a + b stored on the
 * way), row k-1's sum of squared deviations (B) and row k-2's output, rounded in registers (O). The
 * fp32 kernel's two sums are each one chain of dependent additions, so it waits on their latency;
 * three rows' independent chains in one loop keep the units busy instead. Each sum is the fp32
 * kernel's own (sz_ln_row_stats' 16-lane form, sz_kernels_impl.h), the output its expression
 * (s (x - m)) w + b with its one contraction, so the bits are the fp32 kernel's (checked by
 * tests/test_bf16_act.c and scripts/kernels-oldnew.sh). */
SZ_INLINE void ln_fwd_pass(int dA, int dB, int dO, float *res, const float *a, const float *b, float *sumA,
                           const float *xB, float mB, float *sumB, uint16_t *o, const float *xO, float mO, float sO,
                           const float *w, const float *bias, int C)
{
    __m512 accA = _mm512_setzero_ps(), accB = _mm512_setzero_ps();
    __m512 vmB = _mm512_set1_ps(mB), vmO = _mm512_set1_ps(mO), vsO = _mm512_set1_ps(sO);
    for (int i = 0; i < C; i += 16) {
        if (dA) {
            __m512 xa = _mm512_loadu_ps(a + i);
            if (res) {
                xa = _mm512_add_ps(xa, _mm512_loadu_ps(b + i));
                _mm512_storeu_ps(res + i, xa);
            }
            accA = _mm512_add_ps(accA, xa);
        }
        if (dB) {
            __m512 dv = _mm512_sub_ps(_mm512_loadu_ps(xB + i), vmB);
            accB = _mm512_fmadd_ps(dv, dv, accB);
        }
        if (dO) {
            __m512 t = _mm512_mul_ps(vsO, _mm512_sub_ps(_mm512_loadu_ps(xO + i), vmO));
            __m512 v = bias ? _mm512_fmadd_ps(t, _mm512_loadu_ps(w + i), _mm512_loadu_ps(bias + i))
                            : _mm512_mul_ps(t, _mm512_loadu_ps(w + i));
            _mm256_storeu_si256((__m256i *)(o + i), sz_bf16_round16(v));
        }
    }
    if (dA) *sumA = sz_lane_sum(accA);
    if (dB) *sumB = sz_lane_sum(accB);
}

/* Rows [lo, hi) of the pipelined forward (res NULL: layernorm(a); else res = a + b and layernorm(res));
 * w, bias fp32 (bias may be NULL). */
static void ln_fwd_rows16(float *res, uint16_t *out, float *mean, float *rstd, const float *a, const float *b,
                          const float *w, const float *bias, int lo, int hi, int C)
{
    const float eps = 1e-5f;
    for (int k = lo; k < hi + 2; k++) {
        int dA = k < hi, dB = k - 1 >= lo && k - 1 < hi, dO = k - 2 >= lo;
        size_t rA = (size_t)k * C, rB = rA - C, rO = rB - C;
        float *rs = res && dA ? res + rA : NULL;
        const float *xa = dA ? a + rA : NULL, *xb = rs ? b + rA : NULL;
        const float *xB = dB ? (res ? res : a) + rB : NULL, *xO = dO ? (res ? res : a) + rO : NULL;
        float mB = dB ? mean[k - 1] : 0.0f, mO = dO ? mean[k - 2] : 0.0f, sO = dO ? rstd[k - 2] : 0.0f;
        uint16_t *o = dO ? out + rO : NULL;
        float sA = 0.0f, sB = 0.0f;
#define SZ_LNP(A, B_, O_) ln_fwd_pass(A, B_, O_, rs, xa, xb, &sA, xB, mB, &sB, o, xO, mO, sO, w, bias, C)
        switch (dA | dB << 1 | dO << 2) {
        case 7: SZ_LNP(1, 1, 1); break;
        case 1: SZ_LNP(1, 0, 0); break;
        case 3: SZ_LNP(1, 1, 0); break;
        case 6: SZ_LNP(0, 1, 1); break;
        case 4: SZ_LNP(0, 0, 1); break;
        case 2: SZ_LNP(0, 1, 0); break;
        case 5: SZ_LNP(1, 0, 1); break;
        }
#undef SZ_LNP
        if (dA) mean[k] = sA / C;
        if (dB) {
            float v = sB / C;
            rstd[k - 1] = 1.0f / sqrtf(v + eps);
        }
    }
}
#endif

/* A bf16 out with C <= SZ_LN_PSTACK: bf16 parameters widened once per thread into fp32 rows on the
 * stack, then per row the fp32 kernel's own row function (all fp32 operands: its very loop) into a
 * stack row, rounded as a row while in L1. */
#define SZ_LN_PSTACK 1360 /* 3 C floats on the stack: 16 KB */
static void ln_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *mean, float *rstd, const float *a,
                      const float *b, const void *weight, const void *bias, sz_k_dtype p_dt, int N, int C)
{
    int oh = out_dt == BF, ph = p_dt == BF;
#if SZ_BF16_HW_ROUND
    if (oh && C % 16 == 0 && (!ph || C <= SZ_LN_PSTACK)) { /* pipelined (ln_fwd_rows16), rows split in blocks */
#pragma omp parallel if ((size_t)N * C >= SZ_PAR_MIN)
        {
            float prm[2 * SZ_LN_PSTACK] __attribute__((aligned(64)));
            const float *wf = weight, *bf = bias;
            if (ph) {
                sz_bf16_to_f32_row(prm, weight, (size_t)C);
                wf = prm;
                if (bias) {
                    sz_bf16_to_f32_row(prm + C, bias, (size_t)C);
                    bf = prm + C;
                }
            }
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int lo = (int)((int64_t)N * t / nt), hi = (int)((int64_t)N * (t + 1) / nt);
            ln_fwd_rows16(res, out, mean, rstd, a, b, wf, bf, lo, hi, C);
        }
        return;
    }
#endif
#pragma omp parallel if ((size_t)N * C >= SZ_PAR_MIN)
    {
    float row[SZ_ROW_STACK] __attribute__((aligned(64))); /* a bf16 out: the fp32 row, or the parameters */
    const float *wf = weight, *bf = bias;
    int fast = oh && (!ph || C <= SZ_LN_PSTACK);
    if (fast && ph) { /* row = [out row | weight | bias] */
        sz_bf16_to_f32_row(row + C, weight, (size_t)C);
        wf = row + C;
        if (bias) {
            sz_bf16_to_f32_row(row + 2 * C, bias, (size_t)C);
            bf = row + 2 * C;
        }
    }
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        size_t r = (size_t)n * C;
        float *rn = res ? res + r : NULL;
        const float *bn = b ? b + r : NULL;
        if (fast && C <= SZ_ROW_STACK) {
#if SZ_BF16_HW_ROUND
            const float *xn = a + r;
            if (rn) {
#pragma omp simd
                for (int i = 0; i < C; i++) rn[i] = xn[i] + bn[i];
                xn = rn;
            }
            float m, s;
            sz_ln_row_stats(xn, C, &m, &s);
            ln_out_bf16((uint16_t *)out + r, xn, wf, bf, m, s, C);
            mean[n] = m;
            rstd[n] = s;
#else
            ln_fwd_row(rn, row, F32, mean + n, rstd + n, a + r, bn, wf, bf, F32, C);
            sz_f32_to_bf16_row((uint16_t *)out + r, row, (size_t)C);
#endif
        } else if (oh && ph)
            ln_fwd_row(rn, (uint16_t *)out + r, BF, mean + n, rstd + n, a + r, bn, weight, bias, BF, C);
        else if (oh)
            ln_fwd_row(rn, (uint16_t *)out + r, BF, mean + n, rstd + n, a + r, bn, weight, bias, F32, C);
        else if (ph)
            ln_fwd_row(rn, (float *)out + r, F32, mean + n, rstd + n, a + r, bn, weight, bias, BF, C);
        else
            ln_fwd_row(rn, (float *)out + r, F32, mean + n, rstd + n, a + r, bn, weight, bias, F32, C);
    }
    }
}

int sz_k_layernorm_fwd_mx(void *out, sz_k_dtype out_dt, float *mean, float *rstd, const float *inp,
                           const void *weight, const void *bias, sz_k_dtype p_dt, int N, int C)
{
    ln_fwd_mx(NULL, out, out_dt, mean, rstd, inp, NULL, weight, bias, p_dt, N, C);
    return 0;
}

#if SZ_BF16_HW_ROUND
/* The layernorm backward's rows for C % 16 == 0, with dout (type d_dt) widened in registers instead
 * of into a row first, software-pipelined as the forward (ln_fwd_rows16): each pass over i takes
 * row k's two sums (P) and row k-1's gradients (Q), so the sums' chains of dependent additions
 * overlap with independent work. The arithmetic of sz_ln_row_bwd's 16-lane form (sz_kernels_impl.h:
 * the same products, sums and contractions), so the bits are the fp32 kernel's (tests/test_bf16_act.c
 * and scripts/kernels-oldnew.sh check it). di (+)= the input gradient (sd: =); given da (the fused
 * residual's backward, di then always accumulates), in the same pass da (+)= di (sa: =) and db
 * (+)= di (sb: =), db of type db_dt (bf16: rounded once, in registers). */
SZ_INLINE void ln_bwd_pass(int dP, int dQ, const void *dP_, const float *xP, float mP, float sP, float *s1, float *s2,
                           float *di, float *da, void *db, int db_dt, const void *dQ_, int d_dt, const float *xQ,
                           float mQ, float sQ, float dm_, float dnm_, const float *w, int C, int sd, int sa, int sb)
{
    __m512 vmP = _mm512_set1_ps(mP), vsP = _mm512_set1_ps(sP), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
    __m512 vmQ = _mm512_set1_ps(mQ), vsQ = _mm512_set1_ps(sQ), dm = _mm512_set1_ps(dm_), dnm = _mm512_set1_ps(dnm_);
    for (int i = 0; i < C; i += 16) {
        if (dP) {
            __m512 dn = _mm512_mul_ps(_mm512_loadu_ps(w + i), sz_ld16(dP_, d_dt, i));
            a1 = _mm512_add_ps(a1, dn);
            a2 = _mm512_fmadd_ps(dn, _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xP + i), vmP), vsP), a2);
        }
        if (!dQ) continue;
        __m512 nr = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xQ + i), vmQ), vsQ);
        __m512 dval = _mm512_fnmadd_ps(nr, dnm, _mm512_fmsub_ps(_mm512_loadu_ps(w + i), sz_ld16(dQ_, d_dt, i), dm));
        __m512 g = sd ? _mm512_mul_ps(dval, vsQ) : _mm512_fmadd_ps(dval, vsQ, _mm512_loadu_ps(di + i));
        _mm512_storeu_ps(di + i, g);
        if (!da) continue;
        _mm512_storeu_ps(da + i, sa ? g : _mm512_add_ps(_mm512_loadu_ps(da + i), g));
        if (db_dt == BF) {
            uint16_t *h = (uint16_t *)db + i;
            __m512 v = sb ? g : _mm512_add_ps(sz_ld16(h, BF, 0), g);
            _mm256_storeu_si256((__m256i *)h, sz_bf16_round16(v));
        } else {
            float *f = (float *)db + i;
            _mm512_storeu_ps(f, sb ? g : _mm512_add_ps(_mm512_loadu_ps(f), g));
        }
    }
    if (dP) {
        *s1 = sz_lane_sum(a1);
        *s2 = sz_lane_sum(a2);
    }
}

/* Rows [lo, hi) of the pipelined backward, the operand types constant (d_dt; db_dt when da). */
SZ_INLINE void ln_bwd_rows16(float *dinp, float *da, void *db, int db_dt, const void *dout, int d_dt,
                             const float *inp, const float *w, const float *mean, const float *rstd, int lo, int hi,
                             int C, int sd, int sa, int sb)
{
    size_t ed = d_dt == BF ? 2 : 4, eb = db_dt == BF ? 2 : 4;
    float dm = 0.0f, dnm = 0.0f; /* row k-1's dnorm_mean, dnorm_norm_mean */
    for (int k = lo; k <= hi; k++) {
        int dP = k < hi, dQ = k > lo;
        size_t rP = (size_t)k * C, rQ = rP - C;
        const void *dp = dP ? (const char *)dout + rP * ed : NULL, *dq = dQ ? (const char *)dout + rQ * ed : NULL;
        const float *xP = dP ? inp + rP : NULL, *xQ = dQ ? inp + rQ : NULL;
        float mP = dP ? mean[k] : 0.0f, sP = dP ? rstd[k] : 0.0f, mQ = dQ ? mean[k - 1] : 0.0f;
        float sQ = dQ ? rstd[k - 1] : 0.0f, s1 = 0.0f, s2 = 0.0f;
        float *di = dQ ? dinp + rQ : NULL, *dan = dQ && da ? da + rQ : NULL;
        void *dbn = dQ && da ? (char *)db + rQ * eb : NULL;
        if (dP && dQ)
            ln_bwd_pass(1, 1, dp, xP, mP, sP, &s1, &s2, di, dan, dbn, db_dt, dq, d_dt, xQ, mQ, sQ, dm, dnm, w, C, sd, sa, sb);
        else if (dP)
            ln_bwd_pass(1, 0, dp, xP, mP, sP, &s1, &s2, di, dan, dbn, db_dt, dq, d_dt, xQ, mQ, sQ, dm, dnm, w, C, sd, sa, sb);
        else
            ln_bwd_pass(0, 1, dp, xP, mP, sP, &s1, &s2, di, dan, dbn, db_dt, dq, d_dt, xQ, mQ, sQ, dm, dnm, w, C, sd, sa, sb);
        dm = s1 / C;
        dnm = s2 / C;
    }
}
#endif

/* The rows of the layernorm backward: di (fp32) += the input gradient of row n (sz_ln_row_bwd on the
 * widened weight and dout rows; set & SZ_K_SET_DINP without da: written instead), then, given da
 * (the fused residual's backward: di, i.e. dres, always accumulates), da += di and db += di (db of
 * type db_dt; set & SZ_K_SET_A, SZ_K_SET_B: da = di, db = di instead). Where the build has
 * AVX-512 and C % 16 == 0, each row is one ln_row_bwd16 (dout widened in registers, the residual's
 * gradients in the same pass); else dout is widened into a row first. 0, or -1 when a thread's
 * scratch (2 C floats beyond SZ_ROW_STACK) could not be allocated (then some rows are not done). */
static int ln_bwd_rows(float *dinp, float *da, void *db, sz_k_dtype db_dt, const void *dout, sz_k_dtype dout_dt,
                       const float *inp, const void *weight, sz_k_dtype p_dt, const float *mean, const float *rstd,
                       int N, int C, int par, int set)
{
    int dh = dout_dt == BF, ph = p_dt == BF, fail = 0;
    int sd = !da && (set & SZ_K_SET_DINP), sa = da && (set & SZ_K_SET_A), sb = da && (set & SZ_K_SET_B);
#if SZ_BF16_HW_ROUND
    int v16 = C % 16 == 0;
#else
    int v16 = 0;
#endif
    size_t need = (size_t)(ph + (dh && !v16)) * C;
#pragma omp parallel if (par) reduction(| : fail)
    {
        float stk[SZ_ROW_STACK] __attribute__((aligned(64)));
        float *buf = need <= SZ_ROW_STACK ? stk : malloc(need * sizeof *buf);
        const float *w = ph ? buf : weight;
        float *drow = buf ? buf + (ph ? C : 0) : NULL;
        if (!buf) fail = 1;
        else if (ph) sz_bf16_to_f32_row(buf, weight, (size_t)C);
#if SZ_BF16_HW_ROUND
        if (v16) { /* pipelined over the thread's block of rows */
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int lo = (int)((int64_t)N * t / nt), hi = (int)((int64_t)N * (t + 1) / nt);
            if (!buf) lo = hi;
            else if (!da && dh) ln_bwd_rows16(dinp, NULL, NULL, F32, dout, BF, inp, w, mean, rstd, lo, hi, C, sd, 0, 0);
            else if (!da) ln_bwd_rows16(dinp, NULL, NULL, F32, dout, F32, inp, w, mean, rstd, lo, hi, C, sd, 0, 0);
            else if (db_dt == BF && dh) ln_bwd_rows16(dinp, da, db, BF, dout, BF, inp, w, mean, rstd, lo, hi, C, 0, sa, sb);
            else if (db_dt == BF) ln_bwd_rows16(dinp, da, db, BF, dout, F32, inp, w, mean, rstd, lo, hi, C, 0, sa, sb);
            else if (dh) ln_bwd_rows16(dinp, da, db, F32, dout, BF, inp, w, mean, rstd, lo, hi, C, 0, sa, sb);
            else ln_bwd_rows16(dinp, da, db, F32, dout, F32, inp, w, mean, rstd, lo, hi, C, 0, sa, sb);
        } else
#endif
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (!buf) continue;
            size_t r = (size_t)n * C;
            const float *d = (const float *)dout + r;
            if (dh) {
                sz_bf16_to_f32_row(drow, (const uint16_t *)dout + r, (size_t)C);
                d = drow;
            }
            float *di = dinp + r;
            sz_ln_row_bwd(di, d, inp + r, w, mean[n], rstd[n], C, sd);
            if (!da) continue;
            if (db_dt != BF) {
                sz_k_residual_bwd_row(da + r, (float *)db + r, di, (size_t)C, set & (SZ_K_SET_A | SZ_K_SET_B));
                continue;
            }
            float *dan = da + r;
            uint16_t *dbn = (uint16_t *)db + r;
            if (sa) {
#pragma omp simd
                for (int i = 0; i < C; i++) dan[i] = di[i];
            } else {
#pragma omp simd
                for (int i = 0; i < C; i++) dan[i] += di[i];
            }
            if (sb) sz_f32_to_bf16_row(dbn, di, (size_t)C);
            else {
#pragma omp simd
                for (int i = 0; i < C; i++) sz_accx(dbn, BF, i, di[i]);
            }
        }
        if (buf != stk) free(buf);
    }
    return fail ? -1 : 0;
}

int sz_k_layernorm_bwd_mx(float *dinp, float *dweight, float *dbias, const void *dout, sz_k_dtype dout_dt,
                          const float *inp, const void *weight, sz_k_dtype p_dt, const float *mean,
                          const float *rstd, int N, int C)
{
    return sz_k_layernorm_bwd_mx_set(dinp, dweight, dbias, dout, dout_dt, inp, weight, p_dt, mean, rstd, N, C, 0);
}

int sz_k_layernorm_bwd_mx_set(float *dinp, float *dweight, float *dbias, const void *dout, sz_k_dtype dout_dt,
                              const float *inp, const void *weight, sz_k_dtype p_dt, const float *mean,
                              const float *rstd, int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
    if (ln_bwd_rows(dinp, NULL, NULL, F32, dout, dout_dt, inp, weight, p_dt, mean, rstd, N, C, par, set))
        return -1; /* only dinp was touched, and only the rows some thread had scratch for */
    sz_ln_params_bwd(dweight, dbias, dout, dout_dt, inp, mean, rstd, N, C, par, set);
    return 0;
}

/* ---- GELU (gelu.c's formula) ---- */

/* In pieces of SZ_GELU_PIECE elements. Where the build has AVX-512 and AVX512-BF16: sz_gelu16
 * (sz_kernels_impl.h: the fp32 formula's very operations, four vectors side by side) rounded in
 * registers; else gelu.c's loop into a stack row (the fp32 kernel's own vectorization), then
 * rounded (a mixed-type loop vectorizes narrower). Elementwise: the bits depend on no partition. */
#define SZ_GELU_PIECE 1024
void sz_k_gelu_fwd_mx(void *out, sz_k_dtype out_dt, const float *inp, size_t n)
{
    const float s = SZ_GELU_SCALE;
    if (out_dt != BF) {
        sz_k_gelu_fwd(out, inp, n);
        return;
    }
    size_t np = (n + SZ_GELU_PIECE - 1) / SZ_GELU_PIECE;
#if SZ_BF16_HW_ROUND
    /* AVX-512: sz_gelu16 rounded in registers (sz_gelu_row_bf16), no fp32 row */
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t p = 0; p < np; p++) {
        size_t lo = p * SZ_GELU_PIECE, m = n - lo < SZ_GELU_PIECE ? n - lo : SZ_GELU_PIECE;
        sz_gelu_row_bf16((uint16_t *)out + lo, inp + lo, m);
    }
    (void)s;
#else
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t p = 0; p < np; p++) {
        size_t lo = p * SZ_GELU_PIECE, m = n - lo < SZ_GELU_PIECE ? n - lo : SZ_GELU_PIECE;
        float v[SZ_GELU_PIECE];
        const float *x = inp + lo;
#pragma omp simd
        for (size_t i = 0; i < m; i++) v[i] = sz_gelu_1(x[i], s);
        sz_f32_to_bf16_row((uint16_t *)out + lo, v, m);
    }
#endif
}

/* dinp (+)= local gradient * dout, in pieces of SZ_GELU_PIECE elements: the contributions (gelu.c's
 * product, dout widened) into a stack row, then added to dinp in its type. Two loops, so that the
 * product is rounded before the addition as it always was here (one loop would let the compiler
 * fuse them into an FMA: other bits). Elementwise: the bits depend on no partition. */
SZ_INLINE void gelu_contrib(float *v, const float *x, const void *d, int d_dt, size_t n)
{
    const float s = SZ_GELU_SCALE;
#pragma omp simd
    for (size_t i = 0; i < n; i++) v[i] = sz_gelu_grad_1(x[i], s) * sz_ldx(d, d_dt, i);
}

void sz_k_gelu_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                      size_t n)
{
    sz_k_gelu_bwd_mx_set(dinp, dinp_dt, inp, dout, dout_dt, n, 0);
}

/* set & SZ_K_SET_DINP: dinp = the contribution (rounded once to a bf16 dinp) instead */
void sz_k_gelu_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                          size_t n, int set)
{
    int ih = dinp_dt == BF, dh = dout_dt == BF, sd = set & SZ_K_SET_DINP;
    size_t np = (n + SZ_GELU_PIECE - 1) / SZ_GELU_PIECE;
#if SZ_BF16_HW_ROUND
    /* AVX-512: sz_gelu_bwd_row16 (the local gradient four vectors side by side, sz_gelu_grad16u; the
     * product and the addition kept apart as below; a bf16 dinp rounded in registers) */
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t p = 0; p < np; p++) {
        size_t lo = p * SZ_GELU_PIECE, m = n - lo < SZ_GELU_PIECE ? n - lo : SZ_GELU_PIECE;
        const void *d = dh ? (const void *)((const uint16_t *)dout + lo) : (const void *)((const float *)dout + lo);
        void *di = ih ? (void *)((uint16_t *)dinp + lo) : (void *)((float *)dinp + lo);
        if (ih && dh) sz_gelu_bwd_row16(di, BF, inp + lo, d, BF, m, sd);
        else if (ih) sz_gelu_bwd_row16(di, BF, inp + lo, d, F32, m, sd);
        else if (dh) sz_gelu_bwd_row16(di, F32, inp + lo, d, BF, m, sd);
        else sz_gelu_bwd_row16(di, F32, inp + lo, d, F32, m, sd);
    }
#else
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t p = 0; p < np; p++) {
        size_t lo = p * SZ_GELU_PIECE, m = n - lo < SZ_GELU_PIECE ? n - lo : SZ_GELU_PIECE;
        float v[SZ_GELU_PIECE];
        if (dh) gelu_contrib(v, inp + lo, (const uint16_t *)dout + lo, BF, m);
        else gelu_contrib(v, inp + lo, (const float *)dout + lo, F32, m);
        if (ih && sd) {
            sz_f32_to_bf16_row((uint16_t *)dinp + lo, v, m);
        } else if (ih) { /* round(f32(dinp) + v): the sums in the row, then rounded as a row */
            uint16_t *di = (uint16_t *)dinp + lo;
#pragma omp simd
            for (size_t i = 0; i < m; i++) v[i] = sz_bf16_to_f32_1(di[i]) + v[i];
            sz_f32_to_bf16_row(di, v, m);
        } else if (sd) {
            memcpy((float *)dinp + lo, v, m * sizeof *v);
        } else {
            float *di = (float *)dinp + lo;
#pragma omp simd
            for (size_t i = 0; i < m; i++) di[i] += v[i];
        }
    }
#endif
}

/* ---- residual backward: da += dout, db += dout (set: da = dout, db = dout) ---- */

/* Elements [lo, hi) with the types and set bits fixed by the caller's branch. */
SZ_INLINE void res_bwd_range(void *da, int da_dt, int sa, void *db, int db_dt, int sb, const float *dout, size_t lo,
                             size_t hi)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        if (sa) sz_stx(da, da_dt, i, dout[i]);
        else sz_accx(da, da_dt, i, dout[i]);
        if (sb) sz_stx(db, db_dt, i, dout[i]);
        else sz_accx(db, db_dt, i, dout[i]);
    }
}

void sz_k_residual_bwd_mx(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const float *dout, size_t n)
{
    sz_k_residual_bwd_mx_set(da, da_dt, db, db_dt, dout, n, 0);
}

void sz_k_residual_bwd_mx_set(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const float *dout, size_t n,
                              int set)
{
    int ah = da_dt == BF, bh = db_dt == BF, sa = !!(set & SZ_K_SET_A), sb = !!(set & SZ_K_SET_B);
    /* fixed pieces of 4096 elements (elementwise: the bits depend on no partition); GPT-2's native
     * path (fp32 da, bf16 db) gets its own branches, any other combination the generic one */
    size_t np = (n + 4095) / 4096;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t p = 0; p < np; p++) {
        size_t lo = p * 4096, hi = lo + 4096 < n ? lo + 4096 : n;
#if SZ_BF16_HW_ROUND
        if (!ah && bh) { /* 16 at a time, db widened and rounded in registers (the same bits) */
            size_t i = lo;
            for (; i + 16 <= hi; i += 16) {
                __m512 g = _mm512_loadu_ps(dout + i);
                float *a = (float *)da + i;
                uint16_t *h = (uint16_t *)db + i;
                _mm512_storeu_ps(a, sa ? g : _mm512_add_ps(_mm512_loadu_ps(a), g));
                _mm256_storeu_si256((__m256i *)h, sz_bf16_round16(sb ? g : _mm512_add_ps(sz_ld16(h, BF, 0), g)));
            }
            if (i < hi) res_bwd_range(da, F32, sa, db, BF, sb, dout, i, hi);
            continue;
        }
#endif
        if (!ah && bh && !sa && !sb) res_bwd_range(da, F32, 0, db, BF, 0, dout, lo, hi);
        else if (!ah && bh && sa && sb) res_bwd_range(da, F32, 1, db, BF, 1, dout, lo, hi);
        else if (!ah && bh && !sa && sb) res_bwd_range(da, F32, 0, db, BF, 1, dout, lo, hi);
        else if (!ah && bh && sa && !sb) res_bwd_range(da, F32, 1, db, BF, 0, dout, lo, hi);
        else res_bwd_range(da, da_dt, sa, db, db_dt, sb, dout, lo, hi);
    }
}

/* ---- softmax cross-entropy backward, dlogits bf16 (softmax_xent.c's formula) ---- */

void sz_k_softmax_xent_bwd_mx(void *dlogits, sz_k_dtype dt, const float *probs, const int *targets,
                              const float *dloss, int N, int V, int Vp)
{
    if (dt != SZ_K_BF16) {
        sz_k_softmax_xent_bwd(dlogits, probs, targets, dloss, N, V, Vp);
        return;
    }
#pragma omp parallel for schedule(static) if ((size_t)N * Vp >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        uint16_t *dl = (uint16_t *)dlogits + (size_t)n * Vp;
        float g = dloss[n];
        int ix = targets[n];
        for (int i = 0; i < V; i++) dl[i] = sz_f32_to_bf16_1((p[i] - (i == ix ? 1.0f : 0.0f)) * g);
        for (int i = V; i < Vp; i++) dl[i] = 0;
    }
}

/* ---- encoder forward with bf16 tables (encoder.c's sum) ---- */

SZ_INLINE void enc_row(float *o, const void *wte, const void *wpe, int p_dt, size_t we, size_t pe, int C)
{
    for (int c = 0; c < C; c++) o[c] = sz_ldx(wte, p_dt, we + c) + sz_ldx(wpe, p_dt, pe + c);
}

void sz_k_encoder_fwd_mx(float *out, const int *tok, const void *wte, const void *wpe, sz_k_dtype p_dt,
                         int B, int T, int C)
{
    int ph = p_dt == BF;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        size_t we = (size_t)tok[bt] * C, pe = (size_t)(bt % T) * C;
        if (ph) enc_row(o, wte, wpe, BF, we, pe, C);
        else enc_row(o, wte, wpe, F32, we, pe, C);
    }
}

/* ---- attention: bf16 operands in attention.c itself (sz_k_attention_fwd_mx, _bwd_mx), widened and
 * rounded per (b, h) pair in per-thread scratch ---- */

/* ---- E's fusions on the bf16 path: the fp32 fused kernels (layernorm.c, softmax_xent.c) row by
 * row on widened rows, so the math and its order are theirs ---- */

int sz_k_residual_layernorm_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *mean, float *rstd,
                                   const float *a, const float *b, const void *weight, const void *bias,
                                   sz_k_dtype p_dt, int N, int C)
{
    ln_fwd_mx(res, out, out_dt, mean, rstd, a, b, weight, bias, p_dt, N, C);
    return 0;
}

int sz_k_layernorm_residual_bwd_mx(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight, float *dbias,
                                   const void *dout, sz_k_dtype dout_dt, const float *res, const void *weight,
                                   sz_k_dtype p_dt, const float *mean, const float *rstd, int N, int C)
{
    return sz_k_layernorm_residual_bwd_mx_set(da, db, db_dt, dres, dweight, dbias, dout, dout_dt, res, weight, p_dt,
                                              mean, rstd, N, C, 0);
}

int sz_k_layernorm_residual_bwd_mx_set(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight,
                                       float *dbias, const void *dout, sz_k_dtype dout_dt, const float *res,
                                       const void *weight, sz_k_dtype p_dt, const float *mean, const float *rstd,
                                       int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
    if (ln_bwd_rows(dres, da, db, db_dt, dout, dout_dt, res, weight, p_dt, mean, rstd, N, C, par, set))
        return -1;
    sz_ln_params_bwd(dweight, dbias, dout, dout_dt, res, mean, rstd, N, C, par, set);
    return 0;
}

/* Per row, three passes over the thread's fp32 row instead of five: the bf16 logits widened into it
 * while their max is taken (sz_sxent_max's value: a max is the same in any order), the fp32 kernel's
 * exponentials and sum on it (sz_sxent_expsum, its order), then the gradient in pieces of
 * SZ_SXENT_PIECE elements, each rounded into the logits while in L1 (sz_sxent_grad: elementwise). */
#define SZ_SXENT_PIECE 2048
int sz_k_softmax_xent_fused_mx(void *logits, sz_k_dtype dt, float *losses, const int *targets, float g, int N, int V,
                               int Vp)
{
    if (dt != BF) {
        sz_k_softmax_xent_fused(logits, losses, targets, g, N, V, Vp);
        return 0;
    }
    int fail = 0;
#pragma omp parallel if ((size_t)N * Vp >= SZ_PAR_MIN) reduction(| : fail)
    {
        /* this thread's widened row, once per call, 64-byte aligned as the fp32 kernel's rows */
        float *row = aligned_alloc(64, ((size_t)Vp * sizeof(float) + 63) / 64 * 64);
        if (!row) fail = 1;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (!row) continue;
            uint16_t *l = (uint16_t *)logits + (size_t)n * Vp;
            int ix = targets[n];
            float maxval = -10000.0f;
#pragma omp simd reduction(max : maxval)
            for (int i = 0; i < V; i++) {
                float v = sz_bf16_to_f32_1(l[i]);
                row[i] = v;
                maxval = v > maxval ? v : maxval;
            }
            float sum = sz_sxent_expsum(row, maxval, V);
            losses[n] = -logf(row[ix] / sum);
            /* the next row's logits (Vp / 32 lines of 64 bytes) fetched towards L2 piece by piece
             * meanwhile, so its widening reads them from cache */
            const char *nx = (const char *)(l + Vp), *nend = n + 1 < N ? (const char *)(l + 2 * (size_t)Vp) : nx;
            size_t step = ((size_t)Vp * 2 / 64 + (V + SZ_SXENT_PIECE - 1) / SZ_SXENT_PIECE - 1) /
                          ((V + SZ_SXENT_PIECE - 1) / SZ_SXENT_PIECE) * 64;
            for (int lo = 0; lo < V; lo += SZ_SXENT_PIECE) {
                int m = V - lo < SZ_SXENT_PIECE ? V - lo : SZ_SXENT_PIECE;
                sz_sxent_grad(row + lo, row + lo, F32, m, ix - lo, sum, g);
                sz_f32_to_bf16_row(l + lo, row + lo, (size_t)m);
                for (const char *e = nx + step < nend ? nx + step : nend; nx < e; nx += 64) __builtin_prefetch(nx, 0, 2);
            }
            for (int i = V; i < Vp; i++) l[i] = 0;
        }
        free(row);
    }
    return fail ? -1 : 0;
}

/* ---- the LLaMA-style model's ops (rmsnorm.c, rope.c, embedding.c): the fp32 row math of
 * sz_kernels_impl.h (sz_rms_row_*, sz_rope_row_bwd) on widened rows ---- */

/* dst[0..n) = src widened to fp32, serially (a thread's row inside a parallel kernel) */
static void widen(float *dst, const void *src, int dt, size_t n)
{
    if (dt == SZ_K_BF16) sz_bf16_to_f32_row(dst, src, n);
    else memcpy(dst, src, n * sizeof *dst);
}

#if SZ_BF16_HW_ROUND
/* RMSNorm's rows for C % 16 == 0, pipelined as the layernorm's (ln_fwd_rows16, ln_bwd_rows16): each
 * pass over i takes row k's sum (A; the fused residual's res = a + b stored on the way) and row
 * k-1's output, rounded in registers (O); backward, row k's sum (P) and row k-1's gradients (Q: di,
 * and fused da, db as the layernorm's), dout widened in registers. The arithmetic of the fp32 row
 * functions' 16-lane forms (sz_rms_row_fwd, sz_rms_row_bwd, sz_kernels_impl.h): the same bits. */
SZ_INLINE void rms_fwd_pass(int dA, int dO, float *res, const float *a, const float *b, float *ssA, uint16_t *o,
                            const float *xO, float sO, const float *w, int C)
{
    __m512 acc = _mm512_setzero_ps(), vs = _mm512_set1_ps(sO);
    for (int i = 0; i < C; i += 16) {
        if (dA) {
            __m512 xa = _mm512_loadu_ps(a + i);
            if (res) {
                xa = _mm512_add_ps(xa, _mm512_loadu_ps(b + i));
                _mm512_storeu_ps(res + i, xa);
            }
            acc = _mm512_fmadd_ps(xa, xa, acc);
        }
        if (dO) {
            __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(xO + i), vs), _mm512_loadu_ps(w + i));
            _mm256_storeu_si256((__m256i *)(o + i), sz_bf16_round16(v));
        }
    }
    if (dA) *ssA = sz_lane_sum(acc);
}

static void rms_fwd_rows16(float *res, uint16_t *out, float *rstd, const float *a, const float *b, const float *w,
                           int lo, int hi, int C, float eps)
{
    for (int k = lo; k <= hi; k++) {
        int dA = k < hi, dO = k > lo;
        size_t rA = (size_t)k * C, rO = rA - C;
        float *rs = res && dA ? res + rA : NULL, ss = 0.0f;
        const float *xa = dA ? a + rA : NULL, *xb = rs ? b + rA : NULL, *xO = dO ? (res ? res : a) + rO : NULL;
        uint16_t *o = dO ? out + rO : NULL;
        float sO = dO ? rstd[k - 1] : 0.0f;
        if (dA && dO) rms_fwd_pass(1, 1, rs, xa, xb, &ss, o, xO, sO, w, C);
        else if (dA) rms_fwd_pass(1, 0, rs, xa, xb, &ss, o, xO, sO, w, C);
        else rms_fwd_pass(0, 1, rs, xa, xb, &ss, o, xO, sO, w, C);
        if (dA) rstd[k] = 1.0f / sqrtf(ss / C + eps);
    }
}

SZ_INLINE void rms_bwd_pass(int dP, int dQ, const void *dP_, const float *xP, float *dotP, float *di, float *da,
                            void *db, int db_dt, const void *dQ_, int d_dt, const float *xQ, float sQ, float kQ,
                            const float *w, int C, int sd, int sa, int sb)
{
    __m512 acc = _mm512_setzero_ps(), vs = _mm512_set1_ps(sQ), vk = _mm512_set1_ps(kQ);
    for (int i = 0; i < C; i += 16) {
        if (dP)
            acc = _mm512_fmadd_ps(_mm512_mul_ps(sz_ld16(dP_, d_dt, i), _mm512_loadu_ps(w + i)), _mm512_loadu_ps(xP + i),
                                  acc);
        if (!dQ) continue;
        __m512 v = _mm512_fmsub_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(w + i)), sz_ld16(dQ_, d_dt, i),
                                   _mm512_mul_ps(vk, _mm512_loadu_ps(xQ + i)));
        __m512 g = sd ? v : _mm512_add_ps(_mm512_loadu_ps(di + i), v);
        _mm512_storeu_ps(di + i, g);
        if (!da) continue;
        _mm512_storeu_ps(da + i, sa ? g : _mm512_add_ps(_mm512_loadu_ps(da + i), g));
        if (db_dt == BF) {
            uint16_t *h = (uint16_t *)db + i;
            _mm256_storeu_si256((__m256i *)h, sz_bf16_round16(sb ? g : _mm512_add_ps(sz_ld16(h, BF, 0), g)));
        } else {
            float *f = (float *)db + i;
            _mm512_storeu_ps(f, sb ? g : _mm512_add_ps(_mm512_loadu_ps(f), g));
        }
    }
    if (dP) *dotP = sz_lane_sum(acc);
}

SZ_INLINE void rms_bwd_rows16(float *dinp, float *da, void *db, int db_dt, const void *dout, int d_dt, const float *inp,
                              const float *w, const float *rstd, int lo, int hi, int C, int sd, int sa, int sb)
{
    size_t ed = d_dt == BF ? 2 : 4, eb = db_dt == BF ? 2 : 4;
    float kq = 0.0f; /* row k-1's s^3 dot / C */
    for (int k = lo; k <= hi; k++) {
        int dP = k < hi, dQ = k > lo;
        size_t rP = (size_t)k * C, rQ = rP - C;
        const void *dp = dP ? (const char *)dout + rP * ed : NULL, *dq = dQ ? (const char *)dout + rQ * ed : NULL;
        const float *xP = dP ? inp + rP : NULL, *xQ = dQ ? inp + rQ : NULL;
        float sQ = dQ ? rstd[k - 1] : 0.0f, dot = 0.0f;
        float *di = dQ ? dinp + rQ : NULL, *dan = dQ && da ? da + rQ : NULL;
        void *dbn = dQ && da ? (char *)db + rQ * eb : NULL;
        if (dP && dQ) rms_bwd_pass(1, 1, dp, xP, &dot, di, dan, dbn, db_dt, dq, d_dt, xQ, sQ, kq, w, C, sd, sa, sb);
        else if (dP) rms_bwd_pass(1, 0, dp, xP, &dot, di, dan, dbn, db_dt, dq, d_dt, xQ, sQ, kq, w, C, sd, sa, sb);
        else rms_bwd_pass(0, 1, dp, xP, &dot, di, dan, dbn, db_dt, dq, d_dt, xQ, sQ, kq, w, C, sd, sa, sb);
        if (dP) {
            float s = rstd[k];
            kq = s * s * s * dot / C;
        }
    }
}
#endif

#if SZ_BF16_HW_ROUND
/* The C parameters as fp32: weight itself, or (bf16) widened into the thread's stack row wst. */
static inline const float *params_f32(float *wst, const void *weight, sz_k_dtype p_dt, int C)
{
    if (p_dt != SZ_K_BF16)
        return weight;
    sz_bf16_to_f32_row(wst, weight, (size_t)C);
    return wst;
}
#endif

/* res NULL: rmsnorm(a) (sz_rms_row_fwd); else res = a + b and rmsnorm(res) (sz_k_residual_rmsnorm_fwd,
 * row by row); a bf16 out is the fp32 row rounded. */
static int rms_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *rstd, const float *a, const float *b,
                      const void *weight, sz_k_dtype p_dt, int N, int C, float eps)
{
#if SZ_BF16_HW_ROUND
    if (out_dt == SZ_K_BF16 && C % 16 == 0 && C <= SZ_ROW_STACK) { /* pipelined, rows split in blocks */
#pragma omp parallel if ((size_t)N * C >= SZ_PAR_MIN)
        {
            float wst[SZ_ROW_STACK] __attribute__((aligned(64)));
            const float *wf = params_f32(wst, weight, p_dt, C);
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            rms_fwd_rows16(res, out, rstd, a, b, wf, (int)((int64_t)N * t / nt), (int)((int64_t)N * (t + 1) / nt), C,
                           eps);
        }
        return 0;
    }
#endif
    float *wf = malloc((size_t)C * sizeof *wf);
    if (!wf) return -1;
    widen(wf, weight, p_dt, (size_t)C);
    int fail = 0;
#pragma omp parallel if ((size_t)N * C >= SZ_PAR_MIN) reduction(| : fail)
    {
        float *o = out_dt == SZ_K_BF16 ? malloc((size_t)C * sizeof *o) : NULL; /* this thread's fp32 row */
        if (out_dt == SZ_K_BF16 && !o) fail = 1;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            size_t r = (size_t)n * C;
            float *on = out_dt == SZ_K_BF16 ? o : (float *)out + r;
            if (!on) continue;
            if (res)
                sz_k_residual_rmsnorm_fwd(res + r, on, rstd + n, a + r, b + r, wf, 1, C, eps);
            else
                sz_rms_row_fwd(on, rstd + n, a + r, wf, C, eps);
            if (out_dt == SZ_K_BF16) sz_f32_to_bf16_row((uint16_t *)out + r, o, (size_t)C);
        }
        free(o);
    }
    free(wf);
    return fail ? -1 : 0;
}

int sz_k_rmsnorm_fwd_mx(void *out, sz_k_dtype out_dt, float *rstd, const float *inp, const void *weight,
                        sz_k_dtype p_dt, int N, int C, float eps)
{
    return rms_fwd_mx(NULL, out, out_dt, rstd, inp, NULL, weight, p_dt, N, C, eps);
}

int sz_k_residual_rmsnorm_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *rstd, const float *a,
                                 const float *b, const void *weight, sz_k_dtype p_dt, int N, int C, float eps)
{
    return rms_fwd_mx(res, out, out_dt, rstd, a, b, weight, p_dt, N, C, eps);
}

/* The input gradient row by row on widened rows of dout (and, fused, of db), then dweight by column
 * blocks from dout widened (sz_rms_weight_bwd). db NULL: the plain RMSNorm backward into da (= dinp,
 * may be NULL); else the fused one: dres += the norm's input gradient, da += dres, db += dres. */
static int rms_bwd_mx(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight, const void *dout,
                      sz_k_dtype dout_dt, const float *inp, const void *weight, sz_k_dtype p_dt, const float *rstd,
                      int N, int C, int set)
{
    int par = (size_t)N * C >= SZ_PAR_MIN;
#if SZ_BF16_HW_ROUND
    if (C % 16 == 0 && C <= SZ_ROW_STACK) { /* pipelined, rows split in blocks */
        int dh = dout_dt == SZ_K_BF16, sd = !db && (set & SZ_K_SET_DINP);
        int sa = db && (set & SZ_K_SET_A), sb = db && (set & SZ_K_SET_B);
        if (da || db) {
#pragma omp parallel if (par)
            {
                float wst[SZ_ROW_STACK] __attribute__((aligned(64)));
                const float *wf = params_f32(wst, weight, p_dt, C);
                int nt = omp_get_num_threads(), t = omp_get_thread_num();
                int lo = (int)((int64_t)N * t / nt), hi = (int)((int64_t)N * (t + 1) / nt);
                if (!db && dh) rms_bwd_rows16(da, NULL, NULL, F32, dout, BF, inp, wf, rstd, lo, hi, C, sd, 0, 0);
                else if (!db) rms_bwd_rows16(da, NULL, NULL, F32, dout, F32, inp, wf, rstd, lo, hi, C, sd, 0, 0);
                else if (db_dt == BF && dh) rms_bwd_rows16(dres, da, db, BF, dout, BF, inp, wf, rstd, lo, hi, C, 0, sa, sb);
                else if (db_dt == BF) rms_bwd_rows16(dres, da, db, BF, dout, F32, inp, wf, rstd, lo, hi, C, 0, sa, sb);
                else if (dh) rms_bwd_rows16(dres, da, db, F32, dout, BF, inp, wf, rstd, lo, hi, C, 0, sa, sb);
                else rms_bwd_rows16(dres, da, db, F32, dout, F32, inp, wf, rstd, lo, hi, C, 0, sa, sb);
            }
        }
        if (dweight) sz_rms_weight_bwd(dweight, dout, dout_dt, inp, rstd, N, C, par, set);
        return 0;
    }
#endif
    float *wf = malloc((size_t)C * sizeof *wf);
    if (!wf) return -1;
    widen(wf, weight, p_dt, (size_t)C);
    int fail = 0;
    size_t es = dout_dt == SZ_K_BF16 ? 2 : 4, eb = db_dt == SZ_K_BF16 ? 2 : 4;
    if (da || db) {
#pragma omp parallel if (par) reduction(| : fail)
        {
            float *d = malloc(2 * (size_t)C * sizeof *d), *dbr = d ? d + C : NULL; /* this thread's rows */
            if (!d) fail = 1;
#pragma omp for schedule(static)
            for (int n = 0; n < N; n++) {
                if (!d) continue;
                size_t r = (size_t)n * C;
                widen(d, (const char *)dout + r * es, dout_dt, (size_t)C);
                if (!db) {
                    sz_rms_row_bwd(da + r, d, inp + r, wf, rstd[n], C, set & SZ_K_SET_DINP);
                    continue;
                }
                float *dr = dres + r, *dan = da + r;
                if (!(set & SZ_K_SET_B)) /* set: the row is written whole */
                    widen(dbr, (char *)db + r * eb, db_dt, (size_t)C);
                sz_rms_row_bwd(dr, d, inp + r, wf, rstd[n], C, 0);
                sz_k_residual_bwd_row(dan, dbr, dr, (size_t)C, set);
                if (db_dt == SZ_K_BF16) sz_f32_to_bf16_row((uint16_t *)db + r, dbr, (size_t)C);
                else memcpy((float *)db + r, dbr, (size_t)C * sizeof *dbr);
            }
            free(d);
        }
    }
    free(wf);
    if (fail) return -1; /* only the input gradients were touched, and only where a thread had its rows */
    if (dweight) sz_rms_weight_bwd(dweight, dout, dout_dt, inp, rstd, N, C, par, set);
    return 0;
}

int sz_k_rmsnorm_bwd_mx(float *dinp, float *dweight, const void *dout, sz_k_dtype dout_dt, const float *inp,
                        const void *weight, sz_k_dtype p_dt, const float *rstd, int N, int C)
{
    return rms_bwd_mx(dinp, NULL, SZ_K_F32, NULL, dweight, dout, dout_dt, inp, weight, p_dt, rstd, N, C, 0);
}

int sz_k_rmsnorm_bwd_mx_set(float *dinp, float *dweight, const void *dout, sz_k_dtype dout_dt, const float *inp,
                            const void *weight, sz_k_dtype p_dt, const float *rstd, int N, int C, int set)
{
    return rms_bwd_mx(dinp, NULL, SZ_K_F32, NULL, dweight, dout, dout_dt, inp, weight, p_dt, rstd, N, C,
                      set & (SZ_K_SET_DINP | SZ_K_SET_DW));
}

int sz_k_rmsnorm_residual_bwd_mx(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight,
                                 const void *dout, sz_k_dtype dout_dt, const float *res, const void *weight,
                                 sz_k_dtype p_dt, const float *rstd, int N, int C)
{
    return rms_bwd_mx(da, db, db_dt, dres, dweight, dout, dout_dt, res, weight, p_dt, rstd, N, C, 0);
}

int sz_k_rmsnorm_residual_bwd_mx_set(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight,
                                     const void *dout, sz_k_dtype dout_dt, const float *res, const void *weight,
                                     sz_k_dtype p_dt, const float *rstd, int N, int C, int set)
{
    return rms_bwd_mx(da, db, db_dt, dres, dweight, dout, dout_dt, res, weight, p_dt, rstd, N, C, set);
}

/* RoPE's backward with dinp (accumulated) and dout either type: widened rows, sz_rope_row_bwd, dinp's
 * row rounded back. */
int sz_k_rope_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, int B, int T, int C,
                     int NH, float theta)
{
    return sz_k_rope_bwd_mx_set(dinp, dinp_dt, dout, dout_dt, B, T, C, NH, theta, 0);
}

int sz_k_rope_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, int B, int T, int C,
                         int NH, float theta, int set)
{
    int sd = set & SZ_K_SET_DINP;
    int hs = C / NH, h2 = hs / 2, C3 = 3 * C;
    float *tab = sz_rope_table(T, hs, theta);
    if (!tab) return -1;
    int fail = 0;
    size_t ei = dinp_dt == SZ_K_BF16 ? 2 : 4, eo = dout_dt == SZ_K_BF16 ? 2 : 4;
#pragma omp parallel if ((size_t)B * T * C3 >= SZ_PAR_MIN) reduction(| : fail)
    {
        float *row = malloc(2 * (size_t)C3 * sizeof *row), *drow = row ? row + C3 : NULL;
        if (!row) fail = 1;
#pragma omp for schedule(static)
        for (int bt = 0; bt < B * T; bt++) {
            if (!row) continue;
            size_t r = (size_t)bt * C3;
            float *di = dinp_dt == SZ_K_BF16 ? row : (float *)dinp + r;
            const float *d = dout_dt == SZ_K_BF16 ? drow : (const float *)dout + r;
            if (dinp_dt == SZ_K_BF16 && !sd) widen(row, (char *)dinp + r * ei, dinp_dt, (size_t)C3);
            if (dout_dt == SZ_K_BF16) widen(drow, (const char *)dout + r * eo, dout_dt, (size_t)C3);
            sz_rope_row_bwd(di, d, tab + (size_t)(bt % T) * h2 * 2, C, NH, sd);
            if (dinp_dt == SZ_K_BF16) sz_f32_to_bf16_row((uint16_t *)dinp + r, row, (size_t)C3);
        }
        free(row);
    }
    free(tab);
    return fail ? -1 : 0;
}

/* The embedding lookup from a bf16 (or fp32) table: the rows widened (embedding.c's copy). */
int64_t sz_k_embedding_fwd_mx(float *out, const int *tok, const void *wte, sz_k_dtype p_dt, int N, int C, int V)
{
    int64_t bad = sz_k_embedding_check(tok, N, V);
    if (bad >= 0) return bad;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= SZ_PAR_MIN)
    for (int n = 0; n < N; n++)
        widen(out + (size_t)n * C, (const char *)wte + (size_t)tok[n] * C * (p_dt == SZ_K_BF16 ? 2 : 4), p_dt,
              (size_t)C);
    return -1;
}

/* ---- SiLU and the elementwise product (silu.c, mul.c): out bf16; gradients bf16 (accumulated) from a
 * bf16 or fp32 dout; the inputs (a matmul's fp32 outputs) fp32 ---- */

void sz_k_silu_fwd_mx(void *out, sz_k_dtype out_dt, const float *inp, size_t n)
{
    if (out_dt != SZ_K_BF16) {
        sz_k_silu_fwd(out, inp, n);
        return;
    }
    uint16_t *o = out;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) o[i] = sz_f32_to_bf16_1(sz_silu_1(inp[i]));
}

/* The backwards run the fp32 kernels themselves on blocks widened into fp32 (the contraction of
 * dst + dout * grad into one fused multiply-add is then the fp32 kernel's too), blocks of EW_BLOCK
 * elements split statically over the threads, each bf16 destination's block rounded back. */
#define EW_BLOCK 512

void sz_k_silu_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                      size_t n)
{
    size_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t k = 0; k < nb; k++) {
        size_t lo = k * EW_BLOCK, len = n - lo < EW_BLOCK ? n - lo : EW_BLOCK;
        float di[EW_BLOCK], d[EW_BLOCK];
        float *dp = dinp_dt == SZ_K_BF16 ? di : (float *)dinp + lo;
        const float *op = dout_dt == SZ_K_BF16 ? d : (const float *)dout + lo;
        if (dinp_dt == SZ_K_BF16) widen(di, (const uint16_t *)dinp + lo, dinp_dt, len);
        if (dout_dt == SZ_K_BF16) widen(d, (const uint16_t *)dout + lo, dout_dt, len);
        sz_k_silu_bwd(dp, inp + lo, op, len);
        if (dinp_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)dinp + lo, di, len);
    }
}

void sz_k_mul_fwd_mx(void *out, sz_k_dtype out_dt, const float *a, const float *b, size_t n)
{
    if (out_dt != SZ_K_BF16) {
        sz_k_mul_fwd(out, a, b, n);
        return;
    }
    uint16_t *o = out;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) o[i] = sz_f32_to_bf16_1(a[i] * b[i]);
}

void sz_k_mul_bwd_mx(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const void *dout, sz_k_dtype dout_dt,
                     const float *a, const float *b, size_t n)
{
    size_t nb = (n + EW_BLOCK - 1) / EW_BLOCK;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t k = 0; k < nb; k++) {
        size_t lo = k * EW_BLOCK, len = n - lo < EW_BLOCK ? n - lo : EW_BLOCK;
        float ga[EW_BLOCK], gb[EW_BLOCK], d[EW_BLOCK];
        float *pa = !da ? NULL : da_dt == SZ_K_BF16 ? ga : (float *)da + lo;
        float *pb = !db ? NULL : db_dt == SZ_K_BF16 ? gb : (float *)db + lo;
        const float *op = dout_dt == SZ_K_BF16 ? d : (const float *)dout + lo;
        if (da && da_dt == SZ_K_BF16) widen(ga, (const uint16_t *)da + lo, da_dt, len);
        if (db && db_dt == SZ_K_BF16) widen(gb, (const uint16_t *)db + lo, db_dt, len);
        if (dout_dt == SZ_K_BF16) widen(d, (const uint16_t *)dout + lo, dout_dt, len);
        sz_k_mul_bwd(pa, pb, op, a + lo, b + lo, len);
        if (da && da_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)da + lo, ga, len);
        if (db && db_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)db + lo, gb, len);
    }
}
