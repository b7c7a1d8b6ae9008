/* bench_act.c — the non-matmul kernels of a GPT-2 d12 step (N = B*T = 256 rows, C = 768, 4C,
 * Vp = 50304, NH = 12, B = 4, T = 64): each fp32 kernel against its native-bf16-path variant
 * (bf16_act.c, the operand types gpt2.c gives it), one thread, thread CPU time (not disturbed by
 * other processes' share of the cores), the two called in turn R times, best of each; with TH > 1
 * threads, wall time (best of R: on a loaded machine run it several times). The LLaMA-style model's
 * RMSNorm kernels and embedding at the same shapes; where the CPU has AMX, attention's bf16 row
 * kernels against its AMX tiles (the two columns are then those). Not part of the library. Usage:
 * bench_act [R [B T [TH [ONLY]]]], ONLY a word the kernels' names must contain (e.g. attention: at
 * B 4 T 1024 the softmax's N x Vp logits take 1.2 GB). Build (from the source root):
 *   gcc -O3 -march=native -fno-math-errno -fopenmp -Ikernels kernels/bench_act.c \
 *       kernels/{bf16_act,bf16,attention,attention_amx,layernorm,gelu,residual,softmax_xent,encoder}.c \
 *       kernels/{rmsnorm,rope,embedding,silu,mul}.c -lm -o bench_act
 * (the flags of CMake's Release build). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sz_kernels.h"
#include "sz_kernels_impl.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static void *al(size_t bytes) /* 64-byte aligned, as StarPU allocates */
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}
static float *rf(size_t n, float s)
{
    float *x = al(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = frand() * s;
    return x;
}
static uint16_t *rh(size_t n, float s)
{
    float *x = rf(n, s);
    uint16_t *h = al(n * 2);
    sz_k_f32_to_bf16(h, x, n);
    free(x);
    return h;
}

static int R = 15, TH = 1;
static const char *ONLY = "";
static double now_s(void) { return TH > 1 ? omp_get_wtime() : cpu_s(); }
#define TIME(var, stmt)                                                                                  \
    do {                                                                                                 \
        double best_ = 1e30;                                                                             \
        for (int r_ = -1; r_ < R; r_++) {                                                                \
            double t0_ = now_s();                                                                        \
            stmt;                                                                                        \
            double t_ = now_s() - t0_;                                                                   \
            if (r_ >= 0 && t_ < best_) best_ = t_;                                                       \
        }                                                                                                \
        var = best_ * 1e3;                                                                               \
    } while (0)
/* the fp32 kernel and its variant called in turn R times (after one warm-up call each), the best of
 * each: both see the same moments of the machine's load */
#define PAIR(va, sa, vb, sb)                                                                             \
    do {                                                                                                 \
        double ba_ = 1e30, bb_ = 1e30;                                                                   \
        for (int r_ = -1; r_ < R; r_++) {                                                                \
            double t0_ = now_s();                                                                        \
            sa;                                                                                          \
            double t1_ = now_s();                                                                        \
            sb;                                                                                          \
            double t2_ = now_s();                                                                        \
            if (r_ >= 0 && t1_ - t0_ < ba_) ba_ = t1_ - t0_;                                             \
            if (r_ >= 0 && t2_ - t1_ < bb_) bb_ = t2_ - t1_;                                             \
        }                                                                                                \
        va = ba_ * 1e3;                                                                                  \
        vb = bb_ * 1e3;                                                                                  \
    } while (0)

#define ON(name) (!*ONLY || strstr(name, ONLY))
static void row(const char *name, double f32, double bf)
{
    printf("%-34s %9.3f %9.3f %6.2f\n", name, f32, bf, bf / f32);
}

int main(int argc, char **argv)
{
    if (argc > 1) R = atoi(argv[1]);
    int B = argc > 3 ? atoi(argv[2]) : 4, T = argc > 3 ? atoi(argv[3]) : 64;
    if (argc > 4) TH = atoi(argv[4]);
    if (argc > 5) ONLY = argv[5];
    int C = 768, NH = 12, V = 50257, Vp = 50304, N = B * T;
    size_t NC = (size_t)N * C, N4 = 4 * NC;
    omp_set_num_threads(TH);
    printf("B=%d T=%d N=%d C=%d NH=%d Vp=%d; %d thread(s), %s ms, best of %d\n", B, T, N, C, NH, Vp, TH,
           TH > 1 ? "wall" : "thread CPU", R);
    printf("%-34s %9s %9s %6s\n", "kernel", "fp32", "bf16", "ratio");
    double a, b;

    /* parameters: fp32 and bf16 */
    float *w = rf(C, 1.0f), *bi = rf(C, 0.5f);
    uint16_t *wh = rh(C, 1.0f), *bh = rh(C, 0.5f);
    float *mean = al(N * 4), *rstd = al(N * 4), *dw = calloc(C, 4), *db = calloc(C, 4);

    /* layernorm forward: fp32 out / bf16 out (ln1, lnf) */
    float *x = rf(NC, 2.0f), *o = al(NC * 4), *x2 = rf(NC, 1.0f), *res = al(NC * 4);
    uint16_t *oh = al(NC * 2);
    if (ON("layernorm")) {
        PAIR(a, sz_k_layernorm_fwd(o, mean, rstd, x, w, bi, N, C),
             b, sz_k_layernorm_fwd_mx(oh, SZ_K_BF16, mean, rstd, x, wh, bh, SZ_K_BF16, N, C));
        row("layernorm_fwd (Nx768)", a, b);
        PAIR(a, sz_k_residual_layernorm_fwd(res, o, mean, rstd, x, x2, w, bi, N, C),
             b, sz_k_residual_layernorm_fwd_mx(res, oh, SZ_K_BF16, mean, rstd, x, x2, wh, bh, SZ_K_BF16, N, C));
        row("residual_layernorm_fwd", a, b);
    }

    /* layernorm backward: dout fp32 / bf16 (dln1, dlnf) */
    float *d = rf(NC, 1.0f), *di = calloc(NC, 4), *da = calloc(NC, 4), *dres = calloc(NC, 4), *dbf = calloc(NC, 4);
    uint16_t *dh = rh(NC, 1.0f), *dbh = rh(NC, 0.5f);
    if (ON("layernorm")) {
        PAIR(a, sz_k_layernorm_bwd(di, dw, db, d, x, w, mean, rstd, N, C),
             b, sz_k_layernorm_bwd_mx(di, dw, db, dh, SZ_K_BF16, x, wh, SZ_K_BF16, mean, rstd, N, C));
        row("layernorm_bwd", a, b);
        PAIR(a, sz_k_layernorm_bwd_set(di, dw, db, d, x, w, mean, rstd, N, C, SZ_K_SET_DINP),
             b, sz_k_layernorm_bwd_mx_set(di, dw, db, dh, SZ_K_BF16, x, wh, SZ_K_BF16, mean, rstd, N, C, SZ_K_SET_DINP));
        row("layernorm_bwd (set)", a, b);
        PAIR(a, sz_k_layernorm_residual_bwd(da, dbf, dres, dw, db, d, x, w, mean, rstd, N, C),
             b, sz_k_layernorm_residual_bwd_mx(da, dbh, SZ_K_BF16, dres, dw, db, dh, SZ_K_BF16, x, wh, SZ_K_BF16, mean, rstd, N, C));
        row("layernorm_residual_bwd", a, b);
    }

    /* GELU on N x 4C: fch fp32 -> fch_gelu bf16; backward dfch_gelu bf16 -> dfch bf16 */
    float *g = rf(N4, 3.0f), *go = al(N4 * 4), *gd = rf(N4, 1.0f), *gdi = calloc(N4, 4);
    uint16_t *goh = al(N4 * 2), *gdh = rh(N4, 1.0f), *gdih = rh(N4, 0.1f);
    if (ON("gelu")) {
        PAIR(a, sz_k_gelu_fwd(go, g, N4),
             b, sz_k_gelu_fwd_mx(goh, SZ_K_BF16, g, N4));
        row("gelu_fwd (Nx3072)", a, b);
        PAIR(a, sz_k_gelu_bwd(gdi, g, gd, N4),
             b, sz_k_gelu_bwd_mx(gdih, SZ_K_BF16, g, gdh, SZ_K_BF16, N4));
        row("gelu_bwd", a, b);
        PAIR(a, sz_k_gelu_bwd_set(gdi, g, gd, N4, SZ_K_SET_DINP),
             b, sz_k_gelu_bwd_mx_set(gdih, SZ_K_BF16, g, gdh, SZ_K_BF16, N4, SZ_K_SET_DINP));
        row("gelu_bwd (set)", a, b);
    }

    /* residual backward: dres2 fp32 += dy, dfcproj bf16 += dy */
    if (ON("residual")) {
        PAIR(a, sz_k_residual_bwd(da, dbf, d, NC),
             b, sz_k_residual_bwd_mx(da, SZ_K_F32, dbh, SZ_K_BF16, d, NC));
        row("residual_bwd (Nx768)", a, b);
    }

    /* attention: qkv fp32 -> atty bf16; backward datty bf16 -> dqkv bf16 */
    float *qkv = rf(3 * NC, 1.0f), *ao = al(NC * 4), *st = al((size_t)2 * B * NH * T * 4), *adi = calloc(3 * NC, 4);
    uint16_t *aoh = al(NC * 2), *adih = calloc(3 * NC, 2);
    if (ON("attention")) {
        PAIR(a, sz_k_attention_fwd(ao, st, qkv, B, T, C, NH),
             b, sz_k_attention_fwd_mx(aoh, SZ_K_BF16, st, qkv, B, T, C, NH));
        row("attention_fwd", a, b);
        PAIR(a, sz_k_attention_bwd(adi, d, qkv, st, B, T, C, NH),
             b, sz_k_attention_bwd_mx(adih, SZ_K_BF16, dh, SZ_K_BF16, qkv, st, B, T, C, NH));
        row("attention_bwd", a, b);
        PAIR(a, sz_k_attention_bwd_set(adi, d, qkv, st, B, T, C, NH, SZ_K_SET_DINP),
             b, sz_k_attention_bwd_mx_set(adih, SZ_K_BF16, dh, SZ_K_BF16, qkv, st, B, T, C, NH, SZ_K_SET_DINP));
        row("attention_bwd (set)", a, b);
        if (sz_k_attention_amx_ok()) { /* the bf16 path's two kernels: row kernels (fp32 math) | AMX tiles */
            PAIR(a, sz_k_attention_fwd_mx_impl(aoh, SZ_K_BF16, st, qkv, B, T, C, NH, SZ_K_ATT_ROWWISE),
                 b, sz_k_attention_fwd_mx_impl(aoh, SZ_K_BF16, st, qkv, B, T, C, NH, SZ_K_ATT_AMX));
            row("attention_fwd bf16: rows | AMX", a, b);
            PAIR(a, sz_k_attention_bwd_mx_impl(adih, SZ_K_BF16, dh, SZ_K_BF16, qkv, st, B, T, C, NH, SZ_K_SET_DINP,
                                               SZ_K_ATT_ROWWISE),
                 b, sz_k_attention_bwd_mx_impl(adih, SZ_K_BF16, dh, SZ_K_BF16, qkv, st, B, T, C, NH, SZ_K_SET_DINP,
                                               SZ_K_ATT_AMX));
            row("attention_bwd set bf16: rows | AMX", a, b);
        }
    }

    int *tg = al(N * 4);
    for (int n = 0; n < N; n++) tg[n] = (n * 7919) % V;
    if (ON("softmax")) {
        /* softmax-cross-entropy fused, in place: logits fp32 / bf16 (N x Vp); each call rewrites the
         * logits with their gradient, so both are refreshed before each call from a saved copy
         * (outside the timing: the copy is timed separately and subtracted) */
        size_t NV = (size_t)N * Vp;
        float *lg = rf(NV, 4.0f), *lw = al(NV * 4), *loss = al(N * 4);
        uint16_t *lh = al(NV * 2), *lh0 = al(NV * 2);
        sz_k_f32_to_bf16(lh0, lg, NV);
        double c32, c16;
        TIME(c32, memcpy(lw, lg, NV * 4));
        TIME(c16, memcpy(lh, lh0, NV * 2));
        PAIR(a, (memcpy(lw, lg, NV * 4), sz_k_softmax_xent_fused(lw, loss, tg, 1.0f / N, N, V, Vp)),
             b, (memcpy(lh, lh0, NV * 2), sz_k_softmax_xent_fused_mx(lh, SZ_K_BF16, loss, tg, 1.0f / N, N, V, Vp)));
        row("softmax_xent_fused (Nx50304)", a - c32, b - c16);
    }

    /* encoder forward: wte, wpe fp32 / bf16 */
    float *wte = rf((size_t)Vp * C, 0.1f), *wpe = rf((size_t)1024 * C, 0.1f);
    uint16_t *wteh = rh((size_t)Vp * C, 0.1f), *wpeh = rh((size_t)1024 * C, 0.1f);
    if (ON("encoder")) {
        PAIR(a, sz_k_encoder_fwd(o, tg, wte, wpe, B, T, C),
             b, sz_k_encoder_fwd_mx(o, tg, wteh, wpeh, SZ_K_BF16, B, T, C));
        row("encoder_fwd", a, b);
    }

    /* the LLaMA-style model's: RMSNorm (bf16 out, bf16 weight; backward from a bf16 dout) and its fusions
     * with the residual (db bf16), the embedding from a bf16 table */
    if (ON("rmsnorm")) {
        const float eps = 1e-5f;
        PAIR(a, sz_k_rmsnorm_fwd(o, rstd, x, w, N, C, eps),
             b, sz_k_rmsnorm_fwd_mx(oh, SZ_K_BF16, rstd, x, wh, SZ_K_BF16, N, C, eps));
        row("rmsnorm_fwd (Nx768)", a, b);
        PAIR(a, sz_k_residual_rmsnorm_fwd(res, o, rstd, x, x2, w, N, C, eps),
             b, sz_k_residual_rmsnorm_fwd_mx(res, oh, SZ_K_BF16, rstd, x, x2, wh, SZ_K_BF16, N, C, eps));
        row("residual_rmsnorm_fwd", a, b);
        PAIR(a, sz_k_rmsnorm_bwd(di, dw, d, x, w, rstd, N, C),
             b, sz_k_rmsnorm_bwd_mx(di, dw, dh, SZ_K_BF16, x, wh, SZ_K_BF16, rstd, N, C));
        row("rmsnorm_bwd", a, b);
        PAIR(a, sz_k_rmsnorm_bwd_set(di, dw, d, x, w, rstd, N, C, SZ_K_SET_DINP),
             b, sz_k_rmsnorm_bwd_mx_set(di, dw, dh, SZ_K_BF16, x, wh, SZ_K_BF16, rstd, N, C, SZ_K_SET_DINP));
        row("rmsnorm_bwd (set)", a, b);
        PAIR(a, sz_k_rmsnorm_residual_bwd(da, dbf, dres, dw, d, x, w, rstd, N, C),
             b, sz_k_rmsnorm_residual_bwd_mx(da, dbh, SZ_K_BF16, dres, dw, dh, SZ_K_BF16, x, wh, SZ_K_BF16, rstd, N, C));
        row("rmsnorm_residual_bwd", a, b);
    }
    if (ON("embedding")) {
        PAIR(a, sz_k_embedding_fwd(o, tg, wte, N, C, V),
             b, sz_k_embedding_fwd_mx(o, tg, wteh, SZ_K_BF16, N, C, V));
        row("embedding_fwd", a, b);
    }

    /* whole-buffer conversions (bf16.c), N x 4C */
    if (ON("conversions")) {
        PAIR(a, sz_k_bf16_to_f32(go, gdh, N4),
             b, sz_k_f32_to_bf16(goh, g, N4));
        printf("%-34s %9.3f %9.3f  (widen, narrow)\n", "conversions (Nx3072)", a, b);
        size_t nw = (size_t)Vp * C; /* wte's size: beyond the caches */
        float *wf2 = al(nw * 4);
        uint16_t *wh2 = al(nw * 2);
        PAIR(a, sz_k_bf16_to_f32(wf2, wteh, nw),
             b, sz_k_f32_to_bf16(wh2, wte, nw));
        printf("%-34s %9.3f %9.3f  (widen, narrow)\n", "conversions (Vp x 768)", a, b);
    }
    return 0;
}
