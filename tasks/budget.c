/* tasks/budget.c — the byte budget: the plan's fold for this model under other configurations
 * (stage, N_d, precision, checkpointing, micro-batch) and the advice a budget too small gets
 * (sz_model_check_budget: what fits, by the same fold). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_cuda.h"
#include "sz_gpu_budget.h"
#include "sz_devcheck.h"
#include "sz_deadline.h"

/* A configuration the prediction (and the budget advice) folds the plan for: this model's, with
 * these changes. rows: the micro-batch's rows divided by this (activations taken as proportional). */
struct trial {
    int stage, nd, mixed, checkpoint, offload, rows, offload_optimizer;
};

static struct trial current(const struct sz_model *m)
{
    return (struct trial){m->zero.stage, m->nd, m->prec.mixed, m->zero.checkpoint, m->zero.offload_checkpoints, 1,
                          m->zero.offload_optimizer};
}

/* The activation and host-pool bytes this model would register under checkpointing settings
 * (ck, off), from what it registered (sz_model_activation, sz_model_checkpoint). */
static void act_bytes(const struct sz_model *m, int ck, int off, int64_t *act, int64_t *host)
{
    int64_t ckpt = 0;
    for (int i = 0; i < m->nunits; i++)
        ckpt += m->units[i]->ckpt_bytes;
    *act = m->act_fixed + (ck ? m->act_shared : m->act_per_unit) + (ck && off ? 0 : ckpt);
    *host = ck && off ? ckpt : 0;
}

/* The plan's fold for this model under t: the figures the step will really reach (tasks/step.c
 * submits the same plan); its actions are added to *work (may be NULL). */
static sz_status predict(const struct sz_model *m, struct trial t, sz_fold *f, int64_t *work)
{
    sz_plan_config c;
    sz_zero_plan_config(m, SZ_PASS_STEP, 0, &c);
    c.stage = t.stage;
    c.nd = t.nd;
    c.rank = m->rank < t.nd ? m->rank : 0;
    c.mixed = t.mixed;
    c.offload_optimizer = t.offload_optimizer;
    c.bucket_elems = sz_zero_bucket_elems(m, t.nd);
    sz_plan_unit *pu = calloc((size_t)m->nunits + 1, sizeof *pu);
    if (!pu)
        return SZ_ERR_NOMEM;
    sz_zero_plan_units(m, pu);
    if (t.checkpoint != c.checkpoint || t.offload != c.offload || t.rows > 1) {
        c.checkpoint = t.checkpoint;
        c.offload = t.offload;
        act_bytes(m, t.checkpoint, t.offload, &c.extra[SZ_MEM_ACTIVATIONS], &c.extra[SZ_MEM_HOST]);
        c.extra[SZ_MEM_ACTIVATIONS] = (c.extra[SZ_MEM_ACTIVATIONS] + t.rows - 1) / t.rows;
        c.extra[SZ_MEM_HOST] = (c.extra[SZ_MEM_HOST] + t.rows - 1) / t.rows;
        for (int i = 0; i < m->nunits; i++)
            pu[i].ckpt_bytes = (pu[i].ckpt_bytes + t.rows - 1) / t.rows;
    }
    sz_plan p;
    sz_status st = sz_plan_build(pu, m->nunits, &c, &p);
    free(pu);
    if (st != SZ_OK)
        return st;
    sz_plan_fold(&p, f, NULL);
    if (work)
        *work += p.n;
    sz_plan_free(&p);
    return SZ_OK;
}

/* What the budget holds beside the plan: with CUDA workers StarPU's allocation chunks on the GPU
 * (graph/sz_devcheck.h), else nothing (on the host the device pool serves StarPU exactly). */
static int64_t allocator_slack(void) { return sz_model_have_cuda() ? SZ_STARPU_CUDA_SLACK_BYTES : 0; }

/* The peak the budget is checked against: with CUDA workers the device's (each GPU's budget;
 * the host pool and an offloaded optimizer live in host memory) plus StarPU's chunks, else the
 * rank's whole peak. */
