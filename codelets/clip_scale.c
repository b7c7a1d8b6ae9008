/* codelets/clip_scale.c — the global gradient-norm clip factor: tensor 0 (one float) gets
 * clip / norm when the norm of the per-unit squared sums (tensor 1) exceeds clip = f[5] > 0,
 * else 1. The sums are added in order. */
#include <math.h>
#include "sz_codelets.h"

static void clip_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    const float *sums = sz_tf(b, &a, 1);
    double s = 0.0;
    for (int64_t i = 0; i < a.numel[1]; i++)
        s += sums[i];
    double norm = sqrt(s), clip = a.f[5];
    *sz_tf(b, &a, 0) = (clip > 0.0 && norm > clip) ? (float)(clip / norm) : 1.0f;
}

SZ_PERFMODEL(clip_model, "sz_clip_scale");
SZ_CODELET(sz_cl_clip_scale, clip_cpu, "clip_scale", clip_model);
