/* codelets/zero.c — the `zero` codelet: fill a vector with zero bytes (gradients before a
 * backward pass, accumulators). */
#include <string.h>
#include "sz_codelets.h"

static void zero_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0, SZ_BUF_N(buffers, 0) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

SZ_PERFMODEL(zero_model, "sz_zero");
struct starpu_codelet sz_cl_zero = {
    .cpu_funcs = {zero_cpu}, .nbuffers = 1, .modes = {STARPU_W}, .name = "zero", .model = &zero_model};
