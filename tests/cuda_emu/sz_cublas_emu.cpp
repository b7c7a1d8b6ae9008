/* tests/cuda_emu/sz_cublas_emu.cpp — the cuBLAS of the host CUDA emulation (sz_cuda_emu.cpp): the
 * handle calls and cublasGemmEx (column-major; its argument checks, at the call; operands inside
 * their device allocations; run on the handle's stream; fp32 products summed in k order, bf16
 * stored rounded to nearest even; C not read at beta 0). Linked into the kernel test, and built as
 * libcublas for the engine's emulated build. */
#include "sz_cuda_emu.h"
#include "sz_cuda_emu_rt.h"

extern "C" {

struct cublasContext {
    cudaStream_t s;
    cublasPointerMode_t pm;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = new cublasContext{nullptr, CUBLAS_POINTER_MODE_HOST};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->s = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t m)
{
    h->pm = m;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

static float mat_get(const void *p, cudaDataType t, size_t i)
{
    return t == CUDA_R_16BF ? __bfloat162float(((const __nv_bfloat16 *)p)[i]) : ((const float *)p)[i];
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType At, int lda, const void *B, cudaDataType Bt,
                            int ldb, const void *beta, void *C, cudaDataType Ct, int ldc, cublasComputeType_t ct,
                            cublasGemmAlgo_t)
{
    sz_emu_device open;
    sz_emu_set_site("cublasGemmEx");
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m; /* A as stored: ar x ac */
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    bool types = ct == CUBLAS_COMPUTE_32F && At == Bt && (At == CUDA_R_32F || At == CUDA_R_16BF) &&
                 (Ct == CUDA_R_32F || (Ct == CUDA_R_16BF && At == CUDA_R_16BF));
    size_t ea = At == CUDA_R_16BF ? 2 : 4, ec = Ct == CUDA_R_16BF ? 2 : 4;
    if (!h || h->pm != CUBLAS_POINTER_MODE_HOST) {
        sz_emu_error("no handle, or device pointer mode (not emulated)");
        st = CUBLAS_STATUS_NOT_INITIALIZED;
    } else if (m < 0 || n < 0 || k < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
               ldc < (m > 1 ? m : 1) || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
               (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) {
        sz_emu_error("invalid value: m %d n %d k %d lda %d ldb %d ldc %d", m, n, k, lda, ldb, ldc);
        st = CUBLAS_STATUS_INVALID_VALUE;
    } else if (!types) {
        sz_emu_error("type combination A %d B %d C %d compute %d not supported", (int)At, (int)Bt, (int)Ct, (int)ct);
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    } else if (m && n &&
               ((k && (!sz_emu_in_device(A, ((size_t)(ac - 1) * lda + ar) * ea) ||
                       !sz_emu_in_device(B, ((size_t)(bc - 1) * ldb + br) * ea))) ||
                !sz_emu_in_device(C, ((size_t)(n - 1) * ldc + m) * ec))) {
        sz_emu_error("an operand outside its allocation (m %d n %d k %d)", m, n, k);
        st = CUBLAS_STATUS_INVALID_VALUE;
    } else {
        float al = *(const float *)alpha, be = *(const float *)beta; /* host pointer mode: read now */
        sz_emu_enqueue(h->s, [=] {
            sz_emu_device open;
            sz_emu_set_site("cublasGemmEx");
            bool ends = sz_emu_ends(); /* the first and the last column only */
            for (int j = 0; j < n; j = ends && j == 0 && n > 1 ? n - 1 : j + 1)
                for (int i = 0; i < m; i++) {
                    float s = 0.0f;
                    for (int l = 0; l < k; l++) {
                        float a = mat_get(A, At, ta == CUBLAS_OP_N ? (size_t)l * lda + i : (size_t)i * lda + l);
                        float b = mat_get(B, Bt, tb == CUBLAS_OP_N ? (size_t)j * ldb + l : (size_t)l * ldb + j);
                        s += a * b;
                    }
                    size_t ci = (size_t)j * ldc + i;
                    float r = al * s;
                    if (be != 0.0f)
                        r += be * mat_get(C, Ct, ci); /* C not read when beta is 0 */
                    if (Ct == CUDA_R_16BF)
                        ((__nv_bfloat16 *)C)[ci] = __float2bfloat16_rn(r);
                    else
                        ((float *)C)[ci] = r;
                }
            sz_emu_set_site(nullptr);
        });
    }
    sz_emu_set_site(nullptr);
    return st;
}

} /* extern "C" */
