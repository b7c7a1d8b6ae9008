/* starzero.h — the core public header of StarZeRO (ZeRO data parallelism as a StarPU task graph).
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

#define SZ_MAX_TIMEOUT_S 1e7 /* about 116 days: the longest deadline (longer ones overflow the clocks) */
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
                                  collective, task and step) and end the job with MPI_Abort (exit code 4);
                                  StarPU's watchdog is armed at 2 x timeout_s unless STARPU_WATCHDOG_TIMEOUT
                                  is set. Default 600; 0: no deadline; more than SZ_MAX_TIMEOUT_S is
                                  refused (SZ_ERR_INVALID). */
    int64_t gpu_mem_limit;     /* bytes StarPU may use on each GPU (STARPU_LIMIT_CUDA_MEM, in MiB,
                                  rounded down); 0: StarPU's default (90% of the device). A user's
                                  STARPU_LIMIT_CUDA_MEM wins. Apps pass their --mem-budget. */
} sz_context_config;

void sz_context_config_defaults(sz_context_config *cfg);

/* The GPU this rank's (first) CUDA worker uses, and its dense bf16 tensor-core peak: SMs x peak
 * clock x FLOPs per clock per SM for its architecture (table in kernels/cuda/util.cu;
 * bf16_peak_tflops 0 where the table has none). sz_context_gpu_info returns SZ_ERR_UNSUPPORTED on
 * a rank without a CUDA worker (or a build without CUDA): then there is no GPU figure at all. */
typedef struct sz_gpu_info {
    int device;                 /* CUDA device id (as this process sees them) */
    char name[128];
    int sm_count, clock_khz, cc_major, cc_minor;
    int bf16_flops_per_clock_sm;
    double bf16_peak_tflops;
    int64_t starpu_limit_bytes;  /* what StarPU may allocate on it (STARPU_LIMIT_CUDA_MEM or 90%) */
    int64_t starpu_used_bytes;   /* what StarPU has allocated there now */
} sz_gpu_info;

/* This rank's per-GPU default budget, decided once by sz_context_init before StarPU starts (issue
 * 15, item 5): the free memory of the rank's CUDA device at start (cudaMemGetInfo, after every rank
 * of the node made its CUDA context), at most StarPU's 90% of the device, divided by the ranks of
 * this job on this node that drive the same device (several ranks per GPU are allowed for testing:
 * local rank -> device is local rank mod visible devices), and at most a STARPU_LIMIT_CUDA_MEM the
 * user set. With neither that variable nor a --mem-budget (sz_context_config.gpu_mem_limit) StarPU's
 * own limit (STARPU_LIMIT_CUDA_MEM) is set from the share, so StarPU never takes more there. */
typedef struct sz_gpu_budget_info {
    int device;                   /* CUDA device (as this process sees them); -1: none, the rest 0 */
    int sharers;                  /* k: ranks of this job on this node driving that device (>= 1) */
    int64_t free_bytes;           /* its free memory at start */
    int64_t total_bytes;
    int64_t device_cap_bytes;     /* StarPU's default limit there: 90% of the device */
    int64_t process_limit_bytes;  /* a STARPU_LIMIT_CUDA_MEM the user set (bytes), else 0 */
    int64_t share_bytes;          /* the default budget: min(free, device cap) / k, <= process limit */
    int limit_from_share;         /* 1: sz_context_init set STARPU_LIMIT_CUDA_MEM from share_bytes */
} sz_gpu_budget_info;

/* This rank's decision (above); SZ_ERR_UNSUPPORTED (out->device -1) on a rank without a GPU. */
sz_status sz_context_gpu_budget(const sz_context *ctx, sz_gpu_budget_info *out);
/* "budget per rank: X of Y free on GPU d shared by k ranks" for b (given > 0: that --mem-budget). */
char *sz_gpu_budget_describe(const sz_gpu_budget_info *b, int64_t given, char *msg, size_t len);
/* With several CUDA workers per rank on different GPUs each device has its own budget (its own
 * free memory, StarPU limit and sharers; each CUDA memory node its own STARPU_LIMIT_CUDA_<d>_MEM):
 * up to max of them in out[], how many this rank has (0 without a GPU); sz_context_gpu_budget
 * gives the one with the smallest share, which bounds the plan's device peak. */
int sz_context_gpu_budgets(const sz_context *ctx, sz_gpu_budget_info *out, int max);
/* n devices' budgets in one sentence (n == 1: sz_gpu_budget_describe's). */
char *sz_gpu_budgets_describe(const sz_gpu_budget_info *b, int n, int64_t given, char *msg, size_t len);

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
    int compute_workers;       /* CPU workers that run compute tasks (the communication worker excluded) */
    int kernel_threads;        /* OpenMP threads each compute task uses */
} sz_runtime_info;

sz_status sz_context_runtime_info(const sz_context *ctx, sz_runtime_info *out);
sz_status sz_context_gpu_info(const sz_context *ctx, sz_gpu_info *out);

/* Collective: values[i] becomes the sum over ranks (added in rank order) of every rank's values[i]. */
sz_status sz_context_sum(sz_context *ctx, double *values, int n);

/* Prints topology, workers, memory nodes (with their byte totals) and build features. */
void sz_context_print(const sz_context *ctx, FILE *out);

/* Collective: every rank's sz_context_print text, written by rank 0 in rank order. */
sz_status sz_context_print_all(const sz_context *ctx, FILE *out);

/* ---- memory of the machine ---------------------------------------------------------------
 * With no sz_zero_config.mem_budget, sz_model_finalize takes the budget from the machine: each
 * rank's share of the node's available memory (MemAvailable, or a cgroup's limit if smaller,
 * divided by the ranks on the node) plus what the rank already holds, less this allowance for the
 * runtime (StarPU, MPI, oneDNN, the code, the app's small buffers), which the plan does not
 * predict: the measured peak resident set stays within the budget plus the allowance (measured on
 * GPT-2 d2 to 6,6,384 on one rank: README, "When something goes wrong"). */
#define SZ_RUNTIME_ALLOWANCE_BYTES ((int64_t)256 << 20)
/* Bytes the node has available now (MemAvailable, or less under a cgroup limit); -1 unknown. */
int64_t sz_memory_available_bytes(void);
/* Bytes the node has at all (MemTotal, or a cgroup's limit if smaller); -1 unknown. A budget above
 * it (sz_zero_config.mem_budget times the ranks on the node) is refused by sz_model_finalize, and a
 * model whose states alone exceed it at every stage (with the job's N_d) by sz_model_add_unit. */
int64_t sz_memory_total_bytes(void);
/* This process's resident set now, and its peak so far (bytes; -1 unknown). */
int64_t sz_memory_rss_bytes(void);
int64_t sz_memory_rss_peak_bytes(void);
/* The free memory, now (cudaMemGetInfo), of the GPU this rank's first CUDA worker drives; -1 on a
 * rank without a CUDA worker or a build without CUDA. */
int64_t sz_memory_gpu_free_bytes(void);
/* Collective: the budget each rank gets from the machine (see above; the minimum over ranks, so
 * every rank decides alike); 0 when the machine cannot tell. On ranks with CUDA workers (the budget
 * is then each GPU's, against the plan's device peak) it is the GPU's free memory at start
 * (sz_memory_gpu_free_bytes) divided by the ranks of the node driving the same GPU, at most what
 * StarPU may allocate on it (its limit on that memory node). */
