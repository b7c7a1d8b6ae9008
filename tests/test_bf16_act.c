/* tests/test_bf16_act.c — the kernels of the native bf16 compute path (kernels/bf16_act.c):
 * layernorm, GELU, residual, softmax-xent backward, encoder and attention with bf16 operands (GPT-2),
 * RMSNorm and its fusion with the residual, RoPE's backward, the embedding, SiLU and the product (the
 * LLaMA-style ops), the public bf16 rounding (starzero.h's sz_bf16_from_f32, which apps' own ops
 * use), and the row conversions the kernels use (edge values against the scalar rule).
 *  - each against a double reference on the bf16-rounded inputs: fp32 outputs to fp32 tolerance,
 *    bf16 outputs to bf16's (2^-8 relative);
 *  - each against the fp32 kernel on the widened inputs: a bf16 output is bitwise that kernel's
 *    result rounded once, an fp32 one bitwise equal (the same formula, the same order);
 *  - each gives the same bits with 1, 2 and 3 OpenMP threads (sizes above the parallel threshold);
 *  - the emulated path's mix (fp32 activations, bf16 parameters read directly) of every non-matmul
 *    op that takes parameters: bitwise the fp32 kernel on the widened parameters, at 1-3 threads.
 * Exit code = failures. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/Basic.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"
#include "sz_test_data.h"
#include "starzero.h"

enum { N = 64, C = 384, NC = N * C }; /* N*C > SZ_PAR_MIN: the kernels run in parallel */

static uint16_t *h16(const float *x, size_t n) /* bf16 copy */
{
    uint16_t *h = malloc(n * sizeof *h);
    sz_k_f32_to_bf16(h, x, n);
    return h;
}
static float *w32(const uint16_t *h, size_t n) /* widened copy */
{
    float *x = malloc(n * sizeof *x);
    sz_k_bf16_to_f32(x, h, n);
    return x;
}
static int close_to(const char *what, const float *got, const double *ref, size_t n, double rel, double abs_tol)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= abs_tol + rel * fabs(ref[i]))) {
            fprintf(stderr, "%s[%zu]: %.9g, reference %.9g\n", what, i, got[i], ref[i]);
            return 0;
        }
    return 1;
}
static int same16(const uint16_t *a, const float *f, size_t n) /* a == bf16(f) bitwise */
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != sz_f32_to_bf16_1(f[i])) return 0;
    return 1;
}

/* ---- layernorm: out bf16 from fp32 inp and bf16 w, b; backward from bf16 dout ---- */
static void test_layernorm(void)
{
    float *x = rnd(NC, 2.0f), *wf = rnd(C, 1.0f), *bf = rnd(C, 0.5f), *df = rnd(NC, 1.0f);
    uint16_t *w = h16(wf, C), *b = h16(bf, C), *d = h16(df, NC);
    float *ww = w32(w, C), *bw = w32(b, C), *dw32 = w32(d, NC);
    uint16_t *out = malloc(NC * 2);
    float mean[N], rstd[N], ref_out[NC], m2[N], r2[N];
    CU_ASSERT_EQUAL(sz_k_layernorm_fwd_mx(out, SZ_K_BF16, mean, rstd, x, w, b, SZ_K_BF16, N, C), 0);
    sz_k_layernorm_fwd(ref_out, m2, r2, x, ww, bw, N, C);
    CU_ASSERT(same16(out, ref_out, NC));
    CU_ASSERT(!memcmp(mean, m2, sizeof mean) && !memcmp(rstd, r2, sizeof rstd));
    double *ref = malloc(NC * sizeof *ref);
    for (int n = 0; n < N; n++) { /* double reference */
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[n * C + i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[n * C + i] - m) * (x[n * C + i] - m);
        double s = 1.0 / sqrt(v / C + 1e-5);
        for (int i = 0; i < C; i++) ref[n * C + i] = (x[n * C + i] - m) * s * ww[i] + bw[i];
    }
    float *o32 = w32(out, NC);
    CU_ASSERT(close_to("layernorm out (bf16)", o32, ref, NC, 1.0 / 256, 1e-6));
    /* backward: the fp32 kernel on the widened dout and w, bitwise */
    float *di = rnd(NC, 0.1f), *di2 = dup_f(di, NC), gw[C] = {0}, gb[C] = {0}, gw2[C] = {0}, gb2[C] = {0};
    CU_ASSERT_EQUAL(sz_k_layernorm_bwd_mx(di, gw, gb, d, SZ_K_BF16, x, w, SZ_K_BF16, mean, rstd, N, C), 0);
    sz_k_layernorm_bwd(di2, gw2, gb2, dw32, x, ww, mean, rstd, N, C);
    CU_ASSERT(!memcmp(di, di2, NC * 4) && !memcmp(gw, gw2, sizeof gw) && !memcmp(gb, gb2, sizeof gb));
    /* and against double: dbias = column sums of dout */
    double refb[C];
    for (int i = 0; i < C; i++) {
        refb[i] = 0;
        for (int n = 0; n < N; n++) refb[i] += dw32[n * C + i];
    }
    CU_ASSERT(close_to("layernorm dbias", gb, refb, C, 1e-5, 1e-5));
    /* threads */
    uint16_t *o1 = malloc(NC * 2);
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        sz_k_layernorm_fwd_mx(o1, SZ_K_BF16, m2, r2, x, w, b, SZ_K_BF16, N, C);
        CU_ASSERT(!memcmp(o1, out, NC * 2));
        float *dt = rnd(NC, 0.0f), gwt[C] = {0}, gbt[C] = {0};
        memset(dt, 0, NC * 4);
        float *dref = calloc(NC, 4), gwr[C] = {0}, gbr[C] = {0};
        omp_set_num_threads(1);
        sz_k_layernorm_bwd_mx(dref, gwr, gbr, d, SZ_K_BF16, x, w, SZ_K_BF16, mean, rstd, N, C);
        omp_set_num_threads(th);
        sz_k_layernorm_bwd_mx(dt, gwt, gbt, d, SZ_K_BF16, x, w, SZ_K_BF16, mean, rstd, N, C);
        CU_ASSERT(!memcmp(dt, dref, NC * 4) && !memcmp(gwt, gwr, sizeof gwt) && !memcmp(gbt, gbr, sizeof gbt));
        free(dt);
        free(dref);
    }
    omp_set_num_threads(2);
    free(x); free(wf); free(bf); free(df); free(w); free(b); free(d); free(ww); free(bw); free(dw32);
    free(out); free(ref); free(o32); free(di); free(di2); free(o1);
}

