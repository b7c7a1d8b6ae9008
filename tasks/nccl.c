/* tasks/nccl.c — the GPU collectives: reduce-scatter and all-gather as CUDA implementations of
 * the reduce_scatter and all_gather codelets, calling NCCL on the CUDA worker's stream, for runs
 * where every rank has a GPU of its own. NEVER RUN ON A GPU YET, so opt-in: SZ_NCCL=1.
 *
 * sz_nccl_start (from sz_context_init, after StarPU is up): when SZ_NCCL=1, this build has NCCL,
 * every rank has exactly one CUDA worker and no two ranks share a device (their PCI bus ids are
 * compared; NCCL refuses two ranks on one GPU), rank 0 creates an ncclUniqueId, broadcasts it over
 * the ranks' MPI communicator, and each rank's CUDA worker calls ncclCommInitRank on its device.
 * The same decision is taken on every rank (an all-reduce of "can"; every collective here is under
 * the deadline, sched/deadline.c, so a rank that never arrives is named). Otherwise nothing changes:
 * the codelets' CPU implementations move host copies (shared memory or MPI) as before.
 *
 * Bitwise results: the reduce-scatter does not use ncclReduceScatter (whose summation order NCCL
 * does not fix); it moves the pieces with grouped ncclSend/ncclRecv (an all-to-all) into the
 * communication buffer and sums them in rank order with sz_cuda_reduce_pieces, the CPU path's
 * arithmetic. So stages 0-3 stay bitwise equal at fixed N_d, and equal the host-copy path too
 * (as long as the compute kernels agree, which between CPU and GPU they do only to rounding).
 * The all-gather is ncclAllGather (a copy). The token handle keeps the collectives in submission
 * order on every rank, as on the host path; can_execute sends these codelets to the CUDA worker
 * only while the communicator exists. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"
#include "sz_deadline.h"

/* Which workers may run the collectives: with a communicator only the CUDA worker (NCCL), without
 * one only CPU workers (the host paths). Both ranks of a collective must take the same path: a
 * policy free to pick per rank (dmdas by its perf models, lws by whoever is idle) putting one rank's
 * task on the CPU (MPI) and another's on the GPU (NCCL) would leave both waiting for good. */
int sz_nccl_worker_may_run(int cuda_worker, int nccl_active) { return cuda_worker ? nccl_active != 0 : !nccl_active; }

/* 1 when the nd bus ids (strings, `stride` bytes apart) are all different (every rank has a GPU of
 * its own) and none is empty (a rank without one). */
int sz_nccl_buses_distinct(const char *all, int nd, size_t stride)
{
    for (int r = 0; r < nd; r++) {
        if (!all[(size_t)r * stride])
            return 0;
        for (int q = r + 1; q < nd; q++)
            if (!strcmp(all + (size_t)r * stride, all + (size_t)q * stride))
                return 0;
    }
    return 1;
}

#if SZ_WITH_CUDA && defined(SZ_HAVE_NCCL)
#include <nccl.h>

static ncclComm_t sz_nccl;        /* this rank's communicator; NULL: the host paths */
static ncclUniqueId sz_nccl_id;
static int sz_nccl_rank, sz_nccl_nd;
static ncclResult_t sz_nccl_init_rc;

static void init_on_worker(void *arg)
{
    (void)arg;
    sz_nccl_init_rc = ncclCommInitRank(&sz_nccl, sz_nccl_nd, sz_nccl_id, sz_nccl_rank);
}

static void destroy_on_worker(void *arg)
{
    (void)arg;
    ncclCommDestroy(sz_nccl);
}

int sz_nccl_active(void) { return sz_nccl != NULL; }