sz_status sz_context_memory_budget(sz_context *ctx, int64_t *bytes);

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
typedef enum sz_dtype { SZ_DTYPE_F32 = 0, SZ_DTYPE_BF16, SZ_DTYPE_I32, SZ_DTYPE_F16 } sz_dtype;
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
 * same for gradients and optimizer state). The unit's forward callback submits tasks with the
 * sz_op_* calls below (it never computes anything itself); the engine derives the backward from
 * them, or the unit gives a backward callback of its own. */
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
    const char *name;              /* "block3": its ops' tasks become "fwd:block3:<op>", "bwd:block3:<op>";
                                      the step's own "gather:block3", "rs:block3", ... */
    const sz_param_spec *params;   /* the unit's tensor table */
    int nparams;
    sz_unit_fn forward, backward;  /* backward NULL (the usual way): derived from the forward's ops
                                      (include/starzero_starpu.h, "an operation with its backward");
                                      set: a backward of your own (the expert path: its zeroing and
                                      loss scale are yours; sz_model_grad_of, sz_zero_config.check) */
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
    int bf16_params;               /* 1: its callbacks accept bf16 parameters (every op they pass a
                                      parameter to takes bf16 ones, with fp32 activations on the
                                      emulated path and bf16 ones on the native path), so under mixed
                                      precision they read the stored bf16 parameters directly, with no
                                      fp32 working copy (on both paths; on the emulated one not with
                                      CUDA workers, whose kernels take fp32 parameters there, nor with
                                      sz_zero_config.bf16_work_copies);
                                      0: the unit always gets fp32 working copies under mixed
                                      precision (an op of its own that takes fp32 only) */
    int round_grads;               /* 1: every op its backward passes a parameter gradient to can round
                                      into bf16 gradients (matmul, gelu_matmul, the layernorms and
                                      rmsnorms, the token embedding): under mixed precision, on CPU compute, its backward then
                                      gets the bf16 gradients themselves, no fp32 working gradients and
                                      no separate conversion (unless SZ_GRAD_ROUND_FOLD=0, or another
                                      unit's backward writes its gradients: tied weights, see
                                      round_tied_grads); 0: fp32 working gradients, converted after
                                      its backward */
    int round_tied_grads;          /* with round_grads, on a unit that others use (tied weights): those
                                      units have round_grads too and write its gradients only through
                                      sz_op_matmul_bwd_tied, which leaves the rows its own backward then
                                      adds into in fp32 (sz_op_encoder_bwd_tied rounds them), so its
                                      gradients are rounded by their writers as well (GPT-2's embedding:
                                      no fp32 working gradient of wte) */
} sz_unit_desc;

/* ZeRO: where model states live. Set before sz_model_finalize; defaults: stage 0, 1 micro-batch,
 * fp32. */
typedef enum sz_precision {
    SZ_PRECISION_FP32 = 0, /* fp32 params, grads, Adam m and v */
    SZ_PRECISION_BF16,     /* mixed: bf16 params and grads (stored and communicated), fp32 master
                              weights and Adam m, v; compute tasks write fp32 working gradients
                              and read the bf16 parameters themselves (units with
                              sz_unit_desc.bf16_params; fp32 or bf16 activations: sz_bf16_compute)
                              or an fp32 working copy of one unit at a time (the other units, and
                              on the emulated path every unit with CUDA workers or
                              sz_zero_config.bf16_work_copies) */
    SZ_PRECISION_FP16,     /* mixed, the ZeRO paper's: fp16 params and grads (stored and
                              communicated), fp32 master weights and optimizer state, every op
                              computing in fp32 on fp32 working copies of one unit at a time; the
                              loss scaled before backward (sz_zero_config.loss_scaling: dynamic by
                              default, DeepSpeed's rule), a step whose gradients overflowed skipped
                              on every rank. CPU workers only so far */
} sz_precision;
/* "fp32", "bf16", "fp16"; NULL for an unknown value. _parse: SZ_ERR_INVALID for an unknown name. */
const char *sz_precision_name(sz_precision p);
sz_status sz_precision_parse(const char *name, sz_precision *out);

/* fp16 loss scaling, DeepSpeed's fp16 block (its names and defaults): loss_scale 0 is dynamic,
 * starting at 2^initial_scale_power; a step whose gradients hold an inf or NaN on any rank is
 * skipped (no update anywhere, the optimizer's step count unchanged) and, after `hysteresis`
 * such steps since the scale last changed, the scale is halved, never below min_loss_scale; after
 * loss_scale_window steps without one it doubles. loss_scale > 0 is a fixed scale (overflowing
 * steps are still skipped). Ignored unless SZ_PRECISION_FP16. */
typedef struct sz_loss_scaling {
    float loss_scale;          /* 0 (default): dynamic */
    int initial_scale_power;   /* 16 */
    int loss_scale_window;     /* 1000 */
    int hysteresis;            /* 2 */
    float min_loss_scale;      /* 1 */
} sz_loss_scaling;

/* How bf16 mixed precision computes. Chosen once per run, before anything is allocated, by a
 * CPUID rule (never a timed probe, so every rank decides alike; sz_model_finalize checks the ranks
 * agree):
 *  - native: matrix products run bf16 x bf16 with fp32 accumulation through oneDNN (AMX or
 *    AVX512-BF16 tiles, fixed tiles so the bits do not depend on the thread count); the
 *    activations the matmuls read and their gradients are bf16 (the model chooses them, asking
 *    sz_resolved_precision.native); layernorm, softmax, GELU and attention compute in fp32 from bf16
 *    inputs; units with sz_unit_desc.bf16_params read the bf16 parameters directly (no fp32
 *    working copy). Master weights, Adam state and the working gradients stay fp32.
 *  - emulated: fp32 activations, and every op widens the bf16 parameters exactly as it loads them
 *    (units with sz_unit_desc.bf16_params read the bf16 parameters directly: no working copy, no
 *    conversion pass, half the parameter bytes read); the math and the bits are those of fp32
 *    kernels on fp32 working copies (the other units' way, and every unit's with CUDA workers,
 *    whose emulated kernels take fp32 parameters, or sz_zero_config.bf16_work_copies): the math
 *    of fp32 at fp32 speed.
 * The rule (sz_bf16_compute_decide): native where the CPU has AMX-BF16, or AVX512-BF16 on a CPU
 * whose bf16 dot product is known to run at >= 1.5x its fp32 FMA rate (AMD Zen 4 and later:
 * measured 2.0-2.9x); emulated elsewhere (Intel CPUs with AVX512-BF16 but no AMX run vdpbf16ps at
 * half the FMA rate; no AVX512-BF16 at all: oneDNN would widen anyway). With CUDA workers the GPU
 * rule instead (sz_bf16_compute_decide_cuda): native when every CUDA worker's GPU has bf16 tensor
 * cores (compute capability 8.0+) and every op of the native path has its bf16 CUDA
 * implementation, else emulated (the native path on GPUs was written and compiled without a GPU:
 * not yet run on one). */
typedef enum sz_bf16_compute {
    SZ_BF16_COMPUTE_AUTO = 0,  /* the CPU rule */
    SZ_BF16_COMPUTE_NATIVE,
    SZ_BF16_COMPUTE_EMULATED,
} sz_bf16_compute;

/* What CPUID says about this CPU's bf16 units. */
typedef struct sz_cpu_bf16 {
    char vendor[16];           /* "AuthenticAMD", "GenuineIntel", ... */
    char model[64];            /* the brand string ("AMD EPYC 9R14 ...") */
    int family;                /* the display family (AMD Zen 4: 0x19, Zen 5: 0x1a) */
    int avx512f, avx512_bf16, amx_bf16, amx_tile;
} sz_cpu_bf16;
/* This CPU (CPUID leaves 0, 1, 7.0, 7.1 and the brand string); zeros where it cannot tell. */
void sz_cpu_bf16_query(sz_cpu_bf16 *out);
/* The rule above for `cpu` (NATIVE or EMULATED); why (a static sentence) in *why (may be NULL). */
sz_bf16_compute sz_bf16_compute_decide(const sz_cpu_bf16 *cpu, const char **why);
/* The rule for this CPU: sz_bf16_compute_decide of sz_cpu_bf16_query. */
sz_bf16_compute sz_bf16_compute_auto(const char **why);
/* The GPU rule for a rank with CUDA workers, the lowest compute capability among their devices
 * (gpu: that device's name, may be NULL) and the nmissing codelets (names in missing[], up to 4
 * used) of the native path whose CUDA implementation takes no bf16 tensors: NATIVE when cc_major >= 8
 * and nmissing == 0, else EMULATED; the reason (one sentence naming the device or the ops) in why[len]
 * (may be NULL). */
sz_bf16_compute sz_bf16_compute_decide_cuda(int cc_major, int cc_minor, const char *gpu, int nmissing,
                                            const char *const *missing, char *why, size_t len);