/* ---- GELU: out bf16; backward dinp bf16 (accumulated), dout bf16 ---- */
static void test_gelu(void)
{
    const size_t n = 4 * NC;
    float *x = rnd(n, 3.0f), *df = rnd(n, 1.0f), *ref32 = malloc(n * 4);
    uint16_t *out = malloc(n * 2), *d = h16(df, n);
    sz_k_gelu_fwd_mx(out, SZ_K_BF16, x, n);
    sz_k_gelu_fwd(ref32, x, n);
    CU_ASSERT(same16(out, ref32, n));
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        ref[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    float *o32 = w32(out, n);
    CU_ASSERT(close_to("gelu out (bf16)", o32, ref, n, 1.0 / 256, 1e-6));
    /* backward into a bf16 dinp holding some values: round(dinp + local_grad * dout) */
    float *di0 = rnd(n, 0.5f);
    uint16_t *di = h16(di0, n);
    float *diw = w32(di, n), *dw = w32(d, n), *acc = calloc(n, 4);
    sz_k_gelu_bwd_mx(di, SZ_K_BF16, x, d, SZ_K_BF16, n);
    sz_k_gelu_bwd(acc, x, dw, n); /* the contribution alone, fp32 */
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= di[i] == sz_f32_to_bf16_1(diw[i] + acc[i]);
    CU_ASSERT(ok);
    for (size_t i = 0; i < n; i++) {
        double v = x[i], u = sqrt(2 / M_PI) * (v + 0.044715 * v * v * v), t = tanh(u);
        ref[i] = diw[i] + (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * v * v)) * dw[i];
    }
    float *d32 = w32(di, n);
    CU_ASSERT(close_to("gelu dinp (bf16)", d32, ref, n, 1.0 / 128, 1e-5));
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        uint16_t *o1 = malloc(n * 2), *dd = h16(di0, n);
        sz_k_gelu_fwd_mx(o1, SZ_K_BF16, x, n);
        sz_k_gelu_bwd_mx(dd, SZ_K_BF16, x, d, SZ_K_BF16, n);
        CU_ASSERT(!memcmp(o1, out, n * 2) && !memcmp(dd, di, n * 2));
        free(o1);
        free(dd);
    }
    /* the forward on a sample of all floats (every 4099th bit pattern: every exponent, both signs, NaNs,
     * infinities, denormals, the exponential's clamps) and an odd length (the masked tail): bitwise the
     * fp32 kernel rounded (the AVX-512 forward and local gradient, sz_gelu16u and sz_gelu_grad16u,
     * were checked on all 2^32 inputs once) */
    {
        const size_t ns = ((size_t)1 << 32) / 4099 + 1;
        float *xs = malloc(ns * 4), *rs = malloc(ns * 4);
        uint16_t *os = malloc(ns * 2);
        for (size_t i = 0; i < ns; i++) {
            uint32_t u = (uint32_t)(i * 4099u);
            memcpy(xs + i, &u, 4);
        }
        sz_k_gelu_fwd(rs, xs, ns);
        sz_k_gelu_fwd_mx(os, SZ_K_BF16, xs, ns);
        CU_ASSERT(ns % 16 != 0 && same16(os, rs, ns));
        /* the backward's local gradient likewise (dout 1: the product is the gradient itself) */
        float *one = malloc(ns * 4);
        uint16_t *one16 = malloc(ns * 2);
        for (size_t i = 0; i < ns; i++) one[i] = 1.0f, one16[i] = 0x3F80;
        sz_k_gelu_bwd_set(rs, xs, one, ns, SZ_K_SET_DINP);
        sz_k_gelu_bwd_mx_set(os, SZ_K_BF16, xs, one16, SZ_K_BF16, ns, SZ_K_SET_DINP);
        CU_ASSERT(same16(os, rs, ns));
        free(xs); free(rs); free(os); free(one); free(one16);
    }
    omp_set_num_threads(2);
    free(x); free(df); free(ref32); free(out); free(d); free(ref); free(o32); free(di0); free(di); free(diw);
    free(dw); free(acc); free(d32);
}

/* ---- residual backward into fp32 da and bf16 db; softmax-xent backward to bf16; encoder ---- */
static void test_small(void)
{
    float *dout = rnd(NC, 1.0f), *da = rnd(NC, 1.0f), *da2 = dup_f(da, NC), *dbf = rnd(NC, 1.0f);
    uint16_t *db = h16(dbf, NC);
    float *dbw = w32(db, NC);
    sz_k_residual_bwd_mx(da, SZ_K_F32, db, SZ_K_BF16, dout, NC);
    int ok = 1;
    for (int i = 0; i < NC; i++) ok &= da[i] == da2[i] + dout[i] && db[i] == sz_f32_to_bf16_1(dbw[i] + dout[i]);
    CU_ASSERT(ok);

    enum { V = 300, VP = 320 };
    float *probs = rnd((size_t)N * VP, 1.0f), dloss[N], *ref32 = malloc((size_t)N * VP * 4);
    int tg[N];
    for (int n = 0; n < N; n++) { dloss[n] = 1.0f / N; tg[n] = (n * 37) % V; }
    uint16_t *dl = malloc((size_t)N * VP * 2);
    sz_k_softmax_xent_bwd_mx(dl, SZ_K_BF16, probs, tg, dloss, N, V, VP);
    sz_k_softmax_xent_bwd(ref32, probs, tg, dloss, N, V, VP);
    CU_ASSERT(same16(dl, ref32, (size_t)N * VP));

    enum { Bn = 4, Tn = 16, VV = 50 };
    float *wtef = rnd((size_t)VV * C, 1.0f), *wpef = rnd((size_t)Tn * C, 1.0f);
    uint16_t *wte = h16(wtef, (size_t)VV * C), *wpe = h16(wpef, (size_t)Tn * C);
    float *wtew = w32(wte, (size_t)VV * C), *wpew = w32(wpe, (size_t)Tn * C);
    int tok[Bn * Tn];
    for (int i = 0; i < Bn * Tn; i++) tok[i] = (i * 13) % VV;
    float *o = malloc((size_t)Bn * Tn * C * 4), *o2 = malloc((size_t)Bn * Tn * C * 4);
    sz_k_encoder_fwd_mx(o, tok, wte, wpe, SZ_K_BF16, Bn, Tn, C);
    sz_k_encoder_fwd(o2, tok, wtew, wpew, Bn, Tn, C);
    CU_ASSERT(!memcmp(o, o2, (size_t)Bn * Tn * C * 4));
    free(dout); free(da); free(da2); free(dbf); free(db); free(dbw); free(probs); free(ref32); free(dl);
    free(wtef); free(wpef); free(wte); free(wpe); free(wtew); free(wpew); free(o); free(o2);
}

/* ---- attention: out bf16 from fp32 qkv; backward from bf16 dout into bf16 dqkv. The row kernels by
 * name (SZ_K_ATT_ROWWISE: fp32 math, bitwise the fp32 kernel rounded); on a CPU with AMX the _mx
 * entry points take the tiles (test_attention_amx), and at 1-3 threads their bits are checked here ---- */
#define fwd_rw(o, dt, s, x, b, t, c, nh) sz_k_attention_fwd_mx_impl(o, dt, s, x, b, t, c, nh, SZ_K_ATT_ROWWISE)
#define bwd_rw(di, idt, d, ddt, x, s, b, t, c, nh) \
    sz_k_attention_bwd_mx_impl(di, idt, d, ddt, x, s, b, t, c, nh, 0, SZ_K_ATT_ROWWISE)
