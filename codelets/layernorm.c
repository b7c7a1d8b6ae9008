/* codelets/layernorm.c — layernorm over the channel dimension (eps 1e-5), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_layernorm_fwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), sz_tf(b, &a, 4),
                       sz_tf(b, &a, 5), a.N, a.C);
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_layernorm_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), sz_tf(b, &a, 4),
                       sz_tf(b, &a, 5), sz_tf(b, &a, 6), sz_tf(b, &a, 7), a.N, a.C);
}

SZ_PERFMODEL(fwd_model, "sz_layernorm_fwd");
SZ_PERFMODEL(bwd_model, "sz_layernorm_bwd");
SZ_CODELET(sz_cl_layernorm_fwd, fwd_cpu, "layernorm_fwd", fwd_model);
SZ_CODELET(sz_cl_layernorm_bwd, bwd_cpu, "layernorm_bwd", bwd_model);
