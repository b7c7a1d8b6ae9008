/* codelets/gelu.c — GELU (tanh form), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    (void)arg;
    sz_k_gelu_fwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_N(b, 0));
}

static void bwd_cpu(void *b[], void *arg)
{
    (void)arg;
    sz_k_gelu_bwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_N(b, 0));
}

SZ_PERFMODEL(fwd_model, "sz_gelu_fwd");
SZ_PERFMODEL(bwd_model, "sz_gelu_bwd");
struct starpu_codelet sz_cl_gelu_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = 2,
    .modes = {STARPU_W, STARPU_R}, .name = "gelu_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_gelu_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_R, STARPU_R}, .name = "gelu_bwd", .model = &bwd_model};
