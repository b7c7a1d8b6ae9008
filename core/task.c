/* core/task.c — the one task builder every operation goes through, built-in or an app's own
 * (include/starzero_starpu.h): checks each tensor's presence, element type and size (naming the op
 * and the tensor when one is wrong), folds the tensors onto distinct StarPU handles (each handle
 * passed once with the union of its modes; a write to part of a handle becomes a read-write, since
 * the rest of the handle must survive), and packs the layout the kernel reads followed by the op's
 * typed argument struct; a pending sz_op_zero on one of the tensors is folded into the task or
 * submitted before it, and so is a parameter's gradient left to its first writer (core/fold.c); the
 * task carries its codelet's class (its descriptor, core/descs.c) and plan position for sched/.
 * Also the failure slot kernels report unusable inputs through. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_core.h"

starpu_data_handle_t sz_tensor_handle(const sz_tensor *t) { return t ? t->h : NULL; }
int64_t sz_tensor_offset(const sz_tensor *t) { return t ? t->offset : 0; }

static const char *dtype_name(int dt)
{
    switch (dt) {
    case SZ_DTYPE_F32: return "f32";
    case SZ_DTYPE_BF16: return "bf16";
    case SZ_DTYPE_F16: return "f16";
    case SZ_DTYPE_I32: return "i32";
    }
    return "any";
}

static void log_err(struct sz_core *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_err(struct sz_core *m, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m)
        sz_context_log(m->ctx, SZ_LOG_ERROR, "%s", msg);
    else
        sz_log_stderr(SZ_LOG_ERROR, msg, NULL);
}

sz_status sz_task_submit_named(struct sz_core *m, int unit, const char *name, const char *op,
                               struct starpu_codelet *cl, const sz_task_tensor *tt, int n, const void *params,
                               size_t params_size)
{
    return sz_task_submit_where(m, unit, name, op, cl, tt, n, params, params_size, 0);
}

sz_status sz_task_submit_where(struct sz_core *m, int unit, const char *name, const char *op,
                               struct starpu_codelet *cl, const sz_task_tensor *tt, int n, const void *params,
                               size_t params_size, uint32_t where)
{
    if (!cl || n < 0 || n > SZ_TASK_MAX_TENSORS || (n && !tt) || (params_size && !params)) {
        log_err(m, "%s (%s): bad task description (%d tensors, codelet %p)", op ? op : "?", name ? name : "?", n,
                (void *)cl);
        return SZ_ERR_INVALID;
    }
    size_t total = SZ_TASK_PARAMS_OFFSET + params_size;
    char *buf = calloc(1, total);
    if (!buf)
        return SZ_ERR_NOMEM;
    sz_task_layout *l = (sz_task_layout *)buf;
    snprintf(l->name, sizeof l->name, "%s", name ? name : (op ? op : ""));
    l->ntensors = n;
    l->fail = m ? (void *)&m->failure : NULL;
    l->params_size = (int64_t)params_size;
    if (params_size)
        memcpy(buf + SZ_TASK_PARAMS_OFFSET, params, params_size);
    struct starpu_data_descr d[SZ_TASK_MAX_TENSORS];
    int nb = 0;
    for (int k = 0; k < n; k++) {
        const sz_tensor *t = tt[k].tensor;
        const char *role = tt[k].role ? tt[k].role : "?";
        l->buffer[k] = -1;
        if (!t) {
            if (tt[k].optional)
                continue;
            log_err(m, "%s (%s): tensor '%s' is missing (NULL)", op, l->name, role);
            free(buf);
            return SZ_ERR_INVALID;
        }
        int64_t need = tt[k].numel < 0 ? t->numel : tt[k].numel;
        if ((tt[k].dtype != SZ_DTYPE_ANY && t->dtype != tt[k].dtype) || t->numel < need) {
            log_err(m, "%s (%s): tensor '%s' (%s) has %lld elements of %s, the op needs %lld of %s", op, l->name,
                    role, t->name, (long long)t->numel, dtype_name(t->dtype), (long long)need,
                    dtype_name(tt[k].dtype));
            free(buf);
            return SZ_ERR_INVALID;
        }
        enum starpu_data_access_mode mode = tt[k].access == SZ_READ ? STARPU_R
                                            : tt[k].access == SZ_WRITE ? STARPU_W
                                                                       : STARPU_RW;
        if (mode == STARPU_W && (t->offset != 0 || t->numel != t->handle_numel))
            mode = STARPU_RW;
        int j = 0;
        while (j < nb && d[j].handle != t->h)
            j++;
        if (j == nb) {
            d[j].handle = t->h;
            d[j].mode = mode;
            nb++;
        } else if (d[j].mode != mode) {
            d[j].mode = STARPU_RW;
        }
        l->buffer[k] = j;
        l->offset[k] = t->offset;
        l->numel[k] = t->numel;
        l->dtype[k] = t->dtype;
    }
    if (m && m->recording) { /* checked: the engine records the op (core/tape.c), nothing runs */
        free(buf);
        return SZ_OK;
    }
    if (!where && m)
        where = m->force_where;
    /* With CUDA workers the compute runs on the GPU under every policy (the zero policy does this
     * itself; StarPU's own would also hand GPU-capable compute to the CPU workers, which serve the
     * host side): a codelet with a CUDA implementation that is not a collective goes to CUDA. */
    const sz_op_desc *desc = sz_op_desc_of(cl);
    sz_task_class cls = desc ? desc->cls : SZ_TASK_COMPUTE;
    if (!where && m && m->gpu_compute && cl->cuda_funcs[0] && !sz_class_is_comm(cls))
        where = STARPU_CUDA;
    if (m && m->npending > 0) { /* an sz_op_zero of this callback on one of the tensors */
        unsigned char set[SZ_TASK_MAX_TENSORS] = {0};
        sz_status st = sz_zero_resolve(m, cl, tt, n, where, set);
        if (st != SZ_OK) {
            free(buf);
            return st;
        }
        for (int k = 0; k < n; k++)
            if (set[k]) { /* written whole, by the only tensor of the task on that handle */
                l->set[k] = 1;
                d[l->buffer[k]].mode = STARPU_W;
            }
    }
    if (m && m->ngpending > 0) { /* a parameter's gradient left to its first writer */
        unsigned char set[SZ_TASK_MAX_TENSORS] = {0};
        sz_status st = sz_grads_resolve(m, cl, tt, n, where, set);
        if (st != SZ_OK) {
            free(buf);
            return st;
        }
        for (int k = 0; k < n; k++)
            if (set[k]) /* a view written whole: the rest of its buffer survives (the mode stays RW);
                         * 2: rounded onto zeros (sz_task_round_mode) */
                l->set[k] = set[k];
    }
    for (int k = 0; m && m->tracing && k < n; k++) { /* the check mode's list (tasks/check.c) */
        void *p = sz_grow(m->touched, &m->cap_touched, m->ntouched + 1, sizeof *m->touched);
        if (!p)
            break;
        m->touched = p;
        if (tt[k].tensor) {
            struct sz_touch *e = &m->touched[m->ntouched++];
            e->t = tt[k].tensor;
            e->sets = tt[k].access == SZ_WRITE || (tt[k].access == SZ_ACCUMULATE_OR_SET && l->set[k]);
            snprintf(e->task, sizeof e->task, "%s", l->name);
        }
    }
    if (m && m->on_access)
        for (int j = 0; j < nb; j++)
            m->on_access(m, d[j].handle, d[j].mode != STARPU_R);
    void *sd = sz_sched_data(m ? m->position++ : 0, unit, cls);
    int ret = where ? starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, d, nb, STARPU_CL_ARGS, buf, total, STARPU_NAME,
                                         l->name, STARPU_TASK_SCHED_DATA, sd, STARPU_EXECUTE_WHERE, where, 0)
                    : starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, d, nb, STARPU_CL_ARGS, buf, total, STARPU_NAME,
                                         l->name, STARPU_TASK_SCHED_DATA, sd, 0);
    if (ret != 0) {
        log_err(m, "%s (%s): StarPU refused the task (%d)", op, l->name, ret);
        return SZ_ERR_RUNTIME;
    }
    return SZ_OK;
}

