/* tests/test_user_op.c — an operation of the app's own, written with the public headers only
 * (starzero.h, starzero_starpu.h) as a new user would: it runs inside a unit's callback as a task
 * named "<phase>:<unit>:<op>" with the right values, a tensor too small is refused naming the op
 * and the tensor; a target or token outside the vocabulary fails the step with a message naming
 * the op, the value, the row and the vocabulary (SZ_ERR_INVALID, no crash); call-order mistakes
 * return SZ_ERR_STATE with a message; the loss-gradient scale is 1/(N·M·N_d); the codelet registry
 * lists the engine's codelets with their implementations. One rank. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "starzero.h"
#include "starzero_starpu.h"
#include "sz_test.h"

static sz_context *ctx;
static char errors[8192]; /* every error message logged since the last clear */

static void capture_log(sz_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level != SZ_LOG_ERROR)
        return;
    size_t n = strlen(errors);
    snprintf(errors + n, sizeof errors - n, "%s\n", msg);
}
static int logged(const char *s) { return strstr(errors, s) != NULL; }

/* ---- the app's own op: out[n, c] = inp[n, c] * w[c] + bias ----------------------------------- */
struct scale_rows_args {
    int N, C;
    float bias;
};

static char seen_name[64], seen_task_name[64];

static void scale_rows_cpu(void *buffers[], void *cl_arg)
{
    const struct scale_rows_args *a = sz_task_params(cl_arg);
    float *out = sz_task_ptr(buffers, cl_arg, 0);
    const float *inp = sz_task_ptr(buffers, cl_arg, 1), *w = sz_task_ptr(buffers, cl_arg, 2);
    for (int n = 0; n < a->N; n++)
        for (int c = 0; c < a->C; c++)
            out[(size_t)n * a->C + c] = inp[(size_t)n * a->C + c] * w[c] + a->bias;
    snprintf(seen_name, sizeof seen_name, "%s", sz_task_layout_of(cl_arg)->name);
    struct starpu_task *t = starpu_task_get_current();
    snprintf(seen_task_name, sizeof seen_task_name, "%s", t && t->name ? t->name : "");
}

static struct starpu_perfmodel scale_rows_model = {.type = STARPU_HISTORY_BASED, .symbol = "test_scale_rows"};
static struct starpu_codelet scale_rows_cl = {.cpu_funcs = {scale_rows_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                              .name = "scale_rows", .model = &scale_rows_model};

static sz_status scale_rows(sz_unit *u, sz_tensor *out, sz_tensor *inp, sz_tensor *w, int N, int C, float bias)
{
    struct scale_rows_args a = {N, C, bias};
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, (int64_t)N * C, "out", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, (int64_t)N * C, "inp", 0},
                          {w, SZ_READ, SZ_DTYPE_F32, C, "w", 0}};
    return sz_task_submit(u, &scale_rows_cl, "scale_rows", t, 3, &a, sizeof a);
}

/* ---- a one-unit model: logits = scale_rows(x, w), softmax cross-entropy over C classes -------- */
enum { N = 6, C = 5 };
struct tiny {
    sz_model *m;
    sz_tensor *x, *logits, *probs, *targets, *losses, *dlogits, *small;
    int bad_w;          /* pass a tensor of C - 1 elements as w */
    float loss_scale;   /* sz_unit_loss_scale as the backward saw it */
};

static sz_status tiny_fwd(sz_unit *u, void *user)
{
    struct tiny *t = user;
    sz_status st = scale_rows(u, t->logits, t->x, t->bad_w ? t->small : sz_unit_param(u, 0), N, C, 0.25f);
    if (st == SZ_OK)
        st = sz_op_softmax_xent_fwd(u, t->losses, t->probs, t->logits, t->targets, N, C, C);
    return st;
}

static sz_status tiny_bwd(sz_unit *u, void *user)
{
    struct tiny *t = user;
    t->loss_scale = sz_unit_loss_scale(u);
    /* d(loss)/d(w) is not needed here: the unit's backward only checks the softmax's */
    return sz_op_softmax_xent_bwd(u, t->dlogits, t->probs, t->targets, N, C, C);
}

