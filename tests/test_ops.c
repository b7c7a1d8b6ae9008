/* test_ops.c — the operations of LLaMA-style models (RMSNorm, SiLU, elementwise product, SwiGLU,
 * rotary embedding, token embedding, MSE loss). Suite "op kernels" (no StarPU): every forward against a
 * double-precision reference, every backward against central finite differences of
 * L = sum(out * w) computed in double (and against the accumulate / overwrite contract), bitwise
 * determinism over 1..4 OpenMP threads. Suite "ops as tasks": the sz_op_* wrappers inside a tiny
 * two-unit model give bitwise the kernels' results (forward, loss, gradients); a token outside the
 * vocabulary fails the step with a message naming the op, the value and the row (no crash); a
 * tensor too small and a bad shape are refused naming the op and the tensor. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "starzero.h"
#include "sz_kernels.h"
#include "sz_test.h"
#include "sz_test_check.h"
#include "sz_test_data.h"

enum { B = 2, T = 5, C = 8, NH = 2, V = 11, N = B * T };
#define TOL 1e-5
#define EPS 1e-5f
#define THETA 10000.0f

/* ---------------------------------------------------------------- rmsnorm */

typedef struct { int n, c; double *inp, *wt, *w, *out, *rstd; } rms_ctx;
static void ref_rmsnorm(rms_ctx *r)
{
    for (int n = 0; n < r->n; n++) {
        const double *x = r->inp + (size_t)n * r->c;
        double ss = 0;
        for (int i = 0; i < r->c; i++) ss += x[i] * x[i];
        double s = 1.0 / sqrt(ss / r->c + (double)EPS);
        for (int i = 0; i < r->c; i++) r->out[(size_t)n * r->c + i] = x[i] * s * r->wt[i];
        r->rstd[n] = s;
    }
}
static double rms_loss(void *p)
{
    rms_ctx *r = p;
    ref_rmsnorm(r);
    return dot_d(r->out, r->w, (size_t)r->n * r->c);
}

static void test_rmsnorm(void)
{
    float *inp = rnd(N * C, 2), *wt = rnd(C, 1), *w = rnd(N * C, 1), *out = rnd(N * C, 1), rstd[N];
    float *dinp0 = rnd(N * C, 1), *dwt0 = rnd(C, 1);
    float *dinp = dup_f(dinp0, N * C), *dwt = dup_f(dwt0, C);
    rms_ctx r = {N, C, dup_d(inp, N * C), dup_d(wt, C), dup_d(w, N * C), malloc(N * C * sizeof(double)),
                 malloc(N * sizeof(double))};
    sz_k_rmsnorm_fwd(out, rstd, inp, wt, N, C, EPS);
    ref_rmsnorm(&r);
    CU_ASSERT(check_arr("rmsnorm out", out, r.out, N * C, TOL, TOL));
    CU_ASSERT(check_arr("rmsnorm rstd", rstd, r.rstd, N, TOL, TOL));
    sz_k_rmsnorm_bwd(dinp, dwt, w, inp, wt, rstd, N, C);
    CU_ASSERT(check_fd("rmsnorm dinp", rms_loss, &r, r.inp, N * C, dinp, dinp0, TOL));
    CU_ASSERT(check_fd("rmsnorm dweight", rms_loss, &r, r.wt, C, dwt, dwt0, TOL));
    /* NULL outputs are skipped: dw alone gives the same dw */
    float *dwt2 = dup_f(dwt0, C);
    sz_k_rmsnorm_bwd(NULL, dwt2, w, inp, wt, rstd, N, C);
    CU_ASSERT(memcmp(dwt2, dwt, C * sizeof(float)) == 0);
    free(inp); free(wt); free(w); free(out); free(dinp0); free(dwt0); free(dinp); free(dwt); free(dwt2);
    free(r.inp); free(r.wt); free(r.w); free(r.out); free(r.rstd);
}

/* The residual add fused with the RMSNorm after it: res = a + b, out = rmsnorm(res) against the
 * double reference; backward of L = sum(out * w) + sum(res * w2) (dres starts from w2, the rest of
 * the graph's gradient) by finite differences in a, b and the weight; every output bitwise that of
 * residual then rmsnorm (forward) and rmsnorm then residual (backward). */
typedef struct { double *a, *b, *w2; rms_ctx r; } rrms_ctx;
static double rrms_loss(void *p)
{
    rrms_ctx *q = p;
    for (int i = 0; i < N * C; i++) q->r.inp[i] = q->a[i] + q->b[i];
    ref_rmsnorm(&q->r);
    return dot_d(q->r.out, q->r.w, N * C) + dot_d(q->r.inp, q->w2, N * C);
}

