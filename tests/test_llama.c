/* tests/test_llama.c — the LLaMA-style model (apps/llama) under mpiexec (1 and 2 ranks), on a tiny
 * config whose units do not divide evenly:
 *  - ZeRO stages 1, 2, 3 give bitwise the same losses, first-step gradients and final parameters
 *    as stage 0 at the same N_d; so do activation checkpointing (stages 0 and 3) and offloaded
 *    checkpoints (stage 3), and bf16 runs agree between stage 0 and stage 3;
 *  - with one rank, the whole model's gradient (every tensor: embedding, norms, qkv through RoPE
 *    and attention, SwiGLU, the untied head) against central finite differences of the loss;
 *  - the estimator's activation bytes (sz_llama_engine_activation_bytes) equal what the model registers;
 *  - the model's own SwiGLU kernel against a double reference and finite differences;
 *  - an input token or a target outside the vocabulary fails the step naming the op (no crash).
 * Every rank checks; the verdict is summed over ranks so the exit code is the same everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero_llama.h"
#include "sz_test_ranks.h" /* ctx, CHECK, the verdict over ranks */

enum { B = 2, T = 8, STEPS = 3, V = 37 };
static char last_error[1024];

static void capture_log(sz_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == SZ_LOG_ERROR) {
        snprintf(last_error, sizeof last_error, "%s", msg);
        fprintf(stderr, "[logged] %s\n", msg);
    }
}

/* Micro-batch k of a fixed stream: global rows nd*B, rank r takes rows r*B..; targets shifted. */
static void batch(long k, int nd, int rank, int *in, int *tg)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= T; t++) {
            uint64_t i = ((uint64_t)k * nd * B + (uint64_t)rank * B + b) * (T + 1) + t;
            uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
            int tok = (int)((h >> 33) % V);
            if (t < T) in[b * T + t] = tok;
            if (t > 0) tg[b * T + t - 1] = tok;
        }
}

struct run {
    float loss[STEPS];
    float *params, *grads; /* final parameters; gradients of the first step */
};

static void train(const sz_llama_config *c, const sz_zero_config *z, struct run *out)
{
    int nd = sz_context_world_size(ctx), rank = sz_context_rank(ctx);
    int64_t np = sz_llama_num_params(c);
    sz_llama *m = NULL;
    char err[256] = "";
    memset(out, 0, sizeof *out);
    if (sz_llama_create(&m, ctx, c, B, T, z, err, sizeof err) != SZ_OK || sz_llama_init_random(m, 77) != SZ_OK) {
        CHECK(0, "create stage %d: %s", z->stage, err);
        return;
    }
    CHECK(sz_model_nparams(sz_llama_model(m)) == np, "the model has %lld parameters, sz_llama_num_params says %lld",
          (long long)sz_model_nparams(sz_llama_model(m)), (long long)np);
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 1e-2f;
    tc.weight_decay = 0.1f;
    tc.grad_clip = 0.5f;
    int in[B * T], tg[B * T];
    for (int s = 0; s < STEPS; s++) {
        double sum = 0;
        for (int mb = 0; mb < z->micro_batches; mb++) {
            batch((long)s * z->micro_batches + mb, nd, rank, in, tg);
            float l = 0;
            CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
            CHECK(sz_model_forward_backward(sz_llama_model(m), &l) == SZ_OK, "forward_backward stage %d", z->stage);
            sum += l;
        }
        CHECK(sz_model_update(sz_llama_model(m), &tc, s + 1) == SZ_OK, "update stage %d", z->stage);
        if (s == 0) {
            out->grads = malloc((size_t)np * sizeof *out->grads);
            CHECK(sz_llama_get_grads(m, out->grads) == SZ_OK, "get grads");
        }
        out->loss[s] = (float)(sum / z->micro_batches);
    }
    out->params = malloc((size_t)np * sizeof *out->params);
    CHECK(sz_llama_get_params(m, out->params) == SZ_OK, "get params");
    /* the estimator counts the model's own tensors as sz_llama_create registers them */
    sz_memory_report rep;
    CHECK(sz_model_memory_report(sz_llama_model(m), &rep) == SZ_OK, "memory report");
    int64_t host = -1, act = sz_llama_engine_activation_bytes(c, B, T, z->checkpoint, z->offload_checkpoints, &host);
    CHECK(act == rep.bytes[SZ_MEM_ACTIVATIONS] && host == rep.bytes[SZ_MEM_HOST],
          "stage %d ckpt %d offload %d: activations %lld / host %lld estimated, %lld / %lld registered", z->stage,
          z->checkpoint, z->offload_checkpoints, (long long)act, (long long)host,
          (long long)rep.bytes[SZ_MEM_ACTIVATIONS], (long long)rep.bytes[SZ_MEM_HOST]);
    sz_llama_free(m);
}

