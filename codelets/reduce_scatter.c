/* codelets/reduce_scatter.c — deterministic reduce-scatter of one unit's flat buffer across the
 * data-parallel ranks: an all-to-all moves chunk r of every rank's buffer to rank r, which adds
 * the nd chunks in rank order (0, 1, ..., nd-1) into its shard. Stage 0's all-reduce is this plus
 * an all-gather, so every stage sums the same numbers in the same order: bitwise equal results.
 * Tensors: full (R, nd*shard elements), shard (RW), recv buffer (RW, >= nd*shard), token (RW). */
#include "sz_codelets.h"

/* bf16 buffers (mixed precision) travel as 2-byte elements and are summed in fp32, rounded once. */
static void rs_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int h = a.bf16[0];
    size_t es = h ? 2 : 4;
    void *full = h ? (void *)sz_th(b, &a, 0) : (void *)sz_tf(b, &a, 0);
    void *recv = h ? (void *)sz_th(b, &a, 2) : (void *)sz_tf(b, &a, 2);
    int64_t S = a.shard, t0 = sz_now_ns();
    if (a.nd > 1) {
        MPI_Datatype dt = h ? MPI_UINT16_T : MPI_FLOAT;
        int rc = MPI_Alltoall(full, (int)S, dt, recv, (int)S, dt, a.comm);
        STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "reduce-scatter: MPI_Alltoall failed (%d)", rc);
    } else {
        recv = full;
    }
    if (h) {
        const uint16_t *rv = recv;
        uint16_t *shard = sz_th(b, &a, 1);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < S; i++) {
            float s = a.acc ? sz_h2f(shard[i]) + sz_h2f(rv[i]) : sz_h2f(rv[i]);
            for (int r = 1; r < a.nd; r++)
                s += sz_h2f(rv[r * S + i]);
            shard[i] = sz_f2h(s);
        }
    } else {
        const float *rv = recv;
        float *shard = sz_tf(b, &a, 1);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < S; i++) {
            float s = a.acc ? shard[i] + rv[i] : rv[i];
            for (int r = 1; r < a.nd; r++)
                s += rv[r * S + i];
            shard[i] = s;
        }
    }
    if (a.nd > 1) /* the exchange and the rank-ordered sum: what MPI_Reduce_scatter_block does */
        sz_counters_comm(a.stats, (a.nd - 1) * S * (int64_t)es, sz_now_ns() - t0);
    if (a.bytes) /* the full-size gradients reduced here are freed right after */
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(rs_model, "sz_reduce_scatter");
SZ_CODELET(sz_cl_reduce_scatter, rs_cpu, "reduce_scatter", rs_model);
