/* codelets/softmax_xent.c — fused softmax + cross-entropy over the real vocabulary (padded
 * columns excluded), forward and backward (the backward of the mean loss: dloss = 1/N). */
#include <stdlib.h>
#include "sz_codelets.h"
#include "sz_kernels.h"

static void fwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    sz_k_softmax_xent_fwd(SZ_BUF_F(b, 1), SZ_BUF_F(b, 0), SZ_BUF_F(b, 2), SZ_BUF_I(b, 3), s.N, s.V, s.Vp);
}

static void bwd_cpu(void *b[], void *arg)
{
    struct sz_shape s;
    starpu_codelet_unpack_args(arg, &s);
    float *dloss = malloc((size_t)s.N * sizeof *dloss);
    STARPU_ASSERT_MSG(dloss, "softmax_xent_bwd: out of memory");
    for (int i = 0; i < s.N; i++)
        dloss[i] = 1.0f / (float)s.N;
    sz_k_softmax_xent_bwd(SZ_BUF_F(b, 0), SZ_BUF_F(b, 1), SZ_BUF_I(b, 2), dloss, s.N, s.V, s.Vp);
    free(dloss);
}

SZ_PERFMODEL(fwd_model, "sz_softmax_xent_fwd");
SZ_PERFMODEL(bwd_model, "sz_softmax_xent_bwd");
struct starpu_codelet sz_cl_softmax_xent_fwd = {.cpu_funcs = {fwd_cpu}, .nbuffers = 4,
    .modes = {STARPU_W, STARPU_W, STARPU_R, STARPU_R}, .name = "softmax_xent_fwd", .model = &fwd_model};
struct starpu_codelet sz_cl_softmax_xent_bwd = {.cpu_funcs = {bwd_cpu}, .nbuffers = 3,
    .modes = {STARPU_W, STARPU_R, STARPU_R}, .name = "softmax_xent_bwd", .model = &bwd_model};