void *sz_grow(void *arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return arr;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *p = realloc(arr, (size_t)nc * elem);
    if (p)
        *cap = nc;
    return p;
}

/* "<phase>:<unit>:<op>" */
static void task_name(char *name, size_t size, const sz_unit *u, const char *op)
{
    const struct sz_unit_core *c = sz_unit_core_of(u);
    snprintf(name, size, "%s:%s", c->phase ? c->phase : c->name, op);
}

static sz_status submit_unit(sz_unit *u, struct starpu_codelet *cl, const char *op, const sz_task_tensor *tensors,
                             int ntensors, const void *params, size_t params_size, uint32_t where,
                             const sz_grad_spec *grads, sz_backward_fn backward)
{
    if (!op)
        op = cl && cl->name ? cl->name : "op";
    if (!u) {
        log_err(NULL, "%s: called outside a unit's callback (unit is NULL)", op);
        return SZ_ERR_INVALID;
    }
    char name[64];
    task_name(name, sizeof name, u, op);
    struct sz_core *c = sz_core_of(u);
    sz_status st = sz_task_submit_where(c, sz_unit_core_of(u)->index, name, op, cl, tensors, ntensors, params,
                                        params_size, where);
    if (st == SZ_OK && c && c->recording)
        st = sz_tape_add(c, u, op, tensors, ntensors, params, params_size, grads, backward);
    return st;
}

