/* sched/policy.c — the `zero` StarPU scheduling policy, StarZeRO's default (a user's STARPU_SCHED
 * still wins, as StarPU users expect). One central queue of ready tasks, taken in plan order:
 * task->sched_data carries the task's class, plan position and unit (sched/sz_sched.h). The
 * position is the index of the plan action that submitted the task (graph/plan.c's list, walked by
 * tasks/step.c) in its high bits and the task's rank among that action's tasks in its low 16 bits,
 * so keys order tasks by action first, then by submission within an action. Ties keep arrival
 * order. Workers are woken on push and sleep when the queue is empty. With a
 * communication worker (sz_comm_worker) it alone takes the communication tasks, so a gather or a
 * reduce-scatter runs while the other workers compute.
 * With CUDA workers, a task a CUDA worker can run is left to the CUDA workers (compute runs on the
 * GPU; a CPU worker takes only what has no CUDA implementation or is restricted to the CPU, e.g.
 * the optimizer under --offload-optimizer); with a communication worker the collectives stay its
 * own, except those a CUDA worker runs itself (NCCL). Without CUDA workers nothing of this applies.
 * It also records when communication and compute tasks ran, for the overlap figure (the fraction
 * of communication time during which compute was running too); so do the measured copies of
 * StarPU's own policies (sz_sched_measured_policy), so the figure compares across policies.
 * (The budget is checked against the plan's fold before the first step, tasks/model.c; the gather
 * window is part of the plan itself, graph/plan.c.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include <starpu_scheduler.h>
#include "sz_sched.h"

struct node {
    struct starpu_task *task;
    uint64_t key;
    struct node *next;
};

/* Execution intervals of the current step (see sz_sched_overlap): communication and compute. */
struct span {
    int64_t t0, t1;
};
struct spans {
    struct span *v;
    int n, cap;
};

struct queue {
    starpu_pthread_mutex_t lock;
    struct node *head;
    uint64_t seq;
    int n;
    int cuda_worker, cuda_known;         /* a CUDA worker of the context (-1: none), once looked up */
};

/* What ran when, for sz_sched_overlap, whichever policy runs the tasks: `zero` records through its
 * own hooks, StarPU's policies through the copies sz_sched_measured_policy makes of them. */
static struct {
    starpu_pthread_mutex_t lock;
    int on;               /* a recording policy is in effect */
    struct spans comm, compute;
    int64_t matmul_ns; /* matmul tasks' run time (with the GELU-fused ones) since the last sz_sched_overlap */
    int64_t optimizer_ns; /* optimizer tasks' run time, the same way */
    int64_t convert_ns;   /* fp32 <-> bf16 conversion tasks' (working copies, gradient rounding) */
    int64_t zero_ns;      /* zeroing tasks' */
    int ncl;              /* every codelet's run time and task count, the same way (the first 64 seen) */
    struct {
        const struct starpu_codelet *cl;
        int64_t ns;
        int tasks;
    } cl[64];
    int64_t started[STARPU_NMAXWORKERS]; /* when each worker's current task began */
} meter = {.lock = STARPU_PTHREAD_MUTEX_INITIALIZER};

int sz_comm_worker = -1;

int sz_task_is_comm(const struct starpu_task *t) { return sz_class_is_comm(sz_task_class_of(t)); }

/* Smaller keys first: plan position (action index, then the task's rank in its action), then
 * arrival. (A rank's only worker taking a ready collective
 * ahead of its turn would sit in it waiting for slower peers while compute it could do waits; with
 * a communication worker, that worker sees only the collectives, so plan order serves it too.) */
static uint64_t key_of(struct starpu_task *t, uint64_t seq)
{
    uint64_t pos = sz_sched_position(t);
    return (pos & ((1ULL << 40) - 1)) << 20 | (seq & ((1ULL << 20) - 1));
}