/* The codelets of the native bf16 path whose CUDA implementation takes no bf16 tensors or that have
 * no CUDA implementation at all (in a CUDA build): how many, and the first max of their names in
 * names[] (may be NULL). 0 when the GPUs have every twin, and always 0 in a build without CUDA. */
int sz_native_cuda_missing(const char **names, int max);
/* Whether the codelet named `name` (sz_codelet_desc.name) is in the native path's table of
 * codelets given bf16 tensors: 1 with its bf16 CUDA twin, 0 without, -1 not in the table. */
int sz_native_cuda_listed(const char *name);
/* What --bf16-compute auto picks on this rank and why (in why[len]): the CPU rule without CUDA
 * workers, the GPU rule with them (this rank's CUDA workers' devices and sz_native_cuda_missing). */
sz_bf16_compute sz_context_bf16_auto(const sz_context *ctx, char *why, size_t len);
/* "auto", "native", "emulated"; parse accepts those (SZ_ERR_INVALID otherwise). */
const char *sz_bf16_compute_name(sz_bf16_compute c);
sz_status sz_bf16_compute_parse(const char *s, sz_bf16_compute *out);

/* One bf16 value (the upper half of an fp32's bits) from an fp32, rounded to nearest even (a NaN
 * stays a quiet NaN), and its exact widening back: the library's own rounding, for an app's own
 * operations on the native bf16 path (sz_task_tensor dtype SZ_DTYPE_BF16). */
static inline uint16_t sz_bf16_from_f32(float f)
{
    union { float f; uint32_t u; } v = {f};
    uint32_t u = v.u, r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
    return (uint16_t)(((u & 0x7FFFFFFFu) > 0x7F800000u) ? q : r);
}
static inline float sz_bf16_to_f32(uint16_t h)
{
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

/* The optimizer sz_model_update runs (tasks/sz_optimizer.h is the interface behind it). Its
 * choice fixes the fp32 state the model keeps per parameter element, so it is part of the
 * sz_zero_config (set before sz_model_finalize); the per-step values (learning rate, Adam's betas
 * and eps, the weight decay) are sz_train_config's.
 *  - SZ_OPTIMIZER_ADAMW (default): llm.c's AdamW, bias-corrected, decoupled weight decay
 *    p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p); state m and v (2 floats per element).
 *  - SZ_OPTIMIZER_SGD: torch.optim.SGD (dampening 0, not Nesterov): g += wd p (the weight decay is
 *    L2, added to the gradient, as PyTorch's SGD), buf = momentum buf + g, p -= lr buf; with
 *    momentum 0, p -= lr g and no state (0 floats per element), else the buffer (1 float). */
typedef enum sz_optimizer {
    SZ_OPTIMIZER_ADAMW = 0,
    SZ_OPTIMIZER_SGD,
    SZ_OPTIMIZER_NKINDS
} sz_optimizer;
/* "adamw", "sgd" (NULL outside the enum); sz_optimizer_parse takes them case-insensitively. */
const char *sz_optimizer_name(sz_optimizer o);
sz_status sz_optimizer_parse(const char *name, sz_optimizer *out);
/* fp32 optimizer state floats per parameter element: AdamW 2, SGD 1 with momentum, 0 without;
 * -1 for an unknown optimizer or a momentum outside [0, 1). */
int sz_optimizer_states(sz_optimizer o, float momentum);

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
    sz_bf16_compute bf16_compute; /* under SZ_PRECISION_BF16: native or emulated compute (default
                               AUTO: the CPU rule, resolved by sz_model_set_zero; forcing NATIVE with
                               CUDA workers is refused) */
    sz_optimizer optimizer; /* default SZ_OPTIMIZER_ADAMW (see sz_optimizer) */
    float momentum;         /* SGD's momentum in [0, 1) (default 0: plain SGD, no state); ignored
                               by AdamW */
    int offload_optimizer;  /* ZeRO-Offload (needs CUDA workers): the fp32 master and the optimizer
                               state of the shard stay in pinned host memory and the optimizer runs
                               as CPU tasks while the GPU computes; the reduced gradients go to the
                               host and the updated parameters back to the GPU through StarPU's data
                               transfers of those tasks. Refused (SZ_ERR_INVALID, with the reason) by
                               sz_model_finalize on a rank without a CUDA worker. */
    int bf16_work_copies;   /* under SZ_PRECISION_BF16 on the emulated path: 1 gives every unit fp32
                               working copies of its bf16 parameters (one unit at a time, converted
                               before its compute), as with CUDA workers — the same bits as reading
                               them directly (default 0), more memory and time; for comparisons.
                               Ignored on the native path (its units always read them directly) */
    sz_loss_scaling loss_scaling; /* under SZ_PRECISION_FP16 (defaults: DeepSpeed's) */
    int64_t host_bytes;     /* host buffers the app holds while it trains, beside the engine's tensors,
                               that grow with the model or the batch (its data loader, the kernels'
                               working memory: sz_matmul_host_bytes): the prediction and the budget
                               count them (SZ_MEM_HOST_BUFFERS); 0: none */
    int check;              /* check mode (also SZ_CHECK=1 in the environment): the first step checks
                               the backward, derived or written by hand. Before its backward every
                               activation gradient (a tensor no unit's forward touches) is filled with
                               NaN; after each unit's backward every such tensor it touched must be
                               wholly written and its parameters' gradients finite, else the step
                               fails naming the unit and the tensor (a missing sz_op_zero before an
                               op that adds, an op writing part of a gradient). With fp32 and one
                               micro-batch, sampled parameters' gradients, reduced over the ranks,
                               are compared with central finite differences of the mean loss over
                               every rank's batch (a loss gradient scaled by other than
                               sz_unit_loss_scale shows as a ratio). Costs two forward passes per
                               sample; the result is logged. 0: off */
} sz_zero_config;
void sz_zero_config_defaults(sz_zero_config *z);
#define SZ_DEFAULT_BUCKET_BYTES ((int64_t)32 << 20)

/* Call order: sz_model_init, sz_model_set_zero (optional: the defaults otherwise), units
 * (sz_model_add_unit) and tensors (sz_model_tensor / _checkpoint / _activation; a tensor naming a
 * unit after that unit), sz_model_set_loss, sz_model_finalize, then training. Out of order:
 * sz_model_set_zero after a tensor was created (its placement used the configuration) or after
 * finalize, and sz_model_add_unit after finalize, return SZ_ERR_STATE; a tensor after finalize is
 * NULL; each logs why. */
sz_status sz_model_init(sz_model **out, sz_context *ctx);
void sz_model_free(sz_model *m);
/* Adds a unit (the table is copied). Units run forward in the order they are added. */
sz_status sz_model_add_unit(sz_model *m, const sz_unit_desc *desc);
/* A model-owned working tensor (activations, tokens, losses); zero-filled at creation. Before
 * sz_model_finalize (NULL after, logged). */
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
/* The ZeRO configuration; before any tensor is created (checkpointing decides which activations
 * are shared, offloading where checkpoints live, arenas where tensors go): SZ_ERR_STATE after a
 * sz_model_tensor / _checkpoint / _activation call or after finalize. */
sz_status sz_model_set_zero(sz_model *m, const sz_zero_config *z);
/* After the last unit is added: allocates and registers parameters, gradients, optimizer state
 * (each unit's parameters one flat buffer padded to a multiple of the rank count; rank r owns
 * slice r). */
sz_status sz_model_finalize(sz_model *m);

int sz_model_nunits(const sz_model *m);
int64_t sz_model_nparams(const sz_model *m);          /* real parameters, padding excluded */
/* What a ZeRO configuration's precision resolves to on this rank, decided once: by
 * sz_precision_resolve (a model library calls it to size its tensors and host buffers before
 * sz_model_set_zero) and by sz_model_set_zero itself, which keeps it (sz_model_precision). The
 * model's tensor dtypes, the plan, the storage and the host buffers the ops need all follow from
 * it; nothing asks again. */
