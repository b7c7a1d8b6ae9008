/* bf16_act.c — the non-matmul kernels of the native bf16 compute path (include/starzero.h,
 * sz_bf16_compute): the same math as the fp32 kernels, computed in fp32, with some operands bf16
 * (the activations a matmul reads and their gradients, and the parameters: bf16 on the native
 * path). A bf16 input is widened exactly; a bf16 output is rounded to nearest even once, from the
 * fp32 value the fp32 kernel would produce; a bf16 destination that accumulates becomes
 * round_bf16(f32(dst) + fp32 contribution), like the bf16 matmul's. Each kernel's order of
 * operations is fixed by the shapes alone (rows or elements split statically, row reductions by
 * column blocks summing rows 0..N-1), so the bits do not depend on the thread count. The codelets
 * call these only when some operand is bf16; all-fp32 calls go to the fp32 kernels. GPT-2's ops
 * (layernorm, GELU, residual, softmax-xent, encoder, their fusions) and the LLaMA-style model's
 * (RMSNorm and its fusion with the residual, RoPE's backward, the embedding). */
#include <math.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

static inline float ldx(const void *p, int dt, size_t i)
{
    return dt == SZ_K_BF16 ? sz_bf16_to_f32_1(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void stx(void *p, int dt, size_t i, float v)
{
    if (dt == SZ_K_BF16) ((uint16_t *)p)[i] = sz_f32_to_bf16_1(v);
    else ((float *)p)[i] = v;
}

/* p[i] += v in p's type */
static inline void accx(void *p, int dt, size_t i, float v)
{
    if (dt == SZ_K_BF16) ((uint16_t *)p)[i] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(((uint16_t *)p)[i]) + v);
    else ((float *)p)[i] += v;
}

/* dst[0..n) = src widened to fp32 */
static void widen(float *dst, const void *src, int dt, size_t n)
{
    if (dt == SZ_K_BF16) sz_k_bf16_to_f32(dst, src, n);
    else memcpy(dst, src, n * sizeof *dst);
}

/* ---- layernorm (layernorm.c's row math, sz_ln_row_fwd / sz_ln_row_bwd / sz_ln_params_bwd) ---- */

/* The forward on fp32 rows: res NULL: layernorm(a) (sz_ln_row_fwd); else res = a + b and
 * layernorm(res) (sz_k_residual_layernorm_fwd, row by row); a bf16 out is the fp32 row rounded. */
static int ln_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *mean, float *rstd, const float *a,
                     const float *b, const void *weight, const void *bias, sz_k_dtype p_dt, int N, int C)
{
    float *wf = malloc(2 * (size_t)C * sizeof *wf);
    if (!wf) return -1;
    float *bf = wf + C;
    widen(wf, weight, p_dt, (size_t)C);
    if (bias) widen(bf, bias, p_dt, (size_t)C);
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
                sz_k_residual_layernorm_fwd(res + r, on, mean + n, rstd + n, a + r, b + r, wf, bias ? bf : NULL, 1, C);
            else
                sz_ln_row_fwd(on, mean + n, rstd + n, a + r, wf, bias ? bf : NULL, C);
            if (out_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)out + r, o, (size_t)C);
        }
        free(o);
    }
    free(wf);
    return fail ? -1 : 0;
}

int sz_k_layernorm_fwd_mx(void *out, sz_k_dtype out_dt, float *mean, float *rstd, const float *inp,
                           const void *weight, const void *bias, sz_k_dtype p_dt, int N, int C)
{
    return ln_fwd_mx(NULL, out, out_dt, mean, rstd, inp, NULL, weight, bias, p_dt, N, C);
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
    int par = (size_t)N * C >= SZ_PAR_MIN, sd = set & SZ_K_SET_DINP;
    float *wf = malloc((size_t)C * sizeof *wf);
    if (!wf) return -1;
    widen(wf, weight, p_dt, (size_t)C);
    int fail = 0;
#pragma omp parallel if (par) reduction(| : fail)
    {
        float *d = malloc((size_t)C * sizeof *d); /* this thread's row of dout, widened */
        if (!d) fail = 1;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (!d) continue;
            const float *x = inp + (size_t)n * C;
            float *di = dinp + (size_t)n * C;
            widen(d, (const char *)dout + (size_t)n * C * (dout_dt == SZ_K_BF16 ? 2 : 4), dout_dt, (size_t)C);
            sz_ln_row_bwd(di, d, x, wf, mean[n], rstd[n], C, sd);
        }
        free(d);
    }
    free(wf);
    if (fail) return -1; /* only dinp was touched, and only when some thread had its row */
    sz_ln_params_bwd(dweight, dbias, dout, dout_dt, inp, mean, rstd, N, C, par);
    return 0;
}

/* ---- GELU (gelu.c's formula) ---- */

void sz_k_gelu_fwd_mx(void *out, sz_k_dtype out_dt, const float *inp, size_t n)
{
    const float s = SZ_GELU_SCALE;
    if (out_dt != SZ_K_BF16) {
        sz_k_gelu_fwd(out, inp, n);
        return;
    }
    uint16_t *o = out;
#pragma omp parallel for simd schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        o[i] = sz_f32_to_bf16_1(sz_gelu_1(inp[i], s));
    }
}

void sz_k_gelu_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                      size_t n)
{
    sz_k_gelu_bwd_mx_set(dinp, dinp_dt, inp, dout, dout_dt, n, 0);
}

