/* tests/test_zero.c — ZeRO stages across MPI ranks (run under mpiexec with 1, 2, 3 and 4 ranks) on
 * a tiny GPT-2 whose unit sizes do not divide by 3:
 *  - one micro-batch: stages 1, 2, 3 give bitwise the same losses and parameters as stage 0;
 *  - bf16 emulated ("bf16"): the units read their bf16 parameters directly (no convert action); with
 *    fp32 working copies instead (sz_zero_config.bf16_work_copies) every stage, plain and ZeRO-R,
 *    gives bitwise the same losses, gradients and parameters, with more gathered bytes;
 *  - two micro-batches: all stages agree to float rounding;
 *  - measured model-state bytes equal the ZeRO formula for the padded sizes (and the formula
 *    for the real sizes up to padding); measured communication bytes equal the formula too (less,
 *    under stage 3, the head's own parameters, which one gather serves for its forward and
 *    backward; plus the clip factor's tiny all-gather);
 *  - under stage 2-3 no full-size gradient buffer is held, and stage 3 holds no full parameters;
 *  - the engine's live-bytes timeline of the last step passes through the plan's fold action by
 *    action (the same levels, in order), and the measured peak and every category's figure equal
 *    the plan's prediction; also with checkpointing, offloaded checkpoints, a stage-3 prefetch
 *    window and 512-byte buckets (whose parameters are bitwise those of the plain run); the bytes it sent equal the
 *    plan's actions' (gathers, reduce-scatter rounds, the norms);
 *  - the plan's waits are true (tasks/depcheck.c): every dependency the tasks of a step get from
 *    their data handles lies within the waits of the action that submitted them, every wait
 *    between the engine's own accesses is one of them, and a plan with a wait removed or a false
 *    one added is refused.
 * The same with SGD (arguments sgd, sgd0: the optimizer interface, tasks/sz_optimizer.h), whose
 * state bytes (1 or 0 floats per element) the formulas and the plan count; and at fp32 two SGD
 * steps through the engine (stages 0 and 3) are torch.optim.SGD's update of the reduced gradients.
 * Every rank checks; the verdict is all-reduced so the exit code is the same everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpt2/gpt2.h"
#include "sz_rng.h"
#include "sz_runtime.h"
#include "sz_tasks.h"
#include "sz_test_ranks.h" /* ctx, CHECK, the verdict over ranks */

enum { B = 2, T = 4, STEPS = 3 };
static int plan_comm_worker; /* the plans had a communication worker (SZ_COMM_WORKER=1) */
static sz_precision precision = SZ_PRECISION_FP32; /* argument "bf16": mixed precision */
static sz_optimizer optimizer = SZ_OPTIMIZER_ADAMW; /* argument "sgd": SGD, momentum 0.9; "sgd0": momentum 0 */
static float momentum;
/* "bf16" forces the emulated path (fp32 working copies), "bf16native" the native one (bf16
 * activations and matmuls; include/starzero.h, sz_bf16_compute), whatever this CPU's rule says */
static sz_bf16_compute bf16c = SZ_BF16_COMPUTE_EMULATED;
static int native(void) { return precision == SZ_PRECISION_BF16 && bf16c == SZ_BF16_COMPUTE_NATIVE; }
/* bf16 emulated: the units read their bf16 parameters directly unless this asks for fp32 working
 * copies (sz_zero_config.bf16_work_copies) — the same bits, more memory */
static int work_copies;
/* CUDA workers: the emulated path keeps working copies (their kernels take fp32 parameters) */
static int have_cuda(void)
{
    sz_runtime_info info;
    return sz_context_runtime_info(ctx, &info) == SZ_OK && info.cuda_workers > 0;
}

struct run {
    float loss[STEPS];
    float *params, *grads; /* final parameters; gradients of the first step */
    sz_memory_report rep;
};

/* The last step's measured live transient bytes against the plan's fold: the k-th change the
 * engine counted is the k-th action with a byte delta, at the level the fold reaches after it. */
