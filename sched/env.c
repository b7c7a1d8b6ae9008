/* sched/env.c — the library's environment switches, read once when a context starts
 * (sz_runtime_start) into ctx->env; every other part reads them there, and the kernels get theirs
 * through their setters (kernels/sz_kernels.h, kernels/cuda/sz_cuda_kernels.h), so no kernel or
 * operation reads the environment. docs/reference.md, "Environment variables", is the table of
 * them all. StarPU's own variables (STARPU_*) stay StarPU's. */
#include <stdlib.h>
#include <string.h>
#include "sz_runtime.h"
#include "sz_kernels.h"
#if SZ_WITH_CUDA
#include "sz_cuda_kernels.h"
#endif

/* An on-by-default switch: off only when set to a value starting with '0'. */
static int switch_on(const char *name)
{
    const char *v = getenv(name);
    return !(v && v[0] == '0');
}

static int is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

void sz_fold_switches_read(sz_fold_switches *f)
{
    f->zeros = switch_on("SZ_ZERO_FOLD");
    f->grads = f->zeros && switch_on("SZ_GRAD_FOLD");
    f->round = f->grads && switch_on("SZ_GRAD_ROUND_FOLD");
}

void sz_env_read(sz_env *e)
{
    memset(e, 0, sizeof *e);
    const char *v = getenv("SZ_LOG");
    e->log_level = !v                    ? -1
                   : !strcmp(v, "error") ? (int)SZ_LOG_ERROR
                   : !strcmp(v, "warn")  ? (int)SZ_LOG_WARN
                   : !strcmp(v, "info")  ? (int)SZ_LOG_INFO
                   : !strcmp(v, "debug") ? (int)SZ_LOG_DEBUG
                                         : -1;
    v = getenv("SZ_COMM_WORKER");
    e->comm_worker = v && *v ? atoi(v) != 0 : -1;
    e->ncuda_default = !is("SZ_NCUDA_DEFAULT", "0");
    e->alloc_cache = !is("SZ_ALLOC_CACHE", "0");
    e->device_pool = !is("SZ_DEVICE_POOL", "0");
    e->collectives_mpi = is("SZ_COLLECTIVES", "mpi");
    v = getenv("SZ_HOST_NAME");
    if (v)
        snprintf(e->host_name, sizeof e->host_name, "%s", v);
    e->nccl = is("SZ_NCCL", "1");
    e->gpu_placement = !is("SZ_GPU_PLACEMENT", "0");
    e->gpu_arena = is("SZ_GPU_ARENA", "1");
    v = getenv("SZ_CHECK_WAITS");
    e->check_waits = v && *v && strcmp(v, "0");
    v = getenv("SZ_CHECK");
    e->check = v && *v && strcmp(v, "0");
    v = getenv("SZ_DEVWATCH_BUDGET");
    long long b = v && *v ? strtoll(v, NULL, 10) : 0;
    e->devwatch_budget = b > 0 ? (int64_t)b : 0;
    sz_fold_switches_read(&e->fold);
    v = getenv("SZ_ONEDNN_BF16");
    e->onednn_bf16 = !(v && v[0] == '0');
    e->cuda_attention_rowwise = is("SZ_CUDA_ATTENTION", "rowwise");
}

void sz_env_apply_kernels(const sz_env *e)
{
    sz_k_set_bf16_tiles(e->onednn_bf16);
#if SZ_WITH_CUDA
    sz_cuda_attention_set_rowwise(e->cuda_attention_rowwise);
#endif
}