static void test_residual_rmsnorm(void)
{
    size_t nc = (size_t)N * C;
    float *a = rnd(nc, 2), *b = rnd(nc, 1), *wt = rnd(C, 1), *w = rnd(nc, 1), *w2 = rnd(nc, 1);
    float *res = rnd(nc, 1), *out = rnd(nc, 1), rstd[N], *res_r = rnd(nc, 1), *out_r = rnd(nc, 1), rstd_r[N];
    float *da0 = rnd(nc, 1), *db0 = rnd(nc, 1), *dwt0 = rnd(C, 1);
    float *da = dup_f(da0, nc), *db = dup_f(db0, nc), *dwt = dup_f(dwt0, C), *dres = dup_f(w2, nc);
    float *da_r = dup_f(da0, nc), *db_r = dup_f(db0, nc), *dwt_r = dup_f(dwt0, C), *dres_r = dup_f(w2, nc);
    rrms_ctx q = {dup_d(a, nc), dup_d(b, nc), dup_d(w2, nc),
                  {N, C, malloc(nc * sizeof(double)), dup_d(wt, C), dup_d(w, nc), malloc(nc * sizeof(double)),
                   malloc(N * sizeof(double))}};
    sz_k_residual_rmsnorm_fwd(res, out, rstd, a, b, wt, N, C, EPS);
    rrms_loss(&q);
    CU_ASSERT(check_arr("residual+rmsnorm res", res, q.r.inp, nc, TOL, TOL));
    CU_ASSERT(check_arr("residual+rmsnorm out", out, q.r.out, nc, TOL, TOL));
    CU_ASSERT(check_arr("residual+rmsnorm rstd", rstd, q.r.rstd, N, TOL, TOL));
    sz_k_residual_fwd(res_r, a, b, nc);
    sz_k_rmsnorm_fwd(out_r, rstd_r, res_r, wt, N, C, EPS);
    CU_ASSERT(memcmp(res, res_r, nc * sizeof(float)) == 0);
    CU_ASSERT(memcmp(out, out_r, nc * sizeof(float)) == 0);
    CU_ASSERT(memcmp(rstd, rstd_r, sizeof rstd) == 0);
    sz_k_rmsnorm_residual_bwd(da, db, dres, dwt, w, res, wt, rstd, N, C);
    CU_ASSERT(check_fd("residual+rmsnorm da", rrms_loss, &q, q.a, nc, da, da0, TOL));
    CU_ASSERT(check_fd("residual+rmsnorm db", rrms_loss, &q, q.b, nc, db, db0, TOL));
    CU_ASSERT(check_fd("residual+rmsnorm dweight", rrms_loss, &q, q.r.wt, C, dwt, dwt0, TOL));
    sz_k_rmsnorm_bwd(dres_r, dwt_r, w, res_r, wt, rstd_r, N, C);
    sz_k_residual_bwd(da_r, db_r, dres_r, nc);
    CU_ASSERT(memcmp(dres, dres_r, nc * sizeof(float)) == 0);
    CU_ASSERT(memcmp(da, da_r, nc * sizeof(float)) == 0);
    CU_ASSERT(memcmp(db, db_r, nc * sizeof(float)) == 0);
    CU_ASSERT(memcmp(dwt, dwt_r, C * sizeof(float)) == 0);
    free(a); free(b); free(wt); free(w); free(w2); free(res); free(out); free(res_r); free(out_r);
    free(da0); free(db0); free(dwt0); free(da); free(db); free(dwt); free(dres);
    free(da_r); free(db_r); free(dwt_r); free(dres_r);
    free(q.a); free(q.b); free(q.w2); free(q.r.inp); free(q.r.wt); free(q.r.w); free(q.r.out); free(q.r.rstd);
}

/* ---------------------------------------------------------------- silu, mul */

typedef struct { size_t n; double *a, *b, *w, *out; int op; } ew_ctx; /* op 0 silu, 1 mul */
static void ref_ew(ew_ctx *e)
{
    for (size_t i = 0; i < e->n; i++)
        e->out[i] = e->op == 0 ? e->a[i] / (1.0 + exp(-e->a[i])) : e->a[i] * e->b[i];
}
static double ew_loss(void *p)
{
    ew_ctx *e = p;
    ref_ew(e);
    return dot_d(e->out, e->w, e->n);
}

static void test_silu(void)
{
    size_t n = 300;
    float *x = rnd(n, 6), *w = rnd(n, 1), *out = rnd(n, 1), *d0 = rnd(n, 1), *d = dup_f(d0, n);
    x[0] = 0.0f; x[1] = -30.0f; x[2] = 30.0f; x[3] = -100.0f; /* the tails: e^-x overflows */
    ew_ctx e = {n, dup_d(x, n), NULL, dup_d(w, n), malloc(n * sizeof(double)), 0};
    sz_k_silu_fwd(out, x, n);
    ref_ew(&e);
    CU_ASSERT(check_arr("silu out", out, e.out, n, TOL, TOL));
    CU_ASSERT(isfinite(out[3]) && fabsf(out[3]) < 1e-30f);
    sz_k_silu_bwd(d, x, w, n);
    CU_ASSERT(check_fd("silu dinp", ew_loss, &e, e.a, n, d, d0, TOL));
    free(x); free(w); free(out); free(d0); free(d); free(e.a); free(e.w); free(e.out);
}

static void test_mul(void)
{
    size_t n = 300;
    float *a = rnd(n, 2), *b = rnd(n, 2), *w = rnd(n, 1), *out = rnd(n, 1);
    float *da0 = rnd(n, 1), *db0 = rnd(n, 1), *da = dup_f(da0, n), *db = dup_f(db0, n);
    ew_ctx e = {n, dup_d(a, n), dup_d(b, n), dup_d(w, n), malloc(n * sizeof(double)), 1};
    sz_k_mul_fwd(out, a, b, n);
    ref_ew(&e);
    CU_ASSERT(check_arr("mul out", out, e.out, n, TOL, TOL));
    sz_k_mul_bwd(da, db, w, a, b, n);
    CU_ASSERT(check_fd("mul da", ew_loss, &e, e.a, n, da, da0, TOL));
    CU_ASSERT(check_fd("mul db", ew_loss, &e, e.b, n, db, db0, TOL));
    float *db2 = dup_f(db0, n);
    sz_k_mul_bwd(NULL, db2, w, a, b, n);
    CU_ASSERT(memcmp(db2, db, n * sizeof(float)) == 0);
    free(a); free(b); free(w); free(out); free(da0); free(db0); free(da); free(db); free(db2);
    free(e.a); free(e.b); free(e.w); free(e.out);
}

