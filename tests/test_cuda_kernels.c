/* tests/test_cuda_kernels.c — every CUDA kernel (kernels/cuda) against its CPU twin
 * (kernels) on random data with odd sizes, forward and backward, fp32 and bf16; each GPU
 * result computed twice and required bitwise equal (determinism); the kernels said to be bitwise
 * the CPU's (conversions, clip, scale, zero, encoder and embedding sums) checked bitwise.
 * The CPU twins themselves are checked against double references and finite differences by
 * tests/test_kernels.c. Exits 77 (skipped) when no CUDA device is present (cudaGetDeviceCount
 * fails or gives 0).
 * The native bf16 path's twins (the _mx entry points) against the CPU's _mx kernels, each in its own
 * test function and suite.
 * Written without a GPU at hand: it has not yet run on one. Without a GPU it runs on the host CUDA
 * emulation instead (tests/cuda_emu: ctest cuda_kernels_emu_forward / _reverse), which executes
 * the kernels' own source with the hardware's barrier and shuffle rules. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include "sz_cuda_kernels.h"
#include "sz_kernels.h"
#include "sz_kernels_impl.h"
#include "sz_test.h"

/* ---------------------------------------------------------------- helpers */

static cudaStream_t S;
static cublasHandle_t H;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static float *rnd(size_t n, float scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}
static float *copyf(const float *x, size_t n)
{
    float *d = malloc((n ? n : 1) * sizeof *d);
    memcpy(d, x, n * sizeof *d);
    return d;
}
static double *dbl(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}
static uint16_t *bf16_of(const float *x, size_t n)
{
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    sz_k_f32_to_bf16(h, x, n);
    return h;
}
static int *tokens(size_t n, int V)
{
    int *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = (int)((frand() + 1.0f) * 0.5f * V) % V;
    return t;
}

static void *hdup(const void *p, size_t bytes)
{
    void *d = malloc(bytes ? bytes : 1);
    memcpy(d, p, bytes);
    return d;
}
#define CUOK(x) CU_ASSERT_EQUAL_FATAL((int)(x), 0)
static void *dput(const void *h, size_t bytes)
{
    void *d = NULL;
    CUOK(cudaMalloc(&d, bytes ? bytes : 4));
    if (h && bytes)
        CUOK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static void dget(void *h, const void *d, size_t bytes)
{
    CUOK(cudaStreamSynchronize(S));
    CUOK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}
static void dfree(void *d) { CUOK(cudaFree(d)); }

/* |g - c| <= atol + rtol |c| everywhere; prints the worst element. */
static int close_f(const char *what, const float *g, const float *c, size_t n, double atol, double rtol)
{
    double worst = 0.0;
    size_t wi = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)g[i] - c[i]), lim = atol + rtol * fabs((double)c[i]);
        if (!(e <= lim))
            ok = 0;
        if (!(e <= worst))
            worst = e, wi = i;
    }
    if (!ok || getenv("SZ_TEST_VERBOSE"))
        printf("\n  %s: max |gpu - ref| = %.3g at %zu (gpu %.9g, ref %.9g)%s", what, worst, wi, n ? g[wi] : 0.0,
               n ? c[wi] : 0.0, ok ? "" : "  FAILED");
    return ok;
}
static int close_d(const char *what, const float *g, const double *c, size_t n, double atol, double rtol)
{
    float *cf = malloc((n ? n : 1) * sizeof *cf);
    for (size_t i = 0; i < n; i++)
        cf[i] = (float)c[i];
    int ok = close_f(what, g, cf, n, atol, rtol);
    free(cf);
    return ok;
}
static int same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    int ok = memcmp(a, b, bytes) == 0;
    if (!ok)
        printf("\n  %s: not bitwise equal", what);
    return ok;
}
/* bf16 arrays within k units in the last place of the reference (or an absolute atol). */
static int close_h(const char *what, const uint16_t *g, const uint16_t *c, size_t n, double atol)
{
    float *gf = malloc((n ? n : 1) * 4), *cf = malloc((n ? n : 1) * 4);
    sz_k_bf16_to_f32(gf, g, n);
    sz_k_bf16_to_f32(cf, c, n);
    int ok = close_f(what, gf, cf, n, atol, 1.0 / 128); /* 2 ulp of an 8-bit mantissa */
    free(gf);
    free(cf);
    return ok;
}

/* ---------------------------------------------------------------- encoder, embedding */

static void gpu_encoder(const int *tok, const float *wte, const float *wpe, const float *dout, const float *dwte0,
                        const float *dwpe0, float *out, float *dwte, float *dwpe, int B, int T, int C, int V,
                        int maxT)
{
    size_t BTC = (size_t)B * T * C;
    int *dt = dput(tok, (size_t)B * T * 4);
    float *dwt = dput(wte, (size_t)V * C * 4), *dwp = dput(wpe, (size_t)maxT * C * 4), *dd = dput(dout, BTC * 4);
    float *gwt = dput(dwte0, (size_t)V * C * 4), *gwp = dput(dwpe0, (size_t)maxT * C * 4), *dout_d = dput(NULL, BTC * 4);
    CUOK(sz_cuda_encoder_fwd(S, dout_d, dt, dwt, dwp, B, T, C));
    CUOK(sz_cuda_encoder_bwd(S, gwt, gwp, dd, dt, B, T, C));
    dget(out, dout_d, BTC * 4);
    dget(dwte, gwt, (size_t)V * C * 4);
    dget(dwpe, gwp, (size_t)maxT * C * 4);
    dfree(dt), dfree(dwt), dfree(dwp), dfree(dd), dfree(gwt), dfree(gwp), dfree(dout_d);
}

static void test_encoder(void)
{
    int B = 3, T = 7, C = 37, V = 11, maxT = 9;
    size_t BTC = (size_t)B * T * C;
    int *tok = tokens((size_t)B * T, V);
    tok[0] = tok[1] = tok[5] = 3; /* repeated tokens: the sums that need an order */
    float *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)maxT * C, 1), *dout = rnd(BTC, 1);
    float *dwte0 = rnd((size_t)V * C, 1), *dwpe0 = rnd((size_t)maxT * C, 1);
    float *out = malloc(BTC * 4), *dwte = copyf(dwte0, (size_t)V * C), *dwpe = copyf(dwpe0, (size_t)maxT * C);
    sz_k_encoder_fwd(out, tok, wte, wpe, B, T, C);
    sz_k_encoder_bwd(dwte, dwpe, dout, tok, B, T, C);
    float *g[2][3];
    for (int r = 0; r < 2; r++) {
        g[r][0] = malloc(BTC * 4), g[r][1] = malloc((size_t)V * C * 4), g[r][2] = malloc((size_t)maxT * C * 4);
        gpu_encoder(tok, wte, wpe, dout, dwte0, dwpe0, g[r][0], g[r][1], g[r][2], B, T, C, V, maxT);
    }
    CU_ASSERT(same_bits("encoder out vs cpu", g[0][0], out, BTC * 4));
    CU_ASSERT(same_bits("encoder dwte vs cpu", g[0][1], dwte, (size_t)V * C * 4));
    CU_ASSERT(same_bits("encoder dwpe vs cpu", g[0][2], dwpe, (size_t)maxT * C * 4));
    for (int k = 0; k < 3; k++)
        CU_ASSERT(same_bits("encoder run to run", g[0][k], g[1][k], k == 0 ? BTC * 4 : k == 1 ? (size_t)V * C * 4 : (size_t)maxT * C * 4));
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            free(g[r][k]);
    free(tok), free(wte), free(wpe), free(dout), free(dwte0), free(dwpe0), free(out), free(dwte), free(dwpe);
}

static void test_embedding(void)
{
    int N = 29, C = 45, V = 7;
    int *tok = tokens((size_t)N, V);
    tok[0] = tok[3] = tok[4] = 2;
    float *wte = rnd((size_t)V * C, 1), *dout = rnd((size_t)N * C, 1), *dw0 = rnd((size_t)V * C, 1);
    float *ref = malloc((size_t)N * C * 4), *dref = copyf(dw0, (size_t)V * C);
    CU_ASSERT(sz_k_embedding_fwd(ref, tok, wte, N, C, V) == -1);
    CU_ASSERT(sz_k_embedding_bwd(dref, dout, tok, N, C, V) == -1);
    int *dt = dput(tok, (size_t)N * 4);
    float *dwte = dput(wte, (size_t)V * C * 4), *dd = dput(dout, (size_t)N * C * 4), *dg = dput(dw0, (size_t)V * C * 4);
    float *dout_d = dput(NULL, (size_t)N * C * 4);
    CUOK(sz_cuda_embedding_fwd(S, dout_d, dt, dwte, N, C, V));
    CUOK(sz_cuda_embedding_bwd(S, dg, dd, dt, N, C, V));
    float *out = malloc((size_t)N * C * 4), *dw = malloc((size_t)V * C * 4);
    dget(out, dout_d, (size_t)N * C * 4);
    dget(dw, dg, (size_t)V * C * 4);
    CU_ASSERT(same_bits("embedding out vs cpu", out, ref, (size_t)N * C * 4));
    CU_ASSERT(same_bits("embedding dwte vs cpu", dw, dref, (size_t)V * C * 4));
    dfree(dt), dfree(dwte), dfree(dd), dfree(dg), dfree(dout_d);
    free(tok), free(wte), free(dout), free(dw0), free(ref), free(dref), free(out), free(dw);
}

/* ---------------------------------------------------------------- layernorm, rmsnorm */

static void gpu_layernorm(const float *x, const float *w, const float *b, const float *dout, const float *dinp0,
                          const float *dw0, const float *db0, float *o[6], int N, int C)
{
    size_t NC = (size_t)N * C;
    float *dx = dput(x, NC * 4), *dw = dput(w, C * 4), *db = dput(b, C * 4), *dd = dput(dout, NC * 4);
    float *gi = dput(dinp0, NC * 4), *gw = dput(dw0, C * 4), *gb = dput(db0, C * 4);
    float *out = dput(NULL, NC * 4), *mean = dput(NULL, N * 4), *rstd = dput(NULL, N * 4);
    CUOK(sz_cuda_layernorm_fwd(S, out, mean, rstd, dx, dw, db, N, C));
    CUOK(sz_cuda_layernorm_bwd(S, gi, gw, gb, dd, dx, dw, mean, rstd, N, C));
    dget(o[0], out, NC * 4), dget(o[1], mean, N * 4), dget(o[2], rstd, N * 4);
    dget(o[3], gi, NC * 4), dget(o[4], gw, C * 4), dget(o[5], gb, C * 4);
    dfree(dx), dfree(dw), dfree(db), dfree(dd), dfree(gi), dfree(gw), dfree(gb), dfree(out), dfree(mean), dfree(rstd);
}

static void test_layernorm(void)
{
    int N = 19, C = 77;
    size_t NC = (size_t)N * C, sz[6] = {NC, N, N, NC, C, C};
    float *x = rnd(NC, 2), *w = rnd(C, 1), *b = rnd(C, 1), *dout = rnd(NC, 1);
    float *di0 = rnd(NC, 1), *dw0 = rnd(C, 1), *db0 = rnd(C, 1);
    float *c[6] = {malloc(NC * 4), malloc(N * 4), malloc(N * 4), copyf(di0, NC), copyf(dw0, C), copyf(db0, C)};
    sz_k_layernorm_fwd(c[0], c[1], c[2], x, w, b, N, C);
    sz_k_layernorm_bwd(c[3], c[4], c[5], dout, x, w, c[1], c[2], N, C);
    float *g[2][6];
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 6; k++)
            g[r][k] = malloc(sz[k] * 4);
        gpu_layernorm(x, w, b, dout, di0, dw0, db0, g[r], N, C);
    }
    const char *names[6] = {"layernorm out", "mean", "rstd", "dinp", "dweight", "dbias"};
    for (int k = 0; k < 6; k++) {
        CU_ASSERT(close_f(names[k], g[0][k], c[k], sz[k], 2e-5, 2e-5));
        CU_ASSERT(same_bits(names[k], g[0][k], g[1][k], sz[k] * 4));
    }
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 6; k++)
            free(g[r][k]);
    for (int k = 0; k < 6; k++)
        free(c[k]);
    free(x), free(w), free(b), free(dout), free(di0), free(dw0), free(db0);
}

static void test_rmsnorm(void)
{
    int N = 17, C = 93;
    size_t NC = (size_t)N * C;
    float eps = 1e-6f;
    float *x = rnd(NC, 2), *w = rnd(C, 1), *d = rnd(NC, 1), *di0 = rnd(NC, 1), *dw0 = rnd(C, 1);
    float *out = malloc(NC * 4), *r = malloc(N * 4), *dx = copyf(di0, NC), *dw = copyf(dw0, C);
    sz_k_rmsnorm_fwd(out, r, x, w, N, C, eps);
    sz_k_rmsnorm_bwd(dx, dw, d, x, w, r, N, C);
    float *g[2][4];
    for (int k = 0; k < 2; k++) {
        float *gx = dput(x, NC * 4), *gw = dput(w, C * 4), *gd = dput(d, NC * 4), *gi = dput(di0, NC * 4);
        float *gdw = dput(dw0, C * 4), *go = dput(NULL, NC * 4), *gr = dput(NULL, N * 4);
        CUOK(sz_cuda_rmsnorm_fwd(S, go, gr, gx, gw, N, C, eps));
        CUOK(sz_cuda_rmsnorm_bwd(S, gi, gdw, gd, gx, gw, gr, N, C));
        g[k][0] = malloc(NC * 4), g[k][1] = malloc(N * 4), g[k][2] = malloc(NC * 4), g[k][3] = malloc(C * 4);
        dget(g[k][0], go, NC * 4), dget(g[k][1], gr, N * 4), dget(g[k][2], gi, NC * 4), dget(g[k][3], gdw, C * 4);
        dfree(gx), dfree(gw), dfree(gd), dfree(gi), dfree(gdw), dfree(go), dfree(gr);
    }
    CU_ASSERT(close_f("rmsnorm out", g[0][0], out, NC, 1e-5, 1e-5));
    CU_ASSERT(close_f("rmsnorm rstd", g[0][1], r, N, 1e-5, 1e-5));
    CU_ASSERT(close_f("rmsnorm dinp", g[0][2], dx, NC, 2e-5, 2e-5));
    CU_ASSERT(close_f("rmsnorm dweight", g[0][3], dw, C, 2e-5, 2e-5));
    size_t sz[4] = {NC, N, NC, C};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT(same_bits("rmsnorm run to run", g[0][k], g[1][k], sz[k] * 4));
        free(g[0][k]), free(g[1][k]);
    }
    free(x), free(w), free(d), free(di0), free(dw0), free(out), free(r), free(dx), free(dw);
}

/* ---------------------------------------------------------------- matmul fp32, bf16 */

static void matmul_case_f32(int N, int C, int OC, int with_bias)
{
    float *x = rnd((size_t)N * C, 1), *w = rnd((size_t)OC * C, 1), *b = with_bias ? rnd(OC, 1) : NULL;
    float *dout = rnd((size_t)N * OC, 1), *di0 = rnd((size_t)N * C, 1), *dw0 = rnd((size_t)OC * C, 1), *db0 = rnd(OC, 1);
    float *out = malloc((size_t)N * OC * 4), *di = copyf(di0, (size_t)N * C), *dw = copyf(dw0, (size_t)OC * C);
    float *db = copyf(db0, OC);
    CU_ASSERT(sz_k_matmul_fwd(out, x, w, b, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_bwd(di, dw, with_bias ? db : NULL, dout, x, w, N, C, OC) >= 0);
    float *g[2][4];
    for (int r = 0; r < 2; r++) {
        float *gx = dput(x, (size_t)N * C * 4), *gw = dput(w, (size_t)OC * C * 4), *gb = b ? dput(b, OC * 4) : NULL;
        float *gd = dput(dout, (size_t)N * OC * 4), *gi = dput(di0, (size_t)N * C * 4);
        float *gdw = dput(dw0, (size_t)OC * C * 4), *gdb = dput(db0, OC * 4), *go = dput(NULL, (size_t)N * OC * 4);
        CUOK(sz_cuda_matmul_fwd(H, S, go, gx, gw, gb, N, C, OC));
        CUOK(sz_cuda_matmul_bwd(H, S, gi, gdw, with_bias ? gdb : NULL, gd, gx, gw, N, C, OC));
        g[r][0] = malloc((size_t)N * OC * 4), g[r][1] = malloc((size_t)N * C * 4);
        g[r][2] = malloc((size_t)OC * C * 4), g[r][3] = malloc(OC * 4);
        dget(g[r][0], go, (size_t)N * OC * 4), dget(g[r][1], gi, (size_t)N * C * 4);
        dget(g[r][2], gdw, (size_t)OC * C * 4), dget(g[r][3], gdb, OC * 4);
        dfree(gx), dfree(gw), dfree(gd), dfree(gi), dfree(gdw), dfree(gdb), dfree(go);
        if (gb)
            dfree(gb);
    }
    /* fp32 products: errors grow with the reduction length */
    CU_ASSERT(close_f("matmul out", g[0][0], out, (size_t)N * OC, 1e-5 * C, 1e-5));
    CU_ASSERT(close_f("matmul dinp", g[0][1], di, (size_t)N * C, 1e-5 * OC, 1e-5));
    CU_ASSERT(close_f("matmul dweight", g[0][2], dw, (size_t)OC * C, 1e-5 * N, 1e-5));
    if (with_bias) { /* the bias gradient's rows summed in another fixed order */
        CU_ASSERT(close_f("matmul dbias", g[0][3], db, OC, 1e-5 * N, 1e-5));
    } else {
        CU_ASSERT(same_bits("matmul dbias untouched without a bias", g[0][3], db0, OC * 4));
    }
    size_t sz[4] = {(size_t)N * OC, (size_t)N * C, (size_t)OC * C, OC};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT(same_bits("matmul run to run", g[0][k], g[1][k], sz[k] * 4));
        free(g[0][k]), free(g[1][k]);
    }
    free(x), free(w), free(b), free(dout), free(di0), free(dw0), free(db0), free(out), free(di), free(dw), free(db);
}

