/* tests/test_autograd.c — models written as their forward (include/starzero_starpu.h, "an operation
 * with its backward"), through the public headers only:
 *  - a two-unit model with an op of the app's own (out = 2 inp, its backward given) and a tensor
 *    two ops read (its gradient accumulates) trains to bitwise the same losses and parameter
 *    gradients as the same model with hand-written backwards (zeroes included), and as one with its
 *    head written by hand beside a derived layer (sz_model_grad_of), at ZeRO stages 0 and 3, with
 *    checkpointing;
 *  - the derived gradients against central finite differences of the loss (double sums);
 *  - the check mode (sz_zero_config.check): a derived backward passes it and trains to the same
 *    losses; a hand-written backward missing one sz_op_zero fails it naming the unit and the
 *    tensor; a loss gradient doubled fails it with the ratio 2;
 *  - an op without a backward in the gradient's path, and an op overwriting what an earlier op's
 *    backward reads: the step is refused with a message naming the op and the tensor (a model only
 *    evaluated needs no backward). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "starzero_starpu.h"
#include "sz_test.h"

static sz_context *ctx;
static char errors[8192];
static void capture_log(sz_log_level level, const char *msg, void *user)
{
    (void)user;
    size_t n = strlen(errors);
    if (level == SZ_LOG_ERROR)
        snprintf(errors + n, sizeof errors - n, "%s\n", msg);
}

/* ---- the app's own op: out = 2 inp; its backward dinp += 2 dout ---------------------------- */
struct twice_args { int64_t n; int acc; };
static void twice_cpu(void *b[], void *arg)
{
    const struct twice_args *a = sz_task_params(arg);
    float *out = sz_task_ptr(b, arg, 0);
    const float *in = sz_task_ptr(b, arg, 1);
    for (int64_t i = 0; i < a->n; i++)
        out[i] = (a->acc ? out[i] : 0.0f) + 2.0f * in[i];
}
static struct starpu_perfmodel twice_model = {.type = STARPU_HISTORY_BASED, .symbol = "test_twice"};
static struct starpu_codelet twice_cl = {.cpu_funcs = {twice_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                         .name = "twice", .model = &twice_model};

static sz_status twice_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, int64_t n)
{
    struct twice_args a = {n, 1};
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE, SZ_DTYPE_F32, n, "dinp", 0}, {dout, SZ_READ, SZ_DTYPE_F32, n, "dout", 0}};
    return sz_task_submit(u, &twice_cl, "twice_bwd", t, 2, &a, sizeof a);
}
static sz_status twice_grad(sz_unit *u, const sz_op_record *r)
{
    const struct twice_args *a = sz_record_params(r);
    return twice_bwd(u, sz_record_grad(u, r, 1), sz_record_grad(u, r, 0), a->n);
}
static int plain_twice; /* 1: submitted without its backward (the refusal test) */
static sz_status twice(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n)
{
    struct twice_args a = {n, 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, n, "out", 0}, {inp, SZ_READ, SZ_DTYPE_F32, n, "inp", 0}};
    return plain_twice ? sz_task_submit(u, &twice_cl, "twice", t, 2, &a, sizeof a)
                       : sz_task_submit_diff(u, &twice_cl, "twice", t, 2, &a, sizeof a, NULL, twice_grad);
}

/* ---- the model: h = x W1 + b1, s = 2 gelu(h), r = s + h | logits = r W2 + b2, softmax-xent ---- */
enum { N = 8, IN = 6, HID = 16, K = 5 };
struct net {
    sz_model *m;
    sz_tensor *x, *labels, *h, *g, *s, *r, *logits, *probs, *losses;
    sz_tensor *dx, *dh, *dg, *ds, *dr, *dlogits; /* the hand-written backwards' */
    int clobber; /* 1: unit 1's forward then overwrites h in place (the refusal test) */
    int no_zero; /* 1: l1_bwd forgets sz_op_zero(dg) (the check mode's test) */
    int doubled; /* 1: l2_bwd doubles dlogits (a loss gradient scaled wrong) */
    sz_tensor *dlogits2;
};
static const sz_param_spec L1[] = {{"w1", HID, IN, 1, SZ_INIT_NORMAL, 0.3f}, {"b1", 1, HID, 0, SZ_INIT_NORMAL, 0.1f}};
static const sz_param_spec L2[] = {{"w2", K, HID, 1, SZ_INIT_NORMAL, 0.3f}, {"b2", 1, K, 0, SZ_INIT_NORMAL, 0.1f}};

