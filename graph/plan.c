/* graph/plan.c — the step plan (graph/sz_plan.h): builds the ordered list of actions one rank
 * submits for a training step or an evaluation pass, folds its byte deltas into the predicted
 * memory figures, and prints it. The stage storage table, padding and shard ranges live here.
 *
 * The builder walks the step as tasks/step.c used to submit it, keeping the submission-time state
 * (which units are gathered, whose gradients are allocated, which checkpoints are on the device)
 * itself, so that the list alone says what is submitted:
 *   forward:  for u in order: [gather u (+ tied units)] [allocate the next unit's checkpoint]
 *             [stage 3: prefetch] fwd(u) [release them, except the last unit's before its
 *             backward] [offload u's checkpoint]
 *   backward: [stages 0-1, first micro-batch: zero the full gradients (mixed: only those no
 *             GRAD_CONVERT writes)]
 *             for u in reverse: [gather, unless its backward reads no parameter] [prefetch]
 *             [allocate grads] [checkpointing: fetch u's and u-1's checkpoints, allocate u+1's,
 *             recompute u] bwd(u) [release] [comm worker: allocate u-1's grads] [drop the
 *             checkpoints] [mixed: convert the grads to bf16] [2-3: reduce-scatter, free them]
 *   update:   [0-1 across ranks: reduce-scatter every unit's grads] [0: all-gather them]
 *             [norms, clip] optimizer on the owned range [1-2: all-gather the parameters]
 *             [fused norms: the report's norm] */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "sz_plan.h"

/* ---- layout ----------------------------------------------------------------------------------- */

/* The one padding rule: numel rounded up to a multiple of nd, and nd for a unit without
 * parameters (every rank owns one element). */
