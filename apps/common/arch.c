/* apps/common/arch.c — the model interface of arch.h over the model libraries: one table entry per
 * architecture (its name and the functions of its library), so the apps (sz-train, sz-bench,
 * sz-estimate) never ask which model they drive. A new model is one more entry in k_archs[]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arch.h"
#include "gpt2/gpt2.h"
#include "llama_internal.h"

/* One architecture: what arch.h's functions call, on its part of sz_arch_config and its model. */
struct arch {
    const char *name, *title;
    sz_status (*from_string)(sz_arch_config *c, const char *spec, int vocab, int max_seq, char *err, size_t errlen);
    int (*vocab)(const sz_arch_config *c);
    int (*format)(const sz_arch_config *c, char *buf, size_t buflen);
    int64_t (*num_params)(const sz_arch_config *c);
    int64_t (*largest_unit)(const sz_arch_config *c);
    double (*activation_bytes)(const sz_arch_config *c, int B, int T, int checkpoint, int offload);
    int (*fields)(sz_arch_config *c, const char **names, int **fields, int max);
    sz_status (*shape)(const sz_arch_config *c, int B, int T, const sz_zero_config *z, int workers, int threads,
                       sz_model_shape *out, char *err, size_t errlen);
    sz_status (*create)(void **model, sz_context *ctx, const sz_arch_config *c, int B, int T, const sz_zero_config *z,
                        char *err, size_t errlen);
    void (*free)(void *model);
    sz_model *(*model_of)(void *model);
    sz_status (*init_random)(void *model, uint64_t seed);
    sz_status (*set_batch)(void *model, const int *inputs, const int *targets);
    double (*flops)(const sz_arch_config *c, void *model, int B, int T);
    sz_status (*load)(void *model, const char *path, char *err, size_t errlen);
    sz_status (*save)(void *model, const char *path, char *err, size_t errlen); /* collective */
    /* model parallelism: Megatron's split of its tensors by name (the rest replicated), what N_m must
     * divide, and its forward tensors on one MP rank */
    const struct mp_tensor { const char *name; sz_mp_split split; } *mp_tensors;
    int (*mp_dims)(const sz_arch_config *c, int *heads, int *mlp, int *vocab);
    double (*activation_bytes_mp)(const sz_arch_config *c, int B, int T, int checkpoint, int offload, int nm, int pa);
};

struct sz_arch_model {
    const struct arch *a;
    void *model;
    sz_arch_config cfg;
    int B, T;
};

#define F(nm, p) do { if (n < max) { names[n] = nm; fields[n] = p; n++; } } while (0)

/* ---- GPT-2 (apps/gpt2) ------------------------------------------------------------------------ */

static sz_status g_from_string(sz_arch_config *c, const char *spec, int vocab, int max_seq, char *err, size_t errlen)
{
    return sz_gpt2_config_from_string(&c->gpt2, spec, vocab, max_seq, err, errlen);
}
static int g_vocab(const sz_arch_config *c) { return c->gpt2.vocab; }
static int g_format(const sz_arch_config *c, char *buf, size_t n) { return sz_gpt2_config_format(&c->gpt2, buf, n); }
static int64_t g_num_params(const sz_arch_config *c) { return (int64_t)sz_gpt2_num_params(&c->gpt2); }
static int64_t g_largest_unit(const sz_arch_config *c) { return sz_gpt2_largest_unit_numel(&c->gpt2); }
static double g_activation_bytes(const sz_arch_config *c, int B, int T, int checkpoint, int offload)
{
    return sz_gpt2_activation_bytes_device(&c->gpt2, B, T, checkpoint, offload);
}
static int g_fields(sz_arch_config *c, const char **names, int **fields, int max)
{
    int n = 0;
    F("max_seq", &c->gpt2.max_seq); F("vocab", &c->gpt2.vocab); F("padded_vocab", &c->gpt2.padded_vocab);
    F("layers", &c->gpt2.layers); F("heads", &c->gpt2.heads); F("channels", &c->gpt2.channels);
    return n;
}
static sz_status g_shape(const sz_arch_config *c, int B, int T, const sz_zero_config *z, int workers, int threads,
                         sz_model_shape *out, char *err, size_t errlen)
{
    return sz_gpt2_shape(&c->gpt2, B, T, z, workers, threads, out, err, errlen);
}
static sz_status g_create(void **model, sz_context *ctx, const sz_arch_config *c, int B, int T,
                          const sz_zero_config *z, char *err, size_t errlen)
{
    return gpt2_create((gpt2 **)model, ctx, &c->gpt2, B, T, z, err, errlen);
}
static void g_free(void *model) { gpt2_free(model); }
static sz_model *g_model_of(void *model) { return gpt2_model(model); }
static sz_status g_init_random(void *model, uint64_t seed) { return gpt2_init_random(model, seed); }
static sz_status g_set_batch(void *model, const int *in, const int *tg) { return gpt2_set_batch(model, in, tg); }
static double g_flops(const sz_arch_config *c, void *model, int B, int T)
{
    (void)c, (void)B, (void)T;
    return gpt2_flops_per_step(model);
}
static sz_status g_load(void *model, const char *path, char *err, size_t errlen)
{
    return gpt2_load(model, path, err, errlen);
}
static sz_status g_save(void *model, const char *path, char *err, size_t errlen)
{
    return gpt2_save(model, 0, path, err, errlen); /* rank 0 writes, one unit at a time */
}

