/* rope.c — rotary position embedding on a fused qkv [B,T,3C] (q | k | v, NH heads of hs = C/NH,
 * hs even): in q and k, each head's pair (2i, 2i+1) at position t is rotated by the angle
 * t · theta^(-2i/hs); v is copied (forward) or its gradient passed through (backward). The cos
 * and sin table [T, hs/2] is computed in double, then rounded to float, once per call. Rows are
 * independent, so the same bits whatever the thread count. The row math (sz_rope_row_fwd, _bwd) is in
 * sz_kernels_impl.h, shared with the bf16-operand backward (bf16_act.c). */
#include <math.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

float *sz_rope_table(int T, int hs, float theta)
{
    int h2 = hs / 2;
    float *tab = malloc((size_t)T * h2 * 2 * sizeof *tab);
    if (!tab)
        return NULL;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < h2; i++) {
            double ang = (double)t * pow((double)theta, -2.0 * i / hs);
            tab[((size_t)t * h2 + i) * 2] = (float)cos(ang);
            tab[((size_t)t * h2 + i) * 2 + 1] = (float)sin(ang);
        }
    return tab;
}

int sz_k_rope_fwd(float *out, const float *inp, int B, int T, int C, int NH, float theta)
{
    int hs = C / NH, h2 = hs / 2;
    float *tab = sz_rope_table(T, hs, theta);
    if (!tab)
        return -1;
#pragma omp parallel for schedule(static) if ((size_t)B * T * 3 * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++)
        sz_rope_row_fwd(out + (size_t)bt * 3 * C, inp + (size_t)bt * 3 * C, tab + (size_t)(bt % T) * h2 * 2, C, NH);
    free(tab);
    return 0;
}

/* The rotation's transpose; accumulates. */
int sz_k_rope_bwd(float *dinp, const float *dout, int B, int T, int C, int NH, float theta)
{
    return sz_k_rope_bwd_set(dinp, dout, B, T, C, NH, theta, 0);
}

int sz_k_rope_bwd_set(float *dinp, const float *dout, int B, int T, int C, int NH, float theta, int set)
{
    int hs = C / NH, h2 = hs / 2, sd = set & SZ_K_SET_DINP;
    float *tab = sz_rope_table(T, hs, theta);
    if (!tab)
        return -1;
#pragma omp parallel for schedule(static) if ((size_t)B * T * 3 * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++)
        sz_rope_row_bwd(dinp + (size_t)bt * 3 * C, dout + (size_t)bt * 3 * C, tab + (size_t)(bt % T) * h2 * 2, C, NH,
                        sd);
    free(tab);
    return 0;
}
