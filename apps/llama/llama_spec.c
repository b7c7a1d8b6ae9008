/* apps/llama/llama_spec.c — the LLaMA-style model's shape: configs (presets, validation), the
 * units' tensor tables, parameter counts, and its part of the estimator (activation bytes,
 * largest unit, FLOPs). Pure C. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama_internal.h"

/* Each entry: name, size, bf16 on the native path (1: what a matmul reads, the logits, or a gradient a
 * matmul reads or writes; the matmuls' fp32 outputs qkv, attproj, gate, up, down, the residual stream,
 * the norms' statistics, the attention's input gradient before RoPE stay fp32). */
const ll_act sz_llama_block_acts[LL_NBLOCK] = {
    [LL_RMS1] = {"rms1", LL_NC, 1},       [LL_RSTD1] = {"rstd1", LL_N, 0},  [LL_QKV] = {"qkv", LL_N3C, 0},
    [LL_ATTY] = {"atty", LL_NC, 1},       [LL_STATS] = {"att_stats", LL_BNHT2, 0},
    [LL_ATTPROJ] = {"attproj", LL_NC, 0}, [LL_RES2] = {"res2", LL_NC, 0},   [LL_RMS2] = {"rms2", LL_NC, 1},
    [LL_RSTD2] = {"rstd2", LL_N, 0},      [LL_GATE] = {"gate", LL_NF, 0},   [LL_UP] = {"up", LL_NF, 0},
    [LL_H] = {"h", LL_NF, 1},             [LL_DOWN] = {"down", LL_NC, 0},
};
const ll_act sz_llama_head_acts[LL_NHEAD] = {
    [LL_RMSF] = {"rmsf", LL_NC, 1}, [LL_RSTDF] = {"rstdf", LL_N, 0}, [LL_LOGITS] = {"logits", LL_NV, 1},
    [LL_LOSSES] = {"losses", LL_N, 0},
};

const ll_act sz_llama_grad_acts[LL_NGRAD] = {
    [LL_DRMS1] = {"drms1", LL_NC, 1}, [LL_DRQKV] = {"drqkv", LL_N3C, 0}, [LL_DQKV] = {"dqkv", LL_N3C, 1},
    [LL_DATTY] = {"datty", LL_NC, 1}, [LL_DATTPROJ] = {"dattproj", LL_NC, 1}, [LL_DRES2] = {"dres2", LL_NC, 0},
    [LL_DRMS2] = {"drms2", LL_NC, 1}, [LL_DGATE] = {"dgate", LL_NF, 1},   [LL_DUP] = {"dup", LL_NF, 1},
    [LL_DH] = {"dh", LL_NF, 1},       [LL_DDOWN] = {"ddown", LL_NC, 1},   [LL_DRMSF] = {"drmsf", LL_NC, 1},
};

double sz_llama_size(const sz_llama_config *c, ll_size s, int B, int T)
{
    double n = (double)B * T;
    switch (s) {
    case LL_N: return n;
    case LL_NC: return n * c->channels;
    case LL_N3C: return n * 3.0 * c->channels;
    case LL_NF: return n * c->hidden;
    case LL_BNHT2: return (double)B * c->heads * (double)T * 2.0;
    case LL_NV: return n * c->vocab;
    }
    return 0;
}

int sz_llama_hidden(int channels)
{
    int64_t f = (8 * (int64_t)channels + 2) / 3;
    return (int)((f + 31) / 32 * 32);
}

#define ERR(...) do { if (err) snprintf(err, errlen, __VA_ARGS__); return SZ_ERR_INVALID; } while (0)

sz_status sz_llama_config_validate(const sz_llama_config *c, char *err, size_t errlen)
{
    if (!c)
        ERR("no config");
    if (c->max_seq < 1 || c->vocab < 1 || c->layers < 1 || c->heads < 1 || c->channels < 1 || c->hidden < 1)
        ERR("every size must be >= 1 (L=%d H=%d C=%d F=%d V=%d maxT=%d)", c->layers, c->heads, c->channels,
            c->hidden, c->vocab, c->max_seq);
    if (c->channels % c->heads)
        ERR("channels %d are not a multiple of heads %d", c->channels, c->heads);
    if ((c->channels / c->heads) % 2)
        ERR("head size %d (channels %d / heads %d) is odd: rotary embedding rotates pairs of channels",
            c->channels / c->heads, c->channels, c->heads);
    if (!(c->rope_theta > 0) || !(c->norm_eps >= 0))
        ERR("rope theta %g must be > 0 and the norm eps %g >= 0", c->rope_theta, c->norm_eps);
    double C = c->channels, F = c->hidden;
    double psi = 2.0 * c->vocab * C + c->layers * (2 * C + 4 * C * C + 3 * C * F) + C;
    if (psi > 9e15 || (double)c->vocab * C > 2e9 || 4.0 * C * C + 3 * C * F > 2e9)
        ERR("the model is too large (%.3g parameters)", psi);
    return SZ_OK;
}

