/* codelets/adamw.c — the AdamW update of one view (llm.c's gpt2_update, bias-corrected, decoupled
 * weight decay): param, grad, m, v, clip scale; f = lr, beta1, beta2, eps, wd; t = step.
 * Gradients are multiplied by the clip scale first when it is not 1. */
#include <stdlib.h>
#include "sz_codelets.h"
#include "sz_kernels.h"

static void adamw_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    size_t n = (size_t)a.numel[0];
    const float *g = sz_tf(b, &a, 1);
    float scale = *sz_tf(b, &a, 4), *tmp = NULL;
    if (scale != 1.0f) {
        tmp = malloc(n * sizeof *tmp);
        STARPU_ASSERT_MSG(tmp, "adamw: out of memory");
        for (size_t i = 0; i < n; i++)
            tmp[i] = g[i] * scale;
        g = tmp;
    }
    sz_k_adamw_step(sz_tf(b, &a, 0), g, sz_tf(b, &a, 2), sz_tf(b, &a, 3), n, a.t, a.f[0], a.f[1], a.f[2], a.f[3], a.f[4]);
    free(tmp);
}

SZ_PERFMODEL(adamw_model, "sz_adamw");
SZ_CODELET(sz_cl_adamw, adamw_cpu, "adamw", adamw_model);
