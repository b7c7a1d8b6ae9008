/* kernels/cuda/matmul.cu — CUDA twin of kernels/matmul.c and matmul_bf16.c: the linear
 * layer out[N,OC] = inp[N,C] . w[OC,C]^T + b through cublasGemmEx, row-major buffers seen as their
 * column-major transposes (llm.c's mapping). fp32: CUBLAS_COMPUTE_32F (true fp32, no TF32);
 * bf16 operands: CUBLAS_COMPUTE_32F with CUDA_R_16BF inputs (tensor cores), fp32 or bf16
 * destinations. A bias is broadcast into the destination first and the product added with
 * beta = 1, so a bf16 destination is rounded once, as the CPU's sum post-op. The bias gradient is
 * a column sum in a fixed order (sz_cuda_colsum.cuh: chunks of rows, then the chunks in order;
 * the CPU's sz_mm_colsum to rounding). cuBLAS is deterministic in its default (atomics off) mode. A folded zero
 * (set) writes dinp with beta = 0 (not read). The fused matmul + GELU pair (matmul_gelu.c) is a
 * GEMM and then an elementwise GELU epilogue (forward: gout from out; backward: in place on the
 * product written into dinp). */
#include "sz_cuda_colsum.cuh"

static int sz_cublas_rc(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS ? 0 : 1000 + (int)st; }

/* out[n, o] = bias[o] (dt of out / bias each fp32 or bf16). */
__global__ static void bias_fill_k(void *out, int out_dt, const void *bias, int bias_dt, int N, int OC)
{
    size_t n = (size_t)N * OC;
    SZ_GRID_STRIDE(i, n) {
        size_t o = i % OC;
        if (out_dt && bias_dt)
            ((uint16_t *)out)[i] = ((const uint16_t *)bias)[o];
        else
            sz_d_st(out, out_dt, i, sz_d_ld(bias, bias_dt, o));
    }
}

/* The bias gradient's term: dout[n, o] (fp32 or bf16). */
struct sz_bias_term {
    const void *dout;
    int dt, OC;
    __device__ void operator()(int n, int o, float *t) const { t[0] = sz_d_ld(dout, dt, (size_t)n * OC + o); }
};

static cudaDataType sz_cu_dt(int dt) { return dt == SZ_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* One column-major gemm C[m,n] = alpha op(A) op(B) + beta C, inputs of type in_dt, C of c_dt. */
static int sz_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const void *A, int lda, const void *B, int ldb, float beta, void *Cm, int ldc, int in_dt,
                   int c_dt)
{
    const float alpha = 1.0f;
    if (m <= 0 || n <= 0)
        return 0;
    if (k <= 0 && beta != 0.0f) /* an empty product adds nothing */
        return 0;
    return sz_cublas_rc(cublasGemmEx(h, ta, tb, m, n, k, &alpha, A, sz_cu_dt(in_dt), lda, B, sz_cu_dt(in_dt), ldb,
                                     &beta, Cm, sz_cu_dt(c_dt), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static int sz_prepare(cublasHandle_t h, cudaStream_t s)
{
    int rc = sz_cublas_rc(cublasSetStream(h, s));
    if (!rc)
        rc = sz_cublas_rc(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    if (!rc)
        rc = sz_cublas_rc(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)); /* no TF32 for fp32 */
    return rc;
}

static int sz_mm_fwd(cublasHandle_t h, cudaStream_t s, void *out, int out_dt, const void *inp, const void *w,
                     const void *bias, int in_dt, int N, int C, int OC)
{
    int rc = sz_prepare(h, s);
    if (rc || N <= 0 || OC <= 0)
        return rc;
    float beta = 0.0f;
    if (bias) {
        bias_fill_k<<<sz_blocks((size_t)N * OC, 256), 256, 0, s>>>(out, out_dt, bias, in_dt, N, OC);
        if ((rc = sz_launch_rc()))
            return rc;
        beta = 1.0f;
    } else if (C <= 0) {
        return (int)cudaMemsetAsync(out, 0, (size_t)N * OC * (out_dt ? 2 : 4), s);
    }
    /* outT[OC,N] = W'^T[OC,C] . inpT[C,N], W' = w seen column-major as [C,OC] */
    return sz_gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w, C, inp, C, beta, out, OC, in_dt, out_dt);
}

/* set & SZ_CUDA_SET_A: dinp written (beta = 0: not read), not accumulated; SZ_CUDA_SET_DW,
 * SZ_CUDA_SET_DB: dw, dbias likewise (the step's first writer of the parameters' gradients). */
static int sz_mm_bwd(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dw, void *dbias,
                     int dparam_dt, const void *dout, const void *inp, const void *w, int in_dt, int N, int C,
                     int OC, int set)
{
    int rc = sz_prepare(h, s);
    if (rc)
        return rc;
    /* dinpT[C,N] (+)= W'[C,OC] . doutT[OC,N] */
    if (dinp && (set & SZ_CUDA_SET_A) && OC <= 0 && N > 0 && C > 0) {
        if ((rc = (int)cudaMemsetAsync(dinp, 0, (size_t)N * C * (dinp_dt ? 2 : 4), s)))
            return rc;
    } else if (dinp && (rc = sz_gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, w, C, dout, OC,
                                     (set & SZ_CUDA_SET_A) ? 0.0f : 1.0f, dinp, C, in_dt, dinp_dt))) {
        return rc;
    }
    /* dwT[C,OC] (+)= inpT[C,N] . (doutT[OC,N])^T; set & SZ_CUDA_SET_DW: beta = 0 (not read) */
    if (dw && (set & SZ_CUDA_SET_DW) && N <= 0 && OC > 0 && C > 0) {
        if ((rc = (int)cudaMemsetAsync(dw, 0, (size_t)OC * C * (dparam_dt ? 2 : 4), s)))
            return rc;
    } else if (dw && (rc = sz_gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC,
                                   (set & SZ_CUDA_SET_DW) ? 0.0f : 1.0f, dw, C, in_dt, dparam_dt))) {
        return rc;
    }
    if (dbias && OC > 0) { /* set & SZ_CUDA_SET_DB: the column sums start at 0 */
        sz_bias_term term = {dout, in_dt, OC};
        rc = sz_colsum<1>(s, dbias, NULL, dparam_dt, term, N, OC, (set & SZ_CUDA_SET_DB) ? SZ_CS_FRESH0 : 0);
    }
    return rc;
}

