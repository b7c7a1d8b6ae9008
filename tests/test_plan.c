/* tests/test_plan.c — the step plan (graph/plan.c) without any runtime (built from graph/ sources
 * alone, no StarPU): on a GPT-2-shaped unit table (an embedding whose backward reads no parameter,
 * blocks, a head tied to the embedding; sizes that do not divide by 3)
 *  - stage 3 gathers every unit for its forward and for its backward, except a backward that reads
 *    no parameter (unless recomputed) and the last unit, which keeps its forward's gather; every
 *    compute action runs with its unit and tied units present, and every pass ends with nothing
 *    gathered, no gradients and no checkpoints in flight;
 *  - the fold's model states equal the ZeRO formulas (sz_zero_model_state_bytes) for the padded
 *    sizes, category by category (sz_zero_state_breakdown);
 *  - the fold's transient peak equals the prediction the engine used before the plan existed
 *    (copied below) where that one was exact, and never exceeds it elsewhere;
 *  - the prefetch window and --max-live-bytes bound what is gathered;
 *  - an offloaded optimizer (ZeRO-Offload) changes only its actions' node and where the fold counts
 *    the master, m and v (host_bytes, not the device peak);
 *  - update plans: the optimizer works on the owned shard, one reduce-scatter per unit and
 *    micro-batch at stages 2-3 (one action per bucket round), bad configurations refused;
 *  - waits: every action's waits point backwards; a compute action waits for the gather (or
 *    conversion) that made its unit's parameters present, a backward for its gradients'
 *    allocation, a recompute for its checkpoint's fetch, a release for the last reader, every
 *    reduce-scatter round for every backward writing its unit's gradients, the optimizer for its
 *    unit's reduce-scatters, the norms and the clip; sz_plan_check_deps accepts the waits
 *    themselves and refuses a dependency outside them or a wait missing from the observed ones. */
#include <stdlib.h>
#include <string.h>
#include "sz_plan.h"
#include "sz_test.h"

enum { NU = 5 };
static const int k_tied[] = {0};
/* embed, block0, block1, block2, head (uses embed) */
static sz_plan_unit units[NU] = {
    {.numel = 161, .has_backward = 1, .backward_skips_params = 1},
    {.numel = 1001, .has_backward = 1, .checkpointable = 1, .ckpt_bytes = 256},
    {.numel = 1001, .has_backward = 1, .checkpointable = 1, .ckpt_bytes = 256},
    {.numel = 1001, .has_backward = 1, .checkpointable = 1, .ckpt_bytes = 256},
    {.numel = 17, .has_backward = 1, .uses = k_tied, .nuses = 1},
};

static sz_plan_config config(int stage, int nd, int mixed)
{
    sz_plan_config c = {.pass = SZ_PASS_STEP, .stage = stage, .nd = nd, .rank = nd - 1, .micro_batches = 1,
                        .mixed = mixed, .opt_states = 2, .bucket_elems = 100};
    return c;
}

static int count(const sz_plan *p, sz_action_kind kind, int unit, int from, int to)
{
    int n = 0;
    for (int k = from; k < to; k++)
        n += p->a[k].kind == kind && p->a[k].unit == unit;
    return n;
}

static int index_of(const sz_plan *p, sz_action_kind kind, int unit)
{
    for (int k = 0; k < p->n; k++)
        if (p->a[k].kind == kind && p->a[k].unit == unit)
            return k;
    return -1;
}

/* Reduce-scatters of the unit in [from, to): their first rounds. */
static int rs_count(const sz_plan *p, int unit, int from, int to)
{
    int n = 0;
    for (int k = from; k < to; k++)
        n += p->a[k].kind == SZ_ACT_REDUCE_SCATTER && p->a[k].unit == unit && p->a[k].round == 0;
    return n;
}

static int waits_directly(const sz_plan *p, int k, int j)
{
    for (int w = 0; w < p->a[k].nwaits; w++)
        if (p->waits[p->a[k].wait_lo + w].action == j)
            return 1;
    return 0;
}

/* The last action of `kind` on `unit` before k (-1: none). */
static int last_before(const sz_plan *p, int k, sz_action_kind kind, int unit)
{
    for (int j = k - 1; j >= 0; j--)
        if (p->a[j].kind == kind && p->a[j].unit == unit)
            return j;
    return -1;
}

static int uses(int j, int u)
{
    for (int k = 0; k < units[j].nuses; k++)
        if (units[j].uses[k] == u)
            return 1;
    return 0;
}

