/* codelets/residual.c — residual add out = a + b, forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    (void)arg;
    sz_k_residual_fwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_N(b, 0));
}

static void bwd_cpu(void *b[], void *arg)
{
    (void)arg;
    sz_k_residual_bwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_N(b, 0));
}

SZ_PERFMODEL(fwd_model, "sz_residual_fwd");
SZ_PERFMODEL(bwd_model, "sz_residual_bwd");
struct starpu_codelet sz_cl_residual_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = 3,
    .modes = {STARPU_W, STARPU_R, STARPU_R}, .name = "residual_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_residual_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_RW, STARPU_R}, .name = "residual_bwd", .model = &bwd_model};
