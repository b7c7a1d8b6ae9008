/* tasks/clip_scale.c — the global gradient-norm clip factor. Tensors: out (two floats, W),
 * this rank's per-unit squared norms of its owned gradient shard (R), token (RW). With several
 * ranks the per-unit sums of all ranks are all-gathered and added in rank-major order, so the
 * factor is bitwise the same on every rank and in every ZeRO stage. scale = clip / norm when the
 * norm exceeds clip > 0, else 1, in out[0]; the norm in out[1].
 * CUDA (on the worker's stream): one rank sums on the device (sz_cuda_clip_scale, bitwise the
 * CPU's order and factor, the loss scale's division and overflow included); with several ranks the sums come to the host (a synchronous copy of nunits floats
 * on the stream), are all-gathered over MPI as on the CPU, go back to a stream-ordered device
 * buffer and are summed there in the same rank-major order. (With a communication worker the
 * `zero` policy gives it this task, so the CUDA worker never waits in MPI; the CUDA version serves
 * single-rank runs and runs without one.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_deadline.h"
#include "sz_cuda.h"

struct clip_args {
    MPI_Comm comm;             /* as struct sz_comm */
    int nd, rank;
    struct sz_counters *stats;
    float clip;                /* the norm to clip to; 0: off */
    float loss_scale;          /* fp16: the gradients hold this factor (> 0); 0: none */
};

/* The factor the optimizer multiplies the gradients by, from their global squared norm s. With a
 * loss scale: the norm is the unscaled one, the factor divides the scale out, and a norm that is
 * not finite (an fp16 overflow on some rank: every rank sums the same numbers) gives NaN, which
 * the optimizer kernels take as "skip this step" (kernels/sz_kernels.h). */
static void clip_factor(double s, float clip, float loss_scale, float *out)
{
    double norm = sqrt(s);
    if (loss_scale > 0.0f) {
        norm /= loss_scale;
        if (!isfinite(norm)) {
            out[0] = NAN;
            out[1] = (float)norm;
            return;
        }
    }
    double f = (clip > 0.0f && norm > clip) ? clip / norm : 1.0;
    out[0] = loss_scale > 0.0f ? (float)(f / loss_scale) : (float)f;
    out[1] = (float)norm;
}

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
    clip_factor(s, a.clip, a.loss_scale, sz_task_ptr(b, arg, 0));
}

#if SZ_WITH_CUDA
static void clip_cuda(void *b[], void *arg)
{
    const struct clip_args a = *(const struct clip_args *)sz_task_params(arg);
    const float *mine = sz_task_ptr(b, arg, 1);
    float *out = sz_task_ptr(b, arg, 0);
    int n = (int)sz_task_numel(arg, 1);
    cudaStream_t s = SZ_STREAM;
    if (a.nd <= 1) {
        sz_cuda_task_rc(arg, "clip_scale", sz_cuda_clip_scale(s, out, mine, n, a.clip, a.loss_scale));
        return;
    }
    size_t bytes = (size_t)n * (size_t)a.nd * sizeof(float);
    float *host = malloc(bytes), *dev = NULL;
    if (!host) {
        sz_task_fail_nomem(arg, "clip_scale (CUDA): out of memory (%zu bytes of host buffer)", bytes);
        return;
    }
    int rc = (int)cudaMemcpyAsync(host, mine, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, s);
    if (!rc)
        rc = (int)cudaStreamSynchronize(s);
    if (!rc) {
        float *own = malloc((size_t)n * sizeof *own);
        if (!own) {
            free(host);
            sz_task_fail_nomem(arg, "clip_scale (CUDA): out of memory");
            return;
        }
        memcpy(own, host, (size_t)n * sizeof *own);
        int64_t t0 = sz_now_ns();
        int mrc = sz_allgather(own, n, MPI_FLOAT, host, n, MPI_FLOAT, a.comm, "all-gather of gradient norms");
        free(own);
        if (mrc != MPI_SUCCESS) {
            free(host);
            sz_task_fail(arg, "clip_scale (CUDA): the all-gather of gradient norms failed (MPI error %d)", mrc);
            return;
        }
        sz_counters_comm(a.stats, (int64_t)(a.nd - 1) * n * 4, sz_now_ns() - t0);
        rc = (int)cudaMallocAsync((void **)&dev, bytes, s);
    }
    if (!rc)
        rc = (int)cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s);
    if (!rc)
        rc = sz_cuda_clip_scale(s, out, dev, n * a.nd, a.clip, a.loss_scale);
    if (dev) {
        int frc = (int)cudaFreeAsync(dev, s);
        rc = rc ? rc : frc;
    }
    if (!rc) /* the host buffer is the copy's source: keep it until the stream has read it */
        rc = (int)cudaStreamSynchronize(s);
    free(host);
    sz_cuda_task_rc(arg, "clip_scale", rc);
}
#endif

SZ_PERFMODEL(clip_model, "sz_clip_scale");
SZ_CODELET_CUDA(sz_cl_clip_scale, clip_cpu, clip_cuda, "clip_scale", clip_model);
SZ_DESCRIBE(sz_cl_clip_scale, SZ_TASK_COMM_HOST, SZ_CL_CUDA_F16,
            "clip factor and global norm from every rank's sums, fp16's loss scale divided out (NaN: overflow) "
            "(CUDA: sums on the device, ranks' through host MPI)");

sz_status sz_submit_clip(struct sz_model *m, float clip, float loss_scale)
{
    struct clip_args a = {m->core.ctx->task_comm, m->nd, m->rank, &m->counters, clip, loss_scale};
    sz_task_tensor t[] = {{m->clip, SZ_WRITE, SZ_DTYPE_F32, 2, "out", 0},
                          {m->sumsq, SZ_READ, SZ_DTYPE_F32, m->nunits, "sumsq", 0},
                          {m->token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 0}};
    return sz_task_submit_named(&m->core, 0xffff, "clip", "clip_scale", &sz_cl_clip_scale, t, 3, &a, sizeof a);
}
