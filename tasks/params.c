/* tasks/params.c — parameters in and out: counts, the views a callback uses, reads and writes of
 * one tensor or a range of it (assembled from every rank's slice at stage 3), deterministic
 * initialisation. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_rng.h"

int sz_model_nunits(const sz_model *m) { return m ? m->nunits : 0; }

int64_t sz_model_nparams(const sz_model *m)
{
    int64_t n = 0;
    for (int i = 0; m && i < m->nunits; i++)
        n += m->units[i]->numel;
    return n;
}

static struct sz_unit *unit_of(sz_model *m, int unit, int param)
{
    if (!m || !m->finalized || unit < 0 || unit >= m->nunits || param < 0 || param >= m->units[unit]->nparams)
        return NULL;
    return m->units[unit];
}

sz_tensor *sz_model_param(sz_model *m, int unit, int i)
{
    struct sz_unit *u = m && m->core.recording && unit >= 0 && unit < m->nunits && i >= 0 && i < m->units[unit]->nparams
                            ? m->units[unit] /* tasks/autograd.c records the forward: its stand-ins */
                            : unit_of(m, unit, i);
    return u ? &u->wp->child[i] : NULL;
}

sz_tensor *sz_model_grad(sz_model *m, int unit, int i)
{
    struct sz_unit *u = unit_of(m, unit, i);
    return u ? &u->wg->child[i] : NULL;
}

/* Read param/grad tensor `param` of `unit` through the owners' slices (collective with nd > 1). */
static sz_status read_assembled(sz_model *m, int unit, int param, int which, float *dst)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || !dst)
        return SZ_ERR_INVALID;
    float *full = malloc((size_t)u->padded * sizeof *full);
    if (!full)
        return SZ_ERR_NOMEM;
    sz_status st = sz_zero_assemble(m, u, which, full);
    if (st == SZ_OK)
        memcpy(dst, full + u->offset[param], (size_t)u->param.child[param].numel * sizeof *dst);
    free(full);
    return st;
}

sz_status sz_model_param_read(sz_model *m, int unit, int param, float *dst)
{
    return read_assembled(m, unit, param, 0, dst);
}

sz_status sz_model_grad_read(sz_model *m, int unit, int param, float *dst)
{
    return read_assembled(m, unit, param, 1, dst);
}

sz_status sz_model_param_read_range(sz_model *m, int unit, int param, int64_t lo, int64_t n, int root, float *dst)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || root < 0 || root >= m->nd || lo < 0 || n < 0 || lo + n > u->param.child[param].numel ||
        n > INT32_MAX || (root == m->rank && n > 0 && !dst))
        return SZ_ERR_INVALID;
    return sz_zero_assemble_range(m, u, root, u->offset[param] + lo, n, dst);
}

/* The part of flat elements [from, from + cnt) of the unit (values src) that lies in flat elements
 * [lo, lo + n), written into `dst`, a view whose element 0 is flat element lo. */
static sz_status write_range(const float *src, int64_t from, int64_t cnt, const sz_tensor *dst, int64_t lo, int64_t n)
{
    int64_t a = from > lo ? from : lo, b = from + cnt < lo + n ? from + cnt : lo + n;
    if (a >= b)
        return SZ_OK;
    sz_tensor part = sz_tensor_view(dst, a - lo, b - a, NULL);
    return sz_tensor_write_f32(&part, src + (a - from));
}

/* Values of flat elements [from, from + cnt) of the unit, the same on every rank, into what this
 * rank holds: stages 0-2 the full parameters, stage 3 its shard; under mixed precision also the
 * fp32 master (full at stage 0, else the owned slice), the parameters getting them rounded to bf16. */
static sz_status write_flat(struct sz_model *m, struct sz_unit *u, const float *src, int64_t from, int64_t cnt)
{
    int64_t lo = (int64_t)m->rank * u->shard;
    sz_status st = m->zero.stage < 3 ? write_range(src, from, cnt, &u->param.all, 0, u->padded)
                                     : write_range(src, from, cnt, &u->pshard, lo, u->shard);
    if (st == SZ_OK && m->prec.mixed)
        st = m->zero.stage == 0 ? write_range(src, from, cnt, &u->master, 0, u->padded)
                                : write_range(src, from, cnt, &u->master, lo, u->shard);
    return st;
}

/* Every rank writes the same values (see write_flat). */
sz_status sz_model_param_write(sz_model *m, int unit, int param, const float *src)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || !src)
        return SZ_ERR_INVALID;
    return write_flat(m, u, src, u->offset[param], u->param.child[param].numel);
}

sz_status sz_model_param_write_range(sz_model *m, int unit, int param, int64_t lo, int64_t n, const float *src)
{
    struct sz_unit *u = unit_of(m, unit, param);
    if (!u || (n > 0 && !src) || lo < 0 || n < 0 || lo + n > u->param.child[param].numel)
        return SZ_ERR_INVALID;
    return n ? write_flat(m, u, src, u->offset[param] + lo, n) : SZ_OK;
}

/* Initialisation streams each tensor through one buffer of this many elements (even, so that the
 * normal generator's pairs never straddle two chunks: the values are those of one whole draw). */
#define SZ_INIT_CHUNK ((int64_t)1 << 18)

sz_status sz_model_init_params(sz_model *m, uint64_t seed)
{
    if (!m || !m->finalized)
        return SZ_ERR_STATE;
    float *tmp = malloc((size_t)SZ_INIT_CHUNK * sizeof *tmp);
    if (!tmp)
        return SZ_ERR_NOMEM;
    sz_status st = SZ_OK;
    for (int ui = 0; ui < m->nunits && st == SZ_OK; ui++) {
        struct sz_unit *u = m->units[ui];
        for (int i = 0; i < u->nparams && st == SZ_OK; i++) {
            const sz_param_spec *p = &u->params[i];
            int64_t n = p->rows * p->cols;
            int64_t drawn = p->init == SZ_INIT_NORMAL ? n : 0;
            sz_rng r;
            sz_rng_seed(&r, seed, (uint64_t)ui, (uint64_t)i);
            for (int64_t k = 0; k < n && st == SZ_OK; k += SZ_INIT_CHUNK) {
                int64_t c = n - k < SZ_INIT_CHUNK ? n - k : SZ_INIT_CHUNK;
                int64_t nd = k >= drawn ? 0 : drawn - k < c ? drawn - k : c; /* of them drawn */
                if (nd > 0)
                    sz_rng_normal(&r, tmp, nd, p->init_std);
                for (int64_t j = nd; j < c; j++)
                    tmp[j] = p->init == SZ_INIT_ONE ? 1.0f : 0.0f;
                st = write_flat(m, u, tmp, u->offset[i] + k, c);
            }
        }
    }
    free(tmp);
    return st;
}
