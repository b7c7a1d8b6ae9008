/* custom_model.c — a complete training app on StarZeRO's installed package: a small next-token model
 * written as its forward only (the engine derives the backward), with an operation of its own
 * (squared ReLU, a StarPU codelet with its backward, through starzero_starpu.h), a ZeRO configuration (stage 3, activation checkpointing), and the training loop
 * of starzero_train.h: sharded state saved every few steps, resumed (at any number of ranks or ZeRO
 * stage), and a clean stop on a signal (the step finishes, the state is saved, exit 0).
 *
 *   custom_model                       trains 60 steps on data it makes itself, saving into
 *                                      ./custom_model.state; run again with --steps 100 to continue
 *   custom_model --tokens FILE         an llm.c token file (sz-prepare writes them) instead
 *   mpirun -np 2 custom_model ...      2 data-parallel ranks (the same global batch)
 * Options: --steps N (60), --state DIR (custom_model.state), --save-every N (20), --keep N (2),
 * --fresh (start over in DIR, removing its states after the first save), --stage S (3),
 * --batch ROWS (256: the global batch, split over the ranks), --lr X (1e-2), --no-checkpoint.
 * SIGTERM/SIGINT/SIGUSR1 to a rank (or SIGUSR1 to mpirun) stops it after the step, saved; exit 0.
 *
 * Build against the installed package (share/starzero/examples/CMakeLists.txt), or:
 *   cc custom_model.c $(pkg-config --cflags --libs starzero_gpt2) -o custom_model
 * (starzero_gpt2 brings starzero itself and the llm.c token file reader). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero_starpu.h"
#include "starzero_train.h"
#include "starzero_gpt2.h"

/* ============================== the model (all of it is here) ===================================
 * tokens -> embedding [V,C] -> L blocks x += W2 sqrelu(W1 x + b1) + b2 -> head [V,C] -> softmax
 * cross-entropy against the next token. Each unit is its forward: the engine derives the backward
 * (each op's own, in reverse) and owns the gradients. Each block is a checkpointable unit: under
 * checkpointing it keeps only its input and recomputes its forward before its backward. */
enum { V = 256, C = 64, H = 128, L = 2 };

/* -- the operation of its own: out = relu(h)^2; its backward dh = 2 relu(h) dout (overwrites dh) -- */
struct sqrelu_args { int64_t n; };

static void sqrelu_fwd_cpu(void *buffers[], void *cl_arg)
{
    const struct sqrelu_args *a = sz_task_params(cl_arg);
    float *out = sz_task_ptr(buffers, cl_arg, 0);
    const float *h = sz_task_ptr(buffers, cl_arg, 1);
    for (int64_t i = 0; i < a->n; i++)
        out[i] = h[i] > 0 ? h[i] * h[i] : 0.0f;
}

static void sqrelu_bwd_cpu(void *buffers[], void *cl_arg)
{
    const struct sqrelu_args *a = sz_task_params(cl_arg);
    float *dh = sz_task_ptr(buffers, cl_arg, 0);
    const float *h = sz_task_ptr(buffers, cl_arg, 1), *dout = sz_task_ptr(buffers, cl_arg, 2);
    for (int64_t i = 0; i < a->n; i++)
        dh[i] = h[i] > 0 ? 2.0f * h[i] * dout[i] : 0.0f;
}

static struct starpu_perfmodel sqrelu_fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "custom_model_sqrelu_fwd"};
static struct starpu_perfmodel sqrelu_bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "custom_model_sqrelu_bwd"};
static struct starpu_codelet sqrelu_fwd_cl = {.cpu_funcs = {sqrelu_fwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                              .model = &sqrelu_fwd_model, .name = "sqrelu_fwd"};
static struct starpu_codelet sqrelu_bwd_cl = {.cpu_funcs = {sqrelu_bwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
                                              .model = &sqrelu_bwd_model, .name = "sqrelu_bwd"};

static sz_status op_sqrelu_bwd(sz_unit *u, sz_tensor *dh, sz_tensor *h, sz_tensor *dout, int64_t n)
{
    sz_task_tensor t[] = {{dh, SZ_WRITE, SZ_DTYPE_F32, n, "dh", 0}, {h, SZ_READ, SZ_DTYPE_F32, n, "h", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, n, "dout", 0}};
    struct sqrelu_args a = {n};
    return sz_task_submit(u, &sqrelu_bwd_cl, "sqrelu_bwd", t, 3, &a, sizeof a);
}

/* Its backward, called by the derived backward with the forward's record: out's gradient (read),
 * h's (overwritten: SZ_GRAD_INPUT_SET, h has no other reader), the forward's h. */
static sz_status sqrelu_grad(sz_unit *u, const sz_op_record *r)
{
    const struct sqrelu_args *a = sz_record_params(r);
    return op_sqrelu_bwd(u, sz_record_grad(u, r, 1), sz_record_tensor(r, 1), sz_record_grad(u, r, 0), a->n);
}

static sz_status op_sqrelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *h, int64_t n)
{
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, n, "out", 0}, {h, SZ_READ, SZ_DTYPE_F32, n, "h", 0}};
    static const sz_grad_spec g[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_INPUT_SET, 0}};
    struct sqrelu_args a = {n};
    return sz_task_submit_diff(u, &sqrelu_fwd_cl, "sqrelu_fwd", t, 2, &a, sizeof a, g, sqrelu_grad);
}