static void test_matmul_f32(void)
{
    matmul_case_f32(37, 53, 29, 1);
    matmul_case_f32(64, 96, 160, 0);
    matmul_case_f32(1, 7, 3, 1);
}

/* bf16 operands; out / dinp / (dweight, dbias) types out_dt, dparam_dt. */
static void matmul_case_bf16(int N, int C, int OC, int out_dt, int dparam_dt)
{
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    uint16_t *x = bf16_of(rnd(NC, 1), NC), *w = bf16_of(rnd(OCC, 1), OCC), *b = bf16_of(rnd(OC, 1), OC);
    uint16_t *dout = bf16_of(rnd(NO, 1), NO);
    size_t eo = out_dt ? 2 : 4, ep = dparam_dt ? 2 : 4;
    /* initial gradients, in their type */
    float *fi0 = rnd(NC, 1), *fw0 = rnd(OCC, 1), *fb0 = rnd(OC, 1);
    void *di0 = out_dt ? (void *)bf16_of(fi0, NC) : (void *)fi0;
    void *dw0 = dparam_dt ? (void *)bf16_of(fw0, OCC) : (void *)fw0;
    void *db0 = dparam_dt ? (void *)bf16_of(fb0, OC) : (void *)fb0;
    void *out = malloc(NO * eo), *di = malloc(NC * eo), *dw = malloc(OCC * ep), *db = malloc(OC * ep);
    memcpy(di, di0, NC * eo), memcpy(dw, dw0, OCC * ep), memcpy(db, db0, OC * ep);
    CU_ASSERT(sz_k_matmul_fwd_bf16(out, (sz_k_dtype)out_dt, x, w, b, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_bwd_bf16(di, (sz_k_dtype)out_dt, dw, db, (sz_k_dtype)dparam_dt, dout, x, w, N, C, OC) >= 0);
    void *g[2][4];
    for (int r = 0; r < 2; r++) {
        void *gx = dput(x, NC * 2), *gw = dput(w, OCC * 2), *gb = dput(b, OC * 2), *gd = dput(dout, NO * 2);
        void *gi = dput(di0, NC * eo), *gdw = dput(dw0, OCC * ep), *gdb = dput(db0, OC * ep), *go = dput(NULL, NO * eo);
        CUOK(sz_cuda_matmul_fwd_bf16(H, S, go, out_dt, gx, gw, gb, N, C, OC));
        CUOK(sz_cuda_matmul_bwd_bf16(H, S, gi, out_dt, gdw, gdb, dparam_dt, gd, gx, gw, N, C, OC));
        g[r][0] = malloc(NO * eo), g[r][1] = malloc(NC * eo), g[r][2] = malloc(OCC * ep), g[r][3] = malloc(OC * ep);
        dget(g[r][0], go, NO * eo), dget(g[r][1], gi, NC * eo), dget(g[r][2], gdw, OCC * ep), dget(g[r][3], gdb, OC * ep);
        dfree(gx), dfree(gw), dfree(gb), dfree(gd), dfree(gi), dfree(gdw), dfree(gdb), dfree(go);
    }
    void *c[4] = {out, di, dw, db};
    size_t n[4] = {NO, NC, OCC, OC}, es[4] = {eo, eo, ep, ep};
    int k_of[4] = {C, OC, N, N};
    for (int k = 0; k < 4; k++) {
        if (es[k] == 2) {
            CU_ASSERT(close_h("matmul bf16 (bf16 result)", g[0][k], c[k], n[k], 1e-3 * k_of[k] / 32.0));
        } else {
            CU_ASSERT(close_f("matmul bf16 (fp32 result)", g[0][k], c[k], n[k], 1e-5 * k_of[k], 1e-5));
        }
        CU_ASSERT(same_bits("matmul bf16 run to run", g[0][k], g[1][k], n[k] * es[k]));
        free(g[0][k]), free(g[1][k]);
    }
    free(x), free(w), free(b), free(dout), free(out), free(di), free(dw), free(db);
    if (out_dt)
        free(di0);
    if (dparam_dt)
        free(dw0), free(db0);
    free(fi0), free(fw0), free(fb0);
}

static void test_matmul_bf16(void)
{
    for (int od = 0; od < 2; od++)
        for (int pd = 0; pd < 2; pd++)
            matmul_case_bf16(33, 47, 21, od, pd);
    matmul_case_bf16(128, 64, 192, 1, 0);
}

/* ---------------------------------------------------------------- attention
 * The CUDA kernels keep llm.c's preatt/att [B,NH,T,T]: their CPU twins are the _tt kernels. */

/* The entry points' default choice: the tiled fp32 kernels for hs 64, the rowwise ones for 37 and 256. */
static void attention_case(int B, int T, int NH, int hs)
{
    int C = NH * hs;
    size_t ni = (size_t)B * T * 3 * C, no = (size_t)B * T * C, ns = (size_t)B * NH * T * 2;
    float *inp = rnd(ni, 1), *dout = rnd(no, 1), *di0 = rnd(ni, 1);
    float *out = malloc(no * 4), *st = malloc(ns * 4), *di = copyf(di0, ni);
    CU_ASSERT(sz_k_attention_fwd(out, st, inp, B, T, C, NH) == 0);
    CU_ASSERT(sz_k_attention_bwd(di, dout, inp, st, B, T, C, NH) == 0);
    float *g[2][3];
    for (int r = 0; r < 2; r++) {
        float *gi = dput(inp, ni * 4), *gd = dput(dout, no * 4), *gdi = dput(di0, ni * 4);
        float *go = dput(NULL, no * 4), *gs = dput(NULL, ns * 4);
        CUOK(sz_cuda_attention_fwd(S, go, gs, gi, B, T, C, NH));
        CUOK(sz_cuda_attention_bwd(S, gdi, gd, gi, gs, B, T, C, NH));
        g[r][0] = malloc(no * 4), g[r][1] = malloc(ns * 4), g[r][2] = malloc(ni * 4);
        dget(g[r][0], go, no * 4), dget(g[r][1], gs, ns * 4), dget(g[r][2], gdi, ni * 4);
        dfree(gi), dfree(gd), dfree(gdi), dfree(go), dfree(gs);
    }
    CU_ASSERT(close_f("attention out", g[0][0], out, no, 1e-5, 1e-4));
    CU_ASSERT(close_f("attention stats (max, 1/sum)", g[0][1], st, ns, 1e-6, 1e-5));
    CU_ASSERT(close_f("attention dinp", g[0][2], di, ni, 1e-5 * T, 1e-4));
    size_t n[3] = {no, ns, ni};
    for (int k = 0; k < 3; k++) {
        CU_ASSERT(same_bits("attention run to run", g[0][k], g[1][k], n[k] * 4));
        free(g[0][k]), free(g[1][k]);
    }
    free(inp), free(dout), free(di0), free(out), free(st), free(di);
}

static void test_attention(void)
{
    attention_case(2, 13, 3, 37); /* odd head size, fewer rows than threads */
    attention_case(1, 300, 2, 64); /* rows beyond one pass of the block */
    attention_case(1, 5, 1, 256);  /* the largest head */
}

/* ---------------------------------------------------------------- elementwise */

static void test_gelu_residual(void)
{
    size_t n = 1001;
    float *x = rnd(n, 4), *y = rnd(n, 1), *d = rnd(n, 1), *g0 = rnd(n, 1), *h0 = rnd(n, 1);
    float *co = malloc(n * 4), *cg = copyf(g0, n), *cr = malloc(n * 4), *ca = copyf(g0, n), *cb = copyf(h0, n);
    sz_k_gelu_fwd(co, x, n);
    sz_k_gelu_bwd(cg, x, d, n);
    sz_k_residual_fwd(cr, x, y, n);
    sz_k_residual_bwd(ca, cb, d, n);
    float *gx = dput(x, n * 4), *gy = dput(y, n * 4), *gd = dput(d, n * 4), *gg = dput(g0, n * 4);
    float *ga = dput(g0, n * 4), *gb = dput(h0, n * 4), *go = dput(NULL, n * 4), *gr = dput(NULL, n * 4);
    CUOK(sz_cuda_gelu_fwd(S, go, gx, n));
    CUOK(sz_cuda_gelu_bwd(S, gg, gx, gd, n));
    CUOK(sz_cuda_residual_fwd(S, gr, gx, gy, n));
    CUOK(sz_cuda_residual_bwd(S, ga, gb, gd, n));
    float *o = malloc(n * 4), *gl = malloc(n * 4), *r = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    dget(o, go, n * 4), dget(gl, gg, n * 4), dget(r, gr, n * 4), dget(a, ga, n * 4), dget(b, gb, n * 4);
    CU_ASSERT(close_f("gelu out", o, co, n, 1e-6, 1e-5));
    CU_ASSERT(close_f("gelu dinp", gl, cg, n, 1e-6, 1e-5));
    CU_ASSERT(same_bits("residual out", r, cr, n * 4));
    CU_ASSERT(same_bits("residual da", a, ca, n * 4));
    CU_ASSERT(same_bits("residual db", b, cb, n * 4));
    /* gelu_bwd in place (gelu_matmul_bwd's second half) = gelu_bwd into a zeroed dinp, bitwise; rows of
     * zeros with gelu' < 0 give +0.0 in both */
    for (size_t i = 0; i < n; i += 4) d[i] = 0.0f, x[i] = -1.5f;
    float *gz = dput(NULL, n * 4), *gi = dput(d, n * 4), *gx2 = dput(x, n * 4), *gd2 = dput(d, n * 4);
    float *z = malloc(n * 4), *ip = malloc(n * 4);
    CUOK(sz_cuda_zero(S, gz, n * 4));
    CUOK(sz_cuda_gelu_bwd(S, gz, gx2, gd2, n));
    CUOK(sz_cuda_gelu_bwd_inplace(S, gi, gx2, n));
    dget(z, gz, n * 4), dget(ip, gi, n * 4);
    CU_ASSERT(same_bits("gelu dinp in place", ip, z, n * 4));
    dfree(gz), dfree(gi), dfree(gx2), dfree(gd2), free(z), free(ip);
    dfree(gx), dfree(gy), dfree(gd), dfree(gg), dfree(ga), dfree(gb), dfree(go), dfree(gr);
    free(x), free(y), free(d), free(g0), free(h0), free(co), free(cg), free(cr), free(ca), free(cb);
    free(o), free(gl), free(r), free(a), free(b);
}

static void test_silu_mul(void)
{
    size_t n = 777;
    float *x = rnd(n, 4), *y = rnd(n, 2), *d = rnd(n, 1), *g0 = rnd(n, 1), *h0 = rnd(n, 1);
    float *so = malloc(n * 4), *sg = copyf(g0, n), *mo = malloc(n * 4), *ma = copyf(g0, n), *mb = copyf(h0, n);
    sz_k_silu_fwd(so, x, n);
    sz_k_silu_bwd(sg, x, d, n);
    sz_k_mul_fwd(mo, x, y, n);
    sz_k_mul_bwd(ma, mb, d, x, y, n);
    float *gx = dput(x, n * 4), *gy = dput(y, n * 4), *gd = dput(d, n * 4), *gs = dput(g0, n * 4);
    float *ga = dput(g0, n * 4), *gb = dput(h0, n * 4), *go = dput(NULL, n * 4), *gm = dput(NULL, n * 4);
    CUOK(sz_cuda_silu_fwd(S, go, gx, n));
    CUOK(sz_cuda_silu_bwd(S, gs, gx, gd, n));
    CUOK(sz_cuda_mul_fwd(S, gm, gx, gy, n));
    CUOK(sz_cuda_mul_bwd(S, ga, gb, gd, gx, gy, n));
    float *o = malloc(n * 4), *s = malloc(n * 4), *m = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    dget(o, go, n * 4), dget(s, gs, n * 4), dget(m, gm, n * 4), dget(a, ga, n * 4), dget(b, gb, n * 4);
    CU_ASSERT(close_f("silu out", o, so, n, 1e-6, 1e-5));
    CU_ASSERT(close_f("silu dinp", s, sg, n, 1e-6, 1e-5));
    CU_ASSERT(close_f("mul out", m, mo, n, 1e-7, 1e-6));
    CU_ASSERT(close_f("mul da", a, ma, n, 1e-7, 1e-6));
    CU_ASSERT(close_f("mul db", b, mb, n, 1e-7, 1e-6));
    dfree(gx), dfree(gy), dfree(gd), dfree(gs), dfree(ga), dfree(gb), dfree(go), dfree(gm);
    free(x), free(y), free(d), free(g0), free(h0), free(so), free(sg), free(mo), free(ma), free(mb);
    free(o), free(s), free(m), free(a), free(b);
}

/* SwiGLU fp32 (kernels/swiglu.c's formula; the device's expf against libm's: to rounding), odd n,
 * several blocks; gradients accumulate onto random values; run to run bitwise. */
static void test_swiglu(void)
{
    size_t n = 5003;
    float *g = rnd(n, 6), *u = rnd(n, 2), *d = rnd(n, 1), *a0 = rnd(n, 1), *b0 = rnd(n, 1);
    g[0] = 0.0f, g[1] = -90.0f, g[2] = 90.0f; /* e^-g overflows / underflows */
    float *co = malloc(n * 4), *ca = copyf(a0, n), *cb = copyf(b0, n);
    sz_k_swiglu_fwd(co, g, u, n);
    sz_k_swiglu_bwd(ca, cb, d, g, u, n);
    float *o[2], *a[2], *b[2];
    for (int r = 0; r < 2; r++) {
        float *gg = dput(g, n * 4), *gu = dput(u, n * 4), *gd = dput(d, n * 4), *ga = dput(a0, n * 4);
        float *gb = dput(b0, n * 4), *go = dput(NULL, n * 4);
        CUOK(sz_cuda_swiglu_fwd(S, go, gg, gu, n));
        CUOK(sz_cuda_swiglu_bwd(S, ga, gb, gd, gg, gu, n));
        o[r] = malloc(n * 4), a[r] = malloc(n * 4), b[r] = malloc(n * 4);
        dget(o[r], go, n * 4), dget(a[r], ga, n * 4), dget(b[r], gb, n * 4);
        dfree(gg), dfree(gu), dfree(gd), dfree(ga), dfree(gb), dfree(go);
    }
    CU_ASSERT(close_f("swiglu out", o[0], co, n, 1e-6, 1e-5));
    CU_ASSERT(close_f("swiglu dgate", a[0], ca, n, 1e-6, 1e-5));
    CU_ASSERT(close_f("swiglu dup", b[0], cb, n, 1e-6, 1e-5));
    CU_ASSERT(same_bits("swiglu out run to run", o[0], o[1], n * 4));
    CU_ASSERT(same_bits("swiglu dgate run to run", a[0], a[1], n * 4));
    CU_ASSERT(same_bits("swiglu dup run to run", b[0], b[1], n * 4));
    CU_ASSERT(sz_cuda_swiglu_fwd(S, NULL, NULL, NULL, 0) == 0); /* n = 0: nothing launched */
    for (int r = 0; r < 2; r++) free(o[r]), free(a[r]), free(b[r]);
    free(g), free(u), free(d), free(a0), free(b0), free(co), free(ca), free(cb);
}

/* ---------------------------------------------------------------- rope */

static void test_rope(void)
{
    int B = 2, T = 19, C = 3 * 10, NH = 3;
    size_t n = (size_t)B * T * 3 * C;
    float *x = rnd(n, 1), *d = rnd(n, 1), *di0 = rnd(n, 1), *ref = malloc(n * 4), *dref = copyf(di0, n);
    CU_ASSERT(sz_k_rope_fwd(ref, x, B, T, C, NH, 10000.0f) == 0);
    CU_ASSERT(sz_k_rope_bwd(dref, d, B, T, C, NH, 10000.0f) == 0);
    float *gx = dput(x, n * 4), *gd = dput(d, n * 4), *gi = dput(di0, n * 4), *go = dput(NULL, n * 4);
    float *out = malloc(n * 4), *din = malloc(n * 4);
    CUOK(sz_cuda_rope_fwd(S, go, gx, B, T, C, NH, 10000.0f));
    CUOK(sz_cuda_rope_bwd(S, gi, gd, B, T, C, NH, 10000.0f));
    dget(out, go, n * 4), dget(din, gi, n * 4);
    CU_ASSERT(close_f("rope fwd", out, ref, n, 1e-6, 1e-6));
    CU_ASSERT(close_f("rope bwd", din, dref, n, 1e-6, 1e-6));
    CU_ASSERT(sz_cuda_rope_fwd(S, go, gx, B, T, 3 * 9, NH, 10000.0f) != 0); /* odd head size refused */
    dfree(gx), dfree(gd), dfree(gi), dfree(go);
    free(x), free(d), free(di0), free(ref), free(dref), free(out), free(din);
}

/* ---------------------------------------------------------------- losses */

static void test_softmax_xent(void)
{
    int N = 7, V = 1000, Vp = 1024;
    size_t n = (size_t)N * Vp;
    float *logits = rnd(n, 8), *dloss = rnd(N, 1);
    int *tg = tokens(N, V);
    float *probs = malloc(n * 4), *losses = malloc(N * 4), *dl = malloc(n * 4);
    sz_k_softmax_xent_fwd(probs, losses, logits, tg, N, V, Vp);
    sz_k_softmax_xent_bwd(dl, probs, tg, dloss, N, V, Vp);
    float *gp[2], *gl[2], *gd = malloc(n * 4), *gd1 = malloc(n * 4);
    for (int r = 0; r < 2; r++) {
        float *dlog = dput(logits, n * 4), *dp = dput(NULL, n * 4), *dls = dput(NULL, N * 4);
        int *dt = dput(tg, N * 4);
        CUOK(sz_cuda_softmax_xent_fwd(S, dp, dls, dlog, dt, N, V, Vp));
        gp[r] = malloc(n * 4), gl[r] = malloc(N * 4);
        dget(gp[r], dp, n * 4), dget(gl[r], dls, N * 4);
        if (r == 0) { /* the backward from the CPU's probs, so that only the backward is compared */
            float *dd = dput(dloss, N * 4), *cp = dput(probs, n * 4), *out = dput(NULL, n * 4);
            CUOK(sz_cuda_softmax_xent_bwd(S, out, cp, dt, dd, 0.0f, N, V, Vp));
            dget(gd, out, n * 4);
            CUOK(sz_cuda_softmax_xent_bwd(S, out, cp, dt, NULL, 0.25f, N, V, Vp));
            dget(gd1, out, n * 4);
            dfree(dd), dfree(cp), dfree(out);
        }
        dfree(dlog), dfree(dp), dfree(dls), dfree(dt);
    }
    CU_ASSERT(close_f("softmax probs", gp[0], probs, n, 1e-8, 1e-5));
    CU_ASSERT(close_f("xent losses", gl[0], losses, N, 1e-5, 1e-5));
    CU_ASSERT(same_bits("softmax probs run to run", gp[0], gp[1], n * 4));
    CU_ASSERT(same_bits("xent losses run to run", gl[0], gl[1], N * 4));
    CU_ASSERT(same_bits("xent dlogits", gd, dl, n * 4));
    for (int i = 0; i < N; i++)
        dloss[i] = 0.25f;
    sz_k_softmax_xent_bwd(dl, probs, tg, dloss, N, V, Vp);
    CU_ASSERT(same_bits("xent dlogits (one dloss)", gd1, dl, n * 4));
    free(logits), free(dloss), free(tg), free(probs), free(losses), free(dl), free(gd), free(gd1);
    for (int r = 0; r < 2; r++)
        free(gp[r]), free(gl[r]);
}

static void test_mse(void)
{
    int N = 9, C = 71;
    size_t n = (size_t)N * C;
    float *p = rnd(n, 2), *y = rnd(n, 2), *lref = malloc(N * 4), *dref = malloc(n * 4);
    sz_k_mse_fwd(lref, p, y, N, C);
    sz_k_mse_bwd(dref, p, y, 0.3f, N, C);
    float *gp = dput(p, n * 4), *gy = dput(y, n * 4), *gl = dput(NULL, N * 4);
    float *gd = dput(NULL, n * 4), *l = malloc(N * 4), *d = malloc(n * 4);
    CUOK(sz_cuda_mse_fwd(S, gl, gp, gy, N, C));
    CUOK(sz_cuda_mse_bwd(S, gd, gp, gy, 0.3f, N, C));
    dget(l, gl, N * 4), dget(d, gd, n * 4);
    CU_ASSERT(same_bits("mse losses vs cpu", l, lref, N * 4));
    CU_ASSERT(close_f("mse dpred", d, dref, n, 1e-7, 1e-6));
    dfree(gp), dfree(gy), dfree(gl), dfree(gd);
    free(p), free(y), free(lref), free(dref), free(l), free(d);
}

/* ---------------------------------------------------------------- optimizers, norms */

static void test_adamw(void)
{
    size_t n = 2 * 65536 + 123; /* three chunks, the last partial */
    float *p0 = rnd(n, 1), *gr = rnd(n, 0.1f), *m0 = rnd(n, 0.01f), *v0 = rnd(n, 0.01f), scale = 0.7f;
    for (size_t i = 0; i < n; i++)
        v0[i] = fabsf(v0[i]);
    float *p = copyf(p0, n), *m = copyf(m0, n), *v = copyf(v0, n);
    double ss = 0;
    CU_ASSERT(sz_k_adamw_step(p, gr, m, v, n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, scale, &ss) == 0);
    float *g[2][4];
    for (int r = 0; r < 2; r++) {
        float *dp = dput(p0, n * 4), *dg = dput(gr, n * 4), *dm = dput(m0, n * 4), *dv = dput(v0, n * 4);
        float *dsc = dput(&scale, 4), *dss = dput(NULL, 8);
        CUOK(sz_cuda_adamw(S, dp, dg, dm, dv, n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, dsc, dss, 0));
        CUOK(sz_cuda_sumsq(S, dss + 1, dg, SZ_CUDA_F32, (int64_t)n, 0));
        g[r][0] = malloc(n * 4), g[r][1] = malloc(n * 4), g[r][2] = malloc(n * 4), g[r][3] = malloc(8);
        dget(g[r][0], dp, n * 4), dget(g[r][1], dm, n * 4), dget(g[r][2], dv, n * 4), dget(g[r][3], dss, 8);
        dfree(dp), dfree(dg), dfree(dm), dfree(dv), dfree(dsc), dfree(dss);
    }
    float ssf = (float)ss;
    CU_ASSERT(close_f("adamw param", g[0][0], p, n, 1e-7, 1e-6));
    CU_ASSERT(close_f("adamw m", g[0][1], m, n, 1e-9, 1e-6));
    CU_ASSERT(close_f("adamw v", g[0][2], v, n, 1e-12, 1e-6));
    CU_ASSERT(close_f("adamw fused norm", &g[0][3][0], &ssf, 1, 0, 1e-6));
    CU_ASSERT(same_bits("adamw fused norm = sumsq", &g[0][3][0], &g[0][3][1], 4));
    for (int k = 0; k < 4; k++) {
        CU_ASSERT(same_bits("adamw run to run", g[0][k], g[1][k], k < 3 ? n * 4 : 8));
        free(g[0][k]), free(g[1][k]);
    }
    free(p0), free(gr), free(m0), free(v0), free(p), free(m), free(v);
}

static void test_adamw_mixed(void)
{
    size_t n = 65536 + 4097;
    float *p0 = rnd(n, 1), *m0 = rnd(n, 0.01f), *v0 = rnd(n, 0.01f), scale = 1.0f;
    uint16_t *gr = bf16_of(rnd(n, 0.1f), n);
    for (size_t i = 0; i < n; i++)
        v0[i] = fabsf(v0[i]);
    float *p = copyf(p0, n), *m = copyf(m0, n), *v = copyf(v0, n);
    uint16_t *pb = malloc(n * 2), *gpb = malloc(n * 2);
    double ss = 0;
    CU_ASSERT(sz_k_adamw_step_bf16(p, pb, gr, m, v, n, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, scale, &ss) == 0);
    float *dp = dput(p0, n * 4), *dm = dput(m0, n * 4), *dv = dput(v0, n * 4), *dsc = dput(&scale, 4), *dss = dput(NULL, 8);
    uint16_t *dg = dput(gr, n * 2), *dpb = dput(NULL, n * 2);
    float one = 2.0f;
    CUOK(cudaMemcpy(dss, &one, 4, cudaMemcpyHostToDevice));
    CUOK(sz_cuda_adamw_mixed(S, dp, dpb, dg, SZ_CUDA_BF16, dm, dv, n, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, dsc, dss, 1));
    CUOK(sz_cuda_sumsq(S, dss + 1, dg, SZ_CUDA_BF16, (int64_t)n, 0));
    float *gp = malloc(n * 4), *gm = malloc(n * 4), *gv = malloc(n * 4), gs[2];
    dget(gp, dp, n * 4), dget(gm, dm, n * 4), dget(gv, dv, n * 4), dget(gpb, dpb, n * 2), dget(gs, dss, 8);
    float ref_acc = 2.0f + (float)ss, ref = (float)ss;
    CU_ASSERT(close_f("adamw mixed master", gp, p, n, 1e-7, 1e-6));
    CU_ASSERT(close_f("adamw mixed m", gm, m, n, 1e-9, 1e-6));
    CU_ASSERT(close_f("adamw mixed v", gv, v, n, 1e-12, 1e-6));
    CU_ASSERT(close_h("adamw mixed bf16 param", gpb, pb, n, 0));
    CU_ASSERT(close_f("adamw mixed fused norm (acc)", &gs[0], &ref_acc, 1, 0, 1e-6));
    CU_ASSERT(close_f("sumsq bf16", &gs[1], &ref, 1, 0, 1e-6));
    dfree(dp), dfree(dm), dfree(dv), dfree(dsc), dfree(dss), dfree(dg), dfree(dpb);
    free(p0), free(m0), free(v0), free(gr), free(p), free(m), free(v), free(pb), free(gpb), free(gp), free(gm), free(gv);
}

static void test_sgd(void)
{
    size_t n = 513;
    float *p = rnd(n, 1), *gr = rnd(n, 1), *b = rnd(n, 1), sc = 0.5f;
    for (int nest = 0; nest < 2; nest++) {
        double *rp = dbl(p, n), *rb = dbl(b, n);
        for (size_t i = 0; i < n; i++) {
            double g = (double)sc * gr[i] + 0.01 * rp[i];
            rb[i] = 0.9 * rb[i] + g;
            rp[i] -= 0.1 * (nest ? g + 0.9 * rb[i] : rb[i]);
        }
        float *dp = dput(p, n * 4), *dg = dput(gr, n * 4), *db = dput(b, n * 4), *ds = dput(&sc, 4);
        CUOK(sz_cuda_sgd(S, dp, dg, db, n, 0.1f, 0.9f, 0.01f, nest, ds));
        float *op = malloc(n * 4), *ob = malloc(n * 4);
        dget(op, dp, n * 4), dget(ob, db, n * 4);
        CU_ASSERT(close_d("sgd param", op, rp, n, 1e-6, 1e-6));
        CU_ASSERT(close_d("sgd momentum", ob, rb, n, 1e-6, 1e-6));
        dfree(dp), dfree(dg), dfree(db), dfree(ds);
        free(rp), free(rb), free(op), free(ob);
    }
    free(p), free(gr), free(b);
    /* mixed precision (bf16 gradients onto the fp32 master, the bf16 copy) and no momentum (no
     * buffer), against the CPU kernel (kernels/sgd.c) */
    for (int mom = 0; mom < 2; mom++) {
        float *m = rnd(n, 1), *g32 = rnd(n, 1), *bb = rnd(n, 1);
        uint16_t *gh = bf16_of(g32, n), *pb = malloc(n * 2), *gpb = malloc(n * 2);
        float *cm = malloc(n * 4), *cb = malloc(n * 4);
        memcpy(cm, m, n * 4), memcpy(cb, bb, n * 4);
        sz_k_sgd_step(cm, pb, gh, 1, mom ? cb : NULL, n, 0.1f, mom ? 0.9f : 0.0f, 0.01f, 0, 0.5f, NULL);
        float *dm = dput(m, n * 4), *db = dput(bb, n * 4), *ds = dput(&sc, 4);
        uint16_t *dg = dput(gh, n * 2), *dpb = dput(NULL, n * 2);
        CUOK(sz_cuda_sgd_any(S, dm, dpb, dg, SZ_CUDA_BF16, mom ? db : NULL, n, 0.1f, mom ? 0.9f : 0.0f, 0.01f, 0, ds,
                             NULL, 0));
        float *om = malloc(n * 4), *ob = malloc(n * 4);
        dget(om, dm, n * 4), dget(ob, db, n * 4), dget(gpb, dpb, n * 2);
        CU_ASSERT(close_f("sgd mixed master", om, cm, n, 1e-6, 1e-6));
        CU_ASSERT(close_f(mom ? "sgd mixed momentum" : "sgd without momentum: buffer untouched", ob, mom ? cb : bb, n,
                          1e-6, 1e-6));
        CU_ASSERT(close_h("sgd mixed bf16 param", gpb, pb, n, 1e-6));
        dfree(dm), dfree(db), dfree(ds), dfree(dg), dfree(dpb);
        free(m), free(g32), free(bb), free(gh), free(pb), free(gpb), free(cm), free(cb), free(om), free(ob);
    }
}

static void test_sumsq(void)
{
    size_t sizes[3] = {1, 1000, 3 * 65536 + 17};
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        float *x = rnd(n, 3);
        x[0] = 0x1p-130f; /* a denormal */
        uint16_t *h = bf16_of(x, n);
        float ref[2] = {(float)sz_k_sumsq(x, 0, (int64_t)n), (float)sz_k_sumsq(h, 1, (int64_t)n)}, got[2], again[2];
        float *dx = dput(x, n * 4), *out = dput(NULL, 8);
        uint16_t *dh = dput(h, n * 2);
        for (int r = 0; r < 2; r++) {
            CUOK(sz_cuda_sumsq(S, out, dx, SZ_CUDA_F32, (int64_t)n, 0));
            CUOK(sz_cuda_sumsq(S, out + 1, dh, SZ_CUDA_BF16, (int64_t)n, 0));
            dget(r ? again : got, out, 8);
        }
        CU_ASSERT(close_f("sumsq", got, ref, 2, 0, 1e-6));
        CU_ASSERT(same_bits("sumsq run to run", got, again, 8));
        dfree(dx), dfree(out), dfree(dh);
        free(x), free(h);
    }
}

