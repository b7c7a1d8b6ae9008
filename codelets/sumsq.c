/* codelets/sumsq.c — squared L2 norm of a gradient view (tensor 0: the one-float result, tensor 1:
 * the view, fp32 or bf16), summed in double by sz_k_sumsq: the result never depends on the thread
 * count. Without clipping AdamW takes the norm itself in its own pass (codelets/adamw.c). */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void sumsq_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    const void *x = a.bf16[1] ? (const void *)sz_th(b, &a, 1) : (const void *)sz_tf(b, &a, 1);
    double s = sz_k_sumsq(x, a.bf16[1], a.numel[1]);
    STARPU_ASSERT_MSG(s != -1.0, "sumsq: out of memory");
    *sz_tf(b, &a, 0) = (float)s;
}

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
SZ_CODELET(sz_cl_sumsq, sumsq_cpu, "sumsq", sumsq_model);
