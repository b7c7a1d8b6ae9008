/* sz_kernels.h — the plain-C compute kernels of StarZeRO (GPT-2, llm.c semantics).
 * No StarPU here: codelets wrap these. Row-major everywhere; N = B*T rows.
 * Backward kernels ACCUMULATE (+=) into their gradients, like llm.c, except
 * sz_k_softmax_xent_bwd, which writes dlogits (it is the first gradient).
 * Every kernel gives bitwise the same result whatever the OpenMP thread count
 * (not across CPUs or builds: oneDNN picks kernels per ISA). Buffers must not
 * overlap unless stated (residual's out may alias a or b). */
#ifndef SZ_KERNELS_H
#define SZ_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of the bf16 matmul outputs and of mixed-precision buffers: fp32, bf16, and IEEE
 * binary16 (fp16; storage only: the kernels compute in fp32 on the widened values). */
typedef enum { SZ_K_F32 = 0, SZ_K_BF16 = 1, SZ_K_F16 = 2 } sz_k_dtype;

/* One fp16 value (IEEE binary16, bits in a uint16_t) as fp32: exact (subnormals included); ±inf
 * stays ±inf; a NaN becomes a quiet NaN with the sign and the payload in the top mantissa bits, as
 * F16C's vcvtph2ps gives it. Portable bit math: every case computed and the one that applies
 * picked with integer masks, no branch, so that loops over it vectorize; a subnormal, m 2^-24, is
 * the exact integer m scaled by 2^-24 in float (exact whatever the rounding mode, FTZ, DAZ). */
static inline float sz_k_f16_to_f32_1(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t mz = 0u - (uint32_t)(e == 0u), mt = 0u - (uint32_t)(e == 31u); /* zero/subnormal; inf/NaN */
    uint32_t nrm = ((e + 112u) << 23) | (m << 13);                          /* rebias the exponent */
    uint32_t top = 0x7F800000u | (m << 13) | ((0u - (uint32_t)(m != 0u)) & 0x00400000u);
    float sub = (float)(int32_t)m * 5.9604644775390625e-8f;
    uint32_t sb, u;
    memcpy(&sb, &sub, 4);
    u = s | (nrm & ~mz & ~mt) | (top & mt) | (sb & mz);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 -> fp16, round to nearest even, as IEEE (and F16C's vcvtps2ph with round-to-nearest): a
 * magnitude of 65520 or more becomes ±inf (65504 is the largest finite fp16); below 2^-14 the
 * subnormals, rounded to nearest even (2^-25 and below: ±0); a NaN becomes a quiet NaN keeping the
 * sign and the top 10 payload bits (vcvtps2ph's). Integer bit math only (no dependence on the
 * rounding mode), each case computed and the one that applies picked with masks, no branch, so
 * that loops over it vectorize. */
static inline uint16_t sz_k_f32_to_f16_1(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t a = u & 0x7FFFFFFFu, s = (u >> 16) & 0x8000u;
    /* 2^-14 <= a < 65536: rebias the exponent and drop 13 bits, adding half an fp16 ulp less one
     * plus the lowest kept bit (round to nearest even); a carry steps the exponent, up to inf */
    uint32_t nrm = (a - (112u << 23) + 0xFFFu + ((a >> 13) & 1u)) >> 13;
    /* a < 2^-14, exponent e <= 112: the significand with its leading 1 shifted right by k = 126 - e
     * (14 at e = 112; k clamped to 31, which gives 0 as any larger shift would), rounded the same way */
    uint32_t e = a >> 23, k = 126u - (e > 112u ? 112u : e < 95u ? 95u : e);
    uint32_t sig = (a & 0x007FFFFFu) | 0x00800000u;
    uint32_t sub = (sig + (1u << (k - 1u)) - 1u + ((sig >> k) & 1u)) >> k;
    /* a >= 65536: inf, or a NaN quieted */
    uint32_t mnan = 0u - (uint32_t)(a > 0x7F800000u), mbig = 0u - (uint32_t)(a >= 0x47800000u);
    uint32_t msub = 0u - (uint32_t)(a < 0x38800000u);
    uint32_t big = 0x7C00u | (mnan & (0x200u | ((a >> 13) & 0x3FFu)));
    return (uint16_t)(s | (big & mbig) | (sub & msub) | (nrm & ~mbig & ~msub));
}

/* ---- encoder: out[B,T,C] = wte[tok[b,t], :] + wpe[t, :]  (tok int32 [B,T]) ---- */
void sz_k_encoder_fwd(float *out, const int *tok, const float *wte, const float *wpe,
                      int B, int T, int C);
/* dwte[Vp,C] += dout at the token rows (tok < Vp); dwpe[maxT,C] += dout at rows t < T. */
void sz_k_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *tok,
                      int B, int T, int C);
/* A tied wte's gradient rounded by its writers (mixed precision, issue 16): slot[v] (v < V) becomes
 * the rank of token v among the n tokens' distinct values in ascending order, -1 for a value absent;
 * returns how many are distinct (tokens must lie in [0, V)). */
int64_t sz_k_token_slots(int32_t *slot, int64_t V, const int *tok, int64_t n);
/* sz_k_encoder_bwd's sums, then the rounding: rows[slot[v]] (fp32, the output layer's dweight rows
 * of the tokens: sz_k_matmul_dweight_round_rows) += dout at the token rows, each then rounded into
 * dwte[v] (bf16) with wte_mode; dwpe[t] (bf16) gets wpe's sums from zero (in pe32, T x C floats,
 * overwritten) rounded with wpe_mode (SZ_K_CONVERT_*). The bits of sz_k_encoder_bwd into the fp32
 * gradients followed by sz_k_convert. */
void sz_k_encoder_bwd_round(uint16_t *dwte, uint16_t *dwpe, float *rows, float *pe32, const int32_t *slot, int64_t V,
                            const float *dout, const int *tok, int B, int T, int C, int wte_mode, int wpe_mode);

/* ---- layernorm over the last dim, eps 1e-5: inp,out [N,C]; weight,bias [C] (bias may be
 *      NULL: none); saves mean, rstd [N] for the backward ---- */
void sz_k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int C);
/* dinp [N,C], dweight, dbias [C] accumulate (dbias may be NULL). */
void sz_k_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

