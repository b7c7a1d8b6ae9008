/* codelets/clip_scale.c — the global gradient-norm clip factor. Tensors: out (two floats, W),
 * this rank's per-unit squared norms of its owned gradient shard (R), token (RW). With several
 * ranks the per-unit sums of all ranks are all-gathered and added in rank-major order, so the
 * factor is bitwise the same on every rank and in every ZeRO stage. scale = clip / norm when the
 * norm exceeds clip > 0, else 1, in out[0]; the norm in out[1]. */
#include <math.h>
#include <stdlib.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_deadline.h"

struct clip_args {
    MPI_Comm comm;             /* as struct sz_comm */
    int nd, rank;
    struct sz_counters *stats;
    float clip;                /* the norm to clip to; 0: off */
};

static void clip_cpu(void *b[], void *arg)
{
    const struct clip_args a = *(const struct clip_args *)sz_task_params(arg);
    const float *mine = sz_task_ptr(b, arg, 1);
    int n = (int)sz_task_numel(arg, 1);
    float *all = (float *)mine;
    if (a.nd > 1) {
        all = malloc((size_t)n * (size_t)a.nd * sizeof *all);
        STARPU_ASSERT_MSG(all, "clip: out of memory");
        int64_t t0 = sz_now_ns();
        int rc = sz_allgather(mine, n, MPI_FLOAT, all, n, MPI_FLOAT, a.comm, "all-gather of gradient norms");
        STARPU_ASSERT_MSG(rc == MPI_SUCCESS, "clip: MPI_Allgather failed (%d)", rc);
        sz_counters_comm(a.stats, (int64_t)(a.nd - 1) * n * 4, sz_now_ns() - t0);
    }
    double s = 0.0;
    for (int i = 0; i < n * a.nd; i++)
        s += all[i];
    if (all != mine)
        free(all);
    double norm = sqrt(s), clip = a.clip;
    float *out = sz_task_ptr(b, arg, 0);
    out[0] = (clip > 0.0 && norm > clip) ? (float)(clip / norm) : 1.0f;
    out[1] = (float)norm;
}

SZ_PERFMODEL(clip_model, "sz_clip_scale");
SZ_CODELET(sz_cl_clip_scale, clip_cpu, "clip_scale", clip_model);

sz_status sz_submit_clip(struct sz_model *m, float clip)
{
    struct clip_args a = {m->ctx->task_comm, m->nd, m->rank, &m->counters, clip};
    sz_task_tensor t[] = {{m->clip, SZ_WRITE, SZ_DTYPE_F32, 2, "out", 0},
                          {m->sumsq, SZ_READ, SZ_DTYPE_F32, m->nunits, "sumsq", 0},
                          {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_named(m, 0xffff, "clip", "clip_scale", &sz_cl_clip_scale, t, 3, &a, sizeof a);
}
