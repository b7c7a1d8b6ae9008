/* test_fold_zero.c — the first writers: a pending sz_op_zero folded into the op that next writes the
 * tensor (core/fold.c, core/task.c). Suite "first-writer kernels" (no StarPU): every _set
 * kernel (sz_kernels.h: GPT-2's and the LLaMA-style model's) writes, into a destination full of NaNs it must not read, bitwise what the
 * accumulating kernel gives on a zeroed one (a -0.0 there may read +0.0 here: 0.0f + -0.0f), at GPT-2
 * 124M's shapes for the matmul (fp32; bf16 natively where oneDNN has the tiles, and widened), while
 * the gradients they still accumulate into are unchanged. Suite "folding as tasks": a small model
 * whose backward zeroes tensors and then folds (gelu_bwd, matmul_bwd), or must not (a read, the same
 * tensor twice in one task, a partial view, nothing at all before the callback ends), gives bitwise
 * the values of SZ_ZERO_FOLD=0 with the expected numbers of folded and submitted zeroings, and its
 * tasks depend only on what the plan's waits say (tasks/depcheck.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "sz_kernels.h"
#include "sz_tasks.h"
#include "sz_codelets.h"
#include "sz_test.h"

/* ---------------------------------------------------------------- helpers */

static uint32_t rng_state = 12345u;
static float urand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static float *rnd(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = urand() * scale;
    return p;
}
static uint16_t *rnd16(size_t n, float scale)
{
    uint16_t *p = malloc(n * sizeof *p);
    float *f = rnd(n, scale);
    sz_k_f32_to_bf16(p, f, n);
    free(f);
    return p;
}
static void *nans(size_t bytes)
{
    void *p = malloc(bytes);
    memset(p, 0xff, bytes); /* all-ones: a NaN in fp32 and in bf16 */
    return p;
}

/* want: the accumulating kernel's on zeros; got: the setting kernel's. Equal bits, except that where
 * want is +0.0 got may be -0.0. Returns 1 when so; prints the first difference. */
static int same_up_to_zero_sign(const char *what, const void *got, const void *want, size_t n, int bf16)
{
    size_t signs = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t g = bf16 ? ((const uint16_t *)got)[i] : ((const uint32_t *)got)[i];
        uint32_t w = bf16 ? ((const uint16_t *)want)[i] : ((const uint32_t *)want)[i];
        uint32_t negzero = bf16 ? 0x8000u : 0x80000000u;
        if (g == w)
            continue;
        if (w == 0 && g == negzero) {
            signs++;
            continue;
        }
        printf("\n  %s: element %zu of %zu: got 0x%x, want 0x%x\n", what, i, n, (unsigned)g, (unsigned)w);
        return 0;
    }
    if (signs)
        printf("\n  %s: %zu zeros of sign -\n", what, signs);
    return 1;
}

/* ---------------------------------------------------------------- the kernels */