/* ---- matmul (oneDNN): out[N,OC] = inp[N,C] . weight[OC,C]^T + bias[OC];
 *      bias may be NULL. Returns 0 on success (oneDNN), 1 if the plain
 *      fallback computed it, < 0 on failure (out of memory). ---- */
int sz_k_matmul_fwd(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC);
/* dinp[N,C] += dout[N,OC] . weight;  dweight[OC,C] += dout^T . inp;
 * dbias[OC] += column sums of dout. Any of dinp, dweight, dbias may be NULL (skipped). */
int sz_k_matmul_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                    const float *inp, const float *weight, int N, int C, int OC);

/* bf16 matmul: inp, weight, bias, dout are bf16 (uint16_t, RNE); products are
 * accumulated in fp32. out_dt / dinp_dt / dparam_dt pick the type of out, dinp and
 * (dweight, dbias) — fp32 or bf16 — so a trainer can keep bf16 params and grads
 * (and fp32 master weights elsewhere). Same shapes and accumulation as fp32:
 * a bf16 destination is accumulated as round_bf16(f32(dst) + f32 result). */
int sz_k_matmul_fwd_bf16(void *out, sz_k_dtype out_dt, const uint16_t *inp,
                         const uint16_t *weight, const uint16_t *bias,
                         int N, int C, int OC);
int sz_k_matmul_bwd_bf16(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias,
                         sz_k_dtype dparam_dt, const uint16_t *dout, const uint16_t *inp,
                         const uint16_t *weight, int N, int C, int OC);

/* fp32 activations with bf16 weights (the emulated bf16 compute path: no fp32 working copy of the
 * weights exists): inp, dout, out, dinp, dweight, dbias fp32; weight [OC,C] and bias [OC] bf16 (bias
 * may be NULL). Each tile widens its slice of the weight (and bias) exactly into per-thread scratch
 * and runs the fp32 tile: the bits of sz_k_matmul_fwd / sz_k_matmul_bwd_set on the weight widened
 * to fp32 (tests/test_matmul_wbf16.c checks it bitwise). Backward as sz_k_matmul_bwd_set: dinp,
 * dweight, dbias accumulated or set (SZ_K_SET_DINP, SZ_K_SET_DW, SZ_K_SET_DB in set; dweight and dbias
 * read no weight: the fp32 kernels). Any of them may be NULL. Return as the fp32 kernels. */
int sz_k_matmul_fwd_wbf16(float *out, const float *inp, const uint16_t *weight, const uint16_t *bias,
                          int N, int C, int OC);
int sz_k_matmul_bwd_wbf16_set(float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const uint16_t *weight, int N, int C, int OC, int set);

/* ---- the linear layer fused with GELU (matmul_gelu.c; GPT-2's MLP), the bits of the separate
 *      kernels. Inputs (inp, bias; dout, inp) fp32 or bf16 (in_dt), weight and bias of w_dt: w_dt ==
 *      in_dt as above, or in_dt F32 with w_dt BF16 (the bits of sz_k_matmul_fwd_wbf16 /
 *      sz_k_matmul_bwd_wbf16_set; dinp, dweight, dbias fp32); any other pair returns -2.
 *      Forward: out[N,OC] = inp . weight^T + bias (fp32, overwritten) and gout[N,OC] = gelu(out)
 *      (gout_dt; overwritten), each output tile's GELU right after its product: sz_k_matmul_fwd(_bf16)
 *      then sz_k_gelu_fwd(_mx). Backward of a linear layer whose input inp was gelu(pre), pre [N,C]
 *      fp32: dinp[N,C] = gelu'(pre) * (dout . weight), OVERWRITTEN (dinp_dt; F32 when in_dt is) —
 *      the bits of zeroing dinp and a scratch t of dinp's type, sz_k_matmul_bwd(t, ...) and
 *      sz_k_gelu_bwd(_mx)(dinp, pre, t), with no t; dweight, dbias (dparam_dt) accumulate as in
 *      sz_k_matmul_bwd(_bf16). Any of dinp, dweight, dbias may be NULL. Return as the matmuls. ---- */