static void test_attention(void)
{
    enum { Bn = 2, Tn = 32, Cn = 64, NH = 4 };
    size_t n = (size_t)Bn * Tn * Cn, n3 = 3 * n, ns = 2 * (size_t)Bn * NH * Tn;
    float *qkv = rnd(n3, 1.0f), *o32 = malloc(n * 4), *st = malloc(ns * 4), *st2 = malloc(ns * 4);
    uint16_t *out = malloc(n * 2);
    CU_ASSERT_EQUAL(fwd_rw(out, SZ_K_BF16, st, qkv, Bn, Tn, Cn, NH), 0);
    CU_ASSERT_EQUAL(sz_k_attention_fwd(o32, st2, qkv, Bn, Tn, Cn, NH), 0);
    CU_ASSERT(same16(out, o32, n));
    CU_ASSERT(!memcmp(st, st2, ns * 4));
    /* against llm.c's T x T kernel in double-free fp32: within bf16 rounding */
    float *pre = malloc((size_t)Bn * NH * Tn * Tn * 4), *att = malloc((size_t)Bn * NH * Tn * Tn * 4),
          *ott = malloc(n * 4), *ow = w32(out, n);
    sz_k_attention_tt_fwd(ott, pre, att, qkv, Bn, Tn, Cn, NH);
    double *ref = malloc(n3 * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = ott[i];
    CU_ASSERT(close_to("attention out (bf16)", ow, ref, n, 1.0 / 256, 1e-5));
    float *df = rnd(n, 1.0f);
    uint16_t *d = h16(df, n), *di = calloc(n3, 2);
    float *dw = w32(d, n), *di32 = calloc(n3, 4);
    CU_ASSERT_EQUAL(bwd_rw(di, SZ_K_BF16, d, SZ_K_BF16, qkv, st, Bn, Tn, Cn, NH), 0);
    CU_ASSERT_EQUAL(sz_k_attention_bwd(di32, dw, qkv, st, Bn, Tn, Cn, NH), 0);
    CU_ASSERT(same16(di, di32, n3));
    float *ditt = calloc(n3, 4), *diw = w32(di, n3);
    CU_ASSERT_EQUAL(sz_k_attention_tt_bwd(ditt, dw, qkv, att, Bn, Tn, Cn, NH), 0);
    for (size_t i = 0; i < n3; i++) ref[i] = ditt[i];
    CU_ASSERT(close_to("attention dqkv (bf16)", diw, ref, n3, 1.0 / 128, 1e-4));
    /* into a dinp that already holds gradients: bf16(dinp + the fp32 kernel's gradient), and the
     * mixed cases (fp32 dout into bf16 dinp, bf16 dout into fp32 dinp) likewise */
    {
        float *pf = rnd(n3, 0.5f), *pw = malloc(n3 * 4), *acc = malloc(n3 * 4);
        uint16_t *p16 = h16(pf, n3), *e16 = malloc(n3 * 2);
        for (size_t i = 0; i < n3; i++) pw[i] = sz_bf16_to_f32_1(p16[i]);
        for (size_t i = 0; i < n3; i++) e16[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(p16[i]) + di32[i]);
        uint16_t *a16 = malloc(n3 * 2);
        memcpy(a16, p16, n3 * 2);
        CU_ASSERT_EQUAL(bwd_rw(a16, SZ_K_BF16, d, SZ_K_BF16, qkv, st, Bn, Tn, Cn, NH), 0);
        CU_ASSERT(!memcmp(a16, e16, n3 * 2));
        memcpy(a16, p16, n3 * 2);
        CU_ASSERT_EQUAL(bwd_rw(a16, SZ_K_BF16, dw, SZ_K_F32, qkv, st, Bn, Tn, Cn, NH), 0);
        CU_ASSERT(!memcmp(a16, e16, n3 * 2));
        memcpy(acc, pw, n3 * 4);
        float *acc2 = malloc(n3 * 4);
        memcpy(acc2, pw, n3 * 4);
        CU_ASSERT_EQUAL(bwd_rw(acc, SZ_K_F32, d, SZ_K_BF16, qkv, st, Bn, Tn, Cn, NH), 0);
        CU_ASSERT_EQUAL(sz_k_attention_bwd(acc2, dw, qkv, st, Bn, Tn, Cn, NH), 0);
        CU_ASSERT(!memcmp(acc, acc2, n3 * 4));
        free(pf); free(pw); free(acc); free(acc2); free(p16); free(e16); free(a16);
    }
    /* the entry points the model calls (the tiles where the CPU has AMX): the same bits at 1-3 threads */
    uint16_t *oa = malloc(n * 2), *da = calloc(n3, 2);
    float *sa = malloc(ns * 4);
    CU_ASSERT_EQUAL(sz_k_attention_fwd_mx(oa, SZ_K_BF16, sa, qkv, Bn, Tn, Cn, NH), 0);
    CU_ASSERT_EQUAL(sz_k_attention_bwd_mx(da, SZ_K_BF16, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH), 0);
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        uint16_t *o1 = malloc(n * 2), *dd = calloc(n3, 2);
        sz_k_attention_fwd_mx(o1, SZ_K_BF16, st2, qkv, Bn, Tn, Cn, NH);
        sz_k_attention_bwd_mx(dd, SZ_K_BF16, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH);
        CU_ASSERT(!memcmp(o1, oa, n * 2) && !memcmp(dd, da, n3 * 2) && !memcmp(st2, sa, ns * 4));
        fwd_rw(o1, SZ_K_BF16, st2, qkv, Bn, Tn, Cn, NH);
        memset(dd, 0, n3 * 2);
        bwd_rw(dd, SZ_K_BF16, d, SZ_K_BF16, qkv, st, Bn, Tn, Cn, NH);
        CU_ASSERT(!memcmp(o1, out, n * 2) && !memcmp(dd, di, n3 * 2));
        free(o1);
        free(dd);
    }
    free(oa); free(da); free(sa);
    omp_set_num_threads(2);
    free(qkv); free(o32); free(st); free(st2); free(out); free(pre); free(att); free(ott); free(ow); free(ref);
    free(df); free(d); free(di); free(dw); free(di32); free(ditt); free(diw);
}

/* ---- attention on AMX tiles (attention_amx.c; where the CPU has AMX-BF16): q, k, v, dout, P and dS
 * rounded to bf16 before their products. Against the fp32 kernels on bf16-exact q, k, v and dout (so
 * only the tiles' own roundings and sums differ), with the CUDA tensor-core tiles' bounds: out atol
 * 4e-3 + rtol 1e-2, stats atol 1e-5 + rtol 1e-4, dinp atol 1e-2 + rtol 2e-2. A bf16 out or dinp is
 * the fp32 one rounded once (set) or round(f32(dinp) + it) (accumulate), bitwise; an fp32 dout gives
 * the bf16 dout's bits (it is rounded first); the same bits at 1-3 threads. Shapes: T below one
 * block (1, 13), partial blocks (33, 70, 257); head sizes 32, 37 (odd: padded), 64, 128. ---- */
static void amx_case(int Bn, int Tn, int NH, int hs)
{
    int Cn = NH * hs;
    size_t n = (size_t)Bn * Tn * Cn, n3 = 3 * n, ns = 2 * (size_t)Bn * NH * Tn;
    float *qf = rnd(n3, 1.0f), *df = rnd(n, 1.0f), *pf = rnd(n3, 0.5f);
    uint16_t *q16 = h16(qf, n3), *d = h16(df, n), *p16 = h16(pf, n3);
    float *qkv = w32(q16, n3), *dw = w32(d, n), *pw = w32(p16, n3);
    float *o32 = malloc(n * 4), *oa = malloc(n * 4), *st = malloc(ns * 4), *sa = malloc(ns * 4);
    float *g32 = calloc(n3, 4), *ga = malloc(n3 * 4), *gb = malloc(n3 * 4);
    uint16_t *oh = malloc(n * 2), *gh = malloc(n3 * 2), *e16 = malloc(n3 * 2);
    double *ref = malloc(n3 * sizeof *ref);
    char w[112];
    snprintf(w, sizeof w, "(B %d T %d NH %d hs %d)", Bn, Tn, NH, hs);
    CU_ASSERT_EQUAL(sz_k_attention_fwd(o32, st, qkv, Bn, Tn, Cn, NH), 0);
    CU_ASSERT_EQUAL(sz_k_attention_fwd_mx_impl(oa, SZ_K_F32, sa, qkv, Bn, Tn, Cn, NH, SZ_K_ATT_AMX), 0);
    for (size_t i = 0; i < n; i++) ref[i] = o32[i];
    if (!close_to("amx attention out", oa, ref, n, 1e-2, 4e-3)) {
        printf("\n  out %s", w);
        CU_FAIL("amx attention out");
    }
    for (size_t i = 0; i < ns; i++) ref[i] = st[i];
    if (!close_to("amx attention stats", sa, ref, ns, 1e-4, 1e-5)) {
        printf("\n  stats %s", w);
        CU_FAIL("amx attention stats");
    }
    CU_ASSERT_EQUAL(sz_k_attention_fwd_mx_impl(oh, SZ_K_BF16, st, qkv, Bn, Tn, Cn, NH, SZ_K_ATT_AMX), 0);
    CU_ASSERT(same16(oh, oa, n) && !memcmp(st, sa, ns * 4));
    /* backward from the tiles' own statistics, as the model runs it */
    CU_ASSERT_EQUAL(sz_k_attention_bwd_set(g32, dw, qkv, sa, Bn, Tn, Cn, NH, SZ_K_SET_DINP), 0);
    CU_ASSERT_EQUAL(sz_k_attention_bwd_mx_impl(ga, SZ_K_F32, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH, SZ_K_SET_DINP,
                                               SZ_K_ATT_AMX), 0);
    for (size_t i = 0; i < n3; i++) ref[i] = g32[i];
    if (!close_to("amx attention dinp", ga, ref, n3, 2e-2, 1e-2)) {
        printf("\n  dinp %s", w);
        CU_FAIL("amx attention dinp");
    }
    CU_ASSERT_EQUAL(sz_k_attention_bwd_mx_impl(gb, SZ_K_F32, dw, SZ_K_F32, qkv, sa, Bn, Tn, Cn, NH, SZ_K_SET_DINP,
                                               SZ_K_ATT_AMX), 0);
    CU_ASSERT(!memcmp(ga, gb, n3 * 4));
    CU_ASSERT_EQUAL(sz_k_attention_bwd_mx_impl(gh, SZ_K_BF16, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH, SZ_K_SET_DINP,
                                               SZ_K_ATT_AMX), 0);
    CU_ASSERT(same16(gh, ga, n3));
    /* accumulating: into bf16 round(f32(dinp) + g), into fp32 dinp + g */
    for (size_t i = 0; i < n3; i++) e16[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(p16[i]) + ga[i]);
    memcpy(gh, p16, n3 * 2);
    CU_ASSERT_EQUAL(sz_k_attention_bwd_mx_impl(gh, SZ_K_BF16, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH, 0, SZ_K_ATT_AMX), 0);
    CU_ASSERT(!memcmp(gh, e16, n3 * 2));
    memcpy(gb, pw, n3 * 4);
    CU_ASSERT_EQUAL(sz_k_attention_bwd_mx_impl(gb, SZ_K_F32, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH, 0, SZ_K_ATT_AMX), 0);
    int acc_ok = 1;
    for (size_t i = 0; i < n3; i++) acc_ok &= gb[i] == pw[i] + ga[i];
    CU_ASSERT(acc_ok);
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        uint16_t *o1 = malloc(n * 2), *g1 = malloc(n3 * 2);
        sz_k_attention_fwd_mx_impl(o1, SZ_K_BF16, st, qkv, Bn, Tn, Cn, NH, SZ_K_ATT_AMX);
        sz_k_attention_bwd_mx_impl(g1, SZ_K_BF16, d, SZ_K_BF16, qkv, sa, Bn, Tn, Cn, NH, SZ_K_SET_DINP, SZ_K_ATT_AMX);
        CU_ASSERT(!memcmp(o1, oh, n * 2) && !memcmp(st, sa, ns * 4) && same16(g1, ga, n3));
        free(o1);
        free(g1);
    }
    omp_set_num_threads(2);
    free(qf); free(df); free(pf); free(q16); free(d); free(p16); free(qkv); free(dw); free(pw);
    free(o32); free(oa); free(st); free(sa); free(g32); free(ga); free(gb); free(oh); free(gh); free(e16); free(ref);
}

