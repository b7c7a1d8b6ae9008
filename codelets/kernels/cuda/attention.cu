/* codelets/kernels/cuda/attention.cu — CUDA twin of kernels/attention_tt.c (llm.c's T×T kernel; the CPU codelet now runs the linear-memory kernels/attention.c): causal multi-head
 * self-attention with llm.c's layout and semantics (inp [B,T,3C] = q|k|v, scale 1/sqrt(hs),
 * preatt and att [B,NH,T,T] kept for the backward, zeros above the diagonal, softmax max started
 * at -10000 as the CPU). A kernel of our own, not a fused flash attention: it materialises att as
 * the CPU does, since the backward codelet reads it.
 *
 * One block of 4 warps per query row (b, h, t). Dot products: each lane multiplies its columns
 * i = lane + 32 j in order, then a fixed butterfly tree; rows t2 are dealt to the warps
 * round-robin; sums over t2 are per warp in t2 order, then the 4 warps added in warp order.
 * Everything is a fixed tree decided by the shape: the same bits run to run.
 *
 * Backward: per query row t (kernel A) datt[t2] = dout_t . v_t2 into shared memory,
 * s_t = sum att * datt (kept in scratch), dq_t += scale * sum_t2 att (datt - s_t) k_t2; per key row
 * t2 (kernel B) dk_t2 += scale * sum_{t >= t2} att (datt - s_t) q_t and dv_t2 += sum att dout_t,
 * recomputing datt with the same code (the same bits). No atomics. */
#include <math.h>
#include "sz_cuda_common.cuh"

#define SZ_ATT_WARPS 4
#define SZ_ATT_THREADS (32 * SZ_ATT_WARPS)
#define SZ_ATT_J (SZ_CUDA_ATT_MAX_HS / 32) /* columns per lane at most */

struct sz_att_dims {
    int B, T, C, NH, hs;
    float scale;
};

/* Row pointers into [B,T,3C]: q, k or v (which = 0, 1, 2) of head h at (b, t). */
__device__ __forceinline__ size_t sz_att_row(const sz_att_dims &d, int b, int t, int h, int which)
{
    return ((size_t)b * d.T + t) * 3 * d.C + (size_t)which * d.C + (size_t)h * d.hs;
}

/* Warp dot product of a register row (lane's columns) with a global row; every lane gets it. */
__device__ __forceinline__ float sz_att_dot(const float *r, const float *g, int hs, int lane)
{
    float p = 0.0f;
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++) {
        int i = lane + 32 * j;
        if (i < hs)
            p += r[j] * g[i];
    }
    return sz_warp_sum(p);
}

/* The 4 warps' partial rows (each lane's columns) added in warp order and passed to f(i, sum). */
template <typename F> __device__ void sz_att_combine(const float *acc, float (*sh)[SZ_CUDA_ATT_MAX_HS], int hs, F f)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++) {
        int i = lane + 32 * j;
        if (i < hs)
            sh[w][i] = acc[j];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hs; i += SZ_ATT_THREADS) {
        float x = sh[0][i];
        for (int k = 1; k < SZ_ATT_WARPS; k++)
            x += sh[k][i];
        f(i, x);
    }
}

__global__ static void __launch_bounds__(SZ_ATT_THREADS)
    att_fwd_k(float *out, float *preatt, float *att, const float *inp, sz_att_dims d)
{
    __shared__ float red[32];
    __shared__ float part[SZ_ATT_WARPS][SZ_CUDA_ATT_MAX_HS];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int T = d.T, hs = d.hs;
    float *pre = preatt + (((size_t)b * d.NH + h) * T + t) * T;
    float *a = att + (((size_t)b * d.NH + h) * T + t) * T;
    const float *q = inp + sz_att_row(d, b, t, h, 0);
    float qr[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        qr[j] = lane + 32 * j < hs ? q[lane + 32 * j] : 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) { /* q.k */
        float val = sz_att_dot(qr, inp + sz_att_row(d, b, t2, h, 1), hs, lane);
        if (lane == 0)
            pre[t2] = val * d.scale;
    }
    __syncthreads();
    float mx = -10000.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS)
        mx = fmaxf(mx, pre[t2]);
    mx = sz_block_max(mx, red);
    float es = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS) {
        float e = sz_d_expf(pre[t2] - mx);
        a[t2] = e;
        es += e;
    }
    es = sz_block_sum(es, red);
    float inv = es == 0.0f ? 0.0f : 1.0f / es;
    for (int t2 = threadIdx.x; t2 < T; t2 += SZ_ATT_THREADS) {
        if (t2 <= t)
            a[t2] *= inv; /* the thread that wrote it */
        else
            a[t2] = pre[t2] = 0.0f;
    }
    __syncthreads();
    float acc[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        acc[j] = 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) { /* att . v */
        float at = a[t2];
        const float *v = inp + sz_att_row(d, b, t2, h, 2);
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++)
            if (lane + 32 * j < hs)
                acc[j] += at * v[lane + 32 * j];
    }
    float *o = out + ((size_t)b * T + t) * d.C + (size_t)h * hs;
    sz_att_combine(acc, part, hs, [&](int i, float x) { o[i] = x; });
}

