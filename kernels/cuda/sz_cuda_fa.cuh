/* kernels/cuda/sz_cuda_fa.cuh — the device code of attention.cu's tiled (FlashAttention-2)
 * kernels: the shared-memory layout, the tile products (bf16 WMMA or fp32 FMA), the forward and the
 * two backward kernels. The scheme is described in attention.cu, which includes this file after its
 * own definitions (sz_att_dims) and does the launches. SZ_FA_EMULATE and SZ_FA_SMEM let the host
 * CUDA emulation (tests/cuda_emu) compile it with its WMMA stand-in and shared-memory buffer. */
#ifndef SZ_CUDA_FA_CUH
#define SZ_CUDA_FA_CUH

#ifndef SZ_FA_EMULATE
#include <cuda_bf16.h>
#include <mma.h>
#endif
#include <type_traits>

/* the dynamic shared memory of a block (the emulation: its own buffer) */
#ifndef SZ_FA_SMEM
#define SZ_FA_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

#define SZ_FA_B 64
#define SZ_FA_THREADS 128

/* Shared-memory layout of the three kernels for head size HS and element type E: row strides
 * padded by 16 bytes (WMMA wants ldm a multiple of 16 bytes and 32-byte aligned fragment
 * pointers: every fragment starts at a multiple of 16 rows and 16 columns; the padding also moves
 * consecutive rows by 4 banks), regions 128-byte aligned. With E = float, P lives in S and dS in
 * dP (each element read, then written, by the same thread). */
template <int HS, typename E> struct sz_fa_lay {
    static constexpr int LDE = HS + 16 / (int)sizeof(E); /* q, k, v, dout tiles (E) */
    static constexpr int LDS = SZ_FA_B + 4;              /* S, dP (fp32) */
    static constexpr int LDP = SZ_FA_B + 16 / (int)sizeof(E); /* P, dS (E); = LDS for float */
    static constexpr int LDO = HS + 4;                   /* O, dQ, dK, dV accumulators (fp32) */
    static constexpr size_t al(size_t x) { return (x + 127) & ~(size_t)127; }
    static constexpr size_t tE = al((size_t)SZ_FA_B * LDE * sizeof(E));
    static constexpr size_t tS = al((size_t)SZ_FA_B * LDS * 4);
    static constexpr size_t tP = sizeof(E) == 4 ? 0 : al((size_t)SZ_FA_B * LDP * sizeof(E));
    static constexpr size_t tO = al((size_t)SZ_FA_B * LDO * 4);
    static constexpr size_t tR = al((size_t)SZ_FA_B * 4);
    static constexpr size_t fwd = 3 * tE + tS + tP + tO + 2 * tR;
    static constexpr size_t dq = 4 * tE + 2 * tS + tP + tO + 3 * tR;
    static constexpr size_t dkv = 4 * tE + 2 * tS + 2 * tP + 2 * tO + 3 * tR;
};

__device__ __forceinline__ void sz_fa_cvt(float *p, float x) { *p = x; }
__device__ __forceinline__ void sz_fa_cvt(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

/* Rows r0.. of a [*, ld_g] operand (row r at g + r * ld_g, HS columns) into a tile of E, rows at
 * or beyond n (past T) zero. Consecutive threads take consecutive columns (coalesced). */
template <int HS, typename E, typename G>
__device__ __forceinline__ void sz_fa_load(E *dst, int ld, const G *g, size_t ld_g, int r0, int n)
{
    for (int i = threadIdx.x; i < SZ_FA_B * HS; i += SZ_FA_THREADS) {
        int r = i / HS, c = i - r * HS;
        float x = r0 + r < n ? sz_mx_get(g, (size_t)(r0 + r) * ld_g + (size_t)c) : 0.0f;
        sz_fa_cvt(dst + r * ld + c, x);
    }
}

/* C[64 x 16NF] (+)= op(A)[64 x 16KF] op(B)[16KF x 16NF], all in shared memory, row-major: op(A) =
 * A (A[m*lda + k]) or A^T (TA: A[k*lda + m]); op(B) = B (B[k*ldb + n]) or B^T (TB: B[n*ldb + k]).
 * bf16: WMMA, warp w the fragments of rows 16w..16w+15, k in order. The caller synchronises
 * before (operands written) and after (C read). */
template <bool TA, bool TB, bool ACC, int NF, int KF>
__device__ __forceinline__ void sz_fa_mm(float *C, int ldc, const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B,
                                         int ldb)
{
    using namespace nvcuda;
    typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
    typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LB;
    const int mi = threadIdx.x >> 5;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NF];
#pragma unroll
    for (int n = 0; n < NF; n++) {
        if (ACC)
            wmma::load_matrix_sync(acc[n], C + 16 * mi * ldc + 16 * n, (unsigned)ldc, wmma::mem_row_major);
        else
            wmma::fill_fragment(acc[n], 0.0f);
    }
#pragma unroll
    for (int k = 0; k < KF; k++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LA> a;
        wmma::load_matrix_sync(a, TA ? A + 16 * k * lda + 16 * mi : A + 16 * mi * lda + 16 * k, (unsigned)lda);
#pragma unroll
        for (int n = 0; n < NF; n++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LB> b;
            wmma::load_matrix_sync(b, TB ? B + 16 * n * ldb + 16 * k : B + 16 * k * ldb + 16 * n, (unsigned)ldb);
            wmma::mma_sync(acc[n], a, b, acc[n]);
        }
    }
#pragma unroll
    for (int n = 0; n < NF; n++)
        wmma::store_matrix_sync(C + 16 * mi * ldc + 16 * n, acc[n], (unsigned)ldc, wmma::mem_row_major);
}

