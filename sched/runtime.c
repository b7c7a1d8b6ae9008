/* sched/runtime.c — the sz_context lifecycle: MPI (THREAD_MULTIPLE, so our own collectives can
 * sit beside StarPU-MPI), hwloc, then StarPU + StarPU-MPI with this rank's share of the node's
 * cores; rank/world queries, the policy in effect, and the printed runtime summary. */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#include <starpu_cublas_v2.h>
#endif
#include <starpu_mpi.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sz_runtime.h"
#include "sz_kernels.h"
#include "sz_sched.h"
#include "sz_deadline.h"
#if SZ_WITH_CUDA
#include "sz_cuda_kernels.h"
#endif
#include "sz_gpu_budget.h"

void sz_context_config_defaults(sz_context_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->ncpus = -1;
    cfg->ncuda = -1;
    cfg->bind_share = 1;
    cfg->kernel_threads = -1;
    cfg->comm_worker = -1;
    cfg->sched_policy = NULL;
    cfg->log_fn = NULL;
    cfg->log_level = SZ_LOG_WARN;
    cfg->timeout_s = 600;
}

void sz_logv(const struct sz_context *ctx, sz_log_level level, const char *fmt, va_list ap)
{
    if (ctx && level > ctx->log_level)
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (ctx && level == SZ_LOG_ERROR) { /* what this rank tells the others if it leaves (sched/deadline.c) */
        char *last = ((struct sz_context *)ctx)->last_error;
        size_t n = strnlen(msg, sizeof ctx->last_error - 1);
        memcpy(last, msg, n);
        last[n] = 0;
    }
    if (ctx)
        ctx->log_fn(level, msg, ctx->log_user);
    else
        sz_log_stderr(level, msg, NULL);
}

void sz_context_log(const sz_context *ctx, sz_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sz_logv(ctx, level, fmt, ap);
    va_end(ap);
}


/* Pin this rank's StarPU workers to its own cores unless the user already chose a binding.
 * The StarPU-MPI progress thread is left unbound (docs/ARCHITECTURE.md, runtime facts: binding it onto a worker's core
 * halved throughput on a 2-core node). Environment variables the user set always win. */
