/* codelets/rope.c — rotary position embedding on a fused qkv [B,T,3C]: the typed wrappers
 * sz_op_rope_fwd/bwd, their argument struct, codelets and perf models; the math is
 * kernels/rope.c. On the native bf16 path the backward's dinp (the gradient a matmul reads)
 * and dout may be bf16 (kernels/bf16_act.c); the forward is fp32 (it rotates a matmul's fp32
 * output in place for the attention). */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"

struct rope_args {
    int B, T, C, NH;
    float theta;
    int dinp_dt, dout_dt; /* backward: sz_k_dtype of dinp and dout; 0: fp32 */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct rope_args *a = sz_task_params(arg);
    if (sz_k_rope_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), a->B, a->T, a->C, a->NH, a->theta) != 0)
        sz_task_fail_nomem(arg, "rope: out of memory for the cos/sin table (T = %d)", a->T);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct rope_args *a = sz_task_params(arg);
    int set = sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0; /* a folded sz_op_zero of dinp */
    int rc = a->dinp_dt || a->dout_dt
                 ? sz_k_rope_bwd_mx_set(sz_task_ptr(b, arg, 0), a->dinp_dt, sz_task_ptr(b, arg, 1), a->dout_dt, a->B,
                                        a->T, a->C, a->NH, a->theta, set)
                 : sz_k_rope_bwd_set(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), a->B, a->T, a->C, a->NH, a->theta,
                                     set);
    if (rc != 0)
        sz_task_fail_nomem(arg, "rope_bwd: out of memory for the cos/sin table or a row (T = %d)", a->T);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct rope_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "rope_fwd", sz_cuda_rope_fwd(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), a->B,
                                                      a->T, a->C, a->NH, a->theta));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct rope_args *a = sz_task_params(arg);
    int set = sz_task_sets(arg, 0) ? SZ_K_SET_DINP : 0;
    sz_cuda_task_rc(arg, "rope_bwd", sz_cuda_rope_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->dinp_dt,
                                                         sz_task_ptr(b, arg, 1), a->dout_dt, a->B, a->T, a->C, a->NH,
                                                         a->theta, set));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_rope_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_rope_bwd"};
SZ_CODELET_CUDA(sz_cl_rope_fwd, fwd_cpu, fwd_cuda, "rope_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_rope_fwd, SZ_TASK_COMPUTE, 0, "rotary embedding of q, k in qkv");
SZ_CODELET_CUDA(sz_cl_rope_bwd, bwd_cpu, bwd_cuda, "rope_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_rope_bwd, SZ_TASK_COMPUTE, SZ_CL_CUDA_SETS | SZ_CL_NATIVE | SZ_CL_CUDA_BF16,
            "dqkv += rotated back dout");

static sz_status check(sz_unit *u, const char *op, int B, int T, int C, int NH, float theta)
{
    if (B < 1 || T < 1 || C < 1 || NH < 1 || C % NH || (C / NH) % 2 || !(theta > 0.0f))
        return sz_op_invalid(u, op, "B = %d, T = %d, C = %d, NH = %d, theta = %g: need B, T >= 1, C a multiple "
                             "of NH with an even head size C/NH, theta > 0", B, T, C, NH, theta);
    return SZ_OK;
}

/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status rope_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct rope_args *a = sz_record_params(r);
    return sz_op_rope_bwd(u, SZ_RG(1), SZ_RG(0), a->B, a->T, a->C, a->NH, a->theta);
}

sz_status sz_op_rope_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int B, int T, int C, int NH, float theta)
{
    sz_status st = check(u, "rope", B, T, C, NH, theta);
    if (st != SZ_OK)
        return st;
    struct rope_args a = {B, T, C, NH, theta, 0, 0};
    int64_t n = (int64_t)B * T * 3 * C;
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, n, "out", 0}, {inp, SZ_READ, SZ_DTYPE_F32, n, "inp", 0}};
    return sz_task_submit_diff(u, &sz_cl_rope_fwd, "rope", t, 2, &a, sizeof a, NULL, rope_fwd_grad);
}

sz_status sz_op_rope_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, int B, int T, int C, int NH, float theta)
{
    sz_status st = check(u, "rope_bwd", B, T, C, NH, theta);
    if (st != SZ_OK)
        return st;
    struct rope_args a = {B, T, C, NH, theta, sz_kdt(dinp), sz_kdt(dout)}; /* either may be bf16 */
    int64_t n = (int64_t)B * T * 3 * C;
    sz_task_tensor t[] = {{dinp, SZ_ACCUMULATE_OR_SET, sz_fb(dinp), n, "dinp", 0},
                          {dout, SZ_READ, sz_fb(dout), n, "dout", 0}};
    return sz_task_submit(u, &sz_cl_rope_bwd, "rope_bwd", t, 2, &a, sizeof a);
}