/* fp32 matmul_bwd at the shapes of one GPT-2 124M block (N = B*T = 256): dinp set = dinp on zeros. */
static void test_matmul_f32(void)
{
    const int shapes[][3] = {{256, 768, 2304}, {256, 768, 768}, {256, 768, 3072}, {256, 3072, 768}, {7, 5, 3}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int N = shapes[k][0], C = shapes[k][1], OC = shapes[k][2];
        size_t nc = (size_t)N * C, oc = (size_t)OC * C;
        float *dout = rnd((size_t)N * OC, 0.1f), *inp = rnd(nc, 1.0f), *w = rnd(oc, 0.05f);
        float *want = calloc(nc, 4), *got = nans(nc * 4);
        float *dw0 = rnd(oc, 0.01f), *dw1 = malloc(oc * 4), *db0 = rnd(OC, 0.01f), *db1 = malloc(OC * 4);
        memcpy(dw1, dw0, oc * 4);
        memcpy(db1, db0, OC * 4);
        CU_ASSERT(sz_k_matmul_bwd(want, dw0, db0, dout, inp, w, N, C, OC) >= 0);
        CU_ASSERT(sz_k_matmul_bwd_set(got, dw1, db1, dout, inp, w, N, C, OC, SZ_K_SET_DINP) >= 0);
        char what[64];
        snprintf(what, sizeof what, "matmul_bwd dinp %dx%dx%d", N, C, OC);
        CU_ASSERT(same_up_to_zero_sign(what, got, want, nc, 0));
        CU_ASSERT(memcmp(dw0, dw1, oc * 4) == 0); /* still accumulated, the same */
        CU_ASSERT(memcmp(db0, db1, OC * 4) == 0);
        /* the step's first writer of the parameters' gradients: dweight and dbias set (and
         * gelu_matmul_bwd's, whose dinp is written anyway) */
        float *dwz = calloc(oc, 4), *dbz = calloc(OC, 4), *dwn = nans(oc * 4), *dbn = nans(OC * 4);
        CU_ASSERT(sz_k_matmul_bwd(NULL, dwz, dbz, dout, inp, w, N, C, OC) >= 0);
        CU_ASSERT(sz_k_matmul_bwd_set(NULL, dwn, dbn, dout, inp, w, N, C, OC, SZ_K_SET_DW | SZ_K_SET_DB) >= 0);
        snprintf(what, sizeof what, "matmul_bwd dweight %dx%dx%d", N, C, OC);
        CU_ASSERT(same_up_to_zero_sign(what, dwn, dwz, oc, 0));
        CU_ASSERT(memcmp(dbn, dbz, OC * 4) == 0); /* the column sums start at +0 either way */
        float *pre = rnd(nc, 1.0f), *gin = malloc(nc * 4), *d0 = malloc(nc * 4), *d1 = malloc(nc * 4);
        sz_k_gelu_fwd(gin, pre, nc);
        memset(dwz, 0, oc * 4), memset(dbz, 0, OC * 4), memset(dwn, 0xff, oc * 4), memset(dbn, 0xff, OC * 4);
        CU_ASSERT(sz_k_gelu_matmul_bwd(d0, SZ_K_F32, dwz, dbz, SZ_K_F32, dout, gin, w, pre, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
        CU_ASSERT(sz_k_gelu_matmul_bwd_set(d1, SZ_K_F32, dwn, dbn, SZ_K_F32, dout, gin, w, pre, SZ_K_F32, SZ_K_F32, N, C, OC,
                                           SZ_K_SET_DW | SZ_K_SET_DB) >= 0);
        CU_ASSERT(memcmp(d0, d1, nc * 4) == 0);
        CU_ASSERT(same_up_to_zero_sign("gelu_matmul_bwd dweight", dwn, dwz, oc, 0));
        CU_ASSERT(memcmp(dbn, dbz, OC * 4) == 0);
        free(dwz); free(dbz); free(dwn); free(dbn); free(pre); free(gin); free(d0); free(d1);
        free(dout); free(inp); free(w); free(want); free(got); free(dw0); free(dw1); free(db0); free(db1);
    }
}

/* bf16 operands, fp32 and bf16 dinp, oneDNN's bf16 tiles (where the CPU has them) and the widening path. */
static void test_matmul_bf16(void)
{
    const int shapes[][3] = {{256, 768, 3072}, {256, 3072, 768}, {9, 16, 5}};
    const char *paths[] = {"1", "0"};
    for (int pth = 0; pth < 2; pth++) {
        sz_k_set_bf16_tiles(paths[pth][0] == '1');
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int dt = 0; dt < 2; dt++) {
                int N = shapes[k][0], C = shapes[k][1], OC = shapes[k][2];
                size_t nc = (size_t)N * C, es = dt ? 2 : 4;
                uint16_t *dout = rnd16((size_t)N * OC, 0.1f), *inp = rnd16(nc, 1.0f), *w = rnd16((size_t)OC * C, 0.05f);
                void *want = calloc(nc, es), *got = nans(nc * es);
                CU_ASSERT(sz_k_matmul_bwd_bf16(want, (sz_k_dtype)dt, NULL, NULL, SZ_K_F32, dout, inp, w, N, C, OC) >= 0);
                CU_ASSERT(sz_k_matmul_bwd_bf16_set(got, (sz_k_dtype)dt, NULL, NULL, SZ_K_F32, dout, inp, w, N, C, OC,
                                                   SZ_K_SET_DINP) >= 0);
                char what[80];
                snprintf(what, sizeof what, "matmul_bwd_bf16 dinp %s %dx%dx%d (bf16 tiles %s)", dt ? "bf16" : "f32",
                         N, C, OC, paths[pth]);
                CU_ASSERT(same_up_to_zero_sign(what, got, want, nc, dt));
                /* dweight, dbias of type dt set (the first writer of a step) */
                size_t oc = (size_t)OC * C;
                void *dwz = calloc(oc, es), *dbz = calloc(OC, es), *dwn = nans(oc * es), *dbn = nans(OC * es);
                CU_ASSERT(sz_k_matmul_bwd_bf16(NULL, SZ_K_F32, dwz, dbz, (sz_k_dtype)dt, dout, inp, w, N, C, OC) >= 0);
                CU_ASSERT(sz_k_matmul_bwd_bf16_set(NULL, SZ_K_F32, dwn, dbn, (sz_k_dtype)dt, dout, inp, w, N, C, OC,
                                                   SZ_K_SET_DW | SZ_K_SET_DB) >= 0);
                snprintf(what, sizeof what, "matmul_bwd_bf16 dweight %s %dx%dx%d (bf16 tiles %s)",
                         dt ? "bf16" : "f32", N, C, OC, paths[pth]);
                CU_ASSERT(same_up_to_zero_sign(what, dwn, dwz, oc, dt));
                CU_ASSERT(memcmp(dbn, dbz, OC * es) == 0);
                free(dwz); free(dbz); free(dwn); free(dbn);
                free(dout); free(inp); free(w); free(want); free(got);
            }
    }
    sz_k_set_bf16_tiles(1);
}

/* Mixed precision's gradient rounding folded into the linear layer's parameter-gradient writer:
 * sz_k_matmul_dparams_round equals the first writer's fp32 dweight / dbias followed by the
 * GRAD_CONVERT's sz_k_convert, bit for bit, in every mode (ADD onto a random bf16 gradient), fp32
 * and bf16 inputs (oneDNN's bf16 tiles and the widening path), panels cut mid-matrix (OC > 256)
 * and ragged shapes; -0 contributions included (dout rows of zeros). */
static void test_matmul_round(void)
{
    const int shapes[][3] = {{256, 768, 2304}, {256, 3072, 768}, {64, 768, 3072}, {7, 5, 3}, {33, 400, 513}};
    const char *paths[] = {"1", "0"};
    for (int dt = 0; dt < 2; dt++)
        for (int pth = 0; pth < (dt ? 2 : 1); pth++) {
            sz_k_set_bf16_tiles(paths[pth][0] == '1');
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
                int N = shapes[k][0], C = shapes[k][1], OC = shapes[k][2];
                size_t nc = (size_t)N * C, no = (size_t)N * OC, oc = (size_t)OC * C;
                void *dout, *inp;
                if (dt) {
                    dout = rnd16(no, 0.1f), inp = rnd16(nc, 1.0f);
                    memset(dout, 0, (size_t)OC * 2); /* a row of zeros: -0 / +0 sums where inp < 0 */
                } else {
                    dout = rnd(no, 0.1f), inp = rnd(nc, 1.0f);
                    memset(dout, 0, (size_t)OC * 4);
                }
                float *dw32 = nans(oc * 4), *db32 = nans((size_t)OC * 4);
                int r = dt ? sz_k_matmul_bwd_bf16_set(NULL, SZ_K_F32, dw32, db32, SZ_K_F32, dout, inp, NULL, N, C, OC,
                                                      SZ_K_SET_DW | SZ_K_SET_DB)
                           : sz_k_matmul_bwd_set(NULL, dw32, db32, dout, inp, NULL, N, C, OC, SZ_K_SET_DW | SZ_K_SET_DB);
                CU_ASSERT(r >= 0);
                uint16_t *old_w = rnd16(oc, 0.01f), *old_b = rnd16((size_t)OC, 0.01f);
                for (int mode = 0; mode < 3; mode++) {
                    uint16_t *ww = malloc(oc * 2), *wb = malloc((size_t)OC * 2), *gw = malloc(oc * 2),
                             *gb = malloc((size_t)OC * 2);
                    memcpy(ww, old_w, oc * 2), memcpy(gw, old_w, oc * 2);
                    memcpy(wb, old_b, (size_t)OC * 2), memcpy(gb, old_b, (size_t)OC * 2);
                    if (mode != SZ_K_CONVERT_ADD) { /* written whole: what was there must not matter */
                        memset(gw, 0xff, oc * 2);
                        memset(gb, 0xff, (size_t)OC * 2);
                    }
                    sz_k_convert(ww, SZ_K_BF16, dw32, SZ_K_F32, oc, mode);
                    sz_k_convert(wb, SZ_K_BF16, db32, SZ_K_F32, (size_t)OC, mode);
                    CU_ASSERT(sz_k_matmul_dparams_round(gw, gb, dout, inp, dt ? SZ_K_BF16 : SZ_K_F32, N, C, OC, mode) >= 0);
                    int okw = memcmp(gw, ww, oc * 2) == 0, okb = memcmp(gb, wb, (size_t)OC * 2) == 0;
                    if (!okw || !okb)
                        fprintf(stderr, "matmul_dparams_round %s %dx%dx%d mode %d (bf16 tiles %s): dweight %s, dbias %s\n",
                                dt ? "bf16" : "f32", N, C, OC, mode, paths[pth], okw ? "equal" : "DIFFERS",
                                okb ? "equal" : "DIFFERS");
                    CU_ASSERT(okw && okb);
                    /* dweight alone, dbias alone */
                    memset(gw, 0, oc * 2);
                    CU_ASSERT(sz_k_matmul_dparams_round(gw, NULL, dout, inp, dt ? SZ_K_BF16 : SZ_K_F32, N, C, OC,
                                                        SZ_K_CONVERT_ONTO_ZEROS) >= 0);
                    sz_k_convert(ww, SZ_K_BF16, dw32, SZ_K_F32, oc, SZ_K_CONVERT_ONTO_ZEROS);
                    CU_ASSERT(memcmp(gw, ww, oc * 2) == 0);
                    CU_ASSERT(sz_k_matmul_dparams_round(NULL, gb, dout, inp, dt ? SZ_K_BF16 : SZ_K_F32, N, C, OC,
                                                        SZ_K_CONVERT_SET) >= 0);
                    sz_k_convert(wb, SZ_K_BF16, db32, SZ_K_F32, (size_t)OC, SZ_K_CONVERT_SET);
                    CU_ASSERT(memcmp(gb, wb, (size_t)OC * 2) == 0);
                    free(ww); free(wb); free(gw); free(gb);
                }
                free(old_w); free(old_b); free(dw32); free(db32); free(dout); free(inp);
            }
        }
    sz_k_set_bf16_tiles(1);
    uint16_t x = 0;
    float f = 0.0f;
    CU_ASSERT_EQUAL(sz_k_matmul_dparams_round(&x, NULL, &f, &f, (sz_k_dtype)7, 1, 1, 1, 0), -2); /* bad type */
    CU_ASSERT_EQUAL(sz_k_matmul_dparams_round(&x, NULL, &f, &f, SZ_K_F32, 0, 1, 1, 0), -2);       /* no rows */
}

/* The tied embedding's gradient rounded by its two writers: sz_k_matmul_dweight_round_rows (the lm
 * head) and sz_k_encoder_bwd_round (the embedding) give wte's and wpe's bf16 gradients equal, bit
 * for bit, to the fp32 first writer (sz_k_matmul_bwd_set / _bf16_set) plus sz_k_encoder_bwd
 * followed by the GRAD_CONVERT's sz_k_convert, in every mode (ADD onto random bf16 gradients):
 * tokens repeated, absent rows, ids spanning panels (V > 1280 rows at C = 768: several panels),
 * fp32 and bf16 inputs. The slots: distinct tokens ranked in ascending order. */