static const struct mp_tensor g_mp_tensors[] = {
    {"wte", SZ_MP_VOCAB},       /* the tied embedding and head */
    {"qkvw", SZ_MP_COLUMN},     {"qkvb", SZ_MP_COLUMN}, {"attprojw", SZ_MP_ROW},
    {"fcw", SZ_MP_COLUMN},      {"fcb", SZ_MP_COLUMN},  {"fcprojw", SZ_MP_ROW},
    {NULL, SZ_MP_REPLICATED},   /* wpe, ln1w/b, ln2w/b, attprojb, fcprojb, lnfw/b */
};
static int g_mp_dims(const sz_arch_config *c, int *heads, int *mlp, int *vocab)
{
    *heads = c->gpt2.heads, *mlp = 4 * c->gpt2.channels, *vocab = c->gpt2.padded_vocab;
    return 0;
}
static double g_activation_bytes_mp(const sz_arch_config *c, int B, int T, int checkpoint, int offload, int nm, int pa)
{
    return sz_gpt2_activation_bytes_mp(&c->gpt2, B, T, checkpoint, offload, nm, pa);
}

/* ---- the LLaMA-style model (apps/llama) ------------------------------------------------------- */

static sz_status l_from_string(sz_arch_config *c, const char *spec, int vocab, int max_seq, char *err, size_t errlen)
{
    return sz_llama_config_from_string(&c->llama, spec, vocab, max_seq, err, errlen);
}
static int l_vocab(const sz_arch_config *c) { return c->llama.vocab; }
static int l_format(const sz_arch_config *c, char *buf, size_t n) { return sz_llama_config_format(&c->llama, buf, n); }
static int64_t l_num_params(const sz_arch_config *c) { return sz_llama_num_params(&c->llama); }
static int64_t l_largest_unit(const sz_arch_config *c) { return sz_llama_largest_unit_numel(&c->llama); }
static double l_activation_bytes(const sz_arch_config *c, int B, int T, int checkpoint, int offload)
{
    return sz_llama_activation_bytes(&c->llama, B, T, checkpoint, offload);
}
static int l_fields(sz_arch_config *c, const char **names, int **fields, int max)
{
    int n = 0;
    F("max_seq", &c->llama.max_seq); F("vocab", &c->llama.vocab); F("layers", &c->llama.layers);
    F("heads", &c->llama.heads); F("channels", &c->llama.channels); F("hidden", &c->llama.hidden);
    return n;
}
static sz_status l_shape(const sz_arch_config *c, int B, int T, const sz_zero_config *z, int workers, int threads,
                         sz_model_shape *out, char *err, size_t errlen)
{
    return sz_llama_shape(&c->llama, B, T, z, workers, threads, out, err, errlen);
}
static sz_status l_create(void **model, sz_context *ctx, const sz_arch_config *c, int B, int T,
                          const sz_zero_config *z, char *err, size_t errlen)
{
    return sz_llama_create((sz_llama **)model, ctx, &c->llama, B, T, z, err, errlen);
}
static void l_free(void *model) { sz_llama_free(model); }
static sz_model *l_model_of(void *model) { return sz_llama_model(model); }
static sz_status l_init_random(void *model, uint64_t seed) { return sz_llama_init_random(model, seed); }
static sz_status l_set_batch(void *model, const int *in, const int *tg) { return sz_llama_set_batch(model, in, tg); }
static double l_flops(const sz_arch_config *c, void *model, int B, int T)
{
    (void)model;
    return sz_llama_flops(&c->llama, B, T);
}
static sz_status l_no_files(void *model, const char *path, char *err, size_t errlen)
{
    (void)model, (void)path;
    snprintf(err, errlen, "the LLaMA-style model has no parameter file format (--init/--save read and write "
                          "llm.c's GPT-2 checkpoints): keep its training state with --save-state DIR and "
                          "continue with --resume DIR");
    return SZ_ERR_UNSUPPORTED;
}