int sz_k_matmul_gelu_fwd(float *out, void *gout, sz_k_dtype gout_dt, const void *inp, const void *weight,
                         const void *bias, sz_k_dtype in_dt, sz_k_dtype w_dt, int N, int C, int OC);
int sz_k_gelu_matmul_bwd(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias, sz_k_dtype dparam_dt,
                         const void *dout, const void *inp, const void *weight, const float *pre, sz_k_dtype in_dt,
                         sz_k_dtype w_dt, int N, int C, int OC);
/* dweight (SZ_K_SET_DW), dbias (SZ_K_SET_DB) set as sz_k_matmul_bwd_set's; dinp is always written. */
int sz_k_gelu_matmul_bwd_set(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias, sz_k_dtype dparam_dt,
                             const void *dout, const void *inp, const void *weight, const float *pre,
                             sz_k_dtype in_dt, sz_k_dtype w_dt, int N, int C, int OC, int set);

/* ---- causal self-attention, NH heads of size hs = C/NH, scale 1/sqrt(hs), llm.c semantics.
 *      inp [B,T,3C] = q | k | v; out [B,T,C]. Memory linear in T: the forward saves only
 *      stats [B,NH,T,2] (per query row: softmax max, 1/sum), the backward recomputes the
 *      probabilities from them (attention.c). Both allocate per-thread scratch of O(hs*T)
 *      floats and return 0, or -1 if that allocation failed (nothing written then). ---- */
int sz_k_attention_fwd(float *out, float *stats, const float *inp, int B, int T, int C, int NH);
/* dinp [B,T,3C] accumulates; out is not needed. */
int sz_k_attention_bwd(float *dinp, const float *dout, const float *inp, const float *stats,
                       int B, int T, int C, int NH);
/* llm.c's kernels that save preatt, att [B,NH,T,T] (entries t2 > t written 0), kept as the
 * reference for the tests (attention_tt.c). The backward needs 2*T floats of scratch per thread
 * (malloc'd); returns 0, or -1 if that allocation failed (nothing written then). */
void sz_k_attention_tt_fwd(float *out, float *preatt, float *att, const float *inp,
                           int B, int T, int C, int NH);
int sz_k_attention_tt_bwd(float *dinp, const float *dout, const float *inp,
                          const float *att, int B, int T, int C, int NH);

/* ---- GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), [n] ---- */
void sz_k_gelu_fwd(float *out, const float *inp, size_t n);
void sz_k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);

/* ---- residual: out = a + b; da += dout, db += dout, all [n] ---- */
void sz_k_residual_fwd(float *out, const float *a, const float *b, size_t n);
void sz_k_residual_bwd(float *da, float *db, const float *dout, size_t n);
/* ---- residual add fused with the layernorm after it, [N,C] rows: WRITES res = a + b (res may
 *      alias a or b) and out, mean, rstd = layernorm(res) as sz_k_layernorm_fwd; backward:
 *      ACCUMULATES the layernorm's input gradient into dres (which holds the residual stream's
 *      other gradient), then da += dres, db += dres, and dweight, dbias += as sz_k_layernorm_bwd.
 *      The same bits as the two kernels one after the other. ---- */
void sz_k_residual_layernorm_fwd(float *res, float *out, float *mean, float *rstd, const float *a,
                                 const float *b, const float *weight, const float *bias, int N, int C);
void sz_k_layernorm_residual_bwd(float *da, float *db, float *dres, float *dweight, float *dbias,
                                 const float *dout, const float *res, const float *weight,
                                 const float *mean, const float *rstd, int N, int C);

/* ---- fused softmax + cross-entropy: logits, probs [N,Vp], real vocab V <= Vp,
 *      targets int32 [N] in [0,V); losses[n] = -log probs[n, target[n]].
 *      Padded columns v >= V get probability 0. ---- */
void sz_k_softmax_xent_fwd(float *probs, float *losses, const float *logits,
                           const int *targets, int N, int V, int Vp);
/* WRITES dlogits[n,v] = (probs[n,v] - (v == target[n])) * dloss[n] for v < V,
 * 0 for V <= v < Vp. dloss [N] (e.g. 1/(B*T) each for the mean loss). */
void sz_k_softmax_xent_bwd(float *dlogits, const float *probs, const int *targets,
                           const float *dloss, int N, int V, int Vp);
/* Both in one pass, in place: WRITES losses and OVERWRITES logits with dlogits =
 * (softmax(logits) - onehot(target)) * g (columns >= V: 0); no probabilities kept. The same bits
 * as _fwd then _bwd with dloss[n] = g. */
