/* tests/test_llama.c — the LLaMA-style model (apps/llama) under mpiexec (1 and 2 ranks), on a tiny
 * config whose units do not divide evenly:
 *  - ZeRO stages 1, 2, 3 give bitwise the same losses, first-step gradients and final parameters
 *    as stage 0 at the same N_d; so do activation checkpointing (stages 0 and 3) and offloaded
 *    checkpoints (stage 3), and bf16 runs (the emulated path) agree between stage 0 and stages 2-3,
 *    also with offloaded checkpoints, and with fp32 working copies of the bf16 parameters
 *    (sz_zero_config.bf16_work_copies) instead of reading them directly;
 *  - with the argument "bf16native", all of that on the native bf16 path (bf16 activations and
 *    parameters read directly; forced whatever this CPU's rule says), whose losses and first-step
 *    gradients also stay within bf16 noise of fp32's, and whose bad tokens fail as fp32's do;
 *  - every run's measured peak equals the plan's prediction, and reports its bf16_path;
 *  - with one rank, the whole model's gradient (every tensor: embedding, norms, qkv through RoPE
 *    and attention, SwiGLU, the untied head) against central finite differences of the loss;
 *  - the estimator's activation bytes (sz_llama_engine_activation_bytes_bf16, on the run's path) equal
 *    what the model registers, and its shape (sz_llama_shape, what sz-estimate plans from) plans
 *    the peak the engine predicts, on CPU workers;
 *  - the model's own SwiGLU kernel against a double reference and finite differences, and its bf16
 *    variant bitwise the fp32 kernel on the widened values, rounded, at 1-3 threads;
 *  - an input token or a target outside the vocabulary fails the step naming the op (no crash);
 *  - with one rank, bf16 on CPUs (both paths): the norms' gradient-rounding scratch out of memory
 *    (the test hook SZ_TEST_FAIL_ROUND_SCRATCH=1, codelets/sz_round.h) fails the step with
 *    SZ_ERR_NOMEM and a message naming the op and the cause (no crash, no silent success).
 * Every rank checks; the verdict is summed over ranks so the exit code is the same everywhere. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero_llama.h"
#include "sz_test_ranks.h" /* ctx, CHECK, the verdict over ranks */

enum { B = 2, T = 8, STEPS = 3, V = 37 };
static char last_error[1024];
static int native_mode; /* argument "bf16native": the stage cases run bf16 on the native path */

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
    int nat = z->precision == SZ_PRECISION_BF16 && z->bf16_compute == SZ_BF16_COMPUTE_NATIVE;
    const char *path = z->precision == SZ_PRECISION_FP32 ? "fp32" : nat ? "native" : "emulated";
    const sz_resolved_precision *prec = sz_model_precision(sz_llama_model(m));
    CHECK(prec->native == nat && !strcmp(rep.bf16_path, path),
          "stage %d: bf16_path %s, expected %s", z->stage, rep.bf16_path, path);
    /* the units read their bf16 parameters directly, unless the emulated path was asked for working
     * copies or has CUDA workers; those are the only gathered bytes below stage 3 */
    sz_runtime_info info; /* with CUDA workers the emulated path keeps working copies */
    int cuda = sz_context_runtime_info(ctx, &info) == SZ_OK && info.cuda_workers > 0;
    int direct = z->precision == SZ_PRECISION_BF16 && (nat || (!z->bf16_work_copies && !cuda));
    CHECK((prec->mixed && prec->params_direct) == direct, "stage %d: bf16 parameters direct %d, expected %d",
          z->stage, prec->mixed && prec->params_direct, direct);
    if (z->stage < 3)
        CHECK((rep.bytes[SZ_MEM_GATHERED] > 0) == (z->precision == SZ_PRECISION_BF16 && !direct),
              "stage %d %s (direct %d): gathered peak %lld", z->stage, path, direct,
              (long long)rep.bytes[SZ_MEM_GATHERED]);
    CHECK(rep.peak_bytes == rep.predicted_peak_bytes, "stage %d ckpt %d offload %d %s: measured peak %lld, predicted %lld",
          z->stage, z->checkpoint, z->offload_checkpoints, path, (long long)rep.peak_bytes,
          (long long)rep.predicted_peak_bytes);
    int64_t host = -1,
            act = sz_llama_engine_activation_bytes_bf16(c, B, T, z->checkpoint, z->offload_checkpoints, nat, &host);
    CHECK(act == rep.bytes[SZ_MEM_ACTIVATIONS] && host == rep.bytes[SZ_MEM_HOST],
          "stage %d ckpt %d offload %d: activations %lld / host %lld estimated, %lld / %lld registered", z->stage,
          z->checkpoint, z->offload_checkpoints, (long long)act, (long long)host,
          (long long)rep.bytes[SZ_MEM_ACTIVATIONS], (long long)rep.bytes[SZ_MEM_HOST]);
    /* and the model's shape (what sz-estimate plans from) predicts the same peak without a runtime */
    sz_model_shape shape;
    int64_t planned = -1;
    if (!cuda && sz_llama_shape(c, B, T, z, info.compute_workers, info.kernel_threads, &shape, err, sizeof err) == SZ_OK) {
        CHECK(shape.nunits == sz_model_nunits(sz_llama_model(m)), "shape: %d units, the model %d", shape.nunits,
              sz_model_nunits(sz_llama_model(m)));
        CHECK(sz_model_shape_plan(&shape, z, nd, rank, tc.grad_clip > 0, info.comm_worker >= 0, &planned, NULL, 0) ==
                  SZ_OK && planned == rep.predicted_peak_bytes,
              "stage %d ckpt %d offload %d %s: the shape plans a peak of %lld, the engine predicts %lld", z->stage,
              z->checkpoint, z->offload_checkpoints, path, (long long)planned, (long long)rep.predicted_peak_bytes);
        sz_model_shape_free(&shape);
    } else
        CHECK(cuda, "sz_llama_shape: %s", err);
    sz_llama_free(m);
}