int64_t sz_zero_padded(int64_t numel, int nd)
{
    if (numel < 0 || nd < 1)
        return -1;
    if (numel == 0)
        return nd;
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

void sz_plan_shard_range(int64_t padded, int nd, int rank, int64_t *lo, int64_t *n)
{
    int64_t s = nd > 0 ? padded / nd : 0;
    *lo = (int64_t)rank * s;
    *n = s;
}

void sz_plan_storage_of(int stage, int mixed, int opt_states, sz_plan_storage *s)
{
    memset(s, 0, sizeof *s);
    int p = mixed ? 2 : 4;
    if (stage <= 2)
        s->bytes[SZ_MEM_PARAMS] = p;
    else
        s->bytes[SZ_MEM_PARAM_SHARD] = p, s->sharded[SZ_MEM_PARAM_SHARD] = 1;
    if (stage <= 1)
        s->bytes[SZ_MEM_GRADS] = p;
    else
        s->bytes[SZ_MEM_GRAD_SHARD] = p, s->sharded[SZ_MEM_GRAD_SHARD] = 1;
    s->bytes[SZ_MEM_MASTER] = mixed ? 4 : 0;
    s->bytes[SZ_MEM_OPT_STATE0] = opt_states >= 1 ? 4 : 0;
    s->bytes[SZ_MEM_OPT_STATE1] = opt_states >= 2 ? 4 : 0;
    s->sharded[SZ_MEM_MASTER] = s->sharded[SZ_MEM_OPT_STATE0] = s->sharded[SZ_MEM_OPT_STATE1] = stage >= 1;
}

int64_t sz_plan_unit_state(const sz_plan_storage *s, int cat, int64_t padded, int nd)
{
    if (cat < 0 || cat >= SZ_MEM_NCATEGORIES || nd < 1)
        return 0;
    return s->bytes[cat] * (s->sharded[cat] ? padded / nd : padded);
}

int64_t sz_plan_bucket_elems(int64_t bucket_bytes, int nd, int64_t maxpad)
{
    if (bucket_bytes < 0)
        bucket_bytes = 0;
    return nd > 1 ? sz_zero_comm_buffer_bytes(bucket_bytes, nd, maxpad) / (4 * (int64_t)nd) : maxpad;
}

/* At least as many actions as the plan will have (padded and shard sizes set): every unit's
 * actions of a micro-batch and of the update (at most 16 each besides the bucket rounds) and the
 * reduce-scatter's bucket rounds, one action each; saturates instead of overflowing. */
static int64_t actions_bound(const sz_plan *p, int nmb)
{
    int64_t total = 0, bucket = p->cfg.bucket_elems;
    for (int i = 0; i < p->nunits && total <= SZ_PLAN_MAX_ACTIONS; i++) {
        int64_t lo, n;
        sz_plan_shard_range(p->padded[i], p->cfg.nd, p->cfg.rank, &lo, &n);
        int64_t rounds = bucket <= 0 || bucket > n ? 1 : (n + bucket - 1) / bucket;
        total += (int64_t)(nmb + 1) * 16 + (rounds < SZ_PLAN_MAX_ACTIONS ? rounds : SZ_PLAN_MAX_ACTIONS) * nmb;
    }
    return total;
}

/* ---- the builder ------------------------------------------------------------------------------ */

struct builder {
    sz_plan *p;
    const sz_plan_unit *u;
    char *gathered, *grads_live, *ckpt_dev; /* submission-time state, per unit */
    char *used_by_bwd;    /* per unit: another unit's backward writes its gradients (it uses the unit) */
    char *tied_unrounded; /* per unit: such a backward cannot round into them (grads_rounded) */
    int mb;
    sz_status st;
};

static sz_action *emit(struct builder *b, sz_action_kind kind, int unit, sz_plan_buf buf)
{
    sz_plan *p = b->p;
    if (b->st != SZ_OK)
        return NULL;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 256;
        sz_action *a = realloc(p->a, (size_t)cap * sizeof *a);
        if (!a) {
            b->st = SZ_ERR_NOMEM;
            return NULL;
        }
        p->a = a;
        p->cap = cap;
    }
    sz_action *a = &p->a[p->n++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->unit = unit;
    a->buf = buf;
    a->micro_batch = b->mb;
    a->node = SZ_NODE_DEVICE;
    if (unit >= 0) {
        a->lo = 0;
        a->n = p->padded[unit];
    }
    return a;
}

/* The action's bytes: `bytes` of category `cat`. */
static void delta(sz_action *a, int cat, int64_t bytes)
{
    if (a)
        a->delta[cat] = bytes;
}

static int64_t elem(const sz_plan *p) { return p->cfg.mixed ? 2 : 4; }

/* Whether unit i's compute reads an fp32 working copy of its parameters, given whether it takes
 * bf16 ones (sz_plan_unit.bf16_params): under mixed precision, unless it reads the bf16 parameters
 * directly (cfg.bf16_direct). The one rule the plan's actions, its accesses and the prefetch
 * window's bytes follow. */
static int reads_work(const sz_plan_config *c, int bf16_params) { return c->mixed && !(c->bf16_direct && bf16_params); }

static int work_copy(const struct builder *b, int i) { return reads_work(&b->p->cfg, b->u[i].bf16_params); }

int64_t sz_plan_params_bytes(const sz_plan *p, int i)
{
    int work = reads_work(&p->cfg, p->bf16_params[i]);
    return (p->cfg.stage == 3 ? p->padded[i] * elem(p) : 0) + (work ? p->padded[i] * 4 : 0);
}

static int has_ckpt(const struct builder *b, int i)
{
    const sz_plan_config *c = &b->p->cfg;
    return i >= 0 && i < b->p->nunits && c->checkpoint && c->offload && b->u[i].checkpointable &&
           b->u[i].ckpt_bytes > 0;
}

static int has_ckpt_of(const sz_plan *p, const sz_plan_unit *u, int i)
{
    const sz_plan_config *c = &p->cfg;
    return i >= 0 && i < p->nunits && c->checkpoint && c->offload && u[i].checkpointable && u[i].ckpt_bytes > 0;
}

/* The unit's backward needs its parameters (and its tied units') present: not for a backward that
 * reads none, unless its forward is recomputed before it. */
static int backward_gathers(const struct builder *b, int i)
{
    const sz_plan_unit *u = &b->u[i];
    return u->has_backward && !(u->backward_skips_params && !(b->p->cfg.checkpoint && u->checkpointable));
}

static void gather(struct builder *b, int i)
{
    const sz_plan *p = b->p;
    if (b->gathered[i])
        return;
    b->gathered[i] = 1;
    if (p->cfg.stage == 3)
        delta(emit(b, SZ_ACT_GATHER, i, SZ_BUF_PARAM), SZ_MEM_GATHERED, p->padded[i] * elem(p));
    if (work_copy(b, i)) {
        delta(emit(b, SZ_ACT_CONVERT, i, SZ_BUF_WORK), SZ_MEM_GATHERED, p->padded[i] * 4);
        if (p->cfg.stage == 3) /* the bf16 gathered copy is not needed any more */
            delta(emit(b, SZ_ACT_RELEASE, i, SZ_BUF_PARAM), SZ_MEM_GATHERED, -p->padded[i] * 2);
    }
}

static void release(struct builder *b, int i)
{
    const sz_plan *p = b->p;
    if (!b->gathered[i])
        return;
    b->gathered[i] = 0;
    if (work_copy(b, i))
        delta(emit(b, SZ_ACT_RELEASE, i, SZ_BUF_WORK), SZ_MEM_GATHERED, -p->padded[i] * 4);
    else if (p->cfg.stage == 3)
        delta(emit(b, SZ_ACT_RELEASE, i, SZ_BUF_PARAM), SZ_MEM_GATHERED, -p->padded[i] * elem(p));
}

static void with_uses(struct builder *b, int i, void (*fn)(struct builder *, int))
{
    fn(b, i);
    for (int k = 0; k < b->u[i].nuses; k++)
        fn(b, b->u[i].uses[k]);
}

/* Gradients: fp32 stages 0-1 write the persistent full gradients; otherwise a buffer allocated
 * on first touch (fp32 working gradients under mixed precision). */
static int grads_converted(const struct builder *b, int i);

static void grads_touch(struct builder *b, int i)
{
    const sz_plan *p = b->p;
    if (b->grads_live[i])
        return;
    b->grads_live[i] = 1;
    int fold = p->cfg.fold_grads ? SZ_GRADS_FIRST_WRITERS : 0;
    if (p->rounded[i]) { /* the writers round into the bf16 gradients: no fp32 working copy */
        fold |= SZ_GRADS_ROUNDED;
        sz_action *a = p->cfg.stage >= 2 ? emit(b, SZ_ACT_GRAD_ALLOC, i, SZ_BUF_GRAD)
                       : b->mb == 0      ? emit(b, SZ_ACT_ZERO_GRADS, i, SZ_BUF_GRAD) /* later ones add */
                                         : NULL;
        if (a)
            a->flag = fold;
        if (p->cfg.stage >= 2)
            delta(a, SZ_MEM_GRADS_IN_FLIGHT, p->padded[i] * 2);
        return;
    }
    if (!p->cfg.mixed && p->cfg.stage < 2) {
        /* left to the first writers: zeroed (the padding) right before the backward that writes them */
        sz_action *a = fold && b->mb == 0 && !grads_converted(b, i) ? emit(b, SZ_ACT_ZERO_GRADS, i, SZ_BUF_GRAD) : NULL;
        if (a)
            a->flag = fold;
        return;
    }
    sz_action *a = emit(b, SZ_ACT_GRAD_ALLOC, i, SZ_BUF_WGRAD);
    if (a)
        a->flag = fold;
    delta(a, SZ_MEM_GRADS_IN_FLIGHT, p->padded[i] * 4);
}

/* The unit's reduce-scatter, one action per bucket round: round r reduces elements
 * [r * bucket, (r + 1) * bucket) of every rank's shard into ours, through the C_B receive buffer;
 * the last round frees `freed` (negative) bytes of full-size gradients. */
static void reduce_scatter(struct builder *b, int i, int acc, int64_t freed)
{
    const sz_plan *p = b->p;
    int64_t lo, n, bucket = p->cfg.bucket_elems;
    sz_plan_shard_range(p->padded[i], p->cfg.nd, p->cfg.rank, &lo, &n);
    if (bucket <= 0 || bucket > n)
        bucket = n > 0 ? n : 1;
    int rounds = n > 0 ? (int)((n + bucket - 1) / bucket) : 1;
    for (int r = 0; r < rounds; r++) {
        sz_action *a = emit(b, SZ_ACT_REDUCE_SCATTER, i, SZ_BUF_GRAD);
        if (!a)
            return;
        a->flag = acc;
        a->round = r;
        a->rounds = rounds;
        a->lo = lo + r * bucket;
        a->n = n - r * bucket < bucket ? n - r * bucket : bucket;
        if (r == rounds - 1)
            delta(a, SZ_MEM_GRADS_IN_FLIGHT, freed);
    }
}

/* Whether a backward writes the unit's gradients: its own, or that of a unit using it. */
static int grads_written(const struct builder *b, int i)
{
    return b->u[i].has_backward || b->used_by_bwd[i];
}

/* Mixed precision: the unit's working gradients are written in every micro-batch, so its
 * GRAD_CONVERT runs in every micro-batch. */
static int grads_converted(const struct builder *b, int i)
{
    return b->p->cfg.mixed && !b->p->rounded[i] && grads_written(b, i);
}

/* fold_round: the unit's writers round into its bf16 gradients (sz_plan_config.fold_round): a unit
 * with round_grads and a backward, whose gradients no other unit's backward writes, or (with
 * round_tied_grads) only units with round_grads. */
static int grads_rounded(const struct builder *b, int i)
{
    const sz_plan *p = b->p;
    return p->cfg.mixed && p->cfg.fold_round && p->cfg.fold_grads && b->u[i].round_grads && b->u[i].has_backward &&
           !b->tied_unrounded[i];
}

/* The builder's per-unit view of who writes whose gradients (one pass over the uses, so the
 * rules above cost O(1) per unit whatever the number of units). */
static void uses_index(struct builder *b)
{
    for (int j = 0; j < b->p->nunits; j++)
        for (int k = 0; b->u[j].has_backward && k < b->u[j].nuses; k++) {
            int i = b->u[j].uses[k];
            if (i == j)
                continue;
            b->used_by_bwd[i] = 1;
            if (!(b->u[i].round_tied_grads && b->u[j].round_grads))
                b->tied_unrounded[i] = 1;
        }
}

static void grads_flush(struct builder *b, int i)
{
    const sz_plan *p = b->p;
    if ((!p->cfg.mixed && p->cfg.stage < 2) || !b->grads_live[i])
        return;
    b->grads_live[i] = 0;
    int64_t freed = p->padded[i] * (p->rounded[i] ? 2 : 4);
    if (p->cfg.mixed && !p->rounded[i]) {
        int keep = p->cfg.stage >= 2; /* a bf16 copy lives on until its reduce-scatter */
        sz_action *a = emit(b, SZ_ACT_GRAD_CONVERT, i, SZ_BUF_GRAD);
        /* stages 0-1 add into the full gradients; the first micro-batch's convert writes what
         * adding onto zeros gives (no ZERO_GRADS for these units: one pass over them fewer) */
        if (a)
            a->flag = keep ? SZ_CONVERT_SET : b->mb == 0 ? SZ_CONVERT_ONTO_ZEROS : SZ_CONVERT_ADD;
        delta(a, SZ_MEM_GRADS_IN_FLIGHT, (keep ? p->padded[i] * 2 : 0) - p->padded[i] * 4);
        freed = p->padded[i] * 2;
    }
    if (p->cfg.stage >= 2)
        reduce_scatter(b, i, b->mb > 0, -freed);
}

/* Offloaded checkpoints: a unit's input lives on the device from its producer's forward to its
 * own forward, then waits on the host pool; it comes back before the unit's recompute (fetched one
 * unit ahead) and is freed after its backward. */
static void ckpt_alloc(struct builder *b, int v)
{
    if (!has_ckpt(b, v) || b->ckpt_dev[v])
        return;
    b->ckpt_dev[v] = 1;
    delta(emit(b, SZ_ACT_CKPT_ALLOC, v, SZ_BUF_CKPT), SZ_MEM_CHECKPOINTS, b->u[v].ckpt_bytes);
}

static void ckpt_offload(struct builder *b, int v)
{
    if (!has_ckpt(b, v) || !b->ckpt_dev[v])
        return;
    b->ckpt_dev[v] = 0;
    delta(emit(b, SZ_ACT_CKPT_OFFLOAD, v, SZ_BUF_CKPT), SZ_MEM_CHECKPOINTS, -b->u[v].ckpt_bytes);
}

static void ckpt_fetch(struct builder *b, int v)
{
    if (!has_ckpt(b, v) || b->ckpt_dev[v])
        return;
    b->ckpt_dev[v] = 1;
    delta(emit(b, SZ_ACT_CKPT_FETCH, v, SZ_BUF_CKPT), SZ_MEM_CHECKPOINTS, b->u[v].ckpt_bytes);
}

static void ckpt_drop(struct builder *b, int v)
{
    if (!has_ckpt(b, v) || !b->ckpt_dev[v])
        return;
    b->ckpt_dev[v] = 0;
    delta(emit(b, SZ_ACT_RELEASE, v, SZ_BUF_CKPT), SZ_MEM_CHECKPOINTS, -b->u[v].ckpt_bytes);
}

/* Stage 3's prefetch window: after gathering the unit about to compute, gather the next units in
 * the pass's order while their bytes fit in prefetch_bytes (counting those gathered already: the
 * window is bytes ahead) and the gathered bytes alive stay within max_live_bytes. */
static void prefetch(struct builder *b, int from, int step)
{
    const sz_plan *p = b->p;
    if (p->cfg.stage < 3 || p->cfg.prefetch_bytes <= 0)
        return;
    int64_t live = 0, ahead = 0;
    for (int i = 0; i < p->nunits; i++)
        if (b->gathered[i])
            live += sz_plan_params_bytes(p, i);
    for (int i = from; i >= 0 && i < p->nunits; i += step) {
        if (step < 0 && !backward_gathers(b, i))
            continue;
        int64_t need = 0, add = 0;
        for (int k = -1; k < b->u[i].nuses; k++) {
            int v = k < 0 ? i : b->u[i].uses[k];
            need += sz_plan_params_bytes(p, v);
            add += b->gathered[v] ? 0 : sz_plan_params_bytes(p, v);
        }
        if (ahead + need > p->cfg.prefetch_bytes || (p->cfg.max_live_bytes > 0 && live + add > p->cfg.max_live_bytes))
            break;
        with_uses(b, i, gather);
        ahead += need;
        live += add;
    }
}

static void forward(struct builder *b, int then_backward)
{
    int n = b->p->nunits;
    for (int i = 0; i < n; i++) {
        with_uses(b, i, gather);
        /* this forward writes the next unit's checkpoint; allocated before the prefetch so that
         * the forward waits for no gather but its own */
        ckpt_alloc(b, i + 1);
        prefetch(b, i + 1, 1);
        emit(b, SZ_ACT_FWD, i, SZ_BUF_NONE);
        /* the last unit's backward comes next and needs the same parameters: keep them */
        if (!(then_backward && i == n - 1 && b->u[i].has_backward))
            with_uses(b, i, release);
        ckpt_offload(b, i); /* our input waits on the host pool until our recompute */
    }
}

static void backward(struct builder *b)
{
    const sz_plan *p = b->p;
    int n = p->nunits;
    if (p->cfg.stage < 2 && b->mb == 0) /* full gradients accumulate over micro-batches */
        for (int i = 0; i < n; i++)
            /* mixed: its first GRAD_CONVERT writes them whole; left to the first writers: zeroed
             * before the backward that touches them first (grads_touch), except those none touches */
            if (!grads_converted(b, i) && (!p->cfg.fold_grads || !grads_written(b, i)))
                emit(b, SZ_ACT_ZERO_GRADS, i, SZ_BUF_GRAD);
    for (int i = n - 1; i >= 0; i--) {
        if (b->u[i].has_backward) {
            if (backward_gathers(b, i))
                with_uses(b, i, gather);
            prefetch(b, i - 1, -1);
            with_uses(b, i, grads_touch);
            int recompute = p->cfg.checkpoint && b->u[i].checkpointable;
            if (recompute) { /* the forward's activations, again */
                ckpt_fetch(b, i);
                ckpt_fetch(b, i - 1);
                ckpt_alloc(b, i + 1);
                emit(b, SZ_ACT_RECOMPUTE, i, SZ_BUF_NONE);
            }
            emit(b, SZ_ACT_BWD, i, SZ_BUF_NONE);
            with_uses(b, i, release);
            /* with a communication worker, the next unit's gradients before our reduce-scatter:
             * its backward must not wait for our communication (one unit's gradients more in
             * flight) */
            if (p->cfg.comm_worker && i > 0 && b->u[i - 1].has_backward)
                with_uses(b, i - 1, grads_touch);
            if (recompute) {
                ckpt_drop(b, i + 1);
                ckpt_drop(b, i);
            }
        }
        /* units only touch their own and earlier units' gradients: ours are complete now */
        grads_flush(b, i);
    }
    if (!p->cfg.mixed && p->cfg.stage < 2)
        memset(b->grads_live, 0, (size_t)n);
}

static void update(struct builder *b)
{
    const sz_plan *p = b->p;
    int s = p->cfg.stage, nd = p->cfg.nd, n = p->nunits;
    /* Without clipping, where each rank updates exactly its own shard, the optimizer takes the
     * shard's norm in its own pass; its tasks chain through the norms, so they go in the order the
     * gradients become final: last unit first when backward left them final (stages 2-3, or one
     * rank), unit order when the reduce-scatters below do. */
    int fused = !p->cfg.clip && (s > 0 || nd == 1);
    int last_first = fused && (s >= 2 || nd == 1);
    for (int i = 0; i < n; i++) {
        if (s < 2 && nd > 1) /* stages 0-1 on one rank: the shard is the whole gradient */
            reduce_scatter(b, i, 0, 0);
        if (s == 0 && nd > 1)
            emit(b, SZ_ACT_ALL_GATHER, i, SZ_BUF_GRAD); /* the all-reduce's second half */
        if (!fused) {
            sz_action *a = emit(b, SZ_ACT_NORM, i, SZ_BUF_GRAD);
            if (a)
                sz_plan_shard_range(p->padded[i], nd, p->cfg.rank, &a->lo, &a->n);
        }
    }
    if (!fused) {
        sz_action *a = emit(b, SZ_ACT_CLIP, -1, SZ_BUF_NONE);
        if (a)
            a->flag = 1;
    }
    for (int j = 0; j < n; j++) {
        int i = last_first ? n - 1 - j : j;
        sz_action *a = emit(b, SZ_ACT_OPTIMIZER, i, SZ_BUF_PARAM);
        if (a) {
            a->flag = fused;
            if (p->cfg.offload_optimizer)
                a->node = SZ_NODE_HOST;
            if (s > 0) /* stage 0: every rank updates everything, identically */
                sz_plan_shard_range(p->padded[i], nd, p->cfg.rank, &a->lo, &a->n);
        }
        if (s == 1 || s == 2)
            emit(b, SZ_ACT_ALL_GATHER, i, SZ_BUF_PARAM);
    }
    if (fused) /* the norm, for the report (its factor is 1) */
        emit(b, SZ_ACT_CLIP, -1, SZ_BUF_NONE);
}

/* ---- the waits: what each action reads and writes, and who last wrote or read it ------------- */

struct access {
    int id;                   /* the datum: unit * SZ_RES_UNIT_KINDS + kind, or after the units' the model's */
    unsigned char res, write, assumed;
};

struct datum {
    int writer;               /* last writer (-1: none in this plan) */
    unsigned char writer_assumed;
    int *readers;             /* readers since, with their `assumed` in reader_assumed */
    unsigned char *reader_assumed;
    int nreaders, cap;
};

/* The datum kind r of unit u names: the views and the aliases of the storage table (the shards are
 * views of the full buffers below stage 3 resp. 2; fp32 backward writes the full gradients). */
static sz_plan_res canonical(const sz_plan *p, int unit, sz_plan_res r)
{
    if (r == SZ_RES_WGRAD && (!p->cfg.mixed || (unit >= 0 && unit < p->nunits && p->rounded[unit])))
        return SZ_RES_GRAD;
    if (r == SZ_RES_PSHARD && p->cfg.stage < 3)
        return SZ_RES_PARAM;
    if (r == SZ_RES_GSHARD && p->cfg.stage < 2)
        return SZ_RES_GRAD;
    return r;
}

static void add_access(const sz_plan *p, struct access *acc, int *n, int unit, sz_plan_res r, int write, int assumed)
{
    r = canonical(p, unit, r);
    int id = r >= SZ_RES_UNIT_KINDS ? p->nunits * SZ_RES_UNIT_KINDS + (r - SZ_RES_UNIT_KINDS)
                                    : unit * SZ_RES_UNIT_KINDS + r;
    for (int k = 0; k < *n; k++)
        if (acc[k].id == id) { /* read and written: a write; definite when one of them is */
            acc[k].write |= (unsigned char)write;
            acc[k].assumed &= (unsigned char)assumed;
            return;
        }
    acc[(*n)++] = (struct access){id, (unsigned char)r, (unsigned char)write, (unsigned char)assumed};
}

/* What the action's tasks touch (tasks/step.c submits them; the model's callbacks for FWD,
 * RECOMPUTE and BWD). The parameters compute tasks read are the working copy under mixed precision. */
static int accesses_of(const sz_plan *p, const sz_plan_unit *units, const sz_action *a, struct access *acc)
{
    int n = 0, u = a->unit, s = p->cfg.stage;
    /* the working copy, except for a unit reading its bf16 parameters directly (cfg.bf16_direct) */
#define WP(i) (reads_work(&p->cfg, units[i].bf16_params) ? SZ_RES_WORK : SZ_RES_PARAM)
    const sz_plan_unit *x = u >= 0 ? &units[u] : NULL;
    switch (a->kind) {
    case SZ_ACT_GATHER:
        add_access(p, acc, &n, u, SZ_RES_PARAM, 1, 0);
        add_access(p, acc, &n, u, SZ_RES_PSHARD, 0, 0);
        break;
    case SZ_ACT_CONVERT:
        add_access(p, acc, &n, u, SZ_RES_WORK, 1, 0);
        add_access(p, acc, &n, u, SZ_RES_PARAM, 0, 0);
        break;
    case SZ_ACT_RELEASE: /* the accounting task and the invalidation: after every access */
        add_access(p, acc, &n, u, a->buf == SZ_BUF_WORK ? SZ_RES_WORK : a->buf == SZ_BUF_CKPT ? SZ_RES_CKPT : SZ_RES_PARAM,
                   1, 0);
        break;
    case SZ_ACT_CKPT_ALLOC:
        add_access(p, acc, &n, u, SZ_RES_CKPT, 1, 0);
        break;
    case SZ_ACT_CKPT_OFFLOAD:
        add_access(p, acc, &n, u, SZ_RES_CKPT, 1, 0); /* read, then invalidated */
        add_access(p, acc, &n, u, SZ_RES_CKPT_HOST, 1, 0);
        break;
    case SZ_ACT_CKPT_FETCH:
        add_access(p, acc, &n, u, SZ_RES_CKPT, 1, 0);
        add_access(p, acc, &n, u, SZ_RES_CKPT_HOST, 0, 0);
        break;
    case SZ_ACT_FWD:
    case SZ_ACT_RECOMPUTE:
    case SZ_ACT_BWD: {
        int bwd = a->kind == SZ_ACT_BWD;
        if (!bwd || !x->backward_skips_params)
            add_access(p, acc, &n, u, WP(u), 0, x->numel == 0);
        for (int k = 0; k < x->nuses; k++) {
            add_access(p, acc, &n, x->uses[k], WP(x->uses[k]), 0, 1);
            if (bwd)
                add_access(p, acc, &n, x->uses[k], SZ_RES_WGRAD, 1, 1);
        }
        if (bwd)
            add_access(p, acc, &n, u, SZ_RES_WGRAD, 1, x->numel == 0);
        /* the model's activations; a unit's checkpoint is its input, the previous unit's output */
        add_access(p, acc, &n, -1, SZ_RES_ACT, 1, 1);
        if (has_ckpt_of(p, units, u))
            add_access(p, acc, &n, u, SZ_RES_CKPT, bwd, 1);
        if (u + 1 < p->nunits && has_ckpt_of(p, units, u + 1))
            add_access(p, acc, &n, u + 1, SZ_RES_CKPT, 1, 1);
        break;
    }
    case SZ_ACT_ZERO_GRADS: /* left to the first writers: a task only where there is padding */
        add_access(p, acc, &n, u, SZ_RES_GRAD, 1, (a->flag & SZ_GRADS_FIRST_WRITERS) != 0);
        break;
    case SZ_ACT_GRAD_ALLOC: /* the rounded units' bf16 copy is their WGRAD (canonical) */
        add_access(p, acc, &n, u, SZ_RES_WGRAD, 1, 0);
        break;
    case SZ_ACT_GRAD_CONVERT:
        add_access(p, acc, &n, u, SZ_RES_GRAD, 1, 0);
        add_access(p, acc, &n, u, SZ_RES_WGRAD, 1, 0); /* read, then invalidated */
        break;
    case SZ_ACT_REDUCE_SCATTER:
        add_access(p, acc, &n, u, SZ_RES_GRAD, a->delta[SZ_MEM_GRADS_IN_FLIGHT] != 0, 0); /* the last round frees it */
        add_access(p, acc, &n, u, SZ_RES_GSHARD, 1, 0);
        break;
    case SZ_ACT_ALL_GATHER:
        add_access(p, acc, &n, u, s == 0 ? SZ_RES_GRAD : SZ_RES_PARAM, 1, 0);
        break;
    case SZ_ACT_NORM:
        add_access(p, acc, &n, -1, SZ_RES_NORMS, 1, 0);
        add_access(p, acc, &n, u, SZ_RES_GSHARD, 0, 0);
        break;
    case SZ_ACT_CLIP:
        add_access(p, acc, &n, -1, SZ_RES_CLIP, 1, 0);
        add_access(p, acc, &n, -1, SZ_RES_NORMS, 0, 0);
        break;
    case SZ_ACT_OPTIMIZER:
        add_access(p, acc, &n, u, s == 0 ? SZ_RES_PARAM : SZ_RES_PSHARD, 1, 0);
        add_access(p, acc, &n, u, s == 0 ? SZ_RES_GRAD : SZ_RES_GSHARD, 0, 0);
        add_access(p, acc, &n, u, SZ_RES_OPT, 1, 0);
        if (p->cfg.clip)
            add_access(p, acc, &n, -1, SZ_RES_CLIP, 0, 0);
        if (a->flag)
            add_access(p, acc, &n, -1, SZ_RES_NORMS, 1, 0);
        break;
    default:
        break;
    }
#undef WP
    return n;
}

static int add_wait(sz_plan *p, sz_action *a, int self, int on, unsigned char res, int assumed)
{
    if (on < 0 || on == self)
        return 0;
    int lo = 0, hi = a->nwaits; /* the action's waits are ascending: binary search (a write after
                                   many bucket rounds' reads waits for all of them) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->waits[a->wait_lo + mid].action < on)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < a->nwaits && p->waits[a->wait_lo + lo].action == on) {
        sz_wait *w = &p->waits[a->wait_lo + lo];
        if (!assumed && w->assumed)
            w->assumed = 0, w->res = res;
        return 0;
    }
    if (p->nwaits == p->waits_cap) {
        int cap = p->waits_cap ? 2 * p->waits_cap : 1024;
        sz_wait *w = realloc(p->waits, (size_t)cap * sizeof *w);
        if (!w)
            return -1;
        p->waits = w;
        p->waits_cap = cap;
    }
    /* keep one action's waits ascending */
    int at = a->wait_lo + a->nwaits;
    while (at > a->wait_lo && p->waits[at - 1].action > on) {
        p->waits[at] = p->waits[at - 1];
        at--;
    }
    p->waits[at] = (sz_wait){on, res, (unsigned char)(assumed != 0)};
    p->nwaits++;
    a->nwaits++;
    return 0;
}

/* Walks the list keeping each datum's last writer and its readers since, as the runtime does
 * with data handles under sequential consistency: a read waits for the last writer, a write also
 * for the readers since. */
static sz_status compute_waits(sz_plan *p, const sz_plan_unit *units)
{
    int maxuses = 0;
    for (int i = 0; i < p->nunits; i++)
        maxuses = units[i].nuses > maxuses ? units[i].nuses : maxuses;
    int nid = p->nunits * SZ_RES_UNIT_KINDS + (SZ_RES_NKINDS - SZ_RES_UNIT_KINDS);
    struct datum *d = calloc((size_t)nid, sizeof *d);
    struct access *acc = calloc((size_t)(8 + 2 * maxuses), sizeof *acc);
    sz_status st = d && acc ? SZ_OK : SZ_ERR_NOMEM;
    for (int i = 0; d && i < nid; i++)
        d[i].writer = -1;
    for (int k = 0; st == SZ_OK && k < p->n; k++) {
        sz_action *a = &p->a[k];
        a->wait_lo = p->nwaits;
        a->nwaits = 0;
        int na = accesses_of(p, units, a, acc);
        for (int j = 0; st == SZ_OK && j < na; j++) {
            struct datum *x = &d[acc[j].id];
            if (add_wait(p, a, k, x->writer, acc[j].res, acc[j].assumed || x->writer_assumed))
                st = SZ_ERR_NOMEM;
            for (int r = 0; acc[j].write && st == SZ_OK && r < x->nreaders; r++)
                if (add_wait(p, a, k, x->readers[r], acc[j].res, acc[j].assumed || x->reader_assumed[r]))
                    st = SZ_ERR_NOMEM;
        }
        for (int j = 0; st == SZ_OK && j < na; j++) {
            struct datum *x = &d[acc[j].id];
            if (acc[j].write) {
                x->writer = k;
                x->writer_assumed = acc[j].assumed;
                x->nreaders = 0;
                continue;
            }
            if (x->nreaders == x->cap) {
                int cap = x->cap ? 2 * x->cap : 8;
                int *r = realloc(x->readers, (size_t)cap * sizeof *r);
                unsigned char *ra = r ? realloc(x->reader_assumed, (size_t)cap) : NULL;
                if (r)
                    x->readers = r;
                if (!ra) {
                    st = SZ_ERR_NOMEM;
                    break;
                }
                x->reader_assumed = ra;
                x->cap = cap;
            }
            x->readers[x->nreaders] = k;
            x->reader_assumed[x->nreaders++] = acc[j].assumed;
        }
    }
    for (int i = 0; d && i < nid; i++) {
        free(d[i].readers);
        free(d[i].reader_assumed);
    }
    free(d);
    free(acc);
    return st;
}

unsigned char *sz_plan_closure(const sz_plan *p)
{
    size_t n = (size_t)p->n;
    unsigned char *c = calloc(n * n + 1, 1);
    if (!c)
        return NULL;
    for (size_t k = 0; k < n; k++) { /* waits point backwards: their rows are complete */
        const sz_action *a = &p->a[k];
        for (int w = 0; w < a->nwaits; w++) {
            size_t j = (size_t)p->waits[a->wait_lo + w].action;
            c[k * n + j] = 1;
            for (size_t i = 0; i < j; i++)
                c[k * n + i] |= c[j * n + i];
        }
    }
    return c;
}

int sz_plan_check_deps(const sz_plan *p, const unsigned char *dep, char *msg, size_t len)
{
    size_t n = (size_t)p->n;
    int bad = 0;
    if (msg && len)
        msg[0] = 0;
    unsigned char *c = sz_plan_closure(p), *o = calloc(n * n + 1, 1);
    if (!c || !o) {
        if (msg && len)
            snprintf(msg, len, "out of memory");
        free(c);
        free(o);
        return 1;
    }
    for (size_t k = 0; k < n; k++) /* the observed dependencies' closure */
        for (size_t j = 0; j < k; j++)
            if (dep[k * n + j]) {
                o[k * n + j] = 1;
                for (size_t i = 0; i < j; i++)
                    o[k * n + i] |= o[j * n + i];
            }
    for (size_t k = 0; k < n; k++) {
        const sz_action *a = &p->a[k];
        for (size_t j = 0; j < n; j++)
            if (dep[k * n + j] && (j >= k || !c[k * n + j]) && bad++ == 0 && msg)
                snprintf(msg, len, "action %zu (%s of unit %d) depends on action %zu (%s of unit %d), which it does not "
                         "wait for", k, sz_action_kind_name(a->kind), a->unit, j, sz_action_kind_name(p->a[j].kind),
                         p->a[j].unit);
        for (int w = 0; w < a->nwaits; w++) {
            const sz_wait *x = &p->waits[a->wait_lo + w];
            if (!x->assumed && !o[k * n + (size_t)x->action] && bad++ == 0 && msg)
                snprintf(msg, len, "action %zu (%s of unit %d) waits for action %d (%s of unit %d, %s), but its tasks do "
                         "not depend on it", k, sz_action_kind_name(a->kind), a->unit, x->action,
                         sz_action_kind_name(p->a[x->action].kind), p->a[x->action].unit,
                         sz_plan_res_name((sz_plan_res)x->res));
        }
    }
    free(c);
    free(o);
    return bad;
}

/* What the action's collective sends to the other nd - 1 ranks: their shards of a gather, their
 * pieces of a reduce-scatter round, this rank's norms to each (fp32). */
static int64_t sent_of(const sz_plan *p, const sz_action *a)
{
    int64_t peers = p->cfg.nd - 1;
    switch (a->kind) {
    case SZ_ACT_GATHER:
    case SZ_ACT_ALL_GATHER: return peers * p->shard[a->unit] * elem(p);
    case SZ_ACT_REDUCE_SCATTER: return peers * a->n * elem(p);
    case SZ_ACT_CLIP: return peers * p->nunits * 4;
    default: return 0;
    }
}

void sz_plan_free(sz_plan *p)
{
    if (!p)
        return;
    free(p->a);
    free(p->padded);
    free(p->shard);
    free(p->bf16_params);
    free(p->rounded);
    free(p->mb_begin);
    free(p->waits);
    memset(p, 0, sizeof *p);
}

sz_status sz_plan_build(const sz_plan_unit *units, int nunits, const sz_plan_config *cfg, sz_plan *out)
{
    if (!out)
        return SZ_ERR_INVALID;
    memset(out, 0, sizeof *out);
    if (!units || nunits < 1 || !cfg || cfg->stage < 0 || cfg->stage > 3 || cfg->nd < 1 || cfg->rank < 0 ||
        cfg->rank >= cfg->nd || cfg->micro_batches < 1 || cfg->prefetch_bytes < 0 || cfg->max_live_bytes < 0 ||
        cfg->bucket_elems < 0 || (cfg->offload && !cfg->checkpoint) || cfg->opt_states < 0 || cfg->opt_states > 2 ||
        (cfg->pass != SZ_PASS_STEP && cfg->pass != SZ_PASS_EVAL))
        return SZ_ERR_INVALID;
    for (int i = 0; i < nunits; i++) {
        if (units[i].numel < 0 || units[i].nuses < 0 || (units[i].nuses && !units[i].uses) || units[i].ckpt_bytes < 0)
            return SZ_ERR_INVALID;
        for (int k = 0; k < units[i].nuses; k++)
            if (units[i].uses[k] < 0 || units[i].uses[k] >= nunits)
                return SZ_ERR_INVALID;
    }
    out->cfg = *cfg;
    out->nunits = nunits;
    int nmb = cfg->pass == SZ_PASS_STEP ? cfg->micro_batches : 1;
    out->padded = calloc((size_t)nunits, sizeof *out->padded);
    out->shard = calloc((size_t)nunits, sizeof *out->shard);
    out->bf16_params = calloc((size_t)nunits, 1);
    out->rounded = calloc((size_t)nunits, 1);
    out->mb_begin = calloc((size_t)nmb + 1, sizeof *out->mb_begin);
    struct builder b = {.p = out, .u = units, .gathered = calloc((size_t)nunits, 1),
                        .grads_live = calloc((size_t)nunits, 1), .ckpt_dev = calloc((size_t)nunits, 1),
                        .used_by_bwd = calloc((size_t)nunits, 1), .tied_unrounded = calloc((size_t)nunits, 1)};
    if (!out->padded || !out->shard || !out->bf16_params || !out->rounded || !out->mb_begin || !b.gathered ||
        !b.grads_live || !b.ckpt_dev || !b.used_by_bwd || !b.tied_unrounded)
        b.st = SZ_ERR_NOMEM;
    else
        uses_index(&b);
    for (int i = 0; b.st == SZ_OK && i < nunits; i++) {
        out->padded[i] = sz_zero_padded(units[i].numel, cfg->nd);
        out->shard[i] = out->padded[i] / cfg->nd;
        out->bf16_params[i] = units[i].bf16_params != 0;
        if (out->padded[i] < 0)
            b.st = SZ_ERR_INVALID;
    }
    if (b.st == SZ_OK && actions_bound(out, nmb) > SZ_PLAN_MAX_ACTIONS)
        b.st = SZ_ERR_INVALID; /* bounded before it is built */
    for (int i = 0; b.st == SZ_OK && i < nunits; i++)
        out->rounded[i] = (char)grads_rounded(&b, i);
    for (int mb = 0; b.st == SZ_OK && mb < nmb; mb++) {
        b.mb = mb;
        out->mb_begin[mb] = out->n;
        if (cfg->pass == SZ_PASS_EVAL) {
            forward(&b, 0);
        } else {
            forward(&b, 1);
            backward(&b);
        }
    }
    if (b.st == SZ_OK) {
        out->mb_begin[nmb] = out->n;
        b.mb = -1;
        if (cfg->pass == SZ_PASS_STEP)
            update(&b);
    }
    if (b.st == SZ_OK)
        b.st = compute_waits(out, units);
    for (int k = 0; b.st == SZ_OK && k < out->n; k++)
        out->a[k].sent = sent_of(out, &out->a[k]);
    free(b.gathered);
    free(b.grads_live);
    free(b.ckpt_dev);
    free(b.used_by_bwd);
    free(b.tied_unrounded);
    if (b.st != SZ_OK)
        sz_plan_free(out);
    return b.st;
}

/* ---- the fold ------------------------------------------------------------------------------- */

void sz_plan_fold(const sz_plan *p, sz_fold *f, int64_t *live_after)
{
    memset(f, 0, sizeof *f);
    f->peak_action = -1;
    sz_plan_storage s;
    sz_plan_storage_of(p->cfg.stage, p->cfg.mixed, p->cfg.opt_states, &s);
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++) {
        for (int i = 0; i < p->nunits; i++)
            f->persistent[c] += sz_plan_unit_state(&s, c, p->padded[i], p->cfg.nd);
        f->persistent[c] += p->cfg.extra[c];
    }
    /* C_B: the reduce-scatter's receive buffer, nd rounds of bucket elements (fp32-sized) */
    if (p->cfg.nd > 1)
        f->persistent[SZ_MEM_COMM] += (int64_t)p->cfg.nd * p->cfg.bucket_elems * 4;
    int64_t live[SZ_MEM_NCATEGORIES] = {0}, total = 0;
    for (int k = 0; k < p->n; k++) {
        const sz_action *a = &p->a[k];
        for (int c = 0; c < SZ_MEM_NCATEGORIES; c++) {
            if (!a->delta[c])
                continue;
            live[c] += a->delta[c];
            total += a->delta[c];
            if (live[c] > f->transient_peak[c])
                f->transient_peak[c] = live[c];
        }
        if (total > f->transient_bytes) {
            f->transient_bytes = total;
            f->peak_action = k;
        }
        if (live_after)
            live_after[k] = total;
        f->sent_bytes += a->sent;
    }
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++) {
        f->bytes[c] = f->persistent[c] + f->transient_peak[c];
        f->persistent_bytes += f->persistent[c];
    }
    f->state_bytes = f->persistent[SZ_MEM_PARAMS] + f->persistent[SZ_MEM_PARAM_SHARD] + f->persistent[SZ_MEM_GRADS] +
                     f->persistent[SZ_MEM_GRAD_SHARD] + f->persistent[SZ_MEM_MASTER] + f->persistent[SZ_MEM_OPT_STATE0] +
                     f->persistent[SZ_MEM_OPT_STATE1];
    f->peak_bytes = f->persistent_bytes + f->transient_bytes;
    f->host_bytes = f->persistent[SZ_MEM_HOST] + f->persistent[SZ_MEM_HOST_BUFFERS];
    if (p->cfg.offload_optimizer)
        f->host_bytes += f->persistent[SZ_MEM_MASTER] + f->persistent[SZ_MEM_OPT_STATE0] + f->persistent[SZ_MEM_OPT_STATE1];
    if (p->cfg.comm_on_host)
        f->host_bytes += f->persistent[SZ_MEM_COMM];
    f->device_peak_bytes = f->peak_bytes - f->host_bytes;
}

