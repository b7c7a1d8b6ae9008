/* codelets/adamw_mixed.c — AdamW for mixed precision: the fp32 master weights, Adam m and v are
 * updated from the bf16 gradients (times the clip scale), then the bf16 parameters are the master
 * rounded to nearest even, all in one pass (no widened copy of the gradient: for wte that copy
 * was 154 MB, mapped afresh and faulted in every step). Tensors: master, param (bf16), grad (bf16),
 * m, v, scale [, norm as in codelets/adamw.c]; f = lr, beta1, beta2, eps, wd; t = step. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void adamw_mixed_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    double s = 0.0;
    int rc = sz_k_adamw_step_bf16(sz_tf(b, &a, 0), sz_th(b, &a, 1), sz_th(b, &a, 2), sz_tf(b, &a, 3), sz_tf(b, &a, 4),
                                  (size_t)a.numel[0], a.t, a.f[0], a.f[1], a.f[2], a.f[3], a.f[4], *sz_tf(b, &a, 5),
                                  a.nt > 6 ? &s : NULL);
    if (a.nt > 6)
        sz_adamw_put_sumsq(b, &a, 6, rc ? -1.0 : s);
}

SZ_PERFMODEL(adamw_mixed_model, "sz_adamw_mixed");
SZ_CODELET(sz_cl_adamw_mixed, adamw_mixed_cpu, "adamw_mixed", adamw_mixed_model);
