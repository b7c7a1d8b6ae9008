/* matmul_gelu.c — the linear layer fused with the GELU around it (GPT-2's MLP), on the fixed
 * tiles of matmul.c / matmul_bf16.c through their per-tile hooks (sz_mm_epi):
 *   forward:  out = inp . weight^T + bias, then gout = gelu(out) on each output tile right after
 *             the tile's product, while it is in cache (the fc layer: fch, fch_gelu);
 *   backward: the input gradient of a linear layer whose input was gelu(pre), with GELU's
 *             backward applied to each tile of it right after the tile's product:
 *             dinp = gelu'(pre) * (dout . weight), so the product (GPT-2's dfch_gelu) is never
 *             a tensor of its own (the fc projection: dfch from dfcproj); dweight, dbias as
 *             sz_k_matmul_bwd.
 * The bits are those of the separate kernels, by construction: the same shapes (sz_mm_shape_fwd,
 * sz_mm_shape_dinp), hence the same tiles and oneDNN primitives, and GELU through gelu.c's
 * formula (sz_gelu_1, sz_gelu_grad_1: llm.c's tanh form, not oneDNN's gelu_tanh post-op, whose
 * bits differ). The backward's product is accumulated, as sz_k_matmul_bwd's, into its tile of
 * dinp zeroed just before (the separate ops zero dfch_gelu and dfch), and GELU's backward is added
 * to an explicit +0.0f (as gelu_bwd adds into the zeroed dfch): so -0.0 becomes +0.0 exactly where
 * it did. tests/test_kernels.c checks both against the separate kernels bitwise. */
#include <string.h>
#include "sz_kernels_impl.h"

/* ---- forward: gout's tile = gelu(out's tile) ---- */

typedef struct {
    const float *out;
    void *gout;
    int gout_dt;
    int64_t ld;   /* row stride of out and gout (OC) */
} sz_gelu_fwd_ctx;

static void sz_gelu_fwd_tile(const sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n)
{
    const sz_gelu_fwd_ctx *c = e->ctx;
    const float s = SZ_GELU_SCALE;
    for (int64_t i = i0; i < i0 + m; i++) {
        const float *x = c->out + i * c->ld + j0;
        if (c->gout_dt == SZ_K_BF16) {
            uint16_t *o = (uint16_t *)c->gout + i * c->ld + j0;
#if SZ_BF16_HW_ROUND
            sz_gelu_row_bf16(o, x, (size_t)n); /* the same bits, rounded in registers */
#else
#pragma omp simd
            for (int64_t j = 0; j < n; j++) o[j] = sz_f32_to_bf16_1(sz_gelu_1(x[j], s));
#endif
        } else {
            float *o = (float *)c->gout + i * c->ld + j0;
#pragma omp simd
            for (int64_t j = 0; j < n; j++) o[j] = sz_gelu_1(x[j], s);
        }
    }
}

/* The operand types the fused kernels take: all fp32, all bf16, or fp32 with bf16 weights. */
static int sz_mg_types_ok(sz_k_dtype in_dt, sz_k_dtype w_dt)
{
    return w_dt == in_dt || (in_dt == SZ_K_F32 && w_dt == SZ_K_BF16);
}

int sz_k_matmul_gelu_fwd(float *out, void *gout, sz_k_dtype gout_dt, const void *inp, const void *weight,
                         const void *bias, sz_k_dtype in_dt, sz_k_dtype w_dt, int N, int C, int OC)
{
    sz_mm_shape s;
    if (!sz_mg_types_ok(in_dt, w_dt)) return -2;
    sz_mm_shape_fwd(&s, N, C, OC, in_dt, SZ_K_F32, bias != NULL);
    sz_mm_shape_weights(&s, w_dt);
    sz_gelu_fwd_ctx c = { out, gout, gout_dt, OC };
    sz_mm_epi e = { NULL, sz_gelu_fwd_tile, &c };
    if (in_dt == SZ_K_BF16) return sz_mm_bf16_epi(&s, out, inp, weight, bias, &e);
    return sz_mm_tiled_epi(&s, out, inp, weight, bias, &e);
}

/* ---- backward: dinp's tile zeroed, accumulated into, then gelu'(pre) * itself ---- */

typedef struct {
    void *dinp;
    int dinp_dt;
    const float *pre;
    int64_t ld;   /* row stride of dinp and pre (C) */
} sz_gelu_bwd_ctx;