static void apply_core_share(struct sz_context *ctx)
{
    if (getenv("STARPU_WORKERS_CPUID") || getenv("STARPU_WORKERS_COREID") || getenv("STARPU_WORKERS_NOBIND"))
        return;
    char list[1024] = "";
    size_t len = 0;
    for (int c = 0; c < ctx->topology.ncores && len + 16 < sizeof list; c++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", c ? " " : "", ctx->topology.first_core + c);
    setenv("STARPU_WORKERS_COREID", list, 1);
    setenv("STARPU_MPI_NOBIND", "1", 0);
}

/* Run on every CPU worker once: its compute kernels are OpenMP-parallel over the rank's whole
 * core share (StarPU binds a worker to one core, and OpenMP threads inherit the binding), with a
 * fixed thread count so results never depend on STARPU_NCPU. */
static void widen_worker(void *arg)
{
    struct sz_context *ctx = arg;
    if (ctx->share_set)
        hwloc_set_cpubind(ctx->topo, ctx->share_set, HWLOC_CPUBIND_THREAD);
    omp_set_num_threads(starpu_worker_get_id() == sz_comm_worker ? 1 : ctx->kernel_threads);
}

/* The communication worker: by default on with several ranks when the rank has two cores or
 * more. With one core the collectives' copies and sums compete with compute for it: measured on
 * 2 ranks x 1 core, d12 stage 3, the step was 5-10% slower and the transport fell from 1.4-1.7 to
 * 0.9 GB/s, though overlap rose from 0 to 0.85. The config, then SZ_COMM_WORKER=0|1, say otherwise. */
static int want_comm_worker(const struct sz_context *ctx, const sz_context_config *cfg, int world_size, int cores)
{
    if (ctx->env.comm_worker >= 0)
        return ctx->env.comm_worker;
    return cfg->comm_worker >= 0 ? cfg->comm_worker : world_size > 1 && cores >= 2;
}

/* One rank per GPU by default: with GPUs visible and neither the config nor STARPU_NCUDA naming a
 * worker count, this rank gets one CUDA worker; its n CUDA workers (that one, or the count named)
 * drive devices (local rank x n + i) mod visible devices, unless STARPU_WORKERS_CUDAID names them
 * (StarPU reads that variable before starpu_conf's explicit ids). So STARPU_NCUDA=1 on a node of
 * several GPUs still gives each rank its own, where StarPU alone would put every rank on device 0.
 * Under scripts/gpu-rank.sh (CUDA_VISIBLE_DEVICES = the local rank's GPU) that is device 0 of the
 * one visible; more ranks than GPUs share them round-robin (allowed for testing; NCCL then stays
 * off, tasks/nccl.c). Nothing happens without CUDA or without a device: a CPU-only run starts as
 * before. SZ_NCUDA_DEFAULT=0 leaves StarPU's default (every GPU to every rank). */
static void choose_gpu(struct sz_context *ctx, const sz_context_config *cfg, struct starpu_conf *conf)
{
#if SZ_WITH_CUDA
    const char *env_n = getenv("STARPU_NCUDA");
    if (!ctx->env.ncuda_default)
        return;
    int n = env_n && *env_n ? atoi(env_n) : cfg->ncuda;
    if (n == 0)
        return;
    int ngpu = sz_cuda_device_count();
    if (ngpu < 1)
        return;
    if (n < 0) /* not named: one (StarPU's default would be every GPU for every rank) */
        conf->ncuda = n = 1;
    if (n > STARPU_NMAXWORKERS)
        n = STARPU_NMAXWORKERS;
    int dev = ctx->topology.local_rank * n % ngpu;
    conf->use_explicit_workers_cuda_gpuid = 1;
    for (int i = 0; i < n; i++)
        conf->workers_cuda_gpuid[i] = (unsigned)((ctx->topology.local_rank * n + i) % ngpu);
    /* every device this rank's workers drive, each once (STARPU_WORKERS_CUDAID's list where set:
     * StarPU takes it before the explicit ids), for a budget per device (decide_gpu_budget) */
    const char *ids = getenv("STARPU_WORKERS_CUDAID");
    ctx->ngpu_devices = 0;
    for (int i = 0; i < n && ctx->ngpu_devices < SZ_GPU_BUDGET_MAX_DEVICES; i++) {
        int d = (int)conf->workers_cuda_gpuid[i];
        if (ids && *ids) { /* its i-th entry, the list repeated as StarPU repeats it */
            char *end = NULL;
            const char *p = ids;
            int k = 0, first = -1, got = -1;
            for (long v = strtol(p, &end, 10); end != p; p = end, v = strtol(p, &end, 10), k++) {
                if (first < 0)
                    first = (int)v;
                if (k == i)
                    got = (int)v;
            }
            d = got >= 0 ? got : first >= 0 ? first : d;
        }
        int seen = 0;
        for (int j = 0; j < ctx->ngpu_devices; j++)
            seen |= ctx->gpu_devices[j] == d;
        if (!seen)
            ctx->gpu_devices[ctx->ngpu_devices++] = d;
    }
    ctx->gpu_device = ids && *ids ? ctx->gpu_devices[0] : dev;
    sz_context_log(ctx, SZ_LOG_INFO, "GPU: local rank %d of %d -> CUDA device %d of %d visible%s",
                   ctx->topology.local_rank, ctx->topology.local_size, ctx->gpu_device, ngpu,
                   ctx->topology.local_size > ngpu ? " (several ranks share a GPU)" : "");
#else
    (void)ctx, (void)cfg, (void)conf;
#endif
}

/* The STARPU_LIMIT_CUDA_MEM value this process set (from a budget), so that a later context in the
 * same process does not take it for the user's. */
static char cuda_limit_we_set[32];
#if SZ_WITH_CUDA
/* The same for the per-device STARPU_LIMIT_CUDA_<d>_MEM this process set (decide_gpu_budget). */
static char dev_limit_we_set[SZ_GPU_BUDGET_MAX_DEVICES][32];
#endif

/* The per-GPU default budget, decided once, before StarPU starts (starzero.h, sz_gpu_budget_info):
 * collective over the node's ranks (every rank comes here, with a GPU or not). Each rank with a
 * device makes its CUDA context there first (cudaMemGetInfo does), then the node's ranks exchange
 * their devices (by PCI bus id: sz_gpu_device_key), which also waits until every one has its
 * context, so the free memory measured next counts every sharer's context and none of their
 * allocations. user_limit: a STARPU_LIMIT_CUDA_MEM the user set (bytes; 0: none); with neither it
 * nor a --mem-budget (StarPU's limit then set from that, sz_context_init) the share becomes
 * StarPU's limit too. Without CUDA nothing happens. */
static void decide_gpu_budget(struct sz_context *ctx, const sz_context_config *cfg, int64_t user_limit)
{
#if SZ_WITH_CUDA
    enum { MAXD = SZ_GPU_BUDGET_MAX_DEVICES };
    int n = ctx->ngpu_devices > 0 ? ctx->ngpu_devices : ctx->gpu_device >= 0;
    int devs[MAXD];
    int64_t keys[MAXD], f[MAXD], t[MAXD];
    for (int i = 0; i < MAXD; i++)
        keys[i] = -1, f[i] = -1, t[i] = 0;
    for (int i = 0; i < n; i++) {
        devs[i] = ctx->ngpu_devices > 0 ? ctx->gpu_devices[i] : ctx->gpu_device;
        if (devs[i] >= 0 && sz_cuda_mem_info(devs[i], &f[i], &t[i]) != 0)
            devs[i] = -1; /* (no context: StarPU will say why) */
        keys[i] = sz_gpu_device_key(devs[i]);
    }
    int k[MAXD];
    for (int i = 0; i < MAXD; i++)
        k[i] = 1;
    MPI_Comm node;
    if (ctx->world_size > 1 &&
        MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        int nn = 1;
        MPI_Comm_size(node, &nn);
        int64_t *all = malloc((size_t)nn * MAXD * sizeof *all);
        if (all && MPI_Allgather(keys, MAXD, MPI_INT64_T, all, MAXD, MPI_INT64_T, node) == MPI_SUCCESS)
            sz_gpu_budget_count_sharers(all, nn, MAXD, keys, n, k);
        free(all);
        MPI_Comm_free(&node);
    }
    ctx->ngpu_budgets = 0;
    for (int i = 0; i < n; i++) {
        if (devs[i] < 0 || sz_cuda_mem_info(devs[i], &f[i], &t[i]) != 0)
            continue;
        /* StarPU's limit for this device: STARPU_LIMIT_CUDA_MEM wins, else STARPU_LIMIT_CUDA_<d>_MEM
         * (the user's; one this process set for an earlier context is dropped) */
        char var[48];
        snprintf(var, sizeof var, "STARPU_LIMIT_CUDA_%d_MEM", devs[i]);
        const char *dl = getenv(var);
        if (dl && devs[i] < MAXD && dev_limit_we_set[devs[i]][0] && !strcmp(dl, dev_limit_we_set[devs[i]])) {
            unsetenv(var);
            dl = NULL;
        }
        int64_t lim = user_limit > 0 ? user_limit : dl && *dl ? (int64_t)atoll(dl) << 20 : 0;
        sz_gpu_budget_info *b = &ctx->gpu_budgets[ctx->ngpu_budgets++];
        *b = (sz_gpu_budget_info){.device = devs[i], .sharers = k[i], .free_bytes = f[i], .total_bytes = t[i],
                                  .process_limit_bytes = lim};
        sz_gpu_budget_split(b);
        /* each CUDA memory node its own limit, from its own share (not one global value) */
        if (!lim && cfg->gpu_mem_limit <= 0 && b->share_bytes > 0 && devs[i] < MAXD) {
            char mib[32];
            snprintf(mib, sizeof mib, "%lld", (long long)(b->share_bytes >> 20 > 0 ? b->share_bytes >> 20 : 1));
            setenv(var, mib, 1);
            b->limit_from_share = 1;
            snprintf(dev_limit_we_set[devs[i]], sizeof dev_limit_we_set[0], "%s", mib);
        }
    }
    int tight = sz_gpu_budget_tightest(ctx->gpu_budgets, ctx->ngpu_budgets);
    if (tight < 0)
        return;
    ctx->gpu_budget = ctx->gpu_budgets[tight];
    char text[2048];
    sz_context_log(ctx, SZ_LOG_INFO, "%s%s",
                   sz_gpu_budgets_describe(ctx->gpu_budgets, ctx->ngpu_budgets, cfg->gpu_mem_limit, text, sizeof text),
                   ctx->gpu_budget.limit_from_share ? "; STARPU_LIMIT_CUDA_<d>_MEM set from each" : "");
#else
    (void)ctx, (void)cfg, (void)user_limit;
#endif
}

static void make_share_set(struct sz_context *ctx)
{
    ctx->share_set = hwloc_bitmap_alloc();
    for (int c = 0; c < ctx->topology.ncores; c++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(ctx->topo, HWLOC_OBJ_CORE, (unsigned)(ctx->topology.first_core + c));
        if (core && core->cpuset)
            hwloc_bitmap_or(ctx->share_set, ctx->share_set, core->cpuset);
    }
    if (hwloc_bitmap_iszero(ctx->share_set)) {
        hwloc_bitmap_free(ctx->share_set);
        ctx->share_set = NULL;
    }
}

/* mkdir -p `dir`/.starpu/sampling: 0 when it exists or was made. */
static int make_starpu_home(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/.starpu/sampling", dir) >= (int)sizeof path)
        return -1;
    for (char *p = path + 1;; p++)
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return -1;
            if (!(*p = c))
                return 0;
        }
}

