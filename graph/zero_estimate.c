/* graph/zero_estimate.c — the ZeRO estimator (DESIGN §3): model-state bytes and their breakdown,
 * communication volume, shard padding, GPT-2 activation bytes from one table of llm.c's
 * ActivationTensors, and ZeRO-R's offloaded checkpoints (P_a+cpu) and communication buffer (C_B)
 * exactly as the engine allocates them. Pure C: no runtime, never prints, never allocates. */
#include "zero_estimate.h"

#include <math.h>
#include <stddef.h>

/* ---- model states ------------------------------------------------------------------------ */

static int args_ok(int stage, double psi, int nd)
{
    return stage >= 0 && stage <= 3 && isfinite(psi) && psi >= 0.0 && nd >= 1;
}

sz_status sz_zero_state_breakdown(int stage, double psi, int nd, int mixed, sz_zero_breakdown *out)
{
    if (!out || !args_ok(stage, psi, nd))
        return SZ_ERR_INVALID;
    /* Bytes per parameter of each category, then which ones are sharded at this stage. */
    const double pb = mixed ? 2.0 : 4.0; /* params */
    const double gb = mixed ? 2.0 : 4.0; /* grads */
    const double mb = mixed ? 4.0 : 0.0; /* fp32 master copy */
    const double n = (double)nd;
    sz_zero_breakdown b = {0};
    if (stage <= 2)
        b.params = pb * psi;
    else
        b.param_shard = pb * psi / n;
    if (stage <= 1)
        b.grads = gb * psi;
    else
        b.grad_shard = gb * psi / n;
    const double opt_div = stage == 0 ? 1.0 : n; /* P_os: optimizer states sharded from stage 1 */
    b.master = mb * psi / opt_div;
    b.adam_m = 4.0 * psi / opt_div;
    b.adam_v = 4.0 * psi / opt_div;
    *out = b;
    return SZ_OK;
}

double sz_zero_model_state_bytes(int stage, double psi, int nd, int mixed)
{
    sz_zero_breakdown b;
    if (sz_zero_state_breakdown(stage, psi, nd, mixed, &b) != SZ_OK)
        return -1.0;
    return b.params + b.param_shard + b.grads + b.grad_shard + b.master + b.adam_m + b.adam_v;
}

/* ---- communication ----------------------------------------------------------------------- */

double sz_zero_comm_elems_mb(int stage, double psi, int nd, int micro_batches)
{
    if (!args_ok(stage, psi, nd) || micro_batches < 1)
        return -1.0;
    const double per = psi * (double)(nd - 1) / (double)nd; /* one reduce-scatter or all-gather */
    const double m = (double)micro_batches;
    switch (stage) {
    case 0: return 2.0 * per;           /* one all-reduce per step (= reduce-scatter + all-gather) */
    case 1: return 2.0 * per;           /* reduce-scatter + all-gather once per step */
    case 2: return m * per + per;       /* reduce-scatter each micro-batch, all-gather once */
    default: return 3.0 * m * per;      /* gather fwd, gather bwd, reduce-scatter per micro-batch */
    }
}

double sz_zero_comm_elems(int stage, double psi, int nd)
{
    return sz_zero_comm_elems_mb(stage, psi, nd, 1);
}

double sz_zero_comm_bytes_mb(int stage, double psi, int nd, int mixed, int micro_batches)
{
    double e = sz_zero_comm_elems_mb(stage, psi, nd, micro_batches);
    return e < 0.0 ? -1.0 : e * (mixed ? 2.0 : 4.0);
}

double sz_zero_comm_bytes(int stage, double psi, int nd, int mixed)
{
    return sz_zero_comm_bytes_mb(stage, psi, nd, mixed, 1);
}

/* ---- shard math -------------------------------------------------------------------------- */

int64_t sz_zero_padded(int64_t numel, int nd)
{
    if (numel < 0 || nd < 1)
        return -1;
    int64_t r = numel % nd;
    if (r == 0)
        return numel;
    if (numel > INT64_MAX - (nd - r))
        return -1;
    return numel + (nd - r);
}

int64_t sz_zero_shard(int64_t numel, int nd)
{
    int64_t p = sz_zero_padded(numel, nd);
    return p < 0 ? -1 : p / nd;
}

/* ---- GPT-2 activations: llm.c's ActivationTensors, one row per tensor ----------------------- */

/* The shape of one activation tensor for one micro-batch (N = B*T rows). */
typedef enum act_size {
    ACT_N,      /* B*T */
    ACT_NC,     /* B*T*C */
    ACT_N3C,    /* B*T*3C */
    ACT_N4C,    /* B*T*4C */
    ACT_BNHTT,  /* B*NH*T*T */
    ACT_NVP,    /* B*T*Vp */
} act_size;

/* Where a tensor lives: before the blocks, once per block, or in the head. */
typedef enum act_place { ACT_EMBED, ACT_BLOCK, ACT_HEAD } act_place;

typedef struct act_spec {
    const char *name;
    act_place place;
    act_size size;
} act_spec;

