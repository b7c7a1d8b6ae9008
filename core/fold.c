/* core/fold.c — the accumulate-or-set fold and its zeroing task. The zeroing task fills a view
 * (fp32, bf16 or int32) with zeros: gradients before a backward pass, accumulators; the step's own
 * form (sz_submit_zero) optionally counts the bytes as newly live (stage 2-3 gradients) and orders
 * itself after earlier reduce-scatters. An app's sz_op_zero of a whole handle is deferred to the
 * next task on it (struct sz_core's pending) and folded into it when that task can set the tensor
 * instead of adding into it (SZ_ACCUMULATE_OR_SET): no zeroing pass over memory the op writes
 * anyway; so is a parameter's gradient left to its first writer (gpending). Whether a task may set
 * is decided at submission (sz_fold_decide), from its codelet's descriptor (SZ_CL_CUDA_SETS). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "sz_core.h"
#include "sz_cuda.h"

struct zero_args {
    struct sz_counters *stats; /* non-NULL: `bytes` of `category` become live when it runs */
    int category;
    int64_t bytes;
    int64_t from;              /* elements [from, numel) are zeroed (the rest is left to first writers) */
};

static void zero_cpu(void *b[], void *arg)
{
    const struct zero_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    size_t es = sz_dtype_size((sz_dtype)l->dtype[0]);
    if (l->numel[0] > a->from)
        memset((char *)sz_task_ptr(b, arg, 0) + (size_t)a->from * es, 0, (size_t)(l->numel[0] - a->from) * es);
    if (a->stats) /* a buffer allocated for this write: count it as live */
        sz_counters_add(a->stats, a->category, a->bytes);
}

#if SZ_WITH_CUDA
static void zero_cuda(void *b[], void *arg)
{
    const struct zero_args *a = sz_task_params(arg);
    const sz_task_layout *l = sz_task_layout_of(arg);
    size_t es = sz_dtype_size((sz_dtype)l->dtype[0]);
    if (l->numel[0] > a->from &&
        sz_cuda_task_rc(arg, "zero", sz_cuda_zero(SZ_STREAM, (char *)sz_task_ptr(b, arg, 0) + (size_t)a->from * es,
                                                  (size_t)(l->numel[0] - a->from) * es)))
        return;
    if (a->stats)
        sz_counters_add(a->stats, a->category, a->bytes);
}
#endif

SZ_PERFMODEL(zero_model, "sz_zero");
SZ_CODELET_CUDA(sz_cl_zero, zero_cpu, zero_cuda, "zero", zero_model);
SZ_DESCRIBE(sz_cl_zero, SZ_TASK_ZERO, 0, "x (W) = 0");

/* With `token` (a model's communication token), the zeroing that allocates a unit's gradients is
 * ordered after the earlier reduce-scatters, bounding the gradients in flight. */
static void count_zero(struct sz_core *m, const sz_tensor *t, int64_t from)
{
    if (m && t) {
        m->zero_tasks++;
        m->zero_bytes += (t->numel > from ? t->numel - from : 0) * (int64_t)sz_dtype_size(t->dtype);
    }
}

sz_status sz_submit_zero_from(sz_unit *u, const sz_tensor *t, int64_t from, const char *name,
                              struct sz_counters *acct, int category, int64_t bytes, const sz_tensor *token)
{
    struct zero_args a = {acct, category, bytes, from < 0 ? 0 : from};
    sz_task_tensor tt[] = {{t, SZ_WRITE, SZ_DTYPE_ANY, -1, "x", 0}, {token, SZ_ACCUMULATE, SZ_DTYPE_F32, 1, "token", 1}};
    count_zero(sz_core_of(u), t, a.from);
    return sz_task_submit_as(u, name, "zero", &sz_cl_zero, tt, token ? 2 : 1, &a, sizeof a);
}

sz_status sz_submit_zero(sz_unit *u, const sz_tensor *t, const char *name, struct sz_counters *acct,
                         int category, int64_t bytes, const sz_tensor *token)
{
    return sz_submit_zero_from(u, t, 0, name, acct, category, bytes, token);
}

/* The zeroing task of an app's sz_op_zero. */
static sz_status submit_zero(sz_unit *u, sz_tensor *t)
{
    struct zero_args a = {NULL, 0, 0, 0};
    sz_task_tensor tt[] = {{t, SZ_WRITE, SZ_DTYPE_ANY, -1, "x", 0}};
    struct sz_core *m = sz_core_of(u);
    if (m)
        m->zeros_run++;
    count_zero(m, t, 0);
    return sz_task_submit(u, &sz_cl_zero, "zero", tt, 1, &a, sizeof a);
}

