/* codelets/all_gather.c — all-gather of one unit's flat buffer: every rank contributes its shard
 * and receives the others'. Two forms: in place (tensors: full (RW), token; the own slice already
 * holds the updated shard — stages 1 and 2 after the optimizer) and from a separate shard
 * (tensors: full (W), shard (R), token — stage 3's just-in-time gather of a unit). */
#include "sz_codelets.h"

static void ag_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    float *full = sz_tf(b, &a, 0);
    int64_t S = a.shard;
    int in_place = a.nt == 2;
    if (a.nd > 1) {
        int64_t t0 = sz_now_ns();
        int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : sz_tf(b, &a, 1), (int)S, MPI_FLOAT, full, (int)S, MPI_FLOAT,
                               a.comm);
        STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "all-gather: MPI_Allgather failed (%d)", rc);
        sz_counters_comm(a.stats, (a.nd - 1) * S * 4, sz_now_ns() - t0);
    } else if (!in_place) {
        const float *shard = sz_tf(b, &a, 1);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < S; i++)
            full[i] = shard[i];
    }
    if (a.bytes)
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(ag_model, "sz_all_gather");
SZ_CODELET(sz_cl_all_gather, ag_cpu, "all_gather", ag_model);
