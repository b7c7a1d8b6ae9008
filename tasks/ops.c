/* tasks/ops.c — typed task wrappers: every sz_op_* call a unit's callback makes becomes one
 * StarPU task (named after the unit's phase, e.g. "fwd:block3", with the codelet naming the op),
 * plus the step's own tasks (zeroing, gradient norm, clip factor, AdamW). The only place in the
 * library that calls starpu_task_insert.
 *
 * Tensors are views, so a task's tensors are folded onto distinct handles: each handle is passed
 * once with the union of its modes, and a write to part of a handle becomes a read-write (the
 * rest of the handle must survive). */
#include <stdlib.h>
#include "sz_tasks.h"
#include "sz_codelets.h"
#include "sz_sched.h"

struct call {
    struct starpu_data_descr d[SZ_MAX_TENSORS];
    int nd;
    struct sz_targs a;
    int bad;
};

/* Adds logical tensor t with `mode`; need/dt check its size and type (need < 0: exactly numel). */
static void use(struct call *c, const sz_tensor *t, enum starpu_data_access_mode mode, int64_t need, sz_dtype dt)
{
    if (!t || c->a.nt >= SZ_MAX_TENSORS || t->dtype != dt || t->numel < need) {
        c->bad = 1;
        return;
    }
    if (mode == STARPU_W && (t->offset != 0 || t->numel != t->handle_numel))
        mode = STARPU_RW;
    int j = 0;
    while (j < c->nd && c->d[j].handle != t->h)
        j++;
    if (j == c->nd) {
        c->d[j].handle = t->h;
        c->d[j].mode = mode;
        c->nd++;
    } else if (c->d[j].mode != mode) {
        c->d[j].mode = STARPU_RW;
    }
    int k = c->a.nt++;
    c->a.map[k] = j;
    c->a.off[k] = t->offset;
    c->a.numel[k] = t->numel;
    c->a.bf16[k] = t->dtype == SZ_DTYPE_BF16;
}

/* Tensors whose element type the codelet reads from the arguments (fp32 or bf16). */
static void use_any(struct call *c, const sz_tensor *t, enum starpu_data_access_mode mode, int64_t need)
{
    use(c, t, mode, need, t ? t->dtype : SZ_DTYPE_F32);
}
#define IN(c, t, need) use((c), (t), STARPU_R, (need), SZ_DTYPE_F32)
#define OUT(c, t, need) use((c), (t), STARPU_W, (need), SZ_DTYPE_F32)
#define ACC(c, t, need) use((c), (t), STARPU_RW, (need), SZ_DTYPE_F32)
#define TOK(c, t, need) use((c), (t), STARPU_R, (need), SZ_DTYPE_I32)

/* Every task carries its position in the step's plan and its unit (task->sched_data) for the
 * `zero` policy; m may be NULL (tasks outside any model). */
static sz_status submit(struct call *c, struct starpu_codelet *cl, const char *name, struct sz_model *m, int unit)
{
    if (c->bad)
        return SZ_ERR_INVALID;
    void *sd = sz_sched_data(m ? m->position++ : 0, unit);
    int ret = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, c->d, c->nd, STARPU_VALUE, &c->a, sizeof c->a,
                                 STARPU_NAME, name, STARPU_TASK_SCHED_DATA, sd, 0);
    return ret == 0 ? SZ_OK : SZ_ERR_RUNTIME;
}

#define CALL(...) struct call c = {.a = {__VA_ARGS__}}
#define NEED_UNIT(u) do { if (!(u)) return SZ_ERR_INVALID; } while (0)

sz_status sz_op_zero(sz_unit *u, sz_tensor *t)
{
    NEED_UNIT(u);
    return sz_submit_zero(u, t, u->phase, NULL, 0, 0, NULL);
}

sz_status sz_op_encoder_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tok, sz_tensor *wte, sz_tensor *wpe, int B,
                            int T, int C)
{
    NEED_UNIT(u);
    int64_t N = (int64_t)B * T;
    CALL(.B = B, .T = T, .C = C);
    OUT(&c, out, N * C); TOK(&c, tok, N); IN(&c, wte, C); IN(&c, wpe, (int64_t)T * C);
    return submit(&c, &sz_cl_encoder_fwd, u->phase, u->model, u->index);
}

