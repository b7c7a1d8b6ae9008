/* kernels/cuda/encoder.cu — CUDA twin of kernels/encoder.c (GPT-2 token + position
 * embedding) and the token embedding without positions (LLaMA-style). The backward sums rows
 * into shared rows of dwte/dwpe; to keep the CPU's order without atomics, each thread owns one
 * column c of a set of token rows (tokens with tok % SZ_EMB_PARTS == part) and walks every row
 * (b,t) in order, adding only its tokens: every dwte element receives its terms in the CPU's
 * order, so the sums are bitwise the CPU's. dwpe[t] gets the B rows of position t in order. The
 * forward also reads bf16 tables (the native bf16 path: widened exactly, an fp32 sum, as the CPU). */
#include <limits.h>
#include "sz_cuda_mx.cuh"

#define SZ_EMB_PARTS 128 /* more parts: fewer matches per thread, whose read-modify-writes are serial */

/* out[bt, c] = wte[tok[bt], c] (+ wpe[bt % T, c] with_pos), tables of type TP (a bf16 one widened
 * exactly: the CPU's sz_k_encoder_fwd_mx / sz_k_embedding_fwd_mx bits). */
template <typename TP>
__global__ static void encoder_fwd_k(float *out, const int *tok, const TP *wte, const TP *wpe, int BT, int T, int C,
                                     int with_pos, int V)
{
    size_t n = (size_t)BT * C;
    SZ_GRID_STRIDE(i, n) {
        size_t bt = i / C, c = i % C;
        int v = tok[bt];
        if (v < 0 || v >= V)
            continue;
        float x = sz_mx_get(wte, (size_t)v * C + c);
        out[i] = with_pos ? x + sz_mx_get(wpe, (bt % T) * C + c) : x;
    }
}

/* The forward from tables of type p_dt. */
static int sz_enc_fwd(cudaStream_t s, float *out, const int *tok, const void *wte, const void *wpe, int p_dt, int BT,
                      int T, int C, int with_pos, int V)
{
    if (p_dt != SZ_CUDA_F32 && p_dt != SZ_CUDA_BF16)
        return (int)cudaErrorInvalidValue;
    size_t n = (size_t)(BT > 0 ? BT : 0) * (size_t)(C > 0 ? C : 0);
    if (!n)
        return 0;
    if (p_dt == SZ_CUDA_BF16)
        encoder_fwd_k<uint16_t><<<sz_blocks(n, 256), 256, 0, s>>>(out, tok, (const uint16_t *)wte,
                                                                  (const uint16_t *)wpe, BT, T, C, with_pos, V);
    else
        encoder_fwd_k<float><<<sz_blocks(n, 256), 256, 0, s>>>(out, tok, (const float *)wte, (const float *)wpe, BT,
                                                               T, C, with_pos, V);
    return sz_launch_rc();
}

/* thread (c, part): dwte[v, c] += dout[bt, c] for every bt with tok[bt] = v, v % PARTS = part. */
__global__ static void emb_bwd_wte_k(float *dwte, const float *dout, const int *tok, int BT, int C, int V)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, part = blockIdx.y;
    if (c >= C)
        return;
    for (int bt = 0; bt < BT; bt++) {
        int v = tok[bt];
        if (v >= 0 && v < V && v % SZ_EMB_PARTS == part)
            dwte[(size_t)v * C + c] += dout[(size_t)bt * C + c];
    }
}

/* thread (t, c): dwpe[t, c] += dout[b, t, c] for b = 0..B-1 in order. */
__global__ static void enc_bwd_wpe_k(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t n = (size_t)T * C;
    SZ_GRID_STRIDE(i, n) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++)
            acc += dout[(size_t)b * n + i];
        dwpe[i] = acc;
    }
}

extern "C" int sz_cuda_encoder_fwd(cudaStream_t s, float *out, const int *tok, const float *wte,
                                   const float *wpe, int B, int T, int C)
{
    return sz_enc_fwd(s, out, tok, wte, wpe, SZ_CUDA_F32, B * T, T, C, 1, INT_MAX);
}

extern "C" int sz_cuda_encoder_fwd_mx(cudaStream_t s, float *out, const int *tok, const void *wte, const void *wpe,
                                      int p_dt, int B, int T, int C)
{
    return sz_enc_fwd(s, out, tok, wte, wpe, p_dt, B * T, T, C, 1, INT_MAX);
}

static int sz_emb_wte_bwd(cudaStream_t s, float *dwte, const float *dout, const int *tok, int BT, int C, int V)
{
    if (!BT || !C)
        return 0;
    dim3 grid((unsigned)((C + 127) / 128), SZ_EMB_PARTS);
    emb_bwd_wte_k<<<grid, 128, 0, s>>>(dwte, dout, tok, BT, C, V);
    return sz_launch_rc();
}

extern "C" int sz_cuda_encoder_bwd(cudaStream_t s, float *dwte, float *dwpe, const float *dout,
                                   const int *tok, int B, int T, int C)
{
    int rc = sz_emb_wte_bwd(s, dwte, dout, tok, B * T, C, INT_MAX);
    if (rc || T <= 0 || C <= 0)
        return rc;
    /* dwpe: B terms per element, in b order (the CPU adds rows (b,t) in order, so each dwpe
     * element also receives its B terms in b order). */
    enc_bwd_wpe_k<<<sz_blocks((size_t)T * C, 256), 256, 0, s>>>(dwpe, dout, B, T, C);
    return sz_launch_rc();
}

extern "C" int sz_cuda_embedding_fwd(cudaStream_t s, float *out, const int *tok, const float *wte, int N, int C, int V)
{
    return sz_enc_fwd(s, out, tok, wte, NULL, SZ_CUDA_F32, N, 1, C, 0, V);
}

extern "C" int sz_cuda_embedding_fwd_mx(cudaStream_t s, float *out, const int *tok, const void *wte, int p_dt, int N,
                                        int C, int V)
{
    return sz_enc_fwd(s, out, tok, wte, NULL, p_dt, N, 1, C, 0, V);
}

extern "C" int sz_cuda_embedding_bwd(cudaStream_t s, float *dwte, const float *dout, const int *tok, int N, int C,
                                     int V)
{
    return sz_emb_wte_bwd(s, dwte, dout, tok, N, C, V);
}
