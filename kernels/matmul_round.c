/* matmul_round.c — the linear layer's parameter gradients written straight into bf16 gradients
 * (mixed precision's rounding folded into their one writer, issue 16): dweight[OC,C] = dout^T . inp
 * and dbias[OC] = the column sums of dout, computed in fp32 exactly as the first writer's kernels
 * compute them (sz_k_matmul_bwd_set / sz_k_matmul_bwd_bf16_set with SZ_K_SET_DW | SZ_K_SET_DB: the
 * same tiles, shapes and primitives), then rounded once into the bf16 destinations with a
 * GRAD_CONVERT's elementwise rule (SZ_K_CONVERT_SET bf16(g), _ONTO_ZEROS bf16(0 + g), _ADD
 * bf16(old + g)). So the bits equal that kernel into an fp32 buffer followed by sz_k_convert, without
 * the full fp32 gradient: dweight goes through a per-call fp32 panel of whole tile rows (the tiled
 * product cuts d into fixed SZ_MM_TM x SZ_MM_TN tiles from its row 0; a panel of whole tile rows,
 * same row stride C, gives every tile the same shape, operands and primitive), each tile rounded
 * by its own thread right after its product (an sz_mm_epi hook), while it is in the cache.
 * A tied embedding's dweight (sz_k_matmul_dweight_round_rows) leaves the rows a later writer adds
 * into (the tokens' rows, for the encoder's backward) in fp32 instead: the tile copies them out. */
#include <omp.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

/* matmul.c's tile of d (same defaults, same override): a panel starts on a tile row */
#ifndef SZ_MM_TM
#define SZ_MM_TM 256
#endif
#ifndef SZ_MM_TN
#define SZ_MM_TN 384
#endif


/* Rows per panel: whole tile rows, about SZ_MMR_PANEL_BYTES of fp32 (fewer parallel regions: each
 * costs a fork and a barrier), at least enough tiles for every thread, at most all of dweight. */
#define SZ_MMR_PANEL_BYTES (4u << 20)
static int64_t panel_rows(int64_t OC, int64_t C)
{
    int64_t nn = (C + SZ_MM_TN - 1) / SZ_MM_TN, nthr = omp_get_max_threads();
    int64_t need = (nthr + nn - 1) / nn, fit = (int64_t)SZ_MMR_PANEL_BYTES / ((int64_t)SZ_MM_TM * C * 4);
    int64_t k = fit > need ? fit : need;
    int64_t rows = (k < 1 ? 1 : k) * SZ_MM_TM;
    return rows < OC ? rows : OC;
}

size_t sz_k_matmul_dparams_round_bytes(int C, int OC)
{
    return (size_t)panel_rows(OC, C) * (size_t)C * sizeof(float) + (size_t)OC * sizeof(float);
}

/* The tile hook: the tile's fp32 values (rows i0.., columns j0.. of the panel) rounded into
 * dweight on the tile's thread, right after its product, with sz_k_convert's element rule. */
struct round_ctx {
    const float *panel;
    uint16_t *dst;   /* dweight's row r0 */
    int64_t C;
    int mode;
    const int32_t *slot; /* NULL, or from row r0: >= 0 keeps that row in fp32 as rows[slot] */
    float *rows;
};

static void round_tile(const sz_mm_epi *e, int64_t i0, int64_t j0, int64_t m, int64_t n)
{
    const struct round_ctx *c = e->ctx;
    for (int64_t i = i0; i < i0 + m; i++) {
        const float *s = c->panel + i * c->C + j0;
        uint16_t *d = c->dst + i * c->C + j0;
        if (c->slot && c->slot[i] >= 0)
            memcpy(c->rows + (int64_t)c->slot[i] * c->C + j0, s, (size_t)n * sizeof *s);
        else if (c->mode == SZ_K_CONVERT_ADD) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) d[j] = sz_f32_to_bf16_1(sz_bf16_to_f32_1(d[j]) + s[j]);
        } else if (c->mode == SZ_K_CONVERT_ONTO_ZEROS) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) d[j] = sz_f32_to_bf16_1(0.0f + s[j]);
        } else {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) d[j] = sz_f32_to_bf16_1(s[j]);
        }
    }
}

static int dparams_round(uint16_t *dweight, uint16_t *dbias, const int32_t *slot, float *keep, const void *dout,
                         const void *inp, sz_k_dtype in_dt, int N, int C, int OC, int mode)
{
    if (N < 1 || C < 1 || OC < 1 || (in_dt != SZ_K_F32 && in_dt != SZ_K_BF16)) return -2;
    if (!dweight && !dbias) return 0;
    size_t es = in_dt == SZ_K_BF16 ? 2 : 4;
    int64_t rows = panel_rows(OC, C);
    size_t bytes = sz_k_matmul_dparams_round_bytes(C, OC);
    float *panel = malloc(bytes);
    if (!panel) return -1;
    sz_mm_count((int64_t)bytes);
    int rc = 0;
    for (int64_t r0 = 0; dweight && r0 < OC; r0 += rows) {
        int64_t m = OC - r0 < rows ? OC - r0 : rows;
        /* rows r0..r0+m of dweight[OC,C] = (dout[N,OC] viewed as [OC,N]) . inp[N,C], no sum
         * post-op: the shape sz_k_matmul_bwd_set / _bf16_set give, M cut to the panel */
        sz_mm_shape s;
        memset(&s, 0, sizeof s);
        s.M = m; s.N = C; s.K = N;
        s.a_dt = s.b_dt = in_dt;
        s.d_dt = SZ_K_F32;
        s.bias_dt = -1;
        s.a_sm = 1; s.a_sk = OC; s.b_sk = C; s.b_sn = 1; s.ldd = C; s.accumulate = 0;
        const void *a = (const char *)dout + (size_t)r0 * es;
        struct round_ctx ctx = {panel, dweight + (size_t)r0 * C, C, mode, slot ? slot + r0 : NULL, keep};
        sz_mm_epi epi = {NULL, round_tile, &ctx};
        int r = in_dt == SZ_K_BF16 ? sz_mm_bf16_epi(&s, panel, a, inp, NULL, &epi)
                                   : sz_mm_tiled_epi(&s, panel, a, inp, NULL, &epi);
        if (r < 0) { rc = r; break; }
        rc |= r;
    }
    if (rc >= 0 && dbias) { /* the first writer's sums: from 0, rows in order */
        float *db = panel + (size_t)rows * C;
        memset(db, 0, (size_t)OC * sizeof *db);
        sz_mm_colsum(db, SZ_K_F32, dout, in_dt, N, OC);
        sz_k_convert(dbias, SZ_K_BF16, db, SZ_K_F32, (size_t)OC, mode);
    }
    sz_mm_count(-(int64_t)bytes);
    free(panel);
    return rc;
}

int sz_k_matmul_dparams_round(uint16_t *dweight, uint16_t *dbias, const void *dout, const void *inp,
                              sz_k_dtype in_dt, int N, int C, int OC, int mode)
{
    return dparams_round(dweight, dbias, NULL, NULL, dout, inp, in_dt, N, C, OC, mode);
}

int sz_k_matmul_dweight_round_rows(uint16_t *dweight, float *rows, const int32_t *slot, const void *dout,
                                   const void *inp, sz_k_dtype in_dt, int N, int C, int OC, int mode)
{
    if (!dweight || !rows || !slot) return -2;
    return dparams_round(dweight, NULL, slot, rows, dout, inp, in_dt, N, C, OC, mode);
}