static void meter_start(void)
{
    STARPU_PTHREAD_MUTEX_LOCK(&meter.lock);
    meter.comm.n = meter.compute.n = 0;
    meter.matmul_ns = meter.optimizer_ns = meter.convert_ns = meter.zero_ns = 0;
    meter.ncl = 0;
    memset(meter.started, 0, sizeof meter.started);
    meter.on = 1;
    STARPU_PTHREAD_MUTEX_UNLOCK(&meter.lock);
}

static void meter_stop(void)
{
    STARPU_PTHREAD_MUTEX_LOCK(&meter.lock);
    meter.on = 0;
    free(meter.comm.v);
    free(meter.compute.v);
    meter.comm = meter.compute = (struct spans){0};
    STARPU_PTHREAD_MUTEX_UNLOCK(&meter.lock);
}

static void zero_init(unsigned ctx)
{
    struct queue *q = calloc(1, sizeof *q);
    STARPU_PTHREAD_MUTEX_INIT(&q->lock, NULL);
    starpu_sched_ctx_set_policy_data(ctx, q);
    meter_start();
}

static void zero_deinit(unsigned ctx)
{
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    STARPU_PTHREAD_MUTEX_DESTROY(&q->lock);
    free(q);
    meter_stop();
}

/* ---- overlap: how much communication ran while compute ran --------------------------------- */

static void meter_pre_exec(struct starpu_task *task, unsigned ctx)
{
    (void)task, (void)ctx;
    int w = starpu_worker_get_id();
    if (w >= 0 && w < STARPU_NMAXWORKERS)
        __atomic_store_n(&meter.started[w], sz_now_ns(), __ATOMIC_RELAXED);
}

static void meter_post_exec(struct starpu_task *task, unsigned ctx)
{
    (void)ctx;
    int w = starpu_worker_get_id();
    if (w < 0 || w >= STARPU_NMAXWORKERS || !__atomic_load_n(&meter.started[w], __ATOMIC_RELAXED))
        return;
    struct span sp = {meter.started[w], sz_now_ns()};
    struct spans *s = sz_task_is_comm(task) ? &meter.comm : &meter.compute;
    STARPU_PTHREAD_MUTEX_LOCK(&meter.lock);
    /* the products, with the tied head's and the fused ones (their GELU tiles too) */
    switch (sz_task_class_of(task)) {
    case SZ_TASK_MATMUL: meter.matmul_ns += sp.t1 - sp.t0; break;
    case SZ_TASK_OPTIMIZER: meter.optimizer_ns += sp.t1 - sp.t0; break;
    case SZ_TASK_CONVERT: meter.convert_ns += sp.t1 - sp.t0; break;
    case SZ_TASK_ZERO: meter.zero_ns += sp.t1 - sp.t0; break;
    default: break;
    }
    int c = 0;
    while (c < meter.ncl && meter.cl[c].cl != task->cl)
        c++;
    if (c == meter.ncl && c < (int)(sizeof meter.cl / sizeof meter.cl[0])) {
        meter.cl[c].cl = task->cl;
        meter.cl[c].ns = 0;
        meter.cl[c].tasks = 0;
        meter.ncl++;
    }
    if (c < meter.ncl) {
        meter.cl[c].ns += sp.t1 - sp.t0;
        meter.cl[c].tasks++;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 1024;
        struct span *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (v) {
            s->v = v;
            s->cap = cap;
        }
    }
    if (s->n < s->cap)
        s->v[s->n++] = sp;
    STARPU_PTHREAD_MUTEX_UNLOCK(&meter.lock);
}

