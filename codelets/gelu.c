/* codelets/gelu.c — GELU (tanh form), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_gelu_fwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), (size_t)a.numel[0]);
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_gelu_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), (size_t)a.numel[0]);
}

SZ_PERFMODEL(fwd_model, "sz_gelu_fwd");
SZ_PERFMODEL(bwd_model, "sz_gelu_bwd");
SZ_CODELET(sz_cl_gelu_fwd, fwd_cpu, "gelu_fwd", fwd_model);
SZ_CODELET(sz_cl_gelu_bwd, bwd_cpu, "gelu_bwd", bwd_model);
