/* tasks/sz_comm.h — the step's communication and bookkeeping tasks, the engine's own operations:
 * reduce-scatter and all-gather of a unit (tasks/reduce_scatter.c, all_gather.c; in place through
 * shared memory on one node, tasks/exchange.c; else MPI; NCCL on GPUs, tasks/nccl.c), the clip
 * factor (tasks/clip_scale.c), live-bytes accounting (tasks/account.c) and the fp32 <-> bf16 copies
 * (tasks/convert.c). Blocking collectives on `comm`, serialised in submission order by the model's
 * token handle so every rank issues them in the same order. Sums are taken in rank order. */
#ifndef SZ_COMM_H
#define SZ_COMM_H

#include <mpi.h>
#include "sz_core.h"

struct sz_model;
struct sz_unit;

/* What every communication task's arguments start with. */
struct sz_comm {
    MPI_Comm comm;              /* our collectives' communicator (never StarPU-MPI's) */
    int nd, rank;               /* data-parallel ranks, this rank */
    struct sz_counters *stats;  /* where the task adds its bytes (model-owned, atomic) */
};
/* tasks/exchange.c: with every rank's device pool mapped here (sched/devpool.c), the collectives
 * read their peers' buffers in place. Each returns 1 when done that way, 0 when some rank's buffer
 * is outside its pool (the caller then uses MPI); the same answer on every rank. All-gather of S
 * elements of es bytes per rank (shard NULL: in place); reduce-scatter of a shard (sums in rank
 * order, onto the shard when acc); kdt: the elements' type, as sz_reduce_pieces. */
int sz_shm_all_gather(const struct sz_comm *a, size_t es, void *full, const void *shard, int64_t S);
int sz_shm_reduce_scatter(const struct sz_comm *a, int kdt, const void *full, void *shard, int64_t S, int acc);
/* The same for elements [o, o + len) of every rank's piece (one bucket round of the plan). */
int sz_shm_reduce_scatter_piece(const struct sz_comm *a, int kdt, const void *full, void *shard, int64_t S,
                                int64_t o, int64_t len, int acc);
/* tasks/reduce_scatter.c: sum a->nd pieces of len elements of type kdt (sz_kdt_of: 0 fp32, 1 bf16,
 * 2 fp16), src[r] from rank r, in rank order into shard[o, o + len) (onto it when acc); 16-bit
 * values are summed in fp32 and rounded once. */
void sz_reduce_pieces(const struct sz_comm *a, int kdt, void *shard, const void *const *src, int64_t o,
                      int64_t len, int acc);

/* tasks/nccl.c: the GPU collectives (opt-in: wanted is SZ_NCCL=1, ctx->env.nccl; see there). Start
 * after StarPU is up, on every rank (collective over comm; tasks/context.c); `why` says which
 * collectives the run uses. */
sz_status sz_nccl_start(int wanted, MPI_Comm comm, int rank, int nd, char *why, size_t why_len);
void sz_nccl_stop(void);
int sz_nccl_active(void);
/* Its decisions, pure (tests/test_nccl_rule.c): whether a worker (a CUDA one or not) may run
 * reduce-scatter / all-gather, NCCL active or not (never both paths at once); whether the ranks'
 * PCI bus ids (nd strings, stride bytes apart) are all present and different. */
int sz_nccl_worker_may_run(int cuda_worker, int nccl_active);
int sz_nccl_buses_distinct(const char *all, int nd, size_t stride);
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA) && defined(SZ_HAVE_NCCL)
void sz_nccl_reduce_scatter(void *b[], void *arg, int64_t S, int64_t o, int64_t len, int acc, struct sz_counters *stats);
void sz_nccl_all_gather(void *b[], void *arg, int64_t S, int in_place, int rank, struct sz_counters *stats);
int sz_nccl_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl);
#endif

/* Their codelets (tasks/registry.c lists them for sz-info --codelets). */
#define SZ_STEP_CODELETS(X) X(sz_cl_zero) X(sz_cl_reduce_scatter) X(sz_cl_all_gather) X(sz_cl_clip_scale) \
    X(sz_cl_account) X(sz_cl_convert)
extern struct starpu_codelet sz_cl_reduce_scatter, sz_cl_all_gather, sz_cl_clip_scale, sz_cl_account, sz_cl_convert;

/* The tasks. Reduce-scatter: one bucket round, elements [o, o + len) of every rank's piece of the
 * unit's gradients. */
sz_status sz_submit_reduce_scatter(struct sz_model *m, struct sz_unit *u, int64_t o, int64_t len, int acc,
                                   int64_t release_bytes);
sz_status sz_submit_all_gather(struct sz_model *m, struct sz_unit *u, int from_shard, int category, int64_t bytes);
/* The clip factor and the global norm into m->clip; loss_scale > 0 (fp16): divided out, and an
 * overflow marked NaN (the step skipped). */
sz_status sz_submit_clip(struct sz_model *m, float clip, float loss_scale);
sz_status sz_submit_account(struct sz_model *m, const sz_tensor *t, int category, int64_t bytes, const char *name);
sz_status sz_submit_convert(struct sz_model *m, const sz_tensor *dst, const sz_tensor *src, int mode, int category,
                            int64_t bytes, const char *name);

#endif
