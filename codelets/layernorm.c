/* codelets/layernorm.c — layernorm over the channel dimension (eps 1e-5), forward and backward.
 * Forward overwrites out, mean, rstd; backward accumulates into dinp (or sets it: a folded
 * sz_op_zero), dw and db (or sets them: the step's first writer of the gradients). The bias is
 * optional: b (forward) and db (backward) may be NULL (a layernorm without bias). */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"
#include "sz_round.h"

struct layernorm_args {
    int N, C;
    int out_dt, p_dt, dout_dt; /* sz_k_dtype of out (fwd), of w and b, of dout (bwd); all 0: fp32 */
    int round;                 /* backward: dw, db are bf16 gradients to round into (sz_round.h) */
};

enum { FWD_OUT, FWD_MEAN, FWD_RSTD, FWD_INP, FWD_W, FWD_B };
static void fwd_cpu(void *b[], void *arg)
{
    const struct layernorm_args *a = sz_task_params(arg);
    if (a->out_dt || a->p_dt) {
        if (sz_k_layernorm_fwd_mx(sz_task_ptr(b, arg, FWD_OUT), a->out_dt, sz_task_ptr(b, arg, FWD_MEAN),
                                  sz_task_ptr(b, arg, FWD_RSTD), sz_task_ptr(b, arg, FWD_INP), sz_task_ptr(b, arg, FWD_W),
                                  sz_task_ptr(b, arg, FWD_B), a->p_dt, a->N, a->C))
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    sz_k_layernorm_fwd(sz_task_ptr(b, arg, FWD_OUT), sz_task_ptr(b, arg, FWD_MEAN), sz_task_ptr(b, arg, FWD_RSTD),
                       sz_task_ptr(b, arg, FWD_INP), sz_task_ptr(b, arg, FWD_W), sz_task_ptr(b, arg, FWD_B), a->N,
                       a->C);
}

enum { BWD_DINP, BWD_DW, BWD_DB, BWD_DOUT, BWD_INP, BWD_W, BWD_MEAN, BWD_RSTD };
static void bwd_run(void *b[], void *arg, void *dw, void *dbp, int rset)
{
    const struct layernorm_args *a = sz_task_params(arg);
    int set = rset | (sz_task_sets(arg, BWD_DINP) ? SZ_K_SET_DINP : 0) | /* a folded sz_op_zero of dinp */
              (sz_task_sets(arg, BWD_DW) ? SZ_K_SET_DW : 0) | (sz_task_sets(arg, BWD_DB) ? SZ_K_SET_DB : 0); /* the step's first writer of a parameter's gradient (tasks/step.c) */
    if (a->dout_dt || a->p_dt) {
        if (sz_k_layernorm_bwd_mx_set(sz_task_ptr(b, arg, BWD_DINP), dw,
                                      dbp, sz_task_ptr(b, arg, BWD_DOUT), a->dout_dt,
                                      sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W), a->p_dt,
                                      sz_task_ptr(b, arg, BWD_MEAN), sz_task_ptr(b, arg, BWD_RSTD), a->N, a->C, set))
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    sz_k_layernorm_bwd_set(sz_task_ptr(b, arg, BWD_DINP), dw, dbp,
                           sz_task_ptr(b, arg, BWD_DOUT), sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W),
                           sz_task_ptr(b, arg, BWD_MEAN), sz_task_ptr(b, arg, BWD_RSTD), a->N, a->C, set);
}

/* The parameters' gradients: into the task's (fp32), or (a->round) rounded into the bf16 ones
 * (sz_round.h). */
static void bwd_cpu(void *b[], void *arg)
{
    const struct layernorm_args *a = sz_task_params(arg);
    sz_round_norm_bwd(b, arg, bwd_run, a->round, BWD_DW, BWD_DB, a->C);
}

#if SZ_WITH_CUDA
/* Every type combination the CPU takes (fp32 or bf16 out / dout and parameters), fp32 math; dinp set
 * rather than added to where the engine folded a zero into the task. */
static void fwd_cuda(void *b[], void *arg)
{
    const struct layernorm_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "layernorm_fwd",
                    sz_cuda_layernorm_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, FWD_OUT), a->out_dt,
                                             sz_task_ptr(b, arg, FWD_MEAN), sz_task_ptr(b, arg, FWD_RSTD),
                                             sz_task_ptr(b, arg, FWD_INP), sz_task_ptr(b, arg, FWD_W),
                                             sz_task_ptr(b, arg, FWD_B), a->p_dt, a->N, a->C));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct layernorm_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, BWD_DINP) ? SZ_CUDA_SET_A : 0) | (sz_task_sets(arg, BWD_DW) ? SZ_CUDA_SET_DW : 0) |
              (sz_task_sets(arg, BWD_DB) ? SZ_CUDA_SET_DB : 0); /* as the CPU's */
    sz_cuda_task_rc(arg, "layernorm_bwd",
                    sz_cuda_layernorm_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, BWD_DINP), sz_task_ptr(b, arg, BWD_DW),
                                             sz_task_ptr(b, arg, BWD_DB), sz_task_ptr(b, arg, BWD_DOUT), a->dout_dt,
                                             sz_task_ptr(b, arg, BWD_INP), sz_task_ptr(b, arg, BWD_W), a->p_dt,
                                             sz_task_ptr(b, arg, BWD_MEAN), sz_task_ptr(b, arg, BWD_RSTD), a->N, a->C,
                                             set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_layernorm_fwd");
