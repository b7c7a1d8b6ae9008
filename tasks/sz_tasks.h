/* tasks/sz_tasks.h — private structures behind sz_tensor, sz_unit and sz_model: which StarPU
 * handles exist for a model (one flat buffer per unit for parameters, gradients, Adam m and v,
 * partitioned into per-tensor children) and the helpers that submit tasks on them. */
#ifndef SZ_TASKS_H
#define SZ_TASKS_H

#include <starpu.h>
#include "starzero.h"
#include "sz_runtime.h"

/* A tensor is a view: `numel` elements at element `offset` of the vector handle `h`, which holds
 * `handle_numel` elements. A unit's parameters are views of one flat handle, and so on. */
struct sz_tensor {
    starpu_data_handle_t h;
    int64_t offset, numel, handle_numel;
    sz_dtype dtype;
    char name[48];
    void *home;        /* the buffer this tensor registered and owns (NULL for views) */
};

/* One flat buffer (parameters, gradients, m or v of a unit): the handle, a view over all of it,
 * and one view per parameter tensor. */
struct sz_flat {
    float *buf;
    sz_tensor all;
    sz_tensor *child;  /* nparams views */
};

struct sz_unit {
    struct sz_model *model;
    int index;
    char name[32], fwd_name[40], bwd_name[40], opt_name[40];
    sz_param_spec *params;
    int nparams;
    int64_t *offset;   /* offset of each param in the flat buffer */
    int64_t numel;     /* sum of the params' sizes */
    sz_unit_fn forward, backward;
    void *user;
    const char *phase;            /* task name of the ops being submitted: fwd_name or bwd_name */
    struct sz_flat param, grad, adam_m, adam_v;
    sz_tensor sumsq;              /* view: this unit's squared gradient norm (one float of model->sumsq) */
};

struct sz_model {
    struct sz_context *ctx;
    struct sz_unit **units;
    int nunits, cap_units;
    sz_tensor **tensors;
    int ntensors, cap_tensors;
    sz_tensor *loss;
    int finalized;
    sz_tensor *sumsq;                  /* nunits floats: the units' squared gradient norms */
    sz_tensor *clip_scale;             /* one float: the factor every AdamW task applies to grads */
    float last_grad_norm;
};

/* tasks/ops.c: the step's own tasks */
sz_status sz_submit_zero(const sz_tensor *t, const char *name);
sz_status sz_submit_sumsq(const sz_tensor *out, const sz_tensor *x, const char *name);
sz_status sz_submit_clip_scale(const sz_tensor *scale, const sz_tensor *sums, float clip);
sz_status sz_submit_adamw(const sz_tensor *p, const sz_tensor *g, const sz_tensor *m, const sz_tensor *v,
                          const sz_tensor *scale, const sz_train_config *cfg, float wd, int t, const char *name);

/* tasks/tensor.c */
sz_tensor *sz_tensor_register(void *home, int64_t numel, sz_dtype dtype, const char *name);
/* A view of `numel` elements at `offset` of base's handle. */
sz_tensor sz_tensor_view(const sz_tensor *base, int64_t offset, int64_t numel, const char *name);
void sz_tensor_unregister(sz_tensor *t);

#endif
