/* kernels/cuda/sz_cuda_kernels.h — the CUDA twins of the plain-C kernels of
 * kernels/sz_kernels.h: plain C entry points that enqueue work on a given CUDA stream and
 * take device pointers only. No StarPU here (the codelets pass their worker's stream and cuBLAS
 * handle); callable from C.
 *
 * Semantics are those of the CPU kernel of the same name (layouts, accumulation: backward
 * kernels ADD into their gradients, except softmax_xent_bwd and mse_bwd, which write). Values
 * agree with the CPU to rounding, not bitwise (other summation orders, other exp/log/sqrt), except
 * where said: conversions, zero, scale, clip, and the encoder's and embedding's sums (they keep the
 * CPU's row order). The parameter gradients' row sums (the matmul's bias, the norms' weight and
 * bias) run in a fixed order of their own (chunks of 128 rows, then the chunks in order:
 * kernels/cuda/sz_cuda_colsum.cuh), so they agree with the CPU's to rounding.
 * Every kernel gives the same bits run to run on one GPU model: reductions are fixed trees or
 * fixed sequential orders decided by the shape only, never atomics whose order varies (cuBLAS is
 * deterministic with its default, atomics-free mode on one architecture and SM count).
 *
 * Return value: 0 when the work was enqueued, else a nonzero cudaError_t (launch or allocation
 * failure) or, for the cuBLAS calls, 1000 + the cublasStatus_t. Kernels that need scratch memory
 * take it stream-ordered (cudaMallocAsync / cudaFreeAsync on the same stream).
 *
 * Status: written and compiled without a GPU; tests/test_cuda_kernels.c checks each against its
 * CPU twin and has not yet run on a GPU (see README, "Running on GPUs"). */
