/* sched/sz_runtime.h — the private side of sz_context: what the library keeps per rank once
 * MPI, hwloc, StarPU and StarPU-MPI are up. Shared by sched/ and tasks/, never installed. */
#ifndef SZ_RUNTIME_H
#define SZ_RUNTIME_H

#include <mpi.h>
#include <hwloc.h>
#include <starpu.h> /* STARPU_USE_CUDA, which SZ_WITH_CUDA needs */
#include "starzero.h"

/* 1 when the library is built with CUDA (nvcc, SZ_HAVE_CUDA) and StarPU with CUDA too. */
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define SZ_WITH_CUDA 1
#else
#define SZ_WITH_CUDA 0
#endif

/* The library's environment switches (sched/env.c), read once when the context starts; the table
 * of them all is docs/reference.md's "Environment variables". */
/* The engine's foldings as the environment leaves them, the one reader of their switches (sz_env_read
 * and sz_precision_resolve_cpu read it). Each variable turns its
 * folding off only when set to a value starting with '0'. zeros: SZ_ZERO_FOLD (sz_op_zero folded into
 * the next op); grads: zeros and SZ_GRAD_FOLD (the parameters' gradients left to their first writers,
 * sz_plan_config.fold_grads); round: grads and SZ_GRAD_ROUND_FOLD (mixed precision's gradient rounding
 * folded into the writers, sz_plan_config.fold_round, where no CUDA worker runs:
 * sz_resolved_precision.grads_rounded). */
typedef struct sz_fold_switches {
    int zeros, grads, round;
} sz_fold_switches;
void sz_fold_switches_read(sz_fold_switches *f);

typedef struct sz_env {
    int log_level;              /* SZ_LOG: an sz_log_level, -1 when unset or unknown */
    int comm_worker;            /* SZ_COMM_WORKER: 0 or 1, -1 unset (the config decides) */
    int ncuda_default;          /* SZ_NCUDA_DEFAULT: 0 leaves StarPU's default GPUs per rank */
    int alloc_cache;            /* SZ_ALLOC_CACHE: 0 leaves StarPU without a CPU memory limit */
    int device_pool;            /* SZ_DEVICE_POOL: 0 no device pool (sched/devpool.c) */
    int collectives_mpi;        /* SZ_COLLECTIVES=mpi: MPI's collectives on one node too */
    char host_name[256];        /* SZ_HOST_NAME: this rank's node in messages ("" unset) */
    int nccl;                   /* SZ_NCCL=1: the GPU collectives through NCCL (tasks/nccl.c) */
    int gpu_placement;          /* SZ_GPU_PLACEMENT: 0 lets the policy place compute */
    int gpu_arena;              /* SZ_GPU_ARENA=1: the model states in one GPU arena */
    int check_waits;            /* SZ_CHECK_WAITS: every step checked against the plan's waits */
    int check;                  /* SZ_CHECK: the first step's backward checked (sz_zero_config.check) */
    int64_t devwatch_budget;    /* SZ_DEVWATCH_BUDGET: bytes a CPU-only rank's measured peak is held to */
    sz_fold_switches fold;      /* SZ_ZERO_FOLD, SZ_GRAD_FOLD, SZ_GRAD_ROUND_FOLD */
    int onednn_bf16;            /* SZ_ONEDNN_BF16: 0 the exact widening path for bf16 products */
    int cuda_attention_rowwise; /* SZ_CUDA_ATTENTION=rowwise: the one-row CUDA attention kernels */
} sz_env;
void sz_env_read(sz_env *e);
/* Hands the kernels their switches (sz_k_set_bf16_tiles, sz_cuda_attention_set_rowwise). */
void sz_env_apply_kernels(const sz_env *e);

