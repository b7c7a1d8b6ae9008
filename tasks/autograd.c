/* tasks/autograd.c — the derived backward: a unit without a backward callback gets one made from
 * its forward (include/starzero_starpu.h, "an operation with its backward"). At sz_model_finalize,
 * before the budget check, every unit's forward runs once while the core records its ops
 * (core/tape.c; parameters are stand-ins of the element type the callbacks will see, nothing is
 * submitted). Each tensor's successive values (an in-place op makes a new one) are followed through
 * the records; walking them in reverse from the loss marks which values get a gradient and which
 * ops' backwards run. Each such gradient gets one buffer — an activation's shared by the
 * checkpointable units (one per activation name and value, as the bundled models shared theirs by
 * hand) — of the element type the ops ask for, and the op that writes it first in the backward
 * zeroes it first (folded into that op: core/fold.c), so no gradient starts from stale values. At
 * each BWD action the unit's records run their backward functions in reverse order. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"

struct value {
    const sz_tensor *t;
    int producer, pk;      /* the record (and position) that wrote it; -1: there before the forward */
    int uversion;          /* its writes within the producer's unit so far (1: the first) */
    int has_grad, seed;    /* a gradient reaches it; it is the loss (its gradient is the loss scale) */
    int hand;              /* a unit with its own backward reads or writes it */
    int derived;           /* a derived unit's op reads or writes it */
    int fused;             /* its consumer differentiates it with its producer: no buffer */
};

struct analysis {
    struct sz_model *m;
    struct value *v;
    int nv, capv;
    int *vin, *vout;       /* per record and position: the value read, the value written (-1: none) */
};

static int fail(struct sz_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct sz_model *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->no_backward, sizeof m->no_backward, fmt, ap);
    va_end(ap);
    return -1;
}

static int is_derived(const struct sz_op_record *r) { return !((struct sz_unit *)r->unit)->backward; }

/* The latest value of t, or -1. */
static int current(const struct analysis *a, const sz_tensor *t)
{
    for (int i = a->nv - 1; i >= 0; i--)
        if (a->v[i].t == t)
            return i;
    return -1;
}

static int new_value(struct analysis *a, const sz_tensor *t, int producer, int pk, int uversion)
{
    void *p = sz_grow(a->v, &a->capv, a->nv + 1, sizeof *a->v);
    if (!p)
        return fail(a->m, "out of memory following the tensors of the recorded forward");
    a->v = p;
    a->v[a->nv] = (struct value){.t = t, .producer = producer, .pk = pk, .uversion = uversion};
    return a->nv++;
}

static int reads(sz_grad_role g, sz_access acc)
{
    return acc != SZ_WRITE || g == SZ_GRAD_INPUT || g == SZ_GRAD_INPUT_SET || g == SZ_GRAD_IN_PLACE;
}
static int writes(sz_grad_role g, sz_access acc) { return acc != SZ_READ || g == SZ_GRAD_OUTPUT; }
static int adds_grad(sz_grad_role g) { return g == SZ_GRAD_INPUT || g == SZ_GRAD_INPUT_SET || g == SZ_GRAD_IN_PLACE; }

