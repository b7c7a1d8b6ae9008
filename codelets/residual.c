/* codelets/residual.c — residual add out = a + b, forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_residual_fwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), (size_t)a.numel[0]);
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_residual_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), (size_t)a.numel[0]);
}

SZ_PERFMODEL(fwd_model, "sz_residual_fwd");
SZ_PERFMODEL(bwd_model, "sz_residual_bwd");
SZ_CODELET(sz_cl_residual_fwd, fwd_cpu, "residual_fwd", fwd_model);
SZ_CODELET(sz_cl_residual_bwd, bwd_cpu, "residual_bwd", bwd_model);
