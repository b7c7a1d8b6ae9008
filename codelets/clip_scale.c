/* codelets/clip_scale.c — the global gradient-norm clip factor. Tensors: out (two floats, W),
 * this rank's per-unit squared norms of its owned gradient shard (R), token (RW). With several
 * ranks the per-unit sums of all ranks are all-gathered and added in rank-major order, so the
 * factor is bitwise the same on every rank and in every ZeRO stage. scale = clip / norm when the
 * norm exceeds clip = f[5] > 0, else 1, in out[0]; the norm in out[1]. */
#include <math.h>
#include <stdlib.h>
#include "sz_codelets.h"
#include "sz_deadline.h"

static void clip_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    const float *mine = sz_tf(b, &a, 1);
    int n = (int)a.numel[1];
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
    double norm = sqrt(s), clip = a.f[5];
    float *out = sz_tf(b, &a, 0);
    out[0] = (clip > 0.0 && norm > clip) ? (float)(clip / norm) : 1.0f;
    out[1] = (float)norm;
}

SZ_PERFMODEL(clip_model, "sz_clip_scale");
SZ_CODELET(sz_cl_clip_scale, clip_cpu, "clip_scale", clip_model);