void sz_k_softmax_xent_fused(float *logits, float *losses, const int *targets, float g, int N, int V,
                             int Vp);

/* ---- AdamW (llm.c gpt2_update), step t >= 1, on n elements:
 *      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *      p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p)
 *      with g = scale * grad (the clip factor; 1 leaves g bitwise as it is).
 *      Pass wd = 0 for tensors that are not decayed. With sumsq not NULL, *sumsq is the squared
 *      norm of grad (unscaled) as sz_k_sumsq gives it, computed in the same pass. Returns -1 when
 *      out of memory (nothing updated), else 0.
 *      A NaN scale is the engine's skipped step (fp16 dynamic loss scaling found an overflow): the
 *      optimizers (these two, sz_k_adamw_step_bf16, sz_k_sgd_step) then write nothing at all
 *      (param, its 16-bit copy, m, v, the momentum untouched), set *sumsq (if not NULL) to 0 and
 *      return 0; any other scale behaves as described. ---- */
int sz_k_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                    int t, float lr, float beta1, float beta2, float eps, float wd, float scale,
                    double *sumsq);
/* Mixed precision: grad16 of type dt (SZ_K_BF16 or SZ_K_F16), widened exactly; param the fp32
 * master; if param16 is not NULL the updated param is also written there rounded (to nearest even)
 * to dt. The update is sz_k_adamw_step's on the widened gradients, bit for bit. */
int sz_k_adamw_step_mixed(float *param, uint16_t *param16, const uint16_t *grad16, sz_k_dtype dt,
                          float *m, float *v, size_t n, int t, float lr, float beta1, float beta2,
                          float eps, float wd, float scale, double *sumsq);
/* sz_k_adamw_step_mixed with dt SZ_K_BF16. */
int sz_k_adamw_step_bf16(float *param, uint16_t *param_bf16, const uint16_t *grad,
                         float *m, float *v, size_t n, int t, float lr,
                         float beta1, float beta2, float eps, float wd, float scale,
                         double *sumsq);

/* ---- SGD with momentum (torch.optim.SGD, dampening 0) on n elements:
 *      g = scale * grad + wd * p;  with buf: buf = momentum * buf + g, d = buf (nesterov:
 *      d = g + momentum * buf); without (buf NULL, momentum 0): d = g;  p -= lr * d.
 *      gdt is grad's sz_k_dtype: 0 (SZ_K_F32; param16 not used), 1 (SZ_K_BF16) or 2 (SZ_K_F16),
 *      a 16-bit grad widened exactly; then param is the fp32 master and, if not NULL, param16
 *      receives the result rounded to gdt. sumsq and a NaN scale as sz_k_adamw_step. -1 when out
 *      of memory (nothing updated), else 0. ---- */
int sz_k_sgd_step(float *param, uint16_t *param16, const void *grad, int gdt, float *buf, size_t n, float lr,
                  float momentum, float wd, int nesterov, float scale, double *sumsq);

/* ---- squared L2 norm of n values of sz_k_dtype dt, 0 fp32, 1 bf16 or 2 fp16 (widened exactly),
 *      in double; the same bits whatever the thread count (fixed chunks of SZ_SUMSQ_CHUNK, 16
 *      fixed lanes each); -1 if out of memory ---- */
#define SZ_SUMSQ_CHUNK 65536
double sz_k_sumsq(const void *x, int dt, int64_t n);
double sz_k_sumsq_chunk(const void *x, int dt, int64_t n);

/* ---- bf16 <-> fp32 and fp16 <-> fp32, round-to-nearest-even (NaN stays NaN), [n]: the scalar
 *      rules (sz_k_f32_to_f16_1, sz_k_f16_to_f32_1 for fp16) on whole buffers (sz_k_convert SET) ---- */
void sz_k_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void sz_k_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void sz_k_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void sz_k_f16_to_f32(float *dst, const uint16_t *src, size_t n);
/* dst[n] (type ddt) from src[n] (type sdt), any of fp32, bf16, fp16: fp32 arithmetic on the widened
 * values, one rounding to a 16-bit destination: SET dst = src; ADD dst = dst + src; ONTO_ZEROS
 * dst = 0 + src (what ADD onto zeros gives, -0 becoming +0, without reading dst). SET between equal
 * types copies the bits; bf16 <-> fp16 goes through fp32 too (the bf16 value widened exactly, then
 * rounded once to fp16, or the reverse). OpenMP-parallel over contiguous ranges; the same bits on
 * every CPU and thread count. */