/* tasks/convert.c's kernel: every pair of fp32, bf16 and fp16 in every mode (set, add, onto zeros)
 * against the CPU's sz_k_convert, with NaN, infinities, -0, fp32 denormals, fp16 subnormals and
 * values past fp16's range (which become inf) among the inputs. Bitwise, except that where a NaN
 * met an addition any NaN will do (a GPU's fp32 add gives the canonical NaN, x86 an operand's). */
static int same_vals(const char *what, const void *g, const void *c, int dt, size_t n, int any_nan)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        int na, nb;
        if (dt == SZ_K_F32) {
            memcpy(&a, (const float *)g + i, 4), memcpy(&b, (const float *)c + i, 4);
            na = (a & 0x7FFFFFFFu) > 0x7F800000u, nb = (b & 0x7FFFFFFFu) > 0x7F800000u;
        } else {
            a = ((const uint16_t *)g)[i], b = ((const uint16_t *)c)[i];
            uint32_t inf = dt == SZ_K_BF16 ? 0x7F80u : 0x7C00u;
            na = (a & 0x7FFFu) > inf, nb = (b & 0x7FFFu) > inf;
        }
        if (a != b && !(any_nan && na && nb)) {
            printf("\n  %s: element %zu: gpu 0x%x, cpu 0x%x  FAILED", what, i, (unsigned)a, (unsigned)b);
            return 0;
        }
    }
    return 1;
}
static const char *dtn3(int dt) { return dt == SZ_K_F16 ? "f16" : dt == SZ_K_BF16 ? "bf16" : "f32"; }
static size_t es3(int dt) { return dt == SZ_K_F32 ? 4 : 2; }
static void *typed3(const float *x, size_t n, int dt) /* malloc'd, rounded as sz_k_convert does */
{
    void *p = malloc(n * es3(dt) + 4);
    sz_k_convert(p, (sz_k_dtype)dt, x, SZ_K_F32, n, SZ_K_CONVERT_SET);
    return p;
}
static void test_convert(void)
{
    size_t n = 4099;
    float *a = rnd(n, 100), *b = rnd(n, 100);
    const float special[] = {NAN, INFINITY, -INFINITY, 0x1p-130f, -0.0f, 0.0f, 65504.0f, 65519.99f, 65520.0f,
                             -70000.0f, 1e6f, 3e-5f, 6e-8f, -2.9802322e-8f, 5.9604645e-8f, 1e-9f, -NAN};
    const size_t ns = sizeof special / sizeof special[0];
    for (size_t k = 0; k < ns; k++) {
        a[1 + k] = special[k];
        b[2 * ns - k] = special[k];
        a[3 * ns + k] = 60000.0f, b[3 * ns + k] = 6000.0f * (float)k; /* sums past fp16's range */
    }
    for (int dd = 0; dd < 3; dd++)
        for (int sd = 0; sd < 3; sd++) {
            void *src = typed3(a, n, sd), *dst0 = typed3(b, n, dd);
            for (int acc = 0; acc < 3; acc++) {
                size_t de = es3(dd);
                void *ref = hdup(dst0, n * de), *got = malloc(n * de);
                sz_k_convert(ref, (sz_k_dtype)dd, src, (sz_k_dtype)sd, n, acc);
                void *gs = dput(src, n * es3(sd)), *gd = dput(dst0, n * de);
                CUOK(sz_cuda_convert(S, gd, dd, gs, sd, n, acc));
                dget(got, gd, n * de);
                char what[64];
                snprintf(what, sizeof what, "convert dst %s src %s mode %d", dtn3(dd), dtn3(sd), acc);
                CU_ASSERT(same_vals(what, got, ref, dd, n, acc != 0));
                dfree(gs), dfree(gd);
                free(ref), free(got);
            }
            free(src), free(dst0);
        }
    /* the fp16 rounding and widening themselves, bitwise (NaN payloads included: bit math only):
     * every fp16 value widened, and fp32 values across the whole range (every 65521st bit pattern)
     * rounded */
    size_t nh = 65536, nf = 65536 + 8;
    uint16_t *h = malloc(nh * 2), *hr = malloc(nf * 2), *hg = malloc(nf * 2);
    float *fr = malloc(nh * 4), *fg = malloc(nh * 4), *f = malloc(nf * 4);
    for (size_t i = 0; i < nh; i++)
        h[i] = (uint16_t)i;
    for (size_t i = 0; i < nf; i++) {
        uint32_t u = i < 65536 ? (uint32_t)(i * 65521u) : 0x477FEFFFu + (uint32_t)(i - 65536) * 0x1000u;
        memcpy(&f[i], &u, 4);
    }
    for (size_t i = 0; i < nh; i++)
        fr[i] = sz_k_f16_to_f32_1(h[i]);
    for (size_t i = 0; i < nf; i++)
        hr[i] = sz_k_f32_to_f16_1(f[i]);
    void *dh = dput(h, nh * 2), *dfr = dput(NULL, nh * 4), *df = dput(f, nf * 4), *dhr = dput(NULL, nf * 2);
    CUOK(sz_cuda_convert(S, dfr, SZ_CUDA_F32, dh, SZ_CUDA_F16, nh, 0));
    CUOK(sz_cuda_convert(S, dhr, SZ_CUDA_F16, df, SZ_CUDA_F32, nf, 0));
    dget(fg, dfr, nh * 4), dget(hg, dhr, nf * 2);
    CU_ASSERT(same_bits("every fp16 widened", fg, fr, nh * 4));
    CU_ASSERT(same_bits("fp32 across its range rounded to fp16", hg, hr, nf * 2));
    CU_ASSERT(sz_cuda_convert(S, dfr, 3, dh, SZ_CUDA_F16, nh, 0) != 0); /* an unknown type refused */
    dfree(dh), dfree(dfr), dfree(df), dfree(dhr);
    free(h), free(hr), free(hg), free(fr), free(fg), free(f), free(a), free(b);
}