/* The waits' structure on one plan. */
static void check_waits(const sz_plan *p)
{
    unsigned char *c = sz_plan_closure(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    size_t n = (size_t)p->n;
    int mixed = p->cfg.mixed, s = p->cfg.stage;
    for (int k = 0; k < p->n; k++) {
        const sz_action *a = &p->a[k];
        /* backwards, ascending, each once, within the pool */
        CU_ASSERT(a->wait_lo >= 0 && a->wait_lo + a->nwaits <= p->nwaits);
        for (int w = 0; w < a->nwaits; w++) {
            CU_ASSERT(p->waits[a->wait_lo + w].action < k);
            CU_ASSERT(p->waits[a->wait_lo + w].action >= 0);
            if (w)
                CU_ASSERT(p->waits[a->wait_lo + w].action > p->waits[a->wait_lo + w - 1].action);
        }
        int u = a->unit;
        int reads = a->kind == SZ_ACT_FWD || a->kind == SZ_ACT_RECOMPUTE ||
                    (a->kind == SZ_ACT_BWD && !units[u].backward_skips_params);
        /* a compute action waits for what made its parameters present: the gather at stage 3, the
         * conversion under mixed precision (which waits for the gather) */
        if (reads && (s == 3 || mixed)) {
            int src = last_before(p, k, mixed ? SZ_ACT_CONVERT : SZ_ACT_GATHER, u);
            CU_ASSERT(src >= 0 && waits_directly(p, k, src));
            if (s == 3 && mixed && src >= 0)
                CU_ASSERT(waits_directly(p, src, last_before(p, src, SZ_ACT_GATHER, u)));
            for (int t = 0; t < units[u].nuses; t++) { /* and its tied units' */
                int g = last_before(p, k, s == 3 ? SZ_ACT_GATHER : SZ_ACT_CONVERT, units[u].uses[t]);
                CU_ASSERT(g >= 0 && c[(size_t)k * n + (size_t)g]);
            }
        }
        /* a backward waits for its gradients' allocation */
        if (a->kind == SZ_ACT_BWD && (mixed || s >= 2)) {
            int g = last_before(p, k, SZ_ACT_GRAD_ALLOC, u);
            /* directly, unless a tied unit's backward wrote them since */
            CU_ASSERT(g >= p->mb_begin[a->micro_batch] && c[(size_t)k * n + (size_t)g]);
            int tied = 0;
            for (int j = 0; j < NU; j++)
                tied |= uses(j, u);
            if (g >= 0 && !tied)
                CU_ASSERT(waits_directly(p, k, g));
        }
        /* a recompute waits for its checkpoint's fetch */
        if (a->kind == SZ_ACT_RECOMPUTE && p->cfg.offload && units[u].ckpt_bytes > 0) {
            int f = last_before(p, k, SZ_ACT_CKPT_FETCH, u);
            CU_ASSERT(f >= 0 && waits_directly(p, k, f));
        }
        /* a release waits for the last compute action that read the buffer */
        if (a->kind == SZ_ACT_RELEASE && (a->buf == SZ_BUF_WORK || (a->buf == SZ_BUF_PARAM && !mixed))) {
            int last = -1;
            for (int j = k - 1; j >= 0 && last < 0; j--) {
                const sz_action *b = &p->a[j];
                if (b->kind == SZ_ACT_FWD || b->kind == SZ_ACT_RECOMPUTE || b->kind == SZ_ACT_BWD) {
                    if ((b->unit == u && (b->kind != SZ_ACT_BWD || !units[u].backward_skips_params)) || uses(b->unit, u))
                        last = j;
                }
                if ((b->kind == SZ_ACT_GATHER || b->kind == SZ_ACT_CONVERT) && b->unit == u)
                    break; /* gathered for nobody since */
            }
            if (last >= 0)
                CU_ASSERT(waits_directly(p, k, last));
        }
        /* a reduce-scatter (every round) waits for every backward that writes its unit's
         * gradients: in its micro-batch (stages 2-3), in all of them (0-1) */
        if (a->kind == SZ_ACT_REDUCE_SCATTER) {
            int from = a->micro_batch >= 0 ? p->mb_begin[a->micro_batch] : 0;
            int nb = 0;
            for (int j = from; j < k; j++)
                if (p->a[j].kind == SZ_ACT_BWD && (p->a[j].unit == u || uses(p->a[j].unit, u))) {
                    CU_ASSERT(c[(size_t)k * n + (size_t)j]);
                    nb++;
                }
            CU_ASSERT(nb >= (a->micro_batch >= 0 ? 1 : p->cfg.micro_batches));
        }
        /* the optimizer on a range waits for its unit's reduce-scatters (every round), the norms and
         * the clip */
        if (a->kind == SZ_ACT_OPTIMIZER) {
            for (int j = 0; j < k; j++) {
                const sz_action *b = &p->a[j];
                if ((b->kind == SZ_ACT_REDUCE_SCATTER && b->unit == u) ||
                    ((b->kind == SZ_ACT_NORM || b->kind == SZ_ACT_CLIP) && p->cfg.clip))
                    CU_ASSERT(c[(size_t)k * n + (size_t)j]);
                if (b->kind == SZ_ACT_BWD && (b->unit == u || uses(b->unit, u)))
                    CU_ASSERT(c[(size_t)k * n + (size_t)j]);
            }
        }
    }
    /* the check of observed dependencies: the waits themselves pass; one more dependency outside
     * their closure, or a definite wait missing from the observed ones, does not */
    unsigned char *dep = calloc(n * n + 1, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dep);
    for (size_t k = 0; k < n; k++)
        for (int w = 0; w < p->a[k].nwaits; w++)
            dep[k * n + (size_t)p->waits[p->a[k].wait_lo + w].action] = 1;
    char msg[512];
    CU_ASSERT_EQUAL(sz_plan_check_deps(p, dep, msg, sizeof msg), 0);
    int outside = -1;
    for (size_t j = 0; j + 1 < n && outside < 0; j++)
        if (!c[(n - 1) * n + j])
            outside = (int)j;
    if (outside >= 0) {
        dep[(n - 1) * n + (size_t)outside] = 1;
        CU_ASSERT(sz_plan_check_deps(p, dep, msg, sizeof msg) > 0 && strstr(msg, "does not wait for"));
        dep[(n - 1) * n + (size_t)outside] = 0;
    }
    for (size_t k = 0; k < n; k++)
        if (p->a[k].nwaits == 1 && !p->waits[p->a[k].wait_lo].assumed) {
            dep[k * n + (size_t)p->waits[p->a[k].wait_lo].action] = 0;
            CU_ASSERT(sz_plan_check_deps(p, dep, msg, sizeof msg) > 0 && strstr(msg, "do not depend"));
            break;
        }
    free(dep);
    free(c);
}

static void test_waits(void)
{
    int plans = 0;
    for (int stage = 0; stage < 4; stage++)
        for (int nd = 1; nd <= 3; nd += 2)
            for (int mixed = 0; mixed < 2; mixed++)
                for (int ck = 0; ck < 3; ck++)
                    for (int mb = 1; mb <= 2; mb++)
                        for (int v = 0; v < 2; v++) {
                            sz_plan_config c = config(stage, nd, mixed);
                            c.checkpoint = ck > 0;
                            c.offload = ck > 1;
                            c.micro_batches = mb;
                            c.clip = v;
                            c.comm_worker = v;
                            c.prefetch_bytes = v ? 6000 : 0;
                            sz_plan p;
                            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
                            check_waits(&p);
                            plans++;
                            sz_plan_free(&p);
                        }
    CU_ASSERT_EQUAL(plans, 4 * 2 * 2 * 3 * 2 * 2);
}

/* Replays the plan's state: which units' parameters are present (stage 3 gathered / mixed
 * working copy), and checks every compute action finds its unit and tied units present. */
static void check_presence(const sz_plan *p, int checkpoint)
{
    int present[NU] = {0};
    int need_gather = p->cfg.stage == 3 || p->cfg.mixed;
    if (!need_gather)
        return;
    for (int k = 0; k < p->n; k++) {
        const sz_action *a = &p->a[k];
        if (a->kind == SZ_ACT_GATHER || (a->kind == SZ_ACT_CONVERT && p->cfg.stage < 3))
            present[a->unit] = 1;
        if (a->kind == SZ_ACT_RELEASE && (a->buf == SZ_BUF_WORK || (a->buf == SZ_BUF_PARAM && !p->cfg.mixed)))
            present[a->unit] = 0;
        int reads = a->kind == SZ_ACT_FWD || a->kind == SZ_ACT_RECOMPUTE ||
                    (a->kind == SZ_ACT_BWD && !(units[a->unit].backward_skips_params &&
                                                !(checkpoint && units[a->unit].checkpointable)));
        if (reads) {
            CU_ASSERT(present[a->unit]);
            for (int j = 0; j < units[a->unit].nuses; j++)
                CU_ASSERT(present[units[a->unit].uses[j]]);
        }
    }
    for (int i = 0; i < NU; i++)
        CU_ASSERT_EQUAL(present[i], 0);
}

static void test_stage3_gathers(void)
{
    for (int ck = 0; ck < 2; ck++)
        for (int nd = 1; nd <= 4; nd++) {
            sz_plan_config c = config(3, nd, 0);
            c.checkpoint = c.offload = ck;
            sz_plan p;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
            int fwd_end = index_of(&p, SZ_ACT_FWD, NU - 1) + 1; /* the head's forward ends the pass */
            int end = p.mb_begin[1];
            /* forward: every unit once, and the tied embedding again for the head */
            CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, 0, 0, fwd_end), 2);
            for (int i = 1; i < NU; i++)
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, i, 0, fwd_end), 1);
            /* backward: the blocks again; the head keeps its forward's gather (with the embedding);
             * the embedding's own backward reads no parameter */
            for (int i = 1; i < NU - 1; i++)
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, i, fwd_end, end), 1);
            CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, NU - 1, fwd_end, end), 0);
            CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, 0, fwd_end, end), 0);
            /* each gather comes with its release, and the reduce-scatters: one per unit */
            for (int i = 0; i < NU; i++) {
                int released = 0;
                for (int k = 0; k < p.n; k++)
                    released += p.a[k].kind == SZ_ACT_RELEASE && p.a[k].unit == i && p.a[k].buf == SZ_BUF_PARAM;
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, i, 0, p.n), released);
                CU_ASSERT_EQUAL(rs_count(&p, i, 0, p.n), 1);
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_RECOMPUTE, i, 0, p.n), ck && units[i].checkpointable);
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_CKPT_OFFLOAD, i, 0, p.n), ck && units[i].ckpt_bytes > 0);
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_CKPT_FETCH, i, 0, p.n), ck && units[i].ckpt_bytes > 0);
            }
            check_presence(&p, ck);
            /* everything transient is freed by the end of the micro-batch */
            int64_t *live = calloc((size_t)p.n, sizeof *live);
            sz_fold f;
            sz_plan_fold(&p, &f, live);
            CU_ASSERT_EQUAL(live[end - 1], 0);
            CU_ASSERT(f.transient_bytes > 0);
            free(live);
            sz_plan_free(&p);
        }
    /* a recomputed unit whose backward reads no parameter is gathered for it after all */
    sz_plan_unit u2[2] = {{.numel = 10, .has_backward = 1, .backward_skips_params = 1, .checkpointable = 1},
                          {.numel = 10, .has_backward = 1}};
    for (int ck = 0; ck < 2; ck++) {
        sz_plan_config c = config(3, 2, 1);
        c.checkpoint = ck;
        sz_plan p;
        CU_ASSERT_EQUAL_FATAL(sz_plan_build(u2, 2, &c, &p), SZ_OK);
        CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, 0, 0, p.n), 1 + ck);
        CU_ASSERT_EQUAL(count(&p, SZ_ACT_CONVERT, 0, 0, p.n), 1 + ck);
        sz_plan_free(&p);
    }
}

