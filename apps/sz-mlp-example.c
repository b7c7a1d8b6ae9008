/* apps/sz-mlp-example.c — how to build your own model on the StarZeRO task API: a two-layer MLP
 * classifier (x -> linear -> GELU -> linear -> softmax cross-entropy) learning a fixed random
 * "teacher" labelling of random points. Each layer is a unit declared by one tensor table and written
 * as its forward: the callback only submits operations; the library derives the backward from them,
 * runs everything as StarPU tasks and does AdamW.
 *   sz-mlp-example [steps]        prints the loss every 20 steps */
#include <stdio.h>
#include <stdlib.h>
#include "starzero.h"

enum { N = 256, IN = 32, HID = 128, CLASSES = 8 };

struct mlp {
    sz_tensor *x, *labels, *h, *hg, *logits, *probs, *losses; /* activations (their gradients: the library's) */
};

/* One table per unit: name, rows, cols, weight decay, init. */
static const sz_param_spec L1[] = {{"w1", HID, IN, 1, SZ_INIT_NORMAL, 0.2f}, {"b1", 1, HID, 0, SZ_INIT_ZERO, 0}};
static const sz_param_spec L2[] = {{"w2", CLASSES, HID, 1, SZ_INIT_NORMAL, 0.1f}, {"b2", 1, CLASSES, 0, SZ_INIT_ZERO, 0}};

static sz_status l1_fwd(sz_unit *u, void *p)
{
    struct mlp *m = p;
    sz_status st = sz_op_matmul_fwd(u, m->h, m->x, sz_unit_param(u, 0), sz_unit_param(u, 1), N, IN, HID);
    return st ? st : sz_op_gelu_fwd(u, m->hg, m->h, (int64_t)N * HID);
}

static sz_status l2_fwd(sz_unit *u, void *p)
{
    struct mlp *m = p;
    sz_status st = sz_op_matmul_fwd(u, m->logits, m->hg, sz_unit_param(u, 0), sz_unit_param(u, 1), N, HID, CLASSES);
    return st ? st : sz_op_softmax_xent_fwd(u, m->losses, m->probs, m->logits, m->labels, N, CLASSES, CLASSES);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    sz_context *ctx;
    sz_model *model;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK || sz_model_init(&model, ctx) != SZ_OK)
        return 1;
    struct mlp m;
    sz_unit_desc u1 = {.name = "layer1", .params = L1, .nparams = 2, .forward = l1_fwd, .user = &m};
    sz_unit_desc u2 = {.name = "layer2", .params = L2, .nparams = 2, .forward = l2_fwd, .user = &m};
    sz_model_add_unit(model, &u1);
    sz_model_add_unit(model, &u2);
    m.x = sz_model_tensor(model, "x", SZ_DTYPE_F32, N * IN);
    m.labels = sz_model_tensor(model, "labels", SZ_DTYPE_I32, N);
    m.h = sz_model_tensor(model, "h", SZ_DTYPE_F32, N * HID);
    m.hg = sz_model_tensor(model, "h_gelu", SZ_DTYPE_F32, N * HID);
    m.logits = sz_model_tensor(model, "logits", SZ_DTYPE_F32, N * CLASSES);
    m.probs = sz_model_tensor(model, "probs", SZ_DTYPE_F32, N * CLASSES);
    m.losses = sz_model_tensor(model, "losses", SZ_DTYPE_F32, N);
    if (sz_model_set_loss(model, m.losses) != SZ_OK || sz_model_finalize(model) != SZ_OK ||
        sz_model_init_params(model, 7) != SZ_OK)
        return 1;

    /* Data: random points labelled by the argmax of a fixed random linear "teacher". */
    static float x[N * IN], teacher[CLASSES * IN];
    static int labels[N];
    srand(1);
    for (int i = 0; i < N * IN; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int i = 0; i < CLASSES * IN; i++) teacher[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int n = 0; n < N; n++) {
        float best = -1e30f;
        for (int c = 0; c < CLASSES; c++) {
            float s = 0;
            for (int k = 0; k < IN; k++) s += teacher[c * IN + k] * x[n * IN + k];
            if (s > best) { best = s; labels[n] = c; }
        }
    }
    sz_tensor_write(m.x, x);
    sz_tensor_write(m.labels, labels);

    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 3e-3f;
    float loss = 0;
    for (int s = 1; s <= steps; s++) {
        if (sz_model_train_step(model, &tc, s, &loss) != SZ_OK)
            return 1;
        if (s == 1 || s % 20 == 0)
            printf("step %4d: loss %.4f\n", s, loss);
    }
    sz_model_free(model);
    sz_context_free(ctx);
    return 0;
}
