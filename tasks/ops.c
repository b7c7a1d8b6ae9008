/* tasks/ops.c — typed task wrappers: every sz_op_* call a unit's callback makes becomes one
 * StarPU task (named after the unit's phase, e.g. "fwd:block3", with the codelet naming the op),
 * plus the step's own tasks (zeroing, gradient norm, clip factor, AdamW). The only place in the
 * library that calls starpu_task_insert. */
#include <stdlib.h>
#include "sz_tasks.h"
#include "sz_codelets.h"

static sz_status submitted(int ret) { return ret == 0 ? SZ_OK : SZ_ERR_RUNTIME; }

/* Shape check: every tensor given must hold at least `need` elements of the expected dtype. */
static int ok(const sz_tensor *t, int64_t need, sz_dtype dt) { return t && t->numel >= need && t->dtype == dt; }
#define F32(t, need) ok((t), (need), SZ_DTYPE_F32)
#define I32(t, need) ok((t), (need), SZ_DTYPE_I32)

sz_status sz_op_zero(sz_unit *u, sz_tensor *t)
{
    if (!u || !t)
        return SZ_ERR_INVALID;
    return sz_submit_zero(t->h, u->phase);
}

sz_status sz_op_encoder_fwd(sz_unit *u, sz_tensor *out, sz_tensor *tok, sz_tensor *wte, sz_tensor *wpe, int B,
                            int T, int C)
{
    int64_t N = (int64_t)B * T;
    if (!u || !F32(out, N * C) || !I32(tok, N) || !F32(wte, C) || !F32(wpe, (int64_t)T * C))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.B = B, .T = T, .C = C};
    return submitted(starpu_task_insert(&sz_cl_encoder_fwd, STARPU_W, out->h, STARPU_R, tok->h, STARPU_R, wte->h,
                                        STARPU_R, wpe->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME, u->phase, 0));
}

sz_status sz_op_encoder_bwd(sz_unit *u, sz_tensor *dwte, sz_tensor *dwpe, sz_tensor *dout, sz_tensor *tok, int B,
                            int T, int C)
{
    int64_t N = (int64_t)B * T;
    if (!u || !F32(dwte, C) || !F32(dwpe, (int64_t)T * C) || !F32(dout, N * C) || !I32(tok, N))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.B = B, .T = T, .C = C};
    return submitted(starpu_task_insert(&sz_cl_encoder_bwd, STARPU_RW, dwte->h, STARPU_RW, dwpe->h, STARPU_R,
                                        dout->h, STARPU_R, tok->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME, u->phase,
                                        0));
}

sz_status sz_op_layernorm_fwd(sz_unit *u, sz_tensor *out, sz_tensor *mean, sz_tensor *rstd, sz_tensor *inp,
                              sz_tensor *w, sz_tensor *b, int N, int C)
{
    int64_t NC = (int64_t)N * C;
    if (!u || !F32(out, NC) || !F32(mean, N) || !F32(rstd, N) || !F32(inp, NC) || !F32(w, C) || !F32(b, C))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.N = N, .C = C};
    return submitted(starpu_task_insert(&sz_cl_layernorm_fwd, STARPU_W, out->h, STARPU_W, mean->h, STARPU_W, rstd->h,
                                        STARPU_R, inp->h, STARPU_R, w->h, STARPU_R, b->h, STARPU_VALUE, &s, sizeof s,
                                        STARPU_NAME, u->phase, 0));
}

sz_status sz_op_layernorm_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                              sz_tensor *inp, sz_tensor *w, sz_tensor *mean, sz_tensor *rstd, int N, int C)
{
    int64_t NC = (int64_t)N * C;
    if (!u || !F32(dinp, NC) || !F32(dw, C) || !F32(db, C) || !F32(dout, NC) || !F32(inp, NC) || !F32(w, C) ||
        !F32(mean, N) || !F32(rstd, N))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.N = N, .C = C};
    return submitted(starpu_task_insert(&sz_cl_layernorm_bwd, STARPU_RW, dinp->h, STARPU_RW, dw->h, STARPU_RW, db->h,
                                        STARPU_R, dout->h, STARPU_R, inp->h, STARPU_R, w->h, STARPU_R, mean->h,
                                        STARPU_R, rstd->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME, u->phase, 0));
}

