/* tasks/storage.c — where a model's tensors live: the buffers the model owns (pinned host memory
 * where StarPU copies them every step, the GPU arena under SZ_GPU_ARENA=1, the device pool), the
 * model's own tensors, activations and checkpoints (sz_model_tensor, _activation, _checkpoint),
 * and each unit's flat buffers per ZeRO stage (sz_model_unit_storage: parameters, gradients,
 * working copies, master, optimizer states, shards). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_pool.h"
#include "sz_cuda.h"
#include "sz_deadline.h"

/* Register a tensor the model owns and count its bytes under `cat`. */
static sz_tensor *owned(struct sz_model *m, sz_tensor *t, int cat)
{
    if (!t)
        return NULL;
    void *p = sz_grow(m->tensors, &m->cap_tensors, m->ntensors + 1, sizeof *m->tensors);
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
int sz_model_have_cuda(void) { return starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0; }

/* What lives in pinned host memory: with CUDA workers the host pool (offloaded checkpoints), and
 * under ZeRO-Offload the fp32 master and the optimizer state. Zeroed, registered on main RAM. */
static int pinned_category(const struct sz_model *m, int cat)
{
    if (!sz_model_have_cuda())
        return 0;
    return cat == SZ_MEM_HOST ||
           (m->zero.offload_optimizer && (cat == SZ_MEM_MASTER || cat == SZ_MEM_OPT_STATE0 || cat == SZ_MEM_OPT_STATE1));
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
            sz_context_log(m->core.ctx, must ? SZ_LOG_ERROR : SZ_LOG_WARN,
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
           cat == SZ_MEM_MASTER || cat == SZ_MEM_OPT_STATE0 || cat == SZ_MEM_OPT_STATE1;
}

#define SZ_GPU_ARENA_ALIGN 256

/* The communication buffer lives on the GPU only when the collectives run there (NCCL); the
 * host-copy collectives are CPU tasks, which keep it in RAM. */
int sz_model_comm_on_gpu(const struct sz_model *m) { return m->nd > 1 && sz_nccl_active(); }

/* What crosses between the GPU and the host every step: under ZeRO-Offload the parameters (or
 * their shard) and the gradients (or their shard), the gradients going down to the CPU's
 * optimizer and the updated parameters up; with the host-copy collectives (several ranks, no
 * NCCL) the same tensors, which those CPU tasks read and write, and the communication buffer.
 * Their homes are pinned, so those copies are asynchronous DMA: from or into pageable memory a
 * GPU's copy is staged and blocks the thread that issues it (StarPU's CUDA worker, which then
 * launches nothing). They still live on the GPU (place_on_gpu), the buffer excepted. */
static int crosses_each_step(const struct sz_model *m, int cat)
{
    int host_collectives = m->nd > 1 && !sz_model_comm_on_gpu(m);
    int state = cat == SZ_MEM_PARAMS || cat == SZ_MEM_PARAM_SHARD || cat == SZ_MEM_GRADS || cat == SZ_MEM_GRAD_SHARD;
    return sz_model_have_cuda() && ((state && (m->zero.offload_optimizer || host_collectives)) ||
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
sz_status sz_model_gpu_arena_start(struct sz_model *m)
{
#if SZ_WITH_CUDA
    if (!m->core.ctx->env.gpu_arena || !sz_model_have_cuda() || !m->zero.arenas)
        return SZ_OK;
    sz_plan_storage keep;
    sz_plan_storage_of(m->zero.stage, m->prec.mixed, m->nopt_states, &keep);
    int64_t bytes = SZ_GPU_ARENA_ALIGN;
    for (int i = 0; i < m->nunits; i++)
        for (int c = 0; c < SZ_MEM_NCATEGORIES; c++)
            if (state_category(c) && !pinned_category(m, c)) {
                int64_t b = sz_plan_unit_state(&keep, c, sz_zero_padded(m->units[i]->numel, m->nd), m->nd);
                bytes += b ? (b + 2 * SZ_GPU_ARENA_ALIGN - 1) / SZ_GPU_ARENA_ALIGN * SZ_GPU_ARENA_ALIGN : 0;
            }
    if (sz_model_comm_on_gpu(m)) /* the reduce-scatter buffer (sz_model_finalize: nd * bucket floats) */
        bytes += ((int64_t)m->nd * sz_zero_bucket_elems(m, m->nd) * 4 + 2 * SZ_GPU_ARENA_ALIGN - 1) /
                 SZ_GPU_ARENA_ALIGN * SZ_GPU_ARENA_ALIGN;
    int ids[STARPU_NMAXWORKERS];
    if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS) < 1)
        return SZ_OK;
    m->gpu.dev = starpu_worker_get_devid(ids[0]);
    m->gpu.node = starpu_worker_get_memory_node((unsigned)ids[0]);
    int rc = sz_cuda_arena_alloc(m->gpu.dev, (size_t)bytes, &m->gpu.base);
    if (rc) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "SZ_GPU_ARENA=1: %.1f MB of device memory on CUDA device %d for the "
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
    sz_context_log(m->core.ctx, SZ_LOG_INFO, "GPU arena: %.1f MB of model states%s on CUDA device %d (memory node %u)",
                   bytes / 1e6, sz_model_comm_on_gpu(m) ? " and the communication buffer" : "", m->gpu.dev, m->gpu.node);
#else
    (void)m;
#endif
    return SZ_OK;
}

void sz_model_gpu_arena_stop(struct sz_model *m)
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

sz_tensor *sz_model_owned_buffer(struct sz_model *m, const char *name, sz_dtype dtype, int64_t numel, int cat)
{
    if (numel < 1 || numel > UINT32_MAX)
        return NULL;
    if (pinned_category(m, cat))
        return pinned_buffer(m, name, dtype, numel, cat);
    if (m->gpu.pool && (state_category(cat) || (cat == SZ_MEM_COMM && sz_model_comm_on_gpu(m)))) {
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
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "%s(\"%s\") after sz_model_finalize: create every tensor before "
                       "finalizing (returns NULL)", call, name ? name : "");
        return 0;
    }
    if (!m->tensor_call)
        m->tensor_call = call;
    return 1;
}

static sz_tensor *model_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    sz_tensor *t = m ? sz_model_owned_buffer(m, name, dtype, numel, SZ_MEM_ACTIVATIONS) : NULL;
    if (!t)
        return NULL;
    void *p = sz_grow(m->scratch, &m->cap_scratch, m->nscratch + 1, sizeof *m->scratch);
    if (!p)
        return NULL; /* (owned: freed with the model) */
    m->scratch = p; /* the check mode's candidates (tasks/check.c) */
    m->scratch[m->nscratch++] = t;
    return t;
}