SZ_PERFMODEL(bwd_model, "sz_layernorm_bwd");
SZ_CODELET_CUDA(sz_cl_layernorm_fwd, fwd_cpu, fwd_cuda, "layernorm_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_layernorm_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "out, mean, rstd from inp, w [, b]");
SZ_CODELET_CUDA(sz_cl_layernorm_bwd, bwd_cpu, bwd_cuda, "layernorm_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_layernorm_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dinp, dw [, db] += from dout");

static sz_status check_shape(sz_unit *u, const char *op, int N, int C)
{
    if (N < 1 || C < 1)
        return sz_task_refuse(u, op, "N and C must be >= 1 (got %d, %d)", N, C);
    return SZ_OK;
}

static const sz_grad_spec layernorm_grads[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_NONE, 0},   {SZ_GRAD_NONE, 0},
                                                {SZ_GRAD_INPUT, SZ_GRAD_TYPE_F32},   {SZ_GRAD_INPUT, 0},
                                                {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status layernorm_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct layernorm_args *a = sz_record_params(r);
    return sz_op_layernorm_bwd(u, SZ_RG(3), SZ_RG(4), SZ_RG(5), SZ_RG(0), SZ_RT(3), SZ_RT(4), SZ_RT(1), SZ_RT(2), a->N,
                               a->C);
}

sz_status sz_op_layernorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *mean, sz_tensor *rstd, sz_tensor *inp,
                              sz_tensor *w, sz_tensor *b, int N, int C)
{
    sz_status st = check_shape(u, "layernorm_fwd", N, C);
    if (st != SZ_OK)
        return st;
    int64_t NC = (int64_t)N * C;
    /* the parameters (w's type; b must match) may be bf16 on both bf16 paths (with an fp32 out: the
     * emulated one, the fp32 kernel's bits on the widened parameters), out on the native one */
    struct layernorm_args a = {N, C, sz_kdt(out), sz_kdt(w), 0, 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), NC, "out", 0},   {mean, SZ_WRITE, SZ_DTYPE_F32, N, "mean", 0},
                          {rstd, SZ_WRITE, SZ_DTYPE_F32, N, "rstd", 0},  {inp, SZ_READ, SZ_DTYPE_F32, NC, "inp", 0},
                          {w, SZ_READ, sz_fb(w), C, "w", 0},         {b, SZ_READ, sz_fb(w), C, "b", 1}};
    return sz_task_submit_diff(u, &sz_cl_layernorm_fwd, "layernorm_fwd", t, 6, &a, sizeof a, layernorm_grads,
                               layernorm_fwd_grad);
}

sz_status sz_op_layernorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                              sz_tensor *inp, sz_tensor *w, sz_tensor *mean, sz_tensor *rstd, int N, int C)
{
    sz_status st = check_shape(u, "layernorm_bwd", N, C);
    if (st != SZ_OK)
        return st;
    int64_t NC = (int64_t)N * C;
    /* w may be bf16 (both bf16 paths), dout too (the native one); the gradients are fp32 */
    /* or bf16 ones of a unit that rounds into them (CPU workers) */
    int round = sz_round_wanted(u, dw);
    sz_dtype gt = round ? SZ_DTYPE_BF16 : SZ_DTYPE_F32;
    struct layernorm_args a = {N, C, 0, sz_kdt(w), sz_kdt(dout), round};
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, SZ_DTYPE_F32, NC, "dinp", 0},
                          {dw, SZ_ACCUMULATE_OR_SET, gt, C, "dw", 0},
                          {db, SZ_ACCUMULATE_OR_SET, gt, C, "db", 1},
                          {dout, SZ_READ, sz_fb(dout), NC, "dout", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, NC, "inp", 0},
                          {w, SZ_READ, sz_fb(w), C, "w", 0},
                          {mean, SZ_READ, SZ_DTYPE_F32, N, "mean", 0},
                          {rstd, SZ_READ, SZ_DTYPE_F32, N, "rstd", 0}};
    return (round ? sz_task_submit_cpu : sz_task_submit)(u, &sz_cl_layernorm_bwd, "layernorm_bwd", t, 8, &a, sizeof a);
}