/* gout[i] = gelu(out[i]) (gout fp32 or bf16: rounded once), kernels/matmul_gelu.c's forward tile. */
template <typename TG> __global__ static void gelu_epi_fwd_k(TG *gout, const float *out, size_t n)
{
    SZ_GRID_STRIDE(i, n) sz_mx_put(gout, i, sz_d_gelu(out[i]));
}

/* d[i] = 0 + gelu'(pre[i]) * d[i] in d's type, kernels/matmul_gelu.c's backward tile (the product
 * already in d, rounded to d's type: the CPU's scratch of dinp's type). */
template <typename TD> __global__ static void gelu_epi_bwd_k(TD *d, const float *pre, size_t n)
{
    SZ_GRID_STRIDE(i, n) {
        float acc = 0.0f;
        acc += sz_d_gelu_grad(pre[i]) * sz_mx_get(d, i);
        sz_mx_put(d, i, acc);
    }
}

extern "C" int sz_cuda_matmul_fwd(cublasHandle_t h, cudaStream_t s, float *out, const float *inp,
                                  const float *weight, const float *bias, int N, int C, int OC)
{
    return sz_mm_fwd(h, s, out, SZ_CUDA_F32, inp, weight, bias, SZ_CUDA_F32, N, C, OC);
}

extern "C" int sz_cuda_matmul_bwd(cublasHandle_t h, cudaStream_t s, float *dinp, float *dweight, float *dbias,
                                  const float *dout, const float *inp, const float *weight, int N, int C, int OC)
{
    return sz_mm_bwd(h, s, dinp, SZ_CUDA_F32, dweight, dbias, SZ_CUDA_F32, dout, inp, weight, SZ_CUDA_F32, N, C, OC,
                     0);
}

extern "C" int sz_cuda_matmul_fwd_bf16(cublasHandle_t h, cudaStream_t s, void *out, int out_dt,
                                       const uint16_t *inp, const uint16_t *weight, const uint16_t *bias, int N,
                                       int C, int OC)
{
    return sz_mm_fwd(h, s, out, out_dt, inp, weight, bias, SZ_CUDA_BF16, N, C, OC);
}

extern "C" int sz_cuda_matmul_bwd_bf16(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight,
                                       void *dbias, int dparam_dt, const uint16_t *dout, const uint16_t *inp,
                                       const uint16_t *weight, int N, int C, int OC)
{
    return sz_mm_bwd(h, s, dinp, dinp_dt, dweight, dbias, dparam_dt, dout, inp, weight, SZ_CUDA_BF16, N, C, OC, 0);
}

/* ---- any operand types (the codelets' entry points) ---- */

/* The types the cuBLAS calls take: inputs fp32 or bf16 (all of one type), fp32 destinations for
 * fp32 inputs. Anything else is refused (cudaErrorInvalidValue) before any work. */