/* A tensor held whatever the checkpointing (counted for the budget advice's other settings). */
static sz_tensor *fixed_tensor(sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    sz_tensor *t = model_tensor(m, name, dtype, numel);
    if (t && !m->finalized)
        m->act_fixed += numel * (int64_t)sz_dtype_size(dtype);
    return t;
}

sz_tensor *sz_model_grad_buffer(struct sz_model *m, const char *name, sz_dtype dtype, int64_t numel)
{
    return fixed_tensor(m, name, dtype, numel);
}

/* A checkpointable unit's activation and its name (tasks/autograd.c shares the gradients by it). */
static sz_tensor *act_of(struct sz_model *m, sz_tensor *t, const char *name)
{
    void *p = t ? sz_grow(m->acts_of, &m->cap_acts_of, m->nacts_of + 1, sizeof *m->acts_of) : NULL;
    if (!p)
        return NULL;
    m->acts_of = p;
    m->acts_of[m->nacts_of].t = t;
    snprintf(m->acts_of[m->nacts_of++].name, sizeof m->acts_of[0].name, "%s", name);
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
    snprintf(full, sizeof full, "%s.%s", name, u->c.name);
    int offloadable = unit > 0 && u->checkpointable && !u->ckpt_bytes;
    if (offloadable) /* the plan's: offloaded under P_a+cpu */
        u->ckpt_bytes = numel * (int64_t)sz_dtype_size(dtype);
    if (!(m->zero.checkpoint && m->zero.offload_checkpoints && u->checkpointable) || unit == 0 || u->ckpt)
        return offloadable ? model_tensor(m, full, dtype, numel) : fixed_tensor(m, full, dtype, numel);
    sz_tensor *dev = owned(m, sz_tensor_register_lazy(numel, dtype, full), -1);
    snprintf(full, sizeof full, "host:%s.%s", name, u->c.name);
    sz_tensor *host = sz_model_owned_buffer(m, full, dtype, numel, SZ_MEM_HOST);
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
        snprintf(full, sizeof full, "%s.%s", name, m->units[unit]->c.name);
        return fixed_tensor(m, full, dtype, numel);
    }
    /* what checkpointing would hold (one per name) and what not checkpointing would (one per unit) */
    int known = 0;
    for (int i = 0; i < m->nact_names && !known; i++)
        known = !strcmp(m->act_names[i].name, name);
    if (!known) {
        void *q = sz_grow(m->act_names, &m->cap_act_names, m->nact_names + 1, sizeof *m->act_names);
        if (!q)
            return NULL;
        m->act_names = q;
        snprintf(m->act_names[m->nact_names++].name, sizeof m->act_names[0].name, "%s", name);
        m->act_shared += bytes;
    }
    m->act_per_unit += bytes;
    if (!m->zero.checkpoint) {
        snprintf(full, sizeof full, "%s.%s", name, m->units[unit]->c.name);
        return act_of(m, model_tensor(m, full, dtype, numel), name);
    }
    for (int i = 0; i < m->nshared; i++) /* one tensor per name for all checkpointable units */
        if (!strcmp(sz_tensor_name(m->shared_acts[i]), name))
            return m->shared_acts[i]->numel == numel && m->shared_acts[i]->dtype == dtype ? m->shared_acts[i] : NULL;
    void *p = sz_grow(m->shared_acts, &m->cap_shared, m->nshared + 1, sizeof *m->shared_acts);
    if (!p)
        return NULL;
    m->shared_acts = p;
    sz_tensor *t = act_of(m, model_tensor(m, name, dtype, numel), name);
    if (t)
        m->shared_acts[m->nshared++] = t;
    return t;
}

