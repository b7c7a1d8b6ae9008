/* apps/common/arch.h — the small model interface the apps use, so that one sz-train, sz-bench and
 * sz-estimate drive either bundled architecture: GPT-2 (apps/gpt2, the default) or the
 * LLaMA-style model (apps/llama). A config names the architecture and carries its shape; a model
 * is created from it, initialised, fed batches, and its sz_model handed to the engine. */
#ifndef SZ_APP_ARCH_H
#define SZ_APP_ARCH_H

#include "starzero_gpt2.h"
#include "starzero_llama.h"

typedef enum { SZ_ARCH_GPT2 = 0, SZ_ARCH_LLAMA } sz_arch_kind;

typedef struct sz_arch_config {
    sz_arch_kind kind;
    sz_gpt2_config gpt2;   /* kind == SZ_ARCH_GPT2 */
    sz_llama_config llama; /* kind == SZ_ARCH_LLAMA */
} sz_arch_config;

/* "gpt2" / "llama", and back (0, or -1 for an unknown name). */
const char *sz_arch_name(sz_arch_kind kind);
int sz_arch_parse(const char *name, sz_arch_kind *out);
/* "GPT-2" / "LLaMA-style", for messages. */
const char *sz_arch_title(sz_arch_kind kind);

/* A preset (d2, d6, d12) or "L,H,C" for the architecture; vocab and max_seq given apart. */
sz_status sz_arch_config_from_string(sz_arch_config *out, sz_arch_kind kind, const char *spec, int vocab,
                                     int max_seq, char *err, size_t errlen);
int sz_arch_vocab(const sz_arch_config *c);
int sz_arch_format(const sz_arch_config *c, char *buf, size_t buflen);
int64_t sz_arch_num_params(const sz_arch_config *c);
int64_t sz_arch_largest_unit_numel(const sz_arch_config *c);
/* Device-pool activation bytes of one micro-batch (full, checkpointed, offloaded checkpoints). */
double sz_arch_activation_bytes(const sz_arch_config *c, int B, int T, int checkpoint, int offload);

/* The integer shape fields of a config, by name (for training-state manifests): up to max
 * (name, pointer into *c) pairs; returns how many. */
int sz_arch_fields(sz_arch_config *c, const char **names, int **fields, int max);
/* One of them by name ("layers", "channels", ...), or -1 where the architecture has no such field. */
int sz_arch_field(const sz_arch_config *c, const char *name);
/* The model as its create function would build it under z, for planning without a runtime
 * (sz_model_shape_plan; sz_gpt2_shape, sz_llama_shape). */
sz_status sz_arch_shape(const sz_arch_config *c, int B, int T, const sz_zero_config *z, int workers, int threads,
                        sz_model_shape *out, char *err, size_t errlen);

/* ---- Megatron-LM's tensor parallelism over N_m ranks (the estimator's; sz-train has none yet) ----
 * How each parameter tensor splits: column-parallel (its output rows: QKV, fc, gate, up, their
 * biases), row-parallel (its input columns: the attention projection, fc projection, down),
 * vocabulary-parallel (the embedding's and the head's rows); everything else (norms, row-parallel
 * biases, position embeddings) replicated on every MP rank. */
typedef enum { SZ_MP_REPLICATED = 0, SZ_MP_COLUMN, SZ_MP_ROW, SZ_MP_VOCAB } sz_mp_split;
sz_mp_split sz_arch_mp_split(sz_arch_kind kind, const char *tensor);
/* 0 when nm divides the heads, the MLP width and the (padded) vocabulary; otherwise -1 with err
 * naming each that it does not divide. */
int sz_arch_mp_check(const sz_arch_config *c, int nm, char *err, size_t errlen);
/* The parameter count split across the MP group (*split) and replicated on each rank (*replicated):
 * one MP rank holds *split / nm + *replicated. 0, or -1. */
int sz_arch_mp_params(const sz_arch_config *c, double *split, double *replicated);
/* A shape as one of nm MP ranks holds it: each split tensor's rows (column, vocabulary) or columns
 * (row) divided by nm (sz_arch_mp_check first). Rewrites s's tensor tables in place. */
void sz_arch_mp_shape(sz_arch_kind kind, sz_model_shape *s, int nm);
/* The model's forward tensors of one micro-batch on one of nm ranks (sz_arch_activation_bytes at
 * nm = 1), P_a (pa) keeping each checkpointed block input as a 1/nm slice. -1.0 when invalid. */
double sz_arch_activation_bytes_mp(const sz_arch_config *c, int B, int T, int checkpoint, int offload, int nm, int pa);
/* Elements of one block's input for B x T: B·T·C. */
double sz_arch_block_io(const sz_arch_config *c, int B, int T);

typedef struct sz_arch_model sz_arch_model;

sz_status sz_arch_create(sz_arch_model **out, sz_context *ctx, const sz_arch_config *cfg, int B, int T,
                         const sz_zero_config *zero, char *err, size_t errlen);
void sz_arch_free(sz_arch_model *m);
sz_model *sz_arch_model_of(sz_arch_model *m);
sz_status sz_arch_init_random(sz_arch_model *m, uint64_t seed);
sz_status sz_arch_set_batch(sz_arch_model *m, const int *inputs, const int *targets);
/* Training FLOPs of one micro-batch on one rank. */
double sz_arch_flops(const sz_arch_model *m);
/* Whole-model parameter files: GPT-2's llm.c checkpoints. The LLaMA-style model has no such
 * format (SZ_ERR_UNSUPPORTED with a message: its state goes through --save-state/--resume). */
sz_status sz_arch_load(sz_arch_model *m, const char *path, char *err, size_t errlen);
/* Collective; rank 0 writes. */
sz_status sz_arch_save(sz_arch_model *m, const char *path, char *err, size_t errlen);

#endif
