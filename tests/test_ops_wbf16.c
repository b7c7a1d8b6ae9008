/* test_ops_wbf16.c — the linear-layer ops given fp32 activations and bf16 weights (the emulated bf16
 * path without working copies): sz_op_matmul_fwd / _bwd, sz_op_matmul_gelu_fwd and
 * sz_op_gelu_matmul_bwd accept an fp32 inp / dout with a bf16 w (and b), run as tasks in a one-unit
 * model and give bitwise the fp32 kernels' results on the widened weight (forward, GELU output, a
 * dinp set through a folded sz_op_zero, dw and db as the unit's gradients); bf16 inputs with an
 * fp32 weight are still refused, naming the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "sz_kernels.h"
#include "sz_test.h"

enum { N = 10, C = 24, OC = 40 };
static sz_context *ctx;
static char last_error[1024];
static int refuse; /* 1: the forward hands matmul_fwd a bf16 inp with an fp32 weight */

static void capture_log(sz_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == SZ_LOG_ERROR)
        snprintf(last_error, sizeof last_error, "%s", msg);
}

struct lin {
    sz_model *m;
    sz_tensor *x, *x16, *w16, *b16, *w32, *y, *h, *g, *target, *losses, *dy, *dx, *dx2, *dw2;
};

static const sz_param_spec LIN[] = {{"w", OC, C, 1, SZ_INIT_NORMAL, 0.5f}, {"b", 1, OC, 0, SZ_INIT_ZERO, 0.0f}};

#define TRY(x) do { sz_status st_ = (x); if (st_ != SZ_OK) return st_; } while (0)
static sz_status lin_fwd(sz_unit *u, void *p)
{
    struct lin *t = p;
    if (refuse)
        return sz_op_matmul_fwd(u, t->y, t->x16, t->w32, NULL, N, C, OC);
    TRY(sz_op_matmul_fwd(u, t->y, t->x, t->w16, t->b16, N, C, OC));
    TRY(sz_op_matmul_gelu_fwd(u, t->h, t->g, t->x, t->w16, t->b16, N, C, OC));
    return sz_op_mse_fwd(u, t->losses, t->y, t->target, N, OC);
}
static sz_status lin_bwd(sz_unit *u, void *p)
{
    struct lin *t = p;
    TRY(sz_op_zero(u, t->dx)); /* folded: matmul_bwd sets dinp */
    TRY(sz_op_zero(u, t->dw2));
    TRY(sz_op_mse_bwd(u, t->dy, t->y, t->target, N, OC));
    TRY(sz_op_matmul_bwd(u, t->dx, sz_unit_grad(u, 0), sz_unit_grad(u, 1), t->dy, t->x, t->w16, N, C, OC));
    return sz_op_gelu_matmul_bwd(u, t->dx2, t->dw2, NULL, t->dy, t->x, t->w16, t->x, N, C, OC);
}

static int lin_build(struct lin *t)
{
    memset(t, 0, sizeof *t);
    if (sz_model_init(&t->m, ctx) != SZ_OK)
        return 0;
    sz_unit_desc d = {.name = "lin", .params = LIN, .nparams = 2, .forward = lin_fwd, .backward = lin_bwd, .user = t};
    if (sz_model_add_unit(t->m, &d) != SZ_OK)
        return 0;
    t->x = sz_model_tensor(t->m, "x", SZ_DTYPE_F32, N * C);
    t->x16 = sz_model_tensor(t->m, "x16", SZ_DTYPE_BF16, N * C);
    t->w16 = sz_model_tensor(t->m, "w16", SZ_DTYPE_BF16, OC * C);
    t->b16 = sz_model_tensor(t->m, "b16", SZ_DTYPE_BF16, OC);
    t->w32 = sz_model_tensor(t->m, "w32", SZ_DTYPE_F32, OC * C);
    t->y = sz_model_tensor(t->m, "y", SZ_DTYPE_F32, N * OC);
    t->h = sz_model_tensor(t->m, "h", SZ_DTYPE_F32, N * OC);
    t->g = sz_model_tensor(t->m, "g", SZ_DTYPE_F32, N * OC);
    t->target = sz_model_tensor(t->m, "target", SZ_DTYPE_F32, N * OC);
    t->losses = sz_model_tensor(t->m, "losses", SZ_DTYPE_F32, N);
    t->dy = sz_model_tensor(t->m, "dy", SZ_DTYPE_F32, N * OC);
    t->dx = sz_model_tensor(t->m, "dx", SZ_DTYPE_F32, N * C);
    t->dx2 = sz_model_tensor(t->m, "dx2", SZ_DTYPE_F32, N * C);
    t->dw2 = sz_model_tensor(t->m, "dw2", SZ_DTYPE_F32, OC * C);
    return sz_model_set_loss(t->m, t->losses) == SZ_OK && sz_model_finalize(t->m) == SZ_OK &&
           sz_model_init_params(t->m, 7) == SZ_OK;
}

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

