/* codelets/mul.c — the elementwise product out = a · b: the typed wrappers sz_op_mul_fwd/bwd,
 * their argument struct, codelets and perf models; the math is codelets/kernels/mul.c. */
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_tasks.h"
#include "sz_cuda.h"

struct mul_args {
    int64_t n;
};

static void fwd_cpu(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    sz_k_mul_fwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), (size_t)a->n);
}

static void bwd_cpu(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    sz_k_mul_bwd(sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1), sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3),
                 sz_task_ptr(b, arg, 4), (size_t)a->n);
}

#if SZ_WITH_CUDA
static void fwd_cuda(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "mul_fwd", sz_cuda_mul_fwd(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                                    sz_task_ptr(b, arg, 2), (size_t)a->n));
}

static void bwd_cuda(void *b[], void *arg)
{
    const struct mul_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "mul_bwd", sz_cuda_mul_bwd(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                                    sz_task_ptr(b, arg, 2), sz_task_ptr(b, arg, 3),
                                                    sz_task_ptr(b, arg, 4), (size_t)a->n));
}
#endif

static struct starpu_perfmodel fwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_mul_fwd"};
static struct starpu_perfmodel bwd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_mul_bwd"};
SZ_CODELET_CUDA(sz_cl_mul_fwd, fwd_cpu, fwd_cuda, "mul_fwd", fwd_model);
SZ_CODELET_CUDA(sz_cl_mul_bwd, bwd_cpu, bwd_cuda, "mul_bwd", bwd_model);

sz_status sz_op_mul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n)
{
    if (n < 1)
        return sz_op_invalid(u, "mul", "n = %lld: need n >= 1", (long long)n);
    struct mul_args p = {n};
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, n, "out", 0},
                          {a, SZ_READ, SZ_DTYPE_F32, n, "a", 0},
                          {b, SZ_READ, SZ_DTYPE_F32, n, "b", 0}};
    return sz_task_submit(u, &sz_cl_mul_fwd, "mul", t, 3, &p, sizeof p);
}

sz_status sz_op_mul_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, sz_tensor *a, sz_tensor *b,
                        int64_t n)
{
    if (n < 1)
        return sz_op_invalid(u, "mul_bwd", "n = %lld: need n >= 1", (long long)n);
    if (!da && !db)
        return sz_op_invalid(u, "mul_bwd", "neither da nor db given: nothing to compute");
    struct mul_args p = {n};
    sz_task_tensor t[] = {{da, SZ_ACCUMULATE, SZ_DTYPE_F32, n, "da", 1},
                          {db, SZ_ACCUMULATE, SZ_DTYPE_F32, n, "db", 1},
                          {dout, SZ_READ, SZ_DTYPE_F32, n, "dout", 0},
                          {a, SZ_READ, SZ_DTYPE_F32, n, "a", 0},
                          {b, SZ_READ, SZ_DTYPE_F32, n, "b", 0}};
    return sz_task_submit(u, &sz_cl_mul_bwd, "mul_bwd", t, 5, &p, sizeof p);
}