static void check_timeline(struct sz_model *m, const sz_memory_report *rep, const char *what)
{
    const sz_plan *p = &m->step_plan;
    CHECK(p->a != NULL, "%s: no step plan", what);
    if (!p->a)
        return;
    plan_comm_worker = p->cfg.comm_worker;
    int64_t *live = calloc((size_t)p->n, sizeof *live);
    sz_fold f;
    sz_plan_fold(p, &f, live);
    int j = 0, bad = -1, n = m->counters.ntimeline < SZ_TIMELINE ? m->counters.ntimeline : SZ_TIMELINE;
    for (int k = 0; k < p->n; k++) {
        int moves = 0;
        for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
            moves |= p->a[k].delta[c] != 0;
        if (!moves)
            continue;
        if (bad < 0 && (j >= n || m->counters.timeline[j][1] != live[k]))
            bad = k;
        j++;
    }
    CHECK(bad < 0 && j == n, "%s: the measured timeline (%d changes) leaves the plan's fold (%d changes) at "
          "action %d (%s of unit %d)", what, n, j, bad, bad >= 0 ? sz_action_kind_name(p->a[bad].kind) : "-",
          bad >= 0 ? p->a[bad].unit : -1);
    CHECK(rep->peak_bytes == f.peak_bytes && rep->predicted_peak_bytes == f.peak_bytes,
          "%s: measured peak %lld, predicted %lld, fold %lld", what, (long long)rep->peak_bytes,
          (long long)rep->predicted_peak_bytes, (long long)f.peak_bytes);
    /* what the last step sent: the plan's actions' bytes, gather by gather and round by round */
    CHECK(rep->comm_bytes_sent == f.sent_bytes, "%s: sent %lld bytes, the plan's actions %lld", what,
          (long long)rep->comm_bytes_sent, (long long)f.sent_bytes);
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
        CHECK(rep->bytes[c] == f.bytes[c], "%s: %s measured %lld, plan %lld", what,
              sz_mem_category_name((sz_mem_category)c), (long long)rep->bytes[c], (long long)f.bytes[c]);
    free(live);
}

/* The plan's waits are true: for every step after the first (whose update rebuilt the plan with
 * clipping), every dependency the tasks got from their data handles is among the waits of the
 * action that submitted them (or their closure), and every wait between the engine's own accesses
 * is one of the tasks' dependencies. And the check can fail: the same observed dependencies
 * against the plan with one wait removed, or one false wait added, are refused. */
static void check_waits(struct sz_model *m, const char *what)
{
    int steps = 0, ndeps = 0, n = 0;
    char msg[512];
    int bad = sz_model_depcheck_result(m, &steps, &ndeps, msg, sizeof msg);
    CHECK(bad == 0, "%s: the tasks' dependencies leave the plan's waits: %s", what, msg);
    CHECK(steps == STEPS - 1 && ndeps > 0, "%s: %d steps checked (%d dependencies)", what, steps, ndeps);
    const unsigned char *dep = sz_model_depcheck_deps(m, &n);
    const sz_plan *p = &m->step_plan;
    CHECK(dep && n == p->n, "%s: no observed dependencies", what);
    if (!dep || n != p->n)
        return;
    /* drop the first definite wait of the first action that has one and does not also reach
     * it through its other waits */
    sz_plan q = *p;
    q.waits = malloc((size_t)p->nwaits * sizeof *q.waits + 1);
    q.a = malloc((size_t)p->n * sizeof *q.a);
    int tampered = 0;
    for (int k = 0; k < p->n && !tampered; k++) {
        memcpy(q.waits, p->waits, (size_t)p->nwaits * sizeof *q.waits);
        memcpy(q.a, p->a, (size_t)p->n * sizeof *q.a);
        const sz_action *a = &p->a[k];
        if (a->nwaits != 1 || p->waits[a->wait_lo].assumed || !dep[(size_t)k * n + p->waits[a->wait_lo].action])
            continue;
        q.a[k].nwaits = 0;
        char m2[512];
        CHECK(sz_plan_check_deps(&q, dep, m2, sizeof m2) > 0 && strstr(m2, "does not wait for"),
              "%s: a plan without action %d's wait passed the check (%s)", what, k, m2);
        tampered = 1;
    }
    CHECK(tampered, "%s: no action to tamper with", what);
    /* a false wait: the last action waits (definitely) for an earlier one its tasks do not reach;
     * its waits are the pool's last, so one more entry goes in front of them */
    sz_wait *w = realloc(q.waits, ((size_t)p->nwaits + 1) * sizeof *w);
    int refused = 0, last = p->n - 1;
    for (int j = 0; w && j < last && !refused; j++) {
        q.waits = w;
        memcpy(q.waits, p->waits, (size_t)p->nwaits * sizeof *q.waits);
        memcpy(q.a, p->a, (size_t)p->n * sizeof *q.a);
        int lo = p->a[last].wait_lo;
        memmove(&w[lo + 1], &w[lo], (size_t)p->a[last].nwaits * sizeof *w);
        w[lo] = (sz_wait){j, SZ_RES_PARAM, 0};
        q.a[last].nwaits++;
        q.nwaits++;
        char m2[512];
        refused = sz_plan_check_deps(&q, dep, m2, sizeof m2) > 0 && strstr(m2, "do not depend") != NULL;
    }
    CHECK(refused, "%s: no false wait was refused", what);
    free(q.waits);
    free(q.a);
}