sz_status sz_op_encoder_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *dout, sz_tensor *tok, int B,
                            int T, int C)
{
    NEED_UNIT(u);
    int64_t N = (int64_t)B * T;
    CALL(.B = B, .T = T, .C = C);
    ACC(&c, dwte, C); ACC(&c, dwpe, (int64_t)T * C); IN(&c, dout, N * C); TOK(&c, tok, N);
    return submit(&c, &sz_cl_encoder_bwd, u->phase, u->model, u->index);
}

sz_status sz_op_layernorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *mean, sz_tensor *rstd, sz_tensor *inp,
                              sz_tensor *w, sz_tensor *b, int N, int C)
{
    NEED_UNIT(u);
    int64_t NC = (int64_t)N * C;
    CALL(.N = N, .C = C);
    OUT(&c, out, NC); OUT(&c, mean, N); OUT(&c, rstd, N); IN(&c, inp, NC); IN(&c, w, C); IN(&c, b, C);
    return submit(&c, &sz_cl_layernorm_fwd, u->phase, u->model, u->index);
}

sz_status sz_op_layernorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                              sz_tensor *inp, sz_tensor *w, sz_tensor *mean, sz_tensor *rstd, int N, int C)
{
    NEED_UNIT(u);
    int64_t NC = (int64_t)N * C;
    CALL(.N = N, .C = C);
    ACC(&c, dinp, NC); ACC(&c, dw, C); ACC(&c, db, C); IN(&c, dout, NC); IN(&c, inp, NC); IN(&c, w, C);
    IN(&c, mean, N); IN(&c, rstd, N);
    return submit(&c, &sz_cl_layernorm_bwd, u->phase, u->model, u->index);
}

sz_status sz_op_matmul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, sz_tensor *w, sz_tensor *b, int N, int C,
                           int OC)
{
    NEED_UNIT(u);
    CALL(.N = N, .C = C, .OC = OC);
    OUT(&c, out, (int64_t)N * OC); IN(&c, inp, (int64_t)N * C); IN(&c, w, (int64_t)OC * C);
    if (b)
        IN(&c, b, OC);
    return submit(&c, &sz_cl_matmul_fwd, u->phase, u->model, u->index);
}

sz_status sz_op_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                           sz_tensor *inp, sz_tensor *w, int N, int C, int OC)
{
    NEED_UNIT(u);
    CALL(.N = N, .C = C, .OC = OC);
    ACC(&c, dinp, (int64_t)N * C); ACC(&c, dw, (int64_t)OC * C); IN(&c, dout, (int64_t)N * OC);
    IN(&c, inp, (int64_t)N * C); IN(&c, w, (int64_t)OC * C);
    if (db)
        ACC(&c, db, OC);
    return submit(&c, &sz_cl_matmul_bwd, u->phase, u->model, u->index);
}

/* Element-wise ops: two or three views (c may be NULL) of exactly n elements each. */
static sz_status elementwise(sz_unit *u, struct starpu_codelet *cl, int64_t n, sz_tensor *a,
                             enum starpu_data_access_mode ma, sz_tensor *b, enum starpu_data_access_mode mb,
                             sz_tensor *t, enum starpu_data_access_mode mt)
{
    NEED_UNIT(u);
    CALL(.nt = 0);
    use(&c, a, ma, n, SZ_DTYPE_F32);
    use(&c, b, mb, n, SZ_DTYPE_F32);
    if (t)
        use(&c, t, mt, n, SZ_DTYPE_F32);
    for (int k = 0; k < c.a.nt; k++)
        if (c.a.numel[k] != n)
            c.bad = 1;
    return submit(&c, cl, u->phase, u->model, u->index);
}

sz_status sz_op_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n)
{
    return elementwise(u, &sz_cl_gelu_fwd, n, out, STARPU_W, inp, STARPU_R, NULL, STARPU_R);
}