static void test_state_formula(void)
{
    /* os: the optimizer's fp32 state floats per element (AdamW 2, SGD with momentum 1, plain SGD 0) */
    for (int os = 0; os <= 2; os++)
    for (int mixed = 0; mixed < 2; mixed++)
        for (int stage = 0; stage < 4; stage++)
            for (int nd = 1; nd <= 5; nd++) {
                sz_plan_config c = config(stage, nd, mixed);
                c.opt_states = os;
                c.extra[SZ_MEM_ACTIVATIONS] = 1000;
                sz_plan p;
                CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
                sz_fold f;
                sz_plan_fold(&p, &f, NULL);
                double psi = 0;
                for (int i = 0; i < NU; i++) {
                    psi += (double)p.padded[i];
                    CU_ASSERT_EQUAL(p.padded[i] % nd, 0);
                    CU_ASSERT(p.padded[i] - units[i].numel < nd);
                }
                CU_ASSERT_EQUAL((double)f.state_bytes, sz_zero_model_state_bytes_opt(stage, psi, nd, mixed, os));
                sz_zero_breakdown b;
                CU_ASSERT_EQUAL_FATAL(sz_zero_state_breakdown_opt(stage, psi, nd, mixed, os, &b), SZ_OK);
                CU_ASSERT((f.persistent[SZ_MEM_OPT_STATE0] > 0) == (os >= 1) && (f.persistent[SZ_MEM_OPT_STATE1] > 0) == (os >= 2));
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_PARAMS], b.params);
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_PARAM_SHARD], b.param_shard);
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_GRADS], b.grads);
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_GRAD_SHARD], b.grad_shard);
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_MASTER], b.master);
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_OPT_STATE0], b.adam_m);
                CU_ASSERT_EQUAL((double)f.persistent[SZ_MEM_OPT_STATE1], b.adam_v);
                /* the extras and the reduce-scatter buffer come on top */
                CU_ASSERT_EQUAL(f.persistent[SZ_MEM_ACTIVATIONS], 1000);
                CU_ASSERT_EQUAL(f.persistent[SZ_MEM_COMM], nd > 1 ? 4 * nd * c.bucket_elems : 0);
                CU_ASSERT_EQUAL(f.peak_bytes, f.persistent_bytes + f.transient_bytes);
                sz_plan_free(&p);
            }
    sz_plan_config c = config(1, 2, 1);
    sz_plan p;
    c.opt_states = 3; /* no optimizer keeps three */
    CU_ASSERT_EQUAL(sz_plan_build(units, NU, &c, &p), SZ_ERR_INVALID);
}

