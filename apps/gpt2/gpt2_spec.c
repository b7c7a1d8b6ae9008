/* apps/gpt2/gpt2_spec.c — GPT-2's parameter table (llm.c checkpoint order) and everything derived from it:
 * shapes, element counts, flat offsets, init scales, config presets and validation.
 * Pure C; every size below is computed by walking the one table `k_gpt2_tensors`.
 */
#include "starzero_gpt2.h"
#include "gpt2_err.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table. Keyed by sz_gpt2_tensor_id, so its order is llm.c's checkpoint order. */
static const sz_gpt2_tensor_spec k_gpt2_tensors[SZ_GPT2_NUM_TENSORS] = {
    /*                 name        per_layer rows              cols              matrix init */
    [SZ_GPT2_WTE]      = {"wte",      0, SZ_GPT2_DIM_VP,   SZ_GPT2_DIM_C,   1, SZ_GPT2_INIT_NORMAL},
    [SZ_GPT2_WPE]      = {"wpe",      0, SZ_GPT2_DIM_MAXT, SZ_GPT2_DIM_C,   1, SZ_GPT2_INIT_NORMAL},
    [SZ_GPT2_LN1W]     = {"ln1w",     1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ONES},
    [SZ_GPT2_LN1B]     = {"ln1b",     1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
    [SZ_GPT2_QKVW]     = {"qkvw",     1, SZ_GPT2_DIM_3C,   SZ_GPT2_DIM_C,   1, SZ_GPT2_INIT_NORMAL},
    [SZ_GPT2_QKVB]     = {"qkvb",     1, SZ_GPT2_DIM_3C,   SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
    [SZ_GPT2_ATTPROJW] = {"attprojw", 1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_C,   1, SZ_GPT2_INIT_NORMAL_RESIDUAL},
    [SZ_GPT2_ATTPROJB] = {"attprojb", 1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
    [SZ_GPT2_LN2W]     = {"ln2w",     1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ONES},
    [SZ_GPT2_LN2B]     = {"ln2b",     1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
    [SZ_GPT2_FCW]      = {"fcw",      1, SZ_GPT2_DIM_4C,   SZ_GPT2_DIM_C,   1, SZ_GPT2_INIT_NORMAL},
    [SZ_GPT2_FCB]      = {"fcb",      1, SZ_GPT2_DIM_4C,   SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
    [SZ_GPT2_FCPROJW]  = {"fcprojw",  1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_4C,  1, SZ_GPT2_INIT_NORMAL_RESIDUAL},
    [SZ_GPT2_FCPROJB]  = {"fcprojb",  1, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
    [SZ_GPT2_LNFW]     = {"lnfw",     0, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ONES},
    [SZ_GPT2_LNFB]     = {"lnfb",     0, SZ_GPT2_DIM_C,    SZ_GPT2_DIM_ONE, 0, SZ_GPT2_INIT_ZEROS},
};


const sz_gpt2_tensor_spec *sz_gpt2_tensor(int id)
{
    if (id < 0 || id >= SZ_GPT2_NUM_TENSORS)
        return NULL;
    return &k_gpt2_tensors[id];
}

int sz_gpt2_tensor_find(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < SZ_GPT2_NUM_TENSORS; i++)
        if (strcmp(k_gpt2_tensors[i].name, name) == 0)
            return i;
    return -1;
}

size_t sz_gpt2_dim_value(const sz_gpt2_config *cfg, sz_gpt2_dim dim)
{
    size_t c = (size_t)cfg->channels;
    switch (dim) {
    case SZ_GPT2_DIM_ONE: return 1;
    case SZ_GPT2_DIM_C: return c;
    case SZ_GPT2_DIM_3C: return 3 * c;
    case SZ_GPT2_DIM_4C: return 4 * c;
    case SZ_GPT2_DIM_VP: return (size_t)cfg->padded_vocab;
    case SZ_GPT2_DIM_MAXT: return (size_t)cfg->max_seq;
    }
    return 0;
}

int sz_gpt2_tensor_shape(const sz_gpt2_config *cfg, int id, size_t *rows, size_t *cols)
{
    const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
    size_t r = t ? sz_gpt2_dim_value(cfg, t->rows) : 0;
    size_t c = t ? sz_gpt2_dim_value(cfg, t->cols) : 0;
    if (rows)
        *rows = r;
    if (cols)
        *cols = c;
    return t != NULL;
}

size_t sz_gpt2_tensor_layer_numel(const sz_gpt2_config *cfg, int id)
{
    size_t rows, cols;
    if (!sz_gpt2_tensor_shape(cfg, id, &rows, &cols))
        return 0;
    return rows * cols;
}

size_t sz_gpt2_tensor_numel(const sz_gpt2_config *cfg, int id)
{
    const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
    if (!t)
        return 0;
    size_t n = sz_gpt2_tensor_layer_numel(cfg, id);
    return t->per_layer ? n * (size_t)cfg->layers : n;
}

size_t sz_gpt2_tensor_offset(const sz_gpt2_config *cfg, int id)
{
    size_t off = 0;
    for (int i = 0; i < id && i < SZ_GPT2_NUM_TENSORS; i++)
        off += sz_gpt2_tensor_numel(cfg, i);
    return off;
}

size_t sz_gpt2_tensor_layer_offset(const sz_gpt2_config *cfg, int id, int layer)
{
    const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
    size_t off = sz_gpt2_tensor_offset(cfg, id);
    if (t && t->per_layer && layer > 0)
        off += (size_t)layer * sz_gpt2_tensor_layer_numel(cfg, id);
    return off;
}

size_t sz_gpt2_num_params(const sz_gpt2_config *cfg)
{
    return sz_gpt2_tensor_offset(cfg, SZ_GPT2_NUM_TENSORS);
}

float sz_gpt2_tensor_init_std(const sz_gpt2_config *cfg, int id)
{
    const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(id);
    if (!t)
        return 0.0f;
    switch (t->init) {
    case SZ_GPT2_INIT_NORMAL: return 0.02f;
    case SZ_GPT2_INIT_NORMAL_RESIDUAL: return 0.02f / sqrtf(2.0f * (float)cfg->layers);
    case SZ_GPT2_INIT_ZEROS:
    case SZ_GPT2_INIT_ONES: return 0.0f;
    }
    return 0.0f;
}

int sz_gpt2_padded_vocab(int vocab)
{
    if (vocab <= 0 || vocab > INT_MAX - 127)
        return vocab;
    return (vocab + 127) / 128 * 128;
}

int sz_gpt2_config_format(const sz_gpt2_config *cfg, char *buf, size_t buflen)
{
    return snprintf(buf, buflen, "L=%d H=%d C=%d V=%d Vp=%d maxT=%d", cfg->layers, cfg->heads,
                    cfg->channels, cfg->vocab, cfg->padded_vocab, cfg->max_seq);
}

sz_status sz_gpt2_config_validate(const sz_gpt2_config *cfg, char *err, size_t errlen)
{
    if (!cfg) {
        gpt2_set_err(err, errlen, "no GPT-2 config given");
        return SZ_ERR_INVALID;
    }
    const struct { const char *name; int value; } fields[] = {
        {"max_seq (maxT)", cfg->max_seq},  {"vocab (V)", cfg->vocab},
        {"padded_vocab (Vp)", cfg->padded_vocab}, {"layers (L)", cfg->layers},
        {"heads (NH)", cfg->heads},       {"channels (C)", cfg->channels},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].value <= 0) {
            gpt2_set_err(err, errlen, "invalid GPT-2 config: %s is %d, must be positive", fields[i].name,
                    fields[i].value);
            return SZ_ERR_INVALID;
        }
    }
    if (cfg->channels % cfg->heads != 0) {
        gpt2_set_err(err, errlen,
                "invalid GPT-2 config: channels C=%d is not divisible by heads NH=%d "
                "(the head size C/NH must be a whole number)",
                cfg->channels, cfg->heads);
        return SZ_ERR_INVALID;
    }
    if (cfg->padded_vocab < cfg->vocab) {
        gpt2_set_err(err, errlen, "invalid GPT-2 config: padded vocab Vp=%d is smaller than vocab V=%d",
                cfg->padded_vocab, cfg->vocab);
        return SZ_ERR_INVALID;
    }
    /* Sizes are size_t products of ints; refuse configs whose byte count (fp32) would not fit in
     * 63 bits, so no later product can overflow. Estimated in double from the table itself. */
    double total = 0.0;
    for (int i = 0; i < SZ_GPT2_NUM_TENSORS; i++) {
        const sz_gpt2_tensor_spec *t = &k_gpt2_tensors[i];
        double n = (double)sz_gpt2_dim_value(cfg, t->rows) * (double)sz_gpt2_dim_value(cfg, t->cols);
        total += t->per_layer ? n * cfg->layers : n;
    }
    if (total * 4.0 > 9.0e18) {
        gpt2_set_err(err, errlen, "invalid GPT-2 config: %.3g parameters is too large", total);
        return SZ_ERR_INVALID;
    }
    return SZ_OK;
}

/* Parses a positive decimal int from [s, end) exactly; 0 on failure. */
static int parse_int_field(const char *s, const char *end, int *out)
{
    char buf[32];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((buf[i] < '0' || buf[i] > '9') && !(i == 0 && (buf[i] == '-' || buf[i] == '+')))
            return 0;
    errno = 0;
    char *e = NULL;
    long v = strtol(buf, &e, 10);
    if (errno != 0 || *e != '\0' || v < INT_MIN || v > INT_MAX)
        return 0;
    *out = (int)v;
    return 1;
}

sz_status sz_gpt2_config_from_string(sz_gpt2_config *out, const char *spec, int vocab, int max_seq,
                                     char *err, size_t errlen)
{
    static const struct { const char *name; int layers, heads, channels; } presets[] = {
        {"d2", 2, 4, 128},
        {"d6", 6, 6, 384},
        {"d12", 12, 12, 768},
    };
    if (!out || !spec) {
        gpt2_set_err(err, errlen, "no model spec given");
        return SZ_ERR_INVALID;
    }
    sz_gpt2_config cfg = {.max_seq = max_seq, .vocab = vocab, .padded_vocab = sz_gpt2_padded_vocab(vocab)};
    int found = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(spec, presets[i].name) == 0) {
            cfg.layers = presets[i].layers;
            cfg.heads = presets[i].heads;
            cfg.channels = presets[i].channels;
            found = 1;
        }
    }
    if (!found) {
        const char *c1 = strchr(spec, ',');
        const char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        const char *end = spec + strlen(spec);
        if (!c1 || !c2 || strchr(c2 + 1, ',') || !parse_int_field(spec, c1, &cfg.layers) ||
            !parse_int_field(c1 + 1, c2, &cfg.heads) || !parse_int_field(c2 + 1, end, &cfg.channels)) {
            gpt2_set_err(err, errlen,
                    "unknown model spec \"%s\": expected a preset (d2, d6, d12) or \"L,H,C\" "
                    "such as \"4,4,256\"",
                    spec);
            return SZ_ERR_INVALID;
        }
    }
    sz_status st = sz_gpt2_config_validate(&cfg, err, errlen);
    if (st != SZ_OK)
        return st;
    *out = cfg;
    return SZ_OK;
}