static void test_attention_amx(void)
{
    if (!sz_k_attention_amx_ok()) { /* asked for by name, the tiles refuse: -2, nothing written */
        float x[3 * 64] = {0}, s[2] = {7.0f, 7.0f};
        uint16_t o[64];
        CU_ASSERT_EQUAL(sz_k_attention_fwd_mx_impl(o, SZ_K_BF16, s, x, 1, 1, 64, 1, SZ_K_ATT_AMX), -2);
        CU_ASSERT(s[0] == 7.0f && s[1] == 7.0f);
        printf("\n  no AMX-BF16 on this CPU: the tiles were not run");
        return;
    }
    amx_case(2, 13, 3, 37);
    amx_case(1, 70, 2, 64);
    amx_case(2, 33, 2, 32);
    amx_case(1, 1, 1, 64);
    amx_case(1, 257, 1, 128);
}

/* ---- the fusions: residual + layernorm (bf16 out, bf16 params; bwd bf16 dout and db), softmax-xent
 * in place on bf16 logits: the fp32 fused kernels on the widened operands, bitwise, at 1-3 threads ---- */
static void test_fused(void)
{
    float *a = rnd(NC, 1.0f), *b = rnd(NC, 1.0f), *wf = rnd(C, 1.0f), *bf = rnd(C, 0.5f);
    uint16_t *w = h16(wf, C), *bb = h16(bf, C), *out = malloc(NC * 2), *out1 = malloc(NC * 2);
    float *ww = w32(w, C), *bw = w32(bb, C), *res = malloc(NC * 4), *res2 = malloc(NC * 4), *o32 = malloc(NC * 4);
    float mean[N], rstd[N], m2[N], r2[N];
    CU_ASSERT_EQUAL(sz_k_residual_layernorm_fwd_mx(res, out, SZ_K_BF16, mean, rstd, a, b, w, bb, SZ_K_BF16, N, C), 0);
    sz_k_residual_layernorm_fwd(res2, o32, m2, r2, a, b, ww, bw, N, C);
    CU_ASSERT(!memcmp(res, res2, NC * 4) && same16(out, o32, NC) && !memcmp(mean, m2, sizeof mean));
    float *df = rnd(NC, 1.0f), *dbf = rnd(NC, 1.0f), *da = rnd(NC, 1.0f), *dres = rnd(NC, 1.0f);
    uint16_t *d = h16(df, NC), *db = h16(dbf, NC);
    float *dw32 = w32(d, NC), *db32 = w32(db, NC), *da2 = dup_f(da, NC), *dres2 = dup_f(dres, NC);
    float gw[C] = {0}, gb[C] = {0}, gw2[C] = {0}, gb2[C] = {0};
    CU_ASSERT_EQUAL(sz_k_layernorm_residual_bwd_mx(da, db, SZ_K_BF16, dres, gw, gb, d, SZ_K_BF16, res, w, SZ_K_BF16,
                                                   mean, rstd, N, C), 0);
    sz_k_layernorm_residual_bwd(da2, db32, dres2, gw2, gb2, dw32, res, ww, mean, rstd, N, C);
    CU_ASSERT(!memcmp(da, da2, NC * 4) && !memcmp(dres, dres2, NC * 4) && same16(db, db32, NC));
    double ref[C];
    for (int i = 0; i < C; i++) ref[i] = gw2[i];
    CU_ASSERT(close_to("layernorm_residual dweight", gw, ref, C, 1e-5, 1e-5));
    enum { V = 300, VP = 320 };
    float *lf = rnd((size_t)N * VP, 4.0f), loss[N], loss2[N];
    int tg[N];
    for (int n = 0; n < N; n++) tg[n] = (n * 37) % V;
    uint16_t *l = h16(lf, (size_t)N * VP), *l1 = malloc((size_t)N * VP * 2);
    float *lw = w32(l, (size_t)N * VP);
    CU_ASSERT_EQUAL(sz_k_softmax_xent_fused_mx(l, SZ_K_BF16, loss, tg, 0.5f, N, V, VP), 0);
    sz_k_softmax_xent_fused(lw, loss2, tg, 0.5f, N, V, VP);
    CU_ASSERT(same16(l, lw, (size_t)N * VP) && !memcmp(loss, loss2, sizeof loss));
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        sz_k_residual_layernorm_fwd_mx(res2, out1, SZ_K_BF16, m2, r2, a, b, w, bb, SZ_K_BF16, N, C);
        CU_ASSERT(!memcmp(out1, out, NC * 2));
        sz_k_f32_to_bf16(l1, lf, (size_t)N * VP);
        sz_k_softmax_xent_fused_mx(l1, SZ_K_BF16, loss2, tg, 0.5f, N, V, VP);
        CU_ASSERT(!memcmp(l1, l, (size_t)N * VP * 2));
    }
    omp_set_num_threads(2);
    free(a); free(b); free(wf); free(bf); free(w); free(bb); free(out); free(out1); free(ww); free(bw); free(res);
    free(res2); free(o32); free(df); free(dbf); free(da); free(dres); free(d); free(db); free(dw32); free(db32);
    free(da2); free(dres2); free(lf); free(l); free(l1); free(lw);
}

/* ---- the row conversions the kernels use (sz_bf16_to_f32_row, sz_f32_to_bf16_row) and the whole-buffer
 * ones (sz_k_*): the scalar rule's bits on edge values (NaN payloads, +-inf, +-0, subnormals, ties, the
 * largest float) and random bit patterns, at every offset and length up to 67 (vector bodies and tails) ---- */