/* A zeroing of a whole handle waits (struct sz_model's pending) for the next task on it. */
sz_status sz_op_zero(sz_unit *u, sz_tensor *t)
{
    struct sz_core *m = sz_core_of(u);
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

int sz_fold_decide(int has_cuda_impl, int cuda_sets, uint32_t where, int ncuda_workers)
{
    if (!has_cuda_impl || where == STARPU_CPU || ncuda_workers == 0)
        return 1; /* it runs on a CPU worker: every CPU kernel of an SZ_ACCUMULATE_OR_SET op sets */
    return cuda_sets; /* it may run on a CUDA worker (where: CUDA, or either): that impl must set too */
}

/* Whether a task of cl submitted with `where` may set its SZ_ACCUMULATE_OR_SET tensors: decided at
 * submission, before a worker is chosen, so every implementation it may run on must honour it. */
static int sets_wherever(const struct starpu_codelet *cl, uint32_t where)
{
    const sz_op_desc *d = sz_op_desc_of(cl);
    return sz_fold_decide(cl->cuda_funcs[0] != NULL, d && (d->supports & SZ_CL_CUDA_SETS), where,
                          (int)starpu_cuda_worker_get_count());
}

sz_status sz_zero_resolve(struct sz_core *m, struct starpu_codelet *cl, const sz_task_tensor *tt, int n,
                          uint32_t where, unsigned char *set)
{
    sz_status first = SZ_OK;
    int sets = sets_wherever(cl, where);
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
        if (tt[k].access == SZ_ACCUMULATE_OR_SET && sets && alone && t->offset == 0 && t->numel == t->handle_numel &&
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

sz_status sz_zero_flush(struct sz_core *m)
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

/* ---- the parameters' gradients left to their first writers (SZ_GRADS_FIRST_WRITERS) ---------- */

sz_status sz_grads_defer(struct sz_core *m, sz_unit *u, const sz_tensor *all, int64_t lo, int64_t n,
                         int onto_zeros, const char *name)
{
    if (n <= 0)
        return SZ_OK;
    struct sz_pending_grad *g = sz_grow(m->gpending, &m->cap_gpending, m->ngpending + 1, sizeof *g);
    if (!g)
        return SZ_ERR_NOMEM;
    m->gpending = g;
    m->gpending[m->ngpending++] = (struct sz_pending_grad){u, all, lo, n, onto_zeros, name};
    return SZ_OK;
}

static int by_handle_then_lo(const void *x, const void *y)
{
    const struct sz_pending_grad *a = x, *b = y;
    uintptr_t ha = (uintptr_t)a->all->h, hb = (uintptr_t)b->all->h;
    if (ha != hb)
        return ha < hb ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Zeroes the views z[0..n) (taken off the pending list already): contiguous ones of a buffer by
 * one task. */
static sz_status zero_views(struct sz_core *m, struct sz_pending_grad *z, int n)
{
    sz_status first = SZ_OK;
    qsort(z, (size_t)n, sizeof *z, by_handle_then_lo);
    for (int i = 0; i < n;) {
        int j = i + 1;
        int64_t hi = z[i].lo + z[i].n;
        while (j < n && z[j].all->h == z[i].all->h && z[j].lo == hi)
            hi += z[j++].n;
        sz_tensor v = sz_tensor_view(z[i].all, z[i].lo, hi - z[i].lo, NULL);
        sz_status st = sz_submit_zero(z[i].u, &v, z[i].name, NULL, 0, 0, NULL);
        m->grads_zeroed += j - i;
        if (first == SZ_OK)
            first = st;
        i = j;
    }
    return first;
}

static int overlaps(const sz_tensor *t, const struct sz_pending_grad *g)
{
    return t && t->h == g->all->h && t->offset < g->lo + g->n && g->lo < t->offset + t->numel;
}

sz_status sz_grads_resolve(struct sz_core *m, struct starpu_codelet *cl, const sz_task_tensor *tt, int n,
                           uint32_t where, unsigned char *set)
{
    int sets = sets_wherever(cl, where);
    struct sz_pending_grad zero[64];
    int nz = 0;
    sz_status first = SZ_OK;
    for (int i = 0; i < m->ngpending;) {
        struct sz_pending_grad g = m->gpending[i];
        int touch = 0, k1 = -1;
        for (int k = 0; k < n; k++)
            if (overlaps(tt[k].tensor, &g)) {
                touch++;
                k1 = k;
            }
        if (!touch) {
            i++;
            continue;
        }
        m->gpending[i] = m->gpending[--m->ngpending]; /* taken: set here or zeroed first */
        const sz_tensor *t = touch == 1 ? tt[k1].tensor : NULL;
        if (t && tt[k1].access == SZ_ACCUMULATE_OR_SET && sets && t->offset == g.lo && t->numel == g.n &&
            (tt[k1].numel < 0 || tt[k1].numel == t->numel)) {
            set[k1] = g.onto_zeros ? 2 : 1; /* 2: a rounding writer's ONTO_ZEROS (sz_task_round_mode) */
            m->grads_set++;
            continue;
        }
        if (nz == (int)(sizeof zero / sizeof zero[0])) {
            sz_status st = zero_views(m, zero, nz);
            first = first == SZ_OK ? st : first;
            nz = 0;
        }
        zero[nz++] = g;
    }
    if (nz) {
        sz_status st = zero_views(m, zero, nz);
        first = first == SZ_OK ? st : first;
    }
    return first;
}

sz_status sz_grads_flush(struct sz_core *m)
{
    if (!m || m->ngpending == 0)
        return SZ_OK;
    int n = m->ngpending;
    m->ngpending = 0; /* taken before the zeroing tasks are built (they touch the same buffers) */
    return zero_views(m, m->gpending, n);
}

float *sz_round_scratch(const void *arg, size_t n)
{
    const char *fail = getenv("SZ_TEST_FAIL_ROUND_SCRATCH"); /* the test hook (core/sz_core.h) */
    float *s = fail && fail[0] == '1' ? NULL : malloc(n * sizeof *s);
    if (!s)
        sz_task_fail_nomem(arg, "out of memory (the gradients' rounding scratch)");
    return s;
}
