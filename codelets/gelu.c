/* codelets/gelu.c — GELU (tanh form) on n elements, forward and backward. Forward overwrites
 * out; backward accumulates into dinp (or sets it: a folded sz_op_zero). */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct gelu_args {
    int64_t n;
    int out_dt, dout_dt; /* sz_k_dtype: forward out / backward dinp, and backward dout (bf16 path) */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct gelu_args *a = sz_task_params(arg);
    if (a->out_dt)
        sz_k_gelu_fwd_mx(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), (size_t)a->n);
    else
        sz_k_gelu_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct gelu_args *a = sz_task_params(arg);
    int set = sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0; /* a folded sz_op_zero of dinp */
    if (a->out_dt || a->dout_dt)
        sz_k_gelu_bwd_mx_set(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                             a->dout_dt, (size_t)a->n, set);
    else
        sz_k_gelu_bwd_set(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n, set);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct gelu_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "gelu_fwd", sz_cuda_gelu_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt,
                                                         sz_task_ptr(b, arg, 1), (size_t)a->n));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct gelu_args *a = sz_task_params(arg);
    int set = sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0;
    sz_cuda_task_rc(arg, "gelu_bwd", sz_cuda_gelu_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt,
                                                         sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->dout_dt,
                                                         (size_t)a->n, set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_gelu_fwd");
SZ_PERFMODEL(bwd_model, "sz_gelu_bwd");
SZ_CODELET_CUDA(sz_cl_gelu_fwd, fwd_cpu, fwd_cuda, "gelu_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_gelu_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out = gelu(inp)");
SZ_CODELET_CUDA(sz_cl_gelu_bwd, bwd_cpu, bwd_cuda, "gelu_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_gelu_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dinp += gelu'(inp) * dout");

/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status gelu_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct gelu_args *a = sz_record_params(r);
    return sz_op_gelu_bwd(u, SZ_RG(1), SZ_RT(1), SZ_RG(0), a->n);
}

sz_status sz_op_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "gelu_fwd", "n must be >= 1 (got %lld)", (long long)n);
    struct gelu_args a = {n, sz_kdt(out), 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), n, "out", 0}, {inp, SZ_READ, SZ_DTYPE_F32, n, "inp", 0}};
    return sz_task_submit_diff(u, &sz_cl_gelu_fwd, "gelu_fwd", t, 2, &a, sizeof a, NULL, gelu_fwd_grad);
}

sz_status sz_op_gelu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "gelu_bwd", "n must be >= 1 (got %lld)", (long long)n);
    struct gelu_args a = {n, sz_kdt(dinp), sz_kdt(dout)};
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, sz_fb(dinp), n, "dinp", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, n, "inp", 0},
                          {dout, SZ_READ, sz_fb(dout), n, "dout", 0}};
    return sz_task_submit(u, &sz_cl_gelu_bwd, "gelu_bwd", t, 3, &a, sizeof a);
}