static const struct mp_tensor l_mp_tensors[] = {
    {"wte", SZ_MP_VOCAB},   {"lmw", SZ_MP_VOCAB},    /* untied */
    {"qkvw", SZ_MP_COLUMN}, {"attprojw", SZ_MP_ROW},
    {"gatew", SZ_MP_COLUMN}, {"upw", SZ_MP_COLUMN}, {"downw", SZ_MP_ROW},
    {NULL, SZ_MP_REPLICATED}, /* rms1w, rms2w, rmsfw */
};
static int l_mp_dims(const sz_arch_config *c, int *heads, int *mlp, int *vocab)
{
    *heads = c->llama.heads, *mlp = c->llama.hidden, *vocab = c->llama.vocab;
    return 1; /* an unpadded vocabulary */
}
static double l_activation_bytes_mp(const sz_arch_config *c, int B, int T, int checkpoint, int offload, int nm, int pa)
{
    return sz_llama_activation_bytes_mp(&c->llama, B, T, checkpoint, offload, nm, pa);
}

#undef F

/* Indexed by sz_arch_kind. */
static const struct arch k_archs[] = {
    [SZ_ARCH_GPT2] = {"gpt2", "GPT-2", g_from_string, g_vocab, g_format, g_num_params, g_largest_unit,
                      g_activation_bytes, g_fields, g_shape, g_create, g_free, g_model_of, g_init_random, g_set_batch,
                      g_flops, g_load, g_save, g_mp_tensors, g_mp_dims, g_activation_bytes_mp},
    [SZ_ARCH_LLAMA] = {"llama", "LLaMA-style", l_from_string, l_vocab, l_format, l_num_params, l_largest_unit,
                       l_activation_bytes, l_fields, l_shape, l_create, l_free, l_model_of, l_init_random, l_set_batch,
                       l_flops, l_no_files, l_no_files, l_mp_tensors, l_mp_dims, l_activation_bytes_mp},
};
#define NARCH ((int)(sizeof k_archs / sizeof k_archs[0]))

static const struct arch *of(sz_arch_kind k) { return &k_archs[(int)k >= 0 && (int)k < NARCH ? (int)k : 0]; }

const char *sz_arch_name(sz_arch_kind k) { return of(k)->name; }
const char *sz_arch_title(sz_arch_kind k) { return of(k)->title; }

int sz_arch_parse(const char *name, sz_arch_kind *out)
{
    for (int k = 0; name && k < NARCH; k++)
        if (!strcmp(name, k_archs[k].name)) {
            *out = (sz_arch_kind)k;
            return 0;
        }
    return -1;
}

sz_status sz_arch_config_from_string(sz_arch_config *out, sz_arch_kind kind, const char *spec, int vocab,
                                     int max_seq, char *err, size_t errlen)
{
    sz_arch_config c = {.kind = kind};
    sz_status st = of(kind)->from_string(&c, spec, vocab, max_seq, err, errlen);
    if (st == SZ_OK)
        *out = c;
    return st;
}

int sz_arch_vocab(const sz_arch_config *c) { return of(c->kind)->vocab(c); }
int sz_arch_format(const sz_arch_config *c, char *buf, size_t buflen) { return of(c->kind)->format(c, buf, buflen); }
int64_t sz_arch_num_params(const sz_arch_config *c) { return of(c->kind)->num_params(c); }
int64_t sz_arch_largest_unit_numel(const sz_arch_config *c) { return of(c->kind)->largest_unit(c); }

double sz_arch_activation_bytes(const sz_arch_config *c, int B, int T, int checkpoint, int offload)
{
    return of(c->kind)->activation_bytes(c, B, T, checkpoint, offload);
}

int sz_arch_fields(sz_arch_config *c, const char **names, int **fields, int max)
{
    return of(c->kind)->fields(c, names, fields, max);
}

int sz_arch_field(const sz_arch_config *c, const char *name)
{
    const char *names[16];
    int *fields[16], n = sz_arch_fields((sz_arch_config *)c, names, fields, 16);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return *fields[i];
    return -1;
}

sz_status sz_arch_shape(const sz_arch_config *c, int B, int T, const sz_zero_config *z, int workers, int threads,
                        sz_model_shape *out, char *err, size_t errlen)
{
    return of(c->kind)->shape(c, B, T, z, workers, threads, out, err, errlen);
}

sz_status sz_arch_create(sz_arch_model **out, sz_context *ctx, const sz_arch_config *cfg, int B, int T,
                         const sz_zero_config *zero, char *err, size_t errlen)
{
    sz_arch_model *m = calloc(1, sizeof *m);
    if (!m)
        return SZ_ERR_NOMEM;
    *m = (sz_arch_model){.a = of(cfg->kind), .cfg = *cfg, .B = B, .T = T};
    sz_status st = m->a->create(&m->model, ctx, cfg, B, T, zero, err, errlen);
    if (st != SZ_OK) {
        free(m);
        return st;
    }
    *out = m;
    return SZ_OK;
}

