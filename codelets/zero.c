/* codelets/zero.c — the `zero` op: fill a view (fp32, bf16 or int32) with zeros: gradients before
 * a backward pass, accumulators. The step's own form (sz_submit_zero) optionally counts the bytes
 * as newly live (stage 2-3 gradients) and orders itself after earlier reduce-scatters. An app's
 * sz_op_zero of a whole handle is deferred to the next task on it (struct sz_model's pending) and
 * folded into it when that task can set the tensor instead of adding into it
 * (SZ_ACCUMULATE_OR_SET): no zeroing pass over memory the op writes anyway. */
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

/* The zeroing task of an app's sz_op_zero. */
static sz_status submit_zero(sz_unit *u, sz_tensor *t)
{
    struct zero_args a = {NULL, 0, 0};
    sz_task_tensor tt[] = {{t, SZ_WRITE, SZ_DTYPE_ANY, -1, "x", 0}};
    if (u && u->model)
        u->model->zeros_run++;
    return sz_task_submit(u, &sz_cl_zero, "zero", tt, 1, &a, sizeof a);
}

/* A zeroing of a whole handle waits (struct sz_model's pending) for the next task on it. */
sz_status sz_op_zero(sz_unit *u, sz_tensor *t)
{
    struct sz_model *m = u ? u->model : NULL;
    if (m && m->fold_zeros && t && t->h && t->offset == 0 && t->numel == t->handle_numel) {
        for (int i = 0; i < m->npending; i++)
            if (m->pending[i].t->h == t->h)
                return SZ_OK; /* zeroed already, and untouched since */
        if (m->npending < (int)(sizeof m->pending / sizeof m->pending[0])) {
            m->pending[m->npending++] = (struct sz_pending_zero){u, t};
            return SZ_OK;
        }
    }
    return submit_zero(u, t);
}

sz_status sz_zero_resolve(struct sz_model *m, struct starpu_codelet *cl, const sz_task_tensor *tt, int n,
                          uint32_t where, unsigned char *set)
{
    sz_status first = SZ_OK;
    /* the CUDA kernels always accumulate: fold only into a task that runs on a CPU */
    int cpu = !cl->cuda_funcs[0] || where == STARPU_CPU || starpu_cuda_worker_get_count() == 0;
    for (int k = 0; k < n && m->npending > 0; k++) {
        const sz_tensor *t = tt[k].tensor;
        int p = -1;
        for (int i = 0; t && i < m->npending && p < 0; i++)
            if (m->pending[i].t->h == t->h)
                p = i;
        if (p < 0)
            continue;
        struct sz_pending_zero z = m->pending[p];
        m->pending[p] = m->pending[--m->npending];
        int alone = 1;
        for (int j = 0; j < n; j++)
            alone &= j == k || !tt[j].tensor || tt[j].tensor->h != t->h;
        if (tt[k].access == SZ_ACCUMULATE_OR_SET && cpu && alone && t->offset == 0 && t->numel == t->handle_numel &&
            (tt[k].numel < 0 || tt[k].numel == t->numel)) {
            set[k] = 1;
            m->zeros_folded++;
            continue;
        }
        sz_status st = submit_zero(z.u, z.t);
        if (first == SZ_OK)
            first = st;
    }
    return first;
}

sz_status sz_zero_flush(struct sz_model *m)
{
    sz_status first = SZ_OK;
    while (m && m->npending > 0) {
        struct sz_pending_zero z = m->pending[--m->npending];
        sz_status st = submit_zero(z.u, z.t);
        if (first == SZ_OK)
            first = st;
    }
    return first;
}