/* fp32: lane l of warp w computes rows 16w + 8(l/16) + i (i < 8) x columns (l%16) + 16j (j < NF),
 * one FMA chain per element, k = 0, 1, ... in order. */
template <bool TA, bool TB, bool ACC, int NF, int KF>
__device__ __forceinline__ void sz_fa_mm(float *C, int ldc, const float *A, int lda, const float *B, int ldb)
{
    const int lane = threadIdx.x & 31, r0 = 16 * (threadIdx.x >> 5) + 8 * (lane >> 4), c0 = lane & 15;
    float acc[8][NF];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < NF; j++)
            acc[i][j] = ACC ? C[(r0 + i) * ldc + c0 + 16 * j] : 0.0f;
#pragma unroll 4
    for (int k = 0; k < 16 * KF; k++) {
        float a[8], b[NF];
#pragma unroll
        for (int i = 0; i < 8; i++)
            a[i] = TA ? A[k * lda + r0 + i] : A[(r0 + i) * lda + k];
#pragma unroll
        for (int j = 0; j < NF; j++)
            b[j] = TB ? B[(c0 + 16 * j) * ldb + k] : B[k * ldb + c0 + 16 * j];
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < NF; j++)
                acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < NF; j++)
            C[(r0 + i) * ldc + c0 + 16 * j] = acc[i][j];
}

/* Query tile index of this block: the largest (most key tiles) first. */
__device__ __forceinline__ int sz_fa_tile(void) { return (int)(gridDim.x - 1 - blockIdx.x); }

