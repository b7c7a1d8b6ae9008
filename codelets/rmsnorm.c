/* codelets/rmsnorm.c — RMSNorm (LLaMA's norm, no bias): the typed wrappers sz_op_rmsnorm_fwd/bwd,
 * their argument struct, codelets and perf models; the math is kernels/rmsnorm.c, and with
 * bf16 operands (the native bf16 path: out / dout and w bf16; the emulated one: w bf16 alone)
 * kernels/bf16_act.c. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"
#include "sz_round.h"

struct rmsnorm_args {
    int N, C;
    float eps;
    int out_dt, p_dt, dout_dt; /* sz_k_dtype of out (fwd), of w, of dout (bwd); all 0: fp32 */
    int round;                 /* backward: dw is a bf16 gradient to round into (sz_round.h) */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct rmsnorm_args *a = sz_task_params(arg);
    if (a->out_dt || a->p_dt) {
        if (sz_k_rmsnorm_fwd_mx(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                                sz_task_ptr(b, arg, 3), a->p_dt, a->N, a->C, a->eps))
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    sz_k_rmsnorm_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3),
                     a->N, a->C, a->eps);
}

static void bwd_run(void *b[], void *arg, void *dw, void *dbp, int rset)
{
    (void)dbp; /* no bias */
    const struct rmsnorm_args *a = sz_task_params(arg);
    int set = rset | (sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0) | /* a folded sz_op_zero of dinp */
              (sz_task_sets(arg, 1) ? SZ_K_SET_DW : 0); /* the step's first writer of a parameter's gradient (tasks/step.c) */
    if (a->dout_dt || a->p_dt) {
        if (sz_k_rmsnorm_bwd_mx_set(sz_task_ptr(b, arg, 0), dw, sz_task_ptr(b, arg, 2), a->dout_dt,
                                    sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4), a->p_dt, sz_task_ptr(b, arg, 5),
                                    a->N, a->C, set))
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    sz_k_rmsnorm_bwd_set(sz_task_ptr(b, arg, 0), dw, sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3),
                         sz_task_ptr(b, arg, 4), sz_task_ptr(b, arg, 5), a->N, a->C, set);
}

/* The parameters' gradients: into the task's (fp32), or (a->round) rounded into the bf16 ones
 * (sz_round.h). */
static void bwd_cpu(void *b[], void *arg)
{
    const struct rmsnorm_args *a = sz_task_params(arg);
    sz_round_norm_bwd(b, arg, bwd_run, a->round, 1, -1, a->C);
}

#if SZ_WITH_CUDA
/* Every type combination the CPU takes (fp32 or bf16 out / dout and w), fp32 math; dinp set rather
 * than added to where the engine folded a zero into the task. */
static void fwd_cuda(void *b[], void *arg)
{
    const struct rmsnorm_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "rmsnorm_fwd",
                    sz_cuda_rmsnorm_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1),
                                           sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3), a->p_dt, a->N, a->C,
                                           a->eps));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct rmsnorm_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, 0) ? SZ_CUDA_SET_A : 0) | (sz_task_sets(arg, 1) ? SZ_CUDA_SET_DW : 0); /* as the CPU's */
    sz_cuda_task_rc(arg, "rmsnorm_bwd",
                    sz_cuda_rmsnorm_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                           sz_task_ptr(b, arg, 2), a->dout_dt, sz_task_ptr(b, arg, 3),
                                           sz_task_ptr(b, arg, 4), a->p_dt, sz_task_ptr(b, arg, 5), a->N, a->C, set));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_rmsnorm_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_rmsnorm_bwd"};
SZ_CODELET_CUDA(sz_cl_rmsnorm_fwd, fwd_cpu, fwd_cuda, "rmsnorm_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_rmsnorm_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out, rstd from inp, w (RMSNorm)");
SZ_CODELET_CUDA(sz_cl_rmsnorm_bwd, bwd_cpu, bwd_cuda, "rmsnorm_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_rmsnorm_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dinp, dw += from dout");

static const sz_grad_spec rmsnorm_grads[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_NONE, 0}, {SZ_GRAD_INPUT, SZ_GRAD_TYPE_F32},
                                              {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status rmsnorm_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct rmsnorm_args *a = sz_record_params(r);
    return sz_op_rmsnorm_bwd(u, SZ_RG(2), SZ_RG(3), SZ_RG(0), SZ_RT(2), SZ_RT(3), SZ_RT(1), a->N, a->C);
}

sz_status sz_op_rmsnorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *rstd, sz_tensor *inp, sz_tensor *w, int N, int C,
                            float eps)
{
    if (N < 1 || C < 1 || !(eps >= 0.0f))
        return sz_op_invalid(u, "rmsnorm", "N = %d, C = %d, eps = %g: need N, C >= 1 and eps >= 0", N, C, eps);
    /* w may be bf16 (both bf16 paths), out too (the native one) */
    struct rmsnorm_args a = {N, C, eps, sz_kdt(out), sz_kdt(w), 0, 0};
    int64_t NC = (int64_t)N * C;
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), NC, "out", 0},
                          {rstd, SZ_WRITE, SZ_DTYPE_F32, N, "rstd", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, NC, "inp", 0},
                          {w, SZ_READ, sz_fb(w), C, "w", 0}};
    return sz_task_submit_diff(u, &sz_cl_rmsnorm_fwd, "rmsnorm", t, 4, &a, sizeof a, rmsnorm_grads, rmsnorm_fwd_grad);
}

sz_status sz_op_rmsnorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *dout, sz_tensor *inp, sz_tensor *w,
                            sz_tensor *rstd, int N, int C)
{
    if (N < 1 || C < 1)
        return sz_op_invalid(u, "rmsnorm_bwd", "N = %d, C = %d: need N, C >= 1", N, C);
    /* w may be bf16 (both bf16 paths), dout too (the native one); the gradients are fp32 */
    /* or a bf16 dw of a unit that rounds into it (CPU workers) */
    int round = sz_round_wanted(u, dw);
    struct rmsnorm_args a = {N, C, 0.0f, 0, sz_kdt(w), sz_kdt(dout), round};
    int64_t NC = (int64_t)N * C;
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, SZ_DTYPE_F32, NC, "dinp", 1},
                          {dw, SZ_ACCUMULATE_OR_SET, round ? SZ_DTYPE_BF16 : SZ_DTYPE_F32, C, "dw", 1},
                          {dout, SZ_READ, sz_fb(dout), NC, "dout", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, NC, "inp", 0},
                          {w, SZ_READ, sz_fb(w), C, "w", 0},
                          {rstd, SZ_READ, SZ_DTYPE_F32, N, "rstd", 0}};
    return (round ? sz_task_submit_cpu : sz_task_submit)(u, &sz_cl_rmsnorm_bwd, "rmsnorm_bwd", t, 6, &a, sizeof a);
}