sz_status sz_op_gelu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n)
{
    return elementwise(u, &sz_cl_gelu_bwd, n, dinp, STARPU_RW, inp, STARPU_R, dout, STARPU_R);
}

sz_status sz_op_residual_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n)
{
    return elementwise(u, &sz_cl_residual_fwd, n, out, STARPU_W, a, STARPU_R, b, STARPU_R);
}

sz_status sz_op_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, int64_t n)
{
    return elementwise(u, &sz_cl_residual_bwd, n, da, STARPU_RW, db, STARPU_RW, dout, STARPU_R);
}

sz_status sz_op_softmax_xent_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *probs, sz_tensor *logits,
                                 sz_tensor *targets, int N, int V, int Vp)
{
    NEED_UNIT(u);
    if (V < 1 || V > Vp)
        return SZ_ERR_INVALID;
    CALL(.N = N, .V = V, .Vp = Vp);
    OUT(&c, losses, N); OUT(&c, probs, (int64_t)N * Vp); IN(&c, logits, (int64_t)N * Vp); TOK(&c, targets, N);
    return submit(&c, &sz_cl_softmax_xent_fwd, u->phase, u->model, u->index);
}

sz_status sz_op_softmax_xent_bwd(sz_unit *u, sz_tensor *dlogits, sz_tensor *probs, sz_tensor *targets, int N, int V,
                                 int Vp)
{
    NEED_UNIT(u);
    if (V < 1 || V > Vp || N < 1)
        return SZ_ERR_INVALID;
    CALL(.N = N, .V = V, .Vp = Vp, .f = {u->model->dloss > 0 ? u->model->dloss : 1.0f / (float)N});
    OUT(&c, dlogits, (int64_t)N * Vp); IN(&c, probs, (int64_t)N * Vp); TOK(&c, targets, N);
    return submit(&c, &sz_cl_softmax_xent_bwd, u->phase, u->model, u->index);
}

/* ---- the step's own tasks ------------------------------------------------------------------ */

/* With `token` (a model's communication token), the zeroing that allocates a unit's gradients is
 * ordered after the earlier reduce-scatters, bounding the gradients in flight. */
sz_status sz_submit_zero(struct sz_unit *u, const sz_tensor *t, const char *name, struct sz_counters *acct, int category, int64_t bytes,
                         const sz_tensor *token)
{
    CALL(.stats = acct, .category = category, .bytes = bytes);
    use_any(&c, t, STARPU_W, 0);
    if (token)
        ACC(&c, token, 1);
    return submit(&c, &sz_cl_zero, name, u->model, u->index);
}

sz_status sz_submit_sumsq(struct sz_unit *u, const sz_tensor *out, const sz_tensor *x, const char *name)
{
    CALL(.nt = 0);
    OUT(&c, out, 1);
    use_any(&c, x, STARPU_R, 0);
    return submit(&c, &sz_cl_sumsq, name, u->model, u->index);
}

/* AdamW's optional fused gradient norm: written (acc 0) or added to (acc 1). */
static void adam_norm(struct call *c, const sz_tensor *norm, int acc)
{
    if (!norm)
        return;
    c->a.acc = acc;
    ACC(c, norm, 1);
}

sz_status sz_submit_adamw(struct sz_unit *u, const sz_tensor *p, const sz_tensor *g, const sz_tensor *m, const sz_tensor *v,
                          const sz_tensor *scale, const sz_tensor *norm, int acc, const sz_train_config *cfg, float wd,
                          int t, const char *name)
{
    CALL(.f = {cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, wd}, .t = t);
    ACC(&c, p, p->numel); IN(&c, g, p->numel); ACC(&c, m, p->numel); ACC(&c, v, p->numel); IN(&c, scale, 1);
    adam_norm(&c, norm, acc);
    return submit(&c, &sz_cl_adamw, name, u->model, u->index);
}

/* Communication tasks all write the model's token, so each rank runs them in submission order,
 * the same on every rank: their blocking collectives always meet. */
