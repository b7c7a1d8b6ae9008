/* codelets/attention.c — causal multi-head self-attention (llm.c layout), forward and backward. */
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    sz_k_attention_fwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_F(b, 3), s.B, s.T, s.C, s.NH);
}

static void bwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    int rc = sz_k_attention_bwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_F(b, 2), SZ_BUF_F(b, 3), s.B, s.T, s.C, s.NH);
    STARPU_ASSERT_MSG(rc == 0, "attention_bwd: out of memory");
}

SZ_PERFMODEL(fwd_model, "sz_attention_fwd");
SZ_PERFMODEL(bwd_model, "sz_attention_bwd");
struct starpu_codelet sz_cl_attention_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = 4,
    .modes = {STARPU_W, STARPU_W, STARPU_W, STARPU_R}, .name = "attention_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_attention_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = 4,
    .modes = {STARPU_RW, STARPU_R, STARPU_R, STARPU_R}, .name = "attention_bwd", .model = &bwd_model};
