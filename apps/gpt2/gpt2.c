/* apps/gpt2/gpt2.c — GPT-2 on the StarZeRO task API, exactly llm.c's forward, written as the forward
 * only: the engine derives the backward from the ops (each op's own, in reverse; the fused
 * matmul + GELU backward where a matmul reads matmul_gelu's output; include/starzero_starpu.h).
 * On the native bf16 path (sz_resolved_precision.native) the activations the matmuls read (ln1,
 * atty, ln2, fch_gelu, lnf) and the logits (bf16 as a matmul's output under autocast; the fused
 * softmax-xent computes in fp32 from them and leaves the bf16 gradient in place) are bf16, and every
 * unit reads its bf16 parameters directly (bf16_params); the residual stream, the other matmul
 * outputs and the norms' statistics stay fp32 (the gradients' types follow from the ops).
 * Units: "embed" (wte, wpe), "block<l>" (the 12 per-layer tensors), "head" (lnfw, lnfb; it reads
 * the embedding's wte: tied weights, whose gradients from the head and the embedding accumulate
 * into one tensor). Parameter rows come from the GPT-2 table (sz_gpt2_tensor), never by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gpt2.h"
#include "gpt2_err.h"

/* Activations of one block (forward) — llm.c's ActivationTensors, per layer. */
struct block_acts {
    sz_tensor *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *attstat, *attproj, *res2, *ln2, *ln2_mean,
        *ln2_rstd, *fch, *fch_gelu, *fcproj;
};

struct block_unit {
    struct gpt2 *g;
    int layer;
};

struct gpt2 {
    sz_context *ctx;
    sz_model *model;
    sz_gpt2_config cfg;
    int B, T;
    sz_tensor *tokens, *targets;
    sz_tensor **res;                  /* residual stream res[0..L] */
    struct block_acts *acts;          /* L */
    struct block_unit *blocks;        /* L */
    sz_tensor *lnf, *lnf_mean, *lnf_rstd, *logits, *losses;
    sz_param_spec embed_spec[2], block_spec[12], head_spec[2];
};

/* Unit layout: which table ids each unit holds, in order. */
static const int EMBED_IDS[] = SZ_GPT2_EMBED_IDS, BLOCK_IDS[] = SZ_GPT2_BLOCK_IDS, HEAD_IDS[] = SZ_GPT2_HEAD_IDS;
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Where table tensor `id`, layer `l`, lives: unit index and parameter index. */
static void locate(const struct gpt2 *g, int id, int l, int *unit, int *param)
{
    for (int i = 0; i < NELEM(EMBED_IDS); i++)
        if (EMBED_IDS[i] == id) { *unit = 0; *param = i; return; }
    for (int i = 0; i < NELEM(BLOCK_IDS); i++)
        if (BLOCK_IDS[i] == id) { *unit = 1 + l; *param = i; return; }
    for (int i = 0; i < NELEM(HEAD_IDS); i++)
        if (HEAD_IDS[i] == id) { *unit = 1 + g->cfg.layers; *param = i; return; }
    *unit = *param = -1;
}

/* Tensor `id`, layer `l`: its unit and parameter (locate), its element count *n and its offset
 * in llm.c's flat order. */
static size_t place(const struct gpt2 *g, int id, int l, int *unit, int *param, int64_t *n)
{
    *n = 0;
    locate(g, id, l, unit, param);
    sz_model_unit_param_info(g->model, *unit, *param, NULL, NULL, n);
    return sz_gpt2_tensor_layer_offset(&g->cfg, id, l);
}

static void spec_from_table(const sz_gpt2_config *cfg, int id, sz_param_spec *s)
{
    const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
    size_t rows, cols;
    sz_gpt2_tensor_shape(cfg, id, &rows, &cols);
    s->name = t->name;
    s->rows = (int64_t)rows;
    s->cols = (int64_t)cols;
    s->decay = t->is_matrix;
    switch (t->init) {
    case SZ_GPT2_INIT_ONES: s->init = SZ_INIT_ONE; break;
    case SZ_GPT2_INIT_ZEROS: s->init = SZ_INIT_ZERO; break;
    default: s->init = SZ_INIT_NORMAL; break;
    }
    s->init_std = sz_gpt2_tensor_init_std(cfg, id);
}

/* ---- forward / backward callbacks ---------------------------------------------------------- */
#define TRY(x) do { sz_status st_ = (x); if (st_ != SZ_OK) return st_; } while (0)

