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

/* Command-line numbers: counts with K M B G T suffixes (1e3 ...), and byte sizes with K M G T
 * (KB ...; powers of 1000) or KiB MiB GiB TiB (powers of 1024). SZ_ERR_INVALID when malformed. */
sz_status sz_parse_count(const char *s, double *out);
sz_status sz_parse_bytes(const char *s, double *out);

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
    int ncpus;                 /* StarPU CPU workers for this rank; -1: one, whose compute tasks
                                  run OpenMP-parallel over the rank's whole core share (node cores /
                                  ranks on the node). STARPU_NCPU wins. */
    int ncuda;                 /* CUDA workers; -1: StarPU's default. STARPU_NCUDA wins. */
    int bind_share;            /* 1: bind this rank's workers to its own share of the node's cores,
                                  so co-located ranks never pile onto the same cores */
    int comm_worker;           /* 1: one more CPU worker that runs only the communication tasks
                                  (under the zero policy), so collectives run while compute does;
                                  0: none; -1: on with several ranks of two cores or more each.
                                  SZ_COMM_WORKER=0|1 wins. */
    int kernel_threads;        /* OpenMP threads per compute task; -1: this rank's cores. Fixed,
                                  so results are bitwise the same whatever STARPU_NCPU says. */
    const char *sched_policy;  /* StarPU policy name; NULL or "zero": StarZeRO's `zero` policy
                                  (sched/policy.c). STARPU_SCHED in the environment wins. */
    const char *trace_dir;     /* non-NULL: this rank writes its FxT trace (prof_file_<user>_<rank>)
                                  there; NULL: no trace (STARPU_FXT_TRACE=0 unless the user set it) */
    sz_log_fn log_fn;          /* NULL: sz_log_stderr */
    void *log_user;
    sz_log_level log_level;    /* default SZ_LOG_WARN; SZ_LOG env var (error|warn|info|debug) wins */
    double timeout_s;          /* no collective waits forever: a wait longer than max(timeout_s, 5 x the
                                  slowest step so far) makes the rank say whom it waited for (in which
                                  collective, task and step) and end the job with MPI_Abort (exit code 3);
                                  StarPU's watchdog is armed at 2 x timeout_s unless STARPU_WATCHDOG_TIMEOUT
                                  is set. Default 600; 0: no deadline. */
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
    int comm_worker;           /* the worker id that runs only communication tasks; -1: none */
    int memory_nodes;
    int has_fxt, has_cuda, has_mpi, has_blocking_drivers;
    int max_cpus;                          /* STARPU_MAXCPUS of the build */
    char sched_policy[32];                 /* the policy in effect */
    int shared_collectives;    /* 1: the ranks (all on this node) read each other's device pools
                                  in our collectives; 0: the collectives go through MPI */
} sz_runtime_info;

sz_status sz_context_runtime_info(const sz_context *ctx, sz_runtime_info *out);

/* Collective: values[i] becomes the sum over ranks (added in rank order) of every rank's values[i]. */
sz_status sz_context_sum(sz_context *ctx, double *values, int n);

/* Prints topology, workers, memory nodes (with their byte totals) and build features. */
void sz_context_print(const sz_context *ctx, FILE *out);

/* Collective: every rank's sz_context_print text, written by rank 0 in rank order. */
sz_status sz_context_print_all(const sz_context *ctx, FILE *out);

/* ---- agreement: what every rank must share ----------------------------------------------
 * A list of settings (name, value as text) that must be equal on every rank: model shape, ZeRO
 * configuration, batch, optimizer, seed, data files, version... Every rank adds the same names in
 * the same order. sz_model_finalize checks the model's units and ZeRO configuration this way. */