/* StarPU keeps its calibration (perf models, bus samples) under $STARPU_HOME, else $HOME, and
 * aborts the process where it cannot create it. Where neither is set to a place that can be
 * written, StarPU is pointed at a cache directory instead ($XDG_CACHE_HOME/starzero, else
 * /tmp/starzero-<uid>), with a warning; a STARPU_HOME the user set is left alone. */
static void starpu_home_writable(void)
{
    const char *home = getenv("HOME");
    if (getenv("STARPU_HOME") || (home && *home && make_starpu_home(home) == 0))
        return;
    char alt[4096];
    const char *cache = getenv("XDG_CACHE_HOME");
    if (cache && *cache)
        snprintf(alt, sizeof alt, "%s/starzero", cache);
    if (!(cache && *cache) || make_starpu_home(alt) != 0)
        snprintf(alt, sizeof alt, "/tmp/starzero-%u", (unsigned)getuid());
    if (make_starpu_home(alt) != 0)
        return; /* nothing writable: StarPU will say so */
    setenv("STARPU_HOME", alt, 1);
    fprintf(stderr, "starzero: warning: HOME (%s) cannot hold StarPU's calibration files (.starpu/sampling); "
                    "using STARPU_HOME=%s (set STARPU_HOME to choose)\n", home && *home ? home : "unset", alt);
}