static sz_status embed_fwd(sz_unit *u, void *user)
{
    struct gpt2 *g = user;
    return sz_op_encoder_fwd(u, g->res[0], g->tokens, sz_unit_param(u, 0), sz_unit_param(u, 1), g->B, g->T,
                             g->cfg.channels);
}

enum { LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB };

static sz_status block_fwd(sz_unit *u, void *user)
{
    struct block_unit *bu = user;
    struct gpt2 *g = bu->g;
    struct block_acts *a = &g->acts[bu->layer];
    int N = g->B * g->T, C = g->cfg.channels, NH = g->cfg.heads;
    int64_t NC = (int64_t)N * C;
    sz_tensor *x = g->res[bu->layer], *y = g->res[bu->layer + 1];
#define P(i) sz_unit_param(u, i)
    TRY(sz_op_layernorm_fwd(u, a->ln1, a->ln1_mean, a->ln1_rstd, x, P(LN1W), P(LN1B), N, C));
    TRY(sz_op_matmul_fwd(u, a->qkv, a->ln1, P(QKVW), P(QKVB), N, C, 3 * C));
    TRY(sz_op_attention_fwd(u, a->atty, a->attstat, a->qkv, g->B, g->T, C, NH));
    TRY(sz_op_matmul_fwd(u, a->attproj, a->atty, P(ATTPROJW), P(ATTPROJB), N, C, C));
    /* res2 = x + attproj and ln2 = layernorm(res2) in one pass */
    TRY(sz_op_residual_layernorm_fwd(u, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, x, a->attproj, P(LN2W), P(LN2B),
                                     N, C));
    /* fch = ln2 . fcw^T + fcb and fch_gelu = gelu(fch), each tile's GELU while the tile is in cache */
    TRY(sz_op_matmul_gelu_fwd(u, a->fch, a->fch_gelu, a->ln2, P(FCW), P(FCB), N, C, 4 * C));
    TRY(sz_op_matmul_fwd(u, a->fcproj, a->fch_gelu, P(FCPROJW), P(FCPROJB), N, 4 * C, C));
    return sz_op_residual_fwd(u, y, a->res2, a->fcproj, NC);
}

static sz_status head_fwd(sz_unit *u, void *user)
{
    struct gpt2 *g = user;
    int N = g->B * g->T, C = g->cfg.channels, L = g->cfg.layers;
    sz_tensor *wte = sz_model_param(g->model, 0, 0);
    TRY(sz_op_layernorm_fwd(u, g->lnf, g->lnf_mean, g->lnf_rstd, g->res[L], P(0), P(1), N, C));
    TRY(sz_op_matmul_fwd(u, g->logits, g->lnf, wte, NULL, N, C, g->cfg.padded_vocab));
    /* the losses, and the logits overwritten with their gradient: one pass */
    return sz_op_softmax_xent_fused(u, g->losses, g->logits, g->targets, N, g->cfg.vocab, g->cfg.padded_vocab);
}

#undef P

/* ---- construction -------------------------------------------------------------------------- */

/* A block's activation: its own, or shared by all blocks under activation checkpointing. */
static sz_tensor *block_act(struct gpt2 *g, const char *what, int layer, int64_t n)
{
    return sz_model_activation(g->model, 1 + layer, what, SZ_DTYPE_F32, n);
}

static sz_tensor *block_act_dt(struct gpt2 *g, const char *what, int layer, sz_dtype dt, int64_t n)
{
    return sz_model_activation(g->model, 1 + layer, what, dt, n);
}

static sz_tensor *act(struct gpt2 *g, const char *what, int layer, sz_dtype dt, int64_t n)
{
    char name[48];
    if (layer >= 0)
        snprintf(name, sizeof name, "%s.%d", what, layer);
    else
        snprintf(name, sizeof name, "%s", what);
    return sz_model_tensor(g->model, name, dt, n);
}

/* GPT-2's units as gpt2_create adds them and sz_gpt2_shape describes them: the tensor tables into
 * es, bs, hs (embed, block, head: sz_gpt2_tensor's rows), the descriptors into d[0 .. L+1] with their
 * names written into names[] (and, given g, its callbacks' user data). */
