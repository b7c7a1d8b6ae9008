/* core/tape.c — the recorded forward a derived backward is made from (include/starzero_starpu.h,
 * "an operation with its backward"): sz_task_submit_diff, the records the engine keeps while it
 * records a unit's forward (struct sz_core's tape), and what a backward function reads of its
 * record (the forward's tensors, its arguments, the gradients). The engine (tasks/autograd.c)
 * decides the gradient buffers and runs the backward functions. */
#include <stdlib.h>
#include <string.h>
#include "sz_core.h"

static int is_float(const sz_task_tensor *t)
{
    sz_dtype d = t->tensor ? t->tensor->dtype : t->dtype;
    return d == SZ_DTYPE_F32 || d == SZ_DTYPE_BF16 || d == SZ_DTYPE_F16;
}

static sz_grad_role auto_role(const sz_task_tensor *t)
{
    if (!is_float(t))
        return SZ_GRAD_NONE;
    return t->access == SZ_READ ? SZ_GRAD_INPUT : t->access == SZ_WRITE ? SZ_GRAD_OUTPUT : SZ_GRAD_NONE;
}

sz_status sz_tape_add(struct sz_core *c, sz_unit *u, const char *op, const sz_task_tensor *tt, int n,
                      const void *params, size_t params_size, const sz_grad_spec *grads, sz_backward_fn backward)
{
    void *p = sz_grow(c->tape.r, &c->tape.cap, c->tape.n + 1, sizeof *c->tape.r);
    if (!p)
        return SZ_ERR_NOMEM;
    c->tape.r = p;
    struct sz_op_record *r = &c->tape.r[c->tape.n];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op ? op : "op");
    r->unit = u;
    r->backward = backward;
    r->n = n;
    for (int k = 0; k < n; k++) {
        r->t[k] = tt[k];
        r->g[k] = grads ? grads[k] : (sz_grad_spec){SZ_GRAD_AUTO, 0};
        if (r->g[k].role == SZ_GRAD_AUTO)
            r->g[k].role = auto_role(&tt[k]);
        if (!tt[k].tensor)
            r->g[k].role = SZ_GRAD_NONE;
        r->param_unit[k] = -1;
        r->zeroed_gen[k] = -1;
    }
    if (params_size) {
        if (!(r->params = malloc(params_size)))
            return SZ_ERR_NOMEM;
        memcpy(r->params, params, params_size);
        r->params_size = params_size;
    }
    c->tape.n++;
    return SZ_OK;
}

void sz_tape_free(struct sz_tape *t)
{
    for (int i = 0; t && i < t->n; i++)
        free(t->r[i].params);
    if (t) {
        free(t->r);
        memset(t, 0, sizeof *t);
    }
}

struct sz_op_record *sz_tape_last(sz_unit *u)
{
    struct sz_core *c = sz_core_of(u);
    return c && c->recording && c->tape.n > 0 ? &c->tape.r[c->tape.n - 1] : NULL;
}

sz_tensor *sz_record_tensor(const sz_op_record *r, int k)
{
    if (!r || k < 0 || k >= r->n)
        return NULL;
    if (r->param_unit[k] >= 0) /* the unit's view of the parameter now (a working copy, a gathered one) */
        return sz_model_param(sz_unit_model(r->unit), r->param_unit[k], r->param_index[k]);
    return (sz_tensor *)r->t[k].tensor;
}

const void *sz_record_params(const sz_op_record *r) { return r ? r->params : NULL; }

sz_tensor *sz_record_grad(sz_unit *u, const sz_op_record *r, int k)
{
    if (!r || k < 0 || k >= r->n || r->g[k].role == SZ_GRAD_NONE)
        return NULL;
    if (r->param_unit[k] >= 0)
        return r->g[k].role == SZ_GRAD_OUTPUT ? NULL
                                              : sz_model_grad(sz_unit_model(r->unit), r->param_unit[k], r->param_index[k]);
    struct sz_op_record *w = (struct sz_op_record *)r;
    struct sz_core *c = sz_core_of(u);
    if (w->grad[k] && w->zero_first[k] && c && w->zeroed_gen[k] != c->bwd_gen) {
        w->zeroed_gen[k] = c->bwd_gen; /* once per backward pass, before the op's first write */
        if (sz_op_zero(u, w->grad[k]) != SZ_OK)
            return NULL;
    }
    return w->grad[k];
}
