/* tasks/model.c — sz_model: units and their tensor tables, model-owned working tensors, and the
 * storage each ZeRO stage keeps per rank (docs/ARCHITECTURE.md, ZeRO semantics):
 *   stage 0: full params, full grads, full optimizer state (Adam m and v, SGD's momentum)
 *   stage 1: full params, full grads, m and v for the owned slice
 *   stage 2: full params, a gradient shard (+ one unit's gradients in flight), m, v shards
 *   stage 3: a parameter shard (+ gathered units in flight), gradient shard, m, v shards
 * Each unit's parameters are one flat buffer padded to a multiple of the rank count; rank r owns
 * slice r. Also deterministic initialisation, parameter access, and the memory report. The step
 * itself (forward, backward, update) is in tasks/zero.c. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_rng.h"
#include "sz_sched.h"
#include "sz_deadline.h"
#include "sz_pool.h"
#include "sz_cuda.h"
#include "sz_kernels.h"
#include "sz_devcheck.h"
#include "sz_gpu_budget.h"

void sz_train_config_defaults(sz_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->lr = 3e-4f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.999f;
    cfg->eps = 1e-8f;
    cfg->weight_decay = 0.0f;
    cfg->grad_clip = 0.0f;
    cfg->decay = SZ_DECAY_MATRICES;
}

void sz_zero_config_defaults(sz_zero_config *z)
{
    memset(z, 0, sizeof *z);
    z->stage = 0;
    z->micro_batches = 1;
    z->bucket_bytes = SZ_DEFAULT_BUCKET_BYTES;
    z->arenas = 1;
}

/* An on-by-default switch of the environment: off only when set to a value starting with '0'. */
static int switch_on(const char *name)
{
    const char *v = getenv(name);
    return !(v && v[0] == '0');
}

void sz_fold_switches_read(sz_fold_switches *f)
{
    f->zeros = switch_on("SZ_ZERO_FOLD");
    f->grads = f->zeros && switch_on("SZ_GRAD_FOLD");
    f->round = f->grads && switch_on("SZ_GRAD_ROUND_FOLD");
}

sz_status sz_model_init(sz_model **out, sz_context *ctx)
{
    if (!out || !ctx)
        return SZ_ERR_INVALID;
    struct sz_model *m = calloc(1, sizeof *m);
    if (!m)
        return SZ_ERR_NOMEM;
    m->ctx = ctx;
    m->nd = ctx->world_size;
    m->rank = ctx->rank;
    m->arena_mark = -1;
    sz_fold_switches fold;
    sz_fold_switches_read(&fold);
    m->fold_zeros = fold.zeros; /* 0: every sz_op_zero is its own task (codelets/zero.c) */
    /* 0: the parameters' gradients zeroed whole by the plan's actions, the activations' zeros still
     * folded (SZ_ZERO_FOLD=0 turns both off) */
    m->fold_grads = fold.grads;
    /* 0: mixed precision's gradients written in fp32 and converted by GRAD_CONVERT, never rounded
     * into bf16 by their writers (sz_unit_desc.round_grads) */
    m->fold_round = fold.round;
    sz_zero_config_defaults(&m->zero);
    m->opt = sz_optimizer_get(m->zero.optimizer);
    m->nopt_states = m->opt->nstates(&m->zero);
    *out = m;
    return SZ_OK;
}

sz_status sz_model_set_zero(sz_model *m, const sz_zero_config *z)
{
    if (!m || !z)
        return SZ_ERR_INVALID;
    if (m->finalized) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "sz_model_set_zero after sz_model_finalize: the ZeRO configuration "
                       "is fixed once the model is finalized");
        return SZ_ERR_STATE;
    }
    if (m->tensor_call) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "sz_model_set_zero after %s: tensors were already placed under the "
                       "previous configuration (checkpointing's shared activations, offloaded checkpoints, the "
                       "arena); call sz_model_set_zero first", m->tensor_call);
        return SZ_ERR_STATE;
    }
    if (z->stage < 0 || z->stage > 3 || z->micro_batches < 1) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "ZeRO stage %d / %d micro-batches: the stage must be 0..3 and "
                       "micro-batches >= 1", z->stage, z->micro_batches);
        return SZ_ERR_INVALID;
    }
    if ((z->precision != SZ_PRECISION_FP32 && z->precision != SZ_PRECISION_BF16) || z->mem_budget < 0 ||
        z->prefetch_bytes < 0 || z->max_live_bytes < 0 || z->host_bytes < 0) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "ZeRO config: unknown precision %d or a negative byte limit",
                       (int)z->precision);
        return SZ_ERR_INVALID;
    }
    if (z->offload_checkpoints && !z->checkpoint) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "offloading checkpoints needs activation checkpointing: "
                       "enable checkpoint too");
        return SZ_ERR_INVALID;
    }
    if (!sz_optimizer_get(z->optimizer) || sz_optimizer_states(z->optimizer, z->momentum) < 0) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "ZeRO config: unknown optimizer %d or SGD momentum %g outside [0, 1)",
                       (int)z->optimizer, (double)z->momentum);
        return SZ_ERR_INVALID;
    }
    if (z->bf16_compute != SZ_BF16_COMPUTE_AUTO && z->bf16_compute != SZ_BF16_COMPUTE_NATIVE &&
        z->bf16_compute != SZ_BF16_COMPUTE_EMULATED) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "ZeRO config: unknown bf16 compute path %d (auto, native or emulated)",
                       (int)z->bf16_compute);
        return SZ_ERR_INVALID;
    }
    /* The bf16 compute path, decided once here so that the model can choose its activations' dtypes
     * before creating them: AUTO is the CPU rule, or with CUDA workers the GPU rule
     * (codelets/native_cuda.c: native on sm_80+ GPUs when every op of the native path has its bf16
     * CUDA twin). NATIVE with CUDA workers is refused where that rule says emulated, with its
     * reason (the GPU, or the ops without a twin). */
    sz_runtime_info info;
    int cuda = sz_context_runtime_info(m->ctx, &info) == SZ_OK && info.cuda_workers > 0;
    sz_bf16_compute path = z->bf16_compute;
    if (path == SZ_BF16_COMPUTE_AUTO || (path == SZ_BF16_COMPUTE_NATIVE && cuda)) {
        char why[384];
        sz_bf16_compute rule = sz_context_bf16_auto(m->ctx, why, sizeof why);
        if (path == SZ_BF16_COMPUTE_NATIVE && rule != SZ_BF16_COMPUTE_NATIVE) {
            sz_context_log(m->ctx, SZ_LOG_ERROR, "the native bf16 compute path cannot run on this rank's %d CUDA "
                           "worker(s): %s; use the emulated path (--bf16-compute emulated) or STARPU_NCUDA=0",
                           info.cuda_workers, why);
            return SZ_ERR_UNSUPPORTED;
        }
        path = rule;
    }
    m->zero = *z;
    m->zero.bf16_compute = path;
    m->mixed = z->precision == SZ_PRECISION_BF16;
    m->native = m->mixed && path == SZ_BF16_COMPUTE_NATIVE;
    /* Units with bf16_params read the bf16 parameters directly (no fp32 working copy): on the
     * native path, and on the emulated one unless CUDA workers may run the compute (their kernels
     * take fp32 parameters) or z->bf16_work_copies asks for the copies. The emulated ops widen each
     * parameter on load, so the bits are those of the working copies. Decided here whatever the
     * precision, so that a prediction for the other precision (advice) follows the same rule. */
    m->bf16_direct = path == SZ_BF16_COMPUTE_NATIVE || (!cuda && !z->bf16_work_copies);
    /* mixed precision's gradient rounding folded into the writers: CPU kernels only, so never with
     * CUDA workers (decided here too, whatever the precision; the plan applies it under bf16) */
    m->round_ok = m->fold_round && m->fold_grads && !cuda;
    m->opt = sz_optimizer_get(z->optimizer);
    m->nopt_states = m->opt->nstates(z);
    m->persistent[SZ_MEM_HOST_BUFFERS] = z->host_bytes; /* the app's; counted as held from here on */
    return SZ_OK;
}

int sz_model_bf16_native(const sz_model *m) { return m ? m->native : 0; }
int sz_model_grad_round_folded(const sz_model *m) { return m ? m->mixed && m->round_ok : 0; }
int sz_model_bf16_params_direct(const sz_model *m) { return m ? m->mixed && m->bf16_direct : 0; }

/* "native" only when some unit really reads bf16 (a model whose units take no bf16 parameters
 * computes emulated whatever the rule said). */
const char *sz_model_bf16_path(const sz_model *m)
{
    if (!m || !m->mixed)
        return "fp32";
    for (int i = 0; m->native && i < m->nunits; i++)
        if (m->units[i]->bf16_params)
            return "native";
    return "emulated";
}

static void *grow(void *arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return arr;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *p = realloc(arr, (size_t)nc * elem);
    if (p)
        *cap = nc;
    return p;
}

static void unit_free(struct sz_unit *u)
{
    if (!u)
        return;
    free(u->params);
    free(u->offset);
    free(u->uses);
    free(u);
}

