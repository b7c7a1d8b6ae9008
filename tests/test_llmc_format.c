/* test_llmc_format.c — CUnit suite for apps/gpt2/gpt2_spec (the GPT-2 tensor table, sizes, offsets,
 * presets) and apps/gpt2/llmc_format (llm.c checkpoint and token files: round trips and every kind of
 * bad file). Files live in a mkdtemp directory that is removed at the end. Exits non-zero on failure.
 *   gcc -O2 -Wall -Wextra -Iinclude -Iapps/gpt2 tests/test_llmc_format.c apps/gpt2/gpt2_spec.c apps/gpt2/llmc_format.c -lcunit -lm
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

#include "starzero_gpt2.h"

/* ---- fixtures ----------------------------------------------------------------------------- */

static char g_dir[64];

static int suite_init(void)
{
    strcpy(g_dir, "/tmp/sz_llmc_test_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int suite_clean(void)
{
    DIR *d = opendir(g_dir);
    if (!d)
        return -1;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        if (unlink(p) != 0)
            rmdir(p);
    }
    closedir(d);
    return rmdir(g_dir) == 0 ? 0 : -1;
}

/* path of `name` inside the test directory */
static const char *tpath(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", g_dir, name);
    return buf;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Writes raw bytes: a header of 256 int32s, then `body_bytes` bytes of body. */
static void write_raw(const char *path, const int32_t *hdr, size_t hdr_bytes, const void *body,
                      size_t body_bytes)
{
    FILE *fp = fopen(path, "wb");
    CU_ASSERT_FATAL(fp != NULL);
    if (hdr_bytes)
        CU_ASSERT(fwrite(hdr, 1, hdr_bytes, fp) == hdr_bytes);
    if (body_bytes)
        CU_ASSERT(fwrite(body, 1, body_bytes, fp) == body_bytes);
    fclose(fp);
}

/* Reads a whole file (for byte-level comparisons). */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && n > 0 && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *len = (size_t)n;
    return buf;
}

/* Asserts a failure's status, and that its message names the file and contains a key word. */
/* (each argument is evaluated once) */
#define EXPECT_ERR(st, want, err, name, word)                                                      \
    do {                                                                                           \
        sz_status st_ = (st);                                                                      \
        const char *err_ = (err), *name_ = (name), *word_ = (word);                                \
        CU_ASSERT_EQUAL(st_, (want));                                                              \
        CU_ASSERT_PTR_NOT_NULL(strstr(err_, name_));                                               \
        CU_ASSERT_PTR_NOT_NULL(strstr(err_, word_));                                               \
        if (st_ != (want) || !strstr(err_, name_) || !strstr(err_, word_))                         \
            fprintf(stderr, "\n  line %d: status %d (want %d), message: \"%s\" (want \"%s\", \"%s\")\n", \
                    __LINE__, (int)st_, (int)(want), err_, name_, word_);                          \
    } while (0)

/* A tiny valid config: 1944 parameters. */
static sz_gpt2_config tiny_config(void)
{
    sz_gpt2_config c = {.max_seq = 4, .vocab = 10, .padded_vocab = 128, .layers = 1, .heads = 2,
                        .channels = 8};
    return c;
}

static sz_gpt2_config d12_config(void)
{
    sz_gpt2_config c;
    CU_ASSERT_EQUAL(sz_gpt2_config_from_string(&c, "d12", 50257, 1024, NULL, 0), SZ_OK);
    return c;
}

/* Parameters with every kind of bit pattern (NaNs, infinities, denormals, -0) to prove the round
 * trip is bitwise. */
static float *pattern_params(size_t n)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 3);
        memcpy(&p[i], &u, sizeof u);
    }
    return p;
}

/* Writes a valid tiny checkpoint at `path`. */
static void make_checkpoint(const char *path)
{
    sz_gpt2_config c = tiny_config();
    size_t n = sz_gpt2_num_params(&c);
    float *p = pattern_params(n);
    char err[512] = "";
    CU_ASSERT_EQUAL(sz_llmc_checkpoint_write(path, &c, p, n, err, sizeof err), SZ_OK);
    free(p);
}

/* Loads a file's raw bytes, lets the caller patch them, writes them to `out`. */
static unsigned char *load_for_patch(const char *path, size_t *len)
{
    unsigned char *b = slurp(path, len);
    CU_ASSERT_FATAL(b != NULL);
    return b;
}

/* ---- spec table --------------------------------------------------------------------------- */

