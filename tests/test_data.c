/* test_data.c — apps/common/data.c (llm.c's batch order) against an independent reference: a
 * transcription of llm.c's dataloader (dataloader.h: one shard, no shuffling) that keeps a
 * current sample index, reads B*T+1 tokens at header + idx*nd*B*T + rank*B*T, and resets to
 * sample 0 when the index passes the file's last whole batch. Checked for 1 and 3 ranks, with
 * micro-batches (the reference advances once per micro-batch), far past the end of the file,
 * plus the refusal of a file holding less than one batch (the message names the numbers). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <CUnit/Basic.h>
#include "starzero.h"
#include "starzero_gpt2.h"
#include "data.h"
#include "sz_test.h"

static char path[64];

static void make_file(size_t n)
{
    uint16_t *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = (uint16_t)((i * 7 + 3) % 251); /* distinct enough to catch any offset error */
    char err[256];
    CU_ASSERT_FATAL(sz_llmc_tokens_write(path, t, n, err, sizeof err) == SZ_OK);
    free(t);
}

/* llm.c's loader, written from its source: num samples, current sample, next_batch, load_batch */
struct ref {
    const uint16_t *tok;
    size_t ntok;
    int B, T, rank, nproc;
    size_t nsamples, cur;
};

static void ref_init(struct ref *r, const uint16_t *tok, size_t ntok, int B, int T, int rank, int nproc)
{
    *r = (struct ref){tok, ntok, B, T, rank, nproc, 0, 0};
    size_t total_batch_bytes = (size_t)nproc * B * T * sizeof(uint16_t);
    r->nsamples = (ntok * sizeof(uint16_t) - sizeof(uint16_t)) / total_batch_bytes;
}

static void ref_next(struct ref *r, int *in, int *tg)
{
    if (r->cur >= r->nsamples)
        r->cur = 0; /* llm.c advances to the next shard; with one shard, back to its start */
    size_t global_off = r->cur * (size_t)r->nproc * r->B * r->T, local_off = (size_t)r->rank * r->B * r->T;
    const uint16_t *buf = r->tok + global_off + local_off; /* B*T+1 tokens */
    for (int i = 0; i < r->B * r->T; i++) {
        in[i] = buf[i];
        tg[i] = buf[i + 1];
    }
    r->cur++;
}

static void check_order(size_t ntok, int nd, int B, int T, int micro, int steps)
{
    make_file(ntok);
    for (int rank = 0; rank < nd; rank++) {
        sz_tokens d;
        char err[256];
        CU_ASSERT_FATAL(sz_tokens_open(&d, path, 256, nd, B, T, err, sizeof err) == 0);
        CU_ASSERT_EQUAL(d.nbatches, (long)((ntok - 1) / ((size_t)nd * B * T)));
        struct ref r;
        ref_init(&r, d.tokens, d.ntokens, B, T, rank, nd);
        CU_ASSERT_EQUAL((long)r.nsamples, d.nbatches);
        int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
        int *rin = malloc(sizeof(int) * B * T), *rtg = malloc(sizeof(int) * B * T);
        int bad = 0;
        for (int s = 0; s < steps; s++)
            for (int mb = 0; mb < micro; mb++) {
                ref_next(&r, rin, rtg);
                sz_tokens_batch(&d, (long)s * micro + mb, rank, in, tg);
                bad += memcmp(in, rin, sizeof(int) * B * T) != 0 || memcmp(tg, rtg, sizeof(int) * B * T) != 0;
            }
        CU_ASSERT_EQUAL(bad, 0);
        /* the run went round the file more than once */
        CU_ASSERT_TRUE((long)steps * micro > 2 * d.nbatches);
        free(in), free(tg), free(rin), free(rtg);
        sz_tokens_close(&d);
    }
}

static void test_one_rank(void) { check_order(1000, 1, 4, 8, 1, 200); }
static void test_ranks_micro(void) { check_order(1234, 3, 2, 8, 2, 100); }
static void test_exact_fit(void) { check_order(2 * 4 * 8 + 1, 2, 2, 8, 3, 10); } /* exactly one batch */

static void test_row_offset(void)
{
    /* 3 batches of 2 ranks x 2 rows x 4 tokens (16 tokens each) in a 50-token file */
    CU_ASSERT_EQUAL(sz_tokens_row_offset(3, 2, 2, 4, 0, 0), 0);
    CU_ASSERT_EQUAL(sz_tokens_row_offset(3, 2, 2, 4, 0, 3), 12);
    CU_ASSERT_EQUAL(sz_tokens_row_offset(3, 2, 2, 4, 2, 1), 36);
    CU_ASSERT_EQUAL(sz_tokens_row_offset(3, 2, 2, 4, 3, 0), 0); /* batch 3 is batch 0: no wrapping read */
    CU_ASSERT_EQUAL(sz_tokens_row_offset(3, 2, 2, 4, 7, 2), 16 + 8);
}

static void test_too_short(void)
{
    size_t sizes[] = {2, 40, 64};
    for (int i = 0; i < 3; i++) {
        make_file(sizes[i]);
        sz_tokens d;
        char err[512] = "";
        CU_ASSERT_EQUAL(sz_tokens_open(&d, path, 256, 1, 1, 64, err, sizeof err), -1);
        char want[64];
        snprintf(want, sizeof want, "holds %zu tokens", sizes[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "= 65 tokens"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
    }
    make_file(65);
    sz_tokens d;
    char err[512] = "";
    CU_ASSERT_EQUAL(sz_tokens_open(&d, path, 256, 1, 1, 64, err, sizeof err), 0);
    CU_ASSERT_EQUAL(d.nbatches, 1);
    CU_ASSERT_EQUAL(sz_tokens_val_batches(&d, 20), 1);
    sz_tokens_close(&d);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/sz_test_data_%d.bin", (int)getpid());
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("data", {"one rank, past the end", test_one_rank}, {"3 ranks, 2 micro-batches", test_ranks_micro},
             {"a file of exactly one batch", test_exact_fit}, {"row offsets", test_row_offset},
             {"files shorter than one batch", test_too_short});
    int rc = sz_test_run();
    unlink(path);
    return rc;
}