/* -- the tensors and the units -- */
struct net {
    int N;                                /* rows on this rank */
    sz_tensor *tokens, *targets, *losses, *probs, *logits;
    sz_tensor *x[L + 1];                  /* the residual stream: x[0] the embedding, x[l+1] block l's output */
    sz_tensor *h[L], *a[L], *f[L];
};
struct block_ref { struct net *n; int l; };

static const sz_param_spec EMBED[] = {{"wte", V, C, 0, SZ_INIT_NORMAL, 0.1f}};
static const sz_param_spec BLOCK[] = {{"w1", H, C, 1, SZ_INIT_NORMAL, 0.1f}, {"b1", 1, H, 0, SZ_INIT_ZERO, 0},
                                      {"w2", C, H, 1, SZ_INIT_NORMAL, 0.02f}, {"b2", 1, C, 0, SZ_INIT_ZERO, 0}};
static const sz_param_spec HEAD[] = {{"w", V, C, 1, SZ_INIT_NORMAL, 0.1f}, {"b", 1, V, 0, SZ_INIT_ZERO, 0}};

static sz_status embed_fwd(sz_unit *u, void *p)
{
    struct net *n = p;
    return sz_op_embedding_fwd(u, n->x[0], n->tokens, sz_unit_param(u, 0), n->N, C, V);
}

static sz_status block_fwd(sz_unit *u, void *p)
{
    struct net *n = ((struct block_ref *)p)->n;
    int l = ((struct block_ref *)p)->l, N = n->N;
    sz_status st = sz_op_matmul_fwd(u, n->h[l], n->x[l], sz_unit_param(u, 0), sz_unit_param(u, 1), N, C, H);
    if (!st) st = op_sqrelu_fwd(u, n->a[l], n->h[l], (int64_t)N * H);
    if (!st) st = sz_op_matmul_fwd(u, n->f[l], n->a[l], sz_unit_param(u, 2), sz_unit_param(u, 3), N, H, C);
    return st ? st : sz_op_residual_fwd(u, n->x[l + 1], n->x[l], n->f[l], (int64_t)N * C);
}

static sz_status head_fwd(sz_unit *u, void *p)
{
    struct net *n = p;
    sz_status st = sz_op_matmul_fwd(u, n->logits, n->x[L], sz_unit_param(u, 0), sz_unit_param(u, 1), n->N, C, V);
    return st ? st : sz_op_softmax_xent_fwd(u, n->losses, n->probs, n->logits, n->targets, n->N, V, V);
}

/* Adds the units and their tensors to m (after sz_model_set_zero), N rows on this rank. */
static sz_status net_build(sz_model *m, struct net *n, struct block_ref *refs, int N)
{
    n->N = N;
    sz_unit_desc embed = {.name = "embed", .params = EMBED, .nparams = 1, .forward = embed_fwd, .user = n,
                          .backward_skips_params = 1};
    sz_unit_desc head = {.name = "head", .params = HEAD, .nparams = 2, .forward = head_fwd, .user = n};
    sz_status st = sz_model_add_unit(m, &embed);
    for (int l = 0; l < L && !st; l++) {
        char name[16];
        snprintf(name, sizeof name, "block%d", l);
        refs[l] = (struct block_ref){n, l};
        sz_unit_desc b = {.name = name, .params = BLOCK, .nparams = 4, .forward = block_fwd, .user = &refs[l],
                          .checkpointable = 1};
        st = sz_model_add_unit(m, &b);
    }
    if (st || (st = sz_model_add_unit(m, &head)))
        return st;
    int64_t NC = (int64_t)N * C, NH = (int64_t)N * H, NV = (int64_t)N * V;
    n->tokens = sz_model_tensor(m, "tokens", SZ_DTYPE_I32, N);
    n->targets = sz_model_tensor(m, "targets", SZ_DTYPE_I32, N);
    n->losses = sz_model_tensor(m, "losses", SZ_DTYPE_F32, N);
    n->probs = sz_model_tensor(m, "probs", SZ_DTYPE_F32, NV);
    n->logits = sz_model_tensor(m, "logits", SZ_DTYPE_F32, NV);
    for (int l = 0; l <= L; l++) /* block l's input x[l] is its checkpoint (unit 1 + l) */
        n->x[l] = l < L ? sz_model_checkpoint(m, 1 + l, "x", SZ_DTYPE_F32, NC) : sz_model_tensor(m, "x_out", SZ_DTYPE_F32, NC);
    for (int l = 0; l < L; l++) { /* shared between the blocks under checkpointing */
        n->h[l] = sz_model_activation(m, 1 + l, "h", SZ_DTYPE_F32, NH);
        n->a[l] = sz_model_activation(m, 1 + l, "a", SZ_DTYPE_F32, NH);
        n->f[l] = sz_model_activation(m, 1 + l, "f", SZ_DTYPE_F32, NC);
    }
    return sz_model_set_loss(m, n->losses);
}
/* ============================== end of the model ================================================ */