sz_status sz_llama_config_from_string(sz_llama_config *out, const char *spec, int vocab, int max_seq, char *err,
                                      size_t errlen)
{
    int L, H, C;
    if (!spec)
        ERR("no model name");
    if (!strcmp(spec, "d2")) { L = 2; H = 4; C = 128; }
    else if (!strcmp(spec, "d6")) { L = 6; H = 6; C = 384; }
    else if (!strcmp(spec, "d12")) { L = 12; H = 12; C = 768; }
    else {
        char tail;
        if (sscanf(spec, "%d,%d,%d%c", &L, &H, &C, &tail) != 3)
            ERR("model '%s': expected d2, d6, d12 or L,H,C such as 4,4,256", spec);
    }
    sz_llama_config c = {.max_seq = max_seq, .vocab = vocab, .layers = L, .heads = H, .channels = C,
                         .hidden = C > 0 ? sz_llama_hidden(C) : 0, .rope_theta = 10000.0f, .norm_eps = 1e-5f};
    sz_status st = sz_llama_config_validate(&c, err, errlen);
    if (st == SZ_OK)
        *out = c;
    return st;
}

int sz_llama_config_format(const sz_llama_config *c, char *buf, size_t buflen)
{
    return snprintf(buf, buflen, "L=%d H=%d C=%d F=%d V=%d maxT=%d", c->layers, c->heads, c->channels, c->hidden,
                    c->vocab, c->max_seq);
}

int sz_llama_unit_params(const sz_llama_config *c, int unit, sz_param_spec *out)
{
    if (!c || !out || unit < 0 || unit > c->layers + 1)
        return 0;
    float std = 0.02f, res = 0.02f / sqrtf(2.0f * c->layers);
    int64_t C = c->channels, F = c->hidden, V = c->vocab;
    if (unit == 0) {
        out[0] = (sz_param_spec){"wte", V, C, 1, SZ_INIT_NORMAL, std};
        return SZ_LLAMA_EMBED_PARAMS;
    }
    if (unit == c->layers + 1) {
        out[0] = (sz_param_spec){"rmsfw", 1, C, 0, SZ_INIT_ONE, 0};
        out[1] = (sz_param_spec){"lmw", V, C, 1, SZ_INIT_NORMAL, std};
        return SZ_LLAMA_HEAD_PARAMS;
    }
    out[0] = (sz_param_spec){"rms1w", 1, C, 0, SZ_INIT_ONE, 0};
    out[1] = (sz_param_spec){"qkvw", 3 * C, C, 1, SZ_INIT_NORMAL, std};
    out[2] = (sz_param_spec){"attprojw", C, C, 1, SZ_INIT_NORMAL, res};
    out[3] = (sz_param_spec){"rms2w", 1, C, 0, SZ_INIT_ONE, 0};
    out[4] = (sz_param_spec){"gatew", F, C, 1, SZ_INIT_NORMAL, std};
    out[5] = (sz_param_spec){"upw", F, C, 1, SZ_INIT_NORMAL, std};
    out[6] = (sz_param_spec){"downw", C, F, 1, SZ_INIT_NORMAL, res};
    return SZ_LLAMA_BLOCK_PARAMS;
}

static int64_t unit_numel(const sz_llama_config *c, int unit)
{
    sz_param_spec p[SZ_LLAMA_BLOCK_PARAMS];
    int n = sz_llama_unit_params(c, unit, p);
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += p[i].rows * p[i].cols;
    return s;
}

int64_t sz_llama_num_params(const sz_llama_config *c)
{
    if (sz_llama_config_validate(c, NULL, 0) != SZ_OK)
        return -1;
    return unit_numel(c, 0) + (int64_t)c->layers * unit_numel(c, 1) + unit_numel(c, c->layers + 1);
}

int64_t sz_llama_largest_unit_numel(const sz_llama_config *c)
{
    if (sz_llama_config_validate(c, NULL, 0) != SZ_OK)
        return -1;
    int64_t e = unit_numel(c, 0), b = unit_numel(c, 1), h = unit_numel(c, c->layers + 1);
    int64_t m = e > b ? e : b;
    return m > h ? m : h;
}