/* STEPS optimizer steps of M micro-batches; rank r takes rows r*B.. of each global micro-batch.
 * zr: ZeRO-R on top (checkpointing, offloaded checkpoints, a stage-3 prefetch window, 512-byte
 * buckets: a reduce-scatter is many rounds). */
static void train_z(const sz_gpt2_config *c, int stage, int M, int zr, struct run *out)
{
    int nd = sz_context_world_size(ctx), rank = sz_context_rank(ctx);
    sz_zero_config z = {.stage = stage, .micro_batches = M, .precision = precision, .optimizer = optimizer,
                        .momentum = momentum, .bf16_compute = bf16c, .bf16_work_copies = work_copies};
    if (zr) {
        z.checkpoint = z.offload_checkpoints = 1;
        z.prefetch_bytes = 3000;
        z.bucket_bytes = 512; /* C_B: reduce-scatters of many rounds (512 / (4 N_d) elements each) */
    }
    gpt2 *g = NULL;
    char err[256];
    if (gpt2_create(&g, ctx, c, B, T, &z, err, sizeof err) != SZ_OK || gpt2_init_random(g, 77) != SZ_OK) {
        CHECK(0, "create stage %d: %s", stage, err);
        return;
    }
    /* the plan's waits against the tasks' data dependencies (tasks/depcheck.c) */
    CHECK(sz_model_depcheck(gpt2_model(g), 1) == SZ_OK, "depcheck on");
    /* a fixed token stream, long enough for every micro-batch of every rank */
    size_t n = (size_t)STEPS * M * nd * B * T + 1;
    uint16_t *stream = malloc(n * sizeof *stream);
    sz_rng r;
    sz_rng_seed(&r, 5, 0, 0);
    for (size_t i = 0; i < n; i++)
        stream[i] = (uint16_t)(sz_rng_next(&r) % (uint64_t)c->vocab);
    int in[B * T], tg[B * T];
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 1e-2f;
    tc.weight_decay = 0.1f;
    tc.grad_clip = 0.5f;
    for (int s = 0; s < STEPS; s++) {
        double sum = 0;
        for (int mb = 0; mb < M; mb++) {
            gpt2_batch_from_stream(stream, n, (long)s * M + mb, nd * B, rank * B, B, T, in, tg);
            float l = 0;
            CHECK(gpt2_set_batch(g, in, tg) == SZ_OK, "set batch");
            CHECK(sz_model_forward_backward(gpt2_model(g), &l) == SZ_OK, "forward_backward stage %d", stage);
            sum += l;
        }
        CHECK(sz_model_update(gpt2_model(g), &tc, s + 1) == SZ_OK, "update stage %d", stage);
        if (s == 0) {
            out->grads = malloc(sz_gpt2_num_params(c) * sizeof *out->grads);
            CHECK(gpt2_get_grads(g, out->grads) == SZ_OK, "get grads");
        }
        out->loss[s] = (float)(sum / M);
    }
    out->params = malloc(sz_gpt2_num_params(c) * sizeof *out->params);
    CHECK(gpt2_get_params(g, out->params) == SZ_OK, "get params");
    sz_model_memory_report(gpt2_model(g), &out->rep);
    char what[64];
    snprintf(what, sizeof what, "stage %d, %d micro-batch(es)%s%s", stage, M, zr ? ", ZeRO-R" : "",
             work_copies ? ", working copies" : "");
    /* GPT-2's units read their bf16 parameters directly on both paths, unless working copies were
     * asked for on the emulated one, or CUDA workers run it */
    int direct = precision == SZ_PRECISION_BF16 && (native() || (!work_copies && !have_cuda()));
    const sz_resolved_precision *prec = sz_model_precision(gpt2_model(g));
    int got = prec->mixed && prec->params_direct;
    CHECK(got == direct, "%s: bf16 parameters direct %d, expected %d", what, got, direct);
    int converts = 0;
    for (int k = 0; k < gpt2_model(g)->step_plan.n; k++)
        converts += gpt2_model(g)->step_plan.a[k].kind == SZ_ACT_CONVERT;
    CHECK((converts > 0) == (precision == SZ_PRECISION_BF16 && !direct), "%s: %d convert actions in the plan", what,
          converts);
    /* the GPT-2 estimator counts the model's own tensors as gpt2_create registers them */
    int64_t host = -1,
            act = sz_gpt2_engine_activation_bytes_bf16(c, B, T, z.checkpoint, z.offload_checkpoints, native(),
                                                       prec->mixed && prec->grads_rounded, &host);
    CHECK(!strcmp(out->rep.bf16_path, precision == SZ_PRECISION_FP32 ? "fp32" : native() ? "native" : "emulated"),
          "%s: bf16_path %s", what, out->rep.bf16_path);
    CHECK(act == out->rep.bytes[SZ_MEM_ACTIVATIONS] && host == out->rep.bytes[SZ_MEM_HOST],
          "%s: GPT-2's activations %lld / host %lld estimated, %lld / %lld registered", what, (long long)act,
          (long long)host, (long long)out->rep.bytes[SZ_MEM_ACTIVATIONS], (long long)out->rep.bytes[SZ_MEM_HOST]);
    check_timeline(gpt2_model(g), &out->rep, what);
    check_waits(gpt2_model(g), what);
    if (zr && nd > 1) { /* the small buckets made reduce-scatters of several rounds */
        int multi = 0;
        for (int k = 0; k < gpt2_model(g)->step_plan.n; k++)
            multi |= gpt2_model(g)->step_plan.a[k].rounds > 1;
        CHECK(multi, "%s: no reduce-scatter of more than one round", what);
    }
    free(stream);
    gpt2_free(g);
}

