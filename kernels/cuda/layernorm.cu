/* kernels/cuda/layernorm.cu — CUDA twins of kernels/layernorm.c (LayerNorm, eps 1e-5,
 * biased variance, mean and rstd saved), of the LLaMA-style RMSNorm (kernels/rmsnorm.c), of their
 * fusions with the residual add before them, and of the native bf16 path's variants of all of
 * these (kernels/bf16_act.c: out / dout / db and the parameters fp32 or bf16, fp32 math).
 * One warp per row: each lane sums its columns in order, then a fixed butterfly tree. The weight
 * and bias gradients sum over rows in a fixed order (sz_cuda_colsum.cuh: chunks of rows, then the
 * chunks in order onto the current value; the CPU's row-ordered sums to rounding).
 * Kernels are templated on the operand types (float, or uint16_t = bf16: sz_mx_get / sz_mx_put /
 * sz_mx_acc of sz_cuda_mx.cuh); the all-fp32 instantiations are the fp32 entry points. */
#include <math.h>
#include "sz_cuda_colsum.cuh"

#define SZ_ROWS_PER_BLOCK 4 /* warps per block, one row each */

/* The row r (offset) a norm reads: a's, or with res the residual sum res = a + b written first
 * (res may alias a or b: each lane reads then writes its own elements, the ones it reads later). */
__device__ static inline const float *sz_norm_input(float *res, const float *a, const float *b, size_t r, int C,
                                                    int lane)
{
    if (!res)
        return a + r;
    for (int i = lane; i < C; i += 32)
        res[r + i] = a[r + i] + b[r + i];
    return res + r;
}

/* ---- layernorm ---- */

/* res NULL: layernorm(a); else res = a + b (res may alias a or b: each lane reads then writes its
 * own elements) and layernorm(res). out of type TO, weight and bias (NULL: none) of type TP. */
template <typename TO, typename TP>
__global__ static void layernorm_fwd_k(float *res, TO *out, float *mean, float *rstd, const float *a, const float *b,
                                       const TP *w, const TP *bias, int N, int C)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    size_t r = (size_t)n * C;
    const float *x = sz_norm_input(res, a, b, r, C, lane);
    TO *o = out + r;
    float sm = 0.0f;
    for (int i = lane; i < C; i += 32)
        sm += x[i];
    float m = sz_warp_sum(sm) / C;
    float sv = 0.0f;
    for (int i = lane; i < C; i += 32)
        sv += (x[i] - m) * (x[i] - m);
    float v = sz_warp_sum(sv) / C;
    float s = 1.0f / sqrtf(v + 1e-5f);
    if (bias)
        for (int i = lane; i < C; i += 32)
            sz_mx_put(o, i, (s * (x[i] - m)) * sz_mx_get(w, i) + sz_mx_get(bias, i));
    else
        for (int i = lane; i < C; i += 32)
            sz_mx_put(o, i, (s * (x[i] - m)) * sz_mx_get(w, i));
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = s;
    }
}

/* Column i of row r's input gradient v, stored as the backward kernels below do: without da, dinp
 * (di: its row) += v (sa: = v); with da (the fused residual backward, di is dres, which always
 * accumulates): dres += v, then da (+)= dres, db (+)= dres (sa, sb: written). */
template <typename TB>
__device__ static inline void sz_norm_grad_put(float *di, float *da, TB *db, size_t r, int i, float v, int sa, int sb)
{
    if (!da) {
        if (sa)
            di[i] = v;
        else
            di[i] += v;
        return;
    }
    di[i] += v;
    float dr = di[i];
    if (sa)
        da[r + i] = dr;
    else
        da[r + i] += dr;
    if (sb)
        sz_mx_put(db, r + i, dr);
    else
        sz_mx_acc(db, r + i, dr, 0);
}

/* The input gradient of row n: without da, dinp += it (set & SZ_CUDA_SET_A: dinp = it); with da
 * (the fused residual backward; dinp is dres, which always accumulates): dres += it, then
 * da (+)= dres, db (+)= dres (set bits A, B: written). dout of type TD, weight TP, db TB. */