void sz_arch_free(sz_arch_model *m)
{
    if (!m)
        return;
    m->a->free(m->model);
    free(m);
}

sz_model *sz_arch_model_of(sz_arch_model *m) { return m->a->model_of(m->model); }
sz_status sz_arch_init_random(sz_arch_model *m, uint64_t seed) { return m->a->init_random(m->model, seed); }
sz_status sz_arch_set_batch(sz_arch_model *m, const int *inputs, const int *targets)
{
    return m->a->set_batch(m->model, inputs, targets);
}
double sz_arch_flops(const sz_arch_model *m) { return m->a->flops(&m->cfg, m->model, m->B, m->T); }
sz_status sz_arch_load(sz_arch_model *m, const char *path, char *err, size_t errlen)
{
    return m->a->load(m->model, path, err, errlen);
}
sz_status sz_arch_save(sz_arch_model *m, const char *path, char *err, size_t errlen)
{
    return m->a->save(m->model, path, err, errlen);
}

/* ---- model parallelism ------------------------------------------------------------------------ */

sz_mp_split sz_arch_mp_split(sz_arch_kind kind, const char *tensor)
{
    for (const struct mp_tensor *t = of(kind)->mp_tensors; t->name; t++)
        if (!strcmp(t->name, tensor))
            return t->split;
    return SZ_MP_REPLICATED;
}

int sz_arch_mp_check(const sz_arch_config *c, int nm, char *err, size_t errlen)
{
    int heads, mlp, vocab, unpadded = of(c->kind)->mp_dims(c, &heads, &mlp, &vocab);
    const struct { const char *what; int n; } dims[] = {
        {"attention heads", heads}, {"MLP width", mlp}, {unpadded ? "vocabulary" : "padded vocabulary", vocab}};
    size_t len = 0;
    int bad = 0;
    if (err && errlen)
        err[0] = 0;
    if (nm < 1) {
        if (err)
            snprintf(err, errlen, "the model-parallel degree must be >= 1");
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (dims[i].n % nm) {
            if (err && len < errlen)
                len += (size_t)snprintf(err + len, errlen - len, "%sthe %s (%d)", bad ? ", " : "", dims[i].what,
                                        dims[i].n);
            bad = 1;
        }
    return bad ? -1 : 0;
}

/* The model's shape, only for its tensor tables. */
static int params_shape(const sz_arch_config *c, sz_model_shape *s)
{
    sz_zero_config z;
    sz_zero_config_defaults(&z);
    z.precision = SZ_PRECISION_FP32;
    char err[256];
    return sz_arch_shape(c, 1, 1, &z, 1, 1, s, err, sizeof err) == SZ_OK ? 0 : -1;
}

int sz_arch_mp_params(const sz_arch_config *c, double *split, double *replicated)
{
    sz_model_shape s;
    if (params_shape(c, &s) != 0)
        return -1;
    double sp = 0, rep = 0;
    for (int u = 0; u < s.nunits; u++)
        for (int i = 0; i < s.units[u].nparams; i++) {
            const sz_param_spec *p = &s.units[u].params[i];
            double n = (double)p->rows * (double)p->cols;
            *(sz_arch_mp_split(c->kind, p->name) == SZ_MP_REPLICATED ? &rep : &sp) += n;
        }
    sz_model_shape_free(&s);
    *split = sp, *replicated = rep;
    return 0;
}

void sz_arch_mp_shape(sz_arch_kind kind, sz_model_shape *s, int nm)
{
    /* the units share their tables (every block points at one), so divide each table once */
    const sz_param_spec *done[64];
    int ndone = 0;
    for (int u = 0; u < s->nunits; u++) {
        int seen = 0;
        for (int k = 0; k < ndone; k++)
            seen |= done[k] == s->units[u].params;
        if (seen)
            continue;
        if (ndone < 64)
            done[ndone++] = s->units[u].params;
        sz_param_spec *p = (sz_param_spec *)s->units[u].params;
        for (int i = 0; i < s->units[u].nparams; i++)
            switch (sz_arch_mp_split(kind, p[i].name)) {
            case SZ_MP_COLUMN:
            case SZ_MP_VOCAB: p[i].rows /= nm; break;
            case SZ_MP_ROW: p[i].cols /= nm; break;
            default: break;
            }
    }
}

double sz_arch_activation_bytes_mp(const sz_arch_config *c, int B, int T, int checkpoint, int offload, int nm, int pa)
{
    return of(c->kind)->activation_bytes_mp(c, B, T, checkpoint, offload, nm, pa);
}

double sz_arch_block_io(const sz_arch_config *c, int B, int T)
{
    return (double)B * (double)T * (double)sz_arch_field(c, "channels");
}