#ifndef SZ_CUDA_KERNELS_H
#define SZ_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, as sz_k_dtype: 0 fp32, 1 bf16 (uint16_t storage, round to nearest even), 2 fp16
 * (IEEE binary16, uint16_t storage, round to nearest even, overflow to inf: storage only, taken by
 * the conversions, the optimizers, the sum of squares and reduce-scatter's sum — fp16 mixed
 * precision's kernels; the compute kernels take fp32 or bf16). */
#define SZ_CUDA_F32 0
#define SZ_CUDA_BF16 1
#define SZ_CUDA_F16 2

/* Number of CUDA devices, 0 when none or the driver is missing (never fails). */
int sz_cuda_device_count(void);
/* Device dev's free and total memory now (cudaMemGetInfo; the calling thread's current device is
 * left as it was). 0, or a cudaError_t. */
int sz_cuda_mem_info(int dev, int64_t *free_bytes, int64_t *total_bytes);
/* Device dev's PCI bus id ("0000:3b:00.0": the same device whatever CUDA_VISIBLE_DEVICES each
 * process has; cudaDeviceGetPCIBusId, no context needed). 0, or a cudaError_t. */
int sz_cuda_pci_bus_id(int dev, char *buf, int len);
/* The GPU arena's one region (tasks/model.c): cudaMalloc + cudaMemset on device dev, synchronous,
 * and its cudaFree; the calling thread's current device is left as it was. 0 or a cudaError_t. */
int sz_cuda_arena_alloc(int dev, size_t bytes, void **out);
int sz_cuda_arena_free(int dev, void *p);
/* Page-locked host memory (tasks/model.c's pinned homes): cudaHostAlloc, portable, zeroed, with
 * device dev made current (the rank's GPU); a failure is returned (StarPU's pinned malloc aborts).
 * And its cudaFreeHost. 0 or a cudaError_t. */
int sz_cuda_host_alloc(int dev, size_t bytes, void **out);
int sz_cuda_host_free(void *p);
/* Device dev's name, SM count, peak clock (kHz, cudaDevAttrClockRate), compute capability, dense
 * bf16 tensor-core FLOPs per clock per SM (the table in util.cu; 0: none or unknown) and their
 * product, the bf16 peak in TFLOP/s (0 when the table has no entry). 0, or a cudaError_t. */
int sz_cuda_device_peak(int dev, char *name, size_t name_len, int *sms, int *clock_khz, int *major, int *minor,
                        int *flops_per_clock_sm, double *bf16_tflops);

/* ---- encoder (GPT-2): out[B,T,C] = wte[tok[b,t]] + wpe[t]; backward adds into dwte [Vp,C] and
 *      dwpe [maxT,C] in (b,t) order per element, as the CPU (bitwise the same sums) ---- */
int sz_cuda_encoder_fwd(cudaStream_t s, float *out, const int *tok, const float *wte, const float *wpe,
                        int B, int T, int C);
int sz_cuda_encoder_bwd(cudaStream_t s, float *dwte, float *dwpe, const float *dout, const int *tok,
                        int B, int T, int C);

/* ---- token embedding without positions, as sz_k_embedding_fwd/bwd: out[N,C] = wte[tok[n]]; dwte
 *      [V,C] += dout at the token rows, rows in order n = 0..N-1 per element (bitwise the CPU's).
 *      Rows whose token is outside [0, V) are left alone (forward: out row untouched): the caller
 *      checks the tokens (the codelets do, on the host copy) ---- */
int sz_cuda_embedding_fwd(cudaStream_t s, float *out, const int *tok, const float *wte, int N, int C, int V);
int sz_cuda_embedding_bwd(cudaStream_t s, float *dwte, const float *dout, const int *tok, int N, int C, int V);

/* ---- layernorm, eps 1e-5, as sz_k_layernorm_fwd/bwd (mean, rstd [N] saved) ---- */
int sz_cuda_layernorm_fwd(cudaStream_t s, float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C);
int sz_cuda_layernorm_bwd(cudaStream_t s, float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean, const float *rstd,
                          int N, int C);

/* ---- RMSNorm, as sz_k_rmsnorm_fwd/bwd: rstd[n] = 1/sqrt(mean_i(x[n,i]^2) + eps),
 *      out = (x * rstd) * w, rstd [N] saved. Backward (adds; dinp or dweight may be NULL):
 *      dinp += rstd w dout - (rstd^3 / C) x sum_i dout w x; dweight += (x rstd) dout ---- */
int sz_cuda_rmsnorm_fwd(cudaStream_t s, float *out, float *rstd, const float *inp, const float *weight,
                        int N, int C, float eps);
int sz_cuda_rmsnorm_bwd(cudaStream_t s, float *dinp, float *dweight, const float *dout, const float *inp,
                        const float *weight, const float *rstd, int N, int C);

/* ---- matmul through cuBLAS (fp32: CUBLAS_COMPUTE_32F, no TF32): out[N,OC] = inp[N,C].w[OC,C]^T
 *      (+ bias[OC]); backward dinp += dout.w, dweight += dout^T.inp, dbias += column sums of dout
 *      (in the fixed order above); any of dinp, dweight, dbias may be NULL. The handle's stream
 *      is set to s. ---- */
int sz_cuda_matmul_fwd(cublasHandle_t h, cudaStream_t s, float *out, const float *inp, const float *weight,
                       const float *bias, int N, int C, int OC);
int sz_cuda_matmul_bwd(cublasHandle_t h, cudaStream_t s, float *dinp, float *dweight, float *dbias,
                       const float *dout, const float *inp, const float *weight, int N, int C, int OC);
/* bf16 inputs, fp32 accumulation (tensor cores: CUBLAS_COMPUTE_32F with bf16 operands); out_dt /
 * dinp_dt / dparam_dt as sz_k_matmul_*_bf16: a bf16 destination gets round(f32(dst) + f32 result). */
int sz_cuda_matmul_fwd_bf16(cublasHandle_t h, cudaStream_t s, void *out, int out_dt, const uint16_t *inp,
                            const uint16_t *weight, const uint16_t *bias, int N, int C, int OC);
int sz_cuda_matmul_bwd_bf16(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight,
                            void *dbias, int dparam_dt, const uint16_t *dout, const uint16_t *inp,
                            const uint16_t *weight, int N, int C, int OC);

/* Any operand types, as the codelets call them (codelets/matmul.c): inputs (inp, weight, bias;
 * dout, inp, weight) all of type in_dt; with fp32 inputs every destination fp32, with bf16 inputs
 * out / dinp / (dweight, dbias) each fp32 or bf16 (a bf16 one accumulated as round(f32(dst) +
 * result)). set & SZ_CUDA_SET_A: dinp WRITTEN (a folded sz_op_zero; not read: the GEMM's beta 0);
 * set & SZ_CUDA_SET_DW: dweight WRITTEN (beta 0), set & SZ_CUDA_SET_DB: dbias WRITTEN (its column
 * sums start at 0: the bits of the sum onto a zeroed dbias) — the step's first writer of a
 * parameter's gradient (tasks/step.c). Other type combinations: cudaErrorInvalidValue, nothing
 * enqueued. */
#define SZ_CUDA_SET_A 1  /* as SZ_K_SET_A: the first gradient (dinp, or the residual's da) written */
#define SZ_CUDA_SET_B 2  /* as SZ_K_SET_B: the residual's db written */
#define SZ_CUDA_SET_DW 4 /* as SZ_K_SET_DW: the matmul's or a norm's dweight written */
#define SZ_CUDA_SET_DB 8 /* as SZ_K_SET_DB: its dbias written */
int sz_cuda_matmul_fwd_any(cublasHandle_t h, cudaStream_t s, void *out, int out_dt, const void *inp,
                           const void *weight, const void *bias, int in_dt, int N, int C, int OC);
int sz_cuda_matmul_bwd_any(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight, void *dbias,
                           int dparam_dt, const void *dout, const void *inp, const void *weight, int in_dt, int N,
                           int C, int OC, int set);
/* The linear layer fused with GELU, as sz_k_matmul_gelu_fwd / sz_k_gelu_matmul_bwd (inputs as
 * above): forward out[N,OC] (fp32, written) = inp . w^T (+ bias), then gout = gelu(out) (gout_dt,
 * rounded once); backward dinp[N,C] WRITTEN = gelu'(pre) * (dout . w), the product first rounded to
 * dinp's type (the CPU's scratch of dinp's type), then 0 + gelu'(pre) * it rounded again; dweight,
 * dbias accumulate as sz_cuda_matmul_bwd_any. A GEMM then an elementwise epilogue. */
int sz_cuda_matmul_gelu_fwd(cublasHandle_t h, cudaStream_t s, float *out, void *gout, int gout_dt, const void *inp,
                            const void *weight, const void *bias, int in_dt, int N, int C, int OC);
int sz_cuda_gelu_matmul_bwd(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight, void *dbias,
                            int dparam_dt, const void *dout, const void *inp, const void *weight, const float *pre,
                            int in_dt, int N, int C, int OC);
/* The same with dweight (set & SZ_CUDA_SET_DW) and dbias (SZ_CUDA_SET_DB) written, as
 * sz_cuda_matmul_bwd_any's; dinp is always written. */
int sz_cuda_gelu_matmul_bwd_set(cublasHandle_t h, cudaStream_t s, void *dinp, int dinp_dt, void *dweight,
                                void *dbias, int dparam_dt, const void *dout, const void *inp, const void *weight,
                                const float *pre, int in_dt, int N, int C, int OC, int set);

/* ---- the native bf16 path's norms and lookups, as bf16_act.c's _mx kernels: fp32 math, a bf16
 *      operand widened exactly as it is loaded, a bf16 output rounded once from the fp32 value, a
 *      bf16 destination that accumulates rounded as round(f32(dst) + contribution). *_dt: SZ_CUDA_F32
 *      or SZ_CUDA_BF16; p_dt the parameters' (weight and bias). The statistics (mean, rstd), the
 *      inputs inp / a / b / res, the residual stream's gradients da, dres and the parameter gradients
 *      are fp32. The parameter gradients' row sums are in the fixed order above, onto their
 *      current value. With every type fp32 these are the fp32 kernels above (the same bits). ---- */
int sz_cuda_layernorm_fwd_mx(cudaStream_t s, void *out, int out_dt, float *mean, float *rstd, const float *inp,
                             const void *weight, const void *bias, int p_dt, int N, int C);
/* dinp += (set & SZ_CUDA_SET_A: =) the input gradient; dweight, dbias (NULL: none) accumulate
 * (set & SZ_CUDA_SET_DW / _DB: written, their sums from 0). */
int sz_cuda_layernorm_bwd_mx(cudaStream_t s, float *dinp, float *dweight, float *dbias, const void *dout, int dout_dt,
                             const float *inp, const void *weight, int p_dt, const float *mean, const float *rstd,
                             int N, int C, int set);
/* res = a + b (res may alias a or b), then layernorm(res) as above, row by row. */
int sz_cuda_residual_layernorm_fwd_mx(cudaStream_t s, float *res, void *out, int out_dt, float *mean, float *rstd,
                                      const float *a, const float *b, const void *weight, const void *bias, int p_dt,
                                      int N, int C);
/* dres += the layernorm's input gradient, then da += dres, db += dres (db of db_dt; set bits
 * SZ_CUDA_SET_A / _B: da = dres, db = dres instead); dweight, dbias accumulate (SZ_CUDA_SET_DW /
 * _DB: written). */
int sz_cuda_layernorm_residual_bwd_mx(cudaStream_t s, float *da, void *db, int db_dt, float *dres, float *dweight,
                                      float *dbias, const void *dout, int dout_dt, const float *res,
                                      const void *weight, int p_dt, const float *mean, const float *rstd, int N,
                                      int C, int set);
int sz_cuda_rmsnorm_fwd_mx(cudaStream_t s, void *out, int out_dt, float *rstd, const float *inp, const void *weight,
                           int p_dt, int N, int C, float eps);
/* dinp (may be NULL) += (set & SZ_CUDA_SET_A: =) the input gradient; dweight (may be NULL) +=
 * (set & SZ_CUDA_SET_DW: =). The residual fusion's da, db as the layernorm's; dweight likewise. */
int sz_cuda_rmsnorm_bwd_mx(cudaStream_t s, float *dinp, float *dweight, const void *dout, int dout_dt,
                           const float *inp, const void *weight, int p_dt, const float *rstd, int N, int C, int set);
int sz_cuda_residual_rmsnorm_fwd_mx(cudaStream_t s, float *res, void *out, int out_dt, float *rstd, const float *a,
                                    const float *b, const void *weight, int p_dt, int N, int C, float eps);
int sz_cuda_rmsnorm_residual_bwd_mx(cudaStream_t s, float *da, void *db, int db_dt, float *dres, float *dweight,
                                    const void *dout, int dout_dt, const float *res, const void *weight, int p_dt,
                                    const float *rstd, int N, int C, int set);
/* out (fp32) = wte[tok] + wpe[t] from tables of type p_dt (bitwise the CPU's); the embedding's
 * lookup from a p_dt table (rows of tokens outside [0, V) untouched, as sz_cuda_embedding_fwd). */
int sz_cuda_encoder_fwd_mx(cudaStream_t s, float *out, const int *tok, const void *wte, const void *wpe, int p_dt,
                           int B, int T, int C);
int sz_cuda_embedding_fwd_mx(cudaStream_t s, float *out, const int *tok, const void *wte, int p_dt, int N, int C,
                             int V);

/* ---- causal self-attention, as sz_k_attention_fwd/bwd (inp [B,T,3C] = q|k|v, out [B,T,C], stats
 *      [B,NH,T,2] = per query row the softmax max and 1/sum; the backward recomputes the
 *      probabilities from them and adds into dinp). Head size hs = C/NH at most 256; T at most
 *      4096 (a row's scores stay in shared memory). The backward takes B*NH*T floats of scratch. ---- */
#define SZ_CUDA_ATT_MAX_HS 256
#define SZ_CUDA_ATT_MAX_T 4096
int sz_cuda_attention_fwd(cudaStream_t s, float *out, float *stats, const float *inp, int B, int T, int C, int NH);
int sz_cuda_attention_bwd(cudaStream_t s, float *dinp, const float *dout, const float *inp, const float *stats,
                          int B, int T, int C, int NH);

/* ---- rotary position embedding, as sz_k_rope_fwd/bwd, on a fused [B,T,3C] q|k|v: in q and k each
 *      head's (hs even) pair (2i, 2i+1) at position t rotated by t * theta^(-2i/hs) (angle in
 *      double, cos and sin rounded to float), v copied; out WRITTEN (not in place). The backward
 *      applies the transpose and ACCUMULATES into dinp (v's gradient passed through). ---- */
int sz_cuda_rope_fwd(cudaStream_t s, float *out, const float *inp, int B, int T, int C, int NH, float theta);
int sz_cuda_rope_bwd(cudaStream_t s, float *dinp, const float *dout, int B, int T, int C, int NH, float theta);

/* ---- elementwise, [n] ---- */
int sz_cuda_gelu_fwd(cudaStream_t s, float *out, const float *inp, size_t n);
int sz_cuda_gelu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n);
/* d = 0 + gelu'(inp) * d in place: gelu_bwd into a zeroed dinp from a dout held in d (the fused
 * gelu_matmul_bwd's second half, after the product went into the zeroed d). */