typedef struct sz_settings sz_settings;
sz_status sz_settings_init(sz_settings **out);
void sz_settings_free(sz_settings *s);
/* Appends one setting; the value is printf-formatted (print floats exactly, e.g. "%.9g"). */
sz_status sz_settings_add(sz_settings *s, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sz_settings_count(const sz_settings *s);
/* Collective (all ranks): SZ_OK when every rank's list equals this one. Otherwise SZ_ERR_INVALID on
 * every rank, and the same message everywhere, logged as an error and copied into msg (may be
 * NULL), naming the first setting that differs and each rank's value, e.g. "sz-train: the ranks
 * disagree on --zero-stage: 0 on rank 0; 1 on rank 1". `what` starts the message. Waits under
 * the context's deadline (timeout_s). */
sz_status sz_context_agree(sz_context *ctx, const sz_settings *s, const char *what, char *msg, size_t msglen);


/* ---- tensors ------------------------------------------------------------------------------
 * A tensor is a StarPU data handle with a dtype and an element count, owned by a model. Tasks
 * read and write it; the app touches its bytes only through sz_tensor_read / sz_tensor_write,
 * which wait for the tasks that use it. */
typedef enum sz_dtype { SZ_DTYPE_F32 = 0, SZ_DTYPE_BF16, SZ_DTYPE_I32 } sz_dtype;
typedef struct sz_tensor sz_tensor;

size_t sz_dtype_size(sz_dtype dtype);
int64_t sz_tensor_numel(const sz_tensor *t);
sz_dtype sz_tensor_dtype(const sz_tensor *t);
const char *sz_tensor_name(const sz_tensor *t);
/* Copy numel elements out of / into the tensor (blocking: waits for the tasks on it). */
sz_status sz_tensor_read(sz_tensor *t, void *dst);
sz_status sz_tensor_write(sz_tensor *t, const void *src);

/* ---- models: a sequence of units --------------------------------------------------------
 * A unit (an embedding, a transformer block, a head) is the granularity at which parameters
 * are gathered and released, like an FSDP unit. Its parameter tensors are declared by ONE
 * table of sz_param_spec rows; the library lays them out in one flat buffer per unit (and the
 * same for gradients and optimizer state). The unit's forward and backward callbacks submit
 * tasks with the sz_op_* calls below; they never compute anything themselves. */
typedef enum sz_init { SZ_INIT_ZERO = 0, SZ_INIT_ONE, SZ_INIT_NORMAL } sz_init;

typedef struct sz_param_spec {
    const char *name;     /* e.g. "qkvw" */
    int64_t rows, cols;   /* shape; a vector has rows = 1 */
    int decay;            /* 1: weight decay applies under SZ_DECAY_MATRICES */
    sz_init init;
    float init_std;       /* for SZ_INIT_NORMAL */
} sz_param_spec;

typedef struct sz_model sz_model;
typedef struct sz_unit sz_unit;   /* handed to the callbacks */
typedef sz_status (*sz_unit_fn)(sz_unit *unit, void *user);

typedef struct sz_unit_desc {
    const char *name;              /* "block3": task names become "fwd:block3", "bwd:block3", ... */
    const sz_param_spec *params;   /* the unit's tensor table */
    int nparams;
    sz_unit_fn forward, backward;  /* backward may be NULL for a unit without gradients */
    void *user;
    int checkpointable;            /* under sz_zero_config.checkpoint: its activations (sz_model_activation)
                                      are shared with the other checkpointable units and recomputed */
    const int *uses;               /* other (earlier) units whose parameters this unit reads and whose
                                      gradients it accumulates into: tied weights (GPT-2's head uses
                                      the embedding's wte). ZeRO-3 gathers them with this unit. */
    int nuses;
    int backward_skips_params;     /* 1: backward reads none of the unit's parameters (an embedding
                                      lookup's backward only scatters gradients), so ZeRO-3 does
                                      not gather them for it (nor mixed precision convert them),
                                      unless the unit is recomputed under checkpointing */
} sz_unit_desc;

/* ZeRO: where model states live. Set before sz_model_finalize; defaults: stage 0, 1 micro-batch,
 * fp32. */
typedef enum sz_precision {
    SZ_PRECISION_FP32 = 0, /* fp32 params, grads, Adam m and v */
    SZ_PRECISION_BF16,     /* mixed: bf16 params and grads (stored and communicated), fp32 master
                              weights and Adam m, v; compute tasks read an fp32 working copy of
                              one unit at a time and write fp32 working gradients */
} sz_precision;

typedef struct sz_zero_config {
    int stage;            /* 0 plain data parallelism, 1 P_os, 2 P_os+g, 3 P_os+g+p */
    int micro_batches;    /* forward/backward passes per optimizer step (gradient accumulation) */
    sz_precision precision;
    int64_t mem_budget;     /* bytes per rank; 0: none. A plan whose predicted peak exceeds it is
                               refused by sz_model_finalize (SZ_ERR_BUDGET, with what would fit) */
    int64_t prefetch_bytes; /* stage 3: parameter bytes gathered ahead of the unit computing
                               (like DeepSpeed's stage3_prefetch_bucket_size, but in bytes) */
    int64_t max_live_bytes; /* stage 3: gathered parameter bytes alive at once; 0: no limit beyond
                               prefetch_bytes (like stage3_max_live_parameters, in bytes) */
    int64_t bucket_bytes;   /* C_B: reduce-scatters run through a receive buffer of this many bytes,
                               whatever the model's size;
                               0: SZ_DEFAULT_BUCKET_BYTES */
    int checkpoint;         /* activation checkpointing (ZeRO-R): checkpointable units keep only
                               their inputs; their backward first recomputes their forward */
    int offload_checkpoints;/* P_a+cpu (needs checkpoint): after a unit's forward its checkpoint
                               moves to a host pool by a task, and comes back before its recompute */
    int arenas;             /* M_D (default 1): long-lived tensors (parameters or shards, gradient
                               shards, optimizer state, checkpoints, activations) in one contiguous
                               arena of the device pool; 0: each placed among the temporaries */
} sz_zero_config;
void sz_zero_config_defaults(sz_zero_config *z);
#define SZ_DEFAULT_BUCKET_BYTES ((int64_t)32 << 20)

sz_status sz_model_init(sz_model **out, sz_context *ctx);
void sz_model_free(sz_model *m);
/* Adds a unit (the table is copied). Units run forward in the order they are added. */
sz_status sz_model_add_unit(sz_model *m, const sz_unit_desc *desc);
/* A model-owned working tensor (activations, tokens, losses); zero-filled at creation. */
sz_tensor *sz_model_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel);
/* The checkpoint of checkpointable unit `unit`: its input, written by unit `unit`-1's forward.
 * A plain model tensor unless checkpoints are offloaded (then it lives on the device pool only
 * between its producer's forward and its consumer's forward, and again around its recompute). */
sz_tensor *sz_model_checkpoint(sz_model *m, int unit, const char *name, sz_dtype dtype, int64_t numel);
/* An activation unit `unit`'s forward writes and its backward reads. Without checkpointing each
 * unit gets its own; with checkpointing, checkpointable units share one tensor per name (each
 * backward recomputes it first), so one unit's activations exist instead of all of them. The
 * unit's inputs must be sz_model_tensor()s: they are the checkpoints. Before sz_model_finalize. */
