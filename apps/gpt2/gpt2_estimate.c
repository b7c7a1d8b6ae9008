/* apps/gpt2/gpt2_estimate.c — the GPT-2 parts of the ZeRO estimator (starzero_gpt2.h): activation
 * bytes from one table of llm.c's ActivationTensors, ZeRO-R's offloaded checkpoints (P_a+cpu) exactly
 * as the engine allocates them, and the largest unit (the cap of the C_B buffer). Pure C: no
 * runtime, never prints. */
#include "gpt2.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

/* ---- GPT-2 activations: llm.c's ActivationTensors, one row per tensor ----------------------- */

/* The shape of one activation tensor for one micro-batch (N = B*T rows). */
typedef enum act_size {
    ACT_N,      /* B*T */
    ACT_NC,     /* B*T*C */
    ACT_N3C,    /* B*T*3C */
    ACT_N4C,    /* B*T*4C */
    ACT_BNHT2,  /* 2*B*NH*T: attention statistics */
    ACT_NVP,    /* B*T*Vp */
} act_size;

/* Where a tensor lives: before the blocks, once per block, or in the head. */
typedef enum act_place { ACT_EMBED, ACT_BLOCK, ACT_HEAD } act_place;

typedef struct act_spec {
    const char *name;
    act_place place;
    act_size size;
    int mp_split; /* 1: under Megatron's tensor parallelism each MP rank holds 1/N_m of it (split by heads,
                     by the MLP's width or by the vocabulary); 0: every MP rank holds all of it */
} act_spec;

/* llm.c's ActivationTensors, in its order, except for attention's (attstat) and probs. */
static const act_spec k_gpt2_acts[] = {
    {"encoded", ACT_EMBED, ACT_NC, 0},
    {"ln1", ACT_BLOCK, ACT_NC, 0},
    {"ln1_mean", ACT_BLOCK, ACT_N, 0},
    {"ln1_rstd", ACT_BLOCK, ACT_N, 0},
    {"qkv", ACT_BLOCK, ACT_N3C, 1},
    {"atty", ACT_BLOCK, ACT_NC, 1},
    {"attstat", ACT_BLOCK, ACT_BNHT2, 1}, /* in llm.c preatt, att (B*NH*T*T each): our attention saves
                                          only each query row's softmax max and 1/sum */
    {"attproj", ACT_BLOCK, ACT_NC, 0},
    {"residual2", ACT_BLOCK, ACT_NC, 0},
    {"ln2", ACT_BLOCK, ACT_NC, 0},
    {"ln2_mean", ACT_BLOCK, ACT_N, 0},
    {"ln2_rstd", ACT_BLOCK, ACT_N, 0},
    {"fch", ACT_BLOCK, ACT_N4C, 1},
    {"fch_gelu", ACT_BLOCK, ACT_N4C, 1},
    {"fcproj", ACT_BLOCK, ACT_NC, 0},
    {"residual3", ACT_BLOCK, ACT_NC, 0},
    {"lnf", ACT_HEAD, ACT_NC, 0},
    {"lnf_mean", ACT_HEAD, ACT_N, 0},
    {"lnf_rstd", ACT_HEAD, ACT_N, 0},
    {"logits", ACT_HEAD, ACT_NVP, 1}, /* llm.c's probs: our fused softmax-cross-entropy overwrites the
                                      logits with their gradient and keeps no probabilities */
    {"losses", ACT_HEAD, ACT_N, 0},
};
enum { N_GPT2_ACTS = sizeof k_gpt2_acts / sizeof k_gpt2_acts[0] };

static double act_numel(const sz_gpt2_config *cfg, act_size s, int B, int T)
{
    const double n = (double)B * (double)T, c = (double)cfg->channels;
    switch (s) {
    case ACT_N: return n;
    case ACT_NC: return n * c;
    case ACT_N3C: return n * 3.0 * c;
    case ACT_N4C: return n * 4.0 * c;
    case ACT_BNHT2: return 2.0 * (double)B * (double)cfg->heads * (double)T;
    case ACT_NVP: return n * (double)cfg->padded_vocab;
    }
    return 0.0;
}

/* Floats of the tensors placed at `place` on one of nm model-parallel ranks (nm = 1: the whole
 * model), for one layer in the case of ACT_BLOCK. */