int sz_cuda_gelu_bwd_inplace(cudaStream_t s, float *d, const float *inp, size_t n);
/* SiLU, as sz_k_silu_*: out = x / (1 + e^-x); dinp += dout * (sg * (1 + x (1 - sg))). */
int sz_cuda_silu_fwd(cudaStream_t s, float *out, const float *inp, size_t n);
int sz_cuda_silu_bwd(cudaStream_t s, float *dinp, const float *inp, const float *dout, size_t n);
/* out = a * b; da += dout * b, db += dout * a (da or db may be NULL). */
int sz_cuda_mul_fwd(cudaStream_t s, float *out, const float *a, const float *b, size_t n);
int sz_cuda_mul_bwd(cudaStream_t s, float *da, float *db, const float *dout, const float *a, const float *b,
                    size_t n);
/* SwiGLU, as sz_k_swiglu_*: out = g / (1 + e^-g) * u (the device's expf, libm's on the CPU);
 * dgate += dout * u * (s * (1 + g (1 - s))), dup += dout * (g * s), s = 1 / (1 + e^-g). */
int sz_cuda_swiglu_fwd(cudaStream_t s, float *out, const float *gate, const float *up, size_t n);
int sz_cuda_swiglu_bwd(cudaStream_t s, float *dgate, float *dup, const float *dout, const float *gate,
                       const float *up, size_t n);
