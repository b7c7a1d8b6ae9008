/* codelets/zero.c — the `zero` codelet: fill a float view with zeros (gradients before a backward
 * pass, accumulators); optionally counts the bytes as newly live (stage 2-3 gradients). */
#include <string.h>
#include "sz_codelets.h"

static void zero_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    void *x = a.bf16[0] ? (void *)sz_th(b, &a, 0) : (void *)sz_tf(b, &a, 0);
    memset(x, 0, (size_t)a.numel[0] * (a.bf16[0] ? 2 : 4));
    if (a.stats) /* a buffer allocated for this write: count it as live */
        sz_counters_add(a.stats, a.category, a.bytes);
}

SZ_PERFMODEL(zero_model, "sz_zero");
SZ_CODELET(sz_cl_zero, zero_cpu, "zero", zero_model);
