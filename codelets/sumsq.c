/* codelets/sumsq.c — squared L2 norm of a gradient view (tensor 0: the one-float result, written;
 * tensor 1: the view, fp32, bf16 or fp16), summed in double by sz_k_sumsq: the result never depends on
 * the thread count. Without clipping AdamW takes the norm itself in its own pass (codelets/adamw.c). */
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"
#include "sz_cuda.h"

static void sumsq_cpu(void *b[], void *arg)
{
    const sz_task_layout *l = sz_task_layout_of(arg);
    double s = sz_k_sumsq(sz_task_ptr(b, arg, 1), sz_kdt_of(l->dtype[1]), l->numel[1]);
    if (s == -1.0) {
        sz_task_fail_nomem(arg, "out of memory");
        return;
    }
    *(float *)sz_task_ptr(b, arg, 0) = (float)s;
}

#if SZ_WITH_CUDA
static void sumsq_cuda(void *b[], void *arg)
{
    const sz_task_layout *l = sz_task_layout_of(arg);
    sz_cuda_task_rc(arg, "sumsq", sz_cuda_sumsq(SZ_STREAM, sz_task_ptr(b, arg, 0), sz_task_ptr(b, arg, 1),
                                                sz_kdt_of(l->dtype[1]), l->numel[1], 0));
}
#endif

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
SZ_CODELET_CUDA(sz_cl_sumsq, sumsq_cpu, sumsq_cuda, "sumsq", sumsq_model);
SZ_DESCRIBE(sz_cl_sumsq, SZ_TASK_COMPUTE, SZ_CL_CUDA_F16, "out = sum x^2 (double)");

sz_status sz_submit_sumsq(sz_unit *u, const sz_tensor *out, const sz_tensor *x, const char *name)
{
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, 1, "out", 0}, {x, SZ_READ, SZ_DTYPE_ANY, -1, "x", 0}};
    return sz_task_submit_as(u, name, "sumsq", &sz_cl_sumsq, t, 2, NULL, 0); /* no parameters */
}
