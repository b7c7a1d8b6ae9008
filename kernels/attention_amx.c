/* attention_amx.c — causal attention with its block products on AMX tiles: bf16 operands, fp32
 * accumulation (Intel AMX-BF16, Sapphire Rapids and later). The native bf16 path's attention
 * (attention.c dispatches here for a bf16 out, or a bf16 dinp in the backward, where the CPU has
 * AMX); the semantics are attention.c's (scale 1/sqrt(hs), causal mask, softmax max from -10000,
 * stats [B,NH,T,2] = max and 1/sum per query row, probabilities normalised before they weight v).
 *
 * Rounded to bf16: q, k, v and dout once per (b, h) pair (packed), the probabilities before P.V
 * and dV, and dS before dQ and dK — as FlashAttention and the CUDA twin's tensor-core tiles do.
 * Everything between the products runs in fp32: the scores, the softmax statistics, the causal mask
 * and D = sum_j P dP. Key blocks above the diagonal are never computed.
 *
 * Blocking: one (b, h) pair is one thread's unit of work. Its operands are packed into per-thread
 * scratch in the layouts the tiles load: row-major A operands, and B operands in AMX's pair layout
 * (row k/2 holds (B[k][n], B[k+1][n]) for every n). Query rows go 32 at a time (t0, t0 + 32); such
 * a block meets keys 0 .. t0 + 31: S = Q K^T into an fp32 [32][Tk] row block, the softmax in fp32,
 * then O = P V (forward); the backward adds dP = dO V^T, dS = P (dP - D) scale, dQ = dS K,
 * dK^T += Q^T dS and dV^T += dO^T P (held as fp32 [hs][T] until the pair is done). The rows between
 * the products are AVX-512 code over 16 lanes, the mask as lane masks. Every product
 * is 32x32 blocks of C in tiles 0-3, k in steps of 32 in order, so a result's bits depend on the
 * CPU and the shapes only, never on the thread count. Head size and T are padded to multiples of
 * 32 with zeros in the packs (exact). Scratch per thread: O(T hs) bytes, ~0.6 MB forward and ~1.9
 * MB backward at T 1024, hs 64. */
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include "sz_kernels_impl.h"

#define SZ_AMX_QB 32 /* query rows per block (two tile rows) */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define SZ_AMX_BUILT 1
#else
#define SZ_AMX_BUILT 0
#endif

/* AMX-BF16 usable: the CPU has it (CPUID.7.0:EDX bits 22, 24), the OS saves the tile state (XCR0
 * bits 17, 18) and Linux grants this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, once
 * per process for all its threads; oneDNN asks the same). Asked once; the answer is a fact of the
 * machine. */
int sz_k_attention_amx_ok(void)
{
#if SZ_AMX_BUILT
    static int ok = -1;
    int v = __atomic_load_n(&ok, __ATOMIC_ACQUIRE);
    if (v >= 0)
        return v;
    unsigned a, b, c, d;
    v = 0;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        if (((d >> 22) & 1) && ((d >> 24) & 1) && ((c >> 27) & 1)) { /* amx-bf16, amx-tile; osxsave */
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            if (((lo >> 17) & 3) == 3)
                v = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
        }
    }
    __atomic_store_n(&ok, v, __ATOMIC_RELEASE);
    return v;
#else
    return 0;
#endif
}

#if SZ_AMX_BUILT
#define SZ_AMX_ATTR \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

/* The tile configuration: palette 1, all 8 tiles 16 rows of 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) sz_amx_cfg;

SZ_AMX_ATTR static void sz_amx_configure(void)
{
    sz_amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* c[M][N] (+)= A[M][K] . B[K][N], M, N, K multiples of 32: a bf16 row-major (lda elements); b in
 * the pair layout, b[(k / 2) * ldb + n] = (B[k][n], B[k + 1][n]) for even k; c fp32 (ldc elements),
 * loaded first when acc, else the sum starts at zero. */