sz_status sz_runtime_start(sz_context **out, const sz_context_config *cfg_in, int *argc, char ***argv)
{
    if (!out)
        return SZ_ERR_INVALID;
    *out = NULL;
    sz_context_config cfg;
    if (cfg_in) cfg = *cfg_in; else sz_context_config_defaults(&cfg);
    if (!(cfg.timeout_s >= 0) || cfg.timeout_s > SZ_MAX_TIMEOUT_S) { /* NaN too; beyond: overflows */
        fprintf(stderr, "starzero: the collectives' timeout %g s is outside 0 (none) .. %g s (%.0f days): give "
                        "0 to wait forever, or at most that (sz_context_config.timeout_s, sz-train --timeout)\n",
                cfg.timeout_s, SZ_MAX_TIMEOUT_S, SZ_MAX_TIMEOUT_S / 86400);
        return SZ_ERR_INVALID;
    }

    struct sz_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return SZ_ERR_NOMEM;
    ctx->log_fn = cfg.log_fn ? cfg.log_fn : sz_log_stderr;
    ctx->log_user = cfg.log_fn ? cfg.log_user : &ctx->rank;
    sz_env_read(&ctx->env);
    sz_env_apply_kernels(&ctx->env);
    ctx->log_level = ctx->env.log_level >= 0 ? (sz_log_level)ctx->env.log_level : cfg.log_level;
    ctx->gpu_device = -1;
    ctx->gpu_budget.device = -1;

    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            free(ctx);
            return SZ_ERR_RUNTIME;
        }
        ctx->we_started_mpi = 1;
        if (provided < MPI_THREAD_SERIALIZED) {
            sz_context_log(ctx, SZ_LOG_ERROR, "MPI provides thread level %d; StarPU-MPI needs at least MPI_THREAD_SERIALIZED", provided);
            MPI_Finalize();
            free(ctx);
            return SZ_ERR_RUNTIME;
        }
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &ctx->comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctx->task_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &ctx->host_comm);
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->world_size);

    sz_status st = SZ_ERR_RUNTIME;
    if (hwloc_topology_init(&ctx->topo) != 0)
        goto fail_mpi;
    hwloc_topology_set_io_types_filter(ctx->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(ctx->topo) != 0)
        goto fail_topo;
    if ((st = sz_topology_discover(ctx)) != SZ_OK)
        goto fail_topo;
    if (cfg.bind_share) {
        apply_core_share(ctx);
        make_share_set(ctx);
    }
    ctx->kernel_threads = cfg.kernel_threads > 0 ? cfg.kernel_threads : ctx->topology.ncores;

    /* Unit-sized buffers are allocated and freed every step (gathered parameters, gradients in
     * flight, working copies). Served by mmap, each would be faulted in again on every use, and
     * under Open MPI's memory hooks each munmap costs more: keep them in the heap and reuse them. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    /* A CPU memory limit turns on StarPU's allocation cache: a buffer freed by invalidation (a
     * released gathered unit, reduced gradients) is handed to the next allocation of that size
     * instead of being faulted in afresh every step (measured: GPT-2 124M ZeRO-3 step 2.76 -> 1.98 s
     * on one rank). The default limit is this rank's share of the node's memory; SZ_ALLOC_CACHE=0
     * leaves StarPU without one (every temporary freed at once, as an allocator without a cache). */
    hwloc_obj_t root = hwloc_get_root_obj(ctx->topo);
    ctx->ram_share = root && root->total_memory ? root->total_memory / (uint64_t)ctx->topology.local_size : 0;
    if (!getenv("STARPU_LIMIT_CPU_MEM") && ctx->env.alloc_cache) {
        if (ctx->ram_share) {
            char mib[32];
            snprintf(mib, sizeof mib, "%llu", (unsigned long long)(ctx->ram_share >> 20));
            setenv("STARPU_LIMIT_CPU_MEM", mib, 1);
        }
    }
    /* The per-GPU budget as StarPU's own limit on each CUDA memory node (the plan's admission,
     * tasks/model.c, refuses before that a plan whose device peak exceeds it). */
    const char *user_lim = getenv("STARPU_LIMIT_CUDA_MEM");
    if (user_lim && cuda_limit_we_set[0] && !strcmp(user_lim, cuda_limit_we_set)) { /* an earlier context's */
        unsetenv("STARPU_LIMIT_CUDA_MEM");
        user_lim = NULL;
    }
    int64_t user_limit = user_lim && *user_lim ? (int64_t)atoll(user_lim) << 20 : 0;
    if (cfg.gpu_mem_limit > 0 && !getenv("STARPU_LIMIT_CUDA_MEM")) {
        char mib[32];
        snprintf(mib, sizeof mib, "%lld", (long long)(cfg.gpu_mem_limit >> 20 > 0 ? cfg.gpu_mem_limit >> 20 : 1));
        setenv("STARPU_LIMIT_CUDA_MEM", mib, 1);
        snprintf(cuda_limit_we_set, sizeof cuda_limit_we_set, "%s", mib);
    }
    /* StarPU writes dirty GPU buffers back to their home in RAM whenever fewer than
     * STARPU_MINIMUM_CLEAN_BUFFERS (5%) of a GPU's buffers are clean (starpu_memchunk_tidy in its
     * datawizard/memalloc.c), so that it could evict them at once. Our model states and activations
     * live on the GPU and are rewritten every step, so it copied them back every step (the emulated
     * GPU's d12 B8 T1024 bf16 run: 3.8 GB a step, into pageable memory, which blocks the CUDA
     * worker). The budget keeps the GPU from filling, so nothing needs evicting early: no
     * write-back (a user's setting kept). */
    starpu_home_writable();
    setenv("STARPU_MINIMUM_CLEAN_BUFFERS", "0", 0);
    setenv("STARPU_TARGET_CLEAN_BUFFERS", "0", 0);
    /* Our StarPU build lets idle workers all sleep (deps/starpu-1.3.10-idle-sleep.patch); without
     * it the last idle worker spins and steals a core from MPI and the application thread. */
    setenv("STARPU_WORKERS_ALL_SLEEP", "1", 0);
    /* A StarPU built with FxT traces every run by default, into /tmp: trace only when asked. */
    if (cfg.trace_dir) {
        char prefix[4096];
        snprintf(prefix, sizeof prefix, "%s/", cfg.trace_dir);
        mkdir(cfg.trace_dir, 0755);
        setenv("STARPU_FXT_PREFIX", prefix, 1);
        setenv("STARPU_FXT_TRACE", "1", 1);
    } else {
        setenv("STARPU_FXT_TRACE", "0", 0);
    }
    /* StarPU's watchdog as the backstop for a task that never ends (a stuck device or kernel): at
     * twice the collectives' deadline, so theirs, which says more, comes first. The user's wins. */
    if (cfg.timeout_s > 0 && !getenv("STARPU_WATCHDOG_TIMEOUT")) {
        char us[32];
        snprintf(us, sizeof us, "%.0f", 2e6 * cfg.timeout_s);
        setenv("STARPU_WATCHDOG_TIMEOUT", us, 1);
        setenv("STARPU_WATCHDOG_CRASH", "1", 0);
    }
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    /* One compute worker per rank by default: its tasks run OpenMP-parallel over the whole core
     * share (see widen_worker). Several, each with its own OpenMP team, would pile threads onto the
     * same cores. Plus the communication worker where wanted (one OpenMP thread; it mostly waits in
     * MPI). conf.ncpus set => StarPU-MPI reserves no core; STARPU_NCPU wins. */
    int comm = want_comm_worker(ctx, &cfg, ctx->world_size, ctx->topology.ncores);
    conf.ncpus = cfg.ncpus >= 0 ? cfg.ncpus : 1 + comm;
    if (cfg.ncuda >= 0) conf.ncuda = cfg.ncuda;
    choose_gpu(ctx, &cfg, &conf);
    decide_gpu_budget(ctx, &cfg, user_limit); /* (collective; STARPU_LIMIT_CUDA_MEM before StarPU reads it) */
    conf.nopencl = 0;
    /* The `zero` policy unless the config names another; STARPU_SCHED in the environment wins
     * (STARPU_SCHED=zero names ours, which StarPU's own table does not know). */
    const char *env_sched = getenv("STARPU_SCHED");
    const char *other = env_sched && *env_sched ? env_sched : cfg.sched_policy;
    /* StarPU's own, as StarPU would run it, but measured (overlap, task times: sched/policy.c) */
    struct starpu_sched_policy *measured = other && strcmp(other, "zero") ? sz_sched_measured_policy(other) : NULL;
    if (env_sched && (!strcmp(env_sched, "zero") || measured))
        unsetenv("STARPU_SCHED");
    if (measured) {
        conf.sched_policy_name = NULL;
        conf.sched_policy = measured;
    } else if (other && strcmp(other, "zero")) {
        conf.sched_policy_name = other;
    } else { /* starpu_conf_init copied STARPU_SCHED=zero in as a name StarPU would look up and warn */
        conf.sched_policy_name = NULL;
        conf.sched_policy = &sz_zero_policy;
    }
    int ret = starpu_mpi_init_conf(argc, argv, 0, ctx->comm, &conf);
    if (ret != 0) {
        sz_context_log(ctx, SZ_LOG_ERROR, "starpu_mpi_init_conf failed (%d): %s", ret,
                       ret == -ENODEV ? "no worker available (check STARPU_NCPU/STARPU_NCUDA)" : strerror(-ret));
        st = SZ_ERR_RUNTIME;
        goto fail_topo;
    }
    /* the last CPU worker communicates, when there is one more than the compute needs */
    int ncpu = (int)starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    sz_comm_worker = -1;
    if (comm && ncpu >= 2) {
        int ids[STARPU_NMAXWORKERS];
        int n = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, ids, STARPU_NMAXWORKERS);
        sz_comm_worker = n > 0 ? ids[n - 1] : -1;
    }
    sz_deadline_start(ctx, cfg.timeout_s);
    starpu_execute_on_each_worker(widen_worker, ctx, STARPU_CPU);
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
    /* the CUDA implementations' cuBLAS handles (one per CUDA worker, on its stream) */
    if (starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0)
        starpu_cublas_init();