static void unit_descs(const sz_gpt2_config *cfg, struct gpt2 *g, sz_param_spec *es, sz_param_spec *bs,
                       sz_param_spec *hs, sz_unit_desc *d, char (*names)[32])
{
    static const int tied[] = {0}; /* the head reads the embedding's wte */
    int L = cfg->layers;
    for (int i = 0; i < NELEM(EMBED_IDS); i++)
        spec_from_table(cfg, EMBED_IDS[i], &es[i]);
    for (int i = 0; i < NELEM(BLOCK_IDS); i++)
        spec_from_table(cfg, BLOCK_IDS[i], &bs[i]);
    for (int i = 0; i < NELEM(HEAD_IDS); i++)
        spec_from_table(cfg, HEAD_IDS[i], &hs[i]);
    /* every op GPT-2's units pass parameters to takes bf16 ones: bf16_params; the embedding's
     * gradients are rounded by the head's tied matmul and its own encoder's backward (their _tied
     * ops, which the engine picks for a weight so shared) */
    snprintf(names[0], sizeof names[0], "embed");
    d[0] = (sz_unit_desc){.name = names[0], .params = es, .nparams = NELEM(EMBED_IDS), .forward = embed_fwd,
                          .user = g, .backward_skips_params = 1, .bf16_params = 1,
                          .round_grads = 1, .round_tied_grads = 1};
    for (int l = 0; l < L; l++) {
        snprintf(names[1 + l], sizeof names[1 + l], "block%d", l);
        if (g)
            g->blocks[l] = (struct block_unit){g, l};
        d[1 + l] = (sz_unit_desc){.name = names[1 + l], .params = bs, .nparams = NELEM(BLOCK_IDS), .forward = block_fwd,
                                  .user = g ? &g->blocks[l] : NULL, .checkpointable = 1,
                                  .bf16_params = 1, .round_grads = 1}; /* its writers (matmuls, gelu_matmul, the layernorms) round */
    }
    snprintf(names[L + 1], sizeof names[L + 1], "head");
    d[L + 1] = (sz_unit_desc){.name = names[L + 1], .params = hs, .nparams = NELEM(HEAD_IDS), .forward = head_fwd,
                              .user = g, .uses = tied, .nuses = 1, .bf16_params = 1,
                              .round_grads = 1}; /* lnf's (layernorm_bwd); wte's are the embedding's */
}

sz_status sz_gpt2_shape(const sz_gpt2_config *cfg, int B, int T, const sz_zero_config *z, int workers, int threads,
                        sz_model_shape *out, char *err, size_t errlen)
{
    sz_status st = sz_gpt2_config_validate(cfg, err, errlen);
    if (st != SZ_OK)
        return st;
    sz_resolved_precision p;
    int L = cfg->layers;
    const size_t ne = NELEM(EMBED_IDS), nb = NELEM(BLOCK_IDS), nh = NELEM(HEAD_IDS);
    if ((st = sz_model_shape_begin(out, z, B, T, cfg->max_seq, workers, threads, L + 2,
                                   (ne + nb + nh) * sizeof(sz_param_spec), &p, err, errlen)) != SZ_OK)
        return st;
    sz_param_spec *es = out->model;
    unit_descs(cfg, NULL, es, es + ne, es + ne + nb, out->units, out->names);
    for (int l = 0; l < L; l++)
        out->ckpt_bytes[1 + l] = (int64_t)B * T * cfg->channels * 4; /* the block's input res[l] */
    out->activation_bytes = sz_gpt2_engine_activation_bytes_bf16(cfg, B, T, z->checkpoint, z->offload_checkpoints,
                                                                 p.native, p.mixed && p.grads_rounded,
                                                                 &out->host_pool_bytes);
    out->host_buffer_bytes = sz_gpt2_host_buffer_bytes(cfg, B, T, &p, workers, threads);
    return SZ_OK;
}

static sz_status failed(gpt2 *g, sz_status st, char *err, size_t errlen)
{
    snprintf(err, errlen, "building the GPT-2 model failed: %s%s", sz_status_string(st),
             st == SZ_ERR_BUDGET ? " (the message above says what would fit)" : "");
    gpt2_free(g);
    return st;
}