static uint32_t bits_rng = 2463534242u;
static uint32_t next_bits(void)
{
    bits_rng ^= bits_rng << 13; bits_rng ^= bits_rng >> 17; bits_rng ^= bits_rng << 5;
    return bits_rng;
}
static void test_convert_rows(void)
{
    /* independent expectations for a few values: round to nearest even, NaN kept quiet with its sign */
    static const uint32_t in[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f7fffffu, 0x7f800000u,
                                  0xff800000u, 0x7f800001u, 0xffbfffffu, 0x7fc00000u, 0x00000000u, 0x80000000u,
                                  0x00008000u, 0x00018000u, 0x80000001u, 0x807fffffu, 0x00800000u, 0x007fffffu};
    static const uint16_t want[] = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0x7f80, 0xff80, 0x7fc0, 0xffff,
                                    0x7fc0, 0x0000, 0x8000, 0x0000, 0x0002, 0x8000, 0x8080, 0x0080, 0x0080};
    enum { NE = sizeof in / sizeof in[0], M = 4096 };
    float *f = malloc(M * sizeof *f), *w = malloc(M * sizeof *w);
    uint16_t *h = malloc(M * sizeof *h), *all = malloc(65536 * sizeof *all);
    for (int i = 0; i < NE; i++) {
        f[i] = sz_bits_f32(in[i]);
        CU_ASSERT_EQUAL(sz_f32_to_bf16_1(f[i]), want[i]);
    }
    sz_f32_to_bf16_row(h, f, NE);
    CU_ASSERT(!memcmp(h, want, sizeof want));
    /* edge values and their neighbours, then random patterns (a quarter with exponent 0: subnormals) */
    static const uint32_t edge[] = {0x00000000u, 0x00000001u, 0x00007fffu, 0x00008000u, 0x00008001u, 0x00017fffu,
                                    0x00018000u, 0x007f8000u, 0x007fffffu, 0x00800000u, 0x3f7fffffu, 0x3f800000u,
                                    0x477f8000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
                                    0x7f80ffffu, 0x7f810000u, 0x7fbfffffu, 0x7fc00000u, 0x7fc0ffffu, 0x7fffffffu};
    int ne = sizeof edge / sizeof edge[0];
    for (int i = 0; i < M; i++) {
        uint32_t u;
        if (i < 2 * ne) u = edge[i / 2] | (i % 2 ? 0x80000000u : 0u);
        else if (i % 4 == 0) u = next_bits() & 0x807fffffu;
        else if (i % 4 == 1) u = (next_bits() & 0xffff0000u) | 0x8000u; /* exact ties */
        else u = next_bits();
        f[i] = sz_bits_f32(u);
    }
    int ok = 1;
    for (int off = 0; off < 16; off++)
        for (int n = 0; n <= 67; n++) {
            memset(h, 0xAB, (size_t)(off + n + 1) * sizeof *h);
            sz_f32_to_bf16_row(h + off, f + off * 67, (size_t)n);
            for (int i = 0; i < n; i++) ok &= h[off + i] == sz_f32_to_bf16_1(f[off * 67 + i]);
            ok &= h[off + n] == 0xABAB; /* nothing written past the end */
        }
    CU_ASSERT(ok);
    sz_f32_to_bf16_row(h, f, M);
    sz_k_f32_to_bf16(all, f, M);
    ok = 1;
    for (int i = 0; i < M; i++) ok &= h[i] == sz_f32_to_bf16_1(f[i]) && all[i] == h[i];
    CU_ASSERT(ok);
    /* widening: every bf16 pattern, exactly (NaNs keep their payload), at every offset */
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    float *wa = malloc(65536 * sizeof *wa);
    ok = 1;
    for (int off = 0; off < 16; off++) {
        size_t n = 65536 - (size_t)off;
        sz_bf16_to_f32_row(wa, all + off, n);
        for (size_t i = 0; i < n; i++) ok &= sz_f32_bits(wa[i]) == (uint32_t)all[off + i] << 16;
    }
    sz_k_bf16_to_f32(wa, all, 65536);
    for (int i = 0; i < 65536; i++) ok &= sz_f32_bits(wa[i]) == (uint32_t)i << 16;
    CU_ASSERT(ok);
    free(f); free(w); free(h); free(all); free(wa);
}

/* ---- the LLaMA-style model's ops ---- */

/* Double references of RMSNorm (eps 1e-5) on fp32 rows x and weight w: out, and the input gradient of
 * sum(out * d) and its weight gradient. */
static void rms_ref(const float *x, const float *w, const float *d, int n, int c, double *out, double *dx,
                    double *dw)
{
    for (int i = 0; i < c; i++) dw[i] = 0;
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * c, *dr = d + (size_t)r * c;
        double ss = 0, dot = 0;
        for (int i = 0; i < c; i++) ss += (double)xr[i] * xr[i];
        double s = 1.0 / sqrt(ss / c + 1e-5);
        for (int i = 0; i < c; i++) {
            out[(size_t)r * c + i] = xr[i] * s * w[i];
            dot += (double)dr[i] * w[i] * xr[i];
            dw[i] += (double)dr[i] * xr[i] * s;
        }
        for (int i = 0; i < c; i++) dx[(size_t)r * c + i] = s * w[i] * dr[i] - s * s * s * dot / c * xr[i];
    }
}

static void test_rmsnorm(void)
{
    const float eps = 1e-5f;
    float *x = rnd(NC, 2.0f), *wf = rnd(C, 1.0f), *df = rnd(NC, 1.0f), rstd[N], r2[N];
    uint16_t *w = h16(wf, C), *d = h16(df, NC), *out = malloc(NC * 2), *o1 = malloc(NC * 2);
    float *ww = w32(w, C), *dw32 = w32(d, NC), *ref32 = malloc(NC * 4);
    /* forward: bf16 out, bf16 w: the fp32 kernel on the widened weight, rounded */
    CU_ASSERT_EQUAL(sz_k_rmsnorm_fwd_mx(out, SZ_K_BF16, rstd, x, w, SZ_K_BF16, N, C, eps), 0);
    sz_k_rmsnorm_fwd(ref32, r2, x, ww, N, C, eps);
    CU_ASSERT(same16(out, ref32, NC) && !memcmp(rstd, r2, sizeof rstd));
    /* fp32 out with bf16 w: bitwise the fp32 kernel */
    float *of = malloc(NC * 4);
    CU_ASSERT_EQUAL(sz_k_rmsnorm_fwd_mx(of, SZ_K_F32, r2, x, w, SZ_K_BF16, N, C, eps), 0);
    CU_ASSERT(!memcmp(of, ref32, NC * 4));
    double *ro = malloc(NC * sizeof *ro), *rdx = malloc(NC * sizeof *rdx), rdw[C];
    rms_ref(x, ww, dw32, N, C, ro, rdx, rdw);
    float *o32 = w32(out, NC);
    CU_ASSERT(close_to("rmsnorm out (bf16)", o32, ro, NC, 1.0 / 256, 1e-6));
    /* backward from a bf16 dout into an fp32 dinp that holds values, fp32 dweight */
    float *di = rnd(NC, 0.5f), *di2 = dup_f(di, NC), *di0 = dup_f(di, NC), gw[C] = {0}, gw2[C] = {0};
    CU_ASSERT_EQUAL(sz_k_rmsnorm_bwd_mx(di, gw, d, SZ_K_BF16, x, w, SZ_K_BF16, rstd, N, C), 0);
    sz_k_rmsnorm_bwd(di2, gw2, dw32, x, ww, rstd, N, C);
    CU_ASSERT(!memcmp(di, di2, NC * 4) && !memcmp(gw, gw2, sizeof gw));
    float *dd = malloc(NC * 4);
    for (int i = 0; i < NC; i++) dd[i] = di[i] - di0[i];
    CU_ASSERT(close_to("rmsnorm dinp", dd, rdx, NC, 1e-4, 1e-5));
    CU_ASSERT(close_to("rmsnorm dweight", gw, rdw, C, 1e-4, 1e-4));
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        CU_ASSERT_EQUAL(sz_k_rmsnorm_fwd_mx(o1, SZ_K_BF16, r2, x, w, SZ_K_BF16, N, C, eps), 0);
        CU_ASSERT(!memcmp(o1, out, NC * 2));
        float *dt = dup_f(di0, NC), gwt[C] = {0};
        CU_ASSERT_EQUAL(sz_k_rmsnorm_bwd_mx(dt, gwt, d, SZ_K_BF16, x, w, SZ_K_BF16, rstd, N, C), 0);
        CU_ASSERT(!memcmp(dt, di, NC * 4) && !memcmp(gwt, gw, sizeof gw));
        free(dt);
    }
    omp_set_num_threads(2);
    free(x); free(wf); free(df); free(w); free(d); free(out); free(o1); free(ww); free(dw32); free(ref32); free(of);
    free(ro); free(rdx); free(o32); free(di); free(di2); free(di0); free(dd);
}

