/* matmul_bf16.c — the linear layer with bf16 inputs (inp, weight, bias, dout) and
 * fp32 accumulation; out / dinp / (dweight, dbias) are fp32 or bf16 as asked.
 * Native oneDNN bf16 matmul where the CPU has it (AMX, AVX-512 BF16) unless turned off
 * (sz_k_set_bf16_tiles(0): the context does it for SZ_ONEDNN_BF16=0, sched/env.c); otherwise
 * the operands are widened to fp32 (exact) and the fp32 tiles run ("emulated"),
 * which gives the same math at fp32 speed. A bf16 destination is accumulated as
 * round_bf16(f32(dst) + f32 result), like oneDNN's sum post-op. */
#include <stdlib.h>
#include "sz_kernels_impl.h"

static int bf16_tiles = 1; /* sz_k_set_bf16_tiles */

void sz_k_set_bf16_tiles(int on) { __atomic_store_n(&bf16_tiles, on != 0, __ATOMIC_RELAXED); }

static int tiles_on(void) { return __atomic_load_n(&bf16_tiles, __ATOMIC_RELAXED); }

/* Number of elements spanned by a strided [rows, cols] view. */
static size_t sz_span(int64_t rows, int64_t cols, int64_t s_r, int64_t s_c)
{
    return rows == 0 || cols == 0 ? 0 : (size_t)((rows - 1) * s_r + (cols - 1) * s_c + 1);
}

/* The rounding of an emulated product into a bf16 d, one tile at a time, between the caller's
 * hooks (sz_mm_emulate with hooks): d's tile is prepared (before), gets
 * round(f32(d) + fp32 result) or round(result) as the loop without hooks gives it, then is
 * final (after). */
typedef struct {
    const sz_mm_shape *s;
    const float *fd;      /* the fp32 result, [M, N] */
    uint16_t *hd;         /* d */
    const sz_mm_epi *user;
} sz_mm_round_ctx;

static void sz_mm_round_tile(const sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n)
{
    const sz_mm_round_ctx *c = e->ctx;
    const sz_mm_shape *s = c->s;
    if (c->user->before) c->user->before(c->user, i0, j0, m, n);
    for (int64_t i = i0; i < i0 + m; i++)
        for (int64_t j = j0; j < j0 + n; j++) {
            float x = c->fd[i * s->N + j];
            if (s->accumulate) x = sz_bf16_to_f32_1(c->hd[i * s->ldd + j]) + x;
            c->hd[i * s->ldd + j] = sz_f32_to_bf16_1(x);
        }
    if (c->user->after) c->user->after(c->user, i0, j0, m, n);
}

/* d (+)= a.b (+bias) for bf16 a, b, bias via fp32: widen, run fp32 tiles, and
 * round into d when d is bf16 (tile by tile between the hooks when epi is given).
 * Returns like sz_mm_tiled, or -1 on out of memory. */
static int sz_mm_emulate(const sz_mm_shape *s, void *d, const uint16_t *a,
                         const uint16_t *b, const uint16_t *bias, const sz_mm_epi *epi)
{
    size_t na = sz_span(s->M, s->K, s->a_sm, s->a_sk), nb = sz_span(s->K, s->N, s->b_sk, s->b_sn);
    int bf16_out = s->d_dt == SZ_K_BF16;
    size_t nd = bf16_out ? (size_t)s->M * s->N : 0, nbias = bias ? (size_t)s->N : 0;
    float *buf = malloc((na + nb + nd + nbias + 1) * sizeof(float));
    if (!buf) return -1;
    sz_mm_count((int64_t)((na + nb + nd + nbias + 1) * sizeof(float)));
    float *fa = buf, *fb = fa + na, *fd = fb + nb, *fbias = fd + nd;
    sz_k_bf16_to_f32(fa, a, na);
    sz_k_bf16_to_f32(fb, b, nb);
    if (bias) sz_k_bf16_to_f32(fbias, bias, nbias);

    sz_mm_shape f = *s;
    f.a_dt = f.b_dt = f.d_dt = SZ_K_F32;
    if (bias) f.bias_dt = SZ_K_F32;
    if (bf16_out) { f.ldd = s->N; f.accumulate = 0; }
    sz_mm_round_ctx rctx = { s, fd, d, epi };
    sz_mm_epi round = { NULL, sz_mm_round_tile, &rctx };
    int rc = sz_mm_tiled_epi(&f, bf16_out ? (void *)fd : d, fa, fb, bias ? fbias : NULL,
                             bf16_out ? (epi ? &round : NULL) : epi);
    if (bf16_out && !epi && rc >= 0) {
        uint16_t *hd = d;
#pragma omp parallel for schedule(static) if (nd >= SZ_PAR_MIN)
        for (int64_t i = 0; i < s->M; i++)
            for (int64_t j = 0; j < s->N; j++) {
                float x = fd[i * s->N + j];
                if (s->accumulate) x = sz_bf16_to_f32_1(hd[i * s->ldd + j]) + x;
                hd[i * s->ldd + j] = sz_f32_to_bf16_1(x);
            }
    }
    sz_mm_count(-(int64_t)((na + nb + nd + nbias + 1) * sizeof(float)));
    free(buf);
    return rc;
}