/* Kernel A, per query row: datt into shared memory, s_t, dq. */
__global__ static void __launch_bounds__(SZ_ATT_THREADS)
    att_bwd_q_k(float *dinp, float *srow, const float *dout, const float *inp, const float *att, sz_att_dims d)
{
    extern __shared__ float datt[]; /* T floats */
    __shared__ float red[32];
    __shared__ float part[SZ_ATT_WARPS][SZ_CUDA_ATT_MAX_HS];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int T = d.T, hs = d.hs;
    size_t bht = ((size_t)b * d.NH + h) * T + t;
    const float *a = att + bht * T;
    const float *dd = dout + ((size_t)b * T + t) * d.C + (size_t)h * hs;
    float dr[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        dr[j] = lane + 32 * j < hs ? dd[lane + 32 * j] : 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) {
        float da = sz_att_dot(dr, inp + sz_att_row(d, b, t2, h, 2), hs, lane);
        if (lane == 0)
            datt[t2] = da;
    }
    __syncthreads();
    float sp = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS)
        sp += a[t2] * datt[t2];
    float s = sz_block_sum(sp, red);
    if (threadIdx.x == 0)
        srow[bht] = s;
    float acc[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        acc[j] = 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) {
        float g = (a[t2] * (datt[t2] - s)) * d.scale;
        const float *k = inp + sz_att_row(d, b, t2, h, 1);
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++)
            if (lane + 32 * j < hs)
                acc[j] += k[lane + 32 * j] * g;
    }
    float *dq = dinp + sz_att_row(d, b, t, h, 0);
    sz_att_combine(acc, part, hs, [&](int i, float x) { dq[i] += x; });
}

/* Kernel B, per key row t2: dk and dv from every query row t >= t2. */
__global__ static void __launch_bounds__(SZ_ATT_THREADS)
    att_bwd_kv_k(float *dinp, const float *srow, const float *dout, const float *inp, const float *att, sz_att_dims d)
{
    __shared__ float part[SZ_ATT_WARPS][SZ_CUDA_ATT_MAX_HS];
    int t2 = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int T = d.T, hs = d.hs;
    size_t bh = (size_t)b * d.NH + h;
    const float *v = inp + sz_att_row(d, b, t2, h, 2);
    float vr[SZ_ATT_J], dk[SZ_ATT_J], dv[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++) {
        vr[j] = lane + 32 * j < hs ? v[lane + 32 * j] : 0.0f;
        dk[j] = dv[j] = 0.0f;
    }
    for (int t = t2 + w; t < T; t += SZ_ATT_WARPS) {
        const float *dd = dout + ((size_t)b * T + t) * d.C + (size_t)h * hs;
        const float *q = inp + sz_att_row(d, b, t, h, 0);
        /* the same product as kernel A's, operands in the same order: the same bits */
        float p = 0.0f;
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++) {
            int i = lane + 32 * j;
            if (i < hs)
                p += dd[i] * vr[j];
        }
        float da = sz_warp_sum(p);
        float at = att[(bh * T + t) * T + t2];
        float g = (at * (da - srow[bh * T + t])) * d.scale;
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++) {
            int i = lane + 32 * j;
            if (i < hs) {
                dk[j] += q[i] * g;
                dv[j] += at * dd[i];
            }
        }
    }
    float *dkp = dinp + sz_att_row(d, b, t2, h, 1), *dvp = dinp + sz_att_row(d, b, t2, h, 2);
    sz_att_combine(dk, part, hs, [&](int i, float x) { dkp[i] += x; });
    sz_att_combine(dv, part, hs, [&](int i, float x) { dvp[i] += x; });
}

static int sz_att_dims_of(sz_att_dims *d, int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH || C / NH > SZ_CUDA_ATT_MAX_HS || T > SZ_CUDA_ATT_MAX_T ||
        B > 65535 || NH > 65535)
        return (int)cudaErrorInvalidValue;
    d->B = B;
    d->T = T;
    d->C = C;
    d->NH = NH;
    d->hs = C / NH;
    d->scale = 1.0f / sqrtf((float)d->hs);
    return 0;
}

extern "C" int sz_cuda_attention_fwd(cudaStream_t s, float *out, float *preatt, float *att, const float *inp,
                                     int B, int T, int C, int NH)
{
    sz_att_dims d;
    int rc = sz_att_dims_of(&d, B, T, C, NH);
    if (rc)
        return rc;
    att_fwd_k<<<dim3((unsigned)T, (unsigned)NH, (unsigned)B), SZ_ATT_THREADS, 0, s>>>(out, preatt, att, inp, d);
    return sz_launch_rc();
}

extern "C" int sz_cuda_attention_bwd(cudaStream_t s, float *dinp, const float *dout, const float *inp,
                                     const float *att, int B, int T, int C, int NH)
{
    sz_att_dims d;
    int rc = sz_att_dims_of(&d, B, T, C, NH);
    if (rc)
        return rc;
    float *srow = NULL;
    if ((rc = (int)cudaMallocAsync((void **)&srow, (size_t)B * NH * T * sizeof(float), s)))
        return rc;
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    att_bwd_q_k<<<grid, SZ_ATT_THREADS, (size_t)T * sizeof(float), s>>>(dinp, srow, dout, inp, att, d);
    rc = sz_launch_rc();
    if (!rc) {
        att_bwd_kv_k<<<grid, SZ_ATT_THREADS, 0, s>>>(dinp, srow, dout, inp, att, d);
        rc = sz_launch_rc();
    }
    int rf = (int)cudaFreeAsync(srow, s);
    return rc ? rc : rf;
}
