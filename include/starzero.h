/* starzero.h — the one public header of StarZeRO (ZeRO data parallelism as a StarPU task graph).
 *
 * Conventions: opaque handles, `sz_<noun>_<verb>` names, every fallible call returns an
 * `sz_status`; `*_init` / `*_free` pairs, and every `*_free` accepts NULL. Configuration
 * structs are filled by their `*_defaults()` function first, then edited. Library code never
 * calls exit(). This header includes neither StarPU nor MPI.
 */
#ifndef STARZERO_H
#define STARZERO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SZ_VERSION_MAJOR 0
#define SZ_VERSION_MINOR 1

/* ---- status codes (this enum only grows) ------------------------------------------------ */
typedef enum sz_status {
    SZ_OK = 0,
    SZ_ERR_INVALID,     /* a bad argument or an impossible configuration */
    SZ_ERR_NOMEM,       /* an allocation failed */
    SZ_ERR_IO,          /* a file could not be opened, read or written */
    SZ_ERR_FORMAT,      /* a file's contents are wrong: magic, version, size, shape */
    SZ_ERR_RUNTIME,     /* StarPU, StarPU-MPI, MPI or hwloc failed */
    SZ_ERR_UNSUPPORTED, /* not available in this build or on this hardware */
    SZ_ERR_BUDGET,      /* the plan does not fit the memory budget */
    SZ_ERR_STATE,       /* a call made in the wrong phase (e.g. before init) */
} sz_status;

/* A short, static, human-readable description of a status ("invalid argument", ...). */
const char *sz_status_string(sz_status status);

/* ---- logging ----------------------------------------------------------------------------- */
typedef enum sz_log_level { SZ_LOG_ERROR = 0, SZ_LOG_WARN, SZ_LOG_INFO, SZ_LOG_DEBUG } sz_log_level;

/* Receives every message the library emits at or below the configured level. `msg` has no
 * trailing newline and is only valid during the call. */
typedef void (*sz_log_fn)(sz_log_level level, const char *msg, void *user);

/* The default sink: "[starzero r<rank>] level: msg" on stderr. */
void sz_log_stderr(sz_log_level level, const char *msg, void *user);

/* ---- the context: StarPU + StarPU-MPI + hwloc for one MPI rank ---------------------------- */
typedef struct sz_context sz_context;

typedef struct sz_context_config {
    int ncpus;                 /* CPU workers for this rank; -1: this rank's share of its node's
                                  cores (node cores / ranks on the node). STARPU_NCPU wins. */
    int ncuda;                 /* CUDA workers; -1: StarPU's default. STARPU_NCUDA wins. */
    int bind_share;            /* 1: bind this rank's workers to its own share of the node's cores,
                                  so co-located ranks never pile onto the same cores */
    const char *sched_policy;  /* StarPU policy name; NULL: StarPU's default. STARPU_SCHED wins. */
    sz_log_fn log_fn;          /* NULL: sz_log_stderr */
    void *log_user;
    sz_log_level log_level;    /* default SZ_LOG_WARN; SZ_LOG env var (error|warn|info|debug) wins */
} sz_context_config;

void sz_context_config_defaults(sz_context_config *cfg);

/* Starts MPI (MPI_THREAD_MULTIPLE, if not already started), hwloc, StarPU and StarPU-MPI.
 * argc/argv may be NULL. On success *out owns the runtime until sz_context_free(). */
sz_status sz_context_init(sz_context **out, const sz_context_config *cfg, int *argc, char ***argv);

/* Waits for all tasks, shuts StarPU-MPI, StarPU and (if we started it) MPI down. NULL is fine. */
void sz_context_free(sz_context *ctx);

int sz_context_rank(const sz_context *ctx);
int sz_context_world_size(const sz_context *ctx);

/* Logs through the context's sink (printf-style). */
void sz_context_log(const sz_context *ctx, sz_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The node as hwloc sees it, and this rank's place on it. */
typedef struct sz_topology {
    int packages, numa_nodes, cores, pus; /* whole node */
    int gpus;                             /* CUDA/NVML/OpenCL GPUs hwloc found (0 without I/O info) */
    int local_rank, local_size;           /* this rank among the ranks sharing the node */
    int first_core, ncores;               /* this rank's share of the node's cores */
    char hostname[64];
} sz_topology;

sz_status sz_context_topology(const sz_context *ctx, sz_topology *out);

/* What the running StarPU offers this rank. */
typedef struct sz_runtime_info {
    char starpu_version[32];
    int cpu_workers, cuda_workers, opencl_workers, workers;
    int memory_nodes;
    int has_fxt, has_cuda, has_mpi, has_blocking_drivers;
    int max_cpus;                          /* STARPU_MAXCPUS of the build */
    char sched_policy[32];                 /* the policy in effect */
} sz_runtime_info;

sz_status sz_context_runtime_info(const sz_context *ctx, sz_runtime_info *out);

/* Prints topology, workers, memory nodes (with their byte totals) and build features. */
void sz_context_print(const sz_context *ctx, FILE *out);

/* Collective: every rank's sz_context_print text, written by rank 0 in rank order. */
sz_status sz_context_print_all(const sz_context *ctx, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* STARZERO_H */