static void sz_gelu_bwd_zero(const sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n)
{
    const sz_gelu_bwd_ctx *c = e->ctx;
    size_t es = c->dinp_dt == SZ_K_BF16 ? 2 : 4;
    for (int64_t i = i0; i < i0 + m; i++) memset((char *)c->dinp + (size_t)(i * c->ld + j0) * es, 0, (size_t)n * es);
}

/* pre's rows of a tile come from memory in short pieces (n floats, C apart), which the hardware
 * prefetchers start late on: each row asks for the one SZ_GELU_PF rows ahead (measured, one thread,
 * d12's fc projection at N = 4096: fused fp32 212 / 209 ms against 221 / 228 without, bf16 130 / 128
 * against 140 / 137; no change at N = 256, where everything is in the L3) */
#define SZ_GELU_PF 4

static void sz_gelu_bwd_tile(const sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n)
{
    const sz_gelu_bwd_ctx *c = e->ctx;
    const float s = SZ_GELU_SCALE;
    for (int64_t i = i0; i < i0 + m; i++) {
        const float *x = c->pre + i * c->ld + j0;
        if (i + SZ_GELU_PF < i0 + m)
            for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(x + SZ_GELU_PF * c->ld + j, 0, 3);
        if (c->dinp_dt == SZ_K_BF16) { /* as sz_k_gelu_bwd_mx into a zeroed bf16 dinp */
            uint16_t *d = (uint16_t *)c->dinp + i * c->ld + j0;
#if SZ_BF16_HW_ROUND
            sz_gelu_bwd_row16(d, SZ_K_BF16, x, d, SZ_K_BF16, (size_t)n, 2); /* in place, onto +0 */
#else
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                d[j] = sz_f32_to_bf16_1(0.0f + sz_gelu_grad_1(x[j], s) * sz_bf16_to_f32_1(d[j]));
#endif
        } else { /* as sz_k_gelu_bwd into a zeroed dinp */
            float *d = (float *)c->dinp + i * c->ld + j0;
#pragma omp simd
            for (int64_t j = 0; j < n; j++) d[j] = 0.0f + sz_gelu_grad_1(x[j], s) * d[j];
        }
    }
}

int sz_k_gelu_matmul_bwd(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias, sz_k_dtype dparam_dt,
                         const void *dout, const void *inp, const void *weight, const float *pre, sz_k_dtype in_dt,
                         sz_k_dtype w_dt, int N, int C, int OC)
{
    return sz_k_gelu_matmul_bwd_set(dinp, dinp_dt, dweight, dbias, dparam_dt, dout, inp, weight, pre, in_dt, w_dt, N,
                                    C, OC, 0);
}

int sz_k_gelu_matmul_bwd_set(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias, sz_k_dtype dparam_dt,
                             const void *dout, const void *inp, const void *weight, const float *pre,
                             sz_k_dtype in_dt, sz_k_dtype w_dt, int N, int C, int OC, int set)
{
    set &= SZ_K_SET_DW | SZ_K_SET_DB; /* dinp is always written (the GELU's epilogue) */
    int rc = 0, r;
    if (!sz_mg_types_ok(in_dt, w_dt)) return -2;
    if (dinp) {
        sz_mm_shape s;
        sz_mm_shape_dinp(&s, N, C, OC, in_dt, in_dt == SZ_K_BF16 ? dinp_dt : SZ_K_F32);
        sz_mm_shape_weights(&s, w_dt);
        sz_gelu_bwd_ctx c = { dinp, s.d_dt, pre, C };
        sz_mm_epi e = { sz_gelu_bwd_zero, sz_gelu_bwd_tile, &c };
        r = in_dt == SZ_K_BF16 ? sz_mm_bf16_epi(&s, dinp, dout, weight, NULL, &e)
                               : sz_mm_tiled_epi(&s, dinp, dout, weight, NULL, &e);
        if (r < 0) return r;
        rc |= r;
    }
    if (dweight || dbias) {
        r = in_dt == SZ_K_BF16 ? sz_k_matmul_bwd_bf16_set(NULL, SZ_K_F32, dweight, dbias, dparam_dt, dout, inp, weight,
                                                          N, C, OC, set)
                               : sz_k_matmul_bwd_set(NULL, dweight, dbias, dout, inp, weight, N, C, OC, set);
        if (r < 0) return r;
        rc |= r;
    }
    return rc;
}