static int by_start(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

int sz_sched_overlap(double *fraction, double *comm_s, double *compute_s, sz_sched_task_times *times)
{
    if (!__atomic_load_n(&meter.on, __ATOMIC_RELAXED))
        return -1; /* a policy that records nothing (one named to StarPU by a name we do not wrap) */
    STARPU_PTHREAD_MUTEX_LOCK(&meter.lock);
    qsort(meter.compute.v, (size_t)meter.compute.n, sizeof *meter.compute.v, by_start);
    int64_t comm = 0, hidden = 0, busy = 0, end = 0;
    for (int i = 0; i < meter.compute.n; i++) { /* union of the compute intervals, merged in place */
        struct span c = meter.compute.v[i];
        busy += c.t1 > end ? c.t1 - (c.t0 > end ? c.t0 : end) : 0;
        end = c.t1 > end ? c.t1 : end;
    }
    for (int k = 0; k < meter.comm.n; k++) {
        struct span c = meter.comm.v[k];
        comm += c.t1 - c.t0;
        int64_t covered = 0, e = c.t0;
        for (int i = 0; i < meter.compute.n; i++) {
            struct span x = meter.compute.v[i];
            int64_t a = x.t0 > e ? x.t0 : e, b = x.t1 < c.t1 ? x.t1 : c.t1;
            if (b > a) {
                covered += b - a;
                e = b;
            }
        }
        hidden += covered;
    }
    meter.comm.n = meter.compute.n = 0;
    if (times) {
        *times = (sz_sched_task_times){meter.matmul_ns * 1e-9, meter.optimizer_ns * 1e-9, meter.convert_ns * 1e-9,
                                       meter.zero_ns * 1e-9, meter.ncl, {{0}}};
        for (int c = 0; c < meter.ncl; c++) {
            times->cl[c].name = meter.cl[c].cl && meter.cl[c].cl->name ? meter.cl[c].cl->name : "?";
            times->cl[c].s = meter.cl[c].ns * 1e-9;
            times->cl[c].tasks = meter.cl[c].tasks;
        }
    }
    meter.matmul_ns = meter.optimizer_ns = meter.convert_ns = meter.zero_ns = 0;
    meter.ncl = 0;
    STARPU_PTHREAD_MUTEX_UNLOCK(&meter.lock);
    *fraction = comm > 0 ? (double)hidden / (double)comm : 0.0;
    *comm_s = comm * 1e-9;
    *compute_s = busy * 1e-9;
    return 0;
}

static int zero_push(struct starpu_task *task)
{
    unsigned ctx = task->sched_ctx;
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    struct node *n = malloc(sizeof *n);
    STARPU_ASSERT_MSG(n, "zero policy: out of memory");
    STARPU_PTHREAD_MUTEX_LOCK(&q->lock);
    n->task = task;
    n->key = key_of(task, q->seq++);
    struct node **p = &q->head;
    while (*p && (*p)->key <= n->key)
        p = &(*p)->next;
    n->next = *p;
    *p = n;
    q->n++;
    starpu_push_task_end(task);
    STARPU_PTHREAD_MUTEX_UNLOCK(&q->lock);

    struct starpu_worker_collection *workers = starpu_sched_ctx_get_worker_collection(ctx);
    struct starpu_sched_ctx_iterator it;
    workers->init_iterator(workers, &it);
    while (workers->has_next(workers, &it))
        starpu_wake_worker_relax_light(workers->get_next(workers, &it));
    return 0;
}

/* A worker of the context that is a CUDA worker (-1: none). */
static int first_cuda_worker(unsigned ctx)
{
    struct starpu_worker_collection *workers = starpu_sched_ctx_get_worker_collection(ctx);
    struct starpu_sched_ctx_iterator it;
    workers->init_iterator(workers, &it);
    while (workers->has_next(workers, &it)) {
        int w = workers->get_next(workers, &it);
        if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER)
            return w;
    }
    return -1;
}

/* Whether `worker` may take `t`: the communication split first, then CUDA placement. */
static int takes(int worker, int is_cuda, int cuda, int split, struct starpu_task *t, unsigned *nimpl)
{
    int comm = sz_task_is_comm(t);
    if (is_cuda) { /* a CUDA worker: compute, and the collectives it runs itself (NCCL) */
        if (split && sz_task_class_of(t) == SZ_TASK_COMM_HOST)
            return 0; /* the norms' MPI all-gather belongs to the communication worker */
        return starpu_worker_can_execute_task_first_impl(worker, t, nimpl);
    }
    if (split && comm != (worker == sz_comm_worker))
        return 0; /* the communication worker takes only communication, the others none */
    unsigned dummy;
    if (cuda >= 0 && !(split && sz_task_class_of(t) == SZ_TASK_COMM_HOST) &&
        starpu_worker_can_execute_task_first_impl(cuda, t, &dummy))
        return 0; /* a CUDA worker can run it: compute goes to the GPU */
    return starpu_worker_can_execute_task_first_impl(worker, t, nimpl);
}