/* ---------------------------------------------------------------- swiglu (silu(gate) * up fused) */

#define SW_CHECK(c, ...)                 \
    do {                                 \
        if (!(c)) {                      \
            printf("\n  FAILED: ");      \
            printf(__VA_ARGS__);         \
        }                                \
        CU_ASSERT(c);                    \
    } while (0)

static void test_swiglu(void)
{
    enum { n = 200 };
    float gate[n], up[n], w[n], out[n], dg[n], du[n];
    for (int i = 0; i < n; i++) {
        gate[i] = (float)sin(i * 1.7) * 6.0f;
        up[i] = (float)cos(i * 0.9) * 2.0f;
        w[i] = (float)sin(i * 0.37 + 1.0);
        dg[i] = 0.25f;
        du[i] = -0.5f;
    }
    sz_k_swiglu_fwd(out, gate, up, n);
    sz_k_swiglu_bwd(dg, du, w, gate, up, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        double g = gate[i], u = up[i], ref = g / (1 + exp(-g)) * u, h = 1e-5;
        double fg = ((g + h) / (1 + exp(-(g + h))) - (g - h) / (1 + exp(-(g - h)))) / (2 * h) * u * w[i];
        double fu = g / (1 + exp(-g)) * w[i];
        bad += !(fabs(out[i] - ref) <= 1e-5 * (1 + fabs(ref)));
        bad += !(fabs(dg[i] - 0.25 - fg) <= 1e-5 * (1 + fabs(fg)));
        bad += !(fabs(du[i] + 0.5 - fu) <= 1e-5 * (1 + fabs(fu)));
    }
    SW_CHECK(bad == 0, "swiglu kernel: %d values off the double reference / finite differences", bad);

    /* the bf16 variant (the native path's): the fp32 kernel on the widened values, each result rounded
     * once; dout bf16 or fp32; the same bits at 1-3 threads (sizes above the parallel threshold) */
    enum { M = 40000 };
    float *g = malloc(M * sizeof *g), *uu = malloc(M * sizeof *uu), *o32 = malloc(M * sizeof *o32);
    float *a32 = malloc(M * sizeof *a32), *b32 = malloc(M * sizeof *b32), *d32 = malloc(M * sizeof *d32);
    uint16_t *o16 = malloc(M * 2), *a16 = malloc(M * 2), *b16 = malloc(M * 2), *d16 = malloc(M * 2);
    uint16_t *a0 = malloc(M * 2), *b0 = malloc(M * 2), *t16 = malloc(M * 2), *ta = malloc(M * 2), *tb = malloc(M * 2);
    for (int i = 0; i < M; i++) {
        g[i] = (float)sin(i * 0.013) * 7.0f;
        uu[i] = (float)cos(i * 0.029) * 3.0f;
        d16[i] = sz_bf16_from_f32((float)sin(i * 0.0071 + 0.3));
        a0[i] = sz_bf16_from_f32((float)cos(i * 0.0037) * 0.5f);
        b0[i] = sz_bf16_from_f32((float)sin(i * 0.0053) * 0.5f);
    }
    sz_k_swiglu_fwd_mx(o16, SZ_K_BF16, g, uu, M);
    sz_k_swiglu_fwd(o32, g, uu, M);
    int diff = 0, far = 0;
    for (int i = 0; i < M; i++) {
        diff += o16[i] != sz_bf16_from_f32(o32[i]);
        double ref = g[i] / (1 + exp(-(double)g[i])) * uu[i];
        far += !(fabs(sz_bf16_to_f32(o16[i]) - ref) <= fabs(ref) / 256 + 1e-6);
    }
    for (int dbf = 0; dbf < 2; dbf++) { /* dout bf16, then fp32 */
        for (int i = 0; i < M; i++) {
            d32[i] = sz_bf16_to_f32(d16[i]);
            a32[i] = sz_bf16_to_f32(a0[i]);
            b32[i] = sz_bf16_to_f32(b0[i]);
        }
        memcpy(a16, a0, M * 2);
        memcpy(b16, b0, M * 2);
        sz_k_swiglu_bwd_mx(a16, SZ_K_BF16, b16, SZ_K_BF16, dbf ? (const void *)d32 : (const void *)d16, dbf ? SZ_K_F32 : SZ_K_BF16, g, uu, M);
        sz_k_swiglu_bwd(a32, b32, d32, g, uu, M);
        for (int i = 0; i < M; i++) {
            diff += a16[i] != sz_bf16_from_f32(a32[i]) || b16[i] != sz_bf16_from_f32(b32[i]);
            double gg = g[i], sg = 1 / (1 + exp(-gg));
            double rg = sz_bf16_to_f32(a0[i]) + d32[i] * uu[i] * sg * (1 + gg * (1 - sg));
            double ru = sz_bf16_to_f32(b0[i]) + d32[i] * gg * sg;
            far += !(fabs(sz_bf16_to_f32(a16[i]) - rg) <= fabs(rg) / 128 + 1e-5);
            far += !(fabs(sz_bf16_to_f32(b16[i]) - ru) <= fabs(ru) / 128 + 1e-5);
        }
    }
    memcpy(ta, a0, M * 2); /* the reference bits at the default thread count, dout bf16 */
    memcpy(tb, b0, M * 2);
    sz_k_swiglu_bwd_mx(ta, SZ_K_BF16, tb, SZ_K_BF16, d16, SZ_K_BF16, g, uu, M);
    int threads = omp_get_max_threads();
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        memcpy(a16, a0, M * 2);
        memcpy(b16, b0, M * 2);
        sz_k_swiglu_fwd_mx(t16, SZ_K_BF16, g, uu, M);
        sz_k_swiglu_bwd_mx(a16, SZ_K_BF16, b16, SZ_K_BF16, d16, SZ_K_BF16, g, uu, M);
        diff += memcmp(t16, o16, M * 2) != 0 || memcmp(a16, ta, M * 2) != 0 || memcmp(b16, tb, M * 2) != 0;
    }
    omp_set_num_threads(threads);
    SW_CHECK(diff == 0 && far == 0, "swiglu bf16 kernels: %d results not the fp32 kernel's rounded (or differing "
          "across 1-3 threads), %d off the double reference", diff, far);
    /* types mixed per operand (the engine op takes each on its own): dgate fp32, dup bf16, dout bf16 */
    int mix = 0;
    for (int i = 0; i < M; i++) {
        a32[i] = sz_bf16_to_f32(a0[i]);
        b32[i] = sz_bf16_to_f32(b0[i]);
        d32[i] = sz_bf16_to_f32(d16[i]);
    }
    float *ga = malloc(M * sizeof *ga);
    memcpy(ga, a32, M * sizeof *ga);
    memcpy(b16, b0, M * 2);
    sz_k_swiglu_bwd_mx(ga, SZ_K_F32, b16, SZ_K_BF16, d16, SZ_K_BF16, g, uu, M);
    sz_k_swiglu_bwd(a32, b32, d32, g, uu, M);
    for (int i = 0; i < M; i++)
        mix += memcmp(&ga[i], &a32[i], 4) != 0 || b16[i] != sz_bf16_from_f32(b32[i]);
    SW_CHECK(mix == 0, "swiglu mixed types: %d results not the fp32 kernel's (rounded where bf16)", mix);
    free(ga);
    free(g); free(uu); free(o32); free(a32); free(b32); free(d32); free(o16); free(a16); free(b16); free(d16);
    free(a0); free(b0); free(t16); free(ta); free(tb);
}

