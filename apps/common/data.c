/* apps/common/data.c — llm.c's batch order over a token file (see data.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "starzero.h"
#include "starzero_gpt2.h"
#include "data.h"

int sz_tokens_open(sz_tokens *d, const char *path, int vocab, int nd, int B, int T, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (sz_llmc_tokens_read(path, vocab, &d->tokens, &d->ntokens, err, errlen) != SZ_OK)
        return -1;
    size_t batch = (size_t)nd * (size_t)B * (size_t)T;
    if (d->ntokens < batch + 1) {
        snprintf(err, errlen,
                 "%s holds %zu tokens, less than one batch: %d rank(s) x %d rows x %d tokens + 1 = %zu tokens "
                 "(use a longer file, or a smaller --batch or --seq)",
                 path, d->ntokens, nd, B, T, batch + 1);
        free(d->tokens);
        d->tokens = NULL;
        return -1;
    }
    d->path = path;
    d->nd = nd;
    d->B = B;
    d->T = T;
    d->nbatches = (long)((d->ntokens - 1) / batch);
    return 0;
}

void sz_tokens_close(sz_tokens *d)
{
    if (d) {
        free(d->tokens);
        d->tokens = NULL;
    }
}

int64_t sz_tokens_host_bytes(const sz_tokens *d) { return d && d->tokens ? (int64_t)(d->ntokens * sizeof *d->tokens) : 0; }

size_t sz_tokens_row_offset(long nbatches, int nd, int B, int T, long i, int row)
{
    size_t k = (size_t)(i % nbatches);
    return (k * (size_t)nd * (size_t)B + (size_t)row) * (size_t)T;
}

void sz_tokens_batch(const sz_tokens *d, long i, int rank, int *inputs, int *targets)
{
    for (int b = 0; b < d->B; b++) {
        size_t start = sz_tokens_row_offset(d->nbatches, d->nd, d->B, d->T, i, rank * d->B + b);
        for (int t = 0; t < d->T; t++) {
            inputs[b * d->T + t] = d->tokens[start + (size_t)t];
            targets[b * d->T + t] = d->tokens[start + (size_t)t + 1];
        }
    }
}

long sz_tokens_val_batches(const sz_tokens *d, long want) { return want < d->nbatches ? want : d->nbatches; }