sz_status sz_task_submit_as(sz_unit *u, const char *name, const char *op, struct starpu_codelet *cl,
                            const sz_task_tensor *tensors, int ntensors, const void *params, size_t params_size)
{
    return sz_task_submit_named(sz_core_of(u), u ? sz_unit_core_of(u)->index : 0xffff, name, op, cl, tensors,
                                ntensors, params, params_size);
}

sz_status sz_task_submit(sz_unit *u, struct starpu_codelet *cl, const char *op, const sz_task_tensor *tensors,
                         int ntensors, const void *params, size_t params_size)
{
    return submit_unit(u, cl, op, tensors, ntensors, params, params_size, 0, NULL, NULL);
}

sz_status sz_task_submit_diff(sz_unit *u, struct starpu_codelet *cl, const char *op, const sz_task_tensor *tensors,
                              int ntensors, const void *params, size_t params_size, const sz_grad_spec *grads,
                              sz_backward_fn backward)
{
    return submit_unit(u, cl, op, tensors, ntensors, params, params_size, 0, grads, backward);
}

sz_status sz_task_submit_diff_cpu(sz_unit *u, struct starpu_codelet *cl, const char *op,
                                  const sz_task_tensor *tensors, int ntensors, const void *params, size_t params_size,
                                  const sz_grad_spec *grads, sz_backward_fn backward)
{
    return submit_unit(u, cl, op, tensors, ntensors, params, params_size, STARPU_CPU, grads, backward);
}

sz_status sz_task_submit_cpu(sz_unit *u, struct starpu_codelet *cl, const char *op, const sz_task_tensor *tensors,
                             int ntensors, const void *params, size_t params_size)
{
    return submit_unit(u, cl, op, tensors, ntensors, params, params_size, STARPU_CPU, NULL, NULL);
}

static sz_status refuse(sz_unit *u, const char *op, const char *fmt, va_list ap)
{
    char msg[400], name[64] = "";
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!op)
        op = "op";
    if (u)
        task_name(name, sizeof name, u, op);
    log_err(sz_core_of(u), "%s (%s): %s", op, u ? name : "outside a unit's callback", msg);
    return SZ_ERR_INVALID;
}

sz_status sz_task_refuse(sz_unit *u, const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sz_status st = refuse(u, op, fmt, ap);
    va_end(ap);
    return st;
}

sz_status sz_op_invalid(sz_unit *u, const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sz_status st = refuse(u, op, fmt, ap);
    va_end(ap);
    return st;
}

int sz_task_check_ids(const void *cl_arg, const char *role, const int32_t *ids, int64_t n, int64_t limit)
{
    if (!ids)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= limit) {
            sz_task_fail(cl_arg, "%s %d at row %lld is outside the vocabulary [0, %lld)", role ? role : "index",
                         (int)ids[i], (long long)i, (long long)limit);
            return 1;
        }
    return 0;
}

static void task_fail(const void *cl_arg, sz_status status, const char *fmt, va_list ap)
{
    const sz_task_layout *l = sz_task_layout_of(cl_arg);
    struct sz_task_failure *f = l->fail;
    char msg[sizeof f->msg];
    int len = snprintf(msg, sizeof msg, "%s: ", l->name);
    vsnprintf(msg + len, sizeof msg - (size_t)len, fmt, ap);
    if (!f) {
        sz_log_stderr(SZ_LOG_ERROR, msg, NULL);
        return;
    }
    int expected = 0;
    if (__atomic_compare_exchange_n(&f->claimed, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        memcpy(f->msg, msg, sizeof msg);
        f->status = status;
        __atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
    }
}

void sz_task_fail(const void *cl_arg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    task_fail(cl_arg, SZ_ERR_INVALID, fmt, ap);
    va_end(ap);
}

void sz_task_fail_nomem(const void *cl_arg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    task_fail(cl_arg, SZ_ERR_NOMEM, fmt, ap);
    va_end(ap);
}

sz_status sz_core_take_failure(struct sz_core *m)
{
    if (!m || !__atomic_load_n(&m->failure.failed, __ATOMIC_ACQUIRE))
        return SZ_OK;
    /* the rest of the call's tasks run first: their failures (the same bad input met again, e.g.
     * by the backward) are this call's too, not the next call's */
    starpu_task_wait_for_all();
    sz_context_log(m->ctx, SZ_LOG_ERROR, "%s", m->failure.msg);
    __atomic_store_n(&m->failure.failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&m->failure.claimed, 0, __ATOMIC_RELEASE);
    return m->failure.status;
}

