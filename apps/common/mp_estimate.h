/* apps/common/mp_estimate.h — the ZeRO paper's analysis of ZeRO with model parallelism, computed
 * (sz-estimate --mp, --paper-pa, --paper-table3): one MP rank's parameters, the P_a example of the
 * paper's §6.1 and the largest GPT-2-like model each configuration of its Table 3 fits on one GPU.
 * Pure arithmetic over the model tables (arch.h) and graph/'s formulas; nothing runs. */
#ifndef SZ_APP_MP_ESTIMATE_H
#define SZ_APP_MP_ESTIMATE_H

#include "arch.h"

/* Parameters of one of nm MP ranks: *split (the tensors Megatron partitions, whole model),
 * *replicated, and the rank's Ψ = split / nm + replicated. 0, or -1 (message in err) when nm does
 * not divide what it must (sz_arch_mp_check). */
int sz_mp_rank_params(const sz_arch_config *c, int nm, double *split, double *replicated, double *psi_rank,
                      char *err, size_t errlen);

/* The paper's P_a example: `layers` blocks of hidden `hidden`, sequence `seq`, N_m `nm`, checkpoints
 * of elem_bytes per element. The per-GPU batch is the one whose checkpoints without P_a come
 * nearest `target` bytes (the paper's "about 33 GB"). */
typedef struct sz_mp_pa_example {
    int batch;                 /* sequences per GPU (per MP group: each MP rank sees all of them) */
    double per_sample;         /* checkpoint bytes of one sequence, all blocks */
    double without_pa, with_pa; /* per GPU, at that batch */
} sz_mp_pa_example;
int sz_mp_pa_example_of(int layers, int hidden, int seq, int nm, int elem_bytes, double target, sz_mp_pa_example *out);

/* The paper's Table 3 (ZeRO-DP with MP 16; C_B and M_D in all five). */
typedef struct sz_mp_paper_config {
    const char *name, *what;
    int stage;        /* 1 P_os, 2 P_os+g */
    int pa, cpu;      /* P_a; P_a+cpu */
    double paper_psi; /* the paper's Figure 6: the largest model it trained, parameters (0: not given) */
} sz_mp_paper_config;
extern const sz_mp_paper_config sz_mp_table3[5];

/* The machine and model family of the fit: GPT-2-like models of `heads` x `channels`, L layers. */
typedef struct sz_mp_fit_setup {
    int heads, channels, vocab, seq, batch, nm, nd;
    int elem_bytes;      /* activations and checkpoints: 2 (fp16, as the paper's runs held them) */
    double budget;       /* bytes per GPU */
    int64_t bucket_bytes; /* C_B's buffer */
    int max_layers;
} sz_mp_fit_setup;

/* One GPU's memory for a model of `layers` layers under configuration cfg. */
typedef struct sz_mp_fit {
    int layers;
    double psi, psi_rank;
    double states;      /* model states: the DESIGN formula at Ψ_rank, N_d, mixed precision (K = 12) */
    double activations; /* checkpoints kept on the GPU (whole, or P_a's slices and one gathered input), one
                           block's forward tensors of this MP rank and the head's, at elem_bytes */
    double checkpoints; /* the L block checkpoints of this rank (whole, or P_a's slices), wherever they are */
    double buffer;      /* C_B */
    double total;       /* states + activations + buffer */
    double host;        /* P_a+cpu: those slices, in host memory (the GPU keeps at most 3 and one gathered
                           input, counted in activations) */
} sz_mp_fit;
int sz_mp_fit_memory(const sz_mp_fit_setup *s, const sz_mp_paper_config *cfg, int layers, sz_mp_fit *out);
/* The layer count whose model comes nearest psi parameters (the paper's sizes in this family). */
int sz_mp_fit_layers_for(const sz_mp_fit_setup *s, double psi);
/* The largest layer count in 1..max_layers whose total fits s->budget (0 when none does; -1 on an
 * invalid setup), and its memory in *out. */
int sz_mp_fit_largest(const sz_mp_fit_setup *s, const sz_mp_paper_config *cfg, sz_mp_fit *out);

#endif