/* ---- the prediction before the plan existed (graph/zero_plan.c until the plan replaced it) ----- */

typedef struct old_unit {
    int64_t padded;
    const int *uses;
    int nuses;
    int has_backward;
    int backward_params;
} old_unit;

static int64_t old_params_bytes(const old_unit *u, int stage, int mixed)
{
    int64_t b = 0;
    if (stage == 3)
        b += u->padded * (mixed ? 2 : 4);
    if (mixed)
        b += u->padded * 4;
    return b;
}

static int64_t old_with_uses(const old_unit *units, int i, int stage, int mixed)
{
    int64_t b = old_params_bytes(&units[i], stage, mixed);
    for (int k = 0; k < units[i].nuses; k++)
        if (units[i].uses[k] != i)
            b += old_params_bytes(&units[units[i].uses[k]], stage, mixed);
    return b;
}

static int64_t old_transient_peak(const old_unit *units, int n, int stage, int mixed, int64_t prefetch_bytes,
                                  int early_grads)
{
    int per_unit_grads = mixed || stage >= 2;
    char live[NU] = {0};
    int64_t peak = 0, grads = 0;
    for (int i = 0; i < n; i++) {
        int64_t b = old_with_uses(units, i, stage, mixed) + (stage == 3 ? prefetch_bytes : 0);
        peak = b > peak ? b : peak;
    }
    for (int i = n - 1; i >= 0; i--) {
        for (int j = i; j >= (early_grads ? i - 1 : i) && j >= 0 && per_unit_grads; j--) {
            if (!units[j].has_backward)
                continue;
            if (!live[j]) {
                live[j] = 1;
                grads += units[j].padded * 4;
            }
            for (int k = 0; k < units[j].nuses; k++) {
                int v = units[j].uses[k];
                if (!live[v]) {
                    live[v] = 1;
                    grads += units[v].padded * 4;
                }
            }
        }
        int64_t b = (units[i].has_backward ? (units[i].backward_params ? old_with_uses(units, i, stage, mixed) : 0) +
                                                 (stage == 3 ? prefetch_bytes : 0)
                                           : 0)
                    + grads + (mixed && stage >= 2 ? units[i].padded * 2 : 0);
        peak = b > peak ? b : peak;
        if (live[i]) {
            live[i] = 0;
            grads -= units[i].padded * 4;
        }
    }
    return peak;
}

static void test_old_prediction(void)
{
    for (int mixed = 0; mixed < 2; mixed++)
        for (int stage = 0; stage < 4; stage++)
            for (int nd = 1; nd <= 4; nd++)
                for (int cw = 0; cw < 2; cw++)
                    for (int pf = 0; pf < 2; pf++) {
                        sz_plan_config c = config(stage, nd, mixed);
                        c.comm_worker = cw;
                        c.prefetch_bytes = pf ? 9000 : 0;
                        sz_plan p;
                        CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
                        sz_fold f;
                        sz_plan_fold(&p, &f, NULL);
                        old_unit ou[NU];
                        for (int i = 0; i < NU; i++)
                            ou[i] = (old_unit){p.padded[i], units[i].uses, units[i].nuses, 1,
                                               !units[i].backward_skips_params};
                        int64_t old = old_transient_peak(ou, NU, stage, mixed, c.prefetch_bytes, cw);
                        /* the old walk was exact for fp32 without a prefetch window or a
                         * communication worker; elsewhere it added whole windows and copies that
                         * are never alive together: an upper bound */
                        if (!mixed && !cw && !(pf && stage == 3))
                            CU_ASSERT_EQUAL(f.transient_bytes, old);
                        CU_ASSERT(f.transient_bytes <= old);
                        sz_plan_free(&p);
                    }
}

static void test_prefetch_window(void)
{
    for (int64_t window = 0; window <= 20000; window += 4000)
        for (int64_t max_live = 0; max_live <= 12000; max_live += 6000) {
            sz_plan_config c = config(3, 1, 0);
            c.prefetch_bytes = window;
            c.max_live_bytes = max_live;
            sz_plan p;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
            int64_t *live = calloc((size_t)p.n, sizeof *live);
            sz_fold f;
            sz_plan_fold(&p, &f, live);
            /* gathered bytes never exceed the unit computing + its tied units + the window, nor
             * (when it is set and the window had to respect it) max_live */
            int64_t biggest = 0;
            for (int i = 0; i < NU; i++) {
                int64_t b = sz_plan_params_bytes(&p, i);
                for (int k = 0; k < units[i].nuses; k++)
                    b += sz_plan_params_bytes(&p, units[i].uses[k]);
                biggest = b > biggest ? b : biggest;
            }
            CU_ASSERT(f.transient_peak[SZ_MEM_GATHERED] <= biggest + window);
            if (max_live >= biggest)
                CU_ASSERT(f.transient_peak[SZ_MEM_GATHERED] <= max_live);
            if (window == 0)
                CU_ASSERT_EQUAL(f.transient_peak[SZ_MEM_GATHERED], biggest);
            /* the same gathers, only earlier: one per unit and pass as without the window */
            sz_plan_config c0 = config(3, 1, 0);
            sz_plan p0;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c0, &p0), SZ_OK);
            for (int i = 0; i < NU; i++)
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_GATHER, i, 0, p.n), count(&p0, SZ_ACT_GATHER, i, 0, p0.n));
            check_presence(&p, 0);
            free(live);
            sz_plan_free(&p);
            sz_plan_free(&p0);
        }
}

