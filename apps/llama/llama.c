/* apps/llama/llama.c — the LLaMA-style model on the public StarZeRO API (starzero.h), written as its
 * forward: units "embed" (wte), "block<l>" (checkpointable), "head" (final RMSNorm weight and the
 * untied LM head). The callbacks only submit operations; the backward is derived by the engine from
 * them (each op's own backward, in reverse; include/starzero_starpu.h), and ZeRO stages,
 * checkpointing and offload are the engine's business. On the native bf16 path
 * (sz_resolved_precision.native) the activations the matmuls read (rms1, atty, rms2, h, rmsf) and
 * the logits (bf16 as a matmul's output; the fused softmax-xent computes in fp32 from them and leaves
 * the bf16 gradient in place) are bf16 — the tables of llama_spec.c say which — and every unit reads
 * its bf16 parameters directly (bf16_params); the residual stream, the other matmul outputs and the
 * norms' statistics stay fp32. The gradients' types follow from the ops (bf16 where a matmul reads or
 * writes one on that path). */
#include <stdlib.h>
#include <string.h>
#include "llama_internal.h"

struct block_unit {
    struct sz_llama *m;
    int layer;
};

struct sz_llama {
    sz_model *model;
    sz_llama_config cfg;
    int B, T;
    sz_tensor *tokens, *targets;
    sz_tensor **res;           /* the residual stream res[0..L] */
    sz_tensor **acts;          /* L x LL_NBLOCK */
    sz_tensor *head[LL_NHEAD];
    struct block_unit *blocks;
    sz_param_spec embed_spec[SZ_LLAMA_EMBED_PARAMS], block_spec[SZ_LLAMA_BLOCK_PARAMS],
        head_spec[SZ_LLAMA_HEAD_PARAMS];
};

#define TRY(x) do { sz_status st_ = (x); if (st_ != SZ_OK) return st_; } while (0)
#define P(i) sz_unit_param(u, i)
#define G(i) sz_unit_grad(u, i)
enum { RMS1W, QKVW, ATTPROJW, RMS2W, GATEW, UPW, DOWNW };
enum { RMSFW, LMW };

static sz_status embed_fwd(sz_unit *u, void *user)
{
    struct sz_llama *m = user;
    return sz_op_embedding_fwd(u, m->res[0], m->tokens, P(0), m->B * m->T, m->cfg.channels, m->cfg.vocab);
}

static sz_status block_fwd(sz_unit *u, void *user)
{
    struct block_unit *bu = user;
    struct sz_llama *m = bu->m;
    sz_tensor **a = m->acts + (size_t)bu->layer * LL_NBLOCK;
    const sz_llama_config *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->channels, F = c->hidden, NH = c->heads;
    int64_t NC = (int64_t)N * C, NF = (int64_t)N * F;
    sz_tensor *x = m->res[bu->layer], *y = m->res[bu->layer + 1];
    TRY(sz_op_rmsnorm_fwd(u, a[LL_RMS1], a[LL_RSTD1], x, P(RMS1W), N, C, c->norm_eps));
    TRY(sz_op_matmul_fwd(u, a[LL_QKV], a[LL_RMS1], P(QKVW), NULL, N, C, 3 * C));
    TRY(sz_op_rope_fwd(u, a[LL_QKV], a[LL_QKV], B, T, C, NH, c->rope_theta)); /* in place */
    TRY(sz_op_attention_fwd(u, a[LL_ATTY], a[LL_STATS], a[LL_QKV], B, T, C, NH));
    TRY(sz_op_matmul_fwd(u, a[LL_ATTPROJ], a[LL_ATTY], P(ATTPROJW), NULL, N, C, C));
    /* res2 = x + attproj and rms2 = rmsnorm(res2) in one pass */
    TRY(sz_op_residual_rmsnorm_fwd(u, a[LL_RES2], a[LL_RMS2], a[LL_RSTD2], x, a[LL_ATTPROJ], P(RMS2W), N, C,
                                   c->norm_eps));
    /* up before gate: the derived backward then adds gate's input gradient first, then up's */
    TRY(sz_op_matmul_fwd(u, a[LL_UP], a[LL_RMS2], P(UPW), NULL, N, C, F));
    TRY(sz_op_matmul_fwd(u, a[LL_GATE], a[LL_RMS2], P(GATEW), NULL, N, C, F));
    TRY(sz_op_swiglu_fwd(u, a[LL_H], a[LL_GATE], a[LL_UP], NF));
    TRY(sz_op_matmul_fwd(u, a[LL_DOWN], a[LL_H], P(DOWNW), NULL, N, F, C));
    return sz_op_residual_fwd(u, y, a[LL_RES2], a[LL_DOWN], NC);
}

