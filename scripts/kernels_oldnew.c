/* scripts/kernels_oldnew.c — the native bf16 path's non-matmul kernels of two source trees compared
 * bitwise (a tool, not part of the library or the tests; scripts/kernels-oldnew.sh builds and runs it): each
 * tree's kernels built as one shared object (-Wl,-Bsymbolic, so each calls its own), both loaded with
 * dlopen, every kernel run on the same inputs in both, every output compared with memcmp. Covers the
 * softmax-xent fused (fp32 and bf16 logits; targets at 0, V-1 and piece edges; a NaN row, a row of
 * +-100, a denormal), attention forward and backward (every dtype and set combination, T up to 1024),
 * layernorm and residual + layernorm forward and backward (every dtype, bias and set combination, the
 * fp32 kernels too, denormal inputs), RMSNorm and residual + RMSNorm likewise, the residual backward, GELU
 * forward and backward, and the whole-buffer conversions
 * (all modes, sizes across the non-temporal threshold, unaligned offsets), at 1, 2 and 3 threads.
 * Usage: kernels_oldnew OLD.so NEW.so [sx|att|ln|rms|res|gelu|conv]; exit 0 when nothing differs. */
#include <dlfcn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_kernels.h"
static void *H[2];
static void *sym(int w, const char *n) { void *f = dlsym(H[w], n); if (!f) { fprintf(stderr, "no %s\n", n); exit(2); } return f; }
static uint64_t rng = 88172645463325252ull;
static float frand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }
static void *al(size_t b) { void *p = aligned_alloc(64, (b + 63) / 64 * 64 + 64); memset(p, 0, (b + 63) / 64 * 64 + 64); return p; }
static float *rf(size_t n, float s) { float *x = al(n * 4); for (size_t i = 0; i < n; i++) x[i] = frand() * s; return x; }
static uint16_t *rh(size_t n, float s) { uint16_t *h = al(n * 2); for (size_t i = 0; i < n; i++) { float f = frand() * s; uint32_t u; memcpy(&u, &f, 4); h[i] = u >> 16; } return h; }
static void *dup(const void *p, size_t b) { void *q = al(b); memcpy(q, p, b); return q; }
static int nfail, nchk;
static void same(const char *what, const void *a, const void *b, size_t bytes) {
    nchk++;
    if (memcmp(a, b, bytes)) { size_t i = 0; while (((char *)a)[i] == ((char *)b)[i]) i++; printf("DIFF %s at byte %zu\n", what, i); nfail++; }
}
typedef int (*sx_f)(void *, sz_k_dtype, float *, const int *, float, int, int, int);
typedef void (*sxf32_f)(float *, float *, const int *, float, int, int, int);
static void t_softmax(int N, int V, int Vp, int th) {
    size_t NV = (size_t)N * Vp; char w[128];
    uint16_t *l = rh(NV, 8.0f); float *lf = rf(NV, 8.0f);
    int *tg = al(N * 4);
    for (int n = 0; n < N; n++) tg[n] = n == 0 ? 0 : n == 1 ? V - 1 : n == 2 ? (2048 < V ? 2048 : V / 2) : n == 3 ? (2047 < V ? 2047 : V / 3) : (n * 7919) % V;
    if (N > 5) { l[5 * Vp + 3] = 0x7FC0; lf[5 * Vp + 3] = 0.0f / 0.0f; }  /* a NaN row */
    if (N > 6) for (int i = 0; i < V; i++) l[6 * Vp + i] = (i % 3) ? 0x42C8 /* 100 */ : 0xC2C8; /* -100 */
    if (N > 4) l[4 * Vp + 7] = 0x0001; /* a denormal */
    void *o[2]; float *ls[2]; void *of[2]; float *lsf[2];
    for (int k = 0; k < 2; k++) {
        o[k] = dup(l, NV * 2); ls[k] = al(N * 4); of[k] = dup(lf, NV * 4); lsf[k] = al(N * 4);
        omp_set_num_threads(th);
        ((sx_f)sym(k, "sz_k_softmax_xent_fused_mx"))(o[k], SZ_K_BF16, ls[k], tg, 0.37f, N, V, Vp);
        ((sxf32_f)sym(k, "sz_k_softmax_xent_fused"))(of[k], lsf[k], tg, 0.37f, N, V, Vp);
    }
    snprintf(w, sizeof w, "softmax bf16 N%d V%d th%d", N, V, th); same(w, o[0], o[1], NV * 2); same(w, ls[0], ls[1], N * 4);
    snprintf(w, sizeof w, "softmax f32 N%d V%d th%d", N, V, th); same(w, of[0], of[1], NV * 4); same(w, lsf[0], lsf[1], N * 4);
}
typedef int (*afwd_f)(void *, sz_k_dtype, float *, const float *, int, int, int, int);
typedef int (*abwd_f)(void *, sz_k_dtype, const void *, sz_k_dtype, const float *, const float *, int, int, int, int, int);
static void t_att(int B, int T, int C, int NH, int th) {
    size_t NC = (size_t)B * T * C, st = (size_t)2 * B * NH * T; char w[160];
    float *qkv = rf(3 * NC, 1.5f), *d32 = rf(NC, 1.0f); uint16_t *d16 = rh(NC, 1.0f);
    float *di32 = rf(3 * NC, 0.5f); uint16_t *di16 = rh(3 * NC, 0.5f);
    float *stats = al(st * 4);
    ((afwd_f)sym(0, "sz_k_attention_fwd_mx"))(al(NC * 4), SZ_K_F32, stats, qkv, B, T, C, NH);
    for (int od = 0; od < 2; od++) {
        void *o[2]; float *s[2];
        for (int k = 0; k < 2; k++) { o[k] = al(NC * 4); s[k] = al(st * 4); omp_set_num_threads(th);
            ((afwd_f)sym(k, "sz_k_attention_fwd_mx"))(o[k], od ? SZ_K_BF16 : SZ_K_F32, s[k], qkv, B, T, C, NH); }
        snprintf(w, sizeof w, "att fwd od%d B%d T%d C%d NH%d th%d", od, B, T, C, NH, th);
        same(w, o[0], o[1], NC * (od ? 2 : 4)); same(w, s[0], s[1], st * 4);
    }
    for (int id = 0; id < 2; id++) for (int dd = 0; dd < 2; dd++) for (int set = 0; set < 2; set++) {
        void *o[2];
        for (int k = 0; k < 2; k++) { o[k] = id ? dup(di16, 3 * NC * 2) : dup(di32, 3 * NC * 4); omp_set_num_threads(th);
            ((abwd_f)sym(k, "sz_k_attention_bwd_mx_set"))(o[k], id ? SZ_K_BF16 : SZ_K_F32, dd ? (void *)d16 : (void *)d32,
                dd ? SZ_K_BF16 : SZ_K_F32, qkv, stats, B, T, C, NH, set ? SZ_K_SET_DINP : 0); }
        snprintf(w, sizeof w, "att bwd id%d dd%d set%d B%d T%d C%d NH%d th%d", id, dd, set, B, T, C, NH, th);
        same(w, o[0], o[1], 3 * NC * (id ? 2 : 4));
    }
}
typedef int (*lnf_f)(void *, sz_k_dtype, float *, float *, const float *, const void *, const void *, sz_k_dtype, int, int);
typedef int (*rlnf_f)(float *, void *, sz_k_dtype, float *, float *, const float *, const float *, const void *, const void *, sz_k_dtype, int, int);
typedef int (*lnb_f)(float *, float *, float *, const void *, sz_k_dtype, const float *, const void *, sz_k_dtype, const float *, const float *, int, int, int);
typedef int (*lrb_f)(float *, void *, sz_k_dtype, float *, float *, float *, const void *, sz_k_dtype, const float *, const void *, sz_k_dtype, const float *, const float *, int, int, int);
static void t_ln(int N, int C, int th) {
    size_t NC = (size_t)N * C; char w[160];
    float *x = rf(NC, 3.0f), *x2 = rf(NC, 1.0f), *wf = rf(C, 1.0f), *bf = rf(C, 0.5f);
    uint16_t *wh = rh(C, 1.0f), *bh = rh(C, 0.5f), *dh = rh(NC, 1.0f), *dbh = rh(NC, 0.5f);
    float *d = rf(NC, 1.0f), *m = al(N * 4), *r = al(N * 4), *dif = rf(NC, 0.3f), *daf = rf(NC, 0.3f), *dbf = rf(NC, 0.3f);
    for (int i = 0; i < C; i += 97) x[i] = 1e-40f;   /* denormal inputs */
    for (int od = 0; od < 2; od++) for (int pd = 0; pd < 2; pd++) for (int bias = 0; bias < 2; bias++) for (int fu = 0; fu < 2; fu++) {
        void *o[2]; float *mm[2], *rr[2], *res[2];
        for (int k = 0; k < 2; k++) { o[k] = al(NC * 4); mm[k] = al(N * 4); rr[k] = al(N * 4); res[k] = al(NC * 4); omp_set_num_threads(th);
            const void *W = pd ? (void *)wh : (void *)wf, *Bi = bias ? (pd ? (void *)bh : (void *)bf) : NULL;
            if (fu) ((rlnf_f)sym(k, "sz_k_residual_layernorm_fwd_mx"))(res[k], o[k], od ? SZ_K_BF16 : SZ_K_F32, mm[k], rr[k], x, x2, W, Bi, pd ? SZ_K_BF16 : SZ_K_F32, N, C);
            else ((lnf_f)sym(k, "sz_k_layernorm_fwd_mx"))(o[k], od ? SZ_K_BF16 : SZ_K_F32, mm[k], rr[k], x, W, Bi, pd ? SZ_K_BF16 : SZ_K_F32, N, C); }
        snprintf(w, sizeof w, "ln fwd fu%d od%d pd%d bias%d N%d C%d th%d", fu, od, pd, bias, N, C, th);
        same(w, o[0], o[1], NC * (od ? 2 : 4)); same(w, mm[0], mm[1], N * 4); same(w, rr[0], rr[1], N * 4);
        if (fu) same(w, res[0], res[1], NC * 4);
        if (od == 0 && pd == 0 && bias == 1 && fu == 0) { memcpy(m, mm[0], N * 4); memcpy(r, rr[0], N * 4); }
    }
    { typedef void (*f1)(float *, float *, float *, const float *, const float *, const float *, int, int);
      typedef void (*f2)(float *, float *, float *, float *, const float *, const float *, const float *, const float *, int, int);
      float *o[2], *mm[2], *rr[2], *res[2];
      for (int k = 0; k < 2; k++) { o[k] = al(NC * 4); mm[k] = al(N * 4); rr[k] = al(N * 4); res[k] = al(NC * 4); omp_set_num_threads(th);
          ((f1)sym(k, "sz_k_layernorm_fwd"))(o[k], mm[k], rr[k], x, wf, bf, N, C); }
      snprintf(w, sizeof w, "ln fwd fp32 N%d C%d th%d", N, C, th); same(w, o[0], o[1], NC * 4); same(w, mm[0], mm[1], N * 4); same(w, rr[0], rr[1], N * 4);
      for (int k = 0; k < 2; k++) ((f2)sym(k, "sz_k_residual_layernorm_fwd"))(res[k], o[k], mm[k], rr[k], x, x2, wf, bf, N, C);
      snprintf(w, sizeof w, "res ln fwd fp32 N%d C%d th%d", N, C, th); same(w, o[0], o[1], NC * 4); same(w, res[0], res[1], NC * 4); same(w, rr[0], rr[1], N * 4); }
    for (int dd = 0; dd < 2; dd++) for (int pd = 0; pd < 2; pd++) for (int set = 0; set < 4; set++) for (int fu = 0; fu < 2; fu++) for (int bd = 0; bd < 2; bd++) {
        if (!fu && (set > 1 || bd)) continue;
        float *di[2], *dw[2], *db[2], *da[2]; void *dbb[2];
        for (int k = 0; k < 2; k++) { di[k] = dup(dif, NC * 4); dw[k] = dup(wf, C * 4); db[k] = dup(bf, C * 4); da[k] = dup(daf, NC * 4);
            dbb[k] = bd ? dup(dbh, NC * 2) : dup(dbf, NC * 4); omp_set_num_threads(th);
            const void *W = pd ? (void *)wh : (void *)wf, *D = dd ? (void *)dh : (void *)d;
            if (fu) ((lrb_f)sym(k, "sz_k_layernorm_residual_bwd_mx_set"))(da[k], dbb[k], bd ? SZ_K_BF16 : SZ_K_F32, di[k], dw[k], db[k], D, dd ? SZ_K_BF16 : SZ_K_F32, x, W, pd ? SZ_K_BF16 : SZ_K_F32, m, r, N, C, set);
            else ((lnb_f)sym(k, "sz_k_layernorm_bwd_mx_set"))(di[k], dw[k], db[k], D, dd ? SZ_K_BF16 : SZ_K_F32, x, W, pd ? SZ_K_BF16 : SZ_K_F32, m, r, N, C, set); }
        snprintf(w, sizeof w, "ln bwd fu%d dd%d pd%d set%d bd%d N%d C%d th%d", fu, dd, pd, set, bd, N, C, th);
        same(w, di[0], di[1], NC * 4); same(w, dw[0], dw[1], C * 4); same(w, db[0], db[1], C * 4);
        if (fu) { same(w, da[0], da[1], NC * 4); same(w, dbb[0], dbb[1], NC * (bd ? 2 : 4)); }
    }
}
typedef int (*rf_f)(void *, sz_k_dtype, float *, const float *, const void *, sz_k_dtype, int, int, float);
typedef int (*rrf_f)(float *, void *, sz_k_dtype, float *, const float *, const float *, const void *, sz_k_dtype, int, int, float);
typedef int (*rb_f)(float *, float *, const void *, sz_k_dtype, const float *, const void *, sz_k_dtype, const float *, int, int, int);
typedef int (*rrb_f)(float *, void *, sz_k_dtype, float *, float *, const void *, sz_k_dtype, const float *, const void *, sz_k_dtype, const float *, int, int, int);
static void t_rms(int N, int C, int th) {
    size_t NC = (size_t)N * C; char w[160]; const float eps = 1e-5f;
    float *x = rf(NC, 3.0f), *x2 = rf(NC, 1.0f), *wf = rf(C, 1.0f), *d = rf(NC, 1.0f), *r = al(N * 4);
    uint16_t *wh = rh(C, 1.0f), *dh = rh(NC, 1.0f), *dbh = rh(NC, 0.5f);
    float *dif = rf(NC, 0.3f), *daf = rf(NC, 0.3f), *dbf = rf(NC, 0.3f);
    for (int i = 0; i < C; i += 97) x[i] = 1e-40f;   /* denormal inputs */
    for (int od = 0; od < 2; od++) for (int pd = 0; pd < 2; pd++) for (int fu = 0; fu < 2; fu++) {
        void *o[2]; float *rr[2], *res[2];
        for (int k = 0; k < 2; k++) { o[k] = al(NC * 4); rr[k] = al(N * 4); res[k] = al(NC * 4); omp_set_num_threads(th);
            const void *W = pd ? (void *)wh : (void *)wf;
            if (fu) ((rrf_f)sym(k, "sz_k_residual_rmsnorm_fwd_mx"))(res[k], o[k], od ? SZ_K_BF16 : SZ_K_F32, rr[k], x, x2, W, pd ? SZ_K_BF16 : SZ_K_F32, N, C, eps);
            else ((rf_f)sym(k, "sz_k_rmsnorm_fwd_mx"))(o[k], od ? SZ_K_BF16 : SZ_K_F32, rr[k], x, W, pd ? SZ_K_BF16 : SZ_K_F32, N, C, eps); }
        snprintf(w, sizeof w, "rms fwd fu%d od%d pd%d N%d C%d th%d", fu, od, pd, N, C, th);
        same(w, o[0], o[1], NC * (od ? 2 : 4)); same(w, rr[0], rr[1], N * 4);
        if (fu) same(w, res[0], res[1], NC * 4);
        if (od == 0 && pd == 0 && fu == 0) memcpy(r, rr[0], N * 4);
    }
    { typedef void (*f1)(float *, float *, const float *, const float *, int, int, float);
      typedef void (*f2)(float *, float *, float *, const float *, const float *, const float *, int, int, float);
      typedef void (*f3)(float *, float *, const float *, const float *, const float *, const float *, int, int, int);
      typedef void (*f4)(float *, float *, float *, float *, const float *, const float *, const float *, const float *, int, int, int);
      float *o[2], *rr[2], *res[2], *g[2], *gw[2], *ga[2], *gb[2];
      for (int k = 0; k < 2; k++) { o[k] = al(NC * 4); rr[k] = al(N * 4); res[k] = al(NC * 4); omp_set_num_threads(th);
          ((f1)sym(k, "sz_k_rmsnorm_fwd"))(o[k], rr[k], x, wf, N, C, eps); }
      snprintf(w, sizeof w, "rms fwd fp32 N%d C%d th%d", N, C, th); same(w, o[0], o[1], NC * 4); same(w, rr[0], rr[1], N * 4);
      for (int k = 0; k < 2; k++) ((f2)sym(k, "sz_k_residual_rmsnorm_fwd"))(res[k], o[k], rr[k], x, x2, wf, N, C, eps);
      snprintf(w, sizeof w, "res rms fwd fp32 N%d C%d th%d", N, C, th); same(w, o[0], o[1], NC * 4); same(w, res[0], res[1], NC * 4);
      for (int set = 0; set < 2; set++) {
          for (int k = 0; k < 2; k++) { g[k] = dup(dif, NC * 4); gw[k] = dup(wf, C * 4); ga[k] = dup(daf, NC * 4); gb[k] = dup(dbf, NC * 4);
              ((f3)sym(k, "sz_k_rmsnorm_bwd_set"))(g[k], gw[k], d, x, wf, r, N, C, set ? SZ_K_SET_DINP : 0); }
          snprintf(w, sizeof w, "rms bwd fp32 set%d N%d C%d th%d", set, N, C, th); same(w, g[0], g[1], NC * 4); same(w, gw[0], gw[1], C * 4);
          for (int k = 0; k < 2; k++) ((f4)sym(k, "sz_k_rmsnorm_residual_bwd_set"))(ga[k], gb[k], g[k], gw[k], d, x, wf, r, N, C, set ? 3 : 0);
          snprintf(w, sizeof w, "rms res bwd fp32 set%d N%d C%d th%d", set, N, C, th); same(w, g[0], g[1], NC * 4); same(w, ga[0], ga[1], NC * 4); same(w, gb[0], gb[1], NC * 4); }
    }
    for (int dd = 0; dd < 2; dd++) for (int pd = 0; pd < 2; pd++) for (int set = 0; set < 4; set++) for (int fu = 0; fu < 2; fu++) for (int bd = 0; bd < 2; bd++) {
        if (!fu && (set > 1 || bd)) continue;
        float *di[2], *dw[2], *da[2]; void *dbb[2];
        for (int k = 0; k < 2; k++) { di[k] = dup(dif, NC * 4); dw[k] = dup(wf, C * 4); da[k] = dup(daf, NC * 4);
            dbb[k] = bd ? dup(dbh, NC * 2) : dup(dbf, NC * 4); omp_set_num_threads(th);
            const void *W = pd ? (void *)wh : (void *)wf, *D = dd ? (void *)dh : (void *)d;
            if (fu) ((rrb_f)sym(k, "sz_k_rmsnorm_residual_bwd_mx_set"))(da[k], dbb[k], bd ? SZ_K_BF16 : SZ_K_F32, di[k], dw[k], D, dd ? SZ_K_BF16 : SZ_K_F32, x, W, pd ? SZ_K_BF16 : SZ_K_F32, r, N, C, set);
            else ((rb_f)sym(k, "sz_k_rmsnorm_bwd_mx_set"))(di[k], dw[k], D, dd ? SZ_K_BF16 : SZ_K_F32, x, W, pd ? SZ_K_BF16 : SZ_K_F32, r, N, C, set); }
        snprintf(w, sizeof w, "rms bwd fu%d dd%d pd%d set%d bd%d N%d C%d th%d", fu, dd, pd, set, bd, N, C, th);
        same(w, di[0], di[1], NC * 4); same(w, dw[0], dw[1], C * 4);
        if (fu) { same(w, da[0], da[1], NC * 4); same(w, dbb[0], dbb[1], NC * (bd ? 2 : 4)); }
    }
}
typedef void (*resb_f)(void *, sz_k_dtype, void *, sz_k_dtype, const float *, size_t, int);
static void t_res(size_t n, int th) {
    char w[128]; float *d = rf(n, 1.0f), *af = rf(n, 0.5f), *bf = rf(n, 0.5f); uint16_t *ah = rh(n, 0.5f), *bh = rh(n, 0.5f);
    d[n / 3] = 1e-40f; d[n / 2] = 0.0f / 0.0f;   /* a denormal, a NaN */
    for (int ad = 0; ad < 2; ad++) for (int bd = 0; bd < 2; bd++) for (int set = 0; set < 4; set++) { void *a[2], *b[2];
        for (int k = 0; k < 2; k++) { a[k] = ad ? dup(ah, n * 2) : dup(af, n * 4); b[k] = bd ? dup(bh, n * 2) : dup(bf, n * 4); omp_set_num_threads(th);
            ((resb_f)sym(k, "sz_k_residual_bwd_mx_set"))(a[k], ad ? SZ_K_BF16 : SZ_K_F32, b[k], bd ? SZ_K_BF16 : SZ_K_F32, d, n, set); }
        snprintf(w, sizeof w, "residual bwd ad%d bd%d set%d n%zu th%d", ad, bd, set, n, th);
        same(w, a[0], a[1], n * (ad ? 2 : 4)); same(w, b[0], b[1], n * (bd ? 2 : 4)); }
}
typedef void (*gf_f)(void *, sz_k_dtype, const float *, size_t);
typedef void (*gb_f)(void *, sz_k_dtype, const float *, const void *, sz_k_dtype, size_t, int);
static void t_gelu(size_t n, int th) {
    char w[128]; float *x = rf(n, 4.0f), *d = rf(n, 1.0f), *di = rf(n, 0.2f); uint16_t *dh = rh(n, 1.0f), *dih = rh(n, 0.2f);
    for (int od = 0; od < 2; od++) { void *o[2];
        for (int k = 0; k < 2; k++) { o[k] = al(n * 4); omp_set_num_threads(th); ((gf_f)sym(k, "sz_k_gelu_fwd_mx"))(o[k], od ? SZ_K_BF16 : SZ_K_F32, x, n); }
        snprintf(w, sizeof w, "gelu fwd od%d n%zu th%d", od, n, th); same(w, o[0], o[1], n * (od ? 2 : 4)); }
    for (int id = 0; id < 2; id++) for (int dd = 0; dd < 2; dd++) for (int set = 0; set < 2; set++) { void *o[2];
        for (int k = 0; k < 2; k++) { o[k] = id ? dup(dih, n * 2) : dup(di, n * 4); omp_set_num_threads(th);
            ((gb_f)sym(k, "sz_k_gelu_bwd_mx_set"))(o[k], id ? SZ_K_BF16 : SZ_K_F32, x, dd ? (void *)dh : (void *)d, dd ? SZ_K_BF16 : SZ_K_F32, n, set); }
        snprintf(w, sizeof w, "gelu bwd id%d dd%d set%d n%zu th%d", id, dd, set, n, th); same(w, o[0], o[1], n * (id ? 2 : 4)); }
}
typedef void (*cv_f)(void *, sz_k_dtype, const void *, sz_k_dtype, size_t, int);
static void t_conv(size_t n, size_t off, int th) {
    char w[128]; float *f = rf(n + 64, 3.0f); uint16_t *h = rh(n + 64, 3.0f);
    f[off + 5] = 1e-40f; f[off + 77] = 0.0f / 0.0f; f[off + n / 2] = -1e-39f;
    for (int dir = 0; dir < 2; dir++) for (int mode = 0; mode < 3; mode++) {
        int md = mode == 0 ? SZ_K_CONVERT_SET : mode == 1 ? SZ_K_CONVERT_ADD : SZ_K_CONVERT_ONTO_ZEROS;
        void *o[2];
        for (int k = 0; k < 2; k++) { o[k] = dir ? dup(f, (n + 64) * 4) : dup(h, (n + 64) * 2); omp_set_num_threads(th);
            if (dir) ((cv_f)sym(k, "sz_k_convert"))((float *)o[k] + off, SZ_K_F32, h + off, SZ_K_BF16, n, md);
            else ((cv_f)sym(k, "sz_k_convert"))((uint16_t *)o[k] + off, SZ_K_BF16, f + off, SZ_K_F32, n, md); }
        snprintf(w, sizeof w, "convert dir%d mode%d n%zu off%zu th%d", dir, md, n, off, th); same(w, o[0], o[1], (n + 64) * (dir ? 4 : 2));
    }
}
int main(int argc, char **argv) {
    H[0] = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL); H[1] = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!H[0] || !H[1]) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    const char *only = argc > 3 ? argv[3] : "";
    for (int th = 1; th <= 3; th++) {
        if (!*only || strstr(only, "sx")) { t_softmax(9, 50257, 50304, th); t_softmax(7, 2049, 2064, th); t_softmax(7, 33, 48, th); t_softmax(3, 4096, 4096, th); }
        if (!*only || strstr(only, "att")) { t_att(2, 64, 768, 12, th); t_att(1, 37, 96, 2, th); t_att(2, 20, 48, 1, th); t_att(1, 130, 320, 2, th); if (th == 2) t_att(1, 1024, 768, 12, th); }
        if (!*only || strstr(only, "ln")) { t_ln(256, 768, th); t_ln(5, 100, th); t_ln(3, 4100, th); t_ln(17, 33, th); t_ln(1, 64, th); t_ln(9, 48, th); t_ln(3, 1600, th); }
        if (!*only || strstr(only, "rms")) { t_rms(256, 768, th); t_rms(5, 100, th); t_rms(17, 33, th); t_rms(1, 64, th); t_rms(9, 48, th); t_rms(3, 1600, th); t_rms(2, 4112, th); }
        if (!*only || strstr(only, "res")) { t_res(256 * 768, th); t_res(70001, th); t_res(4103, th); t_res(17, th); }
        if (!*only || strstr(only, "conv")) { t_conv(5000003, 3, th); t_conv(3000000, 0, th); t_conv(1 << 20, 1, th); t_conv(100000, 0, th); }
        if (!*only || strstr(only, "gelu")) { t_gelu(256 * 3072, th); t_gelu(1000, th); t_gelu(17, th); t_gelu(70001, th); }
    }
    printf("%d checks, %d differ\n", nchk, nfail);
    return nfail != 0;
}