SZ_AMX_ATTR static void sz_amx_mm(float *c, size_t ldc, int acc, const uint16_t *a, size_t lda, const uint32_t *b,
                                  size_t ldb, int M, int N, int K)
{
    for (int m0 = 0; m0 < M; m0 += 32)
        for (int n0 = 0; n0 < N; n0 += 32) {
            float *c0 = c + (size_t)m0 * ldc + n0, *c1 = c0 + 16 * ldc;
            if (acc) {
                _tile_loadd(0, c0, ldc * 4);
                _tile_loadd(1, c0 + 16, ldc * 4);
                _tile_loadd(2, c1, ldc * 4);
                _tile_loadd(3, c1 + 16, ldc * 4);
            } else {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            }
            for (int k0 = 0; k0 < K; k0 += 32) {
                const uint16_t *a0 = a + (size_t)m0 * lda + k0;
                const uint32_t *b0 = b + (size_t)(k0 / 2) * ldb + n0;
                _tile_loadd(4, a0, lda * 2);
                _tile_loadd(5, a0 + 16 * lda, lda * 2);
                _tile_loadd(6, b0, ldb * 4);
                _tile_loadd(7, b0 + 16, ldb * 4);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, c0, ldc * 4);
            _tile_stored(1, c0 + 16, ldc * 4);
            _tile_stored(2, c1, ldc * 4);
            _tile_stored(3, c1 + 16, ldc * 4);
        }
}

/* The packs of one (b, h) pair's [T][hs] operand x (src rows ld apart, fp32 or bf16), rounded to
 * bf16 and zero outside T x hs, into the layouts d[] asks for (NULL: not wanted), from one read of
 * x: d[SZ_AMX_ROWS] x[t][i] ([Tp][hp]); d[SZ_AMX_COLS] x[i][t] ([hp][Tp]); d[SZ_AMX_PAIR_I] the pair
 * layout of x^T, (x[t][i], x[t][i + 1]) at u32 (i / 2) * Tp + t (the B of a product with x^T);
 * d[SZ_AMX_PAIR_T] the pair layout of x, (x[t][i], x[t + 1][i]) at u32 (t / 2) * hp + i (the B of a
 * product with x). rows: scratch [32][hp]. */
enum { SZ_AMX_ROWS, SZ_AMX_COLS, SZ_AMX_PAIR_I, SZ_AMX_PAIR_T, SZ_AMX_NLAYOUTS };

static void sz_amx_pack(uint16_t *const d[SZ_AMX_NLAYOUTS], const void *src, sz_k_dtype dt, size_t ld, int T, int hs,
                        int Tp, int hp, uint16_t *rows)
{
    if (T != Tp || hs != hp) /* the padding: whole packs zeroed first (shapes that need it only) */
        for (int l = 0; l < SZ_AMX_NLAYOUTS; l++)
            if (d[l])
                memset(d[l], 0, (size_t)Tp * hp * sizeof(uint16_t));
    for (int t0 = 0; t0 < T; t0 += SZ_AMX_QB) { /* 32 rows rounded into rows [32][hp], then placed */
        int nt = T - t0 < SZ_AMX_QB ? T - t0 : SZ_AMX_QB;
        for (int r = 0; r < nt; r++) {
            uint16_t *x = rows + (size_t)r * hp;
            if (dt == SZ_K_BF16)
                memcpy(x, (const uint16_t *)src + (size_t)(t0 + r) * ld, (size_t)hs * sizeof(uint16_t));
            else
                sz_f32_to_bf16_row(x, (const float *)src + (size_t)(t0 + r) * ld, (size_t)hs);
            if (hs & 1)
                x[hs] = 0; /* an odd head size's pair partner */
        }
        if (d[SZ_AMX_ROWS])
            for (int r = 0; r < nt; r++)
                memcpy(d[SZ_AMX_ROWS] + (size_t)(t0 + r) * hp, rows + (size_t)r * hp, (size_t)hs * sizeof(uint16_t));
        if (d[SZ_AMX_COLS]) /* written 32 t at a time */
            for (int i = 0; i < hs; i++)
                for (int r = 0; r < nt; r++) d[SZ_AMX_COLS][(size_t)i * Tp + t0 + r] = rows[(size_t)r * hp + i];
        if (d[SZ_AMX_PAIR_I]) {
            uint32_t *d32 = (uint32_t *)d[SZ_AMX_PAIR_I];
            for (int i = 0; i < hs; i += 2)
                for (int r = 0; r < nt; r++) {
                    uint32_t pr;
                    memcpy(&pr, rows + (size_t)r * hp + i, sizeof pr);
                    d32[(size_t)(i >> 1) * Tp + t0 + r] = pr;
                }
        }
        if (d[SZ_AMX_PAIR_T])
            for (int r = 0; r < nt; r++)
                for (int i = 0; i < hs; i++)
                    d[SZ_AMX_PAIR_T][((size_t)((t0 + r) >> 1) * hp + i) * 2 + ((t0 + r) & 1)] = rows[(size_t)r * hp + i];
    }
}