/* out = a + b (out may alias a or b); da += dout, db += dout. */
int sz_cuda_residual_fwd(cudaStream_t s, float *out, const float *a, const float *b, size_t n);
int sz_cuda_residual_bwd(cudaStream_t s, float *da, float *db, const float *dout, size_t n);

/* ---- fused softmax + cross-entropy, as sz_k_softmax_xent_fwd/bwd; the backward WRITES dlogits,
 *      with dloss[n] per row, or dloss_all for every row when dloss is NULL ---- */
int sz_cuda_softmax_xent_fwd(cudaStream_t s, float *probs, float *losses, const float *logits,
                             const int *targets, int N, int V, int Vp);
int sz_cuda_softmax_xent_bwd(cudaStream_t s, float *dlogits, const float *probs, const int *targets,
                             const float *dloss, float dloss_all, int N, int V, int Vp);

/* ---- mean squared error, as sz_k_mse_*: losses[n] = mean_c (pred - target)^2 summed in double in
 *      column order (bitwise the CPU's); the backward WRITES dpred = (2 scale / C) (pred - target) ---- */
int sz_cuda_mse_fwd(cudaStream_t s, float *losses, const float *pred, const float *target, int N, int C);
int sz_cuda_mse_bwd(cudaStream_t s, float *dpred, const float *pred, const float *target, float scale, int N, int C);