static int tiny_build(struct tiny *t, int micro_batches)
{
    memset(t, 0, sizeof *t);
    static const sz_param_spec spec[] = {{"w", 1, C, 0, SZ_INIT_ONE, 0.0f}};
    if (sz_model_init(&t->m, ctx) != SZ_OK)
        return 0;
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.micro_batches = micro_batches;
    sz_unit_desc d = {.name = "body", .params = spec, .nparams = 1, .forward = tiny_fwd, .backward = tiny_bwd,
                      .user = t};
    if (sz_model_set_zero(t->m, &z) != SZ_OK || sz_model_add_unit(t->m, &d) != SZ_OK)
        return 0;
    t->x = sz_model_tensor(t->m, "x", SZ_DTYPE_F32, N * C);
    t->logits = sz_model_tensor(t->m, "logits", SZ_DTYPE_F32, N * C);
    t->probs = sz_model_tensor(t->m, "probs", SZ_DTYPE_F32, N * C);
    t->targets = sz_model_tensor(t->m, "targets", SZ_DTYPE_I32, N);
    t->losses = sz_model_tensor(t->m, "losses", SZ_DTYPE_F32, N);
    t->dlogits = sz_model_tensor(t->m, "dlogits", SZ_DTYPE_F32, N * C);
    t->small = sz_model_tensor(t->m, "small", SZ_DTYPE_F32, C - 1);
    if (!t->x || !t->logits || !t->probs || !t->targets || !t->losses || !t->dlogits || !t->small)
        return 0;
    if (sz_model_set_loss(t->m, t->losses) != SZ_OK || sz_model_finalize(t->m) != SZ_OK)
        return 0;
    float x[N * C], w[C];
    int32_t tg[N];
    for (int i = 0; i < N * C; i++)
        x[i] = 0.1f * (float)(i % 7) - 0.3f;
    for (int c = 0; c < C; c++)
        w[c] = 0.5f + 0.25f * (float)c;
    for (int n = 0; n < N; n++)
        tg[n] = n % C;
    return sz_tensor_write(t->x, x) == SZ_OK && sz_tensor_write(t->targets, tg) == SZ_OK &&
           sz_model_param_write(t->m, 0, 0, w) == SZ_OK;
}

static void test_user_op_runs(void)
{
    struct tiny t;
    CU_ASSERT_FATAL(tiny_build(&t, 1));
    seen_name[0] = seen_task_name[0] = 0;
    float loss;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_OK);
    CU_ASSERT_STRING_EQUAL(seen_name, "fwd:body:scale_rows");
    CU_ASSERT_STRING_EQUAL(seen_task_name, "fwd:body:scale_rows");
    float x[N * C], logits[N * C], w[C];
    CU_ASSERT_EQUAL(sz_tensor_read(t.x, x), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(t.logits, logits), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_param_read(t.m, 0, 0, w), SZ_OK);
    int wrong = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            wrong += logits[n * C + c] != x[n * C + c] * w[c] + 0.25f;
    CU_ASSERT_EQUAL(wrong, 0);
    /* the loss is the mean cross-entropy of those logits */
    int32_t tg[N];
    CU_ASSERT_EQUAL(sz_tensor_read(t.targets, tg), SZ_OK);
    double ref = 0.0;
    for (int n = 0; n < N; n++) {
        double mx = logits[n * C], s = 0.0;
        for (int c = 1; c < C; c++)
            mx = fmax(mx, logits[n * C + c]);
        for (int c = 0; c < C; c++)
            s += exp(logits[n * C + c] - mx);
        ref += -(logits[n * C + tg[n]] - mx - log(s));
    }
    CU_ASSERT_DOUBLE_EQUAL(loss, ref / N, 1e-5);
    sz_model_free(t.m);
}

