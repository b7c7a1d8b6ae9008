/* starzero_llama.h — the bundled LLaMA-style model (library sz_llama), written only against the
 * public header starzero.h: token embedding (no position table); L blocks
 * of RMSNorm -> fused qkv matmul -> rotary embedding on q and k -> causal attention -> output
 * projection -> residual, RMSNorm -> SwiGLU MLP (gate and up matmuls, silu(gate)·up, down matmul)
 * -> residual; a final RMSNorm; an untied LM head; softmax cross-entropy. No biases anywhere.
 * Units: "embed" (wte), "block<l>" (checkpointable), "head" (final norm weight, LM head), so ZeRO
 * stages 0-3, activation checkpointing and offloaded checkpoints apply without the model knowing.
 * The SwiGLU product is the engine's sz_op_swiglu_fwd/bwd (CPU and CUDA; it was an operation of the
 * model's own through starzero_starpu.h until it needed a CUDA twin). The first part below is pure C (configs, sizes, the estimator). */
#ifndef STARZERO_LLAMA_H
#define STARZERO_LLAMA_H

#include "starzero.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sz_llama_config {
    int max_seq;      /* longest sequence T the model is built for (RoPE has no table to bound it) */
    int vocab;        /* V: rows of the embedding and of the LM head (no padding) */
    int layers;       /* L */
    int heads;        /* NH; channels % heads == 0 and the head size channels/heads even (RoPE pairs) */
    int channels;     /* C */
    int hidden;       /* F: SwiGLU hidden width (sz_llama_hidden(C) unless set) */
    float rope_theta; /* RoPE base, 10000 */
    float norm_eps;   /* RMSNorm eps, 1e-5 */
} sz_llama_config;

/* LLaMA's SwiGLU width: 8C/3 rounded up to a multiple of 32 (C = 128 -> 352, C = 768 -> 2048). */
int sz_llama_hidden(int channels);

/* Checks a config: every size > 0, channels % heads == 0, an even head size, theta > 0,
 * eps >= 0, a parameter count that fits int64. SZ_ERR_INVALID with a message in err (may be NULL). */
sz_status sz_llama_config_validate(const sz_llama_config *cfg, char *err, size_t errlen);

/* From a preset — "d2" (L2,H4,C128), "d6" (6,6,384), "d12" (12,12,768), as for GPT-2 — or an
 * "L,H,C" string; hidden = sz_llama_hidden(C), theta 10000, eps 1e-5. Validated; *out untouched
 * on failure. */
sz_status sz_llama_config_from_string(sz_llama_config *out, const char *spec, int vocab, int max_seq, char *err,
                                      size_t errlen);

/* "L=2 H=4 C=128 F=352 V=256 maxT=1024" (snprintf semantics). */
int sz_llama_config_format(const sz_llama_config *cfg, char *buf, size_t buflen);

/* The units' tensor tables, as the model declares them (rows of sz_param_spec, init included):
 * unit 0 embed {wte [V,C]}; units 1..L block {rms1w [C], qkvw [3C,C], attprojw [C,C], rms2w [C],
 * gatew [F,C], upw [F,C], downw [C,F]}; unit L+1 head {rmsfw [C], lmw [V,C]}. Matrices are
 * N(0, 0.02²), the projections into the residual (attprojw, downw) N(0, (0.02/sqrt(2L))²), norm
 * weights 1; weight decay applies to the matrices. Returns the row count written (at most 7). */
enum { SZ_LLAMA_EMBED_PARAMS = 1, SZ_LLAMA_BLOCK_PARAMS = 7, SZ_LLAMA_HEAD_PARAMS = 2 };
int sz_llama_unit_params(const sz_llama_config *cfg, int unit, sz_param_spec *out);

/* Parameters of the whole model: V·C + L·(2C + 4C² + 3CF) + C + V·C; -1 for an invalid cfg. */
int64_t sz_llama_num_params(const sz_llama_config *cfg);
/* Elements of the largest unit (the cap of sz_zero_comm_buffer_bytes); -1 for an invalid cfg. */
int64_t sz_llama_largest_unit_numel(const sz_llama_config *cfg);

/* Activation bytes (fp32) of one micro-batch of B x T, counted tensor by tensor as apps/llama
 * allocates them (N = B·T): embed output N·C; per block rms1 N·C, rstd1 N, qkv 3N·C (rotated in
 * place), atty N·C, the attention's statistics [B,NH,T,2], attproj N·C, res2 N·C, rms2 N·C,
 * rstd2 N, gate, up, h N·F each, down N·C, the block's output N·C; head rmsf N·C, rstdf N,
 * logits N·V (overwritten with its gradient: no probs), losses N. Like sz_gpt2_activation_bytes: forward tensors only, no
 * gradients. checkpoint = 1: L block inputs + one block's tensors + the head; offload = 1 (needs
 * checkpoint): the L inputs replaced by min(L, 3) on the device. -1.0 on a bad argument. */
double sz_llama_activation_bytes(const sz_llama_config *cfg, int B, int T, int checkpoint, int offload);

