/* codelets/mse.c — mean-squared-error loss per row: the typed wrappers sz_op_mse_fwd/bwd, their
 * argument struct, codelets and perf models; the math is kernels/mse.c. The backward is
 * the first gradient of a step: it writes dpred scaled by the loss scale (d(the step's mean loss
 * over every row of every micro-batch of every rank)/d(one row's loss) = 1/(N·M·N_d)). */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"

struct mse_args {
    int N, C;
    float scale;
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct mse_args *a = sz_task_params(arg);
    sz_k_mse_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->N, a->C);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct mse_args *a = sz_task_params(arg);
    sz_k_mse_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->scale, a->N, a->C);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct mse_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "mse_fwd", sz_cuda_mse_fwd(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                                    sz_task_ptr(b, arg, 2), a->N, a->C));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct mse_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "mse_bwd", sz_cuda_mse_bwd(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                                    sz_task_ptr(b, arg, 2), a->scale, a->N, a->C));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_mse_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_mse_bwd"};
SZ_CODELET_CUDA(sz_cl_mse_fwd, fwd_cpu, fwd_cuda, "mse_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_mse_fwd, SZ_TASK_COMPUTE, 0, "losses = mean over C of (pred - target)^2");
SZ_CODELET_CUDA(sz_cl_mse_bwd, bwd_cpu, bwd_cuda, "mse_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_mse_bwd, SZ_TASK_COMPUTE, 0, "dpred = 2 (pred - target) / C * scale");

/* mse_bwd overwrites dpred; the target gets no gradient */
static const sz_grad_spec mse_grads[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_INPUT_SET, SZ_GRAD_TYPE_F32}, {SZ_GRAD_NONE, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status mse_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct mse_args *a = sz_record_params(r);
    return sz_op_mse_bwd(u, SZ_RG(1), SZ_RT(1), SZ_RT(2), a->N, a->C);
}

sz_status sz_op_mse_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *pred, sz_tensor *target, int N, int C)
{
    if (N < 1 || C < 1)
        return sz_op_invalid(u, "mse", "N = %d, C = %d: need N, C >= 1", N, C);
    struct mse_args a = {N, C, 0.0f};
    int64_t NC = (int64_t)N * C;
    sz_task_tensor t[] = {{losses, SZ_WRITE, SZ_DTYPE_F32, N, "losses", 0},
                          {pred, SZ_READ, SZ_DTYPE_F32, NC, "pred", 0},
                          {target, SZ_READ, SZ_DTYPE_F32, NC, "target", 0}};
    return sz_task_submit_diff(u, &sz_cl_mse_fwd, "mse", t, 3, &a, sizeof a, mse_grads, mse_fwd_grad);
}

sz_status sz_op_mse_bwd(sz_unit *u, sz_tensor *dpred, sz_tensor *pred, sz_tensor *target, int N, int C)
{
    if (N < 1 || C < 1)
        return sz_op_invalid(u, "mse_bwd", "N = %d, C = %d: need N, C >= 1", N, C);
    /* the loss scale (as softmax_xent_bwd reads it); 1/N outside a model with a loss tensor */
    float scale = u ? sz_unit_loss_scale(u) : 0.0f;
    struct mse_args a = {N, C, scale > 0 ? scale : 1.0f / (float)N};
    int64_t NC = (int64_t)N * C;
    sz_task_tensor t[] = {{dpred, SZ_WRITE, SZ_DTYPE_F32, NC, "dpred", 0},
                          {pred, SZ_READ, SZ_DTYPE_F32, NC, "pred", 0},
                          {target, SZ_READ, SZ_DTYPE_F32, NC, "target", 0}};
    return sz_task_submit(u, &sz_cl_mse_bwd, "mse_bwd", t, 3, &a, sizeof a);
}
