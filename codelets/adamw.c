/* codelets/adamw.c — the AdamW update of one view (llm.c's gpt2_update, bias-corrected, decoupled
 * weight decay): param, grad, m, v, clip scale; f = lr, beta1, beta2, eps, wd; t = step.
 * Each gradient is multiplied by the clip scale as it is read. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void adamw_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    size_t n = (size_t)a.numel[0];
    sz_k_adamw_step(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), n, a.t, a.f[0], a.f[1],
                    a.f[2], a.f[3], a.f[4], *sz_tf(b, &a, 4));
}

SZ_PERFMODEL(adamw_model, "sz_adamw");
SZ_CODELET(sz_cl_adamw, adamw_cpu, "adamw", adamw_model);