/* ---------------------------------------------------------------- rope */

typedef struct { double *inp, *w, *out; double theta; } rope_ctx;
static void ref_rope(rope_ctx *r)
{
    int hs = C / NH;
    for (int bt = 0; bt < N; bt++) {
        int t = bt % T;
        const double *x = r->inp + (size_t)bt * 3 * C;
        double *o = r->out + (size_t)bt * 3 * C;
        for (int part = 0; part < 2; part++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < hs / 2; i++) {
                    double ang = t * pow(r->theta, -2.0 * i / hs), c = cos(ang), s = sin(ang);
                    int j = part * C + h * hs + 2 * i;
                    o[j] = x[j] * c - x[j + 1] * s;
                    o[j + 1] = x[j] * s + x[j + 1] * c;
                }
        for (int j = 2 * C; j < 3 * C; j++) o[j] = x[j];
    }
}
static double rope_loss(void *p)
{
    rope_ctx *r = p;
    ref_rope(r);
    return dot_d(r->out, r->w, (size_t)N * 3 * C);
}

static void test_rope(void)
{
    size_t n = (size_t)N * 3 * C;
    float thetas[] = {THETA, 3.0f};
    for (int k = 0; k < 2; k++) {
        float *x = rnd(n, 1), *w = rnd(n, 1), *out = rnd(n, 1), *d0 = rnd(n, 1), *d = dup_f(d0, n);
        rope_ctx r = {dup_d(x, n), dup_d(w, n), malloc(n * sizeof(double)), thetas[k]};
        CU_ASSERT_EQUAL(sz_k_rope_fwd(out, x, B, T, C, NH, thetas[k]), 0);
        ref_rope(&r);
        CU_ASSERT(check_arr("rope out", out, r.out, n, TOL, TOL));
        int vsame = 1; /* v is copied exactly, and t = 0 is the identity */
        for (int bt = 0; bt < N; bt++)
            for (int j = 0; j < 3 * C; j++)
                if ((j >= 2 * C || bt % T == 0) && out[(size_t)bt * 3 * C + j] != x[(size_t)bt * 3 * C + j])
                    vsame = 0;
        CU_ASSERT(vsame);
        CU_ASSERT_EQUAL(sz_k_rope_bwd(d, w, B, T, C, NH, thetas[k]), 0);
        CU_ASSERT(check_fd("rope dinp", rope_loss, &r, r.inp, n, d, d0, TOL));
        /* in place gives the same values */
        float *y = dup_f(x, n);
        CU_ASSERT_EQUAL(sz_k_rope_fwd(y, y, B, T, C, NH, thetas[k]), 0);
        CU_ASSERT(memcmp(y, out, n * sizeof(float)) == 0);
        free(x); free(w); free(out); free(d0); free(d); free(y); free(r.inp); free(r.w); free(r.out);
    }
}

/* ---------------------------------------------------------------- embedding */

typedef struct { const int *tok; double *wte, *w, *out; } emb_ctx;
static double emb_loss(void *p)
{
    emb_ctx *e = p;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) e->out[n * C + c] = e->wte[e->tok[n] * C + c];
    return dot_d(e->out, e->w, N * C);
}