static void run_free(struct run *r)
{
    free(r->params);
    free(r->grads);
}

/* Every configuration against stage 0 with the same precision and path: bitwise. In native mode
 * every case is bf16 on the native path, and an fp32 stage-0 run is the yardstick of its noise. */
static void test_stages(const sz_llama_config *c)
{
    size_t np = (size_t)sz_llama_num_params(c);
    const sz_precision F = native_mode ? SZ_PRECISION_BF16 : SZ_PRECISION_FP32;
    /* wc: fp32 working copies of the bf16 parameters (sz_zero_config.bf16_work_copies; the emulated
     * path's way before its units read them directly, and still with CUDA workers): the same bits */
    struct { int stage, ckpt, offload; sz_precision prec; int wc; } cases[] = {
        {0, 0, 0, F, 0}, {1, 0, 0, F, 0}, {2, 0, 0, F, 0}, {3, 0, 0, F, 0}, {0, 1, 0, F, 0}, {3, 1, 0, F, 0},
        {3, 1, 1, F, 0}, {0, 0, 0, native_mode ? SZ_PRECISION_FP32 : SZ_PRECISION_BF16, 0},
        {3, 1, 0, SZ_PRECISION_BF16, 0}, {2, 0, 0, SZ_PRECISION_BF16, 0}, {3, 1, 1, SZ_PRECISION_BF16, 0},
        {0, 0, 0, SZ_PRECISION_BF16, 1}, {3, 1, 1, SZ_PRECISION_BF16, 1},
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
        /* native mode: native; else bf16 is the emulated path (whatever this CPU's rule says) */
        z.bf16_compute = native_mode ? SZ_BF16_COMPUTE_NATIVE : SZ_BF16_COMPUTE_EMULATED;
        z.bf16_work_copies = cases[i].wc;
        train(c, &z, &r[i]);
        int ref = native_mode ? (i == 7 ? -1 : 0) : cases[i].prec == SZ_PRECISION_BF16 ? 7 : 0;
        if (ref < 0 || i == ref || !r[i].params || !r[ref].params)
            continue;
        CHECK(!memcmp(r[i].loss, r[ref].loss, sizeof r[i].loss),
              "stage %d ckpt %d offload %d %s%s: losses differ from stage 0 (%.9g vs %.9g)", cases[i].stage,
              cases[i].ckpt, cases[i].offload, cases[i].prec ? "bf16" : "fp32",
              cases[i].wc ? " (working copies)" : "", r[i].loss[STEPS - 1],
              r[ref].loss[STEPS - 1]);
        CHECK(!memcmp(r[i].grads, r[ref].grads, np * sizeof(float)), "stage %d ckpt %d offload %d wc %d: gradients "
              "differ", cases[i].stage, cases[i].ckpt, cases[i].offload, cases[i].wc);
        CHECK(!memcmp(r[i].params, r[ref].params, np * sizeof(float)), "stage %d ckpt %d offload %d wc %d: parameters "
              "differ", cases[i].stage, cases[i].ckpt, cases[i].offload, cases[i].wc);
    }
    CHECK(r[0].loss[STEPS - 1] < r[0].loss[0], "the loss did not fall over %d steps (%g -> %g)", STEPS, r[0].loss[0],
          r[0].loss[STEPS - 1]);
    if (native_mode && r[0].grads && r[7].grads) { /* native against fp32: bf16 noise, not bitwise */
        double dl = 0, num = 0, den = 0;
        for (int s = 0; s < STEPS; s++)
            dl = fmax(dl, fabs((double)r[0].loss[s] - r[7].loss[s]));
        for (size_t i = 0; i < np; i++) {
            double e = (double)r[0].grads[i] - r[7].grads[i];
            num += e * e;
            den += (double)r[7].grads[i] * r[7].grads[i];
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        CHECK(dl < 0.02 && rel < 0.05, "native vs fp32: largest loss difference %.3g (want < 0.02), first-step "
              "gradient relative difference %.3g (want < 0.05)", dl, rel);
        if (sz_context_rank(ctx) == 0)
            printf("native vs fp32: largest loss difference %.2e, first-step gradients %.2e relative\n", dl, rel);
    }
    if (sz_context_rank(ctx) == 0)
        printf("stages 0-3, checkpointing, offload%s: bitwise equal at N_d = %d (losses %.6f .. %.6f)\n",
               native_mode ? " (bf16 native)" : "", sz_context_world_size(ctx), r[0].loss[0], r[0].loss[STEPS - 1]);
    for (int i = 0; i < NC; i++)
        run_free(&r[i]);
}

/* Native mode, one rank: a token outside the vocabulary fails the step in the bf16 embedding too. */
static void test_native_bad_token(const sz_llama_config *c)
{
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.precision = SZ_PRECISION_BF16;
    z.bf16_compute = SZ_BF16_COMPUTE_NATIVE;
    sz_llama *m = NULL;
    char err[256] = "";
    if (sz_llama_create(&m, ctx, c, B, T, &z, err, sizeof err) != SZ_OK || sz_llama_init_random(m, 5) != SZ_OK) {
        CHECK(0, "create: %s", err);
        return;
    }
    int in[B * T], tg[B * T];
    float loss;
    batch(0, 1, 0, in, tg);
    in[5] = V + 4;
    CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
    last_error[0] = 0;
    sz_status st = sz_model_eval(sz_llama_model(m), &loss);
    CHECK(st == SZ_ERR_INVALID && strstr(last_error, "fwd:embed:embedding") && strstr(last_error, "token 41 at row 5"),
          "native: a bad token gave %s, message '%s'", sz_status_string(st), last_error);
    sz_llama_free(m);
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

/* One rank, bf16 on CPUs: a step runs, then the next one's rounding scratch cannot be allocated
 * (SZ_TEST_FAIL_ROUND_SCRATCH=1, set and unset while no task runs: sz_model_update waits for them
 * all). The RMSNorm backward that meets it fails the step, as sz-train meets it: forward_backward
 * or the update after it returns SZ_ERR_INVALID, the task and the cause logged. */
static void test_round_scratch_oom(const sz_llama_config *c)
{
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.precision = SZ_PRECISION_BF16;
    z.bf16_compute = native_mode ? SZ_BF16_COMPUTE_NATIVE : SZ_BF16_COMPUTE_EMULATED;
    sz_llama *m = NULL;
    char err[256] = "";
    if (sz_llama_create(&m, ctx, c, B, T, &z, err, sizeof err) != SZ_OK || sz_llama_init_random(m, 9) != SZ_OK) {
        CHECK(0, "create: %s", err);
        return;
    }
    sz_model *sm = sz_llama_model(m);
    if (!(sz_model_precision(sm)->mixed && sz_model_precision(sm)->grads_rounded)) { /* CUDA workers: the writers do not round */
        printf("rounding scratch out of memory: not run (the gradients' rounding is not folded here)\n");
        sz_llama_free(m);
        return;
    }
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    int in[B * T], tg[B * T];
    float loss;
    batch(0, 1, 0, in, tg);
    CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
    CHECK(sz_model_forward_backward(sm, &loss) == SZ_OK && sz_model_update(sm, &tc, 1) == SZ_OK,
          "the step before the hook failed");
    batch(1, 1, 0, in, tg);
    CHECK(sz_llama_set_batch(m, in, tg) == SZ_OK, "set batch");
    setenv("SZ_TEST_FAIL_ROUND_SCRATCH", "1", 1);
    last_error[0] = 0;
    sz_status st = sz_model_forward_backward(sm, &loss); /* the backward may still run when it returns: */
    if (st == SZ_OK)
        st = sz_model_update(sm, &tc, 2); /* the update waits for it, and fails then */
    unsetenv("SZ_TEST_FAIL_ROUND_SCRATCH");
    CHECK(st == SZ_ERR_NOMEM && strstr(last_error, "rmsnorm") &&
              strstr(last_error, "out of memory (the gradients' rounding scratch)"),
          "the rounding scratch out of memory gave %s, message '%s'", sz_status_string(st), last_error);
    printf("rounding scratch out of memory: %s, '%s'\n", sz_status_string(st), last_error);
    sz_llama_free(m);
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "bf16native"))
            native_mode = 1;
        else if (argv[i][0] != '-') {
            fprintf(stderr, "test_llama: unknown argument '%s' (bf16native or nothing)\n", argv[i]);
            sz_context_free(ctx);
            return 1;
        }
    }
    test_stages(&c);
    if (sz_context_world_size(ctx) == 1 && native_mode)
        test_native_bad_token(&c);
    else if (sz_context_world_size(ctx) == 1)
        test_gradient(&c);
    if (sz_context_world_size(ctx) == 1)
        test_round_scratch_oom(&c);
    return sz_test_finish("test_llama", native_mode ? ", bf16 native" : "");
}