static struct starpu_task *zero_pop(unsigned ctx)
{
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    if (!__atomic_load_n(&q->n, __ATOMIC_RELAXED))
        return NULL;
    int worker = starpu_worker_get_id_check();
    struct starpu_task *task = NULL;
    STARPU_PTHREAD_MUTEX_LOCK(&q->lock);
    int split = sz_comm_worker >= 0;
    int is_cuda = starpu_worker_get_type(worker) == STARPU_CUDA_WORKER;
    if (!q->cuda_known) {
        q->cuda_worker = first_cuda_worker(ctx);
        q->cuda_known = 1;
    }
    int cuda = is_cuda ? worker : q->cuda_worker;
    for (struct node **p = &q->head; *p; p = &(*p)->next) {
        unsigned nimpl;
        if (takes(worker, is_cuda, cuda, split, (*p)->task, &nimpl)) {
            struct node *n = *p;
            task = n->task;
            starpu_task_set_implementation(task, nimpl);
            *p = n->next;
            q->n--;
            free(n);
            break;
        }
    }
    STARPU_PTHREAD_MUTEX_UNLOCK(&q->lock);
    return task;
}

struct starpu_sched_policy sz_zero_policy = {
    .init_sched = zero_init,
    .deinit_sched = zero_deinit,
    .push_task = zero_push,
    .pop_task = zero_pop,
    .pre_exec_hook = meter_pre_exec,
    .post_exec_hook = meter_post_exec,
    .policy_name = "zero",
    .policy_description = "StarZeRO: the step's plan order (communication on its own worker if there is one)",
    .worker_type = STARPU_WORKER_LIST,
};

/* ---- StarPU's own policies, measured ----------------------------------------------------------
 * A copy of a predefined policy whose pre- and post-execution hooks call its own (where it has
 * them) and then record the task's interval, so that overlap and task times are measured the same
 * way under every policy. Everything else is StarPU's: the same decisions, the same name. */
static struct starpu_sched_policy measured;
static void (*measured_pre)(struct starpu_task *, unsigned), (*measured_post)(struct starpu_task *, unsigned);
static void (*measured_init)(unsigned), (*measured_deinit)(unsigned);

static void measured_pre_exec(struct starpu_task *task, unsigned ctx)
{
    if (measured_pre)
        measured_pre(task, ctx);
    meter_pre_exec(task, ctx);
}

static void measured_post_exec(struct starpu_task *task, unsigned ctx)
{
    meter_post_exec(task, ctx);
    if (measured_post)
        measured_post(task, ctx);
}

static void measured_init_sched(unsigned ctx)
{
    if (measured_init)
        measured_init(ctx);
    meter_start();
}

static void measured_deinit_sched(unsigned ctx)
{
    if (measured_deinit)
        measured_deinit(ctx);
    meter_stop();
}

struct starpu_sched_policy *sz_sched_measured_policy(const char *name)
{
    struct starpu_sched_policy **all = starpu_sched_get_predefined_policies();
    for (int i = 0; name && all && all[i]; i++) {
        if (!all[i]->policy_name || strcmp(all[i]->policy_name, name))
            continue;
        measured = *all[i];
        measured_pre = all[i]->pre_exec_hook;
        measured_post = all[i]->post_exec_hook;
        measured_init = all[i]->init_sched;
        measured_deinit = all[i]->deinit_sched;
        measured.pre_exec_hook = measured_pre_exec;
        measured.post_exec_hook = measured_post_exec;
        measured.init_sched = measured_init_sched;
        measured.deinit_sched = measured_deinit_sched;
        return &measured;
    }
    return NULL;
}