static void test_table_order_and_flags(void)
{
    static const char *order[] = {"wte",  "wpe",  "ln1w",     "ln1b",     "qkvw", "qkvb",
                                  "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                  "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
    CU_ASSERT_EQUAL(SZ_GPT2_NUM_TENSORS, 16);
    for (int i = 0; i < SZ_GPT2_NUM_TENSORS; i++) {
        const sz_gpt2_tensor_spec *t = sz_gpt2_tensor(i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_STRING_EQUAL(t->name, order[i]);
        CU_ASSERT_EQUAL(sz_gpt2_tensor_find(order[i]), i);
        int matrix = !strcmp(order[i], "wte") || !strcmp(order[i], "wpe") ||
                     !strcmp(order[i], "qkvw") || !strcmp(order[i], "attprojw") ||
                     !strcmp(order[i], "fcw") || !strcmp(order[i], "fcprojw");
        CU_ASSERT_EQUAL(t->is_matrix, matrix);
        CU_ASSERT_EQUAL(t->per_layer, i >= SZ_GPT2_LN1W && i <= SZ_GPT2_FCPROJB);
        /* biases and layernorm params are vectors */
        CU_ASSERT_EQUAL(t->cols == SZ_GPT2_DIM_ONE, !matrix);
    }
    CU_ASSERT_PTR_NULL(sz_gpt2_tensor(-1));
    CU_ASSERT_PTR_NULL(sz_gpt2_tensor(SZ_GPT2_NUM_TENSORS));
    CU_ASSERT_EQUAL(sz_gpt2_tensor_find("nope"), -1);

    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_WTE)->init, SZ_GPT2_INIT_NORMAL);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_WPE)->init, SZ_GPT2_INIT_NORMAL);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_QKVW)->init, SZ_GPT2_INIT_NORMAL);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_FCW)->init, SZ_GPT2_INIT_NORMAL);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_ATTPROJW)->init, SZ_GPT2_INIT_NORMAL_RESIDUAL);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_FCPROJW)->init, SZ_GPT2_INIT_NORMAL_RESIDUAL);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_LN1W)->init, SZ_GPT2_INIT_ONES);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_LN2W)->init, SZ_GPT2_INIT_ONES);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_LNFW)->init, SZ_GPT2_INIT_ONES);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_LN1B)->init, SZ_GPT2_INIT_ZEROS);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_LNFB)->init, SZ_GPT2_INIT_ZEROS);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_QKVB)->init, SZ_GPT2_INIT_ZEROS);
    CU_ASSERT_EQUAL(sz_gpt2_tensor(SZ_GPT2_FCPROJB)->init, SZ_GPT2_INIT_ZEROS);

    sz_gpt2_config c = d12_config();
    CU_ASSERT_DOUBLE_EQUAL(sz_gpt2_tensor_init_std(&c, SZ_GPT2_QKVW), 0.02, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(sz_gpt2_tensor_init_std(&c, SZ_GPT2_FCPROJW), 0.02 / sqrt(24.0), 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(sz_gpt2_tensor_init_std(&c, SZ_GPT2_LN1W), 0.0, 0.0);
}

static void test_padded_vocab(void)
{
    CU_ASSERT_EQUAL(sz_gpt2_padded_vocab(50257), 50304);
    CU_ASSERT_EQUAL(sz_gpt2_padded_vocab(256), 256);
    CU_ASSERT_EQUAL(sz_gpt2_padded_vocab(1), 128);
    CU_ASSERT_EQUAL(sz_gpt2_padded_vocab(128), 128);
    CU_ASSERT_EQUAL(sz_gpt2_padded_vocab(129), 256);
}

static void test_d12_sizes_and_offsets(void)
{
    sz_gpt2_config c = d12_config();
    CU_ASSERT_EQUAL(c.layers, 12);
    CU_ASSERT_EQUAL(c.heads, 12);
    CU_ASSERT_EQUAL(c.channels, 768);
    CU_ASSERT_EQUAL(c.padded_vocab, 50304);
    CU_ASSERT_EQUAL(sz_gpt2_num_params(&c), (size_t)124475904);

    CU_ASSERT_EQUAL(sz_gpt2_tensor_numel(&c, SZ_GPT2_WTE), (size_t)50304 * 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_numel(&c, SZ_GPT2_WPE), (size_t)1024 * 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_numel(&c, SZ_GPT2_QKVW), (size_t)12 * 3 * 768 * 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_layer_numel(&c, SZ_GPT2_QKVW), (size_t)3 * 768 * 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_layer_numel(&c, SZ_GPT2_FCPROJB), (size_t)768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_numel(&c, SZ_GPT2_LNFB), (size_t)768);
    size_t rows, cols;
    CU_ASSERT(sz_gpt2_tensor_shape(&c, SZ_GPT2_FCPROJW, &rows, &cols));
    CU_ASSERT_EQUAL(rows, (size_t)768); /* (out, in) = (C, 4C) */
    CU_ASSERT_EQUAL(cols, (size_t)3072);
    CU_ASSERT(sz_gpt2_tensor_shape(&c, SZ_GPT2_FCW, &rows, &cols));
    CU_ASSERT_EQUAL(rows, (size_t)3072);
    CU_ASSERT_EQUAL(cols, (size_t)768);
    CU_ASSERT(!sz_gpt2_tensor_shape(&c, 99, &rows, &cols));

    /* offsets are the running sum of the table in order; the last tensor ends at the total */
    size_t expect = 0;
    for (int i = 0; i < SZ_GPT2_NUM_TENSORS; i++) {
        CU_ASSERT_EQUAL(sz_gpt2_tensor_offset(&c, i), expect);
        expect += sz_gpt2_tensor_numel(&c, i);
    }
    CU_ASSERT_EQUAL(expect, sz_gpt2_num_params(&c));
    CU_ASSERT_EQUAL(sz_gpt2_tensor_offset(&c, SZ_GPT2_WPE), (size_t)50304 * 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_offset(&c, SZ_GPT2_LNFB), (size_t)124475904 - 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_layer_offset(&c, SZ_GPT2_QKVW, 11),
                    sz_gpt2_tensor_offset(&c, SZ_GPT2_QKVW) + (size_t)11 * 3 * 768 * 768);
    CU_ASSERT_EQUAL(sz_gpt2_tensor_layer_offset(&c, SZ_GPT2_WTE, 5), (size_t)0);
}

static void test_presets_and_formula(void)
{
    /* closed form: Vp*C + maxT*C + L*(12C^2 + 13C) + 2C, checked against the table */
    static const struct { const char *spec; int L, H, C; } cases[] = {
        {"d2", 2, 4, 128}, {"d6", 6, 6, 384}, {"d12", 12, 12, 768}, {"3,4,64", 3, 4, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sz_gpt2_config c;
        char err[256] = "";
        CU_ASSERT_EQUAL_FATAL(sz_gpt2_config_from_string(&c, cases[i].spec, 256, 64, err, sizeof err), SZ_OK);
        CU_ASSERT_EQUAL(c.layers, cases[i].L);
        CU_ASSERT_EQUAL(c.heads, cases[i].H);
        CU_ASSERT_EQUAL(c.channels, cases[i].C);
        CU_ASSERT_EQUAL(c.vocab, 256);
        CU_ASSERT_EQUAL(c.padded_vocab, 256);
        CU_ASSERT_EQUAL(c.max_seq, 64);
        size_t C = (size_t)c.channels, L = (size_t)c.layers;
        size_t want = 256 * C + 64 * C + L * (12 * C * C + 13 * C) + 2 * C;
        CU_ASSERT_EQUAL(sz_gpt2_num_params(&c), want);
    }
}

static void test_bad_configs(void)
{
    static const struct { const char *spec; int vocab, max_seq; const char *word; } bad[] = {
        {"12,5,768", 50257, 1024, "divisible"},
        {"abc", 256, 64, "unknown model spec"},
        {"d13", 256, 64, "unknown model spec"},
        {"1,2", 256, 64, "L,H,C"},
        {"1,2,3,4", 256, 64, "L,H,C"},
        {"1,,8", 256, 64, "L,H,C"},
        {"1,2,8x", 256, 64, "L,H,C"},
        {"0,1,8", 256, 64, "positive"},
        {"1,-2,8", 256, 64, "positive"},
        {"d2", 0, 64, "vocab"},
        {"d2", 256, 0, "max_seq"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sz_gpt2_config c = {.layers = 777};
        char err[256] = "";
        sz_status st = sz_gpt2_config_from_string(&c, bad[i].spec, bad[i].vocab, bad[i].max_seq, err, sizeof err);
        EXPECT_ERR(st, SZ_ERR_INVALID, err, "", bad[i].word);
        CU_ASSERT_EQUAL(c.layers, 777); /* untouched on failure */
    }
    sz_gpt2_config c = tiny_config();
    char err[256] = "";
    c.padded_vocab = 5;
    EXPECT_ERR(sz_gpt2_config_validate(&c, err, sizeof err), SZ_ERR_INVALID, err, "Vp=5", "smaller");
    c = tiny_config();
    CU_ASSERT_EQUAL(sz_gpt2_config_validate(&c, NULL, 0), SZ_OK);
    c.layers = 1 << 30;
    c.channels = 1 << 30;
    c.heads = 1;
    EXPECT_ERR(sz_gpt2_config_validate(&c, err, sizeof err), SZ_ERR_INVALID, err, "", "too large");
}

/* ---- round trips -------------------------------------------------------------------------- */

static void test_checkpoint_round_trip(void)
{
    char path[256], tmp[300];
    tpath("model.bin", path, sizeof path);
    sz_gpt2_config c = tiny_config();
    size_t n = sz_gpt2_num_params(&c);
    CU_ASSERT_EQUAL(n, (size_t)1944);
    float *p = pattern_params(n);
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(sz_llmc_checkpoint_write(path, &c, p, n, err, sizeof err), SZ_OK);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT(!file_exists(tmp)); /* the temporary was renamed away */

    size_t len = 0;
    unsigned char *raw = slurp(path, &len);
    CU_ASSERT_EQUAL_FATAL(len, (size_t)SZ_LLMC_HEADER_BYTES + n * 4);
    int32_t hdr[8];
    memcpy(hdr, raw, sizeof hdr);
    CU_ASSERT_EQUAL(hdr[0], 20240326);
    CU_ASSERT_EQUAL(hdr[1], 3);
    CU_ASSERT_EQUAL(hdr[2], 4);   /* maxT */
    CU_ASSERT_EQUAL(hdr[3], 10);  /* V */
    CU_ASSERT_EQUAL(hdr[4], 1);   /* L */
    CU_ASSERT_EQUAL(hdr[5], 2);   /* NH */
    CU_ASSERT_EQUAL(hdr[6], 8);   /* C */
    CU_ASSERT_EQUAL(hdr[7], 128); /* Vp */
    free(raw);

    sz_gpt2_config got;
    float *q = NULL;
    size_t nq = 0;
    CU_ASSERT_EQUAL_FATAL(sz_llmc_checkpoint_read(path, &got, &q, &nq, err, sizeof err), SZ_OK);
    CU_ASSERT_EQUAL(nq, n);
    CU_ASSERT(memcmp(&got, &c, sizeof c) == 0);
    CU_ASSERT(memcmp(p, q, n * sizeof(float)) == 0); /* bitwise, NaN payloads included */
    CU_ASSERT_EQUAL(sz_llmc_check_config(path, &got, &c, err, sizeof err), SZ_OK);

    sz_gpt2_config h;
    CU_ASSERT_EQUAL(sz_llmc_checkpoint_read_header(path, &h, err, sizeof err), SZ_OK);
    CU_ASSERT(memcmp(&h, &c, sizeof c) == 0);

    /* overwrite an existing checkpoint with different contents */
    for (size_t i = 0; i < n; i++)
        p[i] = (float)i;
    CU_ASSERT_EQUAL(sz_llmc_checkpoint_write(path, &c, p, n, err, sizeof err), SZ_OK);
    free(q);
    q = NULL;
    CU_ASSERT_EQUAL_FATAL(sz_llmc_checkpoint_read(path, &got, &q, NULL, err, sizeof err), SZ_OK);
    CU_ASSERT(memcmp(p, q, n * sizeof(float)) == 0);
    free(q);
    free(p);
}

static void test_tokens_round_trip(void)
{
    char path[256], tmp[300];
    tpath("tokens.bin", path, sizeof path);
    enum { N = 5000 };
    uint16_t *t = malloc(N * sizeof *t);
    for (int i = 0; i < N; i++)
        t[i] = (uint16_t)(i * 40503u);
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(sz_llmc_tokens_write(path, t, N, err, sizeof err), SZ_OK);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT(!file_exists(tmp));

    size_t len = 0;
    unsigned char *raw = slurp(path, &len);
    CU_ASSERT_EQUAL(len, (size_t)SZ_LLMC_HEADER_BYTES + 2 * N);
    int32_t hdr[3];
    memcpy(hdr, raw, sizeof hdr);
    CU_ASSERT_EQUAL(hdr[0], 20240520);
    CU_ASSERT_EQUAL(hdr[1], 1);
    CU_ASSERT_EQUAL(hdr[2], N);
    free(raw);

    uint16_t *r = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(sz_llmc_tokens_read(path, 0, &r, &n, err, sizeof err), SZ_OK);
    CU_ASSERT_EQUAL(n, (size_t)N);
    CU_ASSERT(memcmp(r, t, N * sizeof *t) == 0);
    free(r);
    r = NULL;
    CU_ASSERT_EQUAL(sz_llmc_tokens_read(path, 65536, &r, &n, err, sizeof err), SZ_OK);
    free(r);
    r = NULL;

    /* byte-level tokens pass a vocab-256 check */
    for (int i = 0; i < N; i++)
        t[i] = (uint16_t)(i % 256);
    CU_ASSERT_EQUAL(sz_llmc_tokens_write(path, t, N, err, sizeof err), SZ_OK);
    CU_ASSERT_EQUAL(sz_llmc_tokens_read(path, 256, &r, &n, err, sizeof err), SZ_OK);
    CU_ASSERT(memcmp(r, t, N * sizeof *t) == 0);
    free(r);

    /* an empty token file is well-formed */
    r = (uint16_t *)t;
    CU_ASSERT_EQUAL(sz_llmc_tokens_write(path, NULL, 0, err, sizeof err), SZ_OK);
    CU_ASSERT_EQUAL(sz_llmc_tokens_read(path, 256, &r, &n, err, sizeof err), SZ_OK);
    CU_ASSERT_EQUAL(n, (size_t)0);
    CU_ASSERT_PTR_NULL(r);
    free(t);
}

/* ---- bad checkpoints ---------------------------------------------------------------------- */

/* Reads `path` as a checkpoint expecting failure; also checks that nothing was handed out. */
static sz_status read_ckpt_fail(const char *path, char *err, size_t errlen)
{
    sz_gpt2_config cfg = {.layers = 777};
    float *sentinel = (float *)&cfg;
    float *p = sentinel;
    size_t n = 4242;
    sz_status st = sz_llmc_checkpoint_read(path, &cfg, &p, &n, err, errlen);
    CU_ASSERT(st != SZ_OK);
    CU_ASSERT(p == sentinel);
    CU_ASSERT_EQUAL(n, (size_t)4242);
    CU_ASSERT_EQUAL(cfg.layers, 777);
    /* the header-only reader agrees */
    char err2[512] = "";
    CU_ASSERT_EQUAL(sz_llmc_checkpoint_read_header(path, &cfg, err2, sizeof err2), st);
    CU_ASSERT_STRING_EQUAL(err, err2);
    return st;
}

static void test_ckpt_missing_file(void)
{
    char path[256], err[512] = "";
    tpath("does_not_exist.bin", path, sizeof path);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_IO, err, "does_not_exist.bin", "cannot open");
    EXPECT_ERR(read_ckpt_fail(g_dir, err, sizeof err), SZ_ERR_IO, err, g_dir, "not a regular file");
}

static void test_ckpt_bad_magic(void)
{
    char src[256], path[256], err[512] = "";
    make_checkpoint(tpath("good.bin", src, sizeof src));
    size_t len;
    unsigned char *b = load_for_patch(src, &len);
    int32_t v = 12345;
    memcpy(b, &v, 4);
    write_raw(tpath("bad_magic.bin", path, sizeof path), NULL, 0, b, len);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "bad_magic.bin", "bad magic 12345");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "20240326"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an llm.c GPT-2 checkpoint"));

    /* a short text file is recognized as "not a checkpoint", not merely "truncated" */
    write_raw(tpath("notes.txt", path, sizeof path), NULL, 0, "hello, world\n", 13);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "notes.txt", "magic");

    /* a token file handed to the checkpoint reader */
    uint16_t toks[4] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(sz_llmc_tokens_write(tpath("tok_as_model.bin", path, sizeof path), toks, 4, err, sizeof err), SZ_OK);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "tok_as_model.bin", "token file");
    free(b);
}

