/* codelets/reduce_scatter.c — deterministic reduce-scatter of one unit's flat buffer across the
 * data-parallel ranks: an all-to-all moves chunk r of every rank's buffer to rank r, which adds
 * the nd chunks in rank order (0, 1, ..., nd-1) into its shard. Stage 0's all-reduce is this plus
 * an all-gather, so every stage sums the same numbers in the same order: bitwise equal results.
 * Tensors: full (R, nd*shard elements), shard (RW), recv buffer (RW, >= nd*shard), token (RW). */
#include "sz_codelets.h"

static void rs_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    const float *full = sz_tf(b, &a, 0);
    float *shard = sz_tf(b, &a, 1), *recv = sz_tf(b, &a, 2);
    int64_t S = a.shard, t0 = sz_now_ns();
    if (a.nd > 1) {
        int rc = MPI_Alltoall(full, (int)S, MPI_FLOAT, recv, (int)S, MPI_FLOAT, a.comm);
        STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "reduce-scatter: MPI_Alltoall failed (%d)", rc);
    } else {
        recv = (float *)full;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < S; i++) {
        float s = a.acc ? shard[i] + recv[i] : recv[i];
        for (int r = 1; r < a.nd; r++)
            s += recv[r * S + i];
        shard[i] = s;
    }
    if (a.nd > 1) /* the exchange and the rank-ordered sum: what MPI_Reduce_scatter_block does */
        sz_counters_comm(a.stats, (a.nd - 1) * S * 4, sz_now_ns() - t0);
    if (a.bytes) /* the full-size gradients reduced here are freed right after */
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(rs_model, "sz_reduce_scatter");
SZ_CODELET(sz_cl_reduce_scatter, rs_cpu, "reduce_scatter", rs_model);
