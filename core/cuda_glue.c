/* core/cuda_glue.c — helpers of the codelets' CUDA implementations (core/sz_cuda.h): an
 * entry point's error recorded as the task's failure, a CPU-only operand mix refused, token ids
 * checked from the device. Empty without CUDA. */
#include <stdlib.h>
#include "sz_core.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

#if SZ_WITH_CUDA
int sz_cuda_task_rc(const void *cl_arg, const char *op, int rc)
{
    if (!rc)
        return 0;
    if (rc >= 1000)
        sz_task_fail(cl_arg, "%s (CUDA): cuBLAS status %d", op, rc - 1000);
    else
        sz_task_fail(cl_arg, "%s (CUDA): %s", op, cudaGetErrorString((cudaError_t)rc));
    return 1;
}

int sz_cuda_task_wbf16(const void *cl_arg, const char *op, int wbf16)
{
    if (!wbf16)
        return 0;
    sz_task_fail(cl_arg, "%s: fp32 activations with bf16 weights have no CUDA implementation (CPU workers only)", op);
    return 1;
}

int sz_cuda_check_ids(const void *cl_arg, const char *role, const int32_t *dev_ids, int64_t n, int64_t limit)
{
    if (n <= 0)
        return 0;
    int32_t *h = malloc((size_t)n * sizeof *h);
    if (!h) {
        sz_task_fail_nomem(cl_arg, "out of memory (host copy of %lld ids)", (long long)n);
        return 1;
    }
    cudaStream_t s = starpu_cuda_get_local_stream();
    int rc = (int)cudaMemcpyAsync(h, dev_ids, (size_t)n * sizeof *h, cudaMemcpyDeviceToHost, s);
    if (!rc)
        rc = (int)cudaStreamSynchronize(s);
    int bad = rc ? sz_cuda_task_rc(cl_arg, role, rc) : sz_task_check_ids(cl_arg, role, h, n, limit);
    free(h);
    return bad;
}
#else
typedef int sz_cuda_glue_unused; /* ISO C: a translation unit is not empty */
#endif
