/* starzero_gpt2.h — the bundled GPT-2 model's public header (library starzero_gpt2, CMake target
 * StarZeRO::gpt2): GPT-2's tensor table, llm.c's checkpoint and token file formats, and the
 * GPT-2 parts of the estimator (activation bytes, checkpoint bytes, the largest unit). Pure C,
 * no runtime. The engine itself (starzero.h) knows nothing of GPT-2.
 */
#ifndef STARZERO_GPT2_H
#define STARZERO_GPT2_H

#include "starzero.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== GPT-2's tensor table and llm.c's file formats (pure C, no runtime) ==================== */
/* The shape of a GPT-2 model, as in llm.c's checkpoint header. */
typedef struct sz_gpt2_config {
    int max_seq;      /* maxT: positions in wpe */
    int vocab;        /* V: real vocabulary size (50257 for GPT-2's tokenizer, 256 byte-level) */
    int padded_vocab; /* Vp >= V: rows of wte (llm.c pads to a multiple of 128 for speed) */
    int layers;       /* L: transformer blocks */
    int heads;        /* NH: attention heads; channels % heads == 0 */
    int channels;     /* C: model width */
} sz_gpt2_config;

/* Symbolic sizes a table row's shape is made of; resolved against a config. */
typedef enum sz_gpt2_dim {
    SZ_GPT2_DIM_ONE = 0, /* 1 (the "cols" of a vector) */
    SZ_GPT2_DIM_C,       /* channels */
    SZ_GPT2_DIM_3C,      /* 3 * channels (fused q, k, v) */
    SZ_GPT2_DIM_4C,      /* 4 * channels (MLP hidden) */
    SZ_GPT2_DIM_VP,      /* padded_vocab */
    SZ_GPT2_DIM_MAXT,    /* max_seq */
} sz_gpt2_dim;

/* How a tensor is initialized for training from scratch (llm.c / GPT-2 convention). */
typedef enum sz_gpt2_init {
    SZ_GPT2_INIT_NORMAL = 0,       /* N(0, 0.02^2) */
    SZ_GPT2_INIT_NORMAL_RESIDUAL,  /* N(0, (0.02/sqrt(2L))^2): projections into the residual */
    SZ_GPT2_INIT_ZEROS,            /* biases and layernorm biases */
    SZ_GPT2_INIT_ONES,             /* layernorm weights */
} sz_gpt2_init;

/* Names for the rows of the table, in llm.c's checkpoint order. The table is keyed by these
 * (designated initializers), so an index always means the same tensor. */
typedef enum sz_gpt2_tensor_id {
    SZ_GPT2_WTE = 0,  /* (Vp, C)            token embedding, tied with the LM head */
    SZ_GPT2_WPE,      /* (maxT, C)          position embedding */
    SZ_GPT2_LN1W,     /* L x (C)            */
    SZ_GPT2_LN1B,     /* L x (C)            */
    SZ_GPT2_QKVW,     /* L x (3C, C)        */
    SZ_GPT2_QKVB,     /* L x (3C)           */
    SZ_GPT2_ATTPROJW, /* L x (C, C)         */
    SZ_GPT2_ATTPROJB, /* L x (C)            */
    SZ_GPT2_LN2W,     /* L x (C)            */
    SZ_GPT2_LN2B,     /* L x (C)            */
    SZ_GPT2_FCW,      /* L x (4C, C)        */
    SZ_GPT2_FCB,      /* L x (4C)           */
    SZ_GPT2_FCPROJW,  /* L x (C, 4C)        */
    SZ_GPT2_FCPROJB,  /* L x (C)            */
    SZ_GPT2_LNFW,     /* (C)                */
    SZ_GPT2_LNFB,     /* (C)                */
    SZ_GPT2_NUM_TENSORS
} sz_gpt2_tensor_id;

/* One row of the table. Weights are stored (out, in) row-major: y = x . W^T + b, so for a
 * matrix rows = out features and cols = in features. A vector has cols = SZ_GPT2_DIM_ONE.
 * A per-layer tensor is L copies of (rows x cols), layer-major and contiguous.
 * Note: llm.c initializes only the first V rows of wte; rows V..Vp-1 stay zero. */
typedef struct sz_gpt2_tensor_spec {
    const char *name;    /* llm.c's name: "wte", "qkvw", ... */
    int per_layer;       /* 1: one (rows x cols) block per transformer layer */
    sz_gpt2_dim rows;
    sz_gpt2_dim cols;
    int is_matrix;       /* 1: a 2-D weight matrix; weight decay applies under `--decay matrices`
                            (wte, wpe, qkvw, attprojw, fcw, fcprojw — exactly llm.c's choice) */
    sz_gpt2_init init;
} sz_gpt2_tensor_spec;