static void test_tied_round(void)
{
    const int shapes[][4] = {{2, 32, 96, 300}, {4, 64, 768, 2600}, {1, 7, 5, 3}};
    for (int dt = 0; dt < 2; dt++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            int B = shapes[k][0], T = shapes[k][1], C = shapes[k][2], V = shapes[k][3], N = B * T;
            size_t nc = (size_t)N * C, nv = (size_t)N * V, vc = (size_t)V * C, tc = (size_t)T * C;
            int *tok = malloc((size_t)N * sizeof *tok);
            for (int i = 0; i < N; i++) /* repeats, and a cluster at the last panel's rows */
                tok[i] = i % 3 == 0 ? V - 1 - i % 5 % V : (int)((urand() * 0.5f + 0.5f) * (float)(V - 1));
            void *dout = dt ? (void *)rnd16(nv, 0.1f) : (void *)rnd(nv, 0.1f);
            void *inp = dt ? (void *)rnd16(nc, 1.0f) : (void *)rnd(nc, 1.0f);
            float *edout = rnd(nc, 0.1f);
            /* the reference: fp32 gradients written by the head and the encoder, then converted */
            float *w32 = nans(vc * 4), *p32 = calloc(tc, sizeof *p32);
            int r = dt ? sz_k_matmul_bwd_bf16_set(NULL, SZ_K_F32, w32, NULL, SZ_K_F32, dout, inp, NULL, N, C, V,
                                                  SZ_K_SET_DW)
                       : sz_k_matmul_bwd_set(NULL, w32, NULL, dout, inp, NULL, N, C, V, SZ_K_SET_DW);
            CU_ASSERT(r >= 0);
            sz_k_encoder_bwd(w32, p32, edout, tok, B, T, C);
            int32_t *slot = malloc((size_t)V * sizeof *slot);
            int64_t nu = sz_k_token_slots(slot, V, tok, N), seen = 0;
            for (int v = 0; v < V; v++)
                if (slot[v] >= 0)
                    CU_ASSERT_EQUAL(slot[v], seen++);
            CU_ASSERT_EQUAL(nu, seen);
            uint16_t *old_w = rnd16(vc, 0.01f), *old_p = rnd16(tc, 0.01f);
            for (int mode = 0; mode < 3; mode++) {
                uint16_t *ww = malloc(vc * 2), *wp = malloc(tc * 2), *gw = malloc(vc * 2), *gp = malloc(tc * 2);
                memcpy(ww, old_w, vc * 2), memcpy(gw, old_w, vc * 2);
                memcpy(wp, old_p, tc * 2), memcpy(gp, old_p, tc * 2);
                if (mode != SZ_K_CONVERT_ADD) { /* written whole: what was there must not matter */
                    memset(gw, 0xff, vc * 2);
                    memset(gp, 0xff, tc * 2);
                }
                sz_k_convert(ww, SZ_K_BF16, w32, SZ_K_F32, vc, mode);
                sz_k_convert(wp, SZ_K_BF16, p32, SZ_K_F32, tc, mode);
                float *rows = nans((size_t)nu * C * 4), *pe32 = nans(tc * 4);
                CU_ASSERT(sz_k_matmul_dweight_round_rows(gw, rows, slot, dout, inp, dt ? SZ_K_BF16 : SZ_K_F32, N, C, V,
                                                         mode) >= 0);
                sz_k_encoder_bwd_round(gw, gp, rows, pe32, slot, V, edout, tok, B, T, C, mode, mode);
                int okw = memcmp(gw, ww, vc * 2) == 0, okp = memcmp(gp, wp, tc * 2) == 0;
                if (!okw || !okp)
                    fprintf(stderr, "tied rounding %s B=%d T=%d C=%d V=%d mode %d: dwte %s, dwpe %s\n",
                            dt ? "bf16" : "f32", B, T, C, V, mode, okw ? "equal" : "DIFFERS", okp ? "equal" : "DIFFERS");
                CU_ASSERT(okw && okp);
                free(ww); free(wp); free(gw); free(gp); free(rows); free(pe32);
            }
            CU_ASSERT_EQUAL(sz_k_matmul_dweight_round_rows(old_w, NULL, slot, dout, inp, SZ_K_F32, N, C, V, 0), -2);
            free(old_w); free(old_p); free(slot); free(w32); free(p32); free(edout); free(dout); free(inp); free(tok);
        }
}

/* An untied embedding's gradient rounded by its one writer: sz_k_embedding_bwd_round gives, bit for
 * bit, what sz_k_embedding_bwd onto a zeroed fp32 gradient followed by the GRAD_CONVERT's
 * sz_k_convert gives, in every mode (ADD onto random bf16 gradients holding -0 and a NaN too):
 * tokens repeated (more rows than the vocabulary), absent rows, -0 contributions (some elements, a
 * row of a token seen once, the rows of a token seen twice), C not a multiple of the column block;
 * a bad token writes nothing and returns its row. */