enum { SZ_K_CONVERT_SET = 0, SZ_K_CONVERT_ADD = 1, SZ_K_CONVERT_ONTO_ZEROS = 2 };
void sz_k_convert(void *dst, sz_k_dtype ddt, const void *src, sz_k_dtype sdt, size_t n, int mode);
/* The linear layer's parameter gradients rounded into bf16 by their one writer (matmul_round.c):
 * dweight[OC,C] and dbias[OC] (either may be NULL) get exactly what sz_k_matmul_bwd_set (in_dt
 * F32: fp32 dout[N,OC], inp[N,C]) or sz_k_matmul_bwd_bf16_set (in_dt BF16, dparam_dt F32) with
 * SZ_K_SET_DW | SZ_K_SET_DB into fp32 buffers followed by sz_k_convert(..., mode) into them give
 * (mode an SZ_K_CONVERT_*: a GRAD_CONVERT folded into the gradients' writer); no full fp32 copy,
 * a panel of whole tile rows instead (sz_k_matmul_dparams_round_bytes, counted in the matmuls'
 * host bytes while a call runs). 0 (oneDNN tiles), 1 (a plain fallback tile), -1 out of memory
 * (nothing written), -2 bad arguments. */
int sz_k_matmul_dparams_round(uint16_t *dweight, uint16_t *dbias, const void *dout, const void *inp,
                              sz_k_dtype in_dt, int N, int C, int OC, int mode);
size_t sz_k_matmul_dparams_round_bytes(int C, int OC);
/* The same for a tied embedding's dweight alone, except that a row r with slot[r] >= 0 (the tokens'
 * rows, sz_k_token_slots) is not rounded but left in fp32 as rows[slot[r]] (C floats each: the
 * value the fp32 first writer sets), for sz_k_encoder_bwd_round to add into and round. */
int sz_k_matmul_dweight_round_rows(uint16_t *dweight, float *rows, const int32_t *slot, const void *dout,
                                   const void *inp, sz_k_dtype in_dt, int N, int C, int OC, int mode);

/* ==== the native bf16 path's kernels (bf16_act.c): fp32 math, some operands bf16 ====
 * A bf16 input is widened exactly, a bf16 output rounded once (RNE) from the fp32 value, and a bf16
 * destination that accumulates becomes round_bf16(f32(dst) + contribution). *_dt name the type of
 * the void* operands; p_dt the parameters'. Those returning int give 0, or -1 when a thread's scratch
 * could not be allocated: the layernorm backwards' 2 C floats (on the stack up to C = 2048), the
 * softmax's Vp floats, attention's per-(b, h) tiles (attention.c). Then nothing is written, except by
 * the layernorm backwards: the rows of the threads that had scratch (dinp; dres, da, db). */
int sz_k_layernorm_fwd_mx(void *out, sz_k_dtype out_dt, float *mean, float *rstd, const float *inp,
                          const void *weight, const void *bias, sz_k_dtype p_dt, int N, int C);
int sz_k_layernorm_bwd_mx(float *dinp, float *dweight, float *dbias, const void *dout, sz_k_dtype dout_dt,
                          const float *inp, const void *weight, sz_k_dtype p_dt, const float *mean,
                          const float *rstd, int N, int C);
void sz_k_gelu_fwd_mx(void *out, sz_k_dtype out_dt, const float *inp, size_t n);
void sz_k_gelu_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                      size_t n);
void sz_k_residual_bwd_mx(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const float *dout, size_t n);
void sz_k_softmax_xent_bwd_mx(void *dlogits, sz_k_dtype dt, const float *probs, const int *targets,
                              const float *dloss, int N, int V, int Vp);
void sz_k_encoder_fwd_mx(float *out, const int *tok, const void *wte, const void *wpe, sz_k_dtype p_dt,
                         int B, int T, int C);
int sz_k_attention_fwd_mx(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C,
                          int NH);
int sz_k_attention_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, const float *inp,
                          const float *stats, int B, int T, int C, int NH);
/* Which CPU kernel computes attention with bf16 operands: SZ_K_ATT_AUTO, the AMX tiles where the CPU
 * has AMX-BF16 (a bf16 out forward, a bf16 dinp backward), else the row kernels; SZ_K_ATT_ROWWISE,
 * fp32 math (attention.c: bitwise the fp32 kernel, rounded); SZ_K_ATT_AMX, the tiles (attention_amx.c:
 * q, k, v, dout, P and dS rounded to bf16 before their products; -2 where the CPU has no AMX). */
typedef enum { SZ_K_ATT_AUTO = 0, SZ_K_ATT_ROWWISE, SZ_K_ATT_AMX } sz_k_att_impl;
int sz_k_attention_amx_ok(void);
int sz_k_attention_fwd_mx_impl(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C,
                               int NH, sz_k_att_impl impl);
int sz_k_attention_bwd_mx_impl(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt,
                               const float *inp, const float *stats, int B, int T, int C, int NH, int set,
                               sz_k_att_impl impl);
/* attention_amx.c's entry points (out, dinp fp32 or bf16; set: SZ_K_SET_DINP); -2 without AMX. */
int sz_k_attention_amx_fwd(void *out, sz_k_dtype out_dt, float *stats, const float *inp, int B, int T, int C, int NH);
int sz_k_attention_amx_bwd(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, const float *inp,
                           const float *stats, int B, int T, int C, int NH, int set);
