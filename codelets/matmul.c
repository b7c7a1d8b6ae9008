/* codelets/matmul.c — linear layer out = inp . w^T (+ b) through oneDNN, forward and backward.
 * The bias is an optional last tensor (the GPT-2 head has none). */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int rc = sz_k_matmul_fwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), sz_tf(b, &a, 2), a.nt > 3 ? sz_tf(b, &a, 3) : NULL,
                             a.N, a.C, a.OC);
    STARPU_ASSERT_MSG(rc >= 0, "matmul_fwd: out of memory");
}

static void bwd_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int rc = sz_k_matmul_bwd(sz_tf(b, &a, 0), sz_tf(b, &a, 1), a.nt > 5 ? sz_tf(b, &a, 5) : NULL, sz_tf(b, &a, 2),
                             sz_tf(b, &a, 3), sz_tf(b, &a, 4), a.N, a.C, a.OC);
    STARPU_ASSERT_MSG(rc >= 0, "matmul_bwd: out of memory");
}

SZ_PERFMODEL(fwd_model, "sz_matmul_fwd");
SZ_PERFMODEL(bwd_model, "sz_matmul_bwd");
SZ_CODELET(sz_cl_matmul_fwd, fwd_cpu, "matmul_fwd", fwd_model);
SZ_CODELET(sz_cl_matmul_bwd, bwd_cpu, "matmul_bwd", bwd_model);