template <int HS, typename E, typename OutT>
__global__ static void __launch_bounds__(SZ_FA_THREADS) fa_fwd_k(OutT *out, float *stats, const float *inp, sz_att_dims d)
{
    typedef sz_fa_lay<HS, E> L;
    SZ_FA_SMEM(sm);
    E *Q = (E *)sm, *K = (E *)(sm + L::tE), *V = (E *)(sm + 2 * L::tE);
    float *S = (float *)(sm + 3 * L::tE);
    E *P = L::tP ? (E *)(sm + 3 * L::tE + L::tS) : (E *)S;
    float *O = (float *)(sm + 3 * L::tE + L::tS + L::tP);
    float *M = (float *)(sm + 3 * L::tE + L::tS + L::tP + L::tO), *Ls = M + L::tR / 4;
    const int qt = sz_fa_tile(), h = blockIdx.y, b = blockIdx.z, T = d.T, q0 = qt * SZ_FA_B;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const size_t ld3 = 3 * (size_t)d.C;
    const float *base = inp + (size_t)b * T * ld3 + (size_t)h * HS;
    sz_fa_load<HS>(Q, L::LDE, base, ld3, q0, T);
    for (int i = threadIdx.x; i < SZ_FA_B * L::LDO; i += SZ_FA_THREADS)
        O[i] = 0.0f;
    if (threadIdx.x < SZ_FA_B)
        M[threadIdx.x] = -10000.0f, Ls[threadIdx.x] = 0.0f;
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * SZ_FA_B;
        __syncthreads(); /* the previous tile's P V done with K, V, P */
        sz_fa_load<HS>(K, L::LDE, base + d.C, ld3, k0, T);
        sz_fa_load<HS>(V, L::LDE, base + 2 * (size_t)d.C, ld3, k0, T);
        __syncthreads();
        sz_fa_mm<false, true, false, SZ_FA_B / 16, HS / 16>(S, L::LDS, Q, L::LDE, K, L::LDE);
        __syncthreads();
        for (int rr = 0; rr < 16; rr++) { /* warp w: rows 16w.., lane: columns lane, lane + 32 */
            const int r = 16 * w + rr, t = q0 + r;
            const bool v0 = t < T && k0 + lane <= t, v1 = t < T && k0 + lane + 32 <= t;
            const float s0 = S[r * L::LDS + lane] * d.scale, s1 = S[r * L::LDS + lane + 32] * d.scale;
            const float mx = sz_warp_max(fmaxf(v0 ? s0 : -INFINITY, v1 ? s1 : -INFINITY));
            const float mold = M[r], lold = Ls[r], mnew = fmaxf(mold, mx), alpha = sz_d_expf(mold - mnew);
            const float p0 = v0 ? sz_d_expf(s0 - mnew) : 0.0f, p1 = v1 ? sz_d_expf(s1 - mnew) : 0.0f;
            sz_fa_cvt(P + r * L::LDP + lane, p0);
            sz_fa_cvt(P + r * L::LDP + lane + 32, p1);
            const float ps = sz_warp_sum(p0 + p1);
            for (int c = lane; c < HS; c += 32)
                O[r * L::LDO + c] *= alpha;
            __syncwarp();
            if (lane == 0)
                M[r] = mnew, Ls[r] = lold * alpha + ps;
        }
        __syncthreads();
        sz_fa_mm<false, false, true, HS / 16, SZ_FA_B / 16>(O, L::LDO, P, L::LDP, V, L::LDE);
    }
    __syncthreads();
    OutT *ob = out + (size_t)b * T * d.C + (size_t)h * HS;
    for (int i = threadIdx.x; i < SZ_FA_B * HS; i += SZ_FA_THREADS) {
        int r = i / HS, c = i - r * HS;
        if (q0 + r < T) {
            float l = Ls[r], inv = l == 0.0f ? 0.0f : 1.0f / l;
            sz_mx_put(ob, (size_t)(q0 + r) * d.C + (size_t)c, O[r * L::LDO + c] * inv);
        }
    }
    if (threadIdx.x < SZ_FA_B && q0 + (int)threadIdx.x < T) {
        float l = Ls[threadIdx.x];
        float *st = stats + (((size_t)b * d.NH + h) * T + q0 + threadIdx.x) * 2;
        st[0] = M[threadIdx.x];
        st[1] = l == 0.0f ? 0.0f : 1.0f / l;
    }
}

/* The backward's per-row pass over one (query tile q0, key tile k0) pair, warp w rows 16w..: from S
 * (q k^T) and dP (dout v^T), p = exp(s scale - max) inv (0 where masked); mode 0: Dr[r] += sum p dP;
 * mode 1: dS = p (dP - Dr[r]) scale into dS, and (Pout) p into P. Mx, Inv, Dr per tile row. */
template <typename E>
__device__ __forceinline__ void sz_fa_bwd_rows(int mode, const float *S, const float *dP, int lds, E *P, E *dS,
                                               int ldp, const float *Mx, const float *Inv, float *Dr, int q0, int k0,
                                               int T, float scale)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int rr = 0; rr < 16; rr++) {
        const int r = 16 * w + rr, t = q0 + r;
        float part = 0.0f, dr = mode ? Dr[r] : 0.0f;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int c = lane + 32 * j;
            const bool v = t < T && k0 + c <= t;
            const float s = S[r * lds + c], dp = dP[r * lds + c];
            const float p = v ? sz_d_expf(s * scale - Mx[r]) * Inv[r] : 0.0f;
            if (mode == 0)
                part += p * dp;
            else {
                if (P)
                    sz_fa_cvt(P + r * ldp + c, p);
                sz_fa_cvt(dS + r * ldp + c, (p * (dp - dr)) * scale);
            }
        }
        if (mode == 0) {
            part = sz_warp_sum(part);
            if (lane == 0)
                Dr[r] += part;
        }
    }
}

