/* codelets/zero.c — the `zero` codelet: fill a float view with zeros (gradients before a backward
 * pass, accumulators). */
#include <string.h>
#include "sz_codelets.h"

static void zero_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    memset(sz_tf(b, &a, 0), 0, (size_t)a.numel[0] * sizeof(float));
}

SZ_PERFMODEL(zero_model, "sz_zero");
SZ_CODELET(sz_cl_zero, zero_cpu, "zero", zero_model);