static int64_t predict_peak(const struct sz_model *m, struct trial t, int64_t *work)
{
    sz_fold f;
    if (predict(m, t, &f, work) != SZ_OK)
        return INT64_MAX;
    return sz_model_have_cuda() ? f.device_peak_bytes + allocator_slack() : f.peak_bytes;
}

/* A floor under predict_peak(m, t) found without building the plan (0 where none is known): on
 * CPU-only ranks, whose peak counts every byte, the model states by the paper's formula (padding
 * only adds) plus, at stage 3, the largest unit gathered whole for its forward. It falls as N_d
 * grows, so the search below skips what cannot fit without folding a plan for it. */
static double peak_floor(const struct sz_model *m, struct trial t)
{
    if (sz_model_have_cuda())
        return 0.0;
    int64_t psi = 0, largest = 0;
    for (int i = 0; i < m->nunits; i++) {
        psi += m->units[i]->numel;
        largest = m->units[i]->numel > largest ? m->units[i]->numel : largest;
    }
    double states = sz_zero_model_state_bytes_opt(t.stage, (double)psi, t.nd, t.mixed, m->nopt_states);
    return (states > 0 ? states : 0.0) + (t.stage == 3 ? (double)largest * (t.mixed ? 2 : 4) : 0.0);
}

/* The plans the advice may fold, counted in actions: enough for every trial of a model with
 * moderate buckets, and at most a few seconds whatever the shape (a huge model in small buckets
 * has hundreds of thousands of actions per plan). */
#define SEARCH_ACTIONS ((int64_t)40 << 20)

/* "X MB" rounded so that a figure over the budget never prints as one at or under it: needs round
 * up, budgets down (to 0.1 MB). */
static double mb_up(int64_t b) { return ceil((double)b / 1e5) / 10.0; }
static double mb_down(int64_t b) { return floor((double)b / 1e5) / 10.0; }

/* The smallest N_d >= ours at which t fits the budget (-1: none up to 4096, or the search's
 * actions spent: *cut set); its peak in *at. */
static int fit_nd(const struct sz_model *m, struct trial t, int64_t budget, int64_t *at, int64_t *work, int *cut)
{
    t.nd = 4096;
    if (peak_floor(m, t) > (double)budget)
        return -1; /* not even with the most ranks tried */
    for (int nd = m->nd; nd <= 4096; nd = nd < 64 ? nd + 1 : nd * 2) {
        t.nd = nd;
        if (peak_floor(m, t) > (double)budget)
            continue;
        if (*work > SEARCH_ACTIONS) {
            *cut = 1;
            return -1;
        }
        if ((*at = predict_peak(m, t, work)) <= budget)
            return nd;
    }
    return -1;
}

struct advice {
    char text[1024];
    size_t len;
};