/* The table row of tensor `id`; NULL when id is out of range. */
const sz_gpt2_tensor_spec *sz_gpt2_tensor(int id);

/* The id of the tensor called `name`, or -1. */
int sz_gpt2_tensor_find(const char *name);

/* The value of a symbolic size under `cfg`. */
size_t sz_gpt2_dim_value(const sz_gpt2_config *cfg, sz_gpt2_dim dim);

/* Rows and columns of one layer's block of tensor `id` (of the whole tensor if not per-layer).
 * Returns 0 (and zeros) for a bad id. */
int sz_gpt2_tensor_shape(const sz_gpt2_config *cfg, int id, size_t *rows, size_t *cols);

/* Elements of one layer's block (rows * cols); the whole tensor if it is not per-layer. */
size_t sz_gpt2_tensor_layer_numel(const sz_gpt2_config *cfg, int id);

/* Elements of the whole tensor (layer_numel * L for a per-layer tensor). */
size_t sz_gpt2_tensor_numel(const sz_gpt2_config *cfg, int id);

/* Offset (in elements) of tensor `id` in llm.c's flat parameter order. */
size_t sz_gpt2_tensor_offset(const sz_gpt2_config *cfg, int id);

/* Offset (in elements) of layer `layer`'s block of tensor `id` in the flat order; for a tensor
 * that is not per-layer, `layer` is ignored. */
size_t sz_gpt2_tensor_layer_offset(const sz_gpt2_config *cfg, int id, int layer);

/* Total parameter count (sum of every tensor's numel, padded vocab rows included). */
size_t sz_gpt2_num_params(const sz_gpt2_config *cfg);

/* Standard deviation for a normal init of tensor `id` (0.02 or 0.02/sqrt(2L)); 0 for the
 * zeros/ones kinds. */
float sz_gpt2_tensor_init_std(const sz_gpt2_config *cfg, int id);

/* `vocab` rounded up to a multiple of 128, like llm.c (50257 -> 50304, 256 -> 256). */
int sz_gpt2_padded_vocab(int vocab);

/* Checks a config: every field > 0, channels % heads == 0, padded_vocab >= vocab, and a total
 * size that fits in memory arithmetic. SZ_ERR_INVALID with a message in `err` otherwise.
 * `err` may be NULL. */
sz_status sz_gpt2_config_validate(const sz_gpt2_config *cfg, char *err, size_t errlen);

/* Fills *out from a preset name — "d2" (L2,H4,C128), "d6" (6,6,384), "d12" (12,12,768) — or an
 * "L,H,C" string such as "4,4,256"; vocab and max_seq are given separately and padded_vocab is
 * sz_gpt2_padded_vocab(vocab). The result is validated. *out is untouched on failure. */
sz_status sz_gpt2_config_from_string(sz_gpt2_config *out, const char *spec, int vocab, int max_seq,
                                     char *err, size_t errlen);

/* Writes "L=12 H=12 C=768 V=50257 Vp=50304 maxT=1024" into buf (snprintf semantics). */
int sz_gpt2_config_format(const sz_gpt2_config *cfg, char *buf, size_t buflen);

/* Both formats start with 256 little-endian int32s. */
#define SZ_LLMC_HEADER_INTS 256
#define SZ_LLMC_HEADER_BYTES (SZ_LLMC_HEADER_INTS * 4)

/* Checkpoint header: [0] magic, [1] version, [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp;
 * then sz_gpt2_num_params() fp32 values in the table's order (sz_gpt2_tensor_id). */
#define SZ_LLMC_MODEL_MAGIC 20240326
#define SZ_LLMC_MODEL_VERSION_FP32 3 /* llm.c's version 5 (bf16) is refused with a clear message */

/* Token file header: [0] magic, [1] version, [2] token count; then count uint16 tokens. */
#define SZ_LLMC_TOKENS_MAGIC 20240520
#define SZ_LLMC_TOKENS_VERSION 1

/* The magic a file's header holds while it is being written (the real header goes in last, after
 * the body is on disk): what a writer killed half-way leaves, refused by every reader. */
#define SZ_LLMC_UNFINISHED_MODEL (-SZ_LLMC_MODEL_MAGIC)
#define SZ_LLMC_UNFINISHED_TOKENS (-SZ_LLMC_TOKENS_MAGIC)

