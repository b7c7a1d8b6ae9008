/* sched/deadline.c — deadline-bounded waits for every collective, and the side channel that tells
 * a rank whom it is waiting for (sz_deadline.h). Per node, one MPI shared-memory window holds a
 * slot per rank: its pid, a heartbeat (CLOCK_MONOTONIC, refreshed every 250 ms by a thread of its
 * own, so it stops only when the process stops: SIGSTOP, a swapping or frozen node), its step,
 * and per stream (the task communicator, the host communicator, the start-up one) how many
 * collectives it entered and completed and what it waits in now. Ranks on other nodes are not
 * visible there; the message says so. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <starpu.h>
#include "sz_deadline.h"
#include "sz_runtime.h"

enum { STREAM_TASK, STREAM_HOST, STREAM_START, NSTREAMS };
static const char *stream_name[NSTREAMS] = {"task", "application-thread", "start-up"};

struct slot {
    int64_t pid, world_rank;
    int64_t heartbeat_ns;             /* refreshed by the heartbeat thread */
    int64_t step;
    int64_t entered[NSTREAMS], done[NSTREAMS];
    int64_t wait_since_ns[NSTREAMS];  /* 0: not waiting on that stream */
    char label[NSTREAMS][96];         /* what it waits in now, or waited in last */
};

static struct {
    const struct sz_context *ctx;
    MPI_Comm streams[NSTREAMS];
    double base_s, slowest_s;
    MPI_Comm node;
    MPI_Win win;
    int nlocal, started;
    struct slot *me, **peers;         /* peers[i]: local rank i's slot */
    pthread_t beat;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    char (*hosts)[MPI_MAX_PROCESSOR_NAME]; /* every rank's node (MPI_Get_processor_name) */
    int multinode;                    /* the ranks run on more than one node */
} dl = {.base_s = 0, .node = MPI_COMM_NULL, .win = MPI_WIN_NULL, .lock = PTHREAD_MUTEX_INITIALIZER};

static struct slot solo; /* before start (or without a window): our own slot only */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct slot *mine(void) { return dl.me ? dl.me : &solo; }

const char *sz_rank_host(int rank)
{
    return dl.multinode && dl.hosts && dl.ctx && rank >= 0 && rank < dl.ctx->world_size ? dl.hosts[rank] : NULL;
}

/* " on <host>" for rank r where the ranks span several nodes, else "". */
static const char *on_host(int r, char *buf, size_t len)
{
    const char *h = sz_rank_host(r);
    if (!h)
        return "";
    snprintf(buf, len, " on %s", h);
    return buf;
}

/* "\n  ranks 2-3 on nodeB, rank 4 on nodeC": the ranks outside this node, by node. */
static size_t other_nodes(char *out, size_t len)
{
    size_t n = 0;
    int ws = dl.ctx->world_size, me = dl.ctx->rank;
    for (int r = 0; r < ws && n + 160 < len; r++) {
        if (!strcmp(dl.hosts[r], dl.hosts[me]))
            continue;
        int e = r;
        while (e + 1 < ws && !strcmp(dl.hosts[e + 1], dl.hosts[r]))
            e++;
        n += (size_t)snprintf(out + n, len - n, "%s%s %d", n ? ", " : "", e > r ? "ranks" : "rank", r);
        if (e > r)
            n += (size_t)snprintf(out + n, len - n, "-%d", e);
        n += (size_t)snprintf(out + n, len - n, " on %s", dl.hosts[r]);
        r = e;
    }
    return n;
}

static void *heartbeat(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dl.lock);
    while (!dl.stop) {
        __atomic_store_n(&mine()->heartbeat_ns, now_ns(), __ATOMIC_RELAXED);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 250000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&dl.cond, &dl.lock, &ts);
    }
    pthread_mutex_unlock(&dl.lock);
    return NULL;
}

/* What the node's ranks are doing, one line each, for a rank stuck on `s` after `entered`
 * collectives there; then the ranks elsewhere. */