/* residual + RMSNorm: res fp32, out bf16, w bf16; backward: dout, db bf16 (accumulated), da, dres fp32 */
static void test_residual_rmsnorm(void)
{
    const float eps = 1e-5f;
    float *a = rnd(NC, 1.0f), *b = rnd(NC, 1.0f), *wf = rnd(C, 1.0f), rstd[N], r2[N];
    uint16_t *w = h16(wf, C), *out = malloc(NC * 2), *o1 = malloc(NC * 2);
    float *ww = w32(w, C), *res = malloc(NC * 4), *res2 = malloc(NC * 4), *o32 = malloc(NC * 4);
    CU_ASSERT_EQUAL(sz_k_residual_rmsnorm_fwd_mx(res, out, SZ_K_BF16, rstd, a, b, w, SZ_K_BF16, N, C, eps), 0);
    sz_k_residual_rmsnorm_fwd(res2, o32, r2, a, b, ww, N, C, eps);
    CU_ASSERT(!memcmp(res, res2, NC * 4) && same16(out, o32, NC) && !memcmp(rstd, r2, sizeof rstd));
    double *ro = malloc(NC * sizeof *ro), *rdx = malloc(NC * sizeof *rdx), rdw[C];
    float *df = rnd(NC, 1.0f), *dbf = rnd(NC, 1.0f), *da = rnd(NC, 1.0f), *dres = rnd(NC, 1.0f);
    uint16_t *d = h16(df, NC), *db = h16(dbf, NC), *db0 = malloc(NC * 2);
    memcpy(db0, db, NC * 2);
    float *dw32 = w32(d, NC), *db32 = w32(db, NC), *da2 = dup_f(da, NC), *dres2 = dup_f(dres, NC);
    float *dres0 = dup_f(dres, NC), *da0 = dup_f(da, NC);
    rms_ref(res, ww, dw32, N, C, ro, rdx, rdw);
    float *ow = w32(out, NC);
    CU_ASSERT(close_to("residual_rmsnorm out (bf16)", ow, ro, NC, 1.0 / 256, 1e-6));
    float gw[C] = {0}, gw2[C] = {0};
    CU_ASSERT_EQUAL(sz_k_rmsnorm_residual_bwd_mx(da, db, SZ_K_BF16, dres, gw, d, SZ_K_BF16, res, w, SZ_K_BF16, rstd,
                                                 N, C), 0);
    sz_k_rmsnorm_residual_bwd(da2, db32, dres2, gw2, dw32, res, ww, rstd, N, C);
    CU_ASSERT(!memcmp(da, da2, NC * 4) && !memcmp(dres, dres2, NC * 4) && same16(db, db32, NC) &&
              !memcmp(gw, gw2, sizeof gw));
    /* against double: dres gains the norm's input gradient, da and db gain the new dres */
    float *got = malloc(NC * 4);
    double *want = malloc(NC * sizeof *want);
    for (int i = 0; i < NC; i++) { got[i] = dres[i] - dres0[i]; }
    CU_ASSERT(close_to("rmsnorm_residual dres", got, rdx, NC, 1e-4, 1e-5));
    for (int i = 0; i < NC; i++) { got[i] = da[i]; want[i] = (double)da0[i] + dres[i]; }
    CU_ASSERT(close_to("rmsnorm_residual da", got, want, NC, 1e-6, 1e-6));
    for (int i = 0; i < NC; i++) { got[i] = sz_bf16_to_f32_1(db[i]); want[i] = (double)sz_bf16_to_f32_1(db0[i]) + dres[i]; }
    CU_ASSERT(close_to("rmsnorm_residual db (bf16)", got, want, NC, 1.0 / 256, 1e-6));
    CU_ASSERT(close_to("rmsnorm_residual dweight", gw, rdw, C, 1e-4, 1e-4));
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        CU_ASSERT_EQUAL(sz_k_residual_rmsnorm_fwd_mx(res2, o1, SZ_K_BF16, r2, a, b, w, SZ_K_BF16, N, C, eps), 0);
        CU_ASSERT(!memcmp(o1, out, NC * 2) && !memcmp(res2, res, NC * 4));
        float *dat = dup_f(da0, NC), *drt = dup_f(dres0, NC), gwt[C] = {0};
        uint16_t *dbt = malloc(NC * 2);
        memcpy(dbt, db0, NC * 2);
        CU_ASSERT_EQUAL(sz_k_rmsnorm_residual_bwd_mx(dat, dbt, SZ_K_BF16, drt, gwt, d, SZ_K_BF16, res, w, SZ_K_BF16,
                                                     rstd, N, C), 0);
        CU_ASSERT(!memcmp(dat, da, NC * 4) && !memcmp(drt, dres, NC * 4) && !memcmp(dbt, db, NC * 2) &&
                  !memcmp(gwt, gw, sizeof gw));
        free(dat); free(drt); free(dbt);
    }
    omp_set_num_threads(2);
    free(a); free(b); free(wf); free(w); free(out); free(o1); free(ww); free(res); free(res2); free(o32); free(ro);
    free(rdx); free(df); free(dbf); free(da); free(dres); free(d); free(db); free(db0); free(dw32); free(db32);
    free(da2); free(dres2); free(dres0); free(da0); free(ow); free(got); free(want);
}

/* RoPE's backward into a bf16 dinp (holding values) from an fp32 dout, and from a bf16 one; the
 * embedding from a bf16 table; the public rounding */
static void test_rope_embedding(void)
{
    enum { Bn = 4, Tn = 32, Cn = 64, NH = 4, HS = Cn / NH };
    const float theta = 10000.0f;
    size_t n3 = (size_t)Bn * Tn * 3 * Cn; /* above the parallel threshold */
    float *dout = rnd(n3, 1.0f), *pf = rnd(n3, 0.5f);
    uint16_t *p16 = h16(pf, n3), *di = malloc(n3 * 2), *d16 = h16(dout, n3);
    float *pw = w32(p16, n3), *ref32 = dup_f(pw, n3), *dw = w32(d16, n3);
    memcpy(di, p16, n3 * 2);
    CU_ASSERT_EQUAL(sz_k_rope_bwd_mx(di, SZ_K_BF16, dout, SZ_K_F32, Bn, Tn, Cn, NH, theta), 0);
    CU_ASSERT_EQUAL(sz_k_rope_bwd(ref32, dout, Bn, Tn, Cn, NH, theta), 0);
    CU_ASSERT(same16(di, ref32, n3));
    /* double reference: the rotation's transpose, on top of the held values */
    double *ref = malloc(n3 * sizeof *ref);
    for (int bt = 0; bt < Bn * Tn; bt++) {
        int t = bt % Tn;
        for (int j = 0; j < 3 * Cn; j++) {
            size_t k = (size_t)bt * 3 * Cn + j;
            int part = j / Cn, i = (j % Cn) % HS / 2, odd = j % 2;
            double g = dout[k];
            if (part < 2) {
                double ang = t * pow(theta, -2.0 * i / HS), c = cos(ang), s = sin(ang);
                double d0 = dout[k - odd], d1 = dout[k - odd + 1];
                g = odd ? d1 * c - d0 * s : d0 * c + d1 * s;
            }
            ref[k] = pw[k] + g;
        }
    }
    float *got = w32(di, n3);
    CU_ASSERT(close_to("rope dinp (bf16)", got, ref, n3, 1.0 / 256, 1e-5));
    /* bf16 dout into an fp32 dinp: bitwise the fp32 kernel on the widened dout */
    float *a32 = dup_f(pw, n3), *b32 = dup_f(pw, n3);
    CU_ASSERT_EQUAL(sz_k_rope_bwd_mx(a32, SZ_K_F32, d16, SZ_K_BF16, Bn, Tn, Cn, NH, theta), 0);
    CU_ASSERT_EQUAL(sz_k_rope_bwd(b32, dw, Bn, Tn, Cn, NH, theta), 0);
    CU_ASSERT(!memcmp(a32, b32, n3 * 4));
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        uint16_t *dt = malloc(n3 * 2);
        memcpy(dt, p16, n3 * 2);
        CU_ASSERT_EQUAL(sz_k_rope_bwd_mx(dt, SZ_K_BF16, dout, SZ_K_F32, Bn, Tn, Cn, NH, theta), 0);
        CU_ASSERT(!memcmp(dt, di, n3 * 2));
        free(dt);
    }
    omp_set_num_threads(2);

    enum { VV = 50 };
    float *wtef = rnd((size_t)VV * C, 1.0f);
    uint16_t *wte = h16(wtef, (size_t)VV * C);
    float *wtew = w32(wte, (size_t)VV * C), *o = malloc(NC * 4), *o2 = malloc(NC * 4);
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (i * 13) % VV;
    CU_ASSERT_EQUAL(sz_k_embedding_fwd_mx(o, tok, wte, SZ_K_BF16, N, C, VV), -1);
    CU_ASSERT_EQUAL(sz_k_embedding_fwd(o2, tok, wtew, N, C, VV), -1);
    CU_ASSERT(!memcmp(o, o2, NC * 4));
    tok[7] = VV; /* a token outside the table: its row returned, nothing written */
    memset(o, 0, NC * 4);
    CU_ASSERT_EQUAL(sz_k_embedding_fwd_mx(o, tok, wte, SZ_K_BF16, N, C, VV), 7);
    int zero = 1;
    for (int i = 0; i < NC; i++) zero &= o[i] == 0.0f;
    CU_ASSERT(zero);

    /* starzero.h's rounding is the kernels': random values, ties, the largest finite, infinities, NaNs */
    int same = 1;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)(frand() * 2147483647.0f) * 2654435761u;
        float f;
        memcpy(&f, &u, 4);
        uint16_t h = sz_f32_to_bf16_1(f);
        float w1 = sz_bf16_to_f32(h), w2 = sz_bf16_to_f32_1(h);
        same &= sz_bf16_from_f32(f) == h && !memcmp(&w1, &w2, 4);
    }
    const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00001u,
                                0xFF800001u, 0x00000001u, 0x80000000u};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        float f;
        memcpy(&f, &special[i], 4);
        same &= sz_bf16_from_f32(f) == sz_f32_to_bf16_1(f);
    }
    CU_ASSERT(same);
    free(dout); free(pf); free(p16); free(di); free(d16); free(pw); free(ref32); free(dw); free(ref); free(got);
    free(a32); free(b32); free(wtef); free(wte); free(wtew); free(o); free(o2);
}