/* v[r / 2][j] = (x[r][j], x[r + 1][j]) for even r < 32, j < n: two bf16 rows of x ([32][ld]) as one
 * row of the pair layout (the B of a product over x's rows). */
static void sz_amx_pair_rows(uint32_t *v, const uint16_t *x, size_t ld, int n)
{
    for (int r = 0; r < SZ_AMX_QB; r += 2) {
        const uint16_t *x0 = x + (size_t)r * ld, *x1 = x0 + ld;
        uint32_t *o = v + (size_t)(r / 2) * ld;
#pragma omp simd
        for (int j = 0; j < n; j++) o[j] = (uint32_t)x0[j] | (uint32_t)x1[j] << 16;
    }
}

/* The rows between the products, 16 lanes at a time: a lane j < n of a row is a key the query
 * sees, lanes n .. Tk - 1 give 0 (the causal mask, and the padding rows t >= T with n = 0). */
#define SZ_AMX_LANES(j, n) ((__mmask16)((j) + 16 <= (n) ? 0xFFFF : (j) >= (n) ? 0 : (1u << ((n) - (j))) - 1))

/* e^x in 16 lanes: x = k ln2 + r (ln2 split hi + lo), degree-7 Taylor of e^r, times 2^k (vscalefps,
 * which gives 0 or a denormal far below); sz_expf's polynomial and reduction, without its masks: below
 * -87.34 the result may be a denormal where sz_expf gives 0. A NaN stays NaN. */
SZ_AMX_ATTR static inline __m512 sz_amx_exp(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(88.72283f), _mm512_max_ps(_mm512_set1_ps(-1000.0f), x)); /* NaN kept */
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/* The softmax exponent of a raw score s (before the 1/sqrt(hs) scale): s scale - mx in one
 * rounding. The forward and the backward both take it from here, so the probabilities the backward
 * recomputes are bitwise those the forward used. */
SZ_AMX_ATTR static inline __m512 sz_amx_arg(__m512 s, __m512 scale, __m512 mx)
{
    return _mm512_fmsub_ps(s, scale, mx);
}

/* Forward, one query row: raw scores s [Tk] (fp32, overwritten), p = softmax over the first n into
 * p [Tk] as bf16 (0 beyond n); stats (max, 1/sum) when n > 0. The max of the scaled scores is the
 * scaled max of the raw ones (scale > 0 and rounding are monotonic), starting at -10000 as llm.c's;
 * a comparison ignores a NaN score (vmaxps returns its second operand when either is NaN). */
SZ_AMX_ATTR static void sz_amx_softmax_row(float *s, uint16_t *p, int n, int Tk, float scale, float *stats)
{
    __m512 m = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps(), sc = _mm512_set1_ps(scale);
    for (int j = 0; j < n; j += 16)
        m = _mm512_mask_max_ps(m, SZ_AMX_LANES(j, n), _mm512_maskz_loadu_ps(SZ_AMX_LANES(j, n), s + j), m);
    float mx = n ? _mm512_reduce_max_ps(m) * scale : 0.0f;
    mx = mx > -10000.0f ? mx : -10000.0f;
    __m512 vmx = _mm512_set1_ps(mx);
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = SZ_AMX_LANES(j, n);
        __m512 e = sz_amx_exp(sz_amx_arg(_mm512_maskz_loadu_ps(k, s + j), sc, vmx));
        sum = _mm512_mask_add_ps(sum, k, sum, e);
        _mm512_mask_storeu_ps(s + j, k, e);
    }
    float tot = _mm512_reduce_add_ps(sum), inv = tot == 0.0f ? 0.0f : 1.0f / tot;
    __m512 vinv = _mm512_set1_ps(inv);
    for (int j = 0; j < Tk; j += 16) {
        __mmask16 k = SZ_AMX_LANES(j, n);
        __m512 pr = _mm512_maskz_mul_ps(k, _mm512_maskz_loadu_ps(k, s + j), vinv);
        _mm256_storeu_si256((__m256i *)(p + j), (__m256i)_mm512_cvtneps_pbh(pr));
    }
    if (n) {
        stats[0] = mx;
        stats[1] = inv;
    }
}

/* Backward, one query row: raw scores s and dP = dO V^T in g [Tk]; p = e^(s scale - mx) inv and
 * dS = p (dP - D) scale with D = sum_j p dP over the first n, both rounded into bf16 rows pb, dsb
 * [Tk] (0 beyond n). */
