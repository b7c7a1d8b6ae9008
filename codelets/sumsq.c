/* codelets/sumsq.c — squared L2 norm of a unit's gradient (tensor 0: the one-float result,
 * then the views to sum), accumulated in double in order so it never depends on threads. */
#include "sz_codelets.h"

static void sumsq_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    double s = 0.0;
    for (int k = 1; k < a.nt; k++) {
        const float *x = sz_tf(b, &a, k);
        for (int64_t i = 0; i < a.numel[k]; i++)
            s += (double)x[i] * x[i];
    }
    *sz_tf(b, &a, 0) = (float)s;
}

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
SZ_CODELET(sz_cl_sumsq, sumsq_cpu, "sumsq", sumsq_model);