struct sz_context {
    char last_error[480];        /* the last error logged (sz_logv), sent to the others if this rank leaves */
    sz_env env;                  /* read once at start (sched/env.c) */
    int rank, world_size;
    int we_started_mpi;          /* MPI_Finalize at free only if we called MPI_Init_thread */
    MPI_Comm comm;               /* dup of MPI_COMM_WORLD given to StarPU-MPI */
    MPI_Comm task_comm;          /* our collectives inside tasks (one ordered stream per rank) */
    MPI_Comm host_comm;          /* our collectives from the application thread (losses, assembly) */
    hwloc_topology_t topo;
    sz_topology topology;
    hwloc_bitmap_t share_set;    /* PUs of this rank's cores (NULL when not binding) */
    int kernel_threads;          /* OpenMP threads every compute task uses */
    uint64_t ram_share;          /* this rank's share of the node's RAM (bytes; 0: unknown) */
    int gpu_device;              /* the CUDA device this rank's worker uses (-1: none chosen here) */
    sz_gpu_budget_info gpu_budget; /* the per-GPU default budget, decided once (device -1: none yet):
                                    * with several devices, the one with the smallest share */
    int ngpu_devices;            /* the CUDA devices this rank's workers drive (choose_gpu), */
    int gpu_devices[16];         /* SZ_GPU_BUDGET_MAX_DEVICES at most, each once */
    int ngpu_budgets;            /* and each one's own budget, decided with gpu_budget */
    sz_gpu_budget_info gpu_budgets[16];
    sz_log_fn log_fn;
    void *log_user;
    sz_log_level log_level;
};

/* sched/runtime.c: the runtime under a context: MPI, hwloc, StarPU, StarPU-MPI, the deadline, the
 * cuBLAS handles (sz_context_init, tasks/context.c, adds the GPU collectives and the device pool
 * and says what started); stop undoes it, MPI last. */
sz_status sz_runtime_start(struct sz_context **out, const sz_context_config *cfg, int *argc, char ***argv);
void sz_runtime_stop(struct sz_context *ctx);

/* sched/topology.c: fill ctx->topology (needs ctx->topo loaded and MPI up). */
sz_status sz_topology_discover(struct sz_context *ctx);

/* sched/devpool.c: the device pool (CPU-only ranks). start reserves `bytes` and routes StarPU's
 * main-RAM allocations into it (no-op with CUDA workers or SZ_DEVICE_POOL=0); stop after
 * starpu_shutdown. alloc: a block (arena: the contiguous long-lived part), NULL when there is no
 * pool or no room; release: 1 if p was the pool's (arena blocks stay), 0 if the caller must free it.
 * stats: 1 when the pool is active, and then fills out (unless NULL). */
sz_status sz_devpool_start(struct sz_context *ctx, size_t bytes);
void sz_devpool_stop(void);
void *sz_devpool_alloc(size_t bytes, int arena);
int sz_devpool_release(void *p);
/* Zero [p, p + bytes) of a pool block, its whole pages without committing them (memset elsewhere). */
void sz_devpool_zero(void *p, size_t bytes);
int64_t sz_devpool_arena_mark(void);
void sz_devpool_arena_reset(int64_t mark);
int sz_devpool_stats(sz_pool_stats *out);
/* 1 when every rank's pool is mapped here (the collectives read peers in place) */
int sz_devpool_shared(void);
/* The byte offset of [p, p + len) in this rank's shared pool (-1: not inside, or the pools are not
 * shared), and where rank `rank`'s pool holds that offset in this process. */
int64_t sz_shared_offset(const void *p, size_t len);
const void *sz_shared_peer(int rank, int64_t off);

/* sched/memory.c, collective: whether any rank has a CUDA worker, and how many ranks of this node
 * drive this rank's device (itself included; 0 without one). */
sz_status sz_context_gpu_sharers(struct sz_context *ctx, int *any, int *sharers);

/* sched/memory.c: a number naming a CUDA device on this node whatever CUDA_VISIBLE_DEVICES says
 * (a hash of its PCI bus id; the ordinal if CUDA cannot tell); -1 for dev < 0. */
int64_t sz_gpu_device_key(int dev);

/* sched/memory.c, collective: an explicit per-GPU budget against each rank's GPU (its free memory at
 * start / the ranks sharing it, sz_gpu_budget_check_given); SZ_ERR_BUDGET on every rank, the ranks
 * over naming the figures, when any is over. */
sz_status sz_context_check_gpu_budget(struct sz_context *ctx, int64_t budget);

/* Log with the context's sink; ctx may be NULL (then stderr). */
void sz_logv(const struct sz_context *ctx, sz_log_level level, const char *fmt, va_list ap);

#endif