typedef struct sz_resolved_precision {
    sz_precision kind;         /* the configuration's */
    int mixed;                 /* 16-bit parameters and gradients (stored and communicated), fp32 master
                                  and optimizer state: SZ_PRECISION_BF16 or _FP16 */
    sz_dtype param, grad;      /* their storage: f32, or bf16 or f16 (mixed) */
    sz_dtype act;              /* what the linear layers read: bf16 on the native path, else f32 */
    sz_bf16_compute compute;   /* the bf16 compute path: native or emulated (AUTO resolved by the CPU's
                                  rule, or with CUDA workers the GPU's; sz_context_bf16_auto) */
    int native;                /* mixed and the native path: the ops compute on bf16 tensors */
    int params_direct;         /* where parameters are bf16 (mixed), units with sz_unit_desc.bf16_params
                                  read them directly, no fp32 working copy: on the native path, and on
                                  the emulated one without CUDA workers unless bf16_work_copies (then the
                                  linear layers widen bf16 weights: sz_matmul_host_bytes_wbf16) */
    int grads_rounded;         /* where gradients are bf16 (mixed), their writers round into them: the
                                  gradient rounding folded (no CUDA workers, the fold switches on:
                                  SZ_GRAD_ROUND_FOLD; sz_matmul_round_host_bytes) */
    int loss_scaling;          /* the loss is scaled and overflowing steps skipped (SZ_PRECISION_FP16) */
} sz_resolved_precision;
/* Resolves z's precision on ctx's rank (collective-free, the same answer on every rank of a job on
 * alike nodes): SZ_ERR_INVALID for an unknown precision or bf16 path, SZ_ERR_UNSUPPORTED for the
 * native path where the rank's CUDA workers cannot run it (logged, with the reason). */
sz_status sz_precision_resolve(sz_context *ctx, const sz_zero_config *z, sz_resolved_precision *out);
/* The same without a runtime, for planning (sz-estimate): the answer on ranks of this CPU with no
 * CUDA workers (the CPU rule; the folding switches SZ_ZERO_FOLD, SZ_GRAD_FOLD, SZ_GRAD_ROUND_FOLD read
 * from the environment as sz_context_init reads them). Errors are printed on stderr. */
sz_status sz_precision_resolve_cpu(const sz_zero_config *z, sz_resolved_precision *out);
/* The model's, resolved at its last sz_model_set_zero (fp32 defaults before). */
const sz_resolved_precision *sz_model_precision(const sz_model *m);
/* The loss scaler (SZ_PRECISION_FP16): the scale the next step's loss is multiplied by, the
 * clean steps since the scale last changed or a step overflowed, the overflows the hysteresis
 * still allows, the steps skipped since the start, and whether the last update was skipped. Part
 * of the training state (sz-train saves and resumes it): _set restores one (SZ_ERR_INVALID for a
 * scale that is not finite and positive). Under other precisions: scale 1, nothing skipped. */
typedef struct sz_loss_scaler {
    float scale;
    int good_steps, hysteresis_left;
    int64_t skipped;
    int last_skipped;
} sz_loss_scaler;
sz_status sz_model_loss_scaler(const sz_model *m, sz_loss_scaler *out);
sz_status sz_model_set_loss_scaler(sz_model *m, const sz_loss_scaler *s);
/* The path in effect: "native" or "emulated" under bf16 mixed precision, "fp16" under fp16 (fp32
 * compute on working copies), "fp32" otherwise. */
const char *sz_model_bf16_path(const sz_model *m);
/* Parameter i of unit u, in the unit's table order: read or write its values (fp32). With several
 * ranks these are collective (every rank calls them, in the same order): values are assembled
 * from the owners' shards. Gradients are the reduced ones of the last step. */
sz_status sz_model_param_read(sz_model *m, int unit, int param, float *dst);
sz_status sz_model_param_write(sz_model *m, int unit, int param, const float *src);
/* Elements [lo, lo + n) of parameter `param` (row-major) get src[0..n) (every rank the same values). */
sz_status sz_model_param_write_range(sz_model *m, int unit, int param, int64_t lo, int64_t n, const float *src);
sz_status sz_model_grad_read(sz_model *m, int unit, int param, float *dst);
/* Collective: elements [lo, lo + n) of parameter `param` of `unit` as fp32 (the master under mixed
 * precision), into dst (n floats) on rank `root` only; other ranks may pass NULL. Each rank reads
 * only what it holds of the range: host memory stays n floats, whatever the model's size — how an
 * app writes a whole model without holding it (GPT-2's --save, in fixed chunks). */
sz_status sz_model_param_read_range(sz_model *m, int unit, int param, int64_t lo, int64_t n, int root, float *dst);
/* Initialise every parameter from its spec; the stream of each tensor depends only on
 * (seed, unit index, param index), so layout and rank never change the values. Streams each
 * tensor in fixed chunks straight into what this rank holds: no host buffer that grows with the
 * model. */
sz_status sz_model_init_params(sz_model *m, uint64_t seed);

/* Parameter (or gradient) tensor i of any unit: how a unit uses tied weights of another
 * (GPT-2's head reads the embedding's wte, and its gradient accumulates into the same tensor). */
sz_tensor *sz_model_param(sz_model *m, int unit, int i);
sz_tensor *sz_model_grad(sz_model *m, int unit, int i);

/* In a model whose other units' backwards are derived (include/starzero_starpu.h), a unit with a
 * backward callback of its own finds the gradient of an activation it shares with them here (after
 * sz_model_finalize; NULL where the engine keeps none): it adds into the gradient of what its forward
 * read — zeroing it first with sz_op_zero where no derived unit's backward, which runs before it,
 * wrote it — and reads the gradient of what its forward wrote. */
sz_tensor *sz_model_grad_of(sz_model *m, const sz_tensor *t);

/* Inside callbacks. */
sz_tensor *sz_unit_param(sz_unit *u, int i);
sz_tensor *sz_unit_grad(sz_unit *u, int i);
int sz_unit_index(const sz_unit *u);
const char *sz_unit_name(const sz_unit *u);
sz_model *sz_unit_model(sz_unit *u);

/* The loss-gradient scale: d(the step's loss) / d(one row's loss). The step's loss is the mean of
 * every row of the loss tensor (sz_model_set_loss) over the micro-batches and the ranks, and the
 * engine SUMS the gradients over micro-batches (accumulation) and over ranks (the reduce-scatter),
 * so a loss's backward must scale each row's gradient by
 *     1 / (N · M · N_d),  N = rows (elements) of the loss tensor, M = micro_batches, N_d = ranks.
 * (1/N alone would give M·N_d times the mean's gradient.) Under SZ_PRECISION_FP16 it also holds
 * the loss scale (sz_loss_scaler.scale), which the engine divides out of the gradients before the
 * update. sz_op_softmax_xent_bwd applies it; a loss of your own must too. 0 when the model has no
 * loss tensor yet. */
float sz_unit_loss_scale(const sz_unit *u);

/* ---- operations (each one StarPU task; semantics exactly llm.c's GPT-2) -------------------
 * Shapes: N = B*T rows. Called inside a unit's callback; each task is named
 * "<phase>:<unit>:<op>" (e.g. "fwd:block3:matmul_fwd"). Every output is either OVERWRITTEN (its
 * previous values are never read) or ACCUMULATED into (+=, like llm.c's backward): zero what must
 * start at zero with sz_op_zero. Each op below says which. Wrong sizes or element types, a missing
 * tensor or an impossible shape return SZ_ERR_INVALID and log the op and the tensor; a token or
 * target outside the vocabulary is refused when the task runs (the model's next call returns
 * SZ_ERR_INVALID, naming the op, the value, the row and the vocabulary). Your own operations:
 * include/starzero_starpu.h. */