SZ_AMX_ATTR static void sz_amx_dsoftmax_row(float *s, const float *g, uint16_t *pb, uint16_t *dsb, int n, int Tk,
                                            float scale, float mx, float inv)
{
    __m512 sc = _mm512_set1_ps(scale), vmx = _mm512_set1_ps(mx), vinv = _mm512_set1_ps(inv);
    __m512 d = _mm512_setzero_ps();
    for (int j = 0; j < Tk; j += 16) { /* p (into s and pb) and D */
        __mmask16 k = SZ_AMX_LANES(j, n);
        __m512 pr = _mm512_maskz_mul_ps(k, sz_amx_exp(sz_amx_arg(_mm512_maskz_loadu_ps(k, s + j), sc, vmx)), vinv);
        d = _mm512_mask3_fmadd_ps(pr, _mm512_maskz_loadu_ps(k, g + j), d, k);
        _mm512_storeu_ps(s + j, pr);
        _mm256_storeu_si256((__m256i *)(pb + j), (__m256i)_mm512_cvtneps_pbh(pr));
    }
    __m512 vd = _mm512_set1_ps(_mm512_reduce_add_ps(d));
    for (int j = 0; j < Tk; j += 16) {
        __mmask16 k = SZ_AMX_LANES(j, n);
        __m512 ds = _mm512_maskz_mul_ps(k, _mm512_mul_ps(_mm512_loadu_ps(s + j), _mm512_sub_ps(_mm512_loadu_ps(g + j), vd)), sc);
        _mm256_storeu_si256((__m256i *)(dsb + j), (__m256i)_mm512_cvtneps_pbh(ds));
    }
}

static void *sz_amx_alloc(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* One row of x (hs floats) into d (fp32 or bf16, rounded once): set, or added to what d holds. */
static void sz_amx_put(void *d, sz_k_dtype dt, const float *x, int hs, int set, float *tmp)
{
    if (dt == SZ_K_F32) {
        float *f = d;
        if (set)
            memcpy(f, x, (size_t)hs * sizeof(float));
        else
            for (int i = 0; i < hs; i++) f[i] += x[i];
        return;
    }
    if (!set) {
        sz_bf16_to_f32_row(tmp, d, (size_t)hs);
        for (int i = 0; i < hs; i++) tmp[i] += x[i];
        x = tmp;
    }
    sz_f32_to_bf16_row(d, x, (size_t)hs);
}

SZ_AMX_ATTR static int sz_amx_fwd(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C,
                                  int NH)
{
    int C3 = 3 * C, hs = C / NH, hp = (hs + 31) & ~31, Tp = (T + 31) & ~31, fail = 0;
    float scale = 1.0f / sqrtf((float)hs);
    size_t pack = (size_t)Tp * hp, blk = (size_t)SZ_AMX_QB * Tp;
#pragma omp parallel if ((size_t)B * T * T * NH >= SZ_PAR_MIN) shared(fail)
    {
        /* q rows, k^T pairs, v pairs; P bf16 [32][Tp]; S fp32 [32][Tp]; O fp32 [32][hp]; a row of hs
         * floats; the packs' rows bf16 [32][hp] */
        uint16_t *qb = sz_amx_alloc(3 * pack * 2 + blk * 6 + (size_t)SZ_AMX_QB * hp * 6 + (size_t)hs * 4);
        if (sz_par_alloc_ok(qb, &fail)) { /* no thread writes unless every thread has its scratch */
            uint16_t *kp = qb + pack, *vv = kp + pack, *P = vv + pack;
            float *S = (float *)(P + blk), *O = S + blk, *tmp = O + (size_t)SZ_AMX_QB * hp;
            uint16_t *rows = (uint16_t *)(tmp + hs);
            sz_amx_configure();
#pragma omp for collapse(2) schedule(static)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++) {
                    const float *base = inp + (size_t)b * T * C3 + h * hs;
                    uint16_t *pq[SZ_AMX_NLAYOUTS] = {qb}, *pk[SZ_AMX_NLAYOUTS] = {[SZ_AMX_PAIR_I] = kp},
                             *pv[SZ_AMX_NLAYOUTS] = {[SZ_AMX_PAIR_T] = vv};
                    sz_amx_pack(pq, base, SZ_K_F32, C3, T, hs, Tp, hp, rows);
                    sz_amx_pack(pk, base + C, SZ_K_F32, C3, T, hs, Tp, hp, rows);
                    sz_amx_pack(pv, base + 2 * C, SZ_K_F32, C3, T, hs, Tp, hp, rows);
                    for (int t0 = 0; t0 < T; t0 += SZ_AMX_QB) {
                        int Tk = t0 + SZ_AMX_QB; /* keys 0 .. t0 + 31: the diagonal block is the last */
                        sz_amx_mm(S, Tp, 0, qb + (size_t)t0 * hp, hp, (const uint32_t *)kp, Tp, SZ_AMX_QB, Tk, hp);
                        for (int r = 0; r < SZ_AMX_QB; r++) {
                            int t = t0 + r, n = t < T ? t + 1 : 0;
                            sz_amx_softmax_row(S + (size_t)r * Tp, P + (size_t)r * Tp, n, Tk, scale,
                                               stats + (((size_t)b * NH + h) * T + t) * 2);
                        }
                        sz_amx_mm(O, hp, 0, P, Tp, (const uint32_t *)vv, hp, SZ_AMX_QB, hp, Tk);
                        for (int r = 0; r < SZ_AMX_QB && t0 + r < T; r++) {
                            size_t oo = ((size_t)b * T + t0 + r) * C + h * hs;
                            void *o = out_dt == SZ_K_BF16 ? (void *)((uint16_t *)out + oo) : (void *)((float *)out + oo);
                            sz_amx_put(o, out_dt, O + (size_t)r * hp, hs, 1, tmp);
                        }
                    }
                }
            _tile_release();
        }
        free(qb);
    }
    return fail ? -1 : 0;
}

