/* codelets/sumsq.c — squared L2 norm of a gradient view (tensor 0: the one-float result, written;
 * tensor 1: the view, fp32 or bf16), summed in double by sz_k_sumsq: the result never depends on
 * the thread count. Without clipping AdamW takes the norm itself in its own pass (codelets/adamw.c). */
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_kernels.h"

static void sumsq_cpu(void *b[], void *arg)
{
    const sz_task_layout *l = sz_task_layout_of(arg);
    double s = sz_k_sumsq(sz_task_ptr(b, arg, 1), l->dtype[1] == SZ_DTYPE_BF16, l->numel[1]);
    if (s == -1.0) {
        sz_task_fail(arg, "out of memory");
        return;
    }
    *(float *)sz_task_ptr(b, arg, 0) = (float)s;
}

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
SZ_CODELET(sz_cl_sumsq, sumsq_cpu, "sumsq", sumsq_model);

sz_status sz_submit_sumsq(struct sz_unit *u, const sz_tensor *out, const sz_tensor *x, const char *name)
{
    sz_task_tensor t[] = {{out, SZ_WRITE, SZ_DTYPE_F32, 1, "out", 0}, {x, SZ_READ, SZ_DTYPE_ANY, -1, "x", 0}};
    return sz_task_submit_named(u->model, u->index, name, "sumsq", &sz_cl_sumsq, t, 2, NULL, 0); /* no parameters */
}