sz_tensor *sz_model_activation(sz_model *m, int unit, const char *name, sz_dtype dtype, int64_t numel);
sz_status sz_model_set_zero(sz_model *m, const sz_zero_config *z);
/* After the last unit is added: allocates and registers parameters, gradients, optimizer state
 * (each unit's parameters one flat buffer padded to a multiple of the rank count; rank r owns
 * slice r). */
sz_status sz_model_finalize(sz_model *m);

int sz_model_nunits(const sz_model *m);
int64_t sz_model_nparams(const sz_model *m);          /* real parameters, padding excluded */
/* Parameter i of unit u, in the unit's table order: read or write its values (fp32). With several
 * ranks these are collective (every rank calls them, in the same order): values are assembled
 * from the owners' shards. Gradients are the reduced ones of the last step. */
sz_status sz_model_param_read(sz_model *m, int unit, int param, float *dst);
sz_status sz_model_param_write(sz_model *m, int unit, int param, const float *src);
sz_status sz_model_grad_read(sz_model *m, int unit, int param, float *dst);
/* Initialise every parameter from its spec; the stream of each tensor depends only on
 * (seed, unit index, param index), so layout and rank never change the values. */
sz_status sz_model_init_params(sz_model *m, uint64_t seed);

/* Parameter (or gradient) tensor i of any unit: how a unit uses tied weights of another
 * (GPT-2's head reads the embedding's wte, and its gradient accumulates into the same tensor). */
sz_tensor *sz_model_param(sz_model *m, int unit, int i);
sz_tensor *sz_model_grad(sz_model *m, int unit, int i);

/* Inside callbacks. */
sz_tensor *sz_unit_param(sz_unit *u, int i);
sz_tensor *sz_unit_grad(sz_unit *u, int i);
int sz_unit_index(const sz_unit *u);
const char *sz_unit_name(const sz_unit *u);
sz_model *sz_unit_model(sz_unit *u);

/* ---- operations (each one StarPU task; semantics exactly llm.c's GPT-2) -------------------
 * Shapes: N = B*T rows. Backward ops ACCUMULATE (+=) into their gradient outputs, like llm.c;
 * zero what must start at zero with sz_op_zero. */
sz_status sz_op_zero(sz_unit *u, sz_tensor *t);
sz_status sz_op_encoder_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tokens, sz_tensor *wte, sz_tensor *wpe,
                            int B, int T, int C);
sz_status sz_op_encoder_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *dout, sz_tensor *tokens,
                            int B, int T, int C);
sz_status sz_op_layernorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *mean, sz_tensor *rstd, sz_tensor *inp,
                              sz_tensor *w, sz_tensor *b, int N, int C);
sz_status sz_op_layernorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                              sz_tensor *inp, sz_tensor *w, sz_tensor *mean, sz_tensor *rstd, int N, int C);
/* out[N,OC] = inp[N,C] . w[OC,C]^T + b (b may be NULL) */
sz_status sz_op_matmul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, sz_tensor *w, sz_tensor *b,
                           int N, int C, int OC);
sz_status sz_op_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                           sz_tensor *inp, sz_tensor *w, int N, int C, int OC);
/* inp[B,T,3C] (q,k,v) -> out[B,T,C]; preatt, att [B,NH,T,T] saved for backward */
sz_status sz_op_attention_fwd(sz_unit *u, sz_tensor *out, sz_tensor *preatt, sz_tensor *att, sz_tensor *inp,
                              int B, int T, int C, int NH);
sz_status sz_op_attention_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, sz_tensor *inp, sz_tensor *att,
                              int B, int T, int C, int NH);
sz_status sz_op_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n);
sz_status sz_op_gelu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n);
sz_status sz_op_residual_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n);
sz_status sz_op_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, int64_t n);
/* logits[N,Vp] -> probs[N,Vp], losses[N] over the first V columns; targets int32[N] */
sz_status sz_op_softmax_xent_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *probs, sz_tensor *logits,
                                 sz_tensor *targets, int N, int V, int Vp);
/* dlogits = (probs - onehot) * dloss, dloss = 1/N for every row (mean loss) */
sz_status sz_op_softmax_xent_bwd(sz_unit *u, sz_tensor *dlogits, sz_tensor *probs, sz_tensor *targets,
                                 int N, int V, int Vp);

/* ---- training ---------------------------------------------------------------------------- */
typedef enum sz_decay { SZ_DECAY_MATRICES = 0, SZ_DECAY_ALL } sz_decay;

typedef struct sz_train_config {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_clip;      /* clip the global gradient norm to this; 0: off */
    sz_decay decay;       /* which tensors weight decay applies to */
} sz_train_config;

void sz_train_config_defaults(sz_train_config *cfg);  /* lr 3e-4, 0.9, 0.999, 1e-8, wd 0, no clip */

/* The tensor of per-row losses the last unit writes (mean = the step's loss). */
sz_status sz_model_set_loss(sz_model *m, sz_tensor *losses);
/* Forward only (evaluation): submits every unit's forward, waits, returns the mean loss. */
sz_status sz_model_eval(sz_model *m, float *loss);
/* One micro-batch: forward and backward (gradients accumulate until sz_model_update). *loss is
 * the mean over all ranks of this micro-batch's loss. Call it micro_batches times per step. */
sz_status sz_model_forward_backward(sz_model *m, float *loss);
/* The optimizer step t >= 1 after micro_batches forward/backward passes: reduce gradients,
 * clip, AdamW on the owned shard, share the updated parameters (as the stage requires). */
sz_status sz_model_update(sz_model *m, const sz_train_config *cfg, int t);
/* forward_backward + update, for micro_batches == 1. */
sz_status sz_model_train_step(sz_model *m, const sz_train_config *cfg, int t, float *loss);
/* The global gradient norm of the last step (before clipping). */
float sz_model_last_grad_norm(const sz_model *m);

