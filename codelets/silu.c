/* codelets/silu.c — SiLU (x · σ(x)): the typed wrappers sz_op_silu_fwd/bwd, their argument
 * struct, codelets and perf models; the math is kernels/silu.c, and with bf16 operands (out;
 * dinp and dout: the native bf16 path's) kernels/bf16_act.c. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"

struct silu_args {
    int64_t n;
    int out_dt, dout_dt; /* sz_k_dtype: forward out / backward dinp, and backward dout; 0: fp32 */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct silu_args *a = sz_task_params(arg);
    if (a->out_dt)
        sz_k_silu_fwd_mx(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), (size_t)a->n);
    else
        sz_k_silu_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct silu_args *a = sz_task_params(arg);
    if (a->out_dt || a->dout_dt)
        sz_k_silu_bwd_mx(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->dout_dt,
                         (size_t)a->n);
    else
        sz_k_silu_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct silu_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "silu_fwd", sz_cuda_silu_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt,
                                                         sz_task_ptr(b, arg, 1), (size_t)a->n));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct silu_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "silu_bwd", sz_cuda_silu_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt,
                                                         sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), a->dout_dt,
                                                         (size_t)a->n));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_silu_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_silu_bwd"};
SZ_CODELET_CUDA(sz_cl_silu_fwd, fwd_cpu, fwd_cuda, "silu_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_silu_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out = silu(inp)");
SZ_CODELET_CUDA(sz_cl_silu_bwd, bwd_cpu, bwd_cuda, "silu_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_silu_bwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "dinp += silu'(inp) * dout");

/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status silu_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct silu_args *a = sz_record_params(r);
    return sz_op_silu_bwd(u, SZ_RG(1), SZ_RT(1), SZ_RG(0), a->n);
}

sz_status sz_op_silu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n)
{
    if (n < 1)
        return sz_op_invalid(u, "silu", "n = %lld: need n >= 1", (long long)n);
    struct silu_args a = {n, sz_kdt(out), 0}; /* out may be bf16 */
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), n, "out", 0}, {inp, SZ_READ, SZ_DTYPE_F32, n, "inp", 0}};
    return sz_task_submit_diff(u, &sz_cl_silu_fwd, "silu", t, 2, &a, sizeof a, NULL, silu_fwd_grad);
}

sz_status sz_op_silu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n)
{
    if (n < 1)
        return sz_op_invalid(u, "silu_bwd", "n = %lld: need n >= 1", (long long)n);
    struct silu_args a = {n, sz_kdt(dinp), sz_kdt(dout)}; /* dinp, dout may be bf16 */
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE, sz_fb(dinp), n, "dinp", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, n, "inp", 0},
                          {dout, SZ_READ, sz_fb(dout), n, "dout", 0}};
    return sz_task_submit(u, &sz_cl_silu_bwd, "silu_bwd", t, 3, &a, sizeof a);
}