/* Follows every tensor's values through the records (params: which parameter a stand-in is). */
static int follow(struct analysis *a, struct sz_flat *stand)
{
    struct sz_model *m = a->m;
    struct sz_tape *tp = &m->core.tape;
    for (int i = 0; i < tp->n; i++) {
        struct sz_op_record *r = &tp->r[i];
        struct sz_unit *u = (struct sz_unit *)r->unit;
        for (int k = 0; k < r->n; k++) {
            const sz_tensor *t = r->t[k].tensor;
            a->vin[i * SZ_TASK_MAX_TENSORS + k] = a->vout[i * SZ_TASK_MAX_TENSORS + k] = -1;
            for (int j = 0; t && j < m->nunits; j++)
                if (t >= stand[j].child && t < stand[j].child + m->units[j]->nparams) {
                    r->param_unit[k] = j;
                    r->param_index[k] = (int)(t - stand[j].child);
                }
            if (r->param_unit[k] >= 0 && writes(r->g[k].role, r->t[k].access))
                return fail(m, "unit %s: op '%s' writes parameter %s (tensor '%s'): parameters are changed only by "
                            "the optimizer", u->c.name, r->op, t->name, r->t[k].role ? r->t[k].role : "?");
        }
        for (int k = 0; k < r->n; k++) /* reads first: an in-place op reads the value it replaces */
            if (r->t[k].tensor && r->param_unit[k] < 0 && reads(r->g[k].role, r->t[k].access)) {
                int v = current(a, r->t[k].tensor);
                if (v < 0 && (v = new_value(a, r->t[k].tensor, -1, -1, 0)) < 0)
                    return -1;
                a->vin[i * SZ_TASK_MAX_TENSORS + k] = v;
            }
        for (int k = 0; k < r->n; k++)
            if (r->t[k].tensor && r->param_unit[k] < 0 && writes(r->g[k].role, r->t[k].access)) {
                int uv = 1;
                for (int v = 0; v < a->nv; v++)
                    uv += a->v[v].t == r->t[k].tensor && a->v[v].producer >= 0 &&
                          tp->r[a->v[v].producer].unit == r->unit;
                int v = new_value(a, r->t[k].tensor, i, k, uv);
                if (v < 0)
                    return -1;
                a->vout[i * SZ_TASK_MAX_TENSORS + k] = v;
            }
    }
    return 0;
}

/* From the loss back: which values get a gradient, which records' backwards run. */
static int reach(struct analysis *a)
{
    struct sz_model *m = a->m;
    struct sz_tape *tp = &m->core.tape;
    int loss = m->loss ? current(a, m->loss) : -1;
    if (loss < 0 || a->v[loss].producer < 0)
        return fail(m, "no op of any unit's forward writes the loss tensor (sz_model_set_loss): nothing to "
                    "differentiate");
    a->v[loss].has_grad = a->v[loss].seed = 1;
    for (int i = tp->n - 1; i >= 0; i--) {
        struct sz_op_record *r = &tp->r[i];
        int *vin = a->vin + i * SZ_TASK_MAX_TENSORS, *vout = a->vout + i * SZ_TASK_MAX_TENSORS;
        int derived = is_derived(r);
        for (int k = 0; k < r->n; k++) {
            struct value *vi = vin[k] >= 0 ? &a->v[vin[k]] : NULL, *vo = vout[k] >= 0 ? &a->v[vout[k]] : NULL;
            if (vi && r->g[k].role != SZ_GRAD_NONE)
                (derived ? &vi->derived : &vi->hand)[0] = 1;
            if (vo && (r->g[k].role == SZ_GRAD_OUTPUT || r->g[k].role == SZ_GRAD_INTERNAL))
                (derived ? &vo->derived : &vo->hand)[0] = 1;
        }
        if (!derived) { /* a hand-written backward: what it reads gets its gradients from it */
            for (int k = 0; k < r->n; k++)
                if (vin[k] >= 0 && r->g[k].role != SZ_GRAD_NONE)
                    a->v[vin[k]].has_grad = 1;
            continue;
        }
        int out = -1;
        for (int k = 0; k < r->n && out < 0; k++)
            if (vout[k] >= 0 && r->g[k].role == SZ_GRAD_OUTPUT && a->v[vout[k]].has_grad)
                out = k;
        if (out < 0)
            continue;
        int param_in = 0, act_in = 0;
        for (int k = 0; k < r->n; k++) {
            param_in |= r->param_unit[k] >= 0 && adds_grad(r->g[k].role);
            act_in |= vin[k] >= 0 && adds_grad(r->g[k].role);
        }
        if (!param_in && !act_in) {
            for (int k = 0; k < r->n && !act_in; k++) /* an op without a backward (plain sz_task_submit) */
                act_in = !r->backward && vin[k] >= 0 && r->g[k].role == SZ_GRAD_INPUT;
            if (!act_in)
                continue; /* nothing upstream needs a gradient */
        }
        if (!r->backward)
            return fail(m, "unit %s: op '%s' has no backward (submitted with sz_task_submit), but the gradient of its "
                        "output '%s' (%s) is needed: submit it with sz_task_submit_diff, mark that output "
                        "SZ_GRAD_NONE, or give the unit a backward callback",
                        ((struct sz_unit *)r->unit)->c.name, r->op, r->t[out].role ? r->t[out].role : "?",
                        r->t[out].tensor->name);
        r->active = 1;
        for (int k = 0; k < r->n; k++) { /* its inputs and statistics must still be there for its backward */
            int v = vin[k] >= 0 ? vin[k] : r->g[k].role == SZ_GRAD_NONE ? vout[k] : -1;
            for (int w = v + 1; v >= 0 && w < a->nv; w++) {
                int p = a->v[w].producer;
                if (a->v[w].t == a->v[v].t && p != i && p >= 0 && tp->r[p].unit == r->unit)
                    return fail(m, "unit %s: op '%s' overwrites '%s' (%s), which the backward of op '%s' before it "
                                "reads: write the result to a tensor of its own", ((struct sz_unit *)r->unit)->c.name,
                                tp->r[p].op, a->v[v].t->name, tp->r[p].t[a->v[w].pk].role, r->op);
            }
        }
        for (int k = 0; k < r->n; k++) {
            if (vin[k] >= 0 && adds_grad(r->g[k].role))
                a->v[vin[k]].has_grad = 1;
            if (vout[k] >= 0 && r->g[k].role == SZ_GRAD_INTERNAL)
                a->v[vout[k]].has_grad = 1;
        }
    }
    return 0;
}