static void test_update(void)
{
    for (int stage = 0; stage < 4; stage++)
        for (int clip = 0; clip < 2; clip++) {
            sz_plan_config c = config(stage, 3, 0);
            c.micro_batches = 2;
            c.clip = clip;
            sz_plan p;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
            int upd = p.mb_begin[2];
            CU_ASSERT(p.mb_begin[0] == 0 && p.mb_begin[1] > 0 && p.mb_begin[2] > p.mb_begin[1]);
            for (int i = 0; i < NU; i++) {
                int k = index_of(&p, SZ_ACT_OPTIMIZER, i);
                CU_ASSERT_FATAL(k >= upd);
                CU_ASSERT_EQUAL(p.a[k].micro_batch, -1);
                CU_ASSERT_EQUAL(p.a[k].lo, stage ? 2 * p.shard[i] : 0);
                CU_ASSERT_EQUAL(p.a[k].n, stage ? p.shard[i] : p.padded[i]);
                /* reduce-scatters: every micro-batch at 2-3 (the second accumulating), once at 0-1 */
                CU_ASSERT_EQUAL(rs_count(&p, i, 0, upd), stage >= 2 ? 2 : 0);
                CU_ASSERT_EQUAL(rs_count(&p, i, upd, p.n), stage < 2 ? 1 : 0);
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_ALL_GATHER, i, upd, p.n), stage < 3 ? 1 : 0);
                /* without clipping the optimizer takes the norms itself where ranks own shards */
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_NORM, i, upd, p.n), clip || stage == 0);
                CU_ASSERT_EQUAL(p.a[k].flag, !clip && stage > 0);
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_ZERO_GRADS, i, 0, p.n), stage < 2);
            }
            CU_ASSERT_EQUAL(count(&p, SZ_ACT_CLIP, -1, upd, p.n), 1);
            /* one action per bucket round (100 elements): together they cover the shard once, the
             * last one frees the full-size gradients (stages 2-3) */
            int rs = index_of(&p, SZ_ACT_REDUCE_SCATTER, 1);
            CU_ASSERT_EQUAL(p.a[rs].rounds, (int)((p.shard[1] + 99) / 100));
            CU_ASSERT(p.a[rs].rounds > 1);
            for (int r = 0; r < p.a[rs].rounds; r++) {
                const sz_action *a = &p.a[rs + r];
                CU_ASSERT_EQUAL(a->kind, SZ_ACT_REDUCE_SCATTER);
                CU_ASSERT_EQUAL(a->round, r);
                CU_ASSERT_EQUAL(a->lo, 2 * p.shard[1] + 100 * r);
                CU_ASSERT_EQUAL(a->n, r < a->rounds - 1 ? 100 : p.shard[1] - 100 * r);
                CU_ASSERT_EQUAL(a->delta[SZ_MEM_GRADS_IN_FLIGHT] != 0, stage >= 2 && r == a->rounds - 1);
                CU_ASSERT_EQUAL(a->sent, 2 * a->n * 4); /* to each of the other 2 ranks, fp32 */
            }
            /* the fold's bytes sent: every reduce-scatter round and gather, and the norms */
            sz_fold sf;
            sz_plan_fold(&p, &sf, NULL);
            int64_t want = 0;
            for (int i = 0; i < NU; i++) /* 2 micro-batches of reduce-scatters at 2-3, one at 0-1 */
                want += 2 * p.shard[i] * 4 * ((stage >= 2 ? 2 : 1) + (stage == 0 || stage == 1 || stage == 2));
            want += 2 * NU * 4; /* the clip's (or the report's) norms */
            for (int k = 0; k < p.n; k++)
                if (p.a[k].kind == SZ_ACT_GATHER)
                    want += 2 * p.shard[p.a[k].unit] * 4;
            CU_ASSERT_EQUAL(sf.sent_bytes, want);
            sz_plan_free(&p);
        }
    /* eval: one forward, everything released */
    sz_plan_config c = config(3, 2, 1);
    c.pass = SZ_PASS_EVAL;
    sz_plan p;
    CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
    CU_ASSERT_EQUAL(count(&p, SZ_ACT_BWD, 1, 0, p.n), 0);
    CU_ASSERT_EQUAL(count(&p, SZ_ACT_RELEASE, NU - 1, 0, p.n), 2); /* the bf16 gathered copy, the fp32 one */
    CU_ASSERT_EQUAL(p.a[index_of(&p, SZ_ACT_FWD, NU - 1) + 1].kind, SZ_ACT_RELEASE);
    int64_t *live = calloc((size_t)p.n, sizeof *live);
    sz_fold f;
    sz_plan_fold(&p, &f, live);
    CU_ASSERT_EQUAL(live[p.n - 1], 0);
    free(live);
    sz_plan_free(&p);
}

/* Mixed precision, stages 0-1: the full bf16 gradients are written whole by the first micro-batch's
 * GRAD_CONVERT (mode onto zeros), later ones add into them; no ZERO_GRADS for a unit whose
 * gradients a convert writes, one for a unit whose gradients nothing writes (here: a unit without
 * a backward, not used by any); stages 2-3 convert into a fresh copy (set). */