/* Every function below: `err` may be NULL; otherwise a message of the form
 * "<path>: <what is wrong>" is written there on failure (truncated to errlen).
 * Statuses: SZ_ERR_IO (cannot open/read/write), SZ_ERR_FORMAT (contents wrong),
 * SZ_ERR_INVALID (bad arguments), SZ_ERR_NOMEM. On failure no output is modified. */

/* Reads and validates a checkpoint's header, and checks that the file's size is exactly the
 * header plus the parameters it announces. Reads no parameters. */
sz_status sz_llmc_checkpoint_read_header(const char *path, sz_gpt2_config *cfg_out, char *err,
                                         size_t errlen);

/* Reads a whole checkpoint. On success *params_out is a malloc'd array of
 * *nparams_out == sz_gpt2_num_params(cfg_out) floats in llm.c's flat order; release it with
 * free(). nparams_out may be NULL. */
sz_status sz_llmc_checkpoint_read(const char *path, sz_gpt2_config *cfg_out, float **params_out,
                                  size_t *nparams_out, char *err, size_t errlen);

/* Writes a checkpoint (version 3, fp32). `nparams` must equal sz_gpt2_num_params(cfg) and cfg
 * must be valid (SZ_ERR_INVALID otherwise, nothing written). Writes `path`.tmp (its header, the
 * completion marker, last), flushes it to disk, then renames it over `path`; on failure the
 * temporary is removed and `path` untouched. Anything but a regular file at `path` (a device, a
 * FIFO, a directory) is refused (SZ_ERR_IO), never replaced. */
sz_status sz_llmc_checkpoint_write(const char *path, const sz_gpt2_config *cfg, const float *params,
                                   size_t nparams, char *err, size_t errlen);

/* A checkpoint read piece by piece: open validates the header and the file's size (as the reader
 * above) and gives the config; get reads n floats at parameter `offset` of llm.c's flat order. */
typedef struct sz_llmc_reader sz_llmc_reader;
sz_status sz_llmc_reader_open(sz_llmc_reader **r, const char *path, sz_gpt2_config *cfg_out, char *err,
                              size_t errlen);
sz_status sz_llmc_reader_get(sz_llmc_reader *r, size_t offset, float *dst, size_t n, char *err, size_t errlen);
void sz_llmc_reader_close(sz_llmc_reader *r);

/* The same file written piece by piece, for a model that never holds all its parameters in one
 * place (GPT-2's --save gathers one unit at a time): open refuses a `path` that is not a regular
 * file, writes an unfinished header (SZ_LLMC_UNFINISHED_MODEL) to `path`.tmp and sizes it; put
 * writes n floats at parameter `offset` of llm.c's flat order (any order, pwrite); close checks
 * every parameter was put, fsyncs the body, writes the real header, fsyncs and renames over `path`;
 * abort (or any failure of close) removes the temporary, `path` untouched. The writer is freed by
 * close and abort. */
typedef struct sz_llmc_writer sz_llmc_writer;
sz_status sz_llmc_writer_open(sz_llmc_writer **w, const char *path, const sz_gpt2_config *cfg, char *err,
                              size_t errlen);
sz_status sz_llmc_writer_put(sz_llmc_writer *w, size_t offset, const float *src, size_t n, char *err, size_t errlen);
sz_status sz_llmc_writer_close(sz_llmc_writer *w, char *err, size_t errlen);
void sz_llmc_writer_abort(sz_llmc_writer *w);

/* Compares the config read from checkpoint `path` (`got`) with the one the run expects.
 * SZ_OK when all six fields agree; otherwise SZ_ERR_FORMAT with a message naming the file and,
 * for each field that differs, both values, e.g.
 * "model.bin: checkpoint does not match the requested model: vocab V=50257 in the file but 256
 * expected; ... (file: L=12 H=12 C=768 V=50257 Vp=50304 maxT=1024; expected: ...)". */
/* SZ_ERR_FORMAT, naming the tensor, its layer and the element, when parameters read from `path`
 * (llm.c's flat order for cfg) hold a NaN or an infinity: training from them only gives NaN. The
 * reader above keeps every bit pattern; loaders for training call this. */
sz_status sz_llmc_check_finite(const char *path, const sz_gpt2_config *cfg, const float *params, char *err,
                               size_t errlen);
sz_status sz_llmc_check_config(const char *path, const sz_gpt2_config *got,
                               const sz_gpt2_config *expected, char *err, size_t errlen);

