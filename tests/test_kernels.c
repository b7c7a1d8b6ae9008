/* test_kernels.c — CUnit suite for kernels: every forward against a naive
 * double-precision reference, every backward against central finite differences
 * of L = sum(out * w) computed in double, bitwise determinism over 1/2/3 OpenMP
 * threads, AdamW against a hand computation, bf16 rounding. Exit code = failures.
 * Build and run from the repository root:
 *   gcc -O2 -fopenmp -Wall -Wextra -Ikernels tests/test_kernels.c \
 *       $(find kernels -name '*.c' ! -name bench_kernels.c) \
 *       -ldnnl -lcunit -lm -o /tmp/test_kernels && /tmp/test_kernels
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"
#include "sz_test_check.h"
#include "sz_test_data.h"

/* ---------------------------------------------------------------- helpers */

static void round_bf16(float *x, size_t n)   /* x := bf16(x), kept as float */
{
    for (size_t i = 0; i < n; i++) x[i] = sz_bf16_to_f32_1(sz_f32_to_bf16_1(x[i]));
}
static uint16_t *to_bf16(const float *x, size_t n)
{
    uint16_t *h = malloc(n * sizeof *h);
    sz_k_f32_to_bf16(h, x, n);
    return h;
}
static float *from_bf16(const uint16_t *h, size_t n)
{
    float *x = malloc(n * sizeof *x);
    sz_k_bf16_to_f32(x, h, n);
    return x;
}

enum { B = 2, T = 5, C = 8, NH = 2, V = 11, VP = 16, N = B * T };
#define FWD_TOL 1e-5
#define BWD_TOL 1e-5

/* ---------------------------------------------------------------- encoder */

typedef struct { const int *tok; double *wte, *wpe, *w, *out; } enc_ctx;
static void ref_encoder(double *out, const int *tok, const double *wte, const double *wpe)
{
    for (int bt = 0; bt < N; bt++)
        for (int c = 0; c < C; c++)
            out[bt * C + c] = wte[tok[bt] * C + c] + wpe[(bt % T) * C + c];
}
static double enc_loss(void *p)
{
    enc_ctx *e = p;
    ref_encoder(e->out, e->tok, e->wte, e->wpe);
    return dot_d(e->out, e->w, N * C);
}

static void test_encoder(void)
{
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int)((frand() + 1.0f) * 2.0f) % 4; /* repeats */
    float *wte = rnd(V * C, 1), *wpe = rnd(T * C, 1), *w = rnd(N * C, 1), *out = rnd(N * C, 1);
    float *dwte0 = rnd(V * C, 1), *dwpe0 = rnd(T * C, 1);
    float *dwte = dup_f(dwte0, V * C), *dwpe = dup_f(dwpe0, T * C);
    enc_ctx e = { tok, dup_d(wte, V * C), dup_d(wpe, T * C), dup_d(w, N * C),
                  malloc(N * C * sizeof(double)) };
    sz_k_encoder_fwd(out, tok, wte, wpe, B, T, C);
    ref_encoder(e.out, tok, e.wte, e.wpe);
    CU_ASSERT(check_arr("encoder out", out, e.out, N * C, FWD_TOL, FWD_TOL));
    sz_k_encoder_bwd(dwte, dwpe, w, tok, B, T, C);
    CU_ASSERT(check_fd("encoder dwte", enc_loss, &e, e.wte, V * C, dwte, dwte0, BWD_TOL));
    CU_ASSERT(check_fd("encoder dwpe", enc_loss, &e, e.wpe, T * C, dwpe, dwpe0, BWD_TOL));
    free(wte); free(wpe); free(w); free(out); free(dwte0); free(dwpe0); free(dwte); free(dwpe);
    free(e.wte); free(e.wpe); free(e.w); free(e.out);
}

/* ---------------------------------------------------------------- layernorm */

typedef struct { double *inp, *wt, *bias, *w, *out, *mean, *rstd; } ln_ctx;
static void ref_layernorm(ln_ctx *l)
{
    for (int n = 0; n < N; n++) {
        const double *x = l->inp + n * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        v /= C;
        double s = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < C; i++) l->out[n * C + i] = (x[i] - m) * s * l->wt[i] + l->bias[i];
        l->mean[n] = m;
        l->rstd[n] = s;
    }
}
static double ln_loss(void *p)
{
    ln_ctx *l = p;
    ref_layernorm(l);
    return dot_d(l->out, l->w, N * C);
}