template <typename TD, typename TP, typename TB>
__global__ static void layernorm_bwd_dinp_k(float *dinp, float *da, TB *db, const TD *dout, const float *inp,
                                            const TP *w, const float *mean, const float *rstd, int N, int C, int set)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    size_t r = (size_t)n * C;
    const float *x = inp + r;
    const TD *d = dout + r;
    float *di = dinp + r;
    float m = mean[n], s = rstd[n], a = 0.0f, bsum = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float dn = sz_mx_get(w, i) * sz_mx_get(d, i);
        a += dn;
        bsum += dn * ((x[i] - m) * s);
    }
    float dnorm_mean = sz_warp_sum(a) / C, dnorm_norm_mean = sz_warp_sum(bsum) / C;
    int sa = set & SZ_CUDA_SET_A, sb = set & SZ_CUDA_SET_B;
    for (int i = lane; i < C; i += 32) {
        float norm_i = (x[i] - m) * s;
        float dval = sz_mx_get(w, i) * sz_mx_get(d, i) - dnorm_mean - norm_i * dnorm_norm_mean;
        sz_norm_grad_put(di, da, db, r, i, dval * s, sa, sb);
    }
}

/* The parameter gradients' terms of row n, column c: LayerNorm's dweight ((x - mean) * rstd) * dout
 * and dbias dout; RMSNorm's dweight (x * rstd) * dout. dout of type TD. */
template <typename TD> struct sz_ln_param_term {
    const TD *dout;
    const float *inp, *mean, *rstd;
    int C;
    __device__ void operator()(int n, int c, float *t) const
    {
        size_t e = (size_t)n * C + c;
        float d = sz_mx_get(dout, e);
        t[0] = ((inp[e] - mean[n]) * rstd[n]) * d;
        t[1] = d;
    }
};
template <typename TD> struct sz_rms_param_term {
    const TD *dout;
    const float *inp, *rstd;
    int C;
    __device__ void operator()(int n, int c, float *t) const
    {
        size_t e = (size_t)n * C + c;
        t[0] = (inp[e] * rstd[n]) * sz_mx_get(dout, e);
    }
};

/* ---- RMSNorm ---- */

template <typename TO, typename TP>
__global__ static void rmsnorm_fwd_k(float *res, TO *out, float *rstd, const float *a, const float *b, const TP *w,
                                     int N, int C, float eps)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    size_t r = (size_t)n * C;
    const float *x = sz_norm_input(res, a, b, r, C, lane);
    TO *o = out + r;
    float ss = 0.0f;
    for (int i = lane; i < C; i += 32)
        ss += x[i] * x[i];
    float s = 1.0f / sqrtf(sz_warp_sum(ss) / C + eps);
    for (int i = lane; i < C; i += 32)
        sz_mx_put(o, i, (x[i] * s) * sz_mx_get(w, i));
    if (lane == 0)
        rstd[n] = s;
}

/* As layernorm_bwd_dinp_k: dinp (+)= the input gradient, or the fused residual's dres, da, db. */
template <typename TD, typename TP, typename TB>
__global__ static void rmsnorm_bwd_dinp_k(float *dinp, float *da, TB *db, const TD *dout, const float *inp,
                                          const TP *w, const float *rstd, int N, int C, int set)
{
    int n = blockIdx.x * SZ_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N)
        return;
    size_t r = (size_t)n * C;
    const float *x = inp + r;
    const TD *d = dout + r;
    float *di = dinp + r;
    float s = rstd[n], a = 0.0f;
    for (int i = lane; i < C; i += 32)
        a += sz_mx_get(d, i) * sz_mx_get(w, i) * x[i];
    float k = s * s * s * sz_warp_sum(a) / C;
    int sa = set & SZ_CUDA_SET_A, sb = set & SZ_CUDA_SET_B;
    for (int i = lane; i < C; i += 32) {
        float v = s * sz_mx_get(w, i) * sz_mx_get(d, i) - k * x[i];
        sz_norm_grad_put(di, da, db, r, i, v, sa, sb);
    }
}

/* ---- launches: the types chosen at run time, each combination its own instantiation ---- */

static unsigned sz_row_blocks(int N) { return (unsigned)((N + SZ_ROWS_PER_BLOCK - 1) / SZ_ROWS_PER_BLOCK); }
#define SZ_ROW_LAUNCH sz_row_blocks(N), 32 * SZ_ROWS_PER_BLOCK, 0, s
#define H16 uint16_t

static int sz_dt_ok(int dt) { return dt == SZ_CUDA_F32 || dt == SZ_CUDA_BF16; }