/* Each unit's element count (embed, block0 .. block(L-1), head) into numel[0 .. L+1]; returns L + 2,
 * or -1 for an invalid cfg. */
int sz_llama_unit_numels(const sz_llama_config *cfg, int64_t *numel);
/* Host bytes the model's matmuls need beside the engine's tensors (sz_matmul_host_bytes over qkv, the
 * attention projection, gate, up, down and the head; rows = B*T): sz_llama_create adds it to
 * sz_zero_config.host_bytes. */
int64_t sz_llama_host_bytes(const sz_llama_config *cfg, int B, int T, int workers, int threads);
/* What the same matmuls add on the native bf16 path (sz_matmul_host_bytes_bf16: they may also run the
 * bf16 kernels); sz_llama_create adds it there too. */
int64_t sz_llama_host_bytes_bf16(const sz_llama_config *cfg, int B, int T, int workers, int threads);
/* What they add on the emulated bf16 path with direct bf16 parameters (sz_resolved_precision.params_direct:
 * fp32 activations, bf16 weights widened tile by tile; sz_matmul_host_bytes_wbf16). */
int64_t sz_llama_host_bytes_wbf16(const sz_llama_config *cfg, int B, int T, int workers, int threads);
/* What its linear layers (the head's too) and its embedding's backward (B x T tokens) add when they
 * round into the bf16 gradients (sz_resolved_precision.grads_rounded; sz_matmul_round_host_bytes,
 * sz_embedding_round_host_bytes: the larger, per worker). */
int64_t sz_llama_round_host_bytes(const sz_llama_config *cfg, int B, int T, int workers);
/* All the host bytes sz_llama_create adds to sz_zero_config.host_bytes under precision p: the
 * matmuls' (sz_llama_host_bytes), the bf16 kernels' (native) or the widened weights' (direct bf16
 * parameters on the emulated path), and the rounding panels where gradients are rounded by their writers. */
int64_t sz_llama_host_buffer_bytes(const sz_llama_config *cfg, int B, int T, const sz_resolved_precision *p,
                                   int workers, int threads);
/* The model as sz_llama_create would build it under z, for planning without a runtime
 * (sz_model_shape_plan); as sz_gpt2_shape. Free with sz_model_shape_free. */
sz_status sz_llama_shape(const sz_llama_config *cfg, int B, int T, const sz_zero_config *z, int workers, int threads,
                         sz_model_shape *out, char *err, size_t errlen);
/* Bytes of every tensor the model registers beside its parameters for a B x T micro-batch (the
 * engine's "activations" category: forward tensors, their gradients, tokens and targets), under
 * checkpointing and offloaded checkpoints; *host_bytes (may be NULL) gets the host pool's (the L
 * block inputs when offloaded). -1 for invalid arguments. */
int64_t sz_llama_engine_activation_bytes(const sz_llama_config *cfg, int B, int T, int checkpoint, int offload,
                                         int64_t *host_bytes);
/* The same with native = 1: the native bf16 path's tensors (sz_resolved_precision.native), where the
 * activations the matmuls read (rms1, atty, rms2, h, rmsf), the logits and the gradients the matmuls
 * read or write (drms1, dqkv, datty, dattproj, drms2, dgate, dup, dh, ddown, drmsf) are bf16;
 * native = 0 is sz_llama_engine_activation_bytes. */
int64_t sz_llama_engine_activation_bytes_bf16(const sz_llama_config *cfg, int B, int T, int checkpoint, int offload,
                                              int native, int64_t *host_bytes);

/* Training FLOPs of one micro-batch of B x T (forward + backward = 3 x forward): matmuls
 * 2·(L·(4C² + 3CF) + CV) per token, causal attention 2·L·T·C per token. */
double sz_llama_flops(const sz_llama_config *cfg, int B, int T);

/* ==== the model on the runtime ========================================================= */
typedef struct sz_llama sz_llama;

/* Builds the model for micro-batch B x T (T <= cfg->max_seq) on ctx under `zero` (NULL: stage 0,
 * one micro-batch); parameters are zero until sz_llama_init_random. err receives a message. */
sz_status sz_llama_create(sz_llama **out, sz_context *ctx, const sz_llama_config *cfg, int B, int T,
                          const sz_zero_config *zero, char *err, size_t errlen);
void sz_llama_free(sz_llama *m);
sz_model *sz_llama_model(sz_llama *m);
const sz_llama_config *sz_llama_get_config(const sz_llama *m);
/* Every tensor from its spec (sz_model_init_params: the same values whatever the ranks). */
sz_status sz_llama_init_random(sz_llama *m, uint64_t seed);
/* B·T input tokens and B·T targets (int32) for the next step. */
sz_status sz_llama_set_batch(sz_llama *m, const int *inputs, const int *targets);
/* All parameters (or the last step's gradients), unit by unit in table order (collective);
 * sz_llama_num_params floats. */
sz_status sz_llama_get_params(sz_llama *m, float *flat);
sz_status sz_llama_set_params(sz_llama *m, const float *flat);
sz_status sz_llama_get_grads(sz_llama *m, float *flat);

#ifdef __cplusplus
}
#endif
#endif /* STARZERO_LLAMA_H */
