/* apps/gpt2/gpt2.h — GPT-2 (llm.c semantics) written against the public StarZeRO API: units
 * embed, block0..blockL-1, head (final layernorm + tied-weight head + loss), every tensor taken
 * from the GPT-2 table. Shared by sz-train, sz-bench and the tests. */
#ifndef SZ_APP_GPT2_H
#define SZ_APP_GPT2_H

#include "starzero_gpt2.h"

typedef struct gpt2 gpt2;

/* The units' tensors by table id, in order: "embed", each "block<l>", "head" (gpt2.c adds the units
 * from these lists, gpt2_estimate.c counts their elements from them). */
#define SZ_GPT2_EMBED_IDS {SZ_GPT2_WTE, SZ_GPT2_WPE}
#define SZ_GPT2_BLOCK_IDS                                                                                   \
    {SZ_GPT2_LN1W, SZ_GPT2_LN1B, SZ_GPT2_QKVW, SZ_GPT2_QKVB, SZ_GPT2_ATTPROJW, SZ_GPT2_ATTPROJB, SZ_GPT2_LN2W, \
     SZ_GPT2_LN2B, SZ_GPT2_FCW, SZ_GPT2_FCB, SZ_GPT2_FCPROJW, SZ_GPT2_FCPROJB}
#define SZ_GPT2_HEAD_IDS {SZ_GPT2_LNFW, SZ_GPT2_LNFB}

/* sz_gpt2_activation_bytes_device on one of nm tensor-parallel ranks (Megatron's split: attention by
 * heads, the MLP by its width, the logits by the vocabulary; nm = 1 gives it), with P_a (pa: needs
 * checkpoint) keeping each block input as a 1/nm slice plus one gathered input (gpt2_estimate.c). */
double sz_gpt2_activation_bytes_mp(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload, int nm, int pa);

/* Builds the model for micro-batch B x T (T <= cfg->max_seq) on ctx with the ZeRO configuration
 * `zero` (NULL: stage 0, one micro-batch); parameters are zero until gpt2_init_random or
 * gpt2_load. err receives a message on failure. */
sz_status gpt2_create(gpt2 **out, sz_context *ctx, const sz_gpt2_config *cfg, int B, int T, const sz_zero_config *zero,
                      char *err, size_t errlen);
void gpt2_free(gpt2 *g);

sz_model *gpt2_model(gpt2 *g);
const sz_gpt2_config *gpt2_config(const gpt2 *g);

/* llm.c's random init: N(0, 0.02), residual projections 0.02/sqrt(2L), biases 0, LN weights 1. */
sz_status gpt2_init_random(gpt2 *g, uint64_t seed);
/* Parameters in llm.c's flat checkpoint order (sz_gpt2_num_params floats) in and out. */
sz_status gpt2_set_params(gpt2 *g, const float *flat);
sz_status gpt2_get_params(gpt2 *g, float *flat);
sz_status gpt2_get_grads(gpt2 *g, float *flat);
/* Checkpoint files (llm.c format). load checks the file's config against the model's. */
sz_status gpt2_load(gpt2 *g, const char *path, char *err, size_t errlen);
/* Collective: rank `root` writes the file, gathering one unit at a time (see gpt2.c). */
sz_status gpt2_save(gpt2 *g, int root, const char *path, char *err, size_t errlen);

/* Inputs for the next step: B*T tokens and B*T targets (int32). */
sz_status gpt2_set_batch(gpt2 *g, const int *inputs, const int *targets);

/* Training FLOPs of one step (forward + backward) for the model's B, T. */
double gpt2_flops_per_step(const gpt2 *g);

/* The batch llm.c's loader would give: batch k is tokens [k*B*T, k*B*T + B*T] of the stream
 * (wrapping), row b the T tokens from b*T, targets shifted by one. row0 selects rows
 * row0 .. row0+B-1 of a global batch of `rows_per_batch` rows (data parallelism). */
void gpt2_batch_from_stream(const uint16_t *tokens, size_t ntokens, long k, int rows_per_batch, int row0, int B,
                            int T, int *inputs, int *targets);

#endif
