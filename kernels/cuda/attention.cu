/* kernels/cuda/attention.cu — CUDA twin of kernels/attention.c: causal multi-head
 * self-attention with llm.c's semantics (inp [B,T,3C] = q|k|v, scale 1/sqrt(hs), softmax max
 * started at -10000) and the CPU's memory scheme: only two statistics per query row are kept
 * (the softmax max and 1/sum, stats [B,NH,T,2]); the backward recomputes the probabilities. Kernels
 * of our own, not cuDNN's fused attention. Two kinds: the tiled FlashAttention-2 kernels (the
 * second half of this file, the default where they cover the shape) and the row-per-block kernels
 * below (K and V rows re-read from L2 per query row: the fallback, and SZ_CUDA_ATTENTION=rowwise).
 *
 * Row-per-block kernels: one block of 4 warps per query row (b, h, t). Dot products: each lane multiplies its columns
 * i = lane + 32 j in order, then a fixed butterfly tree; rows t2 are dealt to the warps
 * round-robin; sums over t2 are per warp in t2 order, then the 4 warps added in warp order.
 * Everything is a fixed tree decided by the shape: the same bits run to run.
 *
 * Backward: per query row t (kernel A) p and datt[t2] = dout_t . v_t2 into shared memory,
 * s_t = sum p * datt (kept in scratch), dq_t += scale * sum_t2 p (datt - s_t) k_t2; per key row
 * t2 (kernel B) dk_t2 += scale * sum_{t >= t2} p (datt - s_t) q_t and dv_t2 += sum p dout_t,
 * recomputing p and datt with the same products (the same bits). No atomics.
 *
 * The native bf16 path (the _mx entry points, as sz_k_attention_fwd_mx / sz_k_attention_bwd_mx_set):
 * inp, stats and the scratch stay fp32; out (forward), dout and dinp (backward) may be bf16. The
 * kernels are templates on those operands' types: a bf16 dout is widened exactly where it is
 * loaded (so every product and sum is the fp32 kernel's on the widened dout), a bf16 out or dinp
 * element is rounded once from the fp32 value the fp32 kernel would store (dinp: round(f32(dinp) +
 * the row's sum), as the CPU). `set` (a folded sz_op_zero of dinp): each dinp element is written
 * from its sum without being read; the q kernel writes every q slot and the k/v kernel every k and
 * v slot, so the whole of dinp is written. */
#include <math.h>
#include "sz_cuda_mx.cuh"

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
template <typename G> __device__ __forceinline__ float sz_att_dot(const float *r, const G *g, int hs, int lane)
{
    float p = 0.0f;
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++) {
        int i = lane + 32 * j;
        if (i < hs)
            p += r[j] * sz_mx_get(g, (size_t)i);
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

/* Score of query row t against key row t2 (every lane gets it): the forward's and both backward
 * kernels' one computation, q in registers (qr) against k in memory, or k in registers against q
 * in memory: the same products summed in the same order, so the same bits. */
__device__ __forceinline__ float sz_att_score(const float *reg, const float *mem, int hs, int lane, float scale)
{
    return sz_att_dot(reg, mem, hs, lane) * scale;
}

template <typename OutT>
__global__ static void __launch_bounds__(SZ_ATT_THREADS)
    att_fwd_k(OutT *out, float *stats, const float *inp, sz_att_dims d)
{
    extern __shared__ float p[]; /* T floats: the row's scores, then probabilities */
    __shared__ float red[32];
    __shared__ float part[SZ_ATT_WARPS][SZ_CUDA_ATT_MAX_HS];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int T = d.T, hs = d.hs;
    const float *q = inp + sz_att_row(d, b, t, h, 0);
    float qr[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        qr[j] = lane + 32 * j < hs ? q[lane + 32 * j] : 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) { /* q.k */
        float val = sz_att_score(qr, inp + sz_att_row(d, b, t2, h, 1), hs, lane, d.scale);
        if (lane == 0)
            p[t2] = val;
    }
    __syncthreads();
    float mx = -10000.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS)
        mx = fmaxf(mx, p[t2]);
    mx = sz_block_max(mx, red);
    float es = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS) {
        float e = sz_d_expf(p[t2] - mx);
        p[t2] = e;
        es += e;
    }
    es = sz_block_sum(es, red);
    float inv = es == 0.0f ? 0.0f : 1.0f / es;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS)
        p[t2] *= inv; /* the thread that wrote it */
    if (threadIdx.x == 0) {
        float *st = stats + (((size_t)b * d.NH + h) * T + t) * 2;
        st[0] = mx;
        st[1] = inv;
    }
    __syncthreads();
    float acc[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        acc[j] = 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) { /* p . v */
        float pt = p[t2];
        const float *v = inp + sz_att_row(d, b, t2, h, 2);
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++)
            if (lane + 32 * j < hs)
                acc[j] += pt * v[lane + 32 * j];
    }
    OutT *o = out + ((size_t)b * T + t) * d.C + (size_t)h * hs;
    sz_att_combine(acc, part, hs, [&](int i, float x) { sz_mx_put(o, (size_t)i, x); });
}

