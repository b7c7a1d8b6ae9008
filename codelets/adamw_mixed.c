/* codelets/adamw_mixed.c — AdamW for mixed precision: the fp32 master weights, Adam m and v are
 * updated from the bf16 gradients (times the clip scale), then the bf16 parameters are the master
 * rounded to nearest even. Tensors: master, param (bf16), grad (bf16), m, v, scale;
 * f = lr, beta1, beta2, eps, wd; t = step. */
#include <stdlib.h>
#include "sz_codelets.h"
#include "sz_kernels.h"

static void adamw_mixed_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    size_t n = (size_t)a.numel[0];
    float scale = *sz_tf(b, &a, 5), *g = malloc(n * sizeof *g);
    STARPU_ASSERT_MSG(g, "adamw_mixed: out of memory");
    const uint16_t *gh = sz_th(b, &a, 2);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        g[i] = sz_h2f(gh[i]) * scale;
    float *master = sz_tf(b, &a, 0);
    sz_k_adamw_step(master, g, sz_tf(b, &a, 3), sz_tf(b, &a, 4), n, a.t, a.f[0], a.f[1], a.f[2], a.f[3], a.f[4]);
    sz_k_f32_to_bf16(sz_th(b, &a, 1), master, n);
    free(g);
}

SZ_PERFMODEL(adamw_mixed_model, "sz_adamw_mixed");
SZ_CODELET(sz_cl_adamw_mixed, adamw_mixed_cpu, "adamw_mixed", adamw_mixed_model);
