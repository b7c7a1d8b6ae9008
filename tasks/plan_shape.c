/* tasks/plan_shape.c — a model's step planned without a runtime (sz_model_shape, include/starzero.h):
 * the units a model library describes from the tables its create function uses, turned into the
 * plan the engine would build for them (the same sz_zero_plan_config_of, bucket and padding rules as
 * tasks/step.c), folded for its peak or printed. This is how sz-estimate predicts what sz-train's
 * engine builds, without a copy of either model's units. */
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"

sz_status sz_model_shape_init(sz_model_shape *s, int nunits, size_t model_bytes)
{
    if (!s || nunits < 1)
        return SZ_ERR_INVALID;
    memset(s, 0, sizeof *s);
    size_t n = (size_t)nunits, units = n * sizeof *s->units, ckpt = n * sizeof *s->ckpt_bytes,
           names = (n * sizeof *s->names + 15) / 16 * 16;
    char *block = calloc(1, units + ckpt + names + model_bytes);
    if (!block)
        return SZ_ERR_NOMEM;
    s->nunits = nunits;
    s->units = (sz_unit_desc *)block;
    s->ckpt_bytes = (int64_t *)(block + units);
    s->names = (char (*)[32])(block + units + ckpt);
    s->model = model_bytes ? block + units + ckpt + names : NULL;
    for (int i = 0; i < nunits; i++)
        s->units[i].name = s->names[i];
    return SZ_OK;
}

void sz_model_shape_free(sz_model_shape *s)
{
    if (!s)
        return;
    free(s->units); /* the block */
    memset(s, 0, sizeof *s);
}

/* The plan's view of the described units (as sz_zero_plan_units sees added ones). */
static sz_status plan_units(const sz_model_shape *s, sz_plan_unit *pu)
{
    for (int i = 0; i < s->nunits; i++) {
        const sz_unit_desc *d = &s->units[i];
        int64_t numel = 0;
        for (int k = 0; k < d->nparams; k++) {
            if (d->params[k].rows < 1 || d->params[k].cols < 1)
                return SZ_ERR_INVALID;
            numel += d->params[k].rows * d->params[k].cols;
        }
        for (int k = 0; k < d->nuses; k++)
            if (d->uses[k] < 0 || d->uses[k] >= i)
                return SZ_ERR_INVALID; /* only earlier units can be shared (sz_model_add_unit) */
        pu[i] = (sz_plan_unit){.numel = numel, .uses = d->uses, .nuses = d->nuses, .has_backward = 1, /* NULL: derived */
                               .checkpointable = d->checkpointable, .backward_skips_params = d->backward_skips_params,
                               .ckpt_bytes = s->ckpt_bytes[i], .bf16_params = d->bf16_params,
                               .round_grads = d->round_grads, .round_tied_grads = d->round_tied_grads};
    }
    return SZ_OK;
}

sz_status sz_model_shape_plan(const sz_model_shape *s, const sz_zero_config *z, int nd, int rank, int clip,
                              int comm_worker, int64_t *peak, FILE *print, int json)
{
    if (!s || !s->units || s->nunits < 1 || !z || nd < 1 || rank < 0 || rank >= nd || z->stage < 0 || z->stage > 3 ||
        z->micro_batches < 1 || z->prefetch_bytes < 0 || z->max_live_bytes < 0 || z->host_bytes < 0 ||
        z->bucket_bytes < 0 || (z->offload_checkpoints && !z->checkpoint))
        return SZ_ERR_INVALID;
    int states = sz_optimizer_states(z->optimizer, z->momentum);
    sz_resolved_precision prec;
    sz_status st = states < 0 ? SZ_ERR_INVALID : sz_precision_resolve_cpu(z, &prec);
    if (st != SZ_OK)
        return st;
    sz_plan_unit *pu = calloc((size_t)s->nunits, sizeof *pu);
    const char **names = calloc((size_t)s->nunits, sizeof *names);
    if (!pu || !names) {
        free(pu);
        free(names);
        return SZ_ERR_NOMEM;
    }
    st = plan_units(s, pu);
    sz_fold_switches fold;
    sz_fold_switches_read(&fold);
    sz_plan_config c;
    /* fp16 takes the gradients' norm first (the overflow check), as the step does */
    sz_zero_plan_config_of(z, &prec, states, fold.grads, nd, rank, SZ_PASS_STEP, clip || prec.loss_scaling, &c);
    int64_t maxpad = 1;
    for (int i = 0; i < s->nunits; i++) {
        int64_t p = sz_zero_padded(pu[i].numel, nd);
        maxpad = p > maxpad ? p : maxpad;
        names[i] = s->units[i].name;
    }
    c.bucket_elems = sz_plan_bucket_elems(z->bucket_bytes, nd, maxpad);
    c.comm_worker = comm_worker;
    c.extra[SZ_MEM_ACTIVATIONS] = s->activation_bytes;
    c.extra[SZ_MEM_HOST] = s->host_pool_bytes;
    c.extra[SZ_MEM_HOST_BUFFERS] = z->host_bytes + s->host_buffer_bytes;
    sz_plan p;
    if (st == SZ_OK)
        st = sz_plan_build(pu, s->nunits, &c, &p);
    if (st == SZ_OK) {
        sz_fold f;
        sz_plan_fold(&p, &f, NULL);
        if (peak)
            *peak = f.peak_bytes;
        if (print)
            sz_plan_print(print, &p, names, json);
        sz_plan_free(&p);
    }
    free(pu);
    free(names);
    return st;
}

sz_status sz_model_shape_begin(sz_model_shape *s, const sz_zero_config *z, int B, int T, int max_seq, int workers,
                               int threads, int nunits, size_t model_bytes, sz_resolved_precision *p, char *err,
                               size_t errlen)
{
    if (!z || !s || !p || B < 1 || T < 1 || T > max_seq || workers < 1 || threads < 1 ||
        sz_precision_resolve_cpu(z, p) != SZ_OK) {
        if (err)
            snprintf(err, errlen, "batch %d x seq %d (1 <= T <= max_seq %d), %d workers of %d threads, or the ZeRO "
                     "configuration's precision: invalid", B, T, max_seq, workers, threads);
        return SZ_ERR_INVALID;
    }
    return sz_model_shape_init(s, nunits, model_bytes);
}