/* Kernel A, per query row t: the probabilities recomputed from the scores and the stats
 * (p = exp(s - max) * inv, the forward's bits), datt = dout . v, s_t = sum p datt (kept in srow),
 * dq += scale * sum_t2 p (datt - s_t) k. */
template <typename DinT, typename DoutT>
__global__ static void __launch_bounds__(SZ_ATT_THREADS)
    att_bwd_q_k(DinT *dinp, float *srow, const DoutT *dout, const float *inp, const float *stats, sz_att_dims d,
                int set)
{
    extern __shared__ float sh[]; /* 2T floats: p, datt */
    __shared__ float red[32];
    __shared__ float part[SZ_ATT_WARPS][SZ_CUDA_ATT_MAX_HS];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int T = d.T, hs = d.hs;
    float *p = sh, *datt = sh + T;
    size_t bht = ((size_t)b * d.NH + h) * T + t;
    float mx = stats[2 * bht], inv = stats[2 * bht + 1];
    const float *q = inp + sz_att_row(d, b, t, h, 0);
    const DoutT *dd = dout + ((size_t)b * T + t) * d.C + (size_t)h * hs;
    float qr[SZ_ATT_J], dr[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++) {
        qr[j] = lane + 32 * j < hs ? q[lane + 32 * j] : 0.0f;
        dr[j] = lane + 32 * j < hs ? sz_mx_get(dd, (size_t)(lane + 32 * j)) : 0.0f;
    }
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) {
        float sc = sz_att_score(qr, inp + sz_att_row(d, b, t2, h, 1), hs, lane, d.scale);
        float da = sz_att_dot(dr, inp + sz_att_row(d, b, t2, h, 2), hs, lane);
        if (lane == 0) {
            p[t2] = sz_d_expf(sc - mx) * inv;
            datt[t2] = da;
        }
    }
    __syncthreads();
    float sp = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += SZ_ATT_THREADS)
        sp += p[t2] * datt[t2];
    float s = sz_block_sum(sp, red);
    if (threadIdx.x == 0)
        srow[bht] = s;
    float acc[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++)
        acc[j] = 0.0f;
    for (int t2 = w; t2 <= t; t2 += SZ_ATT_WARPS) {
        float g = (p[t2] * (datt[t2] - s)) * d.scale;
        const float *k = inp + sz_att_row(d, b, t2, h, 1);
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++)
            if (lane + 32 * j < hs)
                acc[j] += g * k[lane + 32 * j];
    }
    DinT *dq = dinp + sz_att_row(d, b, t, h, 0);
    sz_att_combine(acc, part, hs, [&](int i, float x) { sz_mx_acc(dq, (size_t)i, x, set); });
}

/* Kernel B, per key row t2: dk and dv from every query row t >= t2, p, datt recomputed with the
 * same products as kernel A (register operand and memory operand swapped: the same bits). */
