/* codelets/sumsq.c — squared L2 norm of a unit's gradient tensors (variable buffers: W out, then
 * the R tensors), summed in double in buffer order so the result never depends on threads. */
#include "sz_codelets.h"

static void sumsq_cpu(void *b[], void *arg)
{
    (void)arg;
    int nb = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    double s = 0.0;
    for (int i = 1; i < nb; i++) {
        const float *x = SZ_BUF_F(b, i);
        size_t n = SZ_BUF_N(b, i);
        for (size_t k = 0; k < n; k++)
            s += (double)x[k] * x[k];
    }
    *(float *)STARPU_VARIABLE_GET_PTR(b[0]) = (float)s;
}

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
struct starpu_codelet sz_cl_sumsq = {.cpu_funcs = {sumsq_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "sumsq", .model = &sumsq_model};