static void test_embedding(void)
{
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int)((frand() + 1.0f) * 2.0f) % 4; /* repeats */
    tok[N - 1] = V - 1;
    float *wte = rnd(V * C, 1), *w = rnd(N * C, 1), *out = rnd(N * C, 1), *d0 = rnd(V * C, 1), *d = dup_f(d0, V * C);
    emb_ctx e = {tok, dup_d(wte, V * C), dup_d(w, N * C), malloc(N * C * sizeof(double))};
    CU_ASSERT_EQUAL(sz_k_embedding_fwd(out, tok, wte, N, C, V), -1);
    emb_loss(&e);
    CU_ASSERT(check_arr("embedding out", out, e.out, N * C, 0, 0));
    CU_ASSERT_EQUAL(sz_k_embedding_bwd(d, w, tok, N, C, V), -1);
    CU_ASSERT(check_fd("embedding dwte", emb_loss, &e, e.wte, V * C, d, d0, TOL));
    /* a token outside [0, V): its row is returned and nothing is touched */
    float *o2 = dup_f(out, N * C), *d2 = dup_f(d, V * C);
    int bad[N];
    memcpy(bad, tok, sizeof bad);
    bad[6] = V;
    CU_ASSERT_EQUAL(sz_k_embedding_fwd(o2, bad, wte, N, C, V), 6);
    CU_ASSERT_EQUAL(sz_k_embedding_bwd(d2, w, bad, N, C, V), 6);
    bad[6] = tok[6];
    bad[3] = -1;
    CU_ASSERT_EQUAL(sz_k_embedding_check(bad, N, V), 3);
    CU_ASSERT(memcmp(o2, out, N * C * sizeof(float)) == 0);
    CU_ASSERT(memcmp(d2, d, V * C * sizeof(float)) == 0);
    free(wte); free(w); free(out); free(d0); free(d); free(o2); free(d2); free(e.wte); free(e.w); free(e.out);
}

/* ---------------------------------------------------------------- mse */

typedef struct { double *pred, *target, *losses; double scale; } mse_ctx;
static double mse_loss(void *p) /* scale · Σ_r losses_r: the quantity dpred is the gradient of */
{
    mse_ctx *m = p;
    double s = 0;
    for (int n = 0; n < N; n++) {
        double l = 0;
        for (int c = 0; c < C; c++) l += (m->pred[n * C + c] - m->target[n * C + c]) * (m->pred[n * C + c] - m->target[n * C + c]);
        m->losses[n] = l / C;
        s += m->losses[n];
    }
    return m->scale * s;
}

static void test_mse(void)
{
    float *pred = rnd(N * C, 2), *target = rnd(N * C, 2), losses[N], *dpred = rnd(N * C, 1);
    float scale = 1.0f / (N * 3);
    mse_ctx m = {dup_d(pred, N * C), dup_d(target, N * C), malloc(N * sizeof(double)), scale};
    sz_k_mse_fwd(losses, pred, target, N, C);
    mse_loss(&m);
    CU_ASSERT(check_arr("mse losses", losses, m.losses, N, TOL, TOL));
    sz_k_mse_bwd(dpred, pred, target, scale, N, C); /* overwrites: the random start is gone */
    CU_ASSERT(check_fd("mse dpred", mse_loss, &m, m.pred, N * C, dpred, NULL, TOL));
    free(pred); free(target); free(dpred); free(m.pred); free(m.target); free(m.losses);
}

/* ---------------------------------------------------------------- determinism */

/* Shapes where every parallel loop splits (>= SZ_PAR_MIN elements, several column blocks). */
enum { DB = 4, DT = 64, DC = 192, DNH = 6, DN = DB * DT, DV = 300 };

static void det_run(float **o, const float *x, const float *w, const float *d, const float *qkv, const float *wte,
                    const int *tok)
{
    size_t nc = (size_t)DN * DC, q = 3 * nc;
    sz_k_rmsnorm_fwd(o[0], o[1], x, w, DN, DC, EPS);
    sz_k_rmsnorm_bwd(o[2], o[3], d, x, w, o[1], DN, DC);
    sz_k_silu_fwd(o[4], x, nc);
    sz_k_silu_bwd(o[5], x, d, nc);
    sz_k_mul_fwd(o[6], x, d, nc);
    sz_k_mul_bwd(o[7], o[8], d, x, w, nc);
    sz_k_rope_fwd(o[9], qkv, DB, DT, DC, DNH, THETA);
    sz_k_rope_bwd(o[10], qkv, DB, DT, DC, DNH, THETA);
    sz_k_embedding_fwd(o[11], tok, wte, DN, DC, DV);
    sz_k_embedding_bwd(o[12], d, tok, DN, DC, DV);
    sz_k_mse_fwd(o[13], x, d, DN, DC);
    sz_k_mse_bwd(o[14], x, d, 1.0f / DN, DN, DC);
    sz_k_residual_rmsnorm_fwd(o[15], o[16], o[17], x, d, w, DN, DC, EPS);
    sz_k_rmsnorm_residual_bwd(o[18], o[19], o[20], o[21], d, x, w, o[1], DN, DC);
    (void)q;
}