/* An op whose input is the fusable output of the op that wrote it, and its only reader, differentiates
 * both (matmul_fwd after matmul_gelu_fwd: gelu_matmul_bwd): that output needs no gradient buffer. */
static void fuse(struct analysis *a)
{
    struct sz_tape *tp = &a->m->core.tape;
    for (int i = 0; i < tp->n; i++) {
        struct sz_op_record *c = &tp->r[i];
        int k = c->absorbs_pos, v = k > 0 && k < c->n ? a->vin[i * SZ_TASK_MAX_TENSORS + k] : -1;
        if (!c->active || v < 0 || a->v[v].producer < 0)
            continue;
        struct sz_op_record *p = &tp->r[a->v[v].producer];
        if (!p->active || p->fusable_pos <= 0 || p->fusable_pos != a->v[v].pk || p->unit != c->unit)
            continue;
        int readers = 0;
        for (int j = 0; j < tp->n; j++)
            for (int q = 0; q < tp->r[j].n; q++)
                readers += a->vin[j * SZ_TASK_MAX_TENSORS + q] == v && tp->r[j].g[q].role != SZ_GRAD_NONE;
        if (readers == 1) {
            c->fused_from = p;
            p->fused_into = c;
            a->v[v].fused = 1;
        }
    }
}

/* A weight read by the unit that owns it (an op with tied_numel: the token embedding) and by other
 * units (GPT-2's head): where gradients are rounded by their writers, both backwards share one fp32
 * scratch for the rows both write (sz_op_matmul_bwd_tied, sz_op_encoder_bwd_tied). */
static int tie(struct analysis *a)
{
    struct sz_model *m = a->m;
    struct sz_tape *tp = &m->core.tape;
    if (!(m->prec.mixed && m->prec.grads_rounded))
        return 0;
    for (int i = 0; i < tp->n; i++) {
        struct sz_op_record *e = &tp->r[i];
        for (int k = 0; e->active && e->tied_numel > 0 && k < e->n; k++) {
            int pu = e->param_unit[k], pi = e->param_index[k];
            if (pu < 0 || m->units[pu] != (struct sz_unit *)e->unit)
                continue;
            for (int j = 0; j < tp->n; j++) {
                struct sz_op_record *h = &tp->r[j];
                for (int q = 0; h->active && h->unit != e->unit && q < h->n; q++)
                    if (h->param_unit[q] == pu && h->param_index[q] == pi) {
                        if (!e->tied) {
                            if (!(e->tied = sz_model_grad_buffer(m, "tied_rows", SZ_DTYPE_F32, e->tied_numel)))
                                return fail(m, "no memory for the tied rows' scratch (%lld floats)",
                                            (long long)e->tied_numel);
                            m->nscratch--; /* partly written by design: not a gradient the check mode scans */
                        }
                        h->tied = e->tied;
                        h->tied_with = e;
                    }
            }
        }
    }
    return 0;
}