#define TRY(x) do { sz_status st_ = (x); if (st_ != SZ_OK) return st_; } while (0)
static sz_status l1_fwd(sz_unit *u, void *p)
{
    struct net *n = p;
    TRY(sz_op_matmul_fwd(u, n->h, n->x, sz_unit_param(u, 0), sz_unit_param(u, 1), N, IN, HID));
    TRY(sz_op_gelu_fwd(u, n->g, n->h, N * HID));
    TRY(twice(u, n->s, n->g, N * HID));
    TRY(sz_op_residual_fwd(u, n->r, n->s, n->h, N * HID));
    return n->clobber ? twice(u, n->h, n->r, N * HID) : SZ_OK;
}
static sz_status l1_bwd(sz_unit *u, void *p)
{
    struct net *n = p;
    TRY(sz_op_zero(u, n->ds));
    TRY(sz_op_zero(u, n->dh));
    if (!n->no_zero)
        TRY(sz_op_zero(u, n->dg));
    TRY(sz_op_zero(u, n->dx));
    TRY(sz_op_residual_bwd(u, n->ds, n->dh, n->dr, N * HID));
    TRY(twice_bwd(u, n->dg, n->ds, N * HID));
    TRY(sz_op_gelu_bwd(u, n->dh, n->h, n->dg, N * HID));
    return sz_op_matmul_bwd(u, n->dx, sz_unit_grad(u, 0), sz_unit_grad(u, 1), n->dh, n->x, sz_unit_param(u, 0), N, IN,
                            HID);
}
static sz_status l2_fwd(sz_unit *u, void *p)
{
    struct net *n = p;
    TRY(sz_op_matmul_fwd(u, n->logits, n->r, sz_unit_param(u, 0), sz_unit_param(u, 1), N, HID, K));
    return sz_op_softmax_xent_fwd(u, n->losses, n->probs, n->logits, n->labels, N, K, K);
}
static sz_status l2_bwd(sz_unit *u, void *p)
{
    struct net *n = p;
    TRY(sz_op_zero(u, n->dr));
    TRY(sz_op_softmax_xent_bwd(u, n->dlogits, n->probs, n->labels, N, K, K));
    sz_tensor *dl = n->dlogits;
    if (n->doubled) {
        TRY(sz_op_zero(u, n->dlogits2));
        TRY(twice_bwd(u, n->dlogits2, n->dlogits, N * K));
        dl = n->dlogits2;
    }
    return sz_op_matmul_bwd(u, n->dr, sz_unit_grad(u, 0), sz_unit_grad(u, 1), dl, n->r, sz_unit_param(u, 0), N, HID,
                            K);
}

/* The head written by hand beside a derived layer1: its input's gradient is the engine's. */
static sz_status l2_bwd_mixed(sz_unit *u, void *p)
{
    struct net *n = p;
    sz_tensor *dr = sz_model_grad_of(sz_unit_model(u), n->r);
    if (!dr)
        return SZ_ERR_STATE;
    TRY(sz_op_zero(u, dr)); /* its backward runs first: it zeroes what it adds into */
    TRY(sz_op_softmax_xent_bwd(u, n->dlogits, n->probs, n->labels, N, K, K));
    return sz_op_matmul_bwd(u, dr, sz_unit_grad(u, 0), sz_unit_grad(u, 1), n->dlogits, n->r, sz_unit_param(u, 0), N,
                            HID, K);
}

static float xs[N * IN];
static int labels[N];

/* Builds the model (hand-written backwards or derived ones) under stage / checkpointing / check
 * mode, with the mistakes `mistake` asks for (1: no zero, 2: doubled). */