static void run_free(struct run *r)
{
    free(r->params);
    free(r->grads);
}

/* Every configuration against stage 0 with the same precision: bitwise. */
static void test_stages(const sz_llama_config *c)
{
    size_t np = (size_t)sz_llama_num_params(c);
    struct { int stage, ckpt, offload; sz_precision prec; } cases[] = {
        {0, 0, 0, SZ_PRECISION_FP32}, {1, 0, 0, SZ_PRECISION_FP32}, {2, 0, 0, SZ_PRECISION_FP32},
        {3, 0, 0, SZ_PRECISION_FP32}, {0, 1, 0, SZ_PRECISION_FP32}, {3, 1, 0, SZ_PRECISION_FP32},
        {3, 1, 1, SZ_PRECISION_FP32}, {0, 0, 0, SZ_PRECISION_BF16}, {3, 1, 0, SZ_PRECISION_BF16},
    };
    enum { NC = sizeof cases / sizeof cases[0] };
    struct run r[NC];
    for (int i = 0; i < NC; i++) {
        sz_zero_config z;
        sz_zero_config_defaults(&z);
        z.stage = cases[i].stage;
        z.checkpoint = cases[i].ckpt;
        z.offload_checkpoints = cases[i].offload;
        z.precision = cases[i].prec;
        train(c, &z, &r[i]);
        int ref = cases[i].prec == SZ_PRECISION_BF16 ? 7 : 0;
        if (i == ref || !r[i].params || !r[ref].params)
            continue;
        CHECK(!memcmp(r[i].loss, r[ref].loss, sizeof r[i].loss),
              "stage %d ckpt %d offload %d %s: losses differ from stage 0 (%.9g vs %.9g)", cases[i].stage,
              cases[i].ckpt, cases[i].offload, cases[i].prec ? "bf16" : "fp32", r[i].loss[STEPS - 1],
              r[ref].loss[STEPS - 1]);
        CHECK(!memcmp(r[i].grads, r[ref].grads, np * sizeof(float)), "stage %d ckpt %d offload %d: gradients differ",
              cases[i].stage, cases[i].ckpt, cases[i].offload);
        CHECK(!memcmp(r[i].params, r[ref].params, np * sizeof(float)), "stage %d ckpt %d offload %d: parameters differ",
              cases[i].stage, cases[i].ckpt, cases[i].offload);
    }
    CHECK(r[0].loss[STEPS - 1] < r[0].loss[0], "the loss did not fall over %d steps (%g -> %g)", STEPS, r[0].loss[0],
          r[0].loss[STEPS - 1]);
    if (sz_context_rank(ctx) == 0)
        printf("stages 0-3, checkpointing, offload: bitwise equal at N_d = %d (losses %.6f .. %.6f)\n",
               sz_context_world_size(ctx), r[0].loss[0], r[0].loss[STEPS - 1]);
    for (int i = 0; i < NC; i++)
        run_free(&r[i]);
}

/* One rank: the gradient of the mean loss against central differences, for the 3 largest
 * gradient entries of every tensor. */