static void test_embedding_round(void)
{
    const int shapes[][3] = {{256, 96, 300}, {256, 770, 2600}, {512, 70, 40}, {7, 5, 3}, {1, 1, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int N = shapes[k][0], C = shapes[k][1], V = shapes[k][2];
        size_t nc = (size_t)N * C, vc = (size_t)V * C;
        int *tok = malloc((size_t)N * sizeof *tok);
        for (int i = 0; i < N; i++) /* repeats at the last rows, the rest in the lower half */
            tok[i] = i % 3 == 0 ? V - 1 - i % 5 % V : (int)((urand() * 0.5f + 0.5f) * 0.5f * (float)(V - 1));
        float *dout = rnd(nc, 0.1f);
        for (size_t i = 0; i < nc; i += 7) dout[i] = -0.0f;
        if (V >= 12) { /* token V / 2 + 1 only at row 1 and V / 2 + 2 only at rows 2 and 4, with -0 rows */
            for (int i = 0; i < N; i++)
                if (tok[i] > V / 2 && tok[i] < V - 5) tok[i] = 0;
            tok[1] = V / 2 + 1, tok[2] = tok[4] = V / 2 + 2;
            for (int c = 0; c < C; c++) dout[(size_t)C + c] = dout[2 * (size_t)C + c] = dout[4 * (size_t)C + c] = -0.0f;
        }
        float *w32 = calloc(vc, sizeof *w32); /* the reference: the fp32 gradient zeroed, added, converted */
        CU_ASSERT_EQUAL(sz_k_embedding_bwd(w32, dout, tok, N, C, V), -1);
        uint16_t *old = rnd16(vc, 0.01f);
        for (size_t i = 0; i < vc; i += 5) old[i] = 0x8000; /* -0, which ADD of +0 turns into +0 */
        old[vc / 2] = 0x7f81;                               /* a signalling NaN */
        int32_t *idx = malloc(sz_k_embedding_bwd_round_ints(N, V) * sizeof *idx);
        for (int mode = 0; mode < 3; mode++) {
            uint16_t *want = malloc(vc * 2), *got = malloc(vc * 2);
            memcpy(want, old, vc * 2);
            if (mode == SZ_K_CONVERT_ADD)
                memcpy(got, old, vc * 2);
            else /* written whole: what was there must not matter */
                memset(got, 0xff, vc * 2);
            sz_k_convert(want, SZ_K_BF16, w32, SZ_K_F32, vc, mode);
            memset(idx, 0xff, sz_k_embedding_bwd_round_ints(N, V) * sizeof *idx);
            CU_ASSERT_EQUAL(sz_k_embedding_bwd_round(got, dout, tok, N, C, V, mode, idx), -1);
            int ok = memcmp(got, want, vc * 2) == 0;
            if (!ok)
                for (size_t i = 0; i < vc; i++)
                    if (got[i] != want[i]) {
                        fprintf(stderr, "embedding rounding N=%d C=%d V=%d mode %d: element %zu (row %zu) 0x%04x, want 0x%04x\n",
                                N, C, V, mode, i, i / (size_t)C, got[i], want[i]);
                        break;
                    }
            CU_ASSERT(ok);
            free(want);
            free(got);
        }
        /* a token outside [0, V): its row returned, nothing written */
        tok[N / 2] = V;
        uint16_t *same = malloc(vc * 2);
        memcpy(same, old, vc * 2);
        CU_ASSERT_EQUAL(sz_k_embedding_bwd_round(same, dout, tok, N, C, V, SZ_K_CONVERT_SET, idx), N / 2);
        CU_ASSERT(memcmp(same, old, vc * 2) == 0);
        free(same); free(idx); free(old); free(w32); free(dout); free(tok);
    }
    CU_ASSERT_EQUAL(sz_embedding_round_host_bytes(3, 256, 300), (256 + 300 + 1) * 4 * 3);
    CU_ASSERT_EQUAL(sz_embedding_round_host_bytes(0, 256, 300), (256 + 300 + 1) * 4);
}

/* The elementwise and row kernels, fp32 and with bf16 operands. */
static void test_rows(void)
{
    enum { B = 2, T = 24, C = 48, NH = 4, N = B * T };
    size_t nc = (size_t)N * C, n3 = 3 * nc;
    float *x = rnd(n3, 1.0f), *dout = rnd(n3, 0.5f), *res = rnd(nc, 1.0f), *wln = rnd(C, 1.0f);
    float mean[N], rstd[N], *tmp = malloc(nc * 4);
    sz_k_layernorm_fwd(tmp, mean, rstd, res, wln, NULL, N, C);

    /* gelu_bwd */
    float *want = calloc(n3, 4), *got = nans(n3 * 4);
    sz_k_gelu_bwd(want, x, dout, n3);
    sz_k_gelu_bwd_set(got, x, dout, n3, SZ_K_SET_DINP);
    CU_ASSERT(same_up_to_zero_sign("gelu_bwd", got, want, n3, 0));
    uint16_t *d16 = rnd16(n3, 0.5f), *w16 = calloc(n3, 2), *g16 = nans(n3 * 2);
    sz_k_gelu_bwd_mx(w16, SZ_K_BF16, x, d16, SZ_K_BF16, n3);
    sz_k_gelu_bwd_mx_set(g16, SZ_K_BF16, x, d16, SZ_K_BF16, n3, SZ_K_SET_DINP);
    CU_ASSERT(same_up_to_zero_sign("gelu_bwd_mx bf16", g16, w16, n3, 1));

    /* residual_bwd: da set, db set, both */
    for (int set = 1; set <= 3; set++) {
        float *wa = rnd(nc, 1.0f), *wb = rnd(nc, 1.0f), *ga = malloc(nc * 4), *gb = malloc(nc * 4);
        if (set & SZ_K_SET_A) memset(wa, 0, nc * 4), memset(ga, 0xff, nc * 4); else memcpy(ga, wa, nc * 4);
        if (set & SZ_K_SET_B) memset(wb, 0, nc * 4), memset(gb, 0xff, nc * 4); else memcpy(gb, wb, nc * 4);
        sz_k_residual_bwd(wa, wb, dout, nc);
        sz_k_residual_bwd_set(ga, gb, dout, nc, set);
        CU_ASSERT(same_up_to_zero_sign("residual_bwd da", ga, wa, nc, 0));
        CU_ASSERT(same_up_to_zero_sign("residual_bwd db", gb, wb, nc, 0));
        uint16_t *wb16 = calloc(nc, 2), *gb16 = nans(nc * 2);
        memset(wa, 0, nc * 4), memset(ga, 0xff, nc * 4);
        sz_k_residual_bwd_mx(wa, SZ_K_F32, wb16, SZ_K_BF16, dout, nc);
        sz_k_residual_bwd_mx_set(ga, SZ_K_F32, gb16, SZ_K_BF16, dout, nc, SZ_K_SET_A | SZ_K_SET_B);
        CU_ASSERT(same_up_to_zero_sign("residual_bwd_mx da", ga, wa, nc, 0));
        CU_ASSERT(same_up_to_zero_sign("residual_bwd_mx db bf16", gb16, wb16, nc, 1));
        free(wa); free(wb); free(ga); free(gb); free(wb16); free(gb16);
    }

    /* layernorm_bwd: dinp set, dweight and dbias still accumulate */
    {
        float *dw0 = rnd(C, 0.1f), *db0 = rnd(C, 0.1f), dw1[C], db1[C];
        memcpy(dw1, dw0, sizeof dw1);
        memcpy(db1, db0, sizeof db1);
        memset(want, 0, nc * 4);
        memset(got, 0xff, nc * 4);
        sz_k_layernorm_bwd(want, dw0, db0, dout, res, wln, mean, rstd, N, C);
        sz_k_layernorm_bwd_set(got, dw1, db1, dout, res, wln, mean, rstd, N, C, SZ_K_SET_DINP);
        CU_ASSERT(same_up_to_zero_sign("layernorm_bwd dinp", got, want, nc, 0));
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(db0, db1, sizeof db1) == 0);
        memset(want, 0, nc * 4);
        memset(got, 0xff, nc * 4);
        CU_ASSERT(sz_k_layernorm_bwd_mx(want, dw0, db0, d16, SZ_K_BF16, res, wln, SZ_K_F32, mean, rstd, N, C) == 0);
        CU_ASSERT(sz_k_layernorm_bwd_mx_set(got, dw1, db1, d16, SZ_K_BF16, res, wln, SZ_K_F32, mean, rstd, N, C,
                                            SZ_K_SET_DINP) == 0);
        CU_ASSERT(same_up_to_zero_sign("layernorm_bwd_mx dinp", got, want, nc, 0));
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(db0, db1, sizeof db1) == 0);
        /* dweight and dbias set: their sums start at +0, as on a zeroed destination (the same bits) */
        int sets = SZ_K_SET_DW | SZ_K_SET_DB;
        memset(dw0, 0, sizeof dw1), memset(db0, 0, sizeof db1), memset(dw1, 0xff, sizeof dw1), memset(db1, 0xff, sizeof db1);
        memcpy(got, want, nc * 4);
        sz_k_layernorm_bwd(want, dw0, db0, dout, res, wln, mean, rstd, N, C);
        sz_k_layernorm_bwd_set(got, dw1, db1, dout, res, wln, mean, rstd, N, C, sets);
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(db0, db1, sizeof db1) == 0 && memcmp(got, want, nc * 4) == 0);
        memset(dw0, 0, sizeof dw1), memset(db0, 0, sizeof db1), memset(dw1, 0xff, sizeof dw1), memset(db1, 0xff, sizeof db1);
        memcpy(got, want, nc * 4);
        CU_ASSERT(sz_k_layernorm_bwd_mx(want, dw0, db0, d16, SZ_K_BF16, res, wln, SZ_K_F32, mean, rstd, N, C) == 0);
        CU_ASSERT(sz_k_layernorm_bwd_mx_set(got, dw1, db1, d16, SZ_K_BF16, res, wln, SZ_K_F32, mean, rstd, N, C, sets) == 0);
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(db0, db1, sizeof db1) == 0);
        free(dw0); free(db0);
    }

    /* layernorm_residual_bwd: da and / or db set, dres accumulates */
    for (int set = 1; set <= 3; set++) {
        float *dres0 = rnd(nc, 0.3f), *dres1 = malloc(nc * 4), *wa = rnd(nc, 1.0f), *wb = rnd(nc, 1.0f);
        float *ga = malloc(nc * 4), *gb = malloc(nc * 4), dw0[C] = {0}, dw1[C] = {0};
        memcpy(dres1, dres0, nc * 4);
        if (set & SZ_K_SET_A) memset(wa, 0, nc * 4), memset(ga, 0xff, nc * 4); else memcpy(ga, wa, nc * 4);
        if (set & SZ_K_SET_B) memset(wb, 0, nc * 4), memset(gb, 0xff, nc * 4); else memcpy(gb, wb, nc * 4);
        sz_k_layernorm_residual_bwd(wa, wb, dres0, dw0, NULL, dout, res, wln, mean, rstd, N, C);
        sz_k_layernorm_residual_bwd_set(ga, gb, dres1, dw1, NULL, dout, res, wln, mean, rstd, N, C, set);
        CU_ASSERT(same_up_to_zero_sign("layernorm_residual_bwd da", ga, wa, nc, 0));
        CU_ASSERT(same_up_to_zero_sign("layernorm_residual_bwd db", gb, wb, nc, 0));
        CU_ASSERT(memcmp(dres0, dres1, nc * 4) == 0 && memcmp(dw0, dw1, sizeof dw1) == 0);
        /* bf16 dout and db */
        uint16_t *wb16 = calloc(nc, 2), *gb16 = nans(nc * 2);
        memcpy(dres1, dres0, nc * 4);
        memset(wa, 0, nc * 4), memset(ga, 0xff, nc * 4);
        CU_ASSERT(sz_k_layernorm_residual_bwd_mx(wa, wb16, SZ_K_BF16, dres0, dw0, NULL, d16, SZ_K_BF16, res, wln,
                                                 SZ_K_F32, mean, rstd, N, C) == 0);
        CU_ASSERT(sz_k_layernorm_residual_bwd_mx_set(ga, gb16, SZ_K_BF16, dres1, dw1, NULL, d16, SZ_K_BF16, res, wln,
                                                     SZ_K_F32, mean, rstd, N, C, SZ_K_SET_A | SZ_K_SET_B) == 0);
        CU_ASSERT(same_up_to_zero_sign("layernorm_residual_bwd_mx da", ga, wa, nc, 0));
        CU_ASSERT(same_up_to_zero_sign("layernorm_residual_bwd_mx db bf16", gb16, wb16, nc, 1));
        CU_ASSERT(memcmp(dres0, dres1, nc * 4) == 0 && memcmp(dw0, dw1, sizeof dw1) == 0);
        /* dweight and dbias set */
        float dbl0[C] = {0}, dbl1[C];
        memset(dw0, 0, sizeof dw0), memset(dw1, 0xff, sizeof dw1), memset(dbl1, 0xff, sizeof dbl1);
        memcpy(dres1, dres0, nc * 4), memcpy(ga, wa, nc * 4), memcpy(gb, wb, nc * 4);
        sz_k_layernorm_residual_bwd(wa, wb, dres0, dw0, dbl0, dout, res, wln, mean, rstd, N, C);
        sz_k_layernorm_residual_bwd_set(ga, gb, dres1, dw1, dbl1, dout, res, wln, mean, rstd, N, C,
                                        SZ_K_SET_DW | SZ_K_SET_DB);
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(dbl0, dbl1, sizeof dbl1) == 0);
        CU_ASSERT(memcmp(ga, wa, nc * 4) == 0 && memcmp(gb, wb, nc * 4) == 0 && memcmp(dres0, dres1, nc * 4) == 0);
        memset(dw0, 0, sizeof dw0), memset(dbl0, 0, sizeof dbl0), memset(dw1, 0xff, sizeof dw1), memset(dbl1, 0xff, sizeof dbl1);
        memcpy(dres1, dres0, nc * 4), memcpy(ga, wa, nc * 4);
        CU_ASSERT(sz_k_layernorm_residual_bwd_mx(wa, wb16, SZ_K_BF16, dres0, dw0, dbl0, d16, SZ_K_BF16, res, wln,
                                                 SZ_K_F32, mean, rstd, N, C) == 0);
        memcpy(gb16, wb16, nc * 2); /* (wb16 was added into once more above: compare from equal starts) */
        CU_ASSERT(sz_k_layernorm_residual_bwd_mx_set(ga, gb16, SZ_K_BF16, dres1, dw1, dbl1, d16, SZ_K_BF16, res, wln,
                                                     SZ_K_F32, mean, rstd, N, C, SZ_K_SET_DW | SZ_K_SET_DB) == 0);
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(dbl0, dbl1, sizeof dbl1) == 0);
        free(dres0); free(dres1); free(wa); free(wb); free(ga); free(gb); free(wb16); free(gb16);
    }

    /* attention_bwd: dinp [B,T,3C], fp32 and bf16 */
    {
        float stats[2 * B * NH * T], *att = malloc(nc * 4);
        CU_ASSERT(sz_k_attention_fwd(att, stats, x, B, T, C, NH) == 0);
        memset(want, 0, n3 * 4);
        memset(got, 0xff, n3 * 4);
        CU_ASSERT(sz_k_attention_bwd(want, dout, x, stats, B, T, C, NH) == 0);
        CU_ASSERT(sz_k_attention_bwd_set(got, dout, x, stats, B, T, C, NH, SZ_K_SET_DINP) == 0);
        CU_ASSERT(same_up_to_zero_sign("attention_bwd", got, want, n3, 0));
        memset(w16, 0, n3 * 2);
        memset(g16, 0xff, n3 * 2);
        CU_ASSERT(sz_k_attention_bwd_mx(w16, SZ_K_BF16, d16, SZ_K_BF16, x, stats, B, T, C, NH) == 0);
        CU_ASSERT(sz_k_attention_bwd_mx_set(g16, SZ_K_BF16, d16, SZ_K_BF16, x, stats, B, T, C, NH, SZ_K_SET_DINP) == 0);
        CU_ASSERT(same_up_to_zero_sign("attention_bwd_mx bf16", g16, w16, n3, 1));
        free(att);
    }
    /* the LLaMA-style model's: rmsnorm_bwd, rmsnorm_residual_bwd, rope_bwd */
    {
        float rs[N], dw0[C] = {0}, dw1[C] = {0};
        sz_k_rmsnorm_fwd(tmp, rs, res, wln, N, C, 1e-5f);
        memset(want, 0, nc * 4);
        memset(got, 0xff, nc * 4);
        sz_k_rmsnorm_bwd(want, dw0, dout, res, wln, rs, N, C);
        sz_k_rmsnorm_bwd_set(got, dw1, dout, res, wln, rs, N, C, SZ_K_SET_DINP);
        CU_ASSERT(same_up_to_zero_sign("rmsnorm_bwd dinp", got, want, nc, 0));
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0);
        memset(want, 0, nc * 4);
        memset(got, 0xff, nc * 4);
        CU_ASSERT(sz_k_rmsnorm_bwd_mx(want, dw0, d16, SZ_K_BF16, res, wln, SZ_K_F32, rs, N, C) == 0);
        CU_ASSERT(sz_k_rmsnorm_bwd_mx_set(got, dw1, d16, SZ_K_BF16, res, wln, SZ_K_F32, rs, N, C, SZ_K_SET_DINP) == 0);
        CU_ASSERT(same_up_to_zero_sign("rmsnorm_bwd_mx dinp", got, want, nc, 0));
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0);
        /* dweight set: its sums start at +0 (the same bits as on a zeroed one) */
        memset(dw0, 0, sizeof dw0), memset(dw1, 0xff, sizeof dw1);
        sz_k_rmsnorm_bwd(NULL, dw0, dout, res, wln, rs, N, C);
        sz_k_rmsnorm_bwd_set(NULL, dw1, dout, res, wln, rs, N, C, SZ_K_SET_DW);
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0);
        memset(dw0, 0, sizeof dw0), memset(dw1, 0xff, sizeof dw1);
        CU_ASSERT(sz_k_rmsnorm_bwd_mx(NULL, dw0, d16, SZ_K_BF16, res, wln, SZ_K_F32, rs, N, C) == 0);
        CU_ASSERT(sz_k_rmsnorm_bwd_mx_set(NULL, dw1, d16, SZ_K_BF16, res, wln, SZ_K_F32, rs, N, C, SZ_K_SET_DW) == 0);
        CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0);
        {
            float *dr0 = rnd(nc, 0.3f), *dr1 = malloc(nc * 4), *a0 = rnd(nc, 1.0f), *a1 = malloc(nc * 4);
            float *b0 = rnd(nc, 1.0f), *b1 = malloc(nc * 4);
            memcpy(dr1, dr0, nc * 4), memcpy(a1, a0, nc * 4), memcpy(b1, b0, nc * 4);
            memset(dw0, 0, sizeof dw0), memset(dw1, 0xff, sizeof dw1);
            sz_k_rmsnorm_residual_bwd(a0, b0, dr0, dw0, dout, res, wln, rs, N, C);
            sz_k_rmsnorm_residual_bwd_set(a1, b1, dr1, dw1, dout, res, wln, rs, N, C, SZ_K_SET_DW);
            CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(a0, a1, nc * 4) == 0 && memcmp(b0, b1, nc * 4) == 0);
            memset(dw0, 0, sizeof dw0), memset(dw1, 0xff, sizeof dw1);
            memcpy(dr1, dr0, nc * 4), memcpy(a1, a0, nc * 4), memcpy(b1, b0, nc * 4);
            CU_ASSERT(sz_k_rmsnorm_residual_bwd_mx(a0, b0, SZ_K_F32, dr0, dw0, d16, SZ_K_BF16, res, wln, SZ_K_F32, rs,
                                                   N, C) == 0);
            CU_ASSERT(sz_k_rmsnorm_residual_bwd_mx_set(a1, b1, SZ_K_F32, dr1, dw1, d16, SZ_K_BF16, res, wln, SZ_K_F32,
                                                       rs, N, C, SZ_K_SET_DW) == 0);
            CU_ASSERT(memcmp(dw0, dw1, sizeof dw1) == 0 && memcmp(a0, a1, nc * 4) == 0 && memcmp(b0, b1, nc * 4) == 0);
            free(dr0); free(dr1); free(a0); free(a1); free(b0); free(b1);
        }
        for (int set = 1; set <= 3; set++) {
            float *dres0 = rnd(nc, 0.3f), *dres1 = malloc(nc * 4), *wa = rnd(nc, 1.0f), *wb = rnd(nc, 1.0f);
            float *ga = malloc(nc * 4), *gb = malloc(nc * 4);
            memcpy(dres1, dres0, nc * 4);
            if (set & SZ_K_SET_A) memset(wa, 0, nc * 4), memset(ga, 0xff, nc * 4); else memcpy(ga, wa, nc * 4);
            if (set & SZ_K_SET_B) memset(wb, 0, nc * 4), memset(gb, 0xff, nc * 4); else memcpy(gb, wb, nc * 4);
            sz_k_rmsnorm_residual_bwd(wa, wb, dres0, dw0, dout, res, wln, rs, N, C);
            sz_k_rmsnorm_residual_bwd_set(ga, gb, dres1, dw1, dout, res, wln, rs, N, C, set);
            CU_ASSERT(same_up_to_zero_sign("rmsnorm_residual_bwd da", ga, wa, nc, 0));
            CU_ASSERT(same_up_to_zero_sign("rmsnorm_residual_bwd db", gb, wb, nc, 0));
            CU_ASSERT(memcmp(dres0, dres1, nc * 4) == 0 && memcmp(dw0, dw1, sizeof dw1) == 0);
            uint16_t *wb16 = calloc(nc, 2), *gb16 = nans(nc * 2);
            memcpy(dres1, dres0, nc * 4);
            memset(wa, 0, nc * 4), memset(ga, 0xff, nc * 4);
            CU_ASSERT(sz_k_rmsnorm_residual_bwd_mx(wa, wb16, SZ_K_BF16, dres0, dw0, d16, SZ_K_BF16, res, wln, SZ_K_F32,
                                                   rs, N, C) == 0);
            CU_ASSERT(sz_k_rmsnorm_residual_bwd_mx_set(ga, gb16, SZ_K_BF16, dres1, dw1, d16, SZ_K_BF16, res, wln,
                                                       SZ_K_F32, rs, N, C, SZ_K_SET_A | SZ_K_SET_B) == 0);
            CU_ASSERT(same_up_to_zero_sign("rmsnorm_residual_bwd_mx da", ga, wa, nc, 0));
            CU_ASSERT(same_up_to_zero_sign("rmsnorm_residual_bwd_mx db bf16", gb16, wb16, nc, 1));
            CU_ASSERT(memcmp(dres0, dres1, nc * 4) == 0 && memcmp(dw0, dw1, sizeof dw1) == 0);
            free(dres0); free(dres1); free(wa); free(wb); free(ga); free(gb); free(wb16); free(gb16);
        }
        memset(want, 0, n3 * 4);
        memset(got, 0xff, n3 * 4);
        CU_ASSERT(sz_k_rope_bwd(want, dout, B, T, C, NH, 10000.0f) == 0);
        CU_ASSERT(sz_k_rope_bwd_set(got, dout, B, T, C, NH, 10000.0f, SZ_K_SET_DINP) == 0);
        CU_ASSERT(same_up_to_zero_sign("rope_bwd", got, want, n3, 0));
        memset(w16, 0, n3 * 2);
        memset(g16, 0xff, n3 * 2);
        CU_ASSERT(sz_k_rope_bwd_mx(w16, SZ_K_BF16, d16, SZ_K_BF16, B, T, C, NH, 10000.0f) == 0);
        CU_ASSERT(sz_k_rope_bwd_mx_set(g16, SZ_K_BF16, d16, SZ_K_BF16, B, T, C, NH, 10000.0f, SZ_K_SET_DINP) == 0);
        CU_ASSERT(same_up_to_zero_sign("rope_bwd_mx bf16", g16, w16, n3, 1));
    }
    free(x); free(dout); free(res); free(wln); free(tmp); free(want); free(got); free(d16); free(w16); free(g16);
}