sz_status sz_op_matmul_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, sz_tensor *w, sz_tensor *b, int N, int C,
                           int OC)
{
    if (!u || !F32(out, (int64_t)N * OC) || !F32(inp, (int64_t)N * C) || !F32(w, (int64_t)OC * C) ||
        (b && !F32(b, OC)))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.N = N, .C = C, .OC = OC};
    struct starpu_data_descr d[4] = {{out->h, STARPU_W}, {inp->h, STARPU_R}, {w->h, STARPU_R}, {b ? b->h : NULL, STARPU_R}};
    return submitted(starpu_task_insert(&sz_cl_matmul_fwd, STARPU_DATA_MODE_ARRAY, d, b ? 4 : 3, STARPU_VALUE, &s,
                                        sizeof s, STARPU_NAME, u->phase, 0));
}

sz_status sz_op_matmul_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dw, sz_tensor *db, sz_tensor *dout,
                           sz_tensor *inp, sz_tensor *w, int N, int C, int OC)
{
    if (!u || !F32(dinp, (int64_t)N * C) || !F32(dw, (int64_t)OC * C) || (db && !F32(db, OC)) ||
        !F32(dout, (int64_t)N * OC) || !F32(inp, (int64_t)N * C) || !F32(w, (int64_t)OC * C))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.N = N, .C = C, .OC = OC};
    struct starpu_data_descr d[6] = {{dout->h, STARPU_R}, {inp->h, STARPU_R}, {w->h, STARPU_R},
                                     {dinp->h, STARPU_RW}, {dw->h, STARPU_RW}, {db ? db->h : NULL, STARPU_RW}};
    return submitted(starpu_task_insert(&sz_cl_matmul_bwd, STARPU_DATA_MODE_ARRAY, d, db ? 6 : 5, STARPU_VALUE, &s,
                                        sizeof s, STARPU_NAME, u->phase, 0));
}

sz_status sz_op_attention_fwd(sz_unit *u, sz_tensor *out, sz_tensor *preatt, sz_tensor *att, sz_tensor *inp, int B,
                              int T, int C, int NH)
{
    int64_t N = (int64_t)B * T, A = (int64_t)B * NH * T * T;
    if (!u || NH < 1 || C % NH || !F32(out, N * C) || !F32(preatt, A) || !F32(att, A) || !F32(inp, N * 3 * C))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.B = B, .T = T, .C = C, .NH = NH};
    return submitted(starpu_task_insert(&sz_cl_attention_fwd, STARPU_W, out->h, STARPU_W, preatt->h, STARPU_W,
                                        att->h, STARPU_R, inp->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME, u->phase,
                                        0));
}

sz_status sz_op_attention_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *dout, sz_tensor *inp, sz_tensor *att, int B,
                              int T, int C, int NH)
{
    int64_t N = (int64_t)B * T, A = (int64_t)B * NH * T * T;
    if (!u || NH < 1 || C % NH || !F32(dinp, N * 3 * C) || !F32(dout, N * C) || !F32(inp, N * 3 * C) ||
        !F32(att, A))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.B = B, .T = T, .C = C, .NH = NH};
    return submitted(starpu_task_insert(&sz_cl_attention_bwd, STARPU_RW, dinp->h, STARPU_R, dout->h, STARPU_R,
                                        inp->h, STARPU_R, att->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME, u->phase,
                                        0));
}

/* Element-wise ops work on whole tensors: n must equal their size. */
sz_status sz_op_gelu_fwd(sz_unit *u, sz_tensor *out, sz_tensor *inp, int64_t n)
{
    if (!u || !F32(out, n) || out->numel != n || inp->numel != n || !F32(inp, n))
        return SZ_ERR_INVALID;
    return submitted(starpu_task_insert(&sz_cl_gelu_fwd, STARPU_W, out->h, STARPU_R, inp->h, STARPU_NAME, u->phase, 0));
}

sz_status sz_op_gelu_bwd(sz_unit *u, sz_tensor *dinp, sz_tensor *inp, sz_tensor *dout, int64_t n)
{
    if (!u || !F32(dinp, n) || dinp->numel != n || inp->numel != n || dout->numel != n)
        return SZ_ERR_INVALID;
    return submitted(starpu_task_insert(&sz_cl_gelu_bwd, STARPU_RW, dinp->h, STARPU_R, inp->h, STARPU_R, dout->h,
                                        STARPU_NAME, u->phase, 0));
}

sz_status sz_op_residual_fwd(sz_unit *u, sz_tensor *out, sz_tensor *a, sz_tensor *b, int64_t n)
{
    if (!u || !F32(out, n) || out->numel != n || a->numel != n || b->numel != n)
        return SZ_ERR_INVALID;
    return submitted(starpu_task_insert(&sz_cl_residual_fwd, STARPU_W, out->h, STARPU_R, a->h, STARPU_R, b->h,
                                        STARPU_NAME, u->phase, 0));
}