static void say(struct advice *a, const char *fmt, ...)
{
    if (a->len >= sizeof a->text)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(a->text + a->len, sizeof a->text - a->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        a->len += (size_t)n;
}

sz_status sz_model_check_budget(struct sz_model *m, int64_t budget)
{
    if (!m)
        return SZ_ERR_INVALID;
    struct trial now = current(m);
    int64_t peak = predict_peak(m, now, NULL);
    if (peak == INT64_MAX)
        return SZ_ERR_NOMEM;
    m->predicted_peak = peak - allocator_slack(); /* the plan's own figure (the engine's count) */
    if (budget <= 0 || peak <= budget)
        return SZ_OK;
    /* What fits, each by the same fold: every stage's smallest N_d >= ours as configured; then,
     * at our stage, the same with checkpointing, offloaded checkpoints, the other precision, and
     * smaller micro-batches. Only what fits is listed. */
    struct advice a = {.len = 0};
    int64_t at, base_at = 0, work = 0;
    int cut = 0; /* the search stopped at SEARCH_ACTIONS */
    int base_nd = -1; /* the fewest ranks as configured */
    for (int s = 0; s < 4; s++) {
        struct trial t = now;
        t.stage = s;
        int nd = fit_nd(m, t, budget, &at, &work, &cut);
        if (nd > 0)
            say(&a, "%sstage %d with N_d >= %d (%.1f MB)", a.len ? ", " : "", s, nd, mb_up(at));
        if (nd > 0 && (base_nd < 0 || nd < base_nd || (nd == base_nd && at < base_at)))
            base_nd = nd, base_at = at;
    }
    /* the other settings are predicted from what the model registered: only when that accounts
     * for what it holds now */
    int64_t act, host;
    act_bytes(m, m->zero.checkpoint, m->zero.offload_checkpoints, &act, &host);
    int known = act == m->persistent[SZ_MEM_ACTIVATIONS] && host == m->persistent[SZ_MEM_HOST];
    struct trial alt[7];
    const char *what[7];
    int nalt = 0;
    if (sz_model_have_cuda() && !now.offload_optimizer)
        alt[nalt] = now, alt[nalt].offload_optimizer = 1, what[nalt++] = "--offload-optimizer (master and optimizer state in host memory)";
    if (known && !now.checkpoint) {
        alt[nalt] = now, alt[nalt].checkpoint = 1, what[nalt++] = "activation checkpointing";
        alt[nalt] = now, alt[nalt].checkpoint = alt[nalt].offload = 1,
        what[nalt++] = "checkpointing with offloaded checkpoints";
    } else if (known && !now.offload) {
        alt[nalt] = now, alt[nalt].offload = 1, what[nalt++] = "offloaded checkpoints";
    }
    alt[nalt] = now, alt[nalt].mixed = !now.mixed, what[nalt++] = now.mixed ? "--precision fp32" : "--precision bf16";
    if (known) {
        alt[nalt] = now, alt[nalt].rows = 2, what[nalt++] = "micro-batches of half the rows (half --batch, twice --micro-batches)";
        alt[nalt] = now, alt[nalt].rows = 4, what[nalt++] = "micro-batches of a quarter of the rows";
    }
    int said_rows = 0;
    for (int i = 0; i < nalt; i++) { /* each setting at the stage that needs the fewest ranks */
        if (alt[i].rows > 1 && said_rows)
            continue;
        int best_nd = -1, best_s = 0;
        int64_t best_at = 0;
        for (int s = 0; s < 4; s++) {
            struct trial t = alt[i];
            t.stage = s;
            int nd = fit_nd(m, t, budget, &at, &work, &cut);
            if (nd > 0 && (best_nd < 0 || nd < best_nd)) {
                best_nd = nd;
                best_s = s;
                best_at = at;
            }
        }
        /* listed only where it helps: fewer ranks than without it, or less memory at as many */
        if (best_nd < 0 || (base_nd > 0 && (best_nd > base_nd || (best_nd == base_nd && best_at >= base_at))))
            continue;
        said_rows |= alt[i].rows > 1;
        say(&a, "%s%s: stage %d with N_d >= %d (%.1f MB)", a.len ? "; " : "", what[i], best_s, best_nd, mb_up(best_at));
    }
    char gpu_note[2048] = "";
    if (sz_model_have_cuda() && m->budget_from_machine && budget == m->budget) {
        char text[1024], over[256] = "";
        const struct sz_context *cx = m->core.ctx;
        if (cx->ngpu_budgets > 1) /* the device peak against each of this rank's GPUs */
            sz_gpu_budgets_check_peak(cx->gpu_budgets, cx->ngpu_budgets, peak, over, sizeof over);
        sz_gpu_budgets_describe(cx->ngpu_budgets > 0 ? cx->gpu_budgets : &cx->gpu_budget,
                                cx->ngpu_budgets > 0 ? cx->ngpu_budgets : 1, 0, text, sizeof text);
        snprintf(gpu_note, sizeof gpu_note, " (no budget given: %s%s%s; %s; a larger N_d below means more GPUs)",
                 cx->gpu_budget.device >= 0 ? text : "the free memory of this rank's GPU at start, split among the ranks driving it",
                 over[0] ? "; over on " : "", over,
                 "at most StarPU's limit there (STARPU_LIMIT_CUDA_MEM, else 90% of the device); the smallest over ranks");
    }
    char slack_note[96] = "";
    if (sz_model_have_cuda())
        snprintf(slack_note, sizeof slack_note, "with %.1f MB for StarPU's allocation chunks)", allocator_slack() / 1e6);
    sz_context_log(m->core.ctx, SZ_LOG_ERROR,
                   "memory budget: the plan needs %.1f MB per %s%s (stage %d, N_d %d, %s%s%s%s) but the budget is %.1f MB%s. "
                   "Settings that fit, each predicted by the same plan: %s. Activations take %.1f MB of the %.1f.",
                   mb_up(peak), sz_model_have_cuda() ? "GPU (device memory, " : "rank", slack_note, m->zero.stage, m->nd, sz_precision_name(m->zero.precision),
                   m->zero.checkpoint ? ", checkpointing" : "", m->zero.offload_checkpoints ? ", offloaded checkpoints" : "",
                   m->zero.offload_optimizer ? ", offloaded optimizer" : "",
                   mb_down(budget),
                   !(m->budget_from_machine && budget == m->budget) ? ""
                   : sz_model_have_cuda() ? gpu_note
                                 : " (no budget given: this rank's share of the memory this node has available now, less the "
                                   "runtime's allowance; more ranks on this node would share it, so a larger N_d below means "
                                   "more nodes)",
                   a.len ? a.text : cut ? "none found before the search's bound (the plans of this shape are too large to "
                                          "try every setting; sz-estimate --model ... --budget explores them)"
                                        : "none up to N_d 4096 by stage, precision, checkpointing or micro-batch",
                   m->persistent[SZ_MEM_ACTIVATIONS] / 1e6, mb_up(peak));
    return SZ_ERR_BUDGET;
}

sz_status sz_model_check_states(const struct sz_model *m)
{
    int64_t limit = sz_memory_total_bytes();
    if (limit <= 0 || sz_model_have_cuda()) /* on GPUs the device budget is checked at finalize */
        return SZ_OK;
    struct trial t = current(m);
    t.stage = 3; /* the least any configuration of these ranks needs */
    double floor = peak_floor(m, t);
    if (floor <= (double)limit)
        return SZ_OK;
    int64_t psi = 0;
    for (int i = 0; i < m->nunits; i++)
        psi += m->units[i]->numel;
    int nd = sz_zero_min_nd_opt(3, (double)psi, t.mixed, m->nopt_states, (double)limit, 0.0, 1 << 30);
    char fit[96] = "no N_d up to 2^30";
    if (nd > 0)
        snprintf(fit, sizeof fit, "N_d >= %d", nd);
    sz_context_log(m->core.ctx, SZ_LOG_ERROR,
                   "memory: the %d units declared so far (%lld parameters) need at least %.1f MB per rank for their "
                   "model states alone, even at stage 3 with this job's N_d %d (%s; the ZeRO formula and the largest unit "
                   "gathered, before activations and buffers), more than this node's whole memory (%.1f MB): no "
                   "configuration of this job could run a step, so the model is refused before its tensors are "
                   "allocated. By the formula its model states need %s at stage 3",
                   m->nunits, (long long)psi, floor / 1e6, t.nd, sz_precision_name(m->zero.precision), mb_down(limit),
                   fit);
    return SZ_ERR_BUDGET;
}

sz_status sz_model_check_node_budget(const struct sz_model *m)
{
    const struct sz_context *ctx = m->core.ctx;
    int64_t total = sz_memory_total_bytes(), local = ctx->topology.local_size > 0 ? ctx->topology.local_size : 1;
    int over = m->zero.mem_budget > 0 && !sz_model_have_cuda() && total > 0 && m->zero.mem_budget > total / local;
    if (ctx->world_size > 1 && /* every rank alike: refused if any node is too small */
        sz_allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, ctx->comm, "memory budget against the node") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    if (!over)
        return SZ_OK;
    char shared[64] = "";
    if (local > 1)
        snprintf(shared, sizeof shared, " shared by %lld ranks", (long long)local);
    sz_context_log(m->core.ctx, SZ_LOG_ERROR,
                   "--mem-budget %.1f MB per rank is more than %s (%.1f MB%s): a plan that fits it could still "
                   "exhaust the node. Give at most %.1f MB, or no budget (each rank then gets its share of what the "
                   "node has available)",
                   m->zero.mem_budget / 1e6,
                   total / local >= m->zero.mem_budget ? "another node's memory per rank" : "this node's memory per rank",
                   total / 1e6, shared, mb_down(total / local));
    return SZ_ERR_BUDGET;
}