/* t = 0 (overwrites; any element type). Folded, where it can be, into the op of the same callback
 * that next touches t: when that op accumulates into the whole of t and can set it instead (matmul_bwd's
 * dinp, gelu_bwd, residual_bwd, layernorm_bwd's dinp, layernorm_residual_bwd's da and db,
 * attention_bwd, rmsnorm_bwd's dinp, rmsnorm_residual_bwd's da and db, rope_bwd: SZ_ACCUMULATE_OR_SET in
 * include/starzero_starpu.h; on CPUs and on CUDA workers alike), no zeroing
 * task runs and that op writes t instead of adding into it. The values are those of 0 + x, except that
 * a contribution of exactly -0.0 stays -0.0 (0.0f + -0.0f is +0.0f). Otherwise (another op, a partial
 * view, the end of the callback) the zeroing task is submitted just before. The parameters'
 * gradients (sz_unit_grad) need no sz_op_zero: the engine leaves each to the first op of the step
 * that touches it — set there when that op writes the whole view as SZ_ACCUMULATE_OR_SET
 * (matmul_bwd's and gelu_matmul_bwd's dw and db, layernorm_bwd's and layernorm_residual_bwd's dw and
 * db, rmsnorm_bwd's and rmsnorm_residual_bwd's dw), zeroed just before any other (an embedding's
 * scatter-add), and zeroed at the end of the backward when none touched it. SZ_ZERO_FOLD=0 in the
 * environment (read by sz_model_init) turns both foldings off: every zeroing is a task of its own;
 * SZ_GRAD_FOLD=0 only the gradients' (the plan's actions zero them whole). */
sz_status sz_op_zero(sz_unit *u, sz_tensor *t);
/* out[B,T,C] = wte[tokens[b,t]] + wpe[t] (overwrites out); tokens int32 [B,T] in [0, V), V = rows
 * of wte. */
sz_status sz_op_encoder_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tokens, sz_tensor *wte, sz_tensor *wpe,
                            int B, int T, int C);
/* dwte[tokens[b,t]] += dout[b,t], dwpe[t] += dout[b,t] (accumulates). */
sz_status sz_op_encoder_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *dout, sz_tensor *tokens,
                            int B, int T, int C);
/* A tied embedding's gradients rounded by their writers (mixed precision with the rounding folded:
 * the embedding unit has round_tied_grads and its sz_unit_grad tensors are bf16; else use
 * sz_op_matmul_bwd and sz_op_encoder_bwd). The output layer's backward: dinp as sz_op_matmul_bwd's
 * (accumulates); dw[OC,C] = dout^T . inp rounded into the bf16 dw (as the step's first writer of
 * it) except the rows that ids[N] (the input tokens) name: those stay fp32 in rows (an F32 tensor
 * of sz_tied_rows_numel(B, T, OC, C) floats, N = B*T; its last one gets the rounding rule) for the
 * encoder's backward, which adds dout[b,t] into them and rounds them into dwte, and rounds wpe's
 * sums (taken in rows too) into the bf16 dwpe. The bits of sz_op_matmul_bwd and sz_op_encoder_bwd
 * into fp32 gradients rounded afterwards. CPU tasks. */
sz_status sz_op_matmul_bwd_tied(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *rows, sz_tensor *dout,
                                sz_tensor *inp, sz_tensor *w, sz_tensor *ids, int N, int C, int OC);
sz_status sz_op_encoder_bwd_tied(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *rows, sz_tensor *dout,
                                 sz_tensor *tokens, int B, int T, int C);
/* Floats of their rows tensor for B x T tokens of a V x C embedding: min(B*T, V) rows (the tokens'
 * distinct values), T rows (wpe's sums), the rule; 0 for a non-positive argument. */
int64_t sz_tied_rows_numel(int64_t B, int64_t T, int64_t V, int64_t C);
/* out[N,C] = (inp - mean) * rstd * w + b over C (eps 1e-5); overwrites out, mean[N], rstd[N].
 * b may be NULL: no bias. */
sz_status sz_op_layernorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *mean, sz_tensor *rstd, sz_tensor *inp,
                              sz_tensor *w, sz_tensor *b, int N, int C);
/* Accumulates into dinp[N,C], dw[C] and db[C]; db may be NULL (a layernorm without bias). */
sz_status sz_op_layernorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                              sz_tensor *inp, sz_tensor *w, sz_tensor *mean, sz_tensor *rstd, int N, int C);
/* out[N,OC] = inp[N,C] . w[OC,C]^T + b (overwrites out; b may be NULL) */
sz_status sz_op_matmul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, sz_tensor *w, sz_tensor *b,
                           int N, int C, int OC);
/* Accumulates into dinp[N,C], dw[OC,C] and db[OC] (db may be NULL). */
sz_status sz_op_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                           sz_tensor *inp, sz_tensor *w, int N, int C, int OC);
/* Causal self-attention, NH heads, llm.c semantics: inp[B,T,3C] (q,k,v) -> out[B,T,C] (overwritten).
 * Memory linear in T: stats [B,NH,T,2] floats (per query row: softmax max, 1/sum; overwritten) are
 * all the forward saves; the backward recomputes the probabilities from inp and stats and
 * accumulates into dinp[B,T,3C]. */
sz_status sz_op_attention_fwd(sz_unit *u, sz_tensor *out, sz_tensor *stats, sz_tensor *inp, int B, int T, int C,
                              int NH);
sz_status sz_op_attention_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, sz_tensor *inp, sz_tensor *stats,
                              int B, int T, int C, int NH);
/* out = gelu(inp) on n elements (overwrites); backward accumulates dinp += gelu'(inp) * dout. */
sz_status sz_op_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n);
sz_status sz_op_gelu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n);
/* The linear layer fused with the GELU around it (GPT-2's MLP), each output tile's GELU taken right
 * after the tile's product while it is in cache; the bits of the separate ops. Forward: OVERWRITES
 * out[N,OC] = inp[N,C] . w[OC,C]^T + b (b may be NULL; out fp32) and gout = gelu(out): matmul_fwd
 * then gelu_fwd. Backward of a linear layer whose input inp[N,C] was gelu(pre) (pre fp32, [N,C]):
 * OVERWRITES dinp[N,C] = gelu'(pre) * (dout[N,OC] . w) — no tensor holds the product, and dinp
 * needs no zeroing — and ACCUMULATES into dw[OC,C] and db[OC] (db may be NULL): the bits of
 * matmul_bwd into a zeroed t of dinp's type followed by gelu_bwd(dinp, pre, t) into a zeroed dinp.
 * Element types as matmul_fwd / matmul_bwd. */
sz_status sz_op_matmul_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *gout, sz_tensor *inp, sz_tensor *w,
                                sz_tensor *b, int N, int C, int OC);
sz_status sz_op_gelu_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                                sz_tensor *inp, sz_tensor *w, sz_tensor *pre, int N, int C, int OC);
/* out = a + b on n elements (overwrites; out may be a or b); backward accumulates da += dout,
 * db += dout. */
sz_status sz_op_residual_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n);
sz_status sz_op_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, int64_t n);
/* The residual add fused with the layernorm that reads its sum, [N,C]: OVERWRITES res = a + b and
 * out, mean, rstd = layernorm(res; w, b_ln) (b_ln may be NULL). Backward: ACCUMULATES the
 * layernorm's input gradient into dres (the residual stream's gradient), then da += dres,
 * db += dres, and dw, db_ln (may be NULL) as sz_op_layernorm_bwd. The same bits as the ops
 * residual_fwd + layernorm_fwd and layernorm_bwd + residual_bwd. */
sz_status sz_op_residual_layernorm_fwd(sz_unit *u, sz_tensor *res, sz_tensor *out, sz_tensor *mean, sz_tensor *rstd,
                                       sz_tensor *a, sz_tensor *b, sz_tensor *w, sz_tensor *b_ln, int N, int C);
sz_status sz_op_layernorm_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dres, sz_tensor *dw,
                                       sz_tensor *db_ln, sz_tensor *dout, sz_tensor *res, sz_tensor *w,
                                       sz_tensor *mean, sz_tensor *rstd, int N, int C);
/* logits[N,Vp] -> probs[N,Vp], losses[N] over the first V columns (both overwritten); targets
 * int32[N] in [0, V) */
sz_status sz_op_softmax_xent_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *probs, sz_tensor *logits,
                                 sz_tensor *targets, int N, int V, int Vp);
/* OVERWRITES dlogits = (probs - onehot(targets)) * sz_unit_loss_scale(u) (columns >= V: 0); the
 * first gradient of the backward, so nothing needs zeroing before it. Outside a model with a loss
 * tensor the scale is 1/N. */
sz_status sz_op_softmax_xent_bwd(sz_unit *u, sz_tensor *dlogits, sz_tensor *probs, sz_tensor *targets,
                                 int N, int V, int Vp);
