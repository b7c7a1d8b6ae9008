/* apps/common/data.h — llm.c's data order over an llm.c token file, for any model trained on
 * tokens (GPT-2, LLaMA-style). A micro-batch reads nd*B rows of T tokens, laid out one after the
 * other; rank r takes rows r*B .. r*B+B-1 and its targets are its inputs shifted by one token,
 * all inside the batch. The file holds floor((ntokens - 1) / (nd*B*T)) such batches and a batch
 * never wraps around the end of the file: micro-batch i of the run (every micro-batch of every
 * step counted, from 0) reads batch (i mod that count) whole, as llm.c's dataloader does. */
#ifndef SZ_APP_DATA_H
#define SZ_APP_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct sz_tokens {
    const char *path;
    uint16_t *tokens;
    size_t ntokens;
    int nd, B, T;       /* ranks, rows per rank, tokens per row */
    long nbatches;      /* whole batches the file holds (>= 1) */
} sz_tokens;

/* Reads `path` (tokens < vocab) for batches of nd x B rows of T tokens. A file holding less than
 * one batch (nd*B*T + 1 tokens) is refused with the numbers. 0 on success, else -1 and err says why. */
int sz_tokens_open(sz_tokens *d, const char *path, int vocab, int nd, int B, int T, char *err, size_t errlen);
void sz_tokens_close(sz_tokens *d);
/* Host bytes the open file holds in memory (the whole token array): what a trainer counts in
 * sz_zero_config.host_bytes. */
int64_t sz_tokens_host_bytes(const sz_tokens *d);

/* The token offset in the file at which micro-batch i's row `row` (0 .. nd*B-1) starts. */
size_t sz_tokens_row_offset(long nbatches, int nd, int B, int T, long i, int row);

/* Micro-batch i for rank `rank`: B*T inputs and B*T targets. */
void sz_tokens_batch(const sz_tokens *d, long i, int rank, int *inputs, int *targets);

/* Validation as llm.c does it: the first min(want, nbatches) batches from the start of the file. */
long sz_tokens_val_batches(const sz_tokens *d, long want);

#endif