/* The fusions (residual + layernorm, softmax-xent in place) with bf16 operands: the fp32 fused kernels
 * row by row (a bf16 row widened first where the fp32 kernel sums over it: C or Vp floats). */
int sz_k_residual_layernorm_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *mean, float *rstd,
                                   const float *a, const float *b, const void *weight, const void *bias,
                                   sz_k_dtype p_dt, int N, int C);
int sz_k_layernorm_residual_bwd_mx(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight, float *dbias,
                                   const void *dout, sz_k_dtype dout_dt, const float *res, const void *weight,
                                   sz_k_dtype p_dt, const float *mean, const float *rstd, int N, int C);
int sz_k_softmax_xent_fused_mx(void *logits, sz_k_dtype dt, float *losses, const int *targets, float g, int N, int V,
                               int Vp);

/* The LLaMA-style model's ops with bf16 operands (out / dout / db / dinp and the weight, p_dt), the fp32
 * row math on widened rows (a row's scratch: C floats; rope 6C): RMSNorm forward and backward, fused
 * with the residual add (res, da, dres fp32), RoPE's backward, and the embedding lookup from a bf16
 * table (its return as sz_k_embedding_fwd's). */
int sz_k_rmsnorm_fwd_mx(void *out, sz_k_dtype out_dt, float *rstd, const float *inp, const void *weight,
                        sz_k_dtype p_dt, int N, int C, float eps);
int sz_k_rmsnorm_bwd_mx(float *dinp, float *dweight, const void *dout, sz_k_dtype dout_dt, const float *inp,
                        const void *weight, sz_k_dtype p_dt, const float *rstd, int N, int C);
int sz_k_residual_rmsnorm_fwd_mx(float *res, void *out, sz_k_dtype out_dt, float *rstd, const float *a,
                                 const float *b, const void *weight, sz_k_dtype p_dt, int N, int C, float eps);
int sz_k_rmsnorm_residual_bwd_mx(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight,
                                 const void *dout, sz_k_dtype dout_dt, const float *res, const void *weight,
                                 sz_k_dtype p_dt, const float *rstd, int N, int C);
int sz_k_rope_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, int B, int T, int C,
                     int NH, float theta);
int64_t sz_k_embedding_fwd_mx(float *out, const int *tok, const void *wte, sz_k_dtype p_dt, int N, int C, int V);
/* SiLU and the elementwise product with a bf16 out (forward) or bf16 accumulated gradients and dout of
 * either type (backward); inp, a, b fp32. */
void sz_k_silu_fwd_mx(void *out, sz_k_dtype out_dt, const float *inp, size_t n);
void sz_k_silu_bwd_mx(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                      size_t n);
void sz_k_mul_fwd_mx(void *out, sz_k_dtype out_dt, const float *a, const float *b, size_t n);
void sz_k_mul_bwd_mx(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const void *dout, sz_k_dtype dout_dt,
                     const float *a, const float *b, size_t n);

/* ==== first writers: the backward kernels above with some of their gradients WRITTEN (=) rather
 * than accumulated (+=), chosen by the SZ_K_SET_* bits of `set` (0: exactly the kernels above). The
 * values are the accumulating kernel's on a zeroed destination, except that a contribution of
 * exactly -0.0 stays -0.0 there (0.0f + -0.0f is +0.0f); the destination is not read. The engine
 * calls them where it folds an sz_op_zero into the op (core/fold.c). ==== */
#define SZ_K_SET_A 1                 /* the first gradient argument: dinp, or residual's da */
#define SZ_K_SET_B 2                 /* the second: residual's db */
#define SZ_K_SET_DINP SZ_K_SET_A
#define SZ_K_SET_DW 4                /* a parameter's gradient: the matmul's or norm's dweight */
#define SZ_K_SET_DB 8                /* and its bias's: dbias (the engine sets the first writer's of a step:
                                        tasks/step.c) */
/* dinp (no sum post-op in its tiles), dweight (likewise), dbias (its column sums start at 0). */
int sz_k_matmul_bwd_set(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, int N, int C, int OC, int set);
int sz_k_matmul_bwd_bf16_set(void *dinp, sz_k_dtype dinp_dt, void *dweight, void *dbias,
                             sz_k_dtype dparam_dt, const uint16_t *dout, const uint16_t *inp,
                             const uint16_t *weight, int N, int C, int OC, int set);
int sz_k_attention_bwd_set(float *dinp, const float *dout, const float *inp, const float *stats,
                           int B, int T, int C, int NH, int set);
int sz_k_attention_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt,
                              const float *inp, const float *stats, int B, int T, int C, int NH, int set);
void sz_k_gelu_bwd_set(float *dinp, const float *inp, const float *dout, size_t n, int set);
void sz_k_gelu_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const float *inp, const void *dout, sz_k_dtype dout_dt,
                          size_t n, int set);
void sz_k_residual_bwd_set(float *da, float *db, const float *dout, size_t n, int set);
void sz_k_residual_bwd_mx_set(void *da, sz_k_dtype da_dt, void *db, sz_k_dtype db_dt, const float *dout, size_t n,
                              int set);
