/* sched/sz_deadline.h — no collective waits forever. Every MPI collective StarZeRO issues (inside
 * communication tasks, on the application thread, at start-up) is posted non-blocking and waited
 * for here, until a deadline: the context's timeout (sz_context_config.timeout_s, --timeout) for
 * the first step, then max(timeout, 5 x the slowest step so far). The wait polls MPI_Test with
 * short sleeps, so a rank that waits long does not spin a core. When the deadline passes, the
 * rank says what it waited in (the collective, the task and so the unit, the step) and which
 * ranks had not reached it — read from a small side channel every rank of the node keeps in
 * shared memory (its count of collectives entered per stream, its step, what it last waited in,
 * and a heartbeat a thread refreshes) — and the job ends with MPI_Abort.
 *
 * The state is process-wide like StarPU's and MPI's own (one context per process); codelets reach
 * it without an argument. Private to the library. */
#ifndef SZ_DEADLINE_H
#define SZ_DEADLINE_H

#include <mpi.h>
#include "starzero.h"

struct sz_context;

/* Rank r's node name (MPI_Get_processor_name, or SZ_HOST_NAME) when the ranks run on more than one
 * node, for messages that name other ranks; NULL on one node (or before sz_deadline_start). */
const char *sz_rank_host(int r);

/* The exit code of a job ended by a deadline (MPI_Abort's errorcode; mpirun returns it). */
#define SZ_DEADLINE_EXIT 4
/* ... and of one ended because a rank left (freed its context) while another waited for it. */
#define SZ_PEER_LEFT_EXIT 5

/* sz_context_free, first: tell every other rank this one is leaving (a rank waiting in a
 * collective for it then stops the job within seconds, instead of at the deadline). */
void sz_deadline_leave(void);
/* sz_context_free, once this rank's tasks are done: wait until every rank has left (collective),
 * then take in their messages. */
void sz_deadline_left(void);

/* Collective over ctx->comm: the node's side channel and the heartbeat thread. timeout_s <= 0: no
 * deadline (waits still sleep instead of spinning). Also installs the StarPU watchdog hook
 * (call after StarPU is up). */
sz_status sz_deadline_start(struct sz_context *ctx, double timeout_s);
void sz_deadline_stop(void);
/* The step now running (1-based; 0: start-up), for the messages. */
void sz_deadline_set_step(int step);
/* A step took `seconds`: later deadlines are at least 5x the slowest. */
void sz_deadline_step_done(double seconds);
/* Seconds a wait that starts now may last; 0: unbounded. */
double sz_deadline_seconds(void);
/* Waits for *req, a non-blocking collective just posted on comm; `what` names it ("all-gather",
 * "loss all-gather", ...). Returns MPI_Test's code (MPI_SUCCESS when complete). Past the deadline
 * it reports and calls MPI_Abort(MPI_COMM_WORLD, SZ_DEADLINE_EXIT): it does not return. */
int sz_mpi_wait(MPI_Request *req, MPI_Comm comm, const char *what);

/* Blocking-call replacements on the same deadline (same arguments as MPI's). */
int sz_allgather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount, MPI_Datatype rt,
                 MPI_Comm comm, const char *what);
int sz_allgatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts, const int *displs,
                  MPI_Datatype rt, MPI_Comm comm, const char *what);
int sz_allreduce(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                 const char *what);
int sz_barrier(MPI_Comm comm, const char *what);
int sz_gather(const void *send, int scount, MPI_Datatype st, void *recv, int rcount, MPI_Datatype rt, int root,
              MPI_Comm comm, const char *what);
int sz_gatherv(const void *send, int scount, MPI_Datatype st, void *recv, const int *rcounts, const int *displs,
               MPI_Datatype rt, int root, MPI_Comm comm, const char *what);

#endif