double sz_llama_activation_bytes(const sz_llama_config *c, int B, int T, int checkpoint, int offload)
{
    if (sz_llama_config_validate(c, NULL, 0) != SZ_OK || B < 1 || T < 1 || T > c->max_seq ||
        (offload && !checkpoint))
        return -1.0;
    double block = 0, head = 0, io = sz_llama_size(c, LL_NC, B, T); /* a block's input (its checkpoint) */
    for (int i = 0; i < LL_NBLOCK; i++)
        block += sz_llama_size(c, sz_llama_block_acts[i].size, B, T);
    for (int i = 0; i < LL_NHEAD; i++)
        head += sz_llama_size(c, sz_llama_head_acts[i].size, B, T);
    int L = c->layers;
    double floats;
    if (!checkpoint) /* embed output + every block's tensors and output + head */
        floats = io + L * (block + io) + head;
    else /* every block's input kept (the last block's output is the head's input) + one block + head */
        floats = (offload ? (L < 3 ? L : 3) : L) * io + io + block + head;
    return floats * 4.0;
}

/* Megatron's tensor parallelism splits the attention by heads (qkv, its output, its statistics), the
 * MLP by its width (gate, up, h) and the logits by the vocabulary; each MP rank holds 1/N_m of
 * those and all of the rest (the norms' outputs, the projections' all-reduced outputs, the residual
 * stream). By name, over the tables above. */
static int ll_mp_split(const ll_act *a)
{
    static const char *const split[] = {"qkv", "atty", "att_stats", "gate", "up", "h", "logits"};
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++)
        if (!strcmp(a->name, split[i]))
            return 1;
    return 0;
}

static double ll_floats_mp(const sz_llama_config *c, const ll_act *t, int n, int B, int T, int nm)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += sz_llama_size(c, t[i].size, B, T) / (ll_mp_split(&t[i]) ? (double)nm : 1.0);
    return s;
}

double sz_llama_activation_bytes_mp(const sz_llama_config *c, int B, int T, int checkpoint, int offload, int nm,
                                    int pa)
{
    if (sz_llama_config_validate(c, NULL, 0) != SZ_OK || B < 1 || T < 1 || T > c->max_seq || nm < 1 ||
        (offload && !checkpoint) || (pa && !checkpoint))
        return -1.0;
    double block = ll_floats_mp(c, sz_llama_block_acts, LL_NBLOCK, B, T, nm);
    double head = ll_floats_mp(c, sz_llama_head_acts, LL_NHEAD, B, T, nm);
    double io = sz_llama_size(c, LL_NC, B, T); /* a block's input (its checkpoint) */
    int L = c->layers, part = pa && nm > 1;
    if (!checkpoint) /* as sz_llama_activation_bytes */
        return (io + L * (block + io) + head) * 4.0;
    /* the kept inputs (all L, or min(L, 3) with offloading), whole or P_a's slices plus one gathered
     * input for the recompute; the last block's output (the head's input); one block; the head */
    double slice = part ? ceil(io / nm) : io;
    double kept = (offload ? (L < 3 ? L : 3) : L) * slice + (part ? io : 0.0);
    return (kept + io + block + head) * 4.0;
}

double sz_llama_flops(const sz_llama_config *c, int B, int T)
{
    double L = c->layers, C = c->channels, F = c->hidden, tokens = (double)B * T;
    double matmul = 2.0 * (L * (4.0 * C * C + 3.0 * C * F) + C * c->vocab);
    double attention = 2.0 * L * T * C;
    return 3.0 * tokens * (matmul + attention);
}

int sz_llama_unit_numels(const sz_llama_config *c, int64_t *numel)
{
    if (!numel || sz_llama_config_validate(c, NULL, 0) != SZ_OK)
        return -1;
    for (int u = 0; u < c->layers + 2; u++)
        numel[u] = unit_numel(c, u);
    return c->layers + 2;
}

/* Bytes of a table's tensors on the given path. */
static double table_bytes(const sz_llama_config *c, const ll_act *t, int n, int B, int T, int native)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += sz_llama_size(c, t[i].size, B, T) * (sz_llama_dtype(&t[i], native) == SZ_DTYPE_BF16 ? 2 : 4);
    return s;
}