static void describe_peers(char *out, size_t len, int s, int64_t entered)
{
    size_t n = 0;
    int64_t t = now_ns();
    int behind = 0, held_here = 0; /* held_here: behind, and not itself waiting, alive, in this stream */
    out[0] = 0;
    for (int i = 0; i < dl.nlocal && n + 200 < len; i++) {
        struct slot *p = dl.peers[i];
        if (p == dl.me)
            continue;
        int64_t e = __atomic_load_n(&p->entered[s], __ATOMIC_RELAXED);
        double quiet = (t - __atomic_load_n(&p->heartbeat_ns, __ATOMIC_RELAXED)) * 1e-9;
        int64_t since = __atomic_load_n(&p->wait_since_ns[s], __ATOMIC_RELAXED);
        char label[96];
        memcpy(label, p->label[s], sizeof label);
        label[sizeof label - 1] = 0;
        behind += e < entered;
        held_here += e < entered && (!since || quiet > 2.0);
        n += (size_t)snprintf(out + n, len - n, "\n  rank %lld (pid %lld): %s; at step %lld, ", (long long)p->world_rank,
                              (long long)p->pid, e < entered ? "has NOT reached it" : "reached it",
                              (long long)__atomic_load_n(&p->step, __ATOMIC_RELAXED));
        if (since)
            n += (size_t)snprintf(out + n, len - n, "waiting for %.1f s in %s", (t - since) * 1e-9, label);
        else
            n += (size_t)snprintf(out + n, len - n, "not in a collective (the last: %s)", label[0] ? label : "none");
        if (quiet > 2.0)
            n += (size_t)snprintf(out + n, len - n, "; NO sign of life for %.1f s (the process is stopped, swapping, "
                                  "or its machine is frozen)", quiet);
        else
            n += (size_t)snprintf(out + n, len - n, "; alive");
    }
    int ws = dl.ctx ? dl.ctx->world_size : 1;
    if (dl.nlocal < ws && n + 120 < len) {
        n += (size_t)snprintf(out + n, len - n, "\n  %d rank(s) on other nodes", ws - dl.nlocal);
        if (dl.multinode && dl.hosts && n + 200 < len) {
            n += (size_t)snprintf(out + n, len - n, " (");
            n += other_nodes(out + n, len - n - 80);
            n += (size_t)snprintf(out + n, len - n, ")");
        }
        if (held_here)
            n += (size_t)snprintf(out + n, len - n, ": not visible from here (look at their own messages)");
        else /* every rank here is in a collective and alive: what holds them is on another node, or on the way */
            n += (size_t)snprintf(out + n, len - n, ": every rank on this node is alive and waiting in a collective, "
                                  "so what holds it up is there: a rank stopped or dead, or the link to its node down "
                                  "(their own messages, where they reach you, say more)");
    }
    if (dl.nlocal == ws && !behind && n + 120 < len)
        snprintf(out + n, len - n, "\n  every rank reached it: the one(s) without a sign of life above hold it up");
}