sz_status gpt2_create(gpt2 **out, sz_context *ctx, const sz_gpt2_config *cfg, int B, int T, const sz_zero_config *zero,
                      char *err, size_t errlen)
{
    sz_status st = sz_gpt2_config_validate(cfg, err, errlen);
    if (st != SZ_OK)
        return st;
    if (B < 1 || T < 1 || T > cfg->max_seq) {
        snprintf(err, errlen, "batch %d x seq %d: need B >= 1 and 1 <= T <= max_seq (%d)", B, T, cfg->max_seq);
        return SZ_ERR_INVALID;
    }
    struct gpt2 *g = calloc(1, sizeof *g);
    int L = cfg->layers;
    if (!g)
        return SZ_ERR_NOMEM;
    g->ctx = ctx;
    g->cfg = *cfg;
    g->B = B;
    g->T = T;
    g->res = calloc((size_t)L + 1, sizeof *g->res);
    g->acts = calloc((size_t)L, sizeof *g->acts);
    g->blocks = calloc((size_t)L, sizeof *g->blocks);
    if (!g->res || !g->acts || !g->blocks || (st = sz_model_init(&g->model, ctx)) != SZ_OK) {
        gpt2_free(g);
        return SZ_ERR_NOMEM;
    }
    sz_zero_config z;
    if (zero)
        z = *zero;
    else
        sz_zero_config_defaults(&z);
    /* the precision, resolved once; the budget counts the matmuls' host working memory (the bf16
     * kernels' or the widened weights', the rounding panels') beside what the app holds */
    sz_resolved_precision p;
    sz_runtime_info info;
    st = sz_precision_resolve(ctx, &z, &p);
    if (st == SZ_OK && sz_context_runtime_info(ctx, &info) == SZ_OK)
        z.host_bytes += sz_gpt2_host_buffer_bytes(cfg, B, T, &p, info.compute_workers, info.kernel_threads);
    if (st == SZ_OK)
        st = sz_model_set_zero(g->model, &z);
    if (st != SZ_OK) {
        snprintf(err, errlen, "invalid ZeRO configuration (the library's error above says why)");
        gpt2_free(g);
        return st;
    }
    sz_unit_desc *d = calloc((size_t)L + 2, sizeof *d);
    char (*names)[32] = calloc((size_t)L + 2, sizeof *names);
    st = d && names ? SZ_OK : SZ_ERR_NOMEM;
    if (st == SZ_OK)
        unit_descs(cfg, g, g->embed_spec, g->block_spec, g->head_spec, d, names);
    for (int i = 0; i < L + 2 && st == SZ_OK; i++)
        st = sz_model_add_unit(g->model, &d[i]); /* it copies the name */
    free(d);
    free(names);
    if (st != SZ_OK) /* before any tensor: a model no step could hold is refused here */
        return failed(g, st, err, errlen);

    int64_t N = (int64_t)B * T, C = cfg->channels, NC = N * C, A = 2 * (int64_t)B * cfg->heads * T;
    int64_t NV = N * cfg->padded_vocab;
    const sz_resolved_precision *prec = sz_model_precision(g->model);
    sz_dtype X = prec->act; /* what the matmuls read */
    g->tokens = act(g, "tokens", -1, SZ_DTYPE_I32, N);
    g->targets = act(g, "targets", -1, SZ_DTYPE_I32, N);
    for (int l = 0; l <= L; l++) { /* block l's input res[l] is its checkpoint */
        g->res[l] = l < L ? sz_model_checkpoint(g->model, 1 + l, "res", SZ_DTYPE_F32, NC)
                          : act(g, "res", l, SZ_DTYPE_F32, NC);
    }
    for (int l = 0; l < L; l++) {
        struct block_acts *a = &g->acts[l];
        a->ln1 = block_act_dt(g, "ln1", l, X, NC);
        a->ln1_mean = block_act(g, "ln1_mean", l, N);
        a->ln1_rstd = block_act(g, "ln1_rstd", l, N);
        a->qkv = block_act(g, "qkv", l, 3 * NC);
        a->atty = block_act_dt(g, "atty", l, X, NC);
        a->attstat = block_act(g, "attstat", l, A); /* softmax max, 1/sum per query row */
        a->attproj = block_act(g, "attproj", l, NC);
        a->res2 = block_act(g, "res2", l, NC);
        a->ln2 = block_act_dt(g, "ln2", l, X, NC);
        a->ln2_mean = block_act(g, "ln2_mean", l, N);
        a->ln2_rstd = block_act(g, "ln2_rstd", l, N);
        a->fch = block_act(g, "fch", l, 4 * NC);
        a->fch_gelu = block_act_dt(g, "fch_gelu", l, X, 4 * NC);
        a->fcproj = block_act(g, "fcproj", l, NC);
    }
    g->lnf = act(g, "lnf", -1, X, NC);
    g->lnf_mean = act(g, "lnf_mean", -1, SZ_DTYPE_F32, N);
    g->lnf_rstd = act(g, "lnf_rstd", -1, SZ_DTYPE_F32, N);
    g->logits = act(g, "logits", -1, X, NV);
    g->losses = act(g, "losses", -1, SZ_DTYPE_F32, N);
    if (st == SZ_OK && (!g->logits || !g->losses))
        st = SZ_ERR_NOMEM;
    if (st == SZ_OK)
        st = sz_model_set_loss(g->model, g->losses);
    if (st == SZ_OK)
        st = sz_model_finalize(g->model);
    if (st != SZ_OK)
        return failed(g, st, err, errlen);
    *out = g;
    return SZ_OK;
}

