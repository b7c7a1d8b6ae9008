/* tasks/sz_tasks.h — private structures behind sz_tensor, sz_unit and sz_model: which StarPU
 * handles exist for a model (one flat buffer per unit for parameters, gradients, Adam m and v,
 * partitioned into per-tensor children) and the helpers that submit tasks on them. */
#ifndef SZ_TASKS_H
#define SZ_TASKS_H

#include <starpu.h>
#include "starzero.h"
#include "sz_runtime.h"

struct sz_tensor {
    starpu_data_handle_t h;
    int64_t numel;
    sz_dtype dtype;
    char name[48];
    void *home;        /* the main-RAM buffer this handle was registered on (NULL for children) */
};

/* One flat buffer (parameters, gradients, m or v of a unit) and its per-tensor children. */
struct sz_flat {
    float *buf;
    starpu_data_handle_t h;
    sz_tensor *child;  /* nparams tensors: children of h */
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
    starpu_data_handle_t sumsq;   /* one float: this unit's squared gradient norm */
    float sumsq_value;
};

struct sz_model {
    struct sz_context *ctx;
    struct sz_unit **units;
    int nunits, cap_units;
    sz_tensor **tensors;
    int ntensors, cap_tensors;
    sz_tensor *loss;
    int finalized;
    starpu_data_handle_t clip_scale;   /* one float: the factor every AdamW task applies to grads */
    float clip_scale_value;
    float last_grad_norm;
};

/* tasks/ops.c: the step's own tasks */
sz_status sz_submit_zero(starpu_data_handle_t h, const char *name);
sz_status sz_submit_sumsq(starpu_data_handle_t out, const sz_tensor *tensors, int n, const char *name);
sz_status sz_submit_clip_scale(starpu_data_handle_t scale, const starpu_data_handle_t *parts, int n, float clip);
sz_status sz_submit_adamw(starpu_data_handle_t p, starpu_data_handle_t g, starpu_data_handle_t m,
                          starpu_data_handle_t v, starpu_data_handle_t scale, const sz_train_config *cfg,
                          float wd, int t, const char *name);

/* tasks/tensor.c */
sz_tensor *sz_tensor_register(void *home, int64_t numel, sz_dtype dtype, const char *name);
void sz_tensor_unregister(sz_tensor *t);

#endif