/* stats rows of query tile q0 into Mx, Inv (rows past T: 0) */
__device__ __forceinline__ void sz_fa_stats(float *Mx, float *Inv, const float *st, int q0, int T)
{
    if (threadIdx.x < SZ_FA_B) {
        int t = q0 + threadIdx.x;
        Mx[threadIdx.x] = t < T ? st[2 * (size_t)t] : 0.0f;
        Inv[threadIdx.x] = t < T ? st[2 * (size_t)t + 1] : 0.0f;
    }
}

template <int HS, typename E, typename DinT, typename DoutT>
__global__ static void __launch_bounds__(SZ_FA_THREADS)
    fa_bwd_dq_k(DinT *dinp, float *Dg, const DoutT *dout, const float *inp, const float *stats, sz_att_dims d, int set)
{
    typedef sz_fa_lay<HS, E> L;
    SZ_FA_SMEM(sm);
    E *Q = (E *)sm, *dO = (E *)(sm + L::tE), *K = (E *)(sm + 2 * L::tE), *V = (E *)(sm + 3 * L::tE);
    float *S = (float *)(sm + 4 * L::tE), *dP = (float *)(sm + 4 * L::tE + L::tS);
    E *dS = L::tP ? (E *)(sm + 4 * L::tE + 2 * L::tS) : (E *)dP;
    float *dQ = (float *)(sm + 4 * L::tE + 2 * L::tS + L::tP);
    float *Mx = (float *)(sm + 4 * L::tE + 2 * L::tS + L::tP + L::tO), *Inv = Mx + L::tR / 4, *Dr = Inv + L::tR / 4;
    const int qt = sz_fa_tile(), h = blockIdx.y, b = blockIdx.z, T = d.T, q0 = qt * SZ_FA_B;
    const size_t ld3 = 3 * (size_t)d.C, bh = (size_t)b * d.NH + h;
    const float *base = inp + (size_t)b * T * ld3 + (size_t)h * HS;
    sz_fa_load<HS>(Q, L::LDE, base, ld3, q0, T);
    sz_fa_load<HS>(dO, L::LDE, dout + (size_t)b * T * d.C + (size_t)h * HS, (size_t)d.C, q0, T);
    for (int i = threadIdx.x; i < SZ_FA_B * L::LDO; i += SZ_FA_THREADS)
        dQ[i] = 0.0f;
    sz_fa_stats(Mx, Inv, stats + bh * T * 2, q0, T);
    if (threadIdx.x < SZ_FA_B)
        Dr[threadIdx.x] = 0.0f;
    for (int pass = 0; pass < 2; pass++)
        for (int kt = 0; kt <= qt; kt++) {
            const int k0 = kt * SZ_FA_B;
            __syncthreads();
            sz_fa_load<HS>(K, L::LDE, base + d.C, ld3, k0, T);
            sz_fa_load<HS>(V, L::LDE, base + 2 * (size_t)d.C, ld3, k0, T);
            __syncthreads();
            sz_fa_mm<false, true, false, SZ_FA_B / 16, HS / 16>(S, L::LDS, Q, L::LDE, K, L::LDE);
            sz_fa_mm<false, true, false, SZ_FA_B / 16, HS / 16>(dP, L::LDS, dO, L::LDE, V, L::LDE);
            __syncthreads();
            sz_fa_bwd_rows<E>(pass, S, dP, L::LDS, (E *)NULL, dS, L::LDP, Mx, Inv, Dr, q0, k0, T, d.scale);
            if (pass == 1) {
                __syncthreads();
                sz_fa_mm<false, false, true, HS / 16, SZ_FA_B / 16>(dQ, L::LDO, dS, L::LDP, K, L::LDE);
            }
        }
    __syncthreads();
    DinT *dq = dinp + (size_t)b * T * ld3 + (size_t)h * HS;
    for (int i = threadIdx.x; i < SZ_FA_B * HS; i += SZ_FA_THREADS) {
        int r = i / HS, c = i - r * HS;
        if (q0 + r < T)
            sz_mx_acc(dq, (size_t)(q0 + r) * ld3 + (size_t)c, dQ[r * L::LDO + c], set);
    }
    if (threadIdx.x < SZ_FA_B && q0 + (int)threadIdx.x < T)
        Dg[bh * T + q0 + threadIdx.x] = Dr[threadIdx.x];
}