static sz_status build_with(struct net *n, int hand, int stage, int ck, int check, int mistake)
{
    memset(n, 0, sizeof *n);
    n->no_zero = mistake == 1;
    n->doubled = mistake == 2;
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.stage = stage;
    z.checkpoint = ck;
    z.check = check;
    sz_status st = sz_model_init(&n->m, ctx);
    if (st != SZ_OK)
        return st;
    if ((st = sz_model_set_zero(n->m, &z)) != SZ_OK)
        return st;
    /* hand: 0 derived, 1 hand-written, 2 layer1 derived and layer2 hand-written */
    sz_unit_desc u1 = {.name = "layer1", .params = L1, .nparams = 2, .forward = l1_fwd,
                       .backward = hand == 1 ? l1_bwd : NULL, .user = n, .checkpointable = 1};
    sz_unit_desc u2 = {.name = "layer2", .params = L2, .nparams = 2, .forward = l2_fwd,
                       .backward = hand == 2 ? l2_bwd_mixed : hand ? l2_bwd : NULL, .user = n};
    if ((st = sz_model_add_unit(n->m, &u1)) != SZ_OK || (st = sz_model_add_unit(n->m, &u2)) != SZ_OK)
        return st;
    n->x = sz_model_tensor(n->m, "x", SZ_DTYPE_F32, N * IN);
    n->labels = sz_model_tensor(n->m, "labels", SZ_DTYPE_I32, N);
    n->h = sz_model_activation(n->m, 0, "h", SZ_DTYPE_F32, N * HID);
    n->g = sz_model_activation(n->m, 0, "g", SZ_DTYPE_F32, N * HID);
    n->s = sz_model_activation(n->m, 0, "s", SZ_DTYPE_F32, N * HID);
    n->r = sz_model_tensor(n->m, "r", SZ_DTYPE_F32, N * HID);
    n->logits = sz_model_tensor(n->m, "logits", SZ_DTYPE_F32, N * K);
    n->probs = sz_model_tensor(n->m, "probs", SZ_DTYPE_F32, N * K);
    n->losses = sz_model_tensor(n->m, "losses", SZ_DTYPE_F32, N);
    if (hand == 2)
        n->dlogits = sz_model_tensor(n->m, "dlogits", SZ_DTYPE_F32, N * K);
    if (hand == 1) {
        n->dx = sz_model_tensor(n->m, "dx", SZ_DTYPE_F32, N * IN);
        n->dh = sz_model_tensor(n->m, "dh", SZ_DTYPE_F32, N * HID);
        n->dg = sz_model_tensor(n->m, "dg", SZ_DTYPE_F32, N * HID);
        n->ds = sz_model_tensor(n->m, "ds", SZ_DTYPE_F32, N * HID);
        n->dr = sz_model_tensor(n->m, "dr", SZ_DTYPE_F32, N * HID);
        n->dlogits = sz_model_tensor(n->m, "dlogits", SZ_DTYPE_F32, N * K);
        n->dlogits2 = sz_model_tensor(n->m, "dlogits2", SZ_DTYPE_F32, N * K);
    }
    if ((st = sz_model_set_loss(n->m, n->losses)) != SZ_OK || (st = sz_model_finalize(n->m)) != SZ_OK ||
        (st = sz_model_init_params(n->m, 5)) != SZ_OK)
        return st;
    if ((st = sz_tensor_write(n->x, xs)) != SZ_OK)
        return st;
    return sz_tensor_write(n->labels, labels);
}

static sz_status build(struct net *n, int hand, int stage, int ck) { return build_with(n, hand, stage, ck, 0, 0); }

/* Three steps: the losses and the last step's parameter gradients (all four tensors, flat). */
static int train(struct net *n, float loss[3], float *grads)
{
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 1e-2f;
    for (int s = 0; s < 3; s++)
        if (sz_model_train_step(n->m, &tc, s + 1, &loss[s]) != SZ_OK)
            return 0;
    float *g = grads;
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 2; i++) {
            const sz_param_spec *p = u ? &L2[i] : &L1[i];
            if (sz_model_grad_read(n->m, u, i, g) != SZ_OK)
                return 0;
            g += p->rows * p->cols;
        }
    return 1;
}
enum { NG = HID * IN + HID + K * HID + K };

static void test_same_as_hand(void)
{
    for (int stage = 0; stage <= 3; stage += 3)
        for (int ck = 0; ck <= 1; ck++) {
            struct net a, b, c;
            float la[3], lb[3], lc[3], ga[NG], gb[NG], gc[NG];
            CU_ASSERT_FATAL(build(&a, 1, stage, ck) == SZ_OK);
            CU_ASSERT_FATAL(train(&a, la, ga));
            sz_model_free(a.m);
            CU_ASSERT_FATAL(build(&b, 0, stage, ck) == SZ_OK);
            CU_ASSERT_FATAL(train(&b, lb, gb));
            sz_model_free(b.m);
            CU_ASSERT_FATAL(build(&c, 2, stage, ck) == SZ_OK); /* one unit by hand beside a derived one */
            CU_ASSERT_FATAL(train(&c, lc, gc));
            sz_model_free(c.m);
            CU_ASSERT(memcmp(la, lb, sizeof la) == 0);
            CU_ASSERT(memcmp(ga, gb, sizeof ga) == 0);
            CU_ASSERT(memcmp(la, lc, sizeof la) == 0);
            CU_ASSERT(memcmp(ga, gc, sizeof ga) == 0);
            double gn = 0;
            for (int i = 0; i < NG; i++)
                gn += (double)gb[i] * gb[i];
            CU_ASSERT(gn > 1e-6); /* gradients flowed */
            printf("\n  stage %d%s: losses %.6f %.6f %.6f, |g| %.6f: derived = hand-written = mixed, bitwise", stage,
                   ck ? " + checkpointing" : "", lb[0], lb[1], lb[2], sqrt(gn));
        }
}