static void train(const sz_gpt2_config *c, int stage, int M, struct run *out) { train_z(c, stage, M, 0, out); }

/* SGD through the engine is torch.optim.SGD: two steps at this stage (no clipping, weight decay on
 * every tensor), each step's parameters against the host's update from the reduced gradients the
 * engine reports (g + wd p, buf = momentum buf + that, p -= lr buf), in double. fp32 only. */
static void sgd_reference(const sz_gpt2_config *c, int stage)
{
    int nd = sz_context_world_size(ctx), rank = sz_context_rank(ctx);
    sz_zero_config z = {.stage = stage, .micro_batches = 1, .optimizer = optimizer, .momentum = momentum};
    gpt2 *g = NULL;
    char err[256];
    if (gpt2_create(&g, ctx, c, B, T, &z, err, sizeof err) != SZ_OK || gpt2_init_random(g, 78) != SZ_OK) {
        CHECK(0, "sgd reference: create stage %d: %s", stage, err);
        return;
    }
    size_t np = sz_gpt2_num_params(c), n = (size_t)2 * nd * B * T + 1;
    float *p = malloc(np * sizeof *p), *gr = malloc(np * sizeof *gr);
    double *want = malloc(np * sizeof *want), *buf = calloc(np, sizeof *buf);
    uint16_t *stream = malloc(n * sizeof *stream);
    sz_rng r;
    sz_rng_seed(&r, 6, 0, 0);
    for (size_t i = 0; i < n; i++)
        stream[i] = (uint16_t)(sz_rng_next(&r) % (uint64_t)c->vocab);
    sz_train_config tc;
    sz_train_config_defaults(&tc);
    tc.lr = 0.05f;
    tc.weight_decay = 0.1f;
    tc.decay = SZ_DECAY_ALL;
    CHECK(gpt2_get_params(g, p) == SZ_OK, "sgd reference: params");
    for (size_t i = 0; i < np; i++)
        want[i] = p[i];
    int in[B * T], tg[B * T];
    for (int s = 0; s < 2; s++) {
        float l;
        gpt2_batch_from_stream(stream, n, s, nd * B, rank * B, B, T, in, tg);
        CHECK(gpt2_set_batch(g, in, tg) == SZ_OK && sz_model_forward_backward(gpt2_model(g), &l) == SZ_OK &&
              sz_model_update(gpt2_model(g), &tc, s + 1) == SZ_OK, "sgd reference: step %d", s + 1);
        CHECK(gpt2_get_grads(g, gr) == SZ_OK && gpt2_get_params(g, p) == SZ_OK, "sgd reference: read");
        double worst = 0;
        for (size_t i = 0; i < np; i++) {
            double d = (double)gr[i] + (double)tc.weight_decay * want[i];
            if (momentum != 0.0f)
                d = buf[i] = (double)momentum * buf[i] + d;
            want[i] -= (double)tc.lr * d;
            worst = fmax(worst, fabs(p[i] - want[i]) / (1.0 + fabs(want[i])));
        }
        CHECK(worst <= 1e-6, "sgd reference, stage %d step %d: parameters differ from torch.optim.SGD's update by %g",
              stage, s + 1, worst);
    }
    free(p), free(gr), free(want), free(buf), free(stream);
    gpt2_free(g);
}