static void test_mixed_grads(void)
{
    sz_plan_unit u[NU + 1];
    memcpy(u, units, sizeof units);
    u[NU] = (sz_plan_unit){.numel = 33}; /* no backward, no user */
    for (int stage = 0; stage < 4; stage++)
        for (int mixed = 0; mixed < 2; mixed++) {
            sz_plan_config c = config(stage, 3, mixed);
            c.micro_batches = 2;
            sz_plan p;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(u, NU + 1, &c, &p), SZ_OK);
            for (int i = 0; i <= NU; i++) {
                int zeroed = count(&p, SZ_ACT_ZERO_GRADS, i, 0, p.n);
                CU_ASSERT_EQUAL(zeroed, stage < 2 && (!mixed || i == NU));
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_GRAD_CONVERT, i, 0, p.n), mixed && i < NU ? 2 : 0);
                for (int k = 0; k < p.n; k++)
                    if (p.a[k].kind == SZ_ACT_GRAD_CONVERT && p.a[k].unit == i)
                        CU_ASSERT_EQUAL(p.a[k].flag, stage >= 2              ? SZ_CONVERT_SET
                                                     : p.a[k].micro_batch == 0 ? SZ_CONVERT_ONTO_ZEROS
                                                                               : SZ_CONVERT_ADD);
            }
            sz_plan_free(&p);
        }
}

/* fold_round: the GRAD_CONVERT of a unit whose writers round into its bf16 gradients (round_grads,
 * no other unit's backward writing them: unit 0, tied to unit 4, keeps its convert) disappears with
 * its fp32 working gradients. Stages 0-1: the first micro-batch's ZERO_GRADS (FIRST_WRITERS |
 * ROUNDED) and nothing else; stages 2-3: a GRAD_ALLOC of the bf16 copy (padded * 2) per micro-batch,
 * freed by the last reduce-scatter round. The backward waits for that allocation / zeroing, the
 * reduce-scatter for the backward; the gradients in flight fall from 4 to 2 bytes per element (0 at
 * stages 0-1); off without mixed precision, without fold_grads or without the flag. */
static void test_round_grads(void)
{
    sz_plan_unit u[NU];
    memcpy(u, units, sizeof units);
    for (int i = 0; i < NU; i++)
        u[i].round_grads = 1;
    for (int stage = 0; stage < 4; stage++)
        for (int micro = 1; micro <= 2; micro++)
            for (int variant = 0; variant < 4; variant++) { /* plain, comm worker, checkpointing, offload */
                sz_plan_config c = config(stage, 3, 1);
                c.micro_batches = micro;
                c.fold_grads = 1;
                c.comm_worker = variant == 1;
                c.checkpoint = variant >= 2;
                c.offload = variant == 3;
                sz_plan a, b;
                CU_ASSERT_EQUAL_FATAL(sz_plan_build(u, NU, &c, &a), SZ_OK);
                c.fold_round = 1;
                CU_ASSERT_EQUAL_FATAL(sz_plan_build(u, NU, &c, &b), SZ_OK);
                for (int i = 0; i < NU; i++) {
                    int r = i != 0;
                    CU_ASSERT_EQUAL(a.rounded[i], 0);
                    CU_ASSERT_EQUAL(b.rounded[i], r);
                    CU_ASSERT_EQUAL(count(&a, SZ_ACT_GRAD_CONVERT, i, 0, a.n), micro);
                    CU_ASSERT_EQUAL(count(&b, SZ_ACT_GRAD_CONVERT, i, 0, b.n), r ? 0 : micro);
                    CU_ASSERT_EQUAL(count(&b, SZ_ACT_GRAD_ALLOC, i, 0, b.n), micro * (stage >= 2 || !r));
                    CU_ASSERT_EQUAL(count(&b, SZ_ACT_ZERO_GRADS, i, 0, b.n), stage < 2 && r);
                    int64_t inflight = 0;
                    for (int k = 0; k < b.n; k++) {
                        const sz_action *x = &b.a[k];
                        if (x->unit != i)
                            continue;
                        inflight += x->delta[SZ_MEM_GRADS_IN_FLIGHT];
                        if (!r)
                            continue;
                        if (x->kind == SZ_ACT_ZERO_GRADS) {
                            CU_ASSERT_EQUAL(x->flag, SZ_GRADS_FIRST_WRITERS | SZ_GRADS_ROUNDED);
                            CU_ASSERT_EQUAL(x->micro_batch, 0);
                            CU_ASSERT_EQUAL(x->buf, SZ_BUF_GRAD);
                        }
                        if (x->kind == SZ_ACT_GRAD_ALLOC) {
                            CU_ASSERT_EQUAL(x->flag, SZ_GRADS_FIRST_WRITERS | SZ_GRADS_ROUNDED);
                            CU_ASSERT_EQUAL(x->buf, SZ_BUF_GRAD);
                            CU_ASSERT_EQUAL(x->delta[SZ_MEM_GRADS_IN_FLIGHT], b.padded[i] * 2);
                        }
                        if (x->kind == SZ_ACT_REDUCE_SCATTER && x->round == x->rounds - 1 && stage >= 2)
                            CU_ASSERT_EQUAL(x->delta[SZ_MEM_GRADS_IN_FLIGHT], -b.padded[i] * 2);
                        if (x->kind == SZ_ACT_BWD) { /* waits for its gradients' allocation or zeroing */
                            int j = -1;
                            for (int q = 0; q < k; q++)
                                if (b.a[q].unit == i && b.a[q].micro_batch == x->micro_batch &&
                                    (b.a[q].kind == SZ_ACT_GRAD_ALLOC || b.a[q].kind == SZ_ACT_ZERO_GRADS))
                                    j = q;
                            if (j >= 0) {
                                CU_ASSERT(waits_directly(&b, k, j));
                            } else {
                                CU_ASSERT(stage < 2 && x->micro_batch > 0);
                            }
                        }
                    }
                    CU_ASSERT_EQUAL(inflight, 0);
                }
                sz_fold fa, fb;
                sz_plan_fold(&a, &fa, NULL);
                sz_plan_fold(&b, &fb, NULL);
                if (variant == 0) { /* one unit's gradients at a time, beside unit 0's (from unit 4's backward on) */
                    int64_t want_a = 4 * a.padded[1] + 4 * a.padded[0],
                            want_b = (stage >= 2 ? 2 * b.padded[1] : 0) + 4 * b.padded[0];
                    CU_ASSERT_EQUAL(fa.transient_peak[SZ_MEM_GRADS_IN_FLIGHT], want_a);
                    CU_ASSERT_EQUAL(fb.transient_peak[SZ_MEM_GRADS_IN_FLIGHT], want_b);
                }
                CU_ASSERT(fb.peak_bytes < fa.peak_bytes);
                CU_ASSERT_EQUAL(fb.persistent_bytes, fa.persistent_bytes);
                sz_plan_free(&a);
                sz_plan_free(&b);
            }
    /* off: fp32, no fold_grads, no unit flag */
    for (int k = 0; k < 3; k++) {
        sz_plan_config c = config(2, 3, k != 0);
        c.fold_round = 1;
        c.fold_grads = k != 1;
        sz_plan p;
        CU_ASSERT_EQUAL_FATAL(sz_plan_build(k == 2 ? units : u, NU, &c, &p), SZ_OK);
        for (int i = 0; i < NU; i++)
            CU_ASSERT_EQUAL(p.rounded[i], 0);
        sz_plan_free(&p);
    }
}