static void test_determinism(void)
{
    size_t nc = (size_t)DN * DC;
    size_t sizes[] = {nc, DN, nc, DC, nc, nc, nc, nc, nc, 3 * nc, 3 * nc, nc, (size_t)DV * DC, DN, nc,
                      nc, nc, DN, nc, nc, nc, DC};
    const char *names[] = {"rmsnorm out", "rmsnorm rstd", "rmsnorm dinp", "rmsnorm dw", "silu out", "silu dinp",
                           "mul out", "mul da", "mul db", "rope out", "rope dinp", "embedding out",
                           "embedding dwte", "mse losses", "mse dpred", "residual+rmsnorm res",
                           "residual+rmsnorm out", "residual+rmsnorm rstd", "rmsnorm+residual da",
                           "rmsnorm+residual db", "rmsnorm+residual dres", "rmsnorm+residual dw"};
    enum { NO = sizeof sizes / sizeof sizes[0] };
    float *x = rnd(nc, 2), *w = rnd(nc, 1), *d = rnd(nc, 1), *qkv = rnd(3 * nc, 1), *wte = rnd((size_t)DV * DC, 1);
    int *tok = malloc(DN * sizeof *tok);
    for (int i = 0; i < DN; i++) tok[i] = (i * 7) % 13; /* many rows share a token */
    float *o[NO], *init[NO], *snap[NO];
    for (int i = 0; i < NO; i++) {
        init[i] = rnd(sizes[i], 1);
        o[i] = malloc(sizes[i] * sizeof(float));
        snap[i] = malloc(sizes[i] * sizeof(float));
    }
    int saved = omp_get_max_threads(), same = 1;
    for (int nt = 1; nt <= 4; nt++) {
        omp_set_num_threads(nt);
        for (int i = 0; i < NO; i++) memcpy(o[i], init[i], sizes[i] * sizeof(float));
        det_run(o, x, w, d, qkv, wte, tok);
        for (int i = 0; i < NO; i++) {
            if (nt == 1) { memcpy(snap[i], o[i], sizes[i] * sizeof(float)); continue; }
            if (memcmp(snap[i], o[i], sizes[i] * sizeof(float)) != 0) {
                printf("\n  %s differs between 1 and %d threads\n", names[i], nt);
                same = 0;
            }
        }
    }
    omp_set_num_threads(saved);
    CU_ASSERT(same);
    for (int i = 0; i < NO; i++) { free(o[i]); free(init[i]); free(snap[i]); }
    free(x); free(w); free(d); free(qkv); free(wte); free(tok);
}

/* ---------------------------------------------------------------- the ops as tasks */

/* A two-unit model: "embed" (wte [V, D]) looks the tokens up; "body" (rmsnorm weight [D]) runs
 * rmsnorm -> rope (on [B,T,3C] = [N, D]) -> silu -> mul(silu, roped) -> mse against a target. */
enum { D = 3 * C };
static sz_context *ctx;
static char last_error[1024];
static int mode; /* 0 normal; 1: rmsnorm with a too small weight; 2: rope with an odd head size */

static void capture_log(sz_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == SZ_LOG_ERROR)
        snprintf(last_error, sizeof last_error, "%s", msg);
}

struct tm_model {
    sz_model *m;
    sz_tensor *tokens, *x0, *x1, *rstd, *x2, *s, *p, *target, *losses;
    sz_tensor *dx0, *dx1, *dx2, *ds, *dp;
};

static const sz_param_spec EMBED[] = {{"wte", V, D, 1, SZ_INIT_NORMAL, 0.5f}};
static const sz_param_spec BODY[] = {{"w", 1, D, 0, SZ_INIT_NORMAL, 1.0f}};

#define TRY(x) do { sz_status st_ = (x); if (st_ != SZ_OK) return st_; } while (0)
static sz_status embed_fwd(sz_unit *u, void *p)
{
    struct tm_model *t = p;
    return sz_op_embedding_fwd(u, t->x0, t->tokens, sz_unit_param(u, 0), N, D, V);
}
static sz_status embed_bwd(sz_unit *u, void *p)
{
    struct tm_model *t = p;
    return sz_op_embedding_bwd(u, sz_unit_grad(u, 0), t->dx0, t->tokens, N, D, V);
}
static sz_status body_fwd(sz_unit *u, void *p)
{
    struct tm_model *t = p;
    TRY(sz_op_rmsnorm_fwd(u, t->x1, t->rstd, t->x0, mode == 1 ? t->rstd : sz_unit_param(u, 0), N, D, EPS));
    TRY(sz_op_rope_fwd(u, t->x2, t->x1, B, T, C, mode == 2 ? 8 : NH, THETA));
    TRY(sz_op_silu_fwd(u, t->s, t->x2, (int64_t)N * D));
    TRY(sz_op_mul_fwd(u, t->p, t->s, t->x2, (int64_t)N * D));
    return sz_op_mse_fwd(u, t->losses, t->p, t->target, N, D);
}
static sz_status body_bwd(sz_unit *u, void *p)
{
    struct tm_model *t = p;
    sz_tensor *zero[] = {t->dx0, t->dx1, t->dx2, t->ds};
    for (int i = 0; i < 4; i++)
        TRY(sz_op_zero(u, zero[i]));
    TRY(sz_op_mse_bwd(u, t->dp, t->p, t->target, N, D));
    TRY(sz_op_mul_bwd(u, t->ds, t->dx2, t->dp, t->s, t->x2, (int64_t)N * D));
    TRY(sz_op_silu_bwd(u, t->dx2, t->x2, t->ds, (int64_t)N * D));
    TRY(sz_op_rope_bwd(u, t->dx1, t->dx2, B, T, C, NH, THETA));
    return sz_op_rmsnorm_bwd(u, t->dx0, sz_unit_grad(u, 0), t->dx1, t->x0, sz_unit_param(u, 0), t->rstd, N, D);
}

