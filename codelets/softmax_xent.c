/* codelets/softmax_xent.c — fused softmax + cross-entropy over the real vocabulary (padded
 * columns excluded), forward and backward (dloss = f[0] for every row: 1/N for one rank's mean loss). */
#include <stdlib.h>
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_softmax_xent_fwd(sz_tf(b, &a, 1), sz_tf(b, &a, 0), sz_tf(b, &a, 2), sz_ti(b, &a, 3), a.N, a.V, a.Vp);
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    float *dloss = malloc((size_t)a.N * sizeof *dloss);
    STARPU_ASSERT_MSG(dloss, "softmax_xent_bwd: out of memory");
    for (int i = 0; i < a.N; i++)
        dloss[i] = a.f[0];
    sz_k_softmax_xent_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_ti(b, &a, 2), dloss, a.N, a.V, a.Vp);
    free(dloss);
}

SZ_PERFMODEL(fwd_model, "sz_softmax_xent_fwd");
SZ_PERFMODEL(bwd_model, "sz_softmax_xent_bwd");
SZ_CODELET(sz_cl_softmax_xent_fwd, fwd_cpu, "softmax_xent_fwd", fwd_model);
SZ_CODELET(sz_cl_softmax_xent_bwd, bwd_cpu, "softmax_xent_bwd", bwd_model);