/* ---- AdamW, as sz_k_adamw_step / sz_k_adamw_step_mixed (bias corrections 1 - beta^t computed on
 *      the host with powf, as the CPU). scale is a DEVICE pointer to the clip factor (one float,
 *      written by clip_scale); a NaN factor is a skipped step (fp16's overflow): nothing is written
 *      and the norm is 0. With sumsq not NULL the gradient's squared norm (unscaled, summed in
 *      double as sz_cuda_sumsq) is written there as a float (acc = 0) or added to it (acc = 1).
 *      The mixed one: grad and param16 of type dt (SZ_CUDA_BF16 or SZ_CUDA_F16; another is
 *      cudaErrorInvalidValue), param16 the updated master rounded to dt. ---- */
int sz_cuda_adamw(cudaStream_t s, float *param, const float *grad, float *m, float *v, size_t n, int t,
                  float lr, float beta1, float beta2, float eps, float wd, const float *scale,
                  float *sumsq, int acc);
int sz_cuda_adamw_mixed(cudaStream_t s, float *master, uint16_t *param16, const uint16_t *grad, int dt,
                        float *m, float *v, size_t n, int t, float lr, float beta1, float beta2, float eps,
                        float wd, const float *scale, float *sumsq, int acc);

/* ---- SGD with momentum (PyTorch's, dampening 0): g = scale*grad + wd*p; buf = momentum*buf + g;
 *      p -= lr * buf (with nesterov: p -= lr * (g + momentum*buf)). buf starts at zero, so the first
 *      step's buf is g. scale is a device pointer (NULL: 1). ---- */