/* ZeRO-Offload: the same actions and the same fold, but every optimizer action on the host node
 * and the master, m and v counted on the host (host_bytes), out of the device peak. */
static void test_offload_optimizer(void)
{
    for (int stage = 0; stage < 4; stage++)
        for (int mixed = 0; mixed < 2; mixed++) {
            sz_plan_config c = config(stage, 3, mixed);
            c.extra[SZ_MEM_HOST] = 1000; /* a host pool beside */
            sz_plan p, q;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
            c.offload_optimizer = 1;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &q), SZ_OK);
            CU_ASSERT_EQUAL_FATAL(p.n, q.n);
            for (int k = 0; k < p.n; k++) {
                CU_ASSERT_EQUAL(p.a[k].kind, q.a[k].kind);
                CU_ASSERT_EQUAL(p.a[k].node, SZ_NODE_DEVICE);
                CU_ASSERT_EQUAL(q.a[k].node, q.a[k].kind == SZ_ACT_OPTIMIZER ? SZ_NODE_HOST : SZ_NODE_DEVICE);
                CU_ASSERT_EQUAL(memcmp(p.a[k].delta, q.a[k].delta, sizeof p.a[k].delta), 0);
            }
            sz_fold f, g;
            sz_plan_fold(&p, &f, NULL);
            sz_plan_fold(&q, &g, NULL);
            int64_t opt = g.persistent[SZ_MEM_MASTER] + g.persistent[SZ_MEM_OPT_STATE0] + g.persistent[SZ_MEM_OPT_STATE1];
            CU_ASSERT(opt > 0);
            CU_ASSERT_EQUAL(f.peak_bytes, g.peak_bytes);
            CU_ASSERT_EQUAL(f.host_bytes, 1000);
            CU_ASSERT_EQUAL(f.device_peak_bytes, f.peak_bytes - 1000);
            CU_ASSERT_EQUAL(g.host_bytes, 1000 + opt);
            CU_ASSERT_EQUAL(g.device_peak_bytes, g.peak_bytes - 1000 - opt);
            /* the host-copy collectives with CUDA workers: the communication buffer on the host */
            sz_plan r;
            c.comm_on_host = 1;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &r), SZ_OK);
            sz_fold h;
            sz_plan_fold(&r, &h, NULL);
            CU_ASSERT_EQUAL(h.peak_bytes, g.peak_bytes);
            CU_ASSERT_EQUAL(h.host_bytes, 1000 + opt + g.persistent[SZ_MEM_COMM]);
            CU_ASSERT_EQUAL(h.device_peak_bytes, g.device_peak_bytes - g.persistent[SZ_MEM_COMM]);
            CU_ASSERT(g.persistent[SZ_MEM_COMM] > 0); /* N_d 3 */
            sz_plan_free(&r);
            sz_plan_free(&p);
            sz_plan_free(&q);
        }
}