static void test_ckpt_bad_version(void)
{
    char src[256], path[256], err[512] = "";
    make_checkpoint(tpath("good.bin", src, sizeof src));
    size_t len;
    unsigned char *b = load_for_patch(src, &len);
    int32_t v = 5;
    memcpy(b + 4, &v, 4);
    write_raw(tpath("bf16.bin", path, sizeof path), NULL, 0, b, len);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "bf16.bin", "version 5");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bf16"));
    v = 2;
    memcpy(b + 4, &v, 4);
    write_raw(tpath("v2.bin", path, sizeof path), NULL, 0, b, len);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "v2.bin", "version 2");
    free(b);
}

static void test_ckpt_truncated_header(void)
{
    char src[256], path[256], err[512] = "";
    make_checkpoint(tpath("good.bin", src, sizeof src));
    size_t len;
    unsigned char *b = load_for_patch(src, &len);
    write_raw(tpath("short_header.bin", path, sizeof path), NULL, 0, b, 100);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "short_header.bin", "truncated header");
    write_raw(tpath("empty.bin", path, sizeof path), NULL, 0, NULL, 0);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "empty.bin", "truncated header");
    free(b);
}

static void test_ckpt_truncated_body(void)
{
    char src[256], path[256], err[512] = "";
    make_checkpoint(tpath("good.bin", src, sizeof src));
    size_t len;
    unsigned char *b = load_for_patch(src, &len);
    write_raw(tpath("short_body.bin", path, sizeof path), NULL, 0, b, len - 4);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "short_body.bin", "truncated");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "1944 parameters (7776 bytes) but 7772 bytes follow the header"));
    write_raw(tpath("header_only.bin", path, sizeof path), NULL, 0, b, SZ_LLMC_HEADER_BYTES);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "header_only.bin", "truncated");
    free(b);
}

