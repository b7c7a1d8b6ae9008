/* tasks/reduce_scatter.c — deterministic reduce-scatter of one unit's flat buffer across the
 * data-parallel ranks: an all-to-all moves chunk r of every rank's buffer to rank r, which adds
 * the nd chunks in rank order (0, 1, ..., nd-1) into its shard. Stage 0's all-reduce is this plus
 * an all-gather, so every stage sums the same numbers in the same order: bitwise equal results.
 * Ranks on one node read each other's gradients in place (tasks/exchange.c); otherwise MPI.
 * One task is one bucket round of the step plan (graph/plan.c): elements [o, o + len) of every
 * rank's piece. Tensors: full (R, nd*shard elements), shard (RW), communication buffer (RW,
 * nd*bucket elements), token (RW); `bytes` (negative) released after (the last round). */
#include <stdlib.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_deadline.h"
#include "sz_cuda.h"
#include "sz_kernels.h"

struct reduce_scatter_args {
    MPI_Comm comm;             /* as struct sz_comm */
    int nd, rank;
    struct sz_counters *stats;
    int64_t shard;             /* elements per rank of the unit's padded flat buffer */
    int acc;                   /* 1: add into the shard, 0: overwrite it */
    int64_t o, len;            /* this round: elements [o, o + len) of each rank's piece (len <= C_B) */
    int category;              /* bytes of category that become live (negative: freed) after */
    int64_t bytes;
};

static inline float ld16(uint16_t v, int kdt) { return kdt == 1 ? sz_h2f(v) : sz_k_f16_to_f32_1(v); }

void sz_reduce_pieces(const struct sz_comm *a, int kdt, void *shard_v, const void *const *src, int64_t o,
                      int64_t len, int acc)
{
    if (kdt) { /* bf16 or fp16: summed in fp32, rounded once (an fp16 overflow becomes inf) */
        const uint16_t *const *rv = (const uint16_t *const *)src;
        uint16_t *shard = (uint16_t *)shard_v + o;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < len; i++) {
            float s = acc ? ld16(shard[i], kdt) + ld16(rv[0][i], kdt) : ld16(rv[0][i], kdt);
            for (int r = 1; r < a->nd; r++)
                s += ld16(rv[r][i], kdt);
            shard[i] = kdt == 1 ? sz_f2h(s) : sz_k_f32_to_f16_1(s);
        }
    } else {
        const float *const *rv = (const float *const *)src;
        float *shard = (float *)shard_v + o;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < len; i++) {
            float s = acc ? shard[i] + rv[0][i] : rv[0][i];
            for (int r = 1; r < a->nd; r++)
                s += rv[r][i];
            shard[i] = s;
        }
    }
}

/* Constant-size buckets (ZeRO-R's C_B): one round reduces `len` elements of the shard; it sends
 * every rank its piece straight from the gradients (a datatype of `len` elements whose extent is a
 * shard, so nothing is packed), receives the nd pieces of ours into the communication buffer
 * (nd * bucket elements whatever the model's size), and reduces them. The sums are the same as
 * with one round. */
