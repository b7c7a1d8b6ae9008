/* core/sz_cuda.h — what the codelets' CUDA implementations share. With SZ_HAVE_CUDA (the
 * library built with nvcc) and a StarPU built with CUDA, SZ_WITH_CUDA is 1 and a codelet gets its
 * CUDA function through SZ_CODELET_CUDA: it runs on its CUDA worker's stream
 * (starpu_cuda_get_local_stream(), STARPU_CUDA_ASYNC: StarPU waits for the stream, not the
 * function), cuBLAS through the worker's handle (starpu_cublas_get_local_handle(), initialised by
 * sz_context_init). The kernels are the entry points of kernels/cuda/sz_cuda_kernels.h.
 * Without CUDA, SZ_CODELET_CUDA is SZ_CODELET (CPU only) and the CUDA functions are not compiled. */
#ifndef SZ_CUDA_H
#define SZ_CUDA_H
#include "sz_core.h"
#include "sz_runtime.h" /* SZ_WITH_CUDA */

#if SZ_WITH_CUDA
#include <stddef.h>
#include <cuda_runtime_api.h>
#include <starpu_cublas_v2.h>
#include "sz_cuda_kernels.h"
#ifdef __cplusplus
extern "C" {
#endif
/* In a CUDA implementation: a nonzero entry-point result recorded as the task's failure (the
 * step then returns an error naming the task and the CUDA error). 1 when it failed. */
int sz_cuda_task_rc(const void *cl_arg, const char *op, int rc);
/* In a CUDA implementation of a linear op: fp32 activations with bf16 weights (wbf16) are submitted
 * to CPU workers only (sz_task_submit_cpu); should such a task reach a CUDA worker, its failure is
 * recorded here. 1 when wbf16. */
int sz_cuda_task_wbf16(const void *cl_arg, const char *op, int wbf16);
/* In a CUDA implementation: copies n int32 ids from the device (synchronously on the worker's
 * stream) and checks them as sz_task_check_ids does; 1 (failure recorded) when one is outside
 * [0, limit) or the copy failed. */
int sz_cuda_check_ids(const void *cl_arg, const char *role, const int32_t *dev_ids, int64_t n, int64_t limit);
#ifdef __cplusplus
}
#endif
#define SZ_CODELET_CUDA(var, fn, cfn, nm, pm)                                                             \
    struct starpu_codelet var = {.cpu_funcs = {fn}, .cuda_funcs = {cfn}, .cuda_flags = {STARPU_CUDA_ASYNC}, \
                                 .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = nm, .model = &pm}
#define SZ_STATIC_CODELET_CUDA(var, fn, cfn, nm, pm)                                                             \
    static struct starpu_codelet var = {.cpu_funcs = {fn}, .cuda_funcs = {cfn}, .cuda_flags = {STARPU_CUDA_ASYNC}, \
                                        .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = nm, .model = &pm}
#define SZ_STREAM starpu_cuda_get_local_stream()
#else
#define SZ_CODELET_CUDA(var, fn, cfn, nm, pm) SZ_CODELET(var, fn, nm, pm)
#define SZ_STATIC_CODELET_CUDA(var, fn, cfn, nm, pm) \
    static struct starpu_codelet var = {.cpu_funcs = {fn}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = nm, .model = &pm}
#endif
#endif
