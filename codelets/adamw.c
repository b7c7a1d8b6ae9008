/* codelets/adamw.c — the AdamW update of one view (llm.c's gpt2_update, bias-corrected, decoupled
 * weight decay): param, grad, m, v, clip scale [, norm]; f = lr, beta1, beta2, eps, wd; t = step.
 * Each gradient is multiplied by the clip scale as it is read. With a sixth tensor (one float) the
 * task also takes the gradient's squared norm in the same pass: written there (acc = 0) or added
 * to it (acc = 1). */
#include "sz_codelets.h"
#include "sz_kernels.h"

/* The fused norm's float (tensor k), if the task has one. */
void sz_adamw_put_sumsq(void *b[], const struct sz_targs *a, int k, double s)
{
    STARPU_ASSERT_MSG(s != -1.0, "adamw: out of memory");
    float *out = sz_tf(b, a, k);
    *out = a->acc ? *out + (float)s : (float)s;
}

static void adamw_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    double s = 0.0;
    int rc = sz_k_adamw_step(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), (size_t)a.numel[0],
                             a.t, a.f[0], a.f[1], a.f[2], a.f[3], a.f[4], *sz_tf(b, &a, 4), a.nt > 5 ? &s : NULL);
    if (a.nt > 5)
        sz_adamw_put_sumsq(b, &a, 5, rc ? -1.0 : s);
}

SZ_PERFMODEL(adamw_model, "sz_adamw");
SZ_CODELET(sz_cl_adamw, adamw_cpu, "adamw", adamw_model);