/* ---- accounting: what the engine holds, measured as it allocates and frees ---------------- */
typedef enum sz_mem_category {
    SZ_MEM_PARAMS = 0,      /* full parameters (stages 0-2) */
    SZ_MEM_PARAM_SHARD,     /* this rank's parameter shard (stage 3) */
    SZ_MEM_GATHERED,        /* gathered units (stage 3) and fp32 working copies (bf16) in flight (peak) */
    SZ_MEM_GRADS,           /* full gradients (stages 0-1) */
    SZ_MEM_GRAD_SHARD,      /* this rank's gradient shard (stages 2-3) */
    SZ_MEM_GRADS_IN_FLIGHT, /* a unit's gradients between its backward and their reduce-scatter (stages 2-3)
                               or their conversion to bf16 (mixed precision) (peak) */
    SZ_MEM_MASTER,          /* fp32 master weights (mixed precision) */
    SZ_MEM_ADAM_M,
    SZ_MEM_ADAM_V,
    SZ_MEM_ACTIVATIONS,     /* model tensors: activations, their gradients, inputs */
    SZ_MEM_COMM,            /* communication buffers */
    SZ_MEM_CHECKPOINTS,     /* offloaded activation checkpoints while on the device pool (peak) */
    SZ_MEM_HOST,            /* the host pool: offloaded checkpoints (not part of the device peak) */
    SZ_MEM_NCATEGORIES
} sz_mem_category;

const char *sz_mem_category_name(sz_mem_category c);

/* The device pool (CPU-only nodes): one reserved region that StarPU's allocations for this rank's
 * data (temporaries: gathered units, gradients in flight, working copies) and the model's
 * long-lived tensors share. With arenas (M_D) the long-lived ones are one contiguous block at the
 * top; without, each is placed first-fit among the temporaries. The footprint is the bottom's
 * high-water mark plus the arena: the memory a device would need. */
typedef struct sz_pool_stats {
    int64_t capacity;             /* bytes reserved (the rank's share of RAM; pages commit on use) */
    int64_t used;                 /* bytes in blocks now */
    int64_t peak_used;            /* the most bytes in blocks at once */
    int64_t footprint;            /* the largest extent ever used (high-water mark + arena) */
    int64_t arena_at_peak;        /* the arena's bytes at the peak */
    int64_t free_at_peak;         /* fragmentation at the peak: free bytes inside the footprint ... */
    int64_t largest_free_at_peak; /* ... and the largest free block among them */
    int64_t worst_free, worst_largest_free; /* the moment the most free bytes were unusable in one
                                               piece: free bytes inside the footprint, largest block */
    int64_t worst_unusable;       /* that moment's free bytes minus its largest free block */
    int64_t frag_growth;          /* bytes the footprint grew by although enough was free in pieces */
    int64_t failures;             /* requests no free block could hold (served outside the pool) */
} sz_pool_stats;

typedef struct sz_memory_report {
    int64_t bytes[SZ_MEM_NCATEGORIES]; /* persistent categories: bytes held; transient ones: peak */
    int64_t model_state_bytes;         /* params or shard + grads or shard + master + m + v */
    int64_t peak_bytes;                /* everything persistent + the peak of the transients */
    int64_t device_peak_bytes;         /* the same without the host pool (SZ_MEM_HOST) */
    int64_t comm_bytes_sent, comm_bytes_received; /* during the last optimizer step */
    double comm_seconds;               /* time inside the collectives during the last step */
    int64_t nparams, nparams_padded;
    int stage, nd, micro_batches;
    sz_precision precision;
    int64_t predicted_peak_bytes;      /* the plan's prediction, made before the first step */
    double overlap;                    /* last step: fraction of communication time during which
                                          compute ran too (measured by the zero policy; -1: other policy) */
    double comm_task_s, compute_task_s; /* last step: seconds communication tasks ran, and the
                                          seconds any compute task ran (the union) */
    int ntimeline;                     /* last step: live transient bytes over time, at most 64 points */
    double timeline_ms[64];            /*   ms since the step began */
    int64_t timeline_bytes[64];        /*   transient bytes alive then (persistent ones come on top) */
    int64_t mem_budget;
    int arenas;                        /* M_D on (sz_zero_config.arenas) */
    int pool_active;                   /* the device pool below is in use (CPU-only nodes) */
    sz_pool_stats pool;
} sz_memory_report;

sz_status sz_model_memory_report(const sz_model *m, sz_memory_report *out);
/* Collective yardstick: plain MPI_Reduce_scatter_block + MPI_Allgather on the same element counts
 * (one per unit), with buffers allocated once and reused, `reps` times. Returns the bytes received
 * per rank per second (what sz-bench reports as mpi_gbps beside the engine's comm_gbps). */
sz_status sz_context_mpi_baseline(sz_context *ctx, const int64_t *elems, int n, int reps, double *bytes_per_s);
/* Each unit's padded element count (n = sz_model_nunits), for the yardstick above. */
sz_status sz_model_unit_sizes(const sz_model *m, int64_t *padded);

/* Collective: every rank's report, gathered on rank 0 into ranks[0..nd-1] (other ranks may pass NULL). */
sz_status sz_model_memory_report_all(const sz_model *m, sz_memory_report *ranks);