static int sz_mm_types_ok(int in_dt, int d1, int d2)
{
    int ok = (in_dt == SZ_CUDA_F32 || in_dt == SZ_CUDA_BF16) && (d1 == SZ_CUDA_F32 || d1 == SZ_CUDA_BF16) &&
             (d2 == SZ_CUDA_F32 || d2 == SZ_CUDA_BF16);
    if (in_dt == SZ_CUDA_F32)
        ok = ok && d1 == SZ_CUDA_F32 && d2 == SZ_CUDA_F32;
    return ok;
}

extern "C" int sz_cuda_matmul_fwd_any(cublasHandle_t h, cudaStream_t s, void *out, int out_dt, const void *inp,
                                      const void *weight, const void *bias, int in_dt, int N, int C, int OC)
{
    if (!sz_mm_types_ok(in_dt, out_dt, SZ_CUDA_F32))
        return (int)cudaErrorInvalidValue;
    return sz_mm_fwd(h, s, out, out_dt, inp, weight, bias, in_dt, N, C, OC);
}

extern "C" int sz_cuda_matmul_bwd_any(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight,
                                      void *dbias, int dparam_dt, const void *dout, const void *inp,
                                      const void *weight, int in_dt, int N, int C, int OC, int set)
{
    if (!sz_mm_types_ok(in_dt, dinp_dt, dparam_dt))
        return (int)cudaErrorInvalidValue;
    return sz_mm_bwd(h, s, dinp, dinp_dt, dweight, dbias, dparam_dt, dout, inp, weight, in_dt, N, C, OC, set);
}

extern "C" int sz_cuda_matmul_gelu_fwd(cublasHandle_t h, cudaStream_t s, float *out, void *gout, int gout_dt,
                                       const void *inp, const void *weight, const void *bias, int in_dt, int N,
                                       int C, int OC)
{
    if (!sz_mm_types_ok(in_dt, SZ_CUDA_F32, SZ_CUDA_F32) || (gout_dt != SZ_CUDA_F32 && gout_dt != SZ_CUDA_BF16))
        return (int)cudaErrorInvalidValue;
    int rc = sz_mm_fwd(h, s, out, SZ_CUDA_F32, inp, weight, bias, in_dt, N, C, OC);
    size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(OC > 0 ? OC : 0);
    if (rc || !n)
        return rc;
    if (gout_dt == SZ_CUDA_BF16)
        gelu_epi_fwd_k<uint16_t><<<sz_blocks(n, 256), 256, 0, s>>>((uint16_t *)gout, out, n);
    else
        gelu_epi_fwd_k<float><<<sz_blocks(n, 256), 256, 0, s>>>((float *)gout, out, n);
    return sz_launch_rc();
}

extern "C" int sz_cuda_gelu_matmul_bwd(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight,
                                       void *dbias, int dparam_dt, const void *dout, const void *inp,
                                       const void *weight, const float *pre, int in_dt, int N, int C, int OC)
{
    return sz_cuda_gelu_matmul_bwd_set(h, s, dinp, dinp_dt, dweight, dbias, dparam_dt, dout, inp, weight, pre, in_dt,
                                       N, C, OC, 0);
}

extern "C" int sz_cuda_gelu_matmul_bwd_set(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt,
                                           void *dweight, void *dbias, int dparam_dt, const void *dout,
                                           const void *inp, const void *weight, const float *pre, int in_dt, int N,
                                           int C, int OC, int set)
{
    if (!sz_mm_types_ok(in_dt, dinp_dt, dparam_dt))
        return (int)cudaErrorInvalidValue;
    /* the product written into dinp (its type), then GELU's backward in place */
    int rc = sz_mm_bwd(h, s, dinp, dinp_dt, NULL, NULL, dparam_dt, dout, inp, weight, in_dt, N, C, OC, SZ_CUDA_SET_A);
    size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
    if (rc)
        return rc;
    if (dinp && n) {
        if (dinp_dt == SZ_CUDA_BF16)
            gelu_epi_bwd_k<uint16_t><<<sz_blocks(n, 256), 256, 0, s>>>((uint16_t *)dinp, pre, n);
        else
            gelu_epi_bwd_k<float><<<sz_blocks(n, 256), 256, 0, s>>>((float *)dinp, pre, n);
        if ((rc = sz_launch_rc()))
            return rc;
    }
    if (!dweight && !dbias)
        return 0;
    return sz_mm_bwd(h, s, NULL, dinp_dt, dweight, dbias, dparam_dt, dout, inp, weight, in_dt, N, C, OC,
                     set & (SZ_CUDA_SET_DW | SZ_CUDA_SET_DB));
}
