/* codelets/attention.c — causal multi-head self-attention (llm.c layout), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    sz_k_attention_fwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), a.B, a.T, a.C, a.NH);
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int rc = sz_k_attention_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), sz_tf(b, &a, 3), a.B, a.T, a.C, a.NH);
    STARPU_ASSERT_MSG(rc == 0, "attention_bwd: out of memory");
}

SZ_PERFMODEL(fwd_model, "sz_attention_fwd");
SZ_PERFMODEL(bwd_model, "sz_attention_bwd");
SZ_CODELET(sz_cl_attention_fwd, fwd_cpu, "attention_fwd", fwd_model);
SZ_CODELET(sz_cl_attention_bwd, bwd_cpu, "attention_bwd", bwd_model);