/* The element type record r asks of the gradient at position k: -1 none, else an sz_dtype. */
static int wants(const struct sz_op_record *r, int k)
{
    int t = r->g[k].type;
    if (t == SZ_GRAD_TYPE_F32)
        return SZ_DTYPE_F32;
    if (t < 1 || t > r->n)
        return -1;
    const sz_tensor *x = r->t[t - 1].tensor;
    return x && x->dtype == SZ_DTYPE_BF16 ? SZ_DTYPE_BF16 : SZ_DTYPE_F32;
}

/* Value v's gradient: its element type, its first writer, its buffer (shared by activation name). */
static int decide(struct analysis *a, int v, struct sz_tensor **slots, char (*slot_key)[64], int *nslots)
{
    struct sz_model *m = a->m;
    struct sz_tape *tp = &m->core.tape;
    struct value *x = &a->v[v];
    if (!x->derived || x->fused)
        return 0;
    int hand_last = -1; /* the last reader in a unit with its own backward: it writes the gradient there */
    for (int i = 0; x->hand && i < tp->n; i++)
        for (int k = 0; !is_derived(&tp->r[i]) && k < tp->r[i].n; k++)
            if (a->vin[i * SZ_TASK_MAX_TENSORS + k] == v && tp->r[i].g[k].role != SZ_GRAD_NONE)
                hand_last = i;
    int type = -1, type_rec = -1, first = -1, first_k = -1, in_place = -1;
    if (x->producer >= 0) {
        type = wants(&tp->r[x->producer], x->pk);
        type_rec = type >= 0 ? x->producer : -1;
    }
    for (int i = tp->n - 1; i >= 0; i--) {
        struct sz_op_record *r = &tp->r[i];
        if (!r->active)
            continue;
        for (int k = 0; k < r->n; k++) {
            int internal = a->vout[i * SZ_TASK_MAX_TENSORS + k] == v && r->g[k].role == SZ_GRAD_INTERNAL;
            if (!internal && (a->vin[i * SZ_TASK_MAX_TENSORS + k] != v || !adds_grad(r->g[k].role)))
                continue;
            int w = wants(r, k);
            if (w >= 0 && type >= 0 && w != type)
                return fail(m, "op '%s' of unit %s wants the gradient of '%s' as %s, op '%s' of unit %s as %s",
                            r->op, ((struct sz_unit *)r->unit)->c.name, x->t->name, w ? "bf16" : "f32",
                            tp->r[type_rec].op, ((struct sz_unit *)tp->r[type_rec].unit)->c.name, type ? "bf16" : "f32");
            if (w >= 0)
                type = w, type_rec = i;
            if (r->g[k].role == SZ_GRAD_IN_PLACE)
                in_place = i * SZ_TASK_MAX_TENSORS + k;
            if (first < 0) {
                first = i;
                first_k = k;
            } else if (r->g[k].role == SZ_GRAD_INPUT_SET && i != first) {
                return fail(m, "op '%s' of unit %s overwrites the gradient of '%s', which op '%s' later in the "
                            "forward also reads (its gradient would be lost): use an op that adds into it",
                            r->op, ((struct sz_unit *)r->unit)->c.name, x->t->name, tp->r[first].op);
            }
        }
    }
    if (first < 0 && hand_last < 0)
        return 0; /* no op writes it: a value no backward runs through */
    sz_tensor *g = NULL;
    if (in_place >= 0) { /* the forward left the gradient in the tensor itself */
        g = (sz_tensor *)x->t;
    } else {
        sz_dtype dt = type >= 0 ? (sz_dtype)type : SZ_DTYPE_F32;
        const char *act = NULL;
        for (int i = 0; i < m->nacts_of && !act; i++)
            act = m->acts_of[i].t == x->t ? m->acts_of[i].name : NULL;
        char key[64], name[48];
        snprintf(key, sizeof key, "%s#%d#%d#%lld", act ? act : "", x->uversion, (int)dt, (long long)x->t->numel);
        for (int s = 0; act && s < *nslots && !g; s++)
            g = !strcmp(slot_key[s], key) ? slots[s] : NULL;
        if (!g) {
            if (x->uversion > 1)
                snprintf(name, sizeof name, "d%.30s@%d", act ? act : x->t->name, x->uversion % 1000);
            else
                snprintf(name, sizeof name, "d%.40s", act ? act : x->t->name);
            if (!(g = sz_model_grad_buffer(m, name, dt, x->t->numel)))
                return fail(m, "no memory for the gradient of '%s' (%lld elements)", x->t->name,
                            (long long)x->t->numel);
            if (act) {
                slots[*nslots] = g;
                snprintf(slot_key[(*nslots)++], 64, "%s", key);
            }
        }
    }
    /* every record's position reading v's gradient (the producer) or adding into it (the consumers) */
    for (int i = 0; i < tp->n; i++)
        for (int k = 0; k < tp->r[i].n; k++)
            if (a->vin[i * SZ_TASK_MAX_TENSORS + k] == v || a->vout[i * SZ_TASK_MAX_TENSORS + k] == v)
                if (tp->r[i].g[k].role != SZ_GRAD_NONE && !(tp->r[i].g[k].role == SZ_GRAD_IN_PLACE &&
                                                           a->vout[i * SZ_TASK_MAX_TENSORS + k] == v))
                    tp->r[i].grad[k] = g;
    sz_grad_role fr = first >= 0 ? tp->r[first].g[first_k].role : SZ_GRAD_NONE;
    if (in_place < 0 && first > hand_last && (fr == SZ_GRAD_INPUT || (fr == SZ_GRAD_INTERNAL && !tp->r[first].fused_into)))
        tp->r[first].zero_first[first_k] = 1; /* (a fused consumer sets an INTERNAL one; a hand-written
                                                  backward writing it first zeroes it itself) */
    if (x->hand) { /* what that backward finds with sz_model_grad_of */
        void *p = sz_grow(m->grads_of, &m->cap_grads_of, m->ngrads_of + 1, sizeof *m->grads_of);
        if (!p)
            return fail(m, "out of memory");
        m->grads_of = p;
        m->grads_of[m->ngrads_of++] = (struct sz_grad_of){x->t, g};
    }
    return 0;
}