sz_status sz_model_add_unit(sz_model *m, const sz_unit_desc *d)
{
    if (!m || !d || !d->name || !d->forward || d->nparams < 0 || (d->nparams && !d->params) || d->nuses < 0 ||
        (d->nuses && !d->uses))
        return SZ_ERR_INVALID;
    if (m->finalized) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "sz_model_add_unit(\"%s\") after sz_model_finalize: add every unit "
                       "before finalizing", d->name);
        return SZ_ERR_STATE;
    }
    for (int i = 0; i < d->nuses; i++)
        if (d->uses[i] < 0 || d->uses[i] >= m->nunits)
            return SZ_ERR_INVALID; /* only earlier units can be shared */
    void *p = grow(m->units, &m->cap_units, m->nunits + 1, sizeof *m->units);
    if (!p)
        return SZ_ERR_NOMEM;
    m->units = p;
    struct sz_unit *u = calloc(1, sizeof *u);
    if (!u)
        return SZ_ERR_NOMEM;
    u->model = m;
    u->index = m->nunits;
    snprintf(u->name, sizeof u->name, "%s", d->name);
    snprintf(u->fwd_name, sizeof u->fwd_name, "fwd:%s", d->name);
    snprintf(u->bwd_name, sizeof u->bwd_name, "bwd:%s", d->name);
    snprintf(u->opt_name, sizeof u->opt_name, "adam:%s", d->name);
    snprintf(u->gather_name, sizeof u->gather_name, "gather:%s", d->name);
    snprintf(u->release_name, sizeof u->release_name, "release:%s", d->name);
    snprintf(u->rs_name, sizeof u->rs_name, "rs:%s", d->name);
    snprintf(u->ag_name, sizeof u->ag_name, "ag:%s", d->name);
    snprintf(u->recompute_name, sizeof u->recompute_name, "recompute:%s", d->name);
    snprintf(u->offload_name, sizeof u->offload_name, "offload:%s", d->name);
    snprintf(u->fetch_name, sizeof u->fetch_name, "fetch:%s", d->name);
    u->checkpointable = d->checkpointable;
    u->backward_skips_params = d->backward_skips_params;
    u->bf16_params = d->bf16_params;
    u->round_grads = d->round_grads;
    u->round_tied_grads = d->round_tied_grads;
    u->nparams = d->nparams;
    u->params = calloc((size_t)d->nparams + 1, sizeof *u->params);
    u->offset = calloc((size_t)d->nparams + 1, sizeof *u->offset);
    u->uses = calloc((size_t)d->nuses + 1, sizeof *u->uses);
    if (!u->params || !u->offset || !u->uses) {
        unit_free(u);
        return SZ_ERR_NOMEM;
    }
    for (int i = 0; i < d->nparams; i++) {
        if (d->params[i].rows < 1 || d->params[i].cols < 1) {
            unit_free(u);
            return SZ_ERR_INVALID;
        }
        u->params[i] = d->params[i];
        u->offset[i] = u->numel;
        u->numel += d->params[i].rows * d->params[i].cols;
    }
    memcpy(u->uses, d->uses, (size_t)d->nuses * sizeof *u->uses);
    u->nuses = d->nuses;
    u->forward = d->forward;
    u->backward = d->backward;
    u->user = d->user;
    m->units[m->nunits++] = u;
    return SZ_OK;
}

/* Register a tensor the model owns and count its bytes under `cat`. */
static sz_tensor *owned(struct sz_model *m, sz_tensor *t, int cat)
{
    if (!t)
        return NULL;
    void *p = grow(m->tensors, &m->cap_tensors, m->ntensors + 1, sizeof *m->tensors);
    if (!p) {
        sz_tensor_unregister(t);
        return NULL;
    }
    m->tensors = p;
    m->tensors[m->ntensors++] = t;
    if (cat >= 0)
        m->persistent[cat] += t->numel * (int64_t)sz_dtype_size(t->dtype);
    return t;
}

/* CUDA workers on this rank (the GPU path: host pools pinned, budget per GPU). */
static int have_cuda(void) { return starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0; }

/* What lives in pinned host memory: with CUDA workers the host pool (offloaded checkpoints), and
 * under ZeRO-Offload the fp32 master and the optimizer state. Zeroed, registered on main RAM. */
static int pinned_category(const struct sz_model *m, int cat)
{
    if (!have_cuda())
        return 0;
    return cat == SZ_MEM_HOST ||
           (m->zero.offload_optimizer && (cat == SZ_MEM_MASTER || cat == SZ_MEM_ADAM_M || cat == SZ_MEM_ADAM_V));
}

/* A zeroed home in pinned host memory (sz_cuda_host_alloc, on this rank's GPU; StarPU's own pinned
 * malloc would abort the process where cudaHostAlloc fails). NULL when it cannot be had: for what
 * must live in host memory (pinned_category) that is the model's error, said here; for what is
 * pinned only to speed its copies (crosses_each_step) the caller falls back to pageable memory,
 * with a warning once. */
static sz_tensor *pinned_buffer(struct sz_model *m, const char *name, sz_dtype dtype, int64_t numel, int cat)
{
    size_t bytes = (size_t)numel * sz_dtype_size(dtype);
    void *home = NULL;
    int must = pinned_category(m, cat);
#if SZ_WITH_CUDA
    int ids[1];
    int rc = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, 1) < 1 ? (int)cudaErrorNoDevice
             : sz_cuda_host_alloc(starpu_worker_get_devid(ids[0]), bytes, &home);
    const char *why = rc ? cudaGetErrorString((cudaError_t)rc) : "";
#else /* (a library without CUDA beside a StarPU with CUDA workers: StarPU's pinned malloc) */
    int rc = starpu_malloc_flags(&home, bytes, STARPU_MALLOC_PINNED) != 0 || !home;
    const char *why = "starpu_malloc_flags";
    if (!rc)
        memset(home, 0, bytes);
#endif
    if (rc) {
        if (must || !m->pin_warned)
            sz_context_log(m->ctx, must ? SZ_LOG_ERROR : SZ_LOG_WARN,
                           must ? "%.1f MB of pinned host memory for %s could not be allocated (%s): it must live "
                                  "there (%s); free host memory, or run without that option"
                                : "%.1f MB of pinned host memory for %s could not be allocated (%s): it and what "
                                  "else cannot be pinned go through pageable memory, whose copies to and from the "
                                  "GPU block its CUDA worker (slower, same results)",
                           bytes / 1e6, name, why, cat == SZ_MEM_HOST ? "--offload-checkpoints" : "--offload-optimizer");
        m->pin_warned |= !must;
        return NULL;
    }
    sz_tensor *t = sz_tensor_register(home, numel, dtype, name);
    if (!t) {
        sz_tensor_free_pinned(home, bytes);
        return NULL;
    }
    t->pinned = bytes;
    t->on_host = must;
    return owned(m, t, cat);
}

static int state_category(int cat)
{
    return cat == SZ_MEM_PARAMS || cat == SZ_MEM_PARAM_SHARD || cat == SZ_MEM_GRADS || cat == SZ_MEM_GRAD_SHARD ||
           cat == SZ_MEM_MASTER || cat == SZ_MEM_ADAM_M || cat == SZ_MEM_ADAM_V;
}

#define SZ_GPU_ARENA_ALIGN 256

/* The communication buffer lives on the GPU only when the collectives run there (NCCL); the
 * host-copy collectives are CPU tasks, which keep it in RAM. */
static int comm_on_gpu(const struct sz_model *m) { return m->nd > 1 && sz_nccl_active(); }

/* What crosses between the GPU and the host every step: under ZeRO-Offload the parameters (or
 * their shard) and the gradients (or their shard), the gradients going down to the CPU's
 * optimizer and the updated parameters up; with the host-copy collectives (several ranks, no
 * NCCL) the same tensors, which those CPU tasks read and write, and the communication buffer.
 * Their homes are pinned, so those copies are asynchronous DMA: from or into pageable memory a
 * GPU's copy is staged and blocks the thread that issues it (StarPU's CUDA worker, which then
 * launches nothing). They still live on the GPU (place_on_gpu), the buffer excepted. */
static int crosses_each_step(const struct sz_model *m, int cat)
{
    int host_collectives = m->nd > 1 && !comm_on_gpu(m);
    int state = cat == SZ_MEM_PARAMS || cat == SZ_MEM_PARAM_SHARD || cat == SZ_MEM_GRADS || cat == SZ_MEM_GRAD_SHARD;
    return have_cuda() && ((state && (m->zero.offload_optimizer || host_collectives)) ||
                           (cat == SZ_MEM_COMM && host_collectives));
}

/* M_D on the GPU memory node (SZ_GPU_ARENA=1, with CUDA workers and arenas on; opt-in because it
 * has never run): one cudaMalloc region, sized before the units' storage exists from the same
 * table (sz_plan_storage), holds every model-state tensor that is not pinned host memory and,
 * with NCCL, the communication buffer, placed contiguously by graph/pool.c's arena and registered
 * with the GPU as its home node, so StarPU allocates nothing for them; StarPU is told of the bytes
 * (starpu_memory_allocate) so its limit on that node counts them. (The activations and inputs are
 * declared before sz_model_finalize, so before the arena exists: StarPU allocates their device
 * copies, as it does the transients'.) */
