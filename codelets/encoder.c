/* codelets/encoder.c — token + position embedding (llm.c encoder), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_encoder_fwd(sz_tf(b, &a, 0), sz_ti(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), a.B, a.T, a.C);
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_encoder_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_ti(b, &a, 3), a.B, a.T, a.C);
}

SZ_PERFMODEL(fwd_model, "sz_encoder_fwd");
SZ_PERFMODEL(bwd_model, "sz_encoder_bwd");
SZ_CODELET(sz_cl_encoder_fwd, fwd_cpu, "encoder_fwd", fwd_model);
SZ_CODELET(sz_cl_encoder_bwd, bwd_cpu, "encoder_bwd", bwd_model);
