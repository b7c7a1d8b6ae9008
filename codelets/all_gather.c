/* codelets/all_gather.c — all-gather of one unit's flat buffer: every rank contributes its shard
 * and receives the others'. Two forms: in place (tensors: full (RW), token; the own slice already
 * holds the updated shard — stages 1 and 2 after the optimizer) and from a separate shard
 * (tensors: full (W), shard (R), token — stage 3's just-in-time gather of a unit). fp32 or bf16
 * elements (mixed precision), as the views say. Ranks on one node read each other's shards in
 * place (codelets/exchange.c); otherwise MPI_Allgather. */
#include <string.h>
#include "sz_codelets.h"
#include "sz_deadline.h"

static void ag_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int h = a.bf16[0];
    size_t es = h ? 2 : 4;
    void *full = h ? (void *)sz_th(b, &a, 0) : (void *)sz_tf(b, &a, 0);
    int64_t S = a.shard;
    int in_place = a.nt == 2;
    void *shard = in_place ? NULL : (h ? (void *)sz_th(b, &a, 1) : (void *)sz_tf(b, &a, 1));
    if (a.nd > 1) {
        int64_t t0 = sz_now_ns();
        MPI_Datatype dt = h ? MPI_UINT16_T : MPI_FLOAT;
        if (!sz_shm_all_gather(&a, es, full, shard, S)) {
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
SZ_CODELET(sz_cl_all_gather, ag_cpu, "all_gather", ag_model);