static int ln_fwd(cudaStream_t s, float *res, void *out, int out_dt, float *mean, float *rstd, const float *a,
                  const float *b, const void *w, const void *bias, int p_dt, int N, int C)
{
    if (!sz_dt_ok(out_dt) || !sz_dt_ok(p_dt))
        return (int)cudaErrorInvalidValue;
    if (N <= 0 || C <= 0)
        return 0;
    if (out_dt == SZ_CUDA_BF16 && p_dt == SZ_CUDA_BF16)
        layernorm_fwd_k<H16, H16><<<SZ_ROW_LAUNCH>>>(res, (H16 *)out, mean, rstd, a, b, (const H16 *)w,
                                                     (const H16 *)bias, N, C);
    else if (out_dt == SZ_CUDA_BF16)
        layernorm_fwd_k<H16, float><<<SZ_ROW_LAUNCH>>>(res, (H16 *)out, mean, rstd, a, b, (const float *)w,
                                                       (const float *)bias, N, C);
    else if (p_dt == SZ_CUDA_BF16)
        layernorm_fwd_k<float, H16><<<SZ_ROW_LAUNCH>>>(res, (float *)out, mean, rstd, a, b, (const H16 *)w,
                                                       (const H16 *)bias, N, C);
    else
        layernorm_fwd_k<float, float><<<SZ_ROW_LAUNCH>>>(res, (float *)out, mean, rstd, a, b, (const float *)w,
                                                         (const float *)bias, N, C);
    return sz_launch_rc();
}

/* dout TD, weight TP chosen; db's type TB from db_dt. */
template <typename TD, typename TP>
static void ln_bwd_rows_tb(cudaStream_t s, float *dinp, float *da, void *db, int db_dt, const TD *dout,
                           const float *inp, const TP *w, const float *mean, const float *rstd, int N, int C, int set)
{
    if (da && db_dt == SZ_CUDA_BF16)
        layernorm_bwd_dinp_k<TD, TP, H16><<<SZ_ROW_LAUNCH>>>(dinp, da, (H16 *)db, dout, inp, w, mean, rstd, N, C, set);
    else
        layernorm_bwd_dinp_k<TD, TP, float><<<SZ_ROW_LAUNCH>>>(dinp, da, (float *)db, dout, inp, w, mean, rstd, N, C,
                                                               set);
}

static int ln_bwd(cudaStream_t s, float *dinp, float *da, void *db, int db_dt, float *dweight, float *dbias,
                  const void *dout, int dout_dt, const float *inp, const void *w, int p_dt, const float *mean,
                  const float *rstd, int N, int C, int set)
{
    if (!sz_dt_ok(dout_dt) || !sz_dt_ok(p_dt) || !sz_dt_ok(db_dt))
        return (int)cudaErrorInvalidValue;
    if (C <= 0) /* no rows: a set parameter gradient is still zeroed (sz_colsum) */
        return 0;
    int rc;
    if (dinp && N > 0) {
        if (dout_dt == SZ_CUDA_BF16 && p_dt == SZ_CUDA_BF16)
            ln_bwd_rows_tb(s, dinp, da, db, db_dt, (const H16 *)dout, inp, (const H16 *)w, mean, rstd, N, C, set);
        else if (dout_dt == SZ_CUDA_BF16)
            ln_bwd_rows_tb(s, dinp, da, db, db_dt, (const H16 *)dout, inp, (const float *)w, mean, rstd, N, C, set);
        else if (p_dt == SZ_CUDA_BF16)
            ln_bwd_rows_tb(s, dinp, da, db, db_dt, (const float *)dout, inp, (const H16 *)w, mean, rstd, N, C, set);
        else
            ln_bwd_rows_tb(s, dinp, da, db, db_dt, (const float *)dout, inp, (const float *)w, mean, rstd, N, C, set);
        if ((rc = sz_launch_rc()))
            return rc;
    }
    if (!dweight && !dbias)
        return 0;
    int fresh = (set & SZ_CUDA_SET_DW ? SZ_CS_FRESH0 : 0) | (set & SZ_CUDA_SET_DB ? SZ_CS_FRESH1 : 0);
    if (dout_dt == SZ_CUDA_BF16) {
        sz_ln_param_term<H16> t = {(const H16 *)dout, inp, mean, rstd, C};
        return sz_colsum<2>(s, dweight, dbias, SZ_CUDA_F32, t, N, C, fresh);
    }
    sz_ln_param_term<float> t = {(const float *)dout, inp, mean, rstd, C};
    return sz_colsum<2>(s, dweight, dbias, SZ_CUDA_F32, t, N, C, fresh);
}