static sz_status gpu_arena_start(struct sz_model *m)
{
    const char *env = getenv("SZ_GPU_ARENA");
#if SZ_WITH_CUDA
    if (!env || strcmp(env, "1") || !have_cuda() || !m->zero.arenas)
        return SZ_OK;
    sz_plan_storage keep;
    sz_plan_storage_of(m->zero.stage, m->mixed, m->nopt_states, &keep);
    int64_t bytes = SZ_GPU_ARENA_ALIGN;
    for (int i = 0; i < m->nunits; i++)
        for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
            if (state_category(c) && !pinned_category(m, c)) {
                int64_t b = sz_plan_unit_state(&keep, c, sz_plan_padded(m->units[i]->numel, m->nd), m->nd);
                bytes += b ? (b + 2 * SZ_GPU_ARENA_ALIGN - 1) / SZ_GPU_ARENA_ALIGN * SZ_GPU_ARENA_ALIGN : 0;
            }
    if (comm_on_gpu(m)) /* the reduce-scatter buffer (sz_model_finalize: nd * bucket floats) */
        bytes += ((int64_t)m->nd * sz_zero_bucket_elems(m, m->nd) * 4 + 2 * SZ_GPU_ARENA_ALIGN - 1) /
                 SZ_GPU_ARENA_ALIGN * SZ_GPU_ARENA_ALIGN;
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) < 1)
        return SZ_OK;
    m->gpu.dev = starpu_worker_get_devid(ids[0]);
    m->gpu.node = starpu_worker_get_memory_node((unsigned)ids[0]);
    int rc = sz_cuda_arena_alloc(m->gpu.dev, (size_t)bytes, &m->gpu.base);
    if (rc) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "SZ_GPU_ARENA=1: %.1f MB of device memory on CUDA device %d for the "
                       "model states could not be allocated (%s); run without SZ_GPU_ARENA", bytes / 1e6, m->gpu.dev,
                       cudaGetErrorString((cudaError_t)rc));
        return SZ_ERR_NOMEM;
    }
    if (!(m->gpu.pool = sz_pool_create(bytes, SZ_GPU_ARENA_ALIGN))) {
        sz_cuda_arena_free(m->gpu.dev, m->gpu.base);
        m->gpu.base = NULL;
        return SZ_ERR_NOMEM;
    }
    m->gpu.bytes = bytes;
    starpu_memory_allocate(m->gpu.node, (size_t)bytes, STARPU_MEMORY_OVERFLOW);
    sz_context_log(m->ctx, SZ_LOG_INFO, "GPU arena: %.1f MB of model states%s on CUDA device %d (memory node %u)",
                   bytes / 1e6, comm_on_gpu(m) ? " and the communication buffer" : "", m->gpu.dev, m->gpu.node);
#else
    (void)m, (void)env;
#endif
    return SZ_OK;
}

static void gpu_arena_stop(struct sz_model *m)
{
#if SZ_WITH_CUDA
    if (!m->gpu.base)
        return;
    sz_cuda_arena_free(m->gpu.dev, m->gpu.base);
    starpu_memory_deallocate(m->gpu.node, (size_t)m->gpu.bytes);
    sz_pool_destroy(m->gpu.pool);
    m->gpu.base = NULL;
#else
    (void)m;
#endif
}

static sz_tensor *owned_buffer(struct sz_model *m, const char *name, sz_dtype dtype, int64_t numel, int cat)
{
    if (numel < 1 || numel > UINT32_MAX)
        return NULL;
    if (pinned_category(m, cat))
        return pinned_buffer(m, name, dtype, numel, cat);
    if (m->gpu.pool && (state_category(cat) || (cat == SZ_MEM_COMM && comm_on_gpu(m)))) {
        /* SZ_GPU_ARENA=1: in the GPU arena (already zero) */
        int64_t off = sz_pool_alloc_arena(m->gpu.pool, numel * (int64_t)sz_dtype_size(dtype));
        if (off < 0)
            return NULL;
        return owned(m, sz_tensor_register_on(m->gpu.node, (char *)m->gpu.base + off, numel, dtype, name), cat);
    }
    sz_tensor *pinned = crosses_each_step(m, cat) ? pinned_buffer(m, name, dtype, numel, cat) : NULL;
    if (pinned)
        return pinned; /* (else pageable, below) */
    /* on the device pool (the host pool stays apart): in the M_D arena, or among the temporaries */
    size_t bytes = (size_t)numel * sz_dtype_size(dtype);
    int arena = m->zero.arenas;
    if (arena && m->arena_mark < 0)
        m->arena_mark = sz_devpool_arena_mark();
    void *home = cat == SZ_MEM_HOST ? NULL : sz_devpool_alloc(bytes, arena);
    if (home) /* zero, committing nothing yet: the budget check comes before the first touch */
        sz_devpool_zero(home, bytes);
    else if (!(home = calloc(1, bytes)))
        return NULL;
    sz_tensor *t = sz_tensor_register(home, numel, dtype, name);
    if (!t)
        free(home);
    return owned(m, t, cat);
}

/* A model tensor is created before sz_model_finalize, after sz_model_set_zero (its placement
 * depends on the configuration); logs and refuses otherwise. */
static int tensor_call_ok(struct sz_model *m, const char *call, const char *name)
{
    if (!m)
        return 0;
    if (m->finalized) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "%s(\"%s\") after sz_model_finalize: create every tensor before "
                       "finalizing (returns NULL)", call, name ? name : "");
        return 0;
    }
    if (!m->tensor_call)
        m->tensor_call = call;
    return 1;
}

static sz_tensor *model_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    return m ? owned_buffer(m, name, dtype, numel, SZ_MEM_ACTIVATIONS) : NULL;
}

/* A tensor held whatever the checkpointing (counted for the budget advice's other settings). */
static sz_tensor *fixed_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    sz_tensor *t = model_tensor(m, name, dtype, numel);
    if (t && !m->finalized)
        m->act_fixed += numel * (int64_t)sz_dtype_size(dtype);
    return t;
}

sz_tensor *sz_model_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    if (!tensor_call_ok(m, "sz_model_tensor", name))
        return NULL;
    return fixed_tensor(m, name, dtype, numel);
}

sz_tensor *sz_model_checkpoint(sz_model *m, int unit, const char *name, sz_dtype dtype, int64_t numel)
{
    if (!tensor_call_ok(m, "sz_model_checkpoint", name) || !name || unit < 0 || unit >= m->nunits)
        return NULL;
    struct sz_unit *u = m->units[unit];
    char full[48];
    snprintf(full, sizeof full, "%s.%s", name, u->name);
    int offloadable = unit > 0 && u->checkpointable && !u->ckpt_bytes;
    if (offloadable) /* the plan's: offloaded under P_a+cpu */
        u->ckpt_bytes = numel * (int64_t)sz_dtype_size(dtype);
    if (!(m->zero.checkpoint && m->zero.offload_checkpoints && u->checkpointable) || unit == 0 || u->ckpt)
        return offloadable ? model_tensor(m, full, dtype, numel) : fixed_tensor(m, full, dtype, numel);
    sz_tensor *dev = owned(m, sz_tensor_register_lazy(numel, dtype, full), -1);
    snprintf(full, sizeof full, "host:%s.%s", name, u->name);
    sz_tensor *host = owned_buffer(m, full, dtype, numel, SZ_MEM_HOST);
    if (!dev || !host)
        return NULL;
    u->ckpt = dev;
    u->ckpt_host = host;
    return dev;
}

sz_tensor *sz_model_activation(sz_model *m, int unit, const char *name, sz_dtype dtype, int64_t numel)
{
    if (!tensor_call_ok(m, "sz_model_activation", name) || !name || unit < 0 || unit >= m->nunits)
        return NULL;
    char full[48];
    int64_t bytes = numel * (int64_t)sz_dtype_size(dtype);
    if (!m->units[unit]->checkpointable) {
        snprintf(full, sizeof full, "%s.%s", name, m->units[unit]->name);
        return fixed_tensor(m, full, dtype, numel);
    }
    /* what checkpointing would hold (one per name) and what not checkpointing would (one per unit) */
    int known = 0;
    for (int i = 0; i < m->nact_names && !known; i++)
        known = !strcmp(m->act_names[i].name, name);
    if (!known) {
        void *q = grow(m->act_names, &m->cap_act_names, m->nact_names + 1, sizeof *m->act_names);
        if (!q)
            return NULL;
        m->act_names = q;
        snprintf(m->act_names[m->nact_names++].name, sizeof m->act_names[0].name, "%s", name);
        m->act_shared += bytes;
    }
    m->act_per_unit += bytes;
    if (!m->zero.checkpoint) {
        snprintf(full, sizeof full, "%s.%s", name, m->units[unit]->name);
        return model_tensor(m, full, dtype, numel);
    }
    for (int i = 0; i < m->nshared; i++) /* one tensor per name for all checkpointable units */
        if (!strcmp(sz_tensor_name(m->shared_acts[i]), name))
            return m->shared_acts[i]->numel == numel && m->shared_acts[i]->dtype == dtype ? m->shared_acts[i] : NULL;
    void *p = grow(m->shared_acts, &m->cap_shared, m->nshared + 1, sizeof *m->shared_acts);
    if (!p)
        return NULL;
    m->shared_acts = p;
    sz_tensor *t = model_tensor(m, name, dtype, numel);
    if (t)
        m->shared_acts[m->nshared++] = t;
    return t;
}

