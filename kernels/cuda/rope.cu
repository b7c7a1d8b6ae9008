/* kernels/cuda/rope.cu — CUDA twin of kernels/rope.c: rotary position embedding on a
 * fused [B,T,3C] q|k|v (hs = C/NH even). A cos/sin table [T, hs/2] is computed on the device in
 * double and rounded to float (as the CPU's table), then each q/k pair is rotated, v copied; the
 * backward applies the transpose and accumulates. Elementwise over pairs: no reduction.
 * The native bf16 path's backward (sz_cuda_rope_bwd_mx, as sz_k_rope_bwd_mx_set): dinp and dout
 * fp32 or bf16, the fp32 kernel's expressions on the widened values, each bf16 dinp element rounded
 * once from round(f32(dinp) + contribution); set (a folded sz_op_zero) writes the contribution. */
#include <math.h>
#include "sz_cuda_mx.cuh"

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

/* rope_k's backward with typed dinp / dout and set. */
__global__ static void rope_bwd_mx_k(void *dinp, int ddt, const void *dout, int odt, const float *tab, int BT, int T,
                                     int C, int NH, int set)
{
    int hs = C / NH, h2 = hs / 2;
    size_t per_row = (size_t)C + C;
    size_t n = (size_t)BT * per_row;
    SZ_GRID_STRIDE(e, n) {
        size_t bt = e / per_row, j = e % per_row, row = bt * 3 * C;
        if (j >= (size_t)C) { /* v */
            size_t c = row + 2 * (size_t)C + (j - C);
            sz_mx_acc_dt(dinp, ddt, c, sz_d_ld(dout, odt, c), set);
            continue;
        }
        int part = (int)(j / (C / 2)), r = (int)(j % (C / 2)), h = r / h2, i = r % h2;
        const float *cs = tab + ((size_t)(bt % T) * h2 + i) * 2;
        size_t c0 = row + (size_t)part * C + (size_t)h * hs + 2 * i;
        float c = cs[0], s = cs[1], x0 = sz_d_ld(dout, odt, c0), x1 = sz_d_ld(dout, odt, c0 + 1);
        sz_mx_acc_dt(dinp, ddt, c0, x0 * c + x1 * s, set);
        sz_mx_acc_dt(dinp, ddt, c0 + 1, x1 * c - x0 * s, set);
    }
}

/* mx: the backward through rope_bwd_mx_k on out / inp of types odt / idt with set; else rope_k. */
static int sz_rope(cudaStream_t s, void *out, const void *inp, int B, int T, int C, int NH, float theta, int bwd,
                   int mx = 0, int odt = 0, int idt = 0, int set = 0)
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
        if (mx)
            rope_bwd_mx_k<<<sz_blocks(n, 256), 256, 0, s>>>(out, odt, inp, idt, tab, B * T, T, C, NH, set);
        else
            rope_k<<<sz_blocks(n, 256), 256, 0, s>>>((float *)out, (const float *)inp, tab, B * T, T, C, NH, bwd);
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

extern "C" int sz_cuda_rope_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const void *dout, int dout_dt, int B, int T,
                                   int C, int NH, float theta, int set)
{
    int sd = (set & SZ_MX_SET_A) ? 1 : 0;
    if (dinp_dt != SZ_CUDA_BF16 && dout_dt != SZ_CUDA_BF16 && !sd)
        return sz_rope(s, dinp, dout, B, T, C, NH, theta, 1);
    return sz_rope(s, dinp, dout, B, T, C, NH, theta, 1, 1, dinp_dt == SZ_CUDA_BF16, dout_dt == SZ_CUDA_BF16, sd);
}