template <int HS, typename E, typename DinT, typename DoutT>
__global__ static void __launch_bounds__(SZ_FA_THREADS)
    fa_bwd_dkv_k(DinT *dinp, const float *Dg, const DoutT *dout, const float *inp, const float *stats, sz_att_dims d,
                 int set)
{
    typedef sz_fa_lay<HS, E> L;
    SZ_FA_SMEM(sm);
    E *K = (E *)sm, *V = (E *)(sm + L::tE), *Q = (E *)(sm + 2 * L::tE), *dO = (E *)(sm + 3 * L::tE);
    float *S = (float *)(sm + 4 * L::tE), *dP = (float *)(sm + 4 * L::tE + L::tS);
    E *P = L::tP ? (E *)(sm + 4 * L::tE + 2 * L::tS) : (E *)S;
    E *dS = L::tP ? (E *)(sm + 4 * L::tE + 2 * L::tS + L::tP) : (E *)dP;
    float *dK = (float *)(sm + 4 * L::tE + 2 * L::tS + 2 * L::tP), *dV = dK + L::tO / 4;
    float *Mx = (float *)(sm + 4 * L::tE + 2 * L::tS + 2 * L::tP + 2 * L::tO), *Inv = Mx + L::tR / 4,
          *Dr = Inv + L::tR / 4;
    const int kt = sz_fa_tile(), h = blockIdx.y, b = blockIdx.z, T = d.T, k0 = kt * SZ_FA_B;
    const int nt = (int)gridDim.x;
    const size_t ld3 = 3 * (size_t)d.C, bh = (size_t)b * d.NH + h;
    const float *base = inp + (size_t)b * T * ld3 + (size_t)h * HS;
    const DoutT *dbase = dout + (size_t)b * T * d.C + (size_t)h * HS;
    sz_fa_load<HS>(K, L::LDE, base + d.C, ld3, k0, T);
    sz_fa_load<HS>(V, L::LDE, base + 2 * (size_t)d.C, ld3, k0, T);
    for (int i = threadIdx.x; i < 2 * (int)(L::tO / 4); i += SZ_FA_THREADS)
        dK[i] = 0.0f; /* dK and dV */
    for (int qt = kt; qt < nt; qt++) {
        const int q0 = qt * SZ_FA_B;
        __syncthreads();
        sz_fa_load<HS>(Q, L::LDE, base, ld3, q0, T);
        sz_fa_load<HS>(dO, L::LDE, dbase, (size_t)d.C, q0, T);
        sz_fa_stats(Mx, Inv, stats + bh * T * 2, q0, T);
        if (threadIdx.x < SZ_FA_B)
            Dr[threadIdx.x] = q0 + (int)threadIdx.x < T ? Dg[bh * T + q0 + threadIdx.x] : 0.0f;
        __syncthreads();
        sz_fa_mm<false, true, false, SZ_FA_B / 16, HS / 16>(S, L::LDS, Q, L::LDE, K, L::LDE);
        sz_fa_mm<false, true, false, SZ_FA_B / 16, HS / 16>(dP, L::LDS, dO, L::LDE, V, L::LDE);
        __syncthreads();
        sz_fa_bwd_rows<E>(1, S, dP, L::LDS, P, dS, L::LDP, Mx, Inv, Dr, q0, k0, T, d.scale);
        __syncthreads();
        sz_fa_mm<true, false, true, HS / 16, SZ_FA_B / 16>(dV, L::LDO, P, L::LDP, dO, L::LDE);
        sz_fa_mm<true, false, true, HS / 16, SZ_FA_B / 16>(dK, L::LDO, dS, L::LDP, Q, L::LDE);
    }
    __syncthreads();
    DinT *dk = dinp + (size_t)b * T * ld3 + d.C + (size_t)h * HS, *dv = dk + d.C;
    for (int i = threadIdx.x; i < SZ_FA_B * HS; i += SZ_FA_THREADS) {
        int r = i / HS, c = i - r * HS;
        if (k0 + r < T) {
            size_t o = (size_t)(k0 + r) * ld3 + (size_t)c;
            sz_mx_acc(dk, o, dK[r * L::LDO + c], set);
            sz_mx_acc(dv, o, dV[r * L::LDO + c], set);
        }
    }
}

#endif /* SZ_CUDA_FA_CUH */