/* The loss as a double from parameters p (flat, the four tensors) on the host: the same model. */
static double host_loss(const double *p)
{
    const double *w1 = p, *b1 = w1 + HID * IN, *w2 = b1 + HID, *b2 = w2 + K * HID;
    double total = 0;
    for (int i = 0; i < N; i++) {
        double r[HID], lg[K], mx = -1e300, z = 0;
        for (int j = 0; j < HID; j++) {
            double h = b1[j];
            for (int k = 0; k < IN; k++)
                h += w1[j * IN + k] * xs[i * IN + k];
            double gl = 0.5 * h * (1 + tanh(sqrt(2 / M_PI) * (h + 0.044715 * h * h * h)));
            r[j] = 2 * gl + h;
        }
        for (int c = 0; c < K; c++) {
            lg[c] = b2[c];
            for (int j = 0; j < HID; j++)
                lg[c] += w2[c * HID + j] * r[j];
            mx = lg[c] > mx ? lg[c] : mx;
        }
        for (int c = 0; c < K; c++)
            z += exp(lg[c] - mx);
        total += log(z) + mx - lg[labels[i]];
    }
    return total / N;
}

static void test_finite_differences(void)
{
    struct net n;
    CU_ASSERT_FATAL(build(&n, 0, 0, 0) == SZ_OK);
    float p[NG], g[NG], *q = p, loss;
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 2; i++) {
            CU_ASSERT_FATAL(sz_model_param_read(n.m, u, i, q) == SZ_OK);
            q += (u ? L2[i] : L1[i]).rows * (u ? L2[i] : L1[i]).cols;
        }
    CU_ASSERT_FATAL(sz_model_forward_backward(n.m, &loss) == SZ_OK);
    q = g;
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 2; i++) {
            CU_ASSERT_FATAL(sz_model_grad_read(n.m, u, i, q) == SZ_OK);
            q += (u ? L2[i] : L1[i]).rows * (u ? L2[i] : L1[i]).cols;
        }
    sz_model_free(n.m);
    double pd[NG], worst = 0;
    for (int i = 0; i < NG; i++)
        pd[i] = p[i];
    CU_ASSERT(fabs(host_loss(pd) - loss) < 1e-5);
    for (int i = 0; i < NG; i += 3) {
        double e = 1e-4, keep = pd[i];
        pd[i] = keep + e;
        double up = host_loss(pd);
        pd[i] = keep - e;
        double dn = host_loss(pd);
        pd[i] = keep;
        double fd = (up - dn) / (2 * e), err = fabs(fd - g[i]) / (fabs(fd) + 1e-3);
        worst = err > worst ? err : worst;
    }
    printf("\n  derived gradients vs central differences: worst relative error %.2e", worst);
    CU_ASSERT(worst < 1e-3);
}

static void test_check_mode(void)
{
    struct net n;
    float l0[3], l1[3], g[NG];
    CU_ASSERT_FATAL(build(&n, 0, 3, 1) == SZ_OK);
    CU_ASSERT_FATAL(train(&n, l0, g));
    sz_model_free(n.m);
    errors[0] = 0;
    CU_ASSERT_FATAL(build_with(&n, 0, 3, 1, 1, 0) == SZ_OK); /* derived: passes, the same losses */
    CU_ASSERT(train(&n, l1, g));
    CU_ASSERT(memcmp(l0, l1, sizeof l0) == 0);
    CU_ASSERT(errors[0] == 0);
    sz_model_free(n.m);
    CU_ASSERT_FATAL(build_with(&n, 1, 0, 0, 1, 0) == SZ_OK); /* hand-written, right: passes */
    CU_ASSERT(train(&n, l1, g));
    CU_ASSERT(errors[0] == 0);
    sz_model_free(n.m);

    for (int mistake = 1; mistake <= 2; mistake++) {
        errors[0] = 0;
        CU_ASSERT_FATAL(build_with(&n, 1, 0, 0, 1, mistake) == SZ_OK);
        sz_train_config tc;
        sz_train_config_defaults(&tc);
        float loss;
        sz_status st = sz_model_forward_backward(n.m, &loss);
        if (st == SZ_OK)
            st = sz_model_update(n.m, &tc, 1);
        CU_ASSERT_EQUAL(st, SZ_ERR_INVALID);
        if (mistake == 1) {
            CU_ASSERT(strstr(errors, "bwd:layer1:twice_bwd reads or adds into 'dg'") &&
                      strstr(errors, "missing sz_op_zero"));
        } else {
            CU_ASSERT(strstr(errors, "gradient / difference = 2.0") && strstr(errors, "sz_unit_loss_scale"));
        }
        printf("\n  %s", errors);
        sz_model_free(n.m);
    }
}