/* Reduce-scatter's rank-ordered sum of the received pieces: tasks/reduce_scatter.c's
 * sz_reduce_pieces arithmetic (the first piece onto the shard when acc, the others added in rank
 * order, bf16 summed in fp32 and rounded once), bitwise, into shard[o, o + len) only. */
static void test_reduce_pieces(void)
{
    const int64_t o = 5, len = 1031, n = o + len + 3;
    for (int dt = 0; dt < 3; dt++)
        for (int nd = 1; nd <= 3; nd += 2)
            for (int acc = 0; acc < 2; acc++) {
                size_t es = dt ? 2 : 4;
                float *sh = rnd((size_t)n, 10), *pc = rnd((size_t)(nd * len), 10);
                for (int64_t i = 0; i < 8; i++) /* sums past fp16's range: inf there */
                    sh[o + i] = 3e4f, pc[i] = 3e4f, pc[(nd - 1) * len + i] = 2e4f;
                uint16_t *hsh = typed3(sh, (size_t)n, dt ? dt : 1), *hpc = typed3(pc, (size_t)(nd * len), dt ? dt : 1);
                const void *shard0 = dt ? (const void *)hsh : (const void *)sh;
                const void *pieces = dt ? (const void *)hpc : (const void *)pc;
                void *ref = malloc((size_t)n * es), *got = malloc((size_t)n * es);
                memcpy(ref, shard0, (size_t)n * es);
                for (int64_t i = 0; i < len; i++) {
#define GET(p, k) sz_ldx((p), dt, (size_t)(k))
                    float x = acc ? GET(shard0, o + i) + GET(pieces, i) : GET(pieces, i);
                    for (int r = 1; r < nd; r++)
                        x += GET(pieces, (int64_t)r * len + i);
#undef GET
                    sz_stx(ref, dt, (size_t)(o + i), x);
                }
                void *gs = dput(shard0, (size_t)n * es), *gp = dput(pieces, (size_t)(nd * len) * es);
                CUOK(sz_cuda_reduce_pieces(S, gs, dt, gp, nd, o, len, acc));
                dget(got, gs, (size_t)n * es);
                char what[64];
                snprintf(what, sizeof what, "reduce pieces %s nd %d acc %d", dtn3(dt), nd, acc);
                CU_ASSERT(same_bits(what, got, ref, (size_t)n * es));
                dfree(gs), dfree(gp);
                free(ref), free(got), free(sh), free(pc), free(hsh), free(hpc);
            }
}

/* tasks/clip_scale.c's arithmetic; scale and zero. */
static void test_clip_scale_zero(void)
{
    float sums[5] = {0.5f, 1.25f, 3.0f, 0.0f, 2.5f};
    float clips[3] = {1.0f, 100.0f, 0.0f};
    float *ds = dput(sums, sizeof sums), *dout = dput(NULL, 8);
    for (int k = 0; k < 3; k++) {
        double s = 0;
        for (int i = 0; i < 5; i++)
            s += sums[i];
        double norm = sqrt(s), clip = clips[k];
        float ref[2] = {(clip > 0.0 && norm > clip) ? (float)(clip / norm) : 1.0f, (float)norm}, got[2];
        CUOK(sz_cuda_clip_scale(S, dout, ds, 5, clips[k], 0.0f));
        dget(got, dout, 8);
        CU_ASSERT(same_bits("clip scale", got, ref, 8));
    }
    size_t n = 3001;
    float *x = rnd(n, 1), *ref = malloc(n * 4), *got = malloc(n * 4), *dx = dput(x, n * 4);
    for (size_t i = 0; i < n; i++)
        ref[i] = x[i] * 0.37f;
    CUOK(sz_cuda_scale(S, dx, n, 0.37f));
    dget(got, dx, n * 4);
    CU_ASSERT(same_bits("scale", got, ref, n * 4));
    CUOK(sz_cuda_zero(S, dx, n * 4));
    dget(got, dx, n * 4);
    memset(ref, 0, n * 4);
    CU_ASSERT(same_bits("zero", got, ref, n * 4));
    dfree(ds), dfree(dout), dfree(dx);
    free(x), free(ref), free(got);
}

/* ================================================================ fp16 mixed precision
 * The kernels fp16 meets on CUDA, against their CPU twins (kernels/adamw.c, sgd.c, sumsq.c,
 * tasks/clip_scale.c): fp16 gradients onto the fp32 master, the fp16 parameters rounded from it, the
 * fused and separate norms, and the loss scale's skipped step (a NaN clip factor: nothing written,
 * the fused norm 0). The conversions and reduce-scatter's sum take fp16 in their tests above. */

/* fp16 arrays within maxulp units in the last place of the reference (or |g - c| <= atol), and
 * where one is inf or NaN the other the same. */
static int close_f16(const char *what, const uint16_t *g, const uint16_t *c, size_t n, int maxulp)
{
    for (size_t i = 0; i < n; i++) {
        int og = (g[i] & 0x8000) ? -(int)(g[i] & 0x7FFF) : (int)g[i];
        int oc = (c[i] & 0x8000) ? -(int)(c[i] & 0x7FFF) : (int)c[i];
        int sg = (g[i] & 0x7C00) == 0x7C00, sc = (c[i] & 0x7C00) == 0x7C00; /* inf or NaN */
        if (sg != sc || (sg && g[i] != c[i] && !((g[i] & 0x3FF) && (c[i] & 0x3FF))) || (!sg && abs(og - oc) > maxulp)) {
            printf("\n  %s: element %zu: gpu 0x%04x (%.6g), cpu 0x%04x (%.6g)  FAILED", what, i, g[i],
                   sz_k_f16_to_f32_1(g[i]), c[i], sz_k_f16_to_f32_1(c[i]));
            return 0;
        }
    }
    return 1;
}

static void test_f16_adamw(void)
{
    size_t n = 65536 + 4097; /* two chunks, the last partial */
    float *p0 = rnd(n, 1), *m0 = rnd(n, 0.01f), *v0 = rnd(n, 0.01f), *g32 = rnd(n, 0.1f);
    for (size_t i = 0; i < n; i++)
        v0[i] = fabsf(v0[i]);
    for (size_t i = 0; i < 64; i++)
        g32[i] *= 1e-4f; /* fp16 subnormals */
    uint16_t *gr = typed3(g32, n, SZ_K_F16), *ph0 = typed3(p0, n, SZ_K_F16);
    for (int skip = 0; skip < 2; skip++)
        for (int acc = 0; acc < 2; acc++) {
            float scale = skip ? NAN : 0.37f;
            float *p = copyf(p0, n), *m = copyf(m0, n), *v = copyf(v0, n);
            uint16_t *ph = hdup(ph0, n * 2), *gph = malloc(n * 2);
            double ss = -1;
            CU_ASSERT(sz_k_adamw_step_mixed(p, ph, gr, SZ_K_F16, m, v, n, 2, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, scale,
                                            &ss) == 0);
            float *dp = dput(p0, n * 4), *dm = dput(m0, n * 4), *dv = dput(v0, n * 4), *dsc = dput(&scale, 4);
            float *dss = dput(NULL, 8), two = 2.0f;
            uint16_t *dg = dput(gr, n * 2), *dph = dput(ph0, n * 2);
            CUOK(cudaMemcpy(dss, &two, 4, cudaMemcpyHostToDevice));
            CUOK(sz_cuda_adamw_mixed(S, dp, dph, dg, SZ_CUDA_F16, dm, dv, n, 2, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, dsc,
                                     dss, acc));
            CUOK(sz_cuda_sumsq(S, dss + 1, dg, SZ_CUDA_F16, (int64_t)n, 0));
            float *gp = malloc(n * 4), *gm = malloc(n * 4), *gv = malloc(n * 4), gs[2];
            dget(gp, dp, n * 4), dget(gm, dm, n * 4), dget(gv, dv, n * 4), dget(gph, dph, n * 2), dget(gs, dss, 8);
            float ref = (float)ss + (acc ? 2.0f : 0.0f), sep = (float)sz_k_sumsq(gr, SZ_K_F16, (int64_t)n);
            if (skip) { /* nothing written, the fused norm 0 */
                CU_ASSERT(same_bits("adamw fp16 skipped: master untouched", gp, p0, n * 4));
                CU_ASSERT(same_bits("adamw fp16 skipped: m untouched", gm, m0, n * 4));
                CU_ASSERT(same_bits("adamw fp16 skipped: v untouched", gv, v0, n * 4));
                CU_ASSERT(same_bits("adamw fp16 skipped: param untouched", gph, ph0, n * 2));
                CU_ASSERT(ss == 0.0 && gs[0] == (acc ? 2.0f : 0.0f));
            } else {
                CU_ASSERT(close_f("adamw fp16 master", gp, p, n, 1e-7, 1e-6));
                CU_ASSERT(close_f("adamw fp16 m", gm, m, n, 1e-9, 1e-6));
                CU_ASSERT(close_f("adamw fp16 v", gv, v, n, 1e-12, 1e-6));
                CU_ASSERT(close_f16("adamw fp16 param", gph, ph, n, 1));
                CU_ASSERT(close_f("adamw fp16 fused norm", &gs[0], &ref, 1, 0, 1e-6));
            }
            CU_ASSERT(close_f("sumsq fp16", &gs[1], &sep, 1, 0, 1e-6));
            dfree(dp), dfree(dm), dfree(dv), dfree(dsc), dfree(dss), dfree(dg), dfree(dph);
            free(p), free(m), free(v), free(ph), free(gph), free(gp), free(gm), free(gv);
        }
    /* a dtype that is not 16-bit is refused */
    CU_ASSERT(sz_cuda_adamw_mixed(S, NULL, NULL, NULL, SZ_CUDA_F32, NULL, NULL, 1, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f,
                                  NULL, NULL, 0) != 0);
    free(p0), free(m0), free(v0), free(g32), free(gr), free(ph0);
}

static void test_f16_sgd(void)
{
    size_t n = 2 * 65536 + 515; /* the fused norm's chunks */
    for (int mom = 0; mom < 2; mom++)
        for (int skip = 0; skip < 2; skip++) {
            float *p0 = rnd(n, 1), *g32 = rnd(n, 2), *b0 = rnd(n, 1), sc = skip ? NAN : 0.5f;
            uint16_t *gh = typed3(g32, n, SZ_K_F16), *ph0 = typed3(p0, n, SZ_K_F16);
            uint16_t *ph = hdup(ph0, n * 2), *gph = malloc(n * 2);
            float *cm = copyf(p0, n), *cb = copyf(b0, n);
            double ss = -1;
            CU_ASSERT(sz_k_sgd_step(cm, ph, gh, SZ_K_F16, mom ? cb : NULL, n, 0.1f, mom ? 0.9f : 0.0f, 0.01f, 0, sc,
                                    &ss) == 0);
            float *dm = dput(p0, n * 4), *db = dput(b0, n * 4), *ds = dput(&sc, 4), *dn = dput(NULL, 4);
            uint16_t *dg = dput(gh, n * 2), *dph = dput(ph0, n * 2);
            CUOK(sz_cuda_sgd_any(S, dm, dph, dg, SZ_CUDA_F16, mom ? db : NULL, n, 0.1f, mom ? 0.9f : 0.0f, 0.01f, 0,
                                 ds, dn, 0));
            float *om = malloc(n * 4), *ob = malloc(n * 4), gn, rn = (float)ss;
            dget(om, dm, n * 4), dget(ob, db, n * 4), dget(gph, dph, n * 2), dget(&gn, dn, 4);
            if (skip) {
                CU_ASSERT(same_bits("sgd fp16 skipped: master untouched", om, p0, n * 4));
                CU_ASSERT(same_bits("sgd fp16 skipped: buffer untouched", ob, b0, n * 4));
                CU_ASSERT(same_bits("sgd fp16 skipped: param untouched", gph, ph0, n * 2));
                CU_ASSERT(ss == 0.0 && gn == 0.0f);
            } else {
                CU_ASSERT(close_f("sgd fp16 master", om, cm, n, 1e-6, 1e-6));
                CU_ASSERT(close_f(mom ? "sgd fp16 momentum" : "sgd fp16 without momentum: buffer untouched", ob,
                                  mom ? cb : b0, n, 1e-6, 1e-6));
                CU_ASSERT(close_f16("sgd fp16 param", gph, ph, n, 1));
                CU_ASSERT(close_f("sgd fp16 fused norm", &gn, &rn, 1, 0, 1e-6));
            }
            dfree(dm), dfree(db), dfree(ds), dfree(dn), dfree(dg), dfree(dph);
            free(p0), free(g32), free(b0), free(gh), free(ph0), free(ph), free(gph), free(cm), free(cb), free(om), free(ob);
        }
}

/* The sum of squares of fp16 gradients, an overflow (inf) or a NaN among them included: the clip
 * factor tests finiteness only, so a non-finite CPU sum needs a non-finite GPU one of the same kind. */
static void test_f16_sumsq(void)
{
    size_t n = 3 * 65536 + 17;
    float *x = rnd(n, 3);
    x[5] = 6e-8f, x[6] = 65504.0f;
    uint16_t *h = typed3(x, n, SZ_K_F16);
    uint16_t *dh = dput(h, n * 2);
    float *out = dput(NULL, 4), got, again, ref = (float)sz_k_sumsq(h, SZ_K_F16, (int64_t)n);
    CUOK(sz_cuda_sumsq(S, out, dh, SZ_CUDA_F16, (int64_t)n, 0));
    dget(&got, out, 4);
    CUOK(sz_cuda_sumsq(S, out, dh, SZ_CUDA_F16, (int64_t)n, 0));
    dget(&again, out, 4);
    CU_ASSERT(close_f("sumsq fp16", &got, &ref, 1, 0, 1e-6));
    CU_ASSERT(same_bits("sumsq fp16 run to run", &got, &again, 4));
    const uint16_t bad[3] = {0x7C00u, 0xFC00u, 0x7E00u}; /* inf, -inf, NaN */
    for (int k = 0; k < 3; k++) {
        uint16_t keep = h[70000];
        h[70000] = bad[k];
        CUOK(cudaMemcpy(dh, h, n * 2, cudaMemcpyHostToDevice));
        ref = (float)sz_k_sumsq(h, SZ_K_F16, (int64_t)n);
        CUOK(sz_cuda_sumsq(S, out, dh, SZ_CUDA_F16, (int64_t)n, 0));
        dget(&got, out, 4);
        CU_ASSERT(isinf(ref) == isinf(got) && isnan(ref) == isnan(got) && !isfinite(got));
        h[70000] = keep;
    }
    dfree(dh), dfree(out);
    free(x), free(h);
}

/* tasks/clip_scale.c's clip_factor (static there), line for line */
static void clip_factor_ref(double s, float clip, float loss_scale, float *out)
{
    double norm = sqrt(s);
    if (loss_scale > 0.0f) {
        norm /= loss_scale;
        if (!isfinite(norm)) {
            out[0] = NAN;
            out[1] = (float)norm;
            return;
        }
    }
    double f = (clip > 0.0f && norm > clip) ? clip / norm : 1.0;
    out[0] = loss_scale > 0.0f ? (float)(f / loss_scale) : (float)f;
    out[1] = (float)norm;
}
static void test_f16_clip_scale(void)
{
    float sums[5] = {0.5f, 1.25f, 3.0f, 0.0f, 2.5f};
    const float clips[3] = {1.0f, 100.0f, 0.0f}, scales[4] = {0.0f, 1.0f, 65536.0f, 0x1p30f};
    const float bad[4] = {0.0f, INFINITY, NAN, 3e38f}; /* sums[1] += bad: finite, overflows, NaN, huge */
    float *ds = dput(NULL, sizeof sums), *dout = dput(NULL, 8);
    for (int b = 0; b < 4; b++) {
        float sb[5];
        memcpy(sb, sums, sizeof sb);
        sb[1] += bad[b];
        if (b == 3)
            sb[2] = 3e38f; /* the double sum 6e38: finite in double, its root too */
        CUOK(cudaMemcpy(ds, sb, sizeof sb, cudaMemcpyHostToDevice));
        for (int k = 0; k < 3; k++)
            for (int l = 0; l < 4; l++) {
                double s = 0;
                for (int i = 0; i < 5; i++)
                    s += sb[i];
                float ref[2], got[2];
                clip_factor_ref(s, clips[k], scales[l], ref);
                CUOK(sz_cuda_clip_scale(S, dout, ds, 5, clips[k], scales[l]));
                dget(got, dout, 8);
                char what[96];
                snprintf(what, sizeof what, "clip factor: sums %d, clip %g, loss scale %g", b, clips[k], scales[l]);
                CU_ASSERT(same_bits(what, got, ref, 8));
                if (scales[l] > 0.0f && b && b < 3)
                    CU_ASSERT(isnan(got[0])); /* an overflow: the step is skipped */
            }
    }
    dfree(ds), dfree(dout);
}

