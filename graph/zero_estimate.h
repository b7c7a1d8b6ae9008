/* graph/zero_estimate.h — the ZeRO estimator; declared in the public header (sz-estimate uses it),
 * plus its model-parallel part (Megatron-LM's tensor parallelism combined with ZeRO, as the paper
 * does), declared here until the runtime has model parallelism (issue 35). */
#ifndef SZ_ZERO_ESTIMATE_H
#define SZ_ZERO_ESTIMATE_H
#include "starzero.h"

/* ---- model parallelism (N_m ranks of one MP group; pure arithmetic, as the functions above) ---
 * Conventions: nm is N_m >= 1; a double function returns -1.0 for an invalid argument. */

/* Parameters one MP rank holds: the partitioned tensors' psi_split / N_m plus the replicated ones
 * (norms, row-parallel biases, position embeddings): psi_split / nm + psi_replicated. ZeRO-DP then
 * shards that per-rank count over N_d: the model-state formulas take it as their Ψ. */
double sz_zero_mp_rank_params(double psi_split, double psi_replicated, int nm);

/* Model-parallel traffic of one transformer block per step, in elements of one rank, for a micro-
 * batch whose block input has btc = B·T·C elements. Megatron's tensor parallelism all-reduces a
 * B·T·C tensor twice in forward (after the attention projection, after the MLP's projection),
 * twice in backward (the conjugate operations at the block's two column-parallel inputs) and,
 * under checkpointing, twice more in the recompute. The paper's convention counts an all-reduce as
 * twice its message: 12·btc per block with checkpointing (its "12 × seq × hidden" per sample),
 * 8·btc without; 0 when nm = 1 (no group). */
double sz_zero_mp_block_elems(double btc, int checkpoint, int nm);
/* The same as a ring implementation sends it: each all-reduce 2·btc·(nm-1)/nm per rank, so
 * (checkpoint ? 12 : 8)·btc·(nm-1)/nm. */
double sz_zero_mp_block_elems_sent(double btc, int checkpoint, int nm);
/* P_a: one all-gather of the block's checkpointed input before its recompute. The paper counts
 * its message, btc ("seq × hidden" per sample, under 10% of the 12·btc above); a ring sends
 * btc·(nm-1)/nm of it per rank. Both 0 when nm = 1 (nothing partitioned). */
double sz_zero_pa_block_elems(double btc, int nm);
double sz_zero_pa_block_elems_sent(double btc, int nm);

/* Activation checkpoints of `layers` blocks (each its input, btc elements of elem_bytes bytes) per
 * MP rank. Without P_a every rank keeps all of them: layers·btc·elem_bytes; with P_a (pa != 0)
 * each keeps a 1/N_m slice: layers·btc·elem_bytes/nm (btc divisible by nm: Megatron's split;
 * otherwise the slice is rounded up to whole elements). With P_a+cpu (cpu != 0, needs pa) those
 * slices live in host memory: the device part is 0 and *host (when given) gets them; otherwise
 * *host = 0. The paper's example (§6.1 of the ZeRO paper): 125 layers, B·T·C = 16·1024·8192, fp16:
 * 33,554,432,000 bytes without P_a, 2,097,152,000 with it at N_m = 16. */
double sz_zero_mp_checkpoint_bytes(int layers, double btc, int elem_bytes, int nm, int pa, int cpu, double *host);

#endif
