/* apps/common/mp_estimate.c — ZeRO with model parallelism, the paper's analysis computed
 * (mp_estimate.h): one MP rank's parameters from the model's tensor table, the P_a example, and
 * the largest model of each Table 3 configuration that fits a GPU. */
#include <math.h>
#include <stdio.h>
#include "mp_estimate.h"
#include "../../graph/zero_estimate.h"

int sz_mp_rank_params(const sz_arch_config *c, int nm, double *split, double *replicated, double *psi_rank,
                      char *err, size_t errlen)
{
    if (sz_arch_mp_check(c, nm, err, errlen) != 0)
        return -1;
    double sp, rep;
    if (sz_arch_mp_params(c, &sp, &rep) != 0) {
        snprintf(err, errlen, "the model's tensor table could not be built");
        return -1;
    }
    if (split)
        *split = sp;
    if (replicated)
        *replicated = rep;
    if (psi_rank)
        *psi_rank = sz_zero_mp_rank_params(sp, rep, nm);
    return 0;
}

int sz_mp_pa_example_of(int layers, int hidden, int seq, int nm, int elem_bytes, double target, sz_mp_pa_example *out)
{
    if (layers < 1 || hidden < 1 || seq < 1 || nm < 1 || elem_bytes < 1 || !(target > 0) || !out)
        return -1;
    double per = sz_zero_mp_checkpoint_bytes(layers, (double)seq * hidden, elem_bytes, 1, 0, 0, NULL);
    int b = (int)llround(target / per);
    if (b < 1)
        b = 1;
    double btc = (double)b * seq * hidden;
    *out = (sz_mp_pa_example){.batch = b, .per_sample = per,
                              .without_pa = sz_zero_mp_checkpoint_bytes(layers, btc, elem_bytes, nm, 0, 0, NULL),
                              .with_pa = sz_zero_mp_checkpoint_bytes(layers, btc, elem_bytes, nm, 1, 0, NULL)};
    return 0;
}

/* Figure 6 of the paper: 40B (C1), 60B (C2), 140B (C4), 150B (C5); C3 has no figure of its own. */
const sz_mp_paper_config sz_mp_table3[5] = {
    {"C1", "P_os, C_B, M_D", 1, 0, 0, 40e9},
    {"C2", "C1 + P_a", 1, 1, 0, 60e9},
    {"C3", "P_os+g, C_B, M_D", 2, 0, 0, 0},
    {"C4", "C3 + P_a", 2, 1, 0, 140e9},
    {"C5", "C4 + P_a+cpu", 2, 1, 1, 150e9},
};

int sz_mp_fit_memory(const sz_mp_fit_setup *s, const sz_mp_paper_config *cfg, int layers, sz_mp_fit *out)
{
    char spec[64], err[256];
    snprintf(spec, sizeof spec, "%d,%d,%d", layers, s->heads, s->channels);
    sz_arch_config c;
    if (sz_arch_config_from_string(&c, SZ_ARCH_GPT2, spec, s->vocab, s->seq, err, sizeof err) != SZ_OK)
        return -1;
    double psi_rank;
    if (sz_mp_rank_params(&c, s->nm, NULL, NULL, &psi_rank, err, sizeof err) != 0)
        return -1;
    sz_mp_fit f = {.layers = layers, .psi = (double)sz_arch_num_params(&c), .psi_rank = psi_rank};
    f.states = sz_zero_model_state_bytes(cfg->stage, psi_rank, s->nd, 1);
    /* the model's forward tensors on one MP rank (fp32 elements) at elem_bytes each */
    const double scale = s->elem_bytes / 4.0;
    f.activations = sz_arch_activation_bytes_mp(&c, s->batch, s->seq, 1, cfg->cpu, s->nm, cfg->pa) * scale;
    const double btc = sz_arch_block_io(&c, s->batch, s->seq);
    f.checkpoints = sz_zero_mp_checkpoint_bytes(layers, btc, s->elem_bytes, s->nm, cfg->pa, 0, NULL);
    f.host = cfg->cpu ? f.checkpoints : 0.0;
    f.buffer = (double)sz_zero_comm_buffer_bytes(s->bucket_bytes, s->nd, -1);
    if (f.states < 0 || f.activations < 0 || f.checkpoints < 0 || f.buffer < 0)
        return -1;
    f.total = f.states + f.activations + f.buffer;
    *out = f;
    return 0;
}

int sz_mp_fit_largest(const sz_mp_fit_setup *s, const sz_mp_paper_config *cfg, sz_mp_fit *out)
{
    if (!s || !cfg || !out || s->max_layers < 1 || s->batch < 1 || s->nm < 1 || s->nd < 1)
        return -1;
    sz_mp_fit f;
    /* memory grows with the layers: bisect for the last count that fits */
    if (sz_mp_fit_memory(s, cfg, 1, &f) != 0)
        return -1;
    if (f.total > s->budget)
        return 0;
    int lo = 1, hi = s->max_layers; /* fits(lo) */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (sz_mp_fit_memory(s, cfg, mid, &f) != 0)
            return -1;
        if (f.total <= s->budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (sz_mp_fit_memory(s, cfg, lo, out) != 0)
        return -1;
    return lo;
}

int sz_mp_fit_layers_for(const sz_mp_fit_setup *s, double psi)
{
    /* Ψ(L) = Ψ(1) + (L - 1)·(Ψ(2) - Ψ(1)): a GPT-2 model grows by one block's parameters a layer */
    sz_mp_fit a, b;
    static const sz_mp_paper_config any = {"", "", 1, 0, 0, 0};
    if (sz_mp_fit_memory(s, &any, 1, &a) != 0 || sz_mp_fit_memory(s, &any, 2, &b) != 0)
        return -1;
    long l = lround(1.0 + (psi - a.psi) / (b.psi - a.psi));
    return l < 1 ? 1 : l > s->max_layers ? s->max_layers : (int)l;
}