static void test_loss_scale(void)
{
    for (int M = 1; M <= 2; M++) {
        struct tiny t;
        CU_ASSERT_FATAL(tiny_build(&t, M));
        float loss;
        for (int k = 0; k < M; k++)
            CU_ASSERT_EQUAL(sz_model_forward_backward(t.m, &loss), SZ_OK);
        CU_ASSERT_EQUAL(t.loss_scale, 1.0f / ((float)N * (float)M * 1.0f)); /* N_d = 1 */
        /* dlogits = (probs - onehot) * 1/(N·M): each row sums to 0, the target's entry is negative */
        float dl[N * C], p[N * C];
        CU_ASSERT_EQUAL(sz_tensor_read(t.dlogits, dl), SZ_OK);
        CU_ASSERT_EQUAL(sz_tensor_read(t.probs, p), SZ_OK);
        double worst = 0.0;
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++)
                worst = fmax(worst, fabs(dl[n * C + c] - (p[n * C + c] - (c == n % C)) / (double)(N * M)));
        CU_ASSERT(worst < 1e-7);
        sz_model_free(t.m);
    }
}

static void test_user_op_wrong_size(void)
{
    struct tiny t;
    CU_ASSERT_FATAL(tiny_build(&t, 1));
    t.bad_w = 1;
    errors[0] = 0;
    float loss;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s", errors);
    CU_ASSERT(logged("scale_rows (fwd:body:scale_rows): tensor 'w' (small) has 4 elements of f32, the op needs 5"));
    sz_model_free(t.m);
}