/* ---- printing --------------------------------------------------------------------------------- */

const char *sz_action_kind_name(sz_action_kind k)
{
    static const char *names[SZ_ACT_NKINDS] = {
        "gather", "convert", "release", "ckpt_alloc", "fwd", "ckpt_offload", "ckpt_fetch", "recompute",
        "zero_grads", "grad_alloc", "bwd", "grad_convert", "reduce_scatter", "all_gather", "norm", "clip",
        "optimizer"};
    return k >= 0 && k < SZ_ACT_NKINDS ? names[k] : "?";
}

const char *sz_plan_res_name(sz_plan_res r)
{
    static const char *names[SZ_RES_NKINDS] = {"params", "work", "grads", "wgrads", "param_shard", "grad_shard",
                                               "opt_state", "ckpt", "ckpt_host", "norms", "clip", "activations"};
    return r >= 0 && r < SZ_RES_NKINDS ? names[r] : "?";
}

const char *sz_mem_category_key(int c)
{
    static const char *keys[SZ_MEM_NCATEGORIES] = {
        "params", "param_shard", "gathered", "grads", "grad_shard", "grads_in_flight", "master", "adam_m",
        "adam_v", "activations", "comm", "checkpoints", "host", "host_buffers"};
    return c >= 0 && c < SZ_MEM_NCATEGORIES ? keys[c] : "?";
}