/* Both in one pass, in place: WRITES losses[N] and OVERWRITES logits[N,Vp] with dlogits =
 * (softmax(logits) - onehot(targets)) * sz_unit_loss_scale(u) (columns >= V: 0). Called in a
 * head's forward, it saves the probs and dlogits tensors (the backward reads logits as dlogits);
 * the same bits as _fwd then _bwd. */
sz_status sz_op_softmax_xent_fused(sz_unit *u, sz_tensor *losses, sz_tensor *logits, sz_tensor *targets, int N,
                                   int V, int Vp);

/* ---- operations of LLaMA-style models (codelets/<op>.c; fp32, the same bits at any thread count).
 * N rows of C channels. Each says whether it OVERWRITES or ACCUMULATES (+=) into its outputs. */
/* RMSNorm: out[N,C] = inp · rstd · w, rstd[N] = 1/sqrt(mean over C of inp² + eps) (LLaMA: eps
 * 1e-5 or 1e-6). Overwrites out and rstd (saved for the backward). */
sz_status sz_op_rmsnorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *rstd, sz_tensor *inp, sz_tensor *w, int N, int C,
                            float eps);
/* Accumulates into dinp[N,C] and dw[C] (either may be NULL). */
sz_status sz_op_rmsnorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *dout, sz_tensor *inp, sz_tensor *w,
                            sz_tensor *rstd, int N, int C);
/* The residual add fused with the RMSNorm that reads its sum: OVERWRITES res = a + b, out and rstd
 * = rmsnorm(res; w). Backward: ACCUMULATES the norm's input gradient into dres (the residual
 * stream's gradient), then da += dres, db += dres, and dw. The same bits as residual_fwd +
 * rmsnorm_fwd and rmsnorm_bwd + residual_bwd. */
sz_status sz_op_residual_rmsnorm_fwd(sz_unit *u, sz_tensor *res, sz_tensor *out, sz_tensor *rstd, sz_tensor *a,
                                     sz_tensor *b, sz_tensor *w, int N, int C, float eps);
sz_status sz_op_rmsnorm_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dres, sz_tensor *dw,
                                     sz_tensor *dout, sz_tensor *res, sz_tensor *w, sz_tensor *rstd, int N, int C);
/* SiLU: out = inp · sigmoid(inp) over n elements, overwrites out; the backward accumulates into dinp. */
sz_status sz_op_silu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n);
sz_status sz_op_silu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n);
/* Elementwise product: out = a · b over n elements, overwrites out (SwiGLU = mul(silu(gate), up));
 * the backward accumulates da += dout · b and db += dout · a (either may be NULL). */
sz_status sz_op_mul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n);
sz_status sz_op_mul_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, sz_tensor *a, sz_tensor *b,
                        int64_t n);
/* SwiGLU, LLaMA's MLP gate in one pass: out = silu(gate) · up over n elements, overwrites out; the
 * backward accumulates dgate += dout · up · silu'(gate) and dup += dout · silu(gate). On the native
 * bf16 path out, dgate, dup and dout may be bf16 (gate and up fp32). CPU and CUDA implementations. */
sz_status sz_op_swiglu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *gate, sz_tensor *up, int64_t n);
sz_status sz_op_swiglu_bwd(sz_unit *u, sz_tensor *dgate, sz_tensor *dup, sz_tensor *dout, sz_tensor *gate,
                           sz_tensor *up, int64_t n);
/* Rotary position embedding on a fused qkv [B,T,3C] (q | k | v, as sz_op_attention_fwd reads it),
 * NH heads of hs = C/NH channels (hs even): in q and k each head's pair (2i, 2i+1) at position t
 * is rotated by the angle t · theta^(-2i/hs) (LLaMA: theta 10000); v is copied. Overwrites out
 * (out may be inp itself); the backward accumulates into dinp [B,T,3C]. */
sz_status sz_op_rope_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int B, int T, int C, int NH, float theta);
sz_status sz_op_rope_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, int B, int T, int C, int NH, float theta);
/* Token embedding without a position table: out[N,C] = wte[tokens[n], :], tokens int32 [N],
 * wte [V,C]. Overwrites out; the backward accumulates into dwte the dout rows at their tokens (a bf16
 * dwte of a unit with round_grads, under mixed precision with the rounding folded: the fp32 sums
 * rounded into it, a CPU task whose scratch is sz_embedding_round_host_bytes).
 * A token outside [0, V) is not a crash: the task records "embedding: token <value> at row <r> is
 * outside the vocabulary [0, V)" and the model's next sz_model_forward_backward / eval / update
 * returns SZ_ERR_INVALID with that message logged. */
sz_status sz_op_embedding_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tokens, sz_tensor *wte, int N, int C, int V);
sz_status sz_op_embedding_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dout, sz_tensor *tokens, int N, int C, int V);
/* Mean-squared error per row: losses[r] = mean over C of (pred - target)², overwrites losses[N]
 * (hand it to sz_model_set_loss). The backward OVERWRITES dpred[N,C] = 2 (pred - target) / C ·
 * the loss scale 1/(N·M·N_d) (rows per rank, micro-batches, ranks): the gradient of the step's
 * mean loss, which the reduction over ranks then sums. */
sz_status sz_op_mse_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *pred, sz_tensor *target, int N, int C);
sz_status sz_op_mse_bwd(sz_unit *u, sz_tensor *dpred, sz_tensor *pred, sz_tensor *target, int N, int C);

/* ---- the codelets the engine registers (what sz-info --codelets lists) -------------------- */
typedef struct sz_codelet_desc {
    const char *name;      /* the codelet's name, e.g. "matmul_fwd" */
    const char *doc;       /* one line: what it computes */
    const char *perfmodel; /* its perf model's symbol ("" without) */
    int cpu, cuda, opencl; /* implementations of each kind */
} sz_codelet_desc;
int sz_codelets_count(void);
/* Codelet i in 0..sz_codelets_count()-1; SZ_ERR_INVALID outside. Needs no context. */
sz_status sz_codelet_info(int i, sz_codelet_desc *out);

/* ---- training ---------------------------------------------------------------------------- */
typedef enum sz_decay { SZ_DECAY_MATRICES = 0, SZ_DECAY_ALL } sz_decay;

typedef struct sz_train_config {
    float lr, beta1, beta2, eps, weight_decay; /* beta1, beta2, eps: AdamW's (SGD ignores them);
                                  weight_decay: decoupled for AdamW, L2 for SGD (see sz_optimizer) */
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
 * clip, the optimizer (sz_zero_config.optimizer: AdamW or SGD) on the owned shard, share the
 * updated parameters (as the stage requires). */
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
    SZ_MEM_OPT_STATE0,      /* the optimizer's first fp32 state: Adam's m, SGD's momentum buffer */
    SZ_MEM_OPT_STATE1,      /* its second: Adam's v (SGD has none) */
    SZ_MEM_ACTIVATIONS,     /* model tensors: activations, their gradients, inputs */
    SZ_MEM_COMM,            /* communication buffers */
    SZ_MEM_CHECKPOINTS,     /* offloaded activation checkpoints while on the device pool (peak) */
    SZ_MEM_HOST,            /* the host pool: offloaded checkpoints (not part of the device peak) */
    SZ_MEM_HOST_BUFFERS,    /* host buffers beside the engine's tensors that follow the model or the batch
                               (sz_zero_config.host_bytes: an app's data loader, the matmul kernels'
                               working memory from sz_matmul_host_bytes); not part of the device peak */
    SZ_MEM_NCATEGORIES
} sz_mem_category;
/* The names of 0.1 (AdamW's states), kept for apps written against them. */
#define SZ_MEM_ADAM_M SZ_MEM_OPT_STATE0
#define SZ_MEM_ADAM_V SZ_MEM_OPT_STATE1

const char *sz_mem_category_name(sz_mem_category c);
/* The label of category c in the memory report of a model trained with optimizer o: the two
 * optimizer-state categories (SZ_MEM_OPT_STATE0, SZ_MEM_OPT_STATE1) by the optimizer's own state names
 * ("adamw state adam_m", "adamw state adam_v"; "sgd state momentum", and "sgd: no state 2" for the
 * one SGD does not keep), every other category as sz_mem_category_name. Writes at most n bytes
 * into buf and returns buf. */