static void test_ckpt_trailing_bytes(void)
{
    char src[256], path[256], err[512] = "";
    make_checkpoint(tpath("good.bin", src, sizeof src));
    size_t len;
    unsigned char *b = load_for_patch(src, &len);
    unsigned char *big = calloc(len + 3, 1);
    memcpy(big, b, len);
    write_raw(tpath("trailing.bin", path, sizeof path), NULL, 0, big, len + 3);
    EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, "trailing.bin", "trailing bytes");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "3 extra"));
    free(big);
    free(b);
}

static void test_ckpt_bad_header_fields(void)
{
    char src[256], path[256], err[512] = "";
    make_checkpoint(tpath("good.bin", src, sizeof src));
    size_t len;
    unsigned char *b = load_for_patch(src, &len);
    int32_t hdr[SZ_LLMC_HEADER_INTS];
    static const struct { int field, value; const char *file, *word; } bad[] = {
        {5, 3, "heads3.bin", "divisible"},      /* C=8, NH=3 */
        {7, 8, "vp_small.bin", "smaller"},      /* Vp=8 < V=10 */
        {4, -1, "neg_layers.bin", "positive"},  /* L=-1 */
        {6, 0, "zero_c.bin", "positive"},       /* C=0 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(hdr, b, sizeof hdr);
        hdr[bad[i].field] = bad[i].value;
        write_raw(tpath(bad[i].file, path, sizeof path), hdr, sizeof hdr, b + sizeof hdr, len - sizeof hdr);
        EXPECT_ERR(read_ckpt_fail(path, err, sizeof err), SZ_ERR_FORMAT, err, bad[i].file, bad[i].word);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad header"));
    }
    free(b);
}

static void test_ckpt_config_mismatch(void)
{
    char err[512] = "";
    sz_gpt2_config file = d12_config(), want;
    CU_ASSERT_EQUAL(sz_gpt2_config_from_string(&want, "d12", 256, 1024, NULL, 0), SZ_OK);
    EXPECT_ERR(sz_llmc_check_config("gpt2_124M.bin", &file, &want, err, sizeof err), SZ_ERR_FORMAT, err,
               "gpt2_124M.bin", "mismatch");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "vocab V=50257 in the file but 256 expected"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "padded vocab Vp=50304 in the file but 256 expected"));
    CU_ASSERT_PTR_NULL(strstr(err, "layers L=")); /* only differing fields are listed */

    CU_ASSERT_EQUAL(sz_gpt2_config_from_string(&want, "d6", 50257, 1024, NULL, 0), SZ_OK);
    EXPECT_ERR(sz_llmc_check_config("gpt2_124M.bin", &file, &want, err, sizeof err), SZ_ERR_FORMAT, err,
               "gpt2_124M.bin", "layers L=12 in the file but 6 expected");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "channels C=768 in the file but 384 expected"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected: L=6 H=6 C=384"));
    CU_ASSERT_EQUAL(sz_llmc_check_config("x.bin", &file, &file, err, sizeof err), SZ_OK);
}

/* ---- bad token files ---------------------------------------------------------------------- */

static sz_status read_tok_fail(const char *path, int vocab, char *err, size_t errlen)
{
    uint16_t sentinel = 0;
    uint16_t *t = &sentinel;
    size_t n = 4242;
    sz_status st = sz_llmc_tokens_read(path, vocab, &t, &n, err, errlen);
    CU_ASSERT(st != SZ_OK);
    CU_ASSERT(t == &sentinel);
    CU_ASSERT_EQUAL(n, (size_t)4242);
    return st;
}

static void tok_header(int32_t hdr[SZ_LLMC_HEADER_INTS], int magic, int version, int count)
{
    memset(hdr, 0, SZ_LLMC_HEADER_BYTES);
    hdr[0] = magic;
    hdr[1] = version;
    hdr[2] = count;
}

static void test_tokens_bad_files(void)
{
    char path[256], err[512] = "";
    int32_t hdr[SZ_LLMC_HEADER_INTS];
    uint16_t body[1000];
    for (int i = 0; i < 1000; i++)
        body[i] = (uint16_t)(i % 200);

    tpath("missing_train.bin", path, sizeof path);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_IO, err, "missing_train.bin", "cannot open");

    tok_header(hdr, 12345, 1, 1000);
    write_raw(tpath("tok_magic.bin", path, sizeof path), hdr, sizeof hdr, body, sizeof body);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "tok_magic.bin", "bad magic 12345");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "20240520"));

    tok_header(hdr, 20240520, 2, 1000);
    write_raw(tpath("tok_version.bin", path, sizeof path), hdr, sizeof hdr, body, sizeof body);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "tok_version.bin", "version 2");

    tok_header(hdr, 20240520, 1, 1000);
    write_raw(tpath("tok_short_header.bin", path, sizeof path), hdr, 12, NULL, 0);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "tok_short_header.bin",
               "truncated header");

    write_raw(tpath("train.bin", path, sizeof path), hdr, sizeof hdr, body, 1500);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "train.bin", "truncated");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "truncated: header says 1000 tokens (2000 bytes) but 1500 bytes "
                                       "follow the header"));

    tok_header(hdr, 20240520, 1, 999);
    write_raw(tpath("tok_trailing.bin", path, sizeof path), hdr, sizeof hdr, body, sizeof body);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "tok_trailing.bin",
               "trailing bytes");

    tok_header(hdr, 20240520, 1, -5);
    write_raw(tpath("tok_negative.bin", path, sizeof path), hdr, sizeof hdr, NULL, 0);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "tok_negative.bin", "negative");

    tok_header(hdr, 20240520, 1, 1000);
    body[617] = 300;
    write_raw(tpath("tok_range.bin", path, sizeof path), hdr, sizeof hdr, body, sizeof body);
    EXPECT_ERR(read_tok_fail(path, 256, err, sizeof err), SZ_ERR_FORMAT, err, "tok_range.bin", "out of range");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "token 300 at position 617"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "vocab 256"));
    /* without a vocab (or with a large enough one) the same file is fine */
    uint16_t *t = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(sz_llmc_tokens_read(path, 0, &t, &n, err, sizeof err), SZ_OK);
    free(t);
    t = NULL;
    CU_ASSERT_EQUAL(sz_llmc_tokens_read(path, 301, &t, &n, err, sizeof err), SZ_OK);
    free(t);

    /* a checkpoint handed to the token reader */
    char ck[256];
    make_checkpoint(tpath("model_as_tokens.bin", ck, sizeof ck));
    EXPECT_ERR(read_tok_fail(ck, 256, err, sizeof err), SZ_ERR_FORMAT, err, "model_as_tokens.bin", "checkpoint");
}