static double act_place_floats_mp(const sz_gpt2_config *cfg, act_place place, int B, int T, int nm)
{
    double sum = 0.0;
    for (int i = 0; i < N_GPT2_ACTS; i++)
        if (k_gpt2_acts[i].place == place)
            sum += act_numel(cfg, k_gpt2_acts[i].size, B, T) / (k_gpt2_acts[i].mp_split ? (double)nm : 1.0);
    return sum;
}

static double act_place_floats(const sz_gpt2_config *cfg, act_place place, int B, int T)
{
    return act_place_floats_mp(cfg, place, B, T, 1);
}

static int act_args_ok(const sz_gpt2_config *cfg, int B, int T)
{
    return cfg && sz_gpt2_config_validate(cfg, NULL, 0) == SZ_OK && B >= 1 && T >= 1 && T <= cfg->max_seq;
}

double sz_gpt2_activation_bytes(const sz_gpt2_config *cfg, int B, int T)
{
    if (!act_args_ok(cfg, B, T))
        return -1.0;
    double floats = act_place_floats(cfg, ACT_EMBED, B, T) +
                    (double)cfg->layers * act_place_floats(cfg, ACT_BLOCK, B, T) +
                    act_place_floats(cfg, ACT_HEAD, B, T);
    return floats * 4.0;
}

double sz_gpt2_activation_bytes_ckpt(const sz_gpt2_config *cfg, int B, int T)
{
    if (!act_args_ok(cfg, B, T))
        return -1.0;
    double inputs = (double)cfg->layers * act_numel(cfg, ACT_NC, B, T); /* each block's input */
    double floats = inputs + act_place_floats(cfg, ACT_BLOCK, B, T) /* one block recomputed */
                    + act_place_floats(cfg, ACT_HEAD, B, T);
    return floats * 4.0;
}

/* ---- model parallelism: the forward tensors of one MP rank, P_a and P_a+cpu --------------------- */

double sz_gpt2_activation_bytes_mp(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload, int nm, int pa)
{
    if (!act_args_ok(cfg, B, T) || nm < 1 || (offload && !checkpoint) || (pa && !checkpoint))
        return -1.0;
    const double nc = act_numel(cfg, ACT_NC, B, T), head = act_place_floats_mp(cfg, ACT_HEAD, B, T, nm);
    const double block = act_place_floats_mp(cfg, ACT_BLOCK, B, T, nm);
    const int L = cfg->layers, part = pa && nm > 1; /* P_a partitions only within a group */
    if (!checkpoint)
        return (act_place_floats_mp(cfg, ACT_EMBED, B, T, nm) + (double)L * block + head) * 4.0;
    /* kept block inputs: all L of them, or the min(L, 3) the device holds with offloading; each whole
     * or, under P_a, its 1/N_m slice (rounded up to elements) plus one gathered whole input for the
     * recompute */
    const double slice = part ? ceil(nc / (double)nm) : nc;
    const double kept = (double)(offload ? (L < 3 ? L : 3) : L) * slice + (part ? nc : 0.0);
    return (kept + block + head) * 4.0;
}

/* ---- ZeRO-R: offloaded checkpoints (P_a+cpu) -------------------------------------------------- */

/* Bytes of one block checkpoint: the block's input, N·C fp32. */
static double ckpt_bytes(const sz_gpt2_config *cfg, int B, int T)
{
    return act_numel(cfg, ACT_NC, B, T) * 4.0;
}

/* Checkpoints tasks/step.c holds on the device pool at once with L blocks: the recompute of
 * block l needs its own input, fetches block l-1's one unit ahead and writes block l+1's again,
 * so three from L = 3 on (block l+1 and l-1 both exist only for 1 <= l <= L-2). */
static int ckpts_on_device(int layers)
{
    return layers < 3 ? layers : 3;
}

double sz_gpt2_checkpoint_host_bytes(const sz_gpt2_config *cfg, int B, int T)
{
    if (!act_args_ok(cfg, B, T))
        return -1.0;
    return (double)cfg->layers * ckpt_bytes(cfg, B, T);
}

