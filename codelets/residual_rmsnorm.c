/* codelets/residual_rmsnorm.c — a residual add fused with the RMSNorm that reads its sum (the
 * LLaMA-style block's res2 = x + attproj, rms2 = rmsnorm(res2)), forward and backward, [N,C]
 * rows. Forward overwrites res (= a + b), out and rstd, row by row while the row is in cache.
 * Backward accumulates the norm's input gradient into dres (the residual stream's gradient, which
 * already holds the rest of the graph's), then adds dres into da and db, and accumulates dw (or sets
 * it: the step's first writer of the gradients). The same bits as residual_fwd + rmsnorm_fwd, and
 * rmsnorm_bwd + residual_bwd. On the native bf16 path out (forward) / dout and db (backward) and w
 * may be bf16, on the emulated one w alone (kernels/bf16_act.c). */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"
#include "sz_round.h"

struct residual_rmsnorm_args {
    int N, C;
    float eps; /* forward only */
    int out_dt, p_dt, db_dt; /* sz_k_dtype of out (fwd) / dout (bwd), of w, of db (bwd); all 0: fp32 */
    int round;               /* backward: dw is a bf16 gradient to round into (sz_round.h) */
};

enum { FWD_RES, FWD_OUT, FWD_RSTD, FWD_A, FWD_B, FWD_W };
static void fwd_cpu(void *b[], void *arg)
{
    const struct residual_rmsnorm_args *a = sz_task_params(arg);
    if (a->out_dt || a->p_dt) {
        if (sz_k_residual_rmsnorm_fwd_mx(sz_task_ptr(b, arg, FWD_RES), sz_task_ptr(b, arg, FWD_OUT), a->out_dt,
                                         sz_task_ptr(b, arg, FWD_RSTD), sz_task_ptr(b, arg, FWD_A),
                                         sz_task_ptr(b, arg, FWD_B), sz_task_ptr(b, arg, FWD_W), a->p_dt, a->N, a->C,
                                         a->eps))
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    sz_k_residual_rmsnorm_fwd(sz_task_ptr(b, arg, FWD_RES), sz_task_ptr(b, arg, FWD_OUT), sz_task_ptr(b, arg, FWD_RSTD),
                              sz_task_ptr(b, arg, FWD_A), sz_task_ptr(b, arg, FWD_B), sz_task_ptr(b, arg, FWD_W), a->N,
                              a->C, a->eps);
}

enum { BWD_DA, BWD_DB, BWD_DRES, BWD_DW, BWD_DOUT, BWD_RES, BWD_W, BWD_RSTD };
static void bwd_run(void *b[], void *arg, void *dw, void *dbp, int rset)
{
    (void)dbp; /* no bias */
    const struct residual_rmsnorm_args *a = sz_task_params(arg);
    int set = rset | (sz_task_sets(arg, BWD_DA) ? SZ_K_SET_A : 0) | (sz_task_sets(arg, BWD_DB) ? SZ_K_SET_B : 0) |
              (sz_task_sets(arg, BWD_DW) ? SZ_K_SET_DW : 0);
    if (a->out_dt || a->p_dt || a->db_dt) {
        if (sz_k_rmsnorm_residual_bwd_mx_set(sz_task_ptr(b, arg, BWD_DA), sz_task_ptr(b, arg, BWD_DB), a->db_dt,
                                             sz_task_ptr(b, arg, BWD_DRES), dw,
                                             sz_task_ptr(b, arg, BWD_DOUT), a->out_dt, sz_task_ptr(b, arg, BWD_RES),
                                             sz_task_ptr(b, arg, BWD_W), a->p_dt, sz_task_ptr(b, arg, BWD_RSTD), a->N,
                                             a->C, set))
            sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    sz_k_rmsnorm_residual_bwd_set(sz_task_ptr(b, arg, BWD_DA), sz_task_ptr(b, arg, BWD_DB),
                                  sz_task_ptr(b, arg, BWD_DRES), dw,
                                  sz_task_ptr(b, arg, BWD_DOUT), sz_task_ptr(b, arg, BWD_RES),
                                  sz_task_ptr(b, arg, BWD_W), sz_task_ptr(b, arg, BWD_RSTD), a->N, a->C, set);
}

/* The parameters' gradients: into the task's (fp32), or (a->round) rounded into the bf16 ones
 * (sz_round.h). */
static void bwd_cpu(void *b[], void *arg)
{
    const struct residual_rmsnorm_args *a = sz_task_params(arg);
    sz_round_norm_bwd(b, arg, bwd_run, a->round, BWD_DW, -1, a->C);
}

#if SZ_WITH_CUDA
/* One fused kernel per direction (kernels/cuda/layernorm.cu), every type combination the CPU takes;
 * da and db set rather than added to where the engine folded a zero into the task. */
static void fwd_cuda(void *b[], void *arg)
{
    const struct residual_rmsnorm_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "residual_rmsnorm_fwd",
                    sz_cuda_residual_rmsnorm_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, FWD_RES), sz_task_ptr(b, arg, FWD_OUT),
                                                    a->out_dt, sz_task_ptr(b, arg, FWD_RSTD), sz_task_ptr(b, arg, FWD_A),
                                                    sz_task_ptr(b, arg, FWD_B), sz_task_ptr(b, arg, FWD_W), a->p_dt,
                                                    a->N, a->C, a->eps));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct residual_rmsnorm_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, BWD_DA) ? SZ_CUDA_SET_A : 0) | (sz_task_sets(arg, BWD_DB) ? SZ_CUDA_SET_B : 0) |
              (sz_task_sets(arg, BWD_DW) ? SZ_CUDA_SET_DW : 0);
    sz_cuda_task_rc(arg, "rmsnorm_residual_bwd",
                    sz_cuda_rmsnorm_residual_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, BWD_DA), sz_task_ptr(b, arg, BWD_DB),
                                                    a->db_dt, sz_task_ptr(b, arg, BWD_DRES),
                                                    sz_task_ptr(b, arg, BWD_DW), sz_task_ptr(b, arg, BWD_DOUT),
                                                    a->out_dt, sz_task_ptr(b, arg, BWD_RES), sz_task_ptr(b, arg, BWD_W),
                                                    a->p_dt, sz_task_ptr(b, arg, BWD_RSTD), a->N, a->C, set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_residual_rmsnorm_fwd");