/* ---- writer safety ------------------------------------------------------------------------ */

static void test_write_failure_keeps_old_file(void)
{
    char path[256], tmp[300], err[512] = "";
    tpath("keep.bin", path, sizeof path);
    make_checkpoint(path);
    size_t len0, len1;
    unsigned char *before = slurp(path, &len0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);

    sz_gpt2_config c = tiny_config();
    size_t n = sz_gpt2_num_params(&c);
    float *zeros = calloc(n, sizeof(float));

    /* the temporary cannot be created (a directory is in the way): I/O error, old file intact */
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT_EQUAL_FATAL(mkdir(tmp, 0700), 0);
    EXPECT_ERR(sz_llmc_checkpoint_write(path, &c, zeros, n, err, sizeof err), SZ_ERR_IO, err, "keep.bin", "temporary");
    CU_ASSERT(file_exists(tmp)); /* not ours: left alone */
    rmdir(tmp);
    unsigned char *after = slurp(path, &len1);
    CU_ASSERT(len0 == len1 && memcmp(before, after, len0) == 0);
    free(after);

    /* bad arguments: nothing written */
    EXPECT_ERR(sz_llmc_checkpoint_write(path, &c, zeros, n - 1, err, sizeof err), SZ_ERR_INVALID, err,
               "keep.bin", "parameters");
    sz_gpt2_config bad = c;
    bad.heads = 3;
    EXPECT_ERR(sz_llmc_checkpoint_write(path, &bad, zeros, n, err, sizeof err), SZ_ERR_INVALID, err,
               "keep.bin", "divisible");
    after = slurp(path, &len1);
    CU_ASSERT(len0 == len1 && memcmp(before, after, len0) == 0);
    CU_ASSERT(!file_exists(tmp));

    /* a directory that does not exist */
    char nodir[256];
    tpath("no/such/dir/model.bin", nodir, sizeof nodir);
    EXPECT_ERR(sz_llmc_checkpoint_write(nodir, &c, zeros, n, err, sizeof err), SZ_ERR_IO, err, "model.bin",
               "cannot create");
    uint16_t tok = 1;
    EXPECT_ERR(sz_llmc_tokens_write(nodir, &tok, 1, err, sizeof err), SZ_ERR_IO, err, "model.bin", "cannot create");

    free(after);
    free(before);
    free(zeros);
}

