/* codelets/attention.c — causal multi-head self-attention (llm.c layout) whose memory is linear in T,
 * forward and backward; the math is kernels/attention.c. Forward overwrites out and stats
 * (per query row: softmax max and 1/sum, [B,NH,T,2]); backward accumulates into dinp (or sets it: a
 * folded sz_op_zero), recomputing
 * the probabilities from inp and stats. */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

struct attention_args {
    int B, T, C, NH;
    int out_dt, dout_dt; /* sz_k_dtype: forward out / backward dinp, and backward dout (bf16 path) */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct attention_args *a = sz_task_params(arg);
    int rc = sz_k_attention_fwd_mx(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                                   a->B, a->T, a->C, a->NH);
    if (rc != 0)
        sz_task_fail_nomem(arg, "out of memory");
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct attention_args *a = sz_task_params(arg);
    int set = sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0; /* a folded sz_op_zero of dinp */
    int rc = a->out_dt || a->dout_dt
                 ? sz_k_attention_bwd_mx_set(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), a->dout_dt,
                                             sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3), a->B, a->T, a->C, a->NH,
                                             set)
                 : sz_k_attention_bwd_set(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2),
                                          sz_task_ptr(b, arg, 3), a->B, a->T, a->C, a->NH, set);
    if (rc != 0)
        sz_task_fail_nomem(arg, "out of memory");
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct attention_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "attention_fwd",
                    sz_cuda_attention_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1),
                                             sz_task_ptr(b, arg, 2), a->B, a->T, a->C, a->NH));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct attention_args *a = sz_task_params(arg);
    int set = sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0;
    sz_cuda_task_rc(arg, "attention_bwd",
                    sz_cuda_attention_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1),
                                             a->dout_dt, sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3), a->B, a->T,
                                             a->C, a->NH, set));
}
#endif

SZ_PERFMODEL(fwd_model, "sz_attention_fwd");
SZ_PERFMODEL(bwd_model, "sz_attention_bwd");
SZ_CODELET_CUDA(sz_cl_attention_fwd, fwd_cpu, fwd_cuda, "attention_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_attention_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out, stats from qkv");
SZ_CODELET_CUDA(sz_cl_attention_bwd, bwd_cpu, bwd_cuda, "attention_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_attention_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dqkv += from dout, qkv, stats");

static sz_status check_shape(sz_unit *u, const char *op, int B, int T, int C, int NH)
{
    if (B < 1 || T < 1 || NH < 1 || C < NH || C % NH)
        return sz_task_refuse(u, op, "B, T must be >= 1 and C a multiple of NH (got B %d, T %d, C %d, NH %d)", B, T,
                              C, NH);
    return SZ_OK;
}

static const sz_grad_spec attention_grads[] = {{SZ_GRAD_OUTPUT, 0}, {SZ_GRAD_NONE, 0}, {SZ_GRAD_INPUT, 0}};
/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status attention_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct attention_args *a = sz_record_params(r);
    return sz_op_attention_bwd(u, SZ_RG(2), SZ_RG(0), SZ_RT(2), SZ_RT(1), a->B, a->T, a->C, a->NH);
}

sz_status sz_op_attention_fwd(sz_unit *u, sz_tensor *out, sz_tensor *stats, sz_tensor *inp, int B, int T, int C,
                              int NH)
{
    sz_status st = check_shape(u, "attention_fwd", B, T, C, NH);
    if (st != SZ_OK)
        return st;
    int64_t N = (int64_t)B * T, S = 2 * (int64_t)B * NH * T;
    struct attention_args a = {B, T, C, NH, sz_kdt(out), 0};
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), N * C, "out", 0},
                          {stats, SZ_WRITE, SZ_DTYPE_F32, S, "stats", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, N * 3 * C, "inp", 0}};
    return sz_task_submit_diff(u, &sz_cl_attention_fwd, "attention_fwd", t, 3, &a, sizeof a, attention_grads,
                               attention_fwd_grad);
}

sz_status sz_op_attention_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, sz_tensor *inp, sz_tensor *stats, int B,
                              int T, int C, int NH)
{
    sz_status st = check_shape(u, "attention_bwd", B, T, C, NH);
    if (st != SZ_OK)
        return st;
    int64_t N = (int64_t)B * T, S = 2 * (int64_t)B * NH * T;
    struct attention_args a = {B, T, C, NH, sz_kdt(dinp), sz_kdt(dout)};
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, sz_fb(dinp), N * 3 * C, "dinp", 0},
                          {dout, SZ_READ, sz_fb(dout), N * C, "dout", 0},
                          {inp, SZ_READ, SZ_DTYPE_F32, N * 3 * C, "inp", 0},
                          {stats, SZ_READ, SZ_DTYPE_F32, S, "stats", 0}};
    return sz_task_submit(u, &sz_cl_attention_bwd, "attention_bwd", t, 4, &a, sizeof a);
}
