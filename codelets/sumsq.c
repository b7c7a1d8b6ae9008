/* codelets/sumsq.c — squared L2 norm of a gradient view (tensor 0: the one-float result, tensor 1:
 * the view, fp32 or bf16). OpenMP over fixed 64K-element chunks, each summed in double over 16 fixed
 * lanes, the chunk sums added in chunk order: the result never depends on the thread count. */
#include <stdlib.h>
#include "sz_codelets.h"

#define CHUNK 65536
#define LANES 16 /* independent double partial sums, added in lane order: vectorizes, stays fixed */

static double chunk_f32(const float *x, int64_t n)
{
    double l[LANES] = {0}, s = 0.0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++)
            l[k] += (double)x[i + k] * x[i + k];
    for (int k = 0; k < LANES; k++)
        s += l[k];
    for (; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

static double chunk_bf16(const uint16_t *x, int64_t n)
{
    double l[LANES] = {0}, s = 0.0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) {
            double v = sz_h2f(x[i + k]);
            l[k] += v * v;
        }
    for (int k = 0; k < LANES; k++)
        s += l[k];
    for (; i < n; i++) {
        double v = sz_h2f(x[i]);
        s += v * v;
    }
    return s;
}

static void sumsq_cpu(void *b[], void *arg)
{
    SZ_UNPACK(arg, a);
    int64_t n = a.numel[1], nchunks = (n + CHUNK - 1) / CHUNK;
    double *part = malloc((size_t)(nchunks > 0 ? nchunks : 1) * sizeof *part);
    STARPU_ASSERT_MSG(part, "sumsq: out of memory");
    const void *x = a.bf16[1] ? (const void *)sz_th(b, &a, 1) : (const void *)sz_tf(b, &a, 1);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t len = (c + 1) * CHUNK < n ? CHUNK : n - c * CHUNK;
        part[c] = a.bf16[1] ? chunk_bf16((const uint16_t *)x + c * CHUNK, len)
                            : chunk_f32((const float *)x + c * CHUNK, len);
    }
    double s = 0.0;
    for (int64_t c = 0; c < nchunks; c++)
        s += part[c];
    free(part);
    *sz_tf(b, &a, 0) = (float)s;
}

SZ_PERFMODEL(sumsq_model, "sz_sumsq");
SZ_CODELET(sz_cl_sumsq, sumsq_cpu, "sumsq", sumsq_model);
