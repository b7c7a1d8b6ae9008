/* codelets/adamw.c — the AdamW update of one tensor (llm.c's gpt2_update, bias-corrected,
 * decoupled weight decay): RW param, R grad, RW m, RW v, R clip scale. Gradients are
 * multiplied by the clip scale first when it is not 1. */
#include <stdlib.h>
#include <string.h>
#include "sz_codelets.h"
#include "sz_kernels.h"

static void adamw_cpu(void *b[], void *arg)
{
    struct sz_adamw_args a;
    starpu_codelet_unpack_args(arg, &a);
    size_t n = SZ_BUF_N(b, 0);
    const float *g = SZ_BUF_F(b, 1);
    float scale = *(float *)STARPU_VARIABLE_GET_PTR(b[4]);
    float *tmp = NULL;
    if (scale != 1.0f) {
        tmp = malloc(n * sizeof *tmp);
        STARPU_ASSERT_MSG(tmp, "adamw: out of memory");
        for (size_t i = 0; i < n; i++)
            tmp[i] = g[i] * scale;
        g = tmp;
    }
    sz_k_adamw_step(SZ_BUF_F(b, 0), g, SZ_BUF_F(b, 2), SZ_BUF_F(b, 3), n, a.t, a.lr, a.beta1, a.beta2, a.eps, a.wd);
    free(tmp);
}

SZ_PERFMODEL(adamw_model, "sz_adamw");
struct starpu_codelet sz_cl_adamw = {.cpu_funcs = {adamw_cpu}, .nbuffers = 5,
    .modes = {STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW, STARPU_R}, .name = "adamw", .model = &adamw_model};
