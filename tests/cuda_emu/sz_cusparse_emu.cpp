/* tests/cuda_emu/sz_cusparse_emu.cpp — the three cuSPARSE calls StarPU's CUDA workers make at start
 * (a handle per worker and its stream), for the engine's emulated build; StarZeRO runs no sparse
 * operation, so any other cuSPARSE call is missing at link time, which says so. */
#include <cusparse.h>
#include <stdlib.h>

extern "C" {
cusparseStatus_t cusparseCreate(cusparseHandle_t *h)
{
    *h = (cusparseHandle_t)malloc(1);
    return *h ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_ALLOC_FAILED;
}
cusparseStatus_t cusparseDestroy(cusparseHandle_t h)
{
    free((void *)h);
    return CUSPARSE_STATUS_SUCCESS;
}
cusparseStatus_t cusparseSetStream(cusparseHandle_t, cudaStream_t) { return CUSPARSE_STATUS_SUCCESS; }
}