void gpt2_free(gpt2 *g)
{
    if (!g)
        return;
    sz_model_free(g->model);
    free(g->res);
    free(g->acts);
    free(g->blocks);
    free(g);
}

sz_model *gpt2_model(gpt2 *g) { return g->model; }
const sz_gpt2_config *gpt2_config(const gpt2 *g) { return &g->cfg; }

sz_status gpt2_init_random(gpt2 *g, uint64_t seed)
{
    sz_status st = sz_model_init_params(g->model, seed);
    if (st != SZ_OK)
        return st;
    /* llm.c initialises only the first V rows of wte; the padded rows (fewer than 128) stay zero */
    const sz_gpt2_config *c = &g->cfg;
    int64_t n = (int64_t)(c->padded_vocab - c->vocab) * c->channels;
    float *zeros = n > 0 ? calloc((size_t)n, sizeof *zeros) : NULL;
    if (n > 0 && !zeros)
        return SZ_ERR_NOMEM;
    int unit, param;
    locate(g, SZ_GPT2_WTE, 0, &unit, &param);
    st = sz_model_param_write_range(g->model, unit, param, (int64_t)c->vocab * c->channels, n, zeros);
    free(zeros);
    return st;
}

/* Copy between llm.c's flat order and the units: tensor by tensor, layer by layer. */
static sz_status transfer(gpt2 *g, float *flat, int dir /* 0: flat -> model, 1: model -> flat, 2: grads */)
{
    for (int id = 0; id < SZ_GPT2_NUM_TENSORS; id++) {
        int layers = sz_gpt2_tensor(id)->per_layer ? g->cfg.layers : 1;
        for (int l = 0; l < layers; l++) {
            int unit, param;
            locate(g, id, l, &unit, &param);
            float *p = flat + sz_gpt2_tensor_layer_offset(&g->cfg, id, l);
            sz_status st = dir == 0   ? sz_model_param_write(g->model, unit, param, p)
                           : dir == 1 ? sz_model_param_read(g->model, unit, param, p)
                                      : sz_model_grad_read(g->model, unit, param, p);
            if (st != SZ_OK)
                return st;
        }
    }
    return SZ_OK;
}

sz_status gpt2_set_params(gpt2 *g, const float *flat) { return transfer(g, (float *)flat, 0); }
sz_status gpt2_get_params(gpt2 *g, float *flat) { return transfer(g, flat, 1); }
sz_status gpt2_get_grads(gpt2 *g, float *flat) { return transfer(g, flat, 2); }

/* Loading and saving stream the model, in llm.c's file order, through one buffer of GPT2_IO_CHUNK
 * floats. Loading reads the file twice: first every value is checked finite (nothing is
 * half-loaded), then each piece goes into what each rank holds. */
#define GPT2_IO_CHUNK ((int64_t)1 << 18)

sz_status gpt2_load(gpt2 *g, const char *path, char *err, size_t errlen)
{
    sz_gpt2_config got;
    sz_llmc_reader *r = NULL;
    sz_status st = sz_llmc_reader_open(&r, path, &got, err, errlen);
    if (st != SZ_OK)
        return st;
    st = sz_llmc_check_config(path, &got, &g->cfg, err, errlen);
    float *buf = st == SZ_OK ? malloc((size_t)GPT2_IO_CHUNK * sizeof *buf) : NULL;
    if (st == SZ_OK && !buf)
        st = SZ_ERR_NOMEM;
    for (int pass = 0; pass < 2; pass++)
        for (int id = 0; id < SZ_GPT2_NUM_TENSORS && st == SZ_OK; id++) {
            const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
            int layers = t->per_layer ? g->cfg.layers : 1;
            for (int l = 0; l < layers && st == SZ_OK; l++) {
                int unit, param;
                int64_t n;
                size_t at = place(g, id, l, &unit, &param, &n);
                for (int64_t k = 0; k < n && st == SZ_OK; k += GPT2_IO_CHUNK) {
                    int64_t c = n - k < GPT2_IO_CHUNK ? n - k : GPT2_IO_CHUNK;
                    if ((st = sz_llmc_reader_get(r, at + (size_t)k, buf, (size_t)c, err, errlen)) != SZ_OK)
                        break;
                    if (pass == 1) {
                        st = sz_model_param_write_range(g->model, unit, param, k, c, buf);
                        continue;
                    }
                    for (int64_t i = 0; i < c; i++)
                        if (!isfinite(buf[i])) {
                            if (t->per_layer)
                                gpt2_set_err(err, errlen, "%s: tensor %s of layer %d holds %f at element %lld: a "
                                             "checkpoint with non-finite values is refused", path, t->name, l,
                                             buf[i], (long long)(k + i));
                            else
                                gpt2_set_err(err, errlen, "%s: tensor %s holds %f at element %lld: a checkpoint "
                                             "with non-finite values is refused", path, t->name, buf[i],
                                             (long long)(k + i));
                            st = SZ_ERR_FORMAT;
                            break;
                        }
                }
            }
        }
    free(buf);
    sz_llmc_reader_close(r);
    return st;
}

