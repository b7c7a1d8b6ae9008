/* rope.c — rotary position embedding on a fused qkv [B,T,3C] (q | k | v, NH heads of hs = C/NH,
 * hs even): in q and k, each head's pair (2i, 2i+1) at position t is rotated by the angle
 * t · theta^(-2i/hs); v is copied (forward) or its gradient passed through (backward). The cos
 * and sin table [T, hs/2] is computed in double, then rounded to float, once per call. Rows are
 * independent, so the same bits whatever the thread count. */
#include <math.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

static float *rope_table(int T, int hs, float theta)
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
    float *tab = rope_table(T, hs, theta);
    if (!tab)
        return -1;
#pragma omp parallel for schedule(static) if ((size_t)B * T * 3 * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        const float *x = inp + (size_t)bt * 3 * C, *cs = tab + (size_t)(bt % T) * h2 * 2;
        float *o = out + (size_t)bt * 3 * C;
        for (int part = 0; part < 2; part++) /* q, k */
            for (int h = 0; h < NH; h++) {
                const float *xh = x + part * C + h * hs;
                float *oh = o + part * C + h * hs;
                for (int i = 0; i < h2; i++) {
                    float c = cs[2 * i], s = cs[2 * i + 1], x0 = xh[2 * i], x1 = xh[2 * i + 1];
                    oh[2 * i] = x0 * c - x1 * s;
                    oh[2 * i + 1] = x0 * s + x1 * c;
                }
            }
        for (int j = 2 * C; j < 3 * C; j++) o[j] = x[j];
    }
    free(tab);
    return 0;
}

/* The rotation's transpose: dx0 = c d0 + s d1, dx1 = -s d0 + c d1. Accumulates. */
int sz_k_rope_bwd(float *dinp, const float *dout, int B, int T, int C, int NH, float theta)
{
    int hs = C / NH, h2 = hs / 2;
    float *tab = rope_table(T, hs, theta);
    if (!tab)
        return -1;
#pragma omp parallel for schedule(static) if ((size_t)B * T * 3 * C >= SZ_PAR_MIN)
    for (int bt = 0; bt < B * T; bt++) {
        const float *d = dout + (size_t)bt * 3 * C, *cs = tab + (size_t)(bt % T) * h2 * 2;
        float *di = dinp + (size_t)bt * 3 * C;
        for (int part = 0; part < 2; part++)
            for (int h = 0; h < NH; h++) {
                const float *dh = d + part * C + h * hs;
                float *gh = di + part * C + h * hs;
                for (int i = 0; i < h2; i++) {
                    float c = cs[2 * i], s = cs[2 * i + 1], d0 = dh[2 * i], d1 = dh[2 * i + 1];
                    gh[2 * i] += d0 * c + d1 * s;
                    gh[2 * i + 1] += d1 * c - d0 * s;
                }
            }
        for (int j = 2 * C; j < 3 * C; j++) di[j] += d[j];
    }
    free(tab);
    return 0;
}