void sz_k_gelu_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                          size_t n, int set)
{
    const float s = SZ_GELU_SCALE;
    if (set & SZ_K_SET_DINP) {
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            stx(dinp, dinp_dt, i, sz_gelu_grad_1(inp[i], s) * ldx(dout, dout_dt, i));
        }
        return;
    }
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        accx(dinp, dinp_dt, i, sz_gelu_grad_1(inp[i], s) * ldx(dout, dout_dt, i));
    }
}

/* ---- residual backward: da += dout, db += dout (set: da = dout, db = dout) ---- */

void sz_k_residual_bwd_mx(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const float *dout, size_t n)
{
    sz_k_residual_bwd_mx_set(da, da_dt, db, db_dt, dout, n, 0);
}

void sz_k_residual_bwd_mx_set(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const float *dout, size_t n,
                              int set)
{
    int sa = set & SZ_K_SET_A, sb = set & SZ_K_SET_B;
#pragma omp parallel for schedule(static) if (n >= SZ_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        if (sa) stx(da, da_dt, i, dout[i]);
        else accx(da, da_dt, i, dout[i]);
        if (sb) stx(db, db_dt, i, dout[i]);
        else accx(db, db_dt, i, dout[i]);
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

void sz_k_encoder_fwd_mx(float *out, const int *tok, const void *wte, const void *wpe, sz_k_dtype p_dt,
                         int B, int T, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        size_t we = (size_t)tok[bt] * C, pe = (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) o[c] = ldx(wte, p_dt, we + c) + ldx(wpe, p_dt, pe + c);
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
    return ln_fwd_mx(res, out, out_dt, mean, rstd, a, b, weight, bias, p_dt, N, C);
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
    float *wf = malloc((size_t)C * sizeof *wf);
    if (!wf) return -1;
    widen(wf, weight, p_dt, (size_t)C);
    int fail = 0;
    size_t es = dout_dt == SZ_K_BF16 ? 2 : 4, eb = db_dt == SZ_K_BF16 ? 2 : 4;
#pragma omp parallel if ((size_t)N * C >= SZ_PAR_MIN) reduction(| : fail)
    {
        /* this thread's rows of dout and db widened, and a sink for the row's parameter gradients
         * (they are summed below, by column blocks in row order) */
        float *d = malloc(4 * (size_t)C * sizeof *d), *dbr = d ? d + C : NULL, *junk = d ? d + 2 * C : NULL;
        if (!d) fail = 1;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (!d) continue;
            size_t r = (size_t)n * C;
            widen(d, (const char *)dout + r * es, dout_dt, (size_t)C);
            if (!(set & SZ_K_SET_B)) /* set: the row is written whole */
                widen(dbr, (char *)db + r * eb, db_dt, (size_t)C);
            memset(junk, 0, 2 * (size_t)C * sizeof *junk);
            sz_k_layernorm_residual_bwd_set(da + r, dbr, dres + r, junk, junk + C, d, res + r, wf, mean + n,
                                            rstd + n, 1, C, set);
            if (db_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)db + r, dbr, (size_t)C);
            else memcpy((float *)db + r, dbr, (size_t)C * sizeof *dbr);
        }
        free(d);
    }
    free(wf);
    if (fail) return -1;
    sz_ln_params_bwd(dweight, dbias, dout, dout_dt, res, mean, rstd, N, C, (size_t)N * C >= SZ_PAR_MIN);
    return 0;
}

int sz_k_softmax_xent_fused_mx(void *logits, sz_k_dtype dt, float *losses, const int *targets, float g, int N, int V,
                               int Vp)
{
    if (dt != SZ_K_BF16) {
        sz_k_softmax_xent_fused(logits, losses, targets, g, N, V, Vp);
        return 0;
    }
    int fail = 0;
#pragma omp parallel if ((size_t)N * Vp >= SZ_PAR_MIN) reduction(| : fail)
    {
        float *row = malloc((size_t)Vp * sizeof *row);
        if (!row) fail = 1;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (!row) continue;
            uint16_t *l = (uint16_t *)logits + (size_t)n * Vp;
            sz_k_bf16_to_f32(row, l, (size_t)Vp);
            sz_k_softmax_xent_fused(row, losses + n, targets + n, g, 1, V, Vp);
            sz_k_f32_to_bf16(l, row, (size_t)Vp);
        }
        free(row);
    }
    return fail ? -1 : 0;
}

/* ---- the LLaMA-style model's ops (rmsnorm.c, rope.c, embedding.c): the fp32 row math of
 * sz_kernels_impl.h (sz_rms_row_*, sz_rope_row_bwd) on widened rows ---- */

/* res NULL: rmsnorm(a) (sz_rms_row_fwd); else res = a + b and rmsnorm(res) (sz_k_residual_rmsnorm_fwd,
 * row by row); a bf16 out is the fp32 row rounded. */
static int rms_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *rstd, const float *a, const float *b,
                      const void *weight, sz_k_dtype p_dt, int N, int C, float eps)
{
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
            if (out_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)out + r, o, (size_t)C);
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
                if (db_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)db + r, dbr, (size_t)C);
                else memcpy((float *)db + r, dbr, (size_t)C * sizeof *dbr);
            }
            free(d);
        }
    }
    free(wf);
    if (fail) return -1; /* only the input gradients were touched, and only where a thread had its rows */
    if (dweight) sz_rms_weight_bwd(dweight, dout, dout_dt, inp, rstd, N, C, par);
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
                      set & SZ_K_SET_DINP);
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
            if (dinp_dt == SZ_K_BF16) sz_k_f32_to_bf16((uint16_t *)dinp + r, row, (size_t)C3);
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