static void test_invalid(void)
{
    sz_plan p;
    sz_plan_config c = config(4, 2, 0);
    CU_ASSERT_EQUAL(sz_plan_build(units, NU, &c, &p), SZ_ERR_INVALID);
    c = config(1, 2, 0);
    c.rank = 2;
    CU_ASSERT_EQUAL(sz_plan_build(units, NU, &c, &p), SZ_ERR_INVALID);
    c = config(1, 2, 0);
    c.offload = 1;
    CU_ASSERT_EQUAL(sz_plan_build(units, NU, &c, &p), SZ_ERR_INVALID);
    sz_plan_unit bad[2] = {{.numel = 4, .has_backward = 1}, {.numel = 4, .uses = (const int[]){5}, .nuses = 1}};
    c = config(1, 2, 0);
    CU_ASSERT_EQUAL(sz_plan_build(bad, 2, &c, &p), SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(sz_plan_build(units, 0, &c, &p), SZ_ERR_INVALID);
    CU_ASSERT_EQUAL(sz_zero_padded(0, 3), 3);
    CU_ASSERT_EQUAL(sz_zero_padded(10, 3), 12);
    int64_t lo, n;
    sz_plan_shard_range(12, 3, 2, &lo, &n);
    CU_ASSERT(lo == 8 && n == 4);
    /* a plan of more than SZ_PLAN_MAX_ACTIONS actions is refused before it is built: a shard of 10^12
     * elements in one-element bucket rounds, and 10^6 units */
    sz_plan_unit huge[2] = {{.numel = 2000000000000LL, .has_backward = 1}, {.numel = 4, .has_backward = 1}};
    c = config(2, 2, 0);
    c.bucket_elems = 1;
    CU_ASSERT_EQUAL(sz_plan_build(huge, 2, &c, &p), SZ_ERR_INVALID);
    int many = 1000000;
    sz_plan_unit *u = calloc((size_t)many, sizeof *u);
    CU_ASSERT_FATAL(u != NULL);
    for (int i = 0; i < many; i++)
        u[i] = (sz_plan_unit){.numel = 8, .has_backward = 1};
    c = config(3, 2, 0);
    CU_ASSERT_EQUAL(sz_plan_build(u, many, &c, &p), SZ_ERR_INVALID);
    /* below the bound, many units and many bucket rounds still build (in time linear in them) */
    c.bucket_elems = 1;
    u[0].numel = 400000;
    CU_ASSERT_EQUAL_FATAL(sz_plan_build(u, 20000, &c, &p), SZ_OK);
    int rs = 0;
    for (int k = 0; k < p.n; k++)
        rs += p.a[k].kind == SZ_ACT_REDUCE_SCATTER && p.a[k].unit == 0;
    CU_ASSERT_EQUAL(rs, 200000); /* unit 0's shard, one element per round */
    sz_plan_free(&p);
    free(u);
}

/* Mixed precision, bf16_direct: a unit with bf16_params reads the bf16 parameters (stage 3: the
 * gathered copy) — no CONVERT, no working copy in the prefetch window's bytes, its compute waits for
 * the gather itself; a unit without bf16_params (the head here, a user's fp32-only op) keeps its
 * working copy (but reads the tied embedding's bf16 parameters, whose unit takes them); bf16_direct
 * 0 gives every unit working copies. The fold's gathered bytes fall by the copies. */
static void test_bf16_direct(void)
{
    sz_plan_unit u[NU];
    memcpy(u, units, sizeof u);
    for (int i = 0; i < NU - 1; i++)
        u[i].bf16_params = 1;
    for (int stage = 0; stage < 4; stage += 3) {
        int64_t gathered[2];
        for (int direct = 0; direct < 2; direct++) {
            sz_plan_config c = config(stage, 2, 1);
            c.bf16_direct = direct;
            sz_plan p;
            CU_ASSERT_EQUAL_FATAL(sz_plan_build(u, NU, &c, &p), SZ_OK);
            for (int i = 0; i < NU; i++) {
                int work = !(direct && u[i].bf16_params);
                CU_ASSERT_EQUAL(count(&p, SZ_ACT_CONVERT, i, 0, p.n) > 0, work);
                CU_ASSERT_EQUAL(sz_plan_params_bytes(&p, i),
                                (stage == 3 ? p.padded[i] * 2 : 0) + (work ? p.padded[i] * 4 : 0));
            }
            if (stage == 3 && direct) { /* block1's forward waits for its gather: the bf16 parameters */
                int g = index_of(&p, SZ_ACT_GATHER, 2), f = index_of(&p, SZ_ACT_FWD, 2), found = 0;
                for (int w = 0; w < p.a[f].nwaits; w++) {
                    const sz_wait *y = &p.waits[p.a[f].wait_lo + w];
                    found |= y->action == g && y->res == SZ_RES_PARAM;
                    CU_ASSERT(y->res != SZ_RES_WORK);
                }
                CU_ASSERT(found);
            }
            sz_fold f;
            sz_plan_fold(&p, &f, NULL);
            gathered[direct] = f.bytes[SZ_MEM_GATHERED];
            char *buf = NULL;
            size_t len = 0;
            FILE *mf = open_memstream(&buf, &len);
            sz_plan_print(mf, &p, NULL, 0);
            sz_plan_print(mf, &p, NULL, 1);
            fclose(mf);
            CU_ASSERT_PTR_NOT_NULL(strstr(buf, direct ? "(bf16 parameters read directly)" : "(fp32 working copies)"));
            CU_ASSERT_PTR_NOT_NULL(strstr(buf, direct ? "\"bf16_params\":\"direct\"" : "\"bf16_params\":\"working copies\""));
            free(buf);
            sz_plan_free(&p);
        }
        CU_ASSERT(gathered[1] < gathered[0]);
    }
}

/* The printed plan: one line per action, and JSON whose action count matches. */
static void test_print(void)
{
    sz_plan_config c = config(3, 2, 1);
    c.checkpoint = c.offload = 1;
    sz_plan p;
    CU_ASSERT_EQUAL_FATAL(sz_plan_build(units, NU, &c, &p), SZ_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const char *names[NU] = {"embed", "block0", "block1", "block2", "head"};
    sz_plan_print(f, &p, names, 0);
    fclose(f);
    int lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    CU_ASSERT(lines >= p.n + 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "ckpt_offload"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "block1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "<- peak"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "reduce_scatter 1/")); /* 100-element buckets: several rounds */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "waits for"));
    free(buf);
    f = open_memstream(&buf, &len);
    sz_plan_print(f, &p, names, 1);
    fclose(f);
    int kinds = 0;
    for (char *s = buf; (s = strstr(s, "\"kind\"")); s++)
        kinds++;
    CU_ASSERT_EQUAL(kinds, p.n);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"peak_bytes\""));
    /* every action's waits, a reduce-scatter's round, the bytes sent */
    int waits = 0;
    for (char *s = buf; (s = strstr(s, "\"waits\"")); s++)
        waits++;
    CU_ASSERT_EQUAL(waits, p.n);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"round\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"assumed\":true"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"sent_bytes\""));
    free(buf);
    sz_plan_free(&p);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("plan",
             {"stage 3: gathered for forward and backward, except where the plan says", test_stage3_gathers},
             {"fold: model states equal the ZeRO formulas (padded)", test_state_formula},
             {"fold: transient peak against the old prediction", test_old_prediction},
             {"prefetch window and max live bytes", test_prefetch_window},
             {"update and eval plans", test_update},
             {"mixed precision: the first gradient conversion writes, no zeroing before it", test_mixed_grads},
             {"mixed precision: rounding folded into the gradients' writers (fold_round)", test_round_grads},
             {"offloaded optimizer: host node, host bytes out of the device peak", test_offload_optimizer},
             {"waits: backwards, gathers before compute, reduce-scatters after their backwards", test_waits},
             {"bad configurations", test_invalid},
             {"mixed precision: units read bf16 parameters directly (bf16_direct)", test_bf16_direct},
             {"printing", test_print});
    return sz_test_run();
}
