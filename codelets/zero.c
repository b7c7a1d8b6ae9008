/* codelets/zero.c — the `zero` op: fill a view (fp32, bf16 or int32) with zeros: gradients before
 * a backward pass, accumulators. The step's own form (sz_submit_zero) optionally counts the bytes
 * as newly live (stage 2-3 gradients) and orders itself after earlier reduce-scatters. */
#include <string.h>
#include "sz_tasks.h"
#include "starzero_starpu.h"
#include "sz_cuda.h"

struct zero_args {
    struct sz_counters *stats; /* non-NULL: `bytes` of `category` become live when it runs */
    int category;
    int64_t bytes;
};

static void zero_cpu(void *b[], void *arg)
{
    const struct zero_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    memset(sz_task_ptr(b, arg, 0), 0, (size_t)l->numel[0] * sz_dtype_size((sz_dtype)l->dtype[0]));
    if (a->stats) /* a buffer allocated for this write: count it as live */
        sz_counters_add(a->stats, a->category, a->bytes);
}

#if SZ_WITH_CUDA
static void zero_cuda(void *b[], void *arg)
{
    const struct zero_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    if (sz_cuda_task_rc(arg, "zero", sz_cuda_zero(SZ_STREAM, sz_task_ptr(b, arg, 0),
                                                  (size_t)l->numel[0] * sz_dtype_size((sz_dtype)l->dtype[0]))))
        return;
    if (a->stats)
        sz_counters_add(a->stats, a->category, a->bytes);
}
#endif

SZ_PERFMODEL(zero_model, "sz_zero");
SZ_CODELET_CUDA(sz_cl_zero, zero_cpu, zero_cuda, "zero", zero_model);

/* With `token` (a model's communication token), the zeroing that allocates a unit's gradients is
 * ordered after the earlier reduce-scatters, bounding the gradients in flight. */
sz_status sz_submit_zero(struct sz_unit *u, const sz_tensor *t, const char *name, struct sz_counters *acct,
                         int category, int64_t bytes, const sz_tensor *token)
{
    struct zero_args a = {acct, category, bytes};
    sz_task_tensor tt[] = {{t, SZ_WRITE, SZ_DTYPE_ANY, -1, "x", 0}, {token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 1}};
    return sz_task_submit_named(u->model, u->index, name, "zero", &sz_cl_zero, tt, token ? 2 : 1, &a, sizeof a);
}

sz_status sz_op_zero(sz_unit *u, sz_tensor *t)
{
    struct zero_args a = {NULL, 0, 0};
    sz_task_tensor tt[] = {{t, SZ_WRITE, SZ_DTYPE_ANY, -1, "x", 0}};
    return sz_task_submit(u, &sz_cl_zero, "zero", tt, 1, &a, sizeof a);
}