static sz_status head_fwd(sz_unit *u, void *user)
{
    struct sz_llama *m = user;
    sz_tensor **h = m->head;
    int N = m->B * m->T, C = m->cfg.channels, V = m->cfg.vocab;
    TRY(sz_op_rmsnorm_fwd(u, h[LL_RMSF], h[LL_RSTDF], m->res[m->cfg.layers], P(RMSFW), N, C, m->cfg.norm_eps));
    TRY(sz_op_matmul_fwd(u, h[LL_LOGITS], h[LL_RMSF], P(LMW), NULL, N, C, V));
    /* the losses, and the logits overwritten with their gradient: one pass */
    return sz_op_softmax_xent_fused(u, h[LL_LOSSES], h[LL_LOGITS], m->targets, N, V, V);
}

static sz_tensor *tensor(struct sz_llama *m, const char *what, int layer, sz_dtype dt, int64_t n)
{
    char name[48];
    if (layer >= 0)
        snprintf(name, sizeof name, "%s.%d", what, layer);
    else
        snprintf(name, sizeof name, "%s", what);
    return sz_model_tensor(m->model, name, dt, n);
}

/* The units as sz_llama_create adds them and sz_llama_shape describes them: the tensor tables into
 * es, bs, hs (sz_llama_unit_params), the descriptors into d[0 .. L+1] with their names written into
 * names[] (and, given m, its callbacks' user data). */
static void unit_descs(const sz_llama_config *cfg, struct sz_llama *m, sz_param_spec *es, sz_param_spec *bs,
                       sz_param_spec *hs, sz_unit_desc *d, char (*names)[32])
{
    int L = cfg->layers;
    sz_llama_unit_params(cfg, 0, es);
    sz_llama_unit_params(cfg, 1, bs);
    sz_llama_unit_params(cfg, L + 1, hs);
    snprintf(names[0], sizeof names[0], "embed");
    d[0] = (sz_unit_desc){.name = names[0], .params = es, .nparams = SZ_LLAMA_EMBED_PARAMS, .forward = embed_fwd,
                          .user = m, .backward_skips_params = 1, .bf16_params = 1,
                          .round_grads = 1}; /* untied: only its embedding_bwd writes it */
    for (int l = 0; l < L; l++) {
        snprintf(names[1 + l], sizeof names[1 + l], "block%d", l);
        if (m)
            m->blocks[l] = (struct block_unit){m, l};
        d[1 + l] = (sz_unit_desc){.name = names[1 + l], .params = bs, .nparams = SZ_LLAMA_BLOCK_PARAMS,
                                  .forward = block_fwd, .user = m ? &m->blocks[l] : NULL,
                                  .checkpointable = 1, .bf16_params = 1,
                                  .round_grads = 1}; /* its writers (matmuls, rmsnorms) round */
    }
    snprintf(names[L + 1], sizeof names[L + 1], "head");
    d[L + 1] = (sz_unit_desc){.name = names[L + 1], .params = hs, .nparams = SZ_LLAMA_HEAD_PARAMS, .forward = head_fwd,
                              .user = m, .bf16_params = 1,
                              .round_grads = 1}; /* matmul_bwd and rmsnorm_bwd */
}

