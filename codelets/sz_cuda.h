/* codelets/sz_cuda.h — plain C entry points of the CUDA kernels in the codelets/ .cu files (launchers that
 * enqueue on a given stream). Only declared when the library is built with SZ_USE_CUDA. */
#ifndef SZ_CUDA_H
#define SZ_CUDA_H
#ifdef SZ_HAVE_CUDA
#include <stddef.h>
#include <cuda_runtime_api.h>
#ifdef __cplusplus
extern "C" {
#endif
void sz_cuda_scale_f32(float *x, size_t n, float alpha, cudaStream_t stream);
#ifdef __cplusplus
}
#endif
#endif
#endif