double sz_gpt2_checkpoint_device_bytes(const sz_gpt2_config *cfg, int B, int T)
{
    if (!act_args_ok(cfg, B, T))
        return -1.0;
    return (double)ckpts_on_device(cfg->layers) * ckpt_bytes(cfg, B, T);
}

double sz_gpt2_activation_bytes_offload(const sz_gpt2_config *cfg, int B, int T)
{
    if (!act_args_ok(cfg, B, T))
        return -1.0;
    return sz_gpt2_activation_bytes_ckpt(cfg, B, T) - sz_gpt2_checkpoint_host_bytes(cfg, B, T) +
           sz_gpt2_checkpoint_device_bytes(cfg, B, T);
}

double sz_gpt2_activation_bytes_device(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload)
{
    if (offload && !checkpoint) /* no checkpoints to offload */
        return -1.0;
    if (offload)
        return sz_gpt2_activation_bytes_offload(cfg, B, T);
    return checkpoint ? sz_gpt2_activation_bytes_ckpt(cfg, B, T) : sz_gpt2_activation_bytes(cfg, B, T);
}

/* ---- the largest unit: the cap of the communication buffer (C_B) ---------------------------- */

/* Elements of GPT-2's tensors `ids` (one layer's block of a per-layer tensor). */
static int64_t tensors_numel(const sz_gpt2_config *cfg, const int *ids, int n)
{
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += (int64_t)sz_gpt2_tensor_layer_numel(cfg, ids[i]);
    return sum;
}

int sz_gpt2_unit_numels(const sz_gpt2_config *cfg, int64_t *numel)
{
    if (!cfg || !numel || sz_gpt2_config_validate(cfg, NULL, 0) != SZ_OK)
        return -1;
    /* the units of apps/gpt2: embed, block0 .. block(L-1), head */
    static const int embed[] = SZ_GPT2_EMBED_IDS, block[] = SZ_GPT2_BLOCK_IDS, head[] = SZ_GPT2_HEAD_IDS;
    int L = cfg->layers;
    numel[0] = tensors_numel(cfg, embed, (int)(sizeof embed / sizeof embed[0]));
    for (int l = 0; l < L; l++)
        numel[1 + l] = tensors_numel(cfg, block, (int)(sizeof block / sizeof block[0]));
    numel[L + 1] = tensors_numel(cfg, head, (int)(sizeof head / sizeof head[0]));
    return L + 2;
}

int64_t sz_gpt2_largest_unit_numel(const sz_gpt2_config *cfg)
{
    if (!cfg || sz_gpt2_config_validate(cfg, NULL, 0) != SZ_OK)
        return -1;
    int64_t *n = malloc(((size_t)cfg->layers + 2) * sizeof *n), m = 0;
    if (!n)
        return -1;
    int k = sz_gpt2_unit_numels(cfg, n);
    for (int i = 0; i < k; i++)
        m = n[i] > m ? n[i] : m;
    free(n);
    return m;
}

/* What apps/gpt2/gpt2.c's gpt2_create registers beside the parameters, by the same list: the
 * tokens and targets (int32), each block's input (its checkpoint) and its gradient, the blocks'
 * activations (one set shared by all blocks under checkpointing), one block's activation gradients,
 * and the head's tensors. */
int64_t sz_gpt2_engine_activation_bytes(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload,
                                        int64_t *host_bytes)
{
    return sz_gpt2_engine_activation_bytes_bf16(cfg, B, T, checkpoint, offload, 0, 0, host_bytes);
}