sz_status sz_llama_shape(const sz_llama_config *cfg, int B, int T, const sz_zero_config *z, int workers, int threads,
                         sz_model_shape *out, char *err, size_t errlen)
{
    sz_status st = sz_llama_config_validate(cfg, err, errlen);
    if (st != SZ_OK)
        return st;
    sz_resolved_precision p;
    int L = cfg->layers;
    const size_t ne = SZ_LLAMA_EMBED_PARAMS, nb = SZ_LLAMA_BLOCK_PARAMS, nh = SZ_LLAMA_HEAD_PARAMS;
    if ((st = sz_model_shape_begin(out, z, B, T, cfg->max_seq, workers, threads, L + 2,
                                   (ne + nb + nh) * sizeof(sz_param_spec), &p, err, errlen)) != SZ_OK)
        return st;
    sz_param_spec *es = out->model;
    unit_descs(cfg, NULL, es, es + ne, es + ne + nb, out->units, out->names);
    for (int l = 0; l < L; l++)
        out->ckpt_bytes[1 + l] = (int64_t)B * T * cfg->channels * 4; /* the block's input res[l] */
    out->activation_bytes = sz_llama_engine_activation_bytes_bf16(cfg, B, T, z->checkpoint, z->offload_checkpoints,
                                                                  p.native, &out->host_pool_bytes);
    out->host_buffer_bytes = sz_llama_host_buffer_bytes(cfg, B, T, &p, workers, threads);
    return SZ_OK;
}

static sz_status failed(struct sz_llama *m, sz_status st, char *err, size_t errlen)
{
    snprintf(err, errlen, "building the LLaMA-style model failed: %s%s", sz_status_string(st),
             st == SZ_ERR_BUDGET ? " (the message above says what would fit)" : "");
    sz_llama_free(m);
    return st;
}

