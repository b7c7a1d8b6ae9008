/* codelets/softmax_xent_fused.c — softmax + cross-entropy with its backward in one pass, in place
 * (llm.c's fused classifier): from logits [N,Vp] and targets it writes losses [N] and overwrites
 * the logits with dlogits = (softmax - onehot(target)) * scale for every row (columns >= V: 0),
 * scale being the loss-gradient scale (sz_unit_loss_scale). No probabilities are kept: against
 * softmax_xent_fwd + _bwd it saves the N·Vp probs and the N·Vp dlogits tensors and two passes over
 * them, with the same bits. The forward of a model's head calls it; its backward then reads the
 * logits tensor as dlogits. A target outside [0, V) is refused (sz_task_fail) before anything is
 * read or written. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct softmax_xent_fused_args {
    int N, V, Vp;
    float scale; /* d(loss) / d(one row's loss) */
    int dt;      /* sz_k_dtype of logits: bf16 on the native bf16 path (fp32 math from widened rows) */
};

enum { LOSSES, LOGITS, TARGETS };
static void fused_cpu(void *b[], void *arg)
{
    const struct softmax_xent_fused_args *a = sz_task_params(arg);
    const int *targets = sz_task_ptr(b, arg, TARGETS);
    if (sz_task_check_ids(arg, "target", targets, a->N, a->V))
        return;
    if (sz_k_softmax_xent_fused_mx(sz_task_ptr(b, arg, LOGITS), a->dt, sz_task_ptr(b, arg, LOSSES), targets, a->scale,
                                   a->N, a->V, a->Vp))
        sz_task_fail_nomem(arg, "out of memory");
}

#if SZ_WITH_CUDA
/* fp32: the two CUDA kernels on the same buffer, one after the other on the worker's stream (both
 * are safe in place: each element is read and written by the same thread): the separate ops' bits.
 * bf16 logits (the native bf16 path): one kernel, fp32 math, the bf16 gradient left in place. */
static void fused_cuda(void *b[], void *arg)
{
    const struct softmax_xent_fused_args *a = sz_task_params(arg);
    float *logits = sz_task_ptr(b, arg, LOGITS);
    const int *targets = sz_task_ptr(b, arg, TARGETS);
    if (sz_cuda_check_ids(arg, "target", targets, a->N, a->V))
        return;
    if (a->dt == SZ_K_BF16) {
        sz_cuda_task_rc(arg, "softmax_xent_fused",
                        sz_cuda_softmax_xent_fused_bf16(SZ_STREAM, (uint16_t *)(void *)logits,
                                                        sz_task_ptr(b, arg, LOSSES), targets, a->scale, a->N, a->V,
                                                        a->Vp));
        return;
    }
    if (sz_cuda_task_rc(arg, "softmax_xent_fused",
                        sz_cuda_softmax_xent_fwd(SZ_STREAM, logits, sz_task_ptr(b, arg, LOSSES), logits, targets,
                                                 a->N, a->V, a->Vp)))
        return;
    sz_cuda_task_rc(arg, "softmax_xent_fused",
                    sz_cuda_softmax_xent_bwd(SZ_STREAM, logits, logits, targets, NULL, a->scale, a->N, a->V, a->Vp));
}
#endif

SZ_PERFMODEL(fused_model, "sz_softmax_xent_fused");
SZ_CODELET_CUDA(sz_cl_softmax_xent_fused, fused_cpu, fused_cuda, "softmax_xent_fused", fused_model);
SZ_DESCRIBE(sz_cl_softmax_xent_fused, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "losses, logits := dlogits in one pass");

/* the forward leaves the logits' gradient in the logits: its backward has nothing left to do */
static const sz_grad_spec softmax_xent_fused_grads[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_IN_PLACE, 0}, {SZ_GRAD_NONE, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status softmax_xent_fused_grad(sz_unit *u, const sz_op_record *r)
{
    (void)u, (void)r;
    return SZ_OK;
}

sz_status sz_op_softmax_xent_fused(sz_unit *u, sz_tensor *losses, sz_tensor *logits, sz_tensor *targets, int N,
                                   int V, int Vp)
{
    if (N < 1 || V < 1 || V > Vp)
        return sz_task_refuse(u, "softmax_xent_fused", "need N >= 1 and 1 <= V <= Vp (got N %d, V %d, Vp %d)", N,
                              V, Vp);
    float scale = u ? sz_unit_loss_scale(u) : 0.0f;
    struct softmax_xent_fused_args a = {N, V, Vp, scale > 0 ? scale : 1.0f / (float)N, sz_kdt(logits)};
    sz_task_tensor t[] = {{losses, SZ_WRITE, SZ_DTYPE_F32, N, "losses", 0},
                          {logits, SZ_READ_WRITE, sz_fb(logits), (int64_t)N * Vp, "logits", 0},
                          {targets, SZ_READ, SZ_DTYPE_I32, N, "targets", 0}};
    return sz_task_submit_diff(u, &sz_cl_softmax_xent_fused, "softmax_xent_fused", t, 3, &a, sizeof a,
                               softmax_xent_fused_grads, softmax_xent_fused_grad);
}