/* oneDNN's native bf16 kernels (AMX or AVX512-BF16 tiles) wherever oneDNN has them for the tile
 * shape; the exact widening path where it has not (no AVX-512, or only its reference kernel), or
 * when sz_k_set_bf16_tiles(0) asks for it (the tests cover both). The native bf16 compute path
 * (include/starzero.h, sz_bf16_compute) runs the model's matmuls here. Checked on a Zen 4 EPYC with
 * AVX512_BF16 (impl brg:avx512_core_bf16): test_kernels_bf16_native passes (references, finite
 * differences, the same bits at 1-4 threads), and at GPT-2 124M's shapes the tiles beat the fp32
 * ones in 19 of 21 pairs, mostly by 1.3-3x, on a loaded machine (docs/BENCHMARKS.md). */
int sz_mm_bf16_epi(const sz_mm_shape *s, void *d, const uint16_t *a, const uint16_t *b,
                   const uint16_t *bias, const sz_mm_epi *epi)
{
    if (tiles_on() && sz_mm_supported(s)) return sz_mm_tiled_epi(s, d, a, b, bias, epi);
    return sz_mm_emulate(s, d, a, b, bias, epi);
}

static int sz_mm_bf16(const sz_mm_shape *s, void *d, const uint16_t *a, const uint16_t *b,
                      const uint16_t *bias)
{
    return sz_mm_bf16_epi(s, d, a, b, bias, NULL);
}

static void sz_mm_init16(sz_mm_shape *s, int64_t M, int64_t N, int64_t K, int d_dt)
{
    memset(s, 0, sizeof *s);
    s->M = M; s->N = N; s->K = K;
    s->a_dt = s->b_dt = SZ_K_BF16;
    s->d_dt = d_dt;
    s->bias_dt = -1;
}

int sz_k_matmul_fwd_bf16(void *out, sz_k_dtype out_dt, const uint16_t *inp,
                         const uint16_t *weight, const uint16_t *bias,
                         int N, int C, int OC)
{
    sz_mm_shape s;   /* out[N,OC] = inp[N,C] . weight[OC,C]^T + bias */
    sz_mm_shape_fwd(&s, N, C, OC, SZ_K_BF16, out_dt, bias != NULL);
    return sz_mm_bf16(&s, out, inp, weight, bias);
}

int sz_k_matmul_bwd_bf16(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias,
                         sz_k_dtype dparam_dt, const uint16_t *dout, const uint16_t *inp,
                         const uint16_t *weight, int N, int C, int OC)
{
    return sz_k_matmul_bwd_bf16_set(dinp, dinp_dt, dweight, dbias, dparam_dt, dout, inp, weight, N, C, OC, 0);
}