/* ---- SiLU and the product: out bf16; backward into bf16 gradients holding values, dout bf16 or fp32 ---- */
static void test_silu_mul(void)
{
    const size_t n = 4 * NC;
    float *x = rnd(n, 6.0f), *y = rnd(n, 2.0f), *df = rnd(n, 1.0f), *o32 = malloc(n * 4);
    uint16_t *o = malloc(n * 2), *o1 = malloc(n * 2), *d = h16(df, n);
    float *dw = w32(d, n);
    double *ref = malloc(n * sizeof *ref);
    /* forward: the fp32 kernels' results rounded once; against double */
    sz_k_silu_fwd_mx(o, SZ_K_BF16, x, n);
    sz_k_silu_fwd(o32, x, n);
    CU_ASSERT(same16(o, o32, n));
    for (size_t i = 0; i < n; i++) ref[i] = x[i] / (1.0 + exp(-(double)x[i]));
    float *ow = w32(o, n);
    CU_ASSERT(close_to("silu out (bf16)", ow, ref, n, 1.0 / 256, 1e-6));
    sz_k_mul_fwd_mx(o1, SZ_K_BF16, x, y, n);
    sz_k_mul_fwd(o32, x, y, n);
    CU_ASSERT(same16(o1, o32, n));
    /* backward: bf16(dst + the fp32 kernel's contribution); dout bf16, then fp32 */
    float *p0 = rnd(n, 0.5f), *pa = rnd(n, 0.5f);
    uint16_t *g0 = h16(p0, n), *h0 = h16(pa, n), *g = malloc(n * 2), *h = malloc(n * 2);
    float *gw = w32(g0, n), *hw = w32(h0, n), *acc = malloc(n * 4), *acc2 = malloc(n * 4);
    int ok = 1;
    for (int dbf = 0; dbf < 2; dbf++) {
        const void *dd = dbf ? (const void *)dw : (const void *)d;
        sz_k_dtype ddt = dbf ? SZ_K_F32 : SZ_K_BF16;
        memcpy(g, g0, n * 2);
        sz_k_silu_bwd_mx(g, SZ_K_BF16, x, dd, ddt, n);
        memcpy(acc, gw, n * 4);
        sz_k_silu_bwd(acc, x, dw, n);
        ok &= same16(g, acc, n);
        memcpy(g, g0, n * 2);
        memcpy(h, h0, n * 2);
        sz_k_mul_bwd_mx(g, SZ_K_BF16, h, SZ_K_BF16, dd, ddt, x, y, n);
        memcpy(acc, gw, n * 4);
        memcpy(acc2, hw, n * 4);
        sz_k_mul_bwd(acc, acc2, dw, x, y, n);
        ok &= same16(g, acc, n) && same16(h, acc2, n);
    }
    CU_ASSERT(ok);
    /* an fp32 gradient from a bf16 dout: bitwise the fp32 kernel on the widened dout */
    float *f1 = dup_f(p0, n), *f2 = dup_f(p0, n);
    sz_k_silu_bwd_mx(f1, SZ_K_F32, x, d, SZ_K_BF16, n);
    sz_k_silu_bwd(f2, x, dw, n);
    CU_ASSERT(!memcmp(f1, f2, n * 4));
    /* the silu gradient against double, and only da given to the product */
    memcpy(g, g0, n * 2);
    sz_k_silu_bwd_mx(g, SZ_K_BF16, x, d, SZ_K_BF16, n);
    for (size_t i = 0; i < n; i++) {
        double v = x[i], s = 1 / (1 + exp(-v));
        ref[i] = gw[i] + dw[i] * s * (1 + v * (1 - s));
    }
    float *gg = w32(g, n);
    CU_ASSERT(close_to("silu dinp (bf16)", gg, ref, n, 1.0 / 128, 1e-5));
    memcpy(g, g0, n * 2);
    sz_k_mul_bwd_mx(g, SZ_K_BF16, NULL, SZ_K_F32, d, SZ_K_BF16, x, y, n);
    memcpy(acc, gw, n * 4);
    sz_k_mul_bwd(acc, NULL, dw, x, y, n);
    CU_ASSERT(same16(g, acc, n));
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        uint16_t *t1 = malloc(n * 2), *t2 = malloc(n * 2), *t3 = malloc(n * 2);
        sz_k_silu_fwd_mx(t1, SZ_K_BF16, x, n);
        memcpy(t2, g0, n * 2);
        sz_k_silu_bwd_mx(t2, SZ_K_BF16, x, d, SZ_K_BF16, n);
        memcpy(t3, h0, n * 2);
        uint16_t *t4 = malloc(n * 2);
        memcpy(t4, g0, n * 2);
        sz_k_mul_bwd_mx(t4, SZ_K_BF16, t3, SZ_K_BF16, d, SZ_K_BF16, x, y, n);
        memcpy(acc, gw, n * 4);
        memcpy(acc2, hw, n * 4);
        sz_k_mul_bwd(acc, acc2, dw, x, y, n);
        CU_ASSERT(!memcmp(t1, o, n * 2) && same16(t4, acc, n) && same16(t3, acc2, n));
        memcpy(acc, gw, n * 4);
        sz_k_silu_bwd(acc, x, dw, n);
        CU_ASSERT(same16(t2, acc, n));
        free(t1); free(t2); free(t3); free(t4);
    }
    omp_set_num_threads(2);
    free(x); free(y); free(df); free(o32); free(o); free(o1); free(d); free(dw); free(ref); free(ow); free(p0);
    free(pa); free(g0); free(h0); free(g); free(h); free(gw); free(hw); free(acc); free(acc2); free(f1); free(f2);
    free(gg);
}

/* ---- the emulated path's mix (include/starzero.h, sz_bf16_compute): fp32 activations and their
 * gradients, bf16 parameters read directly. Every op GPT-2's and LLaMA's units pass parameters to
 * (besides the matmuls) must give bitwise what the fp32 kernel gives on the widened parameters (the
 * fp32 working copies the emulated path used to read): layernorm, residual + layernorm, encoder,
 * RMSNorm, residual + RMSNorm, embedding; forwards and backwards, the backwards' SET variants (a
 * folded zeroing) too, at 1, 2 and 3 threads. ---- */