/* dinp; dweight (SZ_K_SET_DW) and dbias (SZ_K_SET_DB): their column sums start at 0. */
void sz_k_layernorm_bwd_set(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C, int set);
int sz_k_layernorm_bwd_mx_set(float *dinp, float *dweight, float *dbias, const void *dout, sz_k_dtype dout_dt,
                              const float *inp, const void *weight, sz_k_dtype p_dt, const float *mean,
                              const float *rstd, int N, int C, int set);
/* da (SZ_K_SET_A) and db (SZ_K_SET_B) = dres, dweight and dbias as above; dres always accumulates. */
void sz_k_layernorm_residual_bwd_set(float *da, float *db, float *dres, float *dweight, float *dbias,
                                     const float *dout, const float *res, const float *weight,
                                     const float *mean, const float *rstd, int N, int C, int set);
int sz_k_layernorm_residual_bwd_mx_set(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight,
                                       float *dbias, const void *dout, sz_k_dtype dout_dt, const float *res,
                                       const void *weight, sz_k_dtype p_dt, const float *mean, const float *rstd,
                                       int N, int C, int set);
/* The LLaMA-style model's: RMSNorm's dinp and dweight (SZ_K_SET_DW), its fusion's da, db and dweight
 * (dres accumulates), RoPE's dinp. */
void sz_k_rmsnorm_bwd_set(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                          const float *rstd, int N, int C, int set);
int sz_k_rmsnorm_bwd_mx_set(float *dinp, float *dweight, const void *dout, sz_k_dtype dout_dt, const float *inp,
                            const void *weight, sz_k_dtype p_dt, const float *rstd, int N, int C, int set);
void sz_k_rmsnorm_residual_bwd_set(float *da, float *db, float *dres, float *dweight, const float *dout,
                                   const float *res, const float *weight, const float *rstd, int N, int C, int set);
int sz_k_rmsnorm_residual_bwd_mx_set(float *da, void *db, sz_k_dtype db_dt, float *dres, float *dweight,
                                     const void *dout, sz_k_dtype dout_dt, const float *res, const void *weight,
                                     sz_k_dtype p_dt, const float *rstd, int N, int C, int set);
int sz_k_rope_bwd_set(float *dinp, const float *dout, int B, int T, int C, int NH, float theta, int set);
int sz_k_rope_bwd_mx_set(void *dinp, sz_k_dtype dinp_dt, const void *dout, sz_k_dtype dout_dt, int B, int T, int C,
                         int NH, float theta, int set);

/* ==== operations of LLaMA-style models (rmsnorm.c, silu.c, mul.c, swiglu.c, rope.c, embedding.c, mse.c) ==== */

/* ---- RMSNorm over the last dim: out[N,C] = inp · rstd · w, rstd[N] = 1/sqrt(mean(inp²) + eps)
 *      (written); backward: dinp [N,C], dweight [C] accumulate (either may be NULL) ---- */
void sz_k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);
void sz_k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C);
/* The residual add fused with the RMSNorm after it: WRITES res = a + b and out, rstd =
 * rmsnorm(res) as sz_k_rmsnorm_fwd; backward ACCUMULATES the norm's input gradient into dres, then
 * da += dres, db += dres, and dweight +=. The same bits as the two kernels in turn. */
void sz_k_residual_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b,
                               const float *weight, int N, int C, float eps);
void sz_k_rmsnorm_residual_bwd(float *da, float *db, float *dres, float *dweight, const float *dout,
                               const float *res, const float *weight, const float *rstd, int N, int C);

/* ---- SiLU: out = x σ(x), [n]; dinp += dout · σ(x)(1 + x(1 - σ(x))) ---- */
void sz_k_silu_fwd(float *out, const float *inp, size_t n);
void sz_k_silu_bwd(float *dinp, const float *inp, const float *dout, size_t n);

/* ---- elementwise product: out = a · b, [n]; da += dout · b, db += dout · a (either may be NULL) ---- */
void sz_k_mul_fwd(float *out, const float *a, const float *b, size_t n);
void sz_k_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);

/* ---- SwiGLU (swiglu.c), LLaMA's MLP gate fused: out = silu(gate) · up, [n] (written; libm's expf);
 *      dgate += dout · up · σ(g)(1 + g(1 - σ(g))), dup += dout · g σ(g). The _mx variants: out, dgate,
 *      dup, dout each fp32 or bf16 (gate, up fp32), the fp32 formula on the widened values, each bf16
 *      result rounded once. ---- */
void sz_k_swiglu_fwd(float *out, const float *gate, const float *up, size_t n);
void sz_k_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n);
void sz_k_swiglu_fwd_mx(void *out, sz_k_dtype out_dt, const float *gate, const float *up, size_t n);
void sz_k_swiglu_bwd_mx(void *dgate, sz_k_dtype dgate_dt, void *dup, sz_k_dtype dup_dt, const void *dout,
                        sz_k_dtype dout_dt, const float *gate, const float *up, size_t n);