/* ================================================================ the native bf16 path, part 1
 * Every type combination the CPU's ops take, against the CPU's kernels of those types (the _mx
 * ones of bf16_act.c, the bf16 matmuls, the fused matmul + GELU): matmul through the any-type
 * entry points with and without a folded zero, matmul + GELU, layernorm and rmsnorm and their
 * residual fusions, the encoder and the embedding from bf16 tables. Where a gradient is set (a
 * folded zero) the GPU buffer starts as NaN (all bits set), so a read shows. Each GPU result is
 * computed twice and required bitwise equal. */

static size_t esz(int dt) { return dt ? 2 : 4; }
/* n values of type dt (bf16: rounded) from fp32 x; malloc'd */
static void *typed(const float *x, size_t n, int dt) { return dt ? (void *)bf16_of(x, n) : (void *)copyf(x, n); }
/* a device copy of bytes, or (nan) bytes of all-ones: NaN in fp32 and bf16 */
static void *dput_or_nan(const void *h, size_t bytes, int nan)
{
    if (!nan)
        return dput(h, bytes);
    void *d = dput(NULL, bytes);
    CUOK(cudaMemset(d, 0xFF, bytes ? bytes : 4));
    return d;
}
static int bf16_ord(uint16_t h) { return (h & 0x8000) ? -(int)(h & 0x7FFF) : (int)h; }
/* g against the CPU's c, both of type dt: fp32 |g - c| <= atol + rtol |c|; bf16 at most maxulp
 * units in the last place apart, or |g - c| <= atol (where the fp32 value before the rounding is a
 * cancellation, so its rounding error is large next to it). */
static int close_t(const char *what, const void *g, const void *c, int dt, size_t n, double atol, double rtol,
                   int maxulp)
{
    if (!dt)
        return close_f(what, g, c, n, atol, rtol);
    const uint16_t *gh = g, *ch = c;
    int ok = 1, worst = -1;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        int du = abs(bf16_ord(gh[i]) - bf16_ord(ch[i]));
        double e = fabs((double)sz_bf16_to_f32_1(gh[i]) - (double)sz_bf16_to_f32_1(ch[i]));
        if (!(du <= maxulp || e <= atol))
            ok = 0;
        if (du > worst)
            worst = du, wi = i;
    }
    if (!ok || getenv("SZ_TEST_VERBOSE"))
        printf("\n  %s: max %d bf16 ulp at %zu (gpu %.6g, ref %.6g)%s", what, worst, wi,
               n ? sz_bf16_to_f32_1(gh[wi]) : 0.0f, n ? sz_bf16_to_f32_1(ch[wi]) : 0.0f, ok ? "" : "  FAILED");
    return ok;
}
static const char *dtn(int dt) { return dt ? "bf16" : "f32"; }

/* ---- matmul, any types, folded zero ---- */

static void matmul_any_case(int N, int C, int OC, int in_dt, int od, int pd, int set, int with_bias)
{
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C, eo = esz(od), ep = esz(pd), ei = esz(in_dt);
    float *fx = rnd(NC, 1), *fw = rnd(OCC, 1), *fb = rnd(OC, 1), *fd = rnd(NO, 1);
    float *fi0 = rnd(NC, 1), *fw0 = rnd(OCC, 1), *fb0 = rnd(OC, 1);
    void *x = typed(fx, NC, in_dt), *w = typed(fw, OCC, in_dt), *b = typed(fb, OC, in_dt), *d = typed(fd, NO, in_dt);
    void *di0 = typed(fi0, NC, od), *dw0 = typed(fw0, OCC, pd), *db0 = typed(fb0, OC, pd);
    void *c[4] = {malloc(NO * eo), hdup(di0, NC * eo), hdup(dw0, OCC * ep), hdup(db0, OC * ep)};
    if (in_dt) {
        CU_ASSERT(sz_k_matmul_fwd_bf16(c[0], (sz_k_dtype)od, x, w, with_bias ? b : NULL, N, C, OC) >= 0);
        CU_ASSERT(sz_k_matmul_bwd_bf16_set(c[1], (sz_k_dtype)od, c[2], with_bias ? c[3] : NULL, (sz_k_dtype)pd, d, x,
                                           w, N, C, OC, set) >= 0);
    } else {
        CU_ASSERT(sz_k_matmul_fwd(c[0], x, w, with_bias ? b : NULL, N, C, OC) >= 0);
        CU_ASSERT(sz_k_matmul_bwd_set(c[1], c[2], with_bias ? c[3] : NULL, d, x, w, N, C, OC, set) >= 0);
    }
    size_t n[4] = {NO, NC, OCC, OC}, es[4] = {eo, eo, ep, ep};
    int dts[4] = {od, od, pd, pd}, k_of[4] = {C, OC, N, N};
    void *g[2][4];
    for (int r = 0; r < 2; r++) {
        void *gx = dput(x, NC * ei), *gw = dput(w, OCC * ei), *gb = dput(b, OC * ei), *gd = dput(d, NO * ei);
        /* a set gradient starts as NaN: read, it shows */
        void *gi = dput_or_nan(di0, NC * eo, set & SZ_CUDA_SET_A), *gdw = dput_or_nan(dw0, OCC * ep, set & SZ_CUDA_SET_DW);
        void *gdb = dput_or_nan(db0, OC * ep, (set & SZ_CUDA_SET_DB) && with_bias);
        void *go = dput(NULL, NO * eo);
        CUOK(sz_cuda_matmul_fwd_any(H, S, go, od, gx, gw, with_bias ? gb : NULL, in_dt, N, C, OC));
        CUOK(sz_cuda_matmul_bwd_any(H, S, gi, od, gdw, with_bias ? gdb : NULL, pd, gd, gx, gw, in_dt, N, C, OC, set));
        void *gg[4] = {go, gi, gdw, gdb};
        for (int k = 0; k < 4; k++) {
            g[r][k] = malloc(n[k] * es[k]);
            dget(g[r][k], gg[k], n[k] * es[k]);
        }
        if (r == 0) { /* fp32 inputs with a bf16 destination: refused */
            CU_ASSERT(sz_cuda_matmul_fwd_any(H, S, go, SZ_CUDA_BF16, gx, gw, NULL, SZ_CUDA_F32, N, C, OC) != 0);
            CU_ASSERT(sz_cuda_matmul_bwd_any(H, S, gi, od, gdw, NULL, pd, gd, gx, gw, 7, N, C, OC, 0) != 0);
        }
        dfree(gx), dfree(gw), dfree(gb), dfree(gd), dfree(gi), dfree(gdw), dfree(gdb), dfree(go);
    }
    const char *names[4] = {"out", "dinp", "dweight", "dbias"};
    for (int k = 0; k < 4; k++) {
        char what[96];
        snprintf(what, sizeof what, "matmul_any in %s %s (%s) set %d", dtn(in_dt), names[k], dtn(dts[k]), set);
        if (k == 3 && !with_bias) {
            CU_ASSERT(same_bits(what, g[0][k], db0, OC * ep)); /* untouched */
        } else if (k == 3) {
            CU_ASSERT(close_t(what, g[0][k], c[k], pd, OC, 1e-5 * N, 1e-5, 1)); /* rows in another fixed order */
        } else {
            CU_ASSERT(close_t(what, g[0][k], c[k], dts[k], n[k], 1e-5 * k_of[k], 1e-5, 1));
        }
        CU_ASSERT(same_bits("matmul_any run to run", g[0][k], g[1][k], n[k] * es[k]));
        free(g[0][k]), free(g[1][k]), free(c[k]);
    }
    free(fx), free(fw), free(fb), free(fd), free(fi0), free(fw0), free(fb0);
    free(x), free(w), free(b), free(d), free(di0), free(dw0), free(db0);
}

static void test_matmul_any(void)
{
    /* set: none, dinp (a folded zero), dw and db (the step's first writer), all three */
    const int sets[4] = {0, SZ_CUDA_SET_A, SZ_CUDA_SET_DW | SZ_CUDA_SET_DB, SZ_CUDA_SET_A | SZ_CUDA_SET_DW | SZ_CUDA_SET_DB};
    for (int si = 0; si < 4; si++) {
        int set = sets[si];
        matmul_any_case(23, 41, 19, SZ_CUDA_F32, 0, 0, set, 1);
        for (int od = 0; od < 2; od++)
            for (int pd = 0; pd < 2; pd++)
                matmul_any_case(37, 53, 29, SZ_CUDA_BF16, od, pd, set, (set & SZ_CUDA_SET_DB) || (od + pd + si) % 2 == 0);
    }
    matmul_any_case(300, 17, 45, SZ_CUDA_BF16, 0, 1, SZ_CUDA_SET_DW | SZ_CUDA_SET_DB, 1); /* db over chunks, set */
    matmul_any_case(1, 3, 5, SZ_CUDA_BF16, 1, 1, 1, 1);
    /* several chunks of rows in the bias gradient's sum (sz_cuda_colsum.cuh: 128 rows each), the last partial */
    matmul_any_case(300, 17, 45, SZ_CUDA_BF16, 1, 1, 0, 1);
    matmul_any_case(300, 17, 45, SZ_CUDA_BF16, 0, 0, 0, 1);
    matmul_any_case(257, 9, 33, SZ_CUDA_F32, 0, 0, 0, 1);
}

/* ---- matmul + GELU ---- */

/* in_dt the inputs', gd gout's, and with bf16 inputs dinp's (gd) and the parameter gradients' (pd) */
static void matmul_gelu_case(int N, int C, int OC, int in_dt, int gd, int pd, int set)
{
    int did = in_dt ? gd : 0, dpd = in_dt ? pd : 0;
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C, ei = esz(in_dt);
    float *fx = rnd(NC, 1), *fw = rnd(OCC, 1), *fb = rnd(OC, 1), *fd = rnd(NO, 1), *pre = rnd(NC, 3);
    float *fw0 = rnd(OCC, 1), *fb0 = rnd(OC, 1);
    void *x = typed(fx, NC, in_dt), *w = typed(fw, OCC, in_dt), *b = typed(fb, OC, in_dt), *d = typed(fd, NO, in_dt);
    void *dw0 = typed(fw0, OCC, dpd), *db0 = typed(fb0, OC, dpd);
    size_t n[5] = {NO, NO, NC, OCC, OC}, es[5] = {4, esz(gd), esz(did), esz(dpd), esz(dpd)};
    int dts[5] = {0, gd, did, dpd, dpd}, k_of[5] = {C, C, OC, N, N};
    void *c[5] = {malloc(NO * 4), malloc(NO * es[1]), malloc(NC * es[2]), hdup(dw0, OCC * es[3]), hdup(db0, OC * es[4])};
    CU_ASSERT(sz_k_matmul_gelu_fwd(c[0], c[1], (sz_k_dtype)gd, x, w, b, (sz_k_dtype)in_dt, (sz_k_dtype)in_dt, N, C,
                                   OC) >= 0);
    CU_ASSERT(sz_k_gelu_matmul_bwd_set(c[2], (sz_k_dtype)did, c[3], c[4], (sz_k_dtype)dpd, d, x, w, pre,
                                       (sz_k_dtype)in_dt, (sz_k_dtype)in_dt, N, C, OC, set) >= 0);
    void *g[2][5];
    for (int r = 0; r < 2; r++) {
        void *gx = dput(x, NC * ei), *gw = dput(w, OCC * ei), *gb = dput(b, OC * ei), *gdd = dput(d, NO * ei);
        float *gp = dput(pre, NC * 4);
        void *go = dput(NULL, NO * 4), *gg = dput(NULL, NO * es[1]), *gi = dput_or_nan(NULL, NC * es[2], 1);
        void *gdw = dput_or_nan(dw0, OCC * es[3], set & SZ_CUDA_SET_DW), *gdb = dput_or_nan(db0, OC * es[4], set & SZ_CUDA_SET_DB);
        CUOK(sz_cuda_matmul_gelu_fwd(H, S, go, gg, gd, gx, gw, gb, in_dt, N, C, OC));
        if (set) {
            CUOK(sz_cuda_gelu_matmul_bwd_set(H, S, gi, did, gdw, gdb, dpd, gdd, gx, gw, gp, in_dt, N, C, OC, set));
        } else {
            CUOK(sz_cuda_gelu_matmul_bwd(H, S, gi, did, gdw, gdb, dpd, gdd, gx, gw, gp, in_dt, N, C, OC));
        }
        void *gs[5] = {go, gg, gi, gdw, gdb};
        for (int k = 0; k < 5; k++) {
            g[r][k] = malloc(n[k] * es[k]);
            dget(g[r][k], gs[k], n[k] * es[k]);
            dfree(gs[k]);
        }
        dfree(gx), dfree(gw), dfree(gb), dfree(gdd), dfree(gp);
    }
    const char *names[5] = {"out", "gout", "dinp", "dweight", "dbias"};
    for (int k = 0; k < 5; k++) {
        char what[96];
        snprintf(what, sizeof what, "matmul_gelu in %s %s (%s) set %d", dtn(in_dt), names[k], dtn(dts[k]), set);
        /* dinp bf16: the product rounded, then GELU's factor rounded again: 2 ulp */
        CU_ASSERT(close_t(what, g[0][k], c[k], dts[k], n[k], 1e-5 * k_of[k], 1e-5, k == 2 ? 2 : 1));
        CU_ASSERT(same_bits("matmul_gelu run to run", g[0][k], g[1][k], n[k] * es[k]));
        free(g[0][k]), free(g[1][k]), free(c[k]);
    }
    free(fx), free(fw), free(fb), free(fd), free(pre), free(fw0), free(fb0);
    free(x), free(w), free(b), free(d), free(dw0), free(db0);
}

static void test_matmul_gelu(void)
{
    int dwdb = SZ_CUDA_SET_DW | SZ_CUDA_SET_DB; /* the step's first writer of dw, db */
    matmul_gelu_case(31, 45, 27, SZ_CUDA_F32, 0, 0, 0);
    matmul_gelu_case(31, 45, 27, SZ_CUDA_F32, 1, 0, 0);
    matmul_gelu_case(31, 45, 27, SZ_CUDA_F32, 0, 0, dwdb);
    for (int gd = 0; gd < 2; gd++)
        for (int pd = 0; pd < 2; pd++)
            for (int set = 0; set <= dwdb; set += dwdb)
                matmul_gelu_case(29, 51, 35, SZ_CUDA_BF16, gd, pd, set);
}

/* ---- layernorm, rmsnorm, and their residual fusions ---- */

/* kind 0 layernorm, 1 rmsnorm; od: out's type (and dout's), pd: the parameters'. */
static void norm_mx_case(int kind, int N, int C, int od, int pd, int set, int with_bias)
{
    size_t NC = (size_t)N * C, eo = esz(od), ep = esz(pd);
    float eps = 1e-6f;
    if (kind)
        with_bias = 0;
    float *x = rnd(NC, 2), *fw = rnd(C, 1), *fb = rnd(C, 1), *fd = rnd(NC, 1), *di0 = rnd(NC, 1), *dw0 = rnd(C, 1);
    float *db0 = rnd(C, 1);
    void *w = typed(fw, C, pd), *b = with_bias ? typed(fb, C, pd) : NULL, *d = typed(fd, NC, od);
    void *out = malloc(NC * eo);
    float *mean = malloc(N * 4), *rstd = malloc(N * 4), *di = copyf(di0, NC), *dw = copyf(dw0, C), *db = copyf(db0, C);
    if (kind == 0) {
        CU_ASSERT(sz_k_layernorm_fwd_mx(out, (sz_k_dtype)od, mean, rstd, x, w, b, (sz_k_dtype)pd, N, C) == 0);
        CU_ASSERT(sz_k_layernorm_bwd_mx_set(di, dw, with_bias ? db : NULL, d, (sz_k_dtype)od, x, w, (sz_k_dtype)pd, mean,
                                            rstd, N, C, set) == 0);
    } else {
        CU_ASSERT(sz_k_rmsnorm_fwd_mx(out, (sz_k_dtype)od, rstd, x, w, (sz_k_dtype)pd, N, C, eps) == 0);
        CU_ASSERT(sz_k_rmsnorm_bwd_mx_set(di, dw, d, (sz_k_dtype)od, x, w, (sz_k_dtype)pd, rstd, N, C, set) == 0);
    }
    void *g[2][6];
    size_t n[6] = {NC, N, N, NC, C, C}, es[6] = {eo, 4, 4, 4, 4, 4};
    for (int r = 0; r < 2; r++) {
        float *gx = dput(x, NC * 4), *gm = dput(NULL, N * 4), *gr = dput(NULL, N * 4);
        void *gw = dput(w, C * ep), *gb = with_bias ? dput(b, C * ep) : NULL, *gd = dput(d, NC * eo);
        void *go = dput(NULL, NC * eo), *gi = dput_or_nan(di0, NC * 4, set & SZ_CUDA_SET_A);
        void *gdw = dput_or_nan(dw0, C * 4, set & SZ_CUDA_SET_DW), *gdb = dput_or_nan(db0, C * 4, (set & SZ_CUDA_SET_DB) && with_bias);
        /* the backward from the CPU's statistics, so that it alone is compared */
        float *cm = dput(mean, N * 4), *cr = dput(rstd, N * 4);
        if (kind == 0) {
            CUOK(sz_cuda_layernorm_fwd_mx(S, go, od, gm, gr, gx, gw, gb, pd, N, C));
            CUOK(sz_cuda_layernorm_bwd_mx(S, gi, gdw, with_bias ? gdb : NULL, gd, od, gx, gw, pd, cm, cr, N, C, set));
        } else {
            CUOK(sz_cuda_rmsnorm_fwd_mx(S, go, od, gr, gx, gw, pd, N, C, eps));
            CUOK(sz_cuda_rmsnorm_bwd_mx(S, gi, gdw, gd, od, gx, gw, pd, cr, N, C, set));
        }
        void *gs[6] = {go, gm, gr, gi, gdw, gdb};
        for (int k = 0; k < 6; k++) {
            g[r][k] = malloc(n[k] * es[k]);
            dget(g[r][k], gs[k], n[k] * es[k]);
            dfree(gs[k]);
        }
        dfree(gx), dfree(gw), dfree(gd), dfree(cm), dfree(cr);
        if (gb)
            dfree(gb);
    }
    void *c[6] = {out, mean, rstd, di, dw, db};
    const char *names[6] = {"out", "mean", "rstd", "dinp", "dweight", "dbias"};
    for (int k = 0; k < 6; k++) {
        if (kind && (k == 1 || k == 5))
            continue; /* rmsnorm: no mean, no bias */
        char what[96];
        snprintf(what, sizeof what, "%s_mx out/dout %s w %s %s set %d", kind ? "rmsnorm" : "layernorm", dtn(od), dtn(pd),
                 names[k], set);
        if (k == 5 && !with_bias) {
            CU_ASSERT(same_bits(what, g[0][k], db0, C * 4)); /* no bias: untouched */
        } else {
            /* the parameter gradients sum N rows in another order: their bound grows with N */
            CU_ASSERT(close_t(what, g[0][k], c[k], es[k] == 2, n[k], k >= 4 ? 2e-5 + 1e-6 * N : 2e-5, 2e-5, 1));
        }
        CU_ASSERT(same_bits("norm_mx run to run", g[0][k], g[1][k], n[k] * es[k]));
    }
    for (int k = 0; k < 6; k++)
        free(g[0][k]), free(g[1][k]), free(c[k]);
    free(x), free(fw), free(fb), free(fd), free(di0), free(dw0), free(db0), free(w), free(b), free(d);
}