static int same32(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

static void test_emulated_mix(void)
{
    const float eps = 1e-5f;
    float *x = rnd(NC, 2.0f), *y = rnd(NC, 1.0f), *wf = rnd(C, 1.0f), *bf = rnd(C, 0.5f), *dout = rnd(NC, 1.0f);
    uint16_t *w = h16(wf, C), *b = h16(bf, C);
    float *ww = w32(w, C), *bw = w32(b, C);
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        int ok = 1;
        /* layernorm forward and backward (accumulating, then with dinp written) */
        float *o1 = malloc(NC * 4), *o2 = malloc(NC * 4), m1[N], r1[N], m2[N], r2[N];
        CU_ASSERT_EQUAL(sz_k_layernorm_fwd_mx(o1, SZ_K_F32, m1, r1, x, w, b, SZ_K_BF16, N, C), 0);
        sz_k_layernorm_fwd(o2, m2, r2, x, ww, bw, N, C);
        ok &= same32(o1, o2, NC) && same32(m1, m2, N) && same32(r1, r2, N);
        for (int set = 0; set <= SZ_K_SET_DINP; set += SZ_K_SET_DINP) {
            float *d1 = rnd(NC, 0.1f), *d2 = dup_f(d1, NC), g1[C] = {0}, g2[C] = {0}, h1[C] = {0}, h2[C] = {0};
            CU_ASSERT_EQUAL(sz_k_layernorm_bwd_mx_set(d1, g1, h1, dout, SZ_K_F32, x, w, SZ_K_BF16, m1, r1, N, C, set),
                            0);
            sz_k_layernorm_bwd_set(d2, g2, h2, dout, x, ww, m2, r2, N, C, set);
            ok &= same32(d1, d2, NC) && same32(g1, g2, C) && same32(h1, h2, C);
            free(d1); free(d2);
        }
        CU_ASSERT(ok);
        /* residual + layernorm forward; its backward into fp32 da, db (accumulating, then written) */
        float *res1 = malloc(NC * 4), *res2 = malloc(NC * 4);
        CU_ASSERT_EQUAL(sz_k_residual_layernorm_fwd_mx(res1, o1, SZ_K_F32, m1, r1, x, y, w, b, SZ_K_BF16, N, C), 0);
        sz_k_residual_layernorm_fwd(res2, o2, m2, r2, x, y, ww, bw, N, C);
        ok = same32(res1, res2, NC) && same32(o1, o2, NC) && same32(m1, m2, N) && same32(r1, r2, N);
        for (int set = 0; set <= 1; set++) {
            int bits = set ? SZ_K_SET_A | SZ_K_SET_B : 0;
            float *da1 = rnd(NC, 1.0f), *db1 = rnd(NC, 1.0f), *dr1 = rnd(NC, 1.0f);
            float *da2 = dup_f(da1, NC), *db2 = dup_f(db1, NC), *dr2 = dup_f(dr1, NC);
            float g1[C] = {0}, g2[C] = {0}, h1[C] = {0}, h2[C] = {0};
            CU_ASSERT_EQUAL(sz_k_layernorm_residual_bwd_mx_set(da1, db1, SZ_K_F32, dr1, g1, h1, dout, SZ_K_F32, res1, w,
                                                               SZ_K_BF16, m1, r1, N, C, bits), 0);
            sz_k_layernorm_residual_bwd_set(da2, db2, dr2, g2, h2, dout, res2, ww, m2, r2, N, C, bits);
            ok &= same32(da1, da2, NC) && same32(db1, db2, NC) && same32(dr1, dr2, NC) && same32(g1, g2, C) &&
                  same32(h1, h2, C);
            free(da1); free(db1); free(dr1); free(da2); free(db2); free(dr2);
        }
        CU_ASSERT(ok);
        /* RMSNorm forward and backward */
        CU_ASSERT_EQUAL(sz_k_rmsnorm_fwd_mx(o1, SZ_K_F32, r1, x, w, SZ_K_BF16, N, C, eps), 0);
        sz_k_rmsnorm_fwd(o2, r2, x, ww, N, C, eps);
        ok = same32(o1, o2, NC) && same32(r1, r2, N);
        for (int set = 0; set <= SZ_K_SET_DINP; set += SZ_K_SET_DINP) {
            float *d1 = rnd(NC, 0.1f), *d2 = dup_f(d1, NC), g1[C] = {0}, g2[C] = {0};
            CU_ASSERT_EQUAL(sz_k_rmsnorm_bwd_mx_set(d1, g1, dout, SZ_K_F32, x, w, SZ_K_BF16, r1, N, C, set), 0);
            sz_k_rmsnorm_bwd_set(d2, g2, dout, x, ww, r2, N, C, set);
            ok &= same32(d1, d2, NC) && same32(g1, g2, C);
            free(d1); free(d2);
        }
        CU_ASSERT(ok);
        /* residual + RMSNorm forward and its backward */
        CU_ASSERT_EQUAL(sz_k_residual_rmsnorm_fwd_mx(res1, o1, SZ_K_F32, r1, x, y, w, SZ_K_BF16, N, C, eps), 0);
        sz_k_residual_rmsnorm_fwd(res2, o2, r2, x, y, ww, N, C, eps);
        ok = same32(res1, res2, NC) && same32(o1, o2, NC) && same32(r1, r2, N);
        for (int set = 0; set <= 1; set++) {
            int bits = set ? SZ_K_SET_A | SZ_K_SET_B : 0;
            float *da1 = rnd(NC, 1.0f), *db1 = rnd(NC, 1.0f), *dr1 = rnd(NC, 1.0f);
            float *da2 = dup_f(da1, NC), *db2 = dup_f(db1, NC), *dr2 = dup_f(dr1, NC), g1[C] = {0}, g2[C] = {0};
            CU_ASSERT_EQUAL(sz_k_rmsnorm_residual_bwd_mx_set(da1, db1, SZ_K_F32, dr1, g1, dout, SZ_K_F32, res1, w,
                                                             SZ_K_BF16, r1, N, C, bits), 0);
            sz_k_rmsnorm_residual_bwd_set(da2, db2, dr2, g2, dout, res2, ww, r2, N, C, bits);
            ok &= same32(da1, da2, NC) && same32(db1, db2, NC) && same32(dr1, dr2, NC) && same32(g1, g2, C);
            free(da1); free(db1); free(dr1); free(da2); free(db2); free(dr2);
        }
        CU_ASSERT(ok);
        /* the encoder (wte + wpe) and the embedding (wte) from bf16 tables */
        enum { VV = 50, TT = 16 };
        float *tf = rnd((size_t)VV * C, 1.0f), *pf = rnd((size_t)TT * C, 1.0f);
        uint16_t *te = h16(tf, (size_t)VV * C), *pe = h16(pf, (size_t)TT * C);
        float *tew = w32(te, (size_t)VV * C), *pew = w32(pe, (size_t)TT * C);
        int tok[N];
        for (int i = 0; i < N; i++) tok[i] = (i * 17 + 3) % VV;
        sz_k_encoder_fwd_mx(o1, tok, te, pe, SZ_K_BF16, N / TT, TT, C);
        sz_k_encoder_fwd(o2, tok, tew, pew, N / TT, TT, C);
        ok = same32(o1, o2, NC);
        CU_ASSERT_EQUAL(sz_k_embedding_fwd_mx(o1, tok, te, SZ_K_BF16, N, C, VV), -1);
        CU_ASSERT_EQUAL(sz_k_embedding_fwd(o2, tok, tew, N, C, VV), -1);
        ok &= same32(o1, o2, NC);
        CU_ASSERT(ok);
        free(tf); free(pf); free(te); free(pe); free(tew); free(pew);
        free(o1); free(o2); free(res1); free(res2);
    }
    omp_set_num_threads(2);
    free(x); free(y); free(wf); free(bf); free(dout); free(w); free(b); free(ww); free(bw);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("bf16 activations", NULL, NULL);
    if (!s || !CU_add_test(s, "layernorm", test_layernorm) || !CU_add_test(s, "gelu", test_gelu) ||
        !CU_add_test(s, "residual, softmax-xent, encoder", test_small) || !CU_add_test(s, "attention", test_attention) ||
        !CU_add_test(s, "attention on AMX tiles", test_attention_amx) ||
        !CU_add_test(s, "fusions", test_fused) || !CU_add_test(s, "rmsnorm", test_rmsnorm) ||
        !CU_add_test(s, "residual + rmsnorm", test_residual_rmsnorm) ||
        !CU_add_test(s, "rope backward, embedding, public rounding", test_rope_embedding) ||
        !CU_add_test(s, "silu, mul", test_silu_mul) ||
        !CU_add_test(s, "fp32 activations, bf16 parameters (emulated path)", test_emulated_mix) ||
        !CU_add_test(s, "row conversions, edge values", test_convert_rows)) {
        CU_cleanup_registry();
        return 1;
    }
    omp_set_num_threads(2);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails > 100 ? 100 : (int)fails;
}