#endif
    sz_devpool_start(ctx, ctx->ram_share);
    *out = ctx;
    return SZ_OK;

fail_topo:
    if (ctx->share_set)
        hwloc_bitmap_free(ctx->share_set);
    hwloc_topology_destroy(ctx->topo);
fail_mpi:
    MPI_Comm_free(&ctx->comm);
    MPI_Comm_free(&ctx->task_comm);
    MPI_Comm_free(&ctx->host_comm);
    if (ctx->we_started_mpi)
        MPI_Finalize();
    free(ctx);
    return st;
}

void sz_runtime_stop(sz_context *ctx)
{
    if (!ctx)
        return;
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
    if (starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0)
        starpu_cublas_shutdown();
#endif
    starpu_mpi_shutdown();
    sz_deadline_stop();
    sz_comm_worker = -1;
    sz_devpool_stop();
    sz_k_shutdown();
    if (ctx->share_set)
        hwloc_bitmap_free(ctx->share_set);
    hwloc_topology_destroy(ctx->topo);
    MPI_Comm_free(&ctx->comm);
    MPI_Comm_free(&ctx->task_comm);
    MPI_Comm_free(&ctx->host_comm);
    if (ctx->we_started_mpi)
        MPI_Finalize();
    free(ctx);
}

int sz_context_rank(const sz_context *ctx) { return ctx ? ctx->rank : 0; }
int sz_context_world_size(const sz_context *ctx) { return ctx ? ctx->world_size : 1; }