int sz_k_matmul_bwd_bf16_set(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias,
                             sz_k_dtype dparam_dt, const uint16_t *dout, const uint16_t *inp,
                             const uint16_t *weight, int N, int C, int OC, int set)
{
    sz_mm_shape s;
    int rc = 0, r;
    if (dinp) {      /* dinp[N,C] (+)= dout[N,OC] . weight[OC,C]; set: no sum post-op */
        sz_mm_shape_dinp(&s, N, C, OC, SZ_K_BF16, dinp_dt);
        s.accumulate = !(set & SZ_K_SET_DINP);
        r = sz_mm_bf16(&s, dinp, dout, weight, NULL);
        if (r < 0) return r;
        rc |= r;
    }
    if (dweight) {   /* dweight[OC,C] (+)= dout^T . inp; set: no sum post-op */
        sz_mm_init16(&s, OC, C, N, dparam_dt);
        s.a_sm = 1; s.a_sk = OC; s.b_sk = C; s.b_sn = 1; s.ldd = C; s.accumulate = !(set & SZ_K_SET_DW);
        r = sz_mm_bf16(&s, dweight, dout, inp, NULL);
        if (r < 0) return r;
        rc |= r;
    }
    if (dbias && (set & SZ_K_SET_DB)) /* the sums start at 0 */
        memset(dbias, 0, (size_t)OC * (dparam_dt == SZ_K_BF16 ? 2 : 4));
    if (dbias) sz_mm_colsum(dbias, dparam_dt, dout, SZ_K_BF16, N, OC);
    return rc;
}

/* Host memory of the bf16 kernels for out[N,OC] = inp[N,C] . weight^T and its backward, with either
 * destination dtype: natively (where oneDNN has the tiles, unless SZ_ONEDNN_BF16=0) the tiles' scratchpads
 * and packed copies; emulated, the fp32 widening of the operands (and of a bf16 destination) one
 * call holds, plus the fp32 tiles' own. As sz_k_matmul_host_bytes: *scratch kept per thread, *pack
 * held by a running call. */
void sz_k_matmul_bf16_host_bytes(int N, int C, int OC, int nthr, size_t *scratch, size_t *pack)
{
    sz_mm_shape s[14];
    int n = 0;
    for (int dt = 0; dt < 2; dt++) {
        int d_dt = dt ? SZ_K_BF16 : SZ_K_F32;
        sz_mm_shape_fwd(&s[n], N, C, OC, SZ_K_BF16, d_dt, 1); /* forward, with a bias and without */
        s[n + 1] = s[n];
        s[n + 1].bias_dt = -1;
        sz_mm_shape_dinp(&s[n + 2], N, C, OC, SZ_K_BF16, d_dt); /* dinp, then dweight */
        sz_mm_init16(&s[n + 3], OC, C, N, d_dt);
        s[n + 3].a_sm = 1; s[n + 3].a_sk = OC; s[n + 3].b_sk = C; s[n + 3].b_sn = 1; s[n + 3].ldd = C;
        s[n + 3].accumulate = 1;
        s[n + 4] = s[n + 2];                /* dinp set (sz_k_matmul_bwd_bf16_set) */
        s[n + 4].accumulate = 0;
        s[n + 5] = s[n + 3];                /* dweight set */
        s[n + 5].accumulate = 0;
        n += 6;
    }
    size_t sc_most = 0, pk_most = 0; /* the choice sz_mm_bf16 makes */
    for (int i = 0; i < n; i++) {
        size_t sc, pk;
        if (tiles_on() && sz_mm_supported(&s[i])) {
            sz_mm_shape_host_split(&s[i], nthr, &sc, &pk);
        } else { /* as sz_mm_emulate */
            size_t na = sz_span(s[i].M, s[i].K, s[i].a_sm, s[i].a_sk), nb = sz_span(s[i].K, s[i].N, s[i].b_sk, s[i].b_sn);
            int bf16_out = s[i].d_dt == SZ_K_BF16;
            size_t nd = bf16_out ? (size_t)s[i].M * s[i].N : 0, nbias = s[i].bias_dt >= 0 ? (size_t)s[i].N : 0;
            sz_mm_shape f = s[i];
            f.a_dt = f.b_dt = f.d_dt = SZ_K_F32;
            if (f.bias_dt >= 0) f.bias_dt = SZ_K_F32;
            if (bf16_out) { f.ldd = s[i].N; f.accumulate = 0; }
            sz_mm_shape_host_split(&f, nthr, &sc, &pk);
            pk += (na + nb + nd + nbias + 1) * sizeof(float);
        }
        sc_most = sc > sc_most ? sc : sc_most;
        pk_most = pk > pk_most ? pk : pk_most;
    }
    *scratch = sc_most;
    *pack = pk_most;
}