/* The piecewise writer: pieces in any order give the same bytes as one write; a missing piece or
 * one outside the body is refused, the temporary removed and the old file kept. */
static void test_writer_pieces(void)
{
    char one[256], pieces[256], tmp[300], err[512] = "";
    tpath("one.bin", one, sizeof one);
    tpath("pieces.bin", pieces, sizeof pieces);
    sz_gpt2_config c = tiny_config();
    size_t n = sz_gpt2_num_params(&c), len0, len1;
    float *p = pattern_params(n);
    CU_ASSERT_EQUAL_FATAL(sz_llmc_checkpoint_write(one, &c, p, n, err, sizeof err), SZ_OK);
    sz_llmc_writer *w = NULL;
    CU_ASSERT_EQUAL_FATAL(sz_llmc_writer_open(&w, pieces, &c, err, sizeof err), SZ_OK);
    for (size_t k = 0; k < n; k += 100) { /* backwards, in pieces of 100 */
        size_t at = ((n - 1) / 100 - k / 100) * 100, cnt = n - at < 100 ? n - at : 100;
        CU_ASSERT_EQUAL(sz_llmc_writer_put(w, at, p + at, cnt, err, sizeof err), SZ_OK);
    }
    CU_ASSERT_EQUAL(sz_llmc_writer_close(w, err, sizeof err), SZ_OK);
    unsigned char *a = slurp(one, &len0), *b = slurp(pieces, &len1);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT(len0 == len1 && memcmp(a, b, len0) == 0);
    free(a);

    /* a piece outside the body; then a close with a piece missing: refused, old file kept */
    CU_ASSERT_EQUAL_FATAL(sz_llmc_writer_open(&w, pieces, &c, err, sizeof err), SZ_OK);
    EXPECT_ERR(sz_llmc_writer_put(w, n - 10, p, 11, err, sizeof err), SZ_ERR_INVALID, err, "pieces.bin", "outside");
    CU_ASSERT_EQUAL(sz_llmc_writer_put(w, 0, p, n - 1, err, sizeof err), SZ_OK);
    EXPECT_ERR(sz_llmc_writer_close(w, err, sizeof err), SZ_ERR_INVALID, err, "pieces.bin", "were given");
    snprintf(tmp, sizeof tmp, "%s.tmp", pieces);
    CU_ASSERT(!file_exists(tmp));
    a = slurp(pieces, &len0);
    CU_ASSERT(a && len0 == len1 && memcmp(a, b, len0) == 0);
    /* abort: the temporary goes, the file stays */
    CU_ASSERT_EQUAL_FATAL(sz_llmc_writer_open(&w, pieces, &c, err, sizeof err), SZ_OK);
    CU_ASSERT(file_exists(tmp));
    sz_llmc_writer_abort(w);
    CU_ASSERT(!file_exists(tmp));
    free(a);
    free(b);
    free(p);
}