/* llm.c's ActivationTensors, in its order. */
static const act_spec k_gpt2_acts[] = {
    {"encoded", ACT_EMBED, ACT_NC},
    {"ln1", ACT_BLOCK, ACT_NC},
    {"ln1_mean", ACT_BLOCK, ACT_N},
    {"ln1_rstd", ACT_BLOCK, ACT_N},
    {"qkv", ACT_BLOCK, ACT_N3C},
    {"atty", ACT_BLOCK, ACT_NC},
    {"preatt", ACT_BLOCK, ACT_BNHTT},
    {"att", ACT_BLOCK, ACT_BNHTT},
    {"attproj", ACT_BLOCK, ACT_NC},
    {"residual2", ACT_BLOCK, ACT_NC},
    {"ln2", ACT_BLOCK, ACT_NC},
    {"ln2_mean", ACT_BLOCK, ACT_N},
    {"ln2_rstd", ACT_BLOCK, ACT_N},
    {"fch", ACT_BLOCK, ACT_N4C},
    {"fch_gelu", ACT_BLOCK, ACT_N4C},
    {"fcproj", ACT_BLOCK, ACT_NC},
    {"residual3", ACT_BLOCK, ACT_NC},
    {"lnf", ACT_HEAD, ACT_NC},
    {"lnf_mean", ACT_HEAD, ACT_N},
    {"lnf_rstd", ACT_HEAD, ACT_N},
    {"logits", ACT_HEAD, ACT_NVP},
    {"probs", ACT_HEAD, ACT_NVP},
    {"losses", ACT_HEAD, ACT_N},
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
    case ACT_BNHTT: return (double)B * (double)cfg->heads * (double)T * (double)T;
    case ACT_NVP: return n * (double)cfg->padded_vocab;
    }
    return 0.0;
}

/* Floats of the tensors placed at `place`, for one layer in the case of ACT_BLOCK. */
static double act_place_floats(const sz_gpt2_config *cfg, act_place place, int B, int T)
{
    double sum = 0.0;
    for (int i = 0; i < N_GPT2_ACTS; i++)
        if (k_gpt2_acts[i].place == place)
            sum += act_numel(cfg, k_gpt2_acts[i].size, B, T);
    return sum;
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

/* ---- ZeRO-R: offloaded checkpoints (P_a+cpu) -------------------------------------------------- */

/* Bytes of one block checkpoint: the block's input, N·C fp32. */
static double ckpt_bytes(const sz_gpt2_config *cfg, int B, int T)
{
    return act_numel(cfg, ACT_NC, B, T) * 4.0;
}

/* Checkpoints tasks/zero.c holds on the device pool at once with L blocks: the recompute of
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

/* ---- ZeRO-R: communication buckets (C_B) ---------------------------------------------------- */

int64_t sz_zero_comm_buffer_bytes(int64_t bucket_bytes, int nd, int64_t largest_unit)
{
    if (bucket_bytes < 0 || nd < 1)
        return -1;
    if (nd == 1)
        return 0;
    if (bucket_bytes == 0)
        bucket_bytes = SZ_DEFAULT_BUCKET_BYTES;
    /* elements per rank and round (tasks/model.c's bucket_elems derives its rounds from this) */
    int64_t e = bucket_bytes / (4 * (int64_t)nd);
    if (e < 1)
        e = 1;
    if (largest_unit > 0) {
        int64_t shard = sz_zero_shard(largest_unit, nd);
        if (shard > 0 && e > shard)
            e = shard;
    }
    return 4 * (int64_t)nd * e;
}

/* Elements of GPT-2's tensors `ids` (one layer's block of a per-layer tensor). */
static int64_t tensors_numel(const sz_gpt2_config *cfg, const int *ids, int n)
{
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += (int64_t)sz_gpt2_tensor_layer_numel(cfg, ids[i]);
    return sum;
}

int64_t sz_gpt2_largest_unit_numel(const sz_gpt2_config *cfg)
{
    if (!cfg || sz_gpt2_config_validate(cfg, NULL, 0) != SZ_OK)
        return -1;
    /* the units of apps/gpt2: embed, block0 .. block(L-1), head */
    static const int embed[] = {SZ_GPT2_WTE, SZ_GPT2_WPE};
    static const int block[] = {SZ_GPT2_LN1W, SZ_GPT2_LN1B, SZ_GPT2_QKVW, SZ_GPT2_QKVB,
                                SZ_GPT2_ATTPROJW, SZ_GPT2_ATTPROJB, SZ_GPT2_LN2W, SZ_GPT2_LN2B,
                                SZ_GPT2_FCW, SZ_GPT2_FCB, SZ_GPT2_FCPROJW, SZ_GPT2_FCPROJB};
    static const int head[] = {SZ_GPT2_LNFW, SZ_GPT2_LNFB};
    int64_t e = tensors_numel(cfg, embed, (int)(sizeof embed / sizeof embed[0]));
    int64_t b = tensors_numel(cfg, block, (int)(sizeof block / sizeof block[0]));
    int64_t h = tensors_numel(cfg, head, (int)(sizeof head / sizeof head[0]));
    int64_t m = e > b ? e : b;
    return m > h ? m : h;
}

/* ---- fitting a budget -------------------------------------------------------------------- */

/* bytes <= budget, up to the rounding of the sum: an exact fit on paper (4Ψ + 12Ψ/45 = 32e9 for
 * Ψ = 7.5e9) must not fail on its last bit. */
static int fits(int stage, double psi, int nd, int mixed, double budget, double extra)
{
    double need = sz_zero_model_state_bytes(stage, psi, nd, mixed) + extra;
    return need <= budget * (1.0 + 1e-12);
}

int sz_zero_min_nd(int stage, double psi, int mixed, double budget_bytes, double extra_bytes, int max_nd)
{
    if (!args_ok(stage, psi, 1) || max_nd < 1 || !(budget_bytes >= 0.0) || !(extra_bytes >= 0.0))
        return -1;
    /* Model-state bytes never grow with N_d: if max_nd does not fit, nothing does; otherwise
     * bisect for the first N_d that fits (fits(hi) holds throughout). */
    if (!fits(stage, psi, max_nd, mixed, budget_bytes, extra_bytes))
        return -1;
    int lo = 1, hi = max_nd;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (fits(stage, psi, mid, mixed, budget_bytes, extra_bytes))
            hi = mid;
        else
            lo = mid + 1;
    }
    return hi;
}