static void test_ops_match_kernels(void)
{
    struct lin t;
    refuse = 0;
    CU_ASSERT_FATAL(lin_build(&t));
    unsigned seed = 99;
    float x[N * C], target[N * OC], w[OC * C], b[OC];
    uint16_t w16[OC * C], b16[OC];
    for (int i = 0; i < N * C; i++) x[i] = frand(&seed);
    for (int i = 0; i < N * OC; i++) target[i] = frand(&seed);
    for (int i = 0; i < OC * C; i++) { sz_k_f32_to_bf16(&w16[i], (float[]){frand(&seed)}, 1); }
    for (int i = 0; i < OC; i++) { sz_k_f32_to_bf16(&b16[i], (float[]){frand(&seed)}, 1); }
    sz_k_bf16_to_f32(w, w16, OC * C);
    sz_k_bf16_to_f32(b, b16, OC);
    CU_ASSERT_EQUAL(sz_tensor_write(t.x, x), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_write(t.target, target), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_write(t.w16, w16), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_write(t.b16, b16), SZ_OK);
    float loss = 0;
    CU_ASSERT_EQUAL_FATAL(sz_model_forward_backward(t.m, &loss), SZ_OK);
    static float y[N * OC], h[N * OC], g[N * OC], dy[N * OC], dx[N * C], dx2[N * C], dw[OC * C], db[OC],
        dw2[OC * C];
    CU_ASSERT_EQUAL(sz_tensor_read(t.y, y), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.h, h), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.g, g), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.dy, dy), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.dx, dx), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.dx2, dx2), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.dw2, dw2), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_grad_read(t.m, 0, 0, dw), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_grad_read(t.m, 0, 1, db), SZ_OK);

    /* the fp32 kernels on the widened weight */
    static float ry[N * OC], rh[N * OC], rg[N * OC], rdx[N * C], rdx2[N * C], rdw[OC * C], rdb[OC], rdw2[OC * C];
    memset(rdw, 0, sizeof rdw);
    memset(rdb, 0, sizeof rdb);
    memset(rdw2, 0, sizeof rdw2);
    CU_ASSERT(sz_k_matmul_fwd(ry, x, w, b, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_gelu_fwd(rh, rg, SZ_K_F32, x, w, b, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
    CU_ASSERT(sz_k_matmul_bwd_set(rdx, rdw, rdb, dy, x, w, N, C, OC, SZ_K_SET_DINP) >= 0);
    CU_ASSERT(sz_k_gelu_matmul_bwd(rdx2, SZ_K_F32, rdw2, NULL, SZ_K_F32, dy, x, w, x, SZ_K_F32, SZ_K_F32, N, C, OC) >= 0);
    CU_ASSERT(memcmp(y, ry, sizeof y) == 0);
    CU_ASSERT(memcmp(h, rh, sizeof h) == 0);
    CU_ASSERT(memcmp(g, rg, sizeof g) == 0);
    CU_ASSERT(memcmp(dx, rdx, sizeof dx) == 0);
    CU_ASSERT(memcmp(dx2, rdx2, sizeof dx2) == 0);
    CU_ASSERT(memcmp(dw, rdw, sizeof dw) == 0);
    CU_ASSERT(memcmp(db, rdb, sizeof db) == 0);
    CU_ASSERT(memcmp(dw2, rdw2, sizeof dw2) == 0);
    CU_ASSERT(isfinite(loss));
    sz_model_free(t.m);
}

/* bf16 inputs take bf16 weights: an fp32 w is refused, named */
static void test_bf16_inp_fp32_w_refused(void)
{
    struct lin t;
    refuse = 1;
    CU_ASSERT_FATAL(lin_build(&t));
    float loss;
    last_error[0] = 0;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s\n", last_error);
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "matmul_fwd"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last_error, "'w' (w32)"));
    sz_model_free(t.m);
    refuse = 0;
}

static int init(void)
{
    sz_context_config cfg;
    sz_context_config_defaults(&cfg);
    cfg.log_fn = capture_log;
    return sz_context_init(&ctx, &cfg, NULL, NULL) == SZ_OK ? 0 : 1;
}
static int clean(void)
{
    sz_context_free(ctx);
    return 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("linear ops with bf16 weights", init, clean);
    CU_add_test(s, "fp32 activations with bf16 weights: the fp32 kernels' bits on the widened weight",
                test_ops_match_kernels);
    CU_add_test(s, "a bf16 inp with an fp32 weight is refused, named", test_bf16_inp_fp32_w_refused);
    int rc = sz_test_run();
    sz_k_shutdown();
    return rc;
}