/* Reads a whole token file into memory. When vocab > 0 every token must be < vocab
 * (SZ_ERR_FORMAT naming the first offending position otherwise); vocab <= 0 skips that check.
 * On success *tokens_out is a malloc'd array of *count_out tokens (release with free()); a file
 * announcing 0 tokens is valid and gives a NULL array and a count of 0. */
sz_status sz_llmc_tokens_read(const char *path, int vocab, uint16_t **tokens_out, size_t *count_out,
                              char *err, size_t errlen);

/* Writes a token file (at most INT32_MAX tokens) through `path`.tmp + rename. */
sz_status sz_llmc_tokens_write(const char *path, const uint16_t *tokens, size_t count, char *err,
                               size_t errlen);

/* ==== the GPT-2 parts of the ZeRO estimator (pure C; conventions as for sz_zero_* in starzero.h) ==== */

/* Host bytes GPT-2's matmuls need beside the engine's tensors (sz_matmul_host_bytes over its five
 * linear layers: qkv, attention projection, fc, fc projection, the head; rows = B*T), on `workers`
 * CPU workers of `threads` kernel threads: what gpt2_create adds to sz_zero_config.host_bytes. */
int64_t sz_gpt2_host_bytes(const sz_gpt2_config *cfg, int B, int T, int workers, int threads);
/* What the linear layers add when they round into the bf16 gradients (sz_resolved_precision.grads_rounded):
 * the largest of the blocks' rounding panels (sz_matmul_round_host_bytes) and the tied lm head's
 * (its panel and its Vp token slots: sz_op_matmul_bwd_tied), per worker. */
int64_t sz_gpt2_round_host_bytes(const sz_gpt2_config *cfg, int workers);
/* All the host bytes gpt2_create adds to sz_zero_config.host_bytes under precision p: the matmuls'
 * (sz_gpt2_host_bytes), the bf16 kernels' (native) or the widened weights' (direct bf16 parameters
 * on the emulated path), and the rounding panels where the gradients are rounded by their writers. */
int64_t sz_gpt2_host_buffer_bytes(const sz_gpt2_config *cfg, int B, int T, const sz_resolved_precision *p, int workers,
                                  int threads);
/* GPT-2 as gpt2_create would build it under z, for planning without a runtime (sz_model_shape_plan):
 * its units from the same tables, the blocks' input checkpoints, the activations it registers and
 * the host bytes above for `workers` CPU workers of `threads` kernel threads. Free with
 * sz_model_shape_free. SZ_ERR_INVALID (err says why) for an invalid cfg, B, T or precision. */
sz_status sz_gpt2_shape(const sz_gpt2_config *cfg, int B, int T, const sz_zero_config *z, int workers, int threads,
                        sz_model_shape *out, char *err, size_t errlen);

/* ---- GPT-2 activations ------------------------------------------------------------------- */

/* Bytes of llm.c's ActivationTensors (fp32) for one micro-batch of B sequences of T tokens,
 * counted tensor by tensor (N = B·T, L layers, C channels, NH heads, Vp padded vocab):
 *   encoded N·C; per layer: ln1 N·C, ln1_mean N, ln1_rstd N, qkv 3N·C, atty N·C,
 *   attstat 2·B·NH·T (llm.c: preatt, att B·NH·T·T each), attproj N·C, residual2 N·C, ln2 N·C, ln2_mean N, ln2_rstd N,
 *   fch 4N·C, fch_gelu 4N·C, fcproj N·C, residual3 N·C; head: lnf N·C, lnf_mean N, lnf_rstd N,
 *   logits N·Vp, probs N·Vp, losses N.
 * Total floats: 2NC + L(18NC + 4N + 2·B·NH·T) + 3N + 2N·Vp (d12, B=4, T=64: 68,702,976; llm.c,
 * which saves the T×T tensors, prints num_activations 73,347,840 = this + L·2·B·NH·(T² - T)). Not included: the activation gradients of backward (llm.c
 * allocates a second set of the same size), inputs/targets, and any temporaries.
 * -1.0 when cfg is NULL or invalid, B < 1, T < 1 or T > cfg->max_seq. */
double sz_gpt2_activation_bytes(const sz_gpt2_config *cfg, int B, int T);