/* A unit's flat buffer: persistent (cat >= 0, counted) or allocated by StarPU on demand. */
static sz_status flat_init(struct sz_model *m, struct sz_unit *u, struct sz_flat *f, const char *what, sz_dtype dt,
                           int cat)
{
    char name[48];
    snprintf(name, sizeof name, "%s%s", what, u->c.name);
    sz_tensor *all = cat >= 0 ? sz_model_owned_buffer(m, name, dt, u->padded, cat)
                              : owned(m, sz_tensor_register_lazy(u->padded, dt, name), -1);
    f->child = calloc((size_t)u->nparams + 1, sizeof *f->child);
    if (!all || !f->child)
        return SZ_ERR_NOMEM;
    f->all = *all;
    for (int i = 0; i < u->nparams; i++) {
        snprintf(name, sizeof name, "%s%s.%s", what, u->c.name, u->params[i].name);
        f->child[i] = sz_tensor_view(&f->all, u->offset[i], u->params[i].rows * u->params[i].cols, name);
    }
    return SZ_OK;
}

static sz_status slice_or_buffer(struct sz_model *m, struct sz_unit *u, sz_tensor *out, const struct sz_flat *full,
                                 int64_t lo, const char *what, sz_dtype dt, int cat)
{
    char name[48];
    snprintf(name, sizeof name, "%s%s", what, u->c.name);
    if (full) {
        *out = sz_tensor_view(&full->all, lo, u->shard, name);
        return SZ_OK;
    }
    sz_tensor *t = sz_model_owned_buffer(m, name, dt, u->shard, cat);
    if (!t)
        return SZ_ERR_NOMEM;
    *out = *t;
    return SZ_OK;
}

/* fp32 optimizer state: a zeroed buffer now, or (late) one StarPU allocates when first written. */
static sz_tensor *state_tensor(struct sz_model *m, const char *name, int64_t n, int cat, int late)
{
    return late ? owned(m, sz_tensor_register_lazy(n, SZ_DTYPE_F32, name), cat)
                : sz_model_owned_buffer(m, name, SZ_DTYPE_F32, n, cat);
}

/* What the unit keeps for good is graph/plan.c's table for the stage (sz_plan_storage): a full
 * buffer, its owned slice as its own buffer, or neither (then allocated by StarPU on demand). */
sz_status sz_model_unit_storage(struct sz_model *m, struct sz_unit *u)
{
    sz_status st;
    sz_plan_storage keep;
    sz_plan_storage_of(m->zero.stage, m->prec.mixed, m->nopt_states, &keep);
    int64_t lo;
    u->padded = sz_zero_padded(u->numel, m->nd);
    sz_plan_shard_range(u->padded, m->nd, m->rank, &lo, &u->shard);
    sz_dtype dt = m->prec.param;
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
    if (m->prec.mixed) { /* fp32 working copies (allocated on demand, one unit at a time) and the master */
        char mname[48];
        snprintf(mname, sizeof mname, "master:%s", u->c.name);
        sz_tensor *master = sz_model_owned_buffer(m, mname, SZ_DTYPE_F32, keep.sharded[SZ_MEM_MASTER] ? u->shard : u->padded,
                                         SZ_MEM_MASTER);
        if (!master || (st = flat_init(m, u, &u->work, "work:", SZ_DTYPE_F32, -1)) != SZ_OK ||
            (st = flat_init(m, u, &u->wgrad, "wgrad:", SZ_DTYPE_F32, -1)) != SZ_OK)
            return master ? st : SZ_ERR_NOMEM;
        u->master = *master;
        u->wp = m->prec.params_direct && u->bf16_params ? &u->param : &u->work; /* direct: the bf16 parameters */
        u->wg = &u->wgrad;
    }
    /* the optimizer's states (tasks/sz_optimizer.h), in categories SZ_MEM_OPT_STATE0, SZ_MEM_OPT_STATE1 */
    int64_t n = keep.sharded[SZ_MEM_OPT_STATE0] ? u->shard : u->padded;
    char name[48];
    if (m->opt->kind != SZ_OPTIMIZER_ADAMW)
        snprintf(u->opt_name, sizeof u->opt_name, "%s:%s", m->opt->name, u->c.name);
    /* Without arenas on the device pool the optimizer state is allocated when the first step first
     * needs it, as PyTorch's optimizers do, so it lands among that step's temporaries. */
    int late = !m->zero.arenas && sz_devpool_stats(NULL) && !m->zero.offload_optimizer;
    for (int k = 0; k < m->nopt_states; k++) {
        snprintf(name, sizeof name, "%s:%s", m->opt->state_name[k], u->c.name);
        sz_tensor *t = state_tensor(m, name, n, SZ_MEM_OPT_STATE0 + k, late);
        if (!t)
            return SZ_ERR_NOMEM;
        u->opt_state[k] = *t;
    }
    u->state_unset = late && m->nopt_states > 0;
    return SZ_OK;
}