/* ---------------------------------------------------------------- folding as tasks */

/* One unit "body" (w [OC, C]): forward y = x . w^T, g = gelu(y), loss = mse(g, target); its backward
 * zeroes dy, dx (folded into gelu_bwd and matmul_bwd), r1 (then residual_bwd(r1, r1): the same
 * tensor twice), r2 (then read by residual_fwd into r3), r4 (then a gelu_bwd over its first half
 * only) and r5 (never touched again), so the last four zeroings run as tasks. */
enum { FN = 8, FC = 16, FOC = 24 };
static sz_context *ctx;
struct fm {
    sz_model *m;
    sz_tensor *x, *y, *g, *target, *losses, *dg, *dy, *dx, *r1, *r2, *r3, *r4, *r5;
};
static const sz_param_spec FW[] = {{"w", FOC, FC, 1, SZ_INIT_NORMAL, 0.3f}};
#define TRY(x) do { sz_status st_ = (x); if (st_ != SZ_OK) return st_; } while (0)

static sz_status f_fwd(sz_unit *u, void *p)
{
    struct fm *f = p;
    TRY(sz_op_matmul_fwd(u, f->y, f->x, sz_unit_param(u, 0), NULL, FN, FC, FOC));
    TRY(sz_op_gelu_fwd(u, f->g, f->y, (int64_t)FN * FOC));
    return sz_op_mse_fwd(u, f->losses, f->g, f->target, FN, FOC);
}
static sz_status f_bwd(sz_unit *u, void *p)
{
    struct fm *f = p;
    sz_tensor *zero[] = {f->dy, f->dx, f->r1, f->r2, f->r4, f->r5, f->dy /* twice: one zeroing */};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        TRY(sz_op_zero(u, zero[i]));
    TRY(sz_op_mse_bwd(u, f->dg, f->g, f->target, FN, FOC));
    TRY(sz_op_gelu_bwd(u, f->dy, f->y, f->dg, (int64_t)FN * FOC));
    TRY(sz_op_matmul_bwd(u, f->dx, sz_unit_grad(u, 0), NULL, f->dy, f->x, sz_unit_param(u, 0), FN, FC, FOC));
    TRY(sz_op_residual_bwd(u, f->r1, f->r1, f->dx, (int64_t)FN * FC));
    TRY(sz_op_residual_fwd(u, f->r3, f->r2, f->dx, (int64_t)FN * FC));
    return sz_op_gelu_bwd(u, f->r4, f->y, f->dg, (int64_t)FN * FOC);
}