/* ---- rotary position embedding on fused qkv [B,T,3C], NH heads of hs = C/NH (hs even): q and k
 *      pairs (2i, 2i+1) at position t rotated by t · theta^(-2i/hs), v copied. out WRITTEN; the
 *      backward dinp [B,T,3C] accumulates. Return 0, or -1 when the cos/sin table could not be
 *      allocated (nothing written). ---- */
int sz_k_rope_fwd(float *out, const float *inp, int B, int T, int C, int NH, float theta);
int sz_k_rope_bwd(float *dinp, const float *dout, int B, int T, int C, int NH, float theta);

/* ---- token embedding: out[N,C] = wte[tok[n], :] (written), tok int32 [N] in [0, V);
 *      backward: dwte[V,C] += dout rows at their tokens. Each checks the tokens first: it
 *      returns -1 when all are in [0, V), else the first row whose token is not (and touches
 *      nothing). sz_k_embedding_check is that check alone. ---- */
int64_t sz_k_embedding_check(const int *tok, int64_t N, int V);
int64_t sz_k_embedding_fwd(float *out, const int *tok, const float *wte, int N, int C, int V);
int64_t sz_k_embedding_bwd(float *dwte, const float *dout, const int *tok, int N, int C, int V);
/* The backward into a bf16 dwte[V,C] that its writer rounds (mixed precision, issue 16): every row
 * gets exactly what sz_k_embedding_bwd onto a zeroed fp32 gradient followed by sz_k_convert(...,
 * mode) (an SZ_K_CONVERT_*) gives, the rows no token has included (the rule applied to zeros). idx:
 * sz_k_embedding_bwd_round_ints(N, V) int32 of scratch (the rows grouped by token). Returns as
 * sz_k_embedding_bwd (a bad token: nothing written). */
size_t sz_k_embedding_bwd_round_ints(int N, int V);
int64_t sz_k_embedding_bwd_round(uint16_t *dwte, const float *dout, const int *tok, int N, int C, int V, int mode,
                                 int32_t *idx);

/* ---- mean-squared error: losses[n] = mean_c (pred - target)² (written), [N,C] rows;
 *      backward WRITES dpred = 2 (pred - target) / C · scale ---- */
void sz_k_mse_fwd(float *losses, const float *pred, const float *target, int N, int C);
void sz_k_mse_bwd(float *dpred, const float *pred, const float *target, float scale, int N, int C);

/* The bf16 products on oneDNN's bf16 tiles where the CPU has them (1, the default), or through the
 * exact widening to fp32 tiles (0: the environment's SZ_ONEDNN_BF16=0, set by the context, and the
 * tests of both paths). Process-wide; change it only while no kernel runs. */
void sz_k_set_bf16_tiles(int on);

/* Frees the cached oneDNN primitives and engine. Call once, when no kernel is
 * running; kernels called afterwards rebuild the cache. */
void sz_k_shutdown(void);
/* Host memory of the fp32 matmul kernels for out[N,OC] = inp[N,C] . weight^T and its backward, with
 * nthr threads: *scratch, the oneDNN scratchpads the threads keep (each grows to the largest tile it
 * ran; queried from the tile primitives, which it creates in the kernels' cache), and *pack, the
 * packed tiles one call holds while it runs. sz_k_matmul_host_peak: the most both held at once in
 * this process so far (measured). */
void sz_k_matmul_host_bytes(int N, int C, int OC, int nthr, size_t *scratch, size_t *pack);
/* The same for the bf16-weight kernels (sz_k_matmul_*_wbf16, and sz_k_matmul_gelu_fwd /
 * sz_k_gelu_matmul_bwd with in_dt F32, w_dt BF16): in *scratch, each thread's kept buffer, its
 * oneDNN scratchpad followed by its widened weight panel and bias slice (forward 384 x C floats, dinp
 * OC x C where C <= 384, else OC x 400: the lm head's dinp, OC = 50304, keeps 80 MB per thread; kept,
 * not allocated per call, which page-faulted); *pack as the fp32 kernels' — what the model adds
 * instead of the working copies (codelets/matmul.c: sz_matmul_host_bytes_wbf16). */
void sz_k_matmul_wbf16_host_bytes(int N, int C, int OC, int nthr, size_t *scratch, size_t *pack);
/* The same for the bf16 kernels (sz_k_matmul_*_bf16): native tiles, or the emulation's fp32 copies. */
void sz_k_matmul_bf16_host_bytes(int N, int C, int OC, int nthr, size_t *scratch, size_t *pack);
int64_t sz_k_matmul_host_peak(void);
/* What they hold now; the high-water set back to it (tests measure one shape from there). */
int64_t sz_k_matmul_host_live(void);
void sz_k_matmul_host_peak_reset(void);

#ifdef __cplusplus
}
#endif
#endif /* SZ_KERNELS_H */
