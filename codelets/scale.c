/* codelets/scale.c — the `scale` codelet: x *= alpha on a float vector, CPU and CUDA side by side.
 * The CUDA kernel lives in scale.cu (compiled by nvcc when SZ_USE_CUDA is on). */
#include <stdint.h>
#include "sz_codelets.h"
#include "sz_cuda.h"

static void scale_cpu(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
    for (size_t i = 0; i < n; i++)
        x[i] *= alpha;
}

#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
static void scale_cuda(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    sz_cuda_scale_f32((float *)STARPU_VECTOR_GET_PTR(buffers[0]), STARPU_VECTOR_GET_NX(buffers[0]), alpha,
                      starpu_cuda_get_local_stream());
}
#endif

static struct starpu_perfmodel scale_model = {.type = STARPU_HISTORY_BASED, .symbol = "sz_scale"};

struct starpu_codelet sz_cl_scale = {
    .cpu_funcs = {scale_cpu},
#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
    .cuda_funcs = {scale_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .name = "scale",
    .model = &scale_model,
};