static int rms_fwd(cudaStream_t s, float *res, void *out, int out_dt, float *rstd, const float *a, const float *b,
                   const void *w, int p_dt, int N, int C, float eps)
{
    if (!sz_dt_ok(out_dt) || !sz_dt_ok(p_dt))
        return (int)cudaErrorInvalidValue;
    if (N <= 0 || C <= 0)
        return 0;
    if (out_dt == SZ_CUDA_BF16 && p_dt == SZ_CUDA_BF16)
        rmsnorm_fwd_k<H16, H16><<<SZ_ROW_LAUNCH>>>(res, (H16 *)out, rstd, a, b, (const H16 *)w, N, C, eps);
    else if (out_dt == SZ_CUDA_BF16)
        rmsnorm_fwd_k<H16, float><<<SZ_ROW_LAUNCH>>>(res, (H16 *)out, rstd, a, b, (const float *)w, N, C, eps);
    else if (p_dt == SZ_CUDA_BF16)
        rmsnorm_fwd_k<float, H16><<<SZ_ROW_LAUNCH>>>(res, (float *)out, rstd, a, b, (const H16 *)w, N, C, eps);
    else
        rmsnorm_fwd_k<float, float><<<SZ_ROW_LAUNCH>>>(res, (float *)out, rstd, a, b, (const float *)w, N, C, eps);
    return sz_launch_rc();
}

template <typename TD, typename TP>
static void rms_bwd_rows_tb(cudaStream_t s, float *dinp, float *da, void *db, int db_dt, const TD *dout,
                            const float *inp, const TP *w, const float *rstd, int N, int C, int set)
{
    if (da && db_dt == SZ_CUDA_BF16)
        rmsnorm_bwd_dinp_k<TD, TP, H16><<<SZ_ROW_LAUNCH>>>(dinp, da, (H16 *)db, dout, inp, w, rstd, N, C, set);
    else
        rmsnorm_bwd_dinp_k<TD, TP, float><<<SZ_ROW_LAUNCH>>>(dinp, da, (float *)db, dout, inp, w, rstd, N, C, set);
}

static int rms_bwd(cudaStream_t s, float *dinp, float *da, void *db, int db_dt, float *dweight, const void *dout,
                   int dout_dt, const float *inp, const void *w, int p_dt, const float *rstd, int N, int C, int set)
{
    if (!sz_dt_ok(dout_dt) || !sz_dt_ok(p_dt) || !sz_dt_ok(db_dt))
        return (int)cudaErrorInvalidValue;
    if (C <= 0) /* no rows: a set parameter gradient is still zeroed (sz_colsum) */
        return 0;
    int rc;
    if (dinp && N > 0) {
        if (dout_dt == SZ_CUDA_BF16 && p_dt == SZ_CUDA_BF16)
            rms_bwd_rows_tb(s, dinp, da, db, db_dt, (const H16 *)dout, inp, (const H16 *)w, rstd, N, C, set);
        else if (dout_dt == SZ_CUDA_BF16)
            rms_bwd_rows_tb(s, dinp, da, db, db_dt, (const H16 *)dout, inp, (const float *)w, rstd, N, C, set);
        else if (p_dt == SZ_CUDA_BF16)
            rms_bwd_rows_tb(s, dinp, da, db, db_dt, (const float *)dout, inp, (const H16 *)w, rstd, N, C, set);
        else
            rms_bwd_rows_tb(s, dinp, da, db, db_dt, (const float *)dout, inp, (const float *)w, rstd, N, C, set);
        if ((rc = sz_launch_rc()))
            return rc;
    }
    if (!dweight)
        return 0;
    int fresh = set & SZ_CUDA_SET_DW ? SZ_CS_FRESH0 : 0;
    if (dout_dt == SZ_CUDA_BF16) {
        sz_rms_param_term<H16> t = {(const H16 *)dout, inp, rstd, C};
        return sz_colsum<1>(s, dweight, NULL, SZ_CUDA_F32, t, N, C, fresh);
    }
    sz_rms_param_term<float> t = {(const float *)dout, inp, rstd, C};
    return sz_colsum<1>(s, dweight, NULL, SZ_CUDA_F32, t, N, C, fresh);
}

/* ---- entry points ---- */

extern "C" int sz_cuda_layernorm_fwd(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp,
                                     const float *weight, const float *bias, int N, int C)
{
    return ln_fwd(s, NULL, out, SZ_CUDA_F32, mean, rstd, inp, NULL, weight, bias, SZ_CUDA_F32, N, C);
}

extern "C" int sz_cuda_layernorm_bwd(cudaStream_t s, float *dinp, float *dweight, float *dbias, const float *dout,
                                     const float *inp, const float *weight, const float *mean, const float *rstd,
                                     int N, int C)
{
    return ln_bwd(s, dinp, NULL, NULL, SZ_CUDA_F32, dweight, dbias, dout, SZ_CUDA_F32, inp, weight, SZ_CUDA_F32,
                  mean, rstd, N, C, 0);
}