/* A unit's flat buffer: persistent (cat >= 0, counted) or allocated by StarPU on demand. */
static sz_status flat_init(struct sz_model *m, struct sz_unit *u, struct sz_flat *f, const char *what, sz_dtype dt,
                           int cat)
{
    char name[48];
    snprintf(name, sizeof name, "%s%s", what, u->name);
    sz_tensor *all = cat >= 0 ? owned_buffer(m, name, dt, u->padded, cat)
                              : owned(m, sz_tensor_register_lazy(u->padded, dt, name), -1);
    f->child = calloc((size_t)u->nparams + 1, sizeof *f->child);
    if (!all || !f->child)
        return SZ_ERR_NOMEM;
    f->all = *all;
    for (int i = 0; i < u->nparams; i++) {
        snprintf(name, sizeof name, "%s%s.%s", what, u->name, u->params[i].name);
        f->child[i] = sz_tensor_view(&f->all, u->offset[i], u->params[i].rows * u->params[i].cols, name);
    }
    return SZ_OK;
}

static sz_status slice_or_buffer(struct sz_model *m, struct sz_unit *u, sz_tensor *out, const struct sz_flat *full,
                                 int64_t lo, const char *what, sz_dtype dt, int cat)
{
    char name[48];
    snprintf(name, sizeof name, "%s%s", what, u->name);
    if (full) {
        *out = sz_tensor_view(&full->all, lo, u->shard, name);
        return SZ_OK;
    }
    sz_tensor *t = owned_buffer(m, name, dt, u->shard, cat);
    if (!t)
        return SZ_ERR_NOMEM;
    *out = *t;
    return SZ_OK;
}

/* fp32 optimizer state: a zeroed buffer now, or (late) one StarPU allocates when first written. */
static sz_tensor *state_tensor(struct sz_model *m, const char *name, int64_t n, int cat, int late)
{
    return late ? owned(m, sz_tensor_register_lazy(n, SZ_DTYPE_F32, name), cat)
                : owned_buffer(m, name, SZ_DTYPE_F32, n, cat);
}

/* What the unit keeps for good is graph/plan.c's table for the stage (sz_plan_storage): a full
 * buffer, its owned slice as its own buffer, or neither (then allocated by StarPU on demand). */
static sz_status unit_storage(struct sz_model *m, struct sz_unit *u)
{
    sz_status st;
    sz_plan_storage keep;
    sz_plan_storage_of(m->zero.stage, m->mixed, m->nopt_states, &keep);
    int64_t lo;
    u->padded = sz_plan_padded(u->numel, m->nd);
    sz_plan_shard_range(u->padded, m->nd, m->rank, &lo, &u->shard);
    sz_dtype dt = m->mixed ? SZ_DTYPE_BF16 : SZ_DTYPE_F32;
    int full_params = keep.bytes[SZ_MEM_PARAMS] > 0, full_grads = keep.bytes[SZ_MEM_GRADS] > 0;
    if ((st = flat_init(m, u, &u->param, "", dt, full_params ? SZ_MEM_PARAMS : -1)) != SZ_OK ||
        (st = flat_init(m, u, &u->grad, "grad:", dt, full_grads ? SZ_MEM_GRADS : -1)) != SZ_OK ||
        (st = slice_or_buffer(m, u, &u->pshard, keep.bytes[SZ_MEM_PARAM_SHARD] ? NULL : &u->param, lo, "param_shard:",
                              dt, SZ_MEM_PARAM_SHARD)) ||
        (st = slice_or_buffer(m, u, &u->gshard, keep.bytes[SZ_MEM_GRAD_SHARD] ? NULL : &u->grad, lo, "grad_shard:", dt,
                              SZ_MEM_GRAD_SHARD)))
        return st;
    u->wp = &u->param;
    u->wg = &u->grad;
    if (m->mixed) { /* fp32 working copies (allocated on demand, one unit at a time) and the master */
        char mname[48];
        snprintf(mname, sizeof mname, "master:%s", u->name);
        sz_tensor *master = owned_buffer(m, mname, SZ_DTYPE_F32, keep.sharded[SZ_MEM_MASTER] ? u->shard : u->padded,
                                         SZ_MEM_MASTER);
        if (!master || (st = flat_init(m, u, &u->work, "work:", SZ_DTYPE_F32, -1)) != SZ_OK ||
            (st = flat_init(m, u, &u->wgrad, "wgrad:", SZ_DTYPE_F32, -1)) != SZ_OK)
            return master ? st : SZ_ERR_NOMEM;
        u->master = *master;
        u->wp = m->bf16_direct && u->bf16_params ? &u->param : &u->work; /* direct: the bf16 parameters */
        u->wg = &u->wgrad;
    }
    /* the optimizer's states (tasks/sz_optimizer.h), in categories SZ_MEM_ADAM_M, SZ_MEM_ADAM_V */
    int64_t n = keep.sharded[SZ_MEM_ADAM_M] ? u->shard : u->padded;
    char name[48];
    if (m->opt->kind != SZ_OPTIMIZER_ADAMW)
        snprintf(u->opt_name, sizeof u->opt_name, "%s:%s", m->opt->name, u->name);
    /* Without arenas on the device pool the optimizer state is allocated when the first step first
     * needs it, as PyTorch's optimizers do, so it lands among that step's temporaries. */
    int late = !m->zero.arenas && sz_devpool_stats(NULL) && !m->zero.offload_optimizer;
    for (int k = 0; k < m->nopt_states; k++) {
        snprintf(name, sizeof name, "%s:%s", m->opt->state_name[k], u->name);
        sz_tensor *t = state_tensor(m, name, n, SZ_MEM_ADAM_M + k, late);
        if (!t)
            return SZ_ERR_NOMEM;
        u->opt_state[k] = *t;
    }
    u->state_unset = late && m->nopt_states > 0;
    return SZ_OK;
}

/* A configuration the prediction (and the budget advice) folds the plan for: this model's, with
 * these changes. rows: the micro-batch's rows divided by this (activations taken as proportional). */
struct trial {
    int stage, nd, mixed, checkpoint, offload, rows, offload_optimizer;
};

static struct trial current(const struct sz_model *m)
{
    return (struct trial){m->zero.stage, m->nd, m->mixed, m->zero.checkpoint, m->zero.offload_checkpoints, 1,
                          m->zero.offload_optimizer};
}

/* The activation and host-pool bytes this model would register under checkpointing settings
 * (ck, off), from what it registered (sz_model_activation, sz_model_checkpoint). */
static void act_bytes(const struct sz_model *m, int ck, int off, int64_t *act, int64_t *host)
{
    int64_t ckpt = 0;
    for (int i = 0; i < m->nunits; i++)
        ckpt += m->units[i]->ckpt_bytes;
    *act = m->act_fixed + (ck ? m->act_shared : m->act_per_unit) + (ck && off ? 0 : ckpt);
    *host = ck && off ? ckpt : 0;
}

/* The plan's fold for this model under t: the figures the step will really reach (tasks/zero.c
 * submits the same plan). */
static sz_status predict(const struct sz_model *m, struct trial t, sz_fold *f)
{
    sz_plan_config c;
    sz_zero_plan_config(m, SZ_PASS_STEP, 0, &c);
    c.stage = t.stage;
    c.nd = t.nd;
    c.rank = m->rank < t.nd ? m->rank : 0;
    c.mixed = t.mixed;
    c.offload_optimizer = t.offload_optimizer;
    c.bucket_elems = sz_zero_bucket_elems(m, t.nd);
    sz_plan_unit *pu = calloc((size_t)m->nunits + 1, sizeof *pu);
    if (!pu)
        return SZ_ERR_NOMEM;
    sz_zero_plan_units(m, pu);
    if (t.checkpoint != c.checkpoint || t.offload != c.offload || t.rows > 1) {
        c.checkpoint = t.checkpoint;
        c.offload = t.offload;
        act_bytes(m, t.checkpoint, t.offload, &c.extra[SZ_MEM_ACTIVATIONS], &c.extra[SZ_MEM_HOST]);
        c.extra[SZ_MEM_ACTIVATIONS] = (c.extra[SZ_MEM_ACTIVATIONS] + t.rows - 1) / t.rows;
        c.extra[SZ_MEM_HOST] = (c.extra[SZ_MEM_HOST] + t.rows - 1) / t.rows;
        for (int i = 0; i < m->nunits; i++)
            pu[i].ckpt_bytes = (pu[i].ckpt_bytes + t.rows - 1) / t.rows;
    }
    sz_plan p;
    sz_status st = sz_plan_build(pu, m->nunits, &c, &p);
    free(pu);
    if (st != SZ_OK)
        return st;
    sz_plan_fold(&p, f, NULL);
    sz_plan_free(&p);
    return SZ_OK;
}