/* Collective: every tensor, in llm.c's order, in fixed chunks gathered on rank `root` from what
 * each rank holds (sz_model_param_read_range), which writes them: host memory for one chunk,
 * never a unit or the whole model, on any rank. */
sz_status gpt2_save(gpt2 *g, int root, const char *path, char *err, size_t errlen)
{
    int me = sz_context_rank(g->ctx) == root;
    sz_llmc_writer *w = NULL;
    float *buf = me ? malloc((size_t)GPT2_IO_CHUNK * sizeof *buf) : NULL;
    sz_status st = me && !buf ? SZ_ERR_NOMEM : SZ_OK, wst = SZ_OK;
    if (me && st == SZ_OK)
        wst = sz_llmc_writer_open(&w, path, &g->cfg, err, errlen);
    /* every rank takes part in every gather, even after root's writer failed */
    for (int id = 0; id < SZ_GPT2_NUM_TENSORS && st == SZ_OK; id++) {
        int layers = sz_gpt2_tensor(id)->per_layer ? g->cfg.layers : 1;
        for (int l = 0; l < layers && st == SZ_OK; l++) {
            int unit, param;
            int64_t n;
            size_t at = place(g, id, l, &unit, &param, &n);
            for (int64_t k = 0; k < n && st == SZ_OK; k += GPT2_IO_CHUNK) {
                int64_t c = n - k < GPT2_IO_CHUNK ? n - k : GPT2_IO_CHUNK;
                st = sz_model_param_read_range(g->model, unit, param, k, c, root, buf);
                if (st == SZ_OK && me && wst == SZ_OK)
                    wst = sz_llmc_writer_put(w, at + (size_t)k, buf, (size_t)c, err, errlen);
            }
        }
    }
    if (w)
        wst = st == SZ_OK && wst == SZ_OK ? sz_llmc_writer_close(w, err, errlen)
                                          : (sz_llmc_writer_abort(w), wst != SZ_OK ? wst : st);
    free(buf);
    return st != SZ_OK ? st : wst;
}

sz_status gpt2_set_batch(gpt2 *g, const int *inputs, const int *targets)
{
    sz_status st = sz_tensor_write(g->tokens, inputs);
    return st == SZ_OK ? sz_tensor_write(g->targets, targets) : st;
}

double gpt2_flops_per_step(const gpt2 *g)
{
    const sz_gpt2_config *c = &g->cfg;
    double L = c->layers, C = c->channels, T = g->T, tokens = (double)g->B * g->T;
    double matmul = 2.0 * (12.0 * L * C * C + C * c->padded_vocab); /* per token, forward */
    double attention = 2.0 * L * T * C;                              /* causal QK^T and AV, forward */
    return 3.0 * tokens * (matmul + attention);                      /* forward + backward (2x) */
}

void gpt2_batch_from_stream(const uint16_t *tokens, size_t ntokens, long k, int rows_per_batch, int row0, int B,
                            int T, int *inputs, int *targets)
{
    size_t base = (size_t)k * (size_t)rows_per_batch * (size_t)T;
    for (int b = 0; b < B; b++) {
        size_t start = base + (size_t)(row0 + b) * (size_t)T;
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = tokens[(start + (size_t)t) % ntokens];
            targets[b * T + t] = tokens[(start + (size_t)t + 1) % ntokens];
        }
    }
}