sz_status sz_context_topology(const sz_context *ctx, sz_topology *out)
{
    if (!ctx || !out)
        return SZ_ERR_INVALID;
    *out = ctx->topology;
    return SZ_OK;
}

sz_status sz_context_runtime_info(const sz_context *ctx, sz_runtime_info *out)
{
    if (!ctx || !out)
        return SZ_ERR_INVALID;
    memset(out, 0, sizeof *out);
    int major, minor, release;
    starpu_get_version(&major, &minor, &release);
    snprintf(out->starpu_version, sizeof out->starpu_version, "%d.%d.%d", major, minor, release);
    out->cpu_workers = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    out->cuda_workers = starpu_worker_get_count_by_type(STARPU_CUDA_WORKER);
    out->opencl_workers = starpu_worker_get_count_by_type(STARPU_OPENCL_WORKER);
    out->workers = (int)starpu_worker_get_count();
    out->comm_worker = sz_comm_worker;
    out->memory_nodes = (int)starpu_memory_nodes_get_count();
#ifdef STARPU_USE_FXT
    out->has_fxt = 1;
#endif
#ifdef STARPU_USE_CUDA
    out->has_cuda = 1;
#endif
#ifdef STARPU_USE_MPI
    out->has_mpi = 1;
#endif
#ifndef STARPU_NON_BLOCKING_DRIVERS
    out->has_blocking_drivers = 1;
#endif
    out->max_cpus = STARPU_MAXCPUS;
    struct starpu_sched_policy *pol = starpu_sched_ctx_get_sched_policy(0);
    snprintf(out->sched_policy, sizeof out->sched_policy, "%s", pol && pol->policy_name ? pol->policy_name : "?");
    out->shared_collectives = sz_devpool_shared();
    out->compute_workers = out->cpu_workers - (sz_comm_worker >= 0 ? 1 : 0);
    if (out->compute_workers < 1)
        out->compute_workers = out->cpu_workers > 0 ? 1 : 0;
    out->kernel_threads = ctx->kernel_threads;
    return SZ_OK;
}

