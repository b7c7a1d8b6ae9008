/* codelets/kernels/cuda/rope.cu — CUDA twin of kernels/rope.c: rotary position embedding on a
 * fused [B,T,3C] q|k|v (hs = C/NH even). A cos/sin table [T, hs/2] is computed on the device in
 * double and rounded to float (as the CPU's table), then each q/k pair is rotated, v copied; the
 * backward applies the transpose and accumulates. Elementwise over pairs: no reduction. */
#include <math.h>
#include "sz_cuda_common.cuh"

__global__ static void rope_table_k(float *tab, int T, int hs, float theta)
{
    int h2 = hs / 2;
    size_t n = (size_t)T * h2;
    SZ_GRID_STRIDE(e, n) {
        int t = (int)(e / h2), i = (int)(e % h2);
        double ang = (double)t * pow((double)theta, -2.0 * i / hs);
        tab[2 * e] = (float)cos(ang);
        tab[2 * e + 1] = (float)sin(ang);
    }
}

/* One thread per (b,t) row element pair of q|k (2C/2 = C pairs per row) or element of v. */
__global__ static void rope_k(float *out, const float *inp, const float *tab, int BT, int T, int C, int NH, int bwd)
{
    int hs = C / NH, h2 = hs / 2;
    size_t per_row = (size_t)C + C; /* C pairs (q, k) + C elements of v */
    size_t n = (size_t)BT * per_row;
    SZ_GRID_STRIDE(e, n) {
        size_t bt = e / per_row, j = e % per_row;
        const float *x = inp + bt * 3 * C;
        float *o = out + bt * 3 * C;
        if (j >= (size_t)C) { /* v */
            size_t c = 2 * (size_t)C + (j - C);
            o[c] = bwd ? o[c] + x[c] : x[c];
            continue;
        }
        int part = (int)(j / (C / 2)), r = (int)(j % (C / 2)), h = r / h2, i = r % h2;
        const float *cs = tab + ((size_t)(bt % T) * h2 + i) * 2;
        size_t c0 = (size_t)part * C + (size_t)h * hs + 2 * i;
        float c = cs[0], s = cs[1], x0 = x[c0], x1 = x[c0 + 1];
        if (bwd) {
            o[c0] += x0 * c + x1 * s;
            o[c0 + 1] += x1 * c - x0 * s;
        } else {
            o[c0] = x0 * c - x1 * s;
            o[c0 + 1] = x0 * s + x1 * c;
        }
    }
}

static int sz_rope(cudaStream_t s, float *out, const float *inp, int B, int T, int C, int NH, float theta, int bwd)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH || (C / NH) % 2)
        return (int)cudaErrorInvalidValue;
    int hs = C / NH;
    float *tab = NULL;
    int rc = (int)cudaMallocAsync((void **)&tab, (size_t)T * hs * sizeof(float), s);
    if (rc)
        return rc;
    rope_table_k<<<sz_blocks((size_t)T * hs / 2, 256), 256, 0, s>>>(tab, T, hs, theta);
    rc = sz_launch_rc();
    if (!rc) {
        size_t n = (size_t)B * T * 2 * C;
        rope_k<<<sz_blocks(n, 256), 256, 0, s>>>(out, inp, tab, B * T, T, C, NH, bwd);
        rc = sz_launch_rc();
    }
    int rf = (int)cudaFreeAsync(tab, s);
    return rc ? rc : rf;
}

extern "C" int sz_cuda_rope_fwd(cudaStream_t s, float *out, const float *inp, int B, int T, int C, int NH, float theta)
{
    return sz_rope(s, out, inp, B, T, C, NH, theta, 0);
}

extern "C" int sz_cuda_rope_bwd(cudaStream_t s, float *dinp, const float *dout, int B, int T, int C, int NH,
                                float theta)
{
    return sz_rope(s, dinp, dout, B, T, C, NH, theta, 1);
}
