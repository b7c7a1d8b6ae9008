/* codelets/softmax_xent.c — fused softmax + cross-entropy over the real vocabulary V (padded
 * columns up to Vp excluded), forward and backward. Forward overwrites losses and probs; backward
 * overwrites dlogits with (probs - onehot(target)) * scale for every row, scale being the
 * loss-gradient scale (sz_unit_loss_scale). A target outside [0, V) is refused (sz_task_fail)
 * before anything is read or written. */
#include <stdlib.h>
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct softmax_xent_args {
    int N, V, Vp;
    float scale; /* backward: d(loss) / d(one row's loss) */
    int dlogits_dt; /* backward: sz_k_dtype of dlogits (bf16 on the native bf16 path) */
};

enum { FWD_LOSSES, FWD_PROBS, FWD_LOGITS, FWD_TARGETS };
static void fwd_cpu(void *b[], void *arg)
{
    const struct softmax_xent_args *a = sz_task_params(arg);
    const int *targets = sz_task_ptr(b, arg, FWD_TARGETS);
    if (sz_task_check_ids(arg, "target", targets, a->N, a->V))
        return;
    sz_k_softmax_xent_fwd(sz_task_ptr(b, arg, FWD_PROBS), sz_task_ptr(b, arg, FWD_LOSSES),
                          sz_task_ptr(b, arg, FWD_LOGITS), targets, a->N, a->V, a->Vp);
}

enum { BWD_DLOGITS, BWD_PROBS, BWD_TARGETS };
static void bwd_cpu(void *b[], void *arg)
{
    const struct softmax_xent_args *a = sz_task_params(arg);
    const int *targets = sz_task_ptr(b, arg, BWD_TARGETS);
    if (sz_task_check_ids(arg, "target", targets, a->N, a->V))
        return;
    float *dloss = malloc((size_t)a->N * sizeof *dloss);
    if (!dloss) {
        sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    for (int i = 0; i < a->N; i++)
        dloss[i] = a->scale;
    sz_k_softmax_xent_bwd_mx(sz_task_ptr(b, arg, BWD_DLOGITS), a->dlogits_dt, sz_task_ptr(b, arg, BWD_PROBS), targets,
                             dloss, a->N, a->V, a->Vp);
    free(dloss);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct softmax_xent_args *a = sz_task_params(arg);
    const int *targets = sz_task_ptr(b, arg, FWD_TARGETS);
    if (sz_cuda_check_ids(arg, "target", targets, a->N, a->V))
        return;
    sz_cuda_task_rc(arg, "softmax_xent_fwd",
                    sz_cuda_softmax_xent_fwd(SZ_STREAM, sz_task_ptr(b, arg, FWD_PROBS), sz_task_ptr(b, arg, FWD_LOSSES),
                                             sz_task_ptr(b, arg, FWD_LOGITS), targets, a->N, a->V, a->Vp));
}

/* The forward checked the same targets. */
static void bwd_cuda(void *b[], void *arg)
{
    const struct softmax_xent_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "softmax_xent_bwd",
                    sz_cuda_softmax_xent_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, BWD_DLOGITS), a->dlogits_dt,
                                                sz_task_ptr(b, arg, BWD_PROBS), sz_task_ptr(b, arg, BWD_TARGETS), NULL,
                                                a->scale, a->N, a->V, a->Vp));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_softmax_xent_fwd");
SZ_PERFMODEL(bwd_model, "sz_softmax_xent_bwd");
SZ_CODELET_CUDA(sz_cl_softmax_xent_fwd, fwd_cpu, fwd_cuda, "softmax_xent_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_softmax_xent_fwd, SZ_TASK_COMPUTE, 0, "losses, probs from logits, targets");
SZ_CODELET_CUDA(sz_cl_softmax_xent_bwd, bwd_cpu, bwd_cuda, "softmax_xent_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_softmax_xent_bwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dlogits = (probs - onehot) * scale");

static sz_status check_shape(sz_unit *u, const char *op, int N, int V, int Vp)
{
    if (N < 1 || V < 1 || V > Vp)
        return sz_task_refuse(u, op, "need N >= 1 and 1 <= V <= Vp (got N %d, V %d, Vp %d)", N, V, Vp);
    return SZ_OK;
}

/* softmax_xent_bwd overwrites dlogits */
static const sz_grad_spec softmax_xent_grads[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_NONE, 0}, {SZ_GRAD_INPUT_SET, 0},
                                                   {SZ_GRAD_NONE, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status softmax_xent_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct softmax_xent_args *a = sz_record_params(r);
    return sz_op_softmax_xent_bwd(u, SZ_RG(2), SZ_RT(1), SZ_RT(3), a->N, a->V, a->Vp);
}

sz_status sz_op_softmax_xent_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *probs, sz_tensor *logits,
                                 sz_tensor *targets, int N, int V, int Vp)
{
    sz_status st = check_shape(u, "softmax_xent_fwd", N, V, Vp);
    if (st != SZ_OK)
        return st;
    struct softmax_xent_args a = {N, V, Vp, 0.0f, 0};
    sz_task_tensor t[] = {{losses, SZ_WRITE, SZ_DTYPE_F32, N, "losses", 0},
                          {probs, SZ_WRITE, SZ_DTYPE_F32, (int64_t)N * Vp, "probs", 0},
                          {logits, SZ_READ, SZ_DTYPE_F32, (int64_t)N * Vp, "logits", 0},
                          {targets, SZ_READ, SZ_DTYPE_I32, N, "targets", 0}};
    return sz_task_submit_diff(u, &sz_cl_softmax_xent_fwd, "softmax_xent_fwd", t, 4, &a, sizeof a, softmax_xent_grads,
                               softmax_xent_fwd_grad);
}

sz_status sz_op_softmax_xent_bwd(sz_unit *u, sz_tensor *dlogits, sz_tensor *probs, sz_tensor *targets, int N, int V,
                                 int Vp)
{
    sz_status st = check_shape(u, "softmax_xent_bwd", N, V, Vp);
    if (st != SZ_OK)
        return st;
    float scale = u ? sz_unit_loss_scale(u) : 0.0f;
    struct softmax_xent_args a = {N, V, Vp, scale > 0 ? scale : 1.0f / (float)N, sz_kdt(dlogits)};
    sz_task_tensor t[] = {{dlogits, SZ_WRITE, sz_fb(dlogits), (int64_t)N * Vp, "dlogits", 0},
                          {probs, SZ_READ, SZ_DTYPE_F32, (int64_t)N * Vp, "probs", 0},
                          {targets, SZ_READ, SZ_DTYPE_I32, N, "targets", 0}};
    return sz_task_submit(u, &sz_cl_softmax_xent_bwd, "softmax_xent_bwd", t, 3, &a, sizeof a);
}