/* The fusions: res = a + b and the norm of res (in place: res is a's buffer); backward dres +=,
 * da, db (db of type dbd) (+)= dres (set bits), dweight, dbias +=. */
static void residual_norm_mx_case(int kind, int N, int C, int od, int pd, int dbd, int set, int in_place)
{
    size_t NC = (size_t)N * C, eo = esz(od), ep = esz(pd), eb = esz(dbd);
    float eps = 1e-5f;
    float *fa = rnd(NC, 1), *fb = rnd(NC, 1), *fw = rnd(C, 1), *fbl = rnd(C, 1), *fd = rnd(NC, 1);
    float *da0 = rnd(NC, 1), *fdb0 = rnd(NC, 1), *dres0 = rnd(NC, 1), *dw0 = rnd(C, 1), *dbl0 = rnd(C, 1);
    void *w = typed(fw, C, pd), *bl = typed(fbl, C, pd), *d = typed(fd, NC, od), *db0 = typed(fdb0, NC, dbd);
    float *res = in_place ? copyf(fa, NC) : malloc(NC * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    void *out = malloc(NC * eo), *db = hdup(db0, NC * eb);
    float *da = copyf(da0, NC), *dres = copyf(dres0, NC), *dw = copyf(dw0, C), *dbl = copyf(dbl0, C);
    const float *ca = in_place ? res : fa;
    if (kind == 0) {
        CU_ASSERT(sz_k_residual_layernorm_fwd_mx(res, out, (sz_k_dtype)od, mean, rstd, ca, fb, w, bl, (sz_k_dtype)pd, N,
                                                 C) == 0);
        CU_ASSERT(sz_k_layernorm_residual_bwd_mx_set(da, db, (sz_k_dtype)dbd, dres, dw, dbl, d, (sz_k_dtype)od, res, w,
                                                     (sz_k_dtype)pd, mean, rstd, N, C, set) == 0);
    } else {
        CU_ASSERT(sz_k_residual_rmsnorm_fwd_mx(res, out, (sz_k_dtype)od, rstd, ca, fb, w, (sz_k_dtype)pd, N, C, eps) ==
                  0);
        CU_ASSERT(sz_k_rmsnorm_residual_bwd_mx_set(da, db, (sz_k_dtype)dbd, dres, dw, d, (sz_k_dtype)od, res, w,
                                                   (sz_k_dtype)pd, rstd, N, C, set) == 0);
    }
    enum { RES, OUT, MEAN, RSTD, DA, DB, DRES, DW, DBL, NK };
    size_t n[NK] = {NC, NC, N, N, NC, NC, NC, C, C}, es[NK] = {4, eo, 4, 4, 4, eb, 4, 4, 4};
    void *g[2][NK];
    for (int r = 0; r < 2; r++) {
        float *ga = dput(fa, NC * 4), *gb = dput(fb, NC * 4), *gres = in_place ? ga : dput(NULL, NC * 4);
        float *gm = dput(NULL, N * 4), *gr = dput(NULL, N * 4);
        void *gw = dput(w, C * ep), *gbl = dput(bl, C * ep), *gd = dput(d, NC * eo), *go = dput(NULL, NC * eo);
        float *gda = dput_or_nan(da0, NC * 4, set & SZ_CUDA_SET_A);
        void *gdb = dput_or_nan(db0, NC * eb, set & SZ_CUDA_SET_B);
        float *gdres = dput(dres0, NC * 4), *gdw = dput_or_nan(dw0, C * 4, set & SZ_CUDA_SET_DW);
        float *gdbl = dput_or_nan(dbl0, C * 4, (set & SZ_CUDA_SET_DB) && kind == 0);
        float *cres = dput(res, NC * 4), *cm = dput(mean, N * 4), *cr = dput(rstd, N * 4); /* the CPU's */
        if (kind == 0) {
            CUOK(sz_cuda_residual_layernorm_fwd_mx(S, gres, go, od, gm, gr, ga, gb, gw, gbl, pd, N, C));
            CUOK(sz_cuda_layernorm_residual_bwd_mx(S, gda, gdb, dbd, gdres, gdw, gdbl, gd, od, cres, gw, pd, cm, cr, N, C,
                                                   set));
        } else {
            CUOK(sz_cuda_residual_rmsnorm_fwd_mx(S, gres, go, od, gr, ga, gb, gw, pd, N, C, eps));
            CUOK(sz_cuda_rmsnorm_residual_bwd_mx(S, gda, gdb, dbd, gdres, gdw, gd, od, cres, gw, pd, cr, N, C, set));
        }
        void *gs[NK] = {gres, go, gm, gr, gda, gdb, gdres, gdw, gdbl};
        for (int k = 0; k < NK; k++) {
            g[r][k] = malloc(n[k] * es[k]);
            dget(g[r][k], gs[k], n[k] * es[k]);
            dfree(gs[k]);
        }
        if (!in_place)
            dfree(ga);
        dfree(gb), dfree(gw), dfree(gbl), dfree(gd), dfree(cres), dfree(cm), dfree(cr);
    }
    void *c[NK] = {res, out, mean, rstd, da, db, dres, dw, dbl};
    const char *names[NK] = {"res", "out", "mean", "rstd", "da", "db", "dres", "dweight", "dbias"};
    for (int k = 0; k < NK; k++) {
        if (kind && (k == MEAN || k == DBL))
            continue;
        char what[128];
        snprintf(what, sizeof what, "residual_%s_mx out/dout %s w %s db %s set %d%s %s", kind ? "rmsnorm" : "layernorm",
                 dtn(od), dtn(pd), dtn(dbd), set, in_place ? " in place" : "", names[k]);
        if (k == RES) {
            CU_ASSERT(same_bits(what, g[0][k], c[k], NC * 4));
        } else {
            CU_ASSERT(close_t(what, g[0][k], c[k], es[k] == 2, n[k], k >= DW ? 2e-5 + 1e-6 * N : 2e-5, 2e-5, 1));
        }
        CU_ASSERT(same_bits("residual_norm_mx run to run", g[0][k], g[1][k], n[k] * es[k]));
    }
    for (int k = 0; k < NK; k++)
        free(g[0][k]), free(g[1][k]), free(c[k]);
    free(fa), free(fb), free(fw), free(fbl), free(fd), free(da0), free(fdb0), free(dres0), free(dw0), free(dbl0);
    free(w), free(bl), free(d), free(db0);
}

static void test_norms_mx(void)
{
    for (int kind = 0; kind < 2; kind++) {
        for (int od = 0; od < 2; od++)
            for (int pd = 0; pd < 2; pd++)
                for (int si = 0; si < 4; si++) { /* none, dinp, dw and db, all */
                    int set = (si & 1 ? SZ_CUDA_SET_A : 0) | (si & 2 ? SZ_CUDA_SET_DW | SZ_CUDA_SET_DB : 0);
                    norm_mx_case(kind, 19, 77 + 16 * kind, od, pd, set, (si & 2) || (od + pd) % 2 == 0);
                }
        norm_mx_case(kind, 300, 37, 0, 1, SZ_CUDA_SET_DW | SZ_CUDA_SET_DB, 1); /* set sums over chunks */
        norm_mx_case(kind, 3, 1031, 1, 1, 0, 1); /* rows longer than the warp's stride many times */
        norm_mx_case(kind, 300, 37, 1, 0, 0, 1); /* the parameter sums over several chunks of rows */
        norm_mx_case(kind, 129, 40, 0, 0, 1, 1);
        for (int set = 0; set < 4; set++)
            residual_norm_mx_case(kind, 13, 67, 1, set & 1, (set >> 1) & 1, set, set == 2);
        residual_norm_mx_case(kind, 11, 45, 0, 0, 0, 0, 0);
        /* the parameter gradients set too (the step's first writer), with and without da, db */
        residual_norm_mx_case(kind, 13, 67, 1, 1, 1, SZ_CUDA_SET_DW | SZ_CUDA_SET_DB, 0);
        residual_norm_mx_case(kind, 130, 40, 0, 0, 1, 15, 1);
        residual_norm_mx_case(kind, 11, 45, 1, 1, 1, 0, 1);
    }
    /* rmsnorm's dinp may be absent (dweight alone) */
    int N = 9, C = 40;
    float *x = rnd((size_t)N * C, 1), *r = rnd(N, 1), *d = rnd((size_t)N * C, 1), *w = rnd(C, 1), *dw0 = rnd(C, 1);
    float *dw = copyf(dw0, C), got[40];
    CU_ASSERT(sz_k_rmsnorm_bwd_mx_set(NULL, dw, d, SZ_K_F32, x, w, SZ_K_F32, r, N, C, 0) == 0);
    float *gx = dput(x, N * C * 4), *gr = dput(r, N * 4), *gd = dput(d, N * C * 4), *gw = dput(w, C * 4);
    float *gdw = dput(dw0, C * 4);
    CUOK(sz_cuda_rmsnorm_bwd_mx(S, NULL, gdw, gd, SZ_CUDA_F32, gx, gw, SZ_CUDA_F32, gr, N, C, 0));
    dget(got, gdw, C * 4);
    CU_ASSERT(close_f("rmsnorm_mx dweight without dinp", got, dw, C, 2e-5, 2e-5));
    CU_ASSERT(sz_cuda_layernorm_fwd_mx(S, gx, 5, gr, gr, gx, gw, NULL, SZ_CUDA_F32, N, C) != 0); /* a bad type */
    dfree(gx), dfree(gr), dfree(gd), dfree(gw), dfree(gdw);
    free(x), free(r), free(d), free(w), free(dw0), free(dw);
}

/* ---- encoder and embedding from bf16 tables (bitwise the CPU's) ---- */

static void test_lookup_mx(void)
{
    int B = 3, T = 5, C = 39, V = 13;
    size_t BT = (size_t)B * T, BTC = BT * C;
    int *tok = tokens(BT, V);
    tok[0] = tok[2] = 4;
    float *fwte = rnd((size_t)V * C, 1), *fwpe = rnd((size_t)T * C, 1);
    for (int pd = 0; pd < 2; pd++) {
        void *wte = typed(fwte, (size_t)V * C, pd), *wpe = typed(fwpe, (size_t)T * C, pd);
        float *ref = malloc(BTC * 4), *eref = malloc(BTC * 4), *got = malloc(BTC * 4), *egot = malloc(BTC * 4);
        sz_k_encoder_fwd_mx(ref, tok, wte, wpe, (sz_k_dtype)pd, B, T, C);
        CU_ASSERT(sz_k_embedding_fwd_mx(eref, tok, wte, (sz_k_dtype)pd, (int)BT, C, V) == -1);
        int *gt = dput(tok, BT * 4);
        void *gwte = dput(wte, (size_t)V * C * esz(pd)), *gwpe = dput(wpe, (size_t)T * C * esz(pd));
        float *go = dput(NULL, BTC * 4), *geo = dput(NULL, BTC * 4);
        CUOK(sz_cuda_encoder_fwd_mx(S, go, gt, gwte, gwpe, pd, B, T, C));
        CUOK(sz_cuda_embedding_fwd_mx(S, geo, gt, gwte, pd, (int)BT, C, V));
        dget(got, go, BTC * 4), dget(egot, geo, BTC * 4);
        CU_ASSERT(same_bits(pd ? "encoder_mx bf16 tables vs cpu" : "encoder_mx fp32 vs cpu", got, ref, BTC * 4));
        CU_ASSERT(same_bits(pd ? "embedding_mx bf16 table vs cpu" : "embedding_mx fp32 vs cpu", egot, eref, BTC * 4));
        dfree(gt), dfree(gwte), dfree(gwpe), dfree(go), dfree(geo);
        free(wte), free(wpe), free(ref), free(eref), free(got), free(egot);
    }
    free(tok), free(fwte), free(fwpe);
}

/* ---------------------------------------------------------------- native bf16 path, part 2
 * attention, softmax-xent (fused and backward), GELU, SiLU, mul, residual, RoPE with bf16 operands
 * (and fp32 with set), each against its CPU _mx twin. Bounds: a bf16 result within 1 bf16 ulp of the
 * CPU's, or within the fp32 comparison's bound where the fp32 values before rounding may differ by
 * more than half an ulp (attention's sums in another order: atol 1e-5 (out) / 1e-5 T (dinp), rtol
 * 1e-4; the exp-based elementwise ops: the device exp polynomial may contract differently, 1e-6
 * atol, 1e-5 rtol); fp32 results within those fp32 bounds; the losses 1e-5 relative. Every GPU
 * result computed twice and required bitwise equal. A "set" gradient starts as NaN bytes on the GPU
 * (it must not be read) and as random values on the CPU. */

/* bf16 bits as an ordered integer (sign-magnitude to two's complement): adjacent values differ by 1 */
static int32_t mx_ord(uint16_t h) { return (h & 0x8000) ? -(int32_t)(h & 0x7FFF) : (int32_t)h; }

/* g, c of type dt (n elements): fp32 within atol + rtol |c|; bf16 within 1 ulp or that bound. */
static int mx_close(const char *what, int dt, const void *g, const void *c, size_t n, double atol, double rtol)
{
    if (dt == SZ_K_F32)
        return close_f(what, g, c, n, atol, rtol);
    const uint16_t *gh = g, *ch = c;
    size_t bad = 0, off = 0, wi = 0;
    int32_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t d = abs(mx_ord(gh[i]) - mx_ord(ch[i]));
        float gf = sz_bf16_to_f32_1(gh[i]), cf = sz_bf16_to_f32_1(ch[i]);
        off += d != 0;
        if (d > worst)
            worst = d, wi = i;
        if (d > 1 && !(fabs((double)gf - cf) <= atol + rtol * fabs((double)cf)))
            bad++;
    }
    if (bad || getenv("SZ_TEST_VERBOSE"))
        printf("\n  %s (bf16): %zu of %zu differ, worst %d ulp at %zu (gpu %.9g, ref %.9g), %zu beyond 1 ulp and the "
               "bound%s", what, off, n, (int)worst, wi, n ? sz_bf16_to_f32_1(gh[wi]) : 0.0,
               n ? sz_bf16_to_f32_1(ch[wi]) : 0.0, bad, bad ? "  FAILED" : "");
    return bad == 0;
}

/* n elements of type dt from fp32 values (bf16: rounded), host copy malloc'd */
static void *mx_host(const float *x, int dt, size_t n)
{
    if (dt == SZ_K_BF16)
        return bf16_of(x, n);
    return copyf(x, n);
}
static size_t mx_es(int dt) { return dt == SZ_K_BF16 ? 2 : 4; }
/* a device buffer of n elements of type dt: a copy of h, or NaN bytes when h is NULL */
static void *mx_dev(const void *h, int dt, size_t n)
{
    void *d = dput(h, n * mx_es(dt));
    if (!h)
        CUOK(cudaMemset(d, 0xFF, n * mx_es(dt)));
    return d;
}

/* The row-per-block kernels by name (the tiled ones, the default for hs 64, round q, k, v to bf16
 * with a bf16 out: test_attention_tiled, with its own bounds). */