/* What the budget holds beside the plan: with CUDA workers StarPU's allocation chunks on the GPU
 * (graph/sz_devcheck.h), else nothing (on the host the device pool serves StarPU exactly). */
static int64_t allocator_slack(void) { return have_cuda() ? SZ_STARPU_CUDA_SLACK_BYTES : 0; }

/* The peak the budget is checked against: with CUDA workers the device's (each GPU's budget;
 * the host pool and an offloaded optimizer live in host memory) plus StarPU's chunks, else the
 * rank's whole peak. */
static int64_t predict_peak(const struct sz_model *m, struct trial t)
{
    sz_fold f;
    if (predict(m, t, &f) != SZ_OK)
        return INT64_MAX;
    return have_cuda() ? f.device_peak_bytes + allocator_slack() : f.peak_bytes;
}

/* "X MB" rounded so that a figure over the budget never prints as one at or under it: needs round
 * up, budgets down (to 0.1 MB). */
static double mb_up(int64_t b) { return ceil((double)b / 1e5) / 10.0; }
static double mb_down(int64_t b) { return floor((double)b / 1e5) / 10.0; }

/* The smallest N_d >= ours at which t fits the budget (-1: none up to 4096); its peak in *at. */
static int fit_nd(const struct sz_model *m, struct trial t, int64_t budget, int64_t *at)
{
    for (int nd = m->nd; nd <= 4096; nd = nd < 64 ? nd + 1 : nd * 2) {
        t.nd = nd;
        if ((*at = predict_peak(m, t)) <= budget)
            return nd;
    }
    return -1;
}

struct advice {
    char text[1024];
    size_t len;
};

