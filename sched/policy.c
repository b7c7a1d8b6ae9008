/* sched/policy.c — the `zero` StarPU scheduling policy, StarZeRO's default (a user's STARPU_SCHED
 * still wins, as StarPU users expect). One central queue of ready tasks, taken in this order:
 *   1. communication (gather, reduce-scatter, all-gather, clip factor): starting them as soon as
 *      they are ready is what lets them overlap the compute that follows;
 *   2. then everything else in plan order: task->sched_data carries the task's position in the
 *      step's plan (bits 16..63) and its unit (bits 0..15), set by tasks/ops.c.
 * Ties keep submission order. Workers are woken on push and sleep when the queue is empty.
 * (The budget and the gather window are enforced where the plan is submitted: tasks/zero.c.) */
#include <stdint.h>
#include <stdlib.h>
#include <starpu.h>
#include <starpu_scheduler.h>
#include "sz_codelets.h"
#include "sz_sched.h"

struct node {
    struct starpu_task *task;
    uint64_t key;
    struct node *next;
};

struct queue {
    starpu_pthread_mutex_t lock;
    struct node *head;
    uint64_t seq;
    int n;
};

int sz_task_is_comm(const struct starpu_task *t)
{
    const struct starpu_codelet *cl = t->cl;
    return cl == &sz_cl_reduce_scatter || cl == &sz_cl_all_gather || cl == &sz_cl_clip_scale;
}

/* Smaller keys first: class (communication 0, rest 1), then plan position, then arrival. */
static uint64_t key_of(struct starpu_task *t, uint64_t seq)
{
    uint64_t pos = (uint64_t)(uintptr_t)t->sched_data >> 16;
    uint64_t cls = sz_task_is_comm(t) ? 0 : 1;
    return cls << 62 | (pos & ((1ULL << 40) - 1)) << 20 | (seq & ((1ULL << 20) - 1));
}

static void zero_init(unsigned ctx)
{
    struct queue *q = calloc(1, sizeof *q);
    STARPU_PTHREAD_MUTEX_INIT(&q->lock, NULL);
    starpu_sched_ctx_set_policy_data(ctx, q);
}

static void zero_deinit(unsigned ctx)
{
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    STARPU_PTHREAD_MUTEX_DESTROY(&q->lock);
    free(q);
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

static struct starpu_task *zero_pop(unsigned ctx)
{
    struct queue *q = starpu_sched_ctx_get_policy_data(ctx);
    if (!__atomic_load_n(&q->n, __ATOMIC_RELAXED))
        return NULL;
    int worker = starpu_worker_get_id_check();
    struct starpu_task *task = NULL;
    STARPU_PTHREAD_MUTEX_LOCK(&q->lock);
    for (struct node **p = &q->head; *p; p = &(*p)->next) {
        unsigned nimpl;
        if (starpu_worker_can_execute_task_first_impl(worker, (*p)->task, &nimpl)) {
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
    .policy_name = "zero",
    .policy_description = "StarZeRO: communication first, then the step's plan order",
    .worker_type = STARPU_WORKER_LIST,
};