SZ_PERFMODEL(bwd_model, "sz_rmsnorm_residual_bwd");
SZ_CODELET_CUDA(sz_cl_residual_rmsnorm_fwd, fwd_cpu, fwd_cuda, "residual_rmsnorm_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_residual_rmsnorm_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "res = a + b; out, rstd = rmsnorm(res)");
SZ_CODELET_CUDA(sz_cl_rmsnorm_residual_bwd, bwd_cpu, bwd_cuda, "rmsnorm_residual_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_rmsnorm_residual_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dres += rmsnorm'; da, db += dres; dw +=");

static const sz_grad_spec residual_rmsnorm_grads[] = {{SZ_GRAD_OUTPUT, SZ_GRAD_TYPE_F32}, {SZ_GRAD_OUTPUT, 0},
                                                       {SZ_GRAD_NONE, 0}, {SZ_GRAD_INPUT, SZ_GRAD_TYPE_F32},
                                                       {SZ_GRAD_INPUT, 0}, {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status residual_rmsnorm_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct residual_rmsnorm_args *a = sz_record_params(r);
    /* SZ_RG(0): res's gradient, which the fused backward adds the norm's input gradient into */
    return sz_op_rmsnorm_residual_bwd(u, SZ_RG(3), SZ_RG(4), SZ_RG(0), SZ_RG(5), SZ_RG(1), SZ_RT(0), SZ_RT(5), SZ_RT(2),
                                      a->N, a->C);
}

sz_status sz_op_residual_rmsnorm_fwd(sz_unit *u, sz_tensor *res, sz_tensor *out, sz_tensor *rstd, sz_tensor *a,
                                     sz_tensor *b, sz_tensor *w, int N, int C, float eps)
{
    if (N < 1 || C < 1 || !(eps >= 0.0f))
        return sz_op_invalid(u, "residual_rmsnorm_fwd", "N = %d, C = %d, eps = %g: need N, C >= 1 and eps >= 0", N,
                             C, eps);
    int64_t NC = (int64_t)N * C;
    struct residual_rmsnorm_args p = {N, C, eps, sz_kdt(out), sz_kdt(w), 0, 0}; /* out, w may be bf16 */
    sz_task_tensor t[] = {{res, SZ_WRITE, SZ_DTYPE_F32, NC, "res", 0}, {out, SZ_WRITE, sz_fb(out), NC, "out", 0},
                          {rstd, SZ_WRITE, SZ_DTYPE_F32, N, "rstd", 0}, {a, SZ_READ, SZ_DTYPE_F32, NC, "a", 0},
                          {b, SZ_READ, SZ_DTYPE_F32, NC, "b", 0},       {w, SZ_READ, sz_fb(w), C, "w", 0}};
    return sz_task_submit_diff(u, &sz_cl_residual_rmsnorm_fwd, "residual_rmsnorm_fwd", t, 6, &p, sizeof p,
                               residual_rmsnorm_grads, residual_rmsnorm_fwd_grad);
}

sz_status sz_op_rmsnorm_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dres, sz_tensor *dw,
                                     sz_tensor *dout, sz_tensor *res, sz_tensor *w, sz_tensor *rstd, int N, int C)
{
    if (N < 1 || C < 1)
        return sz_op_invalid(u, "rmsnorm_residual_bwd", "N = %d, C = %d: need N, C >= 1", N, C);
    int64_t NC = (int64_t)N * C;
    /* dout, w, db may be bf16; dw too: a unit's that rounds into it (CPU workers) */
    int round = sz_round_wanted(u, dw);
    struct residual_rmsnorm_args p = {N, C, 0.0f, sz_kdt(dout), sz_kdt(w), sz_kdt(db), round};
    sz_task_tensor t[] = {{da, SZ_ACCUMULATE_OR_SET, SZ_DTYPE_F32, NC, "da", 0},
                          {db, SZ_ACCUMULATE_OR_SET, sz_fb(db), NC, "db", 0},
                          {dres, SZ_ACCUMULATE, SZ_DTYPE_F32, NC, "dres", 0}, {dw, SZ_ACCUMULATE_OR_SET, round ? SZ_DTYPE_BF16 : SZ_DTYPE_F32, C, "dw", 0},
                          {dout, SZ_READ, sz_fb(dout), NC, "dout", 0},        {res, SZ_READ, SZ_DTYPE_F32, NC, "res", 0},
                          {w, SZ_READ, sz_fb(w), C, "w", 0},                  {rstd, SZ_READ, SZ_DTYPE_F32, N, "rstd", 0}};
    return (round ? sz_task_submit_cpu : sz_task_submit)(u, &sz_cl_rmsnorm_residual_bwd, "rmsnorm_residual_bwd", t, 8,
                                                         &p, sizeof p);
}