static void test_layernorm(void)
{
    float *inp = rnd(N * C, 2), *wt = rnd(C, 1), *bias = rnd(C, 1), *w = rnd(N * C, 1);
    float *out = rnd(N * C, 1), mean[N], rstd[N];
    float *dinp0 = rnd(N * C, 1), *dwt0 = rnd(C, 1), *dbias0 = rnd(C, 1);
    float *dinp = dup_f(dinp0, N * C), *dwt = dup_f(dwt0, C), *dbias = dup_f(dbias0, C);
    ln_ctx l = { dup_d(inp, N * C), dup_d(wt, C), dup_d(bias, C), dup_d(w, N * C),
                 malloc(N * C * sizeof(double)), malloc(N * sizeof(double)),
                 malloc(N * sizeof(double)) };
    sz_k_layernorm_fwd(out, mean, rstd, inp, wt, bias, N, C);
    ref_layernorm(&l);
    CU_ASSERT(check_arr("layernorm out", out, l.out, N * C, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_arr("layernorm mean", mean, l.mean, N, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_arr("layernorm rstd", rstd, l.rstd, N, FWD_TOL, FWD_TOL));
    sz_k_layernorm_bwd(dinp, dwt, dbias, w, inp, wt, mean, rstd, N, C);
    CU_ASSERT(check_fd("layernorm dinp", ln_loss, &l, l.inp, N * C, dinp, dinp0, BWD_TOL));
    CU_ASSERT(check_fd("layernorm dweight", ln_loss, &l, l.wt, C, dwt, dwt0, BWD_TOL));
    CU_ASSERT(check_fd("layernorm dbias", ln_loss, &l, l.bias, C, dbias, dbias0, BWD_TOL));
    free(inp); free(wt); free(bias); free(w); free(out);
    free(dinp0); free(dwt0); free(dbias0); free(dinp); free(dwt); free(dbias);
    free(l.inp); free(l.wt); free(l.bias); free(l.w); free(l.out); free(l.mean); free(l.rstd);
}

/* Without bias (b, db NULL): the reference with a zero bias, finite differences for dinp and
 * dweight, and dinp, dweight bitwise those of the same call with a bias gradient. */
static void test_layernorm_nobias(void)
{
    float *inp = rnd(N * C, 3), *wt = rnd(C, 1), *w = rnd(N * C, 1), *zero = calloc(C, sizeof(float));
    float *out = rnd(N * C, 1), mean[N], rstd[N];
    float *dinp0 = rnd(N * C, 1), *dwt0 = rnd(C, 1), *dbias = rnd(C, 1);
    float *dinp = dup_f(dinp0, N * C), *dwt = dup_f(dwt0, C), *dinp_b = dup_f(dinp0, N * C), *dwt_b = dup_f(dwt0, C);
    ln_ctx l = { dup_d(inp, N * C), dup_d(wt, C), dup_d(zero, C), dup_d(w, N * C),
                 malloc(N * C * sizeof(double)), malloc(N * sizeof(double)),
                 malloc(N * sizeof(double)) };
    sz_k_layernorm_fwd(out, mean, rstd, inp, wt, NULL, N, C);
    ref_layernorm(&l);
    CU_ASSERT(check_arr("layernorm (no bias) out", out, l.out, N * C, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_arr("layernorm (no bias) rstd", rstd, l.rstd, N, FWD_TOL, FWD_TOL));
    sz_k_layernorm_bwd(dinp, dwt, NULL, w, inp, wt, mean, rstd, N, C);
    CU_ASSERT(check_fd("layernorm (no bias) dinp", ln_loss, &l, l.inp, N * C, dinp, dinp0, BWD_TOL));
    CU_ASSERT(check_fd("layernorm (no bias) dweight", ln_loss, &l, l.wt, C, dwt, dwt0, BWD_TOL));
    sz_k_layernorm_bwd(dinp_b, dwt_b, dbias, w, inp, wt, mean, rstd, N, C);
    CU_ASSERT(memcmp(dinp, dinp_b, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(dwt, dwt_b, C * sizeof(float)) == 0);
    free(inp); free(wt); free(w); free(zero); free(out); free(dinp0); free(dwt0); free(dbias);
    free(dinp); free(dwt); free(dinp_b); free(dwt_b);
    free(l.inp); free(l.wt); free(l.bias); free(l.w); free(l.out); free(l.mean); free(l.rstd);
}

/* The residual add fused with the layernorm after it: res = a + b, out = layernorm(res), against
 * the double reference; backward of L = sum(out * w) + sum(res * w2) (res also feeds the rest of
 * the graph, whose gradient w2 dres starts from) by finite differences in a, b, weight and bias;
 * and every output bitwise that of residual then layernorm (forward) and layernorm then residual
 * (backward). */
typedef struct { double *a, *b, *w2; ln_ctx l; } rln_ctx;
static double rln_loss(void *p)
{
    rln_ctx *r = p;
    for (int i = 0; i < N * C; i++) r->l.inp[i] = r->a[i] + r->b[i];
    ref_layernorm(&r->l);
    return dot_d(r->l.out, r->l.w, N * C) + dot_d(r->l.inp, r->w2, N * C);
}

static void test_residual_layernorm(void)
{
    float *a = rnd(N * C, 2), *b = rnd(N * C, 1), *wt = rnd(C, 1), *bias = rnd(C, 1), *w = rnd(N * C, 1);
    float *w2 = rnd(N * C, 1), *res = rnd(N * C, 1), *out = rnd(N * C, 1), mean[N], rstd[N];
    float *res_r = rnd(N * C, 1), *out_r = rnd(N * C, 1), mean_r[N], rstd_r[N];
    float *da0 = rnd(N * C, 1), *db0 = rnd(N * C, 1), *dwt0 = rnd(C, 1), *dbias0 = rnd(C, 1);
    float *da = dup_f(da0, N * C), *db = dup_f(db0, N * C), *dwt = dup_f(dwt0, C), *dbias = dup_f(dbias0, C);
    float *dres = dup_f(w2, N * C);
    float *da_r = dup_f(da0, N * C), *db_r = dup_f(db0, N * C), *dwt_r = dup_f(dwt0, C), *dbias_r = dup_f(dbias0, C);
    float *dres_r = dup_f(w2, N * C);
    rln_ctx r = { dup_d(a, N * C), dup_d(b, N * C), dup_d(w2, N * C),
                  { malloc(N * C * sizeof(double)), dup_d(wt, C), dup_d(bias, C), dup_d(w, N * C),
                    malloc(N * C * sizeof(double)), malloc(N * sizeof(double)), malloc(N * sizeof(double)) } };
    sz_k_residual_layernorm_fwd(res, out, mean, rstd, a, b, wt, bias, N, C);
    rln_loss(&r);
    CU_ASSERT(check_arr("residual+layernorm res", res, r.l.inp, N * C, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_arr("residual+layernorm out", out, r.l.out, N * C, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_arr("residual+layernorm rstd", rstd, r.l.rstd, N, FWD_TOL, FWD_TOL));
    sz_k_residual_fwd(res_r, a, b, N * C);
    sz_k_layernorm_fwd(out_r, mean_r, rstd_r, res_r, wt, bias, N, C);
    CU_ASSERT(memcmp(res, res_r, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(out, out_r, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(mean, mean_r, sizeof mean) == 0);
    CU_ASSERT(memcmp(rstd, rstd_r, sizeof rstd) == 0);
    sz_k_layernorm_residual_bwd(da, db, dres, dwt, dbias, w, res, wt, mean, rstd, N, C);
    CU_ASSERT(check_fd("residual+layernorm da", rln_loss, &r, r.a, N * C, da, da0, BWD_TOL));
    CU_ASSERT(check_fd("residual+layernorm db", rln_loss, &r, r.b, N * C, db, db0, BWD_TOL));
    CU_ASSERT(check_fd("residual+layernorm dweight", rln_loss, &r, r.l.wt, C, dwt, dwt0, BWD_TOL));
    CU_ASSERT(check_fd("residual+layernorm dbias", rln_loss, &r, r.l.bias, C, dbias, dbias0, BWD_TOL));
    sz_k_layernorm_bwd(dres_r, dwt_r, dbias_r, w, res_r, wt, mean_r, rstd_r, N, C);
    sz_k_residual_bwd(da_r, db_r, dres_r, N * C);
    CU_ASSERT(memcmp(dres, dres_r, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(da, da_r, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(db, db_r, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(dwt, dwt_r, C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(dbias, dbias_r, C * sizeof(float)) == 0);
    /* without the bias: dweight and the input gradients as with it */
    float *da2 = dup_f(da0, N * C), *db2 = dup_f(db0, N * C), *dwt2 = dup_f(dwt0, C), *dres2 = dup_f(w2, N * C);
    sz_k_layernorm_residual_bwd(da2, db2, dres2, dwt2, NULL, w, res, wt, mean, rstd, N, C);
    CU_ASSERT(memcmp(da2, da, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(dwt2, dwt, C * sizeof(float)) == 0);
    free(a); free(b); free(wt); free(bias); free(w); free(w2); free(res); free(out); free(res_r); free(out_r);
    free(da0); free(db0); free(dwt0); free(dbias0); free(da); free(db); free(dwt); free(dbias); free(dres);
    free(da_r); free(db_r); free(dwt_r); free(dbias_r); free(dres_r); free(da2); free(db2); free(dwt2); free(dres2);
    free(r.a); free(r.b); free(r.w2); free(r.l.inp); free(r.l.wt); free(r.l.bias); free(r.l.w); free(r.l.out);
    free(r.l.mean); free(r.l.rstd);
}

/* ---------------------------------------------------------------- matmul */

typedef struct { int n, c, oc; double *inp, *wt, *bias, *w, *out; } mm_ctx;
static void ref_matmul(double *out, const double *inp, const double *wt, const double *bias,
                       int n, int c, int oc)
{
    for (int i = 0; i < n; i++)
        for (int o = 0; o < oc; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int k = 0; k < c; k++) s += inp[(size_t)i * c + k] * wt[(size_t)o * c + k];
            out[(size_t)i * oc + o] = s;
        }
}
static double mm_loss(void *p)
{
    mm_ctx *m = p;
    ref_matmul(m->out, m->inp, m->wt, m->bias, m->n, m->c, m->oc);
    return dot_d(m->out, m->w, (size_t)m->n * m->oc);
}
static mm_ctx mm_ctx_make(int n, int c, int oc, const float *inp, const float *wt,
                          const float *bias, const float *w)
{
    mm_ctx m = { n, c, oc, dup_d(inp, (size_t)n * c), dup_d(wt, (size_t)oc * c),
                 bias ? dup_d(bias, oc) : NULL, dup_d(w, (size_t)n * oc),
                 malloc((size_t)n * oc * sizeof(double)) };
    return m;
}
static void mm_ctx_free(mm_ctx *m)
{
    free(m->inp); free(m->wt); free(m->bias); free(m->w); free(m->out);
}

/* fp32: small shape by finite differences, plus a multi-tile shape (edges in both
 * dims; C = 512 makes the driver pack B, dweight packs A too) against the double
 * reference of the same formulas. */
static void test_matmul(void)
{
    for (int big = 0; big < 2; big++) {
        int n = big ? 300 : N, c = big ? 512 : C, oc = big ? 300 : 12;
        size_t ni = (size_t)n * c, nw = (size_t)oc * c, no = (size_t)n * oc;
        float *inp = rnd(ni, 1), *wt = rnd(nw, 1), *bias = rnd(oc, 1), *w = rnd(no, 1);
        float *out = rnd(no, 1), *dinp0 = rnd(ni, 1), *dwt0 = rnd(nw, 1), *db0 = rnd(oc, 1);
        float *dinp = dup_f(dinp0, ni), *dwt = dup_f(dwt0, nw), *db = dup_f(db0, oc);
        mm_ctx m = mm_ctx_make(n, c, oc, inp, wt, bias, w);
        double tol = big ? 1e-5 * sqrt((double)c) : FWD_TOL;
        CU_ASSERT_EQUAL(sz_k_matmul_fwd(out, inp, wt, bias, n, c, oc), 0);
        ref_matmul(m.out, m.inp, m.wt, m.bias, n, c, oc);
        CU_ASSERT(check_arr("matmul out", out, m.out, no, tol, tol));
        CU_ASSERT_EQUAL(sz_k_matmul_fwd(out, inp, wt, NULL, n, c, oc), 0);
        ref_matmul(m.out, m.inp, m.wt, NULL, n, c, oc);
        CU_ASSERT(check_arr("matmul out (no bias)", out, m.out, no, tol, tol));
        CU_ASSERT_EQUAL(sz_k_matmul_bwd(dinp, dwt, db, w, inp, wt, n, c, oc), 0);
        if (!big) {
            CU_ASSERT(check_fd("matmul dinp", mm_loss, &m, m.inp, ni, dinp, dinp0, BWD_TOL));
            CU_ASSERT(check_fd("matmul dweight", mm_loss, &m, m.wt, nw, dwt, dwt0, BWD_TOL));
            CU_ASSERT(check_fd("matmul dbias", mm_loss, &m, m.bias, oc, db, db0, BWD_TOL));
        } else {
            double *want = calloc(ni > nw ? ni : nw, sizeof(double));
            for (int i = 0; i < n; i++)
                for (int k = 0; k < c; k++) {
                    double s = dinp0[(size_t)i * c + k];
                    for (int o = 0; o < oc; o++) s += m.w[(size_t)i * oc + o] * m.wt[(size_t)o * c + k];
                    want[(size_t)i * c + k] = s;
                }
            CU_ASSERT(check_arr("matmul dinp (tiled)", dinp, want, ni, 1e-5 * sqrt(oc), 1e-5 * sqrt(oc)));
            for (int o = 0; o < oc; o++)
                for (int k = 0; k < c; k++) {
                    double s = dwt0[(size_t)o * c + k];
                    for (int i = 0; i < n; i++) s += m.w[(size_t)i * oc + o] * m.inp[(size_t)i * c + k];
                    want[(size_t)o * c + k] = s;
                }
            CU_ASSERT(check_arr("matmul dweight (tiled)", dwt, want, nw, 1e-5 * sqrt(n), 1e-5 * sqrt(n)));
            free(want);
        }
        /* NULL gradients are skipped */
        float *dinp2 = dup_f(dinp, ni);
        CU_ASSERT_EQUAL(sz_k_matmul_bwd(NULL, NULL, NULL, w, inp, wt, n, c, oc), 0);
        CU_ASSERT_EQUAL(sz_k_matmul_bwd(dinp2, NULL, NULL, w, inp, wt, n, c, oc), 0);
        free(dinp2);
        free(inp); free(wt); free(bias); free(w); free(out); free(dinp0); free(dwt0);
        free(db0); free(dinp); free(dwt); free(db);
        mm_ctx_free(&m);
    }
}

/* The plain fallback (never used when oneDNN works) still gets checked. */
static void test_matmul_plain(void)
{
    int n = 7, c = 9, oc = 5;
    float *inp = rnd(n * c, 1), *wt = rnd(oc * c, 1), *bias = rnd(oc, 1), *out = rnd(n * oc, 1);
    float *w = rnd(n * oc, 1);
    mm_ctx m = mm_ctx_make(n, c, oc, inp, wt, bias, w);
    sz_mm_shape s;
    memset(&s, 0, sizeof s);
    s.M = n; s.N = oc; s.K = c; s.a_sm = c; s.a_sk = 1; s.b_sk = 1; s.b_sn = c; s.ldd = oc;
    s.a_dt = s.b_dt = s.d_dt = s.bias_dt = SZ_K_F32;
    sz_mm_plain(&s, out, inp, wt, bias);
    ref_matmul(m.out, m.inp, m.wt, m.bias, n, c, oc);
    CU_ASSERT(check_arr("plain matmul", out, m.out, n * oc, FWD_TOL, FWD_TOL));
    free(inp); free(wt); free(bias); free(out); free(w);
    mm_ctx_free(&m);
}

/* bf16 inputs: references use the bf16-rounded values in double, so fp32 outputs
 * are held to fp32 tolerance and bf16 outputs to 1e-2. */
static void test_matmul_bf16(void)
{
    for (int big = 0; big < 2; big++) {
        int n = big ? 300 : N, c = big ? 512 : C, oc = big ? 300 : 12;
        size_t ni = (size_t)n * c, nw = (size_t)oc * c, no = (size_t)n * oc;
        float *inp = rnd(ni, 1), *wt = rnd(nw, 1), *bias = rnd(oc, 1), *w = rnd(no, 1);
        round_bf16(inp, ni); round_bf16(wt, nw); round_bf16(bias, oc); round_bf16(w, no);
        uint16_t *hi = to_bf16(inp, ni), *hw = to_bf16(wt, nw), *hb = to_bf16(bias, oc);
        uint16_t *hdo = to_bf16(w, no);
        mm_ctx m = mm_ctx_make(n, c, oc, inp, wt, bias, w);
        double tol = 1e-5 * sqrt((double)c);
        ref_matmul(m.out, m.inp, m.wt, m.bias, n, c, oc);
        float *out = rnd(no, 1);
        uint16_t *hout = malloc(no * 2);
        CU_ASSERT_EQUAL(sz_k_matmul_fwd_bf16(out, SZ_K_F32, hi, hw, hb, n, c, oc), 0);
        CU_ASSERT(check_arr("bf16 matmul out f32", out, m.out, no, tol, tol));
        CU_ASSERT_EQUAL(sz_k_matmul_fwd_bf16(hout, SZ_K_BF16, hi, hw, hb, n, c, oc), 0);
        float *o16 = from_bf16(hout, no);
        CU_ASSERT(check_arr("bf16 matmul out bf16", o16, m.out, no, 1e-2, 1e-3));
        for (int dt = 0; dt < 2; dt++) {   /* grads fp32, then bf16 */
            float *dinp0 = rnd(ni, 1), *dwt0 = rnd(nw, 1), *db0 = rnd(oc, 1);
            void *dinp, *dwt, *db;
            if (dt == SZ_K_BF16) {
                round_bf16(dinp0, ni); round_bf16(dwt0, nw); round_bf16(db0, oc);
                dinp = to_bf16(dinp0, ni); dwt = to_bf16(dwt0, nw); db = to_bf16(db0, oc);
            } else {
                dinp = dup_f(dinp0, ni); dwt = dup_f(dwt0, nw); db = dup_f(db0, oc);
            }
            CU_ASSERT_EQUAL(sz_k_matmul_bwd_bf16(dinp, dt, dwt, db, dt, hdo, hi, hw, n, c, oc), 0);
            float *fi = dt ? from_bf16(dinp, ni) : dup_f(dinp, ni);
            float *fw = dt ? from_bf16(dwt, nw) : dup_f(dwt, nw);
            float *fb = dt ? from_bf16(db, oc) : dup_f(db, oc);
            double t = dt ? 1e-2 : (big ? 1e-5 * sqrt((double)(n > oc ? n : oc)) : BWD_TOL);
            if (!big) {
                CU_ASSERT(check_fd("bf16 matmul dinp", mm_loss, &m, m.inp, ni, fi, dinp0, t));
                CU_ASSERT(check_fd("bf16 matmul dweight", mm_loss, &m, m.wt, nw, fw, dwt0, t));
                CU_ASSERT(check_fd("bf16 matmul dbias", mm_loss, &m, m.bias, oc, fb, db0, t));
            } else {   /* spot-check the tiled shape against the formulas */
                double *want = calloc(nw > ni ? nw : ni, sizeof(double));
                for (size_t i = 0; i < ni; i++) {
                    size_t r = i / c, k = i % c;
                    double s = dinp0[i];
                    for (int o = 0; o < oc; o++) s += m.w[r * oc + o] * m.wt[(size_t)o * c + k];
                    want[i] = s;
                }
                CU_ASSERT(check_arr("bf16 matmul dinp (tiled)", fi, want, ni, t, t));
                for (size_t i = 0; i < nw; i++) {
                    size_t o = i / c, k = i % c;
                    double s = dwt0[i];
                    for (int r = 0; r < n; r++) s += m.w[(size_t)r * oc + o] * m.inp[(size_t)r * c + k];
                    want[i] = s;
                }
                CU_ASSERT(check_arr("bf16 matmul dweight (tiled)", fw, want, nw, t, t));
                free(want);
            }
            free(dinp0); free(dwt0); free(db0); free(dinp); free(dwt); free(db);
            free(fi); free(fw); free(fb);
        }
        free(inp); free(wt); free(bias); free(w); free(hi); free(hw); free(hb); free(hdo);
        free(out); free(hout); free(o16);
        mm_ctx_free(&m);
    }
}

/* ---------------------------------------------------------------- attention */

/* Shape ab x at, ac channels, anh heads; pre, att [ab,anh,at,at] in double. */
typedef struct { int ab, at, ac, anh; double *inp, *w, *out, *pre, *att; } att_ctx;
static void ref_attention(att_ctx *a)
{
    int Bq = a->ab, Tq = a->at, Cq = a->ac, NHq = a->anh, hs = Cq / NHq;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < Bq; b++)
        for (int t = 0; t < Tq; t++)
            for (int h = 0; h < NHq; h++) {
                const double *q = a->inp + ((size_t)b * Tq + t) * 3 * Cq + h * hs;
                double *pre = a->pre + (((size_t)b * NHq + h) * Tq + t) * Tq;
                double *at = a->att + (((size_t)b * NHq + h) * Tq + t) * Tq, sum = 0.0;
                for (int t2 = 0; t2 < Tq; t2++) {
                    const double *k = a->inp + ((size_t)b * Tq + t2) * 3 * Cq + h * hs + Cq;
                    pre[t2] = t2 <= t ? dot_d(q, k, hs) * scale : 0.0;
                    at[t2] = t2 <= t ? exp(pre[t2]) : 0.0;
                    sum += at[t2];
                }
                for (int t2 = 0; t2 < Tq; t2++) at[t2] /= sum;
                for (int i = 0; i < hs; i++) {
                    double s = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        s += at[t2] * a->inp[((size_t)b * Tq + t2) * 3 * Cq + h * hs + 2 * Cq + i];
                    a->out[((size_t)b * Tq + t) * Cq + h * hs + i] = s;
                }
            }
}
static double att_loss(void *p)
{
    att_ctx *a = p;
    ref_attention(a);
    return dot_d(a->out, a->w, (size_t)a->ab * a->at * a->ac);
}

/* Both kernels (llm.c's T x T one and the linear-memory one) on one shape: forwards against the
 * double reference, the new one's statistics against the reference's row max and sum, the
 * backwards against each other and, when fd, against finite differences. */
static void attention_case(int b_, int t_, int c_, int nh, int fd, float amp)
{
    size_t n = (size_t)b_ * t_, ni = n * 3 * c_, na = (size_t)b_ * nh * t_ * t_, ns = (size_t)b_ * nh * t_;
    float *inp = rnd(ni, amp), *w = rnd(n * c_, 1), *out = rnd(n * c_, 1), *out2 = rnd(n * c_, 1);
    float *pre = rnd(na, 1), *att = rnd(na, 1), *stats = rnd(2 * ns, 1), *dinp0 = rnd(ni, 1);
    float *dinp = dup_f(dinp0, ni), *dinp2 = dup_f(dinp0, ni);
    att_ctx a = { b_, t_, c_, nh, dup_d(inp, ni), dup_d(w, n * c_), malloc(n * c_ * sizeof(double)),
                  malloc(na * sizeof(double)), malloc(na * sizeof(double)) };
    double tol = FWD_TOL * (t_ > 8 ? 4 : 1);
    sz_k_attention_tt_fwd(out, pre, att, inp, b_, t_, c_, nh);
    ref_attention(&a);
    CU_ASSERT(check_arr("attention (T x T) out", out, a.out, n * c_, tol, tol));
    CU_ASSERT(check_arr("attention (T x T) preatt", pre, a.pre, na, tol, tol));
    CU_ASSERT(check_arr("attention (T x T) att", att, a.att, na, tol, tol));
    CU_ASSERT_EQUAL(sz_k_attention_fwd(out2, stats, inp, b_, t_, c_, nh), 0);
    CU_ASSERT(check_arr("attention out", out2, a.out, n * c_, tol, tol));
    double *smax = malloc(ns * sizeof(double)), *sinv = malloc(ns * sizeof(double));
    float *gmax = malloc(ns * sizeof(float)), *ginv = malloc(ns * sizeof(float));
    for (size_t r = 0; r < ns; r++) {   /* row r = (b, h, t) */
        int t = (int)(r % t_);
        const double *p = a.pre + r * t_;
        double mx = -10000.0, sum = 0.0;
        for (int j = 0; j <= t; j++) mx = p[j] > mx ? p[j] : mx;
        for (int j = 0; j <= t; j++) sum += exp(p[j] - mx);
        smax[r] = mx; sinv[r] = 1.0 / sum;
        gmax[r] = stats[2 * r]; ginv[r] = stats[2 * r + 1];
    }
    CU_ASSERT(check_arr("attention stats max", gmax, smax, ns, tol, tol));
    CU_ASSERT(check_arr("attention stats 1/sum", ginv, sinv, ns, tol, tol));
    CU_ASSERT_EQUAL(sz_k_attention_tt_bwd(dinp, w, inp, att, b_, t_, c_, nh), 0);
    CU_ASSERT_EQUAL(sz_k_attention_bwd(dinp2, w, inp, stats, b_, t_, c_, nh), 0);
    double *want = dup_d(dinp, ni);
    CU_ASSERT(check_arr("attention dinp against the T x T kernel", dinp2, want, ni, tol, tol));
    if (fd) {
        CU_ASSERT(check_fd("attention (T x T) dinp", att_loss, &a, a.inp, ni, dinp, dinp0, BWD_TOL));
        CU_ASSERT(check_fd("attention dinp", att_loss, &a, a.inp, ni, dinp2, dinp0, BWD_TOL));
    }
    free(want); free(smax); free(sinv); free(gmax); free(ginv);
    free(inp); free(w); free(out); free(out2); free(pre); free(att); free(stats); free(dinp0);
    free(dinp); free(dinp2);
    free(a.inp); free(a.w); free(a.out); free(a.pre); free(a.att);
}

/* The AMX tiles (attention_amx.c, where the CPU has AMX-BF16) against finite differences of the
 * double reference, on bf16-exact q, k, v and weights: what is left is the tiles' rounding of P and
 * dS to bf16 (rtol = atol = 3e-2). */
static void attention_amx_fd(int b_, int t_, int c_, int nh)
{
    if (!sz_k_attention_amx_ok())
        return;
    size_t n = (size_t)b_ * t_, ni = n * 3 * c_, na = (size_t)b_ * nh * t_ * t_;
    float *inp = rnd(ni, 1), *w = rnd(n * c_, 1), *out = malloc(n * c_ * 4), *st = malloc(2 * n * nh * 4);
    float *dinp = malloc(ni * 4);
    for (size_t i = 0; i < ni; i++) inp[i] = sz_bf16_to_f32_1(sz_f32_to_bf16_1(inp[i]));
    for (size_t i = 0; i < n * c_; i++) w[i] = sz_bf16_to_f32_1(sz_f32_to_bf16_1(w[i]));
    att_ctx a = { b_, t_, c_, nh, dup_d(inp, ni), dup_d(w, n * c_), malloc(n * c_ * sizeof(double)),
                  malloc(na * sizeof(double)), malloc(na * sizeof(double)) };
    CU_ASSERT_EQUAL(sz_k_attention_amx_fwd(out, SZ_K_F32, st, inp, b_, t_, c_, nh), 0);
    CU_ASSERT_EQUAL(sz_k_attention_amx_bwd(dinp, SZ_K_F32, w, SZ_K_F32, inp, st, b_, t_, c_, nh, SZ_K_SET_DINP), 0);
    CU_ASSERT(check_fd("attention dinp (AMX tiles)", att_loss, &a, a.inp, ni, dinp, NULL, 3e-2));
    free(inp); free(w); free(out); free(st); free(dinp);
    free(a.inp); free(a.w); free(a.out); free(a.pre); free(a.att);
}

static void test_attention(void)
{
    attention_case(B, T, C, NH, 1, 1.0f);     /* hs 4, one key block */
    attention_case(2, 37, 64, 2, 1, 1.0f);    /* hs 32, three key blocks, last one partial */
    attention_case(1, 70, 128, 2, 0, 2.0f);   /* GPT-2's hs 64, five blocks, larger scores */
    /* hs 44: whole vectors and a scalar tail whatever the vector width; T 129: the last query row
     * alone against 144 keys (one row by eight key vectors, then the shorter blocks) */
    attention_case(1, 129, 88, 2, 0, 1.0f);
    attention_amx_fd(2, 37, 64, 2);   /* hs 32, a partial second block of 32 queries */
}

/* ---------------------------------------------------------------- gelu, residual */

typedef struct { size_t n; double *x, *y, *w; } ew_ctx;
static double gelu_d(double x)
{
    double s = (double)sqrtf((float)(2.0 / 3.14159265358979323846));
    return 0.5 * x * (1.0 + tanh(s * (x + 0.044715 * x * x * x)));
}
static double gelu_loss(void *p)
{
    ew_ctx *e = p;
    double l = 0.0;
    for (size_t i = 0; i < e->n; i++) l += gelu_d(e->x[i]) * e->w[i];
    return l;
}
static double res_loss(void *p)
{
    ew_ctx *e = p;
    double l = 0.0;
    for (size_t i = 0; i < e->n; i++) l += (e->x[i] + e->y[i]) * e->w[i];
    return l;
}

static void test_gelu(void)
{
    size_t n = N * 4 * C;
    float *x = rnd(n, 4), *w = rnd(n, 1), *out = rnd(n, 1), *d0 = rnd(n, 1), *d = dup_f(d0, n);
    ew_ctx e = { n, dup_d(x, n), NULL, dup_d(w, n) };
    double *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) want[i] = gelu_d(e.x[i]);
    sz_k_gelu_fwd(out, x, n);
    CU_ASSERT(check_arr("gelu out", out, want, n, FWD_TOL, FWD_TOL));
    sz_k_gelu_bwd(d, x, w, n);
    CU_ASSERT(check_fd("gelu dinp", gelu_loss, &e, e.x, n, d, d0, BWD_TOL));
    free(x); free(w); free(out); free(d0); free(d); free(e.x); free(e.w); free(want);
}

/* ---------------------------------------------------------------- matmul fused with gelu */

/* sz_k_matmul_gelu_fwd and sz_k_gelu_matmul_bwd against the separate kernels they replace (each
 * checked above against double references and finite differences), bitwise: fp32 and bf16 inputs,
 * gout / dinp fp32 and bf16, odd shapes that cut partial tiles (the tiles are 256 x 384), 1-3
 * threads, with rows of dout zero and pre negative (gelu' < 0) so products of -0.0 appear: the
 * fused backward must give +0.0 there as the separate gelu_bwd into a zeroed dinp does. dinp starts
 * as garbage (NaN included): the fused backward overwrites it. Plus one double reference of the
 * composition (gelu(x.W^T+b), gelu'(pre) * (dout.W)). */
static void test_matmul_gelu(void)
{
    const int shapes[][3] = {{7, 13, 29}, {130, 96, 200}, {300, 40, 450}, {257, 777, 385}};
    int saved = omp_get_max_threads();
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], c = shapes[k][1], oc = shapes[k][2];
        size_t ni = (size_t)n * c, nw = (size_t)oc * c, no = (size_t)n * oc;
        float *inp = rnd(ni, 1), *wt = rnd(nw, 1), *bias = rnd(oc, 1), *dout = rnd(no, 1), *pre = rnd(ni, 3);
        for (int r = 0; r < n; r += 5) memset(dout + (size_t)r * oc, 0, (size_t)oc * 4); /* zero rows */
        for (size_t i = 0; i < ni; i += 3) pre[i] = -1.5f - (float)(i % 7) * 0.1f;    /* gelu' < 0 */
        round_bf16(inp, ni); round_bf16(wt, nw); round_bf16(bias, oc); round_bf16(dout, no);
        uint16_t *hi = to_bf16(inp, ni), *hw = to_bf16(wt, nw), *hb = to_bf16(bias, oc), *hdo = to_bf16(dout, no);
        for (int in = 0; in < 2; in++) {
            const void *xi = in ? (void *)hi : inp, *xw = in ? (void *)hw : wt, *xb = in ? (void *)hb : bias;
            const void *xdo = in ? (void *)hdo : dout;
            for (int od = 0; od < 2; od++) {   /* gout / dinp fp32, then bf16 (only with bf16 inputs) */
                if (od && !in && k > 0) continue;   /* fp32 inputs with a bf16 gout: once is enough */
                size_t e = od ? 2 : 4;
                /* the separate kernels, one thread */
                omp_set_num_threads(1);
                float *out_ref = malloc(no * 4), *out = malloc(no * 4);
                void *g_ref = malloc(no * e), *g = malloc(no * e);
                CU_ASSERT(in ? sz_k_matmul_fwd_bf16(out_ref, SZ_K_F32, hi, hw, hb, n, c, oc) >= 0
                             : sz_k_matmul_fwd(out_ref, inp, wt, bias, n, c, oc) >= 0);
                sz_k_gelu_fwd_mx(g_ref, od, out_ref, no);
                int bdt = in ? od : SZ_K_F32;   /* dinp: fp32 with fp32 inputs */
                size_t eb = bdt ? 2 : 4;
                void *t = calloc(ni, eb), *di_ref = calloc(ni, eb), *di = malloc(ni * eb);
                float *dw0 = rnd(nw, 1), *db0 = rnd(oc, 1);
                if (in && od) { round_bf16(dw0, nw); round_bf16(db0, oc); }
                void *dw_ref = od && in ? (void *)to_bf16(dw0, nw) : dup_f(dw0, nw);
                void *db_ref = od && in ? (void *)to_bf16(db0, oc) : dup_f(db0, oc);
                size_t ep = od && in ? 2 : 4;
                void *dw = malloc(nw * ep), *db = malloc(oc * ep);
                CU_ASSERT(in ? sz_k_matmul_bwd_bf16(t, bdt, dw_ref, db_ref, bdt, hdo, hi, hw, n, c, oc) >= 0
                             : sz_k_matmul_bwd(t, dw_ref, db_ref, dout, inp, wt, n, c, oc) >= 0);
                if (bdt) sz_k_gelu_bwd_mx(di_ref, bdt, pre, t, bdt, ni);
                else sz_k_gelu_bwd(di_ref, pre, t, ni);
                int neg0 = 0;   /* the separate ops' +0.0 where the product gave -0.0 */
                for (size_t i = 0; !bdt && i < ni; i++) neg0 += ((float *)t)[i] == 0.0f && pre[i] < -1.0f;
                CU_ASSERT(bdt || neg0 > 0);
                for (int nt = 1; nt <= 3; nt++) {
                    omp_set_num_threads(nt);
                    memset(out, 0xff, no * 4); memset(g, 0xff, no * e); memset(di, 0xff, ni * eb); /* NaN garbage */
                    if (ep == 2) { uint16_t *h = to_bf16(dw0, nw); memcpy(dw, h, nw * 2); free(h);
                                   h = to_bf16(db0, oc); memcpy(db, h, oc * 2); free(h); }
                    else { memcpy(dw, dw0, nw * 4); memcpy(db, db0, oc * 4); }
                    CU_ASSERT(sz_k_matmul_gelu_fwd(out, g, od, xi, xw, xb, in, in, n, c, oc) >= 0);
                    CU_ASSERT(sz_k_gelu_matmul_bwd(di, bdt, dw, db, bdt, xdo, xi, xw, pre, in, in, n, c, oc) >= 0);
                    int same = memcmp(out, out_ref, no * 4) == 0 && memcmp(g, g_ref, no * e) == 0 &&
                               memcmp(di, di_ref, ni * eb) == 0 && memcmp(dw, dw_ref, nw * ep) == 0 &&
                               memcmp(db, db_ref, oc * ep) == 0;
                    CU_ASSERT(same);
                    if (!same)
                        printf("\n  %d x %d x %d, inputs %s, out %s, %d thread(s): out %d gout %d dinp %d dw %d db %d\n", n, c,
                               oc, in ? "bf16" : "fp32", od ? "bf16" : "fp32", nt, !memcmp(out, out_ref, no * 4),
                               !memcmp(g, g_ref, no * e), !memcmp(di, di_ref, ni * eb), !memcmp(dw, dw_ref, nw * ep),
                               !memcmp(db, db_ref, oc * ep));
                }
                /* the composition against double, once (fp32, the first shape) */
                if (k == 0 && !in && !od) {
                    double *want = malloc((no > ni ? no : ni) * sizeof *want);
                    int ok = 1;
                    for (int r = 0; r < n; r++)
                        for (int o = 0; o < oc; o++) {
                            double acc = bias[o];
                            for (int i = 0; i < c; i++) acc += (double)inp[r * c + i] * wt[o * c + i];
                            want[(size_t)r * oc + o] = gelu_d(acc);
                        }
                    ok &= check_arr("matmul+gelu gout (double)", g, want, no, 1e-5 * sqrt((double)c), 1e-5 * sqrt((double)c));
                    const double s = (double)sqrtf((float)(2.0 / 3.14159265358979323846));
                    for (int r = 0; r < n; r++)
                        for (int i = 0; i < c; i++) {
                            double acc = 0, x = pre[r * c + i], u = s * (x + 0.044715 * x * x * x);
                            for (int o = 0; o < oc; o++) acc += (double)dout[r * oc + o] * wt[o * c + i];
                            double th = tanh(u), dg = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * s * (1 + 3 * 0.044715 * x * x);
                            want[(size_t)r * c + i] = dg * acc;
                        }
                    ok &= check_arr("gelu+matmul dinp (double)", di, want, ni, 1e-5 * sqrt((double)oc), 1e-5 * sqrt((double)oc));
                    CU_ASSERT(ok);
                    free(want);
                }
                free(out_ref); free(out); free(g_ref); free(g); free(t); free(di_ref); free(di);
                free(dw0); free(db0); free(dw_ref); free(db_ref); free(dw); free(db);
            }
        }
        free(inp); free(wt); free(bias); free(dout); free(pre); free(hi); free(hw); free(hb); free(hdo);
    }
    omp_set_num_threads(saved);
}

static void test_residual(void)
{
    size_t n = N * C;
    float *a = rnd(n, 1), *b = rnd(n, 1), *w = rnd(n, 1), *out = rnd(n, 1);
    float *da0 = rnd(n, 1), *db0 = rnd(n, 1), *da = dup_f(da0, n), *db = dup_f(db0, n);
    ew_ctx e = { n, dup_d(a, n), dup_d(b, n), dup_d(w, n) };
    double *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) want[i] = e.x[i] + e.y[i];
    sz_k_residual_fwd(out, a, b, n);
    CU_ASSERT(check_arr("residual out", out, want, n, FWD_TOL, FWD_TOL));
    sz_k_residual_bwd(da, db, w, n);
    CU_ASSERT(check_fd("residual da", res_loss, &e, e.x, n, da, da0, BWD_TOL));
    CU_ASSERT(check_fd("residual db", res_loss, &e, e.y, n, db, db0, BWD_TOL));
    free(a); free(b); free(w); free(out); free(da0); free(db0); free(da); free(db);
    free(e.x); free(e.y); free(e.w); free(want);
}

/* ---------------------------------------------------------------- softmax + xent */

typedef struct { const int *tgt; double *logits, *w, *probs, *losses; } xent_ctx;
static void ref_xent(xent_ctx *x)
{
    for (int n = 0; n < N; n++) {
        const double *l = x->logits + n * VP;
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp(l[v]);
        for (int v = 0; v < VP; v++) x->probs[n * VP + v] = v < V ? exp(l[v]) / sum : 0.0;
        x->losses[n] = -log(x->probs[n * VP + x->tgt[n]]);
    }
}
static double xent_loss(void *p)
{
    xent_ctx *x = p;
    ref_xent(x);
    return dot_d(x->losses, x->w, N);
}

static void test_softmax_xent(void)
{
    int tgt[N];
    for (int n = 0; n < N; n++) tgt[n] = (n * 7) % V;
    float *logits = rnd(N * VP, 3), *w = rnd(N, 1), *probs = rnd(N * VP, 1), losses[N];
    float *dl = rnd(N * VP, 1);   /* garbage: the backward overwrites it */
    xent_ctx x = { tgt, dup_d(logits, N * VP), dup_d(w, N), malloc(N * VP * sizeof(double)),
                   malloc(N * sizeof(double)) };
    sz_k_softmax_xent_fwd(probs, losses, logits, tgt, N, V, VP);
    ref_xent(&x);
    CU_ASSERT(check_arr("xent probs", probs, x.probs, N * VP, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_arr("xent losses", losses, x.losses, N, FWD_TOL, FWD_TOL));
    int pad_zero = 1;
    for (int n = 0; n < N; n++)
        for (int v = V; v < VP; v++) pad_zero &= probs[n * VP + v] == 0.0f;
    CU_ASSERT(pad_zero);
    sz_k_softmax_xent_bwd(dl, probs, tgt, w, N, V, VP);
    CU_ASSERT(check_fd("xent dlogits", xent_loss, &x, x.logits, N * VP, dl, NULL, BWD_TOL));
    free(logits); free(w); free(probs); free(dl);
    free(x.logits); free(x.w); free(x.probs); free(x.losses);
}

/* Forward and backward in one pass, in place: the losses against the double reference, the
 * gradient left in the logits by finite differences of L = g sum(losses), the padded columns 0,
 * and both bitwise those of _fwd then _bwd with dloss = g. */
static void test_softmax_xent_fused(void)
{
    int tgt[N];
    for (int n = 0; n < N; n++) tgt[n] = (n * 5 + 3) % V;
    const float g = 0.37f;
    float *logits = rnd(N * VP, 3), *dl = dup_f(logits, N * VP), *probs = rnd(N * VP, 1);
    float *dl_r = rnd(N * VP, 1), *w = malloc(N * sizeof(float)), losses[N], losses_r[N];
    for (int n = 0; n < N; n++) w[n] = g;
    xent_ctx x = { tgt, dup_d(logits, N * VP), dup_d(w, N), malloc(N * VP * sizeof(double)),
                   malloc(N * sizeof(double)) };
    sz_k_softmax_xent_fused(dl, losses, tgt, g, N, V, VP);
    ref_xent(&x);
    CU_ASSERT(check_arr("fused xent losses", losses, x.losses, N, FWD_TOL, FWD_TOL));
    CU_ASSERT(check_fd("fused xent dlogits", xent_loss, &x, x.logits, N * VP, dl, NULL, BWD_TOL));
    int pad_zero = 1;
    for (int n = 0; n < N; n++)
        for (int v = V; v < VP; v++) pad_zero &= dl[n * VP + v] == 0.0f;
    CU_ASSERT(pad_zero);
    sz_k_softmax_xent_fwd(probs, losses_r, logits, tgt, N, V, VP);
    sz_k_softmax_xent_bwd(dl_r, probs, tgt, w, N, V, VP);
    CU_ASSERT(memcmp(losses, losses_r, sizeof losses) == 0);
    CU_ASSERT(memcmp(dl, dl_r, N * VP * sizeof(float)) == 0);
    free(logits); free(dl); free(probs); free(dl_r); free(w);
    free(x.logits); free(x.w); free(x.probs); free(x.losses);
}

/* ---------------------------------------------------------------- AdamW */

/* AdamW's fused gradient norm: the same bits as sz_k_sumsq (several chunks and a tail), with 1 or
 * 3 threads, and the same update as without it; sz_k_sumsq itself against a double reference. */
static void test_adamw_norm(void)
{
    const size_t n = 3 * SZ_SUMSQ_CHUNK + 1000 + 7;
    float *g = rnd(n, 1), *p0 = rnd(n, 1);
    round_bf16(g, n);
    uint16_t *h = to_bf16(g, n);
    double ref = 0.0;
    for (size_t i = 0; i < n; i++)
        ref += (double)g[i] * g[i];
    double want32 = sz_k_sumsq(g, 0, (int64_t)n), want16 = sz_k_sumsq(h, 1, (int64_t)n);
    CU_ASSERT(fabs(want32 - ref) <= 1e-12 * ref && want16 == want32);
    int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 3; nt += 2) {
        omp_set_num_threads(nt);
        float *p = dup_f(p0, n), *q = dup_f(p0, n), *mv = calloc(4 * n, sizeof(float));
        uint16_t *pb = malloc(n * sizeof *pb);
        double s32 = -2.0, s16 = -2.0;
        CU_ASSERT(sz_k_adamw_step(p, g, mv, mv + n, n, 1, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, &s32) == 0);
        CU_ASSERT(sz_k_adamw_step_bf16(q, pb, h, mv + 2 * n, mv + 3 * n, n, 1, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f,
                                       &s16) == 0);
        CU_ASSERT(s32 == want32 && s16 == want16);
        CU_ASSERT(memcmp(p, q, n * sizeof *p) == 0);   /* the same update from the same (bf16) values */
        float *r = dup_f(p0, n);
        memset(mv, 0, 2 * n * sizeof(float));
        sz_k_adamw_step(r, g, mv, mv + n, n, 1, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, NULL);
        CU_ASSERT(memcmp(p, r, n * sizeof *p) == 0);   /* taking the norm changes nothing else */
        free(p); free(q); free(r); free(mv); free(pb);
    }
    omp_set_num_threads(saved);
    free(g); free(p0); free(h);
}

static void test_adamw(void)
{
    enum { P = 9 };
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    for (int decay = 0; decay < 2; decay++) {
        float wd = decay ? 0.1f : 0.0f;
        float *p = rnd(P, 1), *g1 = rnd(P, 1), *g2 = rnd(P, 1), m[P] = { 0 }, v[P] = { 0 };
        float *p16 = dup_f(p, P), m16[P] = { 0 }, v16[P] = { 0 };
        uint16_t pb[P];
        round_bf16(g1, P); round_bf16(g2, P);
        uint16_t *h1 = to_bf16(g1, P), *h2 = to_bf16(g2, P);
        double want_p[P], want_m[P], want_v[P];
        for (int i = 0; i < P; i++) {   /* two steps by hand, same (float) hyperparameters */
            double x = p[i], mm = 0.0, vv = 0.0, g[2] = { g1[i], g2[i] };
            double B1 = b1, B2 = b2, LR = lr, EPS = eps, WD = wd;
            for (int t = 1; t <= 2; t++) {
                mm = B1 * mm + (1.0 - B1) * g[t - 1];
                vv = B2 * vv + (1.0 - B2) * g[t - 1] * g[t - 1];
                double mh = mm / (1.0 - pow(B1, t)), vh = vv / (1.0 - pow(B2, t));
                x -= LR * (mh / (sqrt(vh) + EPS) + WD * x);
            }
            want_p[i] = x; want_m[i] = mm; want_v[i] = vv;
        }
        sz_k_adamw_step(p, g1, m, v, P, 1, lr, b1, b2, eps, wd, 1.0f, NULL);
        sz_k_adamw_step(p, g2, m, v, P, 2, lr, b1, b2, eps, wd, 1.0f, NULL);
        CU_ASSERT(check_arr("adamw param", p, want_p, P, 1e-6, 1e-7));
        CU_ASSERT(check_arr("adamw m", m, want_m, P, 1e-6, 1e-9));
        CU_ASSERT(check_arr("adamw v", v, want_v, P, 1e-6, 1e-12));
        sz_k_adamw_step_bf16(p16, pb, h1, m16, v16, P, 1, lr, b1, b2, eps, wd, 1.0f, NULL);
        int copy_ok = 1;   /* the bf16 copy of the step-1 params */
        for (int i = 0; i < P; i++) copy_ok &= pb[i] == sz_f32_to_bf16_1(p16[i]);
        CU_ASSERT(copy_ok);
        sz_k_adamw_step_bf16(p16, NULL, h2, m16, v16, P, 2, lr, b1, b2, eps, wd, 1.0f, NULL);
        CU_ASSERT(memcmp(p16, p, sizeof(float) * P) == 0);   /* same math, bf16 grads */
        /* the clip scale: the same as scaling the gradients beforehand, bitwise */
        float *q1 = calloc(P, sizeof(float)), *q2 = calloc(P, sizeof(float)), *gs = malloc(P * sizeof(float));
        float *qm = calloc(4 * (size_t)P, sizeof(float));
        for (int i = 0; i < P; i++) { q1[i] = q2[i] = (float)i * 0.01f; gs[i] = g1[i] * 0.37f; }
        sz_k_adamw_step(q1, g1, qm, qm + P, P, 1, lr, b1, b2, eps, wd, 0.37f, NULL);
        sz_k_adamw_step(q2, gs, qm + 2 * P, qm + 3 * P, P, 1, lr, b1, b2, eps, wd, 1.0f, NULL);
        CU_ASSERT(memcmp(q1, q2, sizeof(float) * P) == 0 && memcmp(qm, qm + 2 * P, 2 * sizeof(float) * P) == 0);
        free(q1); free(q2); free(gs); free(qm);
        free(p); free(g1); free(g2); free(p16); free(h1); free(h2);
    }
}

/* ---------------------------------------------------------------- bf16 conversion */

static uint16_t bf16_ref(uint32_t u)   /* independent RNE: look at the dropped half */
{
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    uint32_t hi = u >> 16, lo = u & 0xFFFFu;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) hi++;
    return (uint16_t)hi;
}

static void test_bf16(void)
{
    uint32_t special[] = { 0x3F800000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x3F808001u,
                           0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u,
                           0x00000001u, 0x80008000u, 0x00018000u, 0x80000000u };
    enum { NS = sizeof special / sizeof special[0], NR = 100000 };
    float *x = malloc((NS + NR) * sizeof(float));
    for (int i = 0; i < NS; i++) x[i] = sz_bits_f32(special[i]);
    for (int i = 0; i < NR; i++) {
        frand();
        x[NS + i] = sz_bits_f32((uint32_t)(sz_t_rng >> 32));
    }
    uint16_t *h = to_bf16(x, NS + NR);
    int ok = 1;
    for (int i = 0; i < NS + NR; i++) ok &= h[i] == bf16_ref(sz_f32_bits(x[i]));
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(h[0], 0x3F80); CU_ASSERT_EQUAL(h[1], 0x3F80); /* tie -> even */
    CU_ASSERT_EQUAL(h[2], 0x3F82); CU_ASSERT_EQUAL(h[5], 0x7F80); /* max float -> inf */
    CU_ASSERT(isnan(sz_bf16_to_f32_1(h[9])));                      /* NaN stays NaN */
    float *y = from_bf16(h, NS + NR);
    int back = 1;
    for (int i = 0; i < NS + NR; i++) back &= sz_f32_bits(y[i]) == (uint32_t)h[i] << 16;
    CU_ASSERT(back);
    free(x); free(h); free(y);
}

/* ---------------------------------------------------------------- determinism */

/* Bigger shapes than above, so every parallel loop really splits; the matmul is
 * d24's qkv (N=256, C=1024, OC=3C), whose 4 KiB rows make the driver pack. */
enum { DB = 4, DT = 64, DC = 128, DNH = 4, DV = 1000, DVP = 1024, DN = DB * DT,
       MN = 256, MC = 1024, MOC = 3072 };

typedef struct { const char *name; void *buf, *init, *snap; size_t bytes; } det_buf;

static void det_run(det_buf *o, int no, const int *tok, float *const *in)
{
    for (int i = 0; i < no; i++)   /* reset accumulated outputs */
        if (o[i].init) memcpy(o[i].buf, o[i].init, o[i].bytes);
    float *wte = in[0], *wpe = in[1], *x = in[2], *lw = in[3], *lb = in[4], *qkv = in[5];
    float *dout = in[6], *logits = in[7], *mi = in[8], *mw = in[9], *mb = in[10], *mdo = in[11];
    uint16_t *hi = (uint16_t *)in[12], *hw = (uint16_t *)in[13], *hdo = (uint16_t *)in[14];
    int *tgt = (int *)in[15];
    sz_k_encoder_fwd(o[0].buf, tok, wte, wpe, DB, DT, DC);
    sz_k_encoder_bwd(o[1].buf, o[2].buf, dout, tok, DB, DT, DC);
    sz_k_layernorm_fwd(o[3].buf, o[4].buf, o[5].buf, x, lw, lb, DN, DC);
    sz_k_layernorm_bwd(o[6].buf, o[7].buf, o[8].buf, dout, x, lw, o[4].buf, o[5].buf, DN, DC);
    sz_k_attention_fwd(o[9].buf, o[10].buf, qkv, DB, DT, DC, DNH);
    sz_k_attention_bwd(o[12].buf, dout, qkv, o[10].buf, DB, DT, DC, DNH);
    sz_k_attention_tt_fwd(o[33].buf, o[34].buf, o[11].buf, qkv, DB, DT, DC, DNH);
    sz_k_gelu_fwd(o[13].buf, x, (size_t)DN * DC);
    sz_k_gelu_bwd(o[14].buf, x, dout, (size_t)DN * DC);
    sz_k_residual_fwd(o[15].buf, x, dout, (size_t)DN * DC);
    sz_k_residual_bwd(o[16].buf, o[17].buf, dout, (size_t)DN * DC);
    sz_k_softmax_xent_fwd(o[18].buf, o[19].buf, logits, tgt, DN, DV, DVP);
    sz_k_softmax_xent_bwd(o[20].buf, o[18].buf, tgt, in[16], DN, DV, DVP);
    sz_k_matmul_fwd(o[21].buf, mi, mw, mb, MN, MC, MOC);
    sz_k_matmul_bwd(o[22].buf, o[23].buf, o[24].buf, mdo, mi, mw, MN, MC, MOC);
    sz_k_matmul_fwd_bf16(o[25].buf, SZ_K_BF16, hi, hw, NULL, MN, MC, MOC);
    sz_k_matmul_bwd_bf16(o[26].buf, SZ_K_F32, o[27].buf, o[28].buf, SZ_K_BF16, hdo, hi, hw,
                         MN, MC, MOC);
    sz_k_adamw_step(o[29].buf, x, o[30].buf, o[31].buf, (size_t)DN * DC, 3, 1e-3f, 0.9f,
                    0.999f, 1e-8f, 0.1f, 1.0f, NULL);
    sz_k_f32_to_bf16(o[32].buf, x, (size_t)DN * DC);
    sz_k_softmax_xent_fused(o[35].buf, o[36].buf, tgt, 1.0f / DN, DN, DV, DVP);
    sz_k_residual_layernorm_fwd(o[37].buf, o[38].buf, o[39].buf, o[40].buf, x, dout, lw, lb, DN, DC);
    sz_k_layernorm_residual_bwd(o[41].buf, o[42].buf, o[43].buf, o[44].buf, o[45].buf, dout, x, lw, o[4].buf,
                                o[5].buf, DN, DC);
}

static void test_determinism(void)
{
    size_t act = (size_t)DN * DC, att = (size_t)DB * DNH * DT * DT;
    int tok[DN], tgt[DN];
    for (int i = 0; i < DN; i++) { tok[i] = i % 37; tgt[i] = (i * 13) % DV; }
    float *dloss = malloc(DN * sizeof(float));
    for (int i = 0; i < DN; i++) dloss[i] = 1.0f / DN;
    float *in[17] = { rnd((size_t)DV * DC, 1), rnd((size_t)DT * DC, 1), rnd(act, 1), rnd(DC, 1),
                      rnd(DC, 1), rnd(3 * act, 1), rnd(act, 1), rnd((size_t)DN * DVP, 4),
                      rnd((size_t)MN * MC, 1), rnd((size_t)MOC * MC, 1), rnd(MOC, 1),
                      rnd((size_t)MN * MOC, 1), NULL, NULL, NULL, (float *)tgt, dloss };
    in[12] = (float *)to_bf16(in[8], (size_t)MN * MC);
    in[13] = (float *)to_bf16(in[9], (size_t)MOC * MC);
    in[14] = (float *)to_bf16(in[11], (size_t)MN * MOC);
    /* name, bytes, accumulated (needs an initial value), holds bf16 */
    struct { const char *name; size_t bytes; int acc, bf16; } spec[] = {
        { "encoder out", act * 4, 0, 0 }, { "encoder dwte", (size_t)DV * DC * 4, 1, 0 },
        { "encoder dwpe", (size_t)DT * DC * 4, 1, 0 }, { "layernorm out", act * 4, 0, 0 },
        { "layernorm mean", DN * 4, 0, 0 }, { "layernorm rstd", DN * 4, 0, 0 },
        { "layernorm dinp", act * 4, 1, 0 }, { "layernorm dweight", DC * 4, 1, 0 },
        { "layernorm dbias", DC * 4, 1, 0 }, { "attention out", act * 4, 0, 0 },
        { "attention stats", (size_t)DB * DNH * DT * 2 * 4, 0, 0 }, { "attention (T x T) att", att * 4, 0, 0 },
        { "attention dinp", 3 * act * 4, 1, 0 }, { "gelu out", act * 4, 0, 0 },
        { "gelu dinp", act * 4, 1, 0 }, { "residual out", act * 4, 0, 0 },
        { "residual da", act * 4, 1, 0 }, { "residual db", act * 4, 1, 0 },
        { "xent probs", (size_t)DN * DVP * 4, 0, 0 }, { "xent losses", DN * 4, 0, 0 },
        { "xent dlogits", (size_t)DN * DVP * 4, 0, 0 },
        { "matmul out", (size_t)MN * MOC * 4, 0, 0 },
        { "matmul dinp", (size_t)MN * MC * 4, 1, 0 },
        { "matmul dweight", (size_t)MOC * MC * 4, 1, 0 }, { "matmul dbias", MOC * 4, 1, 0 },
        { "bf16 matmul out", (size_t)MN * MOC * 2, 0, 1 },
        { "bf16 matmul dinp (f32)", (size_t)MN * MC * 4, 1, 0 },
        { "bf16 matmul dweight", (size_t)MOC * MC * 2, 1, 1 },
        { "bf16 matmul dbias", MOC * 2, 1, 1 },
        { "adamw param", act * 4, 1, 0 }, { "adamw m", act * 4, 1, 0 },
        { "adamw v", act * 4, 1, 0 }, { "f32_to_bf16", act * 2, 0, 1 },
        { "attention (T x T) out", act * 4, 0, 0 }, { "attention (T x T) preatt", att * 4, 0, 0 },
        { "fused xent dlogits (in place)", (size_t)DN * DVP * 4, 1, 0 }, { "fused xent losses", DN * 4, 0, 0 },
        { "residual+layernorm res", act * 4, 0, 0 }, { "residual+layernorm out", act * 4, 0, 0 },
        { "residual+layernorm mean", DN * 4, 0, 0 }, { "residual+layernorm rstd", DN * 4, 0, 0 },
        { "layernorm+residual da", act * 4, 1, 0 }, { "layernorm+residual db", act * 4, 1, 0 },
        { "layernorm+residual dres", act * 4, 1, 0 }, { "layernorm+residual dweight", DC * 4, 1, 0 },
        { "layernorm+residual dbias", DC * 4, 1, 0 },
    };
    enum { NO = sizeof spec / sizeof spec[0] };
    det_buf o[NO];
    for (int i = 0; i < NO; i++) {
        size_t nf = spec[i].bytes / 2 + 1;   /* floats; enough for bf16 too */
        o[i].name = spec[i].name;
        o[i].bytes = spec[i].bytes;
        o[i].buf = rnd(nf, 1);
        o[i].snap = malloc(spec[i].bytes);
        o[i].init = NULL;
        if (!spec[i].acc) continue;
        float *init = rnd(nf, 1);
        if (spec[i].bf16) {   /* a valid bf16 start value */
            uint16_t *h = to_bf16(init, spec[i].bytes / 2);
            memcpy(init, h, spec[i].bytes);
            free(h);
        }
        if (strcmp(spec[i].name, "adamw v") == 0)
            for (size_t k = 0; k < nf; k++) init[k] = fabsf(init[k]);
        o[i].init = init;
    }
    memcpy(o[35].init, in[7], (size_t)DN * DVP * 4); /* the fused softmax-cross-entropy's logits */
    int saved = omp_get_max_threads(), all_same = 1;
    for (int nt = 1; nt <= 4; nt++) {
        omp_set_num_threads(nt);
        det_run(o, NO, tok, in);
        CU_ASSERT_EQUAL(omp_get_max_threads(), nt);   /* kernels leave it alone */
        for (int i = 0; i < NO; i++) {
            if (nt == 1) { memcpy(o[i].snap, o[i].buf, o[i].bytes); continue; }
            if (memcmp(o[i].snap, o[i].buf, o[i].bytes) != 0) {
                printf("\n  %s differs between 1 and %d threads\n", o[i].name, nt);
                all_same = 0;
            }
        }
    }
    CU_ASSERT(all_same);
    omp_set_num_threads(saved);
    for (int i = 0; i < NO; i++) { free(o[i].buf); free(o[i].snap); free(o[i].init); }
    for (int i = 0; i < 15; i++) free(in[i]);
    free(dloss);
}

/* What the matmul kernels say they need on the host (sz_k_matmul_host_bytes and its bf16 twin:
 * oneDNN's scratchpads queried, packed tiles, the bf16 emulation's fp32 copies) bounds what they
 * really take when run, on shapes that pack and that do not, fp32 and bf16, 1 and 2 threads. */
static void test_matmul_host_bytes(void)
{
    const int shapes[][3] = {{64, 512, 512}, {130, 96, 200}, {32, 128, 1536}};
    int saved = omp_get_max_threads();
    for (int nt = 1; nt <= 2; nt++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            int N = shapes[k][0], C = shapes[k][1], OC = shapes[k][2];
            omp_set_num_threads(nt);
            float *x = calloc((size_t)N * C, 4), *w = calloc((size_t)OC * C, 4), *b = calloc((size_t)OC, 4);
            float *y = calloc((size_t)N * OC, 4), *dx = calloc((size_t)N * C, 4), *dw = calloc((size_t)OC * C, 4);
            float *db = calloc((size_t)OC, 4);
            uint16_t *hx = calloc((size_t)N * C, 2), *hw = calloc((size_t)OC * C, 2), *hb = calloc((size_t)OC, 2);
            uint16_t *hy = calloc((size_t)N * OC, 2), *hdx = calloc((size_t)N * C, 2);
            float *y2 = calloc((size_t)N * OC, 4);
            CU_ASSERT_FATAL(x && w && b && y && dx && dw && db && hx && hw && hb && hy && hdx && y2);
            size_t sc, pk, sc16, pk16;
            sz_k_matmul_host_bytes(N, C, OC, nt, &sc, &pk);
            sz_k_matmul_bf16_host_bytes(N, C, OC, nt, &sc16, &pk16);
            int64_t before = sz_k_matmul_host_live();
            sz_k_matmul_host_peak_reset();
            CU_ASSERT(sz_k_matmul_fwd(y, x, w, b, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_fwd(y, x, w, NULL, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_bwd(dx, dw, db, y, x, w, N, C, OC) >= 0);
            /* the GELU-fused kernels run the same products: the same bytes */
            CU_ASSERT(sz_k_matmul_gelu_fwd(y, y2, SZ_K_F32, x, w, b, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
            CU_ASSERT(sz_k_gelu_matmul_bwd(dx, SZ_K_F32, dw, db, SZ_K_F32, y, x, w, x, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
            int64_t used = sz_k_matmul_host_peak() - before;
            CU_ASSERT(used >= 0 && used <= (int64_t)(sc + pk));
            before = sz_k_matmul_host_live();
            sz_k_matmul_host_peak_reset();
            CU_ASSERT(sz_k_matmul_fwd_bf16(hy, SZ_K_BF16, hx, hw, hb, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_fwd_bf16(y, SZ_K_F32, hx, hw, NULL, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_bwd_bf16(dx, SZ_K_F32, dw, db, SZ_K_F32, hy, hx, hw, N, C, OC) >= 0);
            CU_ASSERT(sz_k_matmul_gelu_fwd(y, hy, SZ_K_BF16, hx, hw, hb, SZ_K_BF16, SZ_K_BF16, N, C, OC) >= 0);
            CU_ASSERT(sz_k_gelu_matmul_bwd(hdx, SZ_K_BF16, dw, db, SZ_K_F32, hy, hx, hw, x, SZ_K_BF16, SZ_K_BF16, N, C, OC) >= 0);
            int64_t used16 = sz_k_matmul_host_peak() - before;
            CU_ASSERT(used16 >= 0 && used16 <= (int64_t)(sc16 + pk16));
            if (used > (int64_t)(sc + pk) || used16 > (int64_t)(sc16 + pk16))
                printf("\n  %d x %d x %d, %d thread(s): fp32 used %lld > %zu, bf16 used %lld > %zu\n", N, C, OC, nt,
                       (long long)used, sc + pk, (long long)used16, sc16 + pk16);
            free(x); free(w); free(b); free(y); free(dx); free(dw); free(db);
            free(hx); free(hw); free(hb); free(hy); free(hdx); free(y2);
        }
    omp_set_num_threads(saved);
}

/* ---------------------------------------------------------------- main */

int main(void)
{
    /* the bf16 products' path, as the library's context sets it from the environment (sched/env.c):
     * CTest runs this suite with SZ_ONEDNN_BF16=0 (the widening path) and =1 (oneDNN's bf16 tiles) */
    const char *tiles = getenv("SZ_ONEDNN_BF16");
    sz_k_set_bf16_tiles(!(tiles && tiles[0] == '0'));
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("kernels", NULL, NULL);
    struct { const char *name; void (*fn)(void); } tests[] = {
        { "encoder", test_encoder }, { "layernorm", test_layernorm }, { "layernorm without bias", test_layernorm_nobias },
        { "matmul fp32", test_matmul }, { "matmul plain fallback", test_matmul_plain },
        { "matmul bf16", test_matmul_bf16 }, { "attention", test_attention },
        { "gelu", test_gelu }, { "matmul fused with gelu (bits of the separate kernels)", test_matmul_gelu },
        { "residual", test_residual },
        { "softmax cross-entropy", test_softmax_xent }, { "softmax cross-entropy fused with its backward", test_softmax_xent_fused },
        { "residual fused with layernorm", test_residual_layernorm }, { "adamw", test_adamw }, { "adamw fused norm", test_adamw_norm },
        { "bf16 conversion", test_bf16 }, { "thread-count determinism", test_determinism },
        { "matmul host memory within what is counted", test_matmul_host_bytes },
    };
    for (size_t i = 0; s && i < sizeof tests / sizeof tests[0]; i++)
        if (!CU_add_test(s, tests[i].name, tests[i].fn)) s = NULL;
    if (!s) { CU_cleanup_registry(); return 1; }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    sz_k_shutdown();
    return fails > 100 ? 100 : (int)fails;
}