sz_status sz_nccl_start(int wanted, MPI_Comm comm, int rank, int nd, char *why, size_t why_len)
{
    int can = wanted && nd > 1 && starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) == 1;
    char bus[64] = {0};
    if (can) {
        int w = starpu_worker_get_by_type(STARPU_CUDA_WORKER, 0);
        int dev = starpu_worker_get_devid(w);
        can = cudaDeviceGetPCIBusId(bus, (int)sizeof bus - 1, dev) == cudaSuccess;
    }
    char *all = malloc((size_t)nd * sizeof bus);
    if (!all)
        return SZ_ERR_NOMEM;
    if (sz_allgather(bus, (int)sizeof bus, MPI_CHAR, all, (int)sizeof bus, MPI_CHAR, comm, "NCCL: PCI bus ids") !=
        MPI_SUCCESS) {
        free(all);
        return SZ_ERR_RUNTIME;
    }
    if (can && !sz_nccl_buses_distinct(all, nd, sizeof bus))
        can = 0; /* two ranks on one GPU: NCCL refuses, the host path serves */
    free(all);
    int every = 0;
    if (sz_allreduce(&can, &every, 1, MPI_INT, MPI_MIN, comm, "NCCL: every rank can") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    if (!every) {
        snprintf(why, why_len, "host-copy collectives (NCCL needs SZ_NCCL=1 and one GPU per rank)");
        return SZ_OK;
    }
    /* rank 0's id, and whether it has one: without it no rank may call ncclCommInitRank (a rank
     * bootstrapping from a made-up id would wait for peers that never come) */
    struct {
        ncclUniqueId id;
        int ok;
    } boot;
    memset(&boot, 0, sizeof boot);
    ncclResult_t idrc = ncclSuccess;
    if (rank == 0)
        boot.ok = (idrc = ncclGetUniqueId(&boot.id)) == ncclSuccess;
    MPI_Request rq;
    if (MPI_Ibcast(&boot, (int)sizeof boot, MPI_BYTE, 0, comm, &rq) != MPI_SUCCESS ||
        sz_mpi_wait(&rq, comm, "NCCL: unique id") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    if (!boot.ok) {
        snprintf(why, why_len, "ncclGetUniqueId failed on rank 0 (%s); host-copy collectives",
                 rank == 0 ? ncclGetErrorString(idrc) : "see rank 0");
        return SZ_ERR_RUNTIME;
    }
    sz_nccl_id = boot.id;
    sz_nccl_rank = rank;
    sz_nccl_nd = nd;
    starpu_execute_on_each_worker(init_on_worker, NULL, STARPU_CUDA);
    int ok = sz_nccl_init_rc == ncclSuccess, all_ok = 0;
    if (sz_allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm, "NCCL: communicators made") != MPI_SUCCESS)
        all_ok = 0;
    if (!all_ok) {
        if (ok)
            starpu_execute_on_each_worker(destroy_on_worker, NULL, STARPU_CUDA);
        sz_nccl = NULL;
        snprintf(why, why_len, "NCCL communicator creation failed (%s); host-copy collectives",
                 ok ? "on another rank" : ncclGetErrorString(sz_nccl_init_rc));
        return SZ_ERR_RUNTIME;
    }
    snprintf(why, why_len, "NCCL collectives on the CUDA workers' streams");
    return SZ_OK;
}

void sz_nccl_stop(void)
{
    if (sz_nccl)
        starpu_execute_on_each_worker(destroy_on_worker, NULL, STARPU_CUDA);
    sz_nccl = NULL;
}

/* The CUDA implementations the two codelets get (tasks/reduce_scatter.c, all_gather.c). */
static int sz_nccl_rc(const void *cl_arg, const char *op, ncclResult_t r)
{
    if (r == ncclSuccess)
        return 0;
    sz_task_fail(cl_arg, "%s (NCCL): %s", op, ncclGetErrorString(r));
    return 1;
}

void sz_nccl_reduce_scatter(void *b[], void *arg, int64_t S, int64_t o, int64_t len, int acc, struct sz_counters *stats)
{
    int dt = sz_kdt_of(sz_task_layout_of(arg)->dtype[0]); /* fp32, bf16 or fp16 */
    size_t es = dt ? 2 : 4;
    char *full = sz_task_ptr(b, arg, 0), *buf = sz_task_ptr(b, arg, 2);
    void *shard = sz_task_ptr(b, arg, 1);
    cudaStream_t s = starpu_cuda_get_local_stream();
    int nd = sz_nccl_nd;
    /* one bucket round of the plan: elements [o, o + len) of every rank's piece */
    ncclGroupStart();
    for (int r = 0; r < nd; r++) {
        ncclSend(full + ((size_t)r * S + o) * es, (size_t)len * es, ncclUint8, r, sz_nccl, s);
        ncclRecv(buf + (size_t)r * len * es, (size_t)len * es, ncclUint8, r, sz_nccl, s);
    }
    if (sz_nccl_rc(arg, "reduce-scatter", ncclGroupEnd()) ||
        sz_cuda_task_rc(arg, "reduce-scatter", sz_cuda_reduce_pieces(s, shard, dt, buf, nd, o, len, acc)))
        return;
    sz_counters_comm(stats, (nd - 1) * len * (int64_t)es, 0); /* asynchronous: no time taken here */
}

void sz_nccl_all_gather(void *b[], void *arg, int64_t S, int in_place, int rank, struct sz_counters *stats)
{
    size_t es = sz_dtype_size((sz_dtype)sz_task_layout_of(arg)->dtype[0]); /* 2: bf16 or fp16, 4: fp32 */
    char *full = sz_task_ptr(b, arg, 0);
    const void *src = in_place ? (const void *)(full + (size_t)rank * S * es) : sz_task_ptr(b, arg, 1);
    if (sz_nccl_rc(arg, "all-gather",
                   ncclAllGather(src, full, (size_t)S * es, ncclUint8, sz_nccl, starpu_cuda_get_local_stream())))
        return;
    sz_counters_comm(stats, (sz_nccl_nd - 1) * S * (int64_t)es, 0);
}

/* can_execute: the CUDA implementation (nimpl 0 of a CUDA worker) only with a communicator, the
 * CPU one only without (sz_nccl_worker_may_run: every rank takes the same path). */
int sz_nccl_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
    (void)task;
    (void)nimpl;
    return sz_nccl_worker_may_run(starpu_worker_get_type((int)workerid) == STARPU_CUDA_WORKER, sz_nccl != NULL);
}
#else
int sz_nccl_active(void) { return 0; }
sz_status sz_nccl_start(int wanted, MPI_Comm comm, int rank, int nd, char *why, size_t why_len)
{
    (void)wanted, (void)comm, (void)rank, (void)nd;
    snprintf(why, why_len, "host-copy collectives (built without NCCL)");
    return SZ_OK;
}
void sz_nccl_stop(void) {}
#endif
