/* codelets/layernorm.c — layernorm over the channel dimension (eps 1e-5), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    sz_k_layernorm_fwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_F(b, 3), SZ_BUF_F(b, 4),
                       SZ_BUF_F(b, 5), s.N, s.C);
}

static void bwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    sz_k_layernorm_bwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_F(b, 3), SZ_BUF_F(b, 4),
                       SZ_BUF_F(b, 5), SZ_BUF_F(b, 6), SZ_BUF_F(b, 7), s.N, s.C);
}

SZ_PERFMODEL(fwd_model, "sz_layernorm_fwd");
SZ_PERFMODEL(bwd_model, "sz_layernorm_bwd");
struct starpu_codelet sz_cl_layernorm_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = 6,
    .modes = {STARPU_W, STARPU_W, STARPU_W, STARPU_R, STARPU_R, STARPU_R}, .name = "layernorm_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_layernorm_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = 8,
    .modes = {STARPU_RW, STARPU_RW, STARPU_RW, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R},
    .name = "layernorm_bwd", .model = &bwd_model};