static const char *buf_name(sz_plan_buf b)
{
    static const char *names[] = {"", "params", "work", "grads", "wgrads", "checkpoint"};
    return b >= SZ_BUF_NONE && b <= SZ_BUF_CKPT ? names[b] : "?";
}

static void unit_label(char *dst, size_t n, const char *const *names, int unit)
{
    if (unit < 0)
        snprintf(dst, n, "model");
    else if (names && names[unit])
        snprintf(dst, n, "%s", names[unit]);
    else
        snprintf(dst, n, "unit%d", unit);
}

static void print_json(FILE *f, const sz_plan *p, const char *const *names, const int64_t *live, const sz_fold *fd)
{
    cJSON *o = cJSON_CreateObject(), *c = cJSON_AddObjectToObject(o, "config");
    const sz_plan_config *g = &p->cfg;
    cJSON_AddStringToObject(c, "pass", g->pass == SZ_PASS_STEP ? "step" : "eval");
    cJSON_AddNumberToObject(c, "stage", g->stage);
    cJSON_AddNumberToObject(c, "nd", g->nd);
    cJSON_AddNumberToObject(c, "rank", g->rank);
    cJSON_AddNumberToObject(c, "micro_batches", g->micro_batches);
    cJSON_AddStringToObject(c, "precision", g->mixed ? "bf16" : "fp32");
    if (g->mixed) {
        cJSON_AddStringToObject(c, "bf16_path", g->native ? "native" : "emulated");
        /* how units with bf16_params read their parameters: directly, or fp32 working copies */
        cJSON_AddStringToObject(c, "bf16_params", g->bf16_direct ? "direct" : "working copies");
    }
    cJSON_AddBoolToObject(c, "checkpoint", g->checkpoint);
    cJSON_AddBoolToObject(c, "offload_checkpoints", g->offload);
    cJSON_AddNumberToObject(c, "prefetch_bytes", (double)g->prefetch_bytes);
    cJSON_AddNumberToObject(c, "max_live_bytes", (double)g->max_live_bytes);
    cJSON_AddNumberToObject(c, "bucket_elems", (double)g->bucket_elems);
    cJSON_AddBoolToObject(c, "comm_worker", g->comm_worker);
    cJSON_AddBoolToObject(c, "clip", g->clip);
    cJSON *arr = cJSON_AddArrayToObject(o, "actions");
    char label[64];
    for (int k = 0; k < p->n; k++) {
        const sz_action *a = &p->a[k];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "index", k);
        cJSON_AddStringToObject(x, "kind", sz_action_kind_name(a->kind));
        unit_label(label, sizeof label, names, a->unit);
        cJSON_AddStringToObject(x, "unit", label);
        cJSON_AddNumberToObject(x, "micro_batch", a->micro_batch);
        if (a->buf != SZ_BUF_NONE)
            cJSON_AddStringToObject(x, "buffer", buf_name(a->buf));
        if (a->unit >= 0) {
            cJSON_AddNumberToObject(x, "lo", (double)a->lo);
            cJSON_AddNumberToObject(x, "n", (double)a->n);
        }
        if (a->kind == SZ_ACT_REDUCE_SCATTER) {
            cJSON_AddNumberToObject(x, "round", a->round);
            cJSON_AddNumberToObject(x, "rounds", a->rounds);
        }
        if (a->kind == SZ_ACT_REDUCE_SCATTER || a->kind == SZ_ACT_GRAD_CONVERT || a->kind == SZ_ACT_CLIP ||
            a->kind == SZ_ACT_OPTIMIZER)
            cJSON_AddNumberToObject(x, "flag", a->flag);
        cJSON_AddStringToObject(x, "node", a->node == SZ_NODE_HOST ? "host" : "device");
        if (a->sent)
            cJSON_AddNumberToObject(x, "sent", (double)a->sent);
        cJSON *d = cJSON_AddObjectToObject(x, "delta");
        for (int cat = 0; cat < SZ_MEM_NCATEGORIES; cat++)
            if (a->delta[cat])
                cJSON_AddNumberToObject(d, sz_mem_category_key(cat), (double)a->delta[cat]);
        cJSON_AddNumberToObject(x, "live", (double)live[k]);
        cJSON *wa = cJSON_AddArrayToObject(x, "waits");
        for (int w = 0; w < a->nwaits; w++) {
            const sz_wait *y = &p->waits[a->wait_lo + w];
            cJSON *wo = cJSON_CreateObject();
            cJSON_AddNumberToObject(wo, "action", y->action);
            cJSON_AddStringToObject(wo, "data", sz_plan_res_name((sz_plan_res)y->res));
            if (y->assumed)
                cJSON_AddBoolToObject(wo, "assumed", 1);
            cJSON_AddItemToArray(wa, wo);
        }
        cJSON_AddItemToArray(arr, x);
    }
    cJSON *fo = cJSON_AddObjectToObject(o, "fold");
    cJSON *per = cJSON_AddObjectToObject(fo, "bytes");
    for (int cat = 0; cat < SZ_MEM_NCATEGORIES; cat++)
        cJSON_AddNumberToObject(per, sz_mem_category_key(cat), (double)fd->bytes[cat]);
    cJSON_AddNumberToObject(fo, "model_state_bytes", (double)fd->state_bytes);
    cJSON_AddNumberToObject(fo, "persistent_bytes", (double)fd->persistent_bytes);
    cJSON_AddNumberToObject(fo, "transient_peak_bytes", (double)fd->transient_bytes);
    cJSON_AddNumberToObject(fo, "peak_action", fd->peak_action);
    cJSON_AddNumberToObject(fo, "peak_bytes", (double)fd->peak_bytes);
    cJSON_AddNumberToObject(fo, "device_peak_bytes", (double)fd->device_peak_bytes);
    cJSON_AddNumberToObject(fo, "sent_bytes", (double)fd->sent_bytes);
    if (p->cfg.offload_optimizer)
        cJSON_AddNumberToObject(fo, "host_bytes", (double)fd->host_bytes);
    char *s = cJSON_PrintUnformatted(o);
    if (s)
        fprintf(f, "%s\n", s);
    free(s);
    cJSON_Delete(o);
}

