/* codelets/sumsq.c — squared L2 norm of a gradient view (tensor 0: the one-float result, tensor 1:
 * the view, fp32 or bf16). OpenMP over fixed 64K-element chunks, each summed in double, the chunk sums added in
 * chunk order: the result never depends on the thread count. */
#include <stdlib.h>
#include "sz_codelets.h"

#define CHUNK 65536

static void sumsq_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int64_t n = a.numel[1], nchunks = (n + CHUNK - 1) / CHUNK;
    double *part = malloc((size_t)(nchunks > 0 ? nchunks : 1) * sizeof *part);
    STARPU_ASSERT_MSG(part, "sumsq: out of memory");
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t end = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
        double s = 0.0;
        for (int64_t i = c * CHUNK; i < end; i++) {
            double v = sz_tget(b, &a, 1, i);
            s += v * v;
        }
        part[c] = s;
    }
    double s = 0.0;
    for (int64_t c = 0; c < nchunks; c++)
        s += part[c];
    free(part);
    *sz_tf(b, &a, 0) = (float)s;
}

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
SZ_CODELET(sz_cl_sumsq, sumsq_cpu, "sumsq", sumsq_model);