static void test_bad_target(void)
{
    struct tiny t;
    CU_ASSERT_FATAL(tiny_build(&t, 1));
    int32_t tg[N];
    for (int n = 0; n < N; n++)
        tg[n] = n % C;
    tg[3] = C + 2; /* >= V */
    CU_ASSERT_EQUAL(sz_tensor_write(t.targets, tg), SZ_OK);
    errors[0] = 0;
    float loss;
    CU_ASSERT_EQUAL(sz_model_forward_backward(t.m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s", errors);
    CU_ASSERT(logged("fwd:body:softmax_xent_fwd: target 7 at row 3 is outside the vocabulary [0, 5)"));
    tg[3] = -1;
    CU_ASSERT_EQUAL(sz_tensor_write(t.targets, tg), SZ_OK);
    errors[0] = 0;
    CU_ASSERT_EQUAL(sz_model_eval(t.m, &loss), SZ_ERR_INVALID);
    CU_ASSERT(logged("softmax_xent_fwd: target -1 at row 3 is outside the vocabulary [0, 5)"));
    sz_model_free(t.m);
}

/* ---- the encoder refuses a token outside wte's rows ----------------------------------------- */
enum { EB = 2, ET = 3, EC = 4, EV = 7 };
struct enc {
    sz_tensor *tokens, *out, *losses;
};
static sz_status enc_fwd(sz_unit *u, void *user)
{
    struct enc *e = user;
    return sz_op_encoder_fwd(u, e->out, e->tokens, sz_unit_param(u, 0), sz_unit_param(u, 1), EB, ET, EC);
}

static void test_bad_token(void)
{
    static const sz_param_spec spec[] = {{"wte", EV, EC, 0, SZ_INIT_ONE, 0.0f}, {"wpe", ET, EC, 0, SZ_INIT_ZERO, 0.0f}};
    struct enc e;
    sz_model *m = NULL;
    CU_ASSERT_FATAL(sz_model_init(&m, ctx) == SZ_OK);
    sz_unit_desc d = {.name = "embed", .params = spec, .nparams = 2, .forward = enc_fwd, .user = &e};
    CU_ASSERT_FATAL(sz_model_add_unit(m, &d) == SZ_OK);
    e.tokens = sz_model_tensor(m, "tokens", SZ_DTYPE_I32, EB * ET);
    e.out = sz_model_tensor(m, "out", SZ_DTYPE_F32, EB * ET * EC);
    e.losses = sz_model_tensor(m, "losses", SZ_DTYPE_F32, EB * ET);
    CU_ASSERT_FATAL(e.tokens && e.out && e.losses);
    CU_ASSERT_FATAL(sz_model_set_loss(m, e.losses) == SZ_OK && sz_model_finalize(m) == SZ_OK);
    int32_t tok[EB * ET] = {0, 1, 2, 3, 4, 5};
    float loss;
    CU_ASSERT_EQUAL(sz_tensor_write(e.tokens, tok), SZ_OK);
    CU_ASSERT_EQUAL(sz_model_eval(m, &loss), SZ_OK);
    tok[4] = 1000;
    CU_ASSERT_EQUAL(sz_tensor_write(e.tokens, tok), SZ_OK);
    errors[0] = 0;
    CU_ASSERT_EQUAL(sz_model_eval(m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s", errors);
    CU_ASSERT(logged("fwd:embed:encoder_fwd: token 1000 at row 4 is outside the vocabulary [0, 7)"));
    sz_model_free(m);
}

/* ---- a wrapper's own shape check names the op and the task ----------------------------------- */
static sz_status att_fwd(sz_unit *u, void *user)
{
    sz_tensor **t = user;
    return sz_op_attention_fwd(u, t[0], t[1], t[3], 1, 2, 6, 4); /* C = 6 is no multiple of NH = 4 */
}

static void test_wrapper_shape_check(void)
{
    sz_model *m = NULL;
    sz_tensor *t[5];
    CU_ASSERT_FATAL(sz_model_init(&m, ctx) == SZ_OK);
    sz_unit_desc d = {.name = "attn", .forward = att_fwd, .user = t};
    CU_ASSERT_FATAL(sz_model_add_unit(m, &d) == SZ_OK);
    t[0] = sz_model_tensor(m, "out", SZ_DTYPE_F32, 12);
    t[1] = sz_model_tensor(m, "preatt", SZ_DTYPE_F32, 16);
    t[2] = sz_model_tensor(m, "att", SZ_DTYPE_F32, 16);
    t[3] = sz_model_tensor(m, "qkv", SZ_DTYPE_F32, 36);
    t[4] = sz_model_tensor(m, "losses", SZ_DTYPE_F32, 2);
    CU_ASSERT_FATAL(sz_model_set_loss(m, t[4]) == SZ_OK && sz_model_finalize(m) == SZ_OK);
    errors[0] = 0;
    float loss;
    CU_ASSERT_EQUAL(sz_model_eval(m, &loss), SZ_ERR_INVALID);
    printf("\n  logged: %s", errors);
    CU_ASSERT(logged("attention_fwd (fwd:attn:attention_fwd): "));
    CU_ASSERT(logged("C a multiple of NH"));
    sz_model_free(m);
}

/* ---- layernorm without bias through the op (b and db NULL) ------------------------------------ */
enum { LN = 3, LC = 8 };
static sz_tensor *ln_t[6]; /* x, out, mean, rstd, dx, dout */
static sz_status ln_fwd(sz_unit *u, void *user)
{
    (void)user;
    return sz_op_layernorm_fwd(u, ln_t[1], ln_t[2], ln_t[3], ln_t[0], sz_unit_param(u, 0), NULL, LN, LC);
}

static void test_layernorm_no_bias(void)
{
    static const sz_param_spec spec[] = {{"w", 1, LC, 0, SZ_INIT_ONE, 0.0f}};
    sz_model *m = NULL;
    CU_ASSERT_FATAL(sz_model_init(&m, ctx) == SZ_OK);
    sz_unit_desc d = {.name = "ln", .params = spec, .nparams = 1, .forward = ln_fwd};
    CU_ASSERT_FATAL(sz_model_add_unit(m, &d) == SZ_OK);
    ln_t[0] = sz_model_tensor(m, "x", SZ_DTYPE_F32, LN * LC);
    ln_t[1] = sz_model_tensor(m, "out", SZ_DTYPE_F32, LN * LC);
    ln_t[2] = sz_model_tensor(m, "mean", SZ_DTYPE_F32, LN);
    ln_t[3] = sz_model_tensor(m, "rstd", SZ_DTYPE_F32, LN);
    sz_tensor *losses = sz_model_tensor(m, "losses", SZ_DTYPE_F32, LN);
    CU_ASSERT_FATAL(sz_model_set_loss(m, losses) == SZ_OK && sz_model_finalize(m) == SZ_OK);
    float x[LN * LC], w[LC], out[LN * LC];
    for (int i = 0; i < LN * LC; i++)
        x[i] = (float)((i * 7) % 11) * 0.1f - 0.4f;
    for (int c = 0; c < LC; c++)
        w[c] = 1.0f + 0.1f * (float)c;
    CU_ASSERT(sz_tensor_write(ln_t[0], x) == SZ_OK && sz_model_param_write(m, 0, 0, w) == SZ_OK);
    float loss;
    CU_ASSERT_EQUAL(sz_model_eval(m, &loss), SZ_OK);
    CU_ASSERT_EQUAL(sz_tensor_read(ln_t[1], out), SZ_OK);
    double worst = 0.0;
    for (int n = 0; n < LN; n++) {
        double mu = 0.0, var = 0.0;
        for (int c = 0; c < LC; c++)
            mu += x[n * LC + c];
        mu /= LC;
        for (int c = 0; c < LC; c++)
            var += (x[n * LC + c] - mu) * (x[n * LC + c] - mu);
        double rs = 1.0 / sqrt(var / LC + 1e-5);
        for (int c = 0; c < LC; c++)
            worst = fmax(worst, fabs(out[n * LC + c] - (x[n * LC + c] - mu) * rs * w[c]));
    }
    CU_ASSERT(worst < 1e-5);
    sz_model_free(m);
}

/* ---- call order ------------------------------------------------------------------------------ */
static sz_status nop_fwd(sz_unit *u, void *user)
{
    (void)u;
    (void)user;
    return SZ_OK;
}

static void test_call_order(void)
{
    static const sz_param_spec spec[] = {{"w", 1, 4, 0, SZ_INIT_ONE, 0.0f}};
    sz_unit_desc d = {.name = "u0", .params = spec, .nparams = 1, .forward = nop_fwd, .checkpointable = 1};
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.checkpoint = 1;

    /* sz_model_set_zero after sz_model_activation: the checkpointing decision was already used */
    sz_model *m = NULL;
    CU_ASSERT_FATAL(sz_model_init(&m, ctx) == SZ_OK);
    CU_ASSERT_FATAL(sz_model_add_unit(m, &d) == SZ_OK);
    CU_ASSERT_PTR_NOT_NULL(sz_model_activation(m, 0, "act", SZ_DTYPE_F32, 8));
    errors[0] = 0;
    CU_ASSERT_EQUAL(sz_model_set_zero(m, &z), SZ_ERR_STATE);
    CU_ASSERT(logged("sz_model_set_zero after sz_model_activation"));
    sz_model_free(m);

    /* ... after sz_model_checkpoint, after sz_model_tensor */
    const char *calls[] = {"sz_model_checkpoint", "sz_model_tensor"};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_FATAL(sz_model_init(&m, ctx) == SZ_OK);
        CU_ASSERT_FATAL(sz_model_add_unit(m, &d) == SZ_OK);
        CU_ASSERT_PTR_NOT_NULL(k == 0 ? sz_model_checkpoint(m, 0, "in", SZ_DTYPE_F32, 8)
                                      : sz_model_tensor(m, "x", SZ_DTYPE_F32, 8));
        errors[0] = 0;
        CU_ASSERT_EQUAL(sz_model_set_zero(m, &z), SZ_ERR_STATE);
        char want[96];
        snprintf(want, sizeof want, "sz_model_set_zero after %s", calls[k]);
        CU_ASSERT(logged(want));
        sz_model_free(m);
    }

    /* before any tensor it is fine; after finalize nothing can be added */
    CU_ASSERT_FATAL(sz_model_init(&m, ctx) == SZ_OK);
    CU_ASSERT_EQUAL(sz_model_set_zero(m, &z), SZ_OK);
    CU_ASSERT_FATAL(sz_model_add_unit(m, &d) == SZ_OK);
    CU_ASSERT_PTR_NOT_NULL(sz_model_activation(m, 0, "act", SZ_DTYPE_F32, 8));
    CU_ASSERT_FATAL(sz_model_finalize(m) == SZ_OK);
    errors[0] = 0;
    CU_ASSERT_PTR_NULL(sz_model_tensor(m, "late", SZ_DTYPE_F32, 8));
    CU_ASSERT(logged("sz_model_tensor(\"late\") after sz_model_finalize"));
    errors[0] = 0;
    CU_ASSERT_PTR_NULL(sz_model_activation(m, 0, "late_act", SZ_DTYPE_F32, 8));
    CU_ASSERT(logged("sz_model_activation(\"late_act\") after sz_model_finalize"));
    errors[0] = 0;
    CU_ASSERT_PTR_NULL(sz_model_checkpoint(m, 0, "late_in", SZ_DTYPE_F32, 8));
    CU_ASSERT(logged("sz_model_checkpoint(\"late_in\") after sz_model_finalize"));
    errors[0] = 0;
    sz_unit_desc d2 = d;
    d2.name = "u1";
    CU_ASSERT_EQUAL(sz_model_add_unit(m, &d2), SZ_ERR_STATE);
    CU_ASSERT(logged("sz_model_add_unit(\"u1\") after sz_model_finalize"));
    errors[0] = 0;
    CU_ASSERT_EQUAL(sz_model_set_zero(m, &z), SZ_ERR_STATE);
    CU_ASSERT(logged("sz_model_set_zero after sz_model_finalize"));
    sz_model_free(m);
}

/* ---- the codelet registry ---------------------------------------------------------------------- */
static void test_codelet_registry(void)
{
    int n = sz_codelets_count(), found = 0;
    CU_ASSERT(n >= 30);
    for (int i = 0; i < n; i++) {
        sz_codelet_desc c;
        CU_ASSERT_EQUAL_FATAL(sz_codelet_info(i, &c), SZ_OK);
        CU_ASSERT(c.cpu >= 1); /* every codelet runs on the CPU */
        CU_ASSERT(c.name && c.name[0] && c.doc && c.doc[0]);
        if (!strcmp(c.name, "matmul_fwd") || !strcmp(c.name, "reduce_scatter") || !strcmp(c.name, "rmsnorm_fwd"))
            found++;
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
        /* with CUDA, every codelet but the host-side ones (the MPI collectives) has a CUDA implementation */
        int collective = !strcmp(c.name, "reduce_scatter") || !strcmp(c.name, "all_gather");
#ifdef SZ_HAVE_NCCL
        collective = 0; /* NCCL implementations (tasks/nccl.c) */
#endif
        /* the gradients' rounding folded into the tied / embedding writers: CPU-only by design (the
         * fold is off with CUDA workers) */
        int round_only = !strcmp(c.name, "matmul_bwd_tied") || !strcmp(c.name, "encoder_bwd_tied") ||
                         !strcmp(c.name, "embedding_bwd_round");
        int host_side = collective || round_only; /* clip_scale and account have CUDA implementations too */
        CU_ASSERT_EQUAL(c.cuda, host_side ? 0 : 1);
#endif
        if (!strcmp(c.name, "scale")) { /* the codelet with a CUDA version where the build has CUDA */
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
            CU_ASSERT_EQUAL(c.cuda, 1);
#else
            CU_ASSERT_EQUAL(c.cuda, 0);
#endif
        }
    }
    CU_ASSERT_EQUAL(found, 3);
    sz_codelet_desc c;
    CU_ASSERT_EQUAL(sz_codelet_info(n, &c), SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(sz_codelet_info(-1, &c), SZ_ERR_INVALID);
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
    CU_pSuite s = CU_add_suite("an app's own op and the engine's checks", init, clean);
    CU_add_test(s, "an app-defined op runs in a unit callback, named, with the right values", test_user_op_runs);
    CU_add_test(s, "the loss-gradient scale is 1/(N*M*N_d)", test_loss_scale);
    CU_add_test(s, "a wrong-size tensor is refused, naming op and tensor", test_user_op_wrong_size);
    CU_add_test(s, "a target outside the vocabulary fails the step, named", test_bad_target);
    CU_add_test(s, "a token outside the vocabulary fails the step, named", test_bad_token);
    CU_add_test(s, "a wrapper's shape check names op and task", test_wrapper_shape_check);
    CU_add_test(s, "layernorm without bias", test_layernorm_no_bias);
    CU_add_test(s, "call-order mistakes return SZ_ERR_STATE with a message", test_call_order);
    CU_add_test(s, "the codelet registry", test_codelet_registry);
    return sz_test_run();
}