void sz_plan_print(FILE *f, const sz_plan *p, const char *const *names, int json)
{
    int64_t *live = calloc((size_t)p->n + 1, sizeof *live);
    if (!live)
        return;
    sz_fold fd;
    sz_plan_fold(p, &fd, live);
    if (json) {
        print_json(f, p, names, live, &fd);
        free(live);
        return;
    }
    const sz_plan_config *g = &p->cfg;
    fprintf(f, "plan: %s, stage %d, N_d %d, rank %d, %d micro-batch%s, %s%s%s%s, prefetch %lld B, max live %lld B, "
            "bucket %lld elements%s%s; %d actions\n", g->pass == SZ_PASS_STEP ? "step" : "eval", g->stage, g->nd,
            g->rank, g->micro_batches, g->micro_batches == 1 ? "" : "es",
            g->mixed ? (g->native ? "bf16 native" : "bf16 emulated") : "fp32",
            !g->mixed ? "" : g->bf16_direct ? " (bf16 parameters read directly)" : " (fp32 working copies)",
            g->checkpoint ? ", checkpointing" : "", g->offload ? ", offloaded checkpoints" : "",
            (long long)g->prefetch_bytes, (long long)g->max_live_bytes, (long long)g->bucket_elems,
            g->comm_worker ? ", communication worker" : "", g->clip ? ", clipping" : "", p->n);
    fprintf(f, "%5s %3s %-20s %-10s %-10s %22s  %-28s %14s  %s\n", "#", "mb", "action", "unit", "buffer", "elements",
            "delta (bytes)", "live after", "waits for (* assumed of the model's callbacks)");
    char label[64], range[64], d[64];
    for (int k = 0; k < p->n; k++) {
        const sz_action *a = &p->a[k];
        unit_label(label, sizeof label, names, a->unit);
        if (a->unit >= 0)
            snprintf(range, sizeof range, "[%lld, %lld)", (long long)a->lo, (long long)(a->lo + a->n));
        else
            range[0] = 0;
        d[0] = 0;
        for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
            if (a->delta[c])
                snprintf(d, sizeof d, "%s %+lld", sz_mem_category_key(c), (long long)a->delta[c]);
        char mb[16], kind[64], waits[512];
        snprintf(mb, sizeof mb, "%d", a->micro_batch);
        if (a->kind == SZ_ACT_REDUCE_SCATTER && a->rounds > 1)
            snprintf(kind, sizeof kind, "%s %d/%d", sz_action_kind_name(a->kind), a->round + 1, a->rounds);
        else
            snprintf(kind, sizeof kind, "%s", sz_action_kind_name(a->kind));
        size_t o = 0;
        waits[0] = 0;
        for (int w = 0; w < a->nwaits && o + 16 < sizeof waits; w++) {
            const sz_wait *y = &p->waits[a->wait_lo + w];
            o += (size_t)snprintf(waits + o, sizeof waits - o, "%s%d%s", w ? "," : "", y->action, y->assumed ? "*" : "");
        }
        fprintf(f, "%5d %3s %-20s %-10s %-10s %22s  %-28s %14lld  %s%s\n", k, a->micro_batch < 0 ? "upd" : mb, kind,
                label, buf_name(a->buf), range, d, (long long)live[k], waits, k == fd.peak_action ? "  <- peak" : "");
    }
    fprintf(f, "fold: model states %lld B, persistent %lld B, transient peak %lld B (after action %d), "
            "predicted peak %lld B (device %lld B); sends %lld B\n", (long long)fd.state_bytes,
            (long long)fd.persistent_bytes, (long long)fd.transient_bytes, fd.peak_action, (long long)fd.peak_bytes,
            (long long)fd.device_peak_bytes, (long long)fd.sent_bytes);
    if (p->cfg.offload_optimizer)
        fprintf(f, "  offloaded optimizer: %lld B on the host (host pool, fp32 master, m, v), optimizer actions there\n",
                (long long)fd.host_bytes);
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
        if (fd.bytes[c])
            fprintf(f, "  %-16s %14lld B (persistent %lld, transient peak %lld)\n", sz_mem_category_key(c),
                    (long long)fd.bytes[c], (long long)fd.persistent[c], (long long)fd.transient_peak[c]);
    free(live);
}