#define COMM_CALL(m, ...) \
    CALL(.comm = (m)->ctx->task_comm, .nd = (m)->nd, .rank = (m)->rank, .stats = &(m)->counters, __VA_ARGS__)

sz_status sz_submit_clip(struct sz_model *m, float clip)
{
    COMM_CALL(m, .f = {0, 0, 0, 0, 0, clip});
    OUT(&c, m->clip, 2);
    IN(&c, m->sumsq, m->nunits);
    ACC(&c, m->token, 1);
    return submit(&c, &sz_cl_clip_scale, "clip", m, 0xffff);
}

sz_status sz_submit_reduce_scatter(struct sz_model *m, struct sz_unit *u, int acc, int64_t release_bytes)
{
    COMM_CALL(m, .shard = u->shard, .acc = acc, .bucket = m->bucket, .category = SZ_MEM_GRADS_IN_FLIGHT,
              .bytes = -release_bytes);
    use_any(&c, &u->grad.all, STARPU_R, u->padded);
    use_any(&c, &u->gshard, STARPU_RW, u->shard);
    ACC(&c, m->comm_buf, 1);
    ACC(&c, m->token, 1);
    return submit(&c, &sz_cl_reduce_scatter, u->rs_name, m, u->index);
}

sz_status sz_submit_all_gather(struct sz_model *m, struct sz_unit *u, int from_shard, int category, int64_t bytes)
{
    COMM_CALL(m, .shard = u->shard, .category = category, .bytes = bytes);
    if (from_shard) {
        use_any(&c, &u->param.all, STARPU_W, u->padded);
        use_any(&c, &u->pshard, STARPU_R, u->shard);
    } else {
        use_any(&c, m->zero.stage == 0 ? &u->grad.all : &u->param.all, STARPU_RW, u->padded); /* in place */
    }
    ACC(&c, m->token, 1);
    return submit(&c, &sz_cl_all_gather, from_shard ? u->gather_name : u->ag_name, m, u->index);
}

/* Also writes the token: a release is ordered among the communication tasks, so a later gather
 * waits for it and the gathered units in flight stay bounded. */
sz_status sz_submit_account(struct sz_model *m, const sz_tensor *t, int category, int64_t bytes, const char *name)
{
    CALL(.stats = &m->counters, .category = category, .bytes = bytes);
    use_any(&c, t, STARPU_RW, 0);
    ACC(&c, m->token, 1);
    return submit(&c, &sz_cl_account, name, m, 0xffff);
}

/* dst (W, or RW when acc) <- src converting between fp32 and bf16; the write that allocates a
 * working copy counts `bytes` of `category` as live, and writes the token so it stays in order
 * with gathers and releases (bounding the copies in flight). */
sz_status sz_submit_convert(struct sz_model *m, const sz_tensor *dst, const sz_tensor *src, int acc, int category,
                            int64_t bytes, const char *name)
{
    CALL(.acc = acc, .stats = &m->counters, .category = category, .bytes = bytes);
    use_any(&c, dst, acc ? STARPU_RW : STARPU_W, src->numel);
    use_any(&c, src, STARPU_R, dst->numel);
    ACC(&c, m->token, 1);
    return submit(&c, &sz_cl_convert, name, m, 0xffff);
}

sz_status sz_submit_adamw_mixed(struct sz_unit *u, const sz_tensor *master, const sz_tensor *p, const sz_tensor *g, const sz_tensor *m,
                                const sz_tensor *v, const sz_tensor *scale, const sz_tensor *norm, int acc,
                                const sz_train_config *cfg, float wd, int t, const char *name)
{
    CALL(.f = {cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, wd}, .t = t);
    int64_t n = master->numel;
    ACC(&c, master, n); use(&c, p, STARPU_RW, n, SZ_DTYPE_BF16); use(&c, g, STARPU_R, n, SZ_DTYPE_BF16);
    ACC(&c, m, n); ACC(&c, v, n); IN(&c, scale, 1);
    adam_norm(&c, norm, acc);
    return submit(&c, &sz_cl_adamw_mixed, name, u->model, u->index);
}