int64_t sz_gpt2_engine_activation_bytes_bf16(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload,
                                             int native, int rounded, int64_t *host_bytes)
{
    if (!act_args_ok(cfg, B, T) || (offload && !checkpoint))
        return -1;
    /* the tied wte's rows in fp32 between the head's backward and the embedding's */
    int64_t tied = rounded ? sz_tied_rows_numel(B, T, cfg->padded_vocab, cfg->channels) * 4 : 0;
    if (native) { /* gpt2.c's bf16 tensors (the matmuls' inputs and their gradients) at 2 bytes */
        int64_t N = (int64_t)B * T, C = cfg->channels, NC = N * C, A = 2 * (int64_t)B * cfg->heads * T;
        int64_t NV = N * cfg->padded_vocab, L = cfg->layers, nb = checkpoint ? 1 : L;
        int64_t f32 = (L + 1) * NC + NC                  /* dres[0..L], res[L] */
                      + nb * (10 * NC + 4 * N + A)       /* qkv, attproj, res2, fch, fcproj; stats */
                      + NC                               /* dres2 */
                      + 3 * N;                           /* lnf mean, rstd, losses */
        int64_t bf16 = nb * 7 * NC                       /* ln1, atty, ln2, fch_gelu */
                       + 12 * NC                         /* dln1, dqkv, datty, dattproj, dln2, dfch, dfcproj */
                       + 2 * NC + NV;                    /* lnf, dlnf, logits (dlogits in place) */
        int64_t ckpt = L * NC;
        if (host_bytes)
            *host_bytes = offload ? ckpt * 4 : 0;
        return 2 * N * 4 + (f32 + (offload ? 0 : ckpt)) * 4 + bf16 * 2 + tied;
    }
    int64_t N = (int64_t)B * T, C = cfg->channels, NC = N * C, A = 2 * (int64_t)B * cfg->heads * T;
    int64_t NV = N * cfg->padded_vocab, L = cfg->layers;
    int64_t block = 17 * NC + 4 * N + A;               /* ln1 .. fcproj; A: attention's row statistics */
    int64_t floats = (L + 1) * NC                        /* dres[0..L] */
                     + NC                                /* res[L], the head's input */
                     + (checkpoint ? 1 : L) * block      /* the blocks' activations */
                     + 13 * NC                           /* dln1, dqkv, datty, dattproj, dres2, dln2, dfch,
                                                            dfcproj, shared (no dfch_gelu: gelu_matmul_bwd) */
                     + 2 * NC + 3 * N + NV;              /* lnf, its mean, rstd, losses, dlnf; logits (dlogits
                                                            in place: no probs, no dlogits) */
    int64_t ckpt = L * NC;                               /* res[0..L-1]: the blocks' inputs */
    if (host_bytes)
        *host_bytes = offload ? ckpt * 4 : 0;
    return 2 * N * 4 + (floats + (offload ? 0 : ckpt)) * 4 + tied;
}

int64_t sz_gpt2_round_host_bytes(const sz_gpt2_config *cfg, int workers)
{
    int64_t C = cfg->channels, Vp = cfg->padded_vocab;
    const int64_t in[] = {C, C, C, 4 * C}, out[] = {3 * C, C, 4 * C, C};
    int64_t blocks = sz_matmul_round_host_bytes(workers, 4, in, out);
    /* the tied head's dweight: its panel and its token slots (Vp int32, as the embedding's backward) */
    int64_t head = sz_matmul_round_host_bytes(workers, 1, &C, &Vp) + Vp * 4 * (workers > 0 ? workers : 1);
    return blocks > head ? blocks : head;
}

int64_t sz_gpt2_host_bytes(const sz_gpt2_config *cfg, int B, int T, int workers, int threads)
{
    int64_t C = cfg->channels;
    const int64_t in[] = {C, C, C, 4 * C, C}, out[] = {3 * C, C, 4 * C, C, cfg->padded_vocab};
    return sz_matmul_host_bytes(workers, threads, (int64_t)B * T, 5, in, out);
}

int64_t sz_gpt2_host_buffer_bytes(const sz_gpt2_config *cfg, int B, int T, const sz_resolved_precision *p, int workers,
                                  int threads)
{
    int64_t mm = sz_gpt2_host_bytes(cfg, B, T, workers, threads);
    int nat = p->native, wbf = !nat && p->mixed && p->params_direct;
    if (nat || wbf) { /* its matmuls may also run the bf16 kernels, or widen bf16 weights */
        int64_t C = cfg->channels;
        const int64_t in[] = {C, C, C, 4 * C, C}, out[] = {3 * C, C, 4 * C, C, cfg->padded_vocab};
        mm += (nat ? sz_matmul_host_bytes_bf16 : sz_matmul_host_bytes_wbf16)(workers, threads, (int64_t)B * T, 5, in, out);
    }
    if (p->mixed && p->grads_rounded) /* and round into the bf16 gradients (the tied head's too) */
        mm += sz_gpt2_round_host_bytes(cfg, workers);
    return mm;
}
