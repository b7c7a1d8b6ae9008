/* codelets/scale.c — the `scale` op: x *= alpha on a float view, CPU and CUDA side by side (the
 * CUDA kernel is sz_cuda_scale of kernels/cuda/util.cu, compiled by nvcc when SZ_USE_CUDA is on;
 * its launch error becomes the task's failure). Used by the tests of the runtime and the CUDA path. */
#include <stdint.h>
#include "sz_codelets.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

struct scale_args {
    int64_t n;
    float alpha;
};

static void scale_cpu(void *b[], void *arg)
{
    const struct scale_args *a = sz_task_params(arg);
    float *x = sz_task_ptr(b, arg, 0);
    for (int64_t i = 0; i < a->n; i++)
        x[i] *= a->alpha;
}

#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
static void scale_cuda(void *b[], void *arg)
{
    const struct scale_args *a = sz_task_params(arg);
    sz_cuda_task_rc(arg, "scale", sz_cuda_scale(starpu_cuda_get_local_stream(), sz_task_ptr(b, arg, 0), (size_t)a->n,
                                                a->alpha)); /* (the launch's error recorded) */
}
#endif

SZ_PERFMODEL(scale_model, "sz_scale");
struct starpu_codelet sz_cl_scale = {
    .cpu_funcs = {scale_cpu},
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
    .cuda_funcs = {scale_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "scale",
    .model = &scale_model,
};
SZ_DESCRIBE(sz_cl_scale, SZ_TASK_COMPUTE, 0, "x (RW) *= alpha");

sz_status sz_submit_scale(const sz_tensor *x, float alpha, const char *name, uint32_t where)
{
    struct scale_args a = {x ? x->numel : 0, alpha};
    sz_task_tensor t[] = {{x, SZ_READ_WRITE, SZ_DTYPE_F32, -1, "x", 0}};
    return sz_task_submit_where(NULL, 0xffff, name, "scale", &sz_cl_scale, t, 1, &a, sizeof a, where);
}