int sz_cuda_sgd(cudaStream_t s, float *param, const float *grad, float *buf, size_t n, float lr,
                float momentum, float wd, int nesterov, const float *scale);
/* The same on grad of dtype gdt (SZ_CUDA_F32 / _BF16 / _F16), buf NULL without momentum (no
 * state), and under mixed precision param the fp32 master with param16 (not NULL) its copy rounded
 * to gdt. A NaN scale is a skipped step: nothing is written. With sumsq not NULL the gradient's
 * squared norm as sz_cuda_sumsq's (0 on a skipped step, as the CPU's fused norm) is written there
 * (acc 0) or added to it (acc 1). */
int sz_cuda_sgd_any(cudaStream_t s, float *param, uint16_t *param16, const void *grad, int gdt, float *buf,
                    size_t n, float lr, float momentum, float wd, int nesterov, const float *scale, float *sumsq,
                    int acc);

/* ---- conversions, as tasks/convert.c (sz_k_convert): dst = src (acc 0), dst += src (1), dst =
 *      0 + src (2), each fp32, bf16 or fp16; a 16-bit destination is rounded once
 *      (round(f32(dst) + f32(src)) when acc 1). Bitwise as the CPU, NaN payloads aside (a GPU's
 *      fp32 add gives the canonical NaN where x86 keeps an operand's). ---- */
int sz_cuda_convert(cudaStream_t s, void *dst, int dst_dt, const void *src, int src_dt, size_t n, int acc);

/* ---- squared L2 norm of n fp32, bf16 or fp16 values, in double: chunks of 65536 (SZ_SUMSQ_CHUNK) each
 *      summed by a fixed tree, the chunk sums added in chunk order; *out (device, one float) is
 *      written (acc 0) or added to (acc 1). Deterministic; equal to the CPU to rounding. ---- */
int sz_cuda_sumsq(cudaStream_t s, float *out, const void *x, int dt, int64_t n, int acc);

/* ---- clip factor, as tasks/clip_scale.c given every rank's sums already on the device:
 *      sums[n] added in order in double; norm = sqrt(sum) (/ loss_scale when loss_scale > 0: fp16);
 *      out[0] = clip/norm when clip > 0 and norm > clip, else 1 (then / loss_scale), or NaN when a
 *      loss scale is given and the norm is not finite (an overflow: the optimizers skip the step);
 *      out[1] = norm. Bitwise as the CPU. ---- */
int sz_cuda_clip_scale(cudaStream_t s, float *out, const float *sums, int n, float clip, float loss_scale);

/* ---- reduce-scatter's sum, as tasks/reduce_scatter.c's sz_reduce_pieces: nd pieces of len
 *      elements laid out one after the other in pieces (piece r from rank r), added in rank order
 *      into shard[o, o + len) (onto it when acc); bf16 and fp16 summed in fp32 and rounded once
 *      (an fp16 overflow becomes inf). Bitwise the CPU's. ---- */
int sz_cuda_reduce_pieces(cudaStream_t s, void *shard, int dt, const void *pieces, int nd, int64_t o, int64_t len,
                          int acc);

/* ---- x *= alpha; x = 0 (bytes) ---- */
int sz_cuda_scale(cudaStream_t s, float *x, size_t n, float alpha);
int sz_cuda_zero(cudaStream_t s, void *x, size_t bytes);

/* ==== the native bf16 path, part 2 (attention, softmax-xent, GELU, SiLU, mul, residual, RoPE): the
 * CUDA twins of the CPU's _mx kernels (sz_kernels.h, kernels/bf16_act.c, kernels/attention.c).
 * fp32 math inside; *_dt name the types of the void* operands (SZ_CUDA_F32 / SZ_CUDA_BF16); a bf16
 * input is widened exactly, a bf16 output rounded once to nearest even, a bf16 destination that
 * accumulates becomes round(f32(dst) + fp32 contribution). set: the SZ_K_SET_* bits of sz_kernels.h
 * (1: the first gradient argument, 2: residual's db), a folded sz_op_zero: that gradient is
 * written from its contribution without being read. All-fp32 calls without set run the fp32
 * kernels above (their bits). The operands the CPU keeps fp32 (attention's inp and stats, the
 * elementwise formulas' x, a, b; the losses) are fp32 here too. Written and compiled without a
 * GPU: not yet run on one. ==== */
