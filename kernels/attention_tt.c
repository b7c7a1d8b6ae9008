/* attention_tt.c — llm.c's causal self-attention that saves the whole B·NH·T·T pre-softmax and
 * softmax tensors (attention_forward/backward). The model uses attention.c (memory linear in T);
 * this one stays as the reference the tests compare that kernel against.
 * inp [B,T,3C]: row (b,t) holds q | k | v, head h at columns h*hs..h*hs+hs-1 of
 * each third (hs = C/NH). preatt, att [B,NH,T,T] (row t, columns t2 <= t used,
 * the rest written 0); out [B,T,C]. Scale 1/sqrt(hs). */
#include <math.h>
#include <stdlib.h>
#include "sz_kernels_impl.h"

void sz_k_attention_tt_fwd(float *out, float *preatt, float *att, const float *inp,
                           int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(3) schedule(static) if ((size_t)B * T * T * NH >= SZ_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                float *pre = preatt + (((size_t)b * NH + h) * T + t) * T;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxval = -10000.0f, expsum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {          /* q.k, max */
                    const float *k = inp + ((size_t)b * T + t2) * C3 + h * hs + C;
                    float val = 0.0f;
#pragma omp simd reduction(+ : val)
                    for (int i = 0; i < hs; i++) val += q[i] * k[i];
                    val *= scale;
                    maxval = val > maxval ? val : maxval;
                    pre[t2] = val;
                }
#pragma omp simd reduction(+ : expsum)
                for (int t2 = 0; t2 <= t; t2++) {          /* softmax */
                    float e = sz_expf(pre[t2] - maxval);
                    expsum += e;
                    a[t2] = e;
                }
                float inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;
                for (int t2 = 0; t2 < T; t2++) {
                    if (t2 <= t) a[t2] *= inv;
                    else a[t2] = pre[t2] = 0.0f;
                }
                float *o = out + ((size_t)b * T + t) * C + h * hs;   /* att . v */
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = inp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                    for (int i = 0; i < hs; i++) o[i] += a[t2] * v[i];
                }
            }
}

/* Parallel over (b, h) only: dk and dv of position t2 collect from every t >= t2,
 * and a (b, h) pair owns its columns of dinp, so each sum runs in llm.c's t order.
 * Per query row: datt = dout.v, dpreatt = att * (datt - sum(att * datt)) (the
 * softmax Jacobian applied in O(T)), then dq, dk. */
int sz_k_attention_tt_bwd(float *dinp, const float *dout, const float *inp,
                          const float *att, int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH, fail = 0;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel if ((size_t)B * T * T * NH >= SZ_PAR_MIN) shared(fail)
    {
        float *datt = malloc(2 * (size_t)T * sizeof(float)), *dpre = datt ? datt + T : NULL;
        if (sz_par_alloc_ok(datt, &fail)) { /* no thread writes unless every thread has its scratch */
#pragma omp for collapse(2) schedule(static)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++)
                    for (int t = 0; t < T; t++) {
                        const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                        const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                        const float *q = inp + ((size_t)b * T + t) * C3 + h * hs;
                        float *dq = dinp + ((size_t)b * T + t) * C3 + h * hs;
                        float s = 0.0f;
                        for (int t2 = 0; t2 <= t; t2++) {  /* into datt and dv */
                            const float *v = inp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                            float *dv = dinp + ((size_t)b * T + t2) * C3 + h * hs + 2 * C;
                            float da = 0.0f;
#pragma omp simd reduction(+ : da)
                            for (int i = 0; i < hs; i++) da += v[i] * d[i];
                            for (int i = 0; i < hs; i++) dv[i] += a[t2] * d[i];
                            datt[t2] = da;
                            s += a[t2] * da;
                        }
                        for (int t2 = 0; t2 <= t; t2++) dpre[t2] = a[t2] * (datt[t2] - s);
                        for (int t2 = 0; t2 <= t; t2++) {  /* into dq and dk */
                            const float *k = inp + ((size_t)b * T + t2) * C3 + h * hs + C;
                            float *dk = dinp + ((size_t)b * T + t2) * C3 + h * hs + C;
                            float g = dpre[t2] * scale;
                            for (int i = 0; i < hs; i++) {
                                dq[i] += k[i] * g;
                                dk[i] += q[i] * g;
                            }
                        }
                    }
        }
        free(datt);
    }
    return fail ? -1 : 0;
}