static void mx_attention_case(int B, int T, int NH, int hs)
{
    int C = NH * hs;
    size_t ni = (size_t)B * T * 3 * C, no = (size_t)B * T * C, ns = (size_t)B * NH * T * 2;
    float *inp = rnd(ni, 1), *dout = rnd(no, 1), *di0 = rnd(ni, 1);
    /* forward, out fp32 and bf16 */
    for (int odt = 0; odt < 2; odt++) {
        void *out = malloc(no * mx_es(odt)), *got[2];
        float *st = malloc(ns * 4), *gst[2];
        CU_ASSERT(sz_k_attention_fwd_mx_impl(out, odt, st, inp, B, T, C, NH, SZ_K_ATT_ROWWISE) == 0);
        for (int r = 0; r < 2; r++) {
            float *gi = dput(inp, ni * 4), *gs = dput(NULL, ns * 4);
            void *go = mx_dev(NULL, odt, no);
            CUOK(sz_cuda_attention_fwd_mx_impl(S, go, odt, gs, gi, B, T, C, NH, SZ_CUDA_ATT_ROWWISE));
            got[r] = malloc(no * mx_es(odt)), gst[r] = malloc(ns * 4);
            dget(got[r], go, no * mx_es(odt)), dget(gst[r], gs, ns * 4);
            dfree(gi), dfree(gs), dfree(go);
        }
        char w[96];
        snprintf(w, sizeof w, "attention_fwd_mx out %s (B %d T %d NH %d hs %d)", odt ? "bf16" : "f32", B, T, NH, hs);
        CU_ASSERT(mx_close(w, odt, got[0], out, no, 1e-5, 1e-4));
        CU_ASSERT(close_f("attention_fwd_mx stats", gst[0], st, ns, 1e-6, 1e-5));
        CU_ASSERT(same_bits("attention_fwd_mx run to run", got[0], got[1], no * mx_es(odt)));
        CU_ASSERT(same_bits("attention_fwd_mx stats run to run", gst[0], gst[1], ns * 4));
        free(out), free(st), free(got[0]), free(got[1]), free(gst[0]), free(gst[1]);
    }
    /* backward from the CPU's stats (so only the backward is compared): dinp x dout types x set */
    float *st = malloc(ns * 4), *o32 = malloc(no * 4);
    CU_ASSERT(sz_k_attention_fwd(o32, st, inp, B, T, C, NH) == 0);
    free(o32);
    for (int idt = 0; idt < 2; idt++)
        for (int ddt = 0; ddt < 2; ddt++)
            for (int set = 0; set < 2; set++) {
                void *dh = mx_host(dout, ddt, no), *ref = mx_host(di0, idt, ni), *got[2];
                CU_ASSERT(sz_k_attention_bwd_mx_impl(ref, idt, dh, ddt, inp, st, B, T, C, NH, set ? SZ_K_SET_DINP : 0,
                                                     SZ_K_ATT_ROWWISE) == 0);
                void *start = mx_host(di0, idt, ni);
                for (int r = 0; r < 2; r++) {
                    float *gi = dput(inp, ni * 4), *gs = dput(st, ns * 4);
                    void *gd = mx_dev(dh, ddt, no), *gdi = mx_dev(set ? NULL : start, idt, ni);
                    CUOK(sz_cuda_attention_bwd_mx_impl(S, gdi, idt, gd, ddt, gi, gs, B, T, C, NH,
                                                       set ? SZ_K_SET_DINP : 0, SZ_CUDA_ATT_ROWWISE));
                    got[r] = malloc(ni * mx_es(idt));
                    dget(got[r], gdi, ni * mx_es(idt));
                    dfree(gi), dfree(gs), dfree(gd), dfree(gdi);
                }
                char w[112];
                snprintf(w, sizeof w, "attention_bwd_mx dinp %s dout %s set %d (B %d T %d NH %d hs %d)",
                         idt ? "bf16" : "f32", ddt ? "bf16" : "f32", set, B, T, NH, hs);
                CU_ASSERT(mx_close(w, idt, got[0], ref, ni, 1e-5 * T, 1e-4));
                CU_ASSERT(same_bits("attention_bwd_mx run to run", got[0], got[1], ni * mx_es(idt)));
                free(dh), free(ref), free(start), free(got[0]), free(got[1]);
            }
    free(st), free(inp), free(dout), free(di0);
}

static void test_mx_attention(void)
{
    mx_attention_case(2, 13, 3, 37); /* odd head size, fewer rows than threads */
    mx_attention_case(1, 70, 2, 64); /* rows beyond one pass of the block */
}

/* ---------------------------------------------------------------- tiled attention
 * The tiled (FlashAttention-2) kernels, asked for by name (SZ_CUDA_ATT_TILED), against the CPU
 * twin and against the row-per-block CUDA kernels (SZ_CUDA_ATT_ROWWISE). fp32 out/dinp: fp32 FMA
 * tiles, the fp32 bounds above (out atol 1e-5 rtol 1e-4, stats 1e-6/1e-5, dinp 1e-5 T / 1e-4).
 * bf16 out/dinp: bf16 tensor-core tiles, which round q, k, v to bf16: the CPU gets the same
 * bf16-rounded inp (exact in fp32), so what is left is p and dS rounded to bf16 before their
 * products and sums in another order: out within 1 bf16 ulp or atol 4e-3 rtol 1e-2; stats atol 1e-5
 * rtol 1e-4; dinp within 1 ulp or atol 1e-2 rtol 2e-2. Odd T (1, 17, 100, 257: partial tiles, one
 * and several tiles), B*NH > 1, head sizes 32, 64, 128, dout fp32 and bf16, set and accumulate,
 * run-to-run bits. A shape the tiled kernels do not cover on this device (the fp32 tiles of head
 * size 128 need more shared memory than a block may have) is reported and skipped. */

static int tiled_covers_or_say(int T, int C, int NH, int bf16)
{
    if (sz_cuda_attention_tiled_covers(T, C, NH, bf16))
        return 1;
    printf("\n  tiled attention (%s, T %d C %d NH %d) not covered on this device: skipped", bf16 ? "bf16" : "fp32",
           T, C, NH);
    return 0;
}

static void tiled_attention_case(int B, int T, int NH, int hs, int bf16)
{
    int C = NH * hs, odt = bf16 ? SZ_K_BF16 : SZ_K_F32;
    if (!tiled_covers_or_say(T, C, NH, bf16))
        return;
    size_t ni = (size_t)B * T * 3 * C, no = (size_t)B * T * C, ns = (size_t)B * NH * T * 2;
    float *inp = rnd(ni, 1), *dout = rnd(no, 1), *di0 = rnd(ni, 1);
    if (bf16) { /* the tensor-core kernels' own rounding of q, k, v, given to the CPU too */
        uint16_t *h = bf16_of(inp, ni);
        for (size_t i = 0; i < ni; i++)
            inp[i] = sz_bf16_to_f32_1(h[i]);
        free(h);
    }
    double oa = bf16 ? 4e-3 : 1e-5, orl = bf16 ? 1e-2 : 1e-4, sa = bf16 ? 1e-5 : 1e-6, srl = bf16 ? 1e-4 : 1e-5;
    double da = bf16 ? 1e-2 : 1e-5 * T, drl = bf16 ? 2e-2 : 1e-4;
    char w[128];
    /* forward: tiled twice (bits), rowwise once, CPU */
    void *out = malloc(no * mx_es(odt)), *got[3];
    float *st = malloc(ns * 4), *gst[3];
    CU_ASSERT(sz_k_attention_fwd_mx_impl(out, odt, st, inp, B, T, C, NH, SZ_K_ATT_ROWWISE) == 0);
    for (int r = 0; r < 3; r++) {
        float *gi = dput(inp, ni * 4), *gs = dput(NULL, ns * 4);
        void *go = mx_dev(NULL, odt, no);
        CUOK(sz_cuda_attention_fwd_mx_impl(S, go, odt, gs, gi, B, T, C, NH, r < 2 ? SZ_CUDA_ATT_TILED : SZ_CUDA_ATT_ROWWISE));
        got[r] = malloc(no * mx_es(odt)), gst[r] = malloc(ns * 4);
        dget(got[r], go, no * mx_es(odt)), dget(gst[r], gs, ns * 4);
        dfree(gi), dfree(gs), dfree(go);
    }
    snprintf(w, sizeof w, "tiled attention fwd out %s vs cpu (B %d T %d NH %d hs %d)", bf16 ? "bf16" : "f32", B, T, NH, hs);
    CU_ASSERT(mx_close(w, odt, got[0], out, no, oa, orl));
    snprintf(w, sizeof w, "tiled attention fwd out %s vs rowwise cuda (T %d hs %d)", bf16 ? "bf16" : "f32", T, hs);
    CU_ASSERT(mx_close(w, odt, got[0], got[2], no, oa, orl));
    CU_ASSERT(close_f("tiled attention stats vs cpu", gst[0], st, ns, sa, srl));
    CU_ASSERT(close_f("tiled attention stats vs rowwise cuda", gst[0], gst[2], ns, sa, srl));
    CU_ASSERT(same_bits("tiled attention fwd run to run", got[0], got[1], no * mx_es(odt)));
    CU_ASSERT(same_bits("tiled attention stats run to run", gst[0], gst[1], ns * 4));
    for (int r = 0; r < 3; r++)
        free(got[r]), free(gst[r]);
    free(out);
    /* backward from the CPU's stats: dout fp32 and bf16, set and accumulate */
    for (int ddt = 0; ddt < 2; ddt++)
        for (int set = 0; set < 2; set++) {
            void *dh = mx_host(dout, ddt, no), *ref = mx_host(di0, odt, ni), *start = mx_host(di0, odt, ni), *g[3];
            CU_ASSERT(sz_k_attention_bwd_mx_impl(ref, odt, dh, ddt, inp, st, B, T, C, NH, set ? SZ_K_SET_DINP : 0,
                                                 SZ_K_ATT_ROWWISE) == 0);
            for (int r = 0; r < 3; r++) {
                float *gi = dput(inp, ni * 4), *gs = dput(st, ns * 4);
                void *gd = mx_dev(dh, ddt, no), *gdi = mx_dev(set ? NULL : start, odt, ni);
                CUOK(sz_cuda_attention_bwd_mx_impl(S, gdi, odt, gd, ddt, gi, gs, B, T, C, NH, set ? SZ_K_SET_DINP : 0,
                                                   r < 2 ? SZ_CUDA_ATT_TILED : SZ_CUDA_ATT_ROWWISE));
                g[r] = malloc(ni * mx_es(odt));
                dget(g[r], gdi, ni * mx_es(odt));
                dfree(gi), dfree(gs), dfree(gd), dfree(gdi);
            }
            snprintf(w, sizeof w, "tiled attention bwd dinp %s dout %s set %d vs cpu (B %d T %d NH %d hs %d)",
                     bf16 ? "bf16" : "f32", ddt ? "bf16" : "f32", set, B, T, NH, hs);
            CU_ASSERT(mx_close(w, odt, g[0], ref, ni, da, drl));
            snprintf(w, sizeof w, "tiled attention bwd dinp %s dout %s set %d vs rowwise cuda (T %d hs %d)",
                     bf16 ? "bf16" : "f32", ddt ? "bf16" : "f32", set, T, hs);
            CU_ASSERT(mx_close(w, odt, g[0], g[2], ni, da, drl));
            CU_ASSERT(same_bits("tiled attention bwd run to run", g[0], g[1], ni * mx_es(odt)));
            for (int r = 0; r < 3; r++)
                free(g[r]);
            free(dh), free(ref), free(start);
        }
    free(st), free(inp), free(dout), free(di0);
}

static void test_attention_tiled(void)
{
    /* GPT-2's head size on an H100/H200-class GPU: both kinds of tiles must be there */
    CU_ASSERT(sz_cuda_attention_tiled_covers(1024, 768, 12, 1));
    for (int bf16 = 0; bf16 < 2; bf16++) {
        tiled_attention_case(2, 1, 3, 64, bf16);  /* one row */
        tiled_attention_case(2, 17, 3, 64, bf16); /* a partial tile */
        tiled_attention_case(1, 100, 2, 32, bf16);
        tiled_attention_case(2, 257, 2, 64, bf16); /* five tiles, the last with one row */
        tiled_attention_case(1, 100, 2, 128, bf16);
    }
    /* what the entry points choose: the tiled kernels by default, the rowwise ones on request */
    int B = 1, T = 70, NH = 2, hs = 64, C = NH * hs;
    size_t ni = (size_t)B * T * 3 * C, no = (size_t)B * T * C, ns = (size_t)B * NH * T * 2;
    float *inp = rnd(ni, 1), *gi = dput(inp, ni * 4), *go = dput(NULL, no * 4), *gs = dput(NULL, ns * 4);
    float *o[3];
    for (int r = 0; r < 3; r++) {
        if (r == 2)
            sz_cuda_attention_set_rowwise(1);
        CUOK(r == 0 ? sz_cuda_attention_fwd_mx_impl(S, go, SZ_K_F32, gs, gi, B, T, C, NH, SZ_CUDA_ATT_TILED)
                    : sz_cuda_attention_fwd(S, go, gs, gi, B, T, C, NH));
        o[r] = malloc(no * 4);
        dget(o[r], go, no * 4);
    }
    sz_cuda_attention_set_rowwise(0);
    CUOK(sz_cuda_attention_fwd_mx_impl(S, go, SZ_K_F32, gs, gi, B, T, C, NH, SZ_CUDA_ATT_ROWWISE));
    float *rw = malloc(no * 4);
    dget(rw, go, no * 4);
    CU_ASSERT(same_bits("the default is the tiled kernel", o[0], o[1], no * 4));
    CU_ASSERT(same_bits("set to rowwise (SZ_CUDA_ATTENTION=rowwise) is the rowwise kernel", o[2], rw, no * 4));
    /* a head size the tiled kernels do not have: refused by name, rowwise by default */
    CU_ASSERT(sz_cuda_attention_fwd_mx_impl(S, go, SZ_K_F32, gs, gi, 1, 10, 3 * 37, 3, SZ_CUDA_ATT_TILED) ==
              (int)cudaErrorNotSupported);
    CU_ASSERT(sz_cuda_attention_tiled_covers(10, 3 * 37, 3, 0) == 0);
    for (int r = 0; r < 3; r++)
        free(o[r]);
    free(rw), free(inp), dfree(gi), dfree(go), dfree(gs);
}

static void test_mx_softmax_xent(void)
{
    int N = 7, V = 1001, Vp = 1040;
    size_t n = (size_t)N * Vp;
    float *lf = rnd(n, 8);
    int *tg = tokens(N, V);
    tg[0] = 0, tg[1] = V - 1; /* the first and the last real column */
    uint16_t *lh = bf16_of(lf, n);
    /* fused, in place on bf16 logits */
    uint16_t *ref = malloc(n * 2);
    memcpy(ref, lh, n * 2);
    float *loss = malloc(N * 4), g = 1.0f / 3.0f;
    CU_ASSERT(sz_k_softmax_xent_fused_mx(ref, SZ_K_BF16, loss, tg, g, N, V, Vp) == 0);
    uint16_t *got[2];
    float *gl[2];
    for (int r = 0; r < 2; r++) {
        uint16_t *dl = dput(lh, n * 2);
        float *dls = dput(NULL, N * 4);
        int *dt = dput(tg, N * 4);
        CUOK(sz_cuda_softmax_xent_fused_bf16(S, dl, dls, dt, g, N, V, Vp));
        got[r] = malloc(n * 2), gl[r] = malloc(N * 4);
        dget(got[r], dl, n * 2), dget(gl[r], dls, N * 4);
        dfree(dl), dfree(dls), dfree(dt);
    }
    CU_ASSERT(close_f("softmax_xent_fused bf16 losses", gl[0], loss, N, 1e-6, 1e-5));
    CU_ASSERT(mx_close("softmax_xent_fused bf16 dlogits", SZ_K_BF16, got[0], ref, n, 1e-8, 1e-5));
    CU_ASSERT(same_bits("softmax_xent_fused bf16 run to run", got[0], got[1], n * 2));
    CU_ASSERT(same_bits("softmax_xent_fused bf16 losses run to run", gl[0], gl[1], N * 4));
    for (int i = 0; i < N; i++) /* padded columns exactly 0 */
        for (int v = V; v < Vp; v++)
            CU_ASSERT(got[0][(size_t)i * Vp + v] == 0);
    /* the backward into bf16 dlogits from fp32 probs */
    float *probs = malloc(n * 4), *l2 = malloc(N * 4), *dloss = rnd(N, 1);
    sz_k_softmax_xent_fwd(probs, l2, lf, tg, N, V, Vp);
    uint16_t *dref = malloc(n * 2), *dg = malloc(n * 2);
    sz_k_softmax_xent_bwd_mx(dref, SZ_K_BF16, probs, tg, dloss, N, V, Vp);
    float *cp = dput(probs, n * 4), *dd = dput(dloss, N * 4);
    int *dt = dput(tg, N * 4);
    uint16_t *o = mx_dev(NULL, SZ_K_BF16, n);
    CUOK(sz_cuda_softmax_xent_bwd_mx(S, o, SZ_K_BF16, cp, dt, dd, 0.0f, N, V, Vp));
    dget(dg, o, n * 2);
    CU_ASSERT(same_bits("softmax_xent_bwd bf16 dlogits (the fp32 value rounded)", dg, dref, n * 2));
    dfree(cp), dfree(dd), dfree(dt), dfree(o);
    free(lf), free(tg), free(lh), free(ref), free(loss), free(got[0]), free(got[1]), free(gl[0]), free(gl[1]);
    free(probs), free(l2), free(dloss), free(dref), free(dg);
}