sz_status sz_op_residual_bwd(sz_unit *u, sz_tensor *da, sz_tensor *db, sz_tensor *dout, int64_t n)
{
    if (!u || !F32(da, n) || da->numel != n || db->numel != n || dout->numel != n)
        return SZ_ERR_INVALID;
    return submitted(starpu_task_insert(&sz_cl_residual_bwd, STARPU_RW, da->h, STARPU_RW, db->h, STARPU_R, dout->h,
                                        STARPU_NAME, u->phase, 0));
}

sz_status sz_op_softmax_xent_fwd(sz_unit *u, sz_tensor *losses, sz_tensor *probs, sz_tensor *logits,
                                 sz_tensor *targets, int N, int V, int Vp)
{
    if (!u || V < 1 || V > Vp || !F32(losses, N) || !F32(probs, (int64_t)N * Vp) || !F32(logits, (int64_t)N * Vp) ||
        !I32(targets, N))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.N = N, .V = V, .Vp = Vp};
    return submitted(starpu_task_insert(&sz_cl_softmax_xent_fwd, STARPU_W, losses->h, STARPU_W, probs->h, STARPU_R,
                                        logits->h, STARPU_R, targets->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME,
                                        u->phase, 0));
}

sz_status sz_op_softmax_xent_bwd(sz_unit *u, sz_tensor *dlogits, sz_tensor *probs, sz_tensor *targets, int N, int V,
                                 int Vp)
{
    if (!u || V < 1 || V > Vp || !F32(dlogits, (int64_t)N * Vp) || !F32(probs, (int64_t)N * Vp) || !I32(targets, N))
        return SZ_ERR_INVALID;
    struct sz_shape s = {.N = N, .V = V, .Vp = Vp};
    return submitted(starpu_task_insert(&sz_cl_softmax_xent_bwd, STARPU_W, dlogits->h, STARPU_R, probs->h, STARPU_R,
                                        targets->h, STARPU_VALUE, &s, sizeof s, STARPU_NAME, u->phase, 0));
}

/* ---- the step's own tasks ------------------------------------------------------------------ */

sz_status sz_submit_zero(starpu_data_handle_t h, const char *name)
{
    return submitted(starpu_task_insert(&sz_cl_zero, STARPU_W, h, STARPU_NAME, name, 0));
}

sz_status sz_submit_sumsq(starpu_data_handle_t out, const sz_tensor *tensors, int n, const char *name)
{
    struct starpu_data_descr *d = malloc((size_t)(n + 1) * sizeof *d);
    if (!d)
        return SZ_ERR_NOMEM;
    d[0] = (struct starpu_data_descr){out, STARPU_W};
    for (int i = 0; i < n; i++)
        d[i + 1] = (struct starpu_data_descr){tensors[i].h, STARPU_R};
    int ret = starpu_task_insert(&sz_cl_sumsq, STARPU_DATA_MODE_ARRAY, d, n + 1, STARPU_NAME, name, 0);
    free(d);
    return submitted(ret);
}

sz_status sz_submit_clip_scale(starpu_data_handle_t scale, const starpu_data_handle_t *parts, int n, float clip)
{
    struct starpu_data_descr *d = malloc((size_t)(n + 1) * sizeof *d);
    if (!d)
        return SZ_ERR_NOMEM;
    d[0] = (struct starpu_data_descr){scale, STARPU_W};
    for (int i = 0; i < n; i++)
        d[i + 1] = (struct starpu_data_descr){parts[i], STARPU_R};
    int ret = starpu_task_insert(&sz_cl_clip_scale, STARPU_DATA_MODE_ARRAY, d, n + 1, STARPU_VALUE, &clip,
                                 sizeof clip, STARPU_NAME, "clip", 0);
    free(d);
    return submitted(ret);
}

sz_status sz_submit_adamw(starpu_data_handle_t p, starpu_data_handle_t g, starpu_data_handle_t m,
                          starpu_data_handle_t v, starpu_data_handle_t scale, const sz_train_config *cfg, float wd,
                          int t, const char *name)
{
    struct sz_adamw_args a = {cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, wd, t};
    return submitted(starpu_task_insert(&sz_cl_adamw, STARPU_RW, p, STARPU_R, g, STARPU_RW, m, STARPU_RW, v,
                                        STARPU_R, scale, STARPU_VALUE, &a, sizeof a, STARPU_NAME, name, 0));
}