/* ==== GPT-2's tensor table and llm.c's file formats (pure C, no runtime) ==================== */
/* The shape of a GPT-2 model, as in llm.c's checkpoint header. */
typedef struct sz_gpt2_config {
    int max_seq;      /* maxT: positions in wpe */
    int vocab;        /* V: real vocabulary size (50257 for GPT-2's tokenizer, 256 byte-level) */
    int padded_vocab; /* Vp >= V: rows of wte (llm.c pads to a multiple of 128 for speed) */
    int layers;       /* L: transformer blocks */
    int heads;        /* NH: attention heads; channels % heads == 0 */
    int channels;     /* C: model width */
} sz_gpt2_config;

/* Symbolic sizes a table row's shape is made of; resolved against a config. */
typedef enum sz_gpt2_dim {
    SZ_GPT2_DIM_ONE = 0, /* 1 (the "cols" of a vector) */
    SZ_GPT2_DIM_C,       /* channels */
    SZ_GPT2_DIM_3C,      /* 3 * channels (fused q, k, v) */
    SZ_GPT2_DIM_4C,      /* 4 * channels (MLP hidden) */
    SZ_GPT2_DIM_VP,      /* padded_vocab */
    SZ_GPT2_DIM_MAXT,    /* max_seq */
} sz_gpt2_dim;

/* How a tensor is initialized for training from scratch (llm.c / GPT-2 convention). */
typedef enum sz_gpt2_init {
    SZ_GPT2_INIT_NORMAL = 0,       /* N(0, 0.02^2) */
    SZ_GPT2_INIT_NORMAL_RESIDUAL,  /* N(0, (0.02/sqrt(2L))^2): projections into the residual */
    SZ_GPT2_INIT_ZEROS,            /* biases and layernorm biases */
    SZ_GPT2_INIT_ONES,             /* layernorm weights */
} sz_gpt2_init;

/* Names for the rows of the table, in llm.c's checkpoint order. The table is keyed by these
 * (designated initializers), so an index always means the same tensor. */
typedef enum sz_gpt2_tensor_id {
    SZ_GPT2_WTE = 0,  /* (Vp, C)            token embedding, tied with the LM head */
    SZ_GPT2_WPE,      /* (maxT, C)          position embedding */
    SZ_GPT2_LN1W,     /* L x (C)            */
    SZ_GPT2_LN1B,     /* L x (C)            */
    SZ_GPT2_QKVW,     /* L x (3C, C)        */
    SZ_GPT2_QKVB,     /* L x (3C)           */
    SZ_GPT2_ATTPROJW, /* L x (C, C)         */
    SZ_GPT2_ATTPROJB, /* L x (C)            */
    SZ_GPT2_LN2W,     /* L x (C)            */
    SZ_GPT2_LN2B,     /* L x (C)            */
    SZ_GPT2_FCW,      /* L x (4C, C)        */
    SZ_GPT2_FCB,      /* L x (4C)           */
    SZ_GPT2_FCPROJW,  /* L x (C, 4C)        */
    SZ_GPT2_FCPROJB,  /* L x (C)            */
    SZ_GPT2_LNFW,     /* (C)                */
    SZ_GPT2_LNFB,     /* (C)                */
    SZ_GPT2_NUM_TENSORS
} sz_gpt2_tensor_id;

/* One row of the table. Weights are stored (out, in) row-major: y = x . W^T + b, so for a
 * matrix rows = out features and cols = in features. A vector has cols = SZ_GPT2_DIM_ONE.
 * A per-layer tensor is L copies of (rows x cols), layer-major and contiguous.
 * Note: llm.c initializes only the first V rows of wte; rows V..Vp-1 stay zero. */
typedef struct sz_gpt2_tensor_spec {
    const char *name;    /* llm.c's name: "wte", "qkvw", ... */
    int per_layer;       /* 1: one (rows x cols) block per transformer layer */
    sz_gpt2_dim rows;
    sz_gpt2_dim cols;
    int is_matrix;       /* 1: a 2-D weight matrix; weight decay applies under `--decay matrices`
                            (wte, wpe, qkvw, attprojw, fcw, fcprojw — exactly llm.c's choice) */
    sz_gpt2_init init;
} sz_gpt2_tensor_spec;

/* The table row of tensor `id`; NULL when id is out of range. */
const sz_gpt2_tensor_spec *sz_gpt2_tensor(int id);

/* The id of the tensor called `name`, or -1. */
int sz_gpt2_tensor_find(const char *name);

/* The value of a symbolic size under `cfg`. */
size_t sz_gpt2_dim_value(const sz_gpt2_config *cfg, sz_gpt2_dim dim);

/* Rows and columns of one layer's block of tensor `id` (of the whole tensor if not per-layer).
 * Returns 0 (and zeros) for a bad id. */
int sz_gpt2_tensor_shape(const sz_gpt2_config *cfg, int id, size_t *rows, size_t *cols);

/* Elements of one layer's block (rows * cols); the whole tensor if it is not per-layer. */
size_t sz_gpt2_tensor_layer_numel(const sz_gpt2_config *cfg, int id);

/* Elements of the whole tensor (layer_numel * L for a per-layer tensor). */
size_t sz_gpt2_tensor_numel(const sz_gpt2_config *cfg, int id);

/* Offset (in elements) of tensor `id` in llm.c's flat parameter order. */
size_t sz_gpt2_tensor_offset(const sz_gpt2_config *cfg, int id);

/* Offset (in elements) of layer `layer`'s block of tensor `id` in the flat order; for a tensor
 * that is not per-layer, `layer` is ignored. */
size_t sz_gpt2_tensor_layer_offset(const sz_gpt2_config *cfg, int id, int layer);

/* Total parameter count (sum of every tensor's numel, padded vocab rows included). */
size_t sz_gpt2_num_params(const sz_gpt2_config *cfg);