static int tm_build(struct tm_model *t)
{
    memset(t, 0, sizeof *t);
    if (sz_model_init(&t->m, ctx) != SZ_OK)
        return 0;
    sz_unit_desc e = {.name = "embed", .params = EMBED, .nparams = 1, .forward = embed_fwd, .backward = embed_bwd,
                      .user = t, .backward_skips_params = 1};
    sz_unit_desc b = {.name = "body", .params = BODY, .nparams = 1, .forward = body_fwd, .backward = body_bwd,
                      .user = t};
    if (sz_model_add_unit(t->m, &e) != SZ_OK || sz_model_add_unit(t->m, &b) != SZ_OK)
        return 0;
    int64_t nd = (int64_t)N * D;
    t->tokens = sz_model_tensor(t->m, "tokens", SZ_DTYPE_I32, N);
    t->x0 = sz_model_tensor(t->m, "x0", SZ_DTYPE_F32, nd);
    t->x1 = sz_model_tensor(t->m, "x1", SZ_DTYPE_F32, nd);
    t->rstd = sz_model_tensor(t->m, "rstd", SZ_DTYPE_F32, N);
    t->x2 = sz_model_tensor(t->m, "x2", SZ_DTYPE_F32, nd);
    t->s = sz_model_tensor(t->m, "s", SZ_DTYPE_F32, nd);
    t->p = sz_model_tensor(t->m, "p", SZ_DTYPE_F32, nd);
    t->target = sz_model_tensor(t->m, "target", SZ_DTYPE_F32, nd);
    t->losses = sz_model_tensor(t->m, "losses", SZ_DTYPE_F32, N);
    t->dx0 = sz_model_tensor(t->m, "dx0", SZ_DTYPE_F32, nd);
    t->dx1 = sz_model_tensor(t->m, "dx1", SZ_DTYPE_F32, nd);
    t->dx2 = sz_model_tensor(t->m, "dx2", SZ_DTYPE_F32, nd);
    t->ds = sz_model_tensor(t->m, "ds", SZ_DTYPE_F32, nd);
    t->dp = sz_model_tensor(t->m, "dp", SZ_DTYPE_F32, nd);
    return sz_model_set_loss(t->m, t->losses) == SZ_OK && sz_model_finalize(t->m) == SZ_OK &&
           sz_model_init_params(t->m, 7) == SZ_OK;
}

static void test_tasks_match_kernels(void)
{
    struct tm_model t;
    mode = 0;
    CU_ASSERT_FATAL(tm_build(&t));
    size_t nd = (size_t)N * D;
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (i * 5) % V;
    tok[3] = tok[7]; /* a repeated token */
    float *target = rnd(nd, 1), *wte = malloc(V * D * sizeof(float)), w[D];
    CU_ASSERT_EQUAL(sz_tensor_write(t.tokens, tok), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_write(t.target, target), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_param_read(t.m, 0, 0, wte), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_param_read(t.m, 1, 0, w), SZ_OK);
    float loss = 0;
    CU_ASSERT_EQUAL_FATAL(sz_model_forward_backward(t.m, &loss), SZ_OK);
    float *got_p = malloc(nd * sizeof(float)), *got_dwte = malloc(V * D * sizeof(float)), got_dw[D];
    CU_ASSERT_EQUAL(sz_tensor_read(t.p, got_p), SZ_OK);

    /* the same chain on the kernels directly */
    float *x0 = malloc(nd * 4), *x1 = malloc(nd * 4), rstd[N], *x2 = malloc(nd * 4), *s = malloc(nd * 4),
          *p = malloc(nd * 4), losses[N], *dp = malloc(nd * 4), *ds = calloc(nd, 4), *dx2 = calloc(nd, 4),
          *dx1 = calloc(nd, 4), *dx0 = calloc(nd, 4), *dwte = calloc(V * D, 4), dw[D] = {0};
    sz_k_embedding_fwd(x0, tok, wte, N, D, V);
    sz_k_rmsnorm_fwd(x1, rstd, x0, w, N, D, EPS);
    sz_k_rope_fwd(x2, x1, B, T, C, NH, THETA);
    sz_k_silu_fwd(s, x2, nd);
    sz_k_mul_fwd(p, s, x2, nd);
    sz_k_mse_fwd(losses, p, target, N, D);
    sz_k_mse_bwd(dp, p, target, 1.0f / N, N, D);
    sz_k_mul_bwd(ds, dx2, dp, s, x2, nd);
    sz_k_silu_bwd(dx2, x2, ds, nd);
    sz_k_rope_bwd(dx1, dx2, B, T, C, NH, THETA);
    sz_k_rmsnorm_bwd(dx0, dw, dx1, x0, w, rstd, N, D);
    sz_k_embedding_bwd(dwte, dx0, tok, N, D, V);
    double mean = 0;
    for (int i = 0; i < N; i++) mean += losses[i];
    mean /= N;
    CU_ASSERT(memcmp(got_p, p, nd * 4) == 0);
    CU_ASSERT(fabs(loss - mean) <= 1e-6 * fabs(mean));
    CU_ASSERT_EQUAL(sz_model_grad_read(t.m, 0, 0, got_dwte), SZ_OK); /* before update: this step's gradients */
    CU_ASSERT_EQUAL(sz_model_grad_read(t.m, 1, 0, got_dw), SZ_OK);
    CU_ASSERT(memcmp(got_dwte, dwte, V * D * 4) == 0);
    CU_ASSERT(memcmp(got_dw, dw, D * 4) == 0);
    sz_model_free(t.m);
    free(target); free(wte); free(got_p); free(got_dwte); free(x0); free(x1); free(x2); free(s); free(p);
    free(dp); free(ds); free(dx2); free(dx1); free(dx0); free(dwte);
}