static void say(struct advice *a, const char *fmt, ...)
{
    if (a->len >= sizeof a->text)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(a->text + a->len, sizeof a->text - a->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        a->len += (size_t)n;
}

sz_status sz_model_check_budget(struct sz_model *m, int64_t budget)
{
    if (!m)
        return SZ_ERR_INVALID;
    struct trial now = current(m);
    int64_t peak = predict_peak(m, now);
    if (peak == INT64_MAX)
        return SZ_ERR_NOMEM;
    m->predicted_peak = peak - allocator_slack(); /* the plan's own figure (the engine's count) */
    if (budget <= 0 || peak <= budget)
        return SZ_OK;
    /* What fits, each by the same fold: every stage's smallest N_d >= ours as configured; then,
     * at our stage, the same with checkpointing, offloaded checkpoints, the other precision, and
     * smaller micro-batches. Only what fits is listed. */
    struct advice a = {.len = 0};
    int64_t at, base_at = 0;
    int base_nd = -1; /* the fewest ranks as configured */
    for (int s = 0; s < 4; s++) {
        struct trial t = now;
        t.stage = s;
        int nd = fit_nd(m, t, budget, &at);
        if (nd > 0)
            say(&a, "%sstage %d with N_d >= %d (%.1f MB)", a.len ? ", " : "", s, nd, mb_up(at));
        if (nd > 0 && (base_nd < 0 || nd < base_nd || (nd == base_nd && at < base_at)))
            base_nd = nd, base_at = at;
    }
    /* the other settings are predicted from what the model registered: only when that accounts
     * for what it holds now */
    int64_t act, host;
    act_bytes(m, m->zero.checkpoint, m->zero.offload_checkpoints, &act, &host);
    int known = act == m->persistent[SZ_MEM_ACTIVATIONS] && host == m->persistent[SZ_MEM_HOST];
    struct trial alt[7];
    const char *what[7];
    int nalt = 0;
    if (have_cuda() && !now.offload_optimizer)
        alt[nalt] = now, alt[nalt].offload_optimizer = 1, what[nalt++] = "--offload-optimizer (master and optimizer state in host memory)";
    if (known && !now.checkpoint) {
        alt[nalt] = now, alt[nalt].checkpoint = 1, what[nalt++] = "activation checkpointing";
        alt[nalt] = now, alt[nalt].checkpoint = alt[nalt].offload = 1,
        what[nalt++] = "checkpointing with offloaded checkpoints";
    } else if (known && !now.offload) {
        alt[nalt] = now, alt[nalt].offload = 1, what[nalt++] = "offloaded checkpoints";
    }
    alt[nalt] = now, alt[nalt].mixed = !now.mixed, what[nalt++] = now.mixed ? "--precision fp32" : "--precision bf16";
    if (known) {
        alt[nalt] = now, alt[nalt].rows = 2, what[nalt++] = "micro-batches of half the rows (half --batch, twice --micro-batches)";
        alt[nalt] = now, alt[nalt].rows = 4, what[nalt++] = "micro-batches of a quarter of the rows";
    }
    int said_rows = 0;
    for (int i = 0; i < nalt; i++) { /* each setting at the stage that needs the fewest ranks */
        if (alt[i].rows > 1 && said_rows)
            continue;
        int best_nd = -1, best_s = 0;
        int64_t best_at = 0;
        for (int s = 0; s < 4; s++) {
            struct trial t = alt[i];
            t.stage = s;
            int nd = fit_nd(m, t, budget, &at);
            if (nd > 0 && (best_nd < 0 || nd < best_nd)) {
                best_nd = nd;
                best_s = s;
                best_at = at;
            }
        }
        /* listed only where it helps: fewer ranks than without it, or less memory at as many */
        if (best_nd < 0 || (base_nd > 0 && (best_nd > base_nd || (best_nd == base_nd && best_at >= base_at))))
            continue;
        said_rows |= alt[i].rows > 1;
        say(&a, "%s%s: stage %d with N_d >= %d (%.1f MB)", a.len ? "; " : "", what[i], best_s, best_nd, mb_up(best_at));
    }
    char gpu_note[2048] = "";
    if (have_cuda() && m->budget_from_machine && budget == m->budget) {
        char text[1024], over[256] = "";
        const struct sz_context *cx = m->ctx;
        if (cx->ngpu_budgets > 1) /* the device peak against each of this rank's GPUs */
            sz_gpu_budgets_check_peak(cx->gpu_budgets, cx->ngpu_budgets, peak, over, sizeof over);
        sz_gpu_budgets_describe(cx->ngpu_budgets > 0 ? cx->gpu_budgets : &cx->gpu_budget,
                                cx->ngpu_budgets > 0 ? cx->ngpu_budgets : 1, 0, text, sizeof text);
        snprintf(gpu_note, sizeof gpu_note, " (no budget given: %s%s%s; %s; a larger N_d below means more GPUs)",
                 cx->gpu_budget.device >= 0 ? text : "the free memory of this rank's GPU at start, split among the ranks driving it",
                 over[0] ? "; over on " : "", over,
                 "at most StarPU's limit there (STARPU_LIMIT_CUDA_MEM, else 90% of the device); the smallest over ranks");
    }
    char slack_note[96] = "";
    if (have_cuda())
        snprintf(slack_note, sizeof slack_note, "with %.1f MB for StarPU's allocation chunks)", allocator_slack() / 1e6);
    sz_context_log(m->ctx, SZ_LOG_ERROR,
                   "memory budget: the plan needs %.1f MB per %s%s (stage %d, N_d %d, %s%s%s%s) but the budget is %.1f MB%s. "
                   "Settings that fit, each predicted by the same plan: %s. Activations take %.1f MB of the %.1f.",
                   mb_up(peak), have_cuda() ? "GPU (device memory, " : "rank", slack_note, m->zero.stage, m->nd, m->mixed ? "bf16" : "fp32",
                   m->zero.checkpoint ? ", checkpointing" : "", m->zero.offload_checkpoints ? ", offloaded checkpoints" : "",
                   m->zero.offload_optimizer ? ", offloaded optimizer" : "",
                   mb_down(budget),
                   !(m->budget_from_machine && budget == m->budget) ? ""
                   : have_cuda() ? gpu_note
                                 : " (no budget given: this rank's share of the memory this node has available now, less the "
                                   "runtime's allowance; more ranks on this node would share it, so a larger N_d below means "
                                   "more nodes)",
                   a.len ? a.text : "none up to N_d 4096 by stage, precision, checkpointing or micro-batch",
                   m->persistent[SZ_MEM_ACTIVATIONS] / 1e6, mb_up(peak));
    return SZ_ERR_BUDGET;
}

/* Collective: every rank builds the same model (units, their tensors in order, the ZeRO config,
 * the model tensors' bytes) — else every rank refuses, naming the first difference. */
static sz_status agree_model(struct sz_model *m)
{
    sz_settings *s = NULL;
    sz_status st = sz_settings_init(&s);
    if (st != SZ_OK)
        return st;
    const sz_zero_config *z = &m->zero;
    sz_settings_add(s, "the ZeRO stage", "%d", z->stage);
    sz_settings_add(s, "micro-batches", "%d", z->micro_batches);
    sz_settings_add(s, "the precision", "%s", z->precision == SZ_PRECISION_BF16 ? "bf16" : "fp32");
    sz_settings_add(s, "the bf16 compute path (--bf16-compute; auto: the CPU rule)", "%s", sz_model_bf16_path(m));
    sz_settings_add(s, "the memory budget", "%lld bytes", (long long)z->mem_budget);
    sz_settings_add(s, "prefetch bytes", "%lld", (long long)z->prefetch_bytes);
    sz_settings_add(s, "max live bytes", "%lld", (long long)z->max_live_bytes);
    sz_settings_add(s, "bucket bytes", "%lld", (long long)z->bucket_bytes);
    sz_settings_add(s, "activation checkpointing", "%s", z->checkpoint ? "on" : "off");
    sz_settings_add(s, "offloaded checkpoints", "%s", z->offload_checkpoints ? "on" : "off");
    sz_settings_add(s, "arenas (M_D)", "%s", z->arenas ? "on" : "off");
    sz_settings_add(s, "the optimizer", "%s", m->opt->name);
    sz_settings_add(s, "SGD momentum", "%.9g", z->optimizer == SZ_OPTIMIZER_SGD ? (double)z->momentum : 0.0);
    if (z->bf16_work_copies) /* (only then, as below) */
        sz_settings_add(s, "bf16 working copies", "forced");
    if (z->offload_optimizer) /* (only then: a CPU-only run's digest stays as it was) */
        sz_settings_add(s, "the offloaded optimizer's CUDA workers", "%s", have_cuda() ? "present" : "none");
    sz_settings_add(s, "the number of units", "%d", m->nunits);
    for (int i = 0; i < m->nunits; i++) {
        const struct sz_unit *u = m->units[i];
        char name[96];
        snprintf(name, sizeof name, "unit %d", i);
        sz_settings_add(s, name, "%s: %d tensors, %lld elements%s%s%s%s%s", u->name, u->nparams, (long long)u->numel,
                        u->checkpointable ? ", checkpointable" : "", u->backward ? "" : ", no backward",
                        u->backward_skips_params ? ", backward reads no parameter" : "",
                        u->bf16_params ? ", takes bf16 parameters" : "",
                        u->nuses ? ", uses earlier units" : "");
        for (int k = 0; k < u->nparams; k++) {
            const sz_param_spec *p = &u->params[k];
            snprintf(name, sizeof name, "unit %d (%s) tensor %d", i, u->name, k);
            sz_settings_add(s, name, "%s %lld x %lld, decay %d, init %d (std %.9g)", p->name ? p->name : "?",
                            (long long)p->rows, (long long)p->cols, p->decay, (int)p->init, p->init_std);
        }
        for (int k = 0; k < u->nuses; k++) {
            snprintf(name, sizeof name, "unit %d (%s) use %d", i, u->name, k);
            sz_settings_add(s, name, "unit %d", u->uses[k]);
        }
    }
    sz_settings_add(s, "the model tensors (activations, inputs; they follow the batch shape)", "%lld bytes",
                    (long long)(m->persistent[SZ_MEM_ACTIVATIONS] + m->persistent[SZ_MEM_HOST]));
    st = sz_context_agree(m->ctx, s, "sz_model_finalize", NULL, 0);
    sz_settings_free(s);
    return st;
}

sz_status sz_model_finalize(sz_model *m)
{
    if (!m)
        return SZ_ERR_INVALID;
    if (m->finalized)
        return SZ_ERR_STATE;
    if (m->nunits == 0)
        return SZ_ERR_INVALID;
    sz_status ast = agree_model(m); /* every rank the same model, or none goes on */
    if (ast != SZ_OK)
        return ast;
    if (m->zero.offload_optimizer && !have_cuda()) { /* every rank alike (agreed above) */
        sz_context_log(m->ctx, SZ_LOG_ERROR,
                       "--offload-optimizer (ZeRO-Offload) moves the optimizer from the GPU to the CPU, but this rank "
                       "has no CUDA worker (no GPU visible, STARPU_NCUDA=0, or a StarPU or StarZeRO built without "
                       "CUDA): on a CPU-only rank the optimizer already runs on the CPU, so there is nothing to "
                       "offload. Drop --offload-optimizer, or run on a GPU machine");
        return SZ_ERR_INVALID;
    }
    /* SZ_CHECK_WAITS=1: check every step's tasks against the plan's waits (tasks/depcheck.c) */
    const char *cw = getenv("SZ_CHECK_WAITS");
    if (cw && *cw && strcmp(cw, "0") && (ast = sz_model_depcheck(m, 1)) != SZ_OK)
        return ast;
    int64_t budget = m->zero.mem_budget;
    if (budget <= 0) { /* none given: this rank's share of what the machine has (collective) */
        if (sz_context_memory_budget(m->ctx, &budget) != SZ_OK)
            return SZ_ERR_RUNTIME;
        m->budget_from_machine = budget > 0;
    } else if ((ast = sz_context_check_gpu_budget(m->ctx, budget)) != SZ_OK) { /* collective: k x budget per GPU */
        return ast;
    }
    m->budget = budget;
    const char *gp = getenv("SZ_GPU_PLACEMENT");
    m->gpu_compute = have_cuda() && !(gp && !strcmp(gp, "0"));
    sz_status wst = sz_devwatch_start(m); /* collective: every rank, before any may refuse below */
    if (wst != SZ_OK)
        return wst;
    sz_status bst = sz_model_check_budget(m, budget); /* before allocating anything big */
    if (bst != SZ_OK)
        return bst;
    sz_status gst = gpu_arena_start(m);
    if (gst != SZ_OK)
        return gst;
    for (int i = 0; i < m->nunits; i++) {
        sz_status st = unit_storage(m, m->units[i]);
        if (st != SZ_OK)
            return st;
    }
    m->sumsq = owned_buffer(m, "grad_sumsq", SZ_DTYPE_F32, m->nunits, -1);
    m->clip = owned_buffer(m, "clip", SZ_DTYPE_F32, 2, -1);
    m->one = owned_buffer(m, "one", SZ_DTYPE_F32, 1, -1);
    if (m->one && sz_tensor_write_f32(m->one, &(float){1.0f}) != SZ_OK)
        m->one = NULL;
    m->token = owned_buffer(m, "comm_token", SZ_DTYPE_F32, 1, -1);
    m->bucket = sz_zero_bucket_elems(m, m->nd);
    m->comm_buf = m->nd > 1 ? owned_buffer(m, "comm_buffer", SZ_DTYPE_F32, m->nd * m->bucket, SZ_MEM_COMM)
                            : m->token;
    if (!m->sumsq || !m->clip || !m->one || !m->token || !m->comm_buf)
        return SZ_ERR_NOMEM;
    for (int i = 0; i < m->nunits; i++)
        m->units[i]->sumsq = sz_tensor_view(m->sumsq, i, 1, NULL);
    m->finalized = 1;
    return SZ_OK;
}

void sz_model_free(sz_model *m)
{
    if (!m)
        return;
    starpu_task_wait_for_all();
    for (int i = 0; i < m->nunits; i++) {
        free(m->units[i]->param.child);
        free(m->units[i]->grad.child);
        free(m->units[i]->work.child);
        free(m->units[i]->wgrad.child);
        unit_free(m->units[i]);
    }
    for (int i = 0; i < m->ntensors; i++)
        sz_tensor_unregister(m->tensors[i]);
    sz_devpool_arena_reset(m->arena_mark); /* models are freed last-made first */
    gpu_arena_stop(m);
    sz_plan_free(&m->step_plan);
    sz_plan_free(&m->eval_plan);
    sz_model_depcheck(m, 0);
    free(m->gpending);
    free(m->tensors);
    free(m->shared_acts);
    free(m->act_names);
    free(m->units);
    free(m);
}

int sz_model_nunits(const sz_model *m) { return m ? m->nunits : 0; }

int64_t sz_model_nparams(const sz_model *m)
{
    int64_t n = 0;
    for (int i = 0; m && i < m->nunits; i++)
        n += m->units[i]->numel;
    return n;
}

static struct sz_unit *unit_of(sz_model *m, int unit, int param)
{
    if (!m || !m->finalized || unit < 0 || unit >= m->nunits || param < 0 || param >= m->units[unit]->nparams)
        return NULL;
    return m->units[unit];
}

sz_tensor *sz_model_param(sz_model *m, int unit, int i)
{
    struct sz_unit *u = unit_of(m, unit, i);
    return u ? &u->wp->child[i] : NULL;
}

sz_tensor *sz_model_grad(sz_model *m, int unit, int i)
{
    struct sz_unit *u = unit_of(m, unit, i);
    return u ? &u->wg->child[i] : NULL;
}

/* Read param/grad tensor `param` of `unit` through the owners' slices (collective with nd > 1). */
static sz_status read_assembled(sz_model *m, int unit, int param, int which, float *dst)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || !dst)
        return SZ_ERR_INVALID;
    float *full = malloc((size_t)u->padded * sizeof *full);
    if (!full)
        return SZ_ERR_NOMEM;
    sz_status st = sz_zero_assemble(m, u, which, full);
    if (st == SZ_OK)
        memcpy(dst, full + u->offset[param], (size_t)u->param.child[param].numel * sizeof *dst);
    free(full);
    return st;
}