SZ_AMX_ATTR static int sz_amx_bwd(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt,
                                  const float *inp, const float *stats, int B, int T, int C, int NH, int set)
{
    int C3 = 3 * C, hs = C / NH, hp = (hs + 31) & ~31, Tp = (T + 31) & ~31, fail = 0;
    float scale = 1.0f / sqrtf((float)hs);
    size_t pack = (size_t)Tp * hp, blk = (size_t)SZ_AMX_QB * Tp, es = dinp_dt == SZ_K_BF16 ? 2 : 4;
    size_t dos = dout_dt == SZ_K_BF16 ? 2 : 4;
#pragma omp parallel if ((size_t)B * T * T * NH >= SZ_PAR_MIN) shared(fail)
    {
        /* 7 packs; S, dP fp32 [32][Tp]; P, dS bf16 rows and their pair rows [32][Tp]; dK^T, dV^T
         * fp32 [hp][Tp]; dQ fp32 [32][hp]; 16 columns of dK^T or dV^T [hp][16]; 2 rows of hs floats;
         * the packs' rows bf16 [32][hp] */
        size_t bytes = 7 * pack * 2 + 2 * blk * 4 + 4 * blk * 2 + 2 * pack * 4 + (size_t)SZ_AMX_QB * hp * 4 +
                       (size_t)16 * hp * 4 + 2 * (size_t)hs * 4 + (size_t)SZ_AMX_QB * hp * 2;
        uint16_t *qb = sz_amx_alloc(bytes);
        if (sz_par_alloc_ok(qb, &fail)) { /* no thread writes unless every thread has its scratch */
            uint16_t *kp = qb + pack, *kv = kp + pack, *vp = kv + pack, *db = vp + pack, *qt = db + pack,
                     *dt = qt + pack, *Pb = dt + pack, *dSb = Pb + blk;
            uint32_t *Pv = (uint32_t *)(dSb + blk), *dSv = Pv + blk / 2;
            float *S = (float *)(dSv + blk / 2), *dP = S + blk, *dKt = dP + blk, *dVt = dKt + pack,
                  *dQ = dVt + pack, *blk16 = dQ + (size_t)SZ_AMX_QB * hp, *tmp = blk16 + (size_t)16 * hp;
            uint16_t *rows = (uint16_t *)(tmp + 2 * hs);
            sz_amx_configure();
#pragma omp for collapse(2) schedule(static)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++) {
                    const float *base = inp + (size_t)b * T * C3 + h * hs;
                    const char *dbase = (const char *)dout + ((size_t)b * T * C + h * hs) * dos;
                    char *ibase = (char *)dinp + ((size_t)b * T * C3 + h * hs) * es;
                    uint16_t *pq[SZ_AMX_NLAYOUTS] = {qb, qt}, *pk[SZ_AMX_NLAYOUTS] = {NULL, NULL, kp, kv},
                             *pv[SZ_AMX_NLAYOUTS] = {[SZ_AMX_PAIR_I] = vp}, *pd[SZ_AMX_NLAYOUTS] = {db, dt};
                    sz_amx_pack(pq, base, SZ_K_F32, C3, T, hs, Tp, hp, rows);
                    sz_amx_pack(pk, base + C, SZ_K_F32, C3, T, hs, Tp, hp, rows);
                    sz_amx_pack(pv, base + 2 * C, SZ_K_F32, C3, T, hs, Tp, hp, rows);
                    sz_amx_pack(pd, dbase, dout_dt, C, T, hs, Tp, hp, rows);
                    memset(dKt, 0, 2 * pack * sizeof(float));
                    for (int t0 = 0; t0 < T; t0 += SZ_AMX_QB) {
                        int Tk = t0 + SZ_AMX_QB;
                        sz_amx_mm(S, Tp, 0, qb + (size_t)t0 * hp, hp, (const uint32_t *)kp, Tp, SZ_AMX_QB, Tk, hp);
                        sz_amx_mm(dP, Tp, 0, db + (size_t)t0 * hp, hp, (const uint32_t *)vp, Tp, SZ_AMX_QB, Tk, hp);
                        for (int r = 0; r < SZ_AMX_QB; r++) {
                            int t = t0 + r, n = t < T ? t + 1 : 0;
                            const float *st = stats + (((size_t)b * NH + h) * T + (n ? t : 0)) * 2;
                            sz_amx_dsoftmax_row(S + (size_t)r * Tp, dP + (size_t)r * Tp, Pb + (size_t)r * Tp,
                                                dSb + (size_t)r * Tp, n, Tk, scale, n ? st[0] : 0.0f, n ? st[1] : 0.0f);
                        }
                        sz_amx_pair_rows(Pv, Pb, Tp, Tk);
                        sz_amx_pair_rows(dSv, dSb, Tp, Tk);
                        /* dQ = dS K, whole for these rows; dK^T += Q^T dS, dV^T += dO^T P */
                        sz_amx_mm(dQ, hp, 0, dSb, Tp, (const uint32_t *)kv, hp, SZ_AMX_QB, hp, Tk);
                        sz_amx_mm(dKt, Tp, 1, qt + t0, Tp, dSv, Tp, hp, Tk, SZ_AMX_QB);
                        sz_amx_mm(dVt, Tp, 1, dt + t0, Tp, Pv, Tp, hp, Tk, SZ_AMX_QB);
                        for (int r = 0; r < SZ_AMX_QB && t0 + r < T; r++)
                            sz_amx_put(ibase + (size_t)(t0 + r) * C3 * es, dinp_dt, dQ + (size_t)r * hp, hs, set, tmp);
                    }
                    for (int w = 1; w <= 2; w++) /* dk, then dv: 16 columns of dK^T, dV^T at a time */
                        for (int t0 = 0; t0 < T; t0 += 16) {
                            const float *src = (w == 1 ? dKt : dVt) + t0;
                            for (int i = 0; i < hs; i++) memcpy(blk16 + (size_t)i * 16, src + (size_t)i * Tp, 64);
                            for (int r = 0; r < 16 && t0 + r < T; r++) {
                                for (int i = 0; i < hs; i++) tmp[i] = blk16[(size_t)i * 16 + r];
                                sz_amx_put(ibase + ((size_t)(t0 + r) * C3 + (size_t)w * C) * es, dinp_dt, tmp, hs, set,
                                           tmp + hs);
                            }
                        }
                }
            _tile_release();
        }
        free(qb);
    }
    return fail ? -1 : 0;
}
#endif

int sz_k_attention_amx_fwd(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C, int NH)
{
#if SZ_AMX_BUILT
    if (sz_k_attention_amx_ok())
        return sz_amx_fwd(out, out_dt, stats, inp, B, T, C, NH);
#else
    (void)out, (void)out_dt, (void)stats, (void)inp, (void)B, (void)T, (void)C, (void)NH;
#endif
    return -2;
}

int sz_k_attention_amx_bwd(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, const float *inp,
                           const float *stats, int B, int T, int C, int NH, int set)
{
#if SZ_AMX_BUILT
    if (sz_k_attention_amx_ok())
        return sz_amx_bwd(dinp, dinp_dt, dout, dout_dt, inp, stats, B, T, C, NH, set & SZ_K_SET_DINP);
#else
    (void)dinp, (void)dinp_dt, (void)dout, (void)dout_dt, (void)inp, (void)stats, (void)B, (void)T, (void)C, (void)NH;
    (void)set;
#endif
    return -2;
}