static void test_bad_token(void)
{
    struct tm_model t;
    mode = 0;
    CU_ASSERT_FATAL(tm_build(&t));
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = i % V;
    tok[4] = V + 3;
    float *target = rnd((size_t)N * D, 1), loss;
    CU_ASSERT_EQUAL(sz_tensor_write(t.tokens, tok), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_write(t.target, target), SZ_OK);
    last_error[0] = 0;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s\n", last_error);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "fwd:embed:embedding"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "token 14 at row 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "[0, 11)"));
    /* the failure is reported once; valid tokens then work */
    tok[4] = 1;
    CU_ASSERT_EQUAL(sz_tensor_write(t.tokens, tok), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_OK);
    CU_ASSERT(isfinite(loss));
    sz_model_free(t.m);
    free(target);
}

static void test_bad_shapes(void)
{
    struct tm_model t;
    float loss;
    mode = 1; /* rmsnorm's weight is the rstd tensor: N < D elements */
    CU_ASSERT_FATAL(tm_build(&t));
    last_error[0] = 0;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s\n", last_error);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "rmsnorm"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "'w' (rstd)"));
    sz_model_free(t.m);
    mode = 0;
}

static void test_bad_rope_heads(void)
{
    struct tm_model t;
    float loss;
    mode = 2; /* 8 heads of C = 8: head size 1 */
    CU_ASSERT_FATAL(tm_build(&t));
    last_error[0] = 0;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s\n", last_error);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "rope (fwd:body:rope)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "even head size"));
    sz_model_free(t.m);
    mode = 0;
}

/* The fused ops refuse a bad shape before submitting anything, naming the op and the shape (outside
 * a unit the message goes to stderr: captured here through a temporary file). */
static void test_fused_bad_shapes(void)
{
    char buf[2048] = "";
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    CU_ASSERT_FATAL(saved >= 0 && tmp != NULL);
    dup2(fileno(tmp), 2);
    sz_status a = sz_op_softmax_xent_fused(NULL, NULL, NULL, NULL, 4, 9, 8);
    sz_status b = sz_op_residual_layernorm_fwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 8);
    sz_status c = sz_op_layernorm_residual_bwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 4, -1);
    sz_status d = sz_op_residual_rmsnorm_fwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 4, 8, -1.0f);
    sz_status e = sz_op_rmsnorm_residual_bwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 8);
    sz_status f = sz_op_matmul_gelu_fwd(NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, 8);
    sz_status g = sz_op_gelu_matmul_bwd(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 4, 8, -2);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    printf("\n  logged: %s", buf);
    CU_ASSERT_EQUAL(a, SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(b, SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(c, SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(d, SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(e, SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(f, SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(g, SZ_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "matmul_gelu_fwd (outside a unit's callback): N, C, OC must be >= 1 (got 0, 8, 8)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "gelu_matmul_bwd (outside a unit's callback): N, C, OC must be >= 1 (got 4, 8, -2)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "residual_rmsnorm_fwd (outside a unit's callback): N = 4, C = 8, eps = -1: "
                                       "need N, C >= 1 and eps >= 0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "rmsnorm_residual_bwd (outside a unit's callback): N = 0, C = 8: need N, C >= 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "softmax_xent_fused (outside a unit's callback): need N >= 1 and 1 <= V <= Vp "
                                       "(got N 4, V 9, Vp 8)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "residual_layernorm_fwd (outside a unit's callback): N and C must be >= 1 "
                                       "(got 0, 8)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "layernorm_residual_bwd (outside a unit's callback): N and C must be >= 1 "
                                       "(got 4, -1)"));
}

static int tasks_init(void)
{
    sz_context_config cfg;
    sz_context_config_defaults(&cfg);
    cfg.log_fn = capture_log;
    return sz_context_init(&ctx, &cfg, NULL, NULL) == SZ_OK ? 0 : 1;
}
static int tasks_clean(void)
{
    sz_context_free(ctx);
    return 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("op kernels", {"rmsnorm", test_rmsnorm}, {"residual fused with rmsnorm", test_residual_rmsnorm},
             {"silu", test_silu}, {"mul", test_mul}, {"swiglu fp32 and bf16", test_swiglu}, {"rope", test_rope},
             {"embedding", test_embedding}, {"mse", test_mse}, {"thread-count determinism", test_determinism});
    CU_pSuite s = CU_add_suite("ops as tasks", tasks_init, tasks_clean);
    CU_add_test(s, "wrappers equal the kernels bitwise", test_tasks_match_kernels);
    CU_add_test(s, "a token outside the vocabulary fails the step, named", test_bad_token);
    CU_add_test(s, "a tensor too small is refused, named", test_bad_shapes);
    CU_add_test(s, "rope refuses an odd head size, named", test_bad_rope_heads);
    CU_add_test(s, "the fused ops refuse a bad shape, named", test_fused_bad_shapes);
    int rc = sz_test_run();
    sz_k_shutdown();
    return rc;
}