sz_status sz_context_gpu_info(const sz_context *ctx, sz_gpu_info *out)
{
    if (!ctx || !out)
        return SZ_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->device = -1;
#if SZ_WITH_CUDA
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) < 1)
        return SZ_ERR_UNSUPPORTED;
    out->device = starpu_worker_get_devid(ids[0]);
    if (sz_cuda_device_peak(out->device, out->name, sizeof out->name, &out->sm_count, &out->clock_khz, &out->cc_major,
                            &out->cc_minor, &out->bf16_flops_per_clock_sm, &out->bf16_peak_tflops) != 0)
        return SZ_ERR_RUNTIME;
    unsigned node = starpu_worker_get_memory_node((unsigned)ids[0]);
    out->starpu_limit_bytes = (int64_t)starpu_memory_get_total(node);
    out->starpu_used_bytes = out->starpu_limit_bytes - (int64_t)starpu_memory_get_available(node);
    return SZ_OK;
#else
    return SZ_ERR_UNSUPPORTED;
#endif
}

void sz_context_print(const sz_context *ctx, FILE *f)
{
    const sz_topology *t = &ctx->topology;
    sz_runtime_info info;
    sz_context_runtime_info(ctx, &info);
    fprintf(f, "rank %d/%d on %s (local rank %d/%d)\n", ctx->rank, ctx->world_size, t->hostname,
            t->local_rank, t->local_size);
    fprintf(f, "  topology: %d package(s), %d NUMA node(s), %d core(s), %d PU(s), %d GPU(s)\n",
            t->packages, t->numa_nodes, t->cores, t->pus, t->gpus);
    fprintf(f, "  this rank's cores: %d..%d (%d); %d OpenMP thread(s) per compute task\n", t->first_core,
            t->first_core + t->ncores - 1, t->ncores, ctx->kernel_threads);
    fprintf(f, "  StarPU %s: features FxT=%s CUDA=%s MPI=%s blocking-drivers=%s max-cpus=%d; policy '%s'\n",
            info.starpu_version, info.has_fxt ? "yes" : "no", info.has_cuda ? "yes" : "no",
            info.has_mpi ? "yes" : "no", info.has_blocking_drivers ? "yes" : "no", info.max_cpus, info.sched_policy);
    fprintf(f, "  workers: %d (%d CPU, %d CUDA, %d OpenCL)", info.workers, info.cpu_workers,
            info.cuda_workers, info.opencl_workers);
    if (info.comm_worker >= 0)
        fprintf(f, "; worker %d runs only communication", info.comm_worker);
    fprintf(f, "\n  collectives: %s\n", info.shared_collectives ? "shared memory (every rank's device pool mapped here)" : "MPI");
    sz_cpu_bf16 cpu;
    char why[384];
    sz_cpu_bf16_query(&cpu);
    sz_bf16_compute path = sz_context_bf16_auto(ctx, why, sizeof why); /* the CPU rule, or the GPU one */
    fprintf(f, "  cpu: %s (%s, family 0x%x): AVX-512 %s, AVX512-BF16 %s, AMX-BF16 %s\n", cpu.model[0] ? cpu.model : "?",
            cpu.vendor[0] ? cpu.vendor : "?", cpu.family, cpu.avx512f ? "yes" : "no", cpu.avx512_bf16 ? "yes" : "no",
            cpu.amx_bf16 && cpu.amx_tile ? "yes" : "no");
    fprintf(f, "  bf16_path: %s under --precision bf16 with --bf16-compute auto (%s)\n", sz_bf16_compute_name(path), why);
    if (ctx->gpu_budget.device >= 0) {
        char text[2048]; /* each device of this rank (several CUDA workers on several GPUs) */
        fprintf(f, "  GPU: %s%s\n",
                ctx->ngpu_budgets > 0 ? sz_gpu_budgets_describe(ctx->gpu_budgets, ctx->ngpu_budgets, 0, text, sizeof text)
                                      : sz_gpu_budget_describe(&ctx->gpu_budget, 0, text, sizeof text),
                ctx->gpu_budget.limit_from_share ? " (with no --mem-budget; STARPU_LIMIT_CUDA_<d>_MEM set from it)" : " (with no --mem-budget)");
    }
    for (int w = 0; w < info.workers; w++) {
        char name[64];
        starpu_worker_get_name(w, name, sizeof name);
        fprintf(f, "    worker %d: %s (memory node %u, core %d)\n", w, name,
                starpu_worker_get_memory_node((unsigned)w), starpu_worker_get_bindid(w));
    }
    fprintf(f, "  memory nodes: %d\n", info.memory_nodes);
    for (int n = 0; n < info.memory_nodes; n++) {
        char name[64] = "";
        starpu_memory_node_get_name((unsigned)n, name, sizeof name);
        long long total = (long long)starpu_memory_get_total((unsigned)n);
        fprintf(f, "    node %d: %s, %.1f MiB\n", n, name, total / 1048576.0);
    }
}

