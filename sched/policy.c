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
 * of communication time during which compute was running too).
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
    starpu_pthread_mutex_t span_lock;
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
    int cuda_worker, cuda_known;         /* a CUDA worker of the context (-1: none), once looked up */
};

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

static void zero_init(unsigned ctx)
{
    struct queue *q = calloc(1, sizeof *q);
    STARPU_PTHREAD_MUTEX_INIT(&q->lock, NULL);
    STARPU_PTHREAD_MUTEX_INIT(&q->span_lock, NULL);
    starpu_sched_ctx_set_policy_data(ctx, q);
}

static void zero_deinit(unsigned ctx)
{
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    STARPU_PTHREAD_MUTEX_DESTROY(&q->lock);
    STARPU_PTHREAD_MUTEX_DESTROY(&q->span_lock);
    free(q->comm.v);
    free(q->compute.v);
    free(q);
}

/* ---- overlap: how much communication ran while compute ran --------------------------------- */

static void zero_pre_exec(struct starpu_task *task, unsigned ctx)
{
    (void)task;
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    int w = starpu_worker_get_id();
    if (w >= 0 && w < STARPU_NMAXWORKERS)
        q->started[w] = sz_now_ns();
}

static void zero_post_exec(struct starpu_task *task, unsigned ctx)
{
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    int w = starpu_worker_get_id();
    if (w < 0 || w >= STARPU_NMAXWORKERS || !q->started[w])
        return;
    struct span sp = {q->started[w], sz_now_ns()};
    struct spans *s = sz_task_is_comm(task) ? &q->comm : &q->compute;
    STARPU_PTHREAD_MUTEX_LOCK(&q->span_lock);
    /* the products, with the tied head's and the fused ones (their GELU tiles too) */
    switch (sz_task_class_of(task)) {
    case SZ_TASK_MATMUL: q->matmul_ns += sp.t1 - sp.t0; break;
    case SZ_TASK_OPTIMIZER: q->optimizer_ns += sp.t1 - sp.t0; break;
    case SZ_TASK_CONVERT: q->convert_ns += sp.t1 - sp.t0; break;
    case SZ_TASK_ZERO: q->zero_ns += sp.t1 - sp.t0; break;
    default: break;
    }
    int c = 0;
    while (c < q->ncl && q->cl[c].cl != task->cl)
        c++;
    if (c == q->ncl && c < (int)(sizeof q->cl / sizeof q->cl[0])) {
        q->cl[c].cl = task->cl;
        q->cl[c].ns = 0;
        q->cl[c].tasks = 0;
        q->ncl++;
    }
    if (c < q->ncl) {
        q->cl[c].ns += sp.t1 - sp.t0;
        q->cl[c].tasks++;
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
    STARPU_PTHREAD_MUTEX_UNLOCK(&q->span_lock);
}

static int by_start(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

int sz_sched_overlap(double *fraction, double *comm_s, double *compute_s, sz_sched_task_times *times)
{
    struct starpu_sched_policy *pol = starpu_sched_ctx_get_sched_policy(0);
    if (!pol || !pol->policy_name || strcmp(pol->policy_name, sz_zero_policy.policy_name))
        return -1; /* measured by the zero policy only (StarPU keeps its own copy of the struct) */
    struct queue *q = starpu_sched_ctx_get_policy_data(0);
    STARPU_PTHREAD_MUTEX_LOCK(&q->span_lock);
    qsort(q->compute.v, (size_t)q->compute.n, sizeof *q->compute.v, by_start);
    int64_t comm = 0, hidden = 0, busy = 0, end = 0;
    for (int i = 0; i < q->compute.n; i++) { /* union of the compute intervals, merged in place */
        struct span c = q->compute.v[i];
        busy += c.t1 > end ? c.t1 - (c.t0 > end ? c.t0 : end) : 0;
        end = c.t1 > end ? c.t1 : end;
    }
    for (int k = 0; k < q->comm.n; k++) {
        struct span c = q->comm.v[k];
        comm += c.t1 - c.t0;
        int64_t covered = 0, e = c.t0;
        for (int i = 0; i < q->compute.n; i++) {
            struct span x = q->compute.v[i];
            int64_t a = x.t0 > e ? x.t0 : e, b = x.t1 < c.t1 ? x.t1 : c.t1;
            if (b > a) {
                covered += b - a;
                e = b;
            }
        }
        hidden += covered;
    }
    q->comm.n = q->compute.n = 0;
    if (times) {
        *times = (sz_sched_task_times){q->matmul_ns * 1e-9, q->optimizer_ns * 1e-9, q->convert_ns * 1e-9,
                                       q->zero_ns * 1e-9, q->ncl, {{0}}};
        for (int c = 0; c < q->ncl; c++) {
            times->cl[c].name = q->cl[c].cl && q->cl[c].cl->name ? q->cl[c].cl->name : "?";
            times->cl[c].s = q->cl[c].ns * 1e-9;
            times->cl[c].tasks = q->cl[c].tasks;
        }
    }
    q->matmul_ns = q->optimizer_ns = q->convert_ns = q->zero_ns = 0;
    q->ncl = 0;
    STARPU_PTHREAD_MUTEX_UNLOCK(&q->span_lock);
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
    .pre_exec_hook = zero_pre_exec,
    .post_exec_hook = zero_post_exec,
    .policy_name = "zero",
    .policy_description = "StarZeRO: the step's plan order (communication on its own worker if there is one)",
    .worker_type = STARPU_WORKER_LIST,
};