/* Standard deviation for a normal init of tensor `id` (0.02 or 0.02/sqrt(2L)); 0 for the
 * zeros/ones kinds. */
float sz_gpt2_tensor_init_std(const sz_gpt2_config *cfg, int id);

/* `vocab` rounded up to a multiple of 128, like llm.c (50257 -> 50304, 256 -> 256). */
int sz_gpt2_padded_vocab(int vocab);

/* Checks a config: every field > 0, channels % heads == 0, padded_vocab >= vocab, and a total
 * size that fits in memory arithmetic. SZ_ERR_INVALID with a message in `err` otherwise.
 * `err` may be NULL. */
sz_status sz_gpt2_config_validate(const sz_gpt2_config *cfg, char *err, size_t errlen);

/* Fills *out from a preset name — "d2" (L2,H4,C128), "d6" (6,6,384), "d12" (12,12,768) — or an
 * "L,H,C" string such as "4,4,256"; vocab and max_seq are given separately and padded_vocab is
 * sz_gpt2_padded_vocab(vocab). The result is validated. *out is untouched on failure. */
sz_status sz_gpt2_config_from_string(sz_gpt2_config *out, const char *spec, int vocab, int max_seq,
                                     char *err, size_t errlen);

/* Writes "L=12 H=12 C=768 V=50257 Vp=50304 maxT=1024" into buf (snprintf semantics). */
int sz_gpt2_config_format(const sz_gpt2_config *cfg, char *buf, size_t buflen);

/* Both formats start with 256 little-endian int32s. */
#define SZ_LLMC_HEADER_INTS 256
#define SZ_LLMC_HEADER_BYTES (SZ_LLMC_HEADER_INTS * 4)

/* Checkpoint header: [0] magic, [1] version, [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp;
 * then sz_gpt2_num_params() fp32 values in gpt2_spec.h's table order. */
#define SZ_LLMC_MODEL_MAGIC 20240326
#define SZ_LLMC_MODEL_VERSION_FP32 3 /* llm.c's version 5 (bf16) is refused with a clear message */

/* Token file header: [0] magic, [1] version, [2] token count; then count uint16 tokens. */
#define SZ_LLMC_TOKENS_MAGIC 20240520
#define SZ_LLMC_TOKENS_VERSION 1

/* Every function below: `err` may be NULL; otherwise a message of the form
 * "<path>: <what is wrong>" is written there on failure (truncated to errlen).
 * Statuses: SZ_ERR_IO (cannot open/read/write), SZ_ERR_FORMAT (contents wrong),
 * SZ_ERR_INVALID (bad arguments), SZ_ERR_NOMEM. On failure no output is modified. */

/* Reads and validates a checkpoint's header, and checks that the file's size is exactly the
 * header plus the parameters it announces. Reads no parameters. */
sz_status sz_llmc_checkpoint_read_header(const char *path, sz_gpt2_config *cfg_out, char *err,
                                         size_t errlen);

/* Reads a whole checkpoint. On success *params_out is a malloc'd array of
 * *nparams_out == sz_gpt2_num_params(cfg_out) floats in llm.c's flat order; release it with
 * free(). nparams_out may be NULL. */
sz_status sz_llmc_checkpoint_read(const char *path, sz_gpt2_config *cfg_out, float **params_out,
                                  size_t *nparams_out, char *err, size_t errlen);

/* Writes a checkpoint (version 3, fp32). `nparams` must equal sz_gpt2_num_params(cfg) and cfg
 * must be valid (SZ_ERR_INVALID otherwise, nothing written). Writes `path`.tmp, flushes it to
 * disk, then renames it over `path`; on failure the temporary is removed and `path` untouched. */
sz_status sz_llmc_checkpoint_write(const char *path, const sz_gpt2_config *cfg, const float *params,
                                   size_t nparams, char *err, size_t errlen);

/* Compares the config read from checkpoint `path` (`got`) with the one the run expects.
 * SZ_OK when all six fields agree; otherwise SZ_ERR_FORMAT with a message naming the file and,
 * for each field that differs, both values, e.g.
 * "model.bin: checkpoint does not match the requested model: vocab V=50257 in the file but 256
 * expected; ... (file: L=12 H=12 C=768 V=50257 Vp=50304 maxT=1024; expected: ...)". */
sz_status sz_llmc_check_config(const char *path, const sz_gpt2_config *got,
                               const sz_gpt2_config *expected, char *err, size_t errlen);

/* Reads a whole token file into memory. When vocab > 0 every token must be < vocab
 * (SZ_ERR_FORMAT naming the first offending position otherwise); vocab <= 0 skips that check.
 * On success *tokens_out is a malloc'd array of *count_out tokens (release with free()); a file
 * announcing 0 tokens is valid and gives a NULL array and a count of 0. */
sz_status sz_llmc_tokens_read(const char *path, int vocab, uint16_t **tokens_out, size_t *count_out,
                              char *err, size_t errlen);

/* Writes a token file (at most INT32_MAX tokens) through `path`.tmp + rename. */
sz_status sz_llmc_tokens_write(const char *path, const uint16_t *tokens, size_t count, char *err,
                               size_t errlen);

