/* tests/test_mse_ranks.c — the MSE loss's gradient scale across ranks and micro-batches (run under
 * mpiexec with 1 and 2 ranks): a linear model pred = x · W^T trained on a fixed global batch of R
 * rows split over N_d ranks and M micro-batches must get the gradient of the mean loss over all R
 * rows, dW = 2/(C·R) Σ_rows (pred - target)^T x, whatever N_d and M (the loss scale
 * sz_unit_loss_scale = 1/(N·M·N_d), N the rows of one micro-batch on one rank), checked against that
 * sum in double; the reported loss is the global mean. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "sz_test_ranks.h" /* ctx, CHECK, the verdict over ranks */

enum { R = 8, C = 6 }; /* global rows of one step, channels */
static double X(int r, int c) { return sin(0.7 * r + 1.3 * c); }
static double Y(int r, int c) { return cos(0.4 * r - 0.9 * c); }

struct lin {
    int N;
    sz_tensor *x, *target, *pred, *losses, *dpred, *dx;
};

static const sz_param_spec W[] = {{"w", C, C, 0, SZ_INIT_NORMAL, 0.5f}};

static sz_status fwd(sz_unit *u, void *p)
{
    struct lin *l = p;
    sz_status st = sz_op_matmul_fwd(u, l->pred, l->x, sz_unit_param(u, 0), NULL, l->N, C, C);
    return st ? st : sz_op_mse_fwd(u, l->losses, l->pred, l->target, l->N, C);
}

static sz_status bwd(sz_unit *u, void *p)
{
    struct lin *l = p;
    sz_status st = sz_op_zero(u, l->dx);
    if (!st) st = sz_op_mse_bwd(u, l->dpred, l->pred, l->target, l->N, C);
    return st ? st : sz_op_matmul_bwd(u, l->dx, sz_unit_grad(u, 0), NULL, l->dpred, l->x, sz_unit_param(u, 0),
                                      l->N, C, C);
}

static void run(int M, int stage)
{
    int nd = sz_context_world_size(ctx), rank = sz_context_rank(ctx), N = R / (nd * M);
    struct lin l = {.N = N};
    sz_model *m = NULL;
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.stage = stage;
    z.micro_batches = M;
    sz_unit_desc d = {.name = "lin", .params = W, .nparams = 1, .forward = fwd, .backward = bwd, .user = &l};
    CHECK(sz_model_init(&m, ctx) == SZ_OK && sz_model_set_zero(m, &z) == SZ_OK && sz_model_add_unit(m, &d) == SZ_OK,
          "model");
    l.x = sz_model_tensor(m, "x", SZ_DTYPE_F32, N * C);
    l.target = sz_model_tensor(m, "target", SZ_DTYPE_F32, N * C);
    l.pred = sz_model_tensor(m, "pred", SZ_DTYPE_F32, N * C);
    l.losses = sz_model_tensor(m, "losses", SZ_DTYPE_F32, N);
    l.dpred = sz_model_tensor(m, "dpred", SZ_DTYPE_F32, N * C);
    l.dx = sz_model_tensor(m, "dx", SZ_DTYPE_F32, N * C);
    CHECK(sz_model_set_loss(m, l.losses) == SZ_OK && sz_model_finalize(m) == SZ_OK &&
              sz_model_init_params(m, 3) == SZ_OK, "finalize");
    float w[C * C], x[R * C], t[R * C], g[C * C];
    CHECK(sz_model_param_read(m, 0, 0, w) == SZ_OK, "read w");
    double mean = 0;
    for (int mb = 0; mb < M; mb++) { /* micro-batch mb, rank r: global rows (mb*nd + r)*N .. */
        int r0 = (mb * nd + rank) * N;
        for (int i = 0; i < N; i++)
            for (int c = 0; c < C; c++) {
                x[i * C + c] = (float)X(r0 + i, c);
                t[i * C + c] = (float)Y(r0 + i, c);
            }
        float loss = 0;
        CHECK(sz_tensor_write(l.x, x) == SZ_OK && sz_tensor_write(l.target, t) == SZ_OK, "write batch");
        CHECK(sz_model_forward_backward(m, &loss) == SZ_OK, "forward_backward");
        mean += loss / M;
    }
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    CHECK(sz_model_update(m, &tc, 1) == SZ_OK, "update");
    CHECK(sz_model_grad_read(m, 0, 0, g) == SZ_OK, "read gradient");
    /* the reference over all R rows, in double */
    double want[C * C] = {0}, ref_loss = 0;
    for (int r = 0; r < R; r++)
        for (int o = 0; o < C; o++) {
            double p = 0;
            for (int c = 0; c < C; c++)
                p += X(r, c) * w[o * C + c];
            double e = p - (float)Y(r, o);
            ref_loss += e * e / (C * (double)R);
            for (int c = 0; c < C; c++)
                want[o * C + c] += 2.0 * e * (float)X(r, c) / (C * (double)R);
        }
    double worst = 0, gmax = 0;
    for (int i = 0; i < C * C; i++) {
        worst = fmax(worst, fabs(g[i] - want[i]));
        gmax = fmax(gmax, fabs(want[i]));
    }
    CHECK(worst <= 1e-5 * gmax, "N_d %d, M %d, stage %d: gradient off the mean loss's by %g (max %g)", nd, M, stage,
          worst, gmax);
    CHECK(fabs(mean - ref_loss) <= 1e-5 * ref_loss, "N_d %d, M %d: loss %.9g, the global mean %.9g", nd, M, mean,
          ref_loss);
    sz_model_free(m);
}

int main(int argc, char **argv)
{
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK)
        return 1;
    for (int M = 1; M <= 2; M++)
        for (int stage = 0; stage <= 3; stage += 3)
            run(M, stage);
    return sz_test_finish("test_mse_ranks", "");
}