sz_status sz_model_param_read(sz_model *m, int unit, int param, float *dst)
{
    return read_assembled(m, unit, param, 0, dst);
}

sz_status sz_model_grad_read(sz_model *m, int unit, int param, float *dst)
{
    return read_assembled(m, unit, param, 1, dst);
}

sz_status sz_model_param_read_range(sz_model *m, int unit, int param, int64_t lo, int64_t n, int root, float *dst)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || root < 0 || root >= m->nd || lo < 0 || n < 0 || lo + n > u->param.child[param].numel ||
        n > INT32_MAX || (root == m->rank && n > 0 && !dst))
        return SZ_ERR_INVALID;
    return sz_zero_assemble_range(m, u, root, u->offset[param] + lo, n, dst);
}

/* The part of flat elements [from, from + cnt) of the unit (values src) that lies in flat elements
 * [lo, lo + n), written into `dst`, a view whose element 0 is flat element lo. */
static sz_status write_range(const float *src, int64_t from, int64_t cnt, const sz_tensor *dst, int64_t lo, int64_t n)
{
    int64_t a = from > lo ? from : lo, b = from + cnt < lo + n ? from + cnt : lo + n;
    if (a >= b)
        return SZ_OK;
    sz_tensor part = sz_tensor_view(dst, a - lo, b - a, NULL);
    return sz_tensor_write_f32(&part, src + (a - from));
}

/* Values of flat elements [from, from + cnt) of the unit, the same on every rank, into what this
 * rank holds: stages 0-2 the full parameters, stage 3 its shard; under mixed precision also the
 * fp32 master (full at stage 0, else the owned slice), the parameters getting them rounded to bf16. */
static sz_status write_flat(struct sz_model *m, struct sz_unit *u, const float *src, int64_t from, int64_t cnt)
{
    int64_t lo = (int64_t)m->rank * u->shard;
    sz_status st = m->zero.stage < 3 ? write_range(src, from, cnt, &u->param.all, 0, u->padded)
                                     : write_range(src, from, cnt, &u->pshard, lo, u->shard);
    if (st == SZ_OK && m->mixed)
        st = m->zero.stage == 0 ? write_range(src, from, cnt, &u->master, 0, u->padded)
                                : write_range(src, from, cnt, &u->master, lo, u->shard);
    return st;
}

/* Every rank writes the same values (see write_flat). */
sz_status sz_model_param_write(sz_model *m, int unit, int param, const float *src)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || !src)
        return SZ_ERR_INVALID;
    return write_flat(m, u, src, u->offset[param], u->param.child[param].numel);
}

sz_status sz_model_param_write_range(sz_model *m, int unit, int param, int64_t lo, int64_t n, const float *src)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || (n > 0 && !src) || lo < 0 || n < 0 || lo + n > u->param.child[param].numel)
        return SZ_ERR_INVALID;
    return n ? write_flat(m, u, src, u->offset[param] + lo, n) : SZ_OK;
}

/* Initialisation streams each tensor through one buffer of this many elements (even, so that the
 * normal generator's pairs never straddle two chunks: the values are those of one whole draw). */
#define SZ_INIT_CHUNK ((int64_t)1 << 18)

sz_status sz_model_init_params(sz_model *m, uint64_t seed)
{
    if (!m || !m->finalized)
        return SZ_ERR_STATE;
    float *tmp = malloc((size_t)SZ_INIT_CHUNK * sizeof *tmp);
    if (!tmp)
        return SZ_ERR_NOMEM;
    sz_status st = SZ_OK;
    for (int ui = 0; ui < m->nunits && st == SZ_OK; ui++) {
        struct sz_unit *u = m->units[ui];
        for (int i = 0; i < u->nparams && st == SZ_OK; i++) {
            const sz_param_spec *p = &u->params[i];
            int64_t n = p->rows * p->cols;
            int64_t drawn = p->init == SZ_INIT_NORMAL ? n : 0;
            sz_rng r;
            sz_rng_seed(&r, seed, (uint64_t)ui, (uint64_t)i);
            for (int64_t k = 0; k < n && st == SZ_OK; k += SZ_INIT_CHUNK) {
                int64_t c = n - k < SZ_INIT_CHUNK ? n - k : SZ_INIT_CHUNK;
                int64_t nd = k >= drawn ? 0 : drawn - k < c ? drawn - k : c; /* of them drawn */
                if (nd > 0)
                    sz_rng_normal(&r, tmp, nd, p->init_std);
                for (int64_t j = nd; j < c; j++)
                    tmp[j] = p->init == SZ_INIT_ONE ? 1.0f : 0.0f;
                st = write_flat(m, u, tmp, u->offset[i] + k, c);
            }
        }
    }
    free(tmp);
    return st;
}

sz_status sz_model_set_loss(sz_model *m, sz_tensor *losses)
{
    if (!m || !losses || losses->dtype != SZ_DTYPE_F32)
        return SZ_ERR_INVALID;
    m->loss = losses;
    return SZ_OK;
}

/* unit accessors for callbacks */
sz_tensor *sz_unit_param(sz_unit *u, int i) { return u && i >= 0 && i < u->nparams ? &u->wp->child[i] : NULL; }
sz_tensor *sz_unit_grad(sz_unit *u, int i) { return u && i >= 0 && i < u->nparams ? &u->wg->child[i] : NULL; }
int sz_unit_index(const sz_unit *u) { return u ? u->index : -1; }
const char *sz_unit_name(const sz_unit *u) { return u ? u->name : ""; }
sz_model *sz_unit_model(sz_unit *u) { return u ? u->model : NULL; }

/* 1/(N·M·N_d): the gradient of the mean loss over every row, micro-batch and rank (the engine
 * sums gradients over micro-batches and ranks). */
static float loss_scale(const struct sz_model *m)
{
    if (!m || !m->loss || m->loss->numel < 1)
        return 0.0f;
    return 1.0f / ((float)m->loss->numel * (float)m->zero.micro_batches * (float)m->nd);
}
float sz_unit_loss_scale(const sz_unit *u) { return u ? loss_scale(u->model) : 0.0f; }

/* ---- losses and the step entry points ----------------------------------------------------- */

/* The mean over all ranks of the loss tensor's mean (ranks added in rank order). */
static sz_status global_mean_loss(sz_model *m, float *loss)
{
    if (!m->loss)
        return SZ_ERR_STATE;
    int64_t n = m->loss->numel;
    float *l = malloc((size_t)n * sizeof *l);
    double *all = malloc((size_t)m->nd * sizeof *all);
    if (!l || !all) {
        free(l);
        free(all);
        return SZ_ERR_NOMEM;
    }
    sz_status st = sz_tensor_read(m->loss, l);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += l[i];
    s /= (double)n;
    if (m->nd > 1 &&
        sz_allgather(&s, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, m->ctx->host_comm, "loss all-gather") != MPI_SUCCESS)
        st = SZ_ERR_RUNTIME;
    if (m->nd > 1) {
        s = 0.0;
        for (int r = 0; r < m->nd; r++)
            s += all[r];
        s /= m->nd;
    }
    if (loss)
        *loss = (float)s;
    free(l);
    free(all);
    return st;
}

sz_status sz_model_eval(sz_model *m, float *loss)
{
    if (!m || !m->finalized)
        return SZ_ERR_STATE;
    sz_status st = sz_zero_eval(m);
    if (st == SZ_OK)
        st = global_mean_loss(m, loss);
    /* every forward task has run, also those the loss does not depend on: a kernel's failure is
     * this call's (a forward_backward's backward tasks may still run: theirs can be the next call's) */
    starpu_task_wait_for_all();
    sz_status fail = sz_model_take_failure(m);
    return st != SZ_OK ? st : fail;
}

/* With CUDA workers, before the first step: every tensor the model registered on a buffer of its
 * own and that does not live in host memory (parameters or their shard, gradient shards, the master
 * and optimizer state unless offloaded, activations, the communication buffer when NCCL uses it
 * on the GPU) is prefetched to the GPU's memory node, so the model states live there from the
 * start (StarPU keeps the valid copy on the GPU as the CUDA tasks write it; the home buffer in RAM
 * stays registered). With the host-copy collectives the communication buffer is only ever used by
 * CPU tasks: a device copy would hold device memory for nothing, and the plan counts it on the
 * host (comm_on_host). */
static void place_on_gpu(struct sz_model *m)
{
    m->placed = 1;
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) < 1)
        return;
    unsigned node = starpu_worker_get_memory_node((unsigned)ids[0]);
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i]->home && !m->tensors[i]->on_host && !m->tensors[i]->on_gpu &&
            !(m->tensors[i] == m->comm_buf && m->nd > 1 && !comm_on_gpu(m))) /* host collectives: stays in RAM */
            starpu_data_prefetch_on_node(m->tensors[i]->h, node, 1);
}