/* A model initialised under the fold switches SZ_ZERO_FOLD (zeros) and SZ_GRAD_FOLD (grads) would
 * give: the context read the environment once (sched/env.c); a model takes them at sz_model_init. */
static int init_with_folds(sz_model **m, int zeros, int grads)
{
    sz_fold_switches keep = ctx->env.fold;
    ctx->env.fold.zeros = zeros;
    ctx->env.fold.grads = zeros && grads;
    ctx->env.fold.round = zeros && grads && keep.round;
    int ok = sz_model_init(m, ctx) == SZ_OK;
    ctx->env.fold = keep;
    return ok;
}

static int fm_build(struct fm *f, int fold)
{
    memset(f, 0, sizeof *f);
    int ok = init_with_folds(&f->m, fold, 1);
    sz_unit_desc d = {.name = "body", .params = FW, .nparams = 1, .forward = f_fwd, .backward = f_bwd, .user = f};
    if (!ok || sz_model_add_unit(f->m, &d) != SZ_OK)
        return 0;
    int64_t nc = (int64_t)FN * FC, no = (int64_t)FN * FOC;
    f->x = sz_model_tensor(f->m, "x", SZ_DTYPE_F32, nc);
    f->y = sz_model_tensor(f->m, "y", SZ_DTYPE_F32, no);
    f->g = sz_model_tensor(f->m, "g", SZ_DTYPE_F32, no);
    f->target = sz_model_tensor(f->m, "target", SZ_DTYPE_F32, no);
    f->losses = sz_model_tensor(f->m, "losses", SZ_DTYPE_F32, FN);
    f->dg = sz_model_tensor(f->m, "dg", SZ_DTYPE_F32, no);
    f->dy = sz_model_tensor(f->m, "dy", SZ_DTYPE_F32, no);
    f->dx = sz_model_tensor(f->m, "dx", SZ_DTYPE_F32, nc);
    f->r1 = sz_model_tensor(f->m, "r1", SZ_DTYPE_F32, nc);
    f->r2 = sz_model_tensor(f->m, "r2", SZ_DTYPE_F32, nc);
    f->r3 = sz_model_tensor(f->m, "r3", SZ_DTYPE_F32, nc);
    f->r4 = sz_model_tensor(f->m, "r4", SZ_DTYPE_F32, 2 * no);
    f->r5 = sz_model_tensor(f->m, "r5", SZ_DTYPE_F32, nc);
    return sz_model_set_loss(f->m, f->losses) == SZ_OK && sz_model_finalize(f->m) == SZ_OK &&
           sz_model_init_params(f->m, 11) == SZ_OK;
}

/* 1 when the run's tasks kept the plan's waits (the dependency check, on for these models) over at
 * least one checked step; else prints the violations. */
static int depcheck_ok(struct sz_model *m)
{
    int steps = 0, ndeps = 0;
    char msg[256] = "";
    int viol = sz_model_depcheck_result(m, &steps, &ndeps, msg, sizeof msg);
    if (viol != 0)
        printf("\n  depcheck: %d violations: %s\n", viol, msg);
    return viol == 0 && steps >= 1;
}

/* Two steps (forward, backward, update) with every zeroed tensor full of NaNs before each; the
 * tensors and the gradient after the last, concatenated into out. */
enum { FOUT = 5 * FN * FC + 3 * FN * FOC + FOC * FC }; /* dx, r1, r2, r3, dy, r4 (2 FN FOC), r5, dw */
static int fm_run(int fold, float *out, int64_t *folded, int64_t *run)
{
    struct fm f;
    if (!fm_build(&f, fold))
        return 0;
    int ok = sz_model_depcheck(f.m, 1) == SZ_OK;
    float *x = rnd((size_t)FN * FC, 1.0f), *target = rnd((size_t)FN * FOC, 1.0f);
    float *junk = nans(2 * FN * FOC * 4);
    ok &= sz_tensor_write(f.x, x) == SZ_OK && sz_tensor_write(f.target, target) == SZ_OK;
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 0.1f;
    for (int step = 1; step <= 2 && ok; step++) {
        sz_tensor *z[] = {f.dy, f.dx, f.r1, f.r2, f.r4, f.r5};
        for (size_t i = 0; i < sizeof z / sizeof z[0]; i++)
            ok &= sz_tensor_write(z[i], junk) == SZ_OK;
        float loss;
        ok &= sz_model_forward_backward(f.m, &loss) == SZ_OK && isfinite(loss);
        if (step == 2) {
            float *o = out;
            sz_tensor *t[] = {f.dx, f.r1, f.r2, f.r3, f.dy, f.r4, f.r5};
            for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
                ok &= sz_tensor_read(t[i], o) == SZ_OK;
                o += sz_tensor_numel(t[i]);
            }
            ok &= sz_model_grad_read(f.m, 0, 0, o) == SZ_OK;
        }
        ok &= sz_model_update(f.m, &tc, step) == SZ_OK;
    }
    ok &= depcheck_ok(f.m);
    *folded = f.m->core.zeros_folded;
    *run = f.m->core.zeros_run;
    sz_model_free(f.m);
    free(x); free(target); free(junk);
    return ok;
}

