/* tasks/all_gather.c — all-gather of one unit's flat buffer: every rank contributes its shard
 * and receives the others'. Two forms: in place (tensors: full (RW), token; the own slice already
 * holds the updated shard — stages 1 and 2 after the optimizer) and from a separate shard
 * (tensors: full (W), shard (R), token — stage 3's just-in-time gather of a unit). fp32 or bf16
 * elements (mixed precision), as the views say. Ranks on one node read each other's shards in
 * place (tasks/exchange.c); otherwise MPI_Allgather. */
#include <string.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_deadline.h"
#include "sz_cuda.h"

struct all_gather_args {
    MPI_Comm comm;             /* as struct sz_comm */
    int nd, rank;
    struct sz_counters *stats;
    int64_t shard;             /* elements per rank */
    int in_place;              /* 1: no shard tensor, the own slice of full already holds it */
    int category;              /* bytes of category that become live when it ran (0 bytes: none) */
    int64_t bytes;
};

static void ag_cpu(void *b[], void *arg)
{
    const struct all_gather_args a = *(const struct all_gather_args *)sz_task_params(arg);
    const struct sz_comm cm = {a.comm, a.nd, a.rank, a.stats};
    size_t es = sz_dtype_size((sz_dtype)sz_task_layout_of(arg)->dtype[0]); /* 2: bf16 or fp16, 4: fp32 */
    int h = es == 2;
    void *full = sz_task_ptr(b, arg, 0);
    int64_t S = a.shard;
    int in_place = a.in_place;
    void *shard = in_place ? NULL : sz_task_ptr(b, arg, 1);
    if (a.nd > 1) {
        int64_t t0 = sz_now_ns();
        MPI_Datatype dt = h ? MPI_UINT16_T : MPI_FLOAT;
        if (!sz_shm_all_gather(&cm, es, full, shard, S)) {
            int rc = sz_allgather(in_place ? MPI_IN_PLACE : shard, (int)S, dt, full, (int)S, dt, a.comm, "all-gather");
            STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "all-gather: MPI_Allgather failed (%d)", rc);
        }
        sz_counters_comm(a.stats, (a.nd - 1) * S * (int64_t)es, sz_now_ns() - t0);
    } else if (!in_place) {
        memcpy(full, shard, (size_t)S * es);
    }
    if (a.bytes)
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(ag_model, "sz_all_gather");
#if SZ_WITH_CUDA && defined(SZ_HAVE_NCCL)
/* With NCCL (tasks/nccl.c): ncclAllGather on the CUDA worker's stream. */
static void ag_cuda(void *b[], void *arg)
{
    const struct all_gather_args a = *(const struct all_gather_args *)sz_task_params(arg);
    sz_nccl_all_gather(b, arg, a.shard, a.in_place, a.rank, a.stats);
    if (a.bytes)
        sz_counters_add(a.stats, a.category, a.bytes);
}
struct starpu_codelet sz_cl_all_gather = {.can_execute = sz_nccl_can_execute, .cpu_funcs = {ag_cpu},
                                          .cuda_funcs = {ag_cuda}, .cuda_flags = {STARPU_CUDA_ASYNC},
                                          .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = "all_gather",
                                          .model = &ag_model};
#else
SZ_CODELET(sz_cl_all_gather, ag_cpu, "all_gather", ag_model);
#endif
SZ_DESCRIBE(sz_cl_all_gather, SZ_TASK_COMM, SZ_CL_CUDA_F16, "all-gather of a unit's parameters (CUDA: NCCL only, SZ_NCCL=1)");

/* from_shard: stage 3's gather of the parameters into their full buffer; else in place (the
 * all-reduce's second half at stage 0 on the gradients, the updated parameters at stages 1-2). */
sz_status sz_submit_all_gather(struct sz_model *m, struct sz_unit *u, int from_shard, int category, int64_t bytes)
{
    struct all_gather_args a = {m->core.ctx->task_comm, m->nd, m->rank, &m->counters, u->shard, !from_shard, category,
                                bytes};
    if (from_shard) {
        sz_task_tensor t[] = {{&u->param.all, SZ_WRITE, SZ_DTYPE_ANY, u->padded, "full", 0},
                              {&u->pshard, SZ_READ, SZ_DTYPE_ANY, u->shard, "shard", 0},
                              {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
        return sz_task_submit_as(u, u->gather_name, "all_gather", &sz_cl_all_gather, t, 3, &a, sizeof a);
    }
    sz_task_tensor t[] = {{m->zero.stage == 0 ? &u->grad.all : &u->param.all, SZ_READ_WRITE, SZ_DTYPE_ANY, u->padded,
                           "full", 0},
                          {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_as(u, u->ag_name, "all_gather", &sz_cl_all_gather, t, 2, &a, sizeof a);
}