/* A writer killed (SIGKILL) after every parameter was put but before close: the temporary it
 * leaves has the full size, and every reader refuses it as unfinished (its header is written
 * last); the file it was to replace is intact. */
static void test_killed_writer_leaves_refused_tmp(void)
{
    char path[256], tmp[300], err[512] = "";
    tpath("killed.bin", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    make_checkpoint(path);
    size_t len0, len1;
    unsigned char *before = slurp(path, &len0);
    sz_gpt2_config c = tiny_config();
    size_t n = sz_gpt2_num_params(&c);
    float *p = pattern_params(n);
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        sz_llmc_writer *w = NULL;
        if (sz_llmc_writer_open(&w, path, &c, NULL, 0) != SZ_OK || sz_llmc_writer_put(w, 0, p, n, NULL, 0) != SZ_OK)
            _exit(1);
        raise(SIGKILL); /* as a kill -9 during --save */
        _exit(2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CU_ASSERT_FATAL(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    struct stat st;
    CU_ASSERT_FATAL(stat(tmp, &st) == 0);
    CU_ASSERT_EQUAL(st.st_size, SZ_LLMC_HEADER_BYTES + (off_t)(n * sizeof(float))); /* full size, unfinished */
    sz_gpt2_config got;
    EXPECT_ERR(sz_llmc_checkpoint_read_header(tmp, &got, err, sizeof err), SZ_ERR_FORMAT, err, "killed.bin.tmp",
               "an unfinished file");
    sz_llmc_reader *r = NULL;
    EXPECT_ERR(sz_llmc_reader_open(&r, tmp, &got, err, sizeof err), SZ_ERR_FORMAT, err, "killed.bin.tmp",
               "header is written last");
    unsigned char *after = slurp(path, &len1);
    CU_ASSERT(after && len0 == len1 && memcmp(before, after, len0) == 0);
    /* the next write replaces the leftover and completes */
    CU_ASSERT_EQUAL(sz_llmc_checkpoint_write(path, &c, p, n, err, sizeof err), SZ_OK);
    CU_ASSERT(!file_exists(tmp));
    CU_ASSERT_EQUAL(sz_llmc_checkpoint_read_header(path, &got, err, sizeof err), SZ_OK);
    free(before);
    free(after);
    free(p);
}

/* Only a regular file is ever replaced: a FIFO or a directory at the path is refused naming what
 * it is, and stays what it was; a FIFO in the temporary's place is not ours and is left alone. */
static void test_write_refuses_non_regular(void)
{
    char fifo[256], d[256], path[256], tmp[300], err[512] = "";
    sz_gpt2_config c = tiny_config();
    size_t n = sz_gpt2_num_params(&c);
    float *p = pattern_params(n);
    tpath("out.fifo", fifo, sizeof fifo);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    EXPECT_ERR(sz_llmc_checkpoint_write(fifo, &c, p, n, err, sizeof err), SZ_ERR_IO, err, "out.fifo",
               "it is a FIFO, and only a regular file is ever replaced");
    sz_llmc_writer *w = NULL;
    EXPECT_ERR(sz_llmc_writer_open(&w, fifo, &c, err, sizeof err), SZ_ERR_IO, err, "out.fifo", "it is a FIFO");
    uint16_t tok = 1;
    EXPECT_ERR(sz_llmc_tokens_write(fifo, &tok, 1, err, sizeof err), SZ_ERR_IO, err, "out.fifo", "it is a FIFO");
    struct stat st;
    CU_ASSERT(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    snprintf(tmp, sizeof tmp, "%s.tmp", fifo);
    CU_ASSERT(!file_exists(tmp));
    tpath("out.dir", d, sizeof d);
    CU_ASSERT_EQUAL_FATAL(mkdir(d, 0700), 0);
    EXPECT_ERR(sz_llmc_checkpoint_write(d, &c, p, n, err, sizeof err), SZ_ERR_IO, err, "out.dir", "it is a directory");
    CU_ASSERT(stat(d, &st) == 0 && S_ISDIR(st.st_mode));
    rmdir(d);
    /* a FIFO where the temporary goes: refused without opening it (which would block) */
    tpath("m2.bin", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CU_ASSERT_EQUAL_FATAL(mkfifo(tmp, 0600), 0);
    EXPECT_ERR(sz_llmc_checkpoint_write(path, &c, p, n, err, sizeof err), SZ_ERR_IO, err, "m2.bin.tmp",
               "it exists and is a FIFO");
    CU_ASSERT(stat(tmp, &st) == 0 && S_ISFIFO(st.st_mode));
    unlink(tmp);
    unlink(fifo);
    free(p);
}

/* ---- driver ------------------------------------------------------------------------------- */

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite spec = CU_add_suite("gpt2_spec", NULL, NULL);
    CU_pSuite fmt = CU_add_suite("llmc_format", suite_init, suite_clean);
    if (!spec || !fmt) {
        CU_cleanup_registry();
        return 2;
    }
    int ok = CU_add_test(spec, "table order, decay flags, init kinds", test_table_order_and_flags) &&
             CU_add_test(spec, "padded vocab rule", test_padded_vocab) &&
             CU_add_test(spec, "d12: 124,475,904 params, offsets", test_d12_sizes_and_offsets) &&
             CU_add_test(spec, "presets vs closed form", test_presets_and_formula) &&
             CU_add_test(spec, "bad configs", test_bad_configs) &&
             CU_add_test(fmt, "checkpoint round trip (bitwise)", test_checkpoint_round_trip) &&
             CU_add_test(fmt, "token file round trip", test_tokens_round_trip) &&
             CU_add_test(fmt, "checkpoint: missing file", test_ckpt_missing_file) &&
             CU_add_test(fmt, "checkpoint: bad magic", test_ckpt_bad_magic) &&
             CU_add_test(fmt, "checkpoint: bad version", test_ckpt_bad_version) &&
             CU_add_test(fmt, "checkpoint: truncated header", test_ckpt_truncated_header) &&
             CU_add_test(fmt, "checkpoint: truncated body", test_ckpt_truncated_body) &&
             CU_add_test(fmt, "checkpoint: trailing bytes", test_ckpt_trailing_bytes) &&
             CU_add_test(fmt, "checkpoint: bad header fields", test_ckpt_bad_header_fields) &&
             CU_add_test(fmt, "checkpoint: config mismatch", test_ckpt_config_mismatch) &&
             CU_add_test(fmt, "tokens: every bad file", test_tokens_bad_files) &&
             CU_add_test(fmt, "writes: failure keeps the old file", test_write_failure_keeps_old_file) &&
             CU_add_test(fmt, "writer: pieces in any order, missing or stray pieces", test_writer_pieces) &&
             CU_add_test(fmt, "writer killed before close: its temporary is refused", test_killed_writer_leaves_refused_tmp) &&
             CU_add_test(fmt, "writes: only a regular file is replaced", test_write_refuses_non_regular);
    if (!ok) {
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_NORMAL);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
