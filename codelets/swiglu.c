/* codelets/swiglu.c — SwiGLU, LLaMA's MLP gate fused (out = silu(gate) · up): the typed wrappers
 * sz_op_swiglu_fwd/bwd, their argument struct, codelets and perf models; the math is
 * kernels/swiglu.c (CPU) and cuda/elementwise.cu (CUDA). On the native bf16 path out
 * (forward) and dgate, dup, dout (backward) may be bf16, each on its own (the matmuls around it read
 * and write those); gate and up, the matmuls' fp32 outputs, stay fp32. The backward accumulates.
 * It was the LLaMA model's own operation (apps/llama/swiglu.c, through starzero_starpu.h) until it
 * needed a CUDA implementation: the same formula and bits on the CPU. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"

struct swiglu_args {
    int64_t n;
    int out_dt;                   /* forward: sz_k_dtype of out; 0: fp32 */
    int dgate_dt, dup_dt, dout_dt; /* backward: of dgate, dup, dout */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    sz_k_swiglu_fwd_mx(sz_task_ptr(b, arg, 0), (sz_k_dtype)a->out_dt, sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                       (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    sz_k_swiglu_bwd_mx(sz_task_ptr(b, arg, 0), (sz_k_dtype)a->dgate_dt, sz_task_ptr(b, arg, 1), (sz_k_dtype)a->dup_dt,
                       sz_task_ptr(b, arg, 2), (sz_k_dtype)a->dout_dt, sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4),
                       (size_t)a->n);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "swiglu_fwd", sz_cuda_swiglu_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt,
                                                             sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                                                             (size_t)a->n));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct swiglu_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "swiglu_bwd", sz_cuda_swiglu_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->dgate_dt,
                                                             sz_task_ptr(b, arg, 1), a->dup_dt, sz_task_ptr(b, arg, 2),
                                                             a->dout_dt, sz_task_ptr(b, arg, 3),
                                                             sz_task_ptr(b, arg, 4), (size_t)a->n));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_swiglu_fwd");
SZ_PERFMODEL(bwd_model, "sz_swiglu_bwd");
SZ_CODELET_CUDA(sz_cl_swiglu_fwd, fwd_cpu, fwd_cuda, "swiglu_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_swiglu_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "out = silu(gate) * up (LLaMA's MLP gate)");
SZ_CODELET_CUDA(sz_cl_swiglu_bwd, bwd_cpu, bwd_cuda, "swiglu_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_swiglu_bwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dgate += dout * up * silu'(gate), dup += dout * silu(gate)");

/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status swiglu_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct swiglu_args *a = sz_record_params(r);
    return sz_op_swiglu_bwd(u, SZ_RG(1), SZ_RG(2), SZ_RG(0), SZ_RT(1), SZ_RT(2), a->n);
}

sz_status sz_op_swiglu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *gate, sz_tensor *up, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "swiglu", "n must be >= 1 (got %lld)", (long long)n);
    struct swiglu_args a = {n, sz_kdt(out), 0, 0, 0}; /* out may be bf16 */
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), n, "out", 0},
                          {gate, SZ_READ, SZ_DTYPE_F32, n, "gate", 0},
                          {up, SZ_READ, SZ_DTYPE_F32, n, "up", 0}};
    return sz_task_submit_diff(u, &sz_cl_swiglu_fwd, "swiglu", t, 3, &a, sizeof a, NULL, swiglu_fwd_grad);
}

sz_status sz_op_swiglu_bwd(sz_unit *u, sz_tensor *dgate, sz_tensor *dup, sz_tensor *dout, sz_tensor *gate,
                           sz_tensor *up, int64_t n)
{
    if (n < 1)
        return sz_task_refuse(u, "swiglu_bwd", "n must be >= 1 (got %lld)", (long long)n);
    struct swiglu_args a = {n, 0, sz_kdt(dgate), sz_kdt(dup), sz_kdt(dout)}; /* dgate, dup, dout may be bf16 */
    sz_task_tensor t[] = {{dgate, SZ_ACCUMULATE, sz_fb(dgate), n, "dgate", 0},
                          {dup, SZ_ACCUMULATE, sz_fb(dup), n, "dup", 0},
                          {dout, SZ_READ, sz_fb(dout), n, "dout", 0},
                          {gate, SZ_READ, SZ_DTYPE_F32, n, "gate", 0},
                          {up, SZ_READ, SZ_DTYPE_F32, n, "up", 0}};
    return sz_task_submit(u, &sz_cl_swiglu_bwd, "swiglu_bwd", t, 5, &a, sizeof a);
}