/* GELU, SiLU, mul, residual with every combination of operand types the CPU takes (and set). */
static void test_mx_elementwise(void)
{
    size_t n = 5003; /* odd, several blocks */
    float *x = rnd(n, 4), *y = rnd(n, 2), *d = rnd(n, 1), *g0 = rnd(n, 1), *h0 = rnd(n, 1);
    for (size_t i = 0; i < n; i += 97) d[i] = 0.0f; /* zero contributions */
    float *gx = dput(x, n * 4), *gy = dput(y, n * 4);
    char w[128];
    /* forwards: out bf16 */
    for (int op = 0; op < 3; op++) {
        uint16_t *ref = malloc(n * 2), *got[2];
        if (op == 0) sz_k_gelu_fwd_mx(ref, SZ_K_BF16, x, n);
        if (op == 1) sz_k_silu_fwd_mx(ref, SZ_K_BF16, x, n);
        if (op == 2) sz_k_mul_fwd_mx(ref, SZ_K_BF16, x, y, n);
        for (int r = 0; r < 2; r++) {
            void *go = mx_dev(NULL, SZ_K_BF16, n);
            if (op == 0) CUOK(sz_cuda_gelu_fwd_mx(S, go, SZ_K_BF16, gx, n));
            if (op == 1) CUOK(sz_cuda_silu_fwd_mx(S, go, SZ_K_BF16, gx, n));
            if (op == 2) CUOK(sz_cuda_mul_fwd_mx(S, go, SZ_K_BF16, gx, gy, n));
            got[r] = malloc(n * 2);
            dget(got[r], go, n * 2);
            dfree(go);
        }
        const char *nm[3] = {"gelu_fwd_mx", "silu_fwd_mx", "mul_fwd_mx"};
        snprintf(w, sizeof w, "%s out bf16", nm[op]);
        CU_ASSERT(mx_close(w, SZ_K_BF16, got[0], ref, n, 1e-6, 1e-5));
        CU_ASSERT(same_bits(w, got[0], got[1], n * 2));
        free(ref), free(got[0]), free(got[1]);
    }
    /* backwards: gradient type x dout type (x set for GELU) */
    for (int gdt = 0; gdt < 2; gdt++)
        for (int ddt = 0; ddt < 2; ddt++)
            for (int op = 0; op < 3; op++)
                for (int set = 0; set < (op == 0 ? 2 : 1); set++) {
                    if (!gdt && !ddt && !set)
                        continue; /* the fp32 kernels: test_gelu_residual, test_silu_mul */
                    void *dh = mx_host(d, ddt, n), *ra = mx_host(g0, gdt, n), *rb = mx_host(h0, gdt, n);
                    void *sa = mx_host(g0, gdt, n), *sb = mx_host(h0, gdt, n), *ga[2], *gb[2];
                    if (op == 0) sz_k_gelu_bwd_mx_set(ra, gdt, x, dh, ddt, n, set ? SZ_K_SET_DINP : 0);
                    if (op == 1) sz_k_silu_bwd_mx(ra, gdt, x, dh, ddt, n);
                    if (op == 2) sz_k_mul_bwd_mx(ra, gdt, rb, gdt, dh, ddt, x, y, n);
                    for (int r = 0; r < 2; r++) {
                        void *gd = mx_dev(dh, ddt, n), *da = mx_dev(set ? NULL : sa, gdt, n), *db = mx_dev(sb, gdt, n);
                        if (op == 0) CUOK(sz_cuda_gelu_bwd_mx(S, da, gdt, gx, gd, ddt, n, set ? SZ_K_SET_DINP : 0));
                        if (op == 1) CUOK(sz_cuda_silu_bwd_mx(S, da, gdt, gx, gd, ddt, n));
                        if (op == 2) CUOK(sz_cuda_mul_bwd_mx(S, da, gdt, db, gdt, gd, ddt, gx, gy, n));
                        ga[r] = malloc(n * mx_es(gdt)), gb[r] = malloc(n * mx_es(gdt));
                        dget(ga[r], da, n * mx_es(gdt)), dget(gb[r], db, n * mx_es(gdt));
                        dfree(gd), dfree(da), dfree(db);
                    }
                    const char *nm[3] = {"gelu_bwd_mx dinp", "silu_bwd_mx dinp", "mul_bwd_mx da"};
                    snprintf(w, sizeof w, "%s %s dout %s set %d", nm[op], gdt ? "bf16" : "f32", ddt ? "bf16" : "f32",
                             set);
                    CU_ASSERT(mx_close(w, gdt, ga[0], ra, n, 1e-6, 1e-5));
                    CU_ASSERT(same_bits(w, ga[0], ga[1], n * mx_es(gdt)));
                    if (op == 2) {
                        snprintf(w, sizeof w, "mul_bwd_mx db %s dout %s", gdt ? "bf16" : "f32", ddt ? "bf16" : "f32");
                        CU_ASSERT(mx_close(w, gdt, gb[0], rb, n, 1e-6, 1e-5));
                        CU_ASSERT(same_bits(w, gb[0], gb[1], n * mx_es(gdt)));
                    }
                    free(dh), free(ra), free(rb), free(sa), free(sb);
                    for (int r = 0; r < 2; r++) free(ga[r]), free(gb[r]);
                }
    /* residual backward: da, db of either type, each set or not (dout fp32); an add or a copy, so
     * bitwise the CPU's */
    float *gdo = dput(d, n * 4);
    for (int adt = 0; adt < 2; adt++)
        for (int bdt = 0; bdt < 2; bdt++)
            for (int set = 0; set < 4; set++) {
                if (!adt && !bdt && !set)
                    continue;
                void *ra = mx_host(g0, adt, n), *rb = mx_host(h0, bdt, n);
                void *sa = mx_host(g0, adt, n), *sb = mx_host(h0, bdt, n);
                sz_k_residual_bwd_mx_set(ra, adt, rb, bdt, d, n, set);
                void *da = mx_dev(set & SZ_K_SET_A ? NULL : sa, adt, n), *db = mx_dev(set & SZ_K_SET_B ? NULL : sb, bdt, n);
                CUOK(sz_cuda_residual_bwd_mx(S, da, adt, db, bdt, gdo, n, set));
                void *a = malloc(n * mx_es(adt)), *b = malloc(n * mx_es(bdt));
                dget(a, da, n * mx_es(adt)), dget(b, db, n * mx_es(bdt));
                snprintf(w, sizeof w, "residual_bwd_mx da %s db %s set %d", adt ? "bf16" : "f32", bdt ? "bf16" : "f32", set);
                CU_ASSERT(same_bits(w, a, ra, n * mx_es(adt)));
                CU_ASSERT(same_bits(w, b, rb, n * mx_es(bdt)));
                dfree(da), dfree(db);
                free(ra), free(rb), free(sa), free(sb), free(a), free(b);
            }
    dfree(gx), dfree(gy), dfree(gdo);
    free(x), free(y), free(d), free(g0), free(h0);
}

/* SwiGLU with bf16 operands: out bf16 (forward); dgate, dup, dout each fp32 or bf16 (backward, every
 * combination but all-fp32, which test_swiglu covers), against the CPU's _mx kernels: bf16 within 1
 * ulp or the fp32 bound (the exp differs by rounding), fp32 within that bound; run to run bitwise. */
static void test_mx_swiglu(void)
{
    size_t n = 4099;
    float *g = rnd(n, 6), *u = rnd(n, 2), *d = rnd(n, 1), *a0 = rnd(n, 1), *b0 = rnd(n, 1);
    for (size_t i = 0; i < n; i += 101) d[i] = 0.0f;
    float *gg = dput(g, n * 4), *gu = dput(u, n * 4);
    char w[128];
    {
        uint16_t *ref = malloc(n * 2), *got[2];
        sz_k_swiglu_fwd_mx(ref, SZ_K_BF16, g, u, n);
        for (int r = 0; r < 2; r++) {
            void *go = mx_dev(NULL, SZ_K_BF16, n);
            CUOK(sz_cuda_swiglu_fwd_mx(S, go, SZ_K_BF16, gg, gu, n));
            got[r] = malloc(n * 2);
            dget(got[r], go, n * 2);
            dfree(go);
        }
        CU_ASSERT(mx_close("swiglu_fwd_mx out bf16", SZ_K_BF16, got[0], ref, n, 1e-6, 1e-5));
        CU_ASSERT(same_bits("swiglu_fwd_mx run to run", got[0], got[1], n * 2));
        free(ref), free(got[0]), free(got[1]);
    }
    for (int combo = 1; combo < 8; combo++) {
        int adt = combo & 1, bdt = (combo >> 1) & 1, ddt = (combo >> 2) & 1;
        void *dh = mx_host(d, ddt, n), *ra = mx_host(a0, adt, n), *rb = mx_host(b0, bdt, n);
        void *sa = mx_host(a0, adt, n), *sb = mx_host(b0, bdt, n), *ga[2], *gb[2];
        sz_k_swiglu_bwd_mx(ra, adt, rb, bdt, dh, ddt, g, u, n);
        for (int r = 0; r < 2; r++) {
            void *gd = mx_dev(dh, ddt, n), *da = mx_dev(sa, adt, n), *db = mx_dev(sb, bdt, n);
            CUOK(sz_cuda_swiglu_bwd_mx(S, da, adt, db, bdt, gd, ddt, gg, gu, n));
            ga[r] = malloc(n * mx_es(adt)), gb[r] = malloc(n * mx_es(bdt));
            dget(ga[r], da, n * mx_es(adt)), dget(gb[r], db, n * mx_es(bdt));
            dfree(gd), dfree(da), dfree(db);
        }
        snprintf(w, sizeof w, "swiglu_bwd_mx dgate %s (dup %s, dout %s)", dtn(adt), dtn(bdt), dtn(ddt));
        CU_ASSERT(mx_close(w, adt, ga[0], ra, n, 1e-6, 1e-5));
        CU_ASSERT(same_bits(w, ga[0], ga[1], n * mx_es(adt)));
        snprintf(w, sizeof w, "swiglu_bwd_mx dup %s (dgate %s, dout %s)", dtn(bdt), dtn(adt), dtn(ddt));
        CU_ASSERT(mx_close(w, bdt, gb[0], rb, n, 1e-6, 1e-5));
        CU_ASSERT(same_bits(w, gb[0], gb[1], n * mx_es(bdt)));
        free(dh), free(ra), free(rb), free(sa), free(sb);
        for (int r = 0; r < 2; r++) free(ga[r]), free(gb[r]);
    }
    dfree(gg), dfree(gu);
    free(g), free(u), free(d), free(a0), free(b0);
}

static void test_mx_rope(void)
{
    int B = 2, T = 19, C = 3 * 10, NH = 3;
    size_t n = (size_t)B * T * 3 * C;
    float *d = rnd(n, 1), *di0 = rnd(n, 1);
    char w[96];
    for (int idt = 0; idt < 2; idt++)
        for (int ddt = 0; ddt < 2; ddt++)
            for (int set = 0; set < 2; set++) {
                if (!idt && !ddt && !set)
                    continue; /* test_rope */
                void *dh = mx_host(d, ddt, n), *ref = mx_host(di0, idt, n), *start = mx_host(di0, idt, n), *got[2];
                CU_ASSERT(sz_k_rope_bwd_mx_set(ref, idt, dh, ddt, B, T, C, NH, 10000.0f, set ? SZ_K_SET_DINP : 0) == 0);
                for (int r = 0; r < 2; r++) {
                    void *gd = mx_dev(dh, ddt, n), *gi = mx_dev(set ? NULL : start, idt, n);
                    CUOK(sz_cuda_rope_bwd_mx(S, gi, idt, gd, ddt, B, T, C, NH, 10000.0f, set ? SZ_K_SET_DINP : 0));
                    got[r] = malloc(n * mx_es(idt));
                    dget(got[r], gi, n * mx_es(idt));
                    dfree(gd), dfree(gi);
                }
                snprintf(w, sizeof w, "rope_bwd_mx dinp %s dout %s set %d", idt ? "bf16" : "f32", ddt ? "bf16" : "f32", set);
                CU_ASSERT(mx_close(w, idt, got[0], ref, n, 1e-6, 1e-6));
                CU_ASSERT(same_bits(w, got[0], got[1], n * mx_es(idt)));
                free(dh), free(ref), free(start), free(got[0]), free(got[1]);
            }
    free(d), free(di0);
}

/* ---------------------------------------------------------------- attention timing
 * `test_cuda_kernels --bench-attention`: not a test (no pass/fail on a time) but the figures
 * scripts/gpu-check.sh puts in its attention_bench row: the native bf16 path's call (out, dout,
 * dinp bf16, dinp set) at GPT-2 124M's shape B8 T1024 NH12 hs64, tiled and rowwise, ms per call
 * (median of 5 after a warm-up) and TFLOP/s of the causal attention's useful products (forward
 * 2 B NH T^2 hs, backward 5 B NH T^2 hs; the backward's recomputation not counted). */
static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}
static int bench_attention(void)
{
    int B = 8, T = 1024, NH = 12, hs = 64, C = NH * hs;
    size_t ni = (size_t)B * T * 3 * C, no = (size_t)B * T * C, ns = (size_t)B * NH * T * 2;
    float *inp = rnd(ni, 1), *gi = dput(inp, ni * 4), *gs = dput(NULL, ns * 4);
    uint16_t *dh = bf16_of(inp, no);
    void *go = dput(NULL, no * 2), *gd = dput(dh, no * 2), *gdi = dput(NULL, ni * 2);
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
        return 1;
    double ffl = 2.0 * B * NH * (double)T * T * hs, bfl = 2.5 * ffl;
    float ms[2][2];
    int rc = 0;
    for (int impl = 0; impl < 2; impl++)
        for (int dir = 0; dir < 2; dir++) {
            float t[6];
            for (int r = 0; r < 6 && !rc; r++) {
                cudaEventRecord(e0, S);
                rc = dir == 0 ? sz_cuda_attention_fwd_mx_impl(S, go, SZ_CUDA_BF16, gs, gi, B, T, C, NH,
                                                              impl ? SZ_CUDA_ATT_ROWWISE : SZ_CUDA_ATT_TILED)
                              : sz_cuda_attention_bwd_mx_impl(S, gdi, SZ_CUDA_BF16, gd, SZ_CUDA_BF16, gi, gs, B, T, C,
                                                              NH, 1, impl ? SZ_CUDA_ATT_ROWWISE : SZ_CUDA_ATT_TILED);
                cudaEventRecord(e1, S);
                if (!rc)
                    rc = (int)cudaEventSynchronize(e1);
                if (!rc)
                    rc = (int)cudaEventElapsedTime(&t[r], e0, e1);
            }
            if (rc) {
                printf("{\"error\": \"attention %s %s: cuda error %d\"}\n", impl ? "rowwise" : "tiled",
                       dir ? "bwd" : "fwd", rc);
                return 1;
            }
            qsort(t + 1, 5, sizeof t[0], cmp_f);
            ms[impl][dir] = t[3];
        }
    printf("{\"shape\": \"B%d T%d NH%d hs%d bf16\", \"tiled_fwd_ms\": %.4f, \"tiled_bwd_ms\": %.4f, "
           "\"tiled_fwd_tflops\": %.2f, \"tiled_bwd_tflops\": %.2f, \"rowwise_fwd_ms\": %.4f, \"rowwise_bwd_ms\": %.4f, "
           "\"speedup_fwd\": %.2f, \"speedup_bwd\": %.2f}\n",
           B, T, NH, hs, ms[0][0], ms[0][1], ffl / (ms[0][0] * 1e9), bfl / (ms[0][1] * 1e9), ms[1][0], ms[1][1],
           ms[1][0] / ms[0][0], ms[1][1] / ms[0][1]);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    free(inp), free(dh), dfree(gi), dfree(gs), dfree(go), dfree(gd), dfree(gdi);
    return 0;
}

int main(int argc, char **argv)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    if (sz_cuda_device_count() < 1) {
        printf("skipped: no CUDA device (cudaGetDeviceCount gave none)\n");
        CU_cleanup_registry();
        return 77;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("device 0: %s, %d SMs, compute capability %d.%d\n", prop.name, prop.multiProcessorCount, prop.major,
               prop.minor);
    if (cudaStreamCreate(&S) != cudaSuccess || cublasCreate(&H) != CUBLAS_STATUS_SUCCESS) {
        printf("could not create a CUDA stream or cuBLAS handle\n");
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--bench-attention")) {
        int rc = bench_attention();
        cublasDestroy(H);
        cudaStreamDestroy(S);
        CU_cleanup_registry();
        return rc;
    }
    SZ_SUITE("cuda twins", {"encoder fwd/bwd (bitwise)", test_encoder}, {"embedding fwd/bwd", test_embedding},
             {"layernorm fwd/bwd", test_layernorm}, {"rmsnorm fwd/bwd", test_rmsnorm},
             {"matmul fp32 fwd/bwd", test_matmul_f32}, {"matmul bf16 fwd/bwd", test_matmul_bf16},
             {"attention fwd/bwd", test_attention}, {"gelu, residual", test_gelu_residual},
             {"silu, mul", test_silu_mul}, {"swiglu", test_swiglu}, {"rope", test_rope}, {"softmax + cross-entropy", test_softmax_xent},
             {"mse", test_mse}, {"adamw fp32 + fused norm", test_adamw}, {"adamw mixed", test_adamw_mixed},
             {"sgd momentum", test_sgd}, {"sumsq fp32/bf16", test_sumsq}, {"convert fp32/bf16/fp16 (bitwise)", test_convert},
             {"clip, scale, zero", test_clip_scale_zero}, {"reduce-scatter's piece sum (bitwise)", test_reduce_pieces});
    SZ_SUITE("cuda twins, fp16 mixed precision (optimizers, norms, clip factor with the loss scale)",
             {"adamw fp16 grads and params, skipped step", test_f16_adamw},
             {"sgd fp16 grads and params, skipped step", test_f16_sgd}, {"sumsq fp16, inf and NaN", test_f16_sumsq},
             {"clip factor with the loss scale (bitwise)", test_f16_clip_scale});
    SZ_SUITE("cuda twins, native bf16 path (attention, softmax-xent, elementwise, rope)",
             {"attention fwd/bwd, bf16 out/dout/dinp, set", test_mx_attention},
             {"tiled attention (fp32 FMA, bf16 tensor cores) vs cpu and rowwise", test_attention_tiled},
             {"softmax-xent fused in place on bf16, bwd into bf16", test_mx_softmax_xent},
             {"gelu, silu, mul, residual with bf16 operands, set", test_mx_elementwise},
             {"swiglu with bf16 out / dgate / dup / dout", test_mx_swiglu},
             {"rope bwd bf16 dinp/dout, set", test_mx_rope});
    SZ_SUITE("cuda twins, native bf16 path (matmul, matmul + gelu, norms, lookups)",
             {"matmul any types, folded zero", test_matmul_any}, {"matmul + gelu", test_matmul_gelu},
             {"norms and residual fusions", test_norms_mx}, {"encoder, embedding", test_lookup_mx});
    int failed = sz_test_run();
    cublasDestroy(H);
    cudaStreamDestroy(S);
    return failed;
}