static void expire(int s, const char *what, int64_t entered, double waited, double limit)
{
    const struct starpu_task *task = starpu_task_get_current();
    char peers[2048];
    describe_peers(peers, sizeof peers, s, entered);
    int rank = dl.ctx ? dl.ctx->rank : -1;
    char msg[3072], host[MPI_MAX_PROCESSOR_NAME + 8];
    snprintf(msg, sizeof msg,
             "deadline: rank %d%s waited %.1f s (the limit) in %s%s%s%s at step %lld (collective #%lld on the %s "
             "stream); the other ranks%s:%s\n  Stopping the job (MPI_Abort). If a step can really take this long, "
             "raise --timeout (sz_context_config.timeout_s; now %.0f s, or 5x the slowest step); 0 disables it.",
             rank, on_host(rank, host, sizeof host), waited, what, task && task->name ? " (task " : "", task && task->name ? task->name : "",
             task && task->name ? ")" : "", (long long)mine()->step, (long long)entered, stream_name[s],
             dl.multinode ? " on this node" : "", peers[0] ? peers : " (no side channel: cannot tell)", limit);
    (void)waited;
    if (dl.ctx)
        sz_context_log(dl.ctx, SZ_LOG_ERROR, "%s", msg);
    else
        fprintf(stderr, "[starzero] error: %s\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, SZ_DEADLINE_EXIT);
}

/* ---- a rank that leaves: the others stop waiting for it --------------------------------------
 * Every rank that reaches sz_context_free first tells every other one so (one message each, on a
 * communicator of its own) and then waits until all have. A rank waiting in a collective that
 * learns a peer has left stops the job at once — after a short grace in which a collective the
 * peer did post still completes: the peer posts no more, so nothing else can — rather than at the
 * deadline. So a rank that fails alone (its own message says why) ends the job in seconds. */
#define BYE_TAG 7001
#define BYE_GRACE_NS 2000000000LL
static struct {
    MPI_Comm comm;             /* a dup of the context's */
    MPI_Request req;           /* our receive of the first message; MPI_REQUEST_NULL once it came */
    char buf[480], why[480];   /* the first message (the leaver's last error, "" for none); ours */
    int from;                  /* the first rank seen leaving (-1: none yet) */
    int leaving;               /* we are leaving ourselves (then others leaving is the normal end) */
    int64_t seen_ns;
    MPI_Request *sends;
    pthread_mutex_t lock;
} bye = {.comm = MPI_COMM_NULL, .req = MPI_REQUEST_NULL, .from = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The first rank seen leaving, or -1 (any thread; one tests the receive at a time). */
static int peer_left(void)
{
    int from = __atomic_load_n(&bye.from, __ATOMIC_ACQUIRE);
    if (from >= 0 || bye.comm == MPI_COMM_NULL || pthread_mutex_trylock(&bye.lock) != 0)
        return from;
    int flag = 0;
    MPI_Status st;
    if (bye.req != MPI_REQUEST_NULL && MPI_Test(&bye.req, &flag, &st) == MPI_SUCCESS && flag) {
        bye.seen_ns = now_ns();
        __atomic_store_n(&bye.from, st.MPI_SOURCE, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&bye.lock);
    return __atomic_load_n(&bye.from, __ATOMIC_ACQUIRE);
}

/* A collective this rank waits in can never complete: `left` has left the job. */
static void peer_gone(int s, const char *what, int left)
{
    const struct starpu_task *task = starpu_task_get_current();
    int rank = dl.ctx ? dl.ctx->rank : -1;
    char msg[2048], host[MPI_MAX_PROCESSOR_NAME + 8], lhost[MPI_MAX_PROCESSOR_NAME + 8], why[560];
    bye.buf[sizeof bye.buf - 1] = 0;
    if (bye.buf[0])
        snprintf(why, sizeof why, "its last error: %s", bye.buf);
    else
        snprintf(why, sizeof why, "it logged no error through the library: its own output says why");
    snprintf(msg, sizeof msg,
             "rank %d%s left the job (it stopped and freed its context; %s) while rank %d%s waited in %s%s%s%s at "
             "step %lld (the %s stream), which it will never join.\n  Stopping the job (MPI_Abort) rather than "
             "waiting for the deadline.",
             left, on_host(left, lhost, sizeof lhost), why, rank, on_host(rank, host, sizeof host), what,
             task && task->name ? " (task " : "", task && task->name ? task->name : "", task && task->name ? ")" : "",
             (long long)mine()->step, stream_name[s]);
    if (dl.ctx)
        sz_context_log(dl.ctx, SZ_LOG_ERROR, "%s", msg);
    else
        fprintf(stderr, "[starzero] error: %s\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, SZ_PEER_LEFT_EXIT);
}

void sz_deadline_leave(void)
{
    if (bye.comm == MPI_COMM_NULL || bye.leaving || !dl.ctx)
        return;
    bye.leaving = 1;
    int n = dl.ctx->world_size, me = dl.ctx->rank;
    memcpy(bye.why, dl.ctx->last_error, sizeof bye.why);
    bye.sends = calloc((size_t)n, sizeof *bye.sends);
    for (int r = 0; bye.sends && r < n; r++)
        bye.sends[r] = MPI_REQUEST_NULL;
    for (int r = 0; bye.sends && r < n; r++)
        if (r != me)
            MPI_Isend(bye.why, (int)sizeof bye.why, MPI_CHAR, r, BYE_TAG, bye.comm, &bye.sends[r]);
}

void sz_deadline_left(void)
{
    if (bye.comm == MPI_COMM_NULL)
        return;
    sz_deadline_leave();
    int n = dl.ctx->world_size;
    MPI_Request r;
    if (MPI_Ibarrier(bye.comm, &r) == MPI_SUCCESS) /* every rank has sent all its messages */
        sz_mpi_wait(&r, bye.comm, "the end (every rank leaving)");
    if (bye.sends)
        MPI_Waitall(n, bye.sends, MPI_STATUSES_IGNORE);
    free(bye.sends);
    bye.sends = NULL;
    pthread_mutex_lock(&bye.lock);
    int got = bye.req == MPI_REQUEST_NULL ? 1 : 0; /* ours came already */
    if (!got)
        MPI_Wait(&bye.req, MPI_STATUS_IGNORE);
    for (int k = 1; k < n - 1; k++) /* the others', all sent before the barrier */
        MPI_Recv(bye.buf, (int)sizeof bye.buf, MPI_CHAR, MPI_ANY_SOURCE, BYE_TAG, bye.comm, MPI_STATUS_IGNORE);
    pthread_mutex_unlock(&bye.lock);
    MPI_Comm_free(&bye.comm);
    bye.from = -1;
    bye.leaving = 0;
}

static int stream_of(MPI_Comm comm)
{
    for (int s = 0; s < NSTREAMS; s++)
        if (dl.streams[s] != MPI_COMM_NULL && comm == dl.streams[s])
            return s;
    return STREAM_START;
}

double sz_deadline_seconds(void)
{
    if (dl.base_s <= 0)
        return 0;
    double five = 5 * dl.slowest_s;
    return five > dl.base_s ? five : dl.base_s;
}

void sz_deadline_set_step(int step) { __atomic_store_n(&mine()->step, step, __ATOMIC_RELAXED); }

void sz_deadline_step_done(double seconds)
{
    if (seconds > dl.slowest_s)
        dl.slowest_s = seconds;
}

int sz_mpi_wait(MPI_Request *req, MPI_Comm comm, const char *what)
{
    struct slot *me = mine();
    int s = stream_of(comm);
    int64_t entered = __atomic_add_fetch(&me->entered[s], 1, __ATOMIC_RELAXED);
    const struct starpu_task *task = starpu_task_get_current();
    snprintf(me->label[s], sizeof me->label[s], "%s%s%s%s", what, task && task->name ? " (task " : "",
             task && task->name ? task->name : "", task && task->name ? ")" : "");
    int64_t t0 = now_ns();
    __atomic_store_n(&me->wait_since_ns[s], t0, __ATOMIC_RELAXED);
    double limit = sz_deadline_seconds();
    int64_t deadline = limit > 0 ? t0 + (int64_t)(limit * 1e9) : 0;
    /* MPI progresses only inside MPI calls: poll without pause for the first millisecond (most
     * waits end there), then sleep a twentieth of the time waited so far (10 us to 1 ms) between
     * polls, so a wait lasts at most ~5% longer than it must, and a long one costs almost no CPU. */
    int done = 0, rc;
    for (;;) {
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            break;
        int64_t t = now_ns(), waited = t - t0;
        if (deadline && t > deadline)
            expire(s, what, entered, waited * 1e-9, limit);
        if (waited > 1000000) { /* (a wait that ends within the first millisecond pays nothing for this) */
            int left = bye.leaving ? -1 : peer_left();
            if (left >= 0 && t - bye.seen_ns > BYE_GRACE_NS && t - t0 > BYE_GRACE_NS)
                peer_gone(s, what, left);
            long nap = waited / 20 < 10000 ? 10000 : waited / 20 > 1000000 ? 1000000 : (long)(waited / 20);
            struct timespec ts = {0, nap};
            nanosleep(&ts, NULL);
        }
    }
    __atomic_store_n(&me->wait_since_ns[s], 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&me->done[s], 1, __ATOMIC_RELAXED);
    return rc;
}

int sz_allgather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount, MPI_Datatype rt,
                 MPI_Comm comm, const char *what)
{
    MPI_Request r;
    int rc = MPI_Iallgather(send, scount, st, recv, rcount, rt, comm, &r);
    return rc != MPI_SUCCESS ? rc : sz_mpi_wait(&r, comm, what);
}

int sz_allgatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts, const int *displs,
                  MPI_Datatype rt, MPI_Comm comm, const char *what)
{
    MPI_Request r;
    int rc = MPI_Iallgatherv(send, scount, st, recv, rcounts, displs, rt, comm, &r);
    return rc != MPI_SUCCESS ? rc : sz_mpi_wait(&r, comm, what);
}

int sz_allreduce(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, const char *what)
{
    MPI_Request r;
    int rc = MPI_Iallreduce(send, recv, count, dt, op, comm, &r);
    return rc != MPI_SUCCESS ? rc : sz_mpi_wait(&r, comm, what);
}

int sz_barrier(MPI_Comm comm, const char *what)
{
    MPI_Request r;
    int rc = MPI_Ibarrier(comm, &r);
    return rc != MPI_SUCCESS ? rc : sz_mpi_wait(&r, comm, what);
}

int sz_gather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount, MPI_Datatype rt, int root,
              MPI_Comm comm, const char *what)
{
    MPI_Request r;
    int rc = MPI_Igather(send, scount, st, recv, rcount, rt, root, comm, &r);
    return rc != MPI_SUCCESS ? rc : sz_mpi_wait(&r, comm, what);
}

int sz_gatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts, const int *displs,
               MPI_Datatype rt, int root, MPI_Comm comm, const char *what)
{
    MPI_Request r;
    int rc = MPI_Igatherv(send, scount, st, recv, rcounts, displs, rt, root, comm, &r);
    return rc != MPI_SUCCESS ? rc : sz_mpi_wait(&r, comm, what);
}

