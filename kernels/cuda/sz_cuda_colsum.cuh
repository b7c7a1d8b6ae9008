/* kernels/cuda/sz_cuda_colsum.cuh — the parameter gradients' sums over rows (the matmul's
 * bias gradient, the norms' weight and bias gradients): out[q][c] (+)= sum_n term_q(n, c), in a fixed
 * order decided by the shape alone, with no atomics, so the bits are the same run to run:
 *   stage 1: rows in chunks of SZ_CS_CHUNK; in a chunk, row lane j (of SZ_CS_LANES) adds rows
 *            j, j + LANES, ... in order, then the lanes' sums are added in lane order: one partial
 *            per (chunk, column), in a stream-ordered scratch (cudaMallocAsync);
 *   stage 2: per column, the current value plus the chunks' partials in chunk order, rounded once
 *            to the destination's type.
 * Every SM takes part (a block per 32 columns and chunk), where one thread per column adding all N
 * rows in order (the CPU's order) left the GPU idle: at GPT-2 124M's N = 16384 rows that took about a
 * millisecond per call against tens of microseconds. The values agree with the CPU's row-ordered
 * sums to rounding, not bitwise. Private to kernels/cuda. */
#ifndef SZ_CUDA_COLSUM_CUH
#define SZ_CUDA_COLSUM_CUH

#include "sz_cuda_mx.cuh"

#define SZ_CS_COLS 32   /* columns per stage-1 block: a warp's coalesced row segment */
#define SZ_CS_LANES 8   /* row lanes per stage-1 block (its warps) */
#define SZ_CS_CHUNK 128 /* rows per chunk */
#define SZ_CS_MAXQ 2    /* quantities summed at once (the layernorm's dweight and dbias) */

/* Term: a functor with __device__ void operator()(int n, int c, float *t) writing its NQ terms of
 * row n, column c. */
template <int NQ, typename Term>
__global__ static void sz_cs_stage1_k(float *part, Term term, int N, int C, int K)
{
    __shared__ float sh[NQ][SZ_CS_LANES][SZ_CS_COLS];
    int cx = threadIdx.x % SZ_CS_COLS, ry = threadIdx.x / SZ_CS_COLS;
    int c = blockIdx.x * SZ_CS_COLS + cx, k = blockIdx.y;
    int n0 = k * SZ_CS_CHUNK;
    float acc[NQ];
#pragma unroll
    for (int q = 0; q < NQ; q++)
        acc[q] = 0.0f;
    if (c < C) {
#pragma unroll
        for (int j = 0; j < SZ_CS_CHUNK / SZ_CS_LANES; j++) {
            int n = n0 + ry + j * SZ_CS_LANES;
            if (n < N) {
                float t[NQ];
                term(n, c, t);
#pragma unroll
                for (int q = 0; q < NQ; q++)
                    acc[q] += t[q];
            }
        }
    }
#pragma unroll
    for (int q = 0; q < NQ; q++)
        sh[q][ry][cx] = acc[q];
    __syncthreads();
    if (ry == 0 && c < C) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            float sum = sh[q][0][cx];
            for (int j = 1; j < SZ_CS_LANES; j++)
                sum += sh[q][j][cx];
            part[((size_t)q * K + k) * C + c] = sum;
        }
    }
}

/* out_q[c] = out_q[c] + the K partials of column c in chunk order (out_q NULL: skipped); out of
 * type dt (bf16: rounded once). Bit q of fresh: out_q is not read, its sum starts at 0 (a first
 * writer's set: the same bits as onto a zeroed out_q). */
template <int NQ>
__global__ static void sz_cs_stage2_k(void *out0, void *out1, int dt, const float *part, int K, int C, int fresh)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
#pragma unroll
    for (int q = 0; q < NQ; q++) {
        void *o = q ? out1 : out0;
        if (!o)
            continue;
        const float *p = part + (size_t)q * K * C + c;
        float acc = (fresh >> q) & 1 ? 0.0f : sz_d_ld(o, dt, c);
        int k = 0;
        for (; k + 16 <= K; k += 16) {
            float t[16];
#pragma unroll
            for (int i = 0; i < 16; i++)
                t[i] = p[(size_t)(k + i) * C];
#pragma unroll
            for (int i = 0; i < 16; i++)
                acc += t[i];
        }
        for (; k < K; k++)
            acc += p[(size_t)k * C];
        sz_d_st(o, dt, c, acc);
    }
}

/* out0[c] (+)= sum_n term_0(n, c), out1 likewise with term_1 (NQ = 2); out0 / out1 NULL: not
 * written; dt their type. Bit q of fresh (SZ_CS_FRESH0 / 1): out_q is set (=), not added to, and
 * not read (with no rows: zeroed). 0, or a cudaError_t. */
#define SZ_CS_FRESH0 1
#define SZ_CS_FRESH1 2
template <int NQ, typename Term>
static int sz_colsum(cudaStream_t s, void *out0, void *out1, int dt, Term term, int N, int C, int fresh = 0)
{
    if (C > 0 && N <= 0) { /* no rows: a set output is 0, an accumulated one unchanged */
        int rc = 0;
        for (int q = 0; q < NQ && !rc; q++) {
            void *o = q ? out1 : out0;
            if (o && ((fresh >> q) & 1))
                rc = (int)cudaMemsetAsync(o, 0, (size_t)C * (dt == SZ_CUDA_BF16 ? 2 : 4), s);
        }
        return rc;
    }
    if (N <= 0 || C <= 0 || (!out0 && !out1))
        return 0;
    int K = (N + SZ_CS_CHUNK - 1) / SZ_CS_CHUNK;
    if (K > 65535)
        return (int)cudaErrorInvalidValue; /* more than 8.4 million rows */
    float *part = NULL;
    int rc = (int)cudaMallocAsync((void **)&part, (size_t)NQ * K * C * sizeof(float), s);
    if (rc)
        return rc;
    dim3 g1((unsigned)((C + SZ_CS_COLS - 1) / SZ_CS_COLS), (unsigned)K);
    sz_cs_stage1_k<NQ, Term><<<g1, SZ_CS_COLS * SZ_CS_LANES, 0, s>>>(part, term, N, C, K);
    rc = sz_launch_rc();
    if (!rc) {
        sz_cs_stage2_k<NQ><<<(unsigned)((C + 31) / 32), 32, 0, s>>>(out0, out1, dt, part, K, C, fresh);
        rc = sz_launch_rc();
    }
    int rf = (int)cudaFreeAsync(part, s);
    return rc ? rc : rf;
}

#endif /* SZ_CUDA_COLSUM_CUH */