/* Every rank's summary, printed in rank order by rank 0 (the texts travel over our own comm,
 * gathered under the deadline). */
sz_status sz_context_print_all(const sz_context *ctx, FILE *f)
{
    if (!ctx || !f)
        return SZ_ERR_INVALID;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return SZ_ERR_NOMEM;
    sz_context_print(ctx, mem);
    fclose(mem);
    int n = (int)len, nd = ctx->world_size, lead = ctx->rank == 0;
    int *lens = lead ? calloc((size_t)nd, sizeof *lens) : NULL, *offs = lead ? calloc((size_t)nd, sizeof *offs) : NULL;
    sz_status st = lead && (!lens || !offs) ? SZ_ERR_NOMEM : SZ_OK;
    if (sz_gather(&n, 1, MPI_INT, lens, 1, MPI_INT, 0, ctx->host_comm, "summary lengths") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    char *all = NULL;
    int total = 0;
    for (int r = 0; lead && st == SZ_OK && r < nd; r++)
        offs[r] = total, total += lens[r];
    if (lead && st == SZ_OK && !(all = malloc((size_t)total + 1)))
        st = SZ_ERR_NOMEM;
    MPI_Request rq; /* (a lead without the memory stays out: the others then meet the deadline) */
    if ((lead && !all) || MPI_Igatherv(text, n, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, ctx->host_comm, &rq) != MPI_SUCCESS ||
        sz_mpi_wait(&rq, ctx->host_comm, "summary texts") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    if (lead && st == SZ_OK) {
        fwrite(all, 1, (size_t)total, f);
        fflush(f);
    }
    free(all);
    free(lens);
    free(offs);
    free(text);
    return st;
}
