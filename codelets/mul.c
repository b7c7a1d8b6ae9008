/* codelets/mul.c — the elementwise product out = a · b: the typed wrappers sz_op_mul_fwd/bwd,
 * their argument struct, codelets and perf models; the math is kernels/mul.c, and with bf16
 * operands (out; da, db and dout: the native bf16 path's) kernels/bf16_act.c. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_codelets.h"
#include "sz_cuda.h"

struct mul_args {
    int64_t n;
    int out_dt, da_dt, db_dt, dout_dt; /* sz_k_dtype of out (fwd), da, db and dout (bwd); 0: fp32 */
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    if (a->out_dt)
        sz_k_mul_fwd_mx(sz_task_ptr(b, arg, 0), a->out_dt, sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
    else
        sz_k_mul_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    if (a->da_dt || a->db_dt || a->dout_dt)
        sz_k_mul_bwd_mx(sz_task_ptr(b, arg, 0), a->da_dt, sz_task_ptr(b, arg, 1), a->db_dt, sz_task_ptr(b, arg, 2),
                        a->dout_dt, sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4), (size_t)a->n);
    else
        sz_k_mul_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3),
                     sz_task_ptr(b, arg, 4), (size_t)a->n);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "mul_fwd", sz_cuda_mul_fwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->out_dt,
                                                       sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "mul_bwd", sz_cuda_mul_bwd_mx(SZ_STREAM, sz_task_ptr(b, arg, 0), a->da_dt,
                                                       sz_task_ptr(b, arg, 1), a->db_dt, sz_task_ptr(b, arg, 2),
                                                       a->dout_dt, sz_task_ptr(b, arg, 3), sz_task_ptr(b, arg, 4),
                                                       (size_t)a->n));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_mul_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_mul_bwd"};
SZ_CODELET_CUDA(sz_cl_mul_fwd, fwd_cpu, fwd_cuda, "mul_fwd", fwd_model);
SZ_DESCRIBE(sz_cl_mul_fwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "out = a * b");
SZ_CODELET_CUDA(sz_cl_mul_bwd, bwd_cpu, bwd_cuda, "mul_bwd", bwd_model);
SZ_DESCRIBE(sz_cl_mul_bwd, SZ_TASK_COMPUTE, SZ_CL_NATIVE | SZ_CL_CUDA_BF16, "da += dout * b, db += dout * a");

/* the op's backward, for a unit whose backward is derived (include/starzero_starpu.h) */
static sz_status mul_fwd_grad(sz_unit *u, const sz_op_record *r)
{
    const struct mul_args *a = sz_record_params(r);
    return sz_op_mul_bwd(u, SZ_RG(1), SZ_RG(2), SZ_RG(0), SZ_RT(1), SZ_RT(2), a->n);
}

sz_status sz_op_mul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n)
{
    if (n < 1)
        return sz_op_invalid(u, "mul", "n = %lld: need n >= 1", (long long)n);
    struct mul_args p = {n, sz_kdt(out), 0, 0, 0}; /* out may be bf16 */
    sz_task_tensor t[] = {{out, SZ_WRITE, sz_fb(out), n, "out", 0},
                          {a, SZ_READ, SZ_DTYPE_F32, n, "a", 0},
                          {b, SZ_READ, SZ_DTYPE_F32, n, "b", 0}};
    return sz_task_submit_diff(u, &sz_cl_mul_fwd, "mul", t, 3, &p, sizeof p, NULL, mul_fwd_grad);
}

sz_status sz_op_mul_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, sz_tensor *a, sz_tensor *b,
                        int64_t n)
{
    if (n < 1)
        return sz_op_invalid(u, "mul_bwd", "n = %lld: need n >= 1", (long long)n);
    if (!da && !db)
        return sz_op_invalid(u, "mul_bwd", "neither da nor db given: nothing to compute");
    struct mul_args p = {n, 0, sz_kdt(da), sz_kdt(db), sz_kdt(dout)}; /* da, db, dout may be bf16 */
    sz_task_tensor t[] = {{da, SZ_ACCUMULATE, sz_fb(da), n, "da", 1},
                          {db, SZ_ACCUMULATE, sz_fb(db), n, "db", 1},
                          {dout, SZ_READ, sz_fb(dout), n, "dout", 0},
                          {a, SZ_READ, SZ_DTYPE_F32, n, "a", 0},
                          {b, SZ_READ, SZ_DTYPE_F32, n, "b", 0}};
    return sz_task_submit(u, &sz_cl_mul_bwd, "mul_bwd", t, 5, &p, sizeof p);
}