/* The element type a unit's callbacks see its parameters in (tasks/storage.c's wp). */
static sz_dtype callback_param_dtype(const struct sz_model *m, const struct sz_unit *u)
{
    return m->prec.mixed && m->prec.params_direct && u->bf16_params ? m->prec.param : SZ_DTYPE_F32;
}

sz_status sz_autograd_prepare(struct sz_model *m)
{
    int any = 0;
    for (int i = 0; i < m->nunits; i++)
        any |= !m->units[i]->backward;
    if (!any && !m->check) /* the check mode needs the forward's tensors (tasks/check.c) */
        return SZ_OK;
    struct sz_flat *stand = calloc((size_t)m->nunits + 1, sizeof *stand);
    sz_status st = stand ? SZ_OK : SZ_ERR_NOMEM;
    for (int j = 0; j < m->nunits && st == SZ_OK; j++) {
        struct sz_unit *u = m->units[j];
        if (!(stand[j].child = calloc((size_t)u->nparams + 1, sizeof *stand[j].child))) {
            st = SZ_ERR_NOMEM;
            break;
        }
        for (int i = 0; i < u->nparams; i++) {
            sz_tensor *t = &stand[j].child[i];
            t->numel = t->handle_numel = u->params[i].rows * u->params[i].cols;
            t->dtype = callback_param_dtype(m, u);
            snprintf(t->name, sizeof t->name, "%.30s.%.16s", u->params[i].name ? u->params[i].name : "param",
                     u->c.name);
        }
        u->wp = &stand[j];
    }
    m->core.recording = 1;
    for (int j = 0; j < m->nunits && st == SZ_OK; j++) {
        struct sz_unit *u = m->units[j];
        u->c.phase = u->fwd_name;
        st = u->forward(u, u->user);
        sz_status fl = sz_zero_flush(&m->core);
        st = st != SZ_OK ? st : fl;
        if (st != SZ_OK && st != SZ_ERR_NOMEM) {
            snprintf(m->no_backward, sizeof m->no_backward, "its forward failed while it was recorded (%s: the "
                     "error logged at sz_model_finalize names the op)", sz_status_string(st));
            st = SZ_OK;
            break;
        }
    }
    m->core.recording = 0;
    struct sz_tape *tp = &m->core.tape;
    struct analysis a = {.m = m};
    struct sz_tensor **slots = NULL;
    char (*keys)[64] = NULL;
    if (st == SZ_OK) {
        a.vin = malloc(((size_t)tp->n + 1) * SZ_TASK_MAX_TENSORS * sizeof *a.vin);
        a.vout = malloc(((size_t)tp->n + 1) * SZ_TASK_MAX_TENSORS * sizeof *a.vout);
        slots = calloc((size_t)tp->n * SZ_TASK_MAX_TENSORS + 1, sizeof *slots);
        keys = calloc((size_t)tp->n * SZ_TASK_MAX_TENSORS + 1, sizeof *keys);
        st = a.vin && a.vout && slots && keys ? SZ_OK : SZ_ERR_NOMEM;
    }
    /* a forward the engine cannot differentiate is no error until a step needs its backward (a model
     * may only be evaluated): m->no_backward says why, and sz_autograd_backward refuses with it */
    int bad = st != SZ_OK || m->no_backward[0] || follow(&a, stand) || (any && reach(&a));
    if (!bad)
        fuse(&a);
    int nslots = 0;
    for (int v = 0; !bad && v < a.nv; v++)
        bad = a.v[v].has_grad && !a.v[v].seed && decide(&a, v, slots, keys, &nslots);
    bad = bad || tie(&a);
    if (bad && !m->no_backward[0]) /* (every failure above says why; never leave it unsaid) */
        snprintf(m->no_backward, sizeof m->no_backward, "recording its forward failed (%s)", sz_status_string(st));
    for (int i = 0; bad && i < tp->n; i++)
        tp->r[i].active = 0;
    for (int i = 0; i < tp->n; i++) /* the stand-ins go; sz_record_tensor finds the parameters by index */
        for (int k = 0; k < tp->r[i].n; k++)
            if (tp->r[i].param_unit[k] >= 0)
                tp->r[i].t[k].tensor = NULL;
    for (int j = 0; j < m->nunits; j++) {
        m->units[j]->wp = NULL;
        if (stand)
            free(stand[j].child);
    }
    free(stand);
    free(a.v);
    free(a.vin);
    free(a.vout);
    free(slots);
    free(keys);
    return st;
}

sz_status sz_autograd_backward(struct sz_model *m, struct sz_unit *u)
{
    struct sz_tape *tp = &m->core.tape;
    if (m->no_backward[0]) {
        sz_context_log(m->core.ctx, SZ_LOG_ERROR, "unit %s has no backward callback and none can be derived from its "
                       "model's forward: %s", u->c.name, m->no_backward);
        return SZ_ERR_STATE;
    }
    m->core.bwd_gen++;
    for (int i = tp->n - 1; i >= 0; i--) {
        struct sz_op_record *r = &tp->r[i];
        if (r->unit != (sz_unit *)u || !r->active)
            continue;
        sz_status st = r->backward((sz_unit *)u, r);
        if (st != SZ_OK)
            return st;
    }
    return SZ_OK;
}

sz_tensor *sz_model_grad_of(sz_model *m, const sz_tensor *t)
{
    for (int i = m ? m->ngrads_of - 1 : -1; i >= 0; i--) /* the tensor's last value's */
        if (m->grads_of[i].t == t)
            return m->grads_of[i].g;
    return NULL;
}