static void test_gradient(const sz_llama_config *c)
{
    sz_llama *m = NULL;
    char err[256] = "";
    if (sz_llama_create(&m, ctx, c, B, T, NULL, err, sizeof err) != SZ_OK || sz_llama_init_random(m, 5) != SZ_OK) {
        CHECK(0, "create: %s", err);
        return;
    }
    sz_model *sm = sz_llama_model(m);
    size_t np = (size_t)sz_llama_num_params(c);
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), loss;
    int in[B * T], tg[B * T];
    batch(0, 1, 0, in, tg);
    CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
    CHECK(sz_model_forward_backward(sm, &loss) == SZ_OK, "forward_backward");
    CHECK(sz_llama_get_grads(m, g) == SZ_OK && sz_llama_get_params(m, p) == SZ_OK, "read");
    int checked = 0, bad = 0;
    size_t off = 0;
    for (int u = 0; u < sz_model_nunits(sm); u++) {
        sz_param_spec spec[SZ_LLAMA_BLOCK_PARAMS];
        int n = sz_llama_unit_params(c, u, spec);
        for (int t = 0; t < n; t++) {
            size_t len = (size_t)(spec[t].rows * spec[t].cols);
            for (int k = 0; k < 3; k++) {
                size_t best = off;
                for (size_t i = off; i < off + len; i++) { /* the k-th largest: skip the ones taken */
                    int taken = fabsf(g[i]) >= 1e30f;
                    if (!taken && (fabsf(g[best]) >= 1e30f || fabsf(g[i]) > fabsf(g[best])))
                        best = i;
                }
                float gi = g[best], pi = p[best], h = 1e-2f, lp, lm;
                p[best] = pi + h;
                CHECK(sz_llama_set_params(m, p) == SZ_OK && sz_model_eval(sm, &lp) == SZ_OK, "eval +h");
                p[best] = pi - h;
                CHECK(sz_llama_set_params(m, p) == SZ_OK && sz_model_eval(sm, &lm) == SZ_OK, "eval -h");
                p[best] = pi;
                double fd = ((double)lp - lm) / (2.0 * h);
                if (!(fabs(fd - gi) <= 2e-4 + 2e-2 * fabs(gi))) {
                    bad++;
                    fprintf(stderr, "  unit %d %s [%zu]: gradient %.7g, finite difference %.7g\n", u, spec[t].name,
                            best - off, gi, fd);
                }
                checked++;
                g[best] = 1e31f; /* taken */
            }
            off += len;
        }
    }
    CHECK(sz_llama_set_params(m, p) == SZ_OK, "restore");
    CHECK(bad == 0, "%d of %d gradient entries differ from finite differences", bad, checked);
    printf("gradient check: %d entries (3 per tensor) match central differences\n", checked);

    /* an input token outside the vocabulary: the step fails with the op named, nothing crashes */
    in[5] = V + 4;
    CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
    last_error[0] = 0;
    sz_status st = sz_model_eval(sm, &loss);
    CHECK(st == SZ_ERR_INVALID, "a bad token gave %s", sz_status_string(st));
    CHECK(strstr(last_error, "fwd:embed:embedding") != NULL && strstr(last_error, "token 41 at row 5") != NULL,
          "the message does not name the op, the value and the row: '%s'", last_error);
    /* and a target outside it: the loss op refuses it */
    in[5] = 1;
    tg[3] = V;
    CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
    last_error[0] = 0;
    st = sz_model_eval(sm, &loss);
    CHECK(st == SZ_ERR_INVALID && strstr(last_error, "fwd:head:") && strstr(last_error, "target"),
          "a bad target gave %s, message '%s'", sz_status_string(st), last_error);
    free(p);
    free(g);
    sz_llama_free(m);
}

static void test_swiglu_kernel(void)
{
    enum { n = 200 };
    float gate[n], up[n], w[n], out[n], dg[n], du[n];
    for (int i = 0; i < n; i++) {
        gate[i] = (float)sin(i * 1.7) * 6.0f;
        up[i] = (float)cos(i * 0.9) * 2.0f;
        w[i] = (float)sin(i * 0.37 + 1.0);
        dg[i] = 0.25f;
        du[i] = -0.5f;
    }
    sz_llama_swiglu_fwd(out, gate, up, n);
    sz_llama_swiglu_bwd(dg, du, w, gate, up, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        double g = gate[i], u = up[i], ref = g / (1 + exp(-g)) * u, h = 1e-5;
        double fg = ((g + h) / (1 + exp(-(g + h))) - (g - h) / (1 + exp(-(g - h)))) / (2 * h) * u * w[i];
        double fu = g / (1 + exp(-g)) * w[i];
        bad += !(fabs(out[i] - ref) <= 1e-5 * (1 + fabs(ref)));
        bad += !(fabs(dg[i] - 0.25 - fg) <= 1e-5 * (1 + fabs(fg)));
        bad += !(fabs(du[i] + 0.5 - fu) <= 1e-5 * (1 + fabs(fu)));
    }
    CHECK(bad == 0, "swiglu kernel: %d values off the double reference / finite differences", bad);
}

int main(int argc, char **argv)
{
    sz_context_config cc;
    sz_context_config_defaults(&cc);
    cc.log_fn = capture_log;
    if (sz_context_init(&ctx, &cc, &argc, &argv) != SZ_OK)
        return 1;
    sz_llama_config c;
    char err[256];
    /* C = 24 (head size 12), F = sz_llama_hidden(24) = 64: unit sizes that do not divide by 2 or 3 */
    if (sz_llama_config_from_string(&c, "2,2,24", V, T, err, sizeof err) != SZ_OK) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    test_swiglu_kernel();
    test_stages(&c);
    if (sz_context_world_size(ctx) == 1)
        test_gradient(&c);
    return sz_test_finish("test_llama");
}
