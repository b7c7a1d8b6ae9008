/* codelets/matmul.c — linear layer out = inp . w^T (+ b) through oneDNN, forward and backward.
 * Variable buffers so the bias is optional (the GPT-2 head has none). */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    int nb = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    int rc = sz_k_matmul_fwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), nb > 3 ? SZ_BUF_F(b, 3) : NULL,
                             s.N, s.C, s.OC);
    STARPU_ASSERT_MSG(rc >= 0, "matmul_fwd: out of memory");
}

static void bwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    int nb = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    int rc = sz_k_matmul_bwd(SZ_BUF_F(b, 3), SZ_BUF_F(b, 4), nb > 5 ? SZ_BUF_F(b, 5) : NULL, SZ_BUF_F(b, 0),
                             SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), s.N, s.C, s.OC);
    STARPU_ASSERT_MSG(rc >= 0, "matmul_bwd: out of memory");
}

SZ_PERFMODEL(fwd_model, "sz_matmul_fwd");
SZ_PERFMODEL(bwd_model, "sz_matmul_bwd");
struct starpu_codelet sz_cl_matmul_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "matmul_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_matmul_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "matmul_bwd", .model = &bwd_model};