extern "C" int sz_cuda_rmsnorm_fwd(cudaStream_t s, float *out, float *rstd, const float *inp, const float *weight,
                                   int N, int C, float eps)
{
    return rms_fwd(s, NULL, out, SZ_CUDA_F32, rstd, inp, NULL, weight, SZ_CUDA_F32, N, C, eps);
}

extern "C" int sz_cuda_rmsnorm_bwd(cudaStream_t s, float *dinp, float *dweight, const float *dout, const float *inp,
                                   const float *weight, const float *rstd, int N, int C)
{
    return rms_bwd(s, dinp, NULL, NULL, SZ_CUDA_F32, dweight, dout, SZ_CUDA_F32, inp, weight, SZ_CUDA_F32, rstd, N,
                   C, 0);
}

extern "C" int sz_cuda_layernorm_fwd_mx(cudaStream_t s, void *out, int out_dt, float *mean, float *rstd,
                                        const float *inp, const void *weight, const void *bias, int p_dt, int N,
                                        int C)
{
    return ln_fwd(s, NULL, out, out_dt, mean, rstd, inp, NULL, weight, bias, p_dt, N, C);
}

extern "C" int sz_cuda_layernorm_bwd_mx(cudaStream_t s, float *dinp, float *dweight, float *dbias, const void *dout,
                                        int dout_dt, const float *inp, const void *weight, int p_dt,
                                        const float *mean, const float *rstd, int N, int C, int set)
{
    return ln_bwd(s, dinp, NULL, NULL, SZ_CUDA_F32, dweight, dbias, dout, dout_dt, inp, weight, p_dt, mean, rstd, N,
                  C, set & (SZ_CUDA_SET_A | SZ_CUDA_SET_DW | SZ_CUDA_SET_DB));
}

extern "C" int sz_cuda_residual_layernorm_fwd_mx(cudaStream_t s, float *res, void *out, int out_dt, float *mean,
                                                 float *rstd, const float *a, const float *b, const void *weight,
                                                 const void *bias, int p_dt, int N, int C)
{
    return ln_fwd(s, res, out, out_dt, mean, rstd, a, b, weight, bias, p_dt, N, C);
}

extern "C" int sz_cuda_layernorm_residual_bwd_mx(cudaStream_t s, float *da, void *db, int db_dt, float *dres,
                                                 float *dweight, float *dbias, const void *dout, int dout_dt,
                                                 const float *res, const void *weight, int p_dt, const float *mean,
                                                 const float *rstd, int N, int C, int set)
{
    if (!da || !db || !dres)
        return (int)cudaErrorInvalidValue;
    return ln_bwd(s, dres, da, db, db_dt, dweight, dbias, dout, dout_dt, res, weight, p_dt, mean, rstd, N, C, set);
}

extern "C" int sz_cuda_rmsnorm_fwd_mx(cudaStream_t s, void *out, int out_dt, float *rstd, const float *inp,
                                      const void *weight, int p_dt, int N, int C, float eps)
{
    return rms_fwd(s, NULL, out, out_dt, rstd, inp, NULL, weight, p_dt, N, C, eps);
}

extern "C" int sz_cuda_rmsnorm_bwd_mx(cudaStream_t s, float *dinp, float *dweight, const void *dout, int dout_dt,
                                      const float *inp, const void *weight, int p_dt, const float *rstd, int N, int C,
                                      int set)
{
    return rms_bwd(s, dinp, NULL, NULL, SZ_CUDA_F32, dweight, dout, dout_dt, inp, weight, p_dt, rstd, N, C,
                   set & (SZ_CUDA_SET_A | SZ_CUDA_SET_DW));
}

extern "C" int sz_cuda_residual_rmsnorm_fwd_mx(cudaStream_t s, float *res, void *out, int out_dt, float *rstd,
                                               const float *a, const float *b, const void *weight, int p_dt, int N,
                                               int C, float eps)
{
    return rms_fwd(s, res, out, out_dt, rstd, a, b, weight, p_dt, N, C, eps);
}

extern "C" int sz_cuda_rmsnorm_residual_bwd_mx(cudaStream_t s, float *da, void *db, int db_dt, float *dres,
                                               float *dweight, const void *dout, int dout_dt, const float *res,
                                               const void *weight, int p_dt, const float *rstd, int N, int C,
                                               int set)
{
    if (!da || !db || !dres)
        return (int)cudaErrorInvalidValue;
    return rms_bwd(s, dres, da, db, db_dt, dweight, dout, dout_dt, res, weight, p_dt, rstd, N, C, set);
}
