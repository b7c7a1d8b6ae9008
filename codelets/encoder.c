/* codelets/encoder.c — token + position embedding (llm.c encoder), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    sz_k_encoder_fwd(SZ_BUF_F(b, 0), SZ_BUF_I(b, 1), SZ_BUF_F(b, 2), SZ_BUF_F(b, 3), s.B, s.T, s.C);
}

static void bwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    sz_k_encoder_bwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_I(b, 3), s.B, s.T, s.C);
}

SZ_PERFMODEL(fwd_model, "sz_encoder_fwd");
SZ_PERFMODEL(bwd_model, "sz_encoder_bwd");
struct starpu_codelet sz_cl_encoder_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = 4,
    .modes = {STARPU_W, STARPU_R, STARPU_R, STARPU_R}, .name = "encoder_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_encoder_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = 4,
    .modes = {STARPU_RW, STARPU_RW, STARPU_R, STARPU_R}, .name = "encoder_bwd", .model = &bwd_model};
