/* codelets/residual.c — residual add out = a + b on n elements, forward and backward. Forward
 * overwrites out (which may be a or b); backward accumulates dout into da and db (or sets either:
 * a folded sz_op_zero). */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct residual_args {
    int64_t n;
    int da_dt, db_dt; /* backward: sz_k_dtype of da and db (either may be bf16: the bf16 path) */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct residual_args *a = sz_task_params(arg);
    sz_k_residual_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct residual_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, 0) ? SZ_K_SET_A : 0) | (sz_task_sets(arg, 1) ? SZ_K_SET_B : 0); /* folded zeros */
    if (a->da_dt || a->db_dt)
        sz_k_residual_bwd_mx_set(sz_task_ptr(b, arg, 0), a->da_dt, sz_task_ptr(b, arg, 1), a->db_dt,
                                 sz_task_ptr(b, arg, 2), (size_t)a->n, set);
    else
        sz_k_residual_bwd_set(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n, set);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct residual_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "residual_fwd", sz_cuda_residual_fwd(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                                              sz_task_ptr(b, arg, 2), (size_t)a->n));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct residual_args *a = sz_task_params(arg);
    int set = (sz_task_sets(arg, 0) ? SZ_K_SET_A : 0) | (sz_task_sets(arg, 1) ? SZ_K_SET_B : 0);
    sz_cuda_task_rc(arg, "residual_bwd", sz_cuda_residual_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->da_dt,
                                                                 sz_task_ptr(b, arg, 1), a->db_dt,
                                                                 sz_task_ptr(b, arg, 2), (size_t)a->n, set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_residual_fwd");
SZ_PERFMODEL(bwd_model, "sz_residual_bwd");
SZ_CODELET_CUDA(sz_cl_residual_fwd, fwd_cpu, fwd_cuda, "residual_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_residual_fwd, SZ_TASK_COMPUTE, 0, "out = a + b");
SZ_CODELET_CUDA(sz_cl_residual_bwd, bwd_cpu, bwd_cuda, "residual_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_residual_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "da, db += dout");

static const sz_grad_spec residual_grads[] = {{SZ_GRAD_OUTPUT, SZ_GRAD_TYPE_F32}, {SZ_GRAD_INPUT, 0},
                                               {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status residual_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct residual_args *a = sz_record_params(r);
    return sz_op_residual_bwd(u, SZ_RG(1), SZ_RG(2), SZ_RG(0), a->n);
}

sz_status sz_op_residual_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "residual_fwd", "n must be >= 1 (got %lld)", (long long)n);
    struct residual_args p = {n, 0, 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, n, "out", 0},
                          {a, SZ_READ, SZ_DTYPE_F32, n, "a", 0},
                          {b, SZ_READ, SZ_DTYPE_F32, n, "b", 0}};
    return sz_task_submit_diff(u, &sz_cl_residual_fwd, "residual_fwd", t, 3, &p, sizeof p, residual_grads,
                               residual_fwd_grad);
}

sz_status sz_op_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "residual_bwd", "n must be >= 1 (got %lld)", (long long)n);
    struct residual_args p = {n, 0, 0};
    p.da_dt = sz_kdt(da);
    p.db_dt = sz_kdt(db);
    sz_task_tensor t[] = {{da, SZ_ACCUMULATE_OR_SET, sz_fb(da), n, "da", 0},
                          {db, SZ_ACCUMULATE_OR_SET, sz_fb(db), n, "db", 0},
                          {dout, SZ_READ, SZ_DTYPE_F32, n, "dout", 0}};
    return sz_task_submit(u, &sz_cl_residual_bwd, "residual_bwd", t, 3, &p, sizeof p);
}