static void test_refusals(void)
{
    struct net n;
    float loss;
    plain_twice = 1; /* the gradient must pass through an op with no backward */
    errors[0] = 0;
    CU_ASSERT_FATAL(build(&n, 0, 0, 0) == SZ_OK); /* a model that is only evaluated needs none */
    CU_ASSERT_EQUAL(sz_model_eval(n.m, &loss), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_forward_backward(n.m, &loss), SZ_ERR_STATE);
    CU_ASSERT(strstr(errors, "op 'twice' has no backward (submitted with sz_task_submit)") &&
              strstr(errors, "unit layer1"));
    printf("\n  %s", errors);
    sz_model_free(n.m);
    plain_twice = 0;

    errors[0] = 0; /* h overwritten after gelu's backward was promised it */
    struct net c;
    memset(&c, 0, sizeof c);
    CU_ASSERT_FATAL(sz_model_init(&c.m, ctx) == SZ_OK);
    c.clobber = 1;
    sz_unit_desc u1 = {.name = "layer1", .params = L1, .nparams = 2, .forward = l1_fwd, .user = &c};
    sz_unit_desc u2 = {.name = "layer2", .params = L2, .nparams = 2, .forward = l2_fwd, .user = &c};
    CU_ASSERT_FATAL(sz_model_add_unit(c.m, &u1) == SZ_OK && sz_model_add_unit(c.m, &u2) == SZ_OK);
    c.x = sz_model_tensor(c.m, "x", SZ_DTYPE_F32, N * IN);
    c.labels = sz_model_tensor(c.m, "labels", SZ_DTYPE_I32, N);
    c.h = sz_model_tensor(c.m, "h", SZ_DTYPE_F32, N * HID);
    c.g = sz_model_tensor(c.m, "g", SZ_DTYPE_F32, N * HID);
    c.s = sz_model_tensor(c.m, "s", SZ_DTYPE_F32, N * HID);
    c.r = sz_model_tensor(c.m, "r", SZ_DTYPE_F32, N * HID);
    c.logits = sz_model_tensor(c.m, "logits", SZ_DTYPE_F32, N * K);
    c.probs = sz_model_tensor(c.m, "probs", SZ_DTYPE_F32, N * K);
    c.losses = sz_model_tensor(c.m, "losses", SZ_DTYPE_F32, N);
    CU_ASSERT_FATAL(sz_model_set_loss(c.m, c.losses) == SZ_OK && sz_model_finalize(c.m) == SZ_OK);
    CU_ASSERT_EQUAL(sz_model_forward_backward(c.m, &loss), SZ_ERR_STATE);
    CU_ASSERT(strstr(errors, "op 'twice' overwrites 'h'") && strstr(errors, "the backward of op 'residual_fwd'"));
    printf("\n  %s", errors);
    sz_model_free(c.m);
}

static int init(void)
{
    srand(3);
    for (int i = 0; i < N * IN; i++)
        xs[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int i = 0; i < N; i++)
        labels[i] = rand() % K;
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
    CU_pSuite s = CU_add_suite("the derived backward", init, clean);
    CU_add_test(s, "derived = hand-written backwards, bitwise (stages 0, 3; checkpointing)", test_same_as_hand);
    CU_add_test(s, "derived gradients against finite differences", test_finite_differences);
    CU_add_test(s, "the check mode: passes derived and right backwards, names a missing zero and a doubled loss "
                   "gradient", test_check_mode);
    CU_add_test(s, "a gradient through an op without a backward, an overwritten input: refused", test_refusals);
    return sz_test_run();
}