/* ==== the ZeRO estimator: model-state bytes, communication, shards, activations (pure C) ==== */
/* Conventions for every function below:
 *  - stage is the ZeRO stage: 0 plain data parallelism, 1 P_os, 2 P_os+g, 3 P_os+g+p;
 *  - psi (Ψ) is the parameter count, a double so 7.5e9 needs no integer type; the per-rank
 *    shares are the exact Ψ/N_d of the paper (the implementation pads each unit's flat buffer
 *    to a multiple of N_d, see sz_zero_padded, which adds < N_d elements per unit);
 *  - nd is N_d, the number of data-parallel ranks (>= 1);
 *  - mixed != 0 means mixed precision: 2-byte (bf16) params and grads, plus an fp32 master copy
 *    and fp32 Adam m and v (K = 12). mixed == 0 means fp32: 4-byte params, grads, m and v and no
 *    master copy.
 *  - A function returning a double returns -1.0 for an invalid argument (stage outside 0..3,
 *    psi < 0 or not finite, nd < 1, ...). None of them prints or allocates. */

/* ---- model states ------------------------------------------------------------------------ */

/* Persistent model-state bytes per rank (params or their shard, grads or their shard, master,
 * Adam m and v; never activations, gathered units in flight or communication buffers):
 *
 *   stage | mixed (K=12)     | fp32
 *   0     | 16Ψ              | 16Ψ
 *   1     | 4Ψ + 12Ψ/N       | 8Ψ + 8Ψ/N
 *   2     | 2Ψ + 14Ψ/N       | 4Ψ + 12Ψ/N
 *   3     | 16Ψ/N            | 16Ψ/N
 *
 * Paper check (Ψ = 7.5e9, N = 64, mixed): 120e9, 31.40625e9, 16.640625e9, 1.875e9 bytes. */
double sz_zero_model_state_bytes(int stage, double psi, int nd, int mixed);

/* The same bytes per rank, split by category; the seven fields sum to
 * sz_zero_model_state_bytes(). A field a stage does not hold is 0. */
typedef struct sz_zero_breakdown {
    double params;      /* full parameters, held by every rank (stages 0-2): 2Ψ mixed, 4Ψ fp32 */
    double param_shard; /* stage 3: this rank's 1/N of the parameters */
    double grads;       /* full gradient buffer (stages 0-1): 2Ψ mixed, 4Ψ fp32 */
    double grad_shard;  /* stages 2-3: this rank's 1/N of the gradients */
    double master;      /* fp32 master parameters, mixed only: 4Ψ at stage 0, 4Ψ/N otherwise */
    double adam_m;      /* fp32 Adam first moment: 4Ψ at stage 0, 4Ψ/N otherwise */
    double adam_v;      /* fp32 Adam second moment: 4Ψ at stage 0, 4Ψ/N otherwise */
} sz_zero_breakdown;

/* Fills *out (every field) for (stage, psi, nd, mixed). SZ_ERR_INVALID, and *out untouched, for
 * an invalid argument or out == NULL. */
sz_status sz_zero_state_breakdown(int stage, double psi, int nd, int mixed, sz_zero_breakdown *out);

/* ---- communication ----------------------------------------------------------------------- */

/* Elements each rank sends per step (equal to those it receives) with one micro-batch:
 * stages 0-2 2Ψ(N-1)/N (stage 0 all-reduce; 1-2 reduce-scatter + all-gather), stage 3
 * 3Ψ(N-1)/N (all-gather for forward, all-gather for backward, reduce-scatter). 0 when N = 1. */
double sz_zero_comm_elems(int stage, double psi, int nd);

/* The same with M >= 1 micro-batches per step (gradient accumulation). Stages 0-1 accumulate
 * locally and communicate once per step (as above, whatever M); stage 2 reduce-scatters every
 * micro-batch and all-gathers once: M·Ψ(N-1)/N + Ψ(N-1)/N; stage 3 gathers for forward and for
 * backward and reduce-scatters every micro-batch: 3·M·Ψ(N-1)/N. M = 1 gives sz_zero_comm_elems. */
double sz_zero_comm_elems_mb(int stage, double psi, int nd, int micro_batches);

/* Bytes: elements × the communicated dtype's size, 2 (bf16) when mixed, 4 (fp32) otherwise. */
double sz_zero_comm_bytes(int stage, double psi, int nd, int mixed);
double sz_zero_comm_bytes_mb(int stage, double psi, int nd, int mixed, int micro_batches);

/* ---- shard math -------------------------------------------------------------------------- */

/* numel rounded up to a multiple of nd (a unit's flat buffer is padded, never rejected):
 * (10, 3) -> 12. -1 when numel < 0, nd < 1 or the result would overflow. */
int64_t sz_zero_padded(int64_t numel, int nd);

/* Elements of each rank's slice: sz_zero_padded(numel, nd) / nd; (10, 3) -> 4. -1 as above. */
int64_t sz_zero_shard(int64_t numel, int nd);

/* ---- GPT-2 activations ------------------------------------------------------------------- */

/* Bytes of llm.c's ActivationTensors (fp32) for one micro-batch of B sequences of T tokens,
 * counted tensor by tensor (N = B·T, L layers, C channels, NH heads, Vp padded vocab):
 *   encoded N·C; per layer: ln1 N·C, ln1_mean N, ln1_rstd N, qkv 3N·C, atty N·C,
 *   preatt B·NH·T·T, att B·NH·T·T, attproj N·C, residual2 N·C, ln2 N·C, ln2_mean N, ln2_rstd N,
 *   fch 4N·C, fch_gelu 4N·C, fcproj N·C, residual3 N·C; head: lnf N·C, lnf_mean N, lnf_rstd N,
 *   logits N·Vp, probs N·Vp, losses N.
 * Total floats: 2NC + L(18NC + 4N + 2·B·NH·T²) + 3N + 2N·Vp (d12, B=4, T=64: 73,347,840, the
 * num_activations llm.c prints). Not included: the activation gradients of backward (llm.c
 * allocates a second set of the same size), inputs/targets, and any temporaries.
 * -1.0 when cfg is NULL or invalid, B < 1, T < 1 or T > cfg->max_seq. */
