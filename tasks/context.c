/* tasks/context.c — sz_context_init and sz_context_free (include/starzero.h): the runtime
 * (sched/runtime.c: MPI, hwloc, StarPU, StarPU-MPI), then the GPU collectives (tasks/nccl.c:
 * opt-in SZ_NCCL=1, every rank with its own GPU; else the host paths), then the line saying what
 * started; freed in the reverse order. */
#include "sz_tasks.h"
#include "sz_comm.h"
#include "sz_deadline.h"

sz_status sz_context_init(sz_context **out, const sz_context_config *cfg, int *argc, char ***argv)
{
    sz_status st = sz_runtime_start(out, cfg, argc, argv);
    if (st != SZ_OK)
        return st;
    sz_context *ctx = *out;
    char why[160];
    int trank = 0, tsize = 1;
    MPI_Comm_rank(ctx->task_comm, &trank);
    MPI_Comm_size(ctx->task_comm, &tsize);
    if (sz_nccl_start(ctx->env.nccl, ctx->task_comm, trank, tsize, why, sizeof why) != SZ_OK)
        sz_context_log(ctx, SZ_LOG_WARN, "%s", why);
    else if (sz_nccl_active())
        sz_context_log(ctx, SZ_LOG_INFO, "%s", why);
    sz_runtime_info info;
    sz_context_runtime_info(ctx, &info);
    sz_context_log(ctx, SZ_LOG_INFO, "StarPU %s, policy '%s', %d CPU + %d CUDA workers, cores %d..%d of %d",
                   info.starpu_version, info.sched_policy, info.cpu_workers, info.cuda_workers,
                   ctx->topology.first_core, ctx->topology.first_core + ctx->topology.ncores - 1, ctx->topology.cores);
    return SZ_OK;
}

void sz_context_free(sz_context *ctx)
{
    if (!ctx)
        return;
    sz_deadline_leave(); /* a rank still waiting for this one stops the job now, not at the deadline */
    starpu_task_wait_for_all();
    sz_deadline_left();
    sz_nccl_stop();
    sz_runtime_stop(ctx);
}