/* ---- data: batch k (the k-th step's global batch of G rows), rows [rank*N, rank*N + N) of it ---- */
struct data {
    uint16_t *tok; /* a token file, or NULL: the made-up task */
    size_t ntok;
};

static uint32_t mix(uint32_t x) /* a small integer hash: the made-up data is a function of its position */
{
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}

/* Made-up data: each token's next one is a fixed function of it (a random permutation of the
 * vocabulary), so the loss can reach 0. From a file: llm.c's order, batch k mod the whole batches. */
static void batch(const struct data *d, long k, int G, int rank, int N, int *in, int *tg)
{
    for (int i = 0; i < N; i++) {
        long row = k * G + (long)rank * N + i;
        if (d->tok) {
            size_t at = (size_t)(row % (long)((d->ntok - 1) / G * G));
            in[i] = d->tok[at];
            tg[i] = d->tok[at + 1];
        } else {
            in[i] = (int)(mix((uint32_t)row) % V);
            tg[i] = (int)((in[i] * 167u + 13u) % V); /* 167 is odd: a permutation of 0..255 */
        }
    }
}

struct opts {
    const char *tokens, *state;
    int steps, save_every, keep, fresh, stage, batch, checkpoint;
    float lr;
};

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.state = "custom_model.state", .steps = 60, .save_every = 20, .keep = 2, .stage = 3,
                       .batch = 256, .checkpoint = 1, .lr = 1e-2f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--fresh")) { o->fresh = 1; continue; }
        if (!strcmp(a, "--no-checkpoint")) { o->checkpoint = 0; continue; }
        if (!v) {
            fprintf(stderr, "custom_model: %s: unknown, or needs a value (see the top of custom_model.c)\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--state")) o->state = v;
        else if (!strcmp(a, "--lr")) o->lr = strtof(v, &end);
        else {
            long x = strtol(v, &end, 10);
            int *dst = !strcmp(a, "--steps") ? &o->steps : !strcmp(a, "--save-every") ? &o->save_every
                     : !strcmp(a, "--keep") ? &o->keep : !strcmp(a, "--stage") ? &o->stage
                     : !strcmp(a, "--batch") ? &o->batch : NULL;
            if (!dst) {
                fprintf(stderr, "custom_model: unknown option %s\n", a);
                return -1;
            }
            if (*end || x < 0 || x > 1000000000 || (dst == &o->stage && x > 3) || (dst == &o->batch && x < 1)) {
                fprintf(stderr, "custom_model: %s %s: not a valid value\n", a, v);
                return -1;
            }
            *dst = (int)x;
            continue;
        }
        if (end && (*end || !(o->lr >= 0) || !isfinite(o->lr))) {
            fprintf(stderr, "custom_model: %s %s: not a valid value\n", a, v);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o) != 0)
        return 2;
    char err[2048] = "", stepdir[4096] = "", where[4200] = "";
    cJSON *man = NULL; /* the state resumed from, if DIR holds one (and not --fresh) */
    if (!o.fresh && sz_state_find(o.state, stepdir, sizeof stepdir, err, sizeof err) == SZ_OK &&
        sz_state_manifest(stepdir, &man, NULL, 0, err, sizeof err) != SZ_OK) {
        fprintf(stderr, "custom_model: cannot resume: %s\n", err);
        return 1;
    }
    struct data d = {0};
    if (o.tokens && sz_llmc_tokens_read(o.tokens, V, &d.tok, &d.ntok, err, sizeof err) != SZ_OK) {
        fprintf(stderr, "custom_model: %s\n", err);
        return 1;
    }
    if (d.tok && d.ntok < (size_t)o.batch + 1) {
        fprintf(stderr, "custom_model: %s: %zu tokens, fewer than one batch (--batch %d, plus 1)\n", o.tokens, d.ntok, o.batch);
        return 1;
    }

    sz_context *ctx = NULL;
    sz_model *m = NULL;
    sz_state_dir *sd = NULL;
    int rc = 1, *in = NULL, *tg = NULL;
    if (sz_context_init(&ctx, NULL, &argc, &argv) != SZ_OK) {
        fprintf(stderr, "custom_model: cannot start the runtime\n");
        return 1;
    }
    int rank = sz_context_rank(ctx), nd = sz_context_world_size(ctx), N = o.batch / nd, lead = rank == 0;
    if (o.batch % nd) {
        if (lead)
            fprintf(stderr, "custom_model: --batch %d (the global batch) does not split over %d ranks\n", o.batch, nd);
        goto out;
    }
    /* the ZeRO configuration: stage 3 (parameters, gradients and optimizer state sharded), activation
     * checkpointing, AdamW; the rest as sz_zero_config_defaults has it */
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.stage = o.stage;
    z.checkpoint = o.checkpoint;
    static struct net net;
    static struct block_ref refs[L];
    in = malloc((size_t)N * sizeof *in);
    tg = malloc((size_t)N * sizeof *tg);
    if (!in || !tg || sz_model_init(&m, ctx) != SZ_OK || sz_model_set_zero(m, &z) != SZ_OK ||
        net_build(m, &net, refs, N) != SZ_OK || sz_model_finalize(m) != SZ_OK)
        goto out; /* the library logged why */

    /* the state directory: this run's (resumed or fresh), locked while the run lives */
    if (sz_state_dir_open(&sd, ctx, o.state, man ? stepdir : NULL, man, o.fresh, lead ? stderr : NULL, err,
                          sizeof err) != SZ_OK) {
        fprintf(stderr, "custom_model: --state %s: %s\n", o.state, err);
        goto out;
    }
    int first = 1;
    const char *source = o.tokens ? o.tokens : "made-up";
    if (man) {
        const char *was = sz_json_str(man, "data", "?");
        if (strcmp(was, source)) {
            if (lead)
                fprintf(stderr, "custom_model: %s was trained on %s data, this run's is %s: give the same "
                                "--tokens, or --fresh\n", stepdir, was, source);
            goto out;
        }
        if (sz_state_load(m, ctx, stepdir, man, err, sizeof err) != SZ_OK) {
            fprintf(stderr, "custom_model: %s\n", err);
            goto out;
        }
        first = (int)sz_json_num(man, "step", 0) + 1;
        if (lead)
            printf("resuming from %s: step %d (saved at N_d %d)\n", stepdir, first - 1, (int)sz_json_num(man, "nd", 0));
    } else if (sz_model_init_params(m, 7) != SZ_OK)
        goto out;
    if (sz_stop_catch("custom_model") != SZ_OK) /* after sz_context_init: ours replace StarPU's */
        goto out;

    sz_train_config tc;
    sz_train_config_defaults(&tc);
    sz_lr_schedule sched = {SZ_LR_COSINE, o.lr, o.lr / 10, 5, o.steps};
    if (lead && first > o.steps)
        printf("the state is at step %d and --steps is %d: nothing to train (a larger --steps continues)\n",
               first - 1, o.steps);
    float loss = 0;
    int stopped = 0;
    for (int step = first; step <= o.steps && !stopped; step++) {
        batch(&d, step - 1, o.batch, rank, N, in, tg);
        tc.lr = (float)sz_lr_at(&sched, step);
        if (sz_tensor_write(net.tokens, in) != SZ_OK || sz_tensor_write(net.targets, tg) != SZ_OK ||
            sz_model_train_step(m, &tc, step, &loss) != SZ_OK) {
            fprintf(stderr, "custom_model: step %d failed\n", step);
            goto out;
        }
        if (lead)
            printf("step %d/%d: loss %.6f lr %.3g\n", step, o.steps, loss, tc.lr);
        fflush(stdout);
        stopped = sz_stop_agree(ctx); /* every rank, after every step */
        if (stopped || step == o.steps || (o.save_every > 0 && step % o.save_every == 0)) {
            cJSON *app = cJSON_CreateObject(); /* what this app needs to resume: its data */
            cJSON_AddStringToObject(app, "data", source);
            cJSON_AddNumberToObject(app, "global_batch", o.batch);
            if (sz_state_save(sd, m, ctx, step, app, o.keep, where, sizeof where, err, sizeof err) != SZ_OK) {
                fprintf(stderr, "custom_model: saving the state: %s\n", err);
                goto out;
            }
            if (lead)
                printf("step %d: state saved in %s\n", step, where);
        }
        if (stopped && lead)
            printf("custom_model: stopped by signal %d after step %d: the state is in %s (run again to continue)\n",
                   stopped, step, where);
    }
    if (lead && first <= o.steps && !stopped)
        printf("final loss %.6f\n", loss);
    rc = 0;
out:
    free(in);
    free(tg);
    free(d.tok);
    sz_state_dir_close(sd);
    sz_model_free(m);
    sz_context_free(ctx);
    cJSON_Delete(man);
    return rc;
}