sz_status sz_model_forward_backward(sz_model *m, float *loss)
{
    if (!m)
        return SZ_ERR_INVALID;
    if (!m->finalized || !m->loss)
        return SZ_ERR_STATE;
    if (m->micro_batch >= m->zero.micro_batches) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "forward_backward called %d times without sz_model_update "
                       "(micro_batches = %d)", m->micro_batch + 1, m->zero.micro_batches);
        return SZ_ERR_STATE;
    }
    if (!m->placed && have_cuda())
        place_on_gpu(m);
    if (m->micro_batch == 0) {
        sz_deadline_set_step(m->steps_done + 1);
        double f, c, k;
        sz_sched_overlap(&f, &c, &k, NULL); /* start the step's intervals afresh */
        m->counters.t0_ns = sz_now_ns();
        __atomic_store_n(&m->counters.ntimeline, 0, __ATOMIC_RELAXED);
        m->step_sent = __atomic_load_n(&m->counters.sent, __ATOMIC_RELAXED);
        m->step_received = __atomic_load_n(&m->counters.received, __ATOMIC_RELAXED);
        m->step_ns = __atomic_load_n(&m->counters.comm_ns, __ATOMIC_RELAXED);
    }
    sz_status st = sz_zero_forward_backward(m);
    if (st == SZ_OK)
        m->micro_batch++;
    if (st == SZ_OK)
        st = global_mean_loss(m, loss);
    sz_status fail = sz_model_take_failure(m);
    return st != SZ_OK ? st : fail;
}

sz_status sz_model_update(sz_model *m, const sz_train_config *cfg, int t)
{
    if (!m || !cfg || t < 1)
        return SZ_ERR_INVALID;
    if (m->micro_batch != m->zero.micro_batches) {
        sz_context_log(m->ctx, SZ_LOG_ERROR, "update after %d of %d micro-batches", m->micro_batch,
                       m->zero.micro_batches);
        return SZ_ERR_STATE;
    }
    sz_status st = sz_zero_update(m, cfg, t);
    m->micro_batch = 0;
    if (st != SZ_OK)
        return st;
    float clip[2];
    st = sz_tensor_read(m->clip, clip);
    m->last_grad_norm = clip[1];
    starpu_task_wait_for_all();
    if (st == SZ_OK)
        st = sz_model_take_failure(m);
    m->step_sent = __atomic_load_n(&m->counters.sent, __ATOMIC_RELAXED) - m->step_sent;
    m->step_received = __atomic_load_n(&m->counters.received, __ATOMIC_RELAXED) - m->step_received;
    m->step_ns = __atomic_load_n(&m->counters.comm_ns, __ATOMIC_RELAXED) - m->step_ns;
    m->steps_done++;
    sz_deadline_step_done((sz_now_ns() - m->counters.t0_ns) * 1e-9); /* later deadlines: >= 5x this */
    if (sz_sched_overlap(&m->overlap, &m->comm_busy_s, &m->compute_busy_s, &m->task_times) != 0)
        m->overlap = -1;
    sz_status dst = sz_devwatch_step(m); /* collective with GPUs: every rank, whatever st says */
    if (st == SZ_OK)
        st = dst;
    /* keep 64 samples of the step's live-bytes timeline, each the maximum of its stretch */
    int n = m->counters.ntimeline < SZ_TIMELINE ? m->counters.ntimeline : SZ_TIMELINE;
    m->ntimeline = n < 64 ? n : 64;
    for (int i = 0; i < m->ntimeline; i++) {
        int a = (int)((int64_t)i * n / m->ntimeline), b = (int)((int64_t)(i + 1) * n / m->ntimeline);
        int64_t best = -1, at = 0;
        for (int k = a; k < b; k++)
            if (m->counters.timeline[k][1] > best) {
                best = m->counters.timeline[k][1];
                at = m->counters.timeline[k][0];
            }
        m->timeline_ms[i] = at * 1e-6;
        m->timeline_bytes[i] = best;
    }
    return st;
}

sz_status sz_model_train_step(sz_model *m, const sz_train_config *cfg, int t, float *loss)
{
    sz_status st = sz_model_forward_backward(m, loss);
    return st != SZ_OK ? st : sz_model_update(m, cfg, t);
}

float sz_model_last_grad_norm(const sz_model *m) { return m ? m->last_grad_norm : 0.0f; }

/* ---- the memory report ---------------------------------------------------------------------- */

const char *sz_mem_category_name(sz_mem_category c)
{
    static const char *names[SZ_MEM_NCATEGORIES] = {
        "full params", "param shard", "gathered units in flight", "grads", "grad shard", "grads in flight",
        "fp32 master", "Adam m / SGD momentum", "Adam v", "activations", "communication buffers", "checkpoints on device",
        "host pool (checkpoints)", "host buffers"};
    return c >= 0 && c < SZ_MEM_NCATEGORIES ? names[c] : "?";
}

sz_status sz_model_memory_report(const sz_model *m, sz_memory_report *r)
{
    if (!m || !r)
        return SZ_ERR_INVALID;
    memset(r, 0, sizeof *r);
    int64_t persistent = 0;
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++) {
        int64_t transient = __atomic_load_n(&m->counters.peak[c], __ATOMIC_RELAXED);
        r->bytes[c] = m->persistent[c] + transient;
        persistent += m->persistent[c];
    }
    r->model_state_bytes = r->bytes[SZ_MEM_PARAMS] + r->bytes[SZ_MEM_PARAM_SHARD] + r->bytes[SZ_MEM_GRADS] +
                           r->bytes[SZ_MEM_GRAD_SHARD] + r->bytes[SZ_MEM_MASTER] + r->bytes[SZ_MEM_ADAM_M] +
                           r->bytes[SZ_MEM_ADAM_V];
    r->peak_bytes = persistent + __atomic_load_n(&m->counters.peak_total, __ATOMIC_RELAXED);
    r->device_peak_bytes = r->peak_bytes - m->persistent[SZ_MEM_HOST] - m->persistent[SZ_MEM_HOST_BUFFERS];
    if (m->zero.offload_optimizer)
        r->device_peak_bytes -= m->persistent[SZ_MEM_MASTER] + m->persistent[SZ_MEM_ADAM_M] + m->persistent[SZ_MEM_ADAM_V];
    if (m->nd > 1 && have_cuda() && !comm_on_gpu(m)) /* the plan's comm_on_host (tasks/zero.c) */
        r->device_peak_bytes -= m->persistent[SZ_MEM_COMM];
    r->matmul_host_peak_bytes = sz_k_matmul_host_peak();
    r->comm_bytes_sent = m->step_sent;
    r->comm_bytes_received = m->step_received;
    r->comm_seconds = m->step_ns * 1e-9;
    r->nparams = sz_model_nparams(m);
    for (int i = 0; i < m->nunits; i++)
        r->nparams_padded += m->units[i]->padded;
    r->stage = m->zero.stage;
    r->nd = m->nd;
    r->micro_batches = m->zero.micro_batches;
    r->precision = m->zero.precision;
    r->predicted_peak_bytes = m->predicted_peak;
    r->overlap = m->overlap;
    r->ntimeline = m->ntimeline;
    memcpy(r->timeline_ms, m->timeline_ms, sizeof r->timeline_ms);
    memcpy(r->timeline_bytes, m->timeline_bytes, sizeof r->timeline_bytes);
    r->mem_budget = m->budget;
    r->budget_from_machine = m->budget_from_machine;
    snprintf(r->bf16_path, sizeof r->bf16_path, "%s", sz_model_bf16_path(m));
    r->rss_peak_bytes = sz_memory_rss_peak_bytes();
    r->arenas = m->zero.arenas;
    r->comm_task_s = m->comm_busy_s;
    r->compute_task_s = m->compute_busy_s;
    r->matmul_task_s = m->task_times.matmul_s;
    r->optimizer_task_s = m->task_times.optimizer_s;
    r->convert_task_s = m->task_times.convert_s;
    r->zero_task_s = m->task_times.zero_s;
    r->ncodelets = m->task_times.ncl < SZ_MAX_CODELETS ? m->task_times.ncl : SZ_MAX_CODELETS;
    for (int c = 0; c < r->ncodelets; c++) {
        snprintf(r->codelets[c].name, sizeof r->codelets[c].name, "%s", m->task_times.cl[c].name);
        r->codelets[c].seconds = m->task_times.cl[c].s;
        r->codelets[c].tasks = m->task_times.cl[c].tasks;
    }
    r->pool_active = sz_devpool_stats(&r->pool);
    sz_devwatch_report(m, r);
    return SZ_OK;
}

sz_status sz_model_memory_report_all(const sz_model *m, sz_memory_report *ranks)
{
    sz_memory_report mine;
    sz_status st = sz_model_memory_report(m, &mine);
    if (st != SZ_OK)
        return st;
    if (m->rank == 0 && !ranks)
        return SZ_ERR_INVALID;
    if (sz_gather(&mine, (int)sizeof mine, MPI_BYTE, ranks, (int)sizeof mine, MPI_BYTE, 0, m->ctx->host_comm,
                  "memory report gather") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    return SZ_OK;
}

sz_status sz_model_unit_sizes(const sz_model *m, int64_t *padded)
{
    if (!m || !padded || !m->finalized)
        return SZ_ERR_INVALID;
    for (int i = 0; i < m->nunits; i++)
        padded[i] = m->units[i]->padded;
    return SZ_OK;
}
