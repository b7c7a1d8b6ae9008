/* graph/zero_estimate.c — the generic ZeRO estimator: model-state bytes and their breakdown,
 * communication volume, shard padding, ZeRO-R's communication buffer (C_B) exactly as the engine
 * allocates it, and the smallest N_d that fits a budget. A model's activation bytes belong to the
 * model (GPT-2's: apps/gpt2/gpt2_estimate.c). With model parallelism (zero_estimate.h): the
 * per-rank parameters, the MP traffic per block (the paper's 12·seq·hidden) and P_a's checkpoint
 * slices. Pure C: no runtime, never prints, never allocates. */
#include "zero_estimate.h"
#include "sz_plan.h"

#include <math.h>
#include <stddef.h>

/* ---- model states ------------------------------------------------------------------------ */

static int args_ok(int stage, double psi, int nd)
{
    return stage >= 0 && stage <= 3 && isfinite(psi) && psi >= 0.0 && nd >= 1;
}

sz_status sz_zero_state_breakdown(int stage, double psi, int nd, int mixed, sz_zero_breakdown *out)
{
    return sz_zero_state_breakdown_opt(stage, psi, nd, mixed, 2, out); /* AdamW: m and v */
}

sz_status sz_zero_state_breakdown_opt(int stage, double psi, int nd, int mixed, int states, sz_zero_breakdown *out)
{
    if (!out || !args_ok(stage, psi, nd) || states < 0 || states > 2)
        return SZ_ERR_INVALID;
    /* What each stage stores per parameter (graph/plan.c's table, the one the engine allocates
     * by), over Ψ or Ψ/N_d. */
    sz_plan_storage s;
    sz_plan_storage_of(stage, mixed, states, &s);
    double v[SZ_MEM_NCATEGORIES];
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
        v[c] = s.bytes[c] * (s.sharded[c] ? psi / (double)nd : psi);
    sz_zero_breakdown b = {.params = v[SZ_MEM_PARAMS], .param_shard = v[SZ_MEM_PARAM_SHARD], .grads = v[SZ_MEM_GRADS],
                           .grad_shard = v[SZ_MEM_GRAD_SHARD], .master = v[SZ_MEM_MASTER],
                           .adam_m = v[SZ_MEM_OPT_STATE0], .adam_v = v[SZ_MEM_OPT_STATE1]};
    *out = b;
    return SZ_OK;
}

double sz_zero_model_state_bytes(int stage, double psi, int nd, int mixed)
{
    return sz_zero_model_state_bytes_opt(stage, psi, nd, mixed, 2);
}

double sz_zero_model_state_bytes_opt(int stage, double psi, int nd, int mixed, int states)
{
    sz_zero_breakdown b;
    if (sz_zero_state_breakdown_opt(stage, psi, nd, mixed, states, &b) != SZ_OK)
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

/* ---- fitting a budget -------------------------------------------------------------------- */

/* bytes <= budget, up to the rounding of the sum: an exact fit on paper (4Ψ + 12Ψ/45 = 32e9 for
 * Ψ = 7.5e9) must not fail on its last bit. */
static int fits(int stage, double psi, int nd, int mixed, int states, double budget, double extra)
{
    double need = sz_zero_model_state_bytes_opt(stage, psi, nd, mixed, states) + extra;
    return need <= budget * (1.0 + 1e-12);
}

int sz_zero_min_nd(int stage, double psi, int mixed, double budget_bytes, double extra_bytes, int max_nd)
{
    return sz_zero_min_nd_opt(stage, psi, mixed, 2, budget_bytes, extra_bytes, max_nd);
}

int sz_zero_min_nd_opt(int stage, double psi, int mixed, int states, double budget_bytes, double extra_bytes,
                       int max_nd)
{
    if (!args_ok(stage, psi, 1) || max_nd < 1 || !(budget_bytes >= 0.0) || !(extra_bytes >= 0.0) || states < 0 ||
        states > 2)
        return -1;
    /* Model-state bytes never grow with N_d: if max_nd does not fit, nothing does; otherwise
     * bisect for the first N_d that fits (fits(hi) holds throughout). */
    if (!fits(stage, psi, max_nd, mixed, states, budget_bytes, extra_bytes))
        return -1;
    int lo = 1, hi = max_nd;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (fits(stage, psi, mid, mixed, states, budget_bytes, extra_bytes))
            hi = mid;
        else
            lo = mid + 1;
    }
    return hi;
}

/* ---- model parallelism (zero_estimate.h) ------------------------------------------------------ */

static int mp_ok(double x, int nm)
{
    return isfinite(x) && x >= 0.0 && nm >= 1;
}

double sz_zero_mp_rank_params(double psi_split, double psi_replicated, int nm)
{
    if (!mp_ok(psi_split, nm) || !mp_ok(psi_replicated, nm))
        return -1.0;
    return psi_split / (double)nm + psi_replicated;
}

/* all-reduces of B·T·C per block and step: 2 forward, 2 backward, 2 more in the recompute */
static double block_allreduces(int checkpoint)
{
    return checkpoint ? 6.0 : 4.0;
}

double sz_zero_mp_block_elems(double btc, int checkpoint, int nm)
{
    if (!mp_ok(btc, nm))
        return -1.0;
    return nm == 1 ? 0.0 : 2.0 * block_allreduces(checkpoint) * btc;
}

double sz_zero_mp_block_elems_sent(double btc, int checkpoint, int nm)
{
    if (!mp_ok(btc, nm))
        return -1.0;
    return 2.0 * block_allreduces(checkpoint) * btc * (double)(nm - 1) / (double)nm;
}

double sz_zero_pa_block_elems(double btc, int nm)
{
    if (!mp_ok(btc, nm))
        return -1.0;
    return nm == 1 ? 0.0 : btc;
}

double sz_zero_pa_block_elems_sent(double btc, int nm)
{
    if (!mp_ok(btc, nm))
        return -1.0;
    return btc * (double)(nm - 1) / (double)nm;
}

double sz_zero_mp_checkpoint_bytes(int layers, double btc, int elem_bytes, int nm, int pa, int cpu, double *host)
{
    if (layers < 0 || !mp_ok(btc, nm) || elem_bytes < 1 || (cpu && !pa))
        return -1.0;
    double per = pa ? ceil(btc / (double)nm) : btc; /* elements of one block's checkpoint on this rank */
    double bytes = (double)layers * per * (double)elem_bytes;
    if (host)
        *host = cpu ? bytes : 0.0;
    return cpu ? 0.0 : bytes;
}