/* The same under activation checkpointing at transformer-block granularity: what is resident
 * at the peak of backward, in fp32 bytes:
 *   - each block's input, kept from forward: L·N·C (block 0's input is `encoded`, block l's is
 *     block l-1's residual3), and
 *   - one block's full activations, recomputed from its input before its backward (all the
 *     per-layer tensors above for one layer: 18NC + 4N + 2·B·NH·T floats), and
 *   - the head's tensors, kept from forward for its backward: lnf N·C, lnf_mean N, lnf_rstd N,
 *     logits N·Vp, probs N·Vp, losses N.
 * Total floats: L·NC + (18NC + 4N + 2·B·NH·T) + NC + 3N + 2N·Vp. The recomputed block's own
 * residual3 equals the next block's kept input; it is counted in both places (an upper bound:
 * an implementation that aliases them saves N·C). Gradients and temporaries are excluded as
 * above. -1.0 on the same errors. */
double sz_gpt2_activation_bytes_ckpt(const sz_gpt2_config *cfg, int B, int T);

/* ---- ZeRO-R: offloaded checkpoints (P_a+cpu) --------------------------------------------- */

/* With the checkpoints offloaded (sz_zero_config.offload_checkpoints, which needs checkpoint),
 * every block's input (its checkpoint, N·C fp32) moves to a host pool after the block's forward
 * and comes back before its recompute, as tasks/step.c does it:
 *   - the host pool holds all L checkpoints: L·N·C·4 bytes (sz_gpt2_checkpoint_host_bytes);
 *   - the device pool holds at most min(L, 3) of them at once (sz_gpt2_checkpoint_device_bytes):
 *     in backward, block l's own input, block l-1's fetched one unit ahead, and block l+1's that
 *     the recompute writes again (in forward two: the one read, the one written);
 *   - device-pool activations (sz_gpt2_activation_bytes_offload): those of
 *     sz_gpt2_activation_bytes_ckpt with the L kept inputs replaced by the min(L, 3) on the
 *     device: it is lower by (L - min(L, 3))·N·C·4 bytes (d12, B=4, T=256: 28,311,552).
 * Host-pool bytes are not part of the device peak (the engine's device_peak_bytes excludes them).
 * -1.0 on the errors of sz_gpt2_activation_bytes. */
double sz_gpt2_checkpoint_host_bytes(const sz_gpt2_config *cfg, int B, int T);
double sz_gpt2_checkpoint_device_bytes(const sz_gpt2_config *cfg, int B, int T);
double sz_gpt2_activation_bytes_offload(const sz_gpt2_config *cfg, int B, int T);

/* The device-pool activation bytes of one ZeRO-R setting: full (checkpoint = 0), block
 * checkpointing (checkpoint = 1) or offloaded checkpoints (checkpoint = 1, offload = 1).
 * offload without checkpoint is refused with -1.0, as sz_model_set_zero refuses it: there are no
 * checkpoints to offload. */
double sz_gpt2_activation_bytes_device(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload);

/* Elements of GPT-2's largest unit as the engine builds the model (apps/gpt2: the embedding,
 * wte + wpe = (Vp + maxT)·C; each block, 12C² + 13C; the head's final layernorm, 2C): the cap
 * of sz_zero_comm_buffer_bytes. -1 when cfg is NULL or invalid. */
int64_t sz_gpt2_largest_unit_numel(const sz_gpt2_config *cfg);
/* Parameters of each of GPT-2's units as apps/gpt2 declares them: embed (wte, wpe), block0 ..
 * block(L-1), head (lnf; it uses the embedding's wte), into numel[0 .. L+1]. Returns L + 2, or -1
 * for an invalid cfg. */
int sz_gpt2_unit_numels(const sz_gpt2_config *cfg, int64_t *numel);
/* Bytes of the tensors GPT-2's model registers beside its parameters for a B x T micro-batch (the
 * engine's "activations" category: llm.c's activations, their gradients, tokens), under
 * checkpointing and offloaded checkpoints; *host_bytes (may be NULL) gets the host pool's. -1 for
 * invalid arguments. */
int64_t sz_gpt2_engine_activation_bytes(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload,
                                        int64_t *host_bytes);
/* The same under bf16 mixed precision: native = 1 (sz_resolved_precision.native), the matmuls' bf16 inputs
 * and their gradients at 2 bytes each (apps/gpt2/gpt2.c says which); rounded = 1
 * (sz_resolved_precision.grads_rounded), the tied wte's rows (sz_tied_rows_numel floats) beside them;
 * native = rounded = 0 is the function above. */
int64_t sz_gpt2_engine_activation_bytes_bf16(const sz_gpt2_config *cfg, int B, int T, int checkpoint, int offload,
                                             int native, int rounded, int64_t *host_bytes);

#ifdef __cplusplus
}
#endif
#endif /* STARZERO_GPT2_H */