static void test_fold_tasks(void)
{
    float *on = malloc(FOUT * 4), *off = malloc(FOUT * 4);
    int64_t fon, ron, foff, roff;
    uint32_t seed = rng_state;
    CU_ASSERT_FATAL(fm_run(1, on, &fon, &ron));
    rng_state = seed;
    CU_ASSERT_FATAL(fm_run(0, off, &foff, &roff));
    printf("\n  folded %lld, zeroing tasks %lld (SZ_ZERO_FOLD=0: %lld, %lld) over 2 steps\n", (long long)fon,
           (long long)ron, (long long)foff, (long long)roff);
    CU_ASSERT_EQUAL(fon, 2 * 2);   /* dy, dx per step */
    CU_ASSERT_EQUAL(ron, 2 * 4);   /* r1, r2, r4, r5 */
    CU_ASSERT_EQUAL(foff, 0);
    CU_ASSERT_EQUAL(roff, 2 * 7);  /* dy zeroed twice */
    CU_ASSERT(same_up_to_zero_sign("folded against SZ_ZERO_FOLD=0", on, off, FOUT, 0));
    /* the values themselves: r1 = 2 dx, r2 = 0, r3 = dx, r4 = [dy, 0], r5 = 0 */
    size_t nc = (size_t)FN * FC, no = (size_t)FN * FOC;
    const float *dx = on, *r1 = dx + nc, *r2 = r1 + nc, *r3 = r2 + nc, *dy = r3 + nc, *r4 = dy + no, *r5 = r4 + 2 * no;
    int good = 1;
    for (size_t i = 0; i < nc; i++)
        good &= r1[i] == dx[i] + dx[i] && r2[i] == 0.0f && r3[i] == dx[i] && r5[i] == 0.0f && dx[i] != 0.0f;
    for (size_t i = 0; i < no; i++)
        good &= r4[i] == dy[i] && r4[no + i] == 0.0f;
    CU_ASSERT(good);
    free(on);
    free(off);
}

/* The parameters' gradients set by their first writers (SZ_GRADS_FIRST_WRITERS): a unit "lin" with
 * w [FOC, FC], b [FOC] (set by matmul_bwd), e [4, FC] (an embedding's scatter-add: zeroed just
 * before it) and c [3] (untouched: zeroed at the end of the backward); fp32 (the persistent
 * gradients, ZERO_GRADS) and bf16 mixed (the working gradients, GRAD_ALLOC), 1 and 2 micro-batches:
 * bitwise the gradients and parameters of SZ_ZERO_FOLD=0 and of SZ_GRAD_FOLD=0 (only the gradients
 * zeroed whole), with the views set and zeroed counted. */
struct fg {
    sz_model *m;
    sz_tensor *x, *y, *g, *target, *losses, *dg, *dy, *dx, *tok;
};
static const sz_param_spec GW[] = {{"w", FOC, FC, 1, SZ_INIT_NORMAL, 0.3f}, {"b", FOC, 1, 0, SZ_INIT_NORMAL, 0.1f},
                                   {"e", 4, FC, 1, SZ_INIT_NORMAL, 0.1f}, {"c", 3, 1, 0, SZ_INIT_NORMAL, 0.1f}};
enum { GOUT = FOC * FC + FOC + 4 * FC + 3 };

static sz_status g_fwd(sz_unit *u, void *p)
{
    struct fg *f = p;
    TRY(sz_op_matmul_fwd(u, f->y, f->x, sz_unit_param(u, 0), sz_unit_param(u, 1), FN, FC, FOC));
    TRY(sz_op_gelu_fwd(u, f->g, f->y, (int64_t)FN * FOC));
    return sz_op_mse_fwd(u, f->losses, f->g, f->target, FN, FOC);
}
static sz_status g_bwd(sz_unit *u, void *p)
{
    struct fg *f = p;
    TRY(sz_op_zero(u, f->dy));
    TRY(sz_op_zero(u, f->dx));
    TRY(sz_op_mse_bwd(u, f->dg, f->g, f->target, FN, FOC));
    TRY(sz_op_gelu_bwd(u, f->dy, f->y, f->dg, (int64_t)FN * FOC));
    TRY(sz_op_matmul_bwd(u, f->dx, sz_unit_grad(u, 0), sz_unit_grad(u, 1), f->dy, f->x, sz_unit_param(u, 0), FN, FC,
                         FOC));
    return sz_op_embedding_bwd(u, sz_unit_grad(u, 2), f->dx, f->tok, FN, FC, 4);
}

struct fg_count { int64_t set, zeroed, tasks, bytes; };
static int fg_run(int fold, int mixed, int micro, float *grads, float *params, struct fg_count *c)
{
    struct fg f = {0};
    /* fold 2: the activations' zeros folded, the gradients zeroed whole (SZ_GRAD_FOLD=0) */
    int ok = init_with_folds(&f.m, fold != 0, fold != 2);
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.micro_batches = micro;
    z.precision = mixed ? SZ_PRECISION_BF16 : SZ_PRECISION_FP32;
    z.bf16_compute = SZ_BF16_COMPUTE_EMULATED;
    sz_unit_desc d = {.name = "lin", .params = GW, .nparams = 4, .forward = g_fwd, .backward = g_bwd, .user = &f};
    if (!ok || sz_model_set_zero(f.m, &z) != SZ_OK || sz_model_add_unit(f.m, &d) != SZ_OK)
        return 0;
    int64_t nc = (int64_t)FN * FC, no = (int64_t)FN * FOC;
    sz_tensor **t[] = {&f.x, &f.dx, &f.y, &f.g, &f.target, &f.dg, &f.dy};
    const char *names[] = {"x", "dx", "y", "g", "target", "dg", "dy"};
    for (int i = 0; i < 7; i++)
        *t[i] = sz_model_tensor(f.m, names[i], SZ_DTYPE_F32, i < 2 ? nc : no);
    f.losses = sz_model_tensor(f.m, "losses", SZ_DTYPE_F32, FN);
    f.tok = sz_model_tensor(f.m, "tok", SZ_DTYPE_I32, FN);
    ok = sz_model_set_loss(f.m, f.losses) == SZ_OK && sz_model_finalize(f.m) == SZ_OK &&
         sz_model_init_params(f.m, 5) == SZ_OK && sz_model_depcheck(f.m, 1) == SZ_OK;
    int32_t tok[FN];
    for (int i = 0; i < FN; i++)
        tok[i] = (i * 3) % 4;
    float *x = rnd((size_t)nc, 1.0f), *target = rnd((size_t)no, 1.0f);
    ok &= sz_tensor_write(f.x, x) == SZ_OK && sz_tensor_write(f.target, target) == SZ_OK &&
          sz_tensor_write(f.tok, tok) == SZ_OK;
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 0.1f;
    for (int step = 1; step <= 2 && ok; step++) {
        for (int mb = 0; mb < micro && ok; mb++) {
            float loss;
            ok &= sz_model_forward_backward(f.m, &loss) == SZ_OK && isfinite(loss);
        }
        if (step == 2) /* the summed gradients of the step */
            for (int k = 0, o = 0; k < 4 && ok; o += GW[k].rows * GW[k].cols, k++)
                ok &= sz_model_grad_read(f.m, 0, k, grads + o) == SZ_OK;
        ok &= sz_model_update(f.m, &tc, step) == SZ_OK;
    }
    for (int k = 0, o = 0; k < 4 && ok; o += GW[k].rows * GW[k].cols, k++)
        ok &= sz_model_param_read(f.m, 0, k, params + o) == SZ_OK;
    ok &= depcheck_ok(f.m);
    *c = (struct fg_count){f.m->core.grads_set, f.m->core.grads_zeroed, f.m->core.zero_tasks, f.m->core.zero_bytes};
    sz_model_free(f.m);
    free(x); free(target);
    return ok;
}

static void test_fold_grads(void)
{
    float *g[3], *p[3];
    for (int i = 0; i < 3; i++)
        g[i] = malloc(GOUT * 4), p[i] = malloc(GOUT * 4);
    for (int mixed = 0; mixed < 2; mixed++)
        for (int micro = 1; micro <= 2; micro++) {
            struct fg_count c[3];
            uint32_t seed = rng_state;
            for (int fold = 0; fold < 3; fold++) { /* SZ_ZERO_FOLD=0, default, SZ_GRAD_FOLD=0 */
                rng_state = seed;
                CU_ASSERT_FATAL(fg_run(fold, mixed, micro, g[fold], p[fold], &c[fold]));
            }
            printf("\n  %s, %d micro-batch(es), 2 steps: set %lld, zeroed %lld views; zeroing tasks %lld (%lld B), "
                   "SZ_ZERO_FOLD=0: %lld (%lld B)", mixed ? "bf16" : "fp32", micro, (long long)c[1].set,
                   (long long)c[1].zeroed, (long long)c[1].tasks, (long long)c[1].bytes, (long long)c[0].tasks,
                   (long long)c[0].bytes);
            /* fp32: the persistent gradients, left to first writers in the first micro-batch only;
             * mixed: fresh working gradients in every micro-batch */
            int64_t passes = 2 * (mixed ? micro : 1);
            CU_ASSERT_EQUAL(c[1].set, 2 * passes);    /* w, b */
            CU_ASSERT_EQUAL(c[1].zeroed, 2 * passes); /* e (before the scatter-add), c (at the end) */
            CU_ASSERT(c[0].set == 0 && c[0].zeroed == 0);
            CU_ASSERT(c[1].bytes < c[0].bytes);
            CU_ASSERT(memcmp(g[0], g[1], GOUT * 4) == 0);
            CU_ASSERT(memcmp(p[0], p[1], GOUT * 4) == 0);
            CU_ASSERT(c[2].set == 0 && c[2].zeroed == 0 && c[2].bytes > c[1].bytes);
            CU_ASSERT(memcmp(g[0], g[2], GOUT * 4) == 0 && memcmp(p[0], p[2], GOUT * 4) == 0);
        }
    for (int i = 0; i < 3; i++)
        free(g[i]), free(p[i]);
}

