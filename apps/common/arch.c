/* apps/common/arch.c — the model interface of arch.h over apps/gpt2 and apps/llama. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arch.h"
#include "gpt2/gpt2.h"

struct sz_arch_model {
    sz_arch_kind kind;
    gpt2 *g;
    sz_llama *l;
    int B, T;
};

const char *sz_arch_name(sz_arch_kind k) { return k == SZ_ARCH_LLAMA ? "llama" : "gpt2"; }
const char *sz_arch_title(sz_arch_kind k) { return k == SZ_ARCH_LLAMA ? "LLaMA-style" : "GPT-2"; }

int sz_arch_parse(const char *name, sz_arch_kind *out)
{
    if (name && !strcmp(name, "gpt2")) { *out = SZ_ARCH_GPT2; return 0; }
    if (name && !strcmp(name, "llama")) { *out = SZ_ARCH_LLAMA; return 0; }
    return -1;
}

sz_status sz_arch_config_from_string(sz_arch_config *out, sz_arch_kind kind, const char *spec, int vocab,
                                     int max_seq, char *err, size_t errlen)
{
    sz_arch_config c = {.kind = kind};
    sz_status st = kind == SZ_ARCH_LLAMA ? sz_llama_config_from_string(&c.llama, spec, vocab, max_seq, err, errlen)
                                         : sz_gpt2_config_from_string(&c.gpt2, spec, vocab, max_seq, err, errlen);
    if (st == SZ_OK)
        *out = c;
    return st;
}

int sz_arch_vocab(const sz_arch_config *c) { return c->kind == SZ_ARCH_LLAMA ? c->llama.vocab : c->gpt2.vocab; }

int sz_arch_format(const sz_arch_config *c, char *buf, size_t buflen)
{
    return c->kind == SZ_ARCH_LLAMA ? sz_llama_config_format(&c->llama, buf, buflen)
                                    : sz_gpt2_config_format(&c->gpt2, buf, buflen);
}

int64_t sz_arch_num_params(const sz_arch_config *c)
{
    return c->kind == SZ_ARCH_LLAMA ? sz_llama_num_params(&c->llama) : (int64_t)sz_gpt2_num_params(&c->gpt2);
}

int64_t sz_arch_largest_unit_numel(const sz_arch_config *c)
{
    return c->kind == SZ_ARCH_LLAMA ? sz_llama_largest_unit_numel(&c->llama) : sz_gpt2_largest_unit_numel(&c->gpt2);
}

double sz_arch_activation_bytes(const sz_arch_config *c, int B, int T, int checkpoint, int offload)
{
    return c->kind == SZ_ARCH_LLAMA ? sz_llama_activation_bytes(&c->llama, B, T, checkpoint, offload)
                                    : sz_gpt2_activation_bytes_device(&c->gpt2, B, T, checkpoint, offload);
}

int sz_arch_fields(sz_arch_config *c, const char **names, int **fields, int max)
{
    int n = 0;
#define F(nm, p) do { if (n < max) { names[n] = nm; fields[n] = p; n++; } } while (0)
    if (c->kind == SZ_ARCH_LLAMA) {
        F("max_seq", &c->llama.max_seq); F("vocab", &c->llama.vocab); F("layers", &c->llama.layers);
        F("heads", &c->llama.heads); F("channels", &c->llama.channels); F("hidden", &c->llama.hidden);
    } else {
        F("max_seq", &c->gpt2.max_seq); F("vocab", &c->gpt2.vocab); F("padded_vocab", &c->gpt2.padded_vocab);
        F("layers", &c->gpt2.layers); F("heads", &c->gpt2.heads); F("channels", &c->gpt2.channels);
    }
#undef F
    return n;
}

sz_status sz_arch_create(sz_arch_model **out, sz_context *ctx, const sz_arch_config *cfg, int B, int T,
                         const sz_zero_config *zero, char *err, size_t errlen)
{
    sz_arch_model *m = calloc(1, sizeof *m);
    if (!m)
        return SZ_ERR_NOMEM;
    m->kind = cfg->kind;
    m->B = B;
    m->T = T;
    sz_status st = cfg->kind == SZ_ARCH_LLAMA ? sz_llama_create(&m->l, ctx, &cfg->llama, B, T, zero, err, errlen)
                                              : gpt2_create(&m->g, ctx, &cfg->gpt2, B, T, zero, err, errlen);
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
    gpt2_free(m->g);
    sz_llama_free(m->l);
    free(m);
}

sz_model *sz_arch_model_of(sz_arch_model *m) { return m->l ? sz_llama_model(m->l) : gpt2_model(m->g); }

sz_status sz_arch_init_random(sz_arch_model *m, uint64_t seed)
{
    return m->l ? sz_llama_init_random(m->l, seed) : gpt2_init_random(m->g, seed);
}

sz_status sz_arch_set_batch(sz_arch_model *m, const int *inputs, const int *targets)
{
    return m->l ? sz_llama_set_batch(m->l, inputs, targets) : gpt2_set_batch(m->g, inputs, targets);
}

double sz_arch_flops(const sz_arch_model *m)
{
    return m->l ? sz_llama_flops(sz_llama_get_config(m->l), m->B, m->T) : gpt2_flops_per_step(m->g);
}

static sz_status no_files(char *err, size_t errlen)
{
    snprintf(err, errlen, "the LLaMA-style model has no parameter file format (--init/--save read and write "
                          "llm.c's GPT-2 checkpoints): keep its training state with --save-state DIR and "
                          "continue with --resume DIR");
    return SZ_ERR_UNSUPPORTED;
}

sz_status sz_arch_load(sz_arch_model *m, const char *path, char *err, size_t errlen)
{
    return m->l ? no_files(err, errlen) : gpt2_load(m->g, path, err, errlen);
}

sz_status sz_arch_save(sz_arch_model *m, const char *path, char *err, size_t errlen)
{
    if (m->l)
        return no_files(err, errlen);
    /* rank 0 writes, one unit at a time; every rank takes part (collective) */
    return gpt2_save(m->g, 0, path, err, errlen);
}