static void rs_cpu(void *b[], void *arg)
{
    const struct reduce_scatter_args a = *(const struct reduce_scatter_args *)sz_task_params(arg);
    const struct sz_comm cm = {a.comm, a.nd, a.rank, a.stats};
    int kdt = sz_kdt_of(sz_task_layout_of(arg)->dtype[0]), h = kdt != 0;
    size_t es = h ? 2 : 4;
    char *full = sz_task_ptr(b, arg, 0);
    void *shard = sz_task_ptr(b, arg, 1);
    char *buf = sz_task_ptr(b, arg, 2);
    int64_t S = a.shard, o = a.o, len = a.len, t0 = sz_now_ns();
    if (a.nd == 1) {
        const void *src[1] = {full};
        sz_reduce_pieces(&cm, kdt, shard, src, o, len, a.acc);
    } else if (!sz_shm_reduce_scatter_piece(&cm, kdt, full, shard, S, o, len, a.acc)) {
        MPI_Datatype dt = h ? MPI_UINT16_T : MPI_FLOAT;
        const void **src = malloc(sizeof *src * (size_t)a.nd);
        STARPU_ASSERT_MSG(src, "reduce-scatter: out of memory");
        MPI_Datatype piece, strided; /* len elements, then the next rank's piece one shard further */
        MPI_Type_contiguous((int)len, dt, &piece);
        MPI_Type_create_resized(piece, 0, (MPI_Aint)(S * (int64_t)es), &strided);
        MPI_Type_commit(&strided);
        MPI_Request rq;
        int rc = MPI_Ialltoall(full + (size_t)o * es, 1, strided, buf, (int)len, dt, a.comm, &rq);
        if (rc == MPI_SUCCESS)
            rc = sz_mpi_wait(&rq, a.comm, "reduce-scatter all-to-all");
        MPI_Type_free(&strided);
        MPI_Type_free(&piece);
        STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "reduce-scatter: MPI_Alltoall failed (%d)", rc);
        for (int r = 0; r < a.nd; r++)
            src[r] = buf + (size_t)r * (size_t)len * es;
        sz_reduce_pieces(&cm, kdt, shard, src, o, len, a.acc);
        free(src);
    }
    if (a.nd > 1) /* the exchange and the rank-ordered sum: what MPI_Reduce_scatter_block does */
        sz_counters_comm(a.stats, (a.nd - 1) * len * (int64_t)es, sz_now_ns() - t0);
    if (a.bytes) /* the full-size gradients reduced here are freed right after */
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(rs_model, "sz_reduce_scatter");
#if SZ_WITH_CUDA && defined(SZ_HAVE_NCCL)
/* With NCCL (tasks/nccl.c): the pieces moved by NCCL, summed in rank order on the GPU. */
static void rs_cuda(void *b[], void *arg)
{
    const struct reduce_scatter_args a = *(const struct reduce_scatter_args *)sz_task_params(arg);
    sz_nccl_reduce_scatter(b, arg, a.shard, a.o, a.len, a.acc, a.stats);
    if (a.bytes)
        sz_counters_add(a.stats, a.category, a.bytes);
}
struct starpu_codelet sz_cl_reduce_scatter = {.can_execute = sz_nccl_can_execute, .cpu_funcs = {rs_cpu},
                                              .cuda_funcs = {rs_cuda}, .cuda_flags = {STARPU_CUDA_ASYNC},
                                              .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = "reduce_scatter",
                                              .model = &rs_model};
#else
SZ_CODELET(sz_cl_reduce_scatter, rs_cpu, "reduce_scatter", rs_model);
#endif
SZ_DESCRIBE(sz_cl_reduce_scatter, SZ_TASK_COMM, SZ_CL_CUDA_F16,
            "rank-ordered reduce-scatter of a unit's gradients (CUDA: NCCL only, SZ_NCCL=1)");

sz_status sz_submit_reduce_scatter(struct sz_model *m, struct sz_unit *u, int64_t o, int64_t len, int acc,
                                   int64_t release_bytes)
{
    if (o < 0 || len < 0 || o + len > u->shard)
        return SZ_ERR_INVALID;
    struct reduce_scatter_args a = {m->core.ctx->task_comm, m->nd, m->rank, &m->counters, u->shard, acc, o, len,
                                    SZ_MEM_GRADS_IN_FLIGHT, -release_bytes};
    sz_task_tensor t[] = {{&u->grad.all, SZ_READ, SZ_DTYPE_ANY, u->padded, "full", 0},
                          {&u->gshard, SZ_READ_WRITE, SZ_DTYPE_ANY, u->shard, "shard", 0},
                          {m->comm_buf, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "buffer", 0},
                          {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_as(u, u->rs_name, "reduce_scatter", &sz_cl_reduce_scatter, t, 4, &a, sizeof a);
}