static int tasks_init(void)
{
    sz_context_config cfg;
    sz_context_config_defaults(&cfg);
    return sz_context_init(&ctx, &cfg, NULL, NULL) == SZ_OK ? 0 : 1;
}
static int tasks_clean(void)
{
    sz_context_free(ctx);
    return 0;
}

/* The fold decision (core/fold.c: sz_fold_decide), made at submission before StarPU picks a
 * worker, on made-up cases: a task that can run only on CPUs always sets; one that may run on a
 * CUDA worker (where CUDA, or either) sets only when its codelet's CUDA implementation does. And
 * the list of codelets whose CUDA implementations set: exactly the engine's backward codelets
 * with SZ_ACCUMULATE_OR_SET tensors (their forwards, the zeroing, the encoder's scatter-add not). */
static int cuda_sets(const struct starpu_codelet *cl)
{
    const sz_op_desc *d = sz_op_desc_of(cl);
    return d && (d->supports & SZ_CL_CUDA_SETS) ? 1 : 0;
}

static void test_fold_decide(void)
{
    /* no CUDA function, or submitted to CPUs, or no CUDA workers: set, whatever the list says */
    CU_ASSERT(sz_fold_decide(0, 0, 0, 1) == 1);
    CU_ASSERT(sz_fold_decide(1, 0, STARPU_CPU, 1) == 1);
    CU_ASSERT(sz_fold_decide(1, 0, 0, 0) == 1);
    CU_ASSERT(sz_fold_decide(1, 0, STARPU_CUDA, 0) == 1);
    /* may run on a GPU: only a codelet whose CUDA implementation sets */
    CU_ASSERT(sz_fold_decide(1, 0, STARPU_CUDA, 1) == 0);
    CU_ASSERT(sz_fold_decide(1, 0, 0, 2) == 0);
    CU_ASSERT(sz_fold_decide(1, 1, STARPU_CUDA, 1) == 1);
    CU_ASSERT(sz_fold_decide(1, 1, 0, 8) == 1);
    const struct starpu_codelet *yes[] = {&sz_cl_matmul_bwd, &sz_cl_gelu_matmul_bwd, &sz_cl_layernorm_bwd,
                                          &sz_cl_layernorm_residual_bwd, &sz_cl_rmsnorm_bwd, &sz_cl_rmsnorm_residual_bwd,
                                          &sz_cl_attention_bwd, &sz_cl_gelu_bwd, &sz_cl_residual_bwd, &sz_cl_rope_bwd};
    const struct starpu_codelet *no[] = {&sz_cl_matmul_fwd, &sz_cl_zero, &sz_cl_encoder_bwd, &sz_cl_layernorm_fwd,
                                         &sz_cl_swiglu_bwd, &sz_cl_gelu_fwd};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        CU_ASSERT(cuda_sets(yes[i]) == 1);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CU_ASSERT(cuda_sets(no[i]) == 0);
}

/* Every codelet of the library has its descriptor (SZ_DESCRIBE), found by address and in the list
 * (each once); the classes the scheduler reads are the ones its figures and the split rely on; the
 * codelets fp16 meets say SZ_CL_CUDA_F16; an app's own codelet has none; the class survives the
 * task's sched_data next to position and unit. */
static void test_descriptors(void)
{
    int n = 0, listed = sz_codelets_count();
    const sz_op_desc *const *all = sz_op_descs(&n);
    CU_ASSERT(n >= listed);
    for (int i = 0; i < listed; i++) {
        sz_codelet_desc c;
        CU_ASSERT_FATAL(sz_codelet_info(i, &c) == SZ_OK);
        int found = 0;
        for (int k = 0; k < n; k++)
            found += !strcmp(all[k]->cl->name, c.name);
        if (found != 1)
            fprintf(stderr, "codelet %s: %d descriptors\n", c.name, found);
        CU_ASSERT(found == 1);
        CU_ASSERT(c.doc && c.doc[0]);
    }
    struct { const struct starpu_codelet *cl; sz_task_class cls; } want[] = {
        {&sz_cl_matmul_fwd, SZ_TASK_MATMUL},      {&sz_cl_gelu_matmul_bwd, SZ_TASK_MATMUL},
        {&sz_cl_matmul_bwd_tied, SZ_TASK_MATMUL}, {&sz_cl_adamw, SZ_TASK_OPTIMIZER},
        {&sz_cl_sgd_mixed, SZ_TASK_OPTIMIZER},    {&sz_cl_convert, SZ_TASK_CONVERT},
        {&sz_cl_zero, SZ_TASK_ZERO},              {&sz_cl_reduce_scatter, SZ_TASK_COMM},
        {&sz_cl_all_gather, SZ_TASK_COMM},        {&sz_cl_clip_scale, SZ_TASK_COMM_HOST},
        {&sz_cl_account, SZ_TASK_COMPUTE},        {&sz_cl_attention_fwd, SZ_TASK_COMPUTE}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const sz_op_desc *d = sz_op_desc_of(want[i].cl);
        CU_ASSERT_FATAL(d != NULL);
        CU_ASSERT(d->cls == want[i].cls);
    }
    /* fp16 mixed precision runs on CUDA workers too: the codelets that meet its fp16 storage or its
     * loss scale say that their CUDA implementations (where built) take them */
    const struct starpu_codelet *f16[] = {&sz_cl_convert,   &sz_cl_adamw_mixed,    &sz_cl_sgd_mixed, &sz_cl_sumsq,
                                          &sz_cl_clip_scale, &sz_cl_reduce_scatter, &sz_cl_all_gather};
    for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++) {
        const sz_op_desc *d = sz_op_desc_of(f16[i]);
        CU_ASSERT_FATAL(d != NULL);
        if (!(d->supports & SZ_CL_CUDA_F16))
            fprintf(stderr, "codelet %s: no SZ_CL_CUDA_F16\n", f16[i]->name);
        CU_ASSERT(d->supports & SZ_CL_CUDA_F16);
    }
    CU_ASSERT(!(sz_op_desc_of(&sz_cl_matmul_fwd)->supports & SZ_CL_CUDA_F16)); /* compute: fp32 working copies */
    static struct starpu_codelet mine = {.name = "mine"};
    CU_ASSERT(sz_op_desc_of(&mine) == NULL);
    struct starpu_task t = {.sched_data = sz_sched_data((uint64_t)12345 << 16 | 7, 0x1234, SZ_TASK_COMM_HOST)};
    CU_ASSERT(sz_task_class_of(&t) == SZ_TASK_COMM_HOST);
    CU_ASSERT(sz_sched_position(&t) == ((uint64_t)12345 << 16 | 7));
    CU_ASSERT(((uintptr_t)t.sched_data & 0xffff) == 0x1234);
    CU_ASSERT(sz_task_is_comm(&t));
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("fold decision", {"who may set, on made-up workers", test_fold_decide},
             {"every codelet's descriptor, and the class a task carries", test_descriptors});
    SZ_SUITE("first-writer kernels", {"matmul_bwd fp32 at GPT-2 shapes", test_matmul_f32},
             {"matmul_bwd bf16 (native, widened)", test_matmul_bf16}, {"gelu, residual, layernorm, attention, rmsnorm, rope", test_rows});
    CU_pSuite s = CU_add_suite("folding as tasks", tasks_init, tasks_clean);
    CU_add_test(s, "gradient rounding folded into the matmul's dparams", test_matmul_round);
    CU_add_test(s, "a tied embedding's gradient rounded by its two writers", test_tied_round);
    CU_add_test(s, "an untied embedding's gradient rounded by its writer", test_embedding_round);
    CU_add_test(s, "folded or submitted, the same values", test_fold_tasks);
    CU_add_test(s, "parameters' gradients set by their first writers", test_fold_grads);
    int rc = sz_test_run();
    sz_k_shutdown();
    return rc;
}