int sz_cuda_attention_fwd_mx(cudaStream_t s, void *out, int out_dt, float *stats, const float *inp, int B, int T,
                             int C, int NH);
int sz_cuda_attention_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const void *dout, int dout_dt,
                             const float *inp, const float *stats, int B, int T, int C, int NH, int set);
/* The same with the kernel chosen by impl: SZ_CUDA_ATT_AUTO (what the entry points above use: the
 * tiled FlashAttention-2 kernels where they cover the shape (head size 32, 64 or 128 and the tiles
 * within the device's opt-in shared memory), else the row-per-block ones;
 * sz_cuda_attention_set_rowwise(1) — the context's SZ_CUDA_ATTENTION=rowwise — forces the
 * row-per-block ones), SZ_CUDA_ATT_ROWWISE, or SZ_CUDA_ATT_TILED
 * (cudaErrorNotSupported where the tiled kernels do not cover the shape). The tiled kernels with a
 * bf16 out (forward) or bf16 dinp (backward) multiply on bf16 tensor cores (q, k, v, p and dS
 * rounded to bf16, fp32 accumulation); with fp32 ones in fp32 FMA. */
#define SZ_CUDA_ATT_AUTO 0
#define SZ_CUDA_ATT_ROWWISE 1
#define SZ_CUDA_ATT_TILED 2
int sz_cuda_attention_fwd_mx_impl(cudaStream_t s, void *out, int out_dt, float *stats, const float *inp, int B,
                                  int T, int C, int NH, int impl);
int sz_cuda_attention_bwd_mx_impl(cudaStream_t s, void *dinp, int dinp_dt, const void *dout, int dout_dt,
                                  const float *inp, const float *stats, int B, int T, int C, int NH, int set,
                                  int impl);
void sz_cuda_attention_set_rowwise(int on);
/* 1 when the tiled kernels cover this shape on the current device (bf16: the tensor-core ones). */
int sz_cuda_attention_tiled_covers(int T, int C, int NH, int bf16);
/* dlogits of type dt WRITTEN, as sz_cuda_softmax_xent_bwd. */
int sz_cuda_softmax_xent_bwd_mx(cudaStream_t s, void *dlogits, int dt, const float *probs, const int *targets,
                                const float *dloss, float dloss_all, int N, int V, int Vp);
/* softmax + cross-entropy and its backward in one kernel, in place on bf16 logits [N,Vp]: losses
 * [N] (fp32) written, the logits overwritten with (softmax - onehot(target)) * g (columns >= V: 0),
 * as sz_k_softmax_xent_fused_mx. Targets must be in [0, V) (the codelet checks them first). */
int sz_cuda_softmax_xent_fused_bf16(cudaStream_t s, uint16_t *logits, float *losses, const int *targets, float g,
                                    int N, int V, int Vp);
int sz_cuda_gelu_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *inp, size_t n);
int sz_cuda_gelu_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const float *inp, const void *dout, int dout_dt,
                        size_t n, int set);
int sz_cuda_silu_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *inp, size_t n);
int sz_cuda_silu_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const float *inp, const void *dout, int dout_dt,
                        size_t n);
int sz_cuda_mul_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *a, const float *b, size_t n);
/* da or db may be NULL. */
int sz_cuda_mul_bwd_mx(cudaStream_t s, void *da, int da_dt, void *db, int db_dt, const void *dout, int dout_dt,
                       const float *a, const float *b, size_t n);
int sz_cuda_residual_bwd_mx(cudaStream_t s, void *da, int da_dt, void *db, int db_dt, const float *dout, size_t n,
                            int set);
/* SwiGLU with out (forward) / dgate, dup, dout (backward) each fp32 or bf16; gate, up fp32. */
int sz_cuda_swiglu_fwd_mx(cudaStream_t s, void *out, int out_dt, const float *gate, const float *up, size_t n);
int sz_cuda_swiglu_bwd_mx(cudaStream_t s, void *dgate, int dgate_dt, void *dup, int dup_dt, const void *dout,
                          int dout_dt, const float *gate, const float *up, size_t n);
int sz_cuda_rope_bwd_mx(cudaStream_t s, void *dinp, int dinp_dt, const void *dout, int dout_dt, int B, int T, int C,
                        int NH, float theta, int set);

#ifdef __cplusplus
}
#endif
#endif /* SZ_CUDA_KERNELS_H */
