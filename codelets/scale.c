/* codelets/scale.c — the `scale` codelet: x *= alpha on a float view, CPU and CUDA side by side.
 * The CUDA kernel lives in scale.cu (compiled by nvcc when SZ_USE_CUDA is on). */
#include <stdint.h>
#include "sz_codelets.h"
#include "sz_cuda.h"

static void scale_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    float *x = sz_tf(b, &a, 0);
    for (int64_t i = 0; i < a.numel[0]; i++)
        x[i] *= a.f[0];
}

#if defined(SZ_HAVE_CUDA) && defined(STARPU_USE_CUDA)
static void scale_cuda(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_cuda_scale_f32(sz_tf(b, &a, 0), (size_t)a.numel[0], a.f[0], starpu_cuda_get_local_stream());
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