int64_t sz_llama_engine_activation_bytes(const sz_llama_config *c, int B, int T, int checkpoint, int offload,
                                         int64_t *host_bytes)
{
    return sz_llama_engine_activation_bytes_bf16(c, B, T, checkpoint, offload, 0, host_bytes);
}

/* What sz_llama_create registers beside the parameters, from the same tables: the tokens and
 * targets (int32), the residual stream res[0..L] (fp32; res[0..L-1] are the blocks' checkpoints) and
 * its gradients dres[0..L], the blocks' tensors (one set shared by all blocks under checkpointing),
 * the gradient scratch and the head's tensors, each at its dtype on this path. */
int64_t sz_llama_engine_activation_bytes_bf16(const sz_llama_config *c, int B, int T, int checkpoint, int offload,
                                              int native, int64_t *host_bytes)
{
    if (sz_llama_config_validate(c, NULL, 0) != SZ_OK || B < 1 || T < 1 || T > c->max_seq ||
        (offload && !checkpoint))
        return -1;
    double NC = sz_llama_size(c, LL_NC, B, T), L = c->layers;
    double bytes = ((L + 1) * NC                                                    /* dres[0..L] */
                    + NC) * 4                                                       /* res[L] */
                   + (checkpoint ? 1 : L) * table_bytes(c, sz_llama_block_acts, LL_NBLOCK, B, T, native)
                   + table_bytes(c, sz_llama_grad_acts, LL_NGRAD, B, T, native)
                   + table_bytes(c, sz_llama_head_acts, LL_NHEAD, B, T, native);
    double ckpt = L * NC * 4; /* res[0..L-1]: the blocks' inputs */
    if (host_bytes)
        *host_bytes = offload ? (int64_t)ckpt : 0;
    return (int64_t)(2 * sz_llama_size(c, LL_N, B, T) * 4 + bytes + (offload ? 0 : ckpt));
}

/* The model's linear layers: qkv, the attention projection, gate (and up, the same shape), down, the head. */
static void linear_shapes(const sz_llama_config *cfg, int64_t *in, int64_t *out)
{
    int64_t C = cfg->channels, F = cfg->hidden;
    const int64_t i[] = {C, C, C, F, C}, o[] = {3 * C, C, F, C, cfg->vocab};
    memcpy(in, i, sizeof i);
    memcpy(out, o, sizeof o);
}

int64_t sz_llama_host_bytes(const sz_llama_config *cfg, int B, int T, int workers, int threads)
{
    int64_t in[5], out[5];
    linear_shapes(cfg, in, out);
    return sz_matmul_host_bytes(workers, threads, (int64_t)B * T, 5, in, out);
}

int64_t sz_llama_host_bytes_bf16(const sz_llama_config *cfg, int B, int T, int workers, int threads)
{
    int64_t in[5], out[5];
    linear_shapes(cfg, in, out);
    return sz_matmul_host_bytes_bf16(workers, threads, (int64_t)B * T, 5, in, out);
}

int64_t sz_llama_round_host_bytes(const sz_llama_config *cfg, int B, int T, int workers)
{
    int64_t in[5], out[5];
    linear_shapes(cfg, in, out);
    /* a worker holds one task's scratch at a time: the largest, per worker */
    int64_t mm = sz_matmul_round_host_bytes(workers, 5, in, out),
            embed = sz_embedding_round_host_bytes(workers, (int64_t)B * T, cfg->vocab);
    return mm > embed ? mm : embed;
}

int64_t sz_llama_host_bytes_wbf16(const sz_llama_config *cfg, int B, int T, int workers, int threads)
{
    int64_t in[5], out[5];
    linear_shapes(cfg, in, out);
    return sz_matmul_host_bytes_wbf16(workers, threads, (int64_t)B * T, 5, in, out);
}

int64_t sz_llama_host_buffer_bytes(const sz_llama_config *cfg, int B, int T, const sz_resolved_precision *p,
                                   int workers, int threads)
{
    int64_t mm = sz_llama_host_bytes(cfg, B, T, workers, threads);
    if (p->native) /* its matmuls may also run the bf16 kernels */
        mm += sz_llama_host_bytes_bf16(cfg, B, T, workers, threads);
    else if (p->mixed && p->params_direct) /* or widen bf16 weights */
        mm += sz_llama_host_bytes_wbf16(cfg, B, T, workers, threads);
    if (p->mixed && p->grads_rounded) /* and its matmuls and embedding round into bf16 gradients */
        mm += sz_llama_round_host_bytes(cfg, B, T, workers);
    return mm;
}