sz_status sz_llama_create(sz_llama **out, sz_context *ctx, const sz_llama_config *cfg, int B, int T,
                          const sz_zero_config *zero, char *err, size_t errlen)
{
    sz_status st = sz_llama_config_validate(cfg, err, errlen);
    if (st != SZ_OK)
        return st;
    if (B < 1 || T < 1 || T > cfg->max_seq) {
        snprintf(err, errlen, "batch %d x seq %d: need B >= 1 and 1 <= T <= max_seq (%d)", B, T, cfg->max_seq);
        return SZ_ERR_INVALID;
    }
    struct sz_llama *m = calloc(1, sizeof *m);
    if (!m)
        return SZ_ERR_NOMEM;
    int L = cfg->layers;
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    m->res = calloc((size_t)L + 1, sizeof *m->res);
    m->acts = calloc((size_t)L * LL_NBLOCK, sizeof *m->acts);
    m->blocks = calloc((size_t)L, sizeof *m->blocks);
    if (!m->res || !m->acts || !m->blocks || sz_model_init(&m->model, ctx) != SZ_OK) {
        sz_llama_free(m);
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
        z.host_bytes += sz_llama_host_buffer_bytes(cfg, B, T, &p, info.compute_workers, info.kernel_threads);
    if (st == SZ_OK)
        st = sz_model_set_zero(m->model, &z);
    if (st != SZ_OK) {
        snprintf(err, errlen, "invalid ZeRO configuration (the library's error above says why)");
        sz_llama_free(m);
        return st;
    }
    sz_unit_desc *d = calloc((size_t)L + 2, sizeof *d);
    char (*names)[32] = calloc((size_t)L + 2, sizeof *names);
    st = d && names ? SZ_OK : SZ_ERR_NOMEM;
    if (st == SZ_OK)
        unit_descs(cfg, m, m->embed_spec, m->block_spec, m->head_spec, d, names);
    for (int i = 0; i < L + 2 && st == SZ_OK; i++)
        st = sz_model_add_unit(m->model, &d[i]); /* it copies the name */
    free(d);
    free(names);
    if (st != SZ_OK) /* before any tensor: a model no step could hold is refused here */
        return failed(m, st, err, errlen);
    int64_t N = (int64_t)B * T, NC = N * cfg->channels;
    int ok = 1, native = sz_model_precision(m->model)->native; /* the tables say which tensors are bf16 then */
    m->tokens = tensor(m, "tokens", -1, SZ_DTYPE_I32, N);
    m->targets = tensor(m, "targets", -1, SZ_DTYPE_I32, N);
    ok &= m->tokens && m->targets;
    for (int l = 0; l <= L; l++) { /* block l's input res[l] is its checkpoint */
        m->res[l] = l < L ? sz_model_checkpoint(m->model, 1 + l, "res", SZ_DTYPE_F32, NC)
                          : tensor(m, "res", l, SZ_DTYPE_F32, NC);
        ok &= m->res[l] != NULL;
    }
    for (int l = 0; l < L; l++)
        for (int i = 0; i < LL_NBLOCK; i++) {
            const ll_act *a = &sz_llama_block_acts[i];
            sz_tensor *t = sz_model_activation(m->model, 1 + l, a->name, sz_llama_dtype(a, native),
                                               (int64_t)sz_llama_size(cfg, a->size, B, T));
            m->acts[(size_t)l * LL_NBLOCK + i] = t;
            ok &= t != NULL;
        }
    for (int i = 0; i < LL_NHEAD; i++) {
        m->head[i] = tensor(m, sz_llama_head_acts[i].name, -1, sz_llama_dtype(&sz_llama_head_acts[i], native),
                            (int64_t)sz_llama_size(cfg, sz_llama_head_acts[i].size, B, T));
        ok &= m->head[i] != NULL;
    }
    if (st == SZ_OK && !ok)
        st = SZ_ERR_NOMEM;
    if (st == SZ_OK)
        st = sz_model_set_loss(m->model, m->head[LL_LOSSES]);
    if (st == SZ_OK)
        st = sz_model_finalize(m->model);
    if (st != SZ_OK)
        return failed(m, st, err, errlen);
    *out = m;
    return SZ_OK;
}

void sz_llama_free(sz_llama *m)
{
    if (!m)
        return;
    sz_model_free(m->model);
    free(m->res);
    free(m->acts);
    free(m->blocks);
    free(m);
}

sz_model *sz_llama_model(sz_llama *m) { return m->model; }
const sz_llama_config *sz_llama_get_config(const sz_llama *m) { return &m->cfg; }
sz_status sz_llama_init_random(sz_llama *m, uint64_t seed) { return sz_model_init_params(m->model, seed); }

sz_status sz_llama_set_batch(sz_llama *m, const int *inputs, const int *targets)
{
    sz_status st = sz_tensor_write(m->tokens, inputs);
    return st == SZ_OK ? sz_tensor_write(m->targets, targets) : st;
}

/* Unit by unit, parameter by parameter (table order): 0 write, 1 read, 2 gradients. */
static sz_status transfer(sz_llama *m, float *flat, int dir)
{
    for (int u = 0; u < sz_model_nunits(m->model); u++) {
        sz_param_spec p[SZ_LLAMA_BLOCK_PARAMS];
        int n = sz_llama_unit_params(&m->cfg, u, p);
        for (int i = 0; i < n; i++) {
            sz_status st = dir == 0   ? sz_model_param_write(m->model, u, i, flat)
                           : dir == 1 ? sz_model_param_read(m->model, u, i, flat)
                                      : sz_model_grad_read(m->model, u, i, flat);
            if (st != SZ_OK)
                return st;
            flat += p[i].rows * p[i].cols;
        }
    }
    return SZ_OK;
}

sz_status sz_llama_get_params(sz_llama *m, float *flat) { return transfer(m, flat, 1); }
sz_status sz_llama_set_params(sz_llama *m, const float *flat) { return transfer(m, (float *)flat, 0); }
sz_status sz_llama_get_grads(sz_llama *m, float *flat) { return transfer(m, flat, 2); }