const char *sz_mem_category_label(sz_mem_category c, sz_optimizer o, char *buf, size_t n);

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

#define SZ_MAX_CODELETS 64 /* sz_memory_report.codelets */
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
                                          compute ran too (measured under zero and StarPU's predefined
                                          policies; -1: a policy given as a structure of its own) */
    double comm_task_s, compute_task_s; /* last step: seconds communication tasks ran, and the
                                          seconds any compute task ran (the union) */
    double matmul_task_s;              /* last step: seconds the matmul tasks (forward and backward,
                                          with the GELU-fused matmul_gelu_fwd / gelu_matmul_bwd)
                                          ran, summed over tasks (zero policy; else 0) */
    double optimizer_task_s;           /* last step: seconds the optimizer-update tasks ran, summed
                                          over tasks (zero policy; else 0) */
    double convert_task_s;             /* last step: seconds the fp32 <-> bf16 conversion tasks
                                          (working copies, gradient rounding) ran, summed (zero policy) */
    double zero_task_s;                /* last step: seconds the zeroing tasks ran, summed (zero policy) */
    int ncodelets;                     /* last step: every codelet that ran on this rank (zero policy;
                                          else 0), in the order each first ran, at most SZ_MAX_CODELETS */
    struct {
        char name[32];                 /*   the codelet's name (sz-info --codelets lists them) */
        double seconds;                /*   its tasks' run time, summed over tasks */
        int tasks;                     /*   how many of its tasks ran */
    } codelets[SZ_MAX_CODELETS];
    int ntimeline;                     /* last step: live transient bytes over time, at most 64 points */
    double timeline_ms[64];            /*   ms since the step began */
    int64_t timeline_bytes[64];        /*   transient bytes alive then (persistent ones come on top) */
    int64_t mem_budget;
    int arenas;                        /* M_D on (sz_zero_config.arenas) */
    int pool_active;                   /* the device pool below is in use (CPU-only nodes) */
    sz_pool_stats pool;
    int64_t rss_peak_bytes;            /* the process's peak resident set so far (getrusage): the engine's
                                          bytes plus the runtime (StarPU, MPI, code, the app's own
                                          buffers); with shared-memory collectives it also counts the
                                          peers' pool pages this rank has read */
    int budget_from_machine;           /* 1: mem_budget is the machine's (sz_context_memory_budget), no
                                          budget having been given */
    char bf16_path[16];                /* sz_model_bf16_path: "native", "emulated", "fp16" or "fp32" */
    int64_t matmul_host_peak_bytes;    /* measured: the most host bytes the matmul kernels' working memory
                                          (oneDNN scratchpads, packed tiles) held at once in this process */
    /* Measured device memory (tasks/devwatch.c), sampled at every release and after each step: */
    int64_t starpu_node_peak_bytes;    /* the most StarPU had allocated on this rank's compute memory node:
                                          the GPU's with a CUDA worker (every device copy, its cache of freed
                                          buffers, the GPU arena), else main RAM (there only its temporaries:
                                          the model's own buffers are registered, not StarPU's); -1 unknown */
    int gpu_device;                    /* the CUDA device measured (-1: no CUDA worker; the rest is -1 then) */
    int64_t gpu_cuda_used_bytes;       /* cudaMemGetInfo total - free after a step, the most (every process) */
    int64_t gpu_cuda_used_at_start_bytes; /* the same when the budget was taken */
    int64_t gpu_arena_bytes;           /* SZ_GPU_ARENA=1: the arena (part of starpu_node_peak_bytes); else 0 */
    int gpu_sharers;                   /* ranks of this node driving that device */
} sz_memory_report;

sz_status sz_model_memory_report(const sz_model *m, sz_memory_report *out);
/* Host bytes the matmul kernels hold at most while a model runs its n linear layers y[rows, out[i]] =
 * x[rows, in[i]] . W^T (forward and backward) on `workers` CPU workers of `threads` kernel threads
 * each (sz_runtime_info's compute_workers and kernel_threads): oneDNN's scratchpads (queried from the
 * primitives the kernels will run; each thread keeps the largest it used) and the packed tiles of
 * the calls running at once. What an app adds to sz_zero_config.host_bytes (the report's
 * matmul_host_peak_bytes is the measured figure). Pure: no runtime needed. */
int64_t sz_matmul_host_bytes(int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out);
/* The same for linear layers computed by the bf16 kernels (bf16 inputs and weights, fp32 or bf16
 * outputs): oneDNN's native bf16 tiles where it has them (unless SZ_ONEDNN_BF16=0), else the fp32
 * copies the emulation widens the operands into (a call's inputs, weights and bf16 output, in
 * fp32) — the working copies a model using those kernels adds to sz_zero_config.host_bytes (GPT-2
 * adds both figures on the native bf16 path, sz_resolved_precision.native: an upper bound). */
int64_t sz_matmul_host_bytes_bf16(int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out);
/* The same for linear layers of fp32 activations with bf16 weights (the emulated bf16 path without
 * working copies: sz_op_matmul_* / sz_op_*gelu* given an fp32 inp or dout and a bf16 w): the fp32
 * tiles' scratchpads plus each thread's widened slice of the weight, kept by the thread like its
 * scratchpad (forward 384 x in[i] floats, backward out[i] x 400, or out[i] x in[i] where in[i] <= 384:
 * GPT-2's lm head backward keeps 80 MB per kernel thread). */
int64_t sz_matmul_host_bytes_wbf16(int workers, int threads, int64_t rows, int n, const int64_t *in, const int64_t *out);
/* What the linear layers add when mixed precision's gradient rounding is folded into them
 * (sz_resolved_precision.grads_rounded): the fp32 panel of whole tile rows one dweight / dbias call holds
 * while it rounds (sz_k_matmul_dparams_round_bytes), the largest of the n shapes, per worker. */
int64_t sz_matmul_round_host_bytes(int workers, int n, const int64_t *in, const int64_t *out);
/* What a token embedding's backward (sz_op_embedding_bwd) adds when it rounds into its unit's bf16
 * gradient: N + V + 1 int32 of scratch (the N rows grouped by token, a V x C table), per worker. */
int64_t sz_embedding_round_host_bytes(int workers, int64_t N, int64_t V);

/* Collective yardstick: plain MPI_Reduce_scatter_block + MPI_Allgather on the same element counts
 * (one per unit), with buffers allocated once and reused, `reps` times. Returns the bytes received
 * per rank per second (what sz-bench reports as mpi_gbps beside the engine's comm_gbps). */
sz_status sz_context_mpi_baseline(sz_context *ctx, const int64_t *elems, int n, int reps, double *bytes_per_s);
/* Each unit's padded element count (n = sz_model_nunits), for the yardstick above. */
sz_status sz_model_unit_sizes(const sz_model *m, int64_t *padded);

/* Collective: every rank's report, gathered on rank 0 into ranks[0..nd-1] (other ranks may pass NULL). */
sz_status sz_model_memory_report_all(const sz_model *m, sz_memory_report *ranks);

/* ---- persistent training state: saving and resuming (tasks/state.c) ----------------------
 * A unit's persistent state is up to four flat arrays over its padded elements (parameters at
 * the model's precision, the fp32 master under mixed precision, the optimizer's states: Adam's m
 * and v, SGD's momentum buffer, none for SGD without momentum). Whatever the
 * stage, rank r "owns" elements [r*shard, (r+1)*shard) of each: that is what it saves, so N_d
 * ranks write N_d disjoint shards in parallel. When loading, a rank is given every element it
 * holds (all of them where it keeps the full array: stage 0, and the parameters at stages 0-2),
 * possibly in pieces cut from shards saved at another N_d: a state saved at one layout loads at
 * any other. None of these calls is collective; reads and writes wait for the tasks using the
 * data (call them between steps). Values travel as fp32; bf16 parameters widen exactly and round
 * back to the same bits. */
typedef enum sz_state_kind {
    SZ_STATE_PARAMS = 0, SZ_STATE_MASTER,
    SZ_STATE_ADAM_M,     /* the optimizer's first state (Adam's m, SGD's momentum buffer) */
    SZ_STATE_ADAM_V,     /* its second (Adam's v) */
    SZ_STATE_NKINDS
} sz_state_kind;
#define SZ_STATE_OPT0 SZ_STATE_ADAM_M
#define SZ_STATE_OPT1 SZ_STATE_ADAM_V