template <typename DinT, typename DoutT>
__global__ static void __launch_bounds__(SZ_ATT_THREADS)
    att_bwd_kv_k(DinT *dinp, const float *srow, const DoutT *dout, const float *inp, const float *stats,
                 sz_att_dims d, int set)
{
    __shared__ float part[SZ_ATT_WARPS][SZ_CUDA_ATT_MAX_HS];
    int t2 = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int T = d.T, hs = d.hs;
    size_t bh = (size_t)b * d.NH + h;
    const float *k = inp + sz_att_row(d, b, t2, h, 1), *v = inp + sz_att_row(d, b, t2, h, 2);
    float kr[SZ_ATT_J], vr[SZ_ATT_J], dk[SZ_ATT_J], dv[SZ_ATT_J];
#pragma unroll
    for (int j = 0; j < SZ_ATT_J; j++) {
        kr[j] = lane + 32 * j < hs ? k[lane + 32 * j] : 0.0f;
        vr[j] = lane + 32 * j < hs ? v[lane + 32 * j] : 0.0f;
        dk[j] = dv[j] = 0.0f;
    }
    for (int t = t2 + w; t < T; t += SZ_ATT_WARPS) {
        const DoutT *dd = dout + ((size_t)b * T + t) * d.C + (size_t)h * hs;
        const float *q = inp + sz_att_row(d, b, t, h, 0);
        size_t bht = bh * T + t;
        float sc = sz_att_score(kr, q, hs, lane, d.scale);
        float da = sz_att_dot(vr, dd, hs, lane);
        float pt = sz_d_expf(sc - stats[2 * bht]) * stats[2 * bht + 1];
        float g = (pt * (da - srow[bht])) * d.scale;
#pragma unroll
        for (int j = 0; j < SZ_ATT_J; j++) {
            int i = lane + 32 * j;
            if (i < hs) {
                dk[j] += g * q[i];
                dv[j] += pt * sz_mx_get(dd, (size_t)i);
            }
        }
    }
    DinT *dkp = dinp + sz_att_row(d, b, t2, h, 1), *dvp = dinp + sz_att_row(d, b, t2, h, 2);
    sz_att_combine(dk, part, hs, [&](int i, float x) { sz_mx_acc(dkp, (size_t)i, x, set); });
    sz_att_combine(dv, part, hs, [&](int i, float x) { sz_mx_acc(dvp, (size_t)i, x, set); });
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

template <typename OutT>
static int sz_att_fwd_launch(cudaStream_t s, OutT *out, float *stats, const float *inp, int B, int T, int C, int NH)
{
    sz_att_dims d;
    int rc = sz_att_dims_of(&d, B, T, C, NH);
    if (rc)
        return rc;
    att_fwd_k<OutT><<<dim3((unsigned)T, (unsigned)NH, (unsigned)B), SZ_ATT_THREADS, (size_t)T * sizeof(float), s>>>(
        out, stats, inp, d);
    return sz_launch_rc();
}

template <typename DinT, typename DoutT>
static int sz_att_bwd_launch(cudaStream_t s, DinT *dinp, const DoutT *dout, const float *inp, const float *stats,
                             int B, int T, int C, int NH, int set)
{
    sz_att_dims d;
    int rc = sz_att_dims_of(&d, B, T, C, NH);
    if (rc)
        return rc;
    float *srow = NULL;
    if ((rc = (int)cudaMallocAsync((void **)&srow, (size_t)B * NH * T * sizeof(float), s)))
        return rc;
    dim3 grid((unsigned)T, (unsigned)NH, (unsigned)B);
    att_bwd_q_k<DinT, DoutT><<<grid, SZ_ATT_THREADS, 2 * (size_t)T * sizeof(float), s>>>(dinp, srow, dout, inp, stats,
                                                                                          d, set);
    rc = sz_launch_rc();
    if (!rc) {
        att_bwd_kv_k<DinT, DoutT><<<grid, SZ_ATT_THREADS, 0, s>>>(dinp, srow, dout, inp, stats, d, set);
        rc = sz_launch_rc();
    }
    int rf = (int)cudaFreeAsync(srow, s);
    return rc ? rc : rf;
}

/* ==== the tiled kernels (the FlashAttention-2 scheme), the default where the shape allows ====
 *
 * Tiles of SZ_FA_B = 64 query rows x 64 key rows, 4 warps per block, one block per (query tile or
 * key tile, h, b): grid ceil(T/64) x NH x B. Every tile product C (+)= op(A) op(B) goes through
 * shared memory (sz_fa_mm): warp w owns the output rows 16w..16w+15. Two product types, chosen by
 * the output operand's type (the native bf16 path's calls have a bf16 out / dinp; the same rule
 * in the forward and the backward, so the backward recomputes the forward's probabilities):
 *  - bf16 (E = __nv_bfloat16): WMMA 16x16x16 bf16 fragments with fp32 accumulation (tensor cores);
 *    q, k, v (fp32 in memory) are rounded to bf16 where a tile is loaded, p and dS where they are
 *    stored for the next product; scores, softmax statistics, row sums and every accumulator fp32.
 *  - fp32 (E = float): plain fp32 FMA, each lane 8 rows x HS/16 (or 4) columns, k summed in order.
 * Forward: per query tile, the key tiles 0..qt in order with the online softmax (running max m
 * started at -10000, l = l alpha + sum exp(s - m), O = O alpha + P V), out = O / l at the end (the
 * CPU normalises p before it weights v: equal to rounding), stats = (m, 1/l).
 * Backward, no atomics: kernel dQ per query tile sweeps its key tiles twice: first D_t = sum p dP
 * (dP = dout v^T: the CPU's s_t = sum p datt), then dS = p (dP - D) scale and dQ += dS K; it saves D
 * (B*NH*T floats of scratch). Kernel dKV per key tile sweeps the query tiles qt >= kt in order:
 * dV += P^T dout, dK += dS^T Q. p = exp(s - max) * inv from the forward's stats, as the CPU.
 * Every sum is in an order fixed by the shape: the same bits run to run. Head sizes 32, 64, 128
 * (compiled instantiations), where the tiles fit the device's opt-in shared memory per block (set
 * with cudaFuncSetAttribute above 48 KB); other shapes, and SZ_CUDA_ATTENTION=rowwise, take the
 * row-per-block kernels above. Written and compiled without a GPU: not yet run on one. */
#include <stdlib.h>
#include <string.h>
#include "sz_cuda_fa.cuh"

/* ---- launches and the choice of kernel ---- */

template <typename T> struct sz_fa_elem;
template <> struct sz_fa_elem<float> { typedef float E; };
template <> struct sz_fa_elem<uint16_t> { typedef __nv_bfloat16 E; };

/* The device's opt-in shared memory per block (0 when it cannot be read). */
static size_t sz_fa_optin(void)
{
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (size_t)v;
}

/* Dynamic shared memory above the default 48 KB is opt-in per kernel. */
static int sz_fa_smem(const void *k, size_t bytes)
{
    return (int)cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

/* probe: only whether the tiles fit (0) or not (cudaErrorNotSupported). */
template <int HS, typename OutT>
static int sz_fa_fwd_go(cudaStream_t s, OutT *out, float *stats, const float *inp, const sz_att_dims &d, int probe)
{
    typedef typename sz_fa_elem<OutT>::E E;
    const size_t bytes = sz_fa_lay<HS, E>::fwd;
    if (bytes > sz_fa_optin())
        return (int)cudaErrorNotSupported;
    if (probe)
        return 0;
    int rc = sz_fa_smem((const void *)fa_fwd_k<HS, E, OutT>, bytes);
    if (rc)
        return rc;
    dim3 grid((unsigned)((d.T + SZ_FA_B - 1) / SZ_FA_B), (unsigned)d.NH, (unsigned)d.B);
    fa_fwd_k<HS, E, OutT><<<grid, SZ_FA_THREADS, bytes, s>>>(out, stats, inp, d);
    return sz_launch_rc();
}

template <int HS, typename DinT, typename DoutT>
static int sz_fa_bwd_go(cudaStream_t s, DinT *dinp, const DoutT *dout, const float *inp, const float *stats,
                        const sz_att_dims &d, int set, int probe)
{
    typedef typename sz_fa_elem<DinT>::E E;
    typedef sz_fa_lay<HS, E> L;
    const size_t optin = sz_fa_optin();
    if (L::dq > optin || L::dkv > optin)
        return (int)cudaErrorNotSupported;
    if (probe)
        return 0;
    int rc = sz_fa_smem((const void *)fa_bwd_dq_k<HS, E, DinT, DoutT>, L::dq);
    if (!rc)
        rc = sz_fa_smem((const void *)fa_bwd_dkv_k<HS, E, DinT, DoutT>, L::dkv);
    if (rc)
        return rc;
    float *Dg = NULL;
    if ((rc = (int)cudaMallocAsync((void **)&Dg, (size_t)d.B * d.NH * d.T * sizeof(float), s)))
        return rc;
    dim3 grid((unsigned)((d.T + SZ_FA_B - 1) / SZ_FA_B), (unsigned)d.NH, (unsigned)d.B);
    fa_bwd_dq_k<HS, E, DinT, DoutT><<<grid, SZ_FA_THREADS, L::dq, s>>>(dinp, Dg, dout, inp, stats, d, set);
    rc = sz_launch_rc();
    if (!rc) {
        fa_bwd_dkv_k<HS, E, DinT, DoutT><<<grid, SZ_FA_THREADS, L::dkv, s>>>(dinp, Dg, dout, inp, stats, d, set);
        rc = sz_launch_rc();
    }
    int rf = (int)cudaFreeAsync(Dg, s);
    return rc ? rc : rf;
}

template <typename OutT>
static int sz_fa_fwd(cudaStream_t s, OutT *out, float *stats, const float *inp, const sz_att_dims &d, int probe)
{
    switch (d.hs) {
    case 32: return sz_fa_fwd_go<32>(s, out, stats, inp, d, probe);
    case 64: return sz_fa_fwd_go<64>(s, out, stats, inp, d, probe);
    case 128: return sz_fa_fwd_go<128>(s, out, stats, inp, d, probe);
    default: return (int)cudaErrorNotSupported;
    }
}

template <typename DinT, typename DoutT>
static int sz_fa_bwd(cudaStream_t s, DinT *dinp, const DoutT *dout, const float *inp, const float *stats,
                     const sz_att_dims &d, int set, int probe)
{
    switch (d.hs) {
    case 32: return sz_fa_bwd_go<32>(s, dinp, dout, inp, stats, d, set, probe);
    case 64: return sz_fa_bwd_go<64>(s, dinp, dout, inp, stats, d, set, probe);
    case 128: return sz_fa_bwd_go<128>(s, dinp, dout, inp, stats, d, set, probe);
    default: return (int)cudaErrorNotSupported;
    }
}

static int sz_att_rowwise; /* sz_cuda_attention_set_rowwise */

extern "C" void sz_cuda_attention_set_rowwise(int on) { __atomic_store_n(&sz_att_rowwise, on != 0, __ATOMIC_RELAXED); }

/* SZ_CUDA_ATT_AUTO: the tiled kernels where they cover the shape, unless set to the rowwise ones. */
static int sz_att_resolve(int impl, int tiled_ok)
{
    if (impl == SZ_CUDA_ATT_AUTO)
        impl = __atomic_load_n(&sz_att_rowwise, __ATOMIC_RELAXED) || !tiled_ok ? SZ_CUDA_ATT_ROWWISE
                                                                             : SZ_CUDA_ATT_TILED;
    return impl;
}

template <typename OutT>
static int sz_att_fwd_any(cudaStream_t s, OutT *out, float *stats, const float *inp, int B, int T, int C, int NH,
                          int impl)
{
    sz_att_dims d;
    int rc = sz_att_dims_of(&d, B, T, C, NH);
    if (rc)
        return rc;
    if (impl != SZ_CUDA_ATT_ROWWISE)
        impl = sz_att_resolve(impl, sz_fa_fwd(s, out, stats, inp, d, 1) == 0);
    if (impl == SZ_CUDA_ATT_TILED)
        return sz_fa_fwd(s, out, stats, inp, d, 0);
    if (impl != SZ_CUDA_ATT_ROWWISE)
        return (int)cudaErrorInvalidValue;
    return sz_att_fwd_launch(s, out, stats, inp, B, T, C, NH);
}

template <typename DinT, typename DoutT>
static int sz_att_bwd_any(cudaStream_t s, DinT *dinp, const DoutT *dout, const float *inp, const float *stats, int B,
                          int T, int C, int NH, int set, int impl)
{
    sz_att_dims d;
    int rc = sz_att_dims_of(&d, B, T, C, NH);
    if (rc)
        return rc;
    if (impl != SZ_CUDA_ATT_ROWWISE)
        impl = sz_att_resolve(impl, sz_fa_bwd(s, dinp, dout, inp, stats, d, set, 1) == 0);
    if (impl == SZ_CUDA_ATT_TILED)
        return sz_fa_bwd(s, dinp, dout, inp, stats, d, set, 0);
    if (impl != SZ_CUDA_ATT_ROWWISE)
        return (int)cudaErrorInvalidValue;
    return sz_att_bwd_launch(s, dinp, dout, inp, stats, B, T, C, NH, set);
}

extern "C" int sz_cuda_attention_fwd_mx_impl(cudaStream_t s, void *out, int out_dt, float *stats, const float *inp,
                                             int B, int T, int C, int NH, int impl)
{
    if (out_dt == SZ_CUDA_BF16)
        return sz_att_fwd_any(s, (uint16_t *)out, stats, inp, B, T, C, NH, impl);
    return sz_att_fwd_any(s, (float *)out, stats, inp, B, T, C, NH, impl);
}

extern "C" int sz_cuda_attention_bwd_mx_impl(cudaStream_t s, void *dinp, int dinp_dt, const void *dout, int dout_dt,
                                             const float *inp, const float *stats, int B, int T, int C, int NH,
                                             int set, int impl)
{
    int st = (set & SZ_MX_SET_A) ? 1 : 0, ih = dinp_dt == SZ_CUDA_BF16, dh = dout_dt == SZ_CUDA_BF16;
    if (ih && dh)
        return sz_att_bwd_any(s, (uint16_t *)dinp, (const uint16_t *)dout, inp, stats, B, T, C, NH, st, impl);
    if (ih)
        return sz_att_bwd_any(s, (uint16_t *)dinp, (const float *)dout, inp, stats, B, T, C, NH, st, impl);
    if (dh)
        return sz_att_bwd_any(s, (float *)dinp, (const uint16_t *)dout, inp, stats, B, T, C, NH, st, impl);
    return sz_att_bwd_any(s, (float *)dinp, (const float *)dout, inp, stats, B, T, C, NH, st, impl);
}

extern "C" int sz_cuda_attention_tiled_covers(int T, int C, int NH, int bf16)
{
    sz_att_dims d;
    if (sz_att_dims_of(&d, 1, T, C, NH))
        return 0;
    if (bf16)
        return sz_fa_fwd(0, (uint16_t *)NULL, NULL, NULL, d, 1) == 0 &&
               sz_fa_bwd(0, (uint16_t *)NULL, (const uint16_t *)NULL, NULL, NULL, d, 0, 1) == 0;
    return sz_fa_fwd(0, (float *)NULL, NULL, NULL, d, 1) == 0 &&
           sz_fa_bwd(0, (float *)NULL, (const float *)NULL, NULL, NULL, d, 0, 1) == 0;
}

extern "C" int sz_cuda_attention_fwd(cudaStream_t s, float *out, float *stats, const float *inp, int B, int T,
                                     int C, int NH)
{
    return sz_att_fwd_any(s, out, stats, inp, B, T, C, NH, SZ_CUDA_ATT_AUTO);
}

extern "C" int sz_cuda_attention_bwd(cudaStream_t s, float *dinp, const float *dout, const float *inp,
                                     const float *stats, int B, int T, int C, int NH)
{
    return sz_att_bwd_any(s, dinp, dout, inp, stats, B, T, C, NH, 0, SZ_CUDA_ATT_AUTO);
}

extern "C" int sz_cuda_attention_fwd_mx(cudaStream_t s, void *out, int out_dt, float *stats, const float *inp, int B,
                                        int T, int C, int NH)
{
    return sz_cuda_attention_fwd_mx_impl(s, out, out_dt, stats, inp, B, T, C, NH, SZ_CUDA_ATT_AUTO);
}

extern "C" int sz_cuda_attention_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const void *dout, int dout_dt,
                                        const float *inp, const float *stats, int B, int T, int C, int NH, int set)
{
    return sz_cuda_attention_bwd_mx_impl(s, dinp, dinp_dt, dout, dout_dt, inp, stats, B, T, C, NH, set,
                                         SZ_CUDA_ATT_AUTO);
}