static double model_state_formula(int stage, double psi, int nd)
{
    return sz_zero_model_state_bytes_opt(stage, psi, nd, precision == SZ_PRECISION_BF16,
                                         sz_optimizer_states(optimizer, momentum));
}

int main(int argc, char **argv)
{
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "bf16") || !strcmp(argv[i], "bf16native"))
            precision = SZ_PRECISION_BF16;
        if (!strcmp(argv[i], "bf16native"))
            bf16c = SZ_BF16_COMPUTE_NATIVE;
        if (!strcmp(argv[i], "sgd") || !strcmp(argv[i], "sgd0"))
            optimizer = SZ_OPTIMIZER_SGD, momentum = strcmp(argv[i], "sgd") ? 0.0f : 0.9f;
    }
    int es = precision == SZ_PRECISION_BF16 ? 2 : 4; /* bytes per communicated element */
    int nd = sz_context_world_size(ctx);
    sz_gpt2_config c;
    char err[256];
    sz_gpt2_config_from_string(&c, "2,2,8", 11, 8, err, sizeof err);
    size_t np = sz_gpt2_num_params(&c);

    struct run base[4], acc[4];
    for (int s = 0; s < 4; s++)
        train(&c, s, 1, &base[s]);
    for (int s = 1; s < 4; s++) {
        CHECK(!memcmp(base[s].loss, base[0].loss, sizeof base[0].loss), "stage %d losses differ from stage 0 "
              "(%.9g vs %.9g)", s, base[s].loss[STEPS - 1], base[0].loss[STEPS - 1]);
        CHECK(!memcmp(base[s].params, base[0].params, np * sizeof(float)), "stage %d parameters differ from stage 0", s);
    }

    for (int s = 0; s < 4; s++)
        train(&c, s, 2, &acc[s]);
    /* Accumulation order differs by design (0-1: accumulate then reduce; 2-3: reduce each
     * micro-batch): the reduced gradients agree to float rounding (bf16 rounding in mixed precision). (Parameters after AdamW are not
     * compared: Adam divides near-zero gradients by their own size, turning rounding into O(lr).) */
    double gmax = 0;
    for (size_t i = 0; i < np; i++)
        gmax = fmax(gmax, fabs(acc[0].grads[i]));
    for (int s = 1; s < 4; s++) {
        double worst = 0;
        for (size_t i = 0; i < np; i++)
            worst = fmax(worst, fabs(acc[s].grads[i] - acc[0].grads[i]));
        CHECK(worst <= (precision == SZ_PRECISION_BF16 ? 2e-2 : 1e-5) * gmax, "2 micro-batches: stage %d gradients differ from stage 0 by %g (max |g| %g)", s,
              worst, gmax);
        CHECK(fabs(acc[s].loss[0] - acc[0].loss[0]) < 1e-6, "2 micro-batches: stage %d first loss", s);
        CHECK(fabs(acc[s].loss[STEPS - 1] - acc[0].loss[STEPS - 1]) < (precision == SZ_PRECISION_BF16 ? 2e-2 : 1e-3),
              "2 micro-batches: stage %d loss", s);
    }
    for (int s = 1; s < 4; s++)
        CHECK(!memcmp(base[s].grads, base[0].grads, np * sizeof(float)), "stage %d gradients differ from stage 0", s);
    if (optimizer == SZ_OPTIMIZER_SGD && precision == SZ_PRECISION_FP32)
        for (int s = 0; s < 4; s += 3)
            sgd_reference(&c, s);
    if (precision == SZ_PRECISION_BF16 && !native() && !have_cuda()) {
        /* the emulated path: fp32 working copies (as before, and as with CUDA workers) give bitwise
         * the losses, gradients and parameters of reading the bf16 parameters directly, at every
         * stage (plain and ZeRO-R), for more memory: each unit's fp32 copy */
        work_copies = 1;
        for (int s = 0; s < 4; s++)
            for (int zr = 0; zr < 2; zr++) {
                struct run wc, zd;
                train_z(&c, s, 1, zr, &wc);
                if (zr) {
                    work_copies = 0;
                    train_z(&c, s, 1, 1, &zd);
                    work_copies = 1;
                }
                const struct run *d = zr ? &zd : &base[s];
                CHECK(!memcmp(wc.loss, d->loss, sizeof wc.loss) && !memcmp(wc.grads, d->grads, np * sizeof(float)) &&
                      !memcmp(wc.params, d->params, np * sizeof(float)),
                      "stage %d%s: working copies give other bits than direct bf16 parameters (loss %.9g vs %.9g)", s,
                      zr ? ", ZeRO-R" : "", wc.loss[STEPS - 1], d->loss[STEPS - 1]);
                /* the gathered bytes' peak: each unit's fp32 copy (4 bytes per element beside stage 3's
                 * 2-byte gathered one). The whole peak may lie elsewhere on this tiny model (with a
                 * communication worker, or a stage-3 prefetch window, which fits more units of 2-byte
                 * elements): the d12 plan shows the whole peak fall (bf16_native_cli.sh) */
                int64_t pw = wc.rep.peak_bytes - wc.rep.bytes[SZ_MEM_HOST_BUFFERS],
                        pd = d->rep.peak_bytes - d->rep.bytes[SZ_MEM_HOST_BUFFERS];
                CHECK(wc.rep.bytes[SZ_MEM_GATHERED] > d->rep.bytes[SZ_MEM_GATHERED],
                      "stage %d%s: working copies' gathered peak %lld not above direct's %lld", s, zr ? ", ZeRO-R" : "",
                      (long long)wc.rep.bytes[SZ_MEM_GATHERED], (long long)d->rep.bytes[SZ_MEM_GATHERED]);
                if (s == 0 && !zr && sz_context_rank(ctx) == 0)
                    printf("nd=%d emulated, stage 0: peak beside host buffers %lld B with working copies, %lld B "
                           "reading bf16 directly\n", nd, (long long)pw, (long long)pd);
                free(wc.params), free(wc.grads);
                if (zr)
                    free(zd.params), free(zd.grads);
            }
        work_copies = 0;
    }
    for (int s = 0; s < 4; s++) { /* ZeRO-R changes where bytes live, not the bits */
        struct run zr;
        train_z(&c, s, 1, 1, &zr);
        CHECK(!memcmp(zr.params, base[s].params, np * sizeof(float)), "stage %d: ZeRO-R changed the parameters", s);
        free(zr.params);
        free(zr.grads);
    }

    /* accounting: measured against the formula */
    for (int s = 0; s < 4; s++) {
        sz_memory_report *r = &base[s].rep;
        double padded = (double)r->nparams_padded, real = (double)r->nparams;
        CHECK(r->model_state_bytes == (int64_t)model_state_formula(s, padded, nd),
              "stage %d: model-state bytes %lld != formula(padded) %.0f", s, (long long)r->model_state_bytes,
              model_state_formula(s, padded, nd));
        CHECK(fabs(r->model_state_bytes - model_state_formula(s, real, nd)) <= 16.0 * (padded - real) + 1e-9,
              "stage %d: model-state bytes beyond padding of the formula", s);
        CHECK((s < 2) == (r->bytes[SZ_MEM_GRADS] > 0), "stage %d: full gradients held = %lld", s,
              (long long)r->bytes[SZ_MEM_GRADS]);
        CHECK((s < 3) == (r->bytes[SZ_MEM_PARAMS] > 0), "stage %d: full parameters held = %lld", s,
              (long long)r->bytes[SZ_MEM_PARAMS]);
        /* gathered: stage 3's gathered units (the units read the bf16 parameters directly: no fp32
         * working copies on either bf16 path) */
        CHECK((s == 3 || (precision == SZ_PRECISION_BF16 && !native() && have_cuda())) ==
                  (r->bytes[SZ_MEM_GATHERED] > 0),
              "stage %d: gathered peak %lld",
              s, (long long)r->bytes[SZ_MEM_GATHERED]);
        /* communication per step (the last one): elements sent per the ZeRO formula, fp32 */
        double f = (s < 3 ? 2.0 : 3.0) * padded * (nd - 1) / nd * es;
        if (s == 3) /* the head gathers the tied embedding, whose own backward reads no parameter and
                       gathers nothing; the head (the last unit) keeps its parameters and the
                       embedding from its forward to its backward */
            f -= (double)sz_zero_shard(2 * (int64_t)c.channels, nd) * (nd - 1) * es;
        f += (double)(c.layers + 2) * (nd - 1) * 4; /* the clip factor's per-unit norms */
        CHECK(fabs((double)r->comm_bytes_sent - f) < 0.5, "stage %d: sent %lld bytes, formula %.0f", s,
              (long long)r->comm_bytes_sent, f);
    }
    if (sz_context_rank(ctx) == 0)
        printf("nd=%d: stage 0 loss %.6f -> %.6f; model-state bytes per stage: %lld %lld %lld %lld; "
               "sent per step: %lld %lld %lld %lld\n", nd, base[0].loss[0], base[0].loss[STEPS - 1],
               (long long)base[0].rep.model_state_bytes, (long long)base[1].rep.model_state_bytes,
               (long long)base[2].rep.model_state_bytes, (long long)base[3].rep.model_state_bytes,
               (long long)base[0].rep.comm_bytes_sent, (long long)base[1].rep.comm_bytes_sent,
               (long long)base[2].rep.comm_bytes_sent, (long long)base[3].rep.comm_bytes_sent);
    for (int s = 0; s < 4; s++) {
        free(base[s].params);
        free(acc[s].params);
        free(base[s].grads);
        free(acc[s].grads);
    }
    int all = sz_test_all_failures();
    if (sz_context_rank(ctx) == 0)
        printf("test_zero nd=%d %s %s (momentum %g)%s: %s\n", nd, precision == SZ_PRECISION_BF16 ? (native() ? "bf16 native" : "bf16 emulated") : "fp32",
               sz_optimizer_name(optimizer), (double)momentum,
               plan_comm_worker ? ", communication worker" : "", all ? "FAILED" : "all checks passed");
    sz_context_free(ctx);
    return all ? 1 : 0;
}
