/* codelets/sz_codelets.h — the StarPU codelets of StarZeRO (one file per operation in codelets/),
 * each with its CPU implementation, a CUDA one where written, and a history-based perf model.
 * Internal to the library and its tests. */
#ifndef SZ_CODELETS_H
#define SZ_CODELETS_H

#include <starpu.h>

/* scale: x[i] *= alpha on one float vector handle (RW); alpha is a STARPU_VALUE float.
 * The first codelet with a CUDA implementation: it proves the nvcc path end to end. */
extern struct starpu_codelet sz_cl_scale;

#endif