double sz_gpt2_activation_bytes(const sz_gpt2_config *cfg, int B, int T);

/* The same under activation checkpointing at transformer-block granularity: what is resident
 * at the peak of backward, in fp32 bytes:
 *   - each block's input, kept from forward: L·N·C (block 0's input is `encoded`, block l's is
 *     block l-1's residual3), and
 *   - one block's full activations, recomputed from its input before its backward (all the
 *     per-layer tensors above for one layer: 18NC + 4N + 2·B·NH·T² floats), and
 *   - the head's tensors, kept from forward for its backward: lnf N·C, lnf_mean N, lnf_rstd N,
 *     logits N·Vp, probs N·Vp, losses N.
 * Total floats: L·NC + (18NC + 4N + 2·B·NH·T²) + NC + 3N + 2N·Vp. The recomputed block's own
 * residual3 equals the next block's kept input; it is counted in both places (an upper bound:
 * an implementation that aliases them saves N·C). Gradients and temporaries are excluded as
 * above. -1.0 on the same errors. */
double sz_gpt2_activation_bytes_ckpt(const sz_gpt2_config *cfg, int B, int T);

/* ---- ZeRO-R: offloaded checkpoints (P_a+cpu) --------------------------------------------- */

/* With the checkpoints offloaded (sz_zero_config.offload_checkpoints, which needs checkpoint),
 * every block's input (its checkpoint, N·C fp32) moves to a host pool after the block's forward
 * and comes back before its recompute, as tasks/zero.c does it:
 *   - the host pool holds all L checkpoints: L·N·C·4 bytes (sz_gpt2_checkpoint_host_bytes);
 *   - the device pool holds at most min(L, 3) of them at once (sz_gpt2_checkpoint_device_bytes):
 *     in backward, block l's own input, block l-1's fetched one unit ahead, and block l+1's that
 *     the recompute writes again (in forward two: the one read, the one written);
 *   - device-pool activations (sz_gpt2_activation_bytes_offload): those of
 *     sz_gpt2_activation_bytes_ckpt with the L kept inputs replaced by the min(L, 3) on the
 *     device: it is lower by (L - min(L, 3))·N·C·4 bytes (d12, B=4, T=256: 28,311,552).
 * Host-pool bytes are not part of the device peak (the engine's device_peak_bytes excludes them).
 * -1.0 on the errors of sz_gpt2_activation_bytes. */
double sz_gpt2_checkpoint_host_bytes(const sz_gpt2_config *cfg, int B, int T);
double sz_gpt2_checkpoint_device_bytes(const sz_gpt2_config *cfg, int B, int T);
double sz_gpt2_activation_bytes_offload(const sz_gpt2_config *cfg, int B, int T);

/* The device-pool activation bytes of one ZeRO-R setting: full (checkpoint = 0), block
 * checkpointing (checkpoint = 1) or offloaded checkpoints (checkpoint = 1, offload = 1).
 * offload without checkpoint is refused with -1.0, as sz_model_set_zero refuses it: there are no
 * checkpoints to offload. */
double sz_gpt2_activation_bytes_device(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload);

/* ---- ZeRO-R: communication buckets (C_B) -------------------------------------------------- */

/* Bytes of the communication buffer each rank allocates (the engine's "communication buffers"
 * category): every reduce-scatter runs in rounds of e elements per rank through one receive
 * buffer of nd·e fp32-sized elements (bf16 fits); all-gathers need none (in place, or into the
 * gathered unit). e = floor(bucket_bytes / (4·nd)), at least 1 and at most the largest unit's
 * shard ceil(largest_unit / nd):
 *   bytes = 4·nd·min(max(floor(bucket_bytes / (4·nd)), 1), ceil(largest_unit / nd)),
 * and 0 when nd = 1 (nothing is exchanged, no buffer). So at most bucket_bytes whatever Ψ, the
 * stage or the precision: --bucket-bytes 1M gives 1,000,000 at N_d = 2 for d2 and d12 alike.
 * bucket_bytes = 0 means SZ_DEFAULT_BUCKET_BYTES (as in sz_zero_config); largest_unit <= 0 means
 * unknown (no cap). -1 when bucket_bytes < 0 or nd < 1. */
int64_t sz_zero_comm_buffer_bytes(int64_t bucket_bytes, int nd, int64_t largest_unit);

/* Elements of GPT-2's largest unit as the engine builds the model (apps/gpt2: the embedding,
 * wte + wpe = (Vp + maxT)·C; each block, 12C² + 13C; the head's final layernorm, 2C): the cap
 * of sz_zero_comm_buffer_bytes. -1 when cfg is NULL or invalid. */
int64_t sz_gpt2_largest_unit_numel(const sz_gpt2_config *cfg);

/* ---- fitting a budget -------------------------------------------------------------------- */

/* The smallest N_d in 1..max_nd whose model-state bytes per rank plus extra_bytes (activations,
 * buffers: whatever the caller adds per rank) fit in budget_bytes (<=, with a relative slack of
 * 1e-12 so an exact fit on paper survives rounding), or -1 when none does or an argument is
 * invalid (stage outside 0..3, psi < 0, max_nd < 1, negative bytes). */
int sz_zero_min_nd(int stage, double psi, int mixed, double budget_bytes, double extra_bytes, int max_nd);

#ifdef __cplusplus
}
#endif
#endif /* STARZERO_H */