/* StarPU's watchdog (armed by sz_context_init from the timeout): no task finished for a period
 * while tasks were submitted. Say where every rank of the node is, then stop the job if asked. */
static void watchdog(void *arg)
{
    (void)arg;
    char peers[2048];
    describe_peers(peers, sizeof peers, STREAM_TASK, __atomic_load_n(&mine()->entered[STREAM_TASK], __ATOMIC_RELAXED));
    const char *crash = getenv("STARPU_WATCHDOG_CRASH"), *period = getenv("STARPU_WATCHDOG_TIMEOUT");
    int stop = crash && atoi(crash) != 0;
    char msg[3072], host[MPI_MAX_PROCESSOR_NAME + 8];
    snprintf(msg, sizeof msg, "watchdog: on rank %d%s no task finished for %.0f s at step %lld (a task is stuck: a "
             "device, a kernel, or a collective that never completes); the node's ranks:%s%s",
             dl.ctx ? dl.ctx->rank : -1, on_host(dl.ctx ? dl.ctx->rank : -1, host, sizeof host), period ? atof(period) / 1e6 : 0.0, (long long)mine()->step,
             peers[0] ? peers : " (no other rank here)",
             stop ? "\n  Stopping the job (MPI_Abort); STARPU_WATCHDOG_TIMEOUT / --timeout set the period." : "");
    if (dl.ctx)
        sz_context_log(dl.ctx, SZ_LOG_ERROR, "%s", msg);
    fflush(stderr);
    if (stop)
        MPI_Abort(MPI_COMM_WORLD, SZ_DEADLINE_EXIT);
}

