/* codelets/kernels/cuda/rope.cu — rotary position embedding (LLaMA-style) on the q and k thirds
 * of a [B,T,3C] q|k|v buffer, in place: pair (2i, 2i+1) of each head at position t rotated by
 * t * theta^(-2i/hs); the angle in double, its cos and sin rounded to float. The backward applies
 * the transpose (the opposite angle) to dq and dk. Elementwise over pairs: no reduction. */
#include <math.h>
#include "sz_cuda_common.cuh"

__global__ static void rope_k(float *x, int B, int T, int C, int NH, float theta, float sign)
{
    int hs = C / NH, half = hs / 2;
    size_t pairs = (size_t)B * T * 2 * NH * half; /* (b, t, q|k, head, i) */
    SZ_GRID_STRIDE(e, pairs) {
        int i = (int)(e % half);
        size_t r = e / half;
        int h = (int)(r % NH);
        r /= NH;
        int which = (int)(r % 2);
        size_t bt = r / 2;
        int t = (int)(bt % T);
        double ang = (double)t * pow((double)theta, -2.0 * i / hs);
        float c = (float)cos(ang), sn = sign * (float)sin(ang);
        float *p = x + bt * 3 * C + (size_t)which * C + (size_t)h * hs + 2 * i;
        float x0 = p[0], x1 = p[1];
        p[0] = x0 * c - x1 * sn;
        p[1] = x0 * sn + x1 * c;
    }
}

static int sz_rope(cudaStream_t s, float *x, int B, int T, int C, int NH, float theta, float sign)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH || (C / NH) % 2)
        return (int)cudaErrorInvalidValue;
    size_t pairs = (size_t)B * T * C; /* 2 thirds, hs/2 pairs per head */
    rope_k<<<sz_blocks(pairs, 256), 256, 0, s>>>(x, B, T, C, NH, theta, sign);
    return sz_launch_rc();
}

extern "C" int sz_cuda_rope_fwd(cudaStream_t s, float *qkv, int B, int T, int C, int NH, float theta)
{
    return sz_rope(s, qkv, B, T, C, NH, theta, 1.0f);
}

extern "C" int sz_cuda_rope_bwd(cudaStream_t s, float *dqkv, int B, int T, int C, int NH, float theta)
{
    return sz_rope(s, dqkv, B, T, C, NH, theta, -1.0f);
}
