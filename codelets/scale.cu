/* codelets/scale.cu — CUDA kernel of the `scale` codelet (x *= alpha), launched on the StarPU
 * worker's stream by codelets/scale.c. */
#include "sz_cuda.h"

__global__ static void scale_kernel(float *x, size_t n, float alpha)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= alpha;
}

extern "C" void sz_cuda_scale_f32(float *x, size_t n, float alpha, cudaStream_t stream)
{
    const unsigned threads = 256;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    if (blocks)
        scale_kernel<<<blocks, threads, 0, stream>>>(x, n, alpha);
}