sz_status sz_deadline_start(struct sz_context *ctx, double timeout_s)
{
    dl.ctx = ctx;
    dl.base_s = timeout_s > 0 ? timeout_s : 0;
    dl.slowest_s = 0;
    dl.streams[STREAM_TASK] = ctx->task_comm;
    dl.streams[STREAM_HOST] = ctx->host_comm;
    dl.streams[STREAM_START] = ctx->comm;
    memset(&solo, 0, sizeof solo);
    dl.me = NULL;
    dl.nlocal = 0;
    if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &dl.node) == MPI_SUCCESS) {
        void *base = NULL;
        int nl = 0, me = 0;
        MPI_Comm_size(dl.node, &nl);
        MPI_Comm_rank(dl.node, &me);
        /* errors come back as codes here: no side channel is no reason to stop */
        MPI_Comm_set_errhandler(dl.node, MPI_ERRORS_RETURN);
        if (MPI_Win_allocate_shared((MPI_Aint)sizeof(struct slot), 1, MPI_INFO_NULL, dl.node, &base, &dl.win) ==
            MPI_SUCCESS) {
            dl.peers = calloc((size_t)nl, sizeof *dl.peers);
            int ok = dl.peers != NULL;
            for (int i = 0; ok && i < nl; i++) {
                MPI_Aint size;
                int disp;
                ok = MPI_Win_shared_query(dl.win, i, &size, &disp, &dl.peers[i]) == MPI_SUCCESS && dl.peers[i];
            }
            if (ok) {
                dl.me = dl.peers[me];
                memset(dl.me, 0, sizeof *dl.me);
                dl.nlocal = nl;
            }
        }
    }
    /* every rank's node, for the messages (SZ_HOST_NAME overrides what MPI says: the name a user knows) */
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int nlen = 0;
    if (ctx->env.host_name[0])
        snprintf(name, sizeof name, "%s", ctx->env.host_name);
    else if (MPI_Get_processor_name(name, &nlen) != MPI_SUCCESS)
        snprintf(name, sizeof name, "%s", ctx->topology.hostname);
    free(dl.hosts);
    dl.multinode = 0;
    if ((dl.hosts = calloc((size_t)ctx->world_size, sizeof *dl.hosts)) &&
        sz_allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, dl.hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, ctx->comm,
                     "start-up: host names") == MPI_SUCCESS) {
        for (int r = 0; r < ctx->world_size; r++) {
            dl.hosts[r][MPI_MAX_PROCESSOR_NAME - 1] = 0;
            dl.multinode |= strcmp(dl.hosts[r], dl.hosts[0]) != 0;
        }
    }
    struct slot *s = mine();
    s->pid = getpid();
    s->world_rank = ctx->rank;
    s->heartbeat_ns = now_ns();
    if (dl.win != MPI_WIN_NULL) /* every slot initialised before anyone reads one */
        sz_barrier(ctx->comm, "start-up barrier");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&dl.cond, &ca);
    pthread_condattr_destroy(&ca);
    dl.stop = 0;
    dl.started = pthread_create(&dl.beat, NULL, heartbeat, NULL) == 0;
    starpu_task_watchdog_set_hook(watchdog, NULL);
    if (ctx->world_size > 1 && MPI_Comm_dup(ctx->comm, &bye.comm) == MPI_SUCCESS &&
        MPI_Irecv(bye.buf, (int)sizeof bye.buf, MPI_CHAR, MPI_ANY_SOURCE, BYE_TAG, bye.comm, &bye.req) != MPI_SUCCESS)
        MPI_Comm_free(&bye.comm); /* no channel: the deadline alone, as before */
    return SZ_OK;
}

void sz_deadline_stop(void)
{
    if (dl.started) {
        pthread_mutex_lock(&dl.lock);
        dl.stop = 1;
        pthread_cond_signal(&dl.cond);
        pthread_mutex_unlock(&dl.lock);
        pthread_join(dl.beat, NULL);
        pthread_cond_destroy(&dl.cond);
        dl.started = 0;
    }
    dl.me = NULL;
    if (dl.win != MPI_WIN_NULL)
        MPI_Win_free(&dl.win);
    if (dl.node != MPI_COMM_NULL)
        MPI_Comm_free(&dl.node);
    free(dl.peers);
    dl.peers = NULL;
    free(dl.hosts);
    dl.hosts = NULL;
    dl.multinode = 0;
    dl.nlocal = 0;
    dl.ctx = NULL;
    for (int s = 0; s < NSTREAMS; s++)
        dl.streams[s] = MPI_COMM_NULL;
}
