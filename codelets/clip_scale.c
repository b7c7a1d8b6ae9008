/* codelets/clip_scale.c — the global gradient-norm clip factor: W scale (one float) from the R
 * per-unit squared norms (variable buffers, summed in order); scale = clip / norm when the norm
 * exceeds clip > 0, else 1. */
#include <math.h>
#include "sz_codelets.h"

static void clip_cpu(void *b[], void *arg)
{
    float clip;
    starpu_codelet_unpack_args(arg, &clip);
    int nb = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    double s = 0.0;
    for (int i = 1; i < nb; i++)
        s += *(float *)STARPU_VARIABLE_GET_PTR(b[i]);
    double norm = sqrt(s);
    *(float *)STARPU_VARIABLE_GET_PTR(b[0]) = (clip > 0.0f && norm > clip) ? (float)(clip / norm) : 1.0f;
}

SZ_PERFMODEL(clip_model, "sz_clip_scale");
struct starpu_codelet sz_cl_clip_scale = {.cpu_funcs = {clip_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "clip_scale", .model = &clip_model};