const char *sz_state_kind_name(sz_state_kind kind);     /* "params", "master", "adam_m", "adam_v" */
/* The name of `kind` under this model's optimizer, as saved states name their files: "params",
 * "master", and the optimizer's own ("adam_m", "adam_v"; SGD's "momentum"). */
const char *sz_model_state_name(const sz_model *m, sz_state_kind kind);
/* The model's optimizer as sz_optimizer_name says it (what a saved state records). */
const char *sz_model_optimizer_name(const sz_model *m);
/* 1 when the model keeps state `kind` (the master only under mixed precision, the optimizer's as
 * many as sz_optimizer_states), else 0. */
int sz_model_state_has(const sz_model *m, sz_state_kind kind);
/* Unit `unit` (after sz_model_finalize): its name, real and padded element counts, and the slice
 * this rank owns, [*lo, *lo + *n). Any output pointer may be NULL. */
sz_status sz_model_state_shard(const sz_model *m, int unit, const char **name, int64_t *numel, int64_t *padded,
                               int64_t *lo, int64_t *n);
/* Parameter `param` of `unit`: its name, offset in the unit's flat buffer and element count. */
int sz_model_unit_nparams(const sz_model *m, int unit);
sz_status sz_model_unit_param_info(const sz_model *m, int unit, int param, const char **name, int64_t *offset,
                                   int64_t *numel);
/* This rank's owned slice of `kind` for `unit` as fp32 (n floats, n from sz_model_state_shard).
 * The optimizer's state before the first update reads as zeros. */
sz_status sz_model_state_shard_read(sz_model *m, int unit, sz_state_kind kind, float *dst);
/* The elements of `kind` this rank holds for `unit` and must be given when loading: [*lo, *lo + *n). */
sz_status sz_model_state_need(const sz_model *m, int unit, sz_state_kind kind, int64_t *lo, int64_t *n);
/* Values of elements [lo, lo + n) of `kind` (src: n floats) go into what this rank holds of
 * them; the part outside its holding is ignored. */
sz_status sz_model_state_write(sz_model *m, int unit, sz_state_kind kind, int64_t lo, int64_t n, const float *src);

/* ==== the ZeRO estimator: model-state bytes, communication, shards, buffers (pure C) ======== */
/* (A model's activation bytes are the model's business: GPT-2's are in starzero_gpt2.h.) */
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
    double adam_m;      /* fp32 Adam first moment (SGD's momentum buffer): 4Ψ at stage 0, 4Ψ/N otherwise */
    double adam_v;      /* fp32 Adam second moment: 4Ψ at stage 0, 4Ψ/N otherwise (0 for SGD) */
} sz_zero_breakdown;

/* Fills *out (every field) for (stage, psi, nd, mixed). SZ_ERR_INVALID, and *out untouched, for
 * an invalid argument or out == NULL. */
sz_status sz_zero_state_breakdown(int stage, double psi, int nd, int mixed, sz_zero_breakdown *out);

/* The same two for an optimizer keeping `states` fp32 floats per element (sz_optimizer_states:
 * AdamW 2 (what the functions above assume), SGD with momentum 1 (its buffer in adam_m), plain
 * SGD 0). With S states, K = 4 + 4S under mixed precision (master + states) and the optimizer
 * state is 4SΨ fp32: e.g. SGD with momentum, mixed, K = 8:
 *   stage 0: 12Ψ, 1: 4Ψ + 8Ψ/N, 2: 2Ψ + 10Ψ/N, 3: 12Ψ/N (fp32: 12Ψ, 8Ψ + 4Ψ/N, 4Ψ + 8Ψ/N, 12Ψ/N).
 * states outside 0..2: -1.0 / SZ_ERR_INVALID. */
double sz_zero_model_state_bytes_opt(int stage, double psi, int nd, int mixed, int states);
sz_status sz_zero_state_breakdown_opt(int stage, double psi, int nd, int mixed, int states, sz_zero_breakdown *out);

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
 * (10, 3) -> 12; a unit without parameters still gives every rank one element: (0, 3) -> 3.
 * -1 when numel < 0, nd < 1 or the result would overflow. The engine, the plan and the estimators
 * all pad with this function. */
int64_t sz_zero_padded(int64_t numel, int nd);

/* Elements of each rank's slice: sz_zero_padded(numel, nd) / nd; (10, 3) -> 4. -1 as above. */
int64_t sz_zero_shard(int64_t numel, int nd);

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

/* ---- planning a model without a runtime (sz-estimate) -------------------------------------- */

/* A model as its create function would build it, for predicting its step without StarPU or MPI:
 * its units exactly as it hands them to sz_model_add_unit (their tensor tables, names and flags;
 * the callbacks are never called) and what it would register beside them under one configuration.
 * A model library fills one from the tables its create uses (sz_gpt2_shape, sz_llama_shape). */
typedef struct sz_model_shape {
    int nunits;
    sz_unit_desc *units;        /* units[i].name points into names[i] */
    char (*names)[32];
    int64_t *ckpt_bytes;        /* per unit: its input checkpoint's bytes (sz_model_checkpoint; 0: none) */
    int64_t activation_bytes;   /* the activations it registers (the plan's SZ_MEM_ACTIVATIONS: with
                                   offloaded checkpoints the device part) */
    int64_t host_pool_bytes;    /* offloaded checkpoints: the host pool (SZ_MEM_HOST) */
    int64_t host_buffer_bytes;  /* what it adds to sz_zero_config.host_bytes (its kernels' working memory) */
    void *model;                /* model_bytes of room for the model's own tables (its tensor specs) */
} sz_model_shape;
/* Room for nunits units (zeroed, names wired) and model_bytes of the model's own, in one block. */
sz_status sz_model_shape_init(sz_model_shape *s, int nunits, size_t model_bytes);
void sz_model_shape_free(sz_model_shape *s);
/* What a model's shape function starts with: B x T (1 <= T <= max_seq), workers and threads >= 1 and
 * z's precision resolved on this CPU into *p (sz_precision_resolve_cpu), else SZ_ERR_INVALID with the
 * reason in err; then sz_model_shape_init(s, nunits, model_bytes). */
sz_status sz_model_shape_begin(sz_model_shape *s, const sz_zero_config *z, int B, int T, int max_seq, int workers,
                               int threads, int nunits, size_t model_bytes, sz_resolved_precision *p, char *err,
                               size_t errlen);
/* The step plan of `rank` among nd ranks for the shape under z, as sz-train's engine builds and
 * submits it (sz_precision_resolve_cpu's precision; the folding switches from the environment;
 * clip: the update clips the gradients — fp16 takes their norm anyway; comm_worker: a
 * communication worker): *peak gets its folded peak bytes (the figure sz_model_finalize predicts
 * and sz_train_stats measures), and with `print` the plan is printed action by action (json: as
 * one JSON object). SZ_ERR_INVALID for a configuration sz_model_set_zero would refuse. */
sz_status sz_model_shape_plan(const sz_model_shape *s, const sz_zero_config *z, int nd, int rank, int clip,
                              int comm_worker, int64_t *peak, FILE *print, int json);

/* ---- fitting a budget -------------------------------------------------------------------- */

/* The smallest N_d in 1..max_nd whose model-state bytes per rank plus extra_bytes (activations,
 * buffers: whatever the caller adds per rank) fit in budget_bytes (<=, with a relative slack of
 * 1e-12 so an exact fit on paper survives rounding), or -1 when none does or an argument is
 * invalid (stage outside 0..3, psi < 0, max_nd < 1, negative bytes). */
int sz_zero_min_nd(int stage, double psi, int mixed, double budget_bytes, double extra_bytes, int max_nd);
/* The same for an optimizer keeping `states` fp32 floats per element (see sz_zero_model_state_bytes_opt). */
int sz_zero_min_nd_opt(int stage, double psi, int mixed, int states, double budget_bytes, double extra_bytes,
                       int max_nd);

#ifdef __cplusplus
}
#endif
#endif /* STARZERO_H */
